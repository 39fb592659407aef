// The Llama-family forward pass (llama, qwen2, qwen3, gemma3) on the GPU: weights uploaded once from the GGUF bytes (the
// LlamaWeights of models/llm/llama.h), the decode step recorded once as a plan and replayed per token with
// only the position changing (a 16-byte uniform), greedy argmax on the GPU, and one 4-byte readback per token.
// Sampling also runs on the GPU: submit_sample() replays a two-dispatch tail after the plan that draws as the
// CPU Sampler does (its parameters, its generator's draw u and the recent ids written first, ~300 bytes).
//
//   per token:  write step {pos} (+ the token, when it comes from the prompt) ; run(plan) ; read tok
//   sampled:    ... ; run(plan) ; write sampling state ; run(sample tail: candidates, merge+draw) ; read tok
//   plan:       embed ; per layer [norm+qkv ; RoPE + KV write + attention ; wo (+= x) ; norm ; gate·up SwiGLU ;
//               down (+= x)] ; norm ; output ; argmax (2)        (Qwen2.5-0.5B Q4_0: 6 per layer + 5, 149)
//   gemma3:     embed (× sqrt(n_embd)) ; per layer [norm+qk, norm+v (two types) ; q/k norm + RoPE + KV write +
//               attention (window on local layers) ; wo ; post-norm (+= x) ; norm+gate·up GeGLU ; down ;
//               post-norm (+= x)] ; norm ; output (2 parts: the tied Q8_0 table is over 128 MiB) ; argmax (2)
// (The prompt plan runs RoPE + KV write as a dispatch of its own before attention, for all its tokens.)
// A matrix larger than the storage binding limit is split by rows into several buffers: one dispatch per
// part (each writes its rows of the output); the embedding lookup reads the part holding the token.
// Quantized matrix kernels quantize their input to q8_0 in workgroup memory (and apply the RMSNorm before
// it), so neither costs a dispatch.
//
// Numerics follow the CPU backend (and so llama.cpp): q8_0 activations for q4_0/q5_0/q8_0 weights and q8_K
// (256-value blocks, f32 scale) for the K-quants, an f16 KV cache, q rounded to f16 and the attention's running
// sum of values kept in f16.
//
// A prompt runs through a second plan recorded the same way over up to 128 tokens at once (prompt_batch()):
// the matrices as matrix x matrix (each weight word read once per 8 tokens), RoPE + KV write and causal
// attention for all its tokens, the step uniform saying how many this run has. It only fills the KV cache;
// the prompt's last token goes through the decode plan for the logits. Each prompt token's sums run in the
// decode kernels' order, so a prompt gives the logits it gives token by token. The plan is recorded for 8,
// 16, 32 and 64 tokens and for the whole batch (128, or fewer where the context or binding limit says), and a
// run takes the smallest that holds its tokens: a chat turn of 12 tokens launches a tenth of the 128-token
// plan's workgroups (on a CPU adapter such as SwiftShader, where every workgroup costs, its prompt ran slower
// than token by token).
//
// Decoding can also run a fused plan (gpu/fusion.h): each layer's dispatches as one, ~30 dispatches per token
// instead of ~170. It is built from the decode plan itself, checked against it once at load (the same logits, bit
// for bit, and no workgroup left waiting at a grid barrier) and used only when that passes; a token whose
// fused run reports a stuck barrier later runs again unfused, and fusion stays off.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "core/error.h"
#include "gpu/device.h"
#include "gpu/ops.h"
#include "models/llm/llama.h"
#include "models/llm/sampler.h"

