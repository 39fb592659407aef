// libFuzzer target: any bytes through the ONNX reader and describe_onnx. Whatever parses must keep every
// raw_data tensor inside the input, give every tensor exactly n_elements * element-size bytes, and find()
// each tensor back by its unique name. A second parse offers the input itself as every external data file,
// so external tensors must land inside it too.
#include <cstddef>
#include <cstdint>
#include <cstdlib>

#include "fuzz_support.h"
#include "io/describe.h"
#include "io/onnx.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::span<const uint8_t> bytes(data, size);
  auto model = sotto::parse_onnx(bytes);
  require_one_line_error(model);
  if (model.ok()) {
    uint32_t checksum = 0;
    for (const auto& t : model->tensors) {
      const auto b = t.bytes();
      if (b.size() != t.n_bytes) std::abort();
      if (t.from_file && !b.empty() && (b.data() < data || b.data() + b.size() > data + size)) std::abort();
      for (uint8_t byte : b) checksum += byte;  // touch every byte so ASan sees any bad pointer
      if (model->find(t.unique_name) != &t) std::abort();
    }
    // The node list is bounded by the file: each input and output name is a field of it.
    if (model->nodes.size() > size) std::abort();
    for (const auto& n : model->nodes)
      for (const auto& s : n.inputs) checksum += static_cast<uint32_t>(s.size());
    (void)checksum;
  }
  auto with_external = sotto::parse_onnx(
      bytes, [&](std::string_view) -> sotto::Result<std::span<const uint8_t>> { return bytes; });
  if (with_external.ok()) {
    for (const auto& t : with_external->tensors) {
      const auto b = t.bytes();
      if (b.size() != t.n_bytes) std::abort();
      if (t.from_file && !b.empty() && (b.data() < data || b.data() + b.size() > data + size)) std::abort();
    }
  }
  if (model.ok() && !with_external.ok()) std::abort();  // external data support only adds files that parse
  auto described = sotto::describe_onnx(bytes);
  if (described.ok() != model.ok()) std::abort();
  return 0;
}
