// The pre-packed product (nn/gemm.h gemm_pack_b + gemm_nt_prepacked, Parakeet's encoder weights) on fresh
// random operands of odd sizes: within rounding of the double reference for any M (1 row up), K over several
// k blocks, strides wider than K, C's neighbours untouched; and bit-identical to gemm_nt where gemm_nt runs its
// packed kernel (at least 6 rows and 16 columns), single-threaded and on 3 threads, on both kernel variants.
#include <cmath>
#include <cstring>

#include "nn/gemm.h"
#include "nn_test_support.h"

namespace sotto::nn {
namespace {

using testing::Backends;
using testing::rand_int;
using testing::rand_tensor;

float product_tol(int64_t k) {
  return 2e-6f * static_cast<float>(std::sqrt(static_cast<double>(k)) + 1.0);
}

TEST(GemmPrepacked, MatchesReferenceAndThePackedKernel) {
  Backends b;
  b.each([&](Context& ctx, const std::string& where) {
    const int64_t width = cpu::gemm_panel_width();
    for (const int64_t k : {rand_int(1, 256), rand_int(257, 700)}) {
      for (const int64_t m : {rand_int(1, 5), rand_int(6, 90)}) {
        const int64_t n = width * rand_int(1, 7);
        const int64_t lda = k + rand_int(0, 5), ldb = k + rand_int(0, 5), ldc = n + rand_int(0, 5);
        const Tensor a = rand_tensor(ctx, {m, lda}), bt = rand_tensor(ctx, {n, ldb});
        std::vector<float> panels(static_cast<size_t>(n * k));
        cpu::gemm_pack_b(n, k, bt.f32(), ldb, panels.data());
        std::vector<float> c(static_cast<size_t>(m * ldc), 7.0f), want(c.size(), 7.0f), same(c.size(), 7.0f);
        cpu::gemm_nt_prepacked(ctx, m, n, k, a.f32(), lda, panels.data(), c.data(), ldc);
        cpu::gemm_nt_ref(m, n, k, a.f32(), lda, bt.f32(), ldb, want.data(), ldc);
        const std::string what =
            where + ": [" + std::to_string(m) + ", " + std::to_string(n) + "] . K " + std::to_string(k);
        for (size_t i = 0; i < c.size(); ++i)
          ASSERT_NEAR(c[i], want[i], product_tol(k)) << what << " element " << i;
        if (m >= 6 && n >= 16) {
          cpu::gemm_nt(ctx, m, n, k, a.f32(), lda, bt.f32(), ldb, same.data(), ldc);
          ASSERT_EQ(std::memcmp(c.data(), same.data(), c.size() * 4), 0) << what << ": differs from gemm_nt";
        }
      }
    }
  });
}

}  // namespace
}  // namespace sotto::nn
