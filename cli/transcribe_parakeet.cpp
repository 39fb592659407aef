#include "transcribe_parakeet.h"

#include <algorithm>
#include <cstdio>
#include <memory>
#include <vector>

#include "api/clock.h"
#include "audio/mel.h"
#include "commands.h"
#include "gpu/device.h"
#include "io/describe.h"
#include "io/file.h"
#include "models/asr/parakeet.h"
#include "models/asr/parakeet_vocab.h"
#include "nn/gpu_recorder.h"
#include "nn/tensor.h"

namespace sotto::cli {
namespace {

struct Timed {
  asr::TdtResult result;
  double mel_ms = 0, encode_ms = 0, decode_ms = 0, total_ms = 0;
  double host_ms = 0;  // on the GPU: recording, encoding and submitting dispatches (not waiting for reads)
};

// One transcription. Audio of one chunk (<= 30 s) is timed by stage: the mel (on the host; part of encode_ms),
// the encoder up to its output read back (which waits for the GPU), then the TDT loop; longer audio goes
// through transcribe()'s chunking and only its total is timed.
Result<Timed> transcribe_timed(asr::ParakeetModel& model, std::span<const float> audio) {
  Timed t;
  nn::GpuRecorder* gpu = model.context().gpu();
  const double host0 = gpu ? static_cast<double>(gpu->host_ns()) / 1e6 : 0.0;
  auto host_ms = [&] { return gpu ? static_cast<double>(gpu->host_ns()) / 1e6 - host0 : 0.0; };
  const double t0 = now_ms();
  if (audio.size() > 30 * 16000) {
    SOTTO_ASSIGN(t.result, model.transcribe(audio));
    t.total_ms = now_ms() - t0;
    t.host_ms = host_ms();
    return t;
  }
  const audio::MelFeatures mel = model.mel(audio);
  t.mel_ms = now_ms() - t0;
  if (mel.n_frames == 0) return t;
  const nn::Tensor enc = model.encode(mel.data, mel.n_frames);
  if (auto read = enc.ctx().to_floats(enc); !read) return read.status();
  const double t1 = now_ms();
  t.result = model.decode(enc);
  const double t2 = now_ms();
  t.encode_ms = t1 - t0;
  t.decode_ms = t2 - t1;
  t.total_ms = t2 - t0;
  t.host_ms = host_ms();
  return t;
}

}  // namespace

int run_transcribe_parakeet(const std::string& model_dir, std::span<const float> audio_16k,
                            const ParakeetRunOptions& o) {
  std::unique_ptr<gpu::Device> device;  // outlives the model's context (declared first, destroyed last)
  std::unique_ptr<asr::ParakeetModel> model;
  if (o.webgpu && o.bf16x3) return fail("--bf16x3 is for --backend cpu");
  if (o.webgpu) {
    auto opened = gpu::open_device({.request_timestamps = o.gpu_profile});
    if (!opened) return fail(cat("transcribe --backend webgpu: ", opened.message()));
    device = std::move(opened).value();
    auto config = MappedFile::open(model_dir + "/config.json");
    if (!config) return fail(cat(model_dir, ": ", config.message()));
    auto weights = MappedFile::open(model_dir + "/model.safetensors");
    if (!weights) return fail(cat(model_dir, ": ", weights.message()));
    const std::span<const uint8_t> c = config->bytes();
    auto loaded = asr::ParakeetModel::load_on(
        nn::Context::webgpu(*device), std::string_view(reinterpret_cast<const char*>(c.data()), c.size()),
        weights->bytes(), model_dir + "/model.safetensors", o.threads);
    if (!loaded) return fail(cat(model_dir, ": ", loaded.message()));
    model = std::move(loaded).value();
  } else {
    auto loaded = asr::ParakeetModel::open(model_dir, o.threads);
    if (!loaded) return fail(cat(model_dir, ": ", loaded.message()));
    model = std::move(loaded).value();
    // CPU: each weight packed once for the product kernel, not per product.
    if (!o.bf16x3)
      model->use_packed_matrices();
    else if (!model->use_bf16x3_products())
      return fail("--bf16x3: this CPU has no AMX-BF16 (or the OS does not grant its tiles)");
  }
  // Text from NeMo's tokenizer.model, else the transformers layout's tokenizer.json; without either, the text
  // is empty and the tokens are printed.
  asr::ParakeetVocab vocab;
  for (const char* name : {"/tokenizer.model", "/tokenizer.json"}) {
    auto tok = MappedFile::open(model_dir + name);
    if (!tok) continue;
    auto v = asr::parse_parakeet_vocab(tok->bytes(), model_dir + name);
    if (!v) return fail(v.message());
    if (Status s = asr::check_vocab_size(*v, model->config().vocab_size, model_dir + name); !s)
      return fail(s.message());
    vocab = std::move(v).value();
    break;
  }
  std::vector<Timed> runs;
  for (int r = 0; r < o.repeats; ++r) {
    if (r + 1 == o.repeats && o.gpu_profile && device) model->context().gpu()->set_profiling(true);
    auto t = transcribe_timed(*model, audio_16k);
    if (!t) return fail(t.message());
    if (!runs.empty() && t->result.tokens != runs[0].result.tokens)
      return fail(cat("transcribe: run ", r + 1, " gave other tokens"));
    runs.push_back(std::move(t).value());
  }
  if (o.gpu_profile && device) std::fputs(model->context().gpu()->profile().c_str(), stderr);
  // The median run by total time (the first one compiles the GPU's pipelines; with repeats it is one of many).
  std::vector<const Timed*> order;
  for (const Timed& t : runs) order.push_back(&t);
  std::sort(order.begin(), order.end(),
            [](const Timed* a, const Timed* b) { return a->total_ms < b->total_ms; });
  const Timed& mid = *order[order.size() / 2];
  if (o.repeats > 1)
    std::fprintf(
        stderr,
        "transcribe: %d runs, median encode %.2f ms (mel %.2f), decode %.2f ms, total %.2f ms (min %.2f)%s\n",
        o.repeats, mid.encode_ms, mid.mel_ms, mid.decode_ms, mid.total_ms, order[0]->total_ms,
        device ? cat(", host recording and submitting ", mid.host_ms, " ms").c_str() : "");
  const asr::TdtResult& r = runs[0].result;
  std::string text;
  if (!vocab.pieces.empty()) {
    text = asr::detokenize(vocab, r.tokens);
  } else {
    for (size_t i = 0; i < r.tokens.size(); ++i) text += cat(i ? " " : "", r.tokens[i]);
  }
  if (!o.json) {
    std::printf("%s\n", text.c_str());
    return 0;
  }
  constexpr double frame_s = 0.08;
  std::string out = cat("{\"text\": ", json_quote(text), ", \"tokens\": [");
  for (size_t i = 0; i < r.tokens.size(); ++i) out += cat(i ? ", " : "", r.tokens[i]);
  out += "], \"start_s\": [";
  for (size_t i = 0; i < r.frames.size(); ++i) out += cat(i ? ", " : "", r.frames[i] * frame_s);
  out += "], \"duration_s\": [";
  for (size_t i = 0; i < r.durations.size(); ++i) out += cat(i ? ", " : "", r.durations[i] * frame_s);
  out += cat("], \"audio_s\": ", static_cast<double>(audio_16k.size()) / 16000, ", \"mel_ms\": ", mid.mel_ms,
             ", \"encode_ms\": ", mid.encode_ms, ", \"decode_ms\": ", mid.decode_ms,
             ", \"total_ms\": ", mid.total_ms, device ? cat(", \"host_ms\": ", mid.host_ms) : std::string(),
             ", \"backend\": \"", o.webgpu ? "webgpu" : "cpu", "\"}");
  std::printf("%s\n", out.c_str());
  return 0;
}

}  // namespace sotto::cli
