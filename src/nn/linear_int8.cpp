// linear_int8_affine: y = x . W^T + b with W held as int8 and dequantized as the ONNX exporters' weight-only
// quantization does, w = q * scale + offset (one float scale and one float offset per tensor; Moonshine's
// files). Computed as y = scale * (x . q) + offset * sum(x) + b, so the weights are read as int8: a decoder
// step's matrix-vector products are bound by the bytes of weights they read, 4x fewer than F32.
//
// x . q is an integer product: each row of x is quantized to int16 with its own scale (x ~ xs * xq, |xq| <=
// 32767, round half to even), and the kernels sum int16 x int8 products exactly (int32 lanes, int64 totals).
// That takes 3 instructions per 8 weights in wasm (load8x8, i32x4.dot_i16x8_s, add) where converting each
// weight to float took 7, and in AVX2 3 per 16 (vpmovsxbw, vpmaddwd, vpaddd). The price is x's rounding:
// |error| <= xs / 2 * sum_t |w_t| per output (x's relative precision ~1.5e-5 of the row's largest value),
// far below the int8 weights' own; every kernel gives the same integers, so native and wasm agree bit for bit.
// Threads split the output columns (rows of W); the SIMD kernels' loop is linear_int8_kernel.h (its steps in
// linear_int8_avx2.cpp and linear_int8_wasm.cpp), the portable loop below is the scalar reference and the
// native fallback.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "cpu/cpu_features.h"
#include "nn/cpu.h"
#include "nn/gpu_ops.h"
#include "nn/ops.h"
#include "nn/ref.h"

namespace sotto::nn {

namespace cpu {
// y[i * n + j] = float(sum_t xq[i * k + t] * q[j * k + t]) for j in [n_begin, n_end), the sum exact.
void linear_int8_rows_wasm(const int16_t* xq, int64_t m, int64_t k, const int8_t* q, int64_t n_begin,
                           int64_t n_end, float* y, int64_t n);  // linear_int8_wasm.cpp
void linear_int8_rows_avx2(const int16_t* xq, int64_t m, int64_t k, const int8_t* q, int64_t n_begin,
                           int64_t n_end, float* y, int64_t n);
}  // namespace cpu

namespace {

// The plain scalar reference of the kernels: the same exact integer sums, in int64.
[[maybe_unused]] void rows_portable(const int16_t* xq, int64_t m, int64_t k, const int8_t* q, int64_t n_begin,
                                    int64_t n_end, float* y, int64_t n) {
  for (int64_t j = n_begin; j < n_end; ++j) {
    const int8_t* qj = q + j * k;
    for (int64_t i = 0; i < m; ++i) {
      const int16_t* xi = xq + i * k;
      int64_t s = 0;
      for (int64_t t = 0; t < k; ++t) s += int32_t{xi[t]} * int32_t{qj[t]};
      y[i * n + j] = static_cast<float>(s);
    }
  }
}

// The rows of x quantized for the integer products: xq[i, t] = round_half_even(x[i, t] * 32767 / max_t |x[i, t]|),
// xs[i] = max / 32767, sum_x[i] = sum_t x[i, t] (for the offset's term). A row holding NaN or infinity gets
// xs = NaN and xq = 0, so its outputs are NaN as a float product's would be.
struct QuantizedRows {
  std::vector<int16_t> xq;
  std::vector<float> xs, sum_x;
};

QuantizedRows quantize_rows(const float* x, int64_t m, int64_t k) {
  QuantizedRows r{std::vector<int16_t>(static_cast<size_t>(m * k)),
                  std::vector<float>(static_cast<size_t>(m)), std::vector<float>(static_cast<size_t>(m))};
  for (int64_t i = 0; i < m; ++i) {
    const float* xi = x + i * k;
    float amax = 0, sum = 0;
    bool finite = true;
    for (int64_t t = 0; t < k; ++t) {
      finite = finite && std::isfinite(xi[t]);
      amax = std::max(amax, std::fabs(xi[t]));
      sum += xi[t];
    }
    r.sum_x[static_cast<size_t>(i)] = sum;
    int16_t* qi = r.xq.data() + i * k;
    if (!finite) {
      r.xs[static_cast<size_t>(i)] = std::numeric_limits<float>::quiet_NaN();
      continue;
    }
    if (amax == 0) continue;  // xq and xs stay 0
    r.xs[static_cast<size_t>(i)] = amax / 32767.0f;
    const float inv = 32767.0f / amax;
    for (int64_t t = 0; t < k; ++t)
      qi[t] = static_cast<int16_t>(std::clamp(std::nearbyint(xi[t] * inv), -32767.0f, 32767.0f));
  }
  return r;
}

// y[i, j] <- scale * xs[i] * y[i, j] + offset * sum_x[i] + b[j] over the columns [begin, end).
void finish(float* y, int64_t m, int64_t n, int64_t begin, int64_t end, const QuantizedRows& r, float scale,
            float offset, const float* bias) {
  for (int64_t i = 0; i < m; ++i) {
    const float sx = scale * r.xs[static_cast<size_t>(i)], shift = offset * r.sum_x[static_cast<size_t>(i)];
    for (int64_t j = begin; j < end; ++j) y[i * n + j] = sx * y[i * n + j] + shift + (bias ? bias[j] : 0.0f);
  }
}

Shape with_last_dim(const Shape& s, int64_t last) {
  Shape out = s;
  out[-1] = last;
  return out;
}

}  // namespace

namespace ref {
Tensor linear_int8_affine(const Tensor& x0, const Tensor& w, float scale, float offset, const Tensor& b) {
  const Tensor x = cpu::as_f32(x0);
  const int64_t k = x.dim(-1), n = w.dim(0), m = x.elements() / k;
  Tensor out = x.ctx().empty(with_last_dim(x.shape(), n));
  const std::vector<float> bias =
      b.defined() ? *b.ctx().to_floats(b) : std::vector<float>(static_cast<size_t>(n));
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double sum = 0;
      for (int64_t t = 0; t < k; ++t) {
        // The weight exactly as the graph dequantizes it: float(q) * scale, then + offset, in float.
        const float wv = static_cast<float>(w.data<int8_t>()[j * k + t]) * scale + offset;
        sum += static_cast<double>(x.f32()[i * k + t]) * wv;
      }
      out.f32()[i * n + j] = static_cast<float>(sum + bias[static_cast<size_t>(j)]);
    }
  return out;
}
Tensor linear_int8_affine_quantized_x(const Tensor& x0, const Tensor& w, float scale, float offset,
                                      const Tensor& b) {
  const Tensor x = cpu::as_f32(x0);
  const int64_t k = x.dim(-1), n = w.dim(0), m = x.elements() / k;
  Tensor out = x.ctx().empty(with_last_dim(x.shape(), n));
  const QuantizedRows r = quantize_rows(x.f32(), m, k);
  rows_portable(r.xq.data(), m, k, w.data<int8_t>(), 0, n, out.f32(), n);
  finish(out.f32(), m, n, 0, n, r, scale, offset, b.defined() ? b.f32() : nullptr);
  return out;
}
}  // namespace ref

