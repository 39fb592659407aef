// ONNX model files read without protobuf or ONNX Runtime: the weights (graph initializers and Constant-node
// tensors, in subgraphs too) as named tensors, plus the model's metadata for `sotto info`. Field numbers
// follow onnx/onnx.proto (ModelProto, GraphProto, NodeProto, AttributeProto, TensorProto, ValueInfoProto).
//
// Where the bytes are: a tensor stored as raw_data is viewed in place in the file (zero copy). Its pointer is
// wherever protobuf put it, so it is NOT aligned to the element size: read it with memcpy (or an unaligned
// load), never by casting to float*. A tensor stored in the typed fields (float_data, int32_data, ...) is
// decoded into a buffer owned by the OnnxModel, little-endian in the sotto DType (e.g. FLOAT16 values from
// int32_data narrowed to their 16 bits). The OnnxModel points into the file's bytes: keep them alive.
//
// Tensor naming (ONNX names may repeat across subgraphs: Silero VAD keeps one copy of its weights per sample
// rate, in the two branches of an If node):
//   name        the value name the graph uses: an initializer's TensorProto.name, or a Constant node's
//               output[0] (falls back to the TensorProto.name when the node has no output).
//   tensor_name the TensorProto.name as stored (for Silero "encoder.0.reparam_conv.weight"; may repeat).
//   scope       "" in the main graph. In a subgraph, one step per enclosing graph-valued attribute, outermost
//               first, joined by '/':  <node>.<attribute>  or  <node>.<attribute>[i]  for a GRAPHS list,
//               where <node> is the node's name, or "<op_type>#<index in its graph>" when it has none.
//   unique_name name when scope is empty, else scope + "/" + name. Should two tensors still collide (a file
//               that breaks ONNX's unique-name rule), the later ones get "#2", "#3", ... appended.
// Example (Silero VAD v5): scope "If_0.then_branch", name
// "If_0_then_branch__Inline_0__encoder.0.reparam_conv.weight", tensor_name "encoder.0.reparam_conv.weight",
// unique_name "If_0.then_branch/If_0_then_branch__Inline_0__encoder.0.reparam_conv.weight". In Silero the
// If's condition is sr == 16000 (Constant_0_output), so then_branch holds the 16 kHz weights.
//
// What is read: ModelProto metadata, the main graph's inputs/outputs, every node (op type, inputs, outputs),
// initializers and Constant nodes (value, value_float(s), value_int(s)) in the main graph and every subgraph
// reached through a GRAPH or GRAPHS attribute. Not read: FunctionProto bodies (ModelProto.functions),
// training_info, sparse tensors and string tensors (listed in `unsupported`). Limits: messages nest at most
// pb::kMaxMessageDepth (64) deep, a tensor has at most 64 dims.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/dtype.h"
#include "core/error.h"

namespace sotto {

// onnx.proto TensorProto.DataType values.
enum class OnnxDataType : int32_t {
  Undefined = 0,
  Float = 1,
  Uint8 = 2,
  Int8 = 3,
  Uint16 = 4,
  Int16 = 5,
  Int32 = 6,
  Int64 = 7,
  String = 8,
  Bool = 9,
  Float16 = 10,
  Double = 11,
  Uint32 = 12,
  Uint64 = 13,
  Complex64 = 14,
  Complex128 = 15,
  Bfloat16 = 16,
};

// "float32", "int64", ... for a TensorProto.DataType number; "type 17" style for ones without a name here.
std::string onnx_data_type_name(int32_t data_type);
// The sotto DType for an ONNX data type, or an error naming the numeric type.
Result<DType> dtype_from_onnx(int32_t data_type);

enum class OnnxTensorSource : uint8_t { Initializer, Constant };

struct OnnxTensor {
  std::string unique_name;  // see the naming rule at the top of this file
  std::string name;
  std::string tensor_name;
  std::string scope;
  OnnxTensorSource source = OnnxTensorSource::Initializer;
  DType dtype = DType::F32;
  int32_t onnx_data_type = 0;
  std::vector<int64_t> shape;  // outermost first, as ONNX stores dims; empty for a scalar
  uint64_t n_elements = 0;
  // raw_data in the file (zero copy, unaligned) when `from_file`; otherwise `decoded` holds the values.
  bool from_file = true;
  const uint8_t* file_data = nullptr;
  uint64_t file_offset = 0;  // raw_data's offset in the file; for decoded tensors, the TensorProto's offset
  uint64_t n_bytes = 0;      // n_elements * element size, exactly
  std::vector<uint8_t> decoded;
  // Data kept in another file (data_location EXTERNAL): that file's name as the model gives it; file_data then
  // points into that file's bytes and file_offset is the offset there.
  std::string external_location;

