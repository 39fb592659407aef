// The vocoder-source ops Kokoro added to nn/ops.h (nn/stft_onnxruntime.cpp, nn/atan2.cpp, nn/sine_source.cpp),
// each against a plain double-precision formula on fresh random inputs of odd sizes. Their bit-level agreement
// with ONNX Runtime is checked on the real model in kokoro_test.cpp (the source's STFT: exact).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <span>
#include <vector>

#include "core/thread_pool.h"
#include "nn/ops.h"
#include "nn_test_support.h"

namespace sotto::nn {
namespace {

TEST(NnVocoderOps, StftLikeOnnxRuntimeIsTheDft) {
  auto ctx = Context::cpu(nullptr);
  for (int n_fft : {20, 16, 12}) {  // Bluestein, radix-2, Bluestein
    const int hop = static_cast<int>(testing::rand_int(1, 7));
    const int64_t length = testing::rand_int(n_fft, 301);
    const Tensor signal = testing::rand_tensor(*ctx, {length});
    const Tensor window = testing::rand_tensor(*ctx, {n_fft}, 0.0f, 1.0f);
    const Tensor ours = stft_onnxruntime(signal, window, n_fft, hop);
    const int64_t bins = n_fft / 2 + 1, frames = (length - n_fft) / hop + 1;
    ASSERT_EQ(ours.shape(), (Shape{2, bins, frames}));
    constexpr double kPi = 3.14159265358979323846;
    double worst = 0;
    for (int64_t k = 0; k < bins; ++k)
      for (int64_t t = 0; t < frames; ++t) {
        double re = 0, im = 0;
        for (int n = 0; n < n_fft; ++n) {
          const double v = static_cast<double>(signal.f32()[t * hop + n]) * window.f32()[n];
          re += v * std::cos(2 * kPi * k * n / n_fft);
          im -= v * std::sin(2 * kPi * k * n / n_fft);
        }
        worst = std::max({worst, std::fabs(ours.f32()[k * frames + t] - re),
                          std::fabs(ours.f32()[(bins + k) * frames + t] - im)});
      }
    EXPECT_LT(worst, 2e-5 * n_fft) << "n_fft " << n_fft;  // float FFT rounding, values up to ~n_fft / 2
  }
}

// Kokoro's streaming makes each window's spectrum from the window's own samples, and the frames go over the
// threads: both must give the whole signal's frames bit for bit.
TEST(NnVocoderOps, StftFramesAreTheSameOnASliceAndOnThreads) {
  ThreadPool pool(3);
  auto single = Context::cpu(nullptr), threaded = Context::cpu(&pool);
  const int n_fft = 20, hop = 5;
  const int64_t length = 20 + hop * testing::rand_int(700, 900);
  const std::vector<float> signal = testing::floats(testing::rand_tensor(*single, {length}));
  const std::vector<float> window = testing::floats(testing::rand_tensor(*single, {n_fft}, 0.0f, 1.0f));
  const Tensor whole = stft_onnxruntime(single->from_floats({length}, signal),
                                        single->from_floats({n_fft}, window), n_fft, hop);
  const Tensor on_threads = stft_onnxruntime(threaded->from_floats({length}, signal),
                                             threaded->from_floats({n_fft}, window), n_fft, hop);
  EXPECT_EQ(testing::floats(on_threads), testing::floats(whole));
  const int64_t frames = whole.dim(2), a = testing::rand_int(0, frames / 2),
                b = testing::rand_int(a + 1, frames);
  const Tensor part = stft_onnxruntime(
      single->from_floats({(b - 1 - a) * hop + n_fft},
                          std::span(signal).subspan(static_cast<size_t>(a * hop),
                                                    static_cast<size_t>((b - 1 - a) * hop + n_fft))),
      single->from_floats({n_fft}, window), n_fft, hop);
  ASSERT_EQ(part.dim(2), b - a);
  for (int64_t c = 0; c < 2 * whole.dim(1); ++c)
    for (int64_t t = a; t < b; ++t)
      ASSERT_EQ(part.f32()[c * (b - a) + t - a], whole.f32()[c * frames + t])
          << "row " << c << " frame " << t;
}

TEST(NnVocoderOps, Atan2IsTheQuadrantAngle) {
  auto ctx = Context::cpu(nullptr);
  const Tensor y = testing::rand_tensor(*ctx, {37, 3}, -2.0f, 2.0f);
  const Tensor x = testing::rand_tensor(*ctx, {37, 3}, -2.0f, 2.0f);
  const Tensor a = atan2(y, x);
  for (int64_t i = 0; i < y.elements(); ++i)
    EXPECT_NEAR(a.f32()[i], std::atan2(static_cast<double>(y.f32()[i]), x.f32()[i]), 1e-6) << i;
}

TEST(NnVocoderOps, SineSourceIsTheHarmonicPhaseIntegral) {
  auto ctx = Context::cpu(nullptr);
  const int64_t frames = testing::rand_int(3, 11);
  const int upsample = static_cast<int>(testing::rand_int(3, 9)), harmonics = 3;
  Tensor f0 = testing::rand_tensor(*ctx, {frames}, 50.0f, 400.0f);
  f0.f32()[1] = 5.0f;  // one unvoiced frame (below the 10 Hz threshold)
  const float rate = 2400.0f;
  const Tensor s = sine_source(f0, harmonics, upsample, rate, 0.1f, 10.0f);
  ASSERT_EQ(s.shape(), (Shape{frames * upsample, harmonics}));
  // phase[j] = 2 pi upsample sum_{i <= j} frac(h f0[i] / rate), linearly interpolated at half-pixel centres.
  for (int h = 1; h <= harmonics; ++h) {
    std::vector<double> phase(static_cast<size_t>(frames));
    double cum = 0;
    for (int64_t j = 0; j < frames; ++j) {
      const double v = static_cast<double>(f0.f32()[j]) * h / rate;
      cum += v - std::floor(v);
      phase[j] = cum * 2 * 3.14159265358979323846 * upsample;
    }
    for (int64_t i = 0; i < frames * upsample; ++i) {
      const double x = std::clamp((i + 0.5) / upsample - 0.5, 0.0, static_cast<double>(frames - 1));
      const int64_t i0 = static_cast<int64_t>(x), i1 = std::min(i0 + 1, frames - 1);
      const double p = phase[i0] + (x - i0) * (phase[i1] - phase[i0]);
      const double want = f0.f32()[i / upsample] > 10.0f ? 0.1 * std::sin(p) : 0.0;
      EXPECT_NEAR(s.f32()[i * harmonics + h - 1], want, 1e-4) << "h " << h << " sample " << i;
    }
  }
}

}  // namespace
}  // namespace sotto::nn

