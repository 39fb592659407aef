// Matrix products: linear (x . W^T + b), matmul (ONNX MatMul), and ONNX Runtime's dynamic int8 product
// (DynamicQuantizeLinear + MatMulInteger). The time goes in cpu::gemm_nt / igemm_nt (nn/gemm.h); everything
// here lays the operands out K-contiguous for them. Weights that are not F32 (F16, weight-only int8) are
// dequantized per call, and matmul's [K, N] weights transposed per call: K * N work against M * N * K, so a
// cost only for single-row products (a model that runs those in a loop should store F32 [N, K]).
#include <cmath>
#include <cstring>

#include "nn/cpu.h"
#include "nn/gemm.h"
#include "nn/gpu_ops.h"
#include "nn/ops.h"
#include "nn/ref.h"

namespace sotto::nn {

namespace {

Shape with_last(const Shape& s, int64_t last) {
  Shape out = s;
  out[-1] = last;
  return out;
}

void add_bias_rows(float* y, int64_t rows, int64_t n, const Tensor& b) {
  if (!b.defined()) return;
  const Tensor bf = cpu::as_f32(b);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t j = 0; j < n; ++j) y[r * n + j] += bf.f32()[j];
}

// ONNX Runtime's GetQuantizationParameter + MlasQuantizeLinear for uint8: the range always includes 0;
// scale = (max - min) / 255 (1 when max == min); zero point = round-half-even(clamp(-min / scale, 0, 255));
// q = clamp(round-half-even(x / scale) + zero point, 0, 255). nearbyint rounds half to even in the default
// rounding mode, which nothing in sotto changes.
}  // namespace

QuantParams cpu::dynamic_quant_params(const float* x, int64_t n) {
  float lo = 0.0f, hi = 0.0f;
  for (int64_t i = 0; i < n; ++i) {
    lo = std::min(lo, x[i]);
    hi = std::max(hi, x[i]);
  }
  return quant_params_of_range(lo, hi);
}

QuantParams cpu::quant_params_of_range(float lo, float hi) {
  QuantParams q;
  q.scale = hi == lo ? 1.0f : (hi - lo) / 255.0f;
  const float zp = 0.0f - lo / q.scale;
  q.zero_point = static_cast<int32_t>(std::nearbyint(std::max(0.0f, std::min(255.0f, zp))));
  return q;
}

uint8_t cpu::quantize_u8(float x, const QuantParams& q) {
  const float v = std::nearbyint(x / q.scale) + static_cast<float>(q.zero_point);
  return static_cast<uint8_t>(std::max(0.0f, std::min(255.0f, v)));
}

namespace {

// Per-column (or per-tensor) zero points and scales of an int8 weight with N columns.
struct ColumnQuant {
  std::vector<int32_t> zero_points;
  std::vector<float> scales;
};

ColumnQuant column_quant(const Tensor& w, int64_t n, const Tensor& w_scales, const Tensor& w_zero_points) {
  ColumnQuant cq;
  cq.zero_points.assign(static_cast<size_t>(n), w.quant().zero_point);
  cq.scales.assign(static_cast<size_t>(n), w.quant().scale);
  if (w_zero_points.defined()) {
    const std::vector<int64_t> z = cpu::read_ints(w_zero_points);
    for (int64_t j = 0; j < n; ++j) cq.zero_points[j] = static_cast<int32_t>(z.size() == 1 ? z[0] : z[j]);
  }
  if (w_scales.defined()) {
    const Tensor s = cpu::as_f32(w_scales);
    for (int64_t j = 0; j < n; ++j) cq.scales[j] = s.elements() == 1 ? s.f32()[0] : s.f32()[j];
  }
  return cq;
}

inline int32_t int_at(const Tensor& w, int64_t i) {
  const uint8_t v = w.data<uint8_t>()[i];
  return w.dtype() == DType::I8 ? static_cast<int8_t>(v) : static_cast<int32_t>(v);
}

}  // namespace

Tensor cpu::int16_transposed(const Tensor& w) {
  return w.derived(kDerivedInt16Transposed, [&] {
    const int64_t k = w.dim(0), n = w.dim(1);
    Tensor t16 = w.ctx().empty({n, k}, DType::I16);
    int16_t* p = t16.data<int16_t>();
    for (int64_t t = 0; t < k; ++t)
      for (int64_t j = 0; j < n; ++j) p[j * k + t] = static_cast<int16_t>(int_at(w, t * n + j));
    return t16;
  });
}

