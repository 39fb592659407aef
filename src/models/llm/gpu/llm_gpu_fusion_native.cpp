// LlmGpu::build_fused (models/llm/gpu/llm_gpu.h): the decode plan chosen by rule, and the fused plan
// (gpu/fusion.h): the embedding, one dispatch per layer, the output head and argmax as recorded, then a copy of
// the failure flag next to the token. Native only: both the fused plan and the layer kernels are checked at
// load against the separate dispatches by reading back synchronously, which only a native device can; the
// browser's module has the separate dispatches alone (llm_gpu_fusion_wasm.cpp).
#include <algorithm>
#include <limits>

#include "models/llm/gpu/llm_gpu.h"

namespace sotto::gpu {

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
  // Fused: the embedding as it is, each layer as one dispatch, the output head's
  // dispatches each alone (options.head_apart) or as one. A lone phase has no grid barrier: Ops::fuse gives it
  // all its workgroups, and its widest is recorded as 0 so that set_fused_grid() leaves it so.
  std::vector<size_t> bounds;
  for (size_t k = 0; k + 1 < fusable.layer_begin.size(); ++k) bounds.push_back(fusable.layer_begin[k]);
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
