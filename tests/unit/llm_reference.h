// llama.cpp's greedy continuations of the stories260K fixtures, recorded by tools/llama_reference.mjs in
// tests/data/llm_reference.json; read by the CPU (llm_test.cpp) and GPU (gpu_llm_test.cpp) model tests.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "io/json.h"

namespace sotto::testing {

struct LlmReference {
  std::string prompt;
  std::vector<int32_t> prompt_ids, ids;  // ids: the generated tokens only
};

inline std::vector<int32_t> json_int_array(const JsonValue* v) {
  std::vector<int32_t> out;
  if (v && v->is_array())
    for (const JsonValue& item : v->items) out.push_back(static_cast<int32_t>(item.as_u64().value_or(~0ull)));
  return out;
}

// The runs recorded for `model_file` (a fixture's file name); empty when the file or the model is missing.
inline std::vector<LlmReference> load_llm_reference(const std::string& model_file) {
  std::vector<LlmReference> out;
  std::FILE* f = std::fopen((std::string(SOTTO_SOURCE_DIR) + "/tests/data/llm_reference.json").c_str(), "rb");
  if (!f) return out;
  std::string text;
  char buf[65536];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) text.append(buf, n);
  std::fclose(f);
  auto json = parse_json(text);
  if (!json) return out;
  const JsonValue* models = json->find("models");
  const JsonValue* runs = models ? models->find(model_file) : nullptr;
  if (!runs || !runs->is_array()) return out;
  for (const JsonValue& r : runs->items)
    out.push_back({r.find("prompt") ? r.find("prompt")->text : "", json_int_array(r.find("prompt_ids")),
                   json_int_array(r.find("ids"))});
  return out;
}

}  // namespace sotto::testing
