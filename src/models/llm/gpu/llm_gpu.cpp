// The decode plan of models/llm/gpu/llm_gpu.h: buffers, weights (q, k, v fused into one matrix when they share a type),
// and the recording of one token's dispatches.
#include "models/llm/gpu/llm_gpu.h"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace sotto::gpu {

namespace {

// Decoding, a quantized matrix of up to this many rows takes its RMSNorm and the q8 quantization inside its own
// kernel (see normed_input below): the FFN's gate·up too (Qwen2.5-0.5B: 4,864 rows), not an output table.
constexpr int64_t kFusedNormMaxRows = 16384;
// Tokens of a prompt per run of the prompt plan: its activation buffers hold this many rows.
constexpr int64_t kPromptBatch = 128;

// Rows of several matrices of one type and width, repacked and stacked into one GPU matrix (split by rows
// where it exceeds the binding limit).
Result<GpuMatrixParts> upload_stacked(Ops& ops, std::span<const Matrix* const> parts,
                                      std::string_view label) {
  std::vector<uint32_t> words;
  int64_t rows = 0;
  for (const Matrix* m : parts) {
    SOTTO_ASSIGN(std::vector<uint32_t> w, repack_rows(m->dtype, m->data, m->rows, m->cols));
    words.insert(words.end(), w.begin(), w.end());
    rows += m->rows;
  }
  return ops.upload_rows_parts(parts[0]->dtype, words, rows, parts[0]->cols, label);
}

Result<GpuMatrixParts> upload(Ops& ops, const Matrix& m, std::string_view label) {
  if (!gpu_matvec_supported(m.dtype))
    return error("webgpu: tensor '", label, "' has type ", dtype_name(m.dtype),
                 ", which the GPU kernels lack");
  return ops.upload_matrix_parts(m.dtype, m.data, m.rows, m.cols, label);
}

// Widths of one token's vectors.
struct Shapes {
  uint32_t d, q, kv_k, kv_v, qkv, out, ff;
};
Shapes shapes_of(const LlamaHparams& hp) {
  Shapes s;
  s.d = static_cast<uint32_t>(hp.n_embd);
  s.q = static_cast<uint32_t>(hp.n_head * hp.head_dim_k);
  s.kv_k = static_cast<uint32_t>(hp.n_head_kv * hp.head_dim_k);
  s.kv_v = static_cast<uint32_t>(hp.n_head_kv * hp.head_dim_v);
  s.qkv = s.q + s.kv_k + s.kv_v;
  s.out = static_cast<uint32_t>(hp.n_head * hp.head_dim_v);
  s.ff = static_cast<uint32_t>(hp.n_ff);
  return s;
}

// Layers' weights share a buffer up to this (Qwen2.5-0.5B's 24 layers: 80-100 MB).
constexpr uint64_t kLayerPoolBytes = uint64_t{1} << 30;

// Bytes a pool needs for buffers of these sizes (each view starts 256-byte aligned).
uint64_t pooled(std::initializer_list<uint64_t> sizes) {
  uint64_t n = 0;
  for (uint64_t b : sizes) n += (b + 255) / 256 * 256;
  return n;
}
uint64_t gpu_bytes(const Matrix& m) {
  const Result<uint32_t> words = gpu_row_words(m.dtype, m.cols);
  return words.ok() ? static_cast<uint64_t>(m.rows) * *words * 4 : 0;
}

uint64_t bytes_of(const GpuMatrixParts& m) {
  uint64_t n = 0;
  for (const GpuMatrix& p : m) n += static_cast<uint64_t>(p.rows) * p.row_words * 4;
  return n;
}

}  // namespace

Result<std::unique_ptr<LlmGpu>> LlmGpu::create(Device& device, const LlamaWeights& weights, int n_ctx,
                                               uint64_t max_binding_bytes, FusionOptions fusion,
                                               AttentionSum attention_sum) {
  std::unique_ptr<LlmGpu> llm(new LlmGpu(device));
  llm->ops_.set_max_binding(max_binding_bytes);
  llm->attention_sum_ = attention_sum;
  SOTTO_TRY(llm->build(weights, n_ctx));
  if (Status fused = llm->build_fused(fusion); !fused.ok()) {  // the model runs without it
    llm->use_fused_ = false;
    llm->fusion_status_ = cat("off: ", fused.message());
  }
  return llm;
}

