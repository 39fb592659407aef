// The C API's VAD (api/sotto.h, api/sotto_vad.cpp), which the wasm build and web/vad.js use: probabilities of
// the real v5.1 / v6.2 files on real speech against ONNX Runtime (tests/data/vad_reference.json, made by
// tools/vad_reference.py), per-frame calls equal to whole-clip calls, the JSON equal to `sotto vad --json`
// (the native CLI), the segmenter handle against models/vad/segmenter.h on fresh random probabilities, and
// bad input through every entry point: clear errors, sane output, no crash.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <limits>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "api/sotto.h"
#include "gpu_test_support.h"
#include "io/json.h"
#include "io/wav.h"
#include "models/vad/segmenter.h"
#include "test_support.h"

namespace {

using sotto::testing::read_fixture;
using sotto::testing::test_seed;

struct VadHandle {
  SottoVad* vad = sotto_vad_create();
  ~VadHandle() { sotto_vad_destroy(vad); }
};

void load_model(SottoVad* vad, const std::string& model_file, int32_t rate_hz = 16000) {
  const std::vector<uint8_t> bytes = read_fixture("vad/" + model_file);
  ASSERT_FALSE(bytes.empty()) << model_file;
  ASSERT_EQ(sotto_vad_load(vad, bytes.data(), bytes.size(), rate_hz), SOTTO_OK) << sotto_vad_last_error(vad);
}

std::vector<float> decode(SottoVad* vad, const std::string& audio_file) {
  const std::vector<uint8_t> bytes = read_fixture("audio/" + audio_file);
  size_t n = 0;
  const float* samples = sotto_vad_decode_wav(vad, bytes.data(), bytes.size(), &n);
  EXPECT_NE(samples, nullptr) << sotto_vad_last_error(vad);
  return samples ? std::vector<float>(samples, samples + n) : std::vector<float>{};
}

std::vector<float> reference_probs(const std::string& model_file, const std::string& audio_file) {
  std::ifstream in(std::string(SOTTO_SOURCE_DIR) + "/tests/data/vad_reference.json");
  std::stringstream text;
  text << in.rdbuf();
  auto parsed = sotto::parse_json(text.str());
  EXPECT_TRUE(parsed.ok()) << parsed.message();
  std::vector<float> probs;
  const sotto::JsonValue* all = parsed ? parsed->find("probs") : nullptr;
  const sotto::JsonValue* by_model = all ? all->find(model_file) : nullptr;
  const sotto::JsonValue* list = by_model ? by_model->find(audio_file) : nullptr;
  if (list)
    for (const sotto::JsonValue& v : list->items) probs.push_back(std::strtof(v.text.c_str(), nullptr));
  return probs;
}

std::string run_cli(const std::string& args) {
  const std::string command = std::string("'") + SOTTO_CLI_PATH + "' " + args + " 2>/dev/null";
  std::FILE* p = popen(command.c_str(), "r");
  std::string out;
  if (!p) return out;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  pclose(p);
  return out;
}

class VadApi : public ::testing::TestWithParam<const char*> {};

// ONNX Runtime's probabilities were rounded to 7 decimals; 1e-4 is the bound (measured ~3e-6).
TEST_P(VadApi, MatchesOnnxRuntimeAndStreamingEqualsWholeClip) {
  VadHandle h;
  load_model(h.vad, GetParam());
  EXPECT_EQ(sotto_vad_frame_samples(h.vad), 512);
  EXPECT_EQ(sotto_vad_sample_rate(h.vad), 16000);
  const std::vector<float> samples = decode(h.vad, "beckett.wav");
  const std::vector<float> ref = reference_probs(GetParam(), "beckett.wav");
  ASSERT_FALSE(ref.empty());
  const int64_t frames = sotto_vad_frame_count(h.vad, samples.size());
  ASSERT_EQ(frames, static_cast<int64_t>(ref.size()));
  std::vector<float> clip(frames);
  ASSERT_EQ(sotto_vad_process_clip(h.vad, samples.data(), samples.size(), clip.data(), clip.size()), frames);
  float max_diff = 0;
  for (int64_t i = 0; i < frames; ++i) max_diff = std::max(max_diff, std::fabs(clip[i] - ref[i]));
  EXPECT_LE(max_diff, 1e-4f);
  // Frame by frame from a reset stream: the same numbers (the same code path, bit for bit).
  sotto_vad_reset(h.vad);
  for (int64_t i = 0; i < frames; ++i) {
    const size_t start = static_cast<size_t>(i) * 512;
    const float p =
        sotto_vad_process(h.vad, samples.data() + start, std::min<size_t>(512, samples.size() - start));
    ASSERT_EQ(p, clip[i]) << "frame " << i;
  }
}

TEST_P(VadApi, ClipJsonEqualsTheNativeCli) {
  VadHandle h;
  load_model(h.vad, GetParam());
  // sample.wav is 24 kHz: the decode + resample path must match the CLI's too.
  for (const char* audio : {"beckett.wav", "sample.wav"}) {
    const std::vector<float> samples = decode(h.vad, audio);
    size_t bytes = 0;
    const char* json = sotto_vad_clip_json(h.vad, samples.data(), samples.size(), nullptr, &bytes);
    ASSERT_NE(json, nullptr) << sotto_vad_last_error(h.vad);
    const std::string cli = run_cli(std::string("vad --json -m '") + SOTTO_FIXTURES_DIR + "/vad/" +
                                    GetParam() + "' '" + SOTTO_FIXTURES_DIR + "/audio/" + audio + "'");
    EXPECT_EQ(std::string(json, bytes) + "\n", cli) << audio;
  }
}

// The handle moved to the op layer's WebGPU backend (SwiftShader here; the browser's device in wasm through
// web/vad-ops.js): the first 60 frames of beckett.wav within 1e-4 of ONNX Runtime and of the CPU, the bound
// the native GPU test holds (tests/unit/vad_test.cpp); back on the CPU the numbers are the CPU's again.
TEST_P(VadApi, WebGpuBackendMatchesTheCpuAndOnnxRuntime) {
  if (!sotto::testing::open_test_device()) GTEST_SKIP() << sotto::testing::gpu_skip_reason();
  VadHandle h;
  EXPECT_EQ(sotto_vad_set_backend(h.vad, SOTTO_BACKEND_WEBGPU), SOTTO_ERROR_ARGUMENT);  // nothing loaded
  EXPECT_STREQ(sotto_vad_last_error(h.vad), "vad: no model loaded");
  load_model(h.vad, GetParam());
  const std::vector<float> samples = decode(h.vad, "beckett.wav");
  const std::vector<float> ref = reference_probs(GetParam(), "beckett.wav");
  ASSERT_GE(samples.size(), 60u * 512);
  ASSERT_GE(ref.size(), 60u);
  const size_t n = 60 * 512;
  std::vector<float> cpu(60), gpu(60);
  ASSERT_EQ(sotto_vad_process_clip(h.vad, samples.data(), n, cpu.data(), cpu.size()), 60);
  EXPECT_EQ(sotto_vad_set_backend(h.vad, 7), SOTTO_ERROR_ARGUMENT);
  EXPECT_STREQ(sotto_vad_last_error(h.vad), "vad: unknown backend 7 (0 cpu, 1 webgpu)");
  ASSERT_EQ(sotto_vad_set_backend(h.vad, SOTTO_BACKEND_WEBGPU), SOTTO_OK) << sotto_vad_last_error(h.vad);
  EXPECT_EQ(sotto_vad_backend(h.vad), SOTTO_BACKEND_WEBGPU);
  ASSERT_EQ(sotto_vad_process_clip(h.vad, samples.data(), n, gpu.data(), gpu.size()), 60)
      << sotto_vad_last_error(h.vad);
  float vs_cpu = 0, vs_ort = 0;
  for (size_t i = 0; i < 60; ++i) {
    vs_cpu = std::max(vs_cpu, std::fabs(gpu[i] - cpu[i]));
    vs_ort = std::max(vs_ort, std::fabs(gpu[i] - ref[i]));
  }
  EXPECT_LE(vs_cpu, 1e-4f);
  EXPECT_LE(vs_ort, 1e-4f);
  ASSERT_EQ(sotto_vad_set_backend(h.vad, SOTTO_BACKEND_CPU), SOTTO_OK);
  EXPECT_EQ(sotto_vad_backend(h.vad), SOTTO_BACKEND_CPU);
  std::vector<float> again(60);
  ASSERT_EQ(sotto_vad_process_clip(h.vad, samples.data(), n, again.data(), again.size()), 60);
  EXPECT_EQ(again, cpu);
}

INSTANTIATE_TEST_SUITE_P(Models, VadApi, ::testing::Values("silero_vad_v5.1.onnx", "silero_vad_v6.2.onnx"));

// The handle is a thin wrapper: on fresh random probability sequences (speech-like runs of random lengths
// and random options) its events and segments are those of models/vad/segmenter.h's SpeechSegmenter.
TEST(VadApiSegmenter, EqualsTheSegmenterOnRandomSequences) {
  std::mt19937_64 rng(test_seed());
  std::uniform_real_distribution<float> unit(0.0f, 1.0f);
  for (int trial = 0; trial < 50; ++trial) {
    SottoVadOptions o;
    sotto_vad_segmenter_defaults(&o);
    o.positive_threshold = 0.3f + 0.4f * unit(rng);
    o.negative_threshold = o.positive_threshold - 0.3f * unit(rng);
    o.redemption_ms = 32.0 * std::floor(1 + 10 * unit(rng));
    o.pre_speech_pad_ms = 32.0 * std::floor(8 * unit(rng));
    o.min_speech_ms = 32.0 * std::floor(1 + 6 * unit(rng));
    std::vector<float> probs;
    while (probs.size() < 600) {
      const bool speech = unit(rng) < 0.5f;
      const int run = 1 + static_cast<int>(30 * unit(rng));
      for (int i = 0; i < run; ++i) probs.push_back(speech ? 0.5f + 0.5f * unit(rng) : 0.6f * unit(rng));
    }
    if (trial % 5 == 0) probs[100] = std::numeric_limits<float>::quiet_NaN();
    sotto::vad::SegmenterOptions so;
    so.positive_threshold = o.positive_threshold;
    so.negative_threshold = o.negative_threshold;
    so.redemption_ms = o.redemption_ms;
    so.pre_speech_pad_ms = o.pre_speech_pad_ms;
    so.min_speech_ms = o.min_speech_ms;
    so.frame_ms = o.frame_ms;
    sotto::vad::SpeechSegmenter expected(so);
    SottoVadSegmenter* seg = sotto_vad_segmenter_create(&o);
    for (size_t i = 0; i < probs.size(); ++i) {
      sotto::vad::Segment want;
      SottoVadSegment got{-1, -1};
      const auto event = expected.push(probs[i], &want);
      ASSERT_EQ(sotto_vad_segmenter_push(seg, probs[i], &got), static_cast<int32_t>(event)) << "frame " << i;
      if (event == sotto::vad::SegmentEvent::SpeechEnd) {
        EXPECT_EQ(got.start_frame, want.start_frame);
        EXPECT_EQ(got.end_frame, want.end_frame);
      }
      EXPECT_EQ(sotto_vad_segmenter_speaking(seg), expected.speaking() ? 1 : 0);
    }
    EXPECT_EQ(sotto_vad_segmenter_finish(seg, nullptr), static_cast<int32_t>(expected.finish()));
    // After finish the handle starts a new stream at frame 0.
    EXPECT_EQ(sotto_vad_segmenter_speaking(seg), 0);
    for (int i = 0; i < 3; ++i) sotto_vad_segmenter_push(seg, 0.0f, nullptr);
    EXPECT_EQ(sotto_vad_segmenter_push(seg, 1.0f, nullptr), SOTTO_VAD_SPEECH_START);
    for (int i = 0; i < 40; ++i) sotto_vad_segmenter_push(seg, 1.0f, nullptr);
    SottoVadSegment last{};
    EXPECT_EQ(sotto_vad_segmenter_finish(seg, &last), SOTTO_VAD_SPEECH_END);
    EXPECT_EQ(last.start_frame, std::max<int64_t>(0, 3 - so.pre_speech_pad_frames()));
    EXPECT_EQ(last.end_frame, 44);
    sotto_vad_segmenter_destroy(seg);
  }
  // Null handles are ignored.
  EXPECT_EQ(sotto_vad_segmenter_push(nullptr, 0.9f, nullptr), SOTTO_VAD_NONE);
  EXPECT_EQ(sotto_vad_segmenter_finish(nullptr, nullptr), SOTTO_VAD_NONE);
  sotto_vad_segmenter_destroy(nullptr);
}

void expect_one_line(const char* message) {
  ASSERT_NE(message, nullptr);
  EXPECT_STRNE(message, "");
  EXPECT_EQ(std::string(message).find('\n'), std::string::npos) << message;
}

TEST(VadApiErrors, BadFilesAndCallsFailWithOneLineMessages) {
  VadHandle h;
  float frame[512] = {};
  // No model yet.
  EXPECT_EQ(sotto_vad_process(h.vad, frame, 512), -1.0f);
  EXPECT_STREQ(sotto_vad_last_error(h.vad), "vad: no model loaded");
  EXPECT_EQ(sotto_vad_frame_samples(h.vad), 0);
  EXPECT_EQ(sotto_vad_frame_count(h.vad, 1000), 0);
  EXPECT_EQ(sotto_vad_clip_json(h.vad, frame, 512, nullptr, nullptr), nullptr);
  // Not ONNX: text, random bytes (fresh each run), a GGUF; empty; a wrong rate.
  const std::string text = "hello, not a model";
  EXPECT_EQ(sotto_vad_load(h.vad, reinterpret_cast<const uint8_t*>(text.data()), text.size(), 16000),
            SOTTO_ERROR_FILE);
  expect_one_line(sotto_vad_last_error(h.vad));
  std::mt19937_64 rng(test_seed());
  std::vector<uint8_t> noise(4096);
  for (uint8_t& b : noise) b = static_cast<uint8_t>(rng());
  EXPECT_NE(sotto_vad_load(h.vad, noise.data(), noise.size(), 16000), SOTTO_OK);
  expect_one_line(sotto_vad_last_error(h.vad));
  const std::vector<uint8_t> gguf = read_fixture("llm/stories260K.gguf");
  EXPECT_EQ(sotto_vad_load(h.vad, gguf.data(), gguf.size(), 16000), SOTTO_ERROR_FILE);
  expect_one_line(sotto_vad_last_error(h.vad));
  EXPECT_EQ(sotto_vad_load(h.vad, nullptr, 0, 16000), SOTTO_ERROR_ARGUMENT);
  EXPECT_STREQ(sotto_vad_last_error(h.vad), "vad: empty model file");
  const std::vector<uint8_t> silero = read_fixture("vad/silero_vad_v6.2.onnx");
  EXPECT_EQ(sotto_vad_load(h.vad, silero.data(), silero.size(), 44100), SOTTO_ERROR_ARGUMENT);
  EXPECT_STREQ(sotto_vad_last_error(h.vad), "vad: sample rate 44100 Hz is not supported (16000 or 8000)");
  // A truncated Silero file.
  EXPECT_EQ(sotto_vad_load(h.vad, silero.data(), silero.size() / 2, 16000), SOTTO_ERROR_FILE);
  expect_one_line(sotto_vad_last_error(h.vad));
  // Still no model: a failed load leaves none.
  EXPECT_EQ(sotto_vad_frame_samples(h.vad), 0);

  // The 8 kHz branch: 256-sample frames.
  ASSERT_EQ(sotto_vad_load(h.vad, silero.data(), silero.size(), 8000), SOTTO_OK);
  EXPECT_EQ(sotto_vad_frame_samples(h.vad), 256);
  EXPECT_EQ(sotto_vad_sample_rate(h.vad), 8000);
  ASSERT_EQ(sotto_vad_load(h.vad, silero.data(), silero.size(), 16000), SOTTO_OK);
  EXPECT_STREQ(sotto_vad_last_error(h.vad), "");
  // Null buffers; a WAV that is not one; a bad resampling rate.
  EXPECT_EQ(sotto_vad_process(h.vad, nullptr, 512), -1.0f);
  EXPECT_STREQ(sotto_vad_last_error(h.vad), "vad: null frame");
  EXPECT_EQ(sotto_vad_process_clip(h.vad, nullptr, 512, nullptr, 0), -1);
  size_t n = 7;
  EXPECT_EQ(sotto_vad_decode_wav(h.vad, reinterpret_cast<const uint8_t*>(text.data()), text.size(), &n),
            nullptr);
  expect_one_line(sotto_vad_last_error(h.vad));
  EXPECT_EQ(sotto_vad_resample(h.vad, frame, 512, 0, &n), nullptr);
  expect_one_line(sotto_vad_last_error(h.vad));
  EXPECT_EQ(sotto_vad_resample(h.vad, frame, 512, 16000 * 300, &n), nullptr);  // ratio over 256
  expect_one_line(sotto_vad_last_error(h.vad));
  // Null handles.
  EXPECT_EQ(sotto_vad_load(nullptr, silero.data(), silero.size(), 16000), SOTTO_ERROR_ARGUMENT);
  EXPECT_EQ(sotto_vad_process(nullptr, frame, 512), -1.0f);
  EXPECT_EQ(sotto_vad_frame_samples(nullptr), 0);
  sotto_vad_reset(nullptr);
  sotto_vad_destroy(nullptr);
  expect_one_line(sotto_vad_last_error(nullptr));
}

TEST(VadApiErrors, OddAudioGivesSaneProbabilities) {
  VadHandle h;
  load_model(h.vad, "silero_vad_v5.1.onnx");
  auto probs_of = [&](const std::vector<float>& samples) {
    std::vector<float> probs(sotto_vad_frame_count(h.vad, samples.size()));
    sotto_vad_reset(h.vad);
    EXPECT_EQ(sotto_vad_process_clip(h.vad, samples.data(), samples.size(), probs.data(), probs.size()),
              static_cast<int64_t>(probs.size()));
    for (float p : probs) EXPECT_TRUE(p >= 0.0f && p <= 1.0f) << p;
    return probs;
  };
  // Empty: no frames, and the JSON says so.
  EXPECT_TRUE(probs_of({}).empty());
  size_t bytes = 0;
  const char* json = sotto_vad_clip_json(h.vad, nullptr, 0, nullptr, &bytes);
  ASSERT_NE(json, nullptr);
  EXPECT_EQ(std::string(json, bytes), "{\"frame_ms\":32,\"probs\":[],\"segments\":[]}");
  // Shorter than a frame (fresh noise): one frame.
  std::mt19937_64 rng(test_seed());
  std::normal_distribution<float> noise(0.0f, 0.1f);
  std::vector<float> short_clip(100);
  for (float& x : short_clip) x = noise(rng);
  EXPECT_EQ(probs_of(short_clip).size(), 1u);
  // Silence: no speech.
  for (float p : probs_of(std::vector<float>(16000 * 2, 0.0f))) EXPECT_LT(p, 0.5f);
  // Clipped speech and NaN / Inf samples.
  std::vector<float> speech = decode(h.vad, "beckett.wav");
  for (float& x : speech) x = std::clamp(10.0f * x, -1.0f, 1.0f);
  probs_of(speech);
  for (size_t i = 0; i < speech.size(); i += 97) speech[i] = std::numeric_limits<float>::quiet_NaN();
  speech[12345] = -std::numeric_limits<float>::infinity();
  probs_of(speech);
  const std::vector<float> nan_frame(512, std::numeric_limits<float>::quiet_NaN());
  const float p = sotto_vad_process(h.vad, nan_frame.data(), nan_frame.size());
  EXPECT_TRUE(p >= 0.0f && p <= 1.0f) << p;
  // Resampling NaN input (propagates into the resampled signal; the VAD reads it as 0).
  size_t n = 0;
  const float* resampled = sotto_vad_resample(h.vad, nan_frame.data(), nan_frame.size(), 48000, &n);
  ASSERT_NE(resampled, nullptr) << sotto_vad_last_error(h.vad);
  EXPECT_EQ(n, 171u);  // round(512 / 3)
  EXPECT_TRUE(p >= 0.0f && p <= 1.0f);
}

}  // namespace
