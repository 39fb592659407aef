// The C API's language model on the WebGPU backend (sotto_llm_load_on, api/sotto.h) natively, on Dawn: 64
// greedy tokens of stories260K must be what the same API writes on the CPU backend (itself checked token for
// token against llama.cpp in llm_test.cpp), ids and text, streamed pieces adding up to the text; sampled
// tokens (drawn on the GPU) equal the CPU's for the same seed; a kept cache continues like the CPU's. Greedy and
// unpenalized sampled steps run one ahead of the reads, so these also check that the step ahead, used or dropped,
// changes no token, draw or position. The web engine drives the same functions from wasm
// (tests/web/gpu_*.test.mjs).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "api/sotto.h"
#include "gpu_test_support.h"
#include "test_support.h"

namespace {

struct Generated {
  std::vector<int32_t> ids;
  std::string text;  // the streamed pieces
  std::string json;  // generate --json, timings cut off
  int32_t stop = 0;
};

std::string without_timings(std::string json) {
  const size_t at = json.find(",\"prefill_ms\"");
  return at == std::string::npos ? json : json.substr(0, at);
}

SottoSampling greedy(int max_tokens) {
  SottoSampling s;
  sotto_sampling_defaults(&s);
  s.greedy = 1;
  s.max_new_tokens = max_tokens;
  return s;
}

template <class Begin, class Step, class Json>
Generated run(Begin begin, Step step, Json json) {
  Generated out;
  EXPECT_EQ(begin(), SOTTO_OK);
  for (int guard = 0; guard < 1000; guard++) {
    SottoStep s{};
    const int32_t status = step(&s);
    EXPECT_EQ(status, SOTTO_OK) << "natively a step never pends";
    if (status != SOTTO_OK) break;
    if (s.id >= 0) out.ids.push_back(s.id);
    out.text.append(s.text, s.text_bytes);
    if (s.done) {
      out.stop = s.stop;
      break;
    }
  }
  size_t bytes = 0;
  const char* j = json(&bytes);
  if (j) out.json = without_timings(std::string(j, bytes));
  return out;
}

// One generation on a handle, as run() drives it: begin with `prompt` (on the kept cache when `keep`), steps to
// the end, the result JSON (with `json_prompt`'s text).
Generated generate_on(SottoLlm* h, const int32_t* prompt, int32_t n, const SottoSampling& sampling,
                      const char* stops = nullptr, size_t stops_bytes = 0, int32_t keep = 0,
                      const std::string& json_prompt = "") {
  return run([&] { return sotto_llm_begin(h, prompt, n, &sampling, stops, stops_bytes, keep); },
             [&](SottoStep* s) { return sotto_llm_step(h, s); },
             [&](size_t* b) {
               return sotto_llm_result_json(h, json_prompt.empty() ? nullptr : json_prompt.data(),
                                            json_prompt.size(), b);
             });
}

// The file, and the GPU options: none, or the fused plan (SOTTO_GPU_FUSED), whose steps also run ahead of the
// reads (greedy ones) and whose reruns keep track of them.
struct GpuCase {
  const char* file;
  int32_t options;
};

class SottoLlmGpuTest : public ::testing::TestWithParam<GpuCase> {};

TEST_P(SottoLlmGpuTest, GreedyTokensEqualTheCpuApi) {
  if (!sotto::testing::open_test_device()) GTEST_SKIP() << sotto::testing::gpu_skip_reason();
  const char* file = GetParam().file;
  const std::vector<uint8_t> bytes = sotto::testing::read_fixture(std::string("llm/") + file);

  SottoLlm* cpu = sotto_llm_create(1);
  ASSERT_EQ(sotto_llm_load(cpu, bytes.data(), bytes.size(), 128), SOTTO_OK) << sotto_llm_last_error(cpu);
  SottoLlm* gpu = sotto_llm_create(1);
  ASSERT_EQ(sotto_llm_set_gpu_options(gpu, GetParam().options), SOTTO_OK);
  ASSERT_EQ(sotto_llm_load_on(gpu, bytes.data(), bytes.size(), 128, SOTTO_BACKEND_WEBGPU), SOTTO_OK)
      << sotto_llm_last_error(gpu);
  EXPECT_EQ(sotto_llm_n_ctx(gpu), 128);
  size_t info_bytes = 0;
  const std::string info(sotto_llm_info_json(gpu, &info_bytes), info_bytes);
  EXPECT_NE(info.find("\"backend\":\"webgpu\""), std::string::npos) << info;
  EXPECT_NE(info.find("\"dispatches_per_token\":"), std::string::npos) << info;
  EXPECT_NE(info.find("\"attention_sum\":\"f16\""), std::string::npos)
      << info;                               // the default: the CPU's bits
  if (GetParam().options & SOTTO_GPU_FUSED)  // (one workgroup per fused dispatch passes on any adapter)
    EXPECT_NE(info.find("\"fusion\":\"on"), std::string::npos) << info;

  const std::string prompt = "Once upon a time";
  int32_t ids[64];
  const int32_t n = sotto_llm_tokenize(cpu, prompt.data(), prompt.size(), 1, 0, ids, 64);
  ASSERT_GT(n, 0);
  const SottoSampling sampling = greedy(64);
  Generated want = generate_on(cpu, ids, n, sampling, nullptr, 0, 0, prompt);
  Generated got = generate_on(gpu, ids, n, sampling, nullptr, 0, 0, prompt);
  ASSERT_EQ(want.ids.size(), 64u);
  EXPECT_EQ(got.ids, want.ids);
  EXPECT_EQ(got.text, want.text);
  EXPECT_EQ(got.stop, SOTTO_STOP_LENGTH);
  EXPECT_EQ(got.json, want.json);

  // A stop string ends the text before it, as on the CPU.
  const char stops[] = "park";
  Generated want_stop = generate_on(cpu, ids, n, sampling, stops, sizeof stops);
  Generated got_stop = generate_on(gpu, ids, n, sampling, stops, sizeof stops);
  EXPECT_EQ(got_stop.json, want_stop.json);
  EXPECT_EQ(got_stop.text, want_stop.text);

  // A second turn on the kept cache (the unprocessed last token carried over) continues alike.
  const int32_t more[] = {ids[1]};
  const SottoSampling eight = greedy(8);
  Generated want_more = generate_on(cpu, more, 1, eight, nullptr, 0, 1);
  Generated got_more = generate_on(gpu, more, 1, eight, nullptr, 0, 1);
  EXPECT_EQ(got_more.ids, want_more.ids);
  // The GPU runs steps one ahead of the reads; the step after the last token, never wanted, is not
  // counted: the cache holds as many positions as the CPU's. A turn that fills the context then ends where the
  // CPU's does. (Its tokens equal the CPU's on the F32 file; on Q8_0 the two part past position 100 at a near
  // tie, with or without the step ahead, so there only the count and the stop are compared.)
  SottoTimings cpu_t{}, gpu_t{};
  ASSERT_EQ(sotto_llm_timings(cpu, &cpu_t), SOTTO_OK);
  ASSERT_EQ(sotto_llm_timings(gpu, &gpu_t), SOTTO_OK);
  EXPECT_EQ(gpu_t.n_past, cpu_t.n_past);
  const SottoSampling to_the_end = greedy(1000);
  Generated want_full = generate_on(cpu, more, 1, to_the_end, nullptr, 0, 1);
  Generated got_full = generate_on(gpu, more, 1, to_the_end, nullptr, 0, 1);
  if (std::string(file) == "stories260K.gguf") EXPECT_EQ(got_full.ids, want_full.ids);
  EXPECT_EQ(got_full.ids.size(), want_full.ids.size());
  EXPECT_EQ(got_full.stop, want_full.stop);
  ASSERT_EQ(sotto_llm_timings(cpu, &cpu_t), SOTTO_OK);
  ASSERT_EQ(sotto_llm_timings(gpu, &gpu_t), SOTTO_OK);
  EXPECT_EQ(gpu_t.n_past, cpu_t.n_past);

  // Sampling runs on the GPU, drawing with the CPU Sampler's generator: the same seed gives the CPU's tokens.
  // (Exact here because the GPU's logits of these fixtures agree with the CPU's to ~1e-5, and no draw of this
  // seed lies that close to a boundary of the distribution; gpu_sampling_test.cpp compares the GPU sampler
  // with the CPU's on the GPU's own logits, allowing for such draws.) A penalty applies under greedy too.
  SottoSampling sampled = greedy(32);
  sampled.greedy = 0;
  sampled.temperature = 0.8f;
  sampled.top_k = 40;
  sampled.top_p = 0.95f;
  sampled.seed = 7;
  SottoSampling penalized = greedy(32);
  penalized.repeat_penalty = 1.3f;
  for (const SottoSampling* s : {&sampled, &penalized}) {
    Generated want_s = generate_on(cpu, ids, n, *s);
    Generated got_s = generate_on(gpu, ids, n, *s);
    ASSERT_EQ(want_s.ids.size(), 32u);
    EXPECT_EQ(got_s.ids, want_s.ids) << (s == &sampled ? "sampled, seed 7" : "greedy, repeat penalty 1.3");
    EXPECT_EQ(got_s.text, want_s.text);
  }
  // More candidates than the GPU sampler keeps is refused with one clear line.
  SottoSampling unlimited = sampled;
  unlimited.top_k = 0;
  EXPECT_EQ(sotto_llm_begin(gpu, ids, n, &unlimited, nullptr, 0, 0), SOTTO_ERROR_ARGUMENT);
  EXPECT_NE(std::string(sotto_llm_last_error(gpu)).find("keeps at most 128 candidates"), std::string::npos)
      << sotto_llm_last_error(gpu);

  // Top log-probabilities need the CPU's logits.
  EXPECT_EQ(sotto_llm_top_logprobs(gpu, ids, static_cast<size_t>(n), 5, nullptr), nullptr);
  EXPECT_NE(std::string(sotto_llm_last_error(gpu)).find("webgpu"), std::string::npos);

  sotto_llm_destroy(gpu);
  sotto_llm_destroy(cpu);
}

// The F32 file: the API's plumbing does not depend on the weight type, and each type's GPU tokens are checked
// against the CPU's and llama.cpp's in gpu_llm_test.cpp (GpuStories), its sampling in gpu_sampling_test.cpp.
// (Q8_0 here too took another two minutes of SwiftShader per CI run.)
INSTANTIATE_TEST_SUITE_P(Stories, SottoLlmGpuTest,
                         ::testing::Values(GpuCase{"stories260K.gguf", 0},
                                           GpuCase{"stories260K.gguf", SOTTO_GPU_FUSED}));

TEST(SottoLlmGpuApi, BadInputIsAClearError) {
  SottoLlm* gpu = sotto_llm_create(1);
  const uint8_t garbage[] = {1, 2, 3, 4, 5, 6, 7, 8};
  EXPECT_EQ(sotto_llm_load_on(gpu, garbage, sizeof garbage, 0, SOTTO_BACKEND_WEBGPU), SOTTO_ERROR_FILE);
  EXPECT_NE(std::string(sotto_llm_last_error(gpu)).find("gguf"), std::string::npos);
  EXPECT_EQ(sotto_llm_load_on(gpu, garbage, sizeof garbage, 0, 7), SOTTO_ERROR_ARGUMENT);
  EXPECT_NE(std::string(sotto_llm_last_error(gpu)).find("unknown backend"), std::string::npos);
  SottoSampling s = greedy(4);
  const int32_t id = 1;
  EXPECT_EQ(sotto_llm_begin(gpu, &id, 1, &s, nullptr, 0, 0), SOTTO_ERROR_ARGUMENT);
  SottoStep step{};
  EXPECT_EQ(sotto_llm_step(gpu, &step), SOTTO_ERROR_ARGUMENT);
  EXPECT_EQ(sotto_llm_result_json(gpu, nullptr, 0, nullptr), nullptr);
  EXPECT_EQ(sotto_llm_profile_step(gpu), SOTTO_ERROR_ARGUMENT);
  EXPECT_EQ(sotto_llm_set_gpu_options(gpu, 4), SOTTO_ERROR_ARGUMENT);
  EXPECT_NE(std::string(sotto_llm_last_error(gpu)).find("unknown GPU options 4"), std::string::npos);
  EXPECT_EQ(sotto_llm_set_gpu_options(nullptr, 0), SOTTO_ERROR_ARGUMENT);
  sotto_llm_destroy(gpu);
}

// SOTTO_GPU_ATTENTION_F32 reaches the GPU model (its info says so) and generation runs; its tokens against
// llama.cpp's are checked in tests/unit/gpu_llm_test.cpp and tests/web/gpu_node.test.mjs.
TEST(SottoLlmGpuApi, F32AttentionOptionReachesTheModel) {
  if (!sotto::testing::open_test_device()) GTEST_SKIP() << sotto::testing::gpu_skip_reason();
  const std::vector<uint8_t> bytes = sotto::testing::read_fixture("llm/stories260K.gguf");
  SottoLlm* gpu = sotto_llm_create(1);
  ASSERT_EQ(sotto_llm_set_gpu_options(gpu, SOTTO_GPU_ATTENTION_F32), SOTTO_OK);
  ASSERT_EQ(sotto_llm_load_on(gpu, bytes.data(), bytes.size(), 32, SOTTO_BACKEND_WEBGPU), SOTTO_OK)
      << sotto_llm_last_error(gpu);
  size_t info_bytes = 0;
  const std::string info(sotto_llm_info_json(gpu, &info_bytes), info_bytes);
  EXPECT_NE(info.find("\"attention_sum\":\"f32\""), std::string::npos) << info;
  const int32_t prompt[] = {1, 403, 407};
  const SottoSampling sampling = greedy(8);
  ASSERT_EQ(sotto_llm_set_end_ids(gpu, nullptr, 0), SOTTO_OK);  // only the length ends it
  ASSERT_EQ(sotto_llm_begin(gpu, prompt, 3, &sampling, nullptr, 0, 0), SOTTO_OK) << sotto_llm_last_error(gpu);
  SottoStep step{};
  int written = 0;
  do {
    ASSERT_EQ(sotto_llm_step(gpu, &step), SOTTO_OK) << sotto_llm_last_error(gpu);
    written += step.id >= 0 ? 1 : 0;
  } while (!step.done);
  EXPECT_EQ(step.stop, SOTTO_STOP_LENGTH);
  EXPECT_EQ(written, 8);
  sotto_llm_destroy(gpu);
}

}  // namespace
