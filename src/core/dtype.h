// Element types of tensors in model files, with block layouts byte-identical to GGUF's (ggml's) so quantized
// weights are used straight from the file. A quantized type packs `block_elems` values into `block_bytes`.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

#include "core/error.h"

namespace sotto {

enum class DType : uint8_t {
  F32,
  F16,
  BF16,
  F64,  // floating point
  I8,
  U8,
  I16,
  U16,
  I32,
  U32,
  I64,
  U64,
  Bool,  // integers (ONNX / safetensors)
  Q4_0,
  Q4_1,
  Q5_0,
  Q5_1,
  Q8_0,
  Q8_1,  // ggml 32-element blocks
  Q2_K,
  Q3_K,
  Q4_K,
  Q5_K,
  Q6_K,
  Q8_K,  // ggml 256-element super-blocks
  Count
};

struct DTypeInfo {
  std::string_view name;  // "q4_K" style, as ggml spells it
  uint32_t block_elems;   // 1 for plain types
  uint32_t block_bytes;   // bytes of one block (element size for plain types)
  bool quantized;
};

const DTypeInfo& dtype_info(DType t);
inline std::string_view dtype_name(DType t) {
  return dtype_info(t).name;
}

// Bytes that `n_elems` consecutive elements occupy; nullopt when n_elems is not a whole number of blocks
// or the size overflows 64 bits.
std::optional<uint64_t> dtype_bytes(DType t, uint64_t n_elems);

// ggml's numeric type ids (GGML_TYPE_*) as stored in GGUF tensor tables. Unknown or unsupported ids fail
// with a message naming the id.
Result<DType> dtype_from_ggml(uint32_t ggml_type);
uint32_t dtype_to_ggml(DType t);  // inverse, for types that have a ggml id; kNoGgmlType for the others
inline constexpr uint32_t kNoGgmlType = 0xffffffffu;

// Whether dequantize_row_ref() handles this type.
bool dtype_can_dequantize(DType t);

// Scalar reference: decode n consecutive elements (n a multiple of block_elems) starting at `src` to f32.
// This is the obviously-right version every optimized kernel is tested against.
void dequantize_row_ref(DType t, const void* src, float* dst, int64_t n);

}  // namespace sotto
