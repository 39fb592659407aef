// sotto speak -m MODEL --voice NAME|FILE (--phonemes P | --text T) [--speed S] -o OUT.wav [--json] [--threads T]
// [--stream [--first-chunk-ms MS] [--lead-ms MS]] [--backend cpu|webgpu [--gpu-profile]] [--repeats N]: Kokoro text-to-speech
// (src/models/tts/kokoro.h) into a 24 kHz float32 WAV; webgpu runs the same forward pass with its tensors on the
// GPU (Dawn), reading back the durations and the audio. Long input is split into pieces of at most 510 phonemes
// at sentence ends; each piece's audio is appended to OUT.wav (header rewritten, so the file is valid) before
// the next piece is computed, so a player can start on the first sentence. --stream goes further, as the voice
// agent does: each piece is vocoded in chunks (kokoro_stream_next: the first --first-chunk-ms of speech, then
// doubling) with its leading pause cut to its last --lead-ms, each chunk appended as it is made. --repeats N
// (benchmarks) speaks the whole input N times (later passes whole sentences, unwritten), and --json adds each pass's
// milliseconds and, on the GPU, the host's recording/encoding milliseconds and the GPU objects (pipelines,
// uniform blocks, bind groups) each pass made: a later pass of the same input finds them all made.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "api/clock.h"
#include "commands.h"
#include "core/thread_pool.h"
#include "gpu/device.h"
#include "io/file.h"
#include "models/tts/kokoro.h"
#include "nn/gpu_recorder.h"
#include "nn/weights.h"
#include "text/g2p.h"
#include "wav_stream.h"