namespace sotto::gpu {

// Which decode plan runs, chosen by rule, nothing timed at load. Auto: on a CPU adapter (SwiftShader), the
// separate dispatches (every workgroup of a fused grid costs there); on a GPU (natively, Vulkan), the
// hand-written layer kernels where the model has their shape and they pass their load-time check, at the widest
// grid whose barriers hold; else the separate dispatches. On the H200, Qwen2.5-0.5B-shaped Q4_0 decoded at
// 1,270 tokens/s through them against 788 separately after 16 tokens, 931 against 140 after 1,024
// (bench/results/2026-12-04-gpu-decode-rule.md). The rest are explicit overrides (`--fusion` in
// `sotto bench llm`, SOTTO_GPU_FUSED in the C API).
struct FusionOptions {
  // Layers: the layer kernels (models/llm/gpu/layer_kernel.h) also on a CPU adapter, all in one dispatch where
  // their weights share a buffer (checked within a tolerance), where the model has its shape; otherwise as Off.
  // On: the separate kernels rewritten into one dispatch per layer (gpu/fusion.h), where its check passes.
  enum class Mode { Auto, On, Off, Layers };
  Mode mode = Mode::Auto;
  uint32_t grid = 0;     // workgroups of a fused dispatch; 0: as many as the widest phase has
  int check_tokens = 6;  // tokens the load-time check runs through both plans
  // gpu/fusion.h fuse_phases(). On the H200 1,024 (bench/results/history-2026-12-03.md): with 2,048 the fused layer
  // needs 18.6 KB of workgroup memory and only 2 workgroups stay resident per SM (grid 248, 636 tokens/s),
  // with 1,024 14.0 KB and 3 (grid 388, 689 tokens/s), though the q8 rows are then read with atomic loads.
  uint32_t max_copy_words = 1024;
  // The output head's dispatches (norm, output matrix, argmax) each fused alone, with no grid barrier: as one
  // fused dispatch its 151936-row matrix ran on the layers' small grid, at half the speed (bench/README.md).
  bool head_apart = true;
  // Mode::Layers: layers a dispatch runs at most (0: all whose weights share a buffer, Qwen2.5-0.5B's 24).
  uint32_t layers_per_dispatch = 0;
};

// How attention sums the values (gpu/kernels.h wgsl_attention). F16: key by key with the sum rounded to f16 at
// each step, as ggml's CPU kernel, so the logits are the CPU backend's bit for bit; the chain of roundings is
// attention's main cost, and it grows with the context. F32: a chunk of keys at a time in f32, as llama.cpp's
// GPU backends do, and decoding spreads a head's keys over many workgroups (AttentionGpuArgs::splits); faster,
// above all in long contexts, not the CPU's bits (outputs within ~1e-3 of the value scale, the f16 sum's rounding).
enum class AttentionSum { F16, F32 };

class LlmGpu {
 public:
  // n_ctx <= 0: min(model's training context, 4096). Fails clearly for what the GPU path lacks (weight types
  // without a kernel, head sizes over 256, logit soft-capping). `fusion`: whether decoding may use the fused
  // plan (llm_gpu_fusion.cpp); a fused plan that cannot be built or fails its check only turns fusion off.
  // max_binding_bytes > 0: split matrices (and refuse buffers) above this size even where the device allows
  // more, to test the splitting with small models.
  static Result<std::unique_ptr<LlmGpu>> create(Device& device, const LlamaWeights& weights, int n_ctx,
                                                uint64_t max_binding_bytes = 0, FusionOptions fusion = {},
                                                AttentionSum attention_sum = AttentionSum::F16);

  // Runs one token at position n_past() and advances. token >= 0: that token (a prompt token); token < 0:
  // the GPU's own previous argmax (greedy decoding, nothing leaves the GPU). Only submits the work.
  Status submit(int32_t token);
  // Runs prompt tokens at positions n_past() .. through the prompt plan (matrix x matrix, causal attention;
  // up to prompt_batch() tokens per run) and advances; they only fill the KV cache: run the prompt's last token
  // through submit() for its logits and the next token. Only submits the work.
  Status submit_prompt(std::span<const int32_t> tokens);
  // Reads the argmax of the last submitted token's logits (4 bytes). Natively waits; in wasm Pending means
  // "return to JS and call finish() again".
  Status start_finish();
  DeviceStatus finish(int32_t* token);
  // Sampling on the GPU (models/llm/gpu/sample_state.h, gpu/kernels_sampling.cpp): after submit(), writes the token
  // the CPU Sampler would draw with `params` from these logits (u: that Sampler's next_draw(); `history`:
  // prompt and written tokens, for the repetition penalty) into the token buffer, in a second small run;
  // start_finish() and finish() then read it as they read the argmax. Plain greedy needs none of this.
  Status submit_sample(const SamplerParams& params, float u, std::span<const int32_t> history);
  // submit + start_finish + finish, for native callers.
  Result<int32_t> step(int32_t token);
  // n greedy tokens after the last submitted one, natively, as generation runs them (GpuTokenModel in
  // api/sotto_llm.cpp): each step is submitted before the previous token's id is read (`ahead`).
  Status decode_greedy(int n, std::vector<int32_t>* ids, bool ahead = true);
  // The logits of the last token (n_vocab floats), for checks.
  Result<std::vector<float>> logits();

