// The LLM's GPU plan (models/llm/gpu/llm_gpu.h) as the TokenModel Generation drives (models/llm/generate.h),
// for the C API and the CLI alike.
#pragma once

#include <algorithm>
#include <cstdint>
#include <span>

#include "core/error.h"
#include "models/llm/generate.h"
#include "models/llm/gpu/llm_gpu.h"
#include "models/llm/gpu/sample_state.h"
#include "models/llm/sampler.h"

namespace sotto::gpu {

// The GPU plan as a TokenModel: the next token is chosen on the GPU (the decode plan's argmax, or the sampling
// tail run after it with the Sampler's draw and the recent ids: models/llm/gpu/sample_state.h), and stays in its token
// buffer for the next step, so only the 4-byte id travels, once per token.
//
// Decoding runs one step ahead: the step after a token needs nothing from the CPU (its input is that choice,
// already in the token buffer; a sampled choice needs the Sampler's next draw, which does not depend on the
// token), so it is submitted as soon as the token's read is, and the GPU works on it while the id travels back
// and the CPU decides whether to go on. Waiting for each id before submitting the next step left the GPU idle
// for the round trip (about a third of a token's time on the H200, bench/README.md). A repetition penalty reads
// the ids just written, so penalized sampling waits for each id. A step run ahead that is not wanted (the
// generation ended, a new prompt comes) is dropped: the position is given back and its cache row is overwritten
// by whatever runs there next (its draw is gone with the generation's Sampler).
class GpuTokenModel final : public TokenModel {
 public:
  explicit GpuTokenModel(LlmGpu& llm) : llm_(&llm) {}
  int n_past() const override { return llm_->n_past() - (ahead_ ? 1 : 0); }
  int n_ctx() const override { return llm_->n_ctx(); }
  void clear() override {
    llm_->reset();
    last_choice_ = kNoToken;
    ahead_ = ahead_sampled_ = sample_submitted_ = false;
  }
  void truncate(int n_past) override {
    const int now = this->n_past();
    if (ahead_) llm_->drop_last(1);  // the step run ahead is not wanted
    last_choice_ = kNoToken;
    ahead_ = ahead_sampled_ = sample_submitted_ = reading_ = choosing_ = false;
    if (n_past < now) llm_->drop_last(now - std::max(n_past, 0));
  }
  Status supports(const SamplerParams& p) const override { return check_gpu_sampling(p, llm_->n_vocab()); }
  Status run(std::span<const int32_t> ids, bool choose_next) override;
  Result<Choice> choose(Sampler& sampler, std::span<const int32_t> history, int32_t* id) override;

 private:
  LlmGpu* llm_;
  int32_t last_choice_ = kNoToken;  // the GPU's last choice, still in its token buffer
  bool choosing_ = false;           // run() asked for the next token; choose() has not started it
  bool reading_ = false;
  bool ahead_ = false;  // the step after last_choice_ is submitted (its position counted in llm_->n_past())
  bool ahead_sampled_ = false;     // ... with its sampling tail
  bool sample_submitted_ = false;  // this choice's sampling tail went with its step, ahead
};

}  // namespace sotto::gpu
