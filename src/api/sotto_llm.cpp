// The C API's language model (api/sotto.h): a handle owns the parsed GGUF views, the weights (pointing into
// the caller's bytes), the tokenizer, the model on its backend (a CPU context with its KV cache, or the GPU
// plan of models/llm/gpu/llm_gpu.h on a device) and the generation in progress. Both backends go through the same
// Generation (models/llm/generate.h), so the rules of writing text are one piece of code. Every entry point
// checks its arguments, turns errors into a status code and keeps the message on the handle.
#include "api/sotto.h"

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "api/clock.h"
#include "core/thread_pool.h"
#include "gpu/device.h"
#include "io/describe.h"
#include "io/gguf.h"
#include "models/llm/chat_template.h"
#include "models/llm/generate.h"
#include "models/llm/gpu/gpu_token_model.h"
#include "models/llm/gpu/llm_gpu.h"
#include "models/llm/llama.h"
#include "text/tokenizer.h"

// JS writes and reads these structs by offset (web/worker.js): their layout is part of the API.
static_assert(sizeof(SottoSampling) == 40 && offsetof(SottoSampling, seed) == 32);
static_assert(sizeof(SottoTimings) == 48 && offsetof(SottoTimings, n_dropped) == 16 &&
              offsetof(SottoTimings, prefill_ms) == 24 && offsetof(SottoTimings, decode_tokens_per_s) == 40);
static_assert(sizeof(SottoStep) == (sizeof(void*) == 4 ? 20 : 24) && offsetof(SottoStep, text_bytes) == 12);

struct SottoLlm {
  std::unique_ptr<sotto::ThreadPool> own_pool;
  sotto::ThreadPool* pool = nullptr;
  std::string last_error;
  std::string out;  // the buffer returned strings live in

  bool loaded = false;
  bool has_weights = false;  // false after sotto_llm_load_tokenizer
  sotto::GgufFile gguf;
  sotto::LlamaWeights weights;
  std::optional<sotto::Tokenizer> tokenizer;
  std::string tokenizer_error;
  std::vector<int32_t> end_ids;        // what ends a generation (sotto_llm_set_end_ids)
  std::vector<int32_t> model_end_ids;  // the model's own set
  int32_t backend = SOTTO_BACKEND_CPU;
  int32_t gpu_options = 0;                     // enum SottoGpuOption, for the next load on the GPU
  std::optional<sotto::LlamaContext> ctx;      // CPU
  std::unique_ptr<sotto::gpu::Device> device;  // GPU
  std::unique_ptr<sotto::gpu::LlmGpu> gpu;     // GPU: the recorded plan on `device`
  std::unique_ptr<sotto::TokenModel> model;    // the backend's forward pass, as Generation drives it

  sotto::Generation generation;
  bool generated = false;            // `generation` holds a finished or running generation
  std::vector<int32_t> prompt_ids;   // as given to the last begin (for result_json)
  std::string pending_top_logprobs;  // from sotto_llm_top_logprobs, taken by the next begin
  std::string result_top_logprobs;   // of the last generation

  // The conversation in the cache, for making room when it outgrows the context (sotto_llm_begin): the ids
  // run through the model in order (up to the last generation's start), where each turn begins, and how many
  // leading ids are kept whatever is dropped (BOS and the system prompt).
  std::vector<int32_t> cache_ids;
  std::vector<size_t> turn_starts;
  size_t n_keep = 0;
  std::optional<size_t> first_turn_keep;  // from sotto_llm_tokenize_turn(first_turn), taken by the next begin
  int32_t n_dropped = 0;

  // For sotto_llm_rollback: where the last begin started (the cache's positions then), the unrun token it put
  // in front of its prompt, whether it dropped old turns (positions before it then moved), and the token a
  // rollback hands back to the next begin (the carried token of the generation it rolled back to).
  int begin_at = 0;
  int32_t begin_carried = sotto::kNoToken;
  bool begin_dropped = false;
  int32_t carry = sotto::kNoToken;
};

