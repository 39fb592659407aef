// sotto transcribe -m MODEL_DIR AUDIO.wav [--json] [--threads T] [--vad FILE] [--backend cpu|webgpu]: Moonshine
// speech recognition on the CPU, or (--backend webgpu) the same forward pass on WebGPU through Dawn. Any WAV rate and channel count (mixed down, resampled to 16 kHz with sotto's resampler). Audio longer
// than the model's window is cut at pauses (models/asr/moonshine_windows.h) by Silero VAD when a VAD file is
// found (--vad FILE, else MODEL_DIR/silero_vad.onnx), else at its quietest points, and the windows' texts are
// joined.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <thread>

#include "audio/resample.h"
#include "commands.h"
#include "core/thread_pool.h"
#include "gpu/device.h"
#include "io/describe.h"
#include "io/file.h"
#include "io/onnx.h"
#include "io/wav.h"
#include "models/asr/moonshine.h"
#include "models/asr/moonshine_windows.h"
#include "models/asr/parakeet.h"
#include "models/vad/silero.h"
#include "nn/gpu_recorder.h"
#include "nn/tensor.h"
#include "transcribe_parakeet.h"

namespace sotto::cli {

namespace {

struct Options {
  std::string model_dir, audio_path, vad_path;
  bool json = false;
  bool webgpu = false;
  bool gpu_profile = false;  // --gpu-profile: each kernel's GPU time (timestamp queries) on stderr at the end
  bool bf16x3 = false;       // --bf16x3: Parakeet's CPU encoder products in split bf16 on AMX tiles
  int repeats = 1;  // the timings reported are the median run's (the first run also compiles GPU pipelines)
  int threads = static_cast<int>(std::clamp(std::thread::hardware_concurrency(), 1u, 8u));
};

std::string parse_options(std::span<char* const> args, Options& o) {
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string_view a = args[i];
    const bool has_value = i + 1 < args.size();
    if ((a == "-m" || a == "--model") && has_value) {
      o.model_dir = args[++i];
    } else if (a == "--json") {
      o.json = true;
    } else if (a == "--backend" && has_value) {
      const std::string_view v = args[++i];
      if (v != "cpu" && v != "webgpu") return "--backend takes cpu or webgpu";
      o.webgpu = v == "webgpu";
    } else if (a == "--gpu-profile") {
      o.gpu_profile = true;
    } else if (a == "--bf16x3") {
      o.bf16x3 = true;
    } else if (a == "--repeats" && has_value) {
      const std::string v = args[++i];
      char* end = nullptr;
      const long r = std::strtol(v.c_str(), &end, 10);
      if (v.empty() || *end != 0 || r < 1 || r > 1000) return "--repeats takes a count from 1 to 1000";
      o.repeats = static_cast<int>(r);
    } else if (a == "--vad" && has_value) {
      o.vad_path = args[++i];
    } else if (a == "--threads" && has_value) {
      const std::string v = args[++i];
      char* end = nullptr;
      const long t = std::strtol(v.c_str(), &end, 10);
      if (v.empty() || *end != 0 || t < 1 || t > 256) return "--threads takes a count from 1 to 256";
      o.threads = static_cast<int>(t);
    } else if (!a.starts_with("-") && o.audio_path.empty()) {
      o.audio_path = a;
    } else {
      return cat("unknown argument '", a, "'");
    }
  }
  if (o.model_dir.empty()) return "missing -m MODEL_DIR (a directory with encoder_model.ort, ...)";
  if (o.audio_path.empty()) return "missing AUDIO.wav";
  return {};
}

Result<std::vector<float>> load_audio_16k(const std::string& path) {
  SOTTO_ASSIGN(MappedFile file, MappedFile::open(path));
  auto audio = decode_wav(file.bytes());
  if (!audio) return error(path, ": ", audio.message());
  std::vector<float> mono = to_mono(*audio);
  if (audio->sample_rate_hz != 16000) {
    auto resampled = resample(mono, 1, audio->sample_rate_hz, 16000);
    if (!resampled) return error(path, ": ", resampled.message());
    mono = std::move(resampled).value();
  }
  for (float v : mono)
    if (!std::isfinite(v)) return error(path, ": the audio holds NaN or infinite samples");
  return mono;
}

// Silero speech probabilities per 32 ms frame, or none when no VAD file is given or found.
Result<std::vector<float>> vad_probabilities(const Options& o, std::span<const float> audio) {
  std::string path = o.vad_path;
  if (path.empty()) {
    path = o.model_dir + "/silero_vad.onnx";
    if (!MappedFile::open(path)) return std::vector<float>();
  }
  SOTTO_ASSIGN(MappedFile file, MappedFile::open(path));
  auto model = parse_onnx(file.bytes());
  if (!model) return error(path, ": ", model.message());
  auto weights = vad::load_silero_weights(*model, 16000);
  if (!weights) return error(path, ": ", weights.message());
  vad::SileroVad v(*weights);
  return vad::speech_probabilities(v, audio);
}

}  // namespace

