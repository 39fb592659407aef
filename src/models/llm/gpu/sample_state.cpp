// The state words of models/llm/gpu/sample_state.h, laid out as gpu/kernels_sampling.cpp reads them.
#include "models/llm/gpu/sample_state.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "gpu/kernels.h"

namespace sotto::gpu {

namespace {

bool greedy(const SamplerParams& p) {
  return p.greedy || p.temperature <= 0.0f;
}
bool penalized(const SamplerParams& p) {
  return p.repeat_penalty != 1.0f && p.repeat_last_n > 0;
}
uint32_t bits(float f) {
  uint32_t u = 0;
  std::memcpy(&u, &f, 4);
  return u;
}
// The candidates the CPU keeps before top-p: top_k, or all when top_k is off or not smaller.
int64_t kept(const SamplerParams& p, int64_t n_vocab) {
  if (greedy(p)) return 1;
  return p.top_k > 0 && p.top_k < n_vocab ? p.top_k : n_vocab;
}

}  // namespace

bool needs_gpu_sampler(const SamplerParams& p) {
  return !greedy(p) || penalized(p);
}

bool gpu_sampler_reads_history(const SamplerParams& p) {
  return penalized(p);
}

Status check_gpu_sampling(const SamplerParams& p, int64_t n_vocab) {
  if (n_vocab <= 0 || n_vocab > kSampleMaxVocab)
    return error("webgpu: the GPU sampler takes vocabularies of up to ", kSampleMaxVocab, " tokens, not ",
                 n_vocab);
  if (kept(p, n_vocab) > kSampleMaxTopK)
    return error("webgpu: the GPU sampler keeps at most ", kSampleMaxTopK, " candidates, but ",
                 p.top_k > 0 ? cat("top_k ", p.top_k) : cat("top_k 0 (off) keeps all ", n_vocab, " tokens"),
                 ": set top_k to 1..", kSampleMaxTopK, " or use the cpu backend");
  if (penalized(p) && static_cast<uint32_t>(p.repeat_last_n) > kSampleMaxRecent)
    return error("webgpu: the GPU sampler's repetition penalty looks at up to ", kSampleMaxRecent,
                 " recent tokens, not repeat_last_n ", p.repeat_last_n);
  return {};
}

Result<std::vector<uint32_t>> sample_state(const SamplerParams& p, int64_t n_vocab, float u,
                                           std::span<const int32_t> history) {
  SOTTO_TRY(check_gpu_sampling(p, n_vocab));
  if (!(u >= 0.0f && u < 1.0f)) return error("webgpu: the sampler's draw ", u, " is outside [0, 1)");
  // The distinct recent ids, as the CPU's penalty takes them (ids outside the vocabulary are skipped there).
  std::vector<int32_t> recent;
  if (penalized(p)) {
    const size_t n_recent = std::min(history.size(), static_cast<size_t>(p.repeat_last_n));
    recent.assign(history.end() - static_cast<std::ptrdiff_t>(n_recent), history.end());
    std::sort(recent.begin(), recent.end(), [](int32_t a, int32_t b) { return a < b; });
    recent.erase(std::unique(recent.begin(), recent.end()), recent.end());
    std::erase_if(recent, [&](int32_t id) { return id < 0 || id >= n_vocab; });
  }
  const uint32_t flags = (greedy(p) ? 1u : 0u) | (p.top_p < 1.0f ? 2u : 0u) | (p.min_p > 0.0f ? 4u : 0u);
  std::vector<uint32_t> words = {bits(u),
                                 static_cast<uint32_t>(kept(p, n_vocab)),
                                 flags,
                                 bits(p.temperature),
                                 bits(p.top_p),
                                 bits(p.min_p > 0.0f ? std::log(p.min_p) : 0.0f),
                                 bits(penalized(p) ? p.repeat_penalty : 1.0f),
                                 static_cast<uint32_t>(recent.size())};
  for (int32_t id : recent) words.push_back(static_cast<uint32_t>(id));
  return words;
}

}  // namespace sotto::gpu
