// A named tensor inside a model file: type, shape and where its bytes are. The bytes stay in the file's
// memory (mmap natively, the wasm heap on the web); nothing here copies them.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "core/dtype.h"

namespace sotto {

struct TensorInfo {
  std::string name;
  DType dtype = DType::F32;
  // Outermost dimension first (numpy / ONNX / safetensors order). GGUF's ne[] is the reverse of this.
  std::vector<int64_t> shape;
  uint64_t offset = 0;            // byte offset of the data from the start of the file
  uint64_t bytes = 0;             // size of the data in bytes
  const uint8_t* data = nullptr;  // points into the file's bytes

  uint64_t elements() const {
    uint64_t n = 1;
    for (int64_t d : shape) n *= static_cast<uint64_t>(d);
    return n;
  }
  std::span<const uint8_t> span() const { return {data, static_cast<size_t>(bytes)}; }
};

}  // namespace sotto
