// Opening a Parakeet directory from disk (native builds: mmap).
#include <string>

#include "io/file.h"
#include "models/asr/parakeet.h"

namespace sotto::asr {

Result<std::unique_ptr<ParakeetModel>> ParakeetModel::open(const std::string& dir, int n_threads) {
  SOTTO_ASSIGN(MappedFile config, MappedFile::open(dir + "/config.json"));
  SOTTO_ASSIGN(MappedFile weights, MappedFile::open(dir + "/model.safetensors"));
  const std::span<const uint8_t> c = config.bytes();
  // The weights are copied onto the model's context at load, so the mapping may close afterwards.
  return load(std::string_view(reinterpret_cast<const char*>(c.data()), c.size()), weights.bytes(),
              dir + "/model.safetensors", n_threads);
}

}  // namespace sotto::asr
