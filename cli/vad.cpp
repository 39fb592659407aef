// sotto vad -m MODEL.onnx AUDIO.wav [--json] [--backend cpu|webgpu]: Silero VAD speech probabilities per 32 ms
// frame and the speech segments found in them (on the CPU, or recorded as WebGPU dispatches by the op layer). Any WAV rate and channel count: channels are averaged, then resampled to the
// model's rate (16 kHz, or 8 kHz with --rate 8000) with sotto's resampler.
#include <cstdio>
#include <cstdlib>
#include <string>

#include "api/clock.h"
#include "audio/resample.h"
#include "commands.h"
#include "gpu/device.h"
#include "io/file.h"
#include "io/onnx.h"
#include "io/wav.h"
#include "models/vad/segmenter.h"
#include "models/vad/silero.h"

namespace sotto::cli {

namespace {

struct Options {
  std::string model_path, audio_path;
  bool json = false;
  uint32_t rate_hz = 16000;
  bool webgpu = false;
  vad::SegmenterOptions segmenter;
};

bool parse_number(std::string_view text, double& value) {
  char* end = nullptr;
  const std::string s(text);
  value = std::strtod(s.c_str(), &end);
  return !s.empty() && end == s.c_str() + s.size() && value == value;
}

std::string parse_options(std::span<char* const> args, Options& o) {
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string_view a = args[i];
    const bool has_value = i + 1 < args.size();
    double number = 0;
    auto take_number = [&](double& into) {
      if (!has_value || !parse_number(args[i + 1], number)) return false;
      into = number;
      ++i;
      return true;
    };
    double as_double = 0;
    if ((a == "-m" || a == "--model") && has_value) {
      o.model_path = args[++i];
    } else if (a == "--backend" && has_value) {
      const std::string_view backend = args[++i];
      if (backend != "cpu" && backend != "webgpu") return "--backend takes cpu or webgpu";
      o.webgpu = backend == "webgpu";
    } else if (a == "--json") {
      o.json = true;
    } else if (a == "--rate") {
      if (!take_number(as_double) || (as_double != 16000 && as_double != 8000))
        return "--rate takes 16000 or 8000";
      o.rate_hz = static_cast<uint32_t>(as_double);
    } else if (a == "--positive") {
      if (!take_number(as_double)) return "--positive takes a probability";
      o.segmenter.positive_threshold = static_cast<float>(as_double);
    } else if (a == "--negative") {
      if (!take_number(as_double)) return "--negative takes a probability";
      o.segmenter.negative_threshold = static_cast<float>(as_double);
    } else if (a == "--redemption-ms") {
      if (!take_number(o.segmenter.redemption_ms)) return "--redemption-ms takes milliseconds";
    } else if (a == "--pre-pad-ms") {
      if (!take_number(o.segmenter.pre_speech_pad_ms)) return "--pre-pad-ms takes milliseconds";
    } else if (a == "--min-speech-ms") {
      if (!take_number(o.segmenter.min_speech_ms)) return "--min-speech-ms takes milliseconds";
    } else if (!a.starts_with("-") && o.audio_path.empty()) {
      o.audio_path = a;
    } else {
      return cat("unknown argument '", a, "'");
    }
  }
  if (o.model_path.empty()) return "missing -m MODEL.onnx";
  if (o.audio_path.empty()) return "missing AUDIO.wav";
  return {};
}

Result<std::vector<float>> load_audio(const std::string& path, uint32_t rate_hz) {
  SOTTO_ASSIGN(MappedFile file, MappedFile::open(path));
  auto audio = decode_wav(file.bytes());
  if (!audio) return error(path, ": ", audio.message());
  std::vector<float> mono = to_mono(*audio);
  if (audio->sample_rate_hz == rate_hz) return mono;
  auto resampled = resample(mono, 1, audio->sample_rate_hz, rate_hz);
  if (!resampled) return error(path, ": ", resampled.message());
  return std::move(resampled).value();
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
