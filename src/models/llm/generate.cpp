#include "models/llm/generate.h"

#include <algorithm>
#include <optional>

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

Result<GenerateResult> generate(ThreadPool& pool, const LlamaWeights& weights, LlamaContext& ctx,
                                const Tokenizer* tokenizer, std::span<const int32_t> prompt_ids,
                                std::span<const int32_t> end_ids, const GenerateOptions& options,
                                TextSink* sink) {
  if (prompt_ids.empty()) return error("llm: empty prompt (no tokens to start from)");
  const int free_positions = ctx.kv.n_ctx - ctx.kv.n_past;
  if (static_cast<int64_t>(prompt_ids.size()) > free_positions)
    return error("llm: the prompt has ", prompt_ids.size(), " tokens but the context has room for only ",
                 free_positions, " more (", ctx.kv.n_ctx, " positions, ", ctx.kv.n_past, " used)");
  auto now = [&] { return options.now_ms ? options.now_ms() : 0.0; };

  GenerateResult result;
  result.n_prompt = static_cast<int>(prompt_ids.size());
  std::vector<int32_t> history(prompt_ids.begin(), prompt_ids.end());
  Sampler sampler(options.sampling);

  const double t0 = now();
  SOTTO_ASSIGN(std::span<const float> logits, forward(pool, weights, ctx, prompt_ids));
  result.prefill_ms = now() - t0;

  std::optional<StreamingDetokenizer> detokenizer;
  if (tokenizer) detokenizer.emplace(*tokenizer, false);
  size_t emitted = 0;  // bytes of result.text already given to the sink (a stop string may be pending)
  size_t longest_stop = 0;
  for (const std::string& s : options.stop_strings) longest_stop = std::max(longest_stop, s.size());

  const double t_decode = now();
  for (int i = 0; i < options.max_new_tokens; ++i) {
    const int32_t id = sampler.sample(logits, history);
    result.unprocessed = id;
    if (contains(end_ids, id)) {
      result.stop = StopReason::EndOfGeneration;
      break;
    }
    result.ids.push_back(id);
    history.push_back(id);
    if (tokenizer) {
      result.text += detokenizer->push(id);
      size_t cut = std::string::npos;
      for (const std::string& s : options.stop_strings)
        if (!s.empty()) cut = std::min(cut, result.text.find(s, emitted > s.size() ? emitted - s.size() : 0));
      if (cut != std::string::npos) {
        result.text.resize(cut);
        result.stop = StopReason::StopString;
        break;
      }
      // Hold back the tail that could still become a stop string.
      const size_t safe = result.text.size() > longest_stop ? result.text.size() - longest_stop : 0;
      if (sink && safe > emitted)
        sink->on_text(std::string_view(result.text).substr(emitted, safe - emitted));
      emitted = std::max(emitted, safe);
    }
    if (i + 1 == options.max_new_tokens) break;  // the last token needs no forward pass of its own
    if (ctx.kv.n_past >= ctx.kv.n_ctx) break;    // context full: stop like a length limit
    SOTTO_ASSIGN(logits, forward(pool, weights, ctx, std::span<const int32_t>(&id, 1)));
    result.unprocessed = kNoToken;
    ++result.n_decoded;
  }
  result.decode_ms = now() - t_decode;
  if (tokenizer && result.stop != StopReason::StopString) result.text += detokenizer->finish();
  if (sink && result.text.size() > emitted) sink->on_text(std::string_view(result.text).substr(emitted));
  return result;
}

}  // namespace sotto