namespace sotto::cli {

namespace {

// More than this many phoneme symbols in one call is refused: ~10 minutes of speech, computed for minutes.
constexpr size_t kMaxPhonemeBytes = 16384;

struct Options {
  std::string model_path, voice, phonemes, text, out_path, lexicon;
  bool has_text = false, json = false, webgpu = false, stream = false;
  double first_chunk_ms = 300.0, lead_ms = 100.0;  // --stream: the voice agent's defaults (web/tts.js)
  bool gpu_profile = false;  // --gpu-profile: each kernel's GPU time (timestamp queries) on stderr at the end
  double speed = 1.0;
  int threads = 2;
  int repeats = 1;
};

std::string parse_options(std::span<char* const> args, Options& o) {
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string_view a = args[i];
    const bool has_value = i + 1 < args.size();
    if ((a == "-m" || a == "--model") && has_value) {
      o.model_path = args[++i];
    } else if (a == "--voice" && has_value) {
      o.voice = args[++i];
    } else if (a == "--phonemes" && has_value) {
      o.phonemes = args[++i];
    } else if (a == "--text" && has_value) {
      o.text = args[++i];
      o.has_text = true;
    } else if (a == "--lexicon" && has_value) {
      o.lexicon = args[++i];
    } else if ((a == "-o" || a == "--output") && has_value) {
      o.out_path = args[++i];
    } else if (a == "--speed" && has_value) {
      char* end = nullptr;
      o.speed = std::strtod(args[++i], &end);
      if (*end != '\0' || !(o.speed >= 0.25 && o.speed <= 4.0)) return "--speed takes a number in 0.25 .. 4";
    } else if (a == "--threads" && has_value) {
      char* end = nullptr;
      const long t = std::strtol(args[++i], &end, 10);
      if (*end != '\0' || t < 1 || t > 256) return "--threads takes a count in 1 .. 256";
      o.threads = static_cast<int>(t);
    } else if (a == "--repeats" && has_value) {
      char* end = nullptr;
      const long r = std::strtol(args[++i], &end, 10);
      if (*end != '\0' || r < 1 || r > 100) return "--repeats takes a count in 1 .. 100";
      o.repeats = static_cast<int>(r);
    } else if (a == "--backend" && has_value) {
      const std::string_view v = args[++i];
      if (v != "cpu" && v != "webgpu") return "--backend takes cpu or webgpu";
      o.webgpu = v == "webgpu";
    } else if ((a == "--first-chunk-ms" || a == "--lead-ms") && has_value) {
      char* end = nullptr;
      const double ms = std::strtod(args[++i], &end);
      if (*end != '\0' || !(ms >= 0.0 && ms <= 60000.0)) return cat(a, " takes milliseconds in 0 .. 60000");
      (a == "--lead-ms" ? o.lead_ms : o.first_chunk_ms) = ms;
    } else if (a == "--stream") {
      o.stream = true;
    } else if (a == "--json") {
      o.json = true;
    } else if (a == "--gpu-profile") {
      o.gpu_profile = true;
    } else {
      return cat("unknown argument '", a, "'");
    }
  }
  if (o.model_path.empty()) return "missing -m MODEL (kokoro-v1.0.int8.onnx)";
  if (o.voice.empty()) return "missing --voice NAME|FILE";
  if (o.out_path.empty()) return "missing -o OUT.wav";
  if (!o.has_text && o.phonemes.empty()) return "missing --phonemes P (or --text T)";
  if (o.has_text && !o.phonemes.empty()) return "give --text or --phonemes, not both";
  return {};
}

// NAME -> voices/NAME.bin beside the model; anything with a '/' or ending in .bin is a path.
std::string voice_path(const std::string& model_path, const std::string& voice) {
  if (voice.find('/') != std::string::npos || voice.ends_with(".bin")) return voice;
  const size_t slash = model_path.rfind('/');
  const std::string dir = slash == std::string::npos ? "." : model_path.substr(0, slash);
  return dir + "/voices/" + voice + ".bin";
}

// The G2P lexicon for --text: --lexicon, else g2p-en-gb.bin for British voices (b*) or g2p-en-us.bin, looked
// for beside the model's directory (models/ when the model is models/kokoro/...) and then in models/.
std::string lexicon_path(const Options& o) {
  if (!o.lexicon.empty()) return o.lexicon;
  const size_t slash = o.voice.rfind('/');
  const char first = o.voice.empty() ? 'a' : o.voice[slash == std::string::npos ? 0 : slash + 1];
  const std::string name = first == 'b' ? "g2p-en-gb.bin" : "g2p-en-us.bin";
  const size_t model_slash = o.model_path.rfind('/');
  const std::string model_dir = model_slash == std::string::npos ? "." : o.model_path.substr(0, model_slash);
  const std::string beside = model_dir + "/../" + name;
  if (std::FILE* f = std::fopen(beside.c_str(), "rb")) {
    std::fclose(f);
    return beside;
  }
  return "models/" + name;
}

// --repeats: ,"passes_ms":[...] and on the GPU ,"host_ms":[...],"objects_made":[...] (nothing for one pass).
std::string repeats_json(const std::vector<double>& ms, const std::vector<double>& host_ms,
                         const std::vector<uint64_t>& objects, bool gpu) {
  if (ms.size() < 2) return {};
  auto list = [](const auto& v) {
    std::string out = "[";
    for (size_t i = 0; i < v.size(); ++i) out += cat(i ? "," : "", v[i]);
    return out + "]";
  };
  std::string out = cat(",\"passes_ms\":", list(ms));
  if (gpu) out += cat(",\"host_ms\":", list(host_ms), ",\"objects_made\":", list(objects));
  return out;
}

}  // namespace

