// The language model on the GPU gives the CPU backend's greedy tokens, which are llama.cpp's
// (tests/data/llm_reference.json, recorded by tools/llama_reference.mjs): the stories260K fixtures in F32,
// Q8_0 and Q4_0, 64 tokens after two of the four reference prompts (all four with SOTTO_GPU_ALL_PROMPTS=1),
// identical except after a near-tie of llama.cpp's own logits (see the test), plus a qwen2-shaped variant (RoPE in
// halves, random q/k/v biases; with the f16 attention sum and the f32 one) and a gemma3-shaped one checked
// against the CPU backend's logits on the same weights, and matrices split over a small binding limit giving the
// very same tokens.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "core/thread_pool.h"
#include "cpu/gelu.h"
#include "gpu_test_support.h"
#include "io/gguf.h"
#include "io/json.h"
#include "llm_reference.h"
#include "models/llm/gpu/llm_gpu.h"
#include "models/llm/llama.h"
#include "test_support.h"

namespace sotto {
namespace {

using testing::LlmReference;

// Prompt one token at a time (only the last is read back), then n greedy tokens fed back on the GPU.
std::vector<int32_t> gpu_greedy(gpu::LlmGpu& llm, const std::vector<int32_t>& prompt, int n) {
  llm.reset();
  std::vector<int32_t> out;
  for (size_t i = 0; i + 1 < prompt.size(); ++i)
    if (!llm.submit(prompt[i]).ok()) return out;
  auto next = llm.step(prompt.back());
  EXPECT_TRUE(next.ok()) << next.message();
  while (next.ok() && static_cast<int>(out.size()) < n) {
    out.push_back(*next);
    if (static_cast<int>(out.size()) == n) break;
    next = llm.step(-1);
    EXPECT_TRUE(next.ok()) << next.message();
  }
  return out;
}

// Greedy continuations of the first n_prompts reference prompts, against llama.cpp's (tests/data).
void expect_greedy_matches_llama_cpp(gpu::Device& device, const std::string& file, size_t n_prompts,
                                     gpu::AttentionSum attention_sum) {
  const auto refs = testing::load_llm_reference(file);
  ASSERT_EQ(refs.size(), 4u) << "tests/data/llm_reference.json lacks " << file;
  const std::vector<uint8_t> bytes = testing::read_fixture("llm/" + file);
  auto gguf = parse_gguf(bytes);
  ASSERT_TRUE(gguf.ok()) << gguf.message();
  auto weights = load_llama(*gguf);
  ASSERT_TRUE(weights.ok()) << weights.message();
  auto llm = gpu::LlmGpu::create(device, *weights, 256, 0, {}, attention_sum);
  ASSERT_TRUE(llm.ok()) << llm.message();
  for (size_t i = 0; i < n_prompts && i < refs.size(); ++i) {
    const LlmReference& ref = refs[i];
    const auto got = gpu_greedy(**llm, ref.prompt_ids, static_cast<int>(ref.ids.size()));
    if (got == ref.ids) continue;
    // A divergence is accepted only at a near-tie: where the CPU backend's (= llama.cpp's) two best logits
    // are within 0.05 (logits are O(10)), which the GPU's exp, last-bit different from libm's, can flip. Seen
    // once: stories260K-q4_0, prompt 2, token 46, margin 0.005. With the f32 attention sum, within 0.5: its
    // outputs differ from the f16 sum's by ~1e-3 of their scale, which flips q8_0 codes of the activations
    // downstream (see F32AttentionSumFollowsTheCpu). Seen: stories260K-q8_0, prompt 0,
    // token 57, margin 0.12; prompt 3, token 4, margin 0.055.
    const float near_tie = attention_sum == gpu::AttentionSum::F32 ? 0.5f : 0.05f;
    size_t k = 0;
    while (k < got.size() && k < ref.ids.size() && got[k] == ref.ids[k]) ++k;
    ASSERT_LT(k, ref.ids.size()) << file << ": GPU wrote fewer tokens than llama.cpp";
    std::vector<int32_t> context = ref.prompt_ids;
    context.insert(context.end(), ref.ids.begin(), ref.ids.begin() + static_cast<std::ptrdiff_t>(k));
    ThreadPool pool(1);
    auto ctx = make_llama_context(*weights, 256);
    ASSERT_TRUE(ctx.ok());
    auto logits = forward(pool, *weights, *ctx, context);
    ASSERT_TRUE(logits.ok());
    std::vector<float> sorted(logits->begin(), logits->end());
    std::partial_sort(sorted.begin(), sorted.begin() + 2, sorted.end(), std::greater<float>());
    EXPECT_LT(sorted[0] - sorted[1], near_tie)
        << file << ", prompt " << i << ": GPU token " << k << " is " << got[k] << ", llama.cpp's "
        << ref.ids[k] << ", and that is no near-tie";
    std::printf("[ info    ] %s, prompt %zu: identical for %zu tokens, then a near-tie (margin %g)\n",
                file.c_str(), i, k, sorted[0] - sorted[1]);
  }
  EXPECT_EQ(device.last_error(), "");
}

class GpuStories : public ::testing::TestWithParam<const char*> {};

TEST_P(GpuStories, GreedyTokensMatchLlamaCppAndTheCpu) {
  gpu::Device* device = testing::open_test_device();
  if (!device) GTEST_SKIP() << testing::gpu_skip_reason();
  // Two of the four prompts: SwiftShader needs ~0.1-0.3 s per token (SOTTO_GPU_ALL_PROMPTS=1 runs all four).
  expect_greedy_matches_llama_cpp(*device, GetParam(), std::getenv("SOTTO_GPU_ALL_PROMPTS") ? 4 : 2,
                                  gpu::AttentionSum::F16);
}

// Attention summing in f32 (faster, not the CPU's bits): llama.cpp's greedy tokens up to near-ties (wider
// ones: see above), on the first prompt (all four with SOTTO_GPU_ALL_PROMPTS=1). One file: the attention
// kernel is the same whatever the weights' type (node web/cli.mjs runs the F32 file: gpu_node.test.mjs).
TEST(GpuStoriesF32Sum, GreedyTokensMatchLlamaCpp) {
  gpu::Device* device = testing::open_test_device();
  if (!device) GTEST_SKIP() << testing::gpu_skip_reason();
  expect_greedy_matches_llama_cpp(*device, "stories260K-q4_0.gguf",
                                  std::getenv("SOTTO_GPU_ALL_PROMPTS") ? 4 : 1, gpu::AttentionSum::F32);
}

INSTANTIATE_TEST_SUITE_P(Llm, GpuStories,
                         ::testing::Values("stories260K.gguf", "stories260K-q8_0.gguf",
                                           "stories260K-q4_0.gguf"));

// Teacher-forced with the CPU's greedy tokens from a fixed start, position by position: every position's
// logits within `tolerance` of the CPU backend's on the same weights, and the same argmax wherever the CPU's
// top two are further apart than twice that (each may move by the tolerance; the tolerances are explained at
// the tests). Prints how many positions
// agree to 1e-2, and the worst difference.
void expect_gpu_follows_cpu(gpu::LlmGpu& llm, const LlamaWeights& w, int n_ctx, size_t n_positions,
                            float tolerance) {
  ThreadPool pool(1);
  auto ctx = make_llama_context(w, n_ctx);
  ASSERT_TRUE(ctx.ok());
  std::vector<int32_t> tokens = {1, 403, 407, 261, 378, 290, 265};
  llm.reset();
  size_t close = 0;
  float worst = 0;
  for (size_t i = 0; i < n_positions; ++i) {
    const int32_t id = tokens[i];
    auto gpu_next = llm.step(id);
    ASSERT_TRUE(gpu_next.ok()) << gpu_next.message();
    auto gpu_logits = llm.logits();
    ASSERT_TRUE(gpu_logits.ok());
    auto cpu_logits = forward(pool, w, *ctx, std::span<const int32_t>(&id, 1));
    ASSERT_TRUE(cpu_logits.ok());
    float max_diff = 0;
    for (size_t k = 0; k < cpu_logits->size(); ++k)
      max_diff = std::max(max_diff, std::fabs((*cpu_logits)[k] - (*gpu_logits)[k]));
    EXPECT_LT(max_diff, tolerance) << "position " << i;
    close += max_diff < 1e-2f ? 1 : 0;
    worst = std::max(worst, max_diff);
    std::vector<float> sorted(cpu_logits->begin(), cpu_logits->end());
    std::partial_sort(sorted.begin(), sorted.begin() + 2, sorted.end(), std::greater<float>());
    const int32_t cpu_next =
        static_cast<int32_t>(std::max_element(cpu_logits->begin(), cpu_logits->end()) - cpu_logits->begin());
    if (sorted[0] - sorted[1] > 2 * tolerance) EXPECT_EQ(*gpu_next, cpu_next) << "position " << i;
    if (i + 1 >= tokens.size()) tokens.push_back(cpu_next);
  }
  std::printf("[ info    ] %zu of %zu positions within 1e-2 of the CPU's logits, the worst %g off\n", close,
              n_positions, worst);
}

// stories260K's weights in the qwen2 shape (RoPE in halves) with random q/k/v biases, which `biases` holds.
LlamaWeights qwen2_shaped(const LlamaWeights& from, std::vector<std::vector<float>>& biases) {
  LlamaWeights w = from;
  w.hp.arch = "qwen2";
  w.hp.rope_layout = RopeLayout::Halves;
  std::mt19937 rng(static_cast<uint32_t>(testing::test_seed()));
  std::uniform_real_distribution<float> uniform(-0.2f, 0.2f);
  const size_t q_dim = static_cast<size_t>(w.hp.n_head * w.hp.head_dim_k);
  const size_t kv_dim = static_cast<size_t>(w.hp.n_head_kv * w.hp.head_dim_k);
  biases.clear();
  biases.reserve(3 * w.layers.size());
  for (LlamaLayer& l : w.layers) {
    for (size_t n : {q_dim, kv_dim, kv_dim}) {
      biases.emplace_back(n);
      for (float& b : biases.back()) b = uniform(rng);
    }
    l.bq = biases[biases.size() - 3].data();
    l.bk = biases[biases.size() - 2].data();
    l.bv = biases[biases.size() - 1].data();
  }
  return w;
}

// stories260K's weights made Gemma-3-shaped: random per-head q/k norms and post-norms, GeGLU, the sqrt(n_embd)
// embedding scale, q scaled after RoPE, local layers with a 4-position window and RoPE base 10000 between global
// ones with base 1e6. `norms` holds the random norm weights the result points to.
LlamaWeights gemma3_shaped(const LlamaWeights& stories, std::vector<std::vector<float>>& norms) {
  LlamaWeights w = stories;
  LlamaHparams& hp = w.hp;
  hp.arch = "gemma3";
  hp.rope_layout = RopeLayout::Halves;
  hp.ffn_activation = FfnActivation::Gelu;
  hp.embd_scale = std::sqrt(static_cast<float>(hp.n_embd));
  hp.q_scale = 1.0f / std::sqrt(static_cast<float>(hp.head_dim_k));
  hp.n_swa = 4;
  hp.swa_period = 3;  // layers 2 global, 0, 1, 3, 4 local
  hp.rope_freq_base = 1e6f;
  hp.rope_freq_base_swa = 10000.0f;
  hp.rms_norm_eps = 1e-6f;
  w.gelu_f16 = make_gelu_f16_table();
  std::mt19937 rng(static_cast<uint32_t>(testing::test_seed()));
  std::uniform_real_distribution<float> around_one(0.7f, 1.3f);
  auto random_norm = [&](int n) {
    norms.emplace_back(static_cast<size_t>(n));
    for (float& v : norms.back()) v = around_one(rng);
    return norms.back().data();
  };
  norms.reserve(w.layers.size() * 4);
  for (LlamaLayer& l : w.layers) {
    l.q_norm = random_norm(hp.head_dim_k);
    l.k_norm = random_norm(hp.head_dim_k);
    l.attn_post_norm = random_norm(hp.n_embd);
    l.ffn_post_norm = random_norm(hp.n_embd);
  }
  return w;
}

// A stories260K fixture's weights, as the file has them or made qwen2- or Gemma-3-shaped. The file's bytes and
// the random norms or biases the weights point into live as long as it.
enum class Shape { AsIs, Qwen2, Gemma3 };
struct TestModel {
  std::vector<uint8_t> bytes;
  GgufFile gguf;
  std::vector<std::vector<float>> random_params;
  LlamaWeights weights;
};
std::unique_ptr<TestModel> load_test_model(const std::string& file, Shape shape) {
  auto m = std::make_unique<TestModel>();
  m->bytes = testing::read_fixture("llm/" + file);
  auto gguf = parse_gguf(m->bytes);
  if (!gguf.ok()) {
    ADD_FAILURE() << file << ": " << gguf.message();
    return nullptr;
  }
  m->gguf = std::move(gguf).value();
  auto weights = load_llama(m->gguf);
  if (!weights.ok()) {
    ADD_FAILURE() << file << ": " << weights.message();
    return nullptr;
  }
  m->weights = shape == Shape::Gemma3  ? gemma3_shaped(*weights, m->random_params)
               : shape == Shape::Qwen2 ? qwen2_shaped(*weights, m->random_params)
                                       : std::move(weights).value();
  return m;
}
// By name, as the loops over fixtures list them: a file, or "gemma3" for stories260K-q8_0's made Gemma-3-shaped.
std::unique_ptr<TestModel> load_test_model(const std::string& name) {
  return name == "gemma3" ? load_test_model("stories260K-q8_0.gguf", Shape::Gemma3)
                          : load_test_model(name, Shape::AsIs);
}

// The qwen2 path (RoPE in halves, biases on q/k/v) on stories260K-q8_0's weights with random biases: the
// GPU's logits equal the CPU backend's on the same weights.
TEST(GpuLlm, Qwen2ShapeMatchesTheCpu) {
  gpu::Device* device = testing::open_test_device();
  if (!device) GTEST_SKIP() << testing::gpu_skip_reason();
  const auto model = load_test_model("stories260K-q8_0.gguf", Shape::Qwen2);
  ASSERT_TRUE(model);
  const LlamaWeights& w = model->weights;
  auto llm = gpu::LlmGpu::create(*device, w, 128);
  ASSERT_TRUE(llm.ok()) << llm.message();
  // Teacher-forced with the CPU's greedy tokens, position by position. Tolerances: logits are O(10). At most
  // positions of the q8_0 model they agree to ~1e-6, but now and then a q8_0 activation code lands one step
  // apart (the GPU's exp and contracted multiply-adds differ from libm's in the last bit, which can move a value
  // across a rounding boundary of the f16 attention sum or of the q8_0 quantizer); that moves logits by up to
  // ~0.3 at such positions, and runs of them add up: over 41 seeds of the random biases the worst position was
  // 0.52 (SOTTO_TEST_SEED=14795157263576, which failed CI at a bound of 0.5), then 0.41, 0.38. A wrong RoPE
  // layout or a lost bias moves them by whole units: with the GPU given the adjacent RoPE layout the worst
  // position was 16.6 off, with its v biases dropped 9.1 (seed 5). So: every position within 1.0, and the same
  // argmax wherever the CPU's top two are further apart than twice that.
  expect_gpu_follows_cpu(**llm, w, 128, 48, 1.0f);
}

// The f32 attention sum in the same qwen2 shape, on stories260K's F32 weights: F32 matrices take f32
// activations on both backends, so no q8_0 code can flip and the GPU's logits move from the CPU's (which sums
// in f16, rounding at every key) only by the f16 sum's rounding, carried smoothly through the layers: worst
// 0.026 to 0.073 over seeds 1-12 (logits O(10)). Within 0.2, and the same argmax past margins of 0.2; a wrong
// RoPE layout or a lost bias moves logits by whole units. (On the q8_0 weights of the test above the f32 sum's
// ~1e-3 relative change flips activation codes and moves logits by up to 0.66: no bound worth asserting.)
TEST(GpuLlm, F32AttentionSumFollowsTheCpu) {
  gpu::Device* device = testing::open_test_device();
  if (!device) GTEST_SKIP() << testing::gpu_skip_reason();
  const auto model = load_test_model("stories260K.gguf", Shape::Qwen2);
  ASSERT_TRUE(model);
  const LlamaWeights& w = model->weights;
  auto llm = gpu::LlmGpu::create(*device, w, 128, 0, {}, gpu::AttentionSum::F32);
  ASSERT_TRUE(llm.ok()) << llm.message();
  ASSERT_EQ((*llm)->attention_sum(), gpu::AttentionSum::F32);
  expect_gpu_follows_cpu(**llm, w, 128, 48, 0.2f);
}

TEST(GpuLlm, RefusesWhatItCannotRun) {
  gpu::Device* device = testing::open_test_device();
  if (!device) GTEST_SKIP() << testing::gpu_skip_reason();
  const std::vector<uint8_t> bytes = testing::read_fixture("llm/stories260K-q4_0.gguf");
  auto gguf = parse_gguf(bytes);
  ASSERT_TRUE(gguf.ok());
  auto weights = load_llama(*gguf);
  ASSERT_TRUE(weights.ok());
  auto llm = gpu::LlmGpu::create(*device, *weights, 4);
  ASSERT_TRUE(llm.ok()) << llm.message();
  for (int i = 0; i < 4; ++i) ASSERT_TRUE((*llm)->submit(1).ok());
  auto full = (*llm)->submit(1);
  ASSERT_FALSE(full.ok());
  EXPECT_NE(full.message().find("context of 4 positions is full"), std::string::npos) << full.message();
  EXPECT_FALSE((*llm)->submit(weights->hp.n_vocab).ok());
  LlamaWeights half_norms = *weights;
  std::vector<float> norm(static_cast<size_t>(half_norms.hp.head_dim_k), 1.0f);
  half_norms.layers[0].q_norm = norm.data();
  auto refused = gpu::LlmGpu::create(*device, half_norms, 16);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.message().find("q norm but no k norm"), std::string::npos) << refused.message();
  // A binding limit below one row of a matrix cannot be met by splitting.
  auto tiny = gpu::LlmGpu::create(*device, *weights, 16, 300);
  ASSERT_FALSE(tiny.ok());
  EXPECT_NE(tiny.message().find("exceeds the storage binding limit"), std::string::npos) << tiny.message();
}

// Matrices over the binding limit are split by rows (one dispatch per part; the embedding reads the part
// holding the token). With a 16000-byte limit stories260K's token table goes into 9 (F32) or 3 (Q8_0) buffers and its
// F32 matrices into 3: the same kernels do the same arithmetic, so the greedy tokens must be
// identical to the unsplit plan's (not merely close), and the plan must have more dispatches.
TEST(GpuLlm, SplitMatricesGiveTheSameTokens) {
  gpu::Device* device = testing::open_test_device();
  if (!device) GTEST_SKIP() << testing::gpu_skip_reason();
  for (const char* file : {"stories260K.gguf", "stories260K-q8_0.gguf"}) {
    const std::vector<uint8_t> bytes = testing::read_fixture(std::string("llm/") + file);
    auto gguf = parse_gguf(bytes);
    ASSERT_TRUE(gguf.ok()) << gguf.message();
    auto weights = load_llama(*gguf);
    ASSERT_TRUE(weights.ok()) << weights.message();
    auto whole = gpu::LlmGpu::create(*device, *weights, 64);
    ASSERT_TRUE(whole.ok()) << whole.message();
    auto split = gpu::LlmGpu::create(*device, *weights, 64, 16000);
    ASSERT_TRUE(split.ok()) << split.message();
    EXPECT_GT((*split)->dispatches_per_token(), (*whole)->dispatches_per_token()) << file;
    const std::vector<int32_t> prompt = {1, 403, 407, 261};
    EXPECT_EQ(gpu_greedy(**split, prompt, 24), gpu_greedy(**whole, prompt, 24)) << file;
  }
}

// The gemma3 path on stories260K-q8_0's weights made Gemma-3-shaped: random per-head q/k norms and post-norms,
// GeGLU, the sqrt(n_embd) embedding scale, q scaled after RoPE, local layers with a 4-position window and RoPE
// base 10000 between global ones with base 1e6. The GPU's logits must follow the CPU backend's on the same
// weights (whose gemma3 path is token for token llama.cpp's: tests/web/llm_real.test.mjs), teacher-forced,
// with the tolerances of the qwen2 test above and for the same reasons.
TEST(GpuLlm, Gemma3ShapeMatchesTheCpu) {
  gpu::Device* device = testing::open_test_device();
  if (!device) GTEST_SKIP() << testing::gpu_skip_reason();
  const auto model = load_test_model("gemma3");
  ASSERT_TRUE(model);
  const LlamaWeights& w = model->weights;
  auto llm = gpu::LlmGpu::create(*device, w, 64);
  ASSERT_TRUE(llm.ok()) << llm.message();
  std::printf("[ info    ] gemma3-shaped plan: %zu dispatches per token\n", (*llm)->dispatches_per_token());
  // How many positions stay within 1e-2 depends on the random norms (10 to 24 of 24 seen): q8_0 rounding of
  // activations scaled by norms up to 1.3 flips codes, so it is reported, not asserted.
  expect_gpu_follows_cpu(**llm, w, 64, 24, 0.5f);  // six times the window
  EXPECT_EQ(device->last_error(), "");
}

// The prompt plan (matrix x matrix over up to prompt_batch() tokens, causal attention over all of them) must
// leave the KV cache as a token-by-token run does: each prompt token's sums run in the decode kernels' order,
// so the logits after the prompt are the same numbers (to 1e-5: the one difference is the RMSNorm before q/k/v,
// fused into the decode kernel with a 128-wide sum of squares and a separate 256-wide dispatch for prompts, both
// ~48-bit sums rounded once, which can differ in the last bit), and so are 8 greedy tokens after it. Prompts of
// 36 random tokens on the stories260K files and the gemma3 shape (sliding window, GeGLU, post-norms), in one
// run of the plan and, with a small binding limit (16-token batches), in three (the last through the plan
// recorded for 8 tokens).
TEST(GpuLlm, PromptPlanGivesTheTokenByTokenLogits) {
  gpu::Device* device = testing::open_test_device();
  if (!device) GTEST_SKIP() << testing::gpu_skip_reason();
  std::mt19937 rng(static_cast<uint32_t>(testing::test_seed()));
  for (const char* file : {"stories260K.gguf", "stories260K-q8_0.gguf", "stories260K-q4_0.gguf", "gemma3"}) {
    const auto model = load_test_model(file);
    ASSERT_TRUE(model);
    const LlamaWeights& w = model->weights;
    std::vector<int32_t> prompt(36);
    std::uniform_int_distribution<int32_t> token(3, w.hp.n_vocab - 1);
    for (int32_t& t : prompt) t = token(rng);
    for (uint64_t max_binding : {uint64_t{0}, uint64_t{16000}}) {
      // Split matrices in the prompt plan: the F32 file splits the most (its token table into 9 buffers, its
      // matrices into 3; the quantized files only their tables). Gemma's GELU table alone is 128 KiB.
      if (max_binding && std::string(file) != "stories260K.gguf") continue;
      auto llm = gpu::LlmGpu::create(*device, w, 64, max_binding);
      ASSERT_TRUE(llm.ok()) << llm.message();
      gpu::LlmGpu& g = **llm;
      EXPECT_EQ(g.prompt_batch(), max_binding ? 16u : 64u) << file;
      // Plans for 8, 16, ... tokens: the 35 tokens below run as one 64-token run, or 16 + 16 + 3 (the 8-token plan).
      EXPECT_EQ(g.prompt_plan_sizes(),
                max_binding ? std::vector<uint32_t>({8, 16}) : std::vector<uint32_t>({8, 16, 32, 64}))
          << file;
      // The prompt token by token, then through the prompt plan; 8 greedy tokens after each (the logits after
      // the prompt, compared below, already depend on every row of the cache).
      auto run = [&](bool prompt_plan, std::vector<float>* logits) -> std::vector<int32_t> {
        g.reset();
        const auto head = std::span<const int32_t>(prompt).first(prompt.size() - 1);
        if (prompt_plan) {
          EXPECT_TRUE(g.submit_prompt(head).ok());
        } else {
          for (int32_t t : head) EXPECT_TRUE(g.submit(t).ok());
        }
        EXPECT_EQ(g.n_past(), static_cast<int>(head.size()));
        auto next = g.step(prompt.back());
        EXPECT_TRUE(next.ok()) << next.message();
        auto l = g.logits();
        EXPECT_TRUE(l.ok());
        if (!next.ok() || !l.ok()) return {};
        *logits = *l;
        std::vector<int32_t> ids = {*next};
        while (ids.size() < 8) {
          auto t = g.step(-1);
          if (!t.ok()) break;
          ids.push_back(*t);
        }
        return ids;
      };
      std::vector<float> logits_one_by_one, logits;
      const std::vector<int32_t> one_by_one = run(false, &logits_one_by_one);
      const std::vector<int32_t> batched = run(true, &logits);
      ASSERT_EQ(logits.size(), logits_one_by_one.size());
      float max_diff = 0;
      size_t identical = 0;
      for (size_t k = 0; k < logits.size(); ++k) {
        max_diff = std::max(max_diff, std::fabs(logits[k] - logits_one_by_one[k]));
        identical += logits[k] == logits_one_by_one[k] ? 1 : 0;
      }
      EXPECT_LE(max_diff, 1e-5f) << file << ", binding limit " << max_binding;
      EXPECT_EQ(batched, one_by_one) << file << ", binding limit " << max_binding;
      std::printf("[ info    ] %s, batch %u: %zu of %zu logits identical, max difference %g\n", file,
                  g.prompt_batch(), identical, logits.size(), max_diff);
    }
  }
  EXPECT_EQ(device->last_error(), "");
}

// Plan fusion (gpu/fusion.h): each layer's dispatches as one kernel with grid barriers gives the separate
// dispatches' logits bit for bit, token after token. One workgroup per fused dispatch is the case every
// adapter can run (the barrier is then trivial), so SwiftShader checks the rewriting of every kernel; with
// four, SwiftShader may not keep all resident, and then the load-time check must have turned fusion off.
TEST(GpuLlm, FusedLayersGiveTheLogitsOfSeparateDispatches) {
  gpu::Device* device = testing::open_test_device();
  if (!device) GTEST_SKIP() << testing::gpu_skip_reason();
  std::mt19937 rng(static_cast<uint32_t>(testing::test_seed()) + 7);
  for (const char* file : {"stories260K.gguf", "stories260K-q8_0.gguf", "stories260K-q4_0.gguf", "gemma3"}) {
    const auto model = load_test_model(file);
    ASSERT_TRUE(model);
    const LlamaWeights& w = model->weights;
    std::vector<int32_t> prompt(10);
    std::uniform_int_distribution<int32_t> token(3, w.hp.n_vocab - 1);
    for (int32_t& t : prompt) t = token(rng);
    for (uint32_t grid : {1u, 4u}) {
      // Four workgroups per fused dispatch on one file: how a phase's workgroups share its work and meet at the
      // barrier does not depend on the weight type (each type's rewriting is checked at grid 1).
      if (grid > 1 && std::string(file) != "stories260K-q4_0.gguf") continue;
      gpu::FusionOptions fusion;
      fusion.mode = gpu::FusionOptions::Mode::On;
      fusion.grid = grid;
      auto llm = gpu::LlmGpu::create(*device, w, 64, 0, fusion);
      ASSERT_TRUE(llm.ok()) << llm.message();
      gpu::LlmGpu& g = **llm;
      std::printf("[ info    ] %s, grid %u: fusion %s\n", file, grid, g.fusion_status().c_str());
      if (grid == 1) {
        ASSERT_TRUE(g.fused()) << file << ": " << g.fusion_status();
        // + the embedding, and the output head's dispatches each fused alone (FusionOptions::head_apart)
        g.set_fused(false);
        const std::vector<std::string>& names = g.plan_names();
        const size_t head =
            static_cast<size_t>(std::count_if(names.begin(), names.end(), [](const std::string& n) {
              return n == "output_norm" || n == "output" || n == "argmax";
            }));
        g.set_fused(true);
        EXPECT_GE(head, 2u) << file;
        EXPECT_EQ(g.dispatches_per_token(), 1 + static_cast<size_t>(w.hp.n_layer) + head) << file;
      }
      if (!g.fused()) continue;
      // The prompt token by token, then 8 greedy tokens, logits compared at every step.
      std::vector<std::vector<float>> fused_logits, plan_logits;
      const std::vector<int32_t> fused_ids = testing::prompt_then_greedy(g, true, prompt, 8, &fused_logits);
      // A barrier that gave up (SwiftShader need not keep 4 workgroups resident) turned fusion off and ran
      // those tokens again unfused: the results must not show it.
      std::printf("[ info    ] %s, grid %u, after decoding: fusion %s\n", file, grid,
                  g.fusion_status().c_str());
      const std::vector<int32_t> plan_ids = testing::prompt_then_greedy(g, false, prompt, 8, &plan_logits);
      EXPECT_EQ(fused_ids, plan_ids) << file << ", grid " << grid;
      ASSERT_EQ(fused_logits.size(), plan_logits.size());
      for (size_t k = 0; k < fused_logits.size(); ++k)
        EXPECT_EQ(fused_logits[k], plan_logits[k]) << file << ", grid " << grid << ", token " << k;
    }
  }
  EXPECT_EQ(device->last_error(), "");
}

// The fused plan runs a step ahead of the reads as the separate dispatches do (LlmGpu::decode_greedy): the
// same greedy tokens; and when a fused token fails (its failure flag raised, as a grid barrier that gives up
// raises it) while the next step is already submitted, the read reruns that token unfused, then the step ahead,
// and the tokens are still the separate dispatches'.
TEST(GpuLlm, FusedStepsAheadAndTheirRerunGiveTheSeparateTokens) {
  gpu::Device* device = testing::open_test_device();
  if (!device) GTEST_SKIP() << testing::gpu_skip_reason();
  const auto model = load_test_model("stories260K-q4_0.gguf");
  ASSERT_TRUE(model);
  const LlamaWeights& w = model->weights;
  std::mt19937 rng(static_cast<uint32_t>(testing::test_seed()) + 11);
  std::vector<int32_t> prompt(6);
  std::uniform_int_distribution<int32_t> token(3, w.hp.n_vocab - 1);
  for (int32_t& t : prompt) t = token(rng);
  gpu::FusionOptions fusion;
  fusion.mode = gpu::FusionOptions::Mode::On;
  fusion.grid = 1;  // every adapter keeps one workgroup resident
  auto llm = gpu::LlmGpu::create(*device, w, 64, 0, fusion);
  ASSERT_TRUE(llm.ok()) << llm.message();
  gpu::LlmGpu& g = **llm;
  ASSERT_TRUE(g.fused()) << g.fusion_status();
  auto start = [&](bool fused) -> int32_t {
    g.set_fused(fused);
    g.reset();
    for (size_t i = 0; i + 1 < prompt.size(); ++i) EXPECT_TRUE(g.submit(prompt[i]).ok());
    auto next = g.step(prompt.back());
    EXPECT_TRUE(next.ok()) << next.message();
    return next.ok() ? *next : -1;
  };
  std::vector<int32_t> plan_ids = {start(false)};
  ASSERT_TRUE(g.decode_greedy(6, &plan_ids, false).ok());
  std::vector<int32_t> ahead_ids = {start(true)};
  ASSERT_TRUE(g.decode_greedy(6, &ahead_ids, true).ok());
  EXPECT_TRUE(g.fused()) << g.fusion_status();
  EXPECT_EQ(ahead_ids, plan_ids);

  // By hand: token A submitted and its read started, token B submitted ahead of that read, A failed.
  std::vector<int32_t> ids = {start(true)};
  // The value a layer kernel's barrier leaves there: its barrier 3 gave up with 5 arrivals counted.
  ASSERT_TRUE(g.raise_fusion_flag(0x80000000u | (3u << 16) | 5u).ok());
  ASSERT_TRUE(g.submit(-1).ok());  // A
  ASSERT_TRUE(g.start_finish().ok());
  ASSERT_TRUE(g.submit(-1).ok());  // B, ahead
  int32_t t = -1;
  ASSERT_EQ(g.finish(&t), gpu::DeviceStatus::Ok) << device->last_error();
  ids.push_back(t);  // A, rerun unfused
  EXPECT_TRUE(g.fused()) << "one failed fused token leaves the plan fused";
  EXPECT_NE(
      g.fusion_status().find("gave up while decoding, 1 time (at its barrier 3 in the dispatch: 5 arrivals"),
      std::string::npos)
      << g.fusion_status();
  EXPECT_EQ(g.n_past(), static_cast<int>(prompt.size()) + 2);
  ASSERT_TRUE(g.start_finish().ok());
  ASSERT_EQ(g.finish(&t), gpu::DeviceStatus::Ok) << device->last_error();
  ids.push_back(t);  // B
  // Two more failures, a step each: the third turns the fused plan off.
  for (int k = 0; k < 2; ++k) {
    ASSERT_TRUE(g.fused()) << g.fusion_status();
    ASSERT_TRUE(g.raise_fusion_flag().ok());
    auto next = g.step(-1);
    ASSERT_TRUE(next.ok()) << next.message();
    ids.push_back(*next);
  }
  EXPECT_FALSE(g.fused()) << "the third failed fused token turns fusion off";
  EXPECT_EQ(g.fusion_status().rfind("off: a fused layer's grid barrier gave up while decoding, 3 times", 0),
            0u)
      << g.fusion_status();
  ASSERT_TRUE(g.decode_greedy(2, &ids, true).ok());
  EXPECT_EQ(ids, plan_ids);

  // The flag came down with the rerun: the fused plan turned back on (as the load-time timing does after a
  // round whose barrier gave up) decodes on, fused, rather than failing every token.
  std::vector<int32_t> again = {start(true)};
  ASSERT_TRUE(g.decode_greedy(6, &again, true).ok());
  EXPECT_TRUE(g.fused()) << g.fusion_status();
  EXPECT_EQ(again, plan_ids);
  EXPECT_EQ(device->last_error(), "");
}

// The subgroup reductions (gpu/kernels.h KernelFeatures::subgroups) promise the workgroup-memory trees' sums
// bit for bit: a device opened without subgroups gives the same logits, prompt plan and decode, as the shared
// one with them (SwiftShader has subgroups of 4, so both paths run here).
TEST(GpuLlm, SubgroupReductionsGiveTheSameLogits) {
  gpu::Device* device = testing::open_test_device();
  if (!device) GTEST_SKIP() << testing::gpu_skip_reason();
  if (!device->info().subgroups) GTEST_SKIP() << "the adapter lacks subgroups";
  gpu::DeviceOptions o;
  o.disable_subgroups = true;
  auto plain = gpu::open_device(o);  // a device of its own, closed at the end of the test
  ASSERT_TRUE(plain.ok()) << plain.message();
  ASSERT_FALSE((*plain)->info().subgroups);
  std::mt19937 rng(static_cast<uint32_t>(testing::test_seed()));
  for (const char* file : {"stories260K-q4_0.gguf", "gemma3"}) {
    const auto model = load_test_model(file);
    ASSERT_TRUE(model);
    const LlamaWeights& w = model->weights;
    std::vector<int32_t> prompt(20);
    std::uniform_int_distribution<int32_t> token(3, w.hp.n_vocab - 1);
    for (int32_t& t : prompt) t = token(rng);
    // The prompt through the prompt plan, then 8 greedy tokens; every step's logits.
    auto run = [&](gpu::Device& d) -> std::vector<float> {
      auto llm = gpu::LlmGpu::create(d, w, 32);
      EXPECT_TRUE(llm.ok()) << llm.message();
      if (!llm.ok()) return {};
      gpu::LlmGpu& g = **llm;
      EXPECT_TRUE(g.submit_prompt(std::span<const int32_t>(prompt).first(prompt.size() - 1)).ok());
      std::vector<float> all;
      int32_t next = prompt.back();
      for (int i = 0; i < 8; ++i) {
        auto t = g.step(next);
        auto l = g.logits();
        EXPECT_TRUE(t.ok() && l.ok());
        if (!t.ok() || !l.ok()) break;
        all.insert(all.end(), l->begin(), l->end());
        next = -1;  // fed back on the GPU
      }
      return all;
    };
    const std::vector<float> with = run(*device), without = run(**plain);
    ASSERT_EQ(with.size(), without.size()) << file;
    ASSERT_FALSE(with.empty()) << file;
    size_t differ = 0;
    for (size_t k = 0; k < with.size(); ++k) differ += std::memcmp(&with[k], &without[k], 4) != 0 ? 1 : 0;
    EXPECT_EQ(differ, 0u) << file << ": logits differing bit for bit of " << with.size();
  }
}

}  // namespace
}  // namespace sotto
