// The C ABI that web/engine.js calls. Everything crosses as numbers: pointers into the shared memory and
// sizes. Strings go out as NUL-terminated UTF-8 allocated with malloc; JS reads them and calls sotto_free.
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>

#include "api/sotto.h"
#include "core/thread_pool.h"
#include "io/describe.h"
#include "wasm/selftest_wasm.h"

#define SOTTO_EXPORT(name) __attribute__((export_name(#name)))

namespace {

sotto::ThreadPool* pool = nullptr;

char* to_c_string(const std::string& s) {
  char* out = static_cast<char*>(malloc(s.size() + 1));
  if (!out) return nullptr;
  memcpy(out, s.data(), s.size());
  out[s.size()] = '\0';
  return out;
}

}  // namespace

extern "C" {

// File buffers and scratch: 64-byte aligned so SIMD loads of tensor data never straddle a cache line
// needlessly.
SOTTO_EXPORT(sotto_alloc) void* sotto_alloc(uint32_t bytes) {
  return aligned_alloc(64, bytes ? bytes : 1);
}
SOTTO_EXPORT(sotto_free) void sotto_free(void* p) {
  free(p);
}

// The thread pool: thread 0 (the engine worker) creates it, JS then starts helpers 1..n-1 which each call
// sotto_worker_main(ith) and stay inside it until sotto_pool_destroy().
SOTTO_EXPORT(sotto_pool_create) int sotto_pool_create(int n_threads) {
  if (pool) return 0;
  pool = new sotto::ThreadPool(n_threads, /*start_helpers=*/false);
  return pool->n_threads();
}
SOTTO_EXPORT(sotto_worker_main) void sotto_worker_main(int ith) {
  if (pool) pool->worker_loop(ith);
}
SOTTO_EXPORT(sotto_pool_destroy) void sotto_pool_destroy() {
  delete pool;
  pool = nullptr;
}
SOTTO_EXPORT(sotto_pool_threads) int sotto_pool_threads() {
  return pool ? pool->n_threads() : 0;
}

// Which SIMD flavour this module was built with: 1 = SIMD128, 2 = SIMD128 + relaxed SIMD.
SOTTO_EXPORT(sotto_simd_level) int sotto_simd_level() {
#if defined(__wasm_relaxed_simd__)
  return 2;
#else
  return 1;
#endif
}

// Runs the threaded SIMD kernel self-test on the pool; writes SelftestResult to `out`. Returns 1 on pass.
SOTTO_EXPORT(sotto_selftest)
int sotto_selftest(int n_rows, int n_cols, uint32_t seed, sotto::SelftestResult* out) {
  if (!pool) sotto_pool_create(1);
  *out = sotto::run_wasm_selftest(*pool, n_rows, n_cols, seed);
  return out->passed;
}

// Describes a model or audio file held in wasm memory; returns JSON (see describe_json) to free with
// sotto_free.
SOTTO_EXPORT(sotto_describe) char* sotto_describe(const uint8_t* bytes, uint32_t size) {
  sotto::Result<sotto::FileDescription> d = sotto::describe_file({bytes, size});
  if (!d.ok())
    return to_c_string(sotto::cat("{\"ok\":false,\"error\":", sotto::json_quote(d.message()), "}"));
  std::string json = sotto::describe_json(*d, "");
  return to_c_string(json.insert(1, "\"ok\":true,"));
}

// The language model (api/sotto.h), for web/llm.js through the engine worker. Each export forwards to the C
// API under the same name; only creation differs: the handle runs on this module's pool (whose helpers are
// the Web Workers JS started), never on a pool of its own.
SOTTO_EXPORT(sotto_llm_create) SottoLlm* wasm_llm_create() {
  if (!pool) sotto_pool_create(1);
  return sotto_llm_create_on_pool(pool);
}
SOTTO_EXPORT(sotto_llm_destroy) void wasm_llm_destroy(SottoLlm* llm) {
  sotto_llm_destroy(llm);
}
SOTTO_EXPORT(sotto_llm_last_error) const char* wasm_llm_last_error(const SottoLlm* llm) {
  return sotto_llm_last_error(llm);
}
SOTTO_EXPORT(sotto_llm_load)
int32_t wasm_llm_load(SottoLlm* llm, const uint8_t* bytes, uint32_t size, int32_t n_ctx) {
  return sotto_llm_load(llm, bytes, size, n_ctx);
}
SOTTO_EXPORT(sotto_llm_load_on)
int32_t wasm_llm_load_on(SottoLlm* llm, const uint8_t* bytes, uint32_t size, int32_t n_ctx, int32_t backend) {
  return sotto_llm_load_on(llm, bytes, size, n_ctx, backend);
}
SOTTO_EXPORT(sotto_llm_load_tokenizer)
int32_t wasm_llm_load_tokenizer(SottoLlm* llm, const uint8_t* bytes, uint32_t size) {
  return sotto_llm_load_tokenizer(llm, bytes, size);
}
SOTTO_EXPORT(sotto_llm_info_json) const char* wasm_llm_info_json(SottoLlm* llm, size_t* out_bytes) {
  return sotto_llm_info_json(llm, out_bytes);
}
SOTTO_EXPORT(sotto_llm_tokenize)
int32_t wasm_llm_tokenize(SottoLlm* llm, const char* text, uint32_t text_bytes, int32_t add_special,
                          int32_t parse_special, int32_t* out, int32_t capacity) {
  return sotto_llm_tokenize(llm, text, text_bytes, add_special, parse_special, out, capacity);
}
SOTTO_EXPORT(sotto_llm_detokenize)
const char* wasm_llm_detokenize(SottoLlm* llm, const int32_t* ids, uint32_t n_ids, int32_t remove_special,
                                int32_t render_special, size_t* out_bytes) {
  return sotto_llm_detokenize(llm, ids, n_ids, remove_special, render_special, out_bytes);
}
SOTTO_EXPORT(sotto_llm_format_turn)
const char* wasm_llm_format_turn(SottoLlm* llm, const char* system, uint32_t system_bytes, const char* user,
                                 uint32_t user_bytes, int32_t first_turn, int32_t reply_closed,
                                 size_t* out_bytes) {
  return sotto_llm_format_turn(llm, system, system_bytes, user, user_bytes, first_turn, reply_closed,
                               out_bytes);
}
SOTTO_EXPORT(sotto_llm_begin)
int32_t wasm_llm_begin(SottoLlm* llm, const int32_t* ids, uint32_t n_ids, const SottoSampling* sampling,
                       const char* stops, uint32_t stops_bytes, int32_t keep_cache) {
  return sotto_llm_begin(llm, ids, n_ids, sampling, stops, stops_bytes, keep_cache);
}
SOTTO_EXPORT(sotto_llm_step) int32_t wasm_llm_step(SottoLlm* llm, SottoStep* out) {
  return sotto_llm_step(llm, out);
}
SOTTO_EXPORT(sotto_llm_reply_closed) int32_t wasm_llm_reply_closed(const SottoLlm* llm) {
  return sotto_llm_reply_closed(llm);
}
SOTTO_EXPORT(sotto_llm_timings) int32_t wasm_llm_timings(const SottoLlm* llm, SottoTimings* out) {
  return sotto_llm_timings(llm, out);
}
SOTTO_EXPORT(sotto_llm_top_logprobs)
const char* wasm_llm_top_logprobs(SottoLlm* llm, const int32_t* ids, uint32_t n_ids, int32_t top_n,
                                  size_t* out_bytes) {
  return sotto_llm_top_logprobs(llm, ids, n_ids, top_n, out_bytes);
}
SOTTO_EXPORT(sotto_llm_result_json)
const char* wasm_llm_result_json(SottoLlm* llm, const char* prompt, uint32_t prompt_bytes,
                                 size_t* out_bytes) {
  return sotto_llm_result_json(llm, prompt, prompt_bytes, out_bytes);
}
SOTTO_EXPORT(sotto_sampling_defaults) void wasm_sampling_defaults(SottoSampling* out) {
  sotto_sampling_defaults(out);
}
SOTTO_EXPORT(sotto_stop_name) const char* wasm_stop_name(int32_t stop) {
  return sotto_stop_name(stop);
}

// Voice activity detection (api/sotto.h), for web/vad.js through the engine worker: the same functions under
// the same names. size_t crosses as u32 in wasm32, so the C signatures pass through unchanged.
SOTTO_EXPORT(sotto_vad_create) SottoVad* wasm_vad_create() {
  return sotto_vad_create();
}
SOTTO_EXPORT(sotto_vad_destroy) void wasm_vad_destroy(SottoVad* vad) {
  sotto_vad_destroy(vad);
}
SOTTO_EXPORT(sotto_vad_last_error) const char* wasm_vad_last_error(const SottoVad* vad) {
  return sotto_vad_last_error(vad);
}
SOTTO_EXPORT(sotto_vad_load)
int32_t wasm_vad_load(SottoVad* vad, const uint8_t* bytes, uint32_t size, int32_t sample_rate_hz) {
  return sotto_vad_load(vad, bytes, size, sample_rate_hz);
}
SOTTO_EXPORT(sotto_vad_frame_samples) int32_t wasm_vad_frame_samples(const SottoVad* vad) {
  return sotto_vad_frame_samples(vad);
}
SOTTO_EXPORT(sotto_vad_sample_rate) int32_t wasm_vad_sample_rate(const SottoVad* vad) {
  return sotto_vad_sample_rate(vad);
}
SOTTO_EXPORT(sotto_vad_reset) void wasm_vad_reset(SottoVad* vad) {
  sotto_vad_reset(vad);
}
SOTTO_EXPORT(sotto_vad_process)
float wasm_vad_process(SottoVad* vad, const float* frame, uint32_t n_samples) {
  return sotto_vad_process(vad, frame, n_samples);
}
// Frame counts fit an i32 here (a wasm32 signal holds < 2^30 samples); JS gets a number, not a BigInt.
SOTTO_EXPORT(sotto_vad_process_clip)
int32_t wasm_vad_process_clip(SottoVad* vad, const float* samples, uint32_t n_samples, float* probs,
                              uint32_t capacity) {
  return static_cast<int32_t>(sotto_vad_process_clip(vad, samples, n_samples, probs, capacity));
}
SOTTO_EXPORT(sotto_vad_frame_count) int32_t wasm_vad_frame_count(const SottoVad* vad, uint32_t n_samples) {
  return static_cast<int32_t>(sotto_vad_frame_count(vad, n_samples));
}
SOTTO_EXPORT(sotto_vad_decode_wav)
const float* wasm_vad_decode_wav(SottoVad* vad, const uint8_t* bytes, uint32_t size, size_t* out_samples) {
  return sotto_vad_decode_wav(vad, bytes, size, out_samples);
}
SOTTO_EXPORT(sotto_vad_resample)
const float* wasm_vad_resample(SottoVad* vad, const float* samples, uint32_t n_samples, int32_t in_rate_hz,
                               size_t* out_samples) {
  return sotto_vad_resample(vad, samples, n_samples, in_rate_hz, out_samples);
}
SOTTO_EXPORT(sotto_vad_clip_json)
const char* wasm_vad_clip_json(SottoVad* vad, const float* samples, uint32_t n_samples,
                               const SottoVadOptions* options, size_t* out_bytes) {
  return sotto_vad_clip_json(vad, samples, n_samples, options, out_bytes);
}
SOTTO_EXPORT(sotto_vad_segmenter_defaults) void wasm_vad_segmenter_defaults(SottoVadOptions* out) {
  sotto_vad_segmenter_defaults(out);
}
SOTTO_EXPORT(sotto_vad_segmenter_create)
SottoVadSegmenter* wasm_vad_segmenter_create(const SottoVadOptions* options) {
  return sotto_vad_segmenter_create(options);
}
SOTTO_EXPORT(sotto_vad_segmenter_destroy) void wasm_vad_segmenter_destroy(SottoVadSegmenter* segmenter) {
  sotto_vad_segmenter_destroy(segmenter);
}
SOTTO_EXPORT(sotto_vad_segmenter_push)
int32_t wasm_vad_segmenter_push(SottoVadSegmenter* segmenter, float probability, SottoVadSegment* segment) {
  return sotto_vad_segmenter_push(segmenter, probability, segment);
}
SOTTO_EXPORT(sotto_vad_segmenter_finish)
int32_t wasm_vad_segmenter_finish(SottoVadSegmenter* segmenter, SottoVadSegment* segment) {
  return sotto_vad_segmenter_finish(segmenter, segment);
}
SOTTO_EXPORT(sotto_vad_segmenter_reset) void wasm_vad_segmenter_reset(SottoVadSegmenter* segmenter) {
  sotto_vad_segmenter_reset(segmenter);
}
SOTTO_EXPORT(sotto_vad_segmenter_speaking)
int32_t wasm_vad_segmenter_speaking(const SottoVadSegmenter* segmenter) {
  return sotto_vad_segmenter_speaking(segmenter);
}

// The language model on the GPU: the same handle, loaded on the engine worker's WebGPU device (web/gpu.js).
// sotto_llm_step answers SOTTO_PENDING (100) while the token's readback is in flight; web/worker.js then
// awaits the device and calls it again.
SOTTO_EXPORT(sotto_llm_profile_step) int32_t wasm_llm_profile_step(SottoLlm* llm) {
  return sotto_llm_profile_step(llm);
}
SOTTO_EXPORT(sotto_llm_plan_names_json)
const char* wasm_llm_plan_names_json(SottoLlm* llm, size_t* out_bytes) {
  return sotto_llm_plan_names_json(llm, out_bytes);
}

}  // extern "C"
