// nn::conv1d_integer_dynamic_quantized_bias (see nn/ops.h): ONNX Runtime's quantize_dynamic puts a conv's float
// bias into the int32 accumulator as floor(b / (x_scale * w_scale)) steps (Div, Floor, Cast int32, Add before the
// output scale), so the bias it adds is b rounded DOWN to a multiple of the output scale. Each such conv is up to
// one output step off a float bias; the next layer's dynamic quantization turns that into whole steps (Kokoro's
// decoder: 1.8 % relative RMS with a float bias, bit-exact with this one). Cost: one extra min/max pass over x.
#include <cassert>
#include <cmath>

#include "nn/ops.h"

namespace sotto::nn {

Tensor conv1d_integer_dynamic_quantized_bias(const Tensor& x, const Tensor& w, const Tensor& b,
                                             const Conv1dOptions& o) {
  if (!b.defined()) return conv1d_integer_dynamic(x, w, {}, o);
  assert(x.ctx().backend() == Backend::Cpu && b.dtype() == DType::F32 && b.rank() == 1);
  const float step = dynamic_quantize_linear(x).quant().scale * w.quant().scale;
  Tensor quantized = x.ctx().empty(b.shape());
  for (int64_t i = 0; i < b.elements(); ++i) quantized.f32()[i] = std::floor(b.f32()[i] / step) * step;
  return conv1d_integer_dynamic(x, w, quantized, o);
}

}  // namespace sotto::nn
