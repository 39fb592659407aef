#include "models/llm/sampler.h"

#include <algorithm>
#include <cmath>

namespace sotto {

namespace {
uint64_t splitmix64(uint64_t& state) {
  uint64_t z = (state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}
uint64_t rotl(uint64_t x, int k) {
  return (x << k) | (x >> (64 - k));
}
}  // namespace

Rng::Rng(uint64_t seed) {
  for (uint64_t& s : s_) s = splitmix64(seed);
}

uint64_t Rng::next_u64() {
  const uint64_t result = rotl(s_[1] * 5, 7) * 9;
  const uint64_t t = s_[1] << 17;
  s_[2] ^= s_[0];
  s_[3] ^= s_[1];
  s_[1] ^= s_[2];
  s_[0] ^= s_[3];
  s_[2] ^= t;
  s_[3] = rotl(s_[3], 45);
  return result;
}

float Rng::next_unit() {
  return static_cast<float>(next_u64() >> 40) * 0x1p-24f;
}

int32_t argmax(std::span<const float> values) {
  int32_t best = 0;
  for (size_t i = 1; i < values.size(); ++i)
    if (values[i] > values[static_cast<size_t>(best)]) best = static_cast<int32_t>(i);
  return best;
}

int32_t Sampler::sample(std::span<const float> logits, std::span<const int32_t> recent) {
  const SamplerParams& sp = params_;
  candidates_.resize(logits.size());
  for (size_t i = 0; i < logits.size(); ++i) candidates_[i] = {static_cast<int32_t>(i), logits[i], 0.0f};

  // Repetition penalty over the distinct recent tokens (llama.cpp's penalties sampler).
  if (sp.repeat_penalty != 1.0f && sp.repeat_last_n > 0) {
    const size_t n_recent = std::min(recent.size(), static_cast<size_t>(sp.repeat_last_n));
    std::vector<int32_t> seen(recent.end() - static_cast<std::ptrdiff_t>(n_recent), recent.end());
    // (a lambda, not std::less: libc++ keeps std::sort<int*, less> out of line, in a library wasm lacks)
    std::sort(seen.begin(), seen.end(), [](int32_t a, int32_t b) { return a < b; });
    seen.erase(std::unique(seen.begin(), seen.end()), seen.end());
    for (int32_t id : seen) {
      if (id < 0 || static_cast<size_t>(id) >= candidates_.size()) continue;
      float& l = candidates_[static_cast<size_t>(id)].logit;
      l = l > 0.0f ? l / sp.repeat_penalty : l * sp.repeat_penalty;
    }
  }

  auto by_logit = [](const Candidate& a, const Candidate& b) {
    return a.logit > b.logit || (a.logit == b.logit && a.id < b.id);
  };
  if (sp.greedy || sp.temperature <= 0.0f)
    return std::min_element(candidates_.begin(), candidates_.end(), by_logit)->id;

  // Most likely first; a total order (ties by id) so every platform sorts the same way.
  size_t keep = candidates_.size();
  if (sp.top_k > 0 && static_cast<size_t>(sp.top_k) < keep) {
    keep = static_cast<size_t>(sp.top_k);
    std::partial_sort(candidates_.begin(), candidates_.begin() + static_cast<std::ptrdiff_t>(keep),
                      candidates_.end(), by_logit);
  } else {
    std::sort(candidates_.begin(), candidates_.end(), by_logit);
  }
  candidates_.resize(keep);

  auto softmax = [&](float temperature) {
    const float top = candidates_.front().logit;
    double sum = 0.0;
    for (Candidate& c : candidates_) {
      c.p = std::exp((c.logit - top) / temperature);
      sum += c.p;
    }
    for (Candidate& c : candidates_) c.p = static_cast<float>(c.p / sum);
  };

  if (sp.top_p < 1.0f) {  // smallest prefix whose probability reaches top_p
    softmax(1.0f);
    double cumulative = 0.0;
    size_t n = 0;
    while (n < candidates_.size()) {
      cumulative += candidates_[n++].p;
      if (cumulative >= sp.top_p) break;
    }
    candidates_.resize(std::max<size_t>(n, 1));
  }
  if (sp.min_p > 0.0f) {  // p_i >= min_p * p_max  <=>  logit_i >= logit_max + log(min_p)
    const float threshold = candidates_.front().logit + std::log(sp.min_p);
    size_t n = 1;
    while (n < candidates_.size() && candidates_[n].logit >= threshold) ++n;
    candidates_.resize(n);
  }

  softmax(sp.temperature);
  const float r = rng_.next_unit();
  float cumulative = 0.0f;
  for (const Candidate& c : candidates_) {
    cumulative += c.p;
    if (r < cumulative) return c.id;
  }
  return candidates_.back().id;  // r fell in the rounding gap at the top
}

}  // namespace sotto