Status LlmGpu::build(const LlamaWeights& w, int n_ctx) {
  hp_ = w.hp;
  const LlamaHparams& hp = hp_;
  for (const LlamaLayer& l : w.layers)
    if ((l.q_norm == nullptr) != (l.k_norm == nullptr) ||
        (l.attn_post_norm == nullptr) != (l.ffn_post_norm == nullptr))
      return error("webgpu: ", hp.arch,
                   " layers with a q norm but no k norm (or one post-norm) are not supported");
  if (hp.final_logit_softcap > 0.0f) return error("webgpu: final logit soft-capping is not on the GPU yet");
  if (hp.ffn_activation == FfnActivation::Gelu && w.gelu_f16.size() != 65536)
    return error("webgpu: a GeGLU model without its GELU table");
  n_ctx_ = n_ctx > 0 ? n_ctx : std::min(hp.n_ctx_train, 4096);
  if (hp.head_dim_k % 2 || hp.head_dim_v % 2 || hp.head_dim_k > 256 || hp.head_dim_v > 256)
    return error("webgpu: heads of ", hp.head_dim_k, "/", hp.head_dim_v, " dims are not supported");
  if (!gpu_embed_supported(w.token_embd.dtype))
    return error("webgpu: token_embd has type ", dtype_name(w.token_embd.dtype),
                 ", which the GPU cannot look up");
  const Shapes shapes = shapes_of(hp);
  const bool post_norms = !w.layers.empty() && w.layers[0].attn_post_norm != nullptr;

  // State both plans share: the step uniform, the KV cache (one buffer per layer, so that long contexts stay
  // under the binding limit), the RoPE tables and GELU's. Read-only buffers that belong together are views of
  // one pool where they fit in one binding (the tables; each layer's weights), so that a fused layer binds a
  // few buffers, not twenty (gpu/fusion.h). Buffers a kernel writes stay apart: WebGPU refuses a dispatch that
  // binds one buffer writable and again in any other way.
  SOTTO_ASSIGN(step_, ops_.step_buffer());
  const uint64_t k_layer_bytes = static_cast<uint64_t>(n_ctx_) * shapes.kv_k * 2;
  const uint64_t v_layer_bytes = static_cast<uint64_t>(n_ctx_) * shapes.kv_v * 2;
  const uint64_t rope_bytes = static_cast<uint64_t>(n_ctx_) * (hp.n_rot / 2) * 8;
  SOTTO_TRY(ops_.begin_pool(pooled({rope_bytes, rope_bytes, 65536 * 2}), "tables"));
  // Local (sliding-window) layers rotate with their own base and no scaling, as on the CPU.
  const std::vector<float> table = rope_table(n_ctx_, hp.n_rot, hp.rope_freq_base, hp.rope_freq_scale);
  SOTTO_ASSIGN(model_.rope, ops_.upload(table.data(), table.size() * 4, "rope"));
  if (hp.n_swa > 0) {
    const std::vector<float> local = rope_table(n_ctx_, hp.n_rot, hp.rope_freq_base_swa, 1.0f);
    SOTTO_ASSIGN(model_.rope_local, ops_.upload(local.data(), local.size() * 4, "rope (local layers)"));
  }
  if (hp.ffn_activation == FfnActivation::Gelu) {
    SOTTO_ASSIGN(model_.gelu, ops_.upload(w.gelu_f16.data(), w.gelu_f16.size() * 2, "gelu table"));
  }
  ops_.end_pool();
  model_.layers.resize(static_cast<size_t>(hp.n_layer));
  // Every layer's k cache as a view of one buffer, and the v caches of another, where each fits a binding: the
  // layer kernels (models/llm/gpu/layer_kernel.h) read any layer's through one binding. A dispatch that writes a layer's
  // cache binds no other layer's, so the views never alias a writable binding.
  const uint64_t layers = static_cast<uint64_t>(hp.n_layer);
  for (int kv = 0; kv < 2; ++kv) {
    const uint64_t bytes = kv == 0 ? k_layer_bytes : v_layer_bytes;
    SOTTO_TRY(ops_.begin_pool(layers * pooled({bytes}), kv == 0 ? "k caches" : "v caches"));
    for (int il = 0; il < hp.n_layer; ++il) {
      LayerGpu& g = model_.layers[static_cast<size_t>(il)];
      BufferHandle& cache = kv == 0 ? g.k_cache : g.v_cache;
      SOTTO_ASSIGN(cache, ops_.buffer(bytes, cat("blk.", il, kv == 0 ? ".k cache" : ".v cache")));
    }
    ops_.end_pool();
  }

  // Weights.
  SOTTO_ASSIGN(model_.embd, ops_.upload_matrix_parts(w.token_embd.dtype, w.token_embd.data, w.token_embd.rows,
                                                     w.token_embd.cols, "token_embd"));
  if (w.output.data == w.token_embd.data && w.output.dtype == w.token_embd.dtype &&
      gpu_matvec_supported(w.token_embd.dtype)) {
    model_.output = model_.embd;  // tied: one copy serves both
  } else {
    SOTTO_ASSIGN(model_.output, upload(ops_, w.output, "output"));
  }
  SOTTO_ASSIGN(model_.output_norm, ops_.upload(w.output_norm, shapes.d * 4, "output_norm"));
  // A layer's weights are views of one pool, and consecutive layers share it up to kLayerPoolBytes (or the
  // binding limit) where the layer kernels may run (natively, on Vulkan): they run the layers of one pool as one
  // dispatch. Elsewhere a pool per layer (the fused plan's need), no large allocation.
  std::vector<uint64_t> layer_bytes;
  for (const LlamaLayer& l : w.layers) {
    const uint64_t norm = uint64_t{shapes.d} * 4, head_norm = static_cast<uint64_t>(hp.head_dim_k) * 4;
    layer_bytes.push_back(pooled({norm, norm, head_norm, head_norm, norm, norm, uint64_t{shapes.qkv} * 4,
                                  gpu_bytes(l.wq), gpu_bytes(l.wk), gpu_bytes(l.wv), gpu_bytes(l.wo),
                                  gpu_bytes(l.ffn_gate), gpu_bytes(l.ffn_up), gpu_bytes(l.ffn_down)}) +
                          3 * 256);  // q, k, v stacked in one or more matrices
  }
  const uint64_t pool_limit =
      device().info().backend == "vulkan"
          ? std::min({kLayerPoolBytes, ops_.max_binding(), device().info().limits.max_buffer_size})
          : 0;
  size_t pool_end = 0;  // the layer after the open pool's last
  for (int il = 0; il < hp.n_layer; ++il) {
    const LlamaLayer& l = w.layers[static_cast<size_t>(il)];
    const std::string b = cat("blk.", il, ".");
    if (static_cast<size_t>(il) == pool_end) {
      uint64_t bytes = layer_bytes[pool_end++];
      while (pool_end < layer_bytes.size() && bytes + layer_bytes[pool_end] <= pool_limit)
        bytes += layer_bytes[pool_end++];
      SOTTO_TRY(
          ops_.begin_pool(bytes, cat(b, "weights and on, ", pool_end - static_cast<size_t>(il), " layers")));
    }
    LayerGpu& g = model_.layers[static_cast<size_t>(il)];
    SOTTO_ASSIGN(g.attn_norm, ops_.upload(l.attn_norm, shapes.d * 4, b + "attn_norm"));
    SOTTO_ASSIGN(g.ffn_norm, ops_.upload(l.ffn_norm, shapes.d * 4, b + "ffn_norm"));
    if (l.q_norm) {
      SOTTO_ASSIGN(g.q_norm,
                   ops_.upload(l.q_norm, static_cast<uint64_t>(hp.head_dim_k) * 4, b + "attn_q_norm"));
      SOTTO_ASSIGN(g.k_norm,
                   ops_.upload(l.k_norm, static_cast<uint64_t>(hp.head_dim_k) * 4, b + "attn_k_norm"));
    }
    if (post_norms) {
      SOTTO_ASSIGN(g.attn_post_norm, ops_.upload(l.attn_post_norm, shapes.d * 4, b + "post_attention_norm"));
      SOTTO_ASSIGN(g.ffn_post_norm, ops_.upload(l.ffn_post_norm, shapes.d * 4, b + "post_ffw_norm"));
    }
    // q, k, v: runs of consecutive matrices of one type stacked into one matrix (all three in the usual case;
    // Gemma 3's files pair Q5_0 q and k with a Q8_0 v).
    const Matrix* qkv_m[3] = {&l.wq, &l.wk, &l.wv};
    for (size_t i = 0; i < 3;) {
      size_t j = i + 1;
      while (j < 3 && qkv_m[j]->dtype == qkv_m[i]->dtype) ++j;
      if (!gpu_matvec_supported(qkv_m[i]->dtype))
        return error("webgpu: tensor '", b, "attn_q/k/v' has type ", dtype_name(qkv_m[i]->dtype),
                     ", which the GPU kernels lack");
      SOTTO_ASSIGN(GpuMatrixParts m,
                   upload_stacked(ops_, std::span<const Matrix* const>(qkv_m + i, j - i), b + "attn_qkv"));
      g.qkv.push_back(std::move(m));
      i = j;
    }
    if (l.bq || l.bk || l.bv) {
      std::vector<float> bias(shapes.qkv, 0.0f);
      if (l.bq) std::memcpy(bias.data(), l.bq, shapes.q * 4);
      if (l.bk) std::memcpy(bias.data() + shapes.q, l.bk, shapes.kv_k * 4);
      if (l.bv) std::memcpy(bias.data() + shapes.q + shapes.kv_k, l.bv, shapes.kv_v * 4);
      SOTTO_ASSIGN(g.qkv_bias, ops_.upload(bias.data(), bias.size() * 4, b + "qkv_bias"));
    }
    SOTTO_ASSIGN(g.wo, upload(ops_, l.wo, b + "attn_output"));
    if (l.ffn_gate.dtype != l.ffn_up.dtype)
      return error("webgpu: ", b, "ffn_gate and ffn_up differ in type (", dtype_name(l.ffn_gate.dtype), ", ",
                   dtype_name(l.ffn_up.dtype), "); the fused gate·up kernel needs one type");
    SOTTO_ASSIGN(g.gate, upload(ops_, l.ffn_gate, b + "ffn_gate"));
    SOTTO_ASSIGN(g.up, upload(ops_, l.ffn_up, b + "ffn_up"));
    SOTTO_ASSIGN(g.down, upload(ops_, l.ffn_down, b + "ffn_down"));
    if (static_cast<size_t>(il) + 1 == pool_end) ops_.end_pool();
  }

  // The decode step, then the prompt's: the same forward pass over 1 token or a batch of them.
  SOTTO_ASSIGN(tok_, ops_.buffer(16, "token"));
  SOTTO_TRY(record_forward(1, tok_, decode_));
  // The prompt plan's batch: a whole number of matrix x matrix tiles, no more than the context needs, its
  // widest activation rows within the binding limit. None (token by token) where not even one tile fits.
  const uint64_t row_bytes = uint64_t{std::max({shapes.d, shapes.qkv, shapes.out, shapes.ff})} * 4;
  const int64_t fits = static_cast<int64_t>(ops_.max_binding() / row_bytes);
  const int64_t batch = std::min({kPromptBatch, fits, static_cast<int64_t>(n_ctx_) + kMatmatTokens - 1}) /
                        kMatmatTokens * kMatmatTokens;
  // Smaller plans beside it for shorter runs (doubling from one tile): each has activations of its own, less
  // than the largest plan's in all.
  if (batch >= 2) {
    SOTTO_ASSIGN(prompt_tok_, ops_.buffer(static_cast<uint64_t>(batch) * 4, "prompt tokens"));
    for (int64_t tokens = kMatmatTokens;; tokens = std::min(2 * tokens, batch)) {
      PromptPlan& p = prompt_plans_.emplace_back();
      p.tokens = static_cast<uint32_t>(tokens);
      SOTTO_TRY(record_forward(p.tokens, prompt_tok_, p.plan));
      if (tokens == batch) break;
    }
  }
  return device().wait_idle();
}

