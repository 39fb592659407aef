// The C API's speech synthesis (api/sotto.h): a handle owns Kokoro's weights (copied onto its CPU context from
// the caller's bytes), the voices added by name, up to two G2P lexicons (en-us, en-gb: a voice whose name starts
// with 'b' reads British English) and the buffers it hands out. Text goes through our G2P into sentences; each
// sentence's phonemes are one Kokoro call (long ones split at 510 symbols), the audio concatenated at 24 kHz.
#include <algorithm>
#include <cmath>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "api/sotto.h"
#include "core/thread_pool.h"
#include "gpu/device.h"
#include "io/describe.h"
#include "models/tts/kokoro.h"
#include "nn/ops.h"
#include "nn/weights.h"
#include "text/g2p.h"

struct SottoTts {
  std::string last_error;
  std::unique_ptr<sotto::ThreadPool> own_pool;
  sotto::ThreadPool* pool = nullptr;
  std::unique_ptr<sotto::gpu::Device> device;  // Kokoro's GPU (sotto_tts_set_backend); outlives ctx
  std::unique_ptr<sotto::nn::Context> ctx;
  std::optional<sotto::tts::KokoroWeights> weights;
  std::map<std::string, sotto::tts::KokoroVoice, std::less<>> voices;
  std::optional<sotto::g2p::G2p> g2p_us, g2p_gb;
  std::vector<float> audio;
  size_t pieces = 0;  // Kokoro calls the last sotto_tts_speak made
  // sotto_tts_stream_*: the pieces still to speak, and the one being vocoded chunk by chunk.
  struct Streaming {
    std::vector<std::vector<int64_t>> pieces;
    size_t next_piece = 0;
    const sotto::tts::KokoroVoice* voice = nullptr;
    float speed = 1;
    int64_t first_chunk_frames = 1;
    std::optional<sotto::tts::KokoroStream> piece;
  };
  std::optional<Streaming> stream;
  // sotto_tts_set_stream_lead: decoded frames (12.5 ms) of each streamed piece's leading pause kept; -1: all.
  int64_t lead_keep_frames = -1;
  std::string json;
};

namespace {

// More than this many phoneme bytes in one call is refused (as `sotto speak` does): minutes of compute.
constexpr size_t kMaxPhonemeBytes = 16384;

// Keeps the one-line reason for sotto_tts_last_error; null for the caller to return.
std::nullptr_t fail(SottoTts* tts, std::string message) {
  tts->last_error = std::move(message);
  return nullptr;
}

const sotto::tts::KokoroVoice* find_voice(SottoTts* tts, std::string_view name) {
  auto it = tts->voices.find(name);
  if (it != tts->voices.end()) return &it->second;
  return fail(tts, sotto::cat("tts: voice '", name, "' is not loaded (sotto_tts_add_voice)"));
}

// British voices (bf_*, bm_*, or a file of that name) read with the en-gb lexicon; every other with en-us.
const sotto::g2p::G2p* g2p_for(SottoTts* tts, std::string_view voice) {
  const std::string_view base = voice.substr(voice.rfind('/') + 1);  // npos + 1 == 0
  const bool british = !base.empty() && base[0] == 'b';
  const auto& g = british ? tts->g2p_gb : tts->g2p_us;
  if (g) return &*g;
  return fail(tts, sotto::cat("tts: no ", british ? "en-gb" : "en-us", " G2P lexicon loaded for voice '",
                              voice, "' (sotto_tts_load_g2p)"));
}

// Streaming: the next piece's front (kokoro_stream_begin), or no piece when all were started. False on failure.
bool start_piece(SottoTts* tts) {
  SottoTts::Streaming& s = *tts->stream;
  s.piece.reset();
  if (s.next_piece == s.pieces.size()) return true;
  const std::vector<int64_t>& ids = s.pieces[s.next_piece++];
  auto piece = sotto::tts::kokoro_stream_begin(*tts->ctx, *tts->weights, ids, s.voice->style(ids.size()),
                                               s.speed, s.first_chunk_frames);
  if (!piece) {
    fail(tts, sotto::cat("tts: ", piece.message()));
    return false;
  }
  s.piece.emplace(std::move(piece).value());
  sotto::tts::kokoro_stream_cut_lead(*s.piece, tts->lead_keep_frames);
  return true;
}

}  // namespace

SottoTts* sotto_tts_create_on_pool(sotto::ThreadPool* pool) {
  auto* tts = new SottoTts();
  tts->pool = pool;
  return tts;
}

