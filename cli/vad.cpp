// sotto vad -m MODEL.onnx AUDIO.wav [--json] [--backend cpu|webgpu]: Silero VAD speech probabilities per 32 ms
// frame and the speech segments found in them (on the CPU, or recorded as WebGPU dispatches by the op layer). Any WAV rate and channel count: channels are averaged, then resampled to the
// model's rate (16 kHz, or 8 kHz with --rate 8000) with sotto's resampler.
#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "api/clock.h"
#include "audio/wav_audio.h"
#include "commands.h"
#include "gpu/device.h"
#include "io/file.h"
#include "io/onnx.h"
#include "io/wav.h"
#include "models/vad/segmenter.h"
#include "models/vad/silero.h"
#include "options.h"

namespace sotto::cli {

namespace {

struct Options {
  std::string model_path, audio_path;
  bool json = false;
  uint32_t rate_hz = 16000;
  bool webgpu = false;
  vad::SegmenterOptions segmenter;
};

// The shortest text that reads back as `v` (0.9, not 0.8999999761581421).
std::string float_text(float v) {
  char buf[32];
  const auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v);
  return std::string(buf, ec == std::errc() ? end : buf);
}

// Durations up to ten minutes; probabilities in [0, 1], the end threshold not above the start one.
constexpr double kMaxMs = 600000;

std::string parse_options(std::span<char* const> args, Options& o) {
  for (ArgCursor cursor("vad", args); !cursor.done();) {
    const std::string_view a = cursor.next();
    Status bad;
    auto take = [&](double& into, double lo, double hi) {
      auto v = cursor.number(a, lo, hi);
      if (v)
        into = *v;
      else
        bad = v.status();
    };
    auto take_float = [&](float& into) {
      double v = into;
      take(v, 0, 1);
      into = static_cast<float>(v);
    };
    if (a == "-m" || a == "--model") {
      auto v = cursor.value(a);
      if (!v) return v.message();
      o.model_path = std::string(*v);
    } else if (a == "--backend") {
      auto v = cursor.value(a);
      if (!v) return v.message();
      if (*v != "cpu" && *v != "webgpu") return "vad: --backend takes cpu or webgpu";
      o.webgpu = *v == "webgpu";
    } else if (a == "--json") {
      o.json = true;
    } else if (a == "--rate") {
      auto v = cursor.whole(a, 8000, 16000);
      if (!v || (*v != 16000 && *v != 8000)) return "vad: --rate must be 16000 or 8000";
      o.rate_hz = static_cast<uint32_t>(*v);
    } else if (a == "--positive") {
      take_float(o.segmenter.positive_threshold);
    } else if (a == "--negative") {
      take_float(o.segmenter.negative_threshold);
    } else if (a == "--redemption-ms") {
      take(o.segmenter.redemption_ms, 0, kMaxMs);
    } else if (a == "--pre-pad-ms") {
      take(o.segmenter.pre_speech_pad_ms, 0, kMaxMs);
    } else if (a == "--min-speech-ms") {
      take(o.segmenter.min_speech_ms, 0, kMaxMs);
    } else if (!a.starts_with("-") && o.audio_path.empty()) {
      o.audio_path = a;
    } else {
      return cat("vad: unknown argument '", a, "'");
    }
    if (!bad) return bad.message();
  }
  if (o.segmenter.negative_threshold > o.segmenter.positive_threshold)
    return cat("vad: --negative (", float_text(o.segmenter.negative_threshold),
               ") must not be above --positive (", float_text(o.segmenter.positive_threshold),
               "): speech would end above the level that starts it");
  if (o.model_path.empty()) return "vad: missing -m MODEL.onnx";
  if (o.audio_path.empty()) return "vad: missing AUDIO.wav";
  return {};
}

// The file as the model takes it; what could not be read at face value (a cut file, NaN samples) is said on
// stderr, and the run goes on.
Result<std::vector<float>> load_audio(const std::string& path, uint32_t rate_hz) {
  SOTTO_ASSIGN(MappedFile file, MappedFile::open(path));
  auto audio = wav_to_speech_audio(file.bytes(), rate_hz);
  if (!audio) return error(path, ": ", audio.message());
  if (!audio->notes.empty())
    std::fprintf(stderr, "sotto: vad: warning: %s: %s\n", path.c_str(), audio->notes.c_str());
  return std::move(audio->samples);
}

}  // namespace

int run_vad(std::span<char* const> args) {
  Options o;
  if (std::string problem = parse_options(args, o); !problem.empty()) return usage_error(problem);

  auto model_file = MappedFile::open(o.model_path);
  if (!model_file) return fail(model_file.message());
  auto model = parse_onnx(model_file->bytes());
  if (!model) return fail(cat(o.model_path, ": ", model.message()));
  auto weights = vad::load_silero_weights(*model, o.rate_hz);
  if (!weights) return fail(cat(o.model_path, ": ", weights.message()));
  auto samples = load_audio(o.audio_path, o.rate_hz);
  if (!samples) return fail(samples.message());

  std::unique_ptr<gpu::Device> device;
  if (o.webgpu) {
    auto opened = gpu::open_device({});
    if (!opened) return fail(opened.message());
    device = std::move(opened).value();
  }
  vad::SileroVad vad(*weights, device.get());
  o.segmenter.frame_ms = 1000.0 * vad.frame_samples() / o.rate_hz;
  const double start_ms = now_ms();
  const std::vector<float> probs = vad::speech_probabilities(vad, *samples);
  const double elapsed_ms = now_ms() - start_ms;
  if (Status s = vad.status(); !s.ok()) return fail(s.message());
  const std::vector<vad::Segment> segments = vad::find_segments(probs, o.segmenter);
  const double frame_s = o.segmenter.frame_ms / 1000.0;
  const double audio_s = static_cast<double>(samples->size()) / o.rate_hz;

  std::string out;
  if (o.json) {
    out = cat("{\"frame_ms\":", o.segmenter.frame_ms, ",\"probs\":[");
    for (size_t i = 0; i < probs.size(); ++i) out += cat(i ? "," : "", probs[i]);
    out += "],\"segments\":[";
    for (size_t i = 0; i < segments.size(); ++i)
      out += cat(i ? "," : "", "{\"start_s\":", segments[i].start_frame * frame_s,
                 ",\"end_s\":", segments[i].end_frame * frame_s, "}");
    out += "]}\n";
  } else {
    out = "frame  time_s  prob\n";
    for (size_t i = 0; i < probs.size(); ++i) {
      char line[64];
      std::snprintf(line, sizeof line, "%5zu %7.3f  %.6f\n", i, i * frame_s, static_cast<double>(probs[i]));
      out += line;
    }
    out += cat("segments: ", segments.size(), "\n");
    for (const vad::Segment& s : segments) {
      char line[64];
      std::snprintf(line, sizeof line, "  %8.3f s .. %8.3f s\n", s.start_frame * frame_s,
                    s.end_frame * frame_s);
      out += line;
    }
  }
  std::fwrite(out.data(), 1, out.size(), stdout);
  if (!probs.empty())
    std::fprintf(stderr, "vad: %zu frames in %.1f ms (%.4f ms per frame, real-time factor %.5f)\n",
                 probs.size(), elapsed_ms, elapsed_ms / probs.size(),
                 audio_s > 0 ? elapsed_ms / 1000.0 / audio_s : 0.0);
  return kExitOk;
}

}  // namespace sotto::cli
