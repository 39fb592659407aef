// Attention over the f16 KV cache (cpu/attention.h): every kernel variant gives bit-for-bit the reference's
// output (tolerance 0: the numerics are ggml's, fixed lane by lane, so any difference is a bug) on fresh
// random caches for many head sizes, GQA ratios, prompt lengths, cache positions and thread counts; the
// reference itself is attention (it agrees with a double-precision softmax·V within the f16 rounding of its
// accumulator); and the portable stand-in for FMA rounds exactly like std::fma.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <random>
#include <vector>

#include "core/half.h"
#include "core/thread_pool.h"
#include "cpu/attention.h"
#include "cpu/cpu_features.h"
#include "test_support.h"

namespace sotto {
namespace {

using testing::test_seed;  // tests/unit/test_support.h

uint32_t bits(float x) {
  uint32_t b;
  std::memcpy(&b, &x, 4);
  return b;
}

TEST(Attention, PortableFmaRoundsLikeStdFma) {
  // Hand-made double-rounding trap: 65 * (16519105 * 2^-54) = (2^30 + 1) * 2^-54 = 2^-24 + 2^-54, so
  // 1 + that lies just above the midpoint between 1 and 1 + 2^-23 and must round up; a plain double sum loses
  // the 2^-54, lands on the midpoint and rounds to even (1.0).
  const float trap_b = std::ldexp(16519105.0f, -54);
  EXPECT_EQ(bits(fma_f16_operands(65.0f, trap_b, 1.0f)), bits(1.0f + 0x1p-23f));
  EXPECT_EQ(bits(fma_f16_operands(65.0f, trap_b, 1.0f)), bits(std::fma(65.0f, trap_b, 1.0f)));

  std::mt19937_64 rng(test_seed());
  std::normal_distribution<float> normal(0.0f, 4.0f);
  std::uniform_real_distribution<float> unit(0.0f, 1.0f);
  std::uniform_int_distribution<int> exponent(-60, 0);
  for (int i = 0; i < 200000; ++i) {
    // What the value update feeds it (f16 value, weight in (0, 1], f16 accumulator), then any floats.
    float a = f16_to_f32(f32_to_f16(normal(rng))), b = std::ldexp(unit(rng), exponent(rng)),
          c = f16_to_f32(f32_to_f16(normal(rng)));
    if (i % 2) {
      a = std::ldexp(normal(rng), exponent(rng) + 30);
      c = std::ldexp(normal(rng), exponent(rng) + 30);
    }
    ASSERT_EQ(bits(fma_f16_operands(a, b, c)), bits(std::fma(a, b, c))) << a << " * " << b << " + " << c;
  }
}

TEST(Attention, BranchlessF16WideningIsExactForEveryValue) {
  for (uint32_t h = 0; h < 65536; ++h) {
    const uint16_t v = static_cast<uint16_t>(h);
    ASSERT_EQ(bits(f16_to_f32_branchless(v)), bits(f16_to_f32(v))) << "f16 bits " << h;
  }
}

TEST(Attention, BranchlessF16NarrowingRoundsLikeHalfH) {
  // Every f32 exponent and sign with the low 13 mantissa bits (the ones rounding looks at) exhaustive,
  // the upper mantissa bits random; plus fresh random floats.
  std::mt19937_64 rng(test_seed() + 4);
  for (uint32_t high = 0; high < 512; ++high)
    for (uint32_t low = 0; low < 8192; ++low) {
      const uint32_t b = (high << 23) | (static_cast<uint32_t>(rng() & 0x3ffu) << 13) | low;
      float x;
      std::memcpy(&x, &b, 4);
      ASSERT_EQ(f32_to_f16_branchless(x), f32_to_f16(x)) << "f32 bits " << b;
    }
  for (int i = 0; i < 1000000; ++i) {
    const uint32_t b = static_cast<uint32_t>(rng());
    float x;
    std::memcpy(&x, &b, 4);
    ASSERT_EQ(f32_to_f16_branchless(x), f32_to_f16(x)) << "f32 bits " << b;
  }
}

struct Case {
  int head_dim_k, head_dim_v, n_head, n_head_kv, n_query, pos0;
};

struct Inputs {
  std::vector<float> q;
  std::vector<uint16_t> k, v;
  AttentionArgs args;
};

// A cache of pos0 + n_query positions with one spare KV slot per row (k_row > n_head_kv * head_dim, as a
// strided view would have), random values; q scaled so scores spread over several units and new maxima
// (rescaling the accumulator) happen along the sequence.
Inputs make_inputs(std::mt19937_64& rng, const Case& c, std::vector<float>& out) {
  Inputs in;
  const int n_pos = c.pos0 + c.n_query;
  const int k_row = (c.n_head_kv + 1) * c.head_dim_k, v_row = (c.n_head_kv + 1) * c.head_dim_v;
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_real_distribution<float> q_scale(0.5f, 4.0f);
  const float s = q_scale(rng);
  in.q.resize(static_cast<size_t>(c.n_query) * c.n_head * c.head_dim_k);
  for (float& x : in.q) x = normal(rng) * s;
  in.k.resize(static_cast<size_t>(n_pos) * k_row);
  in.v.resize(static_cast<size_t>(n_pos) * v_row);
  for (uint16_t& x : in.k) x = f32_to_f16(normal(rng));
  for (uint16_t& x : in.v) x = f32_to_f16(normal(rng));
  out.assign(static_cast<size_t>(c.n_query) * c.n_head * c.head_dim_v, -1.0f);
  AttentionArgs& a = in.args;
  a.q = in.q.data();
  a.k = in.k.data();
  a.v = in.v.data();
  a.k_row = k_row;
  a.v_row = v_row;
  a.n_query = c.n_query;
  a.pos0 = c.pos0;
  a.n_head = c.n_head;
  a.n_head_kv = c.n_head_kv;
  a.head_dim_k = c.head_dim_k;
  a.head_dim_v = c.head_dim_v;
  a.scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim_k));
  a.out = out.data();
  return in;
}