// ---------------------------------------------------------------- linear

namespace ref {
Tensor linear(const Tensor& x0, const Tensor& w0, const Tensor& b) {
  if (gpu_ops::on_gpu(x0)) return gpu_ops::linear(x0, w0, b);
  const Tensor x = cpu::as_f32(x0), w = cpu::weight_f32(w0);
  const int64_t k = x.dim(-1), n = w.dim(0), m = x.elements() / k;
  NN_ASSERT(w.dim(1) == k);
  Tensor out = x.ctx().empty(with_last(x.shape(), n));
  cpu::gemm_nt_ref(m, n, k, x.f32(), k, w.f32(), k, out.f32(), n);
  add_bias_rows(out.f32(), m, n, b);
  return out;
}
}  // namespace ref

Tensor linear(const Tensor& x0, const Tensor& w0, const Tensor& b) {
  if (gpu_ops::on_gpu(x0)) return gpu_ops::linear(x0, w0, b);
  const Tensor x = cpu::as_f32(x0), w = cpu::weight_f32(w0);
  const int64_t k = x.dim(-1), n = w.dim(0), m = x.elements() / k;
  NN_ASSERT(w.rank() == 2 && w.dim(1) == k);
  Tensor out = x.ctx().empty(with_last(x.shape(), n));
  cpu::gemm_nt(x.ctx(), m, n, k, x.f32(), k, w.f32(), k, out.f32(), n);
  add_bias_rows(out.f32(), m, n, b);
  return out;
}

// ---------------------------------------------------------------- matmul

namespace ref {
Tensor matmul(const Tensor& a0, const Tensor& b0) {
  const Tensor a = cpu::as_f32(a0), b = cpu::as_f32(b0);
  const int64_t m = a.dim(-2), k = a.dim(-1), n = b.dim(-1);
  const int64_t batches = a.elements() / (m * k);
  const bool shared = b.rank() == 2;
  Tensor out = a.ctx().empty(with_last(a.shape(), n));
  for (int64_t bi = 0; bi < batches; ++bi) {
    const float* pa = a.f32() + bi * m * k;
    const float* pb = b.f32() + (shared ? 0 : bi * k * n);
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        double sum = 0;
        for (int64_t t = 0; t < k; ++t) sum += static_cast<double>(pa[i * k + t]) * pb[t * n + j];
        out.f32()[(bi * m + i) * n + j] = static_cast<float>(sum);
      }
  }
  return out;
}
}  // namespace ref

Tensor matmul(const Tensor& a0, const Tensor& b0) {
  if (gpu_ops::on_gpu(a0)) return gpu_ops::matmul(a0, b0);
  const Tensor a = cpu::as_f32(a0), b = b0.rank() == 2 ? b0 : cpu::as_f32(b0);
  NN_ASSERT(a.rank() >= 2 && b.rank() >= 2 && a.dim(-1) == b.dim(-2));
  const int64_t m = a.dim(-2), k = a.dim(-1), n = b.dim(-1);
  const int64_t batches = a.elements() / (m * k);
  const bool shared = b.rank() == 2;
  NN_ASSERT(shared || b.elements() == batches * k * n);
  Tensor out = a.ctx().empty(with_last(a.shape(), n));
  // A 2-D b is a weight: transposed (and dequantized) once, kept with it.
  const Tensor bt =
      shared ? b.derived(cpu::kDerivedTransposedF32, [&] { return transpose(cpu::as_f32(b)); }) : Tensor{};
  for (int64_t bi = 0; bi < batches; ++bi) {
    Tensor b_nk = bt;
    if (!shared) b_nk = transpose(slice(b.reshape({batches, k, n}), 0, bi, bi + 1).reshape({k, n}));
    cpu::gemm_nt(a.ctx(), m, n, k, a.f32() + bi * m * k, k, b_nk.f32(), k, out.f32() + bi * m * n, n);
  }
  return out;
}

// ---------------------------------------------------------------- dynamic int8

Tensor dynamic_quantize_linear(const Tensor& x0) {
  NN_CPU_ONLY(x0, "dynamic_quantize_linear");
  const Tensor x = cpu::as_f32(x0);
  const int64_t n = x.elements();
  const QuantParams q = cpu::dynamic_quant_params(x.f32(), n);
  Tensor out = x.ctx().empty(x.shape(), DType::U8).with_quant(q);
  for (int64_t i = 0; i < n; ++i) out.data<uint8_t>()[i] = cpu::quantize_u8(x.f32()[i], q);
  return out;
}

