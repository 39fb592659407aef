// The prompt plan's kernels in the op harness (models/llm/gpu/op_check.h): matrix x matrix for every weight type (with
// SwiGLU / GeGLU, bias, residual, an output row wider than the matrix), the per-token RMSNorm + q8_0 quantizer,
// the per-token embedding lookup, all on fresh random inputs against the CPU's arithmetic, with the step
// uniform counting fewer tokens than the plan holds (rows past it must stay untouched).
#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/half.h"
#include "core/quant_blocks.h"
#include "core/quantize_ref.h"
#include "cpu/gelu.h"
#include "cpu/quant_dot.h"
#include "gpu/ops.h"
#include "models/llm/gpu/op_check.h"
#include "models/llm/sampler.h"

namespace sotto::gpu {

namespace {

constexpr uint32_t kPlanTokens = 16;  // the plan's size
constexpr uint32_t kRunTokens = 11;   // tokens of the run: not a whole number of kMatmatTokens tiles

struct PromptChecker {
  Ops& ops;
  Rng rng;
  std::vector<OpCheck>& out;
  BufferHandle step = 0;

  std::vector<float> vec(size_t n, float scale = 1.0f) {
    std::vector<float> v(n);
    for (float& x : v) x = (2.0f * rng.next_unit() - 1.0f) * scale;
    return v;
  }
  void record(std::string op, std::string shape, double err, double tol) {
    out.push_back({std::move(op), std::move(shape), err, tol, err <= tol});
  }
  Result<std::vector<float>> read_f32(BufferHandle b, size_t n) {
    std::vector<float> v(n);
    SOTTO_TRY(ops.read(b, 0, v.data(), n * 4));
    return v;
  }

  // rows x cols weights of type w from random floats: the bytes, and their values as the CPU dequantizes them.
  void make_weights(DType w, int64_t rows, int64_t cols, std::vector<uint8_t>& bytes,
                    std::vector<float>& values) {
    values = vec(static_cast<size_t>(rows * cols));
    if (w == DType::F32) {
      bytes.resize(values.size() * 4);
      std::memcpy(bytes.data(), values.data(), bytes.size());
      return;
    }
    const uint64_t row_bytes = *dtype_bytes(w, static_cast<uint64_t>(cols));
    bytes.resize(static_cast<size_t>(row_bytes * rows));
    for (int64_t r = 0; r < rows; ++r) {
      quantize_row_ref(w, values.data() + r * cols, bytes.data() + r * row_bytes, cols);
      dequantize_row_ref(w, bytes.data() + r * row_bytes, values.data() + r * cols, cols);
    }
  }