std::vector<bool> variants() {
  std::vector<bool> portable = {true};
  if (cpu_features().avx2_fma) portable.insert(portable.begin(), false);
  return portable;
}

TEST(Attention, EveryVariantMatchesTheReferenceBitForBit) {
  std::mt19937_64 rng(test_seed() + 1);
  ThreadPool pools[] = {ThreadPool(1), ThreadPool(2), ThreadPool(3)};
  const int head_dims[][2] = {{8, 8}, {64, 64}, {128, 128}, {40, 40}, {72, 72}, {64, 32}, {96, 48}};
  const int head_counts[][2] = {{1, 1}, {4, 4}, {8, 2}, {14, 2}, {6, 3}, {8, 1}};
  std::uniform_int_distribution<int> pos(0, 299);
  int n_cases = 0;
  for (const auto& dims : head_dims)
    for (const auto& heads : head_counts)
      for (int n_query : {1, 3, 17}) {
        const Case c{dims[0], dims[1], heads[0], heads[1], n_query, n_query == 17 ? pos(rng) / 4 : pos(rng)};
        std::vector<float> expected, got;
        Inputs in = make_inputs(rng, c, expected);
        attention_f16_ref(in.args);
        got.resize(expected.size());
        in.args.out = got.data();
        for (bool portable : variants()) {
          cpu_force_portable(portable);
          ThreadPool& pool = pools[n_cases % 3];
          std::fill(got.begin(), got.end(), -1.0f);
          attention_f16(pool, in.args);
          ASSERT_EQ(0, std::memcmp(got.data(), expected.data(), got.size() * sizeof(float)))
              << attention_kernels().name << " head_dim " << c.head_dim_k << "/" << c.head_dim_v << " heads "
              << c.n_head << "/" << c.n_head_kv << " queries " << c.n_query << " pos0 " << c.pos0
              << " threads " << pool.n_threads();
        }
        ++n_cases;
      }
  cpu_force_portable(false);
}