// What record_forward() allocates for one token (what a pool for those activations must hold).
uint64_t LlmGpu::decode_activation_bytes() const {
  const Shapes shapes = shapes_of(hp_);
  const uint64_t widest = uint64_t{std::max({shapes.d, shapes.qkv, shapes.out, shapes.ff})} * 4;
  return pooled({shapes.d * 4ull, widest, widest, shapes.qkv * 4ull, shapes.out * 4ull, widest / 4,
                 widest / 32 + 4, shapes.d * 4ull,
                 Ops::argmax_partial_bytes(static_cast<uint32_t>(hp_.n_vocab)), 256, 256, 256, 256});
}

// One forward pass over n_tokens tokens (tok: their ids) at positions step.pos ..: embed, the layers, and for a
// single token the output head and argmax. A prompt's tokens only fill the KV cache: its last token runs
// through the decode plan, which makes the logits.
Status LlmGpu::record_forward(uint32_t n_tokens, BufferHandle tok, Plan& out) {
  const LlamaHparams& hp = hp_;
  const Shapes shapes = shapes_of(hp);
  const bool prompt = n_tokens > 1;
  const bool post_norms = !model_.layers.empty() && model_.layers[0].attn_post_norm != 0;
  const uint32_t d = shapes.d;
  const uint64_t n = n_tokens;
  const uint32_t widest = std::max({d, shapes.qkv, shapes.out, shapes.ff});

  // Activations: one row per token.
  SOTTO_ASSIGN(BufferHandle x, ops_.buffer(n * d * 4, "x"));
  out.x = x;
  SOTTO_ASSIGN(BufferHandle h, ops_.buffer(n * widest * 4, "h"));
  SOTTO_ASSIGN(BufferHandle h2, ops_.buffer(n * widest * 4, "h2"));
  SOTTO_ASSIGN(BufferHandle qkv, ops_.buffer(n * shapes.qkv * 4, "qkv"));
  SOTTO_ASSIGN(BufferHandle attn, ops_.buffer(n * shapes.out * 4, "attn"));
  SOTTO_ASSIGN(BufferHandle xq, ops_.buffer(n * widest, "xq"));
  SOTTO_ASSIGN(BufferHandle xd, ops_.buffer(n * widest / 8 + 4, "xd"));
  BufferHandle delta = 0;  // a branch's output before its post-norm (gemma3)
  if (post_norms) {
    SOTTO_ASSIGN(delta, ops_.buffer(n * d * 4, "delta"));
  }
  std::vector<Dispatch>& plan = out.dispatches;

  // Names (and weight bytes) of the dispatches recorded since `before`; `weights`: the bytes of the matrices
  // the last of them reads.
  auto record = [&](std::string name, size_t before, uint64_t weights = 0) {
    for (size_t i = before; i < plan.size(); ++i) {
      out.names.push_back(name);
      out.weight_bytes.push_back(i + 1 == plan.size() ? weights : 0);
    }
  };
  // The input of a matrix behind an RMSNorm. Decoding, quantized matrices of up to kFusedNormMaxRows rows take
  // the norm and the q8 quantization inside their own kernel: every workgroup redoes it, which costs less than
  // a dispatch of its own (H200, Qwen2.5-0.5B Q4_0: gate·up takes 9.1 us with 304 workgroups norming against
  // 6.3, but the ffn_norm dispatch's 7.0 us go: decode at 717 tokens/s against 655). For an output table's
  // thousands of workgroups, and for a prompt, a norm_quant dispatch makes the q8 blocks once. F32 / F16
  // matrices read the normed f32 vectors.
  auto normed_input = [&](const GpuMatrixParts& m, BufferHandle in, BufferHandle norm,
                          MatvecInput& input) -> Status {
    int64_t rows = 0;
    for (const GpuMatrix& part : m) rows += part.rows;
    const bool q8 = gpu_needs_q8(m[0].dtype);
    if (q8 && !prompt && rows <= kFusedNormMaxRows) {
      input = MatvecInput{in, 0, norm, hp.rms_norm_eps};
      return {};
    }
    SOTTO_TRY(ops_.norm_quant(plan, in, 0, norm, d, hp.rms_norm_eps, h, q8 ? xq : 0, q8 ? xd : 0, q8, false,
                              n_tokens, gpu_needs_q8_k(m[0].dtype)));
    input = q8 ? MatvecInput{0, 0, 0, 0.0f, xq, xd} : MatvecInput{h, 0, 0, 0.0f};
    return {};
  };
  // The q8_0 rows of a prompt's f32 activations (no norm), for a quantized matrix that reads them.
  auto plain_input = [&](const GpuMatrixParts& m, BufferHandle in, uint32_t width) -> Result<MatvecInput> {
    if (!prompt || !gpu_needs_q8(m[0].dtype)) return MatvecInput{in, 0, 0, 0.0f};
    SOTTO_TRY(ops_.norm_quant(plan, in, 0, 0, width, 0.0f, h, xq, xd, true, false, n_tokens,
                              gpu_needs_q8_k(m[0].dtype)));
    return MatvecInput{0, 0, 0, 0.0f, xq, xd};
  };
  // y[y_offset ...] (+)= m . x for each token (rows of y_stride floats), one dispatch per part of m, each
  // writing its own rows.
  auto matmul = [&](const GpuMatrixParts& m, const MatvecInput& in, BufferHandle y, uint32_t y_offset,
                    uint32_t y_stride, BufferHandle bias, bool accumulate, const GpuMatrixParts* up = nullptr,
                    BufferHandle gelu_table = 0) -> Status {
    if (up && up->size() != m.size()) return error("webgpu: gate and up split differently");
    for (size_t i = 0; i < m.size(); ++i) {
      const uint32_t first = static_cast<uint32_t>(m[i].first_row);
      const GpuMatrix* up_part = up ? &(*up)[i] : nullptr;
      if (prompt) {
        SOTTO_TRY(ops_.matmat(plan, m[i], in, y, y_offset + first, bias, y_offset + first, accumulate,
                              {n_tokens, step_, y_stride}, up_part, gelu_table));
      } else {
        SOTTO_TRY(ops_.matvec(plan, m[i], in, y, y_offset + first, bias, y_offset + first, accumulate,
                              up_part, gelu_table));
      }
    }
    return {};
  };
  // A branch's output joins x directly, or (gemma3) through its post-norm: delta, then x += norm(delta).
  auto join_branch = [&](const GpuMatrixParts& m, BufferHandle in, uint32_t in_width, BufferHandle post_norm,
                         const std::string& name, const std::string& norm_name) -> Status {
    size_t at = plan.size();
    SOTTO_ASSIGN(MatvecInput input, plain_input(m, in, in_width));
    if (!post_norms) {
      SOTTO_TRY(matmul(m, input, x, 0, d, 0, true));
      record(name + " (+= x)", at, bytes_of(m));
      return {};
    }
    SOTTO_TRY(matmul(m, input, delta, 0, d, 0, false));
    record(name, at, bytes_of(m));
    at = plan.size();
    SOTTO_TRY(ops_.norm_quant(plan, delta, 0, post_norm, d, hp.rms_norm_eps, x, 0, 0, false, true, n_tokens));
    record(norm_name + " (+= x)", at);
    return {};
  };

  size_t mark = plan.size();
  SOTTO_TRY(ops_.embed(plan, model_.embd, tok, x, hp.embd_scale, n_tokens));
  record("embed", mark);
  for (int il = 0; il < hp.n_layer; ++il) {
    const LayerGpu& l = model_.layers[static_cast<size_t>(il)];
    out.layer_begin.push_back(plan.size());
    // x += attention(rms_norm(x)): q, k, v in one matrix (or a few of one type each), RoPE and the KV cache
    // write, attention over the cache, the output projection.
    mark = plan.size();
    MatvecInput qkv_in, ffn_in;
    SOTTO_TRY(normed_input(l.qkv[0], x, l.attn_norm, qkv_in));
    record("attn_norm", mark);
    uint32_t row_offset = 0;
    for (size_t run = 0; run < l.qkv.size(); ++run) {
      const GpuMatrixParts& m = l.qkv[run];
      const size_t one = plan.size();
      // The norm_quant (or the fused norm) of the first run serves the others (same input, same width), unless
      // staged q8 blocks of the other kind (q8_0 / q8_K) are needed.
      if (run > 0 && qkv_in.xq && gpu_needs_q8_k(m[0].dtype) != gpu_needs_q8_k(l.qkv[run - 1][0].dtype)) {
        SOTTO_TRY(normed_input(m, x, l.attn_norm, qkv_in));
      }
      SOTTO_TRY(matmul(m, qkv_in, qkv, row_offset, shapes.qkv, l.qkv_bias, false));
      for (const GpuMatrix& part : m) row_offset += static_cast<uint32_t>(part.rows);
      record("qkv", one, bytes_of(m));
    }
    mark = plan.size();
    const bool local = hp.is_local(il);
    RopeKvArgs rope{qkv,
                    local ? model_.rope_local : model_.rope,
                    l.k_cache,
                    l.v_cache,
                    step_,
                    static_cast<uint32_t>(hp.n_head),
                    static_cast<uint32_t>(hp.n_head_kv),
                    static_cast<uint32_t>(hp.head_dim_k),
                    static_cast<uint32_t>(hp.head_dim_v),
                    static_cast<uint32_t>(hp.n_rot),
                    hp.rope_layout == RopeLayout::Halves,
                    0,
                    0,
                    l.q_norm,
                    l.k_norm,
                    hp.rms_norm_eps,
                    hp.q_scale > 0.0f ? hp.q_scale : 1.0f};
    rope.n_tokens = n_tokens;
    if (prompt) {  // decoding, attention does RoPE and the cache write itself (one dispatch fewer)
      SOTTO_TRY(ops_.rope_kv(plan, rope));
      record("rope+kv", mark);
      mark = plan.size();
    }
    AttentionGpuArgs att{qkv,
                         l.k_cache,
                         l.v_cache,
                         step_,
                         attn,
                         static_cast<uint32_t>(hp.n_head),
                         static_cast<uint32_t>(hp.n_head_kv),
                         static_cast<uint32_t>(hp.head_dim_k),
                         static_cast<uint32_t>(hp.head_dim_v),
                         0,
                         0,
                         static_cast<uint32_t>(n_ctx_),
                         hp.q_scale > 0.0f ? 1.0f : 1.0f / std::sqrt(static_cast<float>(hp.head_dim_k)),
                         local ? static_cast<uint32_t>(hp.n_swa) : 0u};
    att.n_tokens = n_tokens;
    att.f32_sum = attention_sum_ == AttentionSum::F32;
    // Decoding with the f32 sum, a head's keys spread over as many workgroups as the cache's chunks (up to
    // kMaxAttentionSplits): a long context is read at once, not chunk after chunk. Not in the plan to be fused
    // (its phases run on one grid; the shares' arrival counting is a kernel of its own).
    if (att.f32_sum && !prompt && !recording_fusable_) {
      const uint32_t chunk = attention_chunk_keys(att.hd_k, att.hd_v);
      att.splits = std::clamp<uint32_t>((att.max_keys + chunk - 1) / chunk, 1, kMaxAttentionSplits);
    }
    if (!prompt) att.rope = &rope;
    SOTTO_TRY(ops_.attention(plan, att));
    record(prompt ? "attention" : "rope+kv+attention", mark);
    SOTTO_TRY(join_branch(l.wo, attn, shapes.out, l.attn_post_norm, "attn_output", "post_attention_norm"));
    // x += mlp(rms_norm(x)): gate and up in one kernel with the SwiGLU (GeGLU) product, then down.
    mark = plan.size();
    SOTTO_TRY(normed_input(l.gate, x, l.ffn_norm, ffn_in));
    record("ffn_norm", mark);
    mark = plan.size();
    SOTTO_TRY(matmul(l.gate, ffn_in, h2, 0, shapes.ff, 0, false, &l.up, model_.gelu));
    record(model_.gelu ? "gate·up GeGLU" : "gate·up SwiGLU", mark, bytes_of(l.gate) + bytes_of(l.up));
    SOTTO_TRY(join_branch(l.down, h2, shapes.ff, l.ffn_post_norm, "ffn_down", "post_ffw_norm"));
  }
  out.layer_begin.push_back(plan.size());
  if (prompt) return {};
  // logits = output(rms_norm(x)); the next token = argmax(logits), chosen on the GPU.
  mark = plan.size();
  MatvecInput out_in;
  SOTTO_TRY(normed_input(model_.output, x, model_.output_norm, out_in));
  record("output_norm", mark);
  if (!logits_) {
    SOTTO_ASSIGN(logits_, ops_.buffer(static_cast<uint64_t>(hp.n_vocab) * 4, "logits"));
  }
  mark = plan.size();
  SOTTO_TRY(matmul(model_.output, out_in, logits_, 0, 0, 0, false));
  record("output", mark, bytes_of(model_.output));
  SOTTO_ASSIGN(BufferHandle partial,
               ops_.buffer(Ops::argmax_partial_bytes(static_cast<uint32_t>(hp.n_vocab)), "partial"));
  mark = plan.size();
  SOTTO_TRY(ops_.argmax(plan, logits_, static_cast<uint32_t>(hp.n_vocab), partial, tok));
  record("argmax", mark);
  return {};
}