  // Y[t] = W x[t] (GLU: act(W x[t]) * (U x[t])) (+ bias) (+ Y[t]) for kRunTokens tokens of a kPlanTokens plan,
  // into rows of y_stride floats at y_offset; quantized weights read the q8_0 rows a per-token norm_quant made
  // (with an RMSNorm when `normed`). Against double sums of the dequantized weights times the activations as
  // the CPU quantizes them: 1e-5 of sum |terms| for f32 / f16 weights; 5e-4 for quantized ones, whose q8_0 input
  // comes from the GPU's quantizer, where WGSL's 1 / d (2.5 ulp, not correctly rounded) can move one code by 1
  // (~1e-4 of the sum; seen once in 600 seeds), and 1e-3 behind an RMSNorm (models/llm/gpu/op_check.h).
  Status matmat(DType w, int64_t rows, int64_t cols, bool glu, bool gelu, bool bias_and_residual,
                bool normed) {
    const uint32_t y_offset = bias_and_residual ? 3 : 0;
    const uint32_t y_stride = static_cast<uint32_t>(rows) + y_offset + (bias_and_residual ? 2 : 0);
    std::vector<uint8_t> wb, ub;
    std::vector<float> wv, uv;
    make_weights(w, rows, cols, wb, wv);
    if (glu) make_weights(w, rows, cols, ub, uv);
    const size_t n_x = static_cast<size_t>(kPlanTokens * cols);
    std::vector<float> x = vec(n_x, 2.0f), norm_weight = vec(static_cast<size_t>(cols));
    std::vector<float> bias = vec(static_cast<size_t>(y_offset + rows));
    std::vector<float> y0 = vec(static_cast<size_t>(kPlanTokens) * y_stride);  // residual, and the sentinel
    const float eps = 1e-5f;
    const bool q8 = gpu_needs_q8(w);
    const std::vector<uint16_t> gelu_table = make_gelu_f16_table();

    std::vector<float> expect = y0;
    double scale = 1e-30;
    for (uint32_t t = 0; t < kRunTokens; ++t) {
      // The activations the kernel sees for token t.
      std::vector<float> xs(x.begin() + t * cols, x.begin() + (t + 1) * cols);
      if (normed) {
        double ss = 0;
        for (float v : xs) ss += static_cast<double>(v) * v;
        const float s = 1.0f / std::sqrt(static_cast<float>(ss / static_cast<double>(cols)) + eps);
        for (int64_t i = 0; i < cols; ++i) xs[i] = xs[i] * s * norm_weight[i];
      }
      if (w == DType::F16)
        for (float& v : xs) v = f16_to_f32(f32_to_f16(v));
      if (gpu_needs_q8_k(w)) {
        std::vector<BlockQ8_K> q(static_cast<size_t>(cols / 256));
        quantize_activations_q8_K(xs.data(), q.data(), cols);
        for (int64_t i = 0; i < cols; ++i) xs[i] = q[i / 256].d * static_cast<float>(q[i / 256].qs[i % 256]);
      } else if (q8) {
        std::vector<BlockQ8_0> q(static_cast<size_t>(cols / 32));
        quantize_activations_q8_0(xs.data(), q.data(), cols);
        for (int64_t i = 0; i < cols; ++i)
          xs[i] = f16_to_f32(q[i / 32].d) * static_cast<float>(q[i / 32].qs[i % 32]);
      }
      for (int64_t r = 0; r < rows; ++r) {
        double dot = 0, mag = 0, dot_u = 0, mag_u = 0;
        for (int64_t i = 0; i < cols; ++i) {
          dot += static_cast<double>(wv[r * cols + i]) * xs[i];
          mag += std::fabs(static_cast<double>(wv[r * cols + i]) * xs[i]);
          if (glu) {
            dot_u += static_cast<double>(uv[r * cols + i]) * xs[i];
            mag_u += std::fabs(static_cast<double>(uv[r * cols + i]) * xs[i]);
          }
        }
        double e = dot;
        if (glu) {
          e = gelu ? static_cast<double>(gelu_f16_lookup(gelu_table, static_cast<float>(dot))) * dot_u
                   : dot / (1.0 + std::exp(-dot)) * dot_u;
          mag = mag * std::fabs(dot_u) + mag_u * std::fabs(dot);
        }
        const size_t o = t * y_stride + y_offset + static_cast<size_t>(r);
        if (bias_and_residual) e += static_cast<double>(bias[y_offset + r]) + y0[o];
        expect[o] = static_cast<float>(e);
        scale = std::max(scale, mag);
      }
    }

    SOTTO_ASSIGN(GpuMatrix gw, ops.upload_matrix(w, wb.data(), rows, cols, "w"));
    GpuMatrix gu;
    if (glu) {
      SOTTO_ASSIGN(gu, ops.upload_matrix(w, ub.data(), rows, cols, "up"));
    }
    SOTTO_ASSIGN(BufferHandle bx, ops.upload(x.data(), n_x * 4, "x"));
    SOTTO_ASSIGN(BufferHandle bn, ops.upload(norm_weight.data(), norm_weight.size() * 4, "norm"));
    SOTTO_ASSIGN(BufferHandle bxn, ops.buffer(n_x * 4, "x normed"));
    SOTTO_ASSIGN(BufferHandle xq, ops.buffer(n_x, "xq"));
    SOTTO_ASSIGN(BufferHandle xd, ops.buffer(n_x / 8 + 4, "xd"));
    SOTTO_ASSIGN(BufferHandle bb, ops.upload(bias.data(), bias.size() * 4, "bias"));
    SOTTO_ASSIGN(BufferHandle by, ops.upload(y0.data(), y0.size() * 4, "y"));
    BufferHandle bgelu = 0;
    if (gelu) {
      SOTTO_ASSIGN(bgelu, ops.upload(gelu_table.data(), gelu_table.size() * 2, "gelu"));
    }
    std::vector<Dispatch> plan;
    MatvecInput in{bx, 0, 0, 0.0f};
    if (q8 || normed) {
      SOTTO_TRY(ops.norm_quant(plan, bx, 0, normed ? bn : 0, static_cast<uint32_t>(cols), eps, bxn,
                               q8 ? xq : 0, q8 ? xd : 0, q8, false, kPlanTokens, gpu_needs_q8_k(w)));
      in = q8 ? MatvecInput{0, 0, 0, 0.0f, xq, xd} : MatvecInput{bxn, 0, 0, 0.0f};
    }
    SOTTO_TRY(ops.matmat(plan, gw, in, by, y_offset, bias_and_residual ? bb : 0, y_offset, bias_and_residual,
                         {kPlanTokens, step, y_stride}, glu ? &gu : nullptr, bgelu));
    SOTTO_TRY(ops.device().run(plan));
    SOTTO_ASSIGN(std::vector<float> got, read_f32(by, y0.size()));
    double err = 0;
    size_t touched = 0;  // outputs that are no token's rows, or rows of tokens past the run: must not change
    for (size_t i = 0; i < got.size(); ++i) {
      const size_t t = i / y_stride, r = i % y_stride;
      const bool output = t < kRunTokens && r >= y_offset && r < y_offset + static_cast<size_t>(rows);
      if (output)
        err = std::max(err, static_cast<double>(std::fabs(got[i] - expect[i])));
      else
        touched += got[i] != y0[i] ? 1 : 0;
    }
    const std::string shape =
        cat("rows ", rows, " cols ", cols, ", ", kRunTokens, " of ", kPlanTokens, " tokens");
    record(cat("matmat ", dtype_name(w), glu ? (gelu ? " geglu" : " swiglu") : "",
               bias_and_residual ? " +bias +residual" : "", normed ? " +rms_norm" : ""),
           shape, err / scale,
           gelu     ? 2e-3
           : normed ? 1e-3
           : q8     ? 5e-4
                    : 1e-5);
    record(cat("matmat ", dtype_name(w), ": outputs outside the run's rows changed"), shape,
           static_cast<double>(touched), 0);
    if (bgelu) ops.device().destroy_buffer(bgelu);
    for (BufferHandle b : {gw.buffer, bx, bn, bxn, xq, xd, bb, by}) ops.device().destroy_buffer(b);
    if (glu) ops.device().destroy_buffer(gu.buffer);
    return {};
  }

