// Shared between onnx.cpp (the graph walk) and onnx_tensor.cpp (TensorProto decoding). Not a public API.
#pragma once

#include <span>
#include <string>
#include <vector>

#include "io/onnx.h"
#include "io/protobuf.h"

namespace sotto::onnx_detail {

// A TensorProto's fields as found in the file, before any size check. Spans point into the file.
struct TensorProtoView {
  uint64_t offset = 0;  // of the TensorProto's first byte
  std::string name;
  int32_t data_type = 0;
  std::vector<int64_t> dims;
  bool has_raw = false;
  std::span<const uint8_t> raw;
  // Each repeated numeric field as its encoded parts (packed payloads or single unpacked values).
  std::vector<std::span<const uint8_t>> float_data, int32_data, int64_data, double_data, uint64_data;
  bool has_string_data = false, has_segment = false;
  bool external = false;              // data_location = EXTERNAL
  bool has_external_entries = false;  // external_data key/value entries present
  // external_data's "location", "offset" and "length" values as stored (empty when absent).
  std::string external_location, external_offset, external_length;
};

Result<TensorProtoView> read_tensor_proto(pb::Reader r, int depth);

// Checks the view against its dims and type and fills `out` (whose unique_name is already set, for messages).
// Fails for segmented data, a data type without a sotto DType, or a size mismatch; for external data unless
// `read_external` is given (then the bytes are found through it and bounds-checked).
Status build_tensor(const TensorProtoView& t, std::span<const uint8_t> file, OnnxTensor& out,
                    const OnnxReadExternal* read_external = nullptr);

// Bytes per element of the plain DTypes an ONNX tensor can have.
uint32_t onnx_elem_bytes(DType t);

// Whether `data_type` maps to a sotto DType (others are listed as unsupported rather than failing the parse).
bool onnx_data_type_supported(int32_t data_type);

}  // namespace sotto::onnx_detail
