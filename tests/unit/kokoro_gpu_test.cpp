// Kokoro's forward pass on the GPU backend (SwiftShader in CI) against the CPU backend, stage by stage on a short
// phoneme string: ALBERT, the duration predictor (durations equal) and the text encoder. The rest of the pass
// (prosody, decoder, generator at frame rate) takes minutes on SwiftShader with the plain kernels and is left to
// bench/kokoro_gpu.sh on a real GPU. Skips without the model, without a WebGPU adapter and under sanitizers.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <string>

#include "core/thread_pool.h"
#include "gpu_test_support.h"
#include "io/file.h"
#include "models/tts/kokoro.h"
#include "nn/weights.h"

namespace sotto::tts {
namespace {

const std::string kModel = std::string(SOTTO_SOURCE_DIR) + "/models/kokoro/kokoro-v1.0.int8.onnx";

// sqrt(sum (a - b)^2 / sum b^2)
double relative_rms(const std::vector<float>& a, const std::vector<float>& b) {
  double num = 0, den = 0;
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) {
    num += (static_cast<double>(a[i]) - b[i]) * (static_cast<double>(a[i]) - b[i]);
    den += static_cast<double>(b[i]) * b[i];
  }
  return den > 0 ? std::sqrt(num / den) : std::sqrt(num);
}

TEST(KokoroGpu, AlbertDurationsAndTextEncoderFollowTheCpuBackend) {
#ifdef SOTTO_TEST_UNDER_SANITIZER
  GTEST_SKIP() << "the real model takes minutes under sanitizers";
#endif
  // ~1 minute on SwiftShader (the model's 92 MB uploaded, ALBERT twice): too slow for CI's budget, so opt-in.
  if (std::getenv("SOTTO_KOKORO_GPU_TEST") == nullptr)
    GTEST_SKIP() << "set SOTTO_KOKORO_GPU_TEST=1 to run Kokoro's stages on the GPU (~1 min on SwiftShader)";
  if (!std::filesystem::exists(kModel))
    GTEST_SKIP() << kModel << " is absent (bash scripts/get-models.sh kokoro)";
  gpu::Device* device = sotto::testing::open_test_device();
  if (!device) GTEST_SKIP() << sotto::testing::gpu_skip_reason();
  auto file = MappedFile::open(kModel);
  ASSERT_TRUE(file.ok()) << file.message();
  auto source = nn::open_weights("kokoro-v1.0.int8.onnx", file->bytes());
  ASSERT_TRUE(source.ok()) << source.message();
  ThreadPool pool(2);
  auto cpu = nn::Context::cpu(&pool);
  auto gpu = nn::Context::webgpu(*device);
  auto wc = load_kokoro_weights(*cpu, **source);
  ASSERT_TRUE(wc.ok()) << wc.message();
  auto wg = kokoro_weights_to_gpu(*gpu, *wc);
  ASSERT_TRUE(wg.ok()) << wg.message();

  auto ids = kokoro_phoneme_ids("\xC3\xB0\xC9\x99 k\xCB\x88\xC3\xA6t s\xCB\x88\xC3\xA6t.");  // ðə kˈæt sˈæt.
  ASSERT_TRUE(ids.ok()) << ids.message();
  std::vector<int64_t> padded(ids->size() + 2, 0);
  std::copy(ids->begin(), ids->end(), padded.begin() + 1);
  const int64_t t = static_cast<int64_t>(padded.size());
  const std::span<const uint8_t> bytes{reinterpret_cast<const uint8_t*>(padded.data()), padded.size() * 8};
  const nn::Tensor tok_c = cpu->from_bytes({t}, DType::I64, bytes),
                   tok_g = gpu->from_bytes({t}, DType::I64, bytes);
  std::vector<float> style(kKokoroStyleDim);
  for (size_t i = 0; i < style.size(); ++i) style[i] = 0.2f * std::sin(0.37f * static_cast<float>(i));
  const nn::Tensor style_c = cpu->from_floats({1, kKokoroStyleDim}, style);
  const nn::Tensor style_g = gpu->from_floats({1, kKokoroStyleDim}, style);

  auto read = [](nn::Context& ctx, const nn::Tensor& x) {
    auto v = ctx.to_floats(x);
    EXPECT_TRUE(v.ok()) << v.message();
    return v.ok() ? *v : std::vector<float>{};
  };
  // Teacher-forced, stage by stage (each GPU stage fed the CPU's input), as against ONNX Runtime: the integer
  // products are equal given the same quantized inputs, but the float parts (layer norm, GELU, softmax, the LSTM
  // cell) round differently, and a value at a rounding boundary of the next dynamic quantization moves a whole
  // step. Measured on SwiftShader: ALBERT's passes 2e-7 relative RMS, a few 4e-4 .. 7e-3 (a step flipped); the
  // text encoder 2e-7. Chained without teacher forcing, the flips compound over ALBERT's 12 passes to ~12 %
  // and move two durations by a frame, as two ONNX Runtime builds differ (see issue 29): not checked here.
  std::vector<int64_t> positions(static_cast<size_t>(t));
  for (int64_t i = 0; i < t; ++i) positions[static_cast<size_t>(i)] = i;
  const std::span<const uint8_t> pb{reinterpret_cast<const uint8_t*>(positions.data()), positions.size() * 8};
  auto front = [&](const KokoroWeights& w, nn::Context& ctx, const nn::Tensor& tokens) {
    nn::Tensor x = nn::add(nn::embedding(w.word_embeddings, tokens),
                           nn::embedding(w.token_type_embeddings, ctx.zeros({t}, DType::I64)));
    x = nn::add(x, nn::embedding(w.position_embeddings, ctx.from_bytes({t}, DType::I64, pb)));
    x = nn::layer_norm(x, w.embeddings_norm_w, w.embeddings_norm_b, 1e-12f);
    return nn::add(nn::matmul_integer_dynamic(x, w.embedding_mapping.w, w.embedding_mapping.scales,
                                              w.embedding_mapping.zero_points),
                   w.embedding_mapping.bias);
  };
  nn::Tensor x = front(*wc, *cpu, tok_c);
  EXPECT_LT(relative_rms(read(*gpu, front(*wg, *gpu, tok_g)), read(*cpu, x)), 1e-6) << "embeddings";
  double worst = 0;
  int exact = 0;
  for (int pass = 0; pass < 12; ++pass) {
    const nn::Tensor next = kokoro_albert_pass(*wc, x);
    const double e = relative_rms(
        read(*gpu, kokoro_albert_pass(*wg, gpu->from_floats(x.shape(), read(*cpu, x)))), read(*cpu, next));
    worst = std::max(worst, e);
    exact += e < 1e-5;
    x = next;
  }
  EXPECT_LT(worst, 2e-2) << "an ALBERT pass";
  EXPECT_GE(exact, 6) << "ALBERT passes within float rounding of the CPU's";
  const nn::Tensor bert_g = gpu->from_floats(x.shape(), read(*cpu, x));
  const nn::Tensor d_c = kokoro_duration_encoder(*wc, x, style_c);
  const nn::Tensor d_g = kokoro_duration_encoder(*wg, bert_g, style_g);
  const std::vector<float> sums_c =
      kokoro_duration_sums(read(*cpu, kokoro_duration_probs(*wc, d_c)), padded.size());
  const std::vector<float> sums_g =
      kokoro_duration_sums(read(*gpu, kokoro_duration_probs(*wg, d_g)), padded.size());
  const double sums_err = relative_rms(sums_g, sums_c);
  EXPECT_LT(sums_err, 2e-2) << "duration sums";
  const std::vector<int64_t> dur_c = kokoro_durations(sums_c, 1.0f), dur_g = kokoro_durations(sums_g, 1.0f);
  ASSERT_EQ(dur_c.size(), dur_g.size());
  for (size_t i = 0; i < dur_c.size(); ++i) EXPECT_LE(std::abs(dur_c[i] - dur_g[i]), 1) << "token " << i;
  const double ten_err =
      relative_rms(read(*gpu, kokoro_text_encoder(*wg, tok_g)), read(*cpu, kokoro_text_encoder(*wc, tok_c)));
  EXPECT_LT(ten_err, 1e-4) << "text encoder";
  std::printf(
      "relative RMS gpu vs cpu: worst ALBERT pass %.2e (%d of 12 under 1e-5), duration sums %.2e, text "
      "encoder %.2e\n",
      worst, exact, sums_err, ten_err);
}

}  // namespace
}  // namespace sotto::tts
