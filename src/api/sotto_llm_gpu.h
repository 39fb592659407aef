/* The language model on the GPU (WebGPU), in the shape of api/sotto.h's CPU functions so that the web engine
 * and the CLIs drive both alike:
 *
 *   SottoLlmGpu* g = sotto_llm_gpu_create();
 *   sotto_llm_gpu_load(g, bytes, size, -4096);          // opens the device, uploads the weights
 *   sotto_llm_gpu_begin(g, ids, n, &sampling, stops, stops_bytes, 0);   // greedy only
 *   for (;;) {
 *     int32_t s = sotto_llm_gpu_step(g, &step);
 *     if (s == SOTTO_GPU_PENDING) { return to JS; await the device; call again }   // WebAssembly only
 *     ...
 *   }
 *
 * Decoding is greedy (argmax on the GPU: the next token never leaves it except as the 4-byte answer). A step
 * reads the token the GPU chose; natively the read waits, in WebAssembly it answers SOTTO_GPU_PENDING until
 * JS has seen the readback complete. The bytes passed to load must outlive the handle (weights are uploaded
 * from them; the tokenizer reads them). Until merged into sotto.h, this is its own header. */
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "api/sotto.h"

#ifdef __cplusplus
extern "C" {
#endif

/* sotto_llm_gpu_step's answer while the token's readback is in flight (WebAssembly). */
enum { SOTTO_GPU_PENDING = 100 };

typedef struct SottoLlmGpu SottoLlmGpu;

SottoLlmGpu* sotto_llm_gpu_create(void);
void sotto_llm_gpu_destroy(SottoLlmGpu* gpu);
const char* sotto_llm_gpu_last_error(const SottoLlmGpu* gpu); /* "" when the last call succeeded */

/* Opens the platform's WebGPU device (gpu/device.h open_device), reads the GGUF and uploads its weights.
 * n_ctx as sotto_llm_load (< 0: min(-n_ctx, training context)). Errors: SOTTO_ERROR_FILE (not a model the
 * GPU path runs), SOTTO_ERROR_RUN (no device, upload failed). */
int32_t sotto_llm_gpu_load(SottoLlmGpu* gpu, const uint8_t* bytes, size_t size, int32_t n_ctx);
int32_t sotto_llm_gpu_n_ctx(const SottoLlmGpu* gpu);
/* {"adapter","backend","dispatches_per_token","n_ctx"}, one line. */
const char* sotto_llm_gpu_info_json(SottoLlmGpu* gpu, size_t* out_bytes);

/* As sotto_llm_begin; sampling must be greedy (greedy = 1). Submits the prompt's tokens. */
int32_t sotto_llm_gpu_begin(SottoLlmGpu* gpu, const int32_t* ids, size_t n_ids, const SottoSampling* sampling,
                            const char* stops, size_t stops_bytes, int32_t keep_cache);
/* As sotto_llm_step, or SOTTO_GPU_PENDING (nothing written to `out`: call again once the device is done). */
int32_t sotto_llm_gpu_step(SottoLlmGpu* gpu, SottoStep* out);
int32_t sotto_llm_gpu_reply_closed(const SottoLlmGpu* gpu);
int32_t sotto_llm_gpu_timings(const SottoLlmGpu* gpu, SottoTimings* out);
/* Runs one decode step of the plan with timestamp queries at the next position (it advances the context like
 * a token would): natively the per-dispatch times are then ready; in WebAssembly web/gpu.js collects them
 * (they resolve asynchronously). A device without timestamp queries just runs the step. */
int32_t sotto_llm_gpu_profile_step(SottoLlmGpu* gpu);
/* What each dispatch of the decode step is, in plan order: a JSON array of names ("attention", ...). */
const char* sotto_llm_gpu_plan_names_json(SottoLlmGpu* gpu, size_t* out_bytes);
/* The `sotto generate --json` object of the last generation (top_logprobs: []). */
const char* sotto_llm_gpu_result_json(SottoLlmGpu* gpu, const char* prompt, size_t prompt_bytes,
                                      size_t* out_bytes);

#ifdef __cplusplus
}
#endif
