// Activation quantizers of cpu/quant_dot.h against ggml's reference arithmetic, bit for bit: q8_0 and q8_K
// against core/quantize_ref (itself checked byte-for-byte against llama.cpp in dtype_reference_test.cpp), and
// q8_1 against a restatement of ggml's quantize_row_q8_1_ref written here. Inputs are fresh random floats,
// including blocks with exact ties (x / d = k + 0.5) that tell round-half-away from round-half-even apart.
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

// ggml's quantize_row_q8_1_ref, restated: q8_0's d and q, then s = f16(sum(q) * d) with the unrounded d.
void reference_q8_1(const float* x, BlockQ8_1* y, int64_t n) {
  for (int64_t b = 0; b < n / 32; ++b) {
    float amax = 0.0f;
    for (int i = 0; i < 32; ++i) amax = std::max(amax, std::fabs(x[32 * b + i]));
    const float d = amax / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    y[b].d = f32_to_f16(d);
    int sum = 0;
    for (int i = 0; i < 32; ++i) {
      const float v = x[32 * b + i] * id;
      y[b].qs[i] = static_cast<int8_t>(std::roundf(v));
      sum += y[b].qs[i];
    }
    const float s = static_cast<float>(sum) * d;
    y[b].s = f32_to_f16(s);
  }
}

TEST(QuantDot, ActivationsQ8_0MatchReferenceBitForBit) {
  std::mt19937_64 rng(test_seed());
  for (int64_t n : {32, 64, 896, 4864}) {
    const std::vector<float> x = random_activations(rng, n);
    std::vector<BlockQ8_0> got(static_cast<size_t>(n / 32)), want(got.size());
    quantize_activations_q8_0(x.data(), got.data(), n);
    quantize_row_ref(DType::Q8_0, x.data(), want.data(), n);
    ASSERT_EQ(0, std::memcmp(got.data(), want.data(), got.size() * sizeof(BlockQ8_0))) << "n=" << n;
  }
}

// The AVX2 quantizer (quantize_activations_q8_0 on an AVX2 machine) and the portable one, both against ggml's
// reference, including blocks of exact ties.
TEST(QuantDot, ActivationsQ8_0BothInstructionSetsMatchReference) {
  std::mt19937_64 rng(test_seed() + 4);
  for (int64_t n : {32, 96, 896, 4864}) {
    const std::vector<float> x = random_activations(rng, n);
    std::vector<BlockQ8_0> want(static_cast<size_t>(n / 32)), portable(want.size()), fast(want.size());
    quantize_row_ref(DType::Q8_0, x.data(), want.data(), n);
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
