// The Llama-family forward pass (llama, qwen2, qwen3, gemma3) on the GPU: weights uploaded once from the GGUF bytes (the
// LlamaWeights of models/llm/llama.h), the decode step recorded once as a plan and replayed per token with
// only the position changing (a 16-byte uniform), greedy argmax on the GPU, and one 4-byte readback per token.
//
//   per token:  write step {pos} (+ the token, when it comes from the prompt) ; run(plan) ; read tok
//   plan:       embed ; per layer [norm+qkv ; rope+KV ; attention ; wo (+= x) ; norm+gate·up SwiGLU ;
//               down (+= x)] ; norm+output ; argmax (2)          (6 per layer + 4; f32/f16 weights: norms apart)
//   gemma3:     embed (× sqrt(n_embd)) ; per layer [norm+qk, norm+v (two types) ; q/k norm+rope+KV ;
//               attention (window on local layers) ; wo ; post-norm (+= x) ; norm+gate·up GeGLU ; down ;
//               post-norm (+= x)] ; norm ; output (2 parts: the tied Q8_0 table is over 128 MiB) ; argmax (2)
// A matrix larger than the storage binding limit is split by rows into several buffers: one dispatch per
// part (each writes its rows of the output); the embedding lookup reads the part holding the token.
// Quantized matrix kernels quantize their input to q8_0 in workgroup memory (and apply the RMSNorm before
// it), so neither costs a dispatch.
//
// Numerics follow the CPU backend (and so llama.cpp): q8_0 activations for q4_0/q5_0/q8_0 weights, an f16
// KV cache, q rounded to f16 and the attention's running sum of values kept in f16. K-quants take q8_0
// activations here where the CPU takes q8_K (256-blocks with an f32 scale): same integer dots, slightly
// different rounding of x. A prompt runs through the same plan one token at a time (no matrix x matrix yet).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/error.h"
#include "gpu/device.h"
#include "gpu/ops.h"
#include "models/llm/llama.h"

namespace sotto::gpu {

class LlmGpu {
 public:
  // n_ctx <= 0: min(model's training context, 4096). Fails clearly for what the GPU path lacks (weight types
  // without a kernel, a context too large for the attention kernel, logit soft-capping).
  // max_binding_bytes > 0: split matrices (and refuse buffers) above this size even where the device allows
  // more, to test the splitting with small models.
  static Result<std::unique_ptr<LlmGpu>> create(Device& device, const LlamaWeights& weights, int n_ctx,
                                                uint64_t max_binding_bytes = 0);

  // Runs one token at position n_past() and advances. token >= 0: that token (a prompt token); token < 0:
  // the GPU's own previous argmax (greedy decoding, nothing leaves the GPU). Only submits the work.
  Status submit(int32_t token);
  // Reads the argmax of the last submitted token's logits (4 bytes). Natively waits; in wasm Pending means
  // "return to JS and call finish() again".
  Status start_finish();
  DeviceStatus finish(int32_t* token);
  // submit + start_finish + finish, for native callers.
  Result<int32_t> step(int32_t token);
  // The logits of the last token (n_vocab floats), for checks.
  Result<std::vector<float>> logits();

  int n_past() const { return n_past_; }
  int n_ctx() const { return n_ctx_; }
  void reset() { n_past_ = 0; }
  size_t dispatches_per_token() const { return plan_.size(); }
  // GPU time per dispatch of one replay (timestamp queries; empty when the device has none). The names say
  // which op each dispatch is.
  Status time_step(std::vector<std::pair<std::string, uint64_t>>* per_dispatch_ns);
  // The recorded decode step and what each dispatch is, for benchmarks that replay parts of it.
  const std::vector<Dispatch>& plan() const { return plan_; }
  const std::vector<std::string>& plan_names() const { return plan_names_; }
  // Weight bytes each dispatch of the plan reads (0 for ops without weights), for GB/s.
  const std::vector<uint64_t>& weight_bytes_per_dispatch() const { return plan_weight_bytes_; }
  Device& device() { return ops_.device(); }

 private:
  explicit LlmGpu(Device& device) : ops_(device) {}
  Status build(const LlamaWeights& w, int n_ctx);

  Ops ops_;
  LlamaHparams hp_;
  int n_ctx_ = 0, n_past_ = 0;
  std::vector<Dispatch> plan_;
  std::vector<std::string> plan_names_;
  std::vector<uint64_t> plan_weight_bytes_;
  BufferHandle step_ = 0, tok_ = 0, logits_ = 0;
  ReadHandle pending_read_ = 0;
};

}  // namespace sotto::gpu
