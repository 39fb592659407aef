/* sotto's C API: the one surface the CLI, the WebAssembly exports (src/wasm/exports.cpp) and the JS wrapper
 * (web/llm.js) use. Plain C: opaque handles, integer return codes (SOTTO_OK = 0), and a one-line message of
 * the last failure kept per handle (sotto_llm_last_error). Nothing here throws or aborts on bad input.
 *
 * Strings go in as (pointer, byte count) of UTF-8 and come out as pointers into a buffer the handle owns,
 * valid until the next call on that handle, with their length in *out_bytes (and a NUL after them).
 *
 *   SottoLlm* llm = sotto_llm_create(4);                     // 4 threads (natively: its own thread pool)
 *   sotto_llm_load(llm, gguf_bytes, gguf_size, 0);          // bytes stay the caller's; keep them alive
 *   n = sotto_llm_tokenize(llm, "Once upon", 9, 1, 0, ids, capacity);
 *   sotto_llm_begin(llm, ids, n, &sampling, NULL, 0, 0);     // prefill
 *   do sotto_llm_step(llm, &step); while (!step.done);        // one token per call
 *   sotto_llm_destroy(llm);
 *
 * The same handle runs the model on the GPU when loaded with sotto_llm_load_on(..., SOTTO_BACKEND_WEBGPU):
 * prompts through a batched plan, the next token chosen on the GPU (argmax, or the Sampler's chain with the
 * CPU's draws) and only its 4-byte id read back. In WebAssembly that read
 * completes only after control has gone back to JS, so sotto_llm_step then answers SOTTO_PENDING (nothing
 * written): JS awaits the device's pending work (web/gpu.js) and calls sotto_llm_step again.
 */
#ifndef SOTTO_API_SOTTO_H
#define SOTTO_API_SOTTO_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

enum SottoStatus {
  SOTTO_OK = 0,
  SOTTO_ERROR_ARGUMENT = 1, /* a null handle or buffer, a token id out of range, no model loaded */
  SOTTO_ERROR_FILE = 2,     /* the model file cannot be read as a supported GGUF model */
  SOTTO_ERROR_MEMORY = 3,   /* a buffer (KV cache) could not be allocated */
  SOTTO_ERROR_RUN = 4,      /* the prompt does not fit the context, or a forward pass failed */
  SOTTO_PENDING = 100,      /* sotto_llm_step: the GPU's token is not back yet (WebAssembly); call again */
};

/* Where a model's forward pass runs (sotto_llm_load_on). */
enum SottoBackend {
  SOTTO_BACKEND_CPU = 0,
  SOTTO_BACKEND_WEBGPU = 1, /* gpu/device.h open_device(): Dawn natively, the page's WebGPU in wasm */
};

/* Options of the GPU backend (sotto_llm_set_gpu_options), OR-ed together. */
enum SottoGpuOption {
  /* Attention sums the values in f32 a chunk of keys at a time instead of in f16 key by key as the CPU backend
   * (and llama.cpp's CPU) do: faster, the more so the longer the context, but the logits are no longer the CPU
   * backend's bit for bit, so greedy text can part from it at near-ties (models/llm/gpu/llm_gpu.h AttentionSum). */
  SOTTO_GPU_ATTENTION_F32 = 1,
  /* Decode through the rewritten fused plan (one dispatch per layer, gpu/fusion.h) whenever its load-time check
   * passes, rather than the default's rule (models/llm/gpu/llm_gpu.h FusionOptions: the hand-written layer
   * kernels on a GPU where the model has their shape, else the separate dispatches; nothing timed at load). */
  SOTTO_GPU_FUSED = 2,
};

