#include "nn/gemm.h"

#include <algorithm>

#include "cpu/cpu_features.h"
#include "nn/cpu.h"
#include "nn/gemm_kernel.h"

namespace sotto::nn::cpu {

namespace {
typedef float F4 __attribute__((vector_size(16)));
typedef int16_t I16x4 __attribute__((vector_size(8)));
typedef int32_t I32x4 __attribute__((vector_size(16)));
}  // namespace

void gemm_nt_ref(int64_t M, int64_t N, int64_t K, const float* A, int64_t lda, const float* B, int64_t ldb,
                 float* C, int64_t ldc) {
  for (int64_t m = 0; m < M; ++m)
    for (int64_t n = 0; n < N; ++n) {
      double sum = 0;
      for (int64_t k = 0; k < K; ++k) sum += static_cast<double>(A[m * lda + k]) * B[n * ldb + k];
      C[m * ldc + n] = static_cast<float>(sum);
    }
}

void gemm_nt(int64_t M, int64_t N, int64_t K, const float* A, int64_t lda, const float* B, int64_t ldb,
             float* C, int64_t ldc) {
#if defined(__x86_64__) && !defined(__wasm__)
  if (cpu_use_avx2()) return gemm_nt_avx2(M, N, K, A, lda, B, ldb, C, ldc);
#endif
  gemm_nt_vec<F4, 4>(M, N, K, A, lda, B, ldb, C, ldc);
}

void igemm_nt(int64_t M, int64_t N, int64_t K, const int16_t* A, int64_t lda, const int16_t* B, int64_t ldb,
              int32_t* C, int64_t ldc) {
#if defined(__x86_64__) && !defined(__wasm__)
  if (cpu_use_avx2()) return igemm_nt_avx2(M, N, K, A, lda, B, ldb, C, ldc);
#endif
  igemm_nt_vec<I16x4, I32x4, 4>(M, N, K, A, lda, B, ldb, C, ldc);
}

// Threads split the larger side in multiples of 4 rows (whole blocks), so a thread's slice tiles like the whole.
void gemm_nt(const Context& ctx, int64_t M, int64_t N, int64_t K, const float* A, int64_t lda, const float* B,
             int64_t ldb, float* C, int64_t ldc) {
  if (M >= N) {
    parallel_for(ctx, (M + 3) / 4, 4 * N * K, [&](int64_t b, int64_t e) {
      const int64_t m0 = b * 4, m1 = std::min(M, e * 4);
      gemm_nt(m1 - m0, N, K, A + m0 * lda, lda, B, ldb, C + m0 * ldc, ldc);
    });
  } else {
    parallel_for(ctx, (N + 3) / 4, 4 * M * K, [&](int64_t b, int64_t e) {
      const int64_t n0 = b * 4, n1 = std::min(N, e * 4);
      gemm_nt(M, n1 - n0, K, A, lda, B + n0 * ldb, ldb, C + n0, ldc);
    });
  }
}

void igemm_nt(const Context& ctx, int64_t M, int64_t N, int64_t K, const int16_t* A, int64_t lda,
              const int16_t* B, int64_t ldb, int32_t* C, int64_t ldc) {
  if (M >= N) {
    parallel_for(ctx, (M + 3) / 4, 4 * N * K, [&](int64_t b, int64_t e) {
      const int64_t m0 = b * 4, m1 = std::min(M, e * 4);
      igemm_nt(m1 - m0, N, K, A + m0 * lda, lda, B, ldb, C + m0 * ldc, ldc);
    });
  } else {
    parallel_for(ctx, (N + 3) / 4, 4 * M * K, [&](int64_t b, int64_t e) {
      const int64_t n0 = b * 4, n1 = std::min(N, e * 4);
      igemm_nt(M, n1 - n0, K, A, lda, B + n0 * ldb, ldb, C + n0, ldc);
    });
  }
}

}  // namespace sotto::nn::cpu