Status LlmGpu::submit(int32_t token) {
  if (n_past_ >= n_ctx_) return error("llm: the GPU context of ", n_ctx_, " positions is full");
  if (token >= hp_.n_vocab)
    return error("llm: token id ", token, " is outside the vocabulary (", hp_.n_vocab, ")");
  if (token >= 0) {
    const uint32_t t[4] = {static_cast<uint32_t>(token), 0, 0, 0};
    SOTTO_TRY(device().write_buffer(tok_, 0, t, 16));
  }
  if (use_fused_) {  // what a rerun needs, until a read shows the fused runs went through
    if (unchecked_.empty()) unchecked_from_ = n_past_;
    // A step after one not yet read takes that one's choice, known when it is read (finish()).
    unchecked_.push_back(token >= 0 ? token : unchecked_.empty() ? last_output_ : -1);
  }
  last_sampled_ = false;
  SOTTO_TRY(run_decode());
  ++n_past_;
  return {};
}

Status LlmGpu::submit_prompt(std::span<const int32_t> tokens) {
  if (tokens.size() > static_cast<size_t>(n_ctx_ - n_past_))
    return error("llm: ", tokens.size(), " prompt tokens do not fit the GPU context (", n_ctx_ - n_past_,
                 " of ", n_ctx_, " positions left)");
  for (int32_t t : tokens)
    if (t < 0 || t >= hp_.n_vocab)
      return error("llm: token id ", t, " is outside the vocabulary (", hp_.n_vocab, ")");
  if (prompt_plans_.empty()) {  // no prompt plan (binding limits): token by token
    for (int32_t t : tokens) SOTTO_TRY(submit(t));
    return {};
  }
  for (size_t at = 0; at < tokens.size();) {
    const size_t n = std::min<size_t>(prompt_batch(), tokens.size() - at);
    const auto fits = std::find_if(prompt_plans_.begin(), prompt_plans_.end(),
                                   [&](const PromptPlan& p) { return p.tokens >= n; });
    SOTTO_TRY(device().write_buffer(prompt_tok_, 0, tokens.data() + at, n * 4));
    const uint32_t s[4] = {static_cast<uint32_t>(n_past_), static_cast<uint32_t>(n), 0, 0};
    SOTTO_TRY(device().write_buffer(step_, 0, s, 16));
    SOTTO_TRY(device().run(fits->plan.dispatches));
    n_past_ += static_cast<int>(n);
    at += n;
  }
  return {};
}

