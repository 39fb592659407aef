#include "nn/gemm.h"
#include "nn/gemm_kernel.h"

namespace sotto::nn::cpu {

namespace {
typedef float F8 __attribute__((vector_size(32)));
typedef int16_t I16x8 __attribute__((vector_size(16)));
typedef int32_t I32x8 __attribute__((vector_size(32)));
}  // namespace

void gemm_nt_avx2(int64_t M, int64_t N, int64_t K, const float* A, int64_t lda, const float* B, int64_t ldb,
                  float* C, int64_t ldc) {
  gemm_nt_vec<F8, 8>(M, N, K, A, lda, B, ldb, C, ldc);
}

void igemm_nt_avx2(int64_t M, int64_t N, int64_t K, const int16_t* A, int64_t lda, const int16_t* B,
                   int64_t ldb, int32_t* C, int64_t ldc) {
  igemm_nt_vec<I16x8, I32x8, 8>(M, N, K, A, lda, B, ldb, C, ldc);
}

}  // namespace sotto::nn::cpu
