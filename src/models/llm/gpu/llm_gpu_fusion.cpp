// LlmGpu's fused decode plan (models/llm/gpu/llm_gpu.h, gpu/fusion.h): the embedding, one dispatch per layer, the output
// head and argmax as recorded, then a copy of the failure flag next to the token.
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

Status LlmGpu::build_fused(const FusionOptions& options) {
  if (options.mode == FusionOptions::Mode::Layers) return build_layer_kernels(options);
  if (options.mode == FusionOptions::Mode::Off) {
    fusion_status_ = "off";
    return {};
  }
  // Auto, by rule (FusionOptions): on a CPU adapter the separate dispatches (every workgroup of a fused grid
  // costs there, and nothing is gained from fewer dispatches); on a GPU the layer kernels where the model has
  // their shape and they pass their check, else the separate dispatches. Nothing is timed at load: timing
  // there once kept a grid that decoded at 488 tokens/s where the widest decodes at 764.
  if (options.mode == FusionOptions::Mode::Auto) {
    if (device().info().cpu()) {
      fusion_status_ = "off (separate dispatches: a CPU adapter)";
      return {};
    }
    return build_layer_kernels(options);
  }
  // The check below reads back synchronously, which only a native device can.
  if (device().info().backend != "vulkan") {
    fusion_status_ = "off: fusion is checked and used natively only so far";
    return {};
  }
  // The decode step recorded once more, its activations all views of one pool: fused, they are one binding
  // (unfused, that plan would bind one buffer both read-only and writable, which WebGPU refuses: it only ever
  // runs fused). The KV cache, weights and tables are the decode plan's own.
  SOTTO_TRY(ops_.begin_pool(decode_activation_bytes(), "fused decode activations"));
  Plan fusable;
  recording_fusable_ = true;
  const Status recorded = record_forward(1, tok_, fusable);
  recording_fusable_ = false;
  ops_.end_pool();
  SOTTO_TRY(recorded);
  // Fused: the embedding as it is, each layer as one dispatch (or a few, at options.cuts), the output head's
  // dispatches each alone (options.head_apart) or as one. A lone phase has no grid barrier: Ops::fuse gives it
  // all its workgroups, and its widest is recorded as 0 so that set_fused_grid() leaves it so.
  std::vector<size_t> bounds;
  for (size_t k = 0; k + 1 < fusable.layer_begin.size(); ++k) {
    bounds.push_back(fusable.layer_begin[k]);
    for (uint32_t c : options.cuts)
      if (c > 0 && fusable.layer_begin[k] + c < fusable.layer_begin[k + 1])
        bounds.push_back(fusable.layer_begin[k] + c);
  }
  for (size_t i = fusable.layer_begin.back(); i < fusable.dispatches.size(); ++i) {
    bounds.push_back(i);
    if (!options.head_apart) break;
  }
  bounds.push_back(fusable.dispatches.size());
  std::sort(bounds.begin(), bounds.end());
  bounds.erase(std::unique(bounds.begin(), bounds.end()), bounds.end());
  sync_words_ = static_cast<uint32_t>(bounds.size());
  SOTTO_ASSIGN(sync_, ops_.buffer(uint64_t{sync_words_} * 4, "fusion sync"));
  Plan fused;
  std::vector<uint32_t> widest;
  uint64_t most_workgroup_bytes = 0;  // of the fused dispatches with grid barriers
  for (size_t i = 0; i < bounds.front(); ++i) {
    fused.dispatches.push_back(fusable.dispatches[i]);
    fused.names.push_back(fusable.names[i]);
    fused.weight_bytes.push_back(fusable.weight_bytes[i]);
    widest.push_back(0);
  }
  for (size_t k = 0; k + 1 < bounds.size(); ++k) {
    const std::span<const Dispatch> range(fusable.dispatches.data() + bounds[k], bounds[k + 1] - bounds[k]);
    const bool head = bounds[k] >= fusable.layer_begin.back();
    uint32_t w = 0;
    uint64_t wg_bytes = 0;
    Result<Dispatch> d =
        ops_.fuse(range, step_, sync_, static_cast<uint32_t>(1 + k), std::numeric_limits<uint32_t>::max(), &w,
                  options.max_copy_words, &wg_bytes);
    if (range.size() > 1) most_workgroup_bytes = std::max(most_workgroup_bytes, wg_bytes);
    if (!d.ok()) {
      fusion_status_ = cat("off: ", head ? std::string("the output head") : cat("fused dispatch ", k),
                           " cannot be fused: ", d.message());
      return {};
    }
    uint64_t bytes = 0;
    for (size_t i = bounds[k]; i < bounds[k + 1]; ++i) bytes += fusable.weight_bytes[i];
    fused.dispatches.push_back(*d);
    fused.names.push_back(range.size() == 1 ? cat(fusable.names[bounds[k]], " (fused form)")
                          : head            ? std::string("output head (fused)")
                                            : cat("layer part ", k, " (fused)"));
    fused.weight_bytes.push_back(bytes);
    widest.push_back(range.size() == 1 ? 0 : w);
  }
  fused.dispatches.push_back(failure_flag_copy());
  fused.names.push_back("failure flag");
  fused.weight_bytes.push_back(0);
  widest.push_back(0);
  fused_ = std::move(fused);
  fused_widest_ = std::move(widest);

  // The check: a few tokens at positions 0.. through both plans give the same logits, bit for bit (the later
  // positions attend to the cache rows the earlier ones wrote), with no barrier giving up; a fifth fewer
  // workgroups while one does (WebGPU does not say how many fit at once: the registers and workgroup memory of
  // the largest phase decide it).
  const int kCheckTokens = std::clamp(options.check_tokens, 1, n_ctx_);
  std::vector<std::vector<float>> expected;
  bool unused = false;
  SOTTO_TRY(run_check_tokens(false, kCheckTokens, &expected, &unused));
  // (Every fused dispatch a single phase, with no grid barrier: any grid will do.)
  uint32_t grid = options.grid > 0
                      ? options.grid
                      : std::max<uint32_t>(1, *std::max_element(fused_widest_.begin(), fused_widest_.end()));
  for (; grid > 0; grid = grid * 4 / 5) {  // fewer workgroups while some are not resident
    set_fused_grid(grid);
    std::vector<std::vector<float>> got, again;
    bool gave_up = false, gave_up_again = false;
    SOTTO_TRY(run_check_tokens(true, kCheckTokens, &got, &gave_up));
    if (gave_up) continue;  // a barrier gave up: fewer workgroups
    SOTTO_TRY(run_check_tokens(true, kCheckTokens, &again, &gave_up_again));
    for (int p = 0; p < kCheckTokens && !gave_up_again; ++p) {
      const size_t k = static_cast<size_t>(p);
      if (std::memcmp(got[k].data(), expected[k].data(), got[k].size() * 4) == 0 &&
          std::memcmp(again[k].data(), got[k].data(), got[k].size() * 4) == 0)
        continue;
      float diff = 0.0f, rerun = 0.0f;
      for (size_t i = 0; i < got[k].size(); ++i) {
        diff = std::max(diff, std::abs(got[k][i] - expected[k][i]));
        rerun = std::max(rerun, std::abs(again[k][i] - got[k][i]));
      }
      fusion_status_ = cat("off: the fused plan's logits differ from the plan's at position ", p,
                           " (max |diff| ", diff, "; between two fused runs ", rerun, ")");
      return {};
    }
    if (gave_up_again) continue;
    break;
  }
  if (grid == 0) {
    fusion_status_ = "off: a fused layer's grid barrier gave up at every grid size";
    return {};
  }
  // What each phase of the first layer had as separate dispatches (the workgroups a fused grid loops over).
  std::string phases;
  for (size_t i = fusable.layer_begin[0]; i < fusable.layer_begin[1]; ++i)
    phases += cat(phases.empty() ? "" : ", ", fusable.names[i], " ",
                  fusable.dispatches[i].groups_x * fusable.dispatches[i].groups_y);
  const std::string checked =
      cat(fused_.dispatches.size() - 1, " dispatches per token, grids of ", grid, " workgroups of ",
          most_workgroup_bytes, " bytes of workgroup memory (a layer's workgroups: ", phases,
          "); checked bit for bit over ", kCheckTokens, " tokens");
  use_fused_ = true;
  fusion_status_ = cat("on: ", checked);
  return {};
}

}  // namespace sotto::gpu
