// The decode plan of gpu/llm_gpu.h: buffers, weights (q, k, v fused into one matrix when they share a type),
// and the recording of one token's dispatches.
#include "gpu/llm_gpu.h"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace sotto::gpu {

namespace {

constexpr int64_t kFusedNormMaxRows = 2048;

// Rows of several matrices of one type and width, repacked and stacked into one GPU matrix.
Result<GpuMatrix> upload_stacked(Ops& ops, std::span<const Matrix* const> parts, std::string_view label) {
  std::vector<uint32_t> words;
  int64_t rows = 0;
  for (const Matrix* m : parts) {
    SOTTO_ASSIGN(std::vector<uint32_t> w, repack_rows(m->dtype, m->data, m->rows, m->cols));
    words.insert(words.end(), w.begin(), w.end());
    rows += m->rows;
  }
  GpuMatrix g{parts[0]->dtype, rows, parts[0]->cols, 0, 0};
  SOTTO_ASSIGN(g.row_words, gpu_row_words(g.dtype, g.cols));
  SOTTO_ASSIGN(g.buffer, ops.upload(words.data(), words.size() * 4, label));
  return g;
}

Result<GpuMatrix> upload(Ops& ops, const Matrix& m, std::string_view label) {
  if (!gpu_matvec_supported(m.dtype))
    return error("webgpu: tensor '", label, "' has type ", dtype_name(m.dtype),
                 ", which the GPU kernels lack");
  return ops.upload_matrix(m.dtype, m.data, m.rows, m.cols, label);
}

}  // namespace

Result<std::unique_ptr<LlmGpu>> LlmGpu::create(Device& device, const LlamaWeights& weights, int n_ctx) {
  std::unique_ptr<LlmGpu> llm(new LlmGpu(device));
  SOTTO_TRY(llm->build(weights, n_ctx));
  return llm;
}