  std::span<const uint8_t> bytes() const {
    return from_file ? std::span<const uint8_t>(file_data, static_cast<size_t>(n_bytes))
                     : std::span<const uint8_t>(decoded);
  }
};

// A tensor found but not exposed: a data type sotto has no DType for (STRING, COMPLEX64, FLOAT8*, INT4 ...)
// or a Constant of a kind we do not read (value_string(s), sparse_value).
struct OnnxUnsupportedTensor {
  std::string unique_name;
  int32_t onnx_data_type = 0;  // 0 when not a TensorProto
  std::string reason;
};

struct OnnxDim {
  int64_t value = -1;  // -1 when symbolic or unknown
  std::string param;   // dim_param, e.g. "batch"
};

struct OnnxValueInfo {
  std::string name;
  int32_t elem_type = 0;  // TensorProto.DataType; 0 for non-tensor types
  bool has_shape = false;
  std::vector<OnnxDim> dims;
};

struct OnnxOpset {
  std::string domain;  // "" is the default domain ai.onnx
  int64_t version = 0;
};

struct OnnxOpCount {
  std::string op_type;  // "domain:op" when the node's domain is not the default
  uint64_t count = 0;
};

// A node of the graph or of a subgraph: what a model needs to tell which anonymous initializer feeds which
// layer (its attributes are not kept).
struct OnnxNode {
  std::string name, op_type, domain;
  std::string scope;  // as OnnxTensor::scope
  std::vector<std::string> inputs, outputs;
};

struct OnnxModel {
  int64_t ir_version = 0;
  std::string producer_name, producer_version, domain, doc_string;
  int64_t model_version = 0;
  std::vector<OnnxOpset> opset_imports;
  std::vector<std::pair<std::string, std::string>> metadata_props;

  std::string graph_name;
  std::vector<OnnxValueInfo> inputs, outputs;
  uint64_t node_count = 0;        // nodes of the main graph
  uint64_t total_node_count = 0;  // including every subgraph
  uint64_t subgraph_count = 0;
  std::vector<OnnxOpCount> op_counts;  // over all graphs, sorted by op_type

  std::vector<OnnxTensor> tensors;  // in file order (depth first through subgraphs)
  std::vector<OnnxNode> nodes;      // depth first: a node, then the nodes of its subgraphs
  std::vector<OnnxUnsupportedTensor> unsupported;

  // By unique_name; failing that by name, then by tensor_name, when exactly one tensor has it.
  const OnnxTensor* find(std::string_view name) const;
  // Every tensor whose unique_name, name or tensor_name equals `name`, in file order.
  std::vector<const OnnxTensor*> find_all(std::string_view name) const;
  // The tensor called `name` (or tensor_name) directly in graph `scope`, e.g. ("If_0.then_branch",
  // "encoder.0.reparam_conv.weight").
  const OnnxTensor* find_in_scope(std::string_view scope, std::string_view name) const;

  std::vector<uint32_t> by_unique_name;  // indices into tensors, sorted by unique_name (built by parse_onnx)
};

// Parses a whole .onnx file. Fails with one line naming the message, field and byte offset on malformed
// input; tensors with external data fail with a message naming the tensor.
Result<OnnxModel> parse_onnx(std::span<const uint8_t> file);

// The bytes of a file next to the model, by the relative name an external_data "location" gives (e.g.
// "model.onnx_data"). Called once per tensor: cache if reading is costly. The bytes must outlive the model.
using OnnxReadExternal = std::function<Result<std::span<const uint8_t>>(std::string_view location)>;
// The same, with external data (ONNX's large-model form: model.onnx + model.onnx_data) read through
// `read_external`: each tensor's location must be a plain relative name (no "..", no absolute path), and its
// offset + length must lie inside that file and match the tensor's dims and type.
Result<OnnxModel> parse_onnx(std::span<const uint8_t> file, const OnnxReadExternal& read_external);

}  // namespace sotto
