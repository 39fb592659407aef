#include "models/llm/gpu/gpu_token_model.h"

#include <algorithm>
#include <cstddef>

namespace sotto::gpu {

Status GpuTokenModel::run(std::span<const int32_t> ids, bool choose_next) {
  // A generation abandoned while a read was in flight: that token is in the cache, its id is dropped.
  reading_ = false;
  choosing_ = false;
  const bool chosen_on_gpu = ids.size() == 1 && ids[0] == last_choice_;
  last_choice_ = kNoToken;
  const bool ahead_sampled = ahead_sampled_;
  ahead_sampled_ = false;
  sample_submitted_ = false;
  if (ahead_) {
    ahead_ = false;
    if (chosen_on_gpu && choose_next) {  // the step already running is this one (and its draw)
      choosing_ = true;
      sample_submitted_ = ahead_sampled;
      return {};
    }
    llm_->drop_last(1);
  }
  // A prompt fills the cache through the prompt plan; the token whose logits choose the next one runs
  // through the decode plan.
  const size_t batched = choose_next ? ids.size() - std::min<size_t>(ids.size(), 1) : ids.size();
  if (batched > 1) {
    SOTTO_TRY(llm_->submit_prompt(ids.first(batched)));
  } else if (batched == 1) {
    SOTTO_TRY(llm_->submit(ids[0]));
  }
  for (int32_t id : ids.subspan(batched)) SOTTO_TRY(llm_->submit(chosen_on_gpu ? -1 : id));
  choosing_ = choose_next;  // choose() starts the choice: it has the Sampler's parameters and draw
  return {};
}

Result<TokenModel::Choice> GpuTokenModel::choose(Sampler& sampler, std::span<const int32_t> history,
                                                 int32_t* id) {
  if (!reading_) {
    if (!choosing_) return error("llm: no token is being chosen on the GPU");
    const SamplerParams& p = sampler.params();
    const bool sampled = needs_gpu_sampler(p);
    // The CPU Sampler draws once per choice, and only when it samples (not greedy).
    auto draw = [&] { return p.greedy || p.temperature <= 0.0f ? 0.0f : sampler.next_draw(); };
    if (sampled && !sample_submitted_) SOTTO_TRY(llm_->submit_sample(p, draw(), history));
    sample_submitted_ = false;
    SOTTO_TRY(llm_->start_finish());
    // The next step, ahead (above). The fused plan reruns unread tokens when a barrier gives up; a sampled
    // step ahead of the read would need its draw again then, so the fused plan goes ahead only greedily.
    if (!gpu_sampler_reads_history(p) && !(sampled && llm_->fused()) && llm_->n_past() < llm_->n_ctx()) {
      SOTTO_TRY(llm_->submit(-1));
      if (sampled) SOTTO_TRY(llm_->submit_sample(p, draw(), {}));
      ahead_ = true;
      ahead_sampled_ = sampled;
    }
    choosing_ = false;
    reading_ = true;
  }
  const DeviceStatus s = llm_->finish(id);
  if (s == DeviceStatus::Pending) return Choice::Pending;
  reading_ = false;
  if (s == DeviceStatus::Error) return error(llm_->device().last_error());
  last_choice_ = *id;
  return Choice::Ready;
}

}  // namespace sotto::gpu
