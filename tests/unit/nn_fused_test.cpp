// linear_int8_fused (nn/fused.h): its scalar reference against the separate CPU ops it fuses (layer_norm,
// linear_int8_affine per segment, rope, silu, mul, add), then the GPU kernel (SwiftShader in CI, skipped with
// the reason where this machine has no WebGPU) against the reference, on fresh random inputs of odd sizes:
// K a multiple of 4 (the kernel's word loop) and not (its byte loop), every option alone and together. Then
// attention_int8_fused, attention_partials and greedy_step on the GPU against their references.
#include "gpu/device.h"
#include "gpu_test_support.h"
#include "nn/fused.h"
#include "nn_test_support.h"

namespace sotto::nn {
namespace {

using testing::download;
using testing::expect_close;
using testing::floats;
using testing::rand_int;
using testing::rand_int8;
using testing::rand_tensor;
using testing::upload;

Tensor upload_raw(Context& gpu, const Tensor& cpu) {
  return gpu.from_bytes(cpu.shape(), cpu.dtype(), {cpu.data<uint8_t>(), static_cast<size_t>(cpu.bytes())});
}

float rand_scale() {
  return 0.003f + 0.02f * static_cast<float>(rand_int(0, 100)) / 100.0f;
}
float rand_offset() {
  return 0.3f * static_cast<float>(rand_int(-100, 100)) / 100.0f;
}

// One random case: sizes and which options are on.
struct Case {
  int64_t m, k, n;
  Int8LinearFused f;
  Tensor x;
};

Case make_case(Context& cpu, bool word_k, int kind) {
  Case c;
  c.m = rand_int(1, 3);
  c.k = word_k ? 4 * rand_int(1, 60) : 4 * rand_int(0, 60) + rand_int(1, 3);
  c.x = rand_tensor(cpu, {c.m, c.k}, -2.0f, 2.0f);
  Int8LinearFused& f = c.f;
  if (kind == 0) {  // norm, bias, residual, 2 segments
    c.n = rand_int(2, 90);
    f.segment = (c.n + 1) / 2;
    f.norm_gamma = rand_tensor(cpu, {c.k}, 0.5f, 1.5f);
    f.bias = rand_tensor(cpu, {c.n});
    f.residual = rand_tensor(cpu, {c.m, c.n});
  } else if (kind == 1) {  // gated SiLU with norm and bias (the up projection)
    c.n = 2 * rand_int(1, 45);
    f.norm_gamma = rand_tensor(cpu, {c.k}, 0.5f, 1.5f);
    f.bias = rand_tensor(cpu, {c.n});
    f.gated_silu = true;
    f.residual = rand_tensor(cpu, {c.m, c.n / 2});
  } else {  // stacked q/k/v: norm, rope on q and k, k and v appended to a cache
    f.head_dim = 2 * static_cast<int>(rand_int(2, 9));
    f.rotary_dim = 2 * static_cast<int>(rand_int(1, f.head_dim / 2));
    const int64_t heads = rand_int(1, 3), d = heads * f.head_dim;
    c.n = 3 * d;
    f.segment = d;
    f.norm_gamma = rand_tensor(cpu, {c.k}, 0.5f, 1.5f);
    f.rope_columns = 2 * d;
    f.position0 = rand_int(0, 3000);
    const int64_t rows = c.m + rand_int(0, 4);
    f.cache_row = rows - c.m - rand_int(0, rows - c.m);
    f.cache_k = rand_tensor(cpu, {rows, d});
    f.cache_v = rand_tensor(cpu, {rows, d});
  }
  f.w = rand_int8(cpu, {c.n, c.k}, DType::I8);
  for (size_t s = 0; s < 4; ++s) {
    f.scale[s] = rand_scale();
    f.offset[s] = rand_offset();
  }
  return c;
}

// The fused op by the separate CPU ops, in the same order.
Tensor composed(const Tensor& x, const Int8LinearFused& f) {
  const int64_t n = f.w.dim(0), k = f.w.dim(1), segment = f.segment > 0 ? f.segment : n;
  Tensor h = f.norm_gamma.defined() ? ref::layer_norm(x, f.norm_gamma, {}, f.norm_eps) : x;
  std::vector<Tensor> parts;
  for (int64_t s = 0; s * segment < n; ++s) {
    const int64_t rows = std::min(segment, n - s * segment);
    const Tensor ws = x.ctx().from_bytes(
        {rows, k}, DType::I8, {f.w.data<uint8_t>() + s * segment * k, static_cast<size_t>(rows * k)});
    parts.push_back(
        ref::linear_int8_affine(h, ws, f.scale[static_cast<size_t>(s)], f.offset[static_cast<size_t>(s)]));
  }
  Tensor y = parts.size() == 1 ? parts[0] : concat(parts, -1);
  if (f.bias.defined()) y = ref::binary(y, f.bias, '+');
  if (f.rope_columns > 0) {
    const Tensor roped =
        ref::rope(slice(y, -1, 0, f.rope_columns), static_cast<int>(f.rope_columns / f.head_dim),
                  f.rotary_dim, f.rope_base, f.position0, true);
    const Tensor rest[] = {roped, slice(y, -1, f.rope_columns, n)};
    y = f.rope_columns < n ? concat(rest, -1) : roped;
  }
  if (f.gated_silu)
    y = ref::binary(slice(y, -1, 0, n / 2), ref::activation(slice(y, -1, n / 2, n), Act::Silu), '*');
  if (f.cache_k.defined()) {
    // The rows the op writes into the caches, returned after the output for the caller to compare.
    const Tensor all[] = {slice(y, -1, 0, segment), slice(y, -1, segment, 2 * segment),
                          slice(y, -1, 2 * segment, 3 * segment)};
    return concat(all, 0);
  }
  if (f.residual.defined()) y = ref::binary(y, f.residual, '+');
  return y;
}

float tolerance(int64_t k) {
  return 4e-6f * static_cast<float>(std::sqrt(static_cast<double>(k)) + 1.0) * 6.0f;
}

TEST(NnFused, ReferenceMatchesTheSeparateOps) {
  auto cpu = Context::cpu();
  for (int kind = 0; kind < 3; ++kind)
    for (bool word_k : {true, false}) {
      Case c = make_case(*cpu, word_k, kind);
      const std::vector<float> k_before = c.f.cache_k.defined() ? floats(c.f.cache_k) : std::vector<float>();
      const Tensor want = composed(c.x, c.f);
      const Tensor got = linear_int8_fused(c.x, c.f);
      const std::string what = "fused reference, kind " + std::to_string(kind);
      if (!c.f.cache_k.defined()) {
        expect_close(got, want, tolerance(c.k), 1e-5f, what);
        continue;
      }
      const int64_t d = c.f.segment;
      expect_close(got, slice(want, 0, 0, c.m), tolerance(c.k), 1e-5f, what + " q");
      expect_close(slice(c.f.cache_k, 0, c.f.cache_row, c.f.cache_row + c.m), slice(want, 0, c.m, 2 * c.m),
                   tolerance(c.k), 1e-5f, what + " k cache");
      expect_close(slice(c.f.cache_v, 0, c.f.cache_row, c.f.cache_row + c.m),
                   slice(want, 0, 2 * c.m, 3 * c.m), tolerance(c.k), 1e-5f, what + " v cache");
      // Rows outside the appended ones are untouched.
      const std::vector<float> k_after = floats(c.f.cache_k);
      for (int64_t r = 0; r < c.f.cache_k.dim(0); ++r)
        if (r < c.f.cache_row || r >= c.f.cache_row + c.m)
          for (int64_t j = 0; j < d; ++j) EXPECT_EQ(k_after[r * d + j], k_before[r * d + j]) << "row " << r;
    }
}

TEST(NnFused, GpuMatchesTheReference) {
  gpu::Device* device = sotto::testing::open_test_device();
  if (!device) GTEST_SKIP() << sotto::testing::gpu_skip_reason();
  auto cpu = Context::cpu();
  auto gpu = Context::webgpu(*device);
  for (int kind = 0; kind < 4; ++kind)
    for (bool word_k : {true, false}) {
      Case c = make_case(*cpu, word_k, kind % 3);
      if (kind == 3) {  // the plain product: no option at all
        // Long rows (64 threads a row in the kernel), bytes or words.
        c.k = word_k ? 4 * rand_int(256, 300) : 4 * rand_int(256, 300) + rand_int(1, 3);
        c.x = rand_tensor(*cpu, {c.m, c.k}, -2.0f, 2.0f);
        Int8LinearFused plain;
        plain.w = rand_int8(*cpu, {c.n, c.k}, DType::I8);
        plain.scale = c.f.scale;
        plain.offset = c.f.offset;
        c.f = plain;
      }
      const Int8LinearFused& f = c.f;
      Int8LinearFused g = f;
      auto up = [&](const Tensor& t) { return t.defined() ? upload(*gpu, t) : Tensor(); };
      g.w = upload_raw(*gpu, f.w);
      g.norm_gamma = up(f.norm_gamma);
      g.bias = up(f.bias);
      g.residual = up(f.residual);
      g.cache_k = up(f.cache_k);
      g.cache_v = up(f.cache_v);
      const Tensor got = download(*cpu, *gpu, linear_int8_fused(upload(*gpu, c.x), g));
      const Tensor want = ref::linear_int8_fused(c.x, f);  // writes the CPU caches' rows
      const std::string what = "gpu fused, kind " + std::to_string(kind);
      expect_close(got, want, tolerance(c.k), 1e-5f, what);
      if (f.cache_k.defined()) {
        expect_close(download(*cpu, *gpu, g.cache_k), f.cache_k, tolerance(c.k), 1e-5f, what + " k cache");
        expect_close(download(*cpu, *gpu, g.cache_v), f.cache_v, tolerance(c.k), 1e-5f, what + " v cache");
      }
    }
}

// Attention partials combined inside the product (a decoder step's cross-attention and cross o product): on the
// GPU, attention_partials then linear_int8_fused with x_blocks, against the CPU's attention then the reference
// product, on random heads of 4k dims (the vec4 kernel's) over 65-300 keys (2-5 blocks of 64), with a residual.
TEST(NnFused, GpuCombinesAttentionPartialsInTheProduct) {
  gpu::Device* device = sotto::testing::open_test_device();
  if (!device) GTEST_SKIP() << sotto::testing::gpu_skip_reason();
  auto cpu = Context::cpu();
  auto gpu = Context::webgpu(*device);
  for (int trial = 0; trial < 3; ++trial) {
    const int64_t heads = rand_int(1, 8), head_dim = 4 * rand_int(1, 16), d = heads * head_dim;
    const int64_t tq = rand_int(1, 2), tk = rand_int(65, 300), n = rand_int(3, 70);
    const Tensor q = rand_tensor(*cpu, {tq, d}, -2.0f, 2.0f), k = rand_tensor(*cpu, {tk, d}, -2.0f, 2.0f),
                 v = rand_tensor(*cpu, {tk, d});
    Int8LinearFused f;
    f.w = rand_int8(*cpu, {n, d}, DType::I8);
    f.scale[0] = rand_scale();
    f.offset[0] = rand_offset();
    f.residual = rand_tensor(*cpu, {tq, n});
    const AttentionOptions o{.n_heads = static_cast<int>(heads)};
    const Tensor want = ref::linear_int8_fused(ref::attention(q, k, v, o), f);

    Int8LinearFused g = f;
    g.w = upload_raw(*gpu, f.w);
    g.residual = upload(*gpu, f.residual);
    g.x_heads = heads;
    const Tensor part = attention_partials(upload(*gpu, q), upload(*gpu, k), upload(*gpu, v), o, &g.x_blocks);
    EXPECT_EQ(g.x_blocks, (tk + 63) / 64);
    EXPECT_EQ(part.elements(), tq * heads * g.x_blocks * (head_dim + 2));
    const Tensor got = download(*cpu, *gpu, linear_int8_fused(part, g));
    expect_close(got, want, tolerance(d) * 4, 1e-4f,
                 "combined partials, " + std::to_string(heads) + " heads of " + std::to_string(head_dim) +
                     ", " + std::to_string(tk) + " keys");
    // The reference's own combine agrees with the CPU's attention.
    Int8LinearFused c = f;
    c.x_heads = heads;
    c.x_blocks = g.x_blocks;
    expect_close(ref::linear_int8_fused(download(*cpu, *gpu, part), c), want, tolerance(d) * 4, 1e-4f,
                 "reference combine");
  }
}

// attention_int8_fused on the GPU (one dispatch: the projection recomputed per head and key block, then the
// attention) against its reference (linear_int8_fused's, then ref::attention), on fresh random inputs: self-
// attention (stacked q/k/v, norm, rope, the new row appended to caches of up to 150 rows: one block or several)
// and cross-attention (q only, 1-300 encoder keys), partials combined by the reference's combine. Weights are
// scaled so that scores stay within ~+-30 (softmax then weighs several keys: f32 rounding in a score is not
// amplified past the tolerance). Then the stop word: set, the caches stay as they were.
TEST(NnFused, GpuAttentionWithItsProjectionMatchesTheReference) {
  gpu::Device* device = sotto::testing::open_test_device();
  if (!device) GTEST_SKIP() << sotto::testing::gpu_skip_reason();
  auto cpu = Context::cpu();
  auto gpu = Context::webgpu(*device);
  for (int trial = 0; trial < 8; ++trial) {
    const bool self = trial % 2 == 0, stopped = trial == 6;
    const int64_t heads = rand_int(1, 4), hd = 4 * rand_int(1, 16), d = heads * hd, k = 16 * rand_int(1, 64);
    Int8AttentionFused f;
    f.n_heads = heads;
    Int8LinearFused& p = f.proj;
    p.w = rand_int8(*cpu, {(self ? 3 : 1) * d, k}, DType::I8);
    for (size_t s = 0; s < 4; ++s) {
      p.scale[s] = (0.2f + 0.8f * static_cast<float>(rand_int(0, 100)) / 100.0f) / static_cast<float>(k);
      p.offset[s] = 0.01f * static_cast<float>(rand_int(-100, 100)) / 100.0f;
    }
    p.norm_gamma = rand_tensor(*cpu, {k}, 0.5f, 1.5f);
    p.norm_eps = 1e-5f;
    int64_t tk = 0;
    if (self) {
      const int64_t rows = rand_int(1, 150);
      p.segment = d;
      p.cache_row = rand_int(0, rows - 1);
      p.cache_k = rand_tensor(*cpu, {rows, d}, -2.0f, 2.0f);
      p.cache_v = rand_tensor(*cpu, {rows, d});
      p.rope_columns = 2 * d;
      p.head_dim = static_cast<int>(hd);
      p.rotary_dim = 2 * static_cast<int>(rand_int(1, hd / 2));
      p.position0 = p.cache_row;
      tk = p.cache_row + 1;
    } else {
      tk = rand_int(1, 300);
      f.k = rand_tensor(*cpu, {tk, d}, -2.0f, 2.0f);
      f.v = rand_tensor(*cpu, {tk, d});
    }
    const Tensor x = rand_tensor(*cpu, {1, k}, -2.0f, 2.0f);
    auto up = [&](const Tensor& t) { return t.defined() ? upload(*gpu, t) : Tensor(); };
    Int8AttentionFused g = f;
    g.proj.w = upload_raw(*gpu, p.w);
    g.proj.norm_gamma = up(p.norm_gamma);
    g.proj.cache_k = up(p.cache_k);
    g.proj.cache_v = up(p.cache_v);
    g.k = up(f.k);
    g.v = up(f.v);
    const int32_t word = stopped ? kGreedyEnded : 0;
    g.proj.stop = gpu->from_bytes({1}, DType::I32, {reinterpret_cast<const uint8_t*>(&word), 4});
    const std::vector<float> k_before = self ? floats(p.cache_k) : std::vector<float>();
    int64_t blocks = -1;
    const Tensor out = attention_int8_fused(upload(*gpu, x), g, &blocks);
    const Tensor raw = download(*cpu, *gpu, out);
    const std::string what = std::string(self ? "self" : "cross") + ", " + std::to_string(heads) +
                             " heads of " + std::to_string(hd) + ", K " + std::to_string(k) + ", " +
                             std::to_string(tk) + " keys";
    EXPECT_EQ(blocks, tk > 64 ? (tk + 63) / 64 : 0) << what;
    if (stopped) {
      EXPECT_EQ(floats(download(*cpu, *gpu, g.proj.cache_k)), k_before) << what;
      continue;
    }
    const Tensor got = blocks > 1 ? ref::combine_partials(raw, heads, blocks, d) : raw;
    const Tensor want = ref::attention_int8_fused(x, f);  // writes the CPU caches' rows
    expect_close(got, want, 2e-4f, 2e-4f, what);
    if (self) {
      expect_close(download(*cpu, *gpu, g.proj.cache_k), p.cache_k, tolerance(k), 1e-5f, what + " k cache");
      expect_close(download(*cpu, *gpu, g.proj.cache_v), p.cache_v, tolerance(k), 1e-5f, what + " v cache");
    }
  }
}

// The stop word: set, the op leaves the KV cache as it was; clear, it runs as without one (the stop word rides
// in a free input binding: bias for the q/k/v product, gamma for a residual product).
TEST(NnFused, GpuStopWordMakesTheProductANoOp) {
  gpu::Device* device = sotto::testing::open_test_device();
  if (!device) GTEST_SKIP() << sotto::testing::gpu_skip_reason();
  auto cpu = Context::cpu();
  auto gpu = Context::webgpu(*device);
  for (int kind : {2, 0}) {
    Case c = make_case(*cpu, true, kind);
    for (int32_t word : {0, kGreedyEnded}) {
      Int8LinearFused g = c.f;
      g.w = upload_raw(*gpu, c.f.w);
      auto up = [&](const Tensor& t) { return t.defined() ? upload(*gpu, t) : Tensor(); };
      g.norm_gamma = kind == 0 ? Tensor() : up(c.f.norm_gamma);
      g.bias = kind == 0 ? up(c.f.bias) : Tensor();
      g.residual = up(c.f.residual);
      g.cache_k = up(c.f.cache_k);
      g.cache_v = up(c.f.cache_v);
      g.stop = gpu->from_bytes({1}, DType::I32, {reinterpret_cast<const uint8_t*>(&word), 4});
      Int8LinearFused f = c.f;
      f.norm_gamma = kind == 0 ? Tensor() : c.f.norm_gamma;
      f.bias = kind == 0 ? c.f.bias : Tensor();
      const std::vector<float> k_before = f.cache_k.defined() ? floats(f.cache_k) : std::vector<float>();
      const Tensor got = download(*cpu, *gpu, linear_int8_fused(upload(*gpu, c.x), g));
      const std::string what = "stop " + std::to_string(word) + ", kind " + std::to_string(kind);
      if (word == 0) {
        expect_close(got, ref::linear_int8_fused(c.x, f), tolerance(c.k), 1e-5f, what);
        if (f.cache_k.defined())
          expect_close(download(*cpu, *gpu, g.cache_k), f.cache_k, tolerance(c.k), 1e-5f, what + " k cache");
      } else if (f.cache_k.defined()) {
        EXPECT_EQ(floats(download(*cpu, *gpu, g.cache_k)), k_before) << what;
      }
    }
  }
}

// greedy_step on the GPU against its reference over a loop of steps on fresh random logits (ties planted: the
// first maximum wins), through EOS (the loop ends; later steps change nothing) and, in a second loop, through
// max_tokens.
TEST(NnFused, GpuGreedyStepMatchesTheReference) {
  gpu::Device* device = sotto::testing::open_test_device();
  if (!device) GTEST_SKIP() << sotto::testing::gpu_skip_reason();
  auto cpu = Context::cpu();
  auto gpu = Context::webgpu(*device);
  for (int loop = 0; loop < 2; ++loop) {
    const int64_t vocab = rand_int(1500, 5000), d = rand_int(5, 70), max_tokens = loop == 0 ? 20 : 3;
    GreedyLoop r;
    r.table = rand_int8(*cpu, {vocab, d}, DType::I8);
    r.scale = rand_scale();
    r.offset = rand_offset();
    r.eos = static_cast<int32_t>(rand_int(0, vocab - 1));
    r.max_tokens = max_tokens;
    r.log = cpu->zeros({2 + max_tokens}, DType::I32);
    r.x = cpu->zeros({1, d});
    GreedyLoop g = r;
    g.table = upload_raw(*gpu, r.table);
    g.log = gpu->zeros({2 + max_tokens}, DType::I32);
    g.x = gpu->zeros({1, d});
    for (int step = 0; step < 6; ++step) {
      std::vector<float> logits = floats(rand_tensor(*cpu, {vocab}, -5.0f, 5.0f));
      // Two equal maxima, neither of them EOS.
      const auto eos = static_cast<size_t>(r.eos), v = static_cast<size_t>(vocab);
      const size_t best = (eos + 1 + static_cast<size_t>(rand_int(0, vocab - 2))) % v;
      const size_t tie = (eos + 1 + static_cast<size_t>(rand_int(0, vocab - 2))) % v;
      logits[best] = logits[tie] = 9.0f;
      if (loop == 0 && step == 4) logits[static_cast<size_t>(r.eos)] = 10.0f;  // the loop ends here
      const Tensor lc = cpu->from_floats({vocab}, logits);
      ref::greedy_step(lc, r);
      greedy_step(gpu->from_floats({vocab}, logits), g);
      auto log = gpu->to_bytes(g.log);
      ASSERT_TRUE(log.ok()) << log.message();
      const std::vector<uint8_t> want(r.log.data<uint8_t>(), r.log.data<uint8_t>() + r.log.bytes());
      EXPECT_EQ(*log, want) << "log after step " << step << ", loop " << loop;
      if (r.log.data<int32_t>()[0] == 0 || step == 0)
        expect_close(download(*cpu, *gpu, g.x), r.x, 1e-6f, 1e-6f,
                     "next input row, step " + std::to_string(step));
    }
    EXPECT_EQ(r.log.data<int32_t>()[0], kGreedyEnded);
    EXPECT_EQ(r.log.data<int32_t>()[1], loop == 0 ? 4 : 3);
  }
}

}  // namespace
}  // namespace sotto::nn
