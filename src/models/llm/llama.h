// The Llama-family decoder-only transformer (Llama / Llama 2 / Llama 3, Qwen2, Qwen3, Gemma 3), read straight
// from a GGUF file: weights stay in the file's bytes and are multiplied in their stored type.
//
//   load_llama(gguf)   hparams from `<arch>.*` keys, every tensor checked for presence, type and shape
//   LlamaContext       the KV cache and scratch buffers of one conversation
//   forward(...)       runs a batch of tokens (a whole prompt, or one token while writing) and returns the
//                      logits of the last one
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/error.h"
#include "core/thread_pool.h"
#include "cpu/linear.h"
#include "io/gguf.h"
#include "models/llm/kv_cache.h"

namespace sotto {

// How RoPE pairs up the dimensions of a head, as llama.cpp assigns it per architecture.
enum class RopeLayout : uint8_t {
  Adjacent,  // llama: (2i, 2i+1) rotate together (GGML_ROPE_TYPE_NORM)
  Halves,    // qwen2, qwen3: (i, i + n_rot/2) rotate together (GGML_ROPE_TYPE_NEOX)
};

// The feed-forward's gate activation: SwiGLU (silu(gate) * up) or Gemma's GeGLU (gelu(gate) * up).
enum class FfnActivation : uint8_t { Silu, Gelu };

struct LlamaHparams {
  std::string arch;  // general.architecture: "llama", "qwen2", "qwen3", "gemma3"
  int n_ctx_train = 0;
  int n_embd = 0;
  int n_layer = 0;
  int n_ff = 0;
  int n_head = 0;
  int n_head_kv = 0;
  int head_dim_k = 0;  // key_length (default n_embd / n_head)
  int head_dim_v = 0;  // value_length
  int n_rot = 0;       // rope.dimension_count: leading dims of each head that RoPE rotates
  int n_vocab = 0;
  float rms_norm_eps = 1e-5f;
  float rope_freq_base = 10000.0f;
  RopeLayout rope_layout = RopeLayout::Adjacent;
  float rope_freq_scale = 1.0f;  // linear RoPE scaling: angles times 1 / rope.scaling.factor (global layers)
  FfnActivation ffn_activation = FfnActivation::Silu;
  // Gemma 3 (the defaults leave the other architectures as they are):
  float embd_scale = 1.0f;  // token embeddings are multiplied by sqrt(n_embd)
  float q_scale = 0.0f;     // q times this after RoPE, attention's own scale then 1; 0: 1/sqrt(head_dim_k)
  int n_swa = 0;            // sliding window of the local layers, in positions; 0: no local layers
  int swa_period = 0;       // layer il is global when il % swa_period == swa_period - 1, else local
  float rope_freq_base_swa = 10000;  // local layers' RoPE base (no scaling there)
  float final_logit_softcap = 0.0f;  // logits = c * tanh(logits / c) when c > 0

  bool is_local(int il) const { return n_swa > 0 && (swa_period == 0 || il % swa_period < swa_period - 1); }
};

// A matrix used as y = W·x: `rows` outputs, `cols` inputs (GGUF ne = [cols, rows]), in its stored type.
struct Matrix {
  DType dtype = DType::F32;
  const void* data = nullptr;
  int64_t rows = 0;
  int64_t cols = 0;
};

struct LlamaLayer {
  const float* attn_norm = nullptr;
  Matrix wq, wk, wv, wo;
  const float* bq = nullptr;  // qwen2: biases on q, k, v (nullptr when absent)
  const float* bk = nullptr;
  const float* bv = nullptr;
  const float* q_norm = nullptr;  // qwen3: RMSNorm over each head of q and k before RoPE
  const float* k_norm = nullptr;
  const float* ffn_norm = nullptr;
  Matrix ffn_gate, ffn_up, ffn_down;
  const float* attn_post_norm = nullptr;  // gemma3: RMSNorm of each branch's output before it joins the
  const float* ffn_post_norm = nullptr;   // residual stream (nullptr when absent)
};

struct LlamaWeights {
  LlamaHparams hp;
  Matrix token_embd;  // rows = n_vocab, cols = n_embd; rows are dequantized on lookup
  std::vector<LlamaLayer> layers;
  const float* output_norm = nullptr;
  Matrix output;                   // output.weight, or token_embd when the file ties them
  std::vector<uint16_t> gelu_f16;  // GeGLU models: ggml's GELU table (cpu/gelu.h)
};

// Reads hparams and maps every tensor; the GgufFile's bytes must outlive the weights. Errors, one line each:
//   llm: unsupported architecture 'mamba' (supported: llama, qwen2, qwen3, gemma3)
//   llm: missing tensor 'blk.3.ffn_up.weight'
//   llm: tensor 'blk.3.attn_q.weight' has shape [64, 32], expected [64, 64]   (GGUF order, innermost first)
//   llm: tensor 'blk.0.attn_q.weight' has type q4_K, which the CPU matrix kernels do not support
Result<LlamaWeights> load_llama(const GgufFile& gguf);

// Per-conversation state: the KV cache plus buffers reused from call to call.
struct LlamaContext {
  KvCache kv;
  std::vector<float> x, h, delta, q, k, v, attn, gate, up, logits;
  LinearScratch linear_scratch;
};

// n_ctx <= 0 means the model's training context; larger than that is allowed (RoPE extrapolates) but the
// cache must fit in memory.
Result<LlamaContext> make_llama_context(const LlamaWeights& w, int n_ctx);

// Runs tokens at positions ctx.kv.n_past ... n_past + n - 1 (the prompt as one batch, or one new token),
// appends their keys and values to the cache and returns the logits (n_vocab) of the last token, valid until
// the next call. Fails without touching the cache when a token id is out of range or the cache is full.
Result<std::span<const float>> forward(ThreadPool& pool, const LlamaWeights& w, LlamaContext& ctx,
                                       std::span<const int32_t> tokens);

}  // namespace sotto
