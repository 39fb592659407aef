// Picking the next token from the logits: greedy, or a draw after the filters llama.cpp's default chain
// applies, in its order: repetition penalty -> top-k -> top-p -> min-p -> temperature -> draw.
// The draw uses our own PRNG (SplitMix64 seeding xoshiro256**) and plain arithmetic, never <random>'s
// distributions, whose results differ between standard libraries: a seed gives the same tokens everywhere.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace sotto {

// Greedy by default (temperature 0), everywhere: the CLI, the C API, the web engine and both backends, so a
// prompt gives llama.cpp's greedy text unless sampling is asked for. The filters below apply only when
// temperature > 0 (llama.cpp's defaults for them).
struct SamplerParams {
  bool greedy = false;  // argmax, ignoring everything below (also when temperature <= 0)
  float temperature = 0.0f;
  int top_k = 40;               // keep the k most likely (<= 0: off)
  float top_p = 0.95f;          // keep the smallest set whose probability reaches p (>= 1: off)
  float min_p = 0.05f;          // drop tokens below min_p × the top probability (<= 0: off)
  float repeat_penalty = 1.0f;  // divide positive / multiply negative logits of recent tokens (1: off)
  int repeat_last_n = 64;       // how many recent tokens the penalty looks at
  uint64_t seed = 0;
};

// xoshiro256** (Blackman & Vigna), seeded through SplitMix64 as its authors recommend.
class Rng {
 public:
  explicit Rng(uint64_t seed);
  uint64_t next_u64();
  float next_unit();  // uniform in [0, 1), 24 random bits

 private:
  uint64_t s_[4];
};

class Sampler {
 public:
  explicit Sampler(const SamplerParams& params) : params_(params), rng_(params.seed) {}

  // `recent` = the tokens so far (prompt and generated); only the last repeat_last_n are looked at.
  int32_t sample(std::span<const float> logits, std::span<const int32_t> recent);

  const SamplerParams& params() const { return params_; }
  // The uniform draw sample() would make next, taken from the generator: for a sampler that runs elsewhere
  // (the GPU's, models/llm/gpu/sample_state.h) on the same sequence of draws. sample() draws once per non-greedy call.
  float next_draw() { return rng_.next_unit(); }

 private:
  struct Candidate {
    int32_t id;
    float logit;
    float p;
  };
  SamplerParams params_;
  Rng rng_;
  std::vector<Candidate> candidates_;
};

// Index of the largest value (the first one on ties, as llama.cpp's greedy sampler).
int32_t argmax(std::span<const float> values);

}  // namespace sotto
