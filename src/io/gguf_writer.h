// Builds a GGUF v3 file in memory: metadata plus tensors, laid out as llama.cpp writes them (tensor data
// aligned to `general.alignment`). Used for round-trip tests and for making random-weight model files.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/dtype.h"
#include "core/error.h"
#include "io/gguf.h"

namespace sotto {

class GgufWriter {
 public:
  // An alignment other than 32 is recorded as the `general.alignment` key (it must be a power of two).
  explicit GgufWriter(uint32_t alignment = kGgufDefaultAlignment);

  void add_u8(std::string_view key, uint8_t v) { add_scalar(key, GgufType::U8, &v, sizeof v); }
  void add_i8(std::string_view key, int8_t v) { add_scalar(key, GgufType::I8, &v, sizeof v); }
  void add_u16(std::string_view key, uint16_t v) { add_scalar(key, GgufType::U16, &v, sizeof v); }
  void add_i16(std::string_view key, int16_t v) { add_scalar(key, GgufType::I16, &v, sizeof v); }
  void add_u32(std::string_view key, uint32_t v) { add_scalar(key, GgufType::U32, &v, sizeof v); }
  void add_i32(std::string_view key, int32_t v) { add_scalar(key, GgufType::I32, &v, sizeof v); }
  void add_f32(std::string_view key, float v) { add_scalar(key, GgufType::F32, &v, sizeof v); }
  void add_bool(std::string_view key, bool v) {
    uint8_t b = v ? 1 : 0;
    add_scalar(key, GgufType::Bool, &b, 1);
  }
  void add_u64(std::string_view key, uint64_t v) { add_scalar(key, GgufType::U64, &v, sizeof v); }
  void add_i64(std::string_view key, int64_t v) { add_scalar(key, GgufType::I64, &v, sizeof v); }
  void add_f64(std::string_view key, double v) { add_scalar(key, GgufType::F64, &v, sizeof v); }
  void add_string(std::string_view key, std::string_view v);
  void add_string_array(std::string_view key, std::span<const std::string> values);
  // Numeric array: `element_type` must be a fixed-size type; `raw` holds count × its size, little-endian.
  void add_array(std::string_view key, GgufType element_type, uint64_t count, std::span<const uint8_t> raw);
  template <class T>
  void add_array(std::string_view key, GgufType element_type, std::span<const T> values) {
    add_array(key, element_type, values.size(),
              {reinterpret_cast<const uint8_t*>(values.data()), values.size() * sizeof(T)});
  }

  // `ne` in GGUF order (innermost first). `data` must hold exactly dtype_bytes(dtype, product(ne)) bytes.
  Status add_tensor(std::string_view name, DType dtype, std::span<const int64_t> ne,
                    std::span<const uint8_t> data);

  std::vector<uint8_t> finish() const;

 private:
  void add_scalar(std::string_view key, GgufType type, const void* v, size_t n);
  void put_key(std::string_view key, GgufType type);

  struct PendingTensor {
    std::string name;
    DType dtype;
    std::vector<int64_t> ne;
    std::vector<uint8_t> data;
  };
  uint32_t alignment_;
  uint64_t n_kv_ = 0;
  std::vector<uint8_t> kv_bytes_;
  std::vector<PendingTensor> tensors_;
};

}  // namespace sotto
