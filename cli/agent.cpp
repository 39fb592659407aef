// sotto agent --in QUESTION.wav --out ANSWER.wav [--json]: the voice agent's pipeline natively, with files for
// the microphone and the speaker — for profiling and tests. It runs what the page (web/agent/) runs, through the
// same C API (src/api/sotto.h): Silero VAD segments the input as a live stream would, each segment is a turn;
// Moonshine transcribes it, the chat model answers (the KV cache kept across turns), the reply is cut into
// pieces as it is written (text/reply_splitter.h: a short first clause, then sentences) and Kokoro speaks each
// piece as soon as it exists. The reply's audio goes to ANSWER.wav (24 kHz; turns one after another with
// a short silence between them).
//
// The timeline is the page's (web/agent/timeline.js), in ms from the end of speech: the endpoint (the
// silence the segmenter waits for, in audio time: the input arrives at real-time speed, and the VAD keeps up
// with it), then the wall-clock time of each stage after it. One process on the cores in turn: the language
// model stops while a piece is synthesised (the page's policy: the voice first), so the first sound is
// transcript + prefill + the first piece's tokens + its synthesis. As the page does, recognition starts
// speculatively once the segment has speculate_ms of silence: when the endpoint follows with nothing but
// silence, the transcript was ready at that point plus the recognition's time (or at the endpoint, if
// sooner), which is where the later stages start. The speculative transcript's chat turn is prefilled then
// too (--speculative-prefill 1, the default, as the page): a confirmed transcript goes straight to writing,
// ready at the speculation's point plus recognition plus prefill; a dropped one is rolled back
// (sotto_llm_rollback) to before the turn, so the conversation in the cache is as if it had never run.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "api/clock.h"
#include "api/sotto.h"
#include "commands.h"
#include "io/describe.h"
#include "io/file.h"
#include "io/json.h"
#include "llm_turn.h"
#include "options.h"
#include "text/reply_splitter.h"
#include "wav_stream.h"

