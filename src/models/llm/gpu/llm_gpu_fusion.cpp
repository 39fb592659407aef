// LlmGpu's decode runs (models/llm/gpu/llm_gpu.h): the plan in use (separate dispatches, or natively the fused
// plan or the layer kernels, built by llm_gpu_fusion_native.cpp), its rerun through the separate dispatches when
// a fused barrier gave up, and the check runs that compare the two.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "models/llm/gpu/llm_gpu.h"

namespace sotto::gpu {

size_t LlmGpu::dispatches_per_token() const {
  const std::vector<Dispatch>& plan = use_fused_ ? fused_.dispatches : decode_.dispatches;
  return static_cast<size_t>(
      std::count_if(plan.begin(), plan.end(), [](const Dispatch& d) { return d.copy_bytes == 0; }));
}

void LlmGpu::set_fused_grid(uint32_t grid) {
  for (size_t i = 0; i < fused_.dispatches.size(); ++i)
    if (fused_widest_[i] > 0) fused_.dispatches[i].groups_x = std::clamp<uint32_t>(grid, 1, fused_widest_[i]);
}

Status LlmGpu::run_decode() {
  const uint32_t s[4] = {static_cast<uint32_t>(n_past_), 1, 0, 0};
  SOTTO_TRY(device().write_buffer(step_, 0, s, 16));
  last_run_fused_ = use_fused_;
  if (!use_fused_) return device().run(decode_.dispatches);
  // The barrier counters start at zero every token; the failure flag (word 0) stays raised until finish()
  // sees it, since tokens submitted without a read in between (a prompt token by token) are checked with the
  // next one that is read.
  const std::vector<uint32_t> zeros(sync_words_ - 1, 0);
  SOTTO_TRY(device().write_buffer(sync_, 4, zeros.data(), zeros.size() * 4));
  return device().run(fused_.dispatches);
}

Status LlmGpu::rerun_unfused() {
  // The plan stays fused through a few give-ups (each costs its tokens a second run) and is turned off at the
  // kFusedGiveUpLimit-th: a grid whose workgroups cannot all be resident would give up at every token.
  ++decode_give_ups_;
  const bool keep = decode_give_ups_ < kFusedGiveUpLimit;
  const std::string status = fusion_status_;
  use_fused_ = false;
  // Every fused token since the last one read, again through the decode plan: those the failed read covers,
  // the read again, then a step that was ahead of it (its input: the choice just rerun, in the token buffer).
  const std::vector<int32_t> inputs = unchecked_;
  const size_t covered = std::min(read_covers_, inputs.size());
  if (covered == 0 || inputs.front() < 0)
    return error("webgpu: a fused token failed and its input is unknown");
  n_past_ = unchecked_from_;
  for (size_t i = 0; i < covered; ++i) SOTTO_TRY(submit(inputs[i]));
  if (last_sampled_ && covered == inputs.size()) {  // (generation runs sampled steps ahead only unfused)
    const std::vector<int32_t> history = last_sample_history_;
    SOTTO_TRY(submit_sample(last_sample_params_, last_sample_u_, history));
  }
  SOTTO_TRY(start_finish());
  for (size_t i = covered; i < inputs.size(); ++i) SOTTO_TRY(submit(-1));
  // The flag down again, after every fused run that could have raised it: a fused plan kept or turned back on
  // (the load-time timing, set_fused) must not find it raised and fail every token.
  const uint32_t zero = 0;
  SOTTO_TRY(device().write_buffer(sync_, 0, &zero, 4));
  const std::string times = cat(decode_give_ups_, decode_give_ups_ == 1 ? " time" : " times");
  if (!keep) {
    fusion_status_ =
        cat("off: a fused layer's grid barrier gave up while decoding, ", times, give_up_detail());
    return {};
  }
  use_fused_ = true;
  unchecked_.clear();  // every step since the failed read has run again, separately: nothing left to rerun
  const size_t noted = status.find("; a grid barrier gave up while decoding");
  fusion_status_ = cat(status.substr(0, noted), "; a grid barrier gave up while decoding, ", times,
                       give_up_detail(), ": its tokens ran again through the separate dispatches");
  return {};
}

Status LlmGpu::run_check_tokens(bool fused, int n, std::vector<std::vector<float>>* out, bool* gave_up) {
  use_fused_ = fused;
  n_past_ = 0;
  *gave_up = false;
  const std::vector<uint32_t> zeros(sync_words_, 0);
  SOTTO_TRY(device().write_buffer(sync_, 0, zeros.data(), zeros.size() * 4));
  for (int p = 0; p < n; ++p) {
    const uint32_t t[4] = {static_cast<uint32_t>((p * 7919 + 1) % hp_.n_vocab), 0, 0, 0};
    SOTTO_TRY(device().write_buffer(tok_, 0, t, 16));
    SOTTO_TRY(run_decode());
    ++n_past_;
    uint32_t token_and_flag[2] = {0, 0};
    SOTTO_TRY(ops_.read(tok_, 0, token_and_flag, 8));
    *gave_up = *gave_up || (fused && token_and_flag[1] != 0);
    if (fused && token_and_flag[1] != 0) last_give_up_ = token_and_flag[1];
    SOTTO_ASSIGN(std::vector<float> l, logits());
    out->push_back(std::move(l));
  }
  use_fused_ = false;
  n_past_ = 0;
  return {};
}

std::string LlmGpu::give_up_detail() const {
  if ((last_give_up_ & 0x80000000u) == 0) return "";  // the separate kernels' fused plan says no more
  const uint32_t barrier = (last_give_up_ >> 16) & 0x7FFFu, seen = last_give_up_ & 0xFFFFu;
  return cat(" (at its barrier ", barrier, " in the dispatch: ", seen, " arrivals of ", barrier * layer_grid_,
             " counted)");
}

Dispatch LlmGpu::failure_flag_copy() const {
  Dispatch flag;
  flag.copy_src = sync_;
  flag.copy_dst = tok_;
  flag.copy_dst_offset = 4;
  flag.copy_bytes = 4;
  return flag;
}

}  // namespace sotto::gpu