int run_transcribe(std::span<char* const> args) {
  Options o;
  if (std::string problem = parse_options(args, o); !problem.empty()) return usage_error(problem);

  if (asr::is_parakeet_dir(
          o.model_dir)) {  // config.json of a ParakeetForTDT: the model type is read from the files
    auto audio = load_audio_16k(o.audio_path);
    if (!audio) return fail(audio.message());
    if (audio->empty()) return fail(cat(o.audio_path, ": the file holds no samples"));
    return run_transcribe_parakeet(o.model_dir, *audio,
                                   {.json = o.json,
                                    .webgpu = o.webgpu,
                                    .gpu_profile = o.gpu_profile,
                                    .bf16x3 = o.bf16x3,
                                    .repeats = o.repeats,
                                    .threads = o.threads});
  }
  if (o.bf16x3) return fail("--bf16x3 is for Parakeet directories (Moonshine's products are int8)");
  // The package's layout (.ort files, tokenizer.bin) or the hub's (.onnx files, tokenizer.json).
  const std::string dir = o.model_dir + "/";
  auto exists = [&](const char* name) { return MappedFile::open(dir + name).ok(); };
  const bool onnx = !exists("encoder_model.ort") && exists("encoder_model.onnx");
  const std::string ext = onnx ? ".onnx" : ".ort";
  const char* tok_first = onnx ? "tokenizer.json" : "tokenizer.bin";
  const char* tok_other = onnx ? "tokenizer.bin" : "tokenizer.json";
  const std::string tok_name = exists(tok_first) || !exists(tok_other) ? tok_first : tok_other;
  auto enc = MappedFile::open(dir + "encoder_model" + ext);
  if (!enc) return fail(cat(o.model_dir, " is not a Moonshine model directory: ", enc.message()));
  auto dec = MappedFile::open(dir + "decoder_model_merged" + ext);
  if (!dec) return fail(cat(o.model_dir, " is not a Moonshine model directory: ", dec.message()));
  auto tok = MappedFile::open(dir + tok_name);
  if (!tok) return fail(cat(o.model_dir, " is not a Moonshine model directory: ", tok.message()));
  auto audio = load_audio_16k(o.audio_path);
  if (!audio) return fail(audio.message());
  if (audio->empty()) return fail(cat(o.audio_path, ": the file holds no samples"));

  ThreadPool pool(o.threads);
  std::unique_ptr<gpu::Device> device;  // outlives the model's context (declared first, destroyed last)
  std::unique_ptr<nn::Context> ctx = nn::Context::cpu(&pool);
  if (o.webgpu) {
    auto opened = gpu::open_device({.request_timestamps = o.gpu_profile});
    if (!opened) return fail(cat("transcribe --backend webgpu: ", opened.message()));
    device = std::move(opened).value();
    ctx = nn::Context::webgpu(*device);
    ctx->gpu()->set_profiling(o.gpu_profile);
  }
  const std::string enc_name = "encoder_model" + ext, dec_name = "decoder_model_merged" + ext;
  asr::MoonshineLoadOptions load_options;
  load_options.encoder_name = enc_name;
  load_options.decoder_name = dec_name;
  auto model = asr::load_moonshine(enc->bytes(), dec->bytes(), tok->bytes(), std::move(ctx), load_options);
  if (!model) return fail(cat(o.model_dir, ": ", model.message()));

  std::vector<float> probs;
  if (static_cast<double>(audio->size()) > asr::WindowOptions{}.max_window_s * 16000) {
    auto p = vad_probabilities(o, *audio);
    if (!p) return fail(p.message());
    probs = std::move(p).value();
  }
  const std::vector<asr::AudioWindow> windows = asr::speech_windows(*audio, probs);

  // On the GPU, the host's share of a run: recording, encoding and submitting dispatches (not waiting for reads).
  nn::GpuRecorder* gpu = model->ctx->gpu();
  auto host_ms = [&] { return gpu ? static_cast<double>(gpu->host_ns()) / 1e6 : 0.0; };
  double host0 = host_ms();
  auto transcript = asr::transcribe_windows(model->weights, model->tokenizer, *audio, windows);
  if (!transcript) return fail(cat(o.audio_path, ": ", transcript.message()));
  if (o.repeats >
      1) {  // the same audio again: the median run's timings (the text is each run's, checked equal)
    std::vector<double> encode = {transcript->encode_ms}, decode = {transcript->decode_ms},
                        total = {transcript->encode_ms + transcript->decode_ms}, host = {host_ms() - host0};
    for (int r = 1; r < o.repeats; ++r) {
      // Each run starts with the GPU idle, as one clip does: work a run leaves queued after its result (the
      // greedy loop's batch in flight when it reads EOS) would otherwise be timed as the next run's.
      if (gpu) {
        if (Status idle = gpu->device().wait_idle(); !idle.ok()) return fail(idle.message());
      }
      host0 = host_ms();
      auto again = asr::transcribe_windows(model->weights, model->tokenizer, *audio, windows);
      if (!again) return fail(cat(o.audio_path, ": ", again.message()));
      if (again->text != transcript->text)
        return fail(cat(o.audio_path, ": run ", r + 1, " gave another text"));
      encode.push_back(again->encode_ms);
      decode.push_back(again->decode_ms);
      total.push_back(again->encode_ms + again->decode_ms);
      host.push_back(host_ms() - host0);
    }
    for (auto* v : {&encode, &decode, &total, &host}) std::sort(v->begin(), v->end());
    const size_t mid = encode.size() / 2;
    transcript->encode_ms = encode[mid];
    transcript->decode_ms = decode[mid];
    char host_note[80] = "";
    if (gpu) std::snprintf(host_note, sizeof host_note, ", host recording and submitting %.2f ms", host[mid]);
    std::fprintf(stderr,
                 "transcribe: %d runs, median encode %.2f ms, decode %.2f ms, total %.2f ms (min %.2f)%s\n",
                 o.repeats, encode[mid], decode[mid], total[mid], total[0], host_note);
  }
  if (o.gpu_profile && model->ctx->gpu()) std::fputs(model->ctx->gpu()->profile().c_str(), stderr);
  const double audio_s = static_cast<double>(audio->size()) / 16000;
  const std::string out = o.json
                              ? asr::transcript_json(*transcript, audio_s, o.threads, !probs.empty()) + "\n"
                              : transcript->text + "\n";
  std::fwrite(out.data(), 1, out.size(), stdout);
  if (!o.json)
    std::fprintf(
        stderr, "transcribe: %.2f s of audio, %zu window(s), %zu tokens: encode %.1f ms, decode %.1f ms\n",
        audio_s, windows.size(), transcript->tokens.size(), transcript->encode_ms, transcript->decode_ms);
  return kExitOk;
}

}  // namespace sotto::cli
