// The GPU's attention of many query rows (gpu_attention.cpp, an encoder's self-attention) against the scalar
// reference on fresh random inputs of odd sizes: query and key counts off the kernel's 16-row blocks and
// 16-key tiles, head sizes of 4..64 dims, grouped KV heads, causal masks over a cache ahead of the queries.
#include "gpu/device.h"
#include "gpu_test_support.h"
#include "nn/gpu_recorder.h"
#include "nn_test_support.h"

namespace sotto::nn {
namespace {

using testing::download;
using testing::expect_close;
using testing::rand_int;
using testing::rand_tensor;
using testing::upload;

// f32 dot products of up to 64 terms and a running softmax over up to ~450 keys (rescaled at each new
// maximum, then 4 lanes combined) against the reference in double: ~1e-6 relative; 1e-5 as the one-query
// kernels' tests.
TEST(NnGpuAttention, ManyQueriesMatchTheReference) {
  gpu::Device* device = sotto::testing::open_test_device();
  if (!device) GTEST_SKIP() << sotto::testing::gpu_skip_reason();
  auto cpu = Context::cpu();
  auto gpu = Context::webgpu(*device);
  for (int rep = 0; rep < 4; ++rep) {
    const int kv_heads = static_cast<int>(rand_int(1, 3)),
              heads = kv_heads * static_cast<int>(rand_int(1, 3));
    const int64_t d = 4 * rand_int(1, 16), tq = rand_int(16, 130), tk = tq + rand_int(0, 300);
    const Tensor q = rand_tensor(*cpu, {tq, heads * d}, -2.0f, 2.0f),
                 k = rand_tensor(*cpu, {tk, kv_heads * d}), v = rand_tensor(*cpu, {tk, kv_heads * d});
    for (bool causal : {false, true}) {
      const AttentionOptions o{.n_heads = heads, .n_kv_heads = kv_heads, .causal = causal};
      const uint64_t before = gpu->gpu()->dispatches_run();
      const Tensor out =
          download(*cpu, *gpu, attention(upload(*gpu, q), upload(*gpu, k), upload(*gpu, v), o));
      EXPECT_EQ(gpu->gpu()->dispatches_run() - before, 1u) << "one dispatch, no combine";
      expect_close(out, ref::attention(q, k, v, o), 1e-5f, 1e-5f, causal ? "tiled causal" : "tiled");
    }
  }
}

// The stacked attention (q, k, v side by side in each row of one product's output, read in place with a row
// stride and column offsets) against the reference on the three column ranges: random row counts, heads,
// grouped KV heads and head sizes, causal or not; the same values in other columns of a row or of another head
// would give other outputs, so a kernel that ignored the stride or an offset fails. One dispatch whatever the
// row count (1-15 rows too: a short clip's encoder).
TEST(NnGpuAttention, StackedQkvMatchesTheReference) {
  gpu::Device* device = sotto::testing::open_test_device();
  if (!device) GTEST_SKIP() << sotto::testing::gpu_skip_reason();
  auto cpu = Context::cpu();
  auto gpu = Context::webgpu(*device);
  for (int rep = 0; rep < 5; ++rep) {
    const int kv_heads = static_cast<int>(rand_int(1, 3)),
              heads = kv_heads * static_cast<int>(rand_int(1, 3));
    const int64_t d = 4 * rand_int(1, 16), t = rep == 0 ? rand_int(1, 15) : rand_int(16, 150);
    const int64_t q_cols = heads * d, kv_cols = kv_heads * d;
    const Tensor qkv = rand_tensor(*cpu, {t, q_cols + 2 * kv_cols}, -2.0f, 2.0f);
    const Tensor q = slice(qkv, 1, 0, q_cols), k = slice(qkv, 1, q_cols, q_cols + kv_cols),
                 v = slice(qkv, 1, q_cols + kv_cols, q_cols + 2 * kv_cols);
    for (bool causal : {false, true}) {
      const AttentionOptions o{.n_heads = heads, .n_kv_heads = kv_heads, .causal = causal};
      const uint64_t before = gpu->gpu()->dispatches_run();
      const Tensor out = download(*cpu, *gpu, attention_stacked(upload(*gpu, qkv), o));
      EXPECT_EQ(gpu->gpu()->dispatches_run() - before, 1u) << "one dispatch, reading qkv in place";
      const std::string what = "stacked " + std::to_string(t) + " rows, " + std::to_string(heads) + "/" +
                               std::to_string(kv_heads) + " heads of " + std::to_string(d) +
                               (causal ? ", causal" : "");
      expect_close(out, ref::attention(q, k, v, o), 1e-5f, 1e-5f, what);
      expect_close(attention_stacked(qkv, o), ref::attention(q, k, v, o), 1e-5f, 1e-5f, "cpu " + what);
    }
  }
}

// Moonshine's encoder shape for a 10 s clip: 415 queries and keys, 8 heads of 52.
TEST(NnGpuAttention, MoonshineEncoderShapeMatchesTheReference) {
  gpu::Device* device = sotto::testing::open_test_device();
  if (!device) GTEST_SKIP() << sotto::testing::gpu_skip_reason();
  auto cpu = Context::cpu();
  auto gpu = Context::webgpu(*device);
  const Tensor q = rand_tensor(*cpu, {415, 416}, -2.0f, 2.0f), k = rand_tensor(*cpu, {415, 416}),
               v = rand_tensor(*cpu, {415, 416});
  const AttentionOptions o{.n_heads = 8};
  expect_close(download(*cpu, *gpu, attention(upload(*gpu, q), upload(*gpu, k), upload(*gpu, v), o)),
               ref::attention(q, k, v, o), 1e-5f, 1e-5f, "moonshine encoder attention");
}

}  // namespace
}  // namespace sotto::nn
