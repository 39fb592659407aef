// Writing text: a prompt's tokens go through the model as one batch (prefill), then tokens are sampled one at
// a time (decode) until a limit, an end-of-generation token or a stop string. The KV cache in the
// LlamaContext is kept, so a chat's next turn only prefills its new tokens.
#pragma once

#include <algorithm>
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

// ContextFull: the context's last position was filled before max_new_tokens (a chat's next turn makes room:
// api/sotto.h sotto_llm_begin).
enum class StopReason : uint8_t { Length, EndOfGeneration, StopString, ContextFull };
std::string_view stop_reason_name(StopReason r);  // "length", "eog", "stop_string", "context_full"

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

// The network as the generation loop sees it: tokens go in at the next positions, and the token after them
// is chosen either on the CPU from the logits (by the Sampler) or by the model itself (the GPU plan's argmax,
// read back as 4 bytes). In WebAssembly a GPU read completes only after control has gone back to JS, so a
// choice can be Pending: the caller returns to JS, awaits the device, and asks again.
class TokenModel {
 public:
  enum class Choice : uint8_t { Ready, Pending };
  virtual ~TokenModel() = default;
  virtual int n_past() const = 0;
  virtual int n_ctx() const = 0;
  virtual void clear() = 0;  // forget the cache (a new conversation)
  // Keep only the first n_past positions (n_past <= n_past()): a chat whose context is full drops its oldest
  // turns and runs the rest again after the part it keeps.
  virtual void truncate(int n_past) = 0;
  // An error when the model cannot choose tokens this way (the GPU plan picks the argmax only).
  virtual Status supports(const SamplerParams& params) const = 0;
  // Runs `ids` at the next positions; with `choose_next`, starts choosing the token that follows them.
  virtual Status run(std::span<const int32_t> ids, bool choose_next) = 0;
  // The token after the last run: drawn by `sampler` from the logits (`history`: prompt and written tokens,
  // for the repetition penalty), or the model's own choice once it has arrived.
  virtual Result<Choice> choose(Sampler& sampler, std::span<const int32_t> history, int32_t* id) = 0;
};

// The CPU forward pass (models/llm/llama.h) over one context: logits on the CPU, sampled there.
class CpuTokenModel final : public TokenModel {
 public:
  CpuTokenModel(ThreadPool& pool, const LlamaWeights& weights, LlamaContext& ctx)
      : pool_(&pool), weights_(&weights), ctx_(&ctx) {}
  int n_past() const override { return ctx_->kv.n_past; }
  int n_ctx() const override { return ctx_->kv.n_ctx; }
  void clear() override { ctx_->kv.clear(); }
  void truncate(int n_past) override { ctx_->kv.n_past = std::min(ctx_->kv.n_past, std::max(n_past, 0)); }
  Status supports(const SamplerParams&) const override { return {}; }
  Status run(std::span<const int32_t> ids, bool choose_next) override;
  Result<Choice> choose(Sampler& sampler, std::span<const int32_t> history, int32_t* id) override;
  std::span<const float> logits() const { return logits_; }  // of the last token run

 private:
  ThreadPool* pool_;
  const LlamaWeights* weights_;
  LlamaContext* ctx_;
  std::span<const float> logits_;  // valid until the next forward
};

// One generation driven a token at a time from outside (the web engine streams each token to the page; the
// CLI prints it). begin() appends the prompt to the context (prefill); each step() chooses one token, after
// first running the previous one through the model, so a token is handed out as soon as it is chosen and the
// last one never costs a forward pass it does not need. generate() below is this loop run to the end. The
// rules (end-of-generation ids, the length limit, stop strings, the carried last token) are the same for
// every backend: only the TokenModel differs.
struct GenerationStep {
  int32_t id = kNoToken;  // the token written by this step (kNoToken when the step only ended the generation)
  std::string text;       // text now safe to show: complete UTF-8, no possible start of a stop string
  bool done = false;      // result().stop says why
  bool pending = false;   // the model's choice has not arrived yet (GPU in WebAssembly): call step() again
};

class Generation {
 public:
  // Errors: an empty prompt, one that does not fit the context's free positions, or sampling the model
  // cannot do. The model and tokenizer (may be null: ids only) must outlive the generation.
  Status begin(TokenModel& model, const Tokenizer* tokenizer, std::span<const int32_t> prompt_ids,
               std::span<const int32_t> end_ids, const GenerateOptions& options);
  // The CPU forward pass over `ctx` (pool, weights and ctx must outlive the generation).
  Status begin(ThreadPool& pool, const LlamaWeights& weights, LlamaContext& ctx, const Tokenizer* tokenizer,
               std::span<const int32_t> prompt_ids, std::span<const int32_t> end_ids,
               const GenerateOptions& options);
  Result<GenerationStep> step();  // after done(), returns {kNoToken, "", true}
  bool done() const { return done_; }
  const GenerateResult& result() const { return result_; }

 private:
  double now() const { return options_.now_ms ? options_.now_ms() : 0.0; }
  void finish(StopReason stop, GenerationStep& out);

  std::optional<CpuTokenModel> own_model_;  // for the CPU begin()
  TokenModel* model_ = nullptr;
  const Tokenizer* tokenizer_ = nullptr;
  std::vector<int32_t> end_ids_;
  GenerateOptions options_;
  std::optional<Sampler> sampler_;
  std::optional<StreamingDetokenizer> detokenizer_;  // when there is a tokenizer
  std::vector<int32_t> history_;                     // prompt and written tokens, for the repetition penalty
  size_t emitted_ = 0;          // bytes of result_.text handed out (a stop string may be pending after them)
  size_t longest_stop_ = 0;     // bytes of the longest stop string: that much text is held back
  bool needs_forward_ = false;  // result_.unprocessed must go through the model before the next choice
  bool first_choice_ = true;    // the next choice ends the prefill
  double t_begin_ = 0.0;        // when begin() started
  double t_run_ = 0.0;          // when the last token's forward pass started
  bool done_ = true;
  GenerateResult result_;
};

// Appends `prompt_ids` to the context and writes up to max_new_tokens tokens. `tokenizer` may be null (ids
// only; no stop strings). Errors: an empty prompt, or one that does not fit the context's free positions.
// The model must answer synchronously (every backend does natively).
Result<GenerateResult> generate(TokenModel& model, const Tokenizer* tokenizer,
                                std::span<const int32_t> prompt_ids, std::span<const int32_t> end_ids,
                                const GenerateOptions& options, TextSink* sink = nullptr);
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