namespace {

using sotto::cat;

int32_t fail(SottoLlm* llm, int32_t status, std::string message) {
  llm->last_error = std::move(message);
  return status;
}

const char* give(SottoLlm* llm, std::string text, size_t* out_bytes) {
  llm->out = std::move(text);
  if (out_bytes) *out_bytes = llm->out.size();
  return llm->out.c_str();
}

// Checks the handle for a call that needs a model (and a tokenizer when `text`); sets the error otherwise.
bool ready(SottoLlm* llm, bool text, bool weights = false) {
  if (!llm) return false;
  llm->last_error.clear();
  if (!llm->loaded) {
    llm->last_error = "llm: no model loaded";
    return false;
  }
  if (weights && !llm->has_weights) {
    llm->last_error = "llm: only a tokenizer was loaded (sotto_llm_load_tokenizer), not the model's weights";
    return false;
  }
  if (text && !llm->tokenizer) {
    llm->last_error = llm->tokenizer_error;
    return false;
  }
  return true;
}

int32_t stop_code(sotto::StopReason r) {
  switch (r) {
    case sotto::StopReason::Length:
      return SOTTO_STOP_LENGTH;
    case sotto::StopReason::EndOfGeneration:
      return SOTTO_STOP_EOG;
    case sotto::StopReason::StopString:
      return SOTTO_STOP_STOP_STRING;
    case sotto::StopReason::ContextFull:
      return SOTTO_STOP_CONTEXT_FULL;
  }
  return SOTTO_STOP_NONE;
}

std::string ids_json(const std::vector<int32_t>& ids) {
  std::string s = "[";
  for (size_t i = 0; i < ids.size(); ++i) s += cat(i ? "," : "", ids[i]);
  return s + "]";
}

// Brings the record of the conversation in the cache up to date for a new begin, and when `prompt` and room
// for its reply do not fit the context, drops the oldest whole turns after the kept prefix: the cache is cut
// back to the prefix and the turns after the dropped ones go in front of `prompt`, to run again at their new
// positions (recomputing them is exact; re-rotating their cached keys would not be, bit for bit). Returns
// where the new turn starts among the cache's ids once `prompt` has run.
// The last generation's written tokens into the conversation's record: it ran its prompt (already recorded)
// and every written token but one still unrun.
void record_written(SottoLlm& llm) {
  const sotto::GenerateResult& r = llm.generation.result();
  llm.cache_ids.insert(llm.cache_ids.end(), r.ids.begin(), r.ids.end());
  if (!r.ids.empty() && r.unprocessed == r.ids.back()) llm.cache_ids.pop_back();
}

size_t make_room(SottoLlm& llm, bool keep_cache, bool carried_in_front, std::vector<int32_t>& prompt,
                 int max_new_tokens) {
  std::vector<int32_t>& cache = llm.cache_ids;
  const size_t carried = keep_cache && carried_in_front;
  if (!keep_cache) {
    cache.clear();
    llm.turn_starts.clear();
    llm.n_dropped = 0;
    const bool bos_first = llm.tokenizer && !prompt.empty() && prompt[0] == llm.tokenizer->vocab().bos;
    llm.n_keep = llm.first_turn_keep.value_or(bos_first ? 1 : 0);
  } else if (llm.generated) {
    record_written(llm);
  }
  llm.first_turn_keep.reset();
  // A turn starts at its first control token (ChatML's next turn begins with the "\n" after <|im_end|>, which
  // belongs with the reply before it), or at its first token.
  size_t lead = carried;
  if (llm.tokenizer) {
    while (lead < prompt.size() &&
           llm.tokenizer->vocab().types[static_cast<size_t>(prompt[lead])] != sotto::TokenType::Control)
      ++lead;
    if (lead == prompt.size()) lead = carried;
  }
  if (!keep_cache) return lead;
  if (cache.size() != static_cast<size_t>(llm.model->n_past())) {  // not a conversation this handle ran
    cache.clear();
    llm.turn_starts.clear();
    return lead;
  }
  const size_t n_ctx = static_cast<size_t>(llm.model->n_ctx());
  const size_t room = static_cast<size_t>(std::clamp(max_new_tokens, 0, static_cast<int>(n_ctx / 4)));
  const size_t keep = std::min(llm.n_keep, cache.size());
  if (keep + prompt.size() > n_ctx) return cache.size() + lead;  // no dropping helps: begin says so
  size_t drop_to = keep;                                         // [keep, drop_to) is dropped
  auto fits = [&] { return cache.size() - (drop_to - keep) + prompt.size() + room <= n_ctx; };
  for (size_t start : llm.turn_starts) {
    if (fits()) break;
    if (start > drop_to && start < cache.size()) drop_to = start;
  }
  if (!fits()) drop_to = cache.size();
  if (drop_to == keep) return cache.size() + lead;
  const size_t dropped = drop_to - keep, tail = cache.size() - drop_to;
  prompt.insert(prompt.begin(), cache.begin() + static_cast<std::ptrdiff_t>(drop_to), cache.end());
  cache.resize(keep);
  llm.model->truncate(static_cast<int>(keep));
  std::vector<size_t> starts;
  for (size_t start : llm.turn_starts)
    if (start <= keep || start >= drop_to) starts.push_back(start <= keep ? start : start - dropped);
  llm.turn_starts = std::move(starts);
  llm.n_dropped += static_cast<int32_t>(dropped);
  return keep + tail + lead;
}

}  // namespace

