// The op harness of models/llm/gpu/op_check.h: random inputs, one plan per op, readback, comparison with the CPU.
#include "models/llm/gpu/op_check.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>

#include "core/half.h"
#include "core/quant_blocks.h"
#include "core/quantize_ref.h"
#include "cpu/attention.h"
#include "cpu/gelu.h"
#include "cpu/quant_dot.h"
#include "gpu/ops.h"

namespace sotto::gpu {

namespace {

// splitmix64 -> uniform floats in [-1, 1): deterministic per seed, the same natively and in wasm.
struct Rng {
  uint64_t state;
  uint64_t next() {
    uint64_t z = (state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  float uniform() { return static_cast<float>(next() >> 40) * 0x1p-23f - 1.0f; }
  std::vector<float> vec(size_t n, float scale = 1.0f) {
    std::vector<float> v(n);
    for (float& x : v) x = uniform() * scale;
    return v;
  }
};

struct Checker {
  Ops& ops;
  Rng& rng;
  std::vector<OpCheck>& out;
  std::vector<uint16_t> gelu_table = make_gelu_f16_table();
  // Decoding's f32 sum spreads a head's keys over up to this many workgroups (AttentionGpuArgs::splits): 3
  // leaves a share unused at some lengths; 2 gives shares of several chunks at others.
  uint32_t attention_splits = 3;

  void record(std::string op, std::string shape, double err, double tol) {
    out.push_back({std::move(op), std::move(shape), err, tol, err <= tol});
  }
  Result<std::vector<float>> read_f32(BufferHandle b, size_t n) {
    std::vector<float> v(n);
    SOTTO_TRY(ops.read(b, 0, v.data(), n * 4));
    return v;
  }

  // Quantized weights as bytes plus their dequantized values, from random floats.
  struct Weights {
    std::vector<uint8_t> bytes;
    std::vector<float> values;
  };
  Weights make_weights(DType w, int64_t rows, int64_t cols) {
    std::vector<float> f = rng.vec(static_cast<size_t>(rows * cols));
    Weights out_w;
    if (w == DType::F32) {
      out_w.bytes.resize(f.size() * 4);
      std::memcpy(out_w.bytes.data(), f.data(), out_w.bytes.size());
      out_w.values = f;
      return out_w;
    }
    const uint64_t row_bytes = *dtype_bytes(w, static_cast<uint64_t>(cols));
    out_w.bytes.resize(static_cast<size_t>(row_bytes * rows));
    out_w.values.resize(f.size());
    for (int64_t r = 0; r < rows; ++r) {
      quantize_row_ref(w, f.data() + r * cols, out_w.bytes.data() + r * row_bytes, cols);
      dequantize_row_ref(w, out_w.bytes.data() + r * row_bytes, out_w.values.data() + r * cols, cols);
    }
    return out_w;
  }

  // staged: x quantized (and normed) by a norm_quant dispatch first instead of inside the matvec.
  Status matvec(DType w, int64_t rows, int64_t cols, bool swiglu, bool bias_and_residual,
                bool with_norm = false, bool staged = false, bool gelu = false) {
    Weights wg = make_weights(w, rows, cols), wu;
    if (swiglu) wu = make_weights(w, rows, cols);
    std::vector<float> x = rng.vec(static_cast<size_t>(cols)), x_normed = x;
    std::vector<float> bias = rng.vec(static_cast<size_t>(rows)),
                       residual = rng.vec(static_cast<size_t>(rows));
    // With the fused norm: x / rms(x) * norm_weight first, as the CPU's rms_norm (sum of squares in double).
    std::vector<float> norm_weight = rng.vec(static_cast<size_t>(cols));
    const float eps = 1e-6f;
    if (with_norm) {
      double ss = 0;
      for (float v : x) ss += static_cast<double>(v) * v;
      const float scale = 1.0f / std::sqrt(static_cast<float>(ss / static_cast<double>(cols)) + eps);
      for (int64_t i = 0; i < cols; ++i) x_normed[i] = x[i] * scale * norm_weight[i];
    }
    // The activations the kernel sees: q8_0(x) as the CPU quantizes it, or x itself for F32 weights.
    std::vector<float> xs = x_normed;
    if (w == DType::F16)
      for (float& v : xs) v = f16_to_f32(f32_to_f16(v));
    if (gpu_needs_q8_k(w)) {
      std::vector<BlockQ8_K> q(static_cast<size_t>(cols / 256));
      quantize_activations_q8_K(x_normed.data(), q.data(), cols);
      for (int64_t i = 0; i < cols; ++i)
        xs[static_cast<size_t>(i)] = q[i / 256].d * static_cast<float>(q[i / 256].qs[i % 256]);
    } else if (gpu_needs_q8(w)) {
      std::vector<BlockQ8_0> q(static_cast<size_t>(cols / 32));
      quantize_activations_q8_0(x_normed.data(), q.data(), cols);
      for (int64_t i = 0; i < cols; ++i)
        xs[static_cast<size_t>(i)] = f16_to_f32(q[i / 32].d) * static_cast<float>(q[i / 32].qs[i % 32]);
    }
    std::vector<double> expect(static_cast<size_t>(rows));
    double scale = 1e-30;
    for (int64_t r = 0; r < rows; ++r) {
      double dot = 0, mag = 0, dot_u = 0, mag_u = 0;
      for (int64_t i = 0; i < cols; ++i) {
        const double t = static_cast<double>(wg.values[r * cols + i]) * xs[i];
        dot += t;
        mag += std::fabs(t);
        if (swiglu) {
          const double u = static_cast<double>(wu.values[r * cols + i]) * xs[i];
          dot_u += u;
          mag_u += std::fabs(u);
        }
      }
      double e = dot;
      if (swiglu && gelu) {  // the GPU sums in f32 and looks the f32 up: so does the reference
        e = static_cast<double>(gelu_f16_lookup(gelu_table, static_cast<float>(dot))) * dot_u;
        mag = mag * std::fabs(dot_u) + mag_u * std::fabs(dot) + 1e-30;
      } else if (swiglu) {
        e = dot / (1.0 + std::exp(-dot)) * dot_u;
        mag = mag * std::fabs(dot_u) + mag_u * std::fabs(dot) + 1e-30;
      }
      if (bias_and_residual) e += static_cast<double>(bias[r]) + residual[r];
      expect[r] = e;
      scale = std::max(scale, mag);
    }

    SOTTO_ASSIGN(GpuMatrix gw, ops.upload_matrix(w, wg.bytes.data(), rows, cols, "w"));
    GpuMatrix gu;
    if (swiglu) {
      SOTTO_ASSIGN(gu, ops.upload_matrix(w, wu.bytes.data(), rows, cols, "up"));
    }
    SOTTO_ASSIGN(BufferHandle bx, ops.upload(x.data(), x.size() * 4, "x"));
    SOTTO_ASSIGN(BufferHandle by, ops.upload(residual.data(), residual.size() * 4, "y"));
    SOTTO_ASSIGN(BufferHandle bb, ops.upload(bias.data(), bias.size() * 4, "bias"));
    SOTTO_ASSIGN(BufferHandle bnorm, ops.upload(norm_weight.data(), norm_weight.size() * 4, "norm"));
    SOTTO_ASSIGN(BufferHandle bxn, ops.buffer(static_cast<uint64_t>(cols) * 4, "x normed"));
    SOTTO_ASSIGN(BufferHandle xq, ops.buffer(static_cast<uint64_t>(cols), "xq"));
    SOTTO_ASSIGN(BufferHandle xd, ops.buffer(static_cast<uint64_t>(cols) / 8 + 4, "xd"));
    std::vector<Dispatch> plan;
    MatvecInput in{bx, 0, with_norm ? bnorm : 0, eps};
    if (staged) {
      SOTTO_TRY(ops.norm_quant(plan, bx, 0, with_norm ? bnorm : 0, static_cast<uint32_t>(cols), eps, bxn, xq,
                               xd, true, false, 1, gpu_needs_q8_k(w)));
      in = MatvecInput{0, 0, 0, 0.0f, xq, xd};
    }
    BufferHandle bgelu = 0;
    if (gelu) {
      SOTTO_ASSIGN(bgelu, ops.upload(gelu_table.data(), gelu_table.size() * 2, "gelu"));
    }
    SOTTO_TRY(ops.matvec(plan, gw, in, by, 0, bias_and_residual ? bb : 0, 0, bias_and_residual,
                         swiglu ? &gu : nullptr, bgelu));
    SOTTO_TRY(ops.device().run(plan));
    SOTTO_ASSIGN(std::vector<float> got, read_f32(by, static_cast<size_t>(rows)));
    double err = 0;
    for (int64_t r = 0; r < rows; ++r) err = std::max(err, std::fabs(got[r] - expect[r]));
    // With the norm fused in, the GPU's f32 sum of squares can differ from the CPU's double one in the last
    // bit, which can move one q8_0 code by 1: a relative error of ~1/127 of one term, hence 1e-3 there.
    if (bgelu) ops.device().destroy_buffer(bgelu);
    // GeGLU: where the f32 gate sum rounds to a neighbouring f16 table entry, gelu moves by ~1e-3 of itself.
    record(cat("matvec ", dtype_name(w), swiglu ? (gelu ? " geglu" : " swiglu") : "",
               bias_and_residual ? " +bias +residual" : "", with_norm ? " +rms_norm" : "",
               staged ? " (staged q8)" : ""),
           cat("rows ", rows, " cols ", cols), err / scale,
           gelu        ? 2e-3
           : with_norm ? 1e-3
                       : 1e-5);
    for (BufferHandle b : {gw.buffer, bx, by, bb, bnorm, bxn, xq, xd}) ops.device().destroy_buffer(b);
    if (swiglu) ops.device().destroy_buffer(gu.buffer);
    return {};
  }

  Status norm_quant(int n) {
    std::vector<float> x = rng.vec(static_cast<size_t>(n), 3.0f), w = rng.vec(static_cast<size_t>(n));
    const float eps = 1e-5f;
    double ss = 0;
    for (float v : x) ss += static_cast<double>(v) * v;
    const float scale = 1.0f / std::sqrt(static_cast<float>(ss / n) + eps);
    std::vector<float> y(static_cast<size_t>(n));
    for (int i = 0; i < n; ++i) y[i] = x[i] * scale * w[i];
    std::vector<BlockQ8_0> q(static_cast<size_t>(n / 32));
    quantize_activations_q8_0(y.data(), q.data(), n);

    SOTTO_ASSIGN(BufferHandle bx, ops.upload(x.data(), x.size() * 4, "x"));
    SOTTO_ASSIGN(BufferHandle bw, ops.upload(w.data(), w.size() * 4, "w"));
    SOTTO_ASSIGN(BufferHandle by, ops.buffer(static_cast<uint64_t>(n) * 4, "y"));
    SOTTO_ASSIGN(BufferHandle xq, ops.buffer(static_cast<uint64_t>(n), "xq"));
    SOTTO_ASSIGN(BufferHandle xd, ops.buffer(static_cast<uint64_t>(n) / 8, "xd"));
    std::vector<Dispatch> plan;
    SOTTO_TRY(ops.norm_quant(plan, bx, 0, bw, static_cast<uint32_t>(n), eps, by, xq, xd, true));
    SOTTO_TRY(ops.device().run(plan));
    SOTTO_ASSIGN(std::vector<float> got, read_f32(by, static_cast<size_t>(n)));
    std::vector<int8_t> codes(static_cast<size_t>(n));
    SOTTO_TRY(ops.read(xq, 0, codes.data(), static_cast<uint64_t>(n)));
    double err = 0, mag = 1e-30;
    int code_err = 0;
    for (int i = 0; i < n; ++i) {
      err = std::max(err, static_cast<double>(std::fabs(got[i] - y[i])));
      mag = std::max(mag, static_cast<double>(std::fabs(y[i])));
      const int diff = codes[i] - q[i / 32].qs[i % 32];
      code_err = std::max(code_err, diff < 0 ? -diff : diff);
    }
    record("rms_norm", cat("n ", n), err / mag, 1e-5);
    record("quantize q8_0", cat("n ", n), code_err, 1);
    for (BufferHandle b : {bx, bw, by, xq, xd}) ops.device().destroy_buffer(b);
    return {};
  }

  // The q8_0 quantizer alone (norm_quant without a norm) against the CPU's quantize_activations_q8_0: codes
  // and scales exact. The first blocks are halfway cases (amax = 127 * 2^e, so v * 127 / amax = k + 1/2
  // exactly: half to even, as llama.cpp's x86 quantizer rounds, not away from zero as ggml's reference does);
  // the rest random at scales from 2^-20 to 2^12, where 127 / amax and 1 / (amax / 127) give another code for
  // a few values.
  Status quantize_q8_0(int n) {
    // 2^e for normal e, from its bits (wasm's libc has no ldexp).
    auto pow2 = [](int e) { return std::bit_cast<float>(static_cast<uint32_t>(127 + e) << 23); };
    std::vector<float> x = rng.vec(static_cast<size_t>(n));
    const int ties = std::min(n / 32, 4);
    for (int b = 0; b < ties; ++b) {
      const float unit = pow2(b * 3 - 4);
      for (int i = 0; i < 32; ++i) {
        const int k = (i * 7 + b) % 127;  // k + 1/2 for k in [0, 126], both signs
        x[static_cast<size_t>(32 * b + i)] = (i % 2 ? -1.0f : 1.0f) * (static_cast<float>(k) + 0.5f) * unit;
      }
      x[static_cast<size_t>(32 * b + 31)] = 127.0f * unit;  // the block's amax
    }
    for (int b = ties; b < n / 32; ++b) {
      const float s = pow2(static_cast<int>(rng.next() % 33) - 20);
      for (int i = 0; i < 32; ++i) x[static_cast<size_t>(32 * b + i)] *= s;
    }
    std::vector<BlockQ8_0> q(static_cast<size_t>(n / 32));
    quantize_activations_q8_0(x.data(), q.data(), n);

    SOTTO_ASSIGN(BufferHandle bx, ops.upload(x.data(), x.size() * 4, "x"));
    SOTTO_ASSIGN(BufferHandle by, ops.buffer(static_cast<uint64_t>(n) * 4, "y"));
    SOTTO_ASSIGN(BufferHandle xq, ops.buffer(static_cast<uint64_t>(n), "xq"));
    SOTTO_ASSIGN(BufferHandle xd, ops.buffer(static_cast<uint64_t>(n) / 8, "xd"));
    std::vector<Dispatch> plan;
    SOTTO_TRY(ops.norm_quant(plan, bx, 0, 0, static_cast<uint32_t>(n), 1e-5f, by, xq, xd, true));
    SOTTO_TRY(ops.device().run(plan));
    std::vector<int8_t> codes(static_cast<size_t>(n));
    SOTTO_TRY(ops.read(xq, 0, codes.data(), static_cast<uint64_t>(n)));
    SOTTO_ASSIGN(std::vector<float> scales, read_f32(xd, static_cast<size_t>(n / 32)));
    int wrong = 0;
    for (int i = 0; i < n; ++i) wrong += codes[i] != q[i / 32].qs[i % 32];
    for (int b = 0; b < n / 32; ++b) wrong += scales[b] != f16_to_f32(q[b].d);
    record("quantize q8_0 exact", cat("n ", n), wrong, 0);
    for (BufferHandle b : {bx, by, xq, xd}) ops.device().destroy_buffer(b);
    return {};
  }

  Status embed(DType w, int64_t rows, int64_t cols) {
    Weights table = make_weights(w, rows, cols);
    const uint32_t token = static_cast<uint32_t>(rng.next() % static_cast<uint64_t>(rows));
    SOTTO_ASSIGN(GpuMatrix g, ops.upload_matrix(w, table.bytes.data(), rows, cols, "table"));
    SOTTO_ASSIGN(BufferHandle tok, ops.upload(&token, 4, "tok"));
    SOTTO_ASSIGN(BufferHandle bx, ops.buffer(static_cast<uint64_t>(cols) * 4, "x"));
    std::vector<Dispatch> plan;
    SOTTO_TRY(ops.embed(plan, g, tok, bx));
    SOTTO_TRY(ops.device().run(plan));
    SOTTO_ASSIGN(std::vector<float> got, read_f32(bx, static_cast<size_t>(cols)));
    double err = 0;
    for (int64_t i = 0; i < cols; ++i)
      err = std::max(err, static_cast<double>(std::fabs(got[i] - table.values[token * cols + i])));
    record(cat("embed ", dtype_name(w)), cat("rows ", rows, " cols ", cols), err, 0);
    for (BufferHandle b : {g.buffer, tok, bx}) ops.device().destroy_buffer(b);
    return {};
  }

  // A table split by rows into parts of part_rows (as upload_matrix_parts splits one over the binding limit),
  // times `scale`: every token (first, last, each part's edges, random) against dequantize_row_ref * scale.
  Status embed_parts(DType w, int64_t rows, int64_t cols, int64_t part_rows, float scale) {
    Weights table = make_weights(w, rows, cols);
    SOTTO_ASSIGN(uint32_t row_words, gpu_row_words(w, cols));
    const uint64_t saved = ops.max_binding();
    ops.set_max_binding(static_cast<uint64_t>(part_rows) * row_words * 4);
    auto parts = ops.upload_matrix_parts(w, table.bytes.data(), rows, cols, "table");
    ops.set_max_binding(saved);
    SOTTO_TRY(parts.status());
    SOTTO_ASSIGN(BufferHandle tok, ops.buffer(16, "tok"));
    SOTTO_ASSIGN(BufferHandle bx, ops.buffer(static_cast<uint64_t>(cols) * 4, "x"));
    std::vector<Dispatch> plan;
    SOTTO_TRY(ops.embed(plan, *parts, tok, bx, scale));
    double err = 0;
    std::vector<int64_t> tokens = {0, rows - 1, part_rows - 1, part_rows,
                                   static_cast<int64_t>(rng.next() % rows)};
    for (int64_t t : tokens) {
      const uint32_t tv[4] = {static_cast<uint32_t>(t), 0, 0, 0};
      SOTTO_TRY(ops.device().write_buffer(tok, 0, tv, 16));
      SOTTO_TRY(ops.device().run(plan));
      SOTTO_ASSIGN(std::vector<float> got, read_f32(bx, static_cast<size_t>(cols)));
      for (int64_t i = 0; i < cols; ++i)
        err = std::max(err, static_cast<double>(std::fabs(got[i] - table.values[t * cols + i] * scale)));
    }
    record(cat("embed ", dtype_name(w), " in ", parts->size(), " parts, scaled"),
           cat("rows ", rows, " cols ", cols, " (", plan.size(), " dispatches)"), err, 0);
    for (const GpuMatrix& m : *parts) ops.device().destroy_buffer(m.buffer);
    for (BufferHandle b : {tok, bx}) ops.device().destroy_buffer(b);
    return {};
  }

  // y += rms_norm(x, w): gemma3's post-norm and residual add, against the CPU's rms_norm (double sum).
  Status norm_add(int n) {
    std::vector<float> x = rng.vec(static_cast<size_t>(n), 3.0f), w = rng.vec(static_cast<size_t>(n));
    std::vector<float> y = rng.vec(static_cast<size_t>(n), 2.0f), expect = y;
    const float eps = 1e-6f;
    double ss = 0;
    for (float v : x) ss += static_cast<double>(v * v);
    const float scale = 1.0f / std::sqrt(static_cast<float>(ss / n) + eps);
    double mag = 1e-30;
    for (int i = 0; i < n; ++i) {
      expect[i] = y[i] + x[i] * scale * w[i];
      mag = std::max(mag, static_cast<double>(std::fabs(expect[i])));
    }
    SOTTO_ASSIGN(BufferHandle bx, ops.upload(x.data(), x.size() * 4, "x"));
    SOTTO_ASSIGN(BufferHandle bw, ops.upload(w.data(), w.size() * 4, "w"));
    SOTTO_ASSIGN(BufferHandle by, ops.upload(y.data(), y.size() * 4, "y"));
    std::vector<Dispatch> plan;
    SOTTO_TRY(ops.norm_quant(plan, bx, 0, bw, static_cast<uint32_t>(n), eps, by, 0, 0, false, true));
    SOTTO_TRY(ops.device().run(plan));
    SOTTO_ASSIGN(std::vector<float> got, read_f32(by, static_cast<size_t>(n)));
    double err = 0;
    for (int i = 0; i < n; ++i) err = std::max(err, static_cast<double>(std::fabs(got[i] - expect[i])));
    record("rms_norm (+= y)", cat("n ", n), err / mag, 1e-5);
    for (BufferHandle b : {bx, bw, by}) ops.device().destroy_buffer(b);
    return {};
  }

  // RoPE + cache write for positions 0..n_pos-1 (one run each, the step uniform changing), then attention at
  // the last position, against the CPU's formula and attend_head_ref on the CPU's own f16 cache.
  // qk_norm: a per-head RMSNorm of q and k first; q_scale > 0: q times it after RoPE and attention's scale 1
  // (gemma3); window > 0: sliding-window attention. prompt_split > 0: as a prompt does, in two runs of the
  // batched kernels (positions 0 .. split - 1, then split .. n_pos - 1, the second attending to the first's
  // cache rows), with every token of the second run's attention checked.
  Status rope_attention(int n_head, int n_head_kv, int hd, int n_rot, bool halves, int n_pos,
                        bool qk_norm = false, float q_scale = 0.0f, int window = 0, int prompt_split = 0) {
    const int q_dim = n_head * hd, kv_dim = n_head_kv * hd, qkv_dim = q_dim + 2 * kv_dim;
    const int n_ctx = n_pos + 3;
    const bool prompt = prompt_split > 0;
    const uint32_t rows = prompt ? static_cast<uint32_t>(n_pos) : 1u;  // tokens the plan holds
    std::vector<float> table = rope_table(n_ctx, n_rot, 10000.0f);
    std::vector<uint16_t> k_cache(static_cast<size_t>(n_ctx * kv_dim)), v_cache(k_cache.size());
    SOTTO_ASSIGN(BufferHandle btab, ops.upload(table.data(), table.size() * 4, "rope"));
    SOTTO_ASSIGN(BufferHandle bk, ops.buffer(k_cache.size() * 2, "k"));
    SOTTO_ASSIGN(BufferHandle bv, ops.buffer(v_cache.size() * 2, "v"));
    SOTTO_ASSIGN(BufferHandle bqkv, ops.buffer(uint64_t{rows} * static_cast<uint64_t>(qkv_dim) * 4, "qkv"));
    SOTTO_ASSIGN(BufferHandle bout, ops.buffer(uint64_t{rows} * static_cast<uint64_t>(q_dim) * 4, "out"));
    SOTTO_ASSIGN(BufferHandle step, ops.step_buffer());
    const float eps = 1e-6f;
    std::vector<float> q_norm = rng.vec(static_cast<size_t>(hd)), k_norm = rng.vec(static_cast<size_t>(hd));
    SOTTO_ASSIGN(BufferHandle bqn, ops.upload(q_norm.data(), q_norm.size() * 4, "q_norm"));
    SOTTO_ASSIGN(BufferHandle bkn, ops.upload(k_norm.data(), k_norm.size() * 4, "k_norm"));
    std::vector<Dispatch> plan;
    RopeKvArgs ra{bqkv,
                  btab,
                  bk,
                  bv,
                  step,
                  static_cast<uint32_t>(n_head),
                  static_cast<uint32_t>(n_head_kv),
                  static_cast<uint32_t>(hd),
                  static_cast<uint32_t>(hd),
                  static_cast<uint32_t>(n_rot),
                  halves,
                  0,
                  0,
                  qk_norm ? bqn : 0,
                  qk_norm ? bkn : 0,
                  eps,
                  q_scale > 0.0f ? q_scale : 1.0f};
    ra.n_tokens = rows;
    SOTTO_TRY(ops.rope_kv(plan, ra));
    const size_t rope_only = plan.size();
    const float scale = q_scale > 0.0f ? 1.0f : 1.0f / std::sqrt(static_cast<float>(hd));
    AttentionGpuArgs aa{bqkv,
                        bk,
                        bv,
                        step,
                        bout,
                        static_cast<uint32_t>(n_head),
                        static_cast<uint32_t>(n_head_kv),
                        static_cast<uint32_t>(hd),
                        static_cast<uint32_t>(hd),
                        0,
                        0,
                        static_cast<uint32_t>(n_ctx),
                        scale,
                        static_cast<uint32_t>(window)};
    aa.n_tokens = rows;
    SOTTO_TRY(ops.attention(plan, aa));
    // Decoding's single dispatch: the same attention with RoPE and the cache write inside, on caches and an
    // output of its own; it must give the two dispatches' cache rows and output bit for bit.
    SOTTO_ASSIGN(BufferHandle bk1, ops.buffer(k_cache.size() * 2, "k, rope inside"));
    SOTTO_ASSIGN(BufferHandle bv1, ops.buffer(v_cache.size() * 2, "v, rope inside"));
    SOTTO_ASSIGN(BufferHandle bout1, ops.buffer(static_cast<uint64_t>(q_dim) * 4, "out, rope inside"));
    SOTTO_ASSIGN(BufferHandle bqkv1, ops.buffer(static_cast<uint64_t>(qkv_dim) * 4, "qkv, rope inside"));
    std::vector<Dispatch> inside_plan;
    RopeKvArgs ra1 = ra;
    AttentionGpuArgs aa1 = aa;
    ra1.qkv = aa1.qkv = bqkv1;
    ra1.k_cache = aa1.k_cache = bk1;
    ra1.v_cache = aa1.v_cache = bv1;
    aa1.out = bout1;
    aa1.rope = &ra1;
    if (!prompt) SOTTO_TRY(ops.attention(inside_plan, aa1));
    // The f32 sum's kernels, run once after the last position on the same cache and rotated q (and, decoding,
    // with RoPE inside on the inside plan's cache and raw q, rewriting its last row with the same bits).
    SOTTO_ASSIGN(BufferHandle bout_f32,
                 ops.buffer(uint64_t{rows} * static_cast<uint64_t>(q_dim) * 4, "out f32"));
    SOTTO_ASSIGN(BufferHandle bout1_f32,
                 ops.buffer(static_cast<uint64_t>(q_dim) * 4, "out f32, rope inside"));
    std::vector<Dispatch> f32_plan, inside_f32_plan;
    AttentionGpuArgs af = aa, af1 = aa1;
    af.f32_sum = af1.f32_sum = true;
    if (!prompt) af.splits = af1.splits = attention_splits;
    af.out = bout_f32;
    af1.out = bout1_f32;
    SOTTO_TRY(ops.attention(f32_plan, af));
    if (!prompt) SOTTO_TRY(ops.attention(inside_f32_plan, af1));

    // The CPU: random q, k, v per position, rotated (and normed, scaled) as the kernel should, into its cache.
    std::vector<std::vector<float>> inputs, rotated;
    for (int pos = 0; pos < n_pos; ++pos) {
      std::vector<float> qkv = rng.vec(static_cast<size_t>(qkv_dim));
      inputs.push_back(qkv);
      for (int h = 0; h < n_head + n_head_kv; ++h) {
        float* head = qkv.data() + h * hd;
        if (qk_norm) {  // as the CPU's rms_norm: f32 squares summed in double
          double ss = 0;
          for (int i = 0; i < hd; ++i) ss += static_cast<double>(head[i] * head[i]);
          const float sc = 1.0f / std::sqrt(static_cast<float>(ss / hd) + eps);
          const float* nw = h < n_head ? q_norm.data() : k_norm.data();
          for (int i = 0; i < hd; ++i) head[i] = head[i] * sc * nw[i];
        }
        for (int i = 0; i < n_rot / 2; ++i) {
          const float c = table[(pos * (n_rot / 2) + i) * 2], sn = table[(pos * (n_rot / 2) + i) * 2 + 1];
          const int a = halves ? i : 2 * i, b = halves ? i + n_rot / 2 : 2 * i + 1;
          const float x0 = head[a], x1 = head[b];
          head[a] = x0 * c - x1 * sn;
          head[b] = x0 * sn + x1 * c;
        }
        if (h < n_head && q_scale > 0.0f)
          for (int i = 0; i < hd; ++i) head[i] *= q_scale;
      }
      for (int i = 0; i < kv_dim; ++i) {
        k_cache[pos * kv_dim + i] = f32_to_f16(qkv[q_dim + i]);
        v_cache[pos * kv_dim + i] = f32_to_f16(qkv[q_dim + kv_dim + i]);
      }
      rotated.push_back(std::move(qkv));
    }

    // The GPU: one position per run, or the prompt's two runs; q checked after each.
    double q_err = 0, k_err = 0;
    std::vector<std::vector<float>> gpu_q(static_cast<size_t>(n_pos));  // q as the GPU rotated it
    std::vector<std::pair<int, int>> runs;                              // first position, count
    if (prompt) {
      runs = {{0, prompt_split}, {prompt_split, n_pos - prompt_split}};
    } else {
      for (int pos = 0; pos < n_pos; ++pos) runs.push_back({pos, 1});
    }
    for (const auto& [first, count] : runs) {
      for (int t = 0; t < count; ++t)
        SOTTO_TRY(ops.device().write_buffer(bqkv, static_cast<uint64_t>(t) * qkv_dim * 4,
                                            inputs[static_cast<size_t>(first + t)].data(),
                                            static_cast<uint64_t>(qkv_dim) * 4));
      const uint32_t s[4] = {static_cast<uint32_t>(first), static_cast<uint32_t>(count), 0, 0};
      SOTTO_TRY(ops.device().write_buffer(step, 0, s, 16));
      const bool last = first + count == n_pos;
      SOTTO_TRY(ops.device().run(std::span<const Dispatch>(plan.data(), last ? plan.size() : rope_only)));
      if (!prompt) {
        SOTTO_TRY(ops.device().write_buffer(bqkv1, 0, inputs[static_cast<size_t>(first)].data(),
                                            static_cast<uint64_t>(qkv_dim) * 4));
        SOTTO_TRY(ops.device().run(inside_plan));
      }
      SOTTO_ASSIGN(std::vector<float> got, read_f32(bqkv, static_cast<size_t>(count * qkv_dim)));
      for (int t = 0; t < count; ++t)
        gpu_q[static_cast<size_t>(first + t)].assign(got.begin() + t * qkv_dim,
                                                     got.begin() + t * qkv_dim + q_dim);
      for (int t = 0; t < count; ++t)
        for (int i = 0; i < q_dim; ++i)
          q_err = std::max(q_err, static_cast<double>(std::fabs(got[t * qkv_dim + i] -
                                                                rotated[static_cast<size_t>(first + t)][i])));
    }
    // Twice, the outputs cleared in between: the second run counts on the first leaving the split's arrival
    // counters at zero (else no share would combine, and the zeros would stay).
    for (int again = 0; again < 2; ++again) {
      if (again) {
        const std::vector<float> zeros(static_cast<size_t>(rows) * static_cast<size_t>(q_dim), 0.0f);
        SOTTO_TRY(ops.device().write_buffer(bout_f32, 0, zeros.data(), zeros.size() * 4));
        if (!prompt) SOTTO_TRY(ops.device().write_buffer(bout1_f32, 0, zeros.data(), uint64_t(q_dim) * 4));
      }
      SOTTO_TRY(ops.device().run(f32_plan));
      if (!prompt) SOTTO_TRY(ops.device().run(inside_f32_plan));
    }
    std::vector<uint16_t> gk(k_cache.size());
    SOTTO_TRY(ops.read(bk, 0, gk.data(), gk.size() * 2));
    for (size_t i = 0; i < static_cast<size_t>(n_pos * kv_dim); ++i)
      k_err = std::max(k_err, static_cast<double>(std::fabs(f16_to_f32(gk[i]) - f16_to_f32(k_cache[i]))));
    const std::string shape =
        cat("heads ", n_head, "/", n_head_kv, " dim ", hd, " rot ", n_rot, halves ? " halves" : " adjacent",
            " positions ", n_pos, qk_norm ? " +qk_norm" : "", q_scale > 0.0f ? " +q_scale" : "",
            window > 0 ? cat(" window ", window) : std::string(),
            prompt ? cat(", prompt runs of ", prompt_split, " and ", n_pos - prompt_split) : std::string());
    record("rope q", shape, q_err, 1e-5);
    record("rope k -> f16 cache", shape, k_err, 2e-3);
    // Attention at the last run's positions, each over the keys up to its own (causal).
    const int first_checked = prompt ? prompt_split : n_pos - 1;
    SOTTO_ASSIGN(std::vector<float> got,
                 read_f32(bout, static_cast<size_t>((n_pos - first_checked) * q_dim)));
    float vmax = 1e-30f;
    for (int i = 0; i < n_pos * kv_dim; ++i) vmax = std::max(vmax, std::fabs(f16_to_f32(v_cache[i])));
    double a_err = 0;
    AttentionScratch scratch;
    std::vector<float> expect(static_cast<size_t>(q_dim));
    for (int pos = first_checked; pos < n_pos; ++pos) {
      const std::vector<float>& q = rotated[static_cast<size_t>(pos)];
      for (int h = 0; h < n_head; ++h) {
        const int kvh = h / (n_head / n_head_kv);
        // The window's first key: position p sees p - window + 1 .. p (cpu/attention.h).
        const int first = window > 0 ? std::max(0, pos + 1 - window) : 0;
        const size_t skip = static_cast<size_t>(first) * kv_dim;
        attend_head_ref(q.data() + h * hd, k_cache.data() + skip + kvh * hd, kv_dim,
                        v_cache.data() + skip + kvh * hd, kv_dim, pos + 1 - first, hd, hd, scale,
                        expect.data() + h * hd, scratch);
      }
      for (int i = 0; i < q_dim; ++i)
        a_err = std::max(a_err,
                         static_cast<double>(std::fabs(got[(pos - first_checked) * q_dim + i] - expect[i])));
    }
    record(prompt ? "attention (prompt, causal, GQA)" : "attention (decode, GQA)", shape, a_err / vmax, 2e-3);
    // The f32 sum against softmax(q k / sqrt(d)) v in double on the GPU's q (rounded to f16, as the kernel does)
    // and the f16 K and V: f32 rounding over a few hundred keys, ~1e-7 of the value scale on SwiftShader and
    // the H200 (WGSL lets exp be a few ulps off).
    {
      SOTTO_ASSIGN(std::vector<float> got_f32,
                   read_f32(bout_f32, static_cast<size_t>((n_pos - first_checked) * q_dim)));
      double f32_err = 0;
      std::vector<double> w, o(static_cast<size_t>(hd)), q16(static_cast<size_t>(q_dim));
      for (int pos = first_checked; pos < n_pos; ++pos) {
        for (int i = 0; i < q_dim; ++i)
          q16[static_cast<size_t>(i)] =
              f16_to_f32(f32_to_f16(gpu_q[static_cast<size_t>(pos)][static_cast<size_t>(i)]));
        for (int h = 0; h < n_head; ++h) {
          const int kvh = h / (n_head / n_head_kv);
          const int first = window > 0 ? std::max(0, pos + 1 - window) : 0;
          w.assign(static_cast<size_t>(pos + 1 - first), 0.0);
          double m = -1e300, sum = 0;
          for (int t = first; t <= pos; ++t) {
            double d = 0;
            for (int i = 0; i < hd; ++i)
              d += q16[static_cast<size_t>(h * hd + i)] *
                   f16_to_f32(k_cache[static_cast<size_t>(t * kv_dim + kvh * hd + i)]);
            w[static_cast<size_t>(t - first)] = d * scale;
            m = std::max(m, d * scale);
          }
          for (double& x : w) sum += (x = std::exp(x - m));
          std::fill(o.begin(), o.end(), 0.0);
          for (int t = first; t <= pos; ++t)
            for (int i = 0; i < hd; ++i)
              o[static_cast<size_t>(i)] +=
                  w[static_cast<size_t>(t - first)] *
                  f16_to_f32(v_cache[static_cast<size_t>(t * kv_dim + kvh * hd + i)]);
          for (int i = 0; i < hd; ++i)
            f32_err = std::max(
                f32_err, std::fabs(got_f32[static_cast<size_t>((pos - first_checked) * q_dim + h * hd + i)] -
                                   o[static_cast<size_t>(i)] / sum));
        }
      }
      record(prompt ? "attention, f32 sum (prompt)"
                    : cat("attention, f32 sum (decode, keys split ", attention_splits, " ways)"),
             shape, f32_err / vmax, 1e-5);
    }
    if (!prompt) {
      std::vector<uint16_t> k1(k_cache.size()), v1(k_cache.size()), gv(k_cache.size());
      SOTTO_TRY(ops.read(bk1, 0, k1.data(), k1.size() * 2));
      SOTTO_TRY(ops.read(bv1, 0, v1.data(), v1.size() * 2));
      SOTTO_TRY(ops.read(bv, 0, gv.data(), gv.size() * 2));
      SOTTO_ASSIGN(std::vector<float> out1, read_f32(bout1, static_cast<size_t>(q_dim)));
      double differ = 0;  // values that are not the two dispatches' bit for bit
      const size_t rows_used = static_cast<size_t>(n_pos * kv_dim);
      for (size_t i = 0; i < rows_used; ++i) differ += (k1[i] != gk[i]) + (v1[i] != gv[i]);
      for (int i = 0; i < q_dim; ++i) differ += std::memcmp(&out1[i], &got[i], 4) != 0;
      record("attention with RoPE inside vs rope_kv + attention (bits)", shape, differ, 0.0);
      SOTTO_ASSIGN(std::vector<float> f32_plain, read_f32(bout_f32, static_cast<size_t>(q_dim)));
      SOTTO_ASSIGN(std::vector<float> f32_inside, read_f32(bout1_f32, static_cast<size_t>(q_dim)));
      double differ_f32 = 0;
      for (int i = 0; i < q_dim; ++i) differ_f32 += std::memcmp(&f32_plain[i], &f32_inside[i], 4) != 0;
      record("attention, f32 sum, with RoPE inside vs without (bits)", shape, differ_f32, 0.0);
    }
    for (BufferHandle b : {btab, bk, bv, bqkv, bout, bqn, bkn, bk1, bv1, bout1, bqkv1, bout_f32, bout1_f32})
      ops.device().destroy_buffer(b);
    return {};
  }

  Status argmax(uint32_t n) {
    std::vector<float> logits = rng.vec(n, 10.0f);
    const uint32_t expect =
        static_cast<uint32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
    SOTTO_ASSIGN(BufferHandle bl, ops.upload(logits.data(), logits.size() * 4, "logits"));
    SOTTO_ASSIGN(BufferHandle bp, ops.buffer(Ops::argmax_partial_bytes(n), "partial"));
    SOTTO_ASSIGN(BufferHandle bt, ops.buffer(16, "tok"));
    std::vector<Dispatch> plan;
    SOTTO_TRY(ops.argmax(plan, bl, n, bp, bt));
    SOTTO_TRY(ops.device().run(plan));
    uint32_t got = 0;
    SOTTO_TRY(ops.read(bt, 0, &got, 4));
    record("argmax", cat("n ", n), got == expect ? 0 : 1, 0);
    for (BufferHandle b : {bl, bp, bt}) ops.device().destroy_buffer(b);
    return {};
  }
};

}  // namespace

Result<std::vector<OpCheck>> run_op_checks(Device& device, const OpCheckOptions& options) {
  Ops ops(device);
  KernelFeatures f = ops.features();
  f.packed_dot = options.packed_dot && f.packed_dot;
  f.subgroups = options.subgroups && f.subgroups;
  f.f16 = options.f16 && f.f16;
  ops.set_features(f);
  Rng rng{options.seed};
  std::vector<OpCheck> out;
  Checker c{ops, rng, out};
  // Small shapes: SwiftShader runs every invocation on the CPU.
  for (DType w : {DType::F32, DType::F16, DType::Q8_0, DType::Q4_0, DType::Q5_0}) {
    SOTTO_TRY(c.matvec(w, 13, 64, false, false));
    SOTTO_TRY(c.matvec(w, 9, 96, false, true));
  }
  for (DType w : {DType::Q4_K, DType::Q6_K}) {
    SOTTO_TRY(c.matvec(w, 7, 256, false, false));
    SOTTO_TRY(c.matvec(w, 5, 512, false, true));
  }
  // 144 blocks a row: 9 per lane (matvec_lanes), two steps of four (wgsl_matvec) and one more; gate·up alike.
  SOTTO_TRY(c.matvec(DType::Q4_0, 5, 4608, false, true));
  SOTTO_TRY(c.matvec(DType::Q4_0, 3, 4608, true, false));
  SOTTO_TRY(c.matvec(DType::Q4_0, 6, 64, true, false));
  SOTTO_TRY(c.matvec(DType::F32, 6, 32, true, false));
  SOTTO_TRY(c.matvec(DType::F16, 5, 172, false, true));  // stories260K's ffn_down: 172 is no multiple of 32
  SOTTO_TRY(c.matvec(DType::Q4_K, 3, 256, true, false));
  SOTTO_TRY(c.matvec(DType::Q4_0, 7, 96, false, false, true));
  SOTTO_TRY(c.matvec(DType::Q6_K, 5, 256, true, false, true));
  SOTTO_TRY(c.matvec(DType::Q8_0, 9, 64, false, true, false, true));
  SOTTO_TRY(c.matvec(DType::Q5_0, 6, 96, true, false, true, true));
  SOTTO_TRY(c.norm_quant(64));
  SOTTO_TRY(c.norm_quant(896));
  SOTTO_TRY(c.quantize_q8_0(160));
  SOTTO_TRY(c.quantize_q8_0(4864));
  for (DType w : {DType::F32, DType::F16, DType::Q8_0, DType::Q4_0, DType::Q5_0})
    SOTTO_TRY(c.embed(w, 11, 64));
  SOTTO_TRY(c.rope_attention(4, 2, 16, 16, false, 5));
  SOTTO_TRY(c.rope_attention(6, 2, 8, 8, true, 9));
  SOTTO_TRY(c.rope_attention(2, 2, 64, 32, true, 3));
  // gemma3: q/k norms, q scaled after RoPE, a sliding window shorter than the positions; head_dim 256.
  SOTTO_TRY(c.rope_attention(4, 1, 32, 32, true, 9, true, 0.17f, 4));
  SOTTO_TRY(c.rope_attention(2, 1, 256, 256, true, 4, true, 0.0625f, 0));
  SOTTO_TRY(c.rope_attention(2, 1, 256, 256, true, 37));  // a longer walk over the cache
  // The prompt's batched kernels: two runs, the second attending to the first's rows; with a window, q/k norms.
  SOTTO_TRY(c.rope_attention(4, 2, 16, 16, false, 13, false, 0.0f, 0, 5));
  SOTTO_TRY(c.rope_attention(4, 1, 32, 32, true, 11, true, 0.17f, 4, 6));
  SOTTO_TRY(c.matvec(DType::Q5_0, 6, 96, true, false, true, false, true));   // GeGLU, fused norm
  SOTTO_TRY(c.matvec(DType::Q4_K, 3, 256, true, false, false, true, true));  // GeGLU, staged q8_K
  SOTTO_TRY(c.norm_add(640));
  SOTTO_TRY(c.embed_parts(DType::Q8_0, 11, 64, 3, 25.298f));  // 4 parts: one dispatch
  SOTTO_TRY(c.embed_parts(DType::F32, 13, 32, 2, 1.0f));      // 7 parts: two dispatches
  SOTTO_TRY(c.argmax(17));
  SOTTO_TRY(c.argmax(3000));
  // Attention over several of its chunks of keys (128 keys a chunk up to head dim 32, 64 at 64, 16 at 256):
  // decode, a window across a chunk's edge, a prompt whose second run starts inside a chunk. Last, so that
  // the checks above keep their random inputs.
  c.attention_splits = 2;  // 300 keys in shares of two 128-key chunks
  SOTTO_TRY(c.rope_attention(4, 2, 16, 16, false, 300));
  c.attention_splits = 3;
  SOTTO_TRY(c.rope_attention(4, 2, 64, 64, true, 150, true, 0.0f, 100));
  SOTTO_TRY(c.rope_attention(2, 1, 256, 256, true, 41, true, 0.0625f, 0, 19));
  SOTTO_TRY(c.rope_attention(4, 2, 64, 64, false, 200, false, 0.0f, 70, 130));
  SOTTO_TRY(check_f16_conversion(ops, options.seed, out));
  SOTTO_TRY(check_prompt_ops(ops, options.seed, out));
  SOTTO_TRY(check_sampling_ops(ops, options.seed, out));
  if (f.subgroups) SOTTO_TRY(check_subgroup_reductions(ops, options.seed, out));
  return out;
}

std::string format_op_checks(const std::vector<OpCheck>& checks) {
  std::string s;
  for (const OpCheck& c : checks)
    s += cat(c.passed ? "ok    " : "FAIL  ", c.op, "  ", c.shape, "  error ", c.error, " (tolerance ",
             c.tolerance, ")\n");
  return s;
}

}  // namespace sotto::gpu