  int n_past() const { return n_past_; }
  // Forgets the last n positions: a step submitted ahead that turned out not to be needed (its cache rows are
  // overwritten by whatever runs there next).
  void drop_last(int n) {
    n_past_ = n_past_ >= n ? n_past_ - n : 0;
    unchecked_.resize(unchecked_.size() - std::min<size_t>(unchecked_.size(), static_cast<size_t>(n)));
  }
  int n_ctx() const { return n_ctx_; }
  AttentionSum attention_sum() const { return attention_sum_; }
  int n_vocab() const { return hp_.n_vocab; }
  void reset() {
    n_past_ = 0;
    unchecked_.clear();
  }
  size_t dispatches_per_token() const;
  // The fused plan: whether it is in use, and what its load-time check found (why not, its grid, its speed).
  bool fused() const { return use_fused_; }
  void set_fused(bool on) { use_fused_ = on && !fused_.dispatches.empty(); }
  const std::string& fusion_status() const { return fusion_status_; }
  // Raises the fused plan's failure flag (to `value`, nonzero), as a grid barrier that gives up does: the next
  // read then reruns its tokens unfused, and turns fusion off at the third time (for tests of that path).
  Status raise_fusion_flag(uint32_t value = 1) {
    return sync_ ? device().write_buffer(sync_, 0, &value, 4) : Status{};
  }
  // Tokens per run of the (largest) prompt plan, and its dispatches; the sizes of all the recorded ones.
  uint32_t prompt_batch() const { return prompt_plans_.empty() ? 0 : prompt_plans_.back().tokens; }
  size_t prompt_dispatches() const {
    return prompt_plans_.empty() ? 0 : prompt_plans_.back().plan.dispatches.size();
  }
  std::vector<uint32_t> prompt_plan_sizes() const;
  // GPU time per dispatch of one replay (timestamp queries; empty when the device has none). The names say
  // which op each dispatch is.
  Status time_step(std::vector<std::pair<std::string, uint64_t>>* per_dispatch_ns);
  // The recorded decode step and what each dispatch is, for benchmarks that replay parts of it.
  // (The fused plan's while it is in use.)
  const std::vector<Dispatch>& plan() const { return use_fused_ ? fused_.dispatches : decode_.dispatches; }
  const std::vector<std::string>& plan_names() const { return use_fused_ ? fused_.names : decode_.names; }
  // Weight bytes each dispatch of the plan reads (0 for ops without weights), for GB/s.
  const std::vector<uint64_t>& weight_bytes_per_dispatch() const {
    return use_fused_ ? fused_.weight_bytes : decode_.weight_bytes;
  }
  Device& device() { return ops_.device(); }

 private:
  // A recorded forward pass: its dispatches, what each is, and the weight bytes each reads.
  struct Plan {
    std::vector<Dispatch> dispatches;
    std::vector<std::string> names;
    std::vector<uint64_t> weight_bytes;
    std::vector<size_t> layer_begin;  // the first dispatch of each layer, then the end of the last
    BufferHandle x = 0;               // the residual stream
  };
  struct LayerGpu {
    BufferHandle attn_norm = 0, ffn_norm = 0, q_norm = 0, k_norm = 0, attn_post_norm = 0, ffn_post_norm = 0;
    BufferHandle k_cache = 0, v_cache = 0, qkv_bias = 0;
    std::vector<GpuMatrixParts> qkv;  // q, k, v stacked (one matrix per run of one type)
    GpuMatrixParts wo, gate, up, down;
  };
  struct ModelGpu {
    GpuMatrixParts embd, output;
    BufferHandle output_norm = 0, rope = 0, rope_local = 0, gelu = 0;
    std::vector<LayerGpu> layers;
  };