namespace sotto::cli {

namespace {

// The page's system prompt (web/agent/agent.js): answers meant to be heard.
constexpr const char* kSystemPrompt =
    "You are a friendly voice assistant that runs entirely on the user's own device. Everything you write is "
    "read aloud, so answer in one to three short, plain sentences, as you would say them in conversation: no "
    "lists, no markdown, no code, no emoji. If you do not know, say so briefly.";

constexpr int kTtsRateHz = 24000;
constexpr double kSilenceBetweenTurnsS = 0.3;

struct Options {
  std::string in_path, out_path;
  std::string llm_path = "models/qwen2.5-coder-0.5b-instruct-q4_k_m.gguf";
  std::string asr_dir = "models/moonshine-base-en";
  std::string tts_path = "models/kokoro/kokoro-v1.0.int8.onnx";
  std::string voice = "af_heart";
  std::string
      vad_path;  // default: first of models/silero_vad_v5.1.onnx, tests/fixtures/vad/silero_vad_v5.1.onnx
  std::string system = kSystemPrompt;
  bool json = false;
  bool warm_up = true;              // the page's warm-up (warmup=0 there turns it off)
  int max_tokens = 160;             // the page's default
  int ctx = 4096;                   // the page's default context
  int first_words = 4;              // the page's FIRST_WORDS
  double endpoint_ms = 560;         // the page's ENDPOINT_MS (the segmenter's redemption time)
  double speculate_ms = 100;        // the page's SPECULATE_MS (0: recognition only at the endpoint)
  bool speculative_prefill = true;  // the page's SPECULATIVE_PREFILL (?prefill=0 there)
  int threads = static_cast<int>(std::clamp(std::thread::hardware_concurrency(), 1u, 8u));
};

std::string parse_options(std::span<char* const> args, Options& o) {
  for (ArgCursor cursor("agent", args); !cursor.done();) {
    const std::string_view a = cursor.next();
    auto text = [&](std::string& into) -> std::string {
      auto v = cursor.value(a);
      if (!v) return v.message();
      into = std::string(*v);
      return {};
    };
    auto whole = [&](int& into, int64_t lo, int64_t hi) -> std::string {
      auto v = cursor.whole(a, lo, hi);
      if (!v) return v.message();
      into = static_cast<int>(*v);
      return {};
    };
    std::string bad;
    if (a == "--in") {
      bad = text(o.in_path);
    } else if (a == "--out" || a == "-o") {
      bad = text(o.out_path);
    } else if (a == "-m" || a == "--model") {
      bad = text(o.llm_path);
    } else if (a == "--asr") {
      bad = text(o.asr_dir);
    } else if (a == "--tts") {
      bad = text(o.tts_path);
    } else if (a == "--voice") {
      bad = text(o.voice);
    } else if (a == "--vad") {
      bad = text(o.vad_path);
    } else if (a == "--system") {
      bad = text(o.system);
    } else if (a == "-n" || a == "--n-predict") {
      bad = whole(o.max_tokens, 1, 4096);
    } else if (a == "--ctx") {
      bad = whole(o.ctx, 256, 131072);
    } else if (a == "--first-words") {
      bad = whole(o.first_words, 0, 100);
    } else if (a == "--threads") {
      bad = whole(o.threads, 1, 256);
    } else if (a == "--endpoint-ms") {
      auto v = cursor.number(a, 64, 5000);
      if (!v) return v.message();
      o.endpoint_ms = *v;
    } else if (a == "--speculate-ms") {
      auto v = cursor.number(a, 0, 5000);
      if (!v) return v.message();
      o.speculate_ms = *v;
    } else if (a == "--speculative-prefill") {
      int v = 1;
      bad = whole(v, 0, 1);
      o.speculative_prefill = v != 0;
    } else if (a == "--json") {
      o.json = true;
    } else if (a == "--no-warm-up") {
      o.warm_up = false;
    } else {
      return cat("agent: unknown argument '", a, "'");
    }
    if (!bad.empty()) return bad;
  }
  if (o.in_path.empty()) return "agent: missing --in QUESTION.wav";
  if (o.out_path.empty()) return "agent: missing --out ANSWER.wav";
  return {};
}

bool exists(const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (f) std::fclose(f);
  return f != nullptr;
}

Result<MappedFile> open_model(const std::string& path, std::string_view what, std::string_view get) {
  auto f = MappedFile::open(path);
  if (!f) return error("agent: ", what, ": ", f.message(), " (bash scripts/get-models.sh", get, ")");
  return f;
}

std::string_view as_text(const char* s, size_t n) {
  return s ? std::string_view(s, n) : std::string_view();
}

// One turn's timeline, ms from the end of speech (the page's stage names), and what was said.
struct Turn {
  double start_s = 0, end_s = 0;  // the speech segment in the input
  double endpoint_ms = 0, asr_ms = 0, transcript_ms = 0, first_token_ms = -1, first_piece_ms = -1,
         first_sound_ms = -1, reply_done_ms = 0;
  double prefill_ms = 0, decode_tokens_per_s = 0, synthesis_ms = 0, audio_s = 0;
  bool speculative = false;  // transcribed during the endpoint's pause
  bool prefilled = false;    // ... and its chat turn prefilled then
  int prompt_tokens = 0, reply_tokens = 0;
  std::string transcript, reply, first_piece, stop;
  std::vector<std::string> pieces;
};

// The models, loaded once; each handle keeps its own threads (they take turns on the cores).
struct Pipeline {
  SottoVad* vad = nullptr;
  SottoAsr* asr = nullptr;
  SottoLlm* llm = nullptr;
  SottoTts* tts = nullptr;
  MappedFile llm_file;  // the LLM reads its weights in place
  bool first_turn = true;

