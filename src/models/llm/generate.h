// Writing text: a prompt's tokens go through the model as one batch (prefill), then tokens are sampled one at
// a time (decode) until a limit, an end-of-generation token or a stop string. The KV cache in the
// LlamaContext is kept, so a chat's next turn only prefills its new tokens.
#pragma once

#include <cstdint>
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

// Appends `prompt_ids` to the context and writes up to max_new_tokens tokens. `tokenizer` may be null (ids
// only; no stop strings). Errors: an empty prompt, or one that does not fit the context's free positions.
Result<GenerateResult> generate(ThreadPool& pool, const LlamaWeights& weights, LlamaContext& ctx,
                                const Tokenizer* tokenizer, std::span<const int32_t> prompt_ids,
                                std::span<const int32_t> end_ids, const GenerateOptions& options,
                                TextSink* sink = nullptr);

}  // namespace sotto