extern "C" {

SottoTts* sotto_tts_create(int32_t n_threads) {
#if defined(__wasm__)
  n_threads = 1;  // helpers would be Web Workers nobody starts for a pool of this handle's own
#endif
  auto* tts = new SottoTts();
  tts->own_pool = std::make_unique<sotto::ThreadPool>(n_threads < 1 ? 1 : n_threads);
  tts->pool = tts->own_pool.get();
  return tts;
}

void sotto_tts_destroy(SottoTts* tts) {
  delete tts;
}

const char* sotto_tts_last_error(const SottoTts* tts) {
  return tts ? tts->last_error.c_str() : "tts: null handle";
}

int32_t sotto_tts_set_backend(SottoTts* tts, int32_t backend) {
  if (!tts) return SOTTO_ERROR_ARGUMENT;
  tts->last_error.clear();
  if (backend != SOTTO_BACKEND_CPU && backend != SOTTO_BACKEND_WEBGPU) {
    fail(tts, sotto::cat("tts: unknown backend ", backend, " (0 cpu, 1 webgpu)"));
    return SOTTO_ERROR_ARGUMENT;
  }
  tts->stream.reset();
  tts->weights.reset();  // they live on the context they were loaded onto: load again after this
  tts->ctx.reset();
  if (backend == SOTTO_BACKEND_CPU) {
    tts->device.reset();
    return SOTTO_OK;
  }
  if (tts->device) return SOTTO_OK;
  auto opened = sotto::gpu::open_device({});
  if (!opened) {
    fail(tts, sotto::cat("tts: ", opened.message()));
    return SOTTO_ERROR_RUN;
  }
  tts->device = std::move(opened).value();
  return SOTTO_OK;
}

int32_t sotto_tts_load(SottoTts* tts, const uint8_t* model, size_t model_size) {
  if (!tts) return SOTTO_ERROR_ARGUMENT;
  tts->last_error.clear();
  if (!model || model_size == 0) {
    fail(tts, "tts: no model bytes");
    return SOTTO_ERROR_ARGUMENT;
  }
  tts->weights.reset();
  tts->ctx = sotto::nn::Context::cpu(tts->pool);
  auto source = sotto::nn::open_weights("kokoro model", {model, model_size});
  if (!source) {
    fail(tts, sotto::cat("tts: ", source.message()));
    return SOTTO_ERROR_FILE;
  }
  auto w = sotto::tts::load_kokoro_weights(*tts->ctx, **source);  // copies every tensor onto the context
  if (!w) {
    fail(tts, sotto::cat("tts: not a Kokoro v1.0 int8 model: ", w.message()));
    return SOTTO_ERROR_FILE;
  }
  if (tts->device) {  // read on the CPU (the file's layouts), then copied to the GPU and the CPU copy dropped
    auto gpu_ctx = sotto::nn::Context::webgpu(*tts->device);
    auto on_gpu = sotto::tts::kokoro_weights_to_gpu(*gpu_ctx, *w);
    if (!on_gpu) {
      fail(tts, sotto::cat("tts: ", on_gpu.message()));
      return SOTTO_ERROR_RUN;
    }
    w = std::move(on_gpu);
    tts->ctx = std::move(gpu_ctx);
  }
  tts->weights.emplace(std::move(w).value());
  // Part of loading: the weights' derived layouts are made now, not in the first sentence's time (a voice
  // agent's first reply would otherwise wait for them).
  if (sotto::Status s = sotto::tts::kokoro_warm_up(*tts->ctx, *tts->weights); !s) {
    tts->weights.reset();
    fail(tts, sotto::cat("tts: ", s.message()));
    return SOTTO_ERROR_RUN;
  }
  return SOTTO_OK;
}

int32_t sotto_tts_add_voice(SottoTts* tts, const char* name, size_t name_bytes, const uint8_t* bytes,
                            size_t size) {
  if (!tts) return SOTTO_ERROR_ARGUMENT;
  tts->last_error.clear();
  if (!name || name_bytes == 0 || (!bytes && size)) {
    fail(tts, "tts: a voice needs a name and its bytes");
    return SOTTO_ERROR_ARGUMENT;
  }
  const std::string n(name, name_bytes);
  auto v = sotto::tts::kokoro_voice_from_bytes(n, {bytes, size});
  if (!v) {
    fail(tts, v.message());
    return SOTTO_ERROR_FILE;
  }
  tts->voices.insert_or_assign(n, std::move(v).value());
  return SOTTO_OK;
}

int32_t sotto_tts_load_g2p(SottoTts* tts, const uint8_t* lexicon, size_t size) {
  if (!tts) return SOTTO_ERROR_ARGUMENT;
  tts->last_error.clear();
  auto g = sotto::g2p::G2p::load({lexicon, lexicon ? size : 0}, "g2p lexicon");  // copies the image
  if (!g) {
    fail(tts, sotto::cat("tts: ", g.message()));
    return SOTTO_ERROR_FILE;
  }
  auto& slot = g->lang() == sotto::g2p::Lang::EnGb ? tts->g2p_gb : tts->g2p_us;
  slot.emplace(std::move(g).value());
  return SOTTO_OK;
}

const char* sotto_tts_phonemize_json(SottoTts* tts, const char* voice, size_t voice_bytes, const char* text,
                                     size_t text_bytes, size_t* out_bytes) {
  if (!tts) return nullptr;
  tts->last_error.clear();
  if ((!voice && voice_bytes) || (!text && text_bytes)) {
    fail(tts, "tts: null buffer");
    return nullptr;
  }
  const sotto::g2p::G2p* g = g2p_for(tts, {voice, voice_bytes});
  if (!g) return nullptr;
  const auto sentences = g->phonemize_sentences({text, text_bytes});
  std::string out = sotto::cat("{\"lang\":\"", g->lang() == sotto::g2p::Lang::EnGb ? "en-gb" : "en-us",
                               "\",\"sentences\":[");
  for (size_t i = 0; i < sentences.size(); ++i)
    out += sotto::cat(i ? "," : "", "{\"text\":", sotto::json_quote(sentences[i].text),
                      ",\"phonemes\":", sotto::json_quote(sentences[i].phonemes), "}");
  tts->json = out + "]}";
  if (out_bytes) *out_bytes = tts->json.size();
  return tts->json.c_str();
}

const float* sotto_tts_speak(SottoTts* tts, const char* voice, size_t voice_bytes, const char* phonemes,
                             size_t phoneme_bytes, float speed, size_t* out_samples) {
  if (!tts) return nullptr;
  tts->last_error.clear();
  if (!tts->weights) return fail(tts, "tts: no model loaded");
  if ((!voice && voice_bytes) || (!phonemes && phoneme_bytes)) return fail(tts, "tts: null buffer");
  if (!(speed >= 0.25f && speed <= 4.0f)) return fail(tts, "tts: speed must be in 0.25 .. 4");
  if (phoneme_bytes > kMaxPhonemeBytes)
    return fail(tts, sotto::cat("tts: ", phoneme_bytes, " bytes of phonemes is more than one call speaks (",
                                kMaxPhonemeBytes, "); split the text")),
           nullptr;
  const std::string_view p(phonemes, phoneme_bytes);
  auto all_ids = sotto::tts::kokoro_phoneme_ids(p);  // every symbol checked before any work
  if (!all_ids) return fail(tts, sotto::cat("tts: ", all_ids.message()));
  const sotto::tts::KokoroVoice* v = find_voice(tts, {voice, voice_bytes});
  if (!v) return nullptr;
  tts->audio.clear();
  tts->pieces = 0;
  for (const std::string& piece : sotto::tts::kokoro_split_phonemes(p)) {
    auto ids = sotto::tts::kokoro_phoneme_ids(piece);
    if (!ids) return fail(tts, sotto::cat("tts: ", ids.message()));
    auto audio = sotto::tts::kokoro_speak(*tts->ctx, *tts->weights, *ids, v->style(ids->size()), speed);
    if (!audio) return fail(tts, sotto::cat("tts: ", audio.message()));
    tts->audio.insert(tts->audio.end(), audio->begin(), audio->end());
    ++tts->pieces;
  }
  tts->audio.reserve(1);  // an empty result is still a non-null pointer
  if (out_samples) *out_samples = tts->audio.size();
  return tts->audio.data();
}

size_t sotto_tts_last_pieces(const SottoTts* tts) {
  return tts ? tts->pieces : 0;
}

int32_t sotto_tts_stream_begin(SottoTts* tts, const char* voice, size_t voice_bytes, const char* phonemes,
                               size_t phoneme_bytes, float speed, float first_chunk_ms) {
  if (!tts) return SOTTO_ERROR_ARGUMENT;
  tts->last_error.clear();
  tts->stream.reset();
  auto refuse = [&](std::string why) {
    fail(tts, std::move(why));
    return SOTTO_ERROR_ARGUMENT;
  };
  if (!tts->weights) return refuse("tts: no model loaded");
  if ((!voice && voice_bytes) || (!phonemes && phoneme_bytes)) return refuse("tts: null buffer");
  if (!(speed >= 0.25f && speed <= 4.0f)) return refuse("tts: speed must be in 0.25 .. 4");
  if (!(first_chunk_ms >= 0.0f && first_chunk_ms <= 60000.0f))
    return refuse("tts: first_chunk_ms must be in 0 .. 60000");
  if (phoneme_bytes > kMaxPhonemeBytes)
    return refuse(sotto::cat("tts: ", phoneme_bytes, " bytes of phonemes is more than one call speaks (",
                             kMaxPhonemeBytes, "); split the text"));
  const std::string_view p(phonemes, phoneme_bytes);
  auto all_ids = sotto::tts::kokoro_phoneme_ids(p);  // every symbol checked before any work
  if (!all_ids) return refuse(sotto::cat("tts: ", all_ids.message()));
  const sotto::tts::KokoroVoice* v = find_voice(tts, {voice, voice_bytes});
  if (!v) return SOTTO_ERROR_ARGUMENT;
  SottoTts::Streaming s;
  for (const std::string& piece : sotto::tts::kokoro_split_phonemes(p)) {
    auto ids = sotto::tts::kokoro_phoneme_ids(piece);
    if (!ids) return refuse(sotto::cat("tts: ", ids.message()));
    s.pieces.push_back(std::move(ids).value());
  }
  s.voice = v;
  s.speed = speed;
  // 12.5 ms per decoded frame (300 samples at 24 kHz).
  s.first_chunk_frames = std::max<int64_t>(1, std::lround(first_chunk_ms / 12.5f));
  tts->stream.emplace(std::move(s));
  // The first piece's text side and decoder now: begin is where the caller waits for them.
  if (!start_piece(tts)) {
    tts->stream.reset();
    return SOTTO_ERROR_RUN;
  }
  return SOTTO_OK;
}

const float* sotto_tts_stream_next(SottoTts* tts, size_t* out_samples) {
  if (out_samples) *out_samples = 0;
  if (!tts) return nullptr;
  tts->last_error.clear();
  if (!tts->stream) return nullptr;
  SottoTts::Streaming& s = *tts->stream;
  if (s.piece && s.piece->done() && !start_piece(tts)) {
    tts->stream.reset();
    return nullptr;
  }
  if (!s.piece) {  // every piece given out
    tts->stream.reset();
    return nullptr;
  }
  auto chunk = sotto::tts::kokoro_stream_next(*tts->ctx, *tts->weights, *s.piece);
  if (!chunk) {
    tts->stream.reset();
    return fail(tts, sotto::cat("tts: ", chunk.message()));
  }
  tts->audio = std::move(chunk).value();
  tts->audio.reserve(1);
  if (out_samples) *out_samples = tts->audio.size();
  return tts->audio.data();
}

int32_t sotto_tts_set_stream_lead(SottoTts* tts, float keep_ms) {
  if (!tts) return SOTTO_ERROR_ARGUMENT;
  tts->last_error.clear();
  if (std::isnan(keep_ms) || keep_ms > 60000.0f) {
    fail(tts, "tts: stream lead must be at most 60000 ms (negative: all of it)");
    return SOTTO_ERROR_ARGUMENT;
  }
  // 12.5 ms per decoded frame; the rest of a frame is kept.
  tts->lead_keep_frames = keep_ms < 0 ? -1 : static_cast<int64_t>(std::ceil(keep_ms / 12.5f));
  return SOTTO_OK;
}

size_t sotto_tts_stream_piece_samples(const SottoTts* tts) {
  if (!tts || !tts->stream || !tts->stream->piece) return 0;
  // 300 samples (12.5 ms at 24 kHz) per decoded frame: kokoro_stream_next's chunks joined.
  return static_cast<size_t>(tts->stream->piece->frames) * 300;
}

int32_t sotto_tts_stream_more(const SottoTts* tts) {
  if (!tts || !tts->stream) return 0;
  const SottoTts::Streaming& s = *tts->stream;
  return (s.piece && !s.piece->done()) || s.next_piece < s.pieces.size() ? 1 : 0;
}

}  // extern "C"