  explicit LlmGpu(Device& device) : ops_(device) {}
  Status build(const LlamaWeights& w, int n_ctx);
  Status record_forward(uint32_t n_tokens, BufferHandle tok, Plan& out);
  // The fused decode plan from decode_ (llm_gpu_fusion.cpp), checked against it; fusion_status_ says why not.
  Status build_fused(const FusionOptions& options);
  // The same with models/llm/gpu/layer_kernel.h's kernels (llm_gpu_layer_kernel.cpp), checked within a tolerance.
  Status build_layer_kernels(const FusionOptions& options);
  uint64_t decode_activation_bytes() const;
  // What both load-time checks share (llm_gpu_fusion.cpp): `n` tokens at positions 0 .. (fixed ids) through the
  // fused plan or the separate dispatches, each token's logits into *out, *gave_up when a fused barrier gave up;
  // and the copy of the failure flag next to the token that ends a fused plan, for finish().
  Status run_check_tokens(bool fused, int n, std::vector<std::vector<float>>* out, bool* gave_up);
  Dispatch failure_flag_copy() const;
  void set_fused_grid(uint32_t grid);
  std::vector<uint32_t> fused_widest_;  // per dispatch of fused_: the most workgroups it can use (0: unfused)
  Status run_decode();
  // A fused token whose barrier gave up: run it again through decode_ (and its sampling tail); the fused plan
  // stays in use until the kFusedGiveUpLimit-th give-up.
  Status rerun_unfused();

  Ops ops_;
  LlamaHparams hp_;
  int n_ctx_ = 0, n_past_ = 0;
  AttentionSum attention_sum_ = AttentionSum::F16;
  bool recording_fusable_ = false;  // build_fused's recording: attention unsplit (one workgroup per head)
  ModelGpu model_;
  Plan decode_;
  // The prompt plans, smallest first, each for `tokens` tokens (a multiple of kMatmatTokens); they share the
  // token buffer prompt_tok_ (the largest plan's size). Empty: no prompt plan fits the binding limit.
  struct PromptPlan {
    uint32_t tokens = 0;
    Plan plan;
  };
  std::vector<PromptPlan> prompt_plans_;
  BufferHandle step_ = 0, tok_ = 0, prompt_tok_ = 0, logits_ = 0;
  ReadHandle pending_read_ = 0;
  // Fusion: the fused plan, the sync words (failure flag, one barrier counter per fused dispatch), whether it is
  // in use, and what a rerun needs: the last token's input (< 0: the previous output) and sampling.
  Plan fused_;
  BufferHandle sync_ = 0;
  uint32_t sync_words_ = 0;
  bool use_fused_ = false, last_run_fused_ = false;
  // The failure flag's value when it was last seen raised: the layer kernels put there which barrier gave up
  // and the arrivals its counter held (models/llm/gpu/layer_kernel.cpp grid_sync); give_up_detail() words it.
  uint32_t last_give_up_ = 0;
  int decode_give_ups_ = 0;                    // fused tokens rerun after a give-up, while decoding
  static constexpr int kFusedGiveUpLimit = 3;  // the give-up that turns the fused plan off
  uint32_t layer_grid_ = 0;                    // the layer kernels' workgroups, as last installed
  std::string give_up_detail() const;
  std::string fusion_status_ = "not built";
  // Inputs of the fused tokens not yet read back, from position unchecked_from_ (< 0: the previous step's
  // choice, known once that step is read), and how many of them the read in flight covers.
  std::vector<int32_t> unchecked_;
  int unchecked_from_ = 0;
  size_t read_covers_ = 0;
  int32_t last_output_ = -1;
  bool last_sampled_ = false;
  SamplerParams last_sample_params_;
  float last_sample_u_ = 0.0f;
  std::vector<int32_t> last_sample_history_;
  // The sampling tail (llm_gpu_sampling.cpp), recorded on first use: reads logits_, writes tok_.
  std::vector<Dispatch> sample_plan_;
  BufferHandle sample_state_ = 0, sample_candidates_ = 0;
};

}  // namespace sotto::gpu
