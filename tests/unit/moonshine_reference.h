// ONNX Runtime's run of Moonshine base on the first 3 s of beckett.wav (tests/data/moonshine_beckett_3s.bin,
// written by tools/moonshine/reference.py): read by the CPU (moonshine_test.cpp) and GPU (moonshine_gpu_test.cpp)
// model tests.
#pragma once

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

namespace sotto::testing {

inline std::string source_path(const std::string& rel) {
  return std::string(SOTTO_SOURCE_DIR) + "/" + rel;
}

struct MoonshineReference {
  std::vector<float> audio, encoder;
  uint32_t frames = 0, d_model = 0, vocab = 0;
  std::vector<int32_t> tokens;    // BOS first
  std::vector<int32_t> top_ids;   // [n_tokens][16]
  std::vector<float> top_values;  // [n_tokens][16]
  std::vector<float> stats;       // [n_tokens][2]: max, logsumexp
};

// "MSRF", u32 [version, samples, frames, d_model, n_tokens, vocab], then the audio, the encoder output, the
// tokens, each step's top-16 ids and logits, and each step's max and logsumexp.
inline bool read_moonshine_reference(MoonshineReference& r) {
  std::FILE* f = std::fopen(source_path("tests/data/moonshine_beckett_3s.bin").c_str(), "rb");
  if (!f) return false;
  char magic[4];
  uint32_t h[6];
  bool ok =
      std::fread(magic, 1, 4, f) == 4 && std::memcmp(magic, "MSRF", 4) == 0 && std::fread(h, 4, 6, f) == 6;
  if (ok) {
    r.frames = h[2];
    r.d_model = h[3];
    r.vocab = h[5];
    const uint32_t n = h[4];
    r.audio.resize(h[1]);
    r.encoder.resize(static_cast<size_t>(h[2]) * h[3]);
    r.tokens.resize(n);
    r.top_ids.resize(n * 16);
    r.top_values.resize(n * 16);
    r.stats.resize(n * 2);
    ok = std::fread(r.audio.data(), 4, r.audio.size(), f) == r.audio.size() &&
         std::fread(r.encoder.data(), 4, r.encoder.size(), f) == r.encoder.size() &&
         std::fread(r.tokens.data(), 4, n, f) == n && std::fread(r.top_ids.data(), 4, n * 16, f) == n * 16 &&
         std::fread(r.top_values.data(), 4, n * 16, f) == n * 16 &&
         std::fread(r.stats.data(), 4, n * 2, f) == n * 2;
  }
  std::fclose(f);
  return ok;
}

}  // namespace sotto::testing