Status LlmGpu::build(const LlamaWeights& w, int n_ctx) {
  hp_ = w.hp;
  const LlamaHparams& hp = hp_;
  for (const LlamaLayer& l : w.layers)
    if (l.q_norm || l.k_norm)
      return error("webgpu: ", hp.arch, "'s per-head q/k norms are not on the GPU yet");
  n_ctx_ = n_ctx > 0 ? n_ctx : std::min(hp.n_ctx_train, 4096);
  if (hp.head_dim_k % 2 || hp.head_dim_v % 2 || hp.head_dim_k > 256 || hp.head_dim_v > 256)
    return error("webgpu: heads of ", hp.head_dim_k, "/", hp.head_dim_v, " dims are not supported");
  if (!gpu_embed_supported(w.token_embd.dtype))
    return error("webgpu: token_embd has type ", dtype_name(w.token_embd.dtype),
                 ", which the GPU cannot look up");

  const uint32_t d = static_cast<uint32_t>(hp.n_embd);
  const uint32_t q_dim = static_cast<uint32_t>(hp.n_head * hp.head_dim_k);
  const uint32_t kv_k = static_cast<uint32_t>(hp.n_head_kv * hp.head_dim_k);
  const uint32_t kv_v = static_cast<uint32_t>(hp.n_head_kv * hp.head_dim_v);
  const uint32_t out_dim = static_cast<uint32_t>(hp.n_head * hp.head_dim_v);
  const uint32_t ff = static_cast<uint32_t>(hp.n_ff);
  const uint32_t widest = std::max({d, q_dim + kv_k + kv_v, out_dim, ff});

  // Activations and state.
  SOTTO_ASSIGN(step_, ops_.step_buffer());
  SOTTO_ASSIGN(tok_, ops_.buffer(16, "token"));
  SOTTO_ASSIGN(BufferHandle x, ops_.buffer(d * 4, "x"));
  SOTTO_ASSIGN(BufferHandle h, ops_.buffer(widest * 4, "h"));
  SOTTO_ASSIGN(BufferHandle h2, ops_.buffer(widest * 4, "h2"));
  SOTTO_ASSIGN(BufferHandle qkv, ops_.buffer((q_dim + kv_k + kv_v) * 4, "qkv"));
  SOTTO_ASSIGN(BufferHandle attn, ops_.buffer(out_dim * 4, "attn"));
  SOTTO_ASSIGN(BufferHandle xq, ops_.buffer(widest, "xq"));
  SOTTO_ASSIGN(BufferHandle xd, ops_.buffer(widest / 8 + 4, "xd"));
  SOTTO_ASSIGN(logits_, ops_.buffer(static_cast<uint64_t>(hp.n_vocab) * 4, "logits"));
  SOTTO_ASSIGN(BufferHandle partial,
               ops_.buffer(Ops::argmax_partial_bytes(static_cast<uint32_t>(hp.n_vocab)), "partial"));
  const uint64_t k_layer_words = static_cast<uint64_t>(n_ctx_) * kv_k / 2;
  const uint64_t v_layer_words = static_cast<uint64_t>(n_ctx_) * kv_v / 2;
  SOTTO_ASSIGN(BufferHandle k_cache, ops_.buffer(k_layer_words * 4 * hp.n_layer, "k cache"));
  SOTTO_ASSIGN(BufferHandle v_cache, ops_.buffer(v_layer_words * 4 * hp.n_layer, "v cache"));
  const std::vector<float> table = rope_table(n_ctx_, hp.n_rot, hp.rope_freq_base);
  SOTTO_ASSIGN(BufferHandle rope, ops_.upload(table.data(), table.size() * 4, "rope"));

  // Weights.
  SOTTO_ASSIGN(GpuMatrix embd, ops_.upload_matrix(w.token_embd.dtype, w.token_embd.data, w.token_embd.rows,
                                                  w.token_embd.cols, "token_embd"));
  GpuMatrix output;
  if (w.output.data == w.token_embd.data && w.output.dtype == w.token_embd.dtype &&
      gpu_matvec_supported(embd.dtype)) {
    output = embd;  // tied: one copy serves both
  } else {
    SOTTO_ASSIGN(output, upload(ops_, w.output, "output"));
  }
  SOTTO_ASSIGN(BufferHandle output_norm, ops_.upload(w.output_norm, d * 4, "output_norm"));

  // Names (and weight bytes) of the dispatches recorded since `before`; `weights`: the bytes of the matrices
  // the last of them reads.
  auto record = [&](std::string name, size_t before, uint64_t weights = 0) {
    for (size_t i = before; i < plan_.size(); ++i) {
      plan_names_.push_back(name);
      plan_weight_bytes_.push_back(i + 1 == plan_.size() ? weights : 0);
    }
  };
  auto bytes_of = [](const GpuMatrix& m) { return static_cast<uint64_t>(m.rows) * m.row_words * 4; };
  // The input of a matrix behind an RMSNorm. Quantized matrices of few rows take the norm and the q8_0
  // quantization inside their own kernel (one dispatch fewer); for many rows (gate·up, the output table) every
  // workgroup would redo that work, which cost more than a dispatch on the H200 (bench/README.md), so a
  // norm_quant dispatch makes the q8_0 blocks once. F32 / F16 matrices read the normed f32 vector.
  auto normed_input = [&](const GpuMatrix& m, BufferHandle in, BufferHandle norm,
                          MatvecInput& out) -> Status {
    if (gpu_needs_q8(m.dtype) && m.rows <= kFusedNormMaxRows) {
      out = MatvecInput{in, 0, norm, hp.rms_norm_eps};
      return {};
    }
    const bool q8 = gpu_needs_q8(m.dtype);
    SOTTO_TRY(ops_.norm_quant(plan_, in, 0, norm, d, hp.rms_norm_eps, h, q8 ? xq : 0, q8 ? xd : 0, q8));
    out = q8 ? MatvecInput{0, 0, 0, 0.0f, xq, xd} : MatvecInput{h, 0, 0, 0.0f};
    return {};
  };
  size_t mark = plan_.size();
  SOTTO_TRY(ops_.embed(plan_, embd, tok_, x));
  record("embed", mark);

  for (int il = 0; il < hp.n_layer; ++il) {
    const LlamaLayer& l = w.layers[static_cast<size_t>(il)];
    const std::string b = cat("blk.", il, ".");
    SOTTO_ASSIGN(BufferHandle attn_norm, ops_.upload(l.attn_norm, d * 4, b + "attn_norm"));
    SOTTO_ASSIGN(BufferHandle ffn_norm, ops_.upload(l.ffn_norm, d * 4, b + "ffn_norm"));
    // q, k, v as one matrix when they share a type (the usual case), else three dispatches.
    std::vector<GpuMatrix> qkv_parts;
    if (l.wq.dtype == l.wk.dtype && l.wq.dtype == l.wv.dtype && gpu_matvec_supported(l.wq.dtype)) {
      const Matrix* parts[3] = {&l.wq, &l.wk, &l.wv};
      SOTTO_ASSIGN(GpuMatrix m, upload_stacked(ops_, parts, b + "attn_qkv"));
      qkv_parts.push_back(m);
    } else {
      for (const Matrix* m : {&l.wq, &l.wk, &l.wv}) {
        SOTTO_ASSIGN(GpuMatrix g, upload(ops_, *m, b + "attn_q/k/v"));
        qkv_parts.push_back(g);
      }
    }
    BufferHandle qkv_bias = 0;
    if (l.bq || l.bk || l.bv) {
      std::vector<float> bias(q_dim + kv_k + kv_v, 0.0f);
      if (l.bq) std::memcpy(bias.data(), l.bq, q_dim * 4);
      if (l.bk) std::memcpy(bias.data() + q_dim, l.bk, kv_k * 4);
      if (l.bv) std::memcpy(bias.data() + q_dim + kv_k, l.bv, kv_v * 4);
      SOTTO_ASSIGN(qkv_bias, ops_.upload(bias.data(), bias.size() * 4, b + "qkv_bias"));
    }
    SOTTO_ASSIGN(GpuMatrix wo, upload(ops_, l.wo, b + "attn_output"));
    if (l.ffn_gate.dtype != l.ffn_up.dtype)
      return error("webgpu: ", b, "ffn_gate and ffn_up differ in type (", dtype_name(l.ffn_gate.dtype), ", ",
                   dtype_name(l.ffn_up.dtype), "); the fused SwiGLU kernel needs one type");
    SOTTO_ASSIGN(GpuMatrix gate, upload(ops_, l.ffn_gate, b + "ffn_gate"));
    SOTTO_ASSIGN(GpuMatrix up, upload(ops_, l.ffn_up, b + "ffn_up"));
    SOTTO_ASSIGN(GpuMatrix down, upload(ops_, l.ffn_down, b + "ffn_down"));

    mark = plan_.size();
    MatvecInput qkv_in, ffn_in;
    SOTTO_TRY(normed_input(qkv_parts[0], x, attn_norm, qkv_in));
    record("attn_norm", mark);
    uint32_t row_offset = 0;
    for (const GpuMatrix& m : qkv_parts) {
      const size_t one = plan_.size();
      SOTTO_TRY(ops_.matvec(plan_, m, qkv_in, qkv, row_offset, qkv_bias, row_offset, false));
      row_offset += static_cast<uint32_t>(m.rows);
      record("qkv", one, bytes_of(m));
    }
    mark = plan_.size();
    const uint32_t k_base = static_cast<uint32_t>(k_layer_words * il),
                   v_base = static_cast<uint32_t>(v_layer_words * il);
    SOTTO_TRY(ops_.rope_kv(plan_, {qkv, rope, k_cache, v_cache, step_, static_cast<uint32_t>(hp.n_head),
                                   static_cast<uint32_t>(hp.n_head_kv), static_cast<uint32_t>(hp.head_dim_k),
                                   static_cast<uint32_t>(hp.head_dim_v), static_cast<uint32_t>(hp.n_rot),
                                   hp.rope_layout == RopeLayout::Halves, k_base, v_base}));
    record("rope+kv", mark);
    mark = plan_.size();
    SOTTO_TRY(ops_.attention(
        plan_, {qkv, k_cache, v_cache, step_, attn, static_cast<uint32_t>(hp.n_head),
                static_cast<uint32_t>(hp.n_head_kv), static_cast<uint32_t>(hp.head_dim_k),
                static_cast<uint32_t>(hp.head_dim_v), k_base, v_base, static_cast<uint32_t>(n_ctx_),
                1.0f / std::sqrt(static_cast<float>(hp.head_dim_k))}));
    record("attention", mark);
    mark = plan_.size();
    SOTTO_TRY(ops_.matvec(plan_, wo, {attn, 0, 0, 0.0f}, x, 0, 0, 0, true));
    record("attn_output (+= x)", mark, bytes_of(wo));
    mark = plan_.size();
    SOTTO_TRY(normed_input(gate, x, ffn_norm, ffn_in));
    record("ffn_norm", mark);
    mark = plan_.size();
    SOTTO_TRY(ops_.matvec(plan_, gate, ffn_in, h2, 0, 0, 0, false, &up));
    record("gate·up SwiGLU", mark, bytes_of(gate) + bytes_of(up));
    mark = plan_.size();
    SOTTO_TRY(ops_.matvec(plan_, down, {h2, 0, 0, 0.0f}, x, 0, 0, 0, true));
    record("ffn_down (+= x)", mark, bytes_of(down));
  }
  mark = plan_.size();
  MatvecInput out_in;
  SOTTO_TRY(normed_input(output, x, output_norm, out_in));
  record("output_norm", mark);
  mark = plan_.size();
  SOTTO_TRY(ops_.matvec(plan_, output, out_in, logits_, 0, 0, 0, false));
  record("output", mark, bytes_of(output));
  mark = plan_.size();
  SOTTO_TRY(ops_.argmax(plan_, logits_, static_cast<uint32_t>(hp.n_vocab), partial, tok_));
  record("argmax", mark);
  return device().wait_idle();
}

