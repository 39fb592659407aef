// The GPU language model of api/sotto_llm_gpu.h: gpu::LlmGpu (the forward pass as a recorded plan) driven a
// token at a time with the CPU generation's rules (models/llm/generate.cpp Generation::step): greedy tokens,
// end-of-generation ids, the length limit, stop strings with the text held back that could still become one,
// and the last token never run through the model (carried to the next turn when the cache is kept).
//
// Each step waits on one 4-byte readback. In WebAssembly that read completes only after control has gone
// back to JS, so a step answers SOTTO_GPU_PENDING until then, and the JS caller awaits the device's pending
// work and calls again; natively the read waits and a step never pends.
#include "api/sotto_llm_gpu.h"

#include <algorithm>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "api/clock.h"
#include "gpu/device.h"
#include "gpu/llm_gpu.h"
#include "io/describe.h"
#include "io/gguf.h"
#include "models/llm/generate.h"
#include "models/llm/llama.h"
#include "text/tokenizer.h"

struct SottoLlmGpu {
  std::string last_error;
  std::string out;  // the buffer returned strings live in

  sotto::GgufFile gguf;
  sotto::LlamaWeights weights;
  std::optional<sotto::Tokenizer> tokenizer;
  std::vector<int32_t> end_ids;
  std::unique_ptr<sotto::gpu::Device> device;
  std::unique_ptr<sotto::gpu::LlmGpu> model;

  // The generation in progress (Generation's state, greedy only).
  bool generated = false;  // `result` holds a finished or running generation
  bool done = true;
  bool reading = false;    // a token's readback is in flight
  bool first_read = true;  // the read in flight is the prefill's
  int max_new_tokens = 0;
  std::vector<std::string> stop_strings;
  size_t longest_stop = 0;
  size_t emitted = 0;
  std::optional<sotto::StreamingDetokenizer> detokenizer;
  std::vector<int32_t> prompt_ids;
  sotto::GenerateResult result;
  double t_begin_ms = 0, t_submit_ms = 0;
};

namespace {

using sotto::cat;

int32_t fail(SottoLlmGpu* g, int32_t status, std::string message) {
  g->last_error = std::move(message);
  return status;
}

const char* give(SottoLlmGpu* g, std::string text, size_t* out_bytes) {
  g->out = std::move(text);
  if (out_bytes) *out_bytes = g->out.size();
  return g->out.c_str();
}

bool contains(const std::vector<int32_t>& ids, int32_t id) {
  for (int32_t x : ids)
    if (x == id) return true;
  return false;
}

// Ends the generation: the rest of the held-back text goes out with this step.
void finish(SottoLlmGpu* g, sotto::StopReason stop, std::string& text_out) {
  g->result.stop = stop;
  if (g->detokenizer && stop != sotto::StopReason::StopString) g->result.text += g->detokenizer->finish();
  if (g->result.text.size() > g->emitted) text_out += std::string_view(g->result.text).substr(g->emitted);
  g->emitted = g->result.text.size();
  g->done = true;
}

int32_t stop_code(sotto::StopReason r) {
  switch (r) {
    case sotto::StopReason::Length:
      return SOTTO_STOP_LENGTH;
    case sotto::StopReason::EndOfGeneration:
      return SOTTO_STOP_EOG;
    case sotto::StopReason::StopString:
      return SOTTO_STOP_STOP_STRING;
  }
  return SOTTO_STOP_NONE;
}

// Submits `token` (or, when negative, the GPU's own last argmax) and starts reading the next argmax.
sotto::Status submit_and_read(SottoLlmGpu* g, int32_t token) {
  SOTTO_TRY(g->model->submit(token));
  SOTTO_TRY(g->model->start_finish());
  g->reading = true;
  return {};
}

}  // namespace

