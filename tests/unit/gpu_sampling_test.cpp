// Sampling on the GPU inside the model (models/llm/gpu/llm_gpu.h submit_sample) against sotto::Sampler fed the GPU's own
// logits (LlmGpu::logits()) and the same draw: stories260K, 32 tokens after a llama.cpp
// reference prompt, each one chosen on the GPU and fed back there, for a llama.cpp-like chain (top-k, top-p,
// min-p, temperature), one with a repetition penalty, and greedy with a penalty (which the plan's argmax
// cannot do). A token must equal the CPU Sampler's unless one of its decisions lies within 1e-5 of a boundary
// (models/llm/gpu/op_check.h sampling_boundary_distance: the GPU's exp and sums differ from libm's in the last bits);
// such tokens are counted and may be at most a few.
#include <gtest/gtest.h>

#include <cstdio>
#include <string>
#include <vector>

#include "gpu_test_support.h"
#include "io/gguf.h"
#include "llm_reference.h"
#include "models/llm/gpu/llm_gpu.h"
#include "models/llm/gpu/op_check.h"
#include "models/llm/llama.h"
#include "models/llm/sampler.h"
#include "test_support.h"

namespace sotto {
namespace {

class GpuSampling : public ::testing::TestWithParam<const char*> {};

TEST_P(GpuSampling, DrawsTheCpuSamplersTokenFromItsOwnLogits) {
  gpu::Device* device = testing::open_test_device();
  if (!device) GTEST_SKIP() << testing::gpu_skip_reason();
  const std::string file = GetParam();
  const auto refs = testing::load_llm_reference(file);
  ASSERT_FALSE(refs.empty()) << "tests/data/llm_reference.json lacks " << file;
  const std::vector<uint8_t> bytes = testing::read_fixture("llm/" + file);
  auto gguf = parse_gguf(bytes);
  ASSERT_TRUE(gguf.ok()) << gguf.message();
  auto weights = load_llama(*gguf);
  ASSERT_TRUE(weights.ok()) << weights.message();
  auto llm_or = gpu::LlmGpu::create(*device, *weights, 128);
  ASSERT_TRUE(llm_or.ok()) << llm_or.message();
  gpu::LlmGpu& llm = **llm_or;

  SamplerParams chain;  // top_k 40, top_p 0.95, min_p 0.05 (the default filters)
  chain.temperature = 0.8f;
  chain.seed = 7;
  SamplerParams penalized = chain;
  penalized.temperature = 1.1f;
  penalized.top_k = 100;
  penalized.top_p = 0.9f;
  penalized.min_p = 0.02f;
  penalized.repeat_penalty = 1.2f;
  penalized.repeat_last_n = 16;
  penalized.seed = testing::test_seed();
  SamplerParams greedy_penalized = chain;
  greedy_penalized.greedy = true;
  greedy_penalized.repeat_penalty = 1.3f;
  for (const SamplerParams& sp : {chain, penalized, greedy_penalized}) {
    const std::vector<int32_t>& prompt = refs[0].prompt_ids;
    llm.reset();
    for (int32_t id : prompt) ASSERT_TRUE(llm.submit(id).ok());
    Sampler cpu(sp), draws(sp);  // one for the CPU's choice, one whose draws go to the GPU: the same sequence
    std::vector<int32_t> history = prompt;
    int compared = 0, near_boundary = 0, differs_from_greedy = 0;
    for (int t = 0; t < 32; ++t) {
      auto logits = llm.logits();
      ASSERT_TRUE(logits.ok()) << logits.message();
      const bool draws_once = !sp.greedy && sp.temperature > 0.0f;
      const float u = draws_once ? draws.next_draw() : 0.0f;
      ASSERT_TRUE(llm.submit_sample(sp, u, history).ok());
      ASSERT_TRUE(llm.start_finish().ok());
      int32_t got = -1;
      ASSERT_EQ(llm.finish(&got), gpu::DeviceStatus::Ok) << device->last_error();
      const int32_t want = cpu.sample(*logits, history);
      if (gpu::sampling_boundary_distance(*logits, history, sp, u) < 1e-5) {
        ++near_boundary;
      } else {
        EXPECT_EQ(got, want) << file << " token " << t << " (seed " << sp.seed << ")";
        ++compared;
      }
      if (got != argmax(*logits)) ++differs_from_greedy;
      history.push_back(got);
      ASSERT_TRUE(llm.submit(-1).ok());  // the GPU's choice, fed back without leaving it
    }
    EXPECT_LE(near_boundary, 2) << "decisions this close to a boundary should be rare";
    if (!sp.greedy) EXPECT_GT(differs_from_greedy, 0) << "32 sampled tokens that are all the argmax";
    std::printf(
        "[ info    ] %s, temperature %g%s: %d of 32 tokens compared exactly, %d near a boundary, %d not "
        "the argmax\n",
        file.c_str(), sp.greedy ? 0.0 : sp.temperature, sp.repeat_penalty != 1.0f ? " +penalty" : "",
        compared, near_boundary, differs_from_greedy);
  }
  EXPECT_EQ(device->last_error(), "");
}

// F32 only: the sampler sees logits whatever the weight type, and SwiftShader needs ~0.1 s a token.
INSTANTIATE_TEST_SUITE_P(Stories, GpuSampling, ::testing::Values("stories260K.gguf"));

}  // namespace
}  // namespace sotto
