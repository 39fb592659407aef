// Silero VAD on sotto's engine against ONNX Runtime: per-frame probabilities of the real v5.1 and v6.2 files
// on real speech (tests/data/vad_reference.json, made by tools/vad_reference.py with onnxruntime), segments,
// the 8 kHz branch, and bad inputs (wrong files, silence, short, clipped, NaN audio).
#include "models/vad/silero.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <limits>
#include <random>
#include <sstream>
#include <string>

#include "gpu/device.h"
#include "gpu_test_support.h"
#include "io/json.h"
#include "io/onnx.h"
#include "io/wav.h"
#include "models/vad/segmenter.h"
#include "test_support.h"

namespace sotto::vad {
namespace {

using sotto::testing::read_fixture;

struct Loaded {
  std::vector<uint8_t> bytes;  // the OnnxModel points into these
  SileroWeights weights;
};

Loaded load(const std::string& model_file, uint32_t rate_hz = 16000) {
  Loaded out;
  out.bytes = read_fixture("vad/" + model_file);
  EXPECT_FALSE(out.bytes.empty()) << model_file;
  auto model = parse_onnx(out.bytes);
  EXPECT_TRUE(model.ok()) << model.message();
  if (!model) return out;
  auto weights = load_silero_weights(*model, rate_hz);
  EXPECT_TRUE(weights.ok()) << weights.message();
  if (weights) out.weights = std::move(weights).value();
  return out;
}

std::vector<float> read_mono(const std::string& audio_file) {
  auto audio = decode_wav(read_fixture("audio/" + audio_file));
  EXPECT_TRUE(audio.ok()) << audio.message();
  EXPECT_EQ(audio->sample_rate_hz, 16000u);
  return audio ? to_mono(*audio) : std::vector<float>{};
}

const JsonValue& reference() {
  static const JsonValue value = [] {
    std::ifstream in(std::string(SOTTO_SOURCE_DIR) + "/tests/data/vad_reference.json");
    std::stringstream text;
    text << in.rdbuf();
    auto parsed = parse_json(text.str());
    EXPECT_TRUE(parsed.ok()) << parsed.message();
    return parsed ? std::move(parsed).value() : JsonValue{};
  }();
  return value;
}

std::vector<float> reference_probs(const std::string& model_file, const std::string& audio_file) {
  std::vector<float> probs;
  const JsonValue* all = reference().find("probs");
  const JsonValue* by_model = all ? all->find(model_file) : nullptr;
  const JsonValue* list = by_model ? by_model->find(audio_file) : nullptr;
  if (!list) return probs;
  for (const JsonValue& v : list->items) probs.push_back(std::strtof(v.text.c_str(), nullptr));
  return probs;
}

class VadReference : public ::testing::TestWithParam<const char*> {};

TEST_P(VadReference, MatchesOnnxRuntimeOnEveryFrame) {
  const std::string model_file = GetParam();
  const Loaded loaded = load(model_file);
  for (const std::string audio_file : {"test.wav", "beckett.wav"}) {
    const std::vector<float> expected = reference_probs(model_file, audio_file);
    ASSERT_FALSE(expected.empty()) << model_file << " " << audio_file;
    const std::vector<float> samples = read_mono(audio_file);
    SileroVad vad(loaded.weights);
    const auto start = std::chrono::steady_clock::now();
    const std::vector<float> probs = speech_probabilities(vad, samples);
    const double elapsed_ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    ASSERT_EQ(probs.size(), expected.size());
    double max_diff = 0;
    for (size_t i = 0; i < probs.size(); ++i) {
      const double diff = std::fabs(static_cast<double>(probs[i]) - expected[i]);
      max_diff = std::max(max_diff, diff);
      EXPECT_LE(diff, 1e-4) << model_file << " " << audio_file << " frame " << i;
    }
    std::printf("[ vad ] %s %s: %zu frames, max |ours - ORT| = %.3g, %.4f ms/frame, RTF %.5f\n",
                model_file.c_str(), audio_file.c_str(), probs.size(), max_diff, elapsed_ms / probs.size(),
                elapsed_ms / 1000.0 / (samples.size() / 16000.0));
    // Segments from our probabilities equal those from ORT's, and there is speech in these clips.
    const std::vector<Segment> ours = find_segments(probs), theirs = find_segments(expected);
    EXPECT_EQ(ours, theirs) << model_file << " " << audio_file;
    EXPECT_FALSE(ours.empty());
    // reset() starts the stream over: same first frames again.
    vad.reset();
    for (size_t i = 0; i < 8; ++i)
      EXPECT_EQ(vad.forward(std::span<const float>(samples).subspan(i * 512, 512)), probs[i]);
  }
}

// The same network on WebGPU (the op layer's GPU backend; SwiftShader in CI): the first frames of each clip
// against ONNX Runtime's probabilities, within the same 1e-4.
TEST_P(VadReference, WebGpuMatchesOnnxRuntime) {
  gpu::Device* device = sotto::testing::open_test_device();
  if (!device) GTEST_SKIP() << sotto::testing::gpu_skip_reason();
  const std::string model_file = GetParam();
  const Loaded loaded = load(model_file);
  const std::vector<float> expected = reference_probs(model_file, "beckett.wav");
  const std::vector<float> samples = read_mono("beckett.wav");
  SileroVad vad(loaded.weights, device);
  const size_t frames = std::min<size_t>(60, expected.size());
  double max_diff = 0;
  for (size_t i = 0; i < frames; ++i) {
    const float p = vad.forward(std::span<const float>(samples).subspan(i * 512, 512));
    max_diff = std::max(max_diff, std::fabs(static_cast<double>(p) - expected[i]));
    ASSERT_LE(std::fabs(static_cast<double>(p) - expected[i]), 1e-4) << model_file << " frame " << i;
  }
  EXPECT_TRUE(vad.status().ok()) << vad.status().message();
  std::printf("[ vad ] %s beckett.wav on WebGPU (%s): %zu frames, max |ours - ORT| = %.3g\n",
              model_file.c_str(), device->info().description.c_str(), frames, max_diff);
}

INSTANTIATE_TEST_SUITE_P(Silero, VadReference,
                         ::testing::Values("silero_vad_v5.1.onnx", "silero_vad_v6.2.onnx"));

TEST(Vad, EightKilohertzBranchLoads) {
  for (const char* model_file : {"silero_vad_v5.1.onnx", "silero_vad_v6.2.onnx"}) {
    const Loaded loaded = load(model_file, 8000);
    EXPECT_EQ(loaded.weights.frame_samples, 256);
    EXPECT_EQ(loaded.weights.stft_basis.elements(), 130 * 128);
    SileroVad vad(loaded.weights);
    std::mt19937 rng(std::random_device{}());
    std::normal_distribution<float> noise(0.0f, 0.05f);
    std::vector<float> frame(256);
    for (float& x : frame) x = noise(rng);
    const float p = vad.forward(frame);
    EXPECT_TRUE(p >= 0.0f && p <= 1.0f) << p;
  }
}

// --- wrong files -----------------------------------------------------------------------------------------

void put_varint(std::vector<uint8_t>& out, uint64_t v) {
  while (v >= 0x80) out.push_back(static_cast<uint8_t>(v | 0x80)), v >>= 7;
  out.push_back(static_cast<uint8_t>(v));
}
void put_bytes(std::vector<uint8_t>& out, uint32_t field, const std::vector<uint8_t>& bytes) {
  put_varint(out, field << 3 | 2);
  put_varint(out, bytes.size());
  out.insert(out.end(), bytes.begin(), bytes.end());
}

// A ModelProto whose main graph holds one float32 initializer (onnx.proto: ModelProto.graph = 7,
// GraphProto.initializer = 5, TensorProto dims = 1, data_type = 2, name = 8, raw_data = 9).
std::vector<uint8_t> onnx_with_tensor(const std::string& name, std::vector<int64_t> dims) {
  std::vector<uint8_t> tensor;
  uint64_t n = 1;
  for (int64_t d : dims) put_varint(tensor, 1 << 3), put_varint(tensor, static_cast<uint64_t>(d)), n *= d;
  put_varint(tensor, 2 << 3), put_varint(tensor, 1);
  put_bytes(tensor, 8, std::vector<uint8_t>(name.begin(), name.end()));
  put_bytes(tensor, 9, std::vector<uint8_t>(n * 4, 0x3f));
  std::vector<uint8_t> graph, model;
  put_bytes(graph, 5, tensor);
  put_varint(model, 1 << 3), put_varint(model, 8);  // ir_version
  put_bytes(model, 7, graph);
  return model;
}

std::string load_error(std::span<const uint8_t> bytes, uint32_t rate_hz = 16000) {
  auto model = parse_onnx(bytes);
  if (!model) return model.message();
  auto weights = load_silero_weights(*model, rate_hz);
  return weights ? std::string("loaded") : weights.message();
}

TEST(Vad, WrongFilesFailClearly) {
  EXPECT_EQ(load_error(onnx_with_tensor("fc.weight", {4, 4})),
            "vad: tensor 'stft.forward_basis_buffer' missing (not a Silero VAD v5/v6 file?)");
  EXPECT_EQ(
      load_error(onnx_with_tensor("stft.forward_basis_buffer", {10, 1, 256})),
      "vad: tensor 'stft.forward_basis_buffer' has shape [10,1,256], expected [258,1,256] for 16000 Hz");
  EXPECT_EQ(load_error(onnx_with_tensor("stft.forward_basis_buffer", {258, 1, 256})),
            "vad: tensor 'encoder.0.reparam_conv.weight' missing from  (not a Silero VAD v5/v6 file?)");
  // A GGUF is not an ONNX file: parse_onnx (or the loader) says so in one line.
  const std::string gguf_error = load_error(read_fixture("llm/stories260K.gguf"));
  EXPECT_NE(gguf_error, "loaded");
  EXPECT_EQ(gguf_error.find('\n'), std::string::npos);
  EXPECT_EQ(load_error(read_fixture("vad/silero_vad_v5.1.onnx"), 44100),
            "vad: Silero runs at 16000 or 8000 Hz, not 44100");
}

// --- odd audio -------------------------------------------------------------------------------------------

TEST(Vad, OddAudioGivesSaneProbabilities) {
  const Loaded loaded = load("silero_vad_v5.1.onnx");
  SileroVad vad(loaded.weights);
  auto all_valid = [](const std::vector<float>& probs) {
    for (float p : probs)
      if (!(p >= 0.0f && p <= 1.0f)) return false;
    return true;
  };
  // Empty and shorter than a frame.
  EXPECT_TRUE(speech_probabilities(vad, {}).empty());
  std::mt19937 rng(std::random_device{}());
  std::uniform_real_distribution<float> uniform(-0.5f, 0.5f);
  std::vector<float> short_clip(100);
  for (float& x : short_clip) x = uniform(rng);
  vad.reset();
  const std::vector<float> short_probs = speech_probabilities(vad, short_clip);
  ASSERT_EQ(short_probs.size(), 1u);
  EXPECT_TRUE(all_valid(short_probs));

  // Silence: valid probabilities, well below the speech threshold, no segments.
  vad.reset();
  const std::vector<float> silence_probs = speech_probabilities(vad, std::vector<float>(16000 * 3, 0.0f));
  EXPECT_TRUE(all_valid(silence_probs));
  for (float p : silence_probs) EXPECT_LT(p, 0.5f);
  EXPECT_TRUE(find_segments(silence_probs).empty());

  // Speech clipped hard (x8, saturating at +-1) and beyond full scale (float WAVs can hold that).
  std::vector<float> speech = read_mono("beckett.wav");
  std::vector<float> clipped = speech, loud = speech;
  for (float& x : clipped) x = std::clamp(8.0f * x, -1.0f, 1.0f);
  for (float& x : loud) x *= 50.0f;
  vad.reset();
  EXPECT_TRUE(all_valid(speech_probabilities(vad, clipped)));
  vad.reset();
  EXPECT_TRUE(all_valid(speech_probabilities(vad, loud)));

  // NaN and Inf samples are read as 0: later frames are unaffected by them.
  std::vector<float> poisoned = speech;
  for (size_t i = 1000; i < 1000 + 700; i += 7) poisoned[i] = std::numeric_limits<float>::quiet_NaN();
  poisoned[5000] = std::numeric_limits<float>::infinity();
  vad.reset();
  const std::vector<float> poisoned_probs = speech_probabilities(vad, poisoned);
  EXPECT_TRUE(all_valid(poisoned_probs));
  const std::vector<float> nan_frame(512, std::numeric_limits<float>::quiet_NaN());
  EXPECT_TRUE(all_valid({vad.forward(nan_frame)}));
}

// --- segmenter (vad-web rules), hand-made probability sequences -------------------------------------------

TEST(Vad, SegmenterRules) {
  SegmenterOptions o;
  o.redemption_ms = 3 * 32;      // 3 frames
  o.pre_speech_pad_ms = 2 * 32;  // 2 frames
  o.min_speech_ms = 2 * 32;      // 2 frames
  // Frames 0-3 silence, 4-6 speech, 7 in between (neither), 8-10 silence -> ends at frame 10.
  const std::vector<float> p = {0.1f, 0.1f, 0.1f, 0.1f, 0.9f, 0.9f, 0.9f, 0.4f, 0.1f, 0.1f, 0.1f, 0.1f};
  EXPECT_EQ(find_segments(p, o), (std::vector<Segment>{{2, 11}}));
  // One speech frame only: a misfire, no segment.
  EXPECT_TRUE(find_segments(std::vector<float>{0.1f, 0.9f, 0.1f, 0.1f, 0.1f, 0.1f}, o).empty());
  // A speech frame during redemption resets it; open at the end -> closed by finish().
  const std::vector<float> q = {0.9f, 0.9f, 0.1f, 0.1f, 0.9f, 0.1f, 0.1f};
  EXPECT_EQ(find_segments(q, o), (std::vector<Segment>{{0, 7}}));
  // NaN is neither speech nor silence.
  const float nan = std::numeric_limits<float>::quiet_NaN();
  EXPECT_EQ(find_segments(std::vector<float>{nan, 0.9f, 0.9f, nan, nan, nan, nan}, o),
            (std::vector<Segment>{{0, 7}}));
}

}  // namespace
}  // namespace sotto::vad
