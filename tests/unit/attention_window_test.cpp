// Sliding-window attention (Gemma 3's local layers) through attention_f16() on every kernel, against the
// scalar reference bit for bit: the portable kernel widens only the cached rows from the first query's
// window start on (cpu/attention.cpp), so windows that cut into the cache at several offsets, prompts and
// single tokens, and 1-3 threads must all read the right rows. Random f16 keys and values, never zero.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "core/half.h"
#include "core/thread_pool.h"
#include "cpu/attention.h"
#include "cpu/cpu_features.h"
#include "test_support.h"

namespace sotto {
namespace {

TEST(AttentionWindow, EveryVariantMatchesTheReferenceBitForBit) {
  std::mt19937_64 rng(testing::test_seed() + 7);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  ThreadPool pools[] = {ThreadPool(1), ThreadPool(2), ThreadPool(3)};
  std::vector<bool> portable_variants = {true};
  if (cpu_features().avx2_fma) portable_variants.push_back(false);
  const int head_dim = 64, n_head = 8, n_head_kv = 2;
  int n_cases = 0;
  for (int window : {1, 5, 40, 1000})
    for (int n_query : {1, 6, 17})
      for (int pos0 : {0, 3, 60}) {
        const int n_pos = pos0 + n_query;
        const int k_row = (n_head_kv + 1) * head_dim;  // a spare slot per row, as a strided view has
        std::vector<float> q(static_cast<size_t>(n_query) * n_head * head_dim);
        std::vector<uint16_t> k(static_cast<size_t>(n_pos) * k_row), v(k.size());
        for (float& x : q) x = normal(rng) * 2.0f;
        for (uint16_t& x : k) x = f32_to_f16(normal(rng));
        for (uint16_t& x : v) x = f32_to_f16(normal(rng));
        std::vector<float> expected(static_cast<size_t>(n_query) * n_head * head_dim, -1.0f), got;
        AttentionArgs a{.q = q.data(),
                        .k = k.data(),
                        .v = v.data(),
                        .k_row = k_row,
                        .v_row = k_row,
                        .n_query = n_query,
                        .pos0 = pos0,
                        .n_head = n_head,
                        .n_head_kv = n_head_kv,
                        .head_dim_k = head_dim,
                        .head_dim_v = head_dim,
                        .scale = 0.125f,
                        .out = expected.data(),
                        .window = window};
        attention_f16_ref(a);
        for (bool portable : portable_variants) {
          cpu_force_portable(portable);
          ThreadPool& pool = pools[n_cases % 3];
          got.assign(expected.size(), -1.0f);
          a.out = got.data();
          attention_f16(pool, a);
          ASSERT_EQ(0, std::memcmp(got.data(), expected.data(), got.size() * sizeof(float)))
              << attention_kernels().name << " window " << window << " queries " << n_query << " pos0 "
              << pos0 << " threads " << pool.n_threads();
        }
        ++n_cases;
      }
  cpu_force_portable(false);
}

}  // namespace
}  // namespace sotto
