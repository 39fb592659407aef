// The CPU's half of sampling on the GPU (Ops::sample, gpu/kernels_sampling.cpp): which SamplerParams the GPU
// can follow exactly as the CPU Sampler does, and the state words written before each choice (the draw u from
// the Sampler's own generator, the parameters, the distinct recent ids for the repetition penalty). Only
// those few words go up and only the chosen id comes back.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "core/error.h"
#include "models/llm/sampler.h"

namespace sotto::gpu {

// True unless the choice is a plain argmax (greedy, or temperature <= 0, with no repetition penalty), which
// the decode plan's own argmax makes.
bool needs_gpu_sampler(const SamplerParams& p);
// True when a choice reads the recent ids (a repetition penalty): only then does the sampling state depend on
// the token chosen just before.
bool gpu_sampler_reads_history(const SamplerParams& p);

// An error, one line, for what the GPU sampler lacks: more than kSampleMaxTopK candidates (top_k off or
// larger than that over a larger vocabulary), a penalty window over kSampleMaxRecent tokens, a vocabulary
// over kSampleMaxVocab.
Status check_gpu_sampling(const SamplerParams& p, int64_t n_vocab);

// The state words (gpu/kernels_sampling.cpp) for one choice: u in [0, 1) and `history` (prompt and written
// tokens; the last repeat_last_n count, as on the CPU).
Result<std::vector<uint32_t>> sample_state(const SamplerParams& p, int64_t n_vocab, float u,
                                           std::span<const int32_t> history);

}  // namespace sotto::gpu