  ~Pipeline() {
    sotto_vad_destroy(vad);
    sotto_asr_destroy(asr);
    sotto_llm_destroy(llm);
    sotto_tts_destroy(tts);
  }
};

Status load(const Options& o, Pipeline& p) {
  std::string vad_path = o.vad_path;
  if (vad_path.empty())
    vad_path = exists("models/silero_vad_v5.1.onnx") ? "models/silero_vad_v5.1.onnx"
                                                     : "tests/fixtures/vad/silero_vad_v5.1.onnx";
  SOTTO_ASSIGN(MappedFile vad_file, open_model(vad_path, "--vad", ""));
  p.vad = sotto_vad_create();
  if (sotto_vad_load(p.vad, vad_file.bytes().data(), vad_file.bytes().size(), 16000) != SOTTO_OK)
    return error("agent: ", vad_path, ": ", sotto_vad_last_error(p.vad));

  const std::string dir = o.asr_dir + "/";
  SOTTO_ASSIGN(MappedFile enc, open_model(dir + "encoder_model.ort", "--asr", " moonshine"));
  SOTTO_ASSIGN(MappedFile dec, open_model(dir + "decoder_model_merged.ort", "--asr", " moonshine"));
  SOTTO_ASSIGN(MappedFile tok, open_model(dir + "tokenizer.bin", "--asr", " moonshine"));
  p.asr = sotto_asr_create(o.threads);
  if (sotto_asr_load(p.asr, enc.bytes().data(), enc.bytes().size(), dec.bytes().data(), dec.bytes().size(),
                     tok.bytes().data(), tok.bytes().size()) != SOTTO_OK)
    return error("agent: ", o.asr_dir, ": ", sotto_asr_last_error(p.asr));

  SOTTO_ASSIGN(p.llm_file, open_model(o.llm_path, "-m", ""));
  p.llm = sotto_llm_create(o.threads);
  if (sotto_llm_load(p.llm, p.llm_file.bytes().data(), p.llm_file.bytes().size(), o.ctx) != SOTTO_OK)
    return error("agent: ", o.llm_path, ": ", sotto_llm_last_error(p.llm));

  SOTTO_ASSIGN(MappedFile tts_file, open_model(o.tts_path, "--tts", " kokoro"));
  p.tts = sotto_tts_create(o.threads);
  if (sotto_tts_load(p.tts, tts_file.bytes().data(), tts_file.bytes().size()) != SOTTO_OK)
    return error("agent: ", o.tts_path, ": ", sotto_tts_last_error(p.tts));
  const size_t slash = o.tts_path.rfind('/');
  const std::string tts_dir = slash == std::string::npos ? "." : o.tts_path.substr(0, slash);
  SOTTO_ASSIGN(MappedFile voice, open_model(tts_dir + "/voices/" + o.voice + ".bin", "--voice", " kokoro"));
  if (sotto_tts_add_voice(p.tts, o.voice.data(), o.voice.size(), voice.bytes().data(),
                          voice.bytes().size()) != SOTTO_OK)
    return error("agent: --voice ", o.voice, ": ", sotto_tts_last_error(p.tts));
  const std::string lexicon =
      tts_dir + (o.voice.starts_with("b") ? "/../g2p-en-gb.bin" : "/../g2p-en-us.bin");
  SOTTO_ASSIGN(MappedFile g2p, open_model(lexicon, "the G2P lexicon", " g2p"));
  if (sotto_tts_load_g2p(p.tts, g2p.bytes().data(), g2p.bytes().size()) != SOTTO_OK)
    return error("agent: ", lexicon, ": ", sotto_tts_last_error(p.tts));
  return {};
}

// Text -> 24 kHz audio appended to `audio`: the G2P's sentences, one Kokoro call each.
Status synthesize(const Options& o, Pipeline& p, std::string_view text, std::vector<float>& audio) {
  size_t n = 0;
  const char* json =
      sotto_tts_phonemize_json(p.tts, o.voice.data(), o.voice.size(), text.data(), text.size(), &n);
  if (!json) return error("agent: phonemize: ", sotto_tts_last_error(p.tts));
  SOTTO_ASSIGN(JsonValue doc, parse_json(std::string_view(json, n)));
  const JsonValue* sentences = doc.find("sentences");
  if (!sentences || !sentences->is_array()) return error("agent: phonemize gave no sentences");
  for (const JsonValue& s : sentences->items) {
    const JsonValue* phonemes = s.find("phonemes");
    if (!phonemes || phonemes->text.empty()) continue;
    size_t samples = 0;
    const float* out = sotto_tts_speak(p.tts, o.voice.data(), o.voice.size(), phonemes->text.data(),
                                       phonemes->text.size(), 1.0f, &samples);
    if (!out) return error("agent: speak: ", sotto_tts_last_error(p.tts));
    audio.insert(audio.end(), out, out + samples);
  }
  return {};
}

// The page's warm-up (web/agent/agent.js warmUp), so the first turn is not the slow one: a second of silence
// through the recogniser, and a greeting exchange that puts the system prompt in the KV cache (and touches
// every weight page once) and stays in the conversation, so the first question prefills only itself. Kokoro
// makes its derived layouts in sotto_tts_load.
Status warm_up(const Options& o, Pipeline& p) {
  const std::vector<float> silence(16000, 0.0f);
  size_t n = 0;
  if (!sotto_asr_transcribe_json(p.asr, silence.data(), silence.size(), &n))
    return error("agent: warm-up: ", sotto_asr_last_error(p.asr));
  auto ids = tokenize_turn(p.llm, &o.system, "Hello.", true, false);
  if (!ids) return error("agent: warm-up: ", ids.message());
  SottoSampling sampling;
  sotto_sampling_defaults(&sampling);
  sampling.max_new_tokens = 24;
  if (sotto_llm_begin(p.llm, ids->data(), ids->size(), &sampling, nullptr, 0, 0) != SOTTO_OK)
    return error("agent: warm-up: ", sotto_llm_last_error(p.llm));
  SottoStep step{};
  do {
    if (sotto_llm_step(p.llm, &step) != SOTTO_OK)
      return error("agent: warm-up: ", sotto_llm_last_error(p.llm));
  } while (!step.done);
  // Kept only when the greeting ended as a reply does (as the page keeps it in its history).
  p.first_turn = step.stop != SOTTO_STOP_EOG;
  return {};
}

// Recognition of 16 kHz audio -> its text.
Result<std::string> transcribe(Pipeline& p, std::span<const float> speech) {
  size_t n = 0;
  const char* asr_json = sotto_asr_transcribe_json(p.asr, speech.data(), speech.size(), &n);
  if (!asr_json) return error("agent: transcribe: ", sotto_asr_last_error(p.asr));
  SOTTO_ASSIGN(JsonValue asr_doc, parse_json(std::string_view(asr_json, n)));
  const JsonValue* text = asr_doc.find("text");
  return text ? text->text : std::string();
}

// A transcript made during the endpoint's pause: its text, and when it was ready (ms from the end of speech);
// with its chat turn prefilled (held before its first token), where the cache was before it and the prefill's
// time (run after the recognition, in the same pause).
struct Speculation {
  std::string text;
  double asr_ms = 0, ready_ms = 0;
  bool prefilled = false;
  int32_t n_past_before = 0;
  double prefill_ms = 0;
};

// The chat turn for `transcript`: its prompt (the system prompt on the first turn) and its prefill.
Status begin_turn(const Options& o, Pipeline& p, const std::string& transcript) {
  const int32_t reply_closed = p.first_turn ? 0 : sotto_llm_reply_closed(p.llm);
  auto ids = tokenize_turn(p.llm, &o.system, transcript, p.first_turn, reply_closed != 0);
  if (!ids) return error("agent: ", ids.message());
  SottoSampling sampling;
  sotto_sampling_defaults(&sampling);  // greedy: the same reply on every run
  sampling.max_new_tokens = o.max_tokens;
  if (sotto_llm_begin(p.llm, ids->data(), ids->size(), &sampling, nullptr, 0, p.first_turn ? 0 : 1) !=
      SOTTO_OK)
    return error("agent: ", sotto_llm_last_error(p.llm));
  return {};
}

bool has_words(const std::string& text) {
  return text.find_first_not_of(" \t\n") != std::string::npos;
}

// Prefills the speculation's turn now (the page's startPrefill).
Status prefill_speculation(const Options& o, Pipeline& p, Speculation& spec) {
  if (!o.speculative_prefill || !has_words(spec.text)) return {};
  SottoTimings before{};
  sotto_llm_timings(p.llm, &before);
  const double t = now_ms();
  SOTTO_TRY(begin_turn(o, p, spec.text));
  spec.prefill_ms = now_ms() - t;
  spec.n_past_before = before.n_past;
  spec.prefilled = true;
  return {};
}

// A speculation not used: its prefilled turn goes, the cache back to before it (the page's dropSpec).
Status drop_speculation(Pipeline& p, std::optional<Speculation>& spec) {
  if (spec && spec->prefilled && sotto_llm_rollback(p.llm, spec->n_past_before) != SOTTO_OK)
    return error("agent: ", sotto_llm_last_error(p.llm));
  spec.reset();
  return {};
}

// One spoken turn: `speech` is the segment's 16 kHz audio; its end was detected just now. `early`: the
// segment's speculative transcript, when nothing but silence followed it.
Status run_turn(const Options& o, Pipeline& p, std::span<const float> speech, const Speculation* early,
                Turn& turn, WavStream& wav) {
  double t0 = now_ms();
  double stage0 = turn.endpoint_ms;  // where the stages after recognition count from
  const auto since = [&](double t) { return stage0 + (t - t0); };
  if (early) {
    turn.transcript = early->text;
    turn.asr_ms = early->asr_ms;
    turn.transcript_ms = std::max(turn.endpoint_ms, early->ready_ms);
    turn.speculative = true;
    stage0 = early->prefilled ? std::max(turn.endpoint_ms, early->ready_ms + early->prefill_ms)
                              : turn.transcript_ms;
  } else {
    SOTTO_ASSIGN(turn.transcript, transcribe(p, speech));
    const double transcribed = now_ms();
    turn.asr_ms = transcribed - t0;
    turn.transcript_ms = since(transcribed);
  }
  if (!has_words(turn.transcript)) {
    turn.reply_done_ms = turn.transcript_ms;
    turn.stop = "no words heard";
    return {};
  }

  // The reply: the turn's prompt (the system prompt on the first turn), prefill (already done during the pause
  // when the speculation's was), then token by token.
  turn.prefilled = early && early->prefilled;
  if (!turn.prefilled) SOTTO_TRY(begin_turn(o, p, turn.transcript));
  p.first_turn = false;

  text::ReplySplitter split(static_cast<size_t>(o.first_words));
  std::vector<float> audio;
  const auto speak_piece = [&](std::string piece) -> Status {
    if (piece.empty()) return {};
    if (turn.pieces.empty()) {
      turn.first_piece_ms = since(now_ms());
      turn.first_piece = piece;
    }
    const double started = now_ms();
    audio.clear();
    SOTTO_TRY(synthesize(o, p, piece, audio));
    turn.synthesis_ms += now_ms() - started;
    if (turn.first_sound_ms < 0 && !audio.empty()) turn.first_sound_ms = since(now_ms());
    turn.audio_s += static_cast<double>(audio.size()) / kTtsRateHz;
    turn.pieces.push_back(std::move(piece));
    return wav.append(audio);
  };
  for (;;) {
    SottoStep step{};
    if (sotto_llm_step(p.llm, &step) != SOTTO_OK) return error("agent: ", sotto_llm_last_error(p.llm));
    if (step.id >= 0 && turn.first_token_ms < 0) turn.first_token_ms = since(now_ms());
    const std::string_view delta = as_text(step.text, step.text_bytes);
    turn.reply += delta;
    for (std::string& piece : split.push(delta)) SOTTO_TRY(speak_piece(std::move(piece)));
    if (step.done) {
      turn.stop = sotto_stop_name(step.stop);
      break;
    }
  }
  SOTTO_TRY(speak_piece(split.flush()));
  turn.reply_done_ms = since(now_ms());
  SottoTimings timings{};
  sotto_llm_timings(p.llm, &timings);
  // A prefilled turn's prefill_ms counts its wait for the endpoint too: its own time is the speculation's.
  turn.prefill_ms = turn.prefilled ? early->prefill_ms : timings.prefill_ms;
  turn.decode_tokens_per_s = timings.decode_tokens_per_s;
  turn.prompt_tokens = timings.n_prompt;
  turn.reply_tokens = timings.n_generated;
  return {};
}

double percentile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const double at = q * static_cast<double>(v.size() - 1);
  const size_t lo = static_cast<size_t>(at);
  const size_t hi = std::min(lo + 1, v.size() - 1);
  return v[lo] + (v[hi] - v[lo]) * (at - static_cast<double>(lo));
}

std::string turn_json(const Options& o, const Turn& t) {
  std::string pieces = "[";
  for (const std::string& s : t.pieces) pieces += cat(pieces.size() > 1 ? "," : "", json_quote(s));
  pieces += "]";
  const auto stage = [](double ms) { return std::lround(ms); };
  std::string stages = cat("{\"endpoint_ms\":", stage(t.endpoint_ms), ",\"asr_ms\":", stage(t.asr_ms),
                           ",\"transcript_ms\":", stage(t.transcript_ms));
  if (t.first_token_ms >= 0) stages += cat(",\"first_token_ms\":", stage(t.first_token_ms));
  if (t.first_piece_ms >= 0) stages += cat(",\"first_sentence_ms\":", stage(t.first_piece_ms));
  if (t.first_sound_ms >= 0) stages += cat(",\"first_sound_ms\":", stage(t.first_sound_ms));
  stages += cat(",\"reply_done_ms\":", stage(t.reply_done_ms), "}");
  return cat(
      "{\"clip\":", json_quote(o.in_path), ",\"speech_s\":[", t.start_s, ",", t.end_s,
      "],\"transcript\":", json_quote(t.transcript), ",\"reply\":", json_quote(t.reply),
      ",\"voice_to_voice_ms\":", t.first_sound_ms >= 0 ? cat(stage(t.first_sound_ms)) : std::string("null"),
      ",\"stages\":", stages, ",\"first_piece\":", json_quote(t.first_piece), ",\"pieces\":", pieces,
      ",\"stop\":", json_quote(t.stop), ",\"speculative_asr\":", t.speculative ? "true" : "false",
      ",\"speculative_prefill\":", t.prefilled ? "true" : "false", ",\"prompt_tokens\":", t.prompt_tokens,
      ",\"reply_tokens\":", t.reply_tokens, ",\"prefill_ms\":", stage(t.prefill_ms),
      ",\"decode_tokens_per_s\":", std::round(t.decode_tokens_per_s * 10) / 10,
      ",\"synthesis_ms\":", stage(t.synthesis_ms), ",\"reply_audio_s\":", std::round(t.audio_s * 100) / 100,
      "}");
}

void print_turn(size_t index, const Turn& t) {
  std::printf("turn %zu (speech %.2f-%.2f s): \"%s\"\n", index + 1, t.start_s, t.end_s, t.transcript.c_str());
  if (t.reply.empty()) {
    std::printf("  no reply (%s)\n", t.stop.c_str());
    return;
  }
  std::printf("  reply: \"%s\"\n", t.reply.c_str());
  std::printf("  first piece: \"%s\"\n", t.first_piece.c_str());
  std::printf(
      "  from the end of speech: endpoint %.0f ms, transcript %.0f ms, first token %.0f ms, first piece %.0f "
      "ms, "
      "first sound %.0f ms, reply done %.0f ms\n",
      t.endpoint_ms, t.transcript_ms, t.first_token_ms, t.first_piece_ms, t.first_sound_ms, t.reply_done_ms);
  std::printf(
      "  prefill %d tokens in %.0f ms, %d tokens at %.1f tokens/s, %.2f s of audio synthesised in %.0f ms\n",
      t.prompt_tokens, t.prefill_ms, t.reply_tokens, t.decode_tokens_per_s, t.audio_s, t.synthesis_ms);
}

}  // namespace