std::vector<uint32_t> LlmGpu::prompt_plan_sizes() const {
  std::vector<uint32_t> sizes;
  for (const PromptPlan& p : prompt_plans_) sizes.push_back(p.tokens);
  return sizes;
}

Status LlmGpu::start_finish() {
  // After a fused run, the failure flag its copy put next to the token comes back with it.
  SOTTO_ASSIGN(pending_read_, device().start_read(tok_, 0, last_run_fused_ ? 8 : 4));
  read_covers_ = unchecked_.size();  // a step submitted after this read (ahead) is not covered by it
  return {};
}

DeviceStatus LlmGpu::finish(int32_t* token) {
  uint32_t t[2] = {0, 0};
  const DeviceStatus s = device().finish_read(pending_read_, t);
  if (s != DeviceStatus::Ok) return s;
  if (last_run_fused_ && t[1] != 0) {
    last_give_up_ = t[1];
    const Status rerun = rerun_unfused();
    if (!rerun.ok()) return DeviceStatus::Error;
    return finish(token);
  }
  *token = static_cast<int32_t>(t[0]);
  last_output_ = *token;
  if (!use_fused_) {
    unchecked_.clear();
  } else {  // the steps this read covers went through; the one ahead (if any) took this choice
    const size_t covered = std::min(read_covers_, unchecked_.size());
    unchecked_.erase(unchecked_.begin(), unchecked_.begin() + static_cast<std::ptrdiff_t>(covered));
    unchecked_from_ += static_cast<int>(covered);
    if (!unchecked_.empty() && unchecked_.front() < 0) unchecked_.front() = *token;
  }
  read_covers_ = 0;
  return s;
}

