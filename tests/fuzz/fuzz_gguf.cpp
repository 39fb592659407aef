// libFuzzer target: any bytes through the GGUF reader, its typed accessors and describe_gguf. Whatever parses
// must keep every tensor inside the input.
#include <cstddef>
#include <cstdint>
#include <cstdlib>

#include "fuzz_support.h"
#include "io/describe.h"
#include "io/gguf.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::span<const uint8_t> bytes(data, size);
  auto file = sotto::parse_gguf(bytes);
  require_one_line_error(file);
  if (file.ok()) {
    for (const auto& t : file->tensors)
      if (t.offset > size || t.bytes > size - t.offset || t.data != data + t.offset) std::abort();
    for (const auto& kv : file->metadata) {
      (void)file->get_u32(kv.key);
      (void)file->get_i32(kv.key);
      (void)file->get_f32(kv.key);
      (void)file->get_string(kv.key);
      (void)file->get_string_array(kv.key);
      (void)file->get_int_array(kv.key);
      (void)file->get_float_array(kv.key);
    }
  }
  auto described = sotto::describe_gguf(bytes);
  if (described.ok() != file.ok()) std::abort();
  return 0;
}
