// nn::atan2 (see nn/ops.h): the ONNX export's Atan + Where form of atan2, elementwise. Used on STFT spectra of
// ~10^4..10^5 elements: one pass, not worth a vector kernel.
#include <cassert>
#include <cmath>

#include "nn/gpu_ops.h"
#include "nn/ops.h"

namespace sotto::nn {

namespace ref {
float atan2_onnx(float y, float x) {
  constexpr float kPi = 3.14159274101257324f;  // float(pi), the graph's constant
  const float a = std::atan(y / x);
  if (x < 0.0f) return y > 0.0f ? a + kPi : a - kPi;
  return a;
}
}  // namespace ref

Tensor atan2(const Tensor& y, const Tensor& x) {
  if (gpu_ops::on_gpu(y)) return gpu_ops::atan2(y, x);
  assert(y.shape() == x.shape() && y.dtype() == DType::F32 && x.dtype() == DType::F32);
  Tensor out = y.ctx().empty(y.shape());
  const float* ys = y.f32();
  const float* xs = x.f32();
  float* o = out.f32();
  for (int64_t i = 0, n = y.elements(); i < n; ++i) o[i] = ref::atan2_onnx(ys[i], xs[i]);
  return out;
}

}  // namespace sotto::nn
