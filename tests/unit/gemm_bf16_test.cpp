// The split-bf16 product (nn/gemm.h gemm_pack_b_bf16x3 + gemm_nt_bf16x3, Parakeet's bf16x3 encoder products)
// on fresh random operands of odd sizes: against the scalar reference (three bf16 products a multiply-add, a
// float sum over k in order, one rounding a product), bit for bit on the scalar path and within a few float
// roundings on the AMX tiles where the CPU has them (the tiles sum in their own order); any M (one row tile or
// several, a partial last one), K across several 32-step blocks and not a multiple of 32, N an odd or even
// number of 16-column panels, strides wider than K, C's neighbours untouched; single-threaded and on 3 threads.
// And the reference itself close to the float64 product: each term within ~2^-16 of a b.
#include <cmath>
#include <cstring>

#include "nn/cpu.h"
#include "nn/gemm.h"
#include "nn_test_support.h"

namespace sotto::nn {
namespace {

using testing::Backends;
using testing::rand_int;
using testing::rand_tensor;

// exact: the scalar path (the reference's own loop); else within K float roundings of sums bounded by K (|a|,
// |b| < 1), 2^-24 K^2: a wrong or misplaced operand moves a sum by ~0.1 or more.
void check(Context& ctx, const std::string& where, bool exact_sums) {
  for (const int64_t k : {rand_int(1, 40), 64 * rand_int(1, 4), rand_int(65, 700)}) {
    for (const int64_t m : {rand_int(1, 16), rand_int(17, 32), rand_int(33, 90)}) {
      const int64_t n = 16 * rand_int(1, 7);
      const int64_t lda = k + rand_int(0, 5), ldb = k + rand_int(0, 5), ldc = n + rand_int(0, 5);
      const Tensor a = rand_tensor(ctx, {m, lda}), bt = rand_tensor(ctx, {n, ldb});
      std::vector<uint16_t> panels(static_cast<size_t>(n * cpu::gemm_bf16_kp(k) * 2));
      cpu::gemm_pack_b_bf16x3(n, k, bt.f32(), ldb, panels.data());
      std::vector<float> c(static_cast<size_t>(m * ldc), 7.0f), want(c.size(), 7.0f), exact(c.size(), 7.0f);
      cpu::gemm_nt_bf16x3(ctx, m, n, k, a.f32(), lda, panels.data(), c.data(), ldc);
      cpu::gemm_nt_bf16x3_ref(m, n, k, a.f32(), lda, bt.f32(), ldb, want.data(), ldc);
      cpu::gemm_nt_ref(m, n, k, a.f32(), lda, bt.f32(), ldb, exact.data(), ldc);
      const std::string what =
          where + ": [" + std::to_string(m) + ", " + std::to_string(n) + "] . K " + std::to_string(k);
      if (exact_sums) {
        ASSERT_EQ(std::memcmp(c.data(), want.data(), c.size() * 4), 0)
            << what << ": differs from the reference";
      } else {
        const float sums_tol = static_cast<float>(k * k) * 6e-8f + 1e-7f;
        for (size_t i = 0; i < c.size(); ++i)
          ASSERT_NEAR(c[i], want[i], sums_tol) << what << " element " << i;
        for (int64_t r = 0; r < m; ++r)  // the columns between n and ldc untouched
          for (int64_t j = n; j < ldc; ++j) ASSERT_EQ(c[static_cast<size_t>(r * ldc + j)], 7.0f) << what;
      }
      // |a|, |b| < 1: each term within 3 * 2^-17 of a b (the dropped a_lo b_lo and the lows' roundings), plus the
      // float sum's roundings (K of them, each within 2^-24 of a sum bounded by K).
      const float tol = static_cast<float>(k) * (3.0f / 131072.0f) + static_cast<float>(k * k) * 6e-8f;
      for (size_t i = 0; i < c.size(); ++i) ASSERT_NEAR(want[i], exact[i], tol) << what << " element " << i;
    }
  }
}

TEST(GemmBf16, AmxMatchesReference) {
  if (!cpu::gemm_bf16_use_amx()) GTEST_SKIP() << "this CPU (or OS) has no AMX-BF16";
  Backends b;
  b.each([&](Context& ctx, const std::string& where) { check(ctx, where + " amx", false); });
}

TEST(GemmBf16, ScalarPathMatchesReferenceBitForBit) {
  cpu::gemm_bf16_allow_amx(false);
  Backends b;
  b.each([&](Context& ctx, const std::string& where) { check(ctx, where + " scalar", true); });
  cpu::gemm_bf16_allow_amx(true);
}

// Linear on packed split-bf16 weights: the product plus the bias, x's leading shape kept.
TEST(GemmBf16, LinearAddsTheBias) {
  Backends b;
  b.each([&](Context& ctx, const std::string& where) {
    const Tensor x = rand_tensor(ctx, {2, 5, 70}), w = rand_tensor(ctx, {48, 70}),
                 bias = rand_tensor(ctx, {48});
    const Tensor y = cpu::linear_bf16x3(x, cpu::pack_weight_bf16x3(ctx, w), bias);
    ASSERT_EQ(y.dim(0), 2);
    ASSERT_EQ(y.dim(1), 5);
    ASSERT_EQ(y.dim(2), 48);
    std::vector<float> want(10 * 48);
    cpu::gemm_nt_bf16x3_ref(10, 48, 70, x.f32(), 70, w.f32(), 70, want.data(), 48);
    for (int64_t i = 0; i < 10 * 48; ++i)
      ASSERT_NEAR(y.f32()[i], want[static_cast<size_t>(i)] + bias.f32()[i % 48], 1e-4f) << where << " " << i;
  });
}

}  // namespace
}  // namespace sotto::nn
