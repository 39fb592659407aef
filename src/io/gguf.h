// GGUF (ggml's model file, versions 2 and 3): metadata key/values, a tensor table, then aligned tensor data.
// The reader is zero-copy: strings are views into the file's bytes, numeric arrays stay as raw little-endian
// bytes in the file, and tensor data pointers point into the file. The caller keeps the bytes alive
// (MappedFile). Layout (all little-endian): "GGUF", u32 version, u64 n_tensors, u64 n_kv, n_kv × (string key,
// u32 type, value), n_tensors × (string name, u32 n_dims, u64 ne[n_dims], u32 ggml_type, u64 offset), padding
// to `general.alignment` (default 32), tensor data. A string is u64 length + bytes (no terminator).
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "core/error.h"
#include "core/tensor.h"

namespace sotto {

// GGUF metadata value types, numbered as in the file.
enum class GgufType : uint32_t {
  U8 = 0,
  I8 = 1,
  U16 = 2,
  I16 = 3,
  U32 = 4,
  I32 = 5,
  F32 = 6,
  Bool = 7,
  String = 8,
  Array = 9,
  U64 = 10,
  I64 = 11,
  F64 = 12,
};
inline constexpr uint32_t kGgufTypeCount = 13;
inline constexpr uint32_t kGgufDefaultAlignment = 32;
inline constexpr uint32_t kGgufMaxDims = 4;

// "u32", "string", "f32" ... ("?" for ids outside the enum).
std::string_view gguf_type_name(GgufType t);
// Bytes of one scalar of a fixed-size type (0 for String and Array).
uint32_t gguf_scalar_bytes(GgufType t);

struct GgufValue {
  GgufType type = GgufType::U8;
  // Scalars: the value's raw bytes in the file. Strings: `str`. Arrays: element type, count, and either the
  // element strings or the elements' raw bytes (count × gguf_scalar_bytes(array_type)).
  std::span<const uint8_t> raw;
  std::string_view str;
  GgufType array_type = GgufType::U8;
  uint64_t array_count = 0;
  std::vector<std::string_view> array_strings;

  bool is_integer() const;  // any of the eight integer types
  bool is_number() const;   // integer or float
  // Scalar numbers widened (valid only when is_number()).
  int64_t as_i64() const;
  uint64_t as_u64() const;
  double as_f64() const;
  // Element i of a numeric array, widened.
  double array_f64(uint64_t i) const;
  int64_t array_i64(uint64_t i) const;
  // "array[string]" style name of the full type.
  std::string type_name() const;
};

struct GgufKeyValue {
  std::string_view key;
  GgufValue value;
};

struct GgufTensor {
  std::string_view name;
  uint32_t n_dims = 0;
  std::array<int64_t, kGgufMaxDims> ne{1, 1, 1, 1};  // GGUF order: ne[0] is the innermost (contiguous) dim
  uint32_t ggml_type = 0;
  DType dtype = DType::F32;
  uint64_t offset = 0;  // absolute byte offset in the file
  uint64_t bytes = 0;
  const uint8_t* data = nullptr;

  std::span<const int64_t> ne_dims() const { return {ne.data(), n_dims}; }
  // Outermost dimension first (ne reversed), as TensorInfo holds it.
  std::vector<int64_t> shape() const;
  TensorInfo info() const;
};

struct GgufFile {
  uint32_t version = 0;
  uint32_t alignment = kGgufDefaultAlignment;
  uint64_t data_offset = 0;  // start of the (aligned) data section
  std::vector<GgufKeyValue> metadata;
  std::vector<GgufTensor> tensors;

  const GgufKeyValue* find(std::string_view key) const;
  const GgufTensor* find_tensor(std::string_view name) const;

  // Typed accessors: fail when the key is missing or holds another type, e.g.
  //   gguf: key 'llama.context_length' is a string, expected u32
  // get_u32/get_i32 accept any integer type whose value fits; get_f32 accepts f32 or f64.
  Result<uint32_t> get_u32(std::string_view key) const;
  Result<int32_t> get_i32(std::string_view key) const;
  Result<float> get_f32(std::string_view key) const;
  Result<bool> get_bool(std::string_view key) const;
  Result<std::string_view> get_string(std::string_view key) const;
  Result<std::span<const std::string_view>> get_string_array(std::string_view key) const;
  Result<std::vector<int64_t>> get_int_array(std::string_view key) const;  // integer element types only
  Result<std::vector<float>> get_float_array(std::string_view key) const;  // any numeric element type

 private:
  Result<const GgufValue*> typed(std::string_view key, std::string_view expected,
                                 bool ok_type(const GgufValue&)) const;
};

Result<GgufFile> parse_gguf(std::span<const uint8_t> bytes);

}  // namespace sotto