/* Why a generation ended (SottoStep.stop); SOTTO_STOP_NONE while it goes on. */
enum SottoStop {
  SOTTO_STOP_NONE = 0,
  SOTTO_STOP_LENGTH = 1,       /* max_new_tokens written */
  SOTTO_STOP_EOG = 2,          /* the model wrote an end-of-generation token (not included in the output) */
  SOTTO_STOP_STOP_STRING = 3,  /* a stop string appeared (the text ends before it) */
  SOTTO_STOP_CONTEXT_FULL = 4, /* the context's last position was filled (the next turn makes room) */
};

typedef struct SottoLlm SottoLlm;

/* Sampling and length of one generation. Fixed layout (the web engine writes it from JS): 40 bytes. */
typedef struct SottoSampling {
  int32_t greedy;         /*  0: argmax, ignoring the rest (also when temperature <= 0) */
  float temperature;      /*  4 */
  int32_t top_k;          /*  8: <= 0 off */
  float top_p;            /* 12: >= 1 off */
  float min_p;            /* 16: <= 0 off */
  float repeat_penalty;   /* 20: 1 off */
  int32_t repeat_last_n;  /* 24 */
  int32_t max_new_tokens; /* 28 */
  uint64_t seed;          /* 32 */
} SottoSampling;

/* One step's output. `text` points into the handle's buffer (valid until the next call). */
typedef struct SottoStep {
  int32_t id;          /* the token written, or -1 when this step only ended the generation */
  int32_t done;        /* 1: the generation is over; `stop` says why */
  int32_t stop;        /* enum SottoStop */
  uint32_t text_bytes; /* bytes of complete UTF-8 text now safe to show (may be 0) */
  const char* text;
} SottoStep;

typedef struct SottoTimings {
  int32_t n_prompt;    /* tokens prefilled by the last begin (with a carried-over token) */
  int32_t n_generated; /* tokens written */
  int32_t n_decoded;   /* forward passes after the first token */
  int32_t n_past;      /* positions of the context in use */
  int32_t n_dropped;   /* tokens of old turns dropped from the context to make room (sotto_llm_begin) */
  double prefill_ms;
  double decode_ms;
  double decode_tokens_per_s;
} SottoTimings;

/* Greedy (temperature 0), 64 tokens; a temperature > 0 samples after llama.cpp's default filters, which these
 * defaults also hold: top-k 40, top-p 0.95, min-p 0.05, no penalty. */
void sotto_sampling_defaults(SottoSampling* out);
const char* sotto_stop_name(int32_t stop); /* "", "length", "eog", "stop_string", "context_full" */

/* n_threads: the CPU threads a forward pass uses (natively a pool of its own). Null only when out of memory. */
SottoLlm* sotto_llm_create(int32_t n_threads);
void sotto_llm_destroy(SottoLlm* llm);
/* The last failure on this handle, one line ("" when the last call succeeded). */
const char* sotto_llm_last_error(const SottoLlm* llm);

/* Reads a llama / qwen2 / qwen3 GGUF held in memory. The weights stay in `bytes` (never copied), so the
 * caller keeps them alive until sotto_llm_destroy. n_ctx > 0: that many positions; 0: the model's training
 * context; < 0: the training context but at most -n_ctx positions (the web's default, -4096). A file without
 * a usable tokenizer still loads (ids only); the text functions then fail with the tokenizer's error. */
int32_t sotto_llm_load(SottoLlm* llm, const uint8_t* bytes, size_t size, int32_t n_ctx);
/* As sotto_llm_load, on a chosen backend (enum SottoBackend). SOTTO_BACKEND_WEBGPU opens the platform's
 * WebGPU device and uploads the weights (the bytes must still outlive the handle: the tokenizer reads them);
 * it fails with SOTTO_ERROR_RUN when there is no device or the GPU path lacks something the model needs
 * (the message says what), and the handle stays empty: load it again on the CPU. */
int32_t sotto_llm_load_on(SottoLlm* llm, const uint8_t* bytes, size_t size, int32_t n_ctx, int32_t backend);
/* Options (enum SottoGpuOption) for the next sotto_llm_load_on(..., SOTTO_BACKEND_WEBGPU) on this handle;
 * 0 (the default): the CPU backend's arithmetic. Unknown bits are refused (SOTTO_ERROR_ARGUMENT). */
