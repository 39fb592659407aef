// Activation quantizers of cpu/quant_dot.h against the arithmetic they follow, bit for bit: q8_0 and q8_1
// against a restatement written here of llama.cpp's x86 quantizer (ggml-cpu/arch/x86/quants.c
// quantize_row_q8_0 / _q8_1: d = amax / 127, q = x * (127 / amax) rounded half to even), and q8_K against
// core/quantize_ref (ggml's reference, itself checked byte-for-byte against llama.cpp in
// dtype_reference_test.cpp). Inputs are fresh random floats, including blocks with exact ties (x / d = k + 0.5)
// that tell round-half-away from round-half-even apart.
#include "cpu/quant_dot.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <vector>

#include "core/half.h"
#include "core/quantize_ref.h"
#include "core/thread_pool.h"
#include "cpu/cpu_features.h"
#include "cpu/linear.h"
#include "test_support.h"

namespace sotto {
namespace {

using testing::test_seed;  // tests/unit/test_support.h

// Random activations: mostly uniform, with a few blocks scaled up/down by powers of two, some exact
// half-step values (multiples of amax / 254 land on ties), and a few zero blocks among non-zero ones.
std::vector<float> random_activations(std::mt19937_64& rng, int64_t n) {
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(n));
  for (float& v : x) v = uniform(rng);
  for (int64_t b = 0; b < n / 32; ++b) {
    const int kind = static_cast<int>(rng() % 8);
    float* xb = x.data() + 32 * b;
    if (kind == 0) {
      for (int i = 0; i < 32; ++i) xb[i] *= 1024.0f;
    } else if (kind == 1) {
      for (int i = 0; i < 32; ++i) xb[i] *= 1.0f / 4096.0f;
    } else if (kind == 2) {  // integers with amax 127: x / d is exact, halves give ties
      for (int i = 0; i < 32; ++i) xb[i] = static_cast<float>(static_cast<int>(rng() % 255) - 127) + 0.5f;
      xb[0] = 127.0f;
    }
  }
  if (n >= 512) std::memset(x.data() + 256, 0, 32 * sizeof(float));  // one all-zero q8_0 block
  return x;
}

// llama.cpp's x86 q8_0 / q8_1 quantizer, restated: d = amax / 127 (f16), q = nearbyint(x * (127 / amax)) in the
// default rounding mode (halves to even); q8_1 adds s = f16(d * sum(q)) with the unrounded d.
float reference_block(const float* x, uint16_t* d_out, int8_t* qs, int* sum) {
  float amax = 0.0f;
  for (int i = 0; i < 32; ++i) amax = std::max(amax, std::fabs(x[i]));
  const float d = amax / 127.0f;
  const float id = amax != 0.0f ? 127.0f / amax : 0.0f;
  *d_out = f32_to_f16(d);
  *sum = 0;
  for (int i = 0; i < 32; ++i) {
    const float v = x[i] * id;
    qs[i] = static_cast<int8_t>(std::nearbyint(v));
    *sum += qs[i];
  }
  return d;
}

void reference_q8_0(const float* x, BlockQ8_0* y, int64_t n) {
  int sum = 0;
  for (int64_t b = 0; b < n / 32; ++b) reference_block(x + 32 * b, &y[b].d, y[b].qs, &sum);
}

void reference_q8_1(const float* x, BlockQ8_1* y, int64_t n) {
  for (int64_t b = 0; b < n / 32; ++b) {
    int sum = 0;
    const float d = reference_block(x + 32 * b, &y[b].d, y[b].qs, &sum);
    y[b].s = f32_to_f16(d * static_cast<float>(sum));
  }
}

// The tie blocks above must tell the two roundings apart, or the tests below could not see a quantizer that
// rounds halves away from zero (ggml's reference, core/quantize_ref).
TEST(QuantDot, ActivationsQ8_0DifferFromGgmlReferenceAtTies) {
  std::mt19937_64 rng(test_seed() + 6);
  const std::vector<float> x = random_activations(rng, 4864);
  std::vector<BlockQ8_0> got(4864 / 32), ggml_ref(got.size());
  quantize_activations_q8_0(x.data(), got.data(), 4864);
  quantize_row_ref(DType::Q8_0, x.data(), ggml_ref.data(), 4864);
  EXPECT_NE(0, std::memcmp(got.data(), ggml_ref.data(), got.size() * sizeof(BlockQ8_0)));
}

TEST(QuantDot, ActivationsQ8_0MatchReferenceBitForBit) {
  std::mt19937_64 rng(test_seed());
  for (int64_t n : {32, 64, 896, 4864}) {
    const std::vector<float> x = random_activations(rng, n);
    std::vector<BlockQ8_0> got(static_cast<size_t>(n / 32)), want(got.size());
    quantize_activations_q8_0(x.data(), got.data(), n);
    reference_q8_0(x.data(), want.data(), n);
    ASSERT_EQ(0, std::memcmp(got.data(), want.data(), got.size() * sizeof(BlockQ8_0))) << "n=" << n;
  }
}

// The AVX2 quantizer (quantize_activations_q8_0 on an AVX2 machine) and the portable one, both against
// llama.cpp's x86 arithmetic, including blocks of exact ties.
TEST(QuantDot, ActivationsQ8_0BothInstructionSetsMatchReference) {
  std::mt19937_64 rng(test_seed() + 4);
  for (int64_t n : {32, 96, 896, 4864}) {
    const std::vector<float> x = random_activations(rng, n);
    std::vector<BlockQ8_0> want(static_cast<size_t>(n / 32)), portable(want.size()), fast(want.size());
    reference_q8_0(x.data(), want.data(), n);
    quantize_activations_q8_0_portable(x.data(), portable.data(), n);
    ASSERT_EQ(0, std::memcmp(portable.data(), want.data(), want.size() * sizeof(BlockQ8_0))) << "n=" << n;
#if defined(SOTTO_HAVE_AVX2_QUANT_DOT)
    if (cpu_features().avx2_fma) {
      quantize_activations_q8_0_avx2(x.data(), fast.data(), n);
      ASSERT_EQ(0, std::memcmp(fast.data(), want.data(), want.size() * sizeof(BlockQ8_0))) << "avx2 n=" << n;
    }
#endif
  }
}

TEST(QuantDot, ActivationsQ8_KBothInstructionSetsMatchReference) {
  std::mt19937_64 rng(test_seed() + 5);
  for (int64_t n : {256, 768, 4864 - 4864 % 256}) {
    std::vector<float> x = random_activations(rng, n);
    if (n >= 512) std::memset(x.data() + 256, 0, 256 * sizeof(float));  // an all-zero super-block
    if (n >= 768) {  // two values of the same largest magnitude: the first one sets the sign
      x[600] = -1e4f;
      x[700] = 1e4f;
    }
    std::vector<BlockQ8_K> want(static_cast<size_t>(n / 256)), portable(want.size()), fast(want.size());
    quantize_row_ref(DType::Q8_K, x.data(), want.data(), n);
    quantize_activations_q8_K_portable(x.data(), portable.data(), n);
    ASSERT_EQ(0, std::memcmp(portable.data(), want.data(), want.size() * sizeof(BlockQ8_K))) << "n=" << n;
#if defined(SOTTO_HAVE_AVX2_QUANT_DOT)
    if (cpu_features().avx2_fma) {
      quantize_activations_q8_K_avx2(x.data(), fast.data(), n);
      ASSERT_EQ(0, std::memcmp(fast.data(), want.data(), want.size() * sizeof(BlockQ8_K))) << "avx2 n=" << n;
    }
#endif
  }
}

#if defined(SOTTO_HAVE_AVX2_QUANT_DOT)
// q4_0 / q5_0 / q8_0: the register-resident AVX2 kernels keep ggml's AVX2 float order (lane k of a block =
// elements 4k .. 4k + 3, one FMA per block, ggml's final lane sum), which the generic AVX2 kernels spell out
// directly, so the two must agree bit for bit, for decode and for every tile width of prefill (7 rows: the
// 2-row passes of the AVX-512 VNNI build and a single row after them). The same kernels built with AVX-512
// VNNI must agree too, where the CPU has it. (This order is what makes stories260K's greedy tokens
// llama.cpp's; see cpu/quant_dot_fast_x86.h.)
TEST(QuantDot, FastAvx2KernelsKeepGgmlFloatOrderBitForBit) {
  if (!cpu_features().avx2_fma) GTEST_SKIP() << "no AVX2";
  std::mt19937_64 rng(test_seed() + 6);
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  for (DType t : {DType::Q4_0, DType::Q5_0, DType::Q8_0}) {
    for (int64_t cols : {32, 96, 896}) {
      const int64_t rows = 7, n = 19;
      std::vector<float> w_values(static_cast<size_t>(rows * cols)), x(static_cast<size_t>(n * cols));
      for (float& v : w_values) v = uniform(rng);
      for (float& v : x) v = uniform(rng);
      std::vector<uint8_t> w(static_cast<size_t>(rows * cols / 32) * dtype_info(t).block_bytes);
      quantize_row_ref(t, w_values.data(), w.data(), rows * cols);
      const size_t stride = activation_bytes(t, cols);
      std::vector<uint8_t> xq(stride * n);
      for (int64_t k = 0; k < n; ++k)
        quantize_activations(t, x.data() + k * cols, cols, xq.data() + k * stride);
      for (int64_t tokens = 1; tokens <= n; ++tokens) {
        std::vector<float> fast(static_cast<size_t>(tokens * rows)), generic(fast.size());
        quant_dot_avx2_fast(t)(w.data(), cols, xq.data(), tokens, stride, fast.data(), rows, 0, rows);
        quant_dot_avx2_generic(t)(w.data(), cols, xq.data(), tokens, stride, generic.data(), rows, 0, rows);
        ASSERT_EQ(0, std::memcmp(fast.data(), generic.data(), fast.size() * sizeof(float)))
            << dtype_name(t) << " cols=" << cols << " tokens=" << tokens;
        if (cpu_features().avx512_vnni) {
          std::vector<float> vnni(fast.size());
          quant_dot_avx2_vnni(t)(w.data(), cols, xq.data(), tokens, stride, vnni.data(), rows, 0, rows);
          ASSERT_EQ(0, std::memcmp(vnni.data(), generic.data(), vnni.size() * sizeof(float)))
              << "vnni " << dtype_name(t) << " cols=" << cols << " tokens=" << tokens;
        }
      }
    }
  }
}
#endif

// q4_0 in block order (quant_dot.h: llama.cpp's repacked q4_0): the kernel of this CPU against the portable
// one (decoded blocks, one scalar FMA chain per output) bit for bit, for 1..9 tokens and row ranges that take
// the 8-row passes and the single rows after them; the portable kernel against the double-precision
// reference. linear() must give a prompt the same bits as its tokens one at a time, for a row count that takes
// block order (its tiles) and one that does not (the 8-lane row kernels).
TEST(QuantDot, Q4_0BlockOrderMatchesPortableAndPromptsMatchTokens) {
  std::mt19937_64 rng(test_seed() + 7);
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  EXPECT_TRUE(quant_dot_block_order(DType::Q4_0, 64));
  EXPECT_FALSE(quant_dot_block_order(DType::Q4_0, 172));
  EXPECT_FALSE(quant_dot_block_order(DType::Q8_0, 64));
  for (int64_t cols : {32, 96, 896}) {
    const int64_t rows = 24, n = 9;
    std::vector<float> w_values(static_cast<size_t>(rows * cols)), x(static_cast<size_t>(n * cols));
    for (float& v : w_values) v = uniform(rng);
    for (float& v : x) v = uniform(rng);
    std::vector<uint8_t> w(static_cast<size_t>(rows * cols / 32) * sizeof(BlockQ4_0));
    quantize_row_ref(DType::Q4_0, w_values.data(), w.data(), rows * cols);
    const size_t stride = activation_bytes(DType::Q4_0, cols);
    std::vector<uint8_t> xq(stride * n);
    for (int64_t k = 0; k < n; ++k)
      quantize_activations(DType::Q4_0, x.data() + k * cols, cols, xq.data() + k * stride);
    for (int64_t tokens = 1; tokens <= n; ++tokens) {
      std::vector<float> fast(static_cast<size_t>(tokens * rows)), portable(fast.size());
      quant_dot_rows_for(DType::Q4_0, rows)(w.data(), cols, xq.data(), tokens, stride, fast.data(), rows, 0,
                                            3);
      quant_dot_rows_for(DType::Q4_0, rows)(w.data(), cols, xq.data(), tokens, stride, fast.data(), rows, 3,
                                            rows);
      quant_dot_block_order_portable()(w.data(), cols, xq.data(), tokens, stride, portable.data(), rows, 0,
                                       rows);
      ASSERT_EQ(0, std::memcmp(fast.data(), portable.data(), fast.size() * sizeof(float)))
          << "cols=" << cols << " tokens=" << tokens;
    }
    std::vector<float> want(static_cast<size_t>(n * rows));
    linear_ref(DType::Q4_0, w.data(), rows, cols, x.data(), n, want.data());
    std::vector<float> portable(want.size());
    quant_dot_block_order_portable()(w.data(), cols, xq.data(), n, stride, portable.data(), rows, 0, rows);
    for (size_t i = 0; i < want.size(); ++i)
      ASSERT_NEAR(portable[i], want[i], 1e-5f * (1.0f + std::fabs(want[i]))) << "cols=" << cols << " i=" << i;
    for (int64_t use_rows : {rows, rows - 3}) {  // block order, then the 8-lane kernels
      ThreadPool pool(2);
      LinearScratch scratch;
      std::vector<float> prompt(static_cast<size_t>(n * use_rows)), one(static_cast<size_t>(use_rows));
      linear(pool, DType::Q4_0, w.data(), use_rows, cols, x.data(), n, prompt.data(), scratch);
      for (int64_t k = 0; k < n; ++k) {
        linear(pool, DType::Q4_0, w.data(), use_rows, cols, x.data() + k * cols, 1, one.data(), scratch);
        ASSERT_EQ(0, std::memcmp(one.data(), prompt.data() + k * use_rows, one.size() * sizeof(float)))
            << "cols=" << cols << " rows=" << use_rows << " token " << k;
      }
    }
  }
}

// f16 weights in llama.cpp's x86 order (quant_dot.cpp rows_f16_ggml): this CPU's kernel against the portable
// one bit for bit (widths below, at and past whole chunks of 64), and against the double-precision reference.
TEST(QuantDot, F16GgmlOrderMatchesPortableAndReference) {
  std::mt19937_64 rng(test_seed() + 8);
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  for (int64_t cols : {8, 64, 172, 200}) {
    const int64_t rows = 5, n = 3;
    std::vector<float> w_values(static_cast<size_t>(rows * cols)), x(static_cast<size_t>(n * cols));
    for (float& v : w_values) v = uniform(rng);
    for (float& v : x) v = uniform(rng);
    std::vector<uint8_t> w(static_cast<size_t>(rows * cols) * 2);
    for (size_t i = 0; i < w_values.size(); ++i) {
      const uint16_t h = f32_to_f16(w_values[i]);
      std::memcpy(w.data() + 2 * i, &h, 2);
    }
    const size_t stride = activation_bytes(DType::F16, cols);
    std::vector<uint8_t> xq(stride * n);
    for (int64_t k = 0; k < n; ++k)
      quantize_activations(DType::F16, x.data() + k * cols, cols, xq.data() + k * stride);
    std::vector<float> got(static_cast<size_t>(n * rows)), portable(got.size()), want(got.size());
    quant_dot_rows(DType::F16)(w.data(), cols, xq.data(), n, stride, got.data(), rows, 0, rows);
    quant_dot_portable_generic(DType::F16)(w.data(), cols, xq.data(), n, stride, portable.data(), rows, 0,
                                           rows);
    ASSERT_EQ(0, std::memcmp(got.data(), portable.data(), got.size() * sizeof(float))) << "cols=" << cols;
    linear_ref(DType::F16, w.data(), rows, cols, x.data(), n, want.data());
    for (size_t i = 0; i < want.size(); ++i)
      ASSERT_NEAR(got[i], want[i], 1e-5f * (1.0f + std::fabs(want[i]))) << "cols=" << cols << " i=" << i;
  }
}

TEST(QuantDot, ActivationsQ8_1MatchReferenceBitForBit) {
  std::mt19937_64 rng(test_seed() + 1);
  for (int64_t n : {32, 64, 896, 4864}) {
    const std::vector<float> x = random_activations(rng, n);
    std::vector<BlockQ8_1> got(static_cast<size_t>(n / 32)), want(got.size());
    quantize_activations_q8_1(x.data(), got.data(), n);
    reference_q8_1(x.data(), want.data(), n);
    ASSERT_EQ(0, std::memcmp(got.data(), want.data(), got.size() * sizeof(BlockQ8_1))) << "n=" << n;
  }
}

TEST(QuantDot, ActivationsQ8_KMatchReferenceBitForBit) {
  std::mt19937_64 rng(test_seed() + 2);
  for (int64_t n : {256, 512, 1024, 4864 - 4864 % 256}) {
    std::vector<float> x = random_activations(rng, n);
    if (n >= 512) std::memset(x.data() + 256, 0, 256 * sizeof(float));  // an all-zero super-block
    std::vector<BlockQ8_K> got(static_cast<size_t>(n / 256)), want(got.size());
    quantize_activations_q8_K(x.data(), got.data(), n);
    quantize_row_ref(DType::Q8_K, x.data(), want.data(), n);
    ASSERT_EQ(0, std::memcmp(got.data(), want.data(), got.size() * sizeof(BlockQ8_K))) << "n=" << n;
    for (size_t b = 0; b < got.size(); ++b)  // bsums hold the sums of each 16 q's
      for (int g = 0; g < 16; ++g) {
        int sum = 0;
        for (int i = 0; i < 16; ++i) sum += got[b].qs[16 * g + i];
        ASSERT_EQ(sum, got[b].bsums[g]);
      }
  }
}

TEST(QuantDot, ActivationFormatsFollowGgml) {
  // ggml-cpu's type_traits vec_dot_type table.
  EXPECT_EQ(activation_type(DType::F32), DType::F32);
  EXPECT_EQ(activation_type(DType::F16), DType::F16);
  EXPECT_EQ(activation_type(DType::BF16), DType::BF16);
  for (DType t : {DType::Q4_0, DType::Q5_0, DType::Q8_0}) EXPECT_EQ(activation_type(t), DType::Q8_0);
  for (DType t : {DType::Q4_1, DType::Q5_1}) EXPECT_EQ(activation_type(t), DType::Q8_1);
  for (DType t : {DType::Q2_K, DType::Q3_K, DType::Q4_K, DType::Q5_K, DType::Q6_K})
    EXPECT_EQ(activation_type(t), DType::Q8_K);
  EXPECT_EQ(activation_bytes(DType::Q4_K, 512), 2 * sizeof(BlockQ8_K));
  EXPECT_EQ(activation_bytes(DType::F16, 40), 80u);
}

TEST(QuantDot, FloatActivationsRoundToNearestEven) {
  std::mt19937_64 rng(test_seed() + 3);
  std::uniform_real_distribution<float> uniform(-100.0f, 100.0f);
  std::vector<float> x(1000);
  for (float& v : x) v = uniform(rng);
  std::vector<uint16_t> h(x.size()), b(x.size());
  quantize_activations(DType::F16, x.data(), static_cast<int64_t>(x.size()), h.data());
  quantize_activations(DType::BF16, x.data(), static_cast<int64_t>(x.size()), b.data());
  for (size_t i = 0; i < x.size(); ++i) {
    ASSERT_EQ(h[i], f32_to_f16(x[i]));
    ASSERT_EQ(b[i], f32_to_bf16(x[i]));
  }
}

}  // namespace
}  // namespace sotto
