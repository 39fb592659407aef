// libFuzzer target: any bytes through the .ort reader. Whatever parses must keep every tensor's raw data inside
// the input with exactly n_elements * element-size bytes, and find() each tensor back by its name (the first
// one of that name). Seeds: tests/fuzz/corpus/ort (tools/moonshine/make_tiny_ort.py, written by ONNX Runtime).
#include <cstddef>
#include <cstdint>
#include <cstdlib>

#include "fuzz_support.h"
#include "io/ort.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::span<const uint8_t> bytes(data, size);
  auto model = sotto::parse_ort(bytes);
  require_one_line_error(model);
  if (model.ok()) {
    uint32_t checksum = 0;
    for (const auto& t : model->tensors) {
      const auto b = t.bytes();
      const auto expected = sotto::dtype_bytes(t.dtype, t.n_elements);
      if (!expected || b.size() != *expected) std::abort();
      if (!b.empty() && (b.data() < data || b.data() + b.size() > data + size)) std::abort();
      for (uint8_t byte : b) checksum += byte;  // touch every byte so ASan sees any bad pointer
      const sotto::OrtTensor* found = model->find(t.name);
      if (!found || found->name != t.name) std::abort();
    }
    for (const auto& n : model->nodes)
      for (const auto& s : n.inputs) checksum += static_cast<uint32_t>(s.size());
    (void)checksum;
  }
  return 0;
}
