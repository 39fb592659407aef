// The C API (api/sotto.h) on the stories260K fixture: driving a generation one step at a time gives what
// generate() gives, the pieces add up to the text, the KV cache carries a conversation across turns, and
// every misuse or bad file is a status code with a one-line message (never a crash).
#include <gtest/gtest.h>

#include <algorithm>

#include <random>
#include <string>
#include <vector>

#include "api/sotto.h"
#include "core/thread_pool.h"
#include "io/gguf.h"
#include "models/llm/generate.h"
#include "models/llm/llama.h"
#include "test_support.h"

namespace {

using namespace sotto::testing;

struct Handle {
  SottoLlm* llm;
  explicit Handle(int threads) : llm(sotto_llm_create(threads)) {}
  ~Handle() { sotto_llm_destroy(llm); }
};

std::vector<int32_t> tokenize(SottoLlm* llm, const std::string& text, bool add_special) {
  std::vector<int32_t> ids(text.size() + 8);
  const int32_t n = sotto_llm_tokenize(llm, text.data(), text.size(), add_special, 0, ids.data(),
                                       static_cast<int32_t>(ids.size()));
  EXPECT_GE(n, 0) << sotto_llm_last_error(llm);
  ids.resize(static_cast<size_t>(n < 0 ? 0 : n));
  return ids;
}

SottoSampling sampling(bool greedy, int max_new_tokens, uint64_t seed) {
  SottoSampling s;
  sotto_sampling_defaults(&s);
  s.greedy = greedy;
  s.max_new_tokens = max_new_tokens;
  s.seed = seed;
  return s;
}

TEST(SottoApi, StepByStepEqualsGenerate) {
  const std::vector<uint8_t> file = read_fixture("llm/stories260K-q8_0.gguf");
  Handle h(2);
  ASSERT_EQ(sotto_llm_load(h.llm, file.data(), file.size(), 256), SOTTO_OK) << sotto_llm_last_error(h.llm);
  EXPECT_EQ(sotto_llm_n_ctx(h.llm), 256);
  const std::vector<int32_t> ids = tokenize(h.llm, "One day, a bird", true);

  // The reference: generate() on its own weights, context and pool.
  auto gguf = sotto::parse_gguf(file);
  ASSERT_TRUE(gguf.ok());
  auto weights = sotto::load_llama(*gguf);
  auto tokenizer = sotto::Tokenizer::from_gguf(*gguf);
  ASSERT_TRUE(weights.ok() && tokenizer.ok());
  auto ctx = sotto::make_llama_context(*weights, 256);
  sotto::ThreadPool pool(2);
  sotto::GenerateOptions options;
  options.max_new_tokens = 40;
  options.sampling.seed = 1234;  // sampled, not greedy: the stepper must draw the same numbers
  options.sampling.temperature = 0.8f;
  options.stop_strings = {"park"};
  auto expected = sotto::generate(pool, *weights, *ctx, &*tokenizer, ids,
                                  sotto::end_of_generation_ids(*tokenizer), options);
  ASSERT_TRUE(expected.ok());

  SottoSampling s = sampling(false, 40, 1234);
  s.temperature = 0.8f;
  const std::string stops("park\0", 5);
  ASSERT_EQ(sotto_llm_begin(h.llm, ids.data(), ids.size(), &s, stops.data(), stops.size(), 0), SOTTO_OK);
  std::vector<int32_t> got;
  std::string text;
  SottoStep step{};
  for (int guard = 0; !step.done && guard < 100; ++guard) {
    ASSERT_EQ(sotto_llm_step(h.llm, &step), SOTTO_OK) << sotto_llm_last_error(h.llm);
    if (step.id >= 0) got.push_back(step.id);
    text.append(step.text, step.text_bytes);
  }
  EXPECT_EQ(got, expected->ids);
  EXPECT_EQ(text, expected->text);
  EXPECT_STREQ(sotto_stop_name(step.stop), std::string(sotto::stop_reason_name(expected->stop)).c_str());
  // After the end: done again, no token.
  ASSERT_EQ(sotto_llm_step(h.llm, &step), SOTTO_OK);
  EXPECT_EQ(step.done, 1);
  EXPECT_EQ(step.id, -1);
  SottoTimings t;
  ASSERT_EQ(sotto_llm_timings(h.llm, &t), SOTTO_OK);
  EXPECT_EQ(t.n_generated, static_cast<int32_t>(expected->ids.size()));
  EXPECT_EQ(t.n_prompt, static_cast<int32_t>(ids.size()));
  EXPECT_GT(t.prefill_ms, 0.0);
}

TEST(SottoApi, ConversationContinuesInTheCache) {
  const std::vector<uint8_t> file = read_fixture("llm/stories260K.gguf");
  Handle h(1);
  ASSERT_EQ(sotto_llm_load(h.llm, file.data(), file.size(), 0), SOTTO_OK);
  const std::vector<int32_t> first = tokenize(h.llm, "Once upon a time", true);
  const SottoSampling s = sampling(true, 8, 0);
  ASSERT_EQ(sotto_llm_begin(h.llm, first.data(), first.size(), &s, nullptr, 0, 0), SOTTO_OK);
  SottoStep step{};
  std::vector<int32_t> reply;
  while (!step.done) {
    ASSERT_EQ(sotto_llm_step(h.llm, &step), SOTTO_OK);
    if (step.id >= 0) reply.push_back(step.id);
  }
  ASSERT_EQ(reply.size(), 8u);  // a length limit: the last token was sampled, never run
  EXPECT_EQ(sotto_llm_reply_closed(h.llm), 0);
  SottoTimings t;
  sotto_llm_timings(h.llm, &t);
  EXPECT_EQ(t.n_past, static_cast<int32_t>(first.size() + 7));

  // The next turn: its prefill is the carried token plus the new ids, and the tokens are those of the whole
  // conversation run from an empty cache.
  const std::vector<int32_t> next = tokenize(h.llm, " The dog", false);
  ASSERT_EQ(sotto_llm_begin(h.llm, next.data(), next.size(), &s, nullptr, 0, 1), SOTTO_OK);
  sotto_llm_timings(h.llm, &t);
  EXPECT_EQ(t.n_prompt, static_cast<int32_t>(next.size() + 1));
  std::vector<int32_t> continued;
  for (step = {}; !step.done;) {
    ASSERT_EQ(sotto_llm_step(h.llm, &step), SOTTO_OK);
    if (step.id >= 0) continued.push_back(step.id);
  }
  std::vector<int32_t> whole = first;
  whole.insert(whole.end(), reply.begin(), reply.end());
  whole.insert(whole.end(), next.begin(), next.end());
  ASSERT_EQ(sotto_llm_begin(h.llm, whole.data(), whole.size(), &s, nullptr, 0, 0), SOTTO_OK);
  std::vector<int32_t> fresh;
  for (step = {}; !step.done;) {
    ASSERT_EQ(sotto_llm_step(h.llm, &step), SOTTO_OK);
    if (step.id >= 0) fresh.push_back(step.id);
  }
  EXPECT_EQ(continued, fresh);
}

// The end-of-generation set: a token of the greedy text made an end token stops the text just before it; an
// empty set (ignore_eos) runs to the length limit; -1 restores the model's own set.
TEST(SottoApi, EndIdsCanBeReplacedAndRestored) {
  const std::vector<uint8_t> file = read_fixture("llm/stories260K.gguf");
  Handle h(1);
  ASSERT_EQ(sotto_llm_load(h.llm, file.data(), file.size(), 128), SOTTO_OK) << sotto_llm_last_error(h.llm);
  const std::vector<int32_t> ids = tokenize(h.llm, "Once upon a time", true);
  auto run = [&](int max_tokens) {
    const SottoSampling s = sampling(true, max_tokens, 0);
    std::vector<int32_t> out;
    EXPECT_EQ(sotto_llm_begin(h.llm, ids.data(), ids.size(), &s, nullptr, 0, 0), SOTTO_OK);
    for (SottoStep step{}; !step.done;) {
      EXPECT_EQ(sotto_llm_step(h.llm, &step), SOTTO_OK);
      if (step.id >= 0) out.push_back(step.id);
      if (step.done)
        EXPECT_EQ(step.stop,
                  out.size() < static_cast<size_t>(max_tokens) ? SOTTO_STOP_EOG : SOTTO_STOP_LENGTH);
    }
    return out;
  };
  const std::vector<int32_t> plain = run(24);
  ASSERT_EQ(plain.size(), 24u);
  const int32_t end = plain[5];
  ASSERT_EQ(sotto_llm_set_end_ids(h.llm, &end, 1), SOTTO_OK);
  const std::vector<int32_t> cut = run(24);
  const size_t first = static_cast<size_t>(std::find(plain.begin(), plain.end(), end) - plain.begin());
  EXPECT_EQ(cut, std::vector<int32_t>(plain.begin(), plain.begin() + static_cast<std::ptrdiff_t>(first)));
  ASSERT_EQ(sotto_llm_set_end_ids(h.llm, nullptr, 0), SOTTO_OK);
  EXPECT_EQ(run(24), plain);
  ASSERT_EQ(sotto_llm_set_end_ids(h.llm, nullptr, -1), SOTTO_OK);
  EXPECT_EQ(run(24), plain);
  const int32_t bad = 1 << 20;
  EXPECT_EQ(sotto_llm_set_end_ids(h.llm, &bad, 1), SOTTO_ERROR_ARGUMENT);
  EXPECT_NE(std::string(sotto_llm_last_error(h.llm)).find("outside the vocabulary"), std::string::npos);
}

TEST(SottoApi, ErrorsAreCodesWithOneLineMessages) {
  Handle h(1);
  int32_t id = 1;
  SottoStep step;
  const SottoSampling s = sampling(true, 4, 0);
  EXPECT_EQ(sotto_llm_begin(h.llm, &id, 1, &s, nullptr, 0, 0), SOTTO_ERROR_ARGUMENT);
  EXPECT_STREQ(sotto_llm_last_error(h.llm), "llm: no model loaded");
  EXPECT_EQ(sotto_llm_tokenize(h.llm, "x", 1, 1, 0, &id, 1), -1);

  std::mt19937_64 rng(std::random_device{}());
  const std::vector<uint8_t> garbage = random_bytes(rng, 4096);
  EXPECT_EQ(sotto_llm_load(h.llm, garbage.data(), garbage.size(), 0), SOTTO_ERROR_FILE);
  EXPECT_NE(std::string(sotto_llm_last_error(h.llm)).find("gguf"), std::string::npos);
  EXPECT_EQ(std::string(sotto_llm_last_error(h.llm)).find('\n'), std::string::npos);

  const std::vector<uint8_t> vocab = read_fixture("tokenizer/ggml-vocab-qwen2.gguf");
  Handle v(1);
  EXPECT_EQ(sotto_llm_load(v.llm, vocab.data(), vocab.size(), 0), SOTTO_ERROR_FILE);
  EXPECT_NE(std::string(sotto_llm_last_error(v.llm)).find("missing tensor"), std::string::npos);
  Handle t(1);
  ASSERT_EQ(sotto_llm_load_tokenizer(t.llm, vocab.data(), vocab.size()), SOTTO_OK);
  EXPECT_GT(sotto_llm_tokenize(t.llm, "Hello", 5, 0, 0, &id, 1), 0);
  EXPECT_EQ(sotto_llm_begin(t.llm, &id, 1, &s, nullptr, 0, 0), SOTTO_ERROR_ARGUMENT);
  EXPECT_EQ(sotto_llm_step(t.llm, &step), SOTTO_ERROR_ARGUMENT);

  const std::vector<uint8_t> file = read_fixture("llm/stories260K.gguf");
  Handle m(1);
  ASSERT_EQ(sotto_llm_load(m.llm, file.data(), file.size(), 4), SOTTO_OK);
  EXPECT_EQ(sotto_llm_step(m.llm, &step), SOTTO_ERROR_ARGUMENT);  // before begin
  const int32_t bad[] = {1, 999999};
  EXPECT_EQ(sotto_llm_detokenize(m.llm, bad, 2, 0, 1, nullptr), nullptr);
  EXPECT_NE(std::string(sotto_llm_last_error(m.llm)).find("vocabulary"), std::string::npos);
  const int32_t too_long[] = {1, 2, 3, 4, 5};
  EXPECT_EQ(sotto_llm_begin(m.llm, too_long, 5, &s, nullptr, 0, 0), SOTTO_ERROR_RUN);
  EXPECT_NE(std::string(sotto_llm_last_error(m.llm)).find("context"), std::string::npos);
  EXPECT_EQ(sotto_llm_begin(m.llm, too_long, 0, &s, nullptr, 0, 0), SOTTO_ERROR_RUN);   // empty prompt
  EXPECT_EQ(sotto_llm_load(m.llm, file.data(), file.size(), 4), SOTTO_ERROR_ARGUMENT);  // already loaded
}

}  // namespace
