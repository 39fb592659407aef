// LlmGpu's sampling tail (models/llm/gpu/llm_gpu.h submit_sample): two dispatches after the decode plan, recorded on
// first use, that turn the logits into the token the CPU Sampler would draw, so it stays on the GPU for the
// next step.
#include "models/llm/gpu/llm_gpu.h"
#include "models/llm/gpu/sample_state.h"

namespace sotto::gpu {

Status LlmGpu::submit_sample(const SamplerParams& params, float u, std::span<const int32_t> history) {
  if (n_past_ == 0) return error("llm: no token has been run on the GPU to sample after");
  SOTTO_ASSIGN(std::vector<uint32_t> state, sample_state(params, hp_.n_vocab, u, history));
  if (sample_plan_.empty()) {
    const uint32_t n_vocab = static_cast<uint32_t>(hp_.n_vocab);
    SOTTO_ASSIGN(sample_state_, ops_.buffer(Ops::kSampleStateBytes, "sampling state"));
    SOTTO_ASSIGN(sample_candidates_,
                 ops_.buffer(Ops::sample_candidates_bytes(n_vocab), "sampling candidates"));
    std::vector<Dispatch> plan;
    SOTTO_TRY(ops_.sample(plan, logits_, n_vocab, sample_state_, sample_candidates_, tok_));
    sample_plan_ = std::move(plan);
  }
  SOTTO_TRY(device().write_buffer(sample_state_, 0, state.data(), state.size() * 4));
  last_sampled_ = true;  // what a rerun of this token needs (llm_gpu_fusion.cpp)
  last_sample_params_ = params;
  last_sample_u_ = u;
  last_sample_history_.assign(history.begin(), history.end());
  return device().run(sample_plan_);
}

}  // namespace sotto::gpu
