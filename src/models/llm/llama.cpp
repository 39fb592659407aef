// Llama: a decoder-only transformer with pre-RMSNorm, rotary position embeddings, grouped-query attention
// and a SwiGLU MLP (Touvron et al., "LLaMA: Open and Efficient Foundation Language Models", 2023). Qwen2 is
// the same figure with biases on q/k/v and RoPE in halves; Qwen3 adds an RMSNorm over each head of q and k.
// Gemma 3 (Gemma Team, "Gemma 3 Technical Report", 2025) keeps Qwen3's q/k norms and adds: embeddings scaled
// by sqrt(n_embd), an RMSNorm on each branch's output before the residual add, a GeGLU MLP, q scaled after
// RoPE, and five local layers (sliding-window attention, RoPE base 10000) to every global one.
//
//   x = embed(token)
//   for each layer:  x += attention(rms_norm(x, attn_norm), layer, pos)
//                    x += mlp(rms_norm(x, ffn_norm))
//   logits = output · rms_norm(x, output_norm)
//
// Where the time goes: the matrix multiplies (linear(), cpu/linear.h) read every weight once per batch; they
// are the hot loop at short contexts. Attention over the cache (attention_f16(), cpu/attention.h: 12.5-18 ns
// per query, key and head with AVX2 at head_dim 64, one core) grows with the depth: in a 26-token chat turn
// at depth 1024 it is ~40% of the CPU time, at 8192 most of it; in decode at 8192 about two thirds.
//
// Numerics follow llama.cpp's CPU path so greedy decoding picks the same tokens: activations are quantized
// the way ggml quantizes them for each weight type (inside linear()), the KV cache is f16, and attention is
// ggml's flash-attention kernel (llama.cpp's default on the CPU: flash_attn_type AUTO resolves to enabled):
// q rounded to f16, scores in f32, online softmax with the weighted sum of values accumulated in f16.
#include "models/llm/llama.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "core/half.h"
#include "cpu/attention.h"
#include "cpu/gelu.h"

namespace sotto {

// ================================================================ loading

namespace {

std::string ne_text(std::span<const int64_t> ne) {
  std::string out = "[";
  for (size_t i = 0; i < ne.size(); ++i) out += cat(i ? ", " : "", ne[i]);
  return out + "]";
}

// Maps one tensor by name, checking it exists and has exactly the expected shape (GGUF order).
class TensorMap {
 public:
  explicit TensorMap(const GgufFile& gguf) : gguf_(gguf) {}

  Result<const GgufTensor*> get(const std::string& name, std::span<const int64_t> expected_ne) const {
    const GgufTensor* t = gguf_.find_tensor(name);
    if (!t) return error("llm: missing tensor '", name, "'");
    if (t->ne_dims().size() != expected_ne.size() ||
        !std::equal(expected_ne.begin(), expected_ne.end(), t->ne_dims().begin()))
      return error("llm: tensor '", name, "' has shape ", ne_text(t->ne_dims()), ", expected ",
                   ne_text(expected_ne));
    return t;
  }
  bool has(const std::string& name) const { return gguf_.find_tensor(name) != nullptr; }

  // Norm weights and biases: 1-D, f32 (llama.cpp never quantizes 1-D tensors).
  Result<const float*> vector(const std::string& name, int64_t n) const {
    const int64_t ne[1] = {n};
    SOTTO_ASSIGN(const GgufTensor* t, get(name, ne));
    if (t->dtype != DType::F32)
      return error("llm: tensor '", name, "' has type ", dtype_name(t->dtype), ", expected f32");
    return reinterpret_cast<const float*>(t->data);
  }
  Result<const float*> optional_vector(const std::string& name, int64_t n) const {
    if (!has(name)) return static_cast<const float*>(nullptr);
    return vector(name, n);
  }

  // A weight matrix of `rows` outputs and `cols` inputs, in a type the CPU kernels multiply.
  Result<Matrix> matrix(const std::string& name, int64_t rows, int64_t cols) const {
    const int64_t ne[2] = {cols, rows};
    SOTTO_ASSIGN(const GgufTensor* t, get(name, ne));
    if (!linear_supported(t->dtype))
      return error("llm: tensor '", name, "' has type ", dtype_name(t->dtype),
                   ", which the CPU matrix kernels do not support");
    return Matrix{t->dtype, t->data, rows, cols};
  }