namespace sotto::nn {
namespace {

// Against the graph's arithmetic written out: x quantized per tensor to uint8 (DynamicQuantizeLinear), integer
// products with the uint8 weight's zero point, + floor(b / (x_scale w_scale)) in the accumulator, x the scale.
TEST(NnVocoderOps, ConvIntegerWithQuantizedBiasIsOnnxRuntimesGraph) {
  auto ctx = Context::cpu(nullptr);
  const int64_t cin = testing::rand_int(2, 7), cout = testing::rand_int(2, 9), t = testing::rand_int(5, 33);
  const int kernel = 3;
  const Tensor x = testing::rand_tensor(*ctx, {cin, t}, -2.0f, 3.0f);
  const Tensor w = testing::rand_int8(*ctx, {cout, cin, kernel}, DType::U8).with_quant({0.013f, 117});
  const Tensor b = testing::rand_tensor(*ctx, {cout}, -0.5f, 0.5f);
  const Tensor y = conv1d_integer_dynamic_quantized_bias(x, w, b, {.padding = 1});
  float lo = 0, hi = 0;
  for (int64_t i = 0; i < x.elements(); ++i) lo = std::min(lo, x.f32()[i]), hi = std::max(hi, x.f32()[i]);
  const float xs = (hi - lo) / 255.0f;
  const int32_t xzp = static_cast<int32_t>(std::clamp(std::nearbyint(-lo / xs), 0.0f, 255.0f));
  auto xq = [&](int64_t c, int64_t p) {
    if (p < 0 || p >= t) return 0;
    return static_cast<int32_t>(std::clamp(std::nearbyint(x.f32()[c * t + p] / xs) + xzp, 0.0f, 255.0f)) -
           xzp;
  };
  const float step = xs * 0.013f;
  for (int64_t o = 0; o < cout; ++o)
    for (int64_t p = 0; p < t; ++p) {
      int64_t acc = 0;
      for (int64_t c = 0; c < cin; ++c)
        for (int k = 0; k < kernel; ++k)
          acc += static_cast<int64_t>(xq(c, p + k - 1)) *
                 (int32_t{w.data<uint8_t>()[(o * cin + c) * kernel + k]} - 117);
      const float want = static_cast<float>(acc + static_cast<int64_t>(std::floor(b.f32()[o] / step))) * step;
      EXPECT_NEAR(y.f32()[o * t + p], want, 1e-5f * (1 + std::fabs(want))) << o << "," << p;
    }
}

}  // namespace
}  // namespace sotto::nn
