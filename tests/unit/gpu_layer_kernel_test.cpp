// The hand-written persistent layer kernels (models/llm/gpu/layer_kernel.h, FusionOptions::Mode::Layers) give the separate
// dispatches' (attention summing in f32) greedy tokens and logits within the load-time check's tolerance, in the
// llama and qwen2 shapes (RoPE in pairs and in halves, q/k/v biases), all layers in one dispatch or a few, token
// after token as the KV cache they write fills; models they
// do not handle keep the separate dispatches, saying why. SwiftShader runs them with one workgroup (no barrier
// to wait at); the H200 runs them on ~132 (bench/results/history-2026-12-03.md).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "core/half.h"
#include "core/quantize_ref.h"
#include "gpu_test_support.h"
#include "io/gguf.h"
#include "models/llm/gpu/layer_kernel.h"
#include "models/llm/gpu/llm_gpu.h"
#include "models/llm/llama.h"
#include "test_support.h"

namespace sotto {
namespace {

// stories260K-q8_0 with a hidden layer of 160 (its 172 is no multiple of 32, and its ffn_down is f16 for that):
// the first 160 rows of gate and up as they are, the first 160 columns of down quantized to q8_0; with `qwen2`,
// RoPE in halves and random q/k/v biases. With `k_quants`, the types of a Q4_K_M file of Qwen2.5-0.5B's widths
// instead: q and k requantized to q5_0 (v stays q8_0: q·k·v in two runs), a hidden layer of 256 (whole q8_K
// blocks) of fresh random gate and up in q5_0 and down in q6_K and q4_K in turn (kernels of two shapes).
struct KernelModel {
  std::vector<uint8_t> bytes;
  GgufFile gguf;
  LlamaWeights weights;
  std::vector<std::vector<uint8_t>> down;
  std::vector<std::vector<float>> biases;
};

// `rows` x `cols` of a random matrix (uniform in +-range) as type t, kept in *store.
Matrix random_matrix(DType t, int64_t rows, int64_t cols, float range, std::mt19937& rng,
                     std::vector<std::vector<uint8_t>>* store) {
  std::uniform_real_distribution<float> uniform(-range, range);
  std::vector<float> row(static_cast<size_t>(cols));
  const size_t row_bytes = static_cast<size_t>(dtype_bytes(t, cols).value_or(0));
  std::vector<uint8_t>& q = store->emplace_back(static_cast<size_t>(rows) * row_bytes);
  for (int64_t r = 0; r < rows; ++r) {
    for (float& v : row) v = uniform(rng);
    quantize_row_ref(t, row.data(), q.data() + static_cast<size_t>(r) * row_bytes, cols);
  }
  return Matrix{t, q.data(), rows, cols};
}

// A matrix requantized to type t, kept in *store.
Matrix requantized(const Matrix& m, DType t, std::vector<std::vector<uint8_t>>* store) {
  std::vector<float> row(static_cast<size_t>(m.cols));
  const size_t src_bytes = static_cast<size_t>(dtype_bytes(m.dtype, m.cols).value_or(0));
  const size_t row_bytes = static_cast<size_t>(dtype_bytes(t, m.cols).value_or(0));
  std::vector<uint8_t>& q = store->emplace_back(static_cast<size_t>(m.rows) * row_bytes);
  for (int64_t r = 0; r < m.rows; ++r) {
    dequantize_row_ref(m.dtype, static_cast<const uint8_t*>(m.data) + static_cast<size_t>(r) * src_bytes,
                       row.data(), m.cols);
    quantize_row_ref(t, row.data(), q.data() + static_cast<size_t>(r) * row_bytes, m.cols);
  }
  return Matrix{t, q.data(), m.rows, m.cols};
}

std::unique_ptr<KernelModel> kernel_model(bool qwen2, bool k_quants = false) {
  auto m = std::make_unique<KernelModel>();
  m->bytes = testing::read_fixture("llm/stories260K-q8_0.gguf");
  auto gguf = parse_gguf(m->bytes);
  if (!gguf.ok()) return nullptr;
  m->gguf = std::move(gguf).value();
  auto weights = load_llama(m->gguf);
  if (!weights.ok()) return nullptr;
  m->weights = std::move(weights).value();
  LlamaWeights& w = m->weights;
  constexpr int64_t kFf = 160;
  std::mt19937 rng(static_cast<uint32_t>(testing::test_seed()) + 11);
  std::uniform_real_distribution<float> uniform(-0.2f, 0.2f);
  for (LlamaLayer& l : w.layers) {
    if (l.ffn_down.dtype != DType::F16 || l.ffn_gate.dtype != DType::Q8_0) return nullptr;
    if (k_quants) {
      constexpr int64_t kFfK = 256;
      const int64_t d = w.hp.n_embd;
      l.wq = requantized(l.wq, DType::Q5_0, &m->down);
      l.wk = requantized(l.wk, DType::Q5_0, &m->down);
      l.ffn_gate = random_matrix(DType::Q5_0, kFfK, d, 0.3f, rng, &m->down);
      l.ffn_up = random_matrix(DType::Q5_0, kFfK, d, 0.3f, rng, &m->down);
      const DType down = (&l - w.layers.data()) % 2 == 0 ? DType::Q6_K : DType::Q4_K;
      l.ffn_down = random_matrix(down, d, kFfK, 0.1f, rng, &m->down);
    } else {
      l.ffn_gate.rows = kFf;
      l.ffn_up.rows = kFf;
      const int64_t rows = l.ffn_down.rows, cols = l.ffn_down.cols;
      std::vector<uint8_t>& q = m->down.emplace_back(static_cast<size_t>(rows * (kFf / 32) * 34));
      std::vector<float> row(kFf);
      for (int64_t r = 0; r < rows; ++r) {
        const auto* src = static_cast<const uint16_t*>(l.ffn_down.data) + r * cols;
        for (int64_t c = 0; c < kFf; ++c) row[static_cast<size_t>(c)] = f16_to_f32(src[c]);
        quantize_row_ref(DType::Q8_0, row.data(), q.data() + r * (kFf / 32) * 34, kFf);
      }
      l.ffn_down = Matrix{DType::Q8_0, q.data(), rows, kFf};
    }
    if (qwen2) {
      const size_t q_dim = static_cast<size_t>(w.hp.n_head * w.hp.head_dim_k);
      const size_t kv_dim = static_cast<size_t>(w.hp.n_head_kv * w.hp.head_dim_k);
      for (size_t n : {q_dim, kv_dim, kv_dim}) {
        m->biases.emplace_back(n);
        for (float& b : m->biases.back()) b = uniform(rng);
      }
      l.bq = m->biases[m->biases.size() - 3].data();
      l.bk = m->biases[m->biases.size() - 2].data();
      l.bv = m->biases[m->biases.size() - 1].data();
    }
  }
  w.hp.n_ff = static_cast<int>(k_quants ? 256 : kFf);
  if (qwen2) {
    w.hp.arch = "qwen2";
    w.hp.rope_layout = RopeLayout::Halves;
  }
  return m;
}

TEST(GpuLayerKernel, GivesTheSeparateDispatchesTokens) {
  gpu::Device* device = testing::open_test_device();
  if (!device) GTEST_SKIP() << testing::gpu_skip_reason();
  struct Case {
    bool qwen2, k_quants;
    gpu::AttentionSum sum;
    uint32_t per_dispatch = 0;  // layers a dispatch runs at most (0: all five)
  };
  // The last case splits the five layers 2 + 2 + 1 (as the layers of a model too large for one weight buffer
  // are), its dispatches of two kinds each (down in q6_K and q4_K).
  for (const Case& c :
       {Case{false, false, gpu::AttentionSum::F16}, Case{false, false, gpu::AttentionSum::F32},
        Case{true, false, gpu::AttentionSum::F16}, Case{true, false, gpu::AttentionSum::F32},
        Case{true, true, gpu::AttentionSum::F32}, Case{true, true, gpu::AttentionSum::F32, 2}}) {
    const bool qwen2 = c.qwen2;
    const gpu::AttentionSum sum = c.sum;
    const auto model = kernel_model(qwen2, c.k_quants);
    ASSERT_TRUE(model) << "stories260K-q8_0.gguf is not as this test expects";
    const LlamaWeights& w = model->weights;
    gpu::FusionOptions fusion;
    fusion.mode = gpu::FusionOptions::Mode::Layers;
    fusion.check_tokens = 4;
    fusion.layers_per_dispatch = c.per_dispatch;
    auto llm = gpu::LlmGpu::create(*device, w, 96, 0, fusion, sum);
    ASSERT_TRUE(llm.ok()) << llm.message();
    gpu::LlmGpu& g = **llm;
    std::printf("[ info    ] %s shape%s, %s sum%s: fusion %s\n", qwen2 ? "qwen2" : "llama",
                c.k_quants ? " (q5_0, q8_0, q4_K, q6_K)" : "", sum == gpu::AttentionSum::F16 ? "f16" : "f32",
                c.per_dispatch ? ", 2 layers a dispatch" : "", g.fusion_status().c_str());
    ASSERT_TRUE(g.fused()) << g.fusion_status();
    g.set_fused(false);
    const size_t separate = g.dispatches_per_token();
    g.set_fused(true);
    // The embedding, the layers' dispatches, the one writing their new k and v rows, the output head's (norm,
    // matrix, argmax).
    const size_t layer_dispatches = c.per_dispatch ? (w.hp.n_layer + c.per_dispatch - 1) / c.per_dispatch : 1;
    EXPECT_LT(g.dispatches_per_token(), separate);
    EXPECT_LE(g.dispatches_per_token(), layer_dispatches + 6);
    // The kernels sum attention in f32; a model made with the f16 sum checks them at load against its
    // separate dispatches recorded with the f32 sum (passed: fused() above), and its own separate dispatches
    // differ from them by a few 1e-2 of the logits' scale: compared below on the f32 model only.
    if (sum == gpu::AttentionSum::F16) continue;

    // A prompt token by token, then greedy tokens past the first chunks of 32 keys (so attention combines
    // several chunks and reads cache rows the kernels wrote), logits compared at every step.
    std::mt19937 rng(static_cast<uint32_t>(testing::test_seed()) + (qwen2 ? 5 : 3));
    std::uniform_int_distribution<int32_t> token(3, w.hp.n_vocab - 1);
    std::vector<int32_t> prompt(12);
    for (int32_t& t : prompt) t = token(rng);
    std::vector<std::vector<float>> kernel_logits, plan_logits;
    const std::vector<int32_t> kernel_ids = testing::prompt_then_greedy(g, true, prompt, 60, &kernel_logits);
    const std::vector<int32_t> plan_ids = testing::prompt_then_greedy(g, false, prompt, 60, &plan_logits);
    ASSERT_EQ(kernel_logits.size(), plan_logits.size());
    // The same tokens up to the first near-tie of the separate plan's logits (attention's f32 sum against its
    // f16 one moves logits by ~1e-3 of their scale, and a q8_0 code of an activation downstream with them);
    // the logits, while the tokens are the same, within the load check's 5e-2 of their scale (equal here).
    for (size_t k = 0; k < plan_ids.size(); ++k) {
      const std::vector<float>& e = plan_logits[k];
      const std::vector<float>& got = kernel_logits[k];
      float scale = 1.0f, diff = 0.0f;
      for (size_t i = 0; i < e.size(); ++i) {
        scale = std::max(scale, std::abs(e[i]));
        diff = std::max(diff, std::abs(got[i] - e[i]));
      }
      EXPECT_LE(diff, 5e-2f * scale) << "token " << k;
      if (kernel_ids[k] == plan_ids[k]) continue;
      std::vector<float> sorted = e;
      std::partial_sort(sorted.begin(), sorted.begin() + 2, sorted.end(), std::greater<float>());
      EXPECT_LT(sorted[0] - sorted[1], 0.1f * scale) << "token " << k << " differs without a near-tie";
      break;
    }
  }
  EXPECT_EQ(device->last_error(), "");
}

// Past 256 positions attention has more chunks of 32 keys than the wo phase combines at a time (stage_attention's
// CB, 8): after a prompt of 270 tokens (through the prompt plan, filling the cache), the kernels' logits are the
// separate dispatches' for the next tokens, within the load check's 5e-2 of their scale.
TEST(GpuLayerKernel, CombinesManyAttentionChunks) {
  gpu::Device* device = testing::open_test_device();
  if (!device) GTEST_SKIP() << testing::gpu_skip_reason();
  const auto model = kernel_model(true);
  ASSERT_TRUE(model) << "stories260K-q8_0.gguf is not as this test expects";
  const LlamaWeights& w = model->weights;
  gpu::FusionOptions fusion;
  fusion.mode = gpu::FusionOptions::Mode::Layers;
  fusion.check_tokens = 2;
  auto llm = gpu::LlmGpu::create(*device, w, 288, 0, fusion, gpu::AttentionSum::F32);
  ASSERT_TRUE(llm.ok()) << llm.message();
  gpu::LlmGpu& g = **llm;
  ASSERT_TRUE(g.fused()) << g.fusion_status();
  std::mt19937 rng(static_cast<uint32_t>(testing::test_seed()) + 7);
  std::uniform_int_distribution<int32_t> token(3, w.hp.n_vocab - 1);
  std::vector<int32_t> prompt(270);
  for (int32_t& t : prompt) t = token(rng);
  auto run = [&](bool fused) {
    g.set_fused(fused);
    g.reset();
    std::vector<std::vector<float>> logits;
    EXPECT_TRUE(g.submit_prompt(std::span(prompt).first(prompt.size() - 1)).ok());
    auto next = g.step(prompt.back());
    for (int k = 0; k < 3 && next.ok(); ++k) {
      auto l = g.logits();
      EXPECT_TRUE(l.ok());
      if (l.ok()) logits.push_back(*l);
      next = g.step(*next);
    }
    EXPECT_TRUE(next.ok()) << next.message();
    return logits;
  };
  const std::vector<std::vector<float>> kernel = run(true), plan = run(false);
  ASSERT_EQ(kernel.size(), 3u);
  ASSERT_EQ(plan.size(), 3u);
  for (size_t k = 0; k < plan.size(); ++k) {
    float scale = 1.0f, diff = 0.0f;
    for (size_t i = 0; i < plan[k].size(); ++i) {
      scale = std::max(scale, std::abs(plan[k][i]));
      diff = std::max(diff, std::abs(kernel[k][i] - plan[k][i]));
    }
    std::printf("[ info    ] position %zu: logits within %g of their scale\n", prompt.size() + k,
                diff / scale);
    EXPECT_LE(diff, 5e-2f * scale) << "token " << k;
  }
  EXPECT_EQ(device->last_error(), "");
}

// At Qwen2.5-0.5B's shape on the H200's grid (132 workgroups), each matrix phase loads its first weights while
// its workgroup waits at the grid barrier before it: Q4_0's four, and Q4_K_M's kinds' but q·k·v in two runs
// (whose types differ by row); no_fetch fetches none. (That the fetched words give the unfetched
// sums is GivesTheSeparateDispatchesTokens' check: its grid of one takes several rounds a phase, the first from
// the fetched words.)
TEST(GpuLayerKernel, PhasesFetchTheirWeightsDuringTheBarrier) {
  gpu::LayerKernelShape s;
  s.grid = 132;
  s.d = 896;
  s.n_head = 14;
  s.n_kv = 2;
  s.hd = s.n_rot = 64;
  s.ff = 4864;
  s.n_ctx = 1024;
  s.rope_halves = true;
  s.n_layers = s.row_slots = 24;
  gpu::LayerKernelTypes q4_0;  // words a row: 28 (or 152) blocks of 5
  q4_0.qkv_words = q4_0.wo_words = q4_0.gate_words = 28 * 5;
  q4_0.down_words = 152 * 5;
  q4_0.bias = true;
  gpu::LayerKernelTypes q4_k_m;  // q and k q5_0, v q8_0; wo, gate, up q5_0; down q6_K (or q4_K)
  q4_k_m.qkv = q4_k_m.wo = q4_k_m.gate = DType::Q5_0;
  q4_k_m.qkv_words = q4_k_m.wo_words = q4_k_m.gate_words = 28 * 6;
  q4_k_m.qkv_run1_rows = 1024;
  q4_k_m.qkv2 = DType::Q8_0;
  q4_k_m.qkv2_words = 28 * 9;
  q4_k_m.down = DType::Q6_K;
  q4_k_m.down_words = 19 * 53;
  q4_k_m.bias = true;
  gpu::LayerKernelTypes q4_k_m_q4_k = q4_k_m;
  q4_k_m_q4_k.down = DType::Q4_K;
  q4_k_m_q4_k.down_words = 19 * 36;
  const gpu::KernelFeatures f{.packed_dot = true, .subgroups = true, .f16 = false};
  auto fetched = [&](const std::string& src, const std::string& phase) {
    return src.find(phase + "_fetch();") != std::string::npos;
  };

  s.kinds = {q4_0};
  std::string src = gpu::wgsl_layer_kernel(s, f);
  for (const char* phase : {"mv_qkv_0", "mv_wo_0", "mv_gate_up_0", "mv_down_0"})
    EXPECT_TRUE(fetched(src, phase)) << phase;
  s.no_fetch = true;
  src = gpu::wgsl_layer_kernel(s, f);
  EXPECT_EQ(src.find("_fetch();"), std::string::npos);

  s.no_fetch = false;
  s.kinds = {q4_k_m, q4_k_m_q4_k};
  src = gpu::wgsl_layer_kernel(s, f);
  EXPECT_FALSE(fetched(src, "mv_qkv_0"));
  for (const char* phase : {"mv_wo_0", "mv_gate_up_0", "mv_down_0", "mv_down_1"})
    EXPECT_TRUE(fetched(src, phase)) << phase;
}

// Models the kernels do not handle (an f16 matrix here, caches over a binding) keep the separate dispatches and
// say why.
TEST(GpuLayerKernel, RefusesWhatItDoesNotHandle) {
  gpu::Device* device = testing::open_test_device();
  if (!device) GTEST_SKIP() << testing::gpu_skip_reason();
  const std::vector<uint8_t> bytes = testing::read_fixture("llm/stories260K-q8_0.gguf");
  auto gguf = parse_gguf(bytes);
  ASSERT_TRUE(gguf.ok()) << gguf.message();
  auto weights = load_llama(*gguf);
  ASSERT_TRUE(weights.ok()) << weights.message();
  gpu::FusionOptions fusion;
  fusion.mode = gpu::FusionOptions::Mode::Layers;
  // A model made with these fusion options keeps the separate dispatches, saying `why`, and decodes.
  auto expect_refused = [&](const LlamaWeights& w, int n_ctx, uint64_t max_binding, const std::string& why) {
    auto llm = gpu::LlmGpu::create(*device, w, n_ctx, max_binding, fusion);
    ASSERT_TRUE(llm.ok()) << llm.message();
    EXPECT_FALSE((*llm)->fused());
    EXPECT_NE((*llm)->fusion_status().find(why), std::string::npos) << (*llm)->fusion_status();
    auto next = (*llm)->step(1);
    EXPECT_TRUE(next.ok()) << next.message();
  };
  expect_refused(*weights, 64, 0, "weights of type f16");
  // KV caches too large for one binding together (the kernels read every layer's through one) stay a buffer per
  // layer, and the separate dispatches decode: 5 layers' k caches of 4,096 positions are 1.25 MiB.
  const auto model = kernel_model(false);
  ASSERT_TRUE(model) << "stories260K-q8_0.gguf is not as this test expects";
  expect_refused(model->weights, 4096, 512 * 1024, "KV caches");
}

}  // namespace
}  // namespace sotto