Status LlmGpu::submit(int32_t token) {
  if (n_past_ >= n_ctx_) return error("llm: the GPU context of ", n_ctx_, " positions is full");
  if (token >= hp_.n_vocab)
    return error("llm: token id ", token, " is outside the vocabulary (", hp_.n_vocab, ")");
  if (token >= 0) {
    const uint32_t t[4] = {static_cast<uint32_t>(token), 0, 0, 0};
    SOTTO_TRY(device().write_buffer(tok_, 0, t, 16));
  }
  const uint32_t s[4] = {static_cast<uint32_t>(n_past_), 0, 0, 0};
  SOTTO_TRY(device().write_buffer(step_, 0, s, 16));
  SOTTO_TRY(device().run(plan_));
  ++n_past_;
  return {};
}

Status LlmGpu::start_finish() {
  SOTTO_ASSIGN(pending_read_, device().start_read(tok_, 0, 4));
  return {};
}

DeviceStatus LlmGpu::finish(int32_t* token) {
  uint32_t t = 0;
  const DeviceStatus s = device().finish_read(pending_read_, &t);
  if (s == DeviceStatus::Ok) *token = static_cast<int32_t>(t);
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

Result<std::vector<float>> LlmGpu::logits() {
  std::vector<float> out(static_cast<size_t>(hp_.n_vocab));
  SOTTO_TRY(ops_.read(logits_, 0, out.data(), out.size() * 4));
  return out;
}

Status LlmGpu::time_step(std::vector<std::pair<std::string, uint64_t>>* per_dispatch_ns) {
  per_dispatch_ns->clear();
  if (n_past_ >= n_ctx_) return error("llm: the GPU context of ", n_ctx_, " positions is full");
  const uint32_t s[4] = {static_cast<uint32_t>(n_past_), 0, 0, 0};
  SOTTO_TRY(device().write_buffer(step_, 0, s, 16));
  std::vector<uint64_t> ns;
  SOTTO_TRY(device().run_timed(plan_, &ns));
  ++n_past_;
  for (size_t i = 0; i < ns.size() && i < plan_names_.size(); ++i)
    per_dispatch_ns->push_back({plan_names_[i], ns[i]});
  return {};
}

}  // namespace sotto::gpu
