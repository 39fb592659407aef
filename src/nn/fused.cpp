// linear_int8_fused (nn/fused.h): the scalar reference, which is also the CPU path, and the GPU dispatch
// (kernel in gpu_fused.cpp).
#include "nn/fused.h"

#include <cmath>
#include <vector>

#include "nn/cpu.h"
#include "nn/gpu_ops.h"

namespace sotto::nn {

namespace ref {

Tensor linear_int8_fused(const Tensor& x0, const Int8LinearFused& f) {
  const Tensor x = cpu::as_f32(x0);
  const int64_t k = x.dim(-1), m = x.elements() / k, n = f.w.dim(0);
  const int64_t segment = f.segment > 0 ? f.segment : n;
  const bool split = f.cache_k.defined();
  const int64_t n_out = split ? segment : f.gated_silu ? n / 2 : n;
  Shape shape = x.shape();
  shape[-1] = n_out;
  Tensor out = x.ctx().empty(shape);
  const std::vector<float> gamma = f.norm_gamma.defined() ? *f.norm_gamma.ctx().to_floats(f.norm_gamma)
                                                          : std::vector<float>(static_cast<size_t>(k), 1.0f);
  const std::vector<float> bias =
      f.bias.defined() ? *f.bias.ctx().to_floats(f.bias) : std::vector<float>(static_cast<size_t>(n));
  const std::vector<float> residual =
      f.residual.defined() ? *f.residual.ctx().to_floats(f.residual) : std::vector<float>();
  const int8_t* q = f.w.data<int8_t>();
  std::vector<float> xn(static_cast<size_t>(k)), y(static_cast<size_t>(n));
  for (int64_t r = 0; r < m; ++r) {
    const float* xr = x.f32() + r * k;
    for (int64_t t = 0; t < k; ++t) xn[t] = xr[t];
    if (f.norm_gamma.defined()) {
      double mean = 0, var = 0;
      for (int64_t t = 0; t < k; ++t) mean += xr[t];
      mean /= static_cast<double>(k);
      for (int64_t t = 0; t < k; ++t) var += (xr[t] - mean) * (xr[t] - mean);
      var /= static_cast<double>(k);
      for (int64_t t = 0; t < k; ++t)
        xn[t] = static_cast<float>((xr[t] - mean) / std::sqrt(var + f.norm_eps)) * gamma[t];
    }
    for (int64_t j = 0; j < n; ++j) {
      const size_t s = static_cast<size_t>(std::min<int64_t>(j / segment, 3));
      double sum = 0;
      for (int64_t t = 0; t < k; ++t)
        sum += static_cast<double>(xn[t]) * (static_cast<float>(q[j * k + t]) * f.scale[s] + f.offset[s]);
      y[j] = static_cast<float>(sum + bias[j]);
    }
    for (int64_t c = 0; c + 1 < f.rope_columns; c += 2) {
      const int64_t e = c % f.head_dim;
      if (e >= f.rotary_dim) continue;
      const double angle = static_cast<double>(f.position0 + r) *
                           std::pow(static_cast<double>(f.rope_base), -static_cast<double>(e) / f.rotary_dim);
      const double a = y[c], b = y[c + 1];
      y[c] = static_cast<float>(a * std::cos(angle) - b * std::sin(angle));
      y[c + 1] = static_cast<float>(a * std::sin(angle) + b * std::cos(angle));
    }
    for (int64_t j = 0; j < n_out; ++j) {
      float v = y[j];
      if (f.gated_silu) {
        const double g = y[j + n / 2];
        v = static_cast<float>(v * (g / (1 + std::exp(-g))));
      }
      if (f.residual.defined()) v += residual[static_cast<size_t>(r * n_out + j)];
      out.f32()[r * n_out + j] = v;
    }
    if (split)
      for (int64_t j = 0; j < segment; ++j) {
        f.cache_k.f32()[(f.cache_row + r) * segment + j] = y[segment + j];
        f.cache_v.f32()[(f.cache_row + r) * segment + j] = y[2 * segment + j];
      }
  }
  return out;
}

}  // namespace ref

Tensor linear_int8_fused(const Tensor& x, const Int8LinearFused& f) {
  if (gpu_ops::on_gpu(x)) return gpu_ops::linear_int8_fused(x, f);
  NN_ASSERT(f.w.dtype() == DType::I8 && f.w.rank() == 2 && f.w.dim(1) == x.dim(-1));
  return ref::linear_int8_fused(x, f);
}

}  // namespace sotto::nn