// One token deep in the cache (decode at depth), where the grouped kernel splits a KV head's query heads over
// the threads and runs many key blocks: still the reference's bits, for 1-3 threads and odd group sizes.
TEST(Attention, DeepDecodeMatchesTheReferenceBitForBit) {
  std::mt19937_64 rng(test_seed() + 4);
  ThreadPool pools[] = {ThreadPool(1), ThreadPool(2), ThreadPool(3)};
  const int head_counts[][2] = {{14, 2}, {4, 1}, {7, 7}, {15, 3}};
  for (const auto& heads : head_counts)
    for (ThreadPool& pool : pools) {
      const Case c{64, 64, heads[0], heads[1], 1, 1029 + static_cast<int>(rng() % 300)};
      std::vector<float> expected, got;
      Inputs in = make_inputs(rng, c, expected);
      attention_f16_ref(in.args);
      got.assign(expected.size(), -1.0f);
      in.args.out = got.data();
      attention_f16(pool, in.args);
      ASSERT_EQ(0, std::memcmp(got.data(), expected.data(), got.size() * sizeof(float)))
          << attention_kernels().name << " heads " << c.n_head << "/" << c.n_head_kv << " pos0 " << c.pos0
          << " threads " << pool.n_threads();
    }
}

// A chat turn deep in the cache: a block of queries (causal within it) against a few hundred cached keys,
// where the grouped kernel takes several tokens per unit, folds 8 keys' dots together and crosses key blocks
// part-way through a token's keys: still the reference's bits, for odd query counts, group sizes and head
// sizes (64 and 96 take the 8-key folds, 40 does not), 1-3 threads.
TEST(Attention, PromptBlockAtDepthMatchesTheReferenceBitForBit) {
  std::mt19937_64 rng(test_seed() + 5);
  ThreadPool pools[] = {ThreadPool(1), ThreadPool(2), ThreadPool(3)};
  const Case cases[] = {
      {64, 64, 14, 2, 26, 0}, {96, 48, 15, 3, 11, 0}, {40, 40, 6, 2, 9, 0}, {64, 64, 4, 1, 5, 0}};
  int n_run = 0;
  for (Case c : cases) {
    c.pos0 = 121 + static_cast<int>(rng() % 250);
    std::vector<float> expected, got;
    Inputs in = make_inputs(rng, c, expected);
    attention_f16_ref(in.args);
    got.assign(expected.size(), -1.0f);
    in.args.out = got.data();
    ThreadPool& pool = pools[n_run++ % 3];
    attention_f16(pool, in.args);
    ASSERT_EQ(0, std::memcmp(got.data(), expected.data(), got.size() * sizeof(float)))
        << attention_kernels().name << " head_dim " << c.head_dim_k << "/" << c.head_dim_v << " heads "
        << c.n_head << "/" << c.n_head_kv << " queries " << c.n_query << " pos0 " << c.pos0 << " threads "
        << pool.n_threads();
  }
}

// The reference against softmax(q·k / sqrt(d))·v in double, from the same f16 keys and values and the f16
// query. Its f16 accumulator rounds each partial sum to 11 bits; with values ~N(0, 1) and up to 300 keys the
// drift stays within 0.02 absolute (measured worst ~0.005).
TEST(Attention, ReferenceIsSoftmaxAttention) {
  std::mt19937_64 rng(test_seed() + 2);
  for (const Case& c : {Case{8, 8, 8, 4, 4, 290}, Case{64, 64, 14, 2, 3, 120}, Case{128, 64, 4, 1, 2, 40}}) {
    std::vector<float> out;
    Inputs in = make_inputs(rng, c, out);
    attention_f16_ref(in.args);
    const int group = c.n_head / c.n_head_kv;
    double worst = 0.0;
    for (int t = 0; t < c.n_query; ++t)
      for (int h = 0; h < c.n_head; ++h) {
        const float* q = in.q.data() + (static_cast<size_t>(t) * c.n_head + h) * c.head_dim_k;
        const int n_keys = c.pos0 + t + 1;
        std::vector<double> score(static_cast<size_t>(n_keys));
        double max_score = -INFINITY;
        for (int p = 0; p < n_keys; ++p) {
          const uint16_t* k =
              in.k.data() + static_cast<size_t>(p) * in.args.k_row + (h / group) * c.head_dim_k;
          double dot = 0.0;
          for (int d = 0; d < c.head_dim_k; ++d)
            dot += static_cast<double>(f16_to_f32(f32_to_f16(q[d]))) * f16_to_f32(k[d]);
          score[static_cast<size_t>(p)] = dot * in.args.scale;
          max_score = std::max(max_score, score[static_cast<size_t>(p)]);
        }
        double total = 0.0;
        for (double& s : score) total += (s = std::exp(s - max_score));
        for (int d = 0; d < c.head_dim_v; ++d) {
          double expected = 0.0;
          for (int p = 0; p < n_keys; ++p)
            expected +=
                score[static_cast<size_t>(p)] *
                f16_to_f32(in.v[static_cast<size_t>(p) * in.args.v_row + (h / group) * c.head_dim_v + d]);
          expected /= total;
          const float got = out[(static_cast<size_t>(t) * c.n_head + h) * c.head_dim_v + d];
          worst = std::max(worst, std::fabs(got - expected));
        }
      }
    EXPECT_LT(worst, 0.02) << "head_dim " << c.head_dim_k << " pos0 " << c.pos0;
  }
}

