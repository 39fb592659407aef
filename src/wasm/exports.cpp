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

// The C API (api/sotto.h) is exported function by function under its own names by the link (cmake/wasm.cmake
// reads them from the header). Only creating a language model differs here: the handle runs on this module's
// pool (whose helpers are the Web Workers JS started), never on a pool of its own; so does creating a
// speech synthesis handle.
SOTTO_EXPORT(sotto_llm_create) SottoLlm* wasm_llm_create() {
  if (!pool) sotto_pool_create(1);
  return sotto_llm_create_on_pool(pool);
}
// Speech synthesis likewise runs on the engine's pool (web/tts-ops.js).
SOTTO_EXPORT(sotto_tts_create) SottoTts* wasm_tts_create() {
  if (!pool) sotto_pool_create(1);
  return sotto_tts_create_on_pool(pool);
}
// Speech recognition on this module's pool, when the JS that made this instance started helpers for it
// (web/asr.js with threads > 1, web/pool.js); sotto_asr_create keeps a one-thread pool of its own.
SOTTO_EXPORT(sotto_asr_create_shared) SottoAsr* wasm_asr_create_shared() {
  if (!pool) sotto_pool_create(1);
  return sotto_asr_create_on_pool(pool);
}

}  // extern "C"