int32_t sotto_llm_set_gpu_options(SottoLlm* llm, int32_t options);
/* Only the tokenizer of a GGUF file (llama.cpp's vocab-only files have no weights): the text functions work,
 * generation does not. The bytes must stay alive as for sotto_llm_load. */
int32_t sotto_llm_load_tokenizer(SottoLlm* llm, const uint8_t* bytes, size_t size);
int32_t sotto_llm_n_ctx(const SottoLlm* llm);
int32_t sotto_llm_n_vocab(const SottoLlm* llm);
/* {"arch","n_ctx","n_ctx_train","n_vocab","n_layer","n_embd","chat_format","default_system","bos","eos",
 *  "end_ids":[...],"has_tokenizer","has_weights","backend":"cpu"|"webgpu"}, and on the GPU also
 *  "adapter" and "dispatches_per_token". */
const char* sotto_llm_info_json(SottoLlm* llm, size_t* out_bytes);

/* Text -> ids. Writes min(n, capacity) ids to `out` and returns n, the full count (call again with a larger
 * buffer when n > capacity), or -1 on failure. add_special: BOS/EOS as the file says; parse_special: text
 * such as "<|im_start|>" becomes that control token. */
int32_t sotto_llm_tokenize(SottoLlm* llm, const char* text, size_t text_bytes, int32_t add_special,
                           int32_t parse_special, int32_t* out, int32_t capacity);
/* Ids -> text (llama.cpp's llama_detokenize without space clean-up). Null on failure (an id out of range). */
const char* sotto_llm_detokenize(SottoLlm* llm, const int32_t* ids, size_t n_ids, int32_t remove_special,
                                 int32_t render_special, size_t* out_bytes);
/* The text of one new user turn in the model's chat format (chat_template.h): first_turn starts the
 * conversation (system prompt first when not empty; a null `system` is the model's default one); reply_closed
 * says the previous reply ended with its end-of-turn token. For showing: to run it, use sotto_llm_tokenize_turn
 * (tokenizing this text with parse_special = 1 would let typed text such as "<|im_start|>" become markup). */
const char* sotto_llm_format_turn(SottoLlm* llm, const char* system, size_t system_bytes, const char* user,
                                  size_t user_bytes, int32_t first_turn, int32_t reply_closed,
                                  size_t* out_bytes);
/* The ids of that turn (BOS first when first_turn and the file asks for it): only the chat format's own
 * markup becomes control tokens; the system prompt and the user's text are plain text, whatever they hold.
 * Returns n and writes min(n, capacity) ids, as sotto_llm_tokenize; -1 on failure. */
int32_t sotto_llm_tokenize_turn(SottoLlm* llm, const char* system, size_t system_bytes, const char* user,
                                size_t user_bytes, int32_t first_turn, int32_t reply_closed, int32_t* out,
                                int32_t capacity);

/* Starts a generation: runs the prompt through the model (prefill). keep_cache = 0 empties the context
 * first; 1 continues the conversation in it: the previous reply's last token, when it was sampled but never
 * run (an end-of-turn token, or the last token at a length limit), goes in front of `ids` so the cache stays
 * the conversation. stops: stop strings, each ending with a NUL, stops_bytes in all (0: none).
 *
 * A conversation outgrows the context: when the new turn and room for its reply (max_new_tokens, at most a
 * quarter of the context) do not fit, the oldest turns are dropped, whole, from the front of the cache — all
 * but what the conversation keeps (BOS and the system prompt, when the first turn came from
 * sotto_llm_tokenize_turn) — and the turns after them run again behind it; the kept part is not recomputed.
 * sotto_llm_timings' n_dropped counts the tokens dropped so far. Only a turn that does not fit even alone fails
 * (SOTTO_ERROR_RUN). A reply that fills the context stops with SOTTO_STOP_CONTEXT_FULL. */
