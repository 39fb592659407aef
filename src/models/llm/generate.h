// Writing text: a prompt's tokens go through the model as one batch (prefill), then tokens are sampled one at
// a time (decode) until a limit, an end-of-generation token or a stop string. The KV cache in the
// LlamaContext is kept, so a chat's next turn only prefills its new tokens.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.h"
#include "core/thread_pool.h"
#include "models/llm/llama.h"
#include "models/llm/sampler.h"
#include "text/tokenizer.h"

namespace sotto {

struct GenerateOptions {
  int max_new_tokens = 64;
  SamplerParams sampling;
  std::vector<std::string> stop_strings;  // the text ends before the first one found
  double (*now_ms)() = nullptr;           // a clock for timings (the portable core has none of its own)
};

enum class StopReason : uint8_t { Length, EndOfGeneration, StopString };
std::string_view stop_reason_name(StopReason r);  // "length", "eog", "stop_string"

struct GenerateResult {
  std::vector<int32_t> ids;  // generated tokens (an end-of-generation token that stopped it is not included)
  std::string text;          // their text (without the stop string), when a tokenizer was given
  StopReason stop = StopReason::Length;
  int n_prompt = 0;
  double prefill_ms = 0.0;
  double decode_ms = 0.0;  // time of the n_decoded forward passes after the first token
  int n_decoded = 0;
  // The last sampled token when it has not been through the model (an end-of-generation token, or the final
  // token at the length limit): a chat's next turn must start with it so the cache stays the conversation.
  int32_t unprocessed = kNoToken;
};

// Receives text as it is written (complete UTF-8 characters only).
class TextSink {
 public:
  virtual ~TextSink() = default;
  virtual void on_text(std::string_view text) = 0;
};

// Token ids that end a turn: the tokenizer's EOS plus <|im_end|>, <|eot_id|>, <|endoftext|>, <|end_of_text|>
// and <end_of_turn> when the vocabulary has them (llama.cpp's end-of-generation set, by name).
std::vector<int32_t> end_of_generation_ids(const Tokenizer& tokenizer);

// One generation driven a token at a time from outside (the web engine streams each token to the page; the
// CLI prints it). begin() appends the prompt to the context (prefill); each step() samples one token, after
// first running the previous one through the model, so a token is handed out as soon as it is chosen and the
// last one never costs a forward pass it does not need. generate() below is this loop run to the end.
struct GenerationStep {
  int32_t id = kNoToken;  // the token written by this step (kNoToken when the step only ended the generation)
  std::string text;       // text now safe to show: complete UTF-8, no possible start of a stop string
  bool done = false;      // result().stop says why
};

class Generation {
 public:
  // Errors: an empty prompt, or one that does not fit the context's free positions. The pool, weights,
  // context and tokenizer (may be null: ids only) must outlive the generation.
  Status begin(ThreadPool& pool, const LlamaWeights& weights, LlamaContext& ctx, const Tokenizer* tokenizer,
               std::span<const int32_t> prompt_ids, std::span<const int32_t> end_ids,
               const GenerateOptions& options);
  Result<GenerationStep> step();  // after done(), returns {kNoToken, "", true}
  bool done() const { return done_; }
  const GenerateResult& result() const { return result_; }

 private:
  double now() const { return options_.now_ms ? options_.now_ms() : 0.0; }
  void finish(StopReason stop, GenerationStep& out);

  ThreadPool* pool_ = nullptr;
  const LlamaWeights* weights_ = nullptr;
  LlamaContext* ctx_ = nullptr;
  const Tokenizer* tokenizer_ = nullptr;
  std::vector<int32_t> end_ids_;
  GenerateOptions options_;
  std::optional<Sampler> sampler_;
  std::optional<StreamingDetokenizer> detokenizer_;  // when there is a tokenizer
  std::vector<int32_t> history_;                     // prompt and written tokens, for the repetition penalty
  std::span<const float> logits_;                    // of the last token run, valid until the next forward
  size_t emitted_ = 0;          // bytes of result_.text handed out (a stop string may be pending after them)
  size_t longest_stop_ = 0;     // bytes of the longest stop string: that much text is held back
  bool needs_forward_ = false;  // result_.unprocessed must go through the model before the next sample
  bool done_ = true;
  GenerateResult result_;
};

// Appends `prompt_ids` to the context and writes up to max_new_tokens tokens. `tokenizer` may be null (ids
// only; no stop strings). Errors: an empty prompt, or one that does not fit the context's free positions.
Result<GenerateResult> generate(ThreadPool& pool, const LlamaWeights& weights, LlamaContext& ctx,
                                const Tokenizer* tokenizer, std::span<const int32_t> prompt_ids,
                                std::span<const int32_t> end_ids, const GenerateOptions& options,
                                TextSink* sink = nullptr);

// Decode speed: forward passes after the first token per second of decode time (0 when none ran).
double decode_tokens_per_s(const GenerateResult& r);

// The first step's `top_n` most likely tokens as a JSON array [{"id":..,"logprob":..}], most likely first
// (for comparing with llama.cpp's probabilities).
std::string top_logprobs_json(std::span<const float> logits, int top_n);

// The object `sotto generate --json` prints, built in one place for the native CLI and the web engine:
//   {"prompt","prompt_ids","ids","text","stop","prefill_ms","decode_tokens_per_s","top_logprobs"}
std::string generate_result_json(std::string_view prompt, std::span<const int32_t> prompt_ids,
                                 const GenerateResult& result, std::string_view top_logprobs);

}  // namespace sotto
