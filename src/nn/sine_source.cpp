// nn::sine_source (see nn/ops.h): the harmonic source of NSF vocoders (Kokoro's iSTFTNet, HiFTNet) in the
// float arithmetic of its ONNX export, so the phase matches ONNX Runtime's to the last bit where the operations
// allow. The phase grows to ~2 pi 300 f0/24000 per frame (10^4..10^5 rad over a sentence): one float ulp there
// is ~0.01 rad, so the order of the float operations below is the graph's order, not a tidier one.
// Time: N * upsample * harmonics sines (~10^6 for a sentence), single pass.
#include <cassert>
#include <cmath>
#include <vector>

#include "nn/gpu_ops.h"
#include "nn/ops.h"

namespace sotto::nn {

Tensor sine_source(const Tensor& f0, int harmonics, int upsample, float sample_rate_hz, float amplitude,
                   float voiced_threshold_hz) {
  if (gpu_ops::on_gpu(f0))
    return gpu_ops::sine_source(f0, harmonics, upsample, sample_rate_hz, amplitude, voiced_threshold_hz);
  assert(f0.rank() == 1 && f0.dtype() == DType::F32 && f0.ctx().backend() == Backend::Cpu);
  const int64_t n = f0.dim(0);
  const int64_t samples = n * upsample;
  const float* f = f0.f32();
  constexpr float kPi = 3.14159274101257324f;

  // Per frame: the fractional cycles per sample of each harmonic, accumulated over frames (CumSum), scaled.
  std::vector<float> phase(static_cast<size_t>(n * harmonics));
  for (int h = 0; h < harmonics; ++h) {
    float cumulative = 0.0f;
    for (int64_t j = 0; j < n; ++j) {
      const float v = (f[j] * static_cast<float>(h + 1)) / sample_rate_hz;
      cumulative += v - std::floor(v);
      phase[static_cast<size_t>(h * n + j)] = ((cumulative * 2.0f) * kPi) * static_cast<float>(upsample);
    }
  }

  Tensor out = f0.ctx().empty({samples, harmonics});
  float* o = out.f32();
  const float scale = static_cast<float>(upsample);
  for (int64_t s = 0; s < samples; ++s) {
    // ONNX Resize, linear, half_pixel: x = (s + 0.5) / scale - 0.5, clamped to [0, n - 1].
    float x = (static_cast<float>(s) + 0.5f) / scale - 0.5f;
    x = std::fmin(std::fmax(x, 0.0f), static_cast<float>(n - 1));
    const int64_t i0 = static_cast<int64_t>(x);
    const int64_t i1 = i0 + 1 < n ? i0 + 1 : n - 1;
    float w0 = std::fabs(x - static_cast<float>(i1)), w1 = std::fabs(x - static_cast<float>(i0));
    if (i0 == i1) w0 = w1 = 0.5f;
    const bool voiced = f[s / upsample] > voiced_threshold_hz;
    for (int h = 0; h < harmonics; ++h) {
      const float* p = phase.data() + h * n;
      const float value = w0 * p[i0] + w1 * p[i1];
      o[s * harmonics + h] = voiced ? std::sin(value) * amplitude : 0.0f;
    }
  }
  return out;
}

}  // namespace sotto::nn
