// libFuzzer target: any bytes through the safetensors reader (and its JSON parser) and describe_file's
// format sniffing. Whatever parses must keep every tensor inside the input.
#include <cstddef>
#include <cstdint>
#include <cstdlib>

#include "fuzz_support.h"
#include "io/describe.h"
#include "io/json.h"
#include "io/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::span<const uint8_t> bytes(data, size);
  auto file = sotto::parse_safetensors(bytes);
  require_one_line_error(file);
  if (file.ok()) {
    for (const auto& t : file->tensors)
      if (t.offset > size || t.bytes > size - t.offset) std::abort();
  }
  auto described = sotto::describe_safetensors(bytes);
  if (described.ok() != file.ok()) std::abort();
  // The same bytes as a bare JSON document, and json_quote's output must always parse back.
  std::string_view text(reinterpret_cast<const char*>(data), size);
  (void)sotto::parse_json(text);
  if (!sotto::parse_json(sotto::json_quote(text)).ok()) std::abort();
  return 0;
}
