#include "nn/gemm.h"
#include "nn/gemm_kernel.h"

#include <immintrin.h>

namespace sotto::nn::cpu {

namespace {
typedef float F8 __attribute__((vector_size(32)));
typedef int16_t I16x16 __attribute__((vector_size(32)));
typedef int32_t I32x8 __attribute__((vector_size(32)));

I32x8 madd16(I16x16 a, I16x16 b) {
  return reinterpret_cast<I32x8>(
      _mm256_madd_epi16(reinterpret_cast<__m256i>(a), reinterpret_cast<__m256i>(b)));
}
}  // namespace

void gemm_nt_avx2(int64_t M, int64_t N, int64_t K, const float* A, int64_t lda, const float* B, int64_t ldb,
                  float* C, int64_t ldc) {
  gemm_nt_vec<F8, 8>(M, N, K, A, lda, B, ldb, C, ldc);
}

void gemm_nt_packed_avx2(int64_t M, int64_t N, int64_t K, const float* A, int64_t lda, const float* B,
                         int64_t ldb, float* C, int64_t ldc) {
  gemm_nt_packed<F8, 8>(M, N, K, A, lda, B, ldb, C, ldc);
}

void igemm_nt_avx2(int64_t M, int64_t N, int64_t K, const int16_t* A, int64_t lda, const int16_t* B,
                   int64_t ldb, int32_t* C, int64_t ldc) {
  igemm_nt_madd<I16x16, I32x8, 8>(M, N, K, A, lda, B, ldb, C, ldc, madd16);
}

void iconv_pairs_avx2(int64_t M, int64_t N, int64_t taps, int64_t pairs, const int16_t* A, int64_t lda,
                      const int16_t* G2, int64_t ldg, int32_t* C, int64_t ldc) {
  iconv_pairs_tiled<I16x16, I32x8, 8, 4, 2>(M, N, taps, pairs, A, lda, G2, ldg, C, ldc, madd16);
}

}  // namespace sotto::nn::cpu