SottoLlm* sotto_llm_create_on_pool(sotto::ThreadPool* pool) {
  auto* llm = new SottoLlm();
  llm->pool = pool;
  return llm;
}

extern "C" {

void sotto_sampling_defaults(SottoSampling* out) {
  if (!out) return;
  const sotto::SamplerParams d;
  *out = SottoSampling{d.greedy ? 1 : 0, d.temperature,   d.top_k, d.top_p, d.min_p,
                       d.repeat_penalty, d.repeat_last_n, 64,      d.seed};
}

const char* sotto_stop_name(int32_t stop) {
  switch (stop) {
    case SOTTO_STOP_LENGTH:
      return "length";
    case SOTTO_STOP_EOG:
      return "eog";
    case SOTTO_STOP_STOP_STRING:
      return "stop_string";
    case SOTTO_STOP_CONTEXT_FULL:
      return "context_full";
  }
  return "";
}

SottoLlm* sotto_llm_create(int32_t n_threads) {
#if defined(__wasm__)
  // Helpers are Web Workers that JS starts on the engine's pool (sotto_llm_create_on_pool); a pool of our own
  // here would wait for helpers nobody runs.
  n_threads = 1;
#endif
  auto* llm = new SottoLlm();
  llm->own_pool = std::make_unique<sotto::ThreadPool>(n_threads < 1 ? 1 : n_threads);
  llm->pool = llm->own_pool.get();
  return llm;
}

void sotto_llm_destroy(SottoLlm* llm) {
  delete llm;
}

const char* sotto_llm_last_error(const SottoLlm* llm) {
  return llm ? llm->last_error.c_str() : "llm: null handle";
}

int32_t sotto_llm_set_gpu_options(SottoLlm* llm, int32_t options) {
  if (!llm) return SOTTO_ERROR_ARGUMENT;
  llm->last_error.clear();
  if (options & ~(SOTTO_GPU_ATTENTION_F32 | SOTTO_GPU_FUSED))
    return fail(llm, SOTTO_ERROR_ARGUMENT,
                cat("llm: unknown GPU options ", options, " (1: f32 attention sum, 2: fused plan)"));
  llm->gpu_options = options;
  return SOTTO_OK;
}

int32_t sotto_llm_load(SottoLlm* llm, const uint8_t* bytes, size_t size, int32_t n_ctx) {
  return sotto_llm_load_on(llm, bytes, size, n_ctx, SOTTO_BACKEND_CPU);
}

int32_t sotto_llm_load_on(SottoLlm* llm, const uint8_t* bytes, size_t size, int32_t n_ctx, int32_t backend) {
  if (!llm) return SOTTO_ERROR_ARGUMENT;
  llm->last_error.clear();
  if (llm->loaded) return fail(llm, SOTTO_ERROR_ARGUMENT, "llm: this handle already holds a model");
  if (!bytes && size) return fail(llm, SOTTO_ERROR_ARGUMENT, "llm: no bytes given");
  if (backend != SOTTO_BACKEND_CPU && backend != SOTTO_BACKEND_WEBGPU)
    return fail(llm, SOTTO_ERROR_ARGUMENT, cat("llm: unknown backend ", backend, " (0: cpu, 1: webgpu)"));
  auto gguf = sotto::parse_gguf({bytes, size});
  if (!gguf) return fail(llm, SOTTO_ERROR_FILE, gguf.message());
  llm->gguf = std::move(gguf).value();
  auto weights = sotto::load_llama(llm->gguf);
  if (!weights) return fail(llm, SOTTO_ERROR_FILE, weights.message());
  llm->weights = std::move(weights).value();
  if (n_ctx < 0)
    n_ctx =
        static_cast<int32_t>(std::min<int64_t>(-static_cast<int64_t>(n_ctx), llm->weights.hp.n_ctx_train));
  if (backend == SOTTO_BACKEND_WEBGPU) {
    auto device = sotto::gpu::open_device();
    if (!device) return fail(llm, SOTTO_ERROR_RUN, device.message());
    sotto::gpu::FusionOptions fusion;
    if (llm->gpu_options & SOTTO_GPU_FUSED) fusion.mode = sotto::gpu::FusionOptions::Mode::On;
    const auto attention_sum = (llm->gpu_options & SOTTO_GPU_ATTENTION_F32) ? sotto::gpu::AttentionSum::F32
                                                                            : sotto::gpu::AttentionSum::F16;
    auto gpu = sotto::gpu::LlmGpu::create(**device, llm->weights, n_ctx, 0, fusion, attention_sum);
    if (!gpu) return fail(llm, SOTTO_ERROR_RUN, gpu.message());
    llm->device = std::move(device).value();
    llm->gpu = std::move(gpu).value();
    llm->model = std::make_unique<sotto::gpu::GpuTokenModel>(*llm->gpu);
  } else {
    auto ctx = sotto::make_llama_context(llm->weights, n_ctx);
    if (!ctx) return fail(llm, SOTTO_ERROR_MEMORY, ctx.message());
    llm->ctx.emplace(std::move(ctx).value());
    llm->model = std::make_unique<sotto::CpuTokenModel>(*llm->pool, llm->weights, *llm->ctx);
  }
  llm->backend = backend;
  llm->has_weights = true;
  auto tokenizer = sotto::Tokenizer::from_gguf(llm->gguf);
  if (tokenizer) {
    llm->tokenizer.emplace(std::move(tokenizer).value());
    llm->end_ids = sotto::end_of_generation_ids(*llm->tokenizer);
  } else {
    llm->tokenizer_error = tokenizer.message();
    if (auto eos = llm->gguf.get_u32("tokenizer.ggml.eos_token_id"))
      llm->end_ids.push_back(static_cast<int32_t>(*eos));
  }
  llm->model_end_ids = llm->end_ids;
  llm->loaded = true;
  return SOTTO_OK;
}

int32_t sotto_llm_set_end_ids(SottoLlm* llm, const int32_t* ids, int32_t n_ids) {
  if (!ready(llm, false)) return SOTTO_ERROR_ARGUMENT;
  if (n_ids < 0) {
    llm->end_ids = llm->model_end_ids;
    return SOTTO_OK;
  }
  if (!ids && n_ids) return fail(llm, SOTTO_ERROR_ARGUMENT, "llm: set_end_ids: null ids");
  for (int32_t i = 0; i < n_ids; ++i)
    if (ids[i] < 0 || ids[i] >= llm->weights.hp.n_vocab)
      return fail(
          llm, SOTTO_ERROR_ARGUMENT,
          cat("llm: end token ", ids[i], " is outside the vocabulary (", llm->weights.hp.n_vocab, ")"));
  llm->end_ids.assign(ids, ids + n_ids);
  return SOTTO_OK;
}

int32_t sotto_llm_load_tokenizer(SottoLlm* llm, const uint8_t* bytes, size_t size) {
  if (!llm) return SOTTO_ERROR_ARGUMENT;
  llm->last_error.clear();
  if (llm->loaded) return fail(llm, SOTTO_ERROR_ARGUMENT, "llm: this handle already holds a model");
  if (!bytes && size) return fail(llm, SOTTO_ERROR_ARGUMENT, "llm: no bytes given");
  auto gguf = sotto::parse_gguf({bytes, size});
  if (!gguf) return fail(llm, SOTTO_ERROR_FILE, gguf.message());
  llm->gguf = std::move(gguf).value();
  auto tokenizer = sotto::Tokenizer::from_gguf(llm->gguf);
  if (!tokenizer) return fail(llm, SOTTO_ERROR_FILE, tokenizer.message());
  llm->tokenizer.emplace(std::move(tokenizer).value());
  llm->end_ids = sotto::end_of_generation_ids(*llm->tokenizer);
  llm->model_end_ids = llm->end_ids;
  llm->loaded = true;
  return SOTTO_OK;
}

int32_t sotto_llm_n_ctx(const SottoLlm* llm) {
  return llm && llm->model ? llm->model->n_ctx() : 0;
}

int32_t sotto_llm_n_vocab(const SottoLlm* llm) {
  return llm && llm->loaded ? llm->weights.hp.n_vocab : 0;
}

const char* sotto_llm_info_json(SottoLlm* llm, size_t* out_bytes) {
  if (!ready(llm, false)) return nullptr;
  const sotto::LlamaHparams& hp = llm->weights.hp;
  const std::string chat_template = llm->tokenizer ? llm->tokenizer->vocab().chat_template : "";
  const int32_t bos = llm->tokenizer ? llm->tokenizer->vocab().bos : -1;
  const int32_t eos = llm->tokenizer ? llm->tokenizer->vocab().eos : -1;
  std::string backend = llm->backend == SOTTO_BACKEND_WEBGPU ? "\"webgpu\"" : "\"cpu\"";
  if (llm->gpu)
    backend += cat(",\"adapter\":", sotto::json_quote(llm->device->info().description),
                   ",\"gpu_backend\":", sotto::json_quote(llm->device->info().backend),
                   ",\"dispatches_per_token\":", llm->gpu->dispatches_per_token(), ",\"attention_sum\":",
                   llm->gpu->attention_sum() == sotto::gpu::AttentionSum::F32 ? "\"f32\"" : "\"f16\"",
                   ",\"fusion\":", sotto::json_quote(llm->gpu->fusion_status()));
  return give(llm,
              cat("{\"arch\":", sotto::json_quote(hp.arch), ",\"n_ctx\":", sotto_llm_n_ctx(llm),
                  ",\"n_ctx_train\":", hp.n_ctx_train, ",\"n_vocab\":", hp.n_vocab,
                  ",\"n_layer\":", hp.n_layer, ",\"n_embd\":", hp.n_embd, ",\"chat_format\":\"",
                  sotto::chat_format_name(sotto::detect_chat_format(chat_template)),
                  "\",\"default_system\":", sotto::json_quote(sotto::default_system_prompt(chat_template)),
                  ",\"bos\":", bos, ",\"eos\":", eos, ",\"end_ids\":", ids_json(llm->end_ids),
                  ",\"has_tokenizer\":", llm->tokenizer ? "true" : "false",
                  ",\"has_weights\":", llm->has_weights ? "true" : "false", ",\"backend\":", backend, "}"),
              out_bytes);
}

int32_t sotto_llm_tokenize(SottoLlm* llm, const char* text, size_t text_bytes, int32_t add_special,
                           int32_t parse_special, int32_t* out, int32_t capacity) {
  if (!ready(llm, true)) return -1;
  if ((!text && text_bytes) || (!out && capacity > 0)) {
    fail(llm, SOTTO_ERROR_ARGUMENT, "llm: tokenize: null buffer");
    return -1;
  }
  const std::vector<sotto::TokenId> ids = llm->tokenizer->tokenize(
      std::string_view(text ? text : "", text_bytes), add_special != 0, parse_special != 0);
  const size_t n = std::min(ids.size(), static_cast<size_t>(capacity > 0 ? capacity : 0));
  if (n) std::memcpy(out, ids.data(), n * sizeof(int32_t));
  return static_cast<int32_t>(ids.size());
}

const char* sotto_llm_detokenize(SottoLlm* llm, const int32_t* ids, size_t n_ids, int32_t remove_special,
                                 int32_t render_special, size_t* out_bytes) {
  if (!ready(llm, true)) return nullptr;
  if (!ids && n_ids) return fail(llm, SOTTO_ERROR_ARGUMENT, "llm: detokenize: null ids"), nullptr;
  for (size_t i = 0; i < n_ids; ++i)
    if (!llm->tokenizer->valid(ids[i]))
      return fail(llm, SOTTO_ERROR_ARGUMENT,
                  cat("llm: token ", i, " (", ids[i], ") is not in the vocabulary (",
                      llm->tokenizer->n_tokens(), " tokens)")),
             nullptr;
  return give(llm, llm->tokenizer->detokenize({ids, n_ids}, remove_special != 0, render_special != 0),
              out_bytes);
}

const char* sotto_llm_format_turn(SottoLlm* llm, const char* system, size_t system_bytes, const char* user,
                                  size_t user_bytes, int32_t first_turn, int32_t reply_closed,
                                  size_t* out_bytes) {
  if (!ready(llm, true)) return nullptr;
  const std::string& chat_template = llm->tokenizer->vocab().chat_template;
  const sotto::ChatFormat format = sotto::detect_chat_format(chat_template);
  const std::string system_text =
      system ? std::string(system, system_bytes) : sotto::default_system_prompt(chat_template);
  return give(
      llm,
      sotto::format_user_turn(format, system_text, std::string_view(user ? user : "", user ? user_bytes : 0),
                              first_turn != 0, reply_closed != 0),
      out_bytes);
}

int32_t sotto_llm_tokenize_turn(SottoLlm* llm, const char* system, size_t system_bytes, const char* user,
                                size_t user_bytes, int32_t first_turn, int32_t reply_closed, int32_t* out,
                                int32_t capacity) {
  if (!ready(llm, true)) return -1;
  if ((!user && user_bytes) || (!out && capacity > 0)) {
    fail(llm, SOTTO_ERROR_ARGUMENT, "llm: tokenize_turn: null buffer");
    return -1;
  }
  const std::string& chat_template = llm->tokenizer->vocab().chat_template;
  const std::string system_text =
      system ? std::string(system, system_bytes) : sotto::default_system_prompt(chat_template);
  const sotto::ChatText turn = sotto::chat_user_turn(
      sotto::detect_chat_format(chat_template), system_text,
      std::string_view(user ? user : "", user ? user_bytes : 0), first_turn != 0, reply_closed != 0);
  const std::vector<sotto::TokenId> ids =
      llm->tokenizer->tokenize_markup(turn.text, first_turn != 0, turn.plain);
  if (first_turn) {
    // What a full context keeps: BOS and the system turn (tokenized alone it gives the same ids: it ends
    // before a control token).
    std::vector<sotto::TextRange> system_plain;
    for (const sotto::TextRange& r : turn.plain)
      if (r.end <= turn.system_end) system_plain.push_back(r);
    llm->first_turn_keep =
        llm->tokenizer
            ->tokenize_markup(std::string_view(turn.text).substr(0, turn.system_end), true, system_plain)
            .size();
  }
  const size_t n = std::min(ids.size(), static_cast<size_t>(capacity > 0 ? capacity : 0));
  if (n) std::memcpy(out, ids.data(), n * sizeof(int32_t));
  return static_cast<int32_t>(ids.size());
}

int32_t sotto_llm_begin(SottoLlm* llm, const int32_t* ids, size_t n_ids, const SottoSampling* sampling,
                        const char* stops, size_t stops_bytes, int32_t keep_cache) {
  if (!ready(llm, false, true)) return SOTTO_ERROR_ARGUMENT;
  if ((!ids && n_ids) || !sampling)
    return fail(llm, SOTTO_ERROR_ARGUMENT, "llm: begin: null ids or sampling");
  sotto::GenerateOptions options;
  options.now_ms = sotto::now_ms;
  const sotto::SamplerParams params{sampling->greedy != 0,   sampling->temperature, sampling->top_k,
                                    sampling->top_p,         sampling->min_p,       sampling->repeat_penalty,
                                    sampling->repeat_last_n, sampling->seed};
  if (sotto::Status s = llm->model->supports(params); !s) return fail(llm, SOTTO_ERROR_ARGUMENT, s.message());
  options.max_new_tokens = sampling->max_new_tokens;
  options.sampling = params;
  for (size_t at = 0; stops && at < stops_bytes;) {
    const char* end = static_cast<const char*>(std::memchr(stops + at, '\0', stops_bytes - at));
    const size_t len = end ? static_cast<size_t>(end - (stops + at)) : stops_bytes - at;
    if (len) options.stop_strings.emplace_back(stops + at, len);
    at += len + 1;
  }
  for (size_t i = 0; i < n_ids; ++i)
    if (ids[i] < 0 || ids[i] >= llm->weights.hp.n_vocab)
      return fail(
          llm, SOTTO_ERROR_ARGUMENT,
          cat("llm: token id ", ids[i], " is outside the vocabulary (", llm->weights.hp.n_vocab, ")"));
  std::vector<int32_t> prompt;
  const int32_t carried = !keep_cache      ? sotto::kNoToken
                          : llm->generated ? llm->generation.result().unprocessed
                                           : llm->carry;
  llm->carry = sotto::kNoToken;
  if (carried != sotto::kNoToken) prompt.push_back(carried);
  if (!keep_cache) llm->model->clear();
  prompt.insert(prompt.end(), ids, ids + n_ids);
  const int32_t dropped_before = llm->n_dropped;
  llm->begin_at = llm->model->n_past();
  llm->begin_carried = carried;
  const size_t turn_start =
      make_room(*llm, keep_cache != 0, carried != sotto::kNoToken, prompt, options.max_new_tokens);
  llm->begin_dropped = llm->n_dropped != dropped_before;
  llm->prompt_ids.assign(ids, ids + n_ids);
  llm->result_top_logprobs = std::move(llm->pending_top_logprobs);
  llm->pending_top_logprobs.clear();
  const sotto::Tokenizer* tokenizer = llm->tokenizer ? &*llm->tokenizer : nullptr;
  llm->generated = false;
  sotto::Status status = llm->generation.begin(*llm->model, tokenizer, prompt, llm->end_ids, options);
  if (!status) {
    llm->cache_ids.clear();  // the cache no longer holds what they say
    llm->turn_starts.clear();
    return fail(llm, SOTTO_ERROR_RUN, status.message());
  }
  llm->cache_ids.insert(llm->cache_ids.end(), prompt.begin(), prompt.end());
  llm->turn_starts.push_back(turn_start);
  llm->generated = true;
  return SOTTO_OK;
}

int32_t sotto_llm_rollback(SottoLlm* llm, int32_t n_past) {
  if (!ready(llm, false, true)) return SOTTO_ERROR_ARGUMENT;
  const int now = llm->model->n_past();
  if (n_past < 0 || n_past > now)
    return fail(llm, SOTTO_ERROR_ARGUMENT,
                cat("llm: rollback to position ", n_past, ": the cache holds ", now, " positions"));
  if (llm->begin_dropped && n_past > static_cast<int>(llm->n_keep) && n_past <= llm->begin_at)
    return fail(
        llm, SOTTO_ERROR_ARGUMENT,
        cat("llm: rollback to position ", n_past,
            ": the last begin dropped old turns to make room, so the positions before it moved (begin "
            "again without the cache)"));
  // The record of the conversation takes in the generation's written tokens (all but the one still unrun), as
  // the next begin would, and the generation is over: what follows n_past is gone.
  int32_t unrun = sotto::kNoToken;
  if (llm->generated) {
    record_written(*llm);
    unrun = llm->generation.result().unprocessed;
    llm->generated = false;
  }
  // Back to where a begin started: that begin's carried token goes in front of the next one again, so the
  // cache becomes what it would have been had that begin never run. Back to now: the generation's own.
  if (n_past == now && llm->cache_ids.size() == static_cast<size_t>(now)) {
    if (unrun != sotto::kNoToken) llm->carry = unrun;
  } else {
    llm->carry = n_past == llm->begin_at ? llm->begin_carried : sotto::kNoToken;
  }
  if (llm->cache_ids.size() == static_cast<size_t>(now)) {
    llm->cache_ids.resize(static_cast<size_t>(n_past));
    std::erase_if(llm->turn_starts, [&](size_t start) { return start >= static_cast<size_t>(n_past); });
  } else {  // not a conversation this handle ran: the next begin with the cache starts no record of it
    llm->cache_ids.clear();
    llm->turn_starts.clear();
  }
  llm->begin_dropped = false;
  llm->model->truncate(n_past);
  return SOTTO_OK;
}

int32_t sotto_llm_step(SottoLlm* llm, SottoStep* out) {
  if (!ready(llm, false)) return SOTTO_ERROR_ARGUMENT;
  if (!out) return fail(llm, SOTTO_ERROR_ARGUMENT, "llm: step: null output");
  *out = SottoStep{-1, 1, SOTTO_STOP_NONE, 0, ""};
  if (!llm->generated) return fail(llm, SOTTO_ERROR_ARGUMENT, "llm: step before begin");
  auto step = llm->generation.step();
  if (!step) return fail(llm, SOTTO_ERROR_RUN, step.message());
  if (step->pending) return SOTTO_PENDING;
  llm->out = std::move(step->text);
  out->id = step->id;
  out->done = step->done ? 1 : 0;
  out->stop = step->done ? stop_code(llm->generation.result().stop) : SOTTO_STOP_NONE;
  out->text_bytes = static_cast<uint32_t>(llm->out.size());
  out->text = llm->out.c_str();
  return SOTTO_OK;
}

int32_t sotto_llm_reply_closed(const SottoLlm* llm) {
  return llm && llm->generated && llm->generation.done() &&
         llm->generation.result().stop == sotto::StopReason::EndOfGeneration;
}

int32_t sotto_llm_timings(const SottoLlm* llm, SottoTimings* out) {
  if (!llm || !out) return SOTTO_ERROR_ARGUMENT;
  *out = SottoTimings{};
  if (llm->model) out->n_past = llm->model->n_past();
  out->n_dropped = llm->n_dropped;
  if (!llm->generated) return SOTTO_OK;
  const sotto::GenerateResult& r = llm->generation.result();
  out->n_prompt = r.n_prompt;
  out->n_generated = static_cast<int32_t>(r.ids.size());
  out->n_decoded = r.n_decoded;
  out->prefill_ms = r.prefill_ms;
  out->decode_ms = r.decode_ms;
  out->decode_tokens_per_s = sotto::decode_tokens_per_s(r);
  return SOTTO_OK;
}

const char* sotto_llm_top_logprobs(SottoLlm* llm, const int32_t* ids, size_t n_ids, int32_t top_n,
                                   size_t* out_bytes) {
  if (!ready(llm, false, true)) return nullptr;
  if (!ids && n_ids) return fail(llm, SOTTO_ERROR_ARGUMENT, "llm: top_logprobs: null ids"), nullptr;
  if (!llm->ctx)
    return fail(llm, SOTTO_ERROR_ARGUMENT, "llm: top logprobs are not available on the webgpu backend"),
           nullptr;
  llm->ctx->kv.clear();
  llm->cache_ids.clear();
  llm->turn_starts.clear();
  llm->generated = false;
  llm->carry = sotto::kNoToken;
  auto logits = sotto::forward(*llm->pool, llm->weights, *llm->ctx, {ids, n_ids});
  if (!logits) return fail(llm, SOTTO_ERROR_RUN, logits.message()), nullptr;
  llm->pending_top_logprobs = sotto::top_logprobs_json(*logits, top_n);
  llm->ctx->kv.clear();
  return give(llm, llm->pending_top_logprobs, out_bytes);
}

const char* sotto_llm_result_json(SottoLlm* llm, const char* prompt, size_t prompt_bytes, size_t* out_bytes) {
  if (!ready(llm, false)) return nullptr;
  if (!llm->generated) return fail(llm, SOTTO_ERROR_ARGUMENT, "llm: no generation to report"), nullptr;
  return give(
      llm,
      sotto::generate_result_json(std::string_view(prompt ? prompt : "", prompt ? prompt_bytes : 0),
                                  llm->prompt_ids, llm->generation.result(), llm->result_top_logprobs),
      out_bytes);
}

int32_t sotto_llm_profile_step(SottoLlm* llm) {
  if (!ready(llm, false, true)) return SOTTO_ERROR_ARGUMENT;
  if (!llm->gpu) return fail(llm, SOTTO_ERROR_ARGUMENT, "llm: profile_step needs the webgpu backend");
  std::vector<std::pair<std::string, uint64_t>> per_dispatch_ns;
  sotto::Status s = llm->gpu->time_step(&per_dispatch_ns);
  if (!s) return fail(llm, SOTTO_ERROR_RUN, s.message());
  return SOTTO_OK;
}

const char* sotto_llm_plan_names_json(SottoLlm* llm, size_t* out_bytes) {
  if (!ready(llm, false, true)) return nullptr;
  if (!llm->gpu) return fail(llm, SOTTO_ERROR_ARGUMENT, "llm: plan names need the webgpu backend"), nullptr;
  std::string json = "[";
  for (const std::string& name : llm->gpu->plan_names())
    json += cat(json.size() > 1 ? "," : "", sotto::json_quote(name));
  return give(llm, json + "]", out_bytes);
}

}  // extern "C"
