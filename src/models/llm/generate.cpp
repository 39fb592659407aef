#include "models/llm/generate.h"

#include <algorithm>
#include <cmath>
#include <optional>

#include "io/describe.h"

namespace sotto {

namespace {
// A plain loop: libc++ turns std::find over int32_t into wmemchr, which the wasm build (no libc) lacks.
bool contains(std::span<const int32_t> ids, int32_t id) {
  for (int32_t x : ids)
    if (x == id) return true;
  return false;
}
}  // namespace

std::string_view stop_reason_name(StopReason r) {
  switch (r) {
    case StopReason::Length:
      return "length";
    case StopReason::EndOfGeneration:
      return "eog";
    case StopReason::StopString:
      return "stop_string";
    case StopReason::ContextFull:
      return "context_full";
  }
  return "?";
}

std::vector<int32_t> end_of_generation_ids(const Tokenizer& tokenizer) {
  std::vector<int32_t> ids;
  if (tokenizer.vocab().eos != kNoToken) ids.push_back(tokenizer.vocab().eos);
  for (std::string_view name :
       {"<|im_end|>", "<|eot_id|>", "<|endoftext|>", "<|end_of_text|>", "<end_of_turn>"}) {
    const TokenId id = tokenizer.vocab().find(name);
    if (id != kNoToken && !contains(ids, id)) ids.push_back(id);
  }
  return ids;
}

Status CpuTokenModel::run(std::span<const int32_t> ids, bool) {
  SOTTO_ASSIGN(logits_, forward(*pool_, *weights_, *ctx_, ids));
  return {};
}

Result<TokenModel::Choice> CpuTokenModel::choose(Sampler& sampler, std::span<const int32_t> history,
                                                 int32_t* id) {
  if (logits_.empty()) return error("llm: no logits to choose from (nothing has been run)");
  *id = sampler.sample(logits_, history);
  return Choice::Ready;
}

Status Generation::begin(ThreadPool& pool, const LlamaWeights& weights, LlamaContext& ctx,
                         const Tokenizer* tokenizer, std::span<const int32_t> prompt_ids,
                         std::span<const int32_t> end_ids, const GenerateOptions& options) {
  own_model_.emplace(pool, weights, ctx);
  return begin(*own_model_, tokenizer, prompt_ids, end_ids, options);
}

Status Generation::begin(TokenModel& model, const Tokenizer* tokenizer, std::span<const int32_t> prompt_ids,
                         std::span<const int32_t> end_ids, const GenerateOptions& options) {
  done_ = true;
  if (own_model_ && &model != &*own_model_) own_model_.reset();  // a CPU begin() before this one
  if (prompt_ids.empty()) return error("llm: empty prompt (no tokens to start from)");
  const int free_positions = model.n_ctx() - model.n_past();
  if (static_cast<int64_t>(prompt_ids.size()) > free_positions)
    return error("llm: the prompt has ", prompt_ids.size(), " tokens but the context has room for only ",
                 free_positions, " more (", model.n_ctx(), " positions, ", model.n_past(), " used)");
  SOTTO_TRY(model.supports(options.sampling));
  model_ = &model;
  tokenizer_ = tokenizer;
  end_ids_.assign(end_ids.begin(), end_ids.end());
  options_ = options;
  sampler_.emplace(options.sampling);
  detokenizer_.reset();
  if (tokenizer) detokenizer_.emplace(*tokenizer, false);
  history_.assign(prompt_ids.begin(), prompt_ids.end());
  emitted_ = 0;
  longest_stop_ = 0;
  for (const std::string& s : options.stop_strings) longest_stop_ = std::max(longest_stop_, s.size());
  needs_forward_ = false;
  first_choice_ = true;
  result_ = GenerateResult();
  result_.n_prompt = static_cast<int>(prompt_ids.size());

  t_begin_ = now();
  const bool writes = options.max_new_tokens > 0;
  SOTTO_TRY(model.run(prompt_ids, writes));
  if (!writes) result_.prefill_ms = now() - t_begin_;
  done_ = false;
  if (!writes) {
    GenerationStep ignored;
    finish(StopReason::Length, ignored);
  }
  return {};
}

void Generation::finish(StopReason stop, GenerationStep& out) {
  result_.stop = stop;
  if (detokenizer_ && stop != StopReason::StopString) result_.text += detokenizer_->finish();
  if (result_.text.size() > emitted_) out.text += std::string_view(result_.text).substr(emitted_);
  emitted_ = result_.text.size();
  out.done = done_ = true;
}

Result<GenerationStep> Generation::step() {
  GenerationStep out;
  if (done_) {
    out.done = true;
    return out;
  }
  if (needs_forward_) {
    const int32_t previous = result_.unprocessed;
    t_run_ = now();
    if (Status s = model_->run(std::span<const int32_t>(&previous, 1), true); !s) {
      done_ = true;
      return error(s.message());
    }
    result_.unprocessed = kNoToken;
    needs_forward_ = false;
    ++result_.n_decoded;
  }
  int32_t id = kNoToken;
  auto choice = model_->choose(*sampler_, history_, &id);
  if (!choice) {
    done_ = true;
    return error(choice.message());
  }
  if (*choice == TokenModel::Choice::Pending) {
    out.pending = true;
    return out;
  }
  // Prefill ends when the first token is chosen; a decode step is its forward pass and its choice.
  if (first_choice_) {
    result_.prefill_ms = now() - t_begin_;
    first_choice_ = false;
  } else {
    result_.decode_ms += now() - t_run_;
  }
  result_.unprocessed = id;
  if (contains(end_ids_, id)) {
    finish(StopReason::EndOfGeneration, out);
    return out;
  }
  out.id = id;
  result_.ids.push_back(id);
  history_.push_back(id);
  if (detokenizer_) {
    std::string& text = result_.text;
    text += detokenizer_->push(id);
    size_t cut = std::string::npos;
    for (const std::string& s : options_.stop_strings)
      if (!s.empty()) cut = std::min(cut, text.find(s, emitted_ > s.size() ? emitted_ - s.size() : 0));
    if (cut != std::string::npos) {
      text.resize(cut);
      finish(StopReason::StopString, out);
      return out;
    }
    // Hold back the tail that could still become a stop string.
    const size_t safe = text.size() > longest_stop_ ? text.size() - longest_stop_ : 0;
    if (safe > emitted_) out.text = text.substr(emitted_, safe - emitted_);
    emitted_ = std::max(emitted_, safe);
  }
  // The last token needs no forward pass of its own; a full context stops the reply and says so.
  if (static_cast<int>(result_.ids.size()) >= options_.max_new_tokens)
    finish(StopReason::Length, out);
  else if (model_->n_past() >= model_->n_ctx())
    finish(StopReason::ContextFull, out);
  else
    needs_forward_ = true;
  return out;
}

Result<GenerateResult> generate(TokenModel& model, const Tokenizer* tokenizer,
                                std::span<const int32_t> prompt_ids, std::span<const int32_t> end_ids,
                                const GenerateOptions& options, TextSink* sink) {
  Generation generation;
  SOTTO_TRY(generation.begin(model, tokenizer, prompt_ids, end_ids, options));
  while (!generation.done()) {
    SOTTO_ASSIGN(GenerationStep step, generation.step());
    if (step.pending) return error("llm: generate() needs a model that answers synchronously");
    if (sink && !step.text.empty()) sink->on_text(step.text);
  }
  return generation.result();
}

Result<GenerateResult> generate(ThreadPool& pool, const LlamaWeights& weights, LlamaContext& ctx,
                                const Tokenizer* tokenizer, std::span<const int32_t> prompt_ids,
                                std::span<const int32_t> end_ids, const GenerateOptions& options,
                                TextSink* sink) {
  CpuTokenModel model(pool, weights, ctx);
  return generate(model, tokenizer, prompt_ids, end_ids, options, sink);
}

double decode_tokens_per_s(const GenerateResult& r) {
  return r.decode_ms > 0 ? 1000.0 * r.n_decoded / r.decode_ms : 0.0;
}

std::string top_logprobs_json(std::span<const float> logits, int top_n) {
  if (logits.empty() || top_n <= 0) return "[]";
  const float top = *std::max_element(logits.begin(), logits.end());
  double sum = 0.0;
  for (float l : logits) sum += std::exp(static_cast<double>(l - top));
  const double log_sum = std::log(sum);
  std::vector<int32_t> order(logits.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int32_t>(i);
  const size_t n = std::min(order.size(), static_cast<size_t>(top_n));
  std::partial_sort(
      order.begin(), order.begin() + static_cast<std::ptrdiff_t>(n), order.end(),
      [&](int32_t a, int32_t b) { return logits[static_cast<size_t>(a)] > logits[static_cast<size_t>(b)]; });
  std::string json = "[";
  for (size_t i = 0; i < n; ++i)
    json +=
        cat(i ? "," : "", "{\"id\":", order[i],
            ",\"logprob\":", static_cast<double>(logits[static_cast<size_t>(order[i])] - top) - log_sum, "}");
  return json + "]";
}

namespace {
std::string ids_json(std::span<const int32_t> ids) {
  std::string out = "[";
  for (size_t i = 0; i < ids.size(); ++i) out += cat(i ? "," : "", ids[i]);
  return out + "]";
}
}  // namespace

std::string generate_result_json(std::string_view prompt, std::span<const int32_t> prompt_ids,
                                 const GenerateResult& result, std::string_view top_logprobs) {
  return cat("{\"prompt\":", json_quote(prompt), ",\"prompt_ids\":", ids_json(prompt_ids),
             ",\"ids\":", ids_json(result.ids), ",\"text\":", json_quote(result.text), ",\"stop\":\"",
             stop_reason_name(result.stop), "\",\"prefill_ms\":", result.prefill_ms,
             ",\"decode_tokens_per_s\":", decode_tokens_per_s(result),
             ",\"top_logprobs\":", top_logprobs.empty() ? std::string_view("[]") : top_logprobs, "}");
}

}  // namespace sotto