extern "C" {

SottoLlmGpu* sotto_llm_gpu_create(void) {
  return new SottoLlmGpu();
}

void sotto_llm_gpu_destroy(SottoLlmGpu* gpu) {
  if (!gpu) return;
  gpu->model.reset();  // before the device it records on
  delete gpu;
}

const char* sotto_llm_gpu_last_error(const SottoLlmGpu* gpu) {
  return gpu ? gpu->last_error.c_str() : "llm: null handle";
}

int32_t sotto_llm_gpu_load(SottoLlmGpu* g, const uint8_t* bytes, size_t size, int32_t n_ctx) {
  if (!g) return SOTTO_ERROR_ARGUMENT;
  g->last_error.clear();
  if (g->model) return fail(g, SOTTO_ERROR_ARGUMENT, "llm: this handle already holds a model");
  if (!bytes && size) return fail(g, SOTTO_ERROR_ARGUMENT, "llm: no bytes given");
  auto gguf = sotto::parse_gguf({bytes, size});
  if (!gguf) return fail(g, SOTTO_ERROR_FILE, gguf.message());
  g->gguf = std::move(gguf).value();
  auto weights = sotto::load_llama(g->gguf);
  if (!weights) return fail(g, SOTTO_ERROR_FILE, weights.message());
  g->weights = std::move(weights).value();
  if (n_ctx < 0)
    n_ctx = static_cast<int32_t>(std::min<int64_t>(-static_cast<int64_t>(n_ctx), g->weights.hp.n_ctx_train));
  auto tokenizer = sotto::Tokenizer::from_gguf(g->gguf);
  if (tokenizer) {
    g->tokenizer.emplace(std::move(tokenizer).value());
    g->end_ids = sotto::end_of_generation_ids(*g->tokenizer);
  } else if (auto eos = g->gguf.get_u32("tokenizer.ggml.eos_token_id")) {
    g->end_ids.push_back(static_cast<int32_t>(*eos));
  }
  auto device = sotto::gpu::open_device();
  if (!device) return fail(g, SOTTO_ERROR_RUN, device.message());
  g->device = std::move(device).value();
  auto model = sotto::gpu::LlmGpu::create(*g->device, g->weights, n_ctx);
  if (!model) {
    g->device.reset();
    return fail(g, SOTTO_ERROR_RUN, model.message());
  }
  g->model = std::move(model).value();
  return SOTTO_OK;
}

int32_t sotto_llm_gpu_n_ctx(const SottoLlmGpu* g) {
  return g && g->model ? g->model->n_ctx() : 0;
}

const char* sotto_llm_gpu_info_json(SottoLlmGpu* g, size_t* out_bytes) {
  if (!g || !g->model) return nullptr;
  const sotto::gpu::AdapterInfo& info = g->device->info();
  return give(g,
              cat("{\"adapter\":", sotto::json_quote(info.description),
                  ",\"backend\":", sotto::json_quote(info.backend), ",\"dispatches_per_token\":",
                  g->model->dispatches_per_token(), ",\"n_ctx\":", g->model->n_ctx(), "}"),
              out_bytes);
}

int32_t sotto_llm_gpu_begin(SottoLlmGpu* g, const int32_t* ids, size_t n_ids, const SottoSampling* sampling,
                            const char* stops, size_t stops_bytes, int32_t keep_cache) {
  if (!g) return SOTTO_ERROR_ARGUMENT;
  g->last_error.clear();
  if (!g->model) return fail(g, SOTTO_ERROR_ARGUMENT, "llm: no model loaded on the GPU");
  if ((!ids && n_ids) || !sampling) return fail(g, SOTTO_ERROR_ARGUMENT, "llm: begin: null ids or sampling");
  if (!sampling->greedy)
    return fail(g, SOTTO_ERROR_ARGUMENT,
                "llm: the webgpu backend decodes greedily only (greedy / temperature 0)");
  // A generation cancelled while its read was in flight: that token was run (the cache holds it), its
  // argmax is dropped.
  g->reading = false;
  std::vector<int32_t> prompt;
  const int32_t carried = g->generated ? g->result.unprocessed : sotto::kNoToken;
  if (keep_cache && carried != sotto::kNoToken) prompt.push_back(carried);
  if (!keep_cache) g->model->reset();
  prompt.insert(prompt.end(), ids, ids + n_ids);
  g->generated = false;
  g->done = true;
  if (prompt.empty()) return fail(g, SOTTO_ERROR_RUN, "llm: empty prompt (no tokens to start from)");
  const int free_positions = g->model->n_ctx() - g->model->n_past();
  if (static_cast<int64_t>(prompt.size()) > free_positions)
    return fail(
        g, SOTTO_ERROR_RUN,
        cat("llm: the prompt has ", prompt.size(), " tokens but the context has room for only ",
            free_positions, " more (", g->model->n_ctx(), " positions, ", g->model->n_past(), " used)"));
  for (int32_t id : prompt)
    if (id < 0 || id >= g->weights.hp.n_vocab)
      return fail(g, SOTTO_ERROR_ARGUMENT,
                  cat("llm: token id ", id, " is outside the vocabulary (", g->weights.hp.n_vocab, ")"));

  g->stop_strings.clear();
  g->longest_stop = 0;
  for (size_t at = 0; stops && at < stops_bytes;) {
    const char* end = static_cast<const char*>(std::memchr(stops + at, '\0', stops_bytes - at));
    const size_t len = end ? static_cast<size_t>(end - (stops + at)) : stops_bytes - at;
    if (len) g->stop_strings.emplace_back(stops + at, len);
    g->longest_stop = std::max(g->longest_stop, len);
    at += len + 1;
  }
  g->max_new_tokens = sampling->max_new_tokens;
  g->prompt_ids.assign(ids, ids + n_ids);
  g->detokenizer.reset();
  if (g->tokenizer) g->detokenizer.emplace(*g->tokenizer, false);
  g->emitted = 0;
  g->result = sotto::GenerateResult();
  g->result.n_prompt = static_cast<int>(prompt.size());
  g->generated = true;
  g->first_read = true;
  g->t_begin_ms = sotto::now_ms();
  // The prompt through the same plan a token at a time; only the last one's argmax is read.
  for (size_t i = 0; i + 1 < prompt.size(); i++) {
    sotto::Status s = g->model->submit(prompt[i]);
    if (!s) return fail(g, SOTTO_ERROR_RUN, s.message());
  }
  sotto::Status s = submit_and_read(g, prompt.back());
  if (!s) return fail(g, SOTTO_ERROR_RUN, s.message());
  g->done = false;
  if (g->max_new_tokens <= 0) {
    std::string ignored;
    finish(g, sotto::StopReason::Length, ignored);
  }
  return SOTTO_OK;
}

int32_t sotto_llm_gpu_step(SottoLlmGpu* g, SottoStep* out) {
  if (!g) return SOTTO_ERROR_ARGUMENT;
  if (!out) return fail(g, SOTTO_ERROR_ARGUMENT, "llm: step: null output");
  g->last_error.clear();
  if (!g->generated) return fail(g, SOTTO_ERROR_ARGUMENT, "llm: step before begin");
  std::string text;
  int32_t written = -1;
  // A finished generation may still have its last read in flight (max_new_tokens 0): let it land first.
  if (g->reading) {
    int32_t id = -1;
    const sotto::gpu::DeviceStatus status = g->model->finish(&id);
    if (status == sotto::gpu::DeviceStatus::Pending) return SOTTO_GPU_PENDING;
    g->reading = false;
    if (status == sotto::gpu::DeviceStatus::Error) {
      g->done = true;
      return fail(g, SOTTO_ERROR_RUN, g->model->device().last_error());
    }
    const double now = sotto::now_ms();
    if (g->first_read) {
      g->result.prefill_ms = now - g->t_begin_ms;
      g->first_read = false;
    } else {
      g->result.decode_ms += now - g->t_submit_ms;
      ++g->result.n_decoded;
    }
    if (!g->done) {
      g->result.unprocessed = id;
      if (contains(g->end_ids, id)) {
        finish(g, sotto::StopReason::EndOfGeneration, text);
      } else {
        written = id;
        g->result.ids.push_back(id);
        bool stopped = false;
        if (g->detokenizer) {
          std::string& all = g->result.text;
          all += g->detokenizer->push(id);
          size_t cut = std::string::npos;
          for (const std::string& s : g->stop_strings)
            if (!s.empty())
              cut = std::min(cut, all.find(s, g->emitted > s.size() ? g->emitted - s.size() : 0));
          if (cut != std::string::npos) {
            all.resize(cut);
            finish(g, sotto::StopReason::StopString, text);
            stopped = true;
          } else {
            const size_t safe = all.size() > g->longest_stop ? all.size() - g->longest_stop : 0;
            if (safe > g->emitted) text = all.substr(g->emitted, safe - g->emitted);
            g->emitted = std::max(g->emitted, safe);
          }
        }
        if (!stopped && (static_cast<int>(g->result.ids.size()) >= g->max_new_tokens ||
                         g->model->n_past() >= g->model->n_ctx())) {
          finish(g, sotto::StopReason::Length, text);
        } else if (!stopped) {
          // The token just chosen is already in the GPU's token buffer: run it from there.
          g->t_submit_ms = sotto::now_ms();
          sotto::Status s = submit_and_read(g, -1);
          if (!s) {
            g->done = true;
            return fail(g, SOTTO_ERROR_RUN, s.message());
          }
          g->result.unprocessed = sotto::kNoToken;
        }
      }
    }
  }
  g->out = std::move(text);
  out->id = written;
  out->done = g->done ? 1 : 0;
  out->stop = g->done ? stop_code(g->result.stop) : SOTTO_STOP_NONE;
  out->text_bytes = static_cast<uint32_t>(g->out.size());
  out->text = g->out.c_str();
  return SOTTO_OK;
}

int32_t sotto_llm_gpu_reply_closed(const SottoLlmGpu* g) {
  return g && g->generated && g->done && g->result.stop == sotto::StopReason::EndOfGeneration;
}

int32_t sotto_llm_gpu_timings(const SottoLlmGpu* g, SottoTimings* out) {
  if (!g || !out) return SOTTO_ERROR_ARGUMENT;
  *out = SottoTimings{};
  if (g->model) out->n_past = g->model->n_past();
  if (!g->generated) return SOTTO_OK;
  out->n_prompt = g->result.n_prompt;
  out->n_generated = static_cast<int32_t>(g->result.ids.size());
  out->n_decoded = g->result.n_decoded;
  out->prefill_ms = g->result.prefill_ms;
  out->decode_ms = g->result.decode_ms;
  out->decode_tokens_per_s = sotto::decode_tokens_per_s(g->result);
  return SOTTO_OK;
}

int32_t sotto_llm_gpu_profile_step(SottoLlmGpu* g) {
  if (!g) return SOTTO_ERROR_ARGUMENT;
  g->last_error.clear();
  if (!g->model) return fail(g, SOTTO_ERROR_ARGUMENT, "llm: no model loaded on the GPU");
  if (g->reading) return fail(g, SOTTO_ERROR_ARGUMENT, "llm: profile while a step is pending");
  std::vector<std::pair<std::string, uint64_t>> per_dispatch_ns;
  sotto::Status s = g->model->time_step(&per_dispatch_ns);
  if (!s) return fail(g, SOTTO_ERROR_RUN, s.message());
  return SOTTO_OK;
}

const char* sotto_llm_gpu_plan_names_json(SottoLlmGpu* g, size_t* out_bytes) {
  if (!g || !g->model) return nullptr;
  std::string json = "[";
  for (const std::string& name : g->model->plan_names())
    json += cat(json.size() > 1 ? "," : "", sotto::json_quote(name));
  return give(g, json + "]", out_bytes);
}

const char* sotto_llm_gpu_result_json(SottoLlmGpu* g, const char* prompt, size_t prompt_bytes,
                                      size_t* out_bytes) {
  if (!g) return nullptr;
  if (!g->generated) return fail(g, SOTTO_ERROR_ARGUMENT, "llm: no generation to report"), nullptr;
  return give(g,
              sotto::generate_result_json(std::string_view(prompt ? prompt : "", prompt ? prompt_bytes : 0),
                                          g->prompt_ids, g->result, ""),
              out_bytes);
}

}  // extern "C"
