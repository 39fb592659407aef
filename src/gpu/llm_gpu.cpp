// The decode plan of gpu/llm_gpu.h: buffers, weights (q, k, v fused into one matrix when they share a type),
// and the recording of one token's dispatches.
#include "gpu/llm_gpu.h"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace sotto::gpu {

namespace {

constexpr int64_t kFusedNormMaxRows = 2048;

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

uint64_t bytes_of(const GpuMatrixParts& m) {
  uint64_t n = 0;
  for (const GpuMatrix& p : m) n += static_cast<uint64_t>(p.rows) * p.row_words * 4;
  return n;
}

}  // namespace

Result<std::unique_ptr<LlmGpu>> LlmGpu::create(Device& device, const LlamaWeights& weights, int n_ctx,
                                               uint64_t max_binding_bytes) {
  std::unique_ptr<LlmGpu> llm(new LlmGpu(device));
  llm->ops_.set_max_binding(max_binding_bytes);
  SOTTO_TRY(llm->build(weights, n_ctx));
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

  const uint32_t d = static_cast<uint32_t>(hp.n_embd);
  const uint32_t q_dim = static_cast<uint32_t>(hp.n_head * hp.head_dim_k);
  const uint32_t kv_k = static_cast<uint32_t>(hp.n_head_kv * hp.head_dim_k);
  const uint32_t kv_v = static_cast<uint32_t>(hp.n_head_kv * hp.head_dim_v);
  const uint32_t out_dim = static_cast<uint32_t>(hp.n_head * hp.head_dim_v);
  const uint32_t ff = static_cast<uint32_t>(hp.n_ff);
  const uint32_t widest = std::max({d, q_dim + kv_k + kv_v, out_dim, ff});
  const bool post_norms = !w.layers.empty() && w.layers[0].attn_post_norm != nullptr;

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
  BufferHandle delta = 0;  // a branch's output before its post-norm (gemma3)
  if (post_norms) {
    SOTTO_ASSIGN(delta, ops_.buffer(d * 4, "delta"));
  }
  // The KV cache: one buffer per layer, so that long contexts stay under the binding limit.
  const uint64_t k_layer_bytes = static_cast<uint64_t>(n_ctx_) * kv_k * 2;
  const uint64_t v_layer_bytes = static_cast<uint64_t>(n_ctx_) * kv_v * 2;
  // Local (sliding-window) layers rotate with their own base and no scaling, as on the CPU.
  const std::vector<float> table = rope_table(n_ctx_, hp.n_rot, hp.rope_freq_base, hp.rope_freq_scale);
  SOTTO_ASSIGN(BufferHandle rope, ops_.upload(table.data(), table.size() * 4, "rope"));
  BufferHandle rope_local = 0;
  if (hp.n_swa > 0) {
    const std::vector<float> local = rope_table(n_ctx_, hp.n_rot, hp.rope_freq_base_swa, 1.0f);
    SOTTO_ASSIGN(rope_local, ops_.upload(local.data(), local.size() * 4, "rope (local layers)"));
  }
  BufferHandle gelu = 0;
  if (hp.ffn_activation == FfnActivation::Gelu) {
    SOTTO_ASSIGN(gelu, ops_.upload(w.gelu_f16.data(), w.gelu_f16.size() * 2, "gelu table"));
  }

  // Weights.
  SOTTO_ASSIGN(GpuMatrixParts embd,
               ops_.upload_matrix_parts(w.token_embd.dtype, w.token_embd.data, w.token_embd.rows,
                                        w.token_embd.cols, "token_embd"));
  GpuMatrixParts output;
  if (w.output.data == w.token_embd.data && w.output.dtype == w.token_embd.dtype &&
      gpu_matvec_supported(w.token_embd.dtype)) {
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
  // The input of a matrix behind an RMSNorm. Quantized matrices of few rows take the norm and the q8_0
  // quantization inside their own kernel (one dispatch fewer); for many rows (gate·up, the output table) every
  // workgroup would redo that work, which cost more than a dispatch on the H200 (bench/README.md), so a
  // norm_quant dispatch makes the q8_0 blocks once. F32 / F16 matrices read the normed f32 vector.
  auto normed_input = [&](const GpuMatrixParts& m, BufferHandle in, BufferHandle norm,
                          MatvecInput& out) -> Status {
    int64_t rows = 0;
    for (const GpuMatrix& part : m) rows += part.rows;
    const bool q8 = gpu_needs_q8(m[0].dtype);
    if (q8 && rows <= kFusedNormMaxRows) {
      out = MatvecInput{in, 0, norm, hp.rms_norm_eps};
      return {};
    }
    SOTTO_TRY(ops_.norm_quant(plan_, in, 0, norm, d, hp.rms_norm_eps, h, q8 ? xq : 0, q8 ? xd : 0, q8));
    out = q8 ? MatvecInput{0, 0, 0, 0.0f, xq, xd} : MatvecInput{h, 0, 0, 0.0f};
    return {};
  };
  // y[y_offset ...] (+)= m . x, one dispatch per part of m, each writing its own rows.
  auto matvec = [&](const GpuMatrixParts& m, const MatvecInput& in, BufferHandle y, uint32_t y_offset,
                    BufferHandle bias, bool accumulate, const GpuMatrixParts* up = nullptr,
                    BufferHandle gelu_table = 0) -> Status {
    if (up && up->size() != m.size()) return error("webgpu: gate and up split differently");
    for (size_t i = 0; i < m.size(); ++i) {
      const uint32_t first = static_cast<uint32_t>(m[i].first_row);
      SOTTO_TRY(ops_.matvec(plan_, m[i], in, y, y_offset + first, bias, y_offset + first, accumulate,
                            up ? &(*up)[i] : nullptr, gelu_table));
    }
    return {};
  };
  size_t mark = plan_.size();
  SOTTO_TRY(ops_.embed(plan_, embd, tok_, x, hp.embd_scale));
  record("embed", mark);

  for (int il = 0; il < hp.n_layer; ++il) {
    const LlamaLayer& l = w.layers[static_cast<size_t>(il)];
    const std::string b = cat("blk.", il, ".");
    SOTTO_ASSIGN(BufferHandle attn_norm, ops_.upload(l.attn_norm, d * 4, b + "attn_norm"));
    SOTTO_ASSIGN(BufferHandle ffn_norm, ops_.upload(l.ffn_norm, d * 4, b + "ffn_norm"));
    BufferHandle q_norm = 0, k_norm = 0, attn_post_norm = 0, ffn_post_norm = 0;
    if (l.q_norm) {
      SOTTO_ASSIGN(q_norm,
                   ops_.upload(l.q_norm, static_cast<uint64_t>(hp.head_dim_k) * 4, b + "attn_q_norm"));
      SOTTO_ASSIGN(k_norm,
                   ops_.upload(l.k_norm, static_cast<uint64_t>(hp.head_dim_k) * 4, b + "attn_k_norm"));
    }
    if (post_norms) {
      SOTTO_ASSIGN(attn_post_norm, ops_.upload(l.attn_post_norm, d * 4, b + "post_attention_norm"));
      SOTTO_ASSIGN(ffn_post_norm, ops_.upload(l.ffn_post_norm, d * 4, b + "post_ffw_norm"));
    }
    SOTTO_ASSIGN(BufferHandle k_cache, ops_.buffer(k_layer_bytes, b + "k cache"));
    SOTTO_ASSIGN(BufferHandle v_cache, ops_.buffer(v_layer_bytes, b + "v cache"));
    // q, k, v: runs of consecutive matrices of one type stacked into one matrix (all three in the usual case;
    // Gemma 3's files pair Q5_0 q and k with a Q8_0 v).
    std::vector<GpuMatrixParts> qkv_parts;
    const Matrix* qkv_m[3] = {&l.wq, &l.wk, &l.wv};
    for (size_t i = 0; i < 3;) {
      size_t j = i + 1;
      while (j < 3 && qkv_m[j]->dtype == qkv_m[i]->dtype) ++j;
      if (!gpu_matvec_supported(qkv_m[i]->dtype))
        return error("webgpu: tensor '", b, "attn_q/k/v' has type ", dtype_name(qkv_m[i]->dtype),
                     ", which the GPU kernels lack");
      SOTTO_ASSIGN(GpuMatrixParts m,
                   upload_stacked(ops_, std::span<const Matrix* const>(qkv_m + i, j - i), b + "attn_qkv"));
      qkv_parts.push_back(std::move(m));
      i = j;
    }
    BufferHandle qkv_bias = 0;
    if (l.bq || l.bk || l.bv) {
      std::vector<float> bias(q_dim + kv_k + kv_v, 0.0f);
      if (l.bq) std::memcpy(bias.data(), l.bq, q_dim * 4);
      if (l.bk) std::memcpy(bias.data() + q_dim, l.bk, kv_k * 4);
      if (l.bv) std::memcpy(bias.data() + q_dim + kv_k, l.bv, kv_v * 4);
      SOTTO_ASSIGN(qkv_bias, ops_.upload(bias.data(), bias.size() * 4, b + "qkv_bias"));
    }
    SOTTO_ASSIGN(GpuMatrixParts wo, upload(ops_, l.wo, b + "attn_output"));
    if (l.ffn_gate.dtype != l.ffn_up.dtype)
      return error("webgpu: ", b, "ffn_gate and ffn_up differ in type (", dtype_name(l.ffn_gate.dtype), ", ",
                   dtype_name(l.ffn_up.dtype), "); the fused gate·up kernel needs one type");
    SOTTO_ASSIGN(GpuMatrixParts gate, upload(ops_, l.ffn_gate, b + "ffn_gate"));
    SOTTO_ASSIGN(GpuMatrixParts up, upload(ops_, l.ffn_up, b + "ffn_up"));
    SOTTO_ASSIGN(GpuMatrixParts down, upload(ops_, l.ffn_down, b + "ffn_down"));

    mark = plan_.size();
    MatvecInput qkv_in, ffn_in;
    SOTTO_TRY(normed_input(qkv_parts[0], x, attn_norm, qkv_in));
    record("attn_norm", mark);
    uint32_t row_offset = 0;
    for (const GpuMatrixParts& m : qkv_parts) {
      const size_t one = plan_.size();
      // A norm_quant dispatch staged q8_0 input for the first run; the others (same width) read it too.
      SOTTO_TRY(matvec(m, qkv_in, qkv, row_offset, qkv_bias, false));
      for (const GpuMatrix& part : m) row_offset += static_cast<uint32_t>(part.rows);
      record("qkv", one, bytes_of(m));
    }
    mark = plan_.size();
    const bool local = hp.is_local(il);
    SOTTO_TRY(
        ops_.rope_kv(plan_, {qkv, local ? rope_local : rope, k_cache, v_cache, step_,
                             static_cast<uint32_t>(hp.n_head), static_cast<uint32_t>(hp.n_head_kv),
                             static_cast<uint32_t>(hp.head_dim_k), static_cast<uint32_t>(hp.head_dim_v),
                             static_cast<uint32_t>(hp.n_rot), hp.rope_layout == RopeLayout::Halves, 0, 0,
                             q_norm, k_norm, hp.rms_norm_eps, hp.q_scale > 0.0f ? hp.q_scale : 1.0f}));
    record("rope+kv", mark);
    mark = plan_.size();
    SOTTO_TRY(
        ops_.attention(plan_, {qkv, k_cache, v_cache, step_, attn, static_cast<uint32_t>(hp.n_head),
                               static_cast<uint32_t>(hp.n_head_kv), static_cast<uint32_t>(hp.head_dim_k),
                               static_cast<uint32_t>(hp.head_dim_v), 0, 0, static_cast<uint32_t>(n_ctx_),
                               hp.q_scale > 0.0f ? 1.0f : 1.0f / std::sqrt(static_cast<float>(hp.head_dim_k)),
                               local ? static_cast<uint32_t>(hp.n_swa) : 0u}));
    record("attention", mark);
    // A branch's output joins x directly, or (gemma3) through its post-norm: delta, then x += norm(delta).
    auto join_branch = [&](const GpuMatrixParts& m, BufferHandle in, BufferHandle post_norm,
                           const std::string& name, const std::string& norm_name) -> Status {
      size_t at = plan_.size();
      if (!post_norms) {
        SOTTO_TRY(matvec(m, {in, 0, 0, 0.0f}, x, 0, 0, true));
        record(name + " (+= x)", at, bytes_of(m));
        return {};
      }
      SOTTO_TRY(matvec(m, {in, 0, 0, 0.0f}, delta, 0, 0, false));
      record(name, at, bytes_of(m));
      at = plan_.size();
      SOTTO_TRY(ops_.norm_quant(plan_, delta, 0, post_norm, d, hp.rms_norm_eps, x, 0, 0, false, true));
      record(norm_name + " (+= x)", at);
      return {};
    };
    SOTTO_TRY(join_branch(wo, attn, attn_post_norm, "attn_output", "post_attention_norm"));
    mark = plan_.size();
    SOTTO_TRY(normed_input(gate, x, ffn_norm, ffn_in));
    record("ffn_norm", mark);
    mark = plan_.size();
    SOTTO_TRY(matvec(gate, ffn_in, h2, 0, 0, false, &up, gelu));
    record(gelu ? "gate·up GeGLU" : "gate·up SwiGLU", mark, bytes_of(gate) + bytes_of(up));
    SOTTO_TRY(join_branch(down, h2, ffn_post_norm, "ffn_down", "post_ffw_norm"));
  }
  mark = plan_.size();
  MatvecInput out_in;
  SOTTO_TRY(normed_input(output, x, output_norm, out_in));
  record("output_norm", mark);
  mark = plan_.size();
  SOTTO_TRY(matvec(output, out_in, logits_, 0, 0, false));
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