Result<int32_t> LlmGpu::step(int32_t token) {
  SOTTO_TRY(submit(token));
  SOTTO_TRY(start_finish());
  int32_t next = -1;
  const DeviceStatus s = finish(&next);
  if (s != DeviceStatus::Ok)
    return error(s == DeviceStatus::Pending ? "webgpu: read pending (asynchronous device)"
                                            : device().last_error());
  return next;
}

Status LlmGpu::decode_greedy(int n, std::vector<int32_t>* ids, bool ahead) {
  if (ahead && n > 0) SOTTO_TRY(submit(-1));
  for (int i = 0; i < n; ++i) {
    if (!ahead) SOTTO_TRY(submit(-1));
    SOTTO_TRY(start_finish());
    if (ahead && i + 1 < n) SOTTO_TRY(submit(-1));
    int32_t next = -1;
    const DeviceStatus s = finish(&next);
    if (s != DeviceStatus::Ok)
      return error(s == DeviceStatus::Pending ? "webgpu: read pending (asynchronous device)"
                                              : device().last_error());
    ids->push_back(next);
  }
  return {};
}

Result<std::vector<float>> LlmGpu::logits() {
  std::vector<float> out(static_cast<size_t>(hp_.n_vocab));
  SOTTO_TRY(ops_.read(logits_, 0, out.data(), out.size() * 4));
  return out;
}

Status LlmGpu::time_step(std::vector<std::pair<std::string, uint64_t>>* per_dispatch_ns) {
  per_dispatch_ns->clear();
  if (n_past_ >= n_ctx_) return error("llm: the GPU context of ", n_ctx_, " positions is full");
  const uint32_t s[4] = {static_cast<uint32_t>(n_past_), 1, 0, 0};
  SOTTO_TRY(device().write_buffer(step_, 0, s, 16));
  std::vector<uint64_t> ns;
  SOTTO_TRY(device().run_timed(decode_.dispatches, &ns));
  ++n_past_;
  for (size_t i = 0; i < ns.size() && i < decode_.names.size(); ++i)
    per_dispatch_ns->push_back({decode_.names[i], ns[i]});
  return {};
}

}  // namespace sotto::gpu
