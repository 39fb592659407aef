// Opening a Parakeet directory from disk (native builds: mmap).
#include <string>

#include "io/file.h"
#include "io/json.h"
#include "models/asr/parakeet.h"

namespace sotto::asr {

bool is_parakeet_dir(const std::string& dir) {
  auto config = MappedFile::open(dir + "/config.json");
  if (!config.ok()) return false;
  const std::span<const uint8_t> c = config->bytes();
  // Any Parakeet model type counts, so a CTC or RNN-T directory gets this loader's one-line refusal rather
  // than another model's "file not found".
  auto json = parse_json(std::string_view(reinterpret_cast<const char*>(c.data()), c.size()), "config.json");
  if (!json.ok() || !json->is_object()) return false;
  const JsonValue* type = json->find("model_type");
  return type && type->is_string() && type->text.starts_with("parakeet");
}

Result<std::unique_ptr<ParakeetModel>> ParakeetModel::open(const std::string& dir, int n_threads) {
  SOTTO_ASSIGN(MappedFile config, MappedFile::open(dir + "/config.json"));
  SOTTO_ASSIGN(MappedFile weights, MappedFile::open(dir + "/model.safetensors"));
  const std::span<const uint8_t> c = config.bytes();
  // The weights are copied onto the model's context at load, so the mapping may close afterwards.
  return load(std::string_view(reinterpret_cast<const char*>(c.data()), c.size()), weights.bytes(),
              dir + "/model.safetensors", n_threads);
}

}  // namespace sotto::asr