int32_t sotto_llm_begin(SottoLlm* llm, const int32_t* ids, size_t n_ids, const SottoSampling* sampling,
                        const char* stops, size_t stops_bytes, int32_t keep_cache);
/* The tokens that end a generation (sotto_llm_begin's later calls): n_ids < 0 restores the model's own set
 * (EOS and the end-of-turn tokens its vocabulary has, the default); 0 leaves none, so only the length limit
 * and stop strings end it (llama.cpp's ignore_eos, for benchmarks); > 0 uses `ids`. */
int32_t sotto_llm_set_end_ids(SottoLlm* llm, const int32_t* ids, int32_t n_ids);
/* Rolls the context back to its first n_past positions (0 <= n_past <= sotto_llm_timings' n_past) and ends the
 * generation in progress: what ran after n_past is forgotten, and the next sotto_llm_begin with keep_cache = 1
 * continues from there. Rolled back to where a begin started (n_past as sotto_llm_timings gave just before
 * it), the context is what it would be had that begin never run, the previous reply's unrun last token
 * included: a turn prefilled speculatively and then not wanted is undone exactly. Fails (SOTTO_ERROR_ARGUMENT)
 * past the end, or into positions that the last begin moved when it dropped old turns to make room. Both
 * backends. */
int32_t sotto_llm_rollback(SottoLlm* llm, int32_t n_past);
/* Writes one token (after running the previous one through the model). After the end: done = 1, id = -1.
 * On the GPU in WebAssembly: SOTTO_PENDING while the token is on its way (see the top of this file). */
int32_t sotto_llm_step(SottoLlm* llm, SottoStep* out);
/* 1 when the last generation ended with an end-of-turn token (the next chat turn needs no closing). */
int32_t sotto_llm_reply_closed(const SottoLlm* llm);
int32_t sotto_llm_timings(const SottoLlm* llm, SottoTimings* out);
/* The first step's top_n log-probabilities for `ids` as JSON [{"id","logprob"}], kept for result_json;
 * empties the context (run it before sotto_llm_begin). CPU only. */
const char* sotto_llm_top_logprobs(SottoLlm* llm, const int32_t* ids, size_t n_ids, int32_t top_n,
                                   size_t* out_bytes);
/* The `sotto generate --json` object of the last generation (one line, no newline). */
const char* sotto_llm_result_json(SottoLlm* llm, const char* prompt, size_t prompt_bytes, size_t* out_bytes);
/* GPU only. Runs one decode step of the plan with timestamp queries at the next position (it advances the
 * context like a token would): natively the per-dispatch times are then ready; in WebAssembly web/gpu.js
 * collects them (they resolve asynchronously). A device without timestamp queries just runs the step. */
int32_t sotto_llm_profile_step(SottoLlm* llm);
/* GPU only. What each dispatch of the decode step is, in plan order: a JSON array of names ("attention"). */
const char* sotto_llm_plan_names_json(SottoLlm* llm, size_t* out_bytes);

/* ------------------------------------------------------------------ voice activity detection (Silero VAD)
 *
 *   SottoVad* vad = sotto_vad_create();
 *   sotto_vad_load(vad, onnx_bytes, onnx_size, 16000);       // v5 / v6 silero_vad.onnx; bytes may go after
 *   float p = sotto_vad_process(vad, frame, 512);            // one 32 ms frame -> speech probability
 *   SottoVadSegmenter* seg = sotto_vad_segmenter_create(&options);
 *   int32_t event = sotto_vad_segmenter_push(seg, p, &segment);  // SOTTO_VAD_SPEECH_START / _END / _MISFIRE
 *
 * Errors: SottoStatus codes (SOTTO_ERROR_FILE: not a Silero VAD ONNX file), message in sotto_vad_last_error.
 */
