// ONNX Runtime's own model format (".ort": a flatbuffer, file identifier "ORTM" at bytes 4..7) read without
// ONNX Runtime or the flatbuffers library: the weights (graph initializers, in subgraphs too) as named tensors
// viewed in place in the file, and the node list (op type, inputs, outputs) a model needs to tell which
// anonymous initializer feeds which layer. Field slots follow onnxruntime/core/flatbuffers/schema/ort.fbs:
//   InferenceSession { ort_version: string (0), model: Model (1), kernel_type_str_resolver (3) }
//   Model   { ir_version: long (0), opset_import (1), producer_name (2), producer_version (3), domain (4),
//             model_version (5), doc_string (6), graph: Graph (7), ... }
//   Graph   { initializers: [Tensor] (0), node_args (1), nodes: [Node] (2), max_node_index (3),
//             node_edges (4), inputs: [string] (5), outputs: [string] (6), sparse_initializers (7), ... }
//   Node    { name (0), doc_string (1), domain (2), since_version (3), index (4), op_type (5), type (6),
//             execution_provider_type (7), inputs: [string] (8), outputs: [string] (9),
//             attributes: [Attribute] (10), ... }
//   Attribute { name (0), doc_string (1), type: int (2), f (3), i (4), s (5), t: Tensor (6), g: Graph (7),
//             floats (8), ints (9), strings (10), tensors (11), graphs: [Graph] (12) }
//   Tensor  { name (0), doc_string (1), dims: [long] (2), data_type: int (3), raw_data: [ubyte] (4),
//             string_data (5), external_data_offset: long = -1 (6) }
// Flatbuffer layout: a table starts with an int32 (table position minus its vtable's position); the vtable is
// uint16 [vtable bytes, table bytes, field 0 offset, field 1 offset, ...] (0: field absent). Strings, vectors
// and sub-tables are uint32 offsets forward from the field itself; a vector is a uint32 count then its items.
//
// Every offset, count and length is checked against the file before use, so a truncated or hostile file gives
// one line naming the place and the byte, never a read past the end. Subgraphs (If branches) nest at most
// kMaxGraphDepth deep, and the names and items a file can make us copy are bounded by its size (a hostile file
// can point many entries at one string or table).
//
// Raw data is NOT aligned to its element size in the file: read it with memcpy (Context::from_bytes does).
// Tensors whose data lives in an external file (external_data_offset >= 0) or whose type sotto has no DType for
// (strings, complex) are listed in `unsupported`, not in `tensors`.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/dtype.h"
#include "core/error.h"

namespace sotto {

// Bytes 4..7 are "ORTM".
bool is_ort(std::span<const uint8_t> bytes);

struct OrtTensor {
  std::string name;
  std::string scope;  // "" in the main graph; "<node>.<attribute>" per enclosing subgraph, joined by '/'
  DType dtype = DType::F32;
  int32_t data_type = 0;       // ONNX TensorProto.DataType
  std::vector<int64_t> shape;  // outermost first; empty for a scalar
  uint64_t n_elements = 0;
  uint64_t file_offset = 0;  // raw data's first byte in the file
  uint64_t n_bytes = 0;      // n_elements * element size, exactly
  const uint8_t* data = nullptr;

  std::span<const uint8_t> bytes() const { return {data, static_cast<size_t>(n_bytes)}; }
};

struct OrtNode {
  std::string name, op_type, domain;
  std::string scope;  // as OrtTensor::scope
  std::vector<std::string> inputs, outputs;
};

struct OrtUnsupportedTensor {
  std::string name;
  std::string reason;
};

struct OrtModel {
  std::string ort_version;  // the format version ONNX Runtime wrote ("6")
  int64_t ir_version = 0;
  std::string producer_name, producer_version;
  std::vector<std::string> inputs, outputs;  // the main graph's
  std::vector<OrtTensor> tensors;            // depth first, main graph first
  std::vector<OrtNode> nodes;                // depth first: a node, then the nodes of its subgraphs
  std::vector<OrtUnsupportedTensor> unsupported;
  uint64_t subgraph_count = 0;

  // The tensor called `name` (the first one in file order: initializers of an If's branches may share
  // names with the main graph's only when the file breaks ONNX's rules), or nullptr.
  const OrtTensor* find(std::string_view name) const;
};

inline constexpr int kOrtMaxGraphDepth = 16;

// Parses a whole .ort file; the OrtModel points into `file`: keep it alive.
Result<OrtModel> parse_ort(std::span<const uint8_t> file);

}  // namespace sotto