int run_speak(std::span<char* const> args) {
  Options o;
  if (std::string problem = parse_options(args, o); !problem.empty()) return usage_error(problem);
  // --text: our G2P, in the voice's English (b* voices are British), sentence by sentence as Kokoro speaks it.
  std::vector<std::string> pieces;
  if (o.has_text) {
    if (o.text.size() > kMaxPhonemeBytes)
      return fail(cat("speak: ", o.text.size(), " bytes of text is more than one call speaks (",
                      kMaxPhonemeBytes, "); split the text"));
    auto g2p = g2p::G2p::load_file(lexicon_path(o));
    if (!g2p) return fail(cat("speak: --text: ", g2p.message(), " (bash scripts/get-models.sh g2p)"));
    for (const g2p::G2p::Sentence& sentence : g2p->phonemize_sentences(o.text)) {
      pieces.push_back(sentence.phonemes);
      o.phonemes += (o.phonemes.empty() ? "" : " ") + sentence.phonemes;
    }
    if (pieces.empty()) return fail("speak: the text has nothing to say (no words after normalisation)");
  }
  if (o.phonemes.size() > kMaxPhonemeBytes)
    return fail(cat("speak: ", o.phonemes.size(), " bytes of phonemes is more than one call speaks (",
                    kMaxPhonemeBytes, "); split the text"));
  auto ids_check = tts::kokoro_phoneme_ids(o.phonemes);  // every symbol checked before any work
  if (!ids_check) return fail(ids_check.message());

  const std::string vpath = voice_path(o.model_path, o.voice);
  auto voice_file = MappedFile::open(vpath);
  if (!voice_file) return fail(cat("speak: voice '", o.voice, "': ", voice_file.message()));
  auto voice = tts::kokoro_voice_from_bytes(vpath, voice_file->bytes());
  if (!voice) return fail(voice.message());

  auto model_file = MappedFile::open(o.model_path);
  if (!model_file) return fail(model_file.message());
  const size_t slash = o.model_path.rfind('/');
  auto source = nn::open_weights(slash == std::string::npos ? o.model_path : o.model_path.substr(slash + 1),
                                 model_file->bytes());
  if (!source) return fail(cat(o.model_path, ": ", source.message()));
  ThreadPool pool(o.threads);
  std::unique_ptr<gpu::Device> device;  // outlives the GPU context (declared first, destroyed last)
  std::unique_ptr<nn::Context> ctx = nn::Context::cpu(&pool);
  auto weights = tts::load_kokoro_weights(*ctx, **source);
  if (!weights) return fail(cat("not a Kokoro v1.0 int8 model: ", weights.message()));
  if (o.webgpu) {
    auto opened = gpu::open_device({.request_timestamps = o.gpu_profile});
    if (!opened) return fail(cat("speak --backend webgpu: ", opened.message()));
    device = std::move(opened).value();
    std::unique_ptr<nn::Context> gpu_ctx = nn::Context::webgpu(*device);
    auto on_gpu = tts::kokoro_weights_to_gpu(*gpu_ctx, *weights);
    if (!on_gpu) return fail(cat("speak --backend webgpu: ", on_gpu.message()));
    weights = std::move(on_gpu);
    ctx = std::move(gpu_ctx);
  }

  WavStream wav;
  if (Status s = wav.open(o.out_path, tts::kKokoroSampleRateHz); !s) return fail(s.message());
  if (pieces.empty()) pieces = tts::kokoro_split_phonemes(o.phonemes);
  // Part of loading: the weights' derived layouts are made here, not in the first sentence's time.
  if (Status s = tts::kokoro_warm_up(*ctx, *weights); !s) return fail(s.message());
  // Profiled after the warm-up, so the figures are the sentences' dispatches alone.
  if (o.gpu_profile && ctx->gpu()) ctx->gpu()->set_profiling(true);
  nn::GpuRecorder* gpu = ctx->gpu();
  std::vector<double> pass_ms, pass_host_ms;
  std::vector<uint64_t> pass_objects;
  double start_ms = 0, first_audio_ms = 0, compute_ms = 0;
  tts::KokoroStageMs stage_ms;
  for (int pass = 0; pass < o.repeats; ++pass) {
    const double host0 = gpu ? static_cast<double>(gpu->host_ns()) / 1e6 : 0.0;
    const uint64_t objects0 = gpu ? gpu->objects_made() : 0;
    start_ms = now_ms();
    if (pass > 0) {  // later passes: timed, their audio not written
      for (const std::string& piece : pieces) {
        auto ids = tts::kokoro_phoneme_ids(piece);
        if (!ids) return fail(ids.message());
        auto audio =
            tts::kokoro_speak(*ctx, *weights, *ids, voice->style(ids->size()), static_cast<float>(o.speed));
        if (!audio) return fail(audio.message());
      }
    } else {
      for (const std::string& piece : pieces) {
        auto ids = tts::kokoro_phoneme_ids(piece);
        if (!ids) return fail(ids.message());
        if (!o.stream) {
          auto audio = tts::kokoro_speak(*ctx, *weights, *ids, voice->style(ids->size()),
                                         static_cast<float>(o.speed), nullptr, &stage_ms);
          if (!audio) return fail(audio.message());
          if (Status s = wav.append(*audio); !s) return fail(s.message());
          if (first_audio_ms == 0) first_audio_ms = now_ms() - start_ms;
          continue;
        }
        // 12.5 ms of audio per decoded frame.
        const auto frames = [](double ms) { return static_cast<int64_t>(std::ceil(ms / 12.5)); };
        auto stream = tts::kokoro_stream_begin(*ctx, *weights, *ids, voice->style(ids->size()),
                                               static_cast<float>(o.speed),
                                               std::max<int64_t>(1, frames(o.first_chunk_ms)), &stage_ms);
        if (!stream) return fail(stream.message());
        tts::kokoro_stream_cut_lead(*stream, frames(o.lead_ms));
        while (!stream->done()) {
          auto chunk = tts::kokoro_stream_next(*ctx, *weights, *stream, &stage_ms);
          if (!chunk) return fail(chunk.message());
          if (Status s = wav.append(*chunk); !s) return fail(s.message());
          if (first_audio_ms == 0) first_audio_ms = now_ms() - start_ms;
        }
      }
    }
    pass_ms.push_back(now_ms() - start_ms);
    if (pass == 0) compute_ms = pass_ms.back();
    pass_host_ms.push_back(gpu ? static_cast<double>(gpu->host_ns()) / 1e6 - host0 : 0.0);
    pass_objects.push_back(gpu ? gpu->objects_made() - objects0 : 0);
  }
  const double audio_s = static_cast<double>(wav.samples()) / tts::kKokoroSampleRateHz;
  if (o.gpu_profile && ctx->gpu()) std::fputs(ctx->gpu()->profile().c_str(), stderr);
  if (o.json) {
    const std::string out =
        cat("{\"samples\":", wav.samples(), ",\"sample_rate\":", tts::kKokoroSampleRateHz,
            ",\"audio_s\":", audio_s, ",\"compute_ms\":", compute_ms, ",\"first_audio_ms\":", first_audio_ms,
            ",\"phonemes\":", ids_check->size(), ",\"sentences\":", pieces.size(), ",\"threads\":", o.threads,
            ",\"stream\":", o.stream ? "true" : "false", ",\"backend\":\"", o.webgpu ? "webgpu" : "cpu", "\"",
            ",\"stages_ms\":{\"albert\":", stage_ms.albert, ",\"duration\":", stage_ms.duration,
            ",\"prosody\":", stage_ms.prosody, ",\"text_encoder\":", stage_ms.text_encoder,
            ",\"decoder\":", stage_ms.decoder, ",\"source\":", stage_ms.source,
            ",\"generator\":", stage_ms.generator, "}",
            repeats_json(pass_ms, pass_host_ms, pass_objects, gpu != nullptr), "}\n");
    std::fwrite(out.data(), 1, out.size(), stdout);
  } else {
    std::fprintf(stdout,
                 "%s: %.3f s of audio (%llu samples at 24 kHz) in %.0f ms, %.2fx real time, %zu piece(s)\n",
                 o.out_path.c_str(), audio_s, static_cast<unsigned long long>(wav.samples()), compute_ms,
                 compute_ms > 0 ? audio_s * 1000.0 / compute_ms : 0.0, pieces.size());
  }
  return kExitOk;
}

}  // namespace sotto::cli