typedef struct SottoVad SottoVad;
typedef struct SottoVadSegmenter SottoVadSegmenter;

/* What a segmenter push reports (models/vad/segmenter.h). */
enum SottoVadEvent {
  SOTTO_VAD_NONE = 0,
  SOTTO_VAD_SPEECH_START = 1, /* the first speech frame while silent */
  SOTTO_VAD_SPEECH_END = 2,   /* a segment ended (long enough): the segment is written */
  SOTTO_VAD_MISFIRE = 3,      /* a segment ended with fewer than min_speech_ms of speech frames */
};

/* Segmenter options, @ricky0123/vad-web's names in brackets. Fixed layout (JS writes it): 40 bytes.
 * sotto_vad_segmenter_defaults gives Silero's thresholds 0.5 / 0.35 (vad-web 0.0.31 uses 0.3 / 0.25) with
 * vad-web's durations 1400 / 800 / 400 ms and frame_ms 32 (512 samples at 16 kHz). */
typedef struct SottoVadOptions {
  float positive_threshold; /*  0 [positiveSpeechThreshold] */
  float negative_threshold; /*  4 [negativeSpeechThreshold] */
  double redemption_ms;     /*  8 [redemptionMs] */
  double pre_speech_pad_ms; /* 16 [preSpeechPadMs] */
  double min_speech_ms;     /* 24 [minSpeechMs] */
  double frame_ms;          /* 32: the duration of one frame */
} SottoVadOptions;

/* A segment in frames: [start_frame, end_frame), pre-speech padding included. 16 bytes. */
typedef struct SottoVadSegment {
  int64_t start_frame;
  int64_t end_frame;
} SottoVadSegment;

/* Null only when out of memory. */
SottoVad* sotto_vad_create(void);
void sotto_vad_destroy(SottoVad* vad);
const char* sotto_vad_last_error(const SottoVad* vad); /* "" when the last call succeeded */

/* Reads a Silero VAD v5 / v6 ONNX file held in memory for sample_rate_hz 16000 (or 8000: the file's 8 kHz
 * branch, 256-sample frames). The weights are copied: the caller may free `bytes` afterwards. Resets the
 * stream. */
int32_t sotto_vad_load(SottoVad* vad, const uint8_t* bytes, size_t size, int32_t sample_rate_hz);
int32_t sotto_vad_frame_samples(const SottoVad* vad); /* 512 at 16 kHz, 0 when nothing is loaded */
int32_t sotto_vad_sample_rate(const SottoVad* vad);   /* Hz, 0 when nothing is loaded */
/* Back to the start of a stream (zero LSTM state and context). */
void sotto_vad_reset(SottoVad* vad);
/* The speech probability (0..1) of the next frame of the stream: n_samples should be frame_samples (fewer
 * are zero-padded, extra ignored); NaN / Inf samples are read as 0. -1 on error (no model, null frame). */
float sotto_vad_process(SottoVad* vad, const float* frame, size_t n_samples);
/* A whole signal from the current stream state on: frames of frame_samples, the last partial one zero-padded.
 * Writes min(frames, capacity) probabilities and returns the frame count, or -1 on error. Call with
 * capacity >= sotto_vad_frame_count(n_samples): the stream advances through all frames either way. */
int64_t sotto_vad_process_clip(SottoVad* vad, const float* samples, size_t n_samples, float* probs,
                               size_t capacity);
int64_t sotto_vad_frame_count(const SottoVad* vad, size_t n_samples);
/* Moves the loaded model to a backend (enum SottoBackend) and resets the stream. SOTTO_BACKEND_WEBGPU opens
 * the platform's WebGPU device (Dawn natively; in WebAssembly the engine worker's, which JS must have opened)
 * and copies the weights there; SOTTO_ERROR_RUN with the reason when there is none. In WebAssembly a GPU
 * stream reads each probability back synchronously: call process / process_clip through a
 * WebAssembly.promising export with sotto_gpu_blocking_reads(1) (web/vad-ops.js). */
