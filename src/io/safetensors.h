// safetensors (Hugging Face): u64 little-endian header length N, N bytes of JSON, then the data section.
// The JSON maps each tensor name to {"dtype", "shape", "data_offsets": [begin, end)} (offsets relative to the
// data section) and may hold "__metadata__": {string: string}. Tensor data is used in place.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "core/error.h"
#include "core/tensor.h"

namespace sotto {

// Headers larger than this are refused (the reference implementation's limit is 100 MB too).
inline constexpr uint64_t kSafetensorsMaxHeaderBytes = 100'000'000;

struct SafetensorsFile {
  uint64_t header_bytes = 0;                                  // N
  uint64_t data_offset = 0;                                   // 8 + N
  std::vector<std::pair<std::string, std::string>> metadata;  // __metadata__, in file order
  std::vector<TensorInfo> tensors;                            // in header order; offsets are absolute

  const TensorInfo* find_tensor(std::string_view name) const;
};

// "F32" -> DType::F32 ...; nullopt for names this engine does not handle (F8_E4M3, C64 ...).
std::optional<DType> safetensors_dtype(std::string_view name);
std::string_view safetensors_dtype_name(DType t);

Result<SafetensorsFile> parse_safetensors(std::span<const uint8_t> bytes);

}  // namespace sotto