namespace ref {
Tensor matmul_integer_dynamic(const Tensor& x, const Tensor& w, const Tensor& w_scales,
                              const Tensor& w_zero_points) {
  const int64_t k = x.dim(-1), n = w.dim(1), m = x.elements() / k;
  const Tensor xq = dynamic_quantize_linear(x);
  const ColumnQuant cq = column_quant(w, n, w_scales, w_zero_points);
  Tensor out = x.ctx().empty(with_last(x.shape(), n));
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      int64_t acc = 0;
      for (int64_t t = 0; t < k; ++t)
        acc += (int64_t{xq.data<uint8_t>()[i * k + t]} - xq.quant().zero_point) *
               (int_at(w, t * n + j) - cq.zero_points[j]);
      out.f32()[i * n + j] = static_cast<float>(acc) * (xq.quant().scale * cq.scales[j]);
    }
  return out;
}
}  // namespace ref

namespace cpu {
// linear_int8_dynamic_avx2.cpp / conv_integer_bias.cpp: the AVX-512 VNNI product (undefined when w does not fit
// int8) and whether the CPU has it.
Tensor matmul_integer_dynamic_vnni(const Tensor& x, const Tensor& w, const Tensor& w_scales,
                                   const Tensor& w_zero_points);
bool conv_integer_use_vnni();
}  // namespace cpu

Tensor matmul_integer_dynamic(const Tensor& x, const Tensor& w, const Tensor& w_scales,
                              const Tensor& w_zero_points) {
  if (gpu_ops::on_gpu(x)) return gpu_ops::matmul_integer_dynamic(x, w, w_scales, w_zero_points);
  NN_ASSERT(w.rank() == 2 && (w.dtype() == DType::I8 || w.dtype() == DType::U8) && x.dim(-1) == w.dim(0));
#if defined(__x86_64__) && !defined(__wasm__)
  if (cpu::conv_integer_use_vnni())
    if (Tensor fast = cpu::matmul_integer_dynamic_vnni(x, w, w_scales, w_zero_points); fast.defined())
      return fast;
#endif
  const int64_t k = x.dim(-1), n = w.dim(1), m = x.elements() / k;
  Context& ctx = x.ctx();
  const Tensor xf = cpu::as_f32(x);
  float lo = 0.0f, hi = 0.0f;
  cpu::min_max(xf.f32(), m * k, lo, hi);  // dynamic_quant_params' min / max (exact in any order), in lanes
  const QuantParams q = cpu::quant_params_of_range(lo, hi);
  const ColumnQuant cq = column_quant(w, n, w_scales, w_zero_points);
  // x quantized as DynamicQuantizeLinear does, as int16 with its zero point subtracted [M, K]; w widened to int16
  // and transposed to [N, K] once and kept with it. w's zero points are applied after the product, as
  // sum_k a_k (w_kj - z_j) = sum_k a_k w_kj - z_j sum_k a_k, so the kept layout does not depend on them (exact
  // in integers). The quantization and the scaling run over the threads in rows (on one thread they
  // leave the others asleep: ~2 % of the wasm leader's time in Kokoro's ALBERT).
  Tensor a = ctx.empty({m, k}, DType::I16);
  int16_t* pa = a.data<int16_t>();
  std::vector<int32_t> row_sums(static_cast<size_t>(m), 0);
  cpu::parallel_for(ctx, m, 4 * k, [&](int64_t begin, int64_t end) {
    cpu::quantize_i16(xf.f32() + begin * k, (end - begin) * k, q, pa + begin * k);
    for (int64_t i = begin; i < end; ++i)
      for (int64_t t = 0; t < k; ++t) row_sums[static_cast<size_t>(i)] += pa[i * k + t];
  });
  const Tensor bt = cpu::int16_transposed(w);
  Tensor acc = ctx.empty({m, n}, DType::I32);
  cpu::igemm_nt(ctx, m, n, k, pa, k, bt.data<int16_t>(), k, acc.data<int32_t>(), n);
  Tensor out = ctx.empty(with_last(x.shape(), n));
  cpu::parallel_for(ctx, m, 2 * n, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i)
      for (int64_t j = 0; j < n; ++j) {
        const int32_t dot =
            acc.data<int32_t>()[i * n + j] - cq.zero_points[j] * row_sums[static_cast<size_t>(i)];
        out.f32()[i * n + j] = static_cast<float>(dot) * (q.scale * cq.scales[j]);
      }
  });
  return out;
}

}  // namespace sotto::nn