int32_t sotto_vad_set_backend(SottoVad* vad, int32_t backend);
int32_t sotto_vad_backend(const SottoVad* vad); /* SOTTO_BACKEND_CPU or _WEBGPU */

/* Audio for the model: a WAV file in memory (any rate and channel count) decoded, averaged to mono and
 * resampled to the model's rate (what `sotto vad` does), or mono float samples at in_rate_hz resampled.
 * The samples live in a buffer the handle owns until the next call on it; their count goes to *out_samples.
 * Null on error. */
const float* sotto_vad_decode_wav(SottoVad* vad, const uint8_t* bytes, size_t size, size_t* out_samples);
/* What the last sotto_vad_decode_wav could not take at face value, one line ("" when nothing): a data chunk
 * declaring more bytes than the file holds (the frames present are read), NaN / infinite samples (read as 0,
 * before resampling spreads them). Valid until the next decode. */
const char* sotto_vad_notes(const SottoVad* vad);
const float* sotto_vad_resample(SottoVad* vad, const float* samples, size_t n_samples, int32_t in_rate_hz,
                                size_t* out_samples);
/* `sotto vad --json` of a signal at the model's rate, from a fresh stream (the handle's stream is reset
 * before and after): {"frame_ms","probs":[...],"segments":[{"start_s","end_s"}]}, one line, no newline.
 * options: null for the defaults (frame_ms is set from the model). */
const char* sotto_vad_clip_json(SottoVad* vad, const float* samples, size_t n_samples,
                                const SottoVadOptions* options, size_t* out_bytes);

void sotto_vad_segmenter_defaults(SottoVadOptions* out);
/* options: null for the defaults. Null only when out of memory. */
SottoVadSegmenter* sotto_vad_segmenter_create(const SottoVadOptions* options);
void sotto_vad_segmenter_destroy(SottoVadSegmenter* segmenter);
/* Feeds the next frame's probability; returns an SottoVadEvent. On SOTTO_VAD_SPEECH_END `segment` (may be
 * null) receives the segment. NaN counts as neither speech nor silence. */
int32_t sotto_vad_segmenter_push(SottoVadSegmenter* segmenter, float probability, SottoVadSegment* segment);
/* End of the stream: SPEECH_END (with the segment) or MISFIRE when a segment was open, else NONE. The
 * segmenter then starts a new stream at frame 0. */
int32_t sotto_vad_segmenter_finish(SottoVadSegmenter* segmenter, SottoVadSegment* segment);
void sotto_vad_segmenter_reset(SottoVadSegmenter* segmenter);
int32_t sotto_vad_segmenter_speaking(const SottoVadSegmenter* segmenter); /* 1 inside a segment */

/* ------------------------------------------------------------------ speech recognition (Moonshine)
 *
 *   SottoAsr* asr = sotto_asr_create(2);                      // threads (natively; 1 in WebAssembly)
 *   sotto_asr_load(asr, enc, enc_size, dec, dec_size, tok, tok_size);  // encoder_model.ort,
 *                                                              // decoder_model_merged.ort, tokenizer.bin
 *                                                              // (or the .onnx files, tokenizer.json)
 *   sotto_asr_load_vad(asr, onnx, onnx_size);                 // optional: Silero VAD, cuts audio over 20 s
 *   samples = sotto_asr_decode_wav(asr, wav, wav_size, &n);   // any WAV -> 16 kHz mono
 *   json = sotto_asr_transcribe_json(asr, samples, n, &bytes); // `sotto transcribe --json`'s object
 *
 * The file bytes may go after loading (the weights are copied). Errors: SottoStatus codes or null, the message
 * in sotto_asr_last_error.
 */
typedef struct SottoAsr SottoAsr;