  // x[t] = table[tok[t]] for the run's tokens: exact.
  Status embed(DType w, int64_t rows, int64_t cols) {
    std::vector<uint8_t> bytes;
    std::vector<float> values;
    make_weights(w, rows, cols, bytes, values);
    std::vector<uint32_t> tokens(kPlanTokens);
    for (uint32_t& t : tokens) t = static_cast<uint32_t>(rng.next_u64() % static_cast<uint64_t>(rows));
    SOTTO_ASSIGN(GpuMatrix g, ops.upload_matrix(w, bytes.data(), rows, cols, "table"));
    SOTTO_ASSIGN(BufferHandle tok, ops.upload(tokens.data(), tokens.size() * 4, "tokens"));
    SOTTO_ASSIGN(BufferHandle bx, ops.buffer(uint64_t{kPlanTokens} * static_cast<uint64_t>(cols) * 4, "x"));
    std::vector<Dispatch> plan;
    SOTTO_TRY(ops.embed(plan, std::span<const GpuMatrix>(&g, 1), tok, bx, 1.0f, kRunTokens));
    SOTTO_TRY(ops.device().run(plan));
    SOTTO_ASSIGN(std::vector<float> got, read_f32(bx, static_cast<size_t>(kRunTokens * cols)));
    double err = 0;
    for (uint32_t t = 0; t < kRunTokens; ++t)
      for (int64_t i = 0; i < cols; ++i)
        err = std::max(err, static_cast<double>(std::fabs(got[t * cols + i] - values[tokens[t] * cols + i])));
    record(cat("embed ", dtype_name(w), " (", kRunTokens, " tokens)"), cat("rows ", rows, " cols ", cols),
           err, 0);
    for (BufferHandle b : {g.buffer, tok, bx}) ops.device().destroy_buffer(b);
    return {};
  }
};

}  // namespace

Status check_prompt_ops(Ops& ops, uint64_t seed, std::vector<OpCheck>& out) {
  PromptChecker c{ops, Rng(seed ^ 0x70726f6d7074ull), out};
  SOTTO_ASSIGN(c.step, ops.step_buffer());
  const uint32_t s[4] = {0, kRunTokens, 0, 0};
  SOTTO_TRY(ops.device().write_buffer(c.step, 0, s, 16));
  for (DType w : {DType::F32, DType::F16, DType::Q8_0, DType::Q4_0, DType::Q5_0}) {
    SOTTO_TRY(c.matmat(w, 13, 64, false, false, false, false));
    SOTTO_TRY(c.matmat(w, 9, 96, false, false, true, false));
  }
  for (DType w : {DType::Q4_K, DType::Q6_K}) SOTTO_TRY(c.matmat(w, 7, 256, false, false, true, false));
  SOTTO_TRY(c.matmat(DType::Q4_0, 6, 64, true, false, false, true));   // SwiGLU behind the RMSNorm
  SOTTO_TRY(c.matmat(DType::F32, 6, 32, true, false, false, true));    // f32 SwiGLU: the norm's f32 rows
  SOTTO_TRY(c.matmat(DType::F16, 5, 172, false, false, true, false));  // stories260K's ffn_down width
  SOTTO_TRY(c.matmat(DType::Q4_K, 3, 256, true, true, false, true));   // GeGLU
  SOTTO_TRY(c.matmat(DType::Q6_K, 5, 512, false, false, false, true));
  SOTTO_TRY(c.matmat(DType::Q4_0, 5, 2048, false, false, true, false));  // 16 lanes per row
  for (DType w : {DType::F32, DType::Q8_0, DType::Q4_0}) SOTTO_TRY(c.embed(w, 23, 64));
  ops.device().destroy_buffer(c.step);
  return {};
}

}  // namespace sotto::gpu