int run_agent(std::span<char* const> args) {
  Options o;
  if (std::string problem = parse_options(args, o); !problem.empty()) return usage_error(problem);
  auto in_file = MappedFile::open(o.in_path);
  if (!in_file) return fail(cat("agent: ", in_file.message()));

  Pipeline p;
  const double load_start = now_ms();
  if (Status s = load(o, p); !s) return fail(s.message());
  const double load_ms = now_ms() - load_start;
  const double warm_start = now_ms();
  if (o.warm_up)
    if (Status s = warm_up(o, p); !s) return fail(s.message());
  const double warm_up_ms = now_ms() - warm_start;

  size_t n_samples = 0;
  const float* decoded =
      sotto_vad_decode_wav(p.vad, in_file->bytes().data(), in_file->bytes().size(), &n_samples);
  if (!decoded) return fail(cat("agent: ", o.in_path, ": ", sotto_vad_last_error(p.vad)));
  const std::vector<float> input(decoded, decoded + n_samples);  // the handle's buffer is reused below
  if (const char* notes = sotto_vad_notes(p.vad); notes && *notes)
    std::fprintf(stderr, "agent: %s: %s\n", o.in_path.c_str(), notes);

  WavStream wav;
  if (Status s = wav.open(o.out_path, kTtsRateHz); !s) return fail(s.message());

  // The input as a live stream: frame by frame through the VAD and the page's segmenter settings; each
  // segment's end starts a turn, computed before the stream goes on (a turn's reply would play meanwhile).
  SottoVadOptions vad_options;
  sotto_vad_segmenter_defaults(&vad_options);
  vad_options.redemption_ms = o.endpoint_ms;
  vad_options.pre_speech_pad_ms = 320;  // the page's VAD_OPTIONS
  vad_options.min_speech_ms = 250;
  SottoVadSegmenter* segmenter = sotto_vad_segmenter_create(&vad_options);
  const size_t frame = static_cast<size_t>(sotto_vad_frame_samples(p.vad));
  const double frame_ms = vad_options.frame_ms;
  std::vector<Turn> turns;
  std::vector<float> padded(frame);
  double vad_ms = 0;
  int64_t last_speech_frame = -1;
  // Speculative recognition (the page's speculate()): the open segment's first frame (as the segmenter counts
  // it: pre_speech_pad frames before its first speech frame, never before the last segment's end), its speech
  // frames, the silent frames in a row, and the speculation made in this pause.
  const int spec_frames =
      o.speculate_ms > 0 ? std::max(1, static_cast<int>(std::lround(o.speculate_ms / frame_ms))) : 0;
  const int64_t pad_frames = std::lround(vad_options.pre_speech_pad_ms / frame_ms);
  const int min_speech_frames =
      std::max(1, static_cast<int>(std::lround(vad_options.min_speech_ms / frame_ms)));
  int64_t open_from = 0, closed_at = 0;
  int speech_frames = 0, silent_run = 0;
  bool open = false;
  std::optional<Speculation> spec;
  Status status;
  for (size_t at = 0, f = 0; at < input.size() + frame && status; at += frame, ++f) {
    SottoVadSegment seg{};
    int32_t event;
    if (at < input.size()) {
      const size_t take = std::min(frame, input.size() - at);
      std::fill(padded.begin(), padded.end(), 0.0f);
      std::copy_n(input.begin() + static_cast<std::ptrdiff_t>(at), take, padded.begin());
      const double t = now_ms();
      const float prob = sotto_vad_process(p.vad, padded.data(), frame);
      vad_ms += now_ms() - t;
      if (prob >= vad_options.negative_threshold) last_speech_frame = static_cast<int64_t>(f);
      silent_run = prob < vad_options.negative_threshold ? silent_run + 1 : 0;
      if (silent_run == 0) status = drop_speculation(p, spec);  // speech again: the pause was not the end
      if (!status) break;
      if (open && prob >= vad_options.positive_threshold) ++speech_frames;
      if (open && spec_frames && silent_run == spec_frames && speech_frames >= min_speech_frames && !spec) {
        // The segment so far, this frame included, transcribed now; in a live stream the recognition runs
        // while the endpoint's silence goes on, so it is ready spec_frames after the speech plus its time.
        const size_t from = static_cast<size_t>(open_from) * frame;
        const size_t to = std::min(input.size(), (f + 1) * frame);
        const double asr_start = now_ms();
        auto text = transcribe(p, std::span<const float>(input).subspan(from, to - from));
        if (!text) {
          status = text.status();
          break;
        }
        const double asr_ms = now_ms() - asr_start;
        spec = Speculation{std::move(*text), asr_ms, spec_frames * frame_ms + asr_ms};
        if (status = prefill_speculation(o, p, *spec); !status) break;
      }
      event = sotto_vad_segmenter_push(segmenter, prob, &seg);
      if (event == SOTTO_VAD_SPEECH_START) {
        open = true;
        open_from = std::max(closed_at, static_cast<int64_t>(f) - pad_frames);
        speech_frames = 1;
        if (status = drop_speculation(p, spec); !status) break;
      } else if (event == SOTTO_VAD_SPEECH_END || event == SOTTO_VAD_MISFIRE) {
        open = false;
        closed_at = static_cast<int64_t>(f) + 1;
      }
    } else {
      event = sotto_vad_segmenter_finish(segmenter, &seg);  // the input ends: an open segment ends with it
    }
    const bool input_ended = at >= input.size();
    if (event != SOTTO_VAD_SPEECH_END) continue;
    Turn turn;
    turn.start_s = static_cast<double>(seg.start_frame) * frame_ms / 1000;
    turn.end_s = static_cast<double>(last_speech_frame + 1) * frame_ms / 1000;
    // Detected at the end of this frame (or at the end of the input); in audio time since the speech ended.
    const double detected_s =
        std::min(static_cast<double>(f + 1) * frame_ms / 1000, static_cast<double>(input.size()) / 16000.0);
    // Speech that runs to the end of the input is answered as a live stream would be: after the endpoint's
    // silence.
    turn.endpoint_ms = input_ended ? o.endpoint_ms : std::max(0.0, (detected_s - turn.end_s) * 1000);
    const size_t from = static_cast<size_t>(seg.start_frame) * frame;
    const size_t to = std::min(input.size(), static_cast<size_t>(seg.end_frame) * frame);
    if (!turns.empty()) {
      const std::vector<float> silence(static_cast<size_t>(kSilenceBetweenTurnsS * kTtsRateHz), 0.0f);
      status = wav.append(silence);
    }
    // The speculation stands when the segment is its audio and then only silence (and the input did not end
    // inside the pause: then the segment is cut there).
    const bool early = spec && !input_ended && static_cast<int64_t>(seg.start_frame) == open_from;
    if (!early && status) status = drop_speculation(p, spec);
    if (status)
      status = run_turn(o, p, std::span<const float>(input).subspan(from, to - from),
                        early ? &*spec : nullptr, turn, wav);
    spec.reset();
    turns.push_back(std::move(turn));
  }
  sotto_vad_segmenter_destroy(segmenter);
  if (!status) return fail(status.message());
  if (turns.empty())
    return fail(cat("agent: ", o.in_path, ": no speech found (Silero VAD heard no segment)"));

  std::vector<double> v2v;
  for (const Turn& t : turns)
    if (t.first_sound_ms >= 0) v2v.push_back(t.first_sound_ms);
  const double input_s = static_cast<double>(input.size()) / 16000.0;
  if (o.json) {
    std::string out = "{\"turns\":[";
    for (size_t i = 0; i < turns.size(); ++i) out += cat(i ? "," : "", turn_json(o, turns[i]));
    out += cat("],\"median_ms\":", v2v.empty() ? std::string("null") : cat(std::lround(percentile(v2v, 0.5))),
               ",\"p90_ms\":", v2v.empty() ? std::string("null") : cat(std::lround(percentile(v2v, 0.9))),
               ",\"threads\":", o.threads, ",\"load_ms\":", std::lround(load_ms),
               ",\"warm_up_ms\":", std::lround(warm_up_ms), ",\"input_s\":", input_s,
               ",\"vad_ms\":", std::lround(vad_ms), ",\"output\":", json_quote(o.out_path),
               ",\"output_s\":", static_cast<double>(wav.samples()) / kTtsRateHz, "}\n");
    std::fwrite(out.data(), 1, out.size(), stdout);
  } else {
    std::printf(
        "%s: %.2f s of input, %zu turn(s); models loaded in %.0f ms, warmed up in %.0f ms, VAD %.0f ms "
        "(%.0fx real "
        "time)\n",
        o.in_path.c_str(), input_s, turns.size(), load_ms, warm_up_ms, vad_ms,
        vad_ms > 0 ? input_s * 1000 / vad_ms : 0);
    for (size_t i = 0; i < turns.size(); ++i) print_turn(i, turns[i]);
    if (!v2v.empty())
      std::printf("voice to voice: median %.0f ms, p90 %.0f ms\n", percentile(v2v, 0.5),
                  percentile(v2v, 0.9));
    std::printf("%s: %.2f s of the agent's voice (24 kHz)\n", o.out_path.c_str(),
                static_cast<double>(wav.samples()) / kTtsRateHz);
  }
  return kExitOk;
}

}  // namespace sotto::cli