SottoAsr* sotto_asr_create(int32_t n_threads);
void sotto_asr_destroy(SottoAsr* asr);
const char* sotto_asr_last_error(const SottoAsr* asr); /* "" when the last call succeeded */
int32_t sotto_asr_load(SottoAsr* asr, const uint8_t* encoder, size_t encoder_size, const uint8_t* decoder,
                       size_t decoder_size, const uint8_t* tokenizer, size_t tokenizer_size);
int32_t sotto_asr_load_vad(SottoAsr* asr, const uint8_t* onnx, size_t size);
/* The backend (enum SottoBackend) the next sotto_asr_load puts Moonshine on. SOTTO_BACKEND_WEBGPU opens the
 * platform's WebGPU device now (Dawn natively; in WebAssembly the one JS opened for this instance) and fails
 * with SOTTO_ERROR_RUN and the reason when there is none; Parakeet stays on the CPU (its load then fails). In
 * WebAssembly the GPU forward pass reads back synchronously: call sotto_asr_transcribe_json through a
 * WebAssembly.promising export with sotto_gpu_blocking_reads(1) (web/asr.js). */
int32_t sotto_asr_set_backend(SottoAsr* asr, int32_t backend);
/* Parakeet TDT instead of Moonshine: config.json, model.safetensors (transformers' ParakeetForTDT) and NeMo's
 * tokenizer.model or the transformers layout's tokenizer.json (size 0: token ids as text). transcribe_json then gives {"text", "tokens"}. */
int32_t sotto_asr_load_parakeet(SottoAsr* asr, const uint8_t* config_json, size_t config_size,
                                const uint8_t* safetensors, size_t safetensors_size, const uint8_t* tokenizer,
                                size_t tokenizer_size);
/* Any WAV decoded, mixed down and resampled to 16 kHz; the samples live in the handle until its next call. */
const float* sotto_asr_decode_wav(SottoAsr* asr, const uint8_t* bytes, size_t size, size_t* out_samples);
/* Transcribes 16 kHz samples (audio over 20 s cut into windows at pauses); one line of JSON, no newline. */
const char* sotto_asr_transcribe_json(SottoAsr* asr, const float* samples, size_t n_samples,
                                      size_t* out_bytes);

/* Speech synthesis: Kokoro-82M v1.0 (kokoro-v1.0.int8.onnx) with voices added by name, English text read by
 * our G2P (models/g2p-en-us.bin, g2p-en-gb.bin for the b* voices), 24 kHz mono float audio out.
 *
 *   SottoTts* tts = sotto_tts_create(2);                       // threads (natively; the engine's pool in wasm)
 *   sotto_tts_load(tts, model, model_size);                    // weights copied: the bytes may go after
 *   sotto_tts_add_voice(tts, "af_heart", 8, bin, bin_size);    // voices/af_heart.bin (510 x 256 float32)
 *   sotto_tts_load_g2p(tts, lexicon, lexicon_size);            // its language from the image
 *   json = sotto_tts_phonemize_json(tts, "af_heart", 8, text, text_size, &bytes);
 *                              // {"lang":"en-us","sentences":[{"text":..,"phonemes":..}]}: one call each
 *   audio = sotto_tts_speak(tts, "af_heart", 8, phonemes, phoneme_size, 1.0f, &n);  // `sotto speak`'s samples
 *
 * Failures return non-zero (or null) with one line in sotto_tts_last_error.
 */
typedef struct SottoTts SottoTts;

SottoTts* sotto_tts_create(int32_t n_threads);
void sotto_tts_destroy(SottoTts* tts);
const char* sotto_tts_last_error(const SottoTts* tts); /* "" when the last call succeeded */
/* The backend (enum SottoBackend) the next sotto_tts_load puts Kokoro on. SOTTO_BACKEND_WEBGPU opens the
 * platform's WebGPU device now (Dawn natively; in WebAssembly the one JS opened for this instance) and fails
 * with SOTTO_ERROR_RUN and the reason when there is none. In WebAssembly the GPU reads back synchronously:
 * call sotto_tts_load / _speak / _stream_* through WebAssembly.promising exports with
 * sotto_gpu_blocking_reads(1) (web/tts-ops.js). */
