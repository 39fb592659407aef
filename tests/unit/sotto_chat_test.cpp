// The C API's chat behaviour (issue #33): greedy by default, message text that can never become control
// tokens, and a conversation that goes on when the context is full.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "api/sotto.h"
#include "llm_reference.h"
#include "test_support.h"

namespace {

using namespace sotto::testing;

using LlmPtr = std::unique_ptr<SottoLlm, void (*)(SottoLlm*)>;

LlmPtr make_llm(int threads) {
  return LlmPtr(sotto_llm_create(threads), sotto_llm_destroy);
}

// All the ids of one generation, stepped to the end.
std::vector<int32_t> run_to_end(SottoLlm* llm, SottoStep* last = nullptr) {
  std::vector<int32_t> ids;
  SottoStep step{};
  for (int guard = 0; !step.done && guard < 100000; ++guard) {
    if (sotto_llm_step(llm, &step) != SOTTO_OK) {
      ADD_FAILURE() << sotto_llm_last_error(llm);
      break;
    }
    if (step.id >= 0) ids.push_back(step.id);
  }
  if (last) *last = step;
  return ids;
}

// sotto_sampling_defaults is greedy: whatever the seed, llama.cpp's greedy continuation.
TEST(SottoChat, SamplingDefaultsAreGreedy) {
  const std::string file = "stories260K-q8_0.gguf";
  const std::vector<uint8_t> bytes = read_fixture("llm/" + file);
  ASSERT_FALSE(bytes.empty()) << "missing fixture llm/" << file;
  const auto refs = load_llm_reference(file);
  ASSERT_FALSE(refs.empty());
  LlmPtr llm = make_llm(2);
  ASSERT_EQ(sotto_llm_load(llm.get(), bytes.data(), bytes.size(), 256), SOTTO_OK);
  SottoSampling s;
  sotto_sampling_defaults(&s);
  EXPECT_EQ(s.temperature, 0.0f);
  for (uint64_t seed : {0ull, 1ull, 12345ull}) {
    s.seed = seed;
    s.max_new_tokens = static_cast<int32_t>(refs[0].ids.size());
    ASSERT_EQ(
        sotto_llm_begin(llm.get(), refs[0].prompt_ids.data(), refs[0].prompt_ids.size(), &s, nullptr, 0, 0),
        SOTTO_OK);
    EXPECT_EQ(run_to_end(llm.get()), refs[0].ids) << "seed " << seed;
  }
}

}  // namespace