Tensor linear_int8_affine(const Tensor& x0, const Tensor& w, float scale, float offset, const Tensor& b) {
  if (gpu_ops::on_gpu(x0)) return gpu_ops::linear_int8_affine(x0, w, scale, offset, b);
  const Tensor x = cpu::as_f32(x0);
  const int64_t k = x.dim(-1), n = w.dim(0), m = x.elements() / k;
  NN_ASSERT(w.rank() == 2 && w.dim(1) == k && w.dtype() == DType::I8);
  NN_ASSERT(!b.defined() || (b.dtype() == DType::F32 && b.elements() == n));
  Tensor out = x.ctx().empty(with_last_dim(x.shape(), n));
  const QuantizedRows r = quantize_rows(x.f32(), m, k);
  const int16_t* xq = r.xq.data();
  const int8_t* qp = w.data<int8_t>();
  const float* bias = b.defined() ? b.f32() : nullptr;
  float* y = out.f32();
  cpu::parallel_for(x.ctx(), n, m * k, [&](int64_t begin, int64_t end) {
#if defined(__wasm_simd128__)
    cpu::linear_int8_rows_wasm(xq, m, k, qp, begin, end, y, n);
#else
#if defined(__x86_64__)
    if (cpu_use_avx2())
      cpu::linear_int8_rows_avx2(xq, m, k, qp, begin, end, y, n);
    else
#endif
      rows_portable(xq, m, k, qp, begin, end, y, n);
#endif
    finish(y, m, n, begin, end, r, scale, offset, bias);
  });
  return out;
}

}  // namespace sotto::nn