 private:
  const GgufFile& gguf_;
};

// fallback 0: the key is required.
Result<int> positive_key(const GgufFile& gguf, const std::string& key, int fallback) {
  if (!gguf.find(key)) {
    if (fallback > 0) return fallback;
    return error("llm: missing metadata key '", key, "'");
  }
  SOTTO_ASSIGN(uint32_t v, gguf.get_u32(key));
  if (v == 0 || v > (1u << 24)) return error("llm: metadata key '", key, "' is ", v, ", out of range");
  return static_cast<int>(v);
}

// Linear RoPE scaling (rope.scaling.type "linear", e.g. Gemma 3 4B's global layers): llama.cpp multiplies
// every angle by 1 / rope.scaling.factor. Other kinds (YaRN, ...) change the formula and are refused.
Status read_rope_scaling(const GgufFile& gguf, const std::string& p, LlamaHparams& hp) {
  if (gguf.find(p + "rope.scaling.type")) {
    SOTTO_ASSIGN(std::string_view type, gguf.get_string(p + "rope.scaling.type"));
    if (type != "none" && type != "linear")
      return error("llm: rope.scaling.type '", type, "' is not supported (supported: none, linear)");
    if (type == "none") return {};
  }
  if (gguf.find(p + "rope.scaling.factor")) {
    SOTTO_ASSIGN(float factor, gguf.get_f32(p + "rope.scaling.factor"));
    if (!(factor >= 0.0f) || factor > 1e6f)
      return error("llm: rope.scaling.factor ", factor, " is out of range");
    if (factor > 0.0f) hp.rope_freq_scale = 1.0f / factor;  // 0 means none, as in llama.cpp
  }
  return {};
}

// Gemma 3's keys, with llama.cpp's defaults (llama_model_gemma3::load_arch_hparams): local layers only when
// attention.sliding_window is set, then every 6th layer global unless sliding_window_pattern says otherwise.
Status read_gemma3_hparams(const GgufFile& gguf, const std::string& p, LlamaHparams& hp) {
  hp.ffn_activation = FfnActivation::Gelu;
  hp.embd_scale = std::sqrt(static_cast<float>(hp.n_embd));
  // 1/sqrt(head_dim); the 27B model (62 layers) uses 1/sqrt(n_embd / n_head) instead.
  hp.q_scale = hp.n_layer == 62 ? 1.0f / std::sqrt(static_cast<float>(hp.n_embd / hp.n_head))
                                : 1.0f / std::sqrt(static_cast<float>(hp.head_dim_k));
  if (gguf.find(p + "attention.sliding_window")) {
    SOTTO_ASSIGN(uint32_t window, gguf.get_u32(p + "attention.sliding_window"));
    if (window > (1u << 24)) return error("llm: attention.sliding_window ", window, " is out of range");
    hp.n_swa = static_cast<int>(window);
  }
  if (hp.n_swa > 0) {
    hp.swa_period = 6;
    if (gguf.find(p + "attention.sliding_window_pattern")) {
      SOTTO_ASSIGN(uint32_t period, gguf.get_u32(p + "attention.sliding_window_pattern"));
      if (period > 1024) return error("llm: attention.sliding_window_pattern ", period, " is out of range");
      hp.swa_period = static_cast<int>(period);
    }
    if (gguf.find(p + "rope.freq_base_swa")) {
      SOTTO_ASSIGN(hp.rope_freq_base_swa, gguf.get_f32(p + "rope.freq_base_swa"));
      if (!(hp.rope_freq_base_swa > 0.0f))
        return error("llm: rope.freq_base_swa ", hp.rope_freq_base_swa, " is not positive");
    }
  }
  if (gguf.find(p + "final_logit_softcapping")) {
    SOTTO_ASSIGN(hp.final_logit_softcap, gguf.get_f32(p + "final_logit_softcapping"));
    if (!(hp.final_logit_softcap >= 0.0f))
      return error("llm: final_logit_softcapping ", hp.final_logit_softcap, " is negative");
  }
  return {};
}

Result<LlamaHparams> read_hparams(const GgufFile& gguf) {
  LlamaHparams hp;
  SOTTO_ASSIGN(std::string_view arch, gguf.get_string("general.architecture"));
  hp.arch = std::string(arch);
  if (arch == "llama") {
    hp.rope_layout = RopeLayout::Adjacent;
  } else if (arch == "qwen2" || arch == "qwen3" || arch == "gemma3") {
    hp.rope_layout = RopeLayout::Halves;
  } else {
    return error("llm: unsupported architecture '", arch, "' (supported: llama, qwen2, qwen3, gemma3)");
  }
  const std::string p = hp.arch + ".";
  SOTTO_ASSIGN(hp.n_ctx_train, positive_key(gguf, p + "context_length", 0));
  SOTTO_ASSIGN(hp.n_embd, positive_key(gguf, p + "embedding_length", 0));
  SOTTO_ASSIGN(hp.n_layer, positive_key(gguf, p + "block_count", 0));
  SOTTO_ASSIGN(hp.n_ff, positive_key(gguf, p + "feed_forward_length", 0));
  SOTTO_ASSIGN(hp.n_head, positive_key(gguf, p + "attention.head_count", 0));
  SOTTO_ASSIGN(hp.n_head_kv, positive_key(gguf, p + "attention.head_count_kv", hp.n_head));
  if (hp.n_head % hp.n_head_kv != 0)
    return error("llm: ", hp.n_head, " attention heads cannot share ", hp.n_head_kv, " KV heads evenly");
  // Without key_length / value_length a head is n_embd / n_head wide, so n_embd must split evenly.
  const bool head_dims_given =
      gguf.find(p + "attention.key_length") && gguf.find(p + "attention.value_length");
  if (hp.n_embd % hp.n_head != 0 && !head_dims_given)
    return error("llm: ", p, "embedding_length = ", hp.n_embd, " does not split into ", hp.n_head, " heads (",
                 p, "attention.head_count), and the file gives no attention.key_length / value_length");
  const int default_head_dim = hp.n_embd % hp.n_head == 0 ? hp.n_embd / hp.n_head : 0;
  SOTTO_ASSIGN(hp.head_dim_k, positive_key(gguf, p + "attention.key_length", default_head_dim));
  SOTTO_ASSIGN(hp.head_dim_v, positive_key(gguf, p + "attention.value_length", default_head_dim));
  SOTTO_ASSIGN(hp.n_rot, positive_key(gguf, p + "rope.dimension_count", hp.head_dim_k));
  if (hp.n_rot > hp.head_dim_k || hp.n_rot % 2 != 0)
    return error("llm: rope.dimension_count ", hp.n_rot, " does not fit a head of ", hp.head_dim_k);
  SOTTO_ASSIGN(hp.rms_norm_eps, gguf.get_f32(p + "attention.layer_norm_rms_epsilon"));
  if (gguf.find(p + "rope.freq_base")) {
    SOTTO_ASSIGN(hp.rope_freq_base, gguf.get_f32(p + "rope.freq_base"));
  }
  if (!(hp.rope_freq_base > 0.0f))
    return error("llm: rope.freq_base ", hp.rope_freq_base, " is not positive");
  SOTTO_TRY(read_rope_scaling(gguf, p, hp));
  if (arch == "gemma3") SOTTO_TRY(read_gemma3_hparams(gguf, p, hp));
  return hp;
}

}  // namespace

Result<LlamaWeights> load_llama(const GgufFile& gguf) {
  LlamaWeights w;
  SOTTO_ASSIGN(w.hp, read_hparams(gguf));
  LlamaHparams& hp = w.hp;
  const TensorMap tensors(gguf);

  // The vocabulary size is the embedding's outer dimension.
  const GgufTensor* embd = gguf.find_tensor("token_embd.weight");
  if (!embd) return error("llm: missing tensor 'token_embd.weight'");
  if (embd->n_dims != 2 || embd->ne[1] <= 0 || embd->ne[1] > (int64_t{1} << 24))
    return error("llm: tensor 'token_embd.weight' has shape ", ne_text(embd->ne_dims()), ", expected [",
                 hp.n_embd, ", n_vocab]");
  hp.n_vocab = static_cast<int>(embd->ne[1]);
  {
    const int64_t ne[2] = {hp.n_embd, hp.n_vocab};
    SOTTO_TRY(tensors.get("token_embd.weight", ne).status());
    if (!dtype_can_dequantize(embd->dtype))
      return error("llm: tensor 'token_embd.weight' has type ", dtype_name(embd->dtype),
                   ", which cannot be read");
    w.token_embd = Matrix{embd->dtype, embd->data, hp.n_vocab, hp.n_embd};
  }

  const int64_t q_dim = int64_t{hp.n_head} * hp.head_dim_k;
  const int64_t k_dim = int64_t{hp.n_head_kv} * hp.head_dim_k;
  const int64_t v_dim = int64_t{hp.n_head_kv} * hp.head_dim_v;
  const int64_t out_dim = int64_t{hp.n_head} * hp.head_dim_v;
  const bool has_bias = hp.arch == "qwen2";
  const bool has_qk_norm = hp.arch == "qwen3" || hp.arch == "gemma3";
  const bool has_post_norms = hp.arch == "gemma3";
  w.layers.resize(static_cast<size_t>(hp.n_layer));
  for (int il = 0; il < hp.n_layer; ++il) {
    LlamaLayer& l = w.layers[static_cast<size_t>(il)];
    const std::string b = cat("blk.", il, ".");
    SOTTO_ASSIGN(l.attn_norm, tensors.vector(b + "attn_norm.weight", hp.n_embd));
    SOTTO_ASSIGN(l.wq, tensors.matrix(b + "attn_q.weight", q_dim, hp.n_embd));
    SOTTO_ASSIGN(l.wk, tensors.matrix(b + "attn_k.weight", k_dim, hp.n_embd));
    SOTTO_ASSIGN(l.wv, tensors.matrix(b + "attn_v.weight", v_dim, hp.n_embd));
    SOTTO_ASSIGN(l.wo, tensors.matrix(b + "attn_output.weight", hp.n_embd, out_dim));
    if (has_bias) {
      SOTTO_ASSIGN(l.bq, tensors.vector(b + "attn_q.bias", q_dim));
      SOTTO_ASSIGN(l.bk, tensors.vector(b + "attn_k.bias", k_dim));
      SOTTO_ASSIGN(l.bv, tensors.vector(b + "attn_v.bias", v_dim));
    } else {  // Llama files may carry biases too (llama.cpp reads them when present)
      SOTTO_ASSIGN(l.bq, tensors.optional_vector(b + "attn_q.bias", q_dim));
      SOTTO_ASSIGN(l.bk, tensors.optional_vector(b + "attn_k.bias", k_dim));
      SOTTO_ASSIGN(l.bv, tensors.optional_vector(b + "attn_v.bias", v_dim));
    }
    if (has_qk_norm) {
      SOTTO_ASSIGN(l.q_norm, tensors.vector(b + "attn_q_norm.weight", hp.head_dim_k));
      SOTTO_ASSIGN(l.k_norm, tensors.vector(b + "attn_k_norm.weight", hp.head_dim_k));
    }
    SOTTO_ASSIGN(l.ffn_norm, tensors.vector(b + "ffn_norm.weight", hp.n_embd));
    SOTTO_ASSIGN(l.ffn_gate, tensors.matrix(b + "ffn_gate.weight", hp.n_ff, hp.n_embd));
    SOTTO_ASSIGN(l.ffn_up, tensors.matrix(b + "ffn_up.weight", hp.n_ff, hp.n_embd));
    SOTTO_ASSIGN(l.ffn_down, tensors.matrix(b + "ffn_down.weight", hp.n_embd, hp.n_ff));
    if (has_post_norms) {
      SOTTO_ASSIGN(l.attn_post_norm, tensors.vector(b + "post_attention_norm.weight", hp.n_embd));
      SOTTO_ASSIGN(l.ffn_post_norm, tensors.vector(b + "post_ffw_norm.weight", hp.n_embd));
    }
  }
  if (hp.ffn_activation == FfnActivation::Gelu) w.gelu_f16 = make_gelu_f16_table();
  SOTTO_ASSIGN(w.output_norm, tensors.vector("output_norm.weight", hp.n_embd));
  if (tensors.has("output.weight")) {
    SOTTO_ASSIGN(w.output, tensors.matrix("output.weight", hp.n_vocab, hp.n_embd));
  } else {  // tied embeddings (Qwen2.5 0.5B): the output projection is the embedding table
    if (!linear_supported(w.token_embd.dtype))
      return error("llm: tensor 'token_embd.weight' doubles as the output but has type ",
                   dtype_name(w.token_embd.dtype), ", which the CPU matrix kernels do not support");
    w.output = w.token_embd;
  }
  return w;
}

Result<LlamaContext> make_llama_context(const LlamaWeights& w, int n_ctx) {
  const LlamaHparams& hp = w.hp;
  LlamaContext ctx;
  SOTTO_ASSIGN(ctx.kv, make_kv_cache(n_ctx > 0 ? n_ctx : hp.n_ctx_train, hp.n_layer,
                                     hp.n_head_kv * hp.head_dim_k, hp.n_head_kv * hp.head_dim_v));
  ctx.logits.resize(static_cast<size_t>(hp.n_vocab));
  return ctx;
}

// ================================================================ building blocks

namespace {

// y = x / rms(x) * weight, over n values. The sum of squares is kept in double, as ggml does.
void rms_norm(const float* x, const float* weight, float* y, int n, float eps) {
  double sum = 0.0;
  for (int i = 0; i < n; ++i) sum += static_cast<double>(x[i] * x[i]);
  const float mean = static_cast<float>(sum / n);
  const float scale = 1.0f / std::sqrt(mean + eps);
  for (int i = 0; i < n; ++i) y[i] = x[i] * scale * weight[i];
}

void rms_norm_rows(const float* x, const float* weight, int n, int d, float eps, float* y) {
  for (int t = 0; t < n; ++t) rms_norm(x + t * d, weight, y + t * d, d, eps);
}

void add_rows(float* x, const float* delta, int n, int d) {
  for (size_t i = 0; i < static_cast<size_t>(n) * static_cast<size_t>(d); ++i) x[i] += delta[i];
}

// cos and sin of the angles pos·base^(-2i/n_rot), i < n_rot / 2, as pairs: ggml's rope cache, computed once
// per position and shared by every head (per head, the cos/sin calls cost a prompt ~15% of its time). The
// angle is stepped by repeated multiplication, as ggml does, so it rounds the same way; freq_scale (linear
// scaling) multiplies each angle at the end, as ggml's rope_yarn does without YaRN.
void rope_cache(int n_rot, int pos, float freq_base, float freq_scale, float* cos_sin) {
  const float theta_scale = std::pow(freq_base, -2.0f / static_cast<float>(n_rot));
  float theta = static_cast<float>(pos);
  for (int i = 0; i < n_rot / 2; ++i) {
    const float angle = freq_scale * theta;
    cos_sin[2 * i] = std::cos(angle);
    cos_sin[2 * i + 1] = std::sin(angle);
    theta *= theta_scale;
  }
}

// Rotates the first n_rot dims of one head by the angles of rope_cache().
void rope(float* head, int n_rot, const float* cos_sin, RopeLayout layout) {
  for (int i = 0; i < n_rot / 2; ++i) {
    const float c = cos_sin[2 * i], s = cos_sin[2 * i + 1];
    const int a = layout == RopeLayout::Adjacent ? 2 * i : i;
    const int b = layout == RopeLayout::Adjacent ? 2 * i + 1 : i + n_rot / 2;
    const float x0 = head[a], x1 = head[b];
    head[a] = x0 * c - x1 * s;
    head[b] = x0 * s + x1 * c;
  }
}

// Runs task(ith, nth) on the pool for a batch of tokens; inline for one token, where waking the other threads
// for a few microseconds of work costs more than it saves.
template <class F>
void run_for_tokens(ThreadPool& pool, int n, F&& task) {
  if (n == 1)
    task(0, 1);
  else
    pool.run(task);
}

// y[t × rows + r] += bias[r] for n tokens; no bias, nothing.
void add_bias(const float* bias, int64_t rows, int n, float* y) {
  if (bias)
    for (int t = 0; t < n; ++t)
      for (int64_t r = 0; r < rows; ++r) y[t * rows + r] += bias[r];
}

// y[n × rows] = x[n × cols] · Wᵀ (+ bias per row).
void matmul(ThreadPool& pool, const Matrix& w, const float* x, int n, float* y, LinearScratch& scratch,
            const float* bias = nullptr) {
  linear(pool, w.dtype, w.data, w.rows, w.cols, x, n, y, scratch);
  add_bias(bias, w.rows, n, y);
}

float silu(float x) {
  return x / (1.0f + std::exp(-x));
}

// a * b + c rounded once to f32 where it matters: the product of two f32 is exact in f64, the sum rounds to f64
// and then to f32 (a true FMA except where that second rounding meets an f32 tie, about 1 in 2^29). Plain f64
// arithmetic, so every target (natively without -mfma, wasm without a scalar FMA) gets the same bits fast.
float fma_f64(float a, float b, float c) {
  return static_cast<float>(static_cast<double>(a) * static_cast<double>(b) + static_cast<double>(c));
}

// 2^k for |k| <= 126, exactly.
float pow2(int k) {
  const uint32_t bits = static_cast<uint32_t>(k + 127) << 23;
  float v;
  std::memcpy(&v, &bits, 4);
  return v;
}

// llama.cpp's vector exp (ggml-cpu/vec.h ggml_v_expf, the AVX-512 form its x86 backend runs), lane by lane:
// exp(x) = 2^n * p(b), n = round(x / ln 2), b = x - n ln 2 in two steps, p a degree-5 polynomial; |n| > 192
// gives 0 or infinity. It differs from libm's expf in the last bit for many x, and ggml's swiglu takes it for
// all but the last n_ff % 16 values of a row.
float ggml_vector_expf(float x) {
  const float r = 0x1.8p23f;
  const float z = fma_f64(x, 0x1.715476p+0f, r);
  const float n = z - r;
  const float b = fma_f64(-n, 0x1.7f7d1cp-20f, fma_f64(-n, 0x1.62e4p-1f, x));
  if (n > 192.0f || n < -192.0f) return n <= 0.0f ? 0.0f : std::numeric_limits<float>::infinity();
  const float u = b * b;
  const float j = fma_f64(
      fma_f64(fma_f64(0x1.0e4020p-7f, b, 0x1.573e2ep-5f), u, fma_f64(0x1.555e66p-3f, b, 0x1.fffdb6p-2f)), u,
      fma_f64(0x1.ffffecp-1f, b, 1.0f));
  const int k = static_cast<int>(n), half = k / 2;  // two exact scalings, one rounding (as vscalefps)
  return (j * pow2(half)) * pow2(k - half);
}

// ggml_vec_swiglu_f32's silu for element i of a row of n_ff values: the vector exp for the whole groups of
// 16, libm's for the rest (ggml_silu_f32).
float swiglu_silu(float x, int64_t i, int64_t n_ff) {
  if (i < n_ff - n_ff % 16) return x / (1.0f + ggml_vector_expf(0.0f - x));
  return silu(x);
}

// ggml_scale, ggml_tanh, ggml_scale; tanh in double rounded to f32 (the wasm build has no tanhf).
void softcap(float* logits, int n, float cap) {
  const float inv_cap = 1.0f / cap;
  for (int i = 0; i < n; ++i)
    logits[i] = static_cast<float>(std::tanh(static_cast<double>(logits[i] * inv_cap))) * cap;
}

}  // namespace

// ================================================================ forward

namespace {

// attention(h) for a batch of n tokens at positions pos0..pos0+n-1: every token's k and v go to the cache,
// and the last n_out tokens' outputs (n_out × n_embd) to `out`.
void attention(ThreadPool& pool, const LlamaWeights& w, LlamaContext& ctx, int il, const float* h, int n,
               int n_out, int pos0, float* out) {
  const LlamaHparams& hp = w.hp;
  const LlamaLayer& l = w.layers[static_cast<size_t>(il)];
  const int q_row = hp.n_head * hp.head_dim_k, k_row = ctx.kv.k_row, v_row = ctx.kv.v_row;
  float* q = ctx.q.data();
  float* k = ctx.k.data();
  float* v = ctx.v.data();
  const int q_first = n - n_out;  // q of token t is row t - q_first
  if (n_out == n) {               // q, k and v of the same h in one pass
    const LinearJob jobs[3] = {{l.wq.dtype, l.wq.data, l.wq.rows, q},
                               {l.wk.dtype, l.wk.data, l.wk.rows, k},
                               {l.wv.dtype, l.wv.data, l.wv.rows, v}};
    linear_shared_x(pool, jobs, 3, hp.n_embd, h, n, ctx.linear_scratch);
    add_bias(l.bq, l.wq.rows, n, q);
    add_bias(l.bk, l.wk.rows, n, k);
    add_bias(l.bv, l.wv.rows, n, v);
  } else {
    matmul(pool, l.wq, h + static_cast<size_t>(q_first) * hp.n_embd, n_out, q, ctx.linear_scratch, l.bq);
    matmul(pool, l.wk, h, n, k, ctx.linear_scratch, l.bk);
    matmul(pool, l.wv, h, n, v, ctx.linear_scratch, l.bv);
  }

  // Local (sliding-window) layers have their own RoPE base and no scaling, as in llama.cpp.
  const bool local = hp.is_local(il);
  const float freq_base = local ? hp.rope_freq_base_swa : hp.rope_freq_base;
  const float freq_scale = local ? 1.0f : hp.rope_freq_scale;
  // Per token: q/k norms, RoPE, the KV cache write; a prompt's tokens split over the threads.
  run_for_tokens(pool, n, [&](int ith, int nth) {
    std::vector<float> cos_sin(static_cast<size_t>(hp.n_rot));
    for (int t = n * ith / nth; t < n * (ith + 1) / nth; ++t) {
      rope_cache(hp.n_rot, pos0 + t, freq_base, freq_scale, cos_sin.data());
      for (int hd = 0; hd < (t >= q_first ? hp.n_head : 0); ++hd) {
        float* qh = q + (t - q_first) * q_row + hd * hp.head_dim_k;
        if (l.q_norm) rms_norm(qh, l.q_norm, qh, hp.head_dim_k, hp.rms_norm_eps);
        rope(qh, hp.n_rot, cos_sin.data(), hp.rope_layout);
        if (hp.q_scale > 0.0f)
          for (int i = 0; i < hp.head_dim_k; ++i) qh[i] *= hp.q_scale;
      }
      for (int hd = 0; hd < hp.n_head_kv; ++hd) {
        float* kh = k + t * k_row + hd * hp.head_dim_k;
        if (l.k_norm) rms_norm(kh, l.k_norm, kh, hp.head_dim_k, hp.rms_norm_eps);
        rope(kh, hp.n_rot, cos_sin.data(), hp.rope_layout);
      }
      uint16_t* k_cache = ctx.kv.k_at(il, pos0 + t);
      uint16_t* v_cache = ctx.kv.v_at(il, pos0 + t);
      for (int i = 0; i < k_row; ++i) k_cache[i] = f32_to_f16(k[t * k_row + i]);
      for (int i = 0; i < v_row; ++i) v_cache[i] = f32_to_f16(v[t * v_row + i]);
    }
  });

  // softmax(q·Kᵀ / sqrt(head_dim)) · V over positions 0..pos0+t for token t, every head (cpu/attention.h).
  attention_f16(pool,
                {.q = q,
                 .k = ctx.kv.k_at(il, 0),
                 .v = ctx.kv.v_at(il, 0),
                 .k_row = k_row,
                 .v_row = v_row,
                 .n_query = n_out,
                 .pos0 = pos0 + q_first,
                 .n_head = hp.n_head,
                 .n_head_kv = hp.n_head_kv,
                 .head_dim_k = hp.head_dim_k,
                 .head_dim_v = hp.head_dim_v,
                 .scale = hp.q_scale > 0.0f ? 1.0f : 1.0f / std::sqrt(static_cast<float>(hp.head_dim_k)),
                 .out = ctx.attn.data(),
                 .window = local ? hp.n_swa : 0});
  matmul(pool, l.wo, ctx.attn.data(), n_out, out, ctx.linear_scratch);
}

// mlp(h) = down(act(gate·h) ⊙ up·h), for n tokens; act is silu (SwiGLU) or GELU (GeGLU, via ggml's table).
void mlp(ThreadPool& pool, const LlamaWeights& w, const LlamaLayer& l, LlamaContext& ctx, const float* h,
         int n, float* out) {
  float* gate = ctx.gate.data();
  float* up = ctx.up.data();
  const LinearJob jobs[2] = {{l.ffn_gate.dtype, l.ffn_gate.data, l.ffn_gate.rows, gate},
                             {l.ffn_up.dtype, l.ffn_up.data, l.ffn_up.rows, up}};
  linear_shared_x(pool, jobs, 2, l.ffn_gate.cols, h, n, ctx.linear_scratch);
  const bool gelu = w.hp.ffn_activation == FfnActivation::Gelu;
  const int64_t n_ff = l.ffn_gate.rows;
  if (n == 1) {  // decode: the activation is computed by the threads of ffn_down's pass, each on its share
    linear_filled_x(
        pool, l.ffn_down.dtype, l.ffn_down.data, l.ffn_down.rows, l.ffn_down.cols, gate,
        [&](int64_t begin, int64_t end) {
          if (gelu) {
            for (int64_t i = begin; i < end; ++i) gate[i] = gelu_f16_lookup(w.gelu_f16, gate[i]) * up[i];
          } else {
            for (int64_t i = begin; i < end; ++i) gate[i] = swiglu_silu(gate[i], i, n_ff) * up[i];
          }
        },
        out, ctx.linear_scratch);
    return;
  }
  // The activation's exp() over n × n_ff values is a few percent of a prompt: split over the threads.
  const size_t count = static_cast<size_t>(n) * static_cast<size_t>(l.ffn_gate.rows);
  run_for_tokens(pool, n, [&](int ith, int nth) {
    const size_t begin = count * static_cast<size_t>(ith) / static_cast<size_t>(nth);
    const size_t end = count * static_cast<size_t>(ith + 1) / static_cast<size_t>(nth);
    if (w.hp.ffn_activation == FfnActivation::Gelu) {
      for (size_t i = begin; i < end; ++i) gate[i] = gelu_f16_lookup(w.gelu_f16, gate[i]) * up[i];
    } else {
      for (size_t i = begin; i < end; ++i)
        gate[i] = swiglu_silu(gate[i], static_cast<int64_t>(i) % n_ff, n_ff) * up[i];
    }
  });
  matmul(pool, l.ffn_down, gate, n, out, ctx.linear_scratch);
}

}  // namespace

Result<std::span<const float>> forward(ThreadPool& pool, const LlamaWeights& w, LlamaContext& ctx,
                                       std::span<const int32_t> tokens) {
  const LlamaHparams& hp = w.hp;
  const int n = static_cast<int>(tokens.size());
  const int pos0 = ctx.kv.n_past;
  if (tokens.empty()) return error("llm: forward() needs at least one token");
  if (static_cast<int64_t>(pos0) + static_cast<int64_t>(tokens.size()) > ctx.kv.n_ctx)
    return error("llm: ", pos0, " cached + ", tokens.size(), " new tokens exceed the context of ",
                 ctx.kv.n_ctx, " positions");
  for (int32_t id : tokens)
    if (id < 0 || id >= hp.n_vocab)
      return error("llm: token id ", id, " is outside the vocabulary (", hp.n_vocab, ")");

  const size_t rows = static_cast<size_t>(n);
  const int d = hp.n_embd;
  ctx.x.resize(rows * d);
  ctx.h.resize(rows * d);
  ctx.q.resize(rows * hp.n_head * hp.head_dim_k);
  ctx.k.resize(rows * ctx.kv.k_row);
  ctx.v.resize(rows * ctx.kv.v_row);
  ctx.attn.resize(rows * hp.n_head * hp.head_dim_v);
  ctx.gate.resize(rows * hp.n_ff);
  ctx.up.resize(rows * hp.n_ff);
  float* x = ctx.x.data();
  float* h = ctx.h.data();

  // x = embed(tokens): one row of the table each, dequantized.
  const size_t embd_row_bytes = *dtype_bytes(w.token_embd.dtype, static_cast<uint64_t>(d));
  for (int t = 0; t < n; ++t)
    dequantize_row_ref(w.token_embd.dtype,
                       static_cast<const uint8_t*>(w.token_embd.data) + embd_row_bytes * tokens[t], x + t * d,
                       d);
  if (hp.embd_scale != 1.0f)
    for (size_t i = 0; i < rows * d; ++i) x[i] *= hp.embd_scale;

  ctx.delta.resize(rows * d);
  float* delta = ctx.delta.data();  // what each branch adds to the residual stream
  for (int il = 0; il < hp.n_layer; ++il) {
    const LlamaLayer& l = w.layers[static_cast<size_t>(il)];
    // Only the last token's logits are wanted, so after the last layer's keys and values are cached, only
    // that token goes on (llama.cpp skips the other rows there too); each row's numbers are unchanged.
    const int n_out = il == hp.n_layer - 1 ? 1 : n;
    float* x_out = x + static_cast<size_t>(n - n_out) * d;
    // x += attention(rms_norm(x, attn_norm), layer, pos)
    rms_norm_rows(x, l.attn_norm, n, d, hp.rms_norm_eps, h);
    attention(pool, w, ctx, il, h, n, n_out, pos0, delta);
    if (l.attn_post_norm) rms_norm_rows(delta, l.attn_post_norm, n_out, d, hp.rms_norm_eps, delta);
    add_rows(x_out, delta, n_out, d);
    // x += mlp(rms_norm(x, ffn_norm))
    rms_norm_rows(x_out, l.ffn_norm, n_out, d, hp.rms_norm_eps, h);
    mlp(pool, w, l, ctx, h, n_out, delta);
    if (l.ffn_post_norm) rms_norm_rows(delta, l.ffn_post_norm, n_out, d, hp.rms_norm_eps, delta);
    add_rows(x_out, delta, n_out, d);
  }
  ctx.kv.n_past = pos0 + n;

  // logits = output · rms_norm(x_last, output_norm)
  rms_norm(x + (n - 1) * d, w.output_norm, h, d, hp.rms_norm_eps);
  matmul(pool, w.output, h, 1, ctx.logits.data(), ctx.linear_scratch);
  if (hp.final_logit_softcap > 0.0f) softcap(ctx.logits.data(), hp.n_vocab, hp.final_logit_softcap);
  return std::span<const float>(ctx.logits);
}

}  // namespace sotto