int32_t sotto_tts_set_backend(SottoTts* tts, int32_t backend);
int32_t sotto_tts_load(SottoTts* tts, const uint8_t* model, size_t model_size);
int32_t sotto_tts_add_voice(SottoTts* tts, const char* name, size_t name_bytes, const uint8_t* bytes,
                            size_t size);
int32_t sotto_tts_load_g2p(SottoTts* tts, const uint8_t* lexicon, size_t size);
/* Text -> its sentences and their phonemes in the voice's language; one line of JSON, no newline. */
const char* sotto_tts_phonemize_json(SottoTts* tts, const char* voice, size_t voice_bytes, const char* text,
                                     size_t text_bytes, size_t* out_bytes);
/* Phonemes (split at sentence ends into calls of at most 510 symbols) -> 24 kHz samples, valid until the next
 * call on the handle. speed in 0.25 .. 4. */
const float* sotto_tts_speak(SottoTts* tts, const char* voice, size_t voice_bytes, const char* phonemes,
                             size_t phoneme_bytes, float speed, size_t* out_samples);
/* How many Kokoro calls (pieces of at most 510 phonemes) the last sotto_tts_speak made. */
size_t sotto_tts_last_pieces(const SottoTts* tts);
/* The same audio in chunks as they are made (a voice agent's first sound): begin runs everything of the first
 * piece but its vocoder (the generator, most of the time); each next returns the next chunk, valid until the
 * next call: first_chunk_ms of audio (at least 12.5) after the piece's leading pause, then twice the last, piece
 * after piece. next returns null
 * with *out_samples 0 once all is given (sotto_tts_last_error "") or on failure (the reason there). Chunks
 * joined are sotto_tts_speak's audio up to the generator's per-window normalisation (models/tts/kokoro.h). */
int32_t sotto_tts_stream_begin(SottoTts* tts, const char* voice, size_t voice_bytes, const char* phonemes,
                               size_t phoneme_bytes, float speed, float first_chunk_ms);
const float* sotto_tts_stream_next(SottoTts* tts, size_t* out_samples);
/* 1 while sotto_tts_stream_next has chunks left to give (a chunk just given may be the last), else 0. */
int32_t sotto_tts_stream_more(const SottoTts* tts);
/* Samples of the piece the last chunk came from, all its chunks joined (a sentence is one piece: at most 510
 * phonemes), known from begin on; 0 when no stream is open. A player that stops mid-piece knows from it what
 * share of the piece was heard before the rest is made. */
size_t sotto_tts_stream_piece_samples(const SottoTts* tts);
/* Streams begun after this keep only the last keep_ms of each piece's leading pause (Kokoro opens a piece with
 * ~0.3 s of near-silence) and never vocode the rest: the first chunk comes sooner, and the chunks joined (and
 * sotto_tts_stream_piece_samples) are shorter by what was cut. Negative (the default): the whole pause. Not
 * bit for bit the whole piece's audio near the cut (the generator's context there is zero padding). */
int32_t sotto_tts_set_stream_lead(SottoTts* tts, float keep_ms);

#ifdef __cplusplus
} /* extern "C" */

namespace sotto {
class ThreadPool;
}
/* C++ only: a handle on a thread pool someone else runs (the web engine's pool, whose helpers are Web
 * Workers). The pool must outlive the handle. */
SottoLlm* sotto_llm_create_on_pool(sotto::ThreadPool* pool);
SottoTts* sotto_tts_create_on_pool(sotto::ThreadPool* pool);
SottoAsr* sotto_asr_create_on_pool(sotto::ThreadPool* pool);
#endif

#endif /* SOTTO_API_SOTTO_H */