// ns per (query, key, head) at Qwen2.5-0.5B's shape (14 heads, 2 KV heads, head_dim 64), one thread, for a
// 256-token prompt: SOTTO_BENCH=1 to run.
TEST(AttentionBench, NsPerQueryKeyHead) {
  if (!std::getenv("SOTTO_BENCH")) GTEST_SKIP() << "set SOTTO_BENCH=1 to measure";
  std::mt19937_64 rng(test_seed() + 3);
  ThreadPool pool(1);
  const Case c{64, 64, 14, 2, 256, 0};
  std::vector<float> out;
  Inputs in = make_inputs(rng, c, out);
  const double pairs = 14.0 * 256.0 * 257.0 / 2.0;
  for (bool portable : variants()) {
    cpu_force_portable(portable);
    attention_f16(pool, in.args);
    const int reps = portable ? 1 : 5;
    const auto start = std::chrono::steady_clock::now();
    for (int r = 0; r < reps; ++r) attention_f16(pool, in.args);
    const double ns =
        std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - start).count();
    std::printf("attention %-8s %.1f ns per (query, key, head)\n", attention_kernels().name,
                ns / reps / pairs);
  }
  cpu_force_portable(false);
  // At depth, as the model runs it: 24 layers' caches (so they do not fit the CPU's), Qwen2.5-0.5B's heads,
  // attention_f16 on one thread, CPU time (the machine is often shared), medians of 5: decode (one query)
  // and a 26-token chat turn (a block of queries, causal within it) at depths 1024 and 8192.
  for (const int at : {1024, 8192})
    for (const int n_query : {1, 26}) {
      std::vector<Inputs> deep;
      std::vector<std::vector<float>> deep_outs(24);
      for (int l = 0; l < 24; ++l)
        deep.push_back(make_inputs(rng, Case{64, 64, 14, 2, n_query, at}, deep_outs[l]));
      std::vector<double> cpu_ms;
      for (int r = 0; r < 5; ++r) {
        timespec t0{}, t1{};
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t0);
        for (const Inputs& layer : deep) attention_f16(pool, layer.args);
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t1);
        cpu_ms.push_back(1e3 * static_cast<double>(t1.tv_sec - t0.tv_sec) +
                         1e-6 * static_cast<double>(t1.tv_nsec - t0.tv_nsec));
      }
      std::sort(cpu_ms.begin(), cpu_ms.end());
      const double triples = 24.0 * 14.0 * n_query * (at + (n_query + 1) / 2.0);
      std::printf(
          "%s at depth %d, %d queries, 24 layers x 14/2 heads, one thread, CPU time: %.1f ms (%.1f ns per "
          "(query, key, head))\n",
          attention_kernels().name, at, n_query, cpu_ms[2], cpu_ms[2] * 1e6 / triples);
    }
}

}  // namespace
}  // namespace sotto
