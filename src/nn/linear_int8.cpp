// linear_int8_affine: y = x . W^T + b with W held as int8 and dequantized as the ONNX exporters' weight-only
// quantization does, w = q * scale + offset (one float scale and one float offset per tensor; Moonshine's
// files). Computed as y = scale * (x . q) + offset * sum(x) + b, so the weights are read as int8: a decoder
// step's matrix-vector products are bound by the bytes of weights they read, 4x fewer than F32.
// Threads split the output columns (rows of W); the AVX2 kernel is linear_int8_avx2.cpp, the wasm one
// linear_int8_wasm.cpp (the portable loop below is the native fallback and the op check's second variant).
#include <cstring>

#include "cpu/cpu_features.h"
#include "nn/cpu.h"
#include "nn/gpu_ops.h"
#include "nn/ops.h"
#include "nn/ref.h"

namespace sotto::nn {

namespace cpu {
void linear_int8_rows_wasm(const float* x, int64_t m, int64_t k, const int8_t* q, int64_t n_begin,
                           int64_t n_end, float* y, int64_t n);  // linear_int8_wasm.cpp
void linear_int8_rows_avx2(const float* x, int64_t m, int64_t k, const int8_t* q, int64_t n_begin,
                           int64_t n_end, float* y, int64_t n);
}  // namespace cpu

namespace {

// y[i, j] = sum_t x[i, t] * q[j, t] for j in [n_begin, n_end): float accumulation in 4 partial sums.
[[maybe_unused]] void rows_portable(const float* x, int64_t m, int64_t k, const int8_t* q, int64_t n_begin,
                                    int64_t n_end, float* y, int64_t n) {
  for (int64_t j = n_begin; j < n_end; ++j) {
    const int8_t* qj = q + j * k;
    for (int64_t i = 0; i < m; ++i) {
      const float* xi = x + i * k;
      float s0 = 0, s1 = 0, s2 = 0, s3 = 0;
      int64_t t = 0;
      for (; t + 4 <= k; t += 4) {
        s0 += xi[t] * static_cast<float>(qj[t]);
        s1 += xi[t + 1] * static_cast<float>(qj[t + 1]);
        s2 += xi[t + 2] * static_cast<float>(qj[t + 2]);
        s3 += xi[t + 3] * static_cast<float>(qj[t + 3]);
      }
      for (; t < k; ++t) s0 += xi[t] * static_cast<float>(qj[t]);
      y[i * n + j] = (s0 + s1) + (s2 + s3);
    }
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
}  // namespace ref

Tensor linear_int8_affine(const Tensor& x0, const Tensor& w, float scale, float offset, const Tensor& b) {
  if (gpu_ops::on_gpu(x0)) return gpu_ops::linear_int8_affine(x0, w, scale, offset, b);
  const Tensor x = cpu::as_f32(x0);
  const int64_t k = x.dim(-1), n = w.dim(0), m = x.elements() / k;
  NN_ASSERT(w.rank() == 2 && w.dim(1) == k && w.dtype() == DType::I8);
  NN_ASSERT(!b.defined() || (b.dtype() == DType::F32 && b.elements() == n));
  Tensor out = x.ctx().empty(with_last_dim(x.shape(), n));
  const float* xp = x.f32();
  const int8_t* qp = w.data<int8_t>();
  float* y = out.f32();
  cpu::parallel_for(x.ctx(), n, m * k, [&](int64_t begin, int64_t end) {
#if defined(__x86_64__) && !defined(__wasm__)
    if (cpu_use_avx2()) return cpu::linear_int8_rows_avx2(xp, m, k, qp, begin, end, y, n);
#endif
#if defined(__wasm_simd128__)
    return cpu::linear_int8_rows_wasm(xp, m, k, qp, begin, end, y, n);
#else
    rows_portable(xp, m, k, qp, begin, end, y, n);
#endif
  });
  const float* bias = b.defined() ? b.f32() : nullptr;
  for (int64_t i = 0; i < m; ++i) {
    float sum_x = 0;
    for (int64_t t = 0; t < k; ++t) sum_x += xp[i * k + t];
    const float shift = offset * sum_x;
    for (int64_t j = 0; j < n; ++j) y[i * n + j] = scale * y[i * n + j] + shift + (bias ? bias[j] : 0.0f);
  }
  return out;
}

}  // namespace sotto::nn
