// The nemo128 front end (audio/mel.h) against NeMo's exported preprocessor (STFT in float64), converted from
// tests/fixtures/asr/mel_reference.json by tools/parakeet_mel_fixture.py.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "audio/mel.h"
#include "core/thread_pool.h"
#include "io/file.h"
#include "nn/weights.h"

#include "test_support.h"

namespace sotto {
namespace {

struct MelFixture {
  MappedFile file;
  std::unique_ptr<nn::WeightSource> source;
  std::unique_ptr<nn::Context> ctx = nn::Context::cpu();

  std::vector<float> get(const std::string& name) {
    auto t = source->load_any(*ctx, name);
    EXPECT_TRUE(t.ok()) << t.message();
    if (!t.ok()) return {};
    auto v = ctx->to_floats(*t);
    return v.ok() ? *v : std::vector<float>{};
  }
};

MelFixture open_fixture() {
  MelFixture f;
  auto file =
      MappedFile::open(std::string(SOTTO_SOURCE_DIR) + "/tests/data/parakeet/mel_reference.safetensors");
  EXPECT_TRUE(file.ok()) << file.message();
  if (!file.ok()) return f;
  f.file = std::move(*file);
  auto source = nn::open_weights("mel_reference.safetensors", f.file.bytes());
  EXPECT_TRUE(source.ok()) << source.message();
  if (source.ok()) f.source = std::move(*source);
  return f;
}

TEST(ParakeetMel, FilterbankIsLibrosaSlaney) {
  MelFixture f = open_fixture();
  ASSERT_TRUE(f.source);
  EXPECT_LE(testing::max_abs_diff(audio::slaney_mel_filterbank(16000, 512, 128), f.get("mel_filterbank")),
            1e-6);  // weights ~1e-2: float32 rounding
}

// Float64 STFT (the product path) within the 4e-4 on every clip, and the float32 STFT too: measured
// float64 1.4e-4 / 5.1e-5 / 3.5e-4, float32 1.0e-4 / 8.2e-5 / 1.7e-4 (the largest gaps sit in frame 0's
// near-silent low bins of the pure-sine clips, where ln() magnifies any rounding; neither path is closer on
// all clips, so float32 suffices).
TEST(ParakeetMel, MatchesNemoExportWithin4e4) {
  MelFixture f = open_fixture();
  ASSERT_TRUE(f.source);
  for (const char* clip : {"sine_short_0_5s", "noise_1s", "sine_mix_2s"}) {
    const std::vector<float> audio = f.get(std::string(clip) + ".audio");
    const std::vector<float> want = f.get(std::string(clip) + ".features");
    const audio::MelFeatures got = audio::nemo_log_mel(audio);
    ASSERT_EQ(got.n_frames, static_cast<int64_t>(audio.size() / 160)) << clip;
    ASSERT_EQ(got.data.size(), want.size()) << clip;
    const double err64 = testing::max_abs_diff(got.data, want);
    const double err32 = testing::max_abs_diff(audio::nemo_log_mel_f32(audio).data, want);
    EXPECT_LE(err64, 4e-4) << clip;
    EXPECT_LE(err32, 4e-4) << clip;
    std::printf("  %-16s max |diff|: float64 STFT %.2e, float32 STFT %.2e\n", clip, err64, err32);
  }
}

TEST(ParakeetMel, SilenceShortAndNonFiniteAudioGiveSaneFeatures) {
  const std::vector<float> silence(16000, 0.0f);
  const audio::MelFeatures s = audio::nemo_log_mel(silence);
  ASSERT_EQ(s.n_frames, 100);
  for (float v : s.data) ASSERT_LE(std::fabs(v), 1e-6f);  // constant bins normalise to ~0, not NaN

  EXPECT_EQ(audio::nemo_log_mel(std::vector<float>(159, 0.1f)).n_frames, 0);
  EXPECT_EQ(audio::nemo_log_mel(std::vector<float>{}).n_frames, 0);

  std::vector<float> noisy(8000);
  for (size_t i = 0; i < noisy.size(); ++i) noisy[i] = std::sin(0.05f * static_cast<float>(i));
  noisy[100] = NAN;
  noisy[200] = INFINITY;
  for (float v : audio::nemo_log_mel(noisy).data) ASSERT_TRUE(std::isfinite(v));
}

// Frames split over a pool's threads (the GPU model's host work) give the one-thread features bit for bit, at
// lengths that do and do not divide among the threads.
TEST(ParakeetMel, ThreadsGiveTheSameFeatures) {
  ThreadPool pool(3);
  for (const size_t n : {size_t{16000}, size_t{20321}, size_t{96000}}) {
    std::vector<float> audio(n);
    for (size_t i = 0; i < n; ++i)
      audio[i] =
          0.3f * std::sin(0.013f * static_cast<float>(i * i % 100003)) + 0.01f * static_cast<float>(i % 7);
    const audio::MelFeatures one = audio::nemo_log_mel(audio), three = audio::nemo_log_mel(audio, {}, &pool);
    ASSERT_EQ(one.n_frames, three.n_frames);
    EXPECT_EQ(one.data, three.data) << n << " samples";
  }
}

}  // namespace
}  // namespace sotto
