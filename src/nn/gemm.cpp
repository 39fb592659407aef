#include "nn/gemm.h"

#include <algorithm>

#include "cpu/cpu_features.h"
#include "nn/cpu.h"
#include "nn/gemm_kernel.h"

#if defined(__x86_64__) && !defined(__wasm__)
#include <emmintrin.h>
#endif

namespace sotto::nn::cpu {

namespace {
typedef float F4 __attribute__((vector_size(16)));
typedef int32_t I32x4 __attribute__((vector_size(16)));
typedef int16_t I16x8 __attribute__((vector_size(16)));

// Pairwise int16 multiply-add: pmaddwd (SSE2, every x86-64) natively, i32x4.dot_i16x8_s in wasm.
[[maybe_unused]] I32x4 madd8(I16x8 a, I16x8 b) {
#if defined(__wasm__)
  return __builtin_wasm_dot_s_i32x4_i16x8(a, b);
#elif defined(__x86_64__)
  return reinterpret_cast<I32x4>(_mm_madd_epi16(reinterpret_cast<__m128i>(a), reinterpret_cast<__m128i>(b)));
#else
  I32x4 r;
  for (int i = 0; i < 4; ++i) r[i] = int32_t{a[2 * i]} * b[2 * i] + int32_t{a[2 * i + 1]} * b[2 * i + 1];
  return r;
#endif
}
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

namespace {
// The packed kernel or the dot-product blocks, chosen once for a whole product (a thread's slice may be
// thinner than a tile) so that the result does not depend on the thread split.
bool use_packed(int64_t M, int64_t N, int64_t K) {
#if defined(__x86_64__) && !defined(__wasm__)
  if (cpu_use_avx2()) return packed_fits<8>(M, N, K);
#endif
  return packed_fits<4>(M, N, K);
}

void gemm_slice(bool packed, int64_t M, int64_t N, int64_t K, const float* A, int64_t lda, const float* B,
                int64_t ldb, float* C, int64_t ldc) {
#if defined(__x86_64__) && !defined(__wasm__)
  if (packed && cpu_use_avx512_f32()) return gemm_nt_packed_avx512(M, N, K, A, lda, B, ldb, C, ldc);
  if (cpu_use_avx2())
    return packed ? gemm_nt_packed_avx2(M, N, K, A, lda, B, ldb, C, ldc)
                  : gemm_nt_avx2(M, N, K, A, lda, B, ldb, C, ldc);
#endif
  const auto m = static_cast<Index>(M), n = static_cast<Index>(N), k = static_cast<Index>(K);
  if (packed)
    gemm_nt_packed<F4, 4>(m, n, k, A, static_cast<Index>(lda), B, static_cast<Index>(ldb), C,
                          static_cast<Index>(ldc));
  else
    gemm_nt_vec<F4, 4>(m, n, k, A, static_cast<Index>(lda), B, static_cast<Index>(ldb), C,
                       static_cast<Index>(ldc));
}
}  // namespace

void gemm_nt(int64_t M, int64_t N, int64_t K, const float* A, int64_t lda, const float* B, int64_t ldb,
             float* C, int64_t ldc) {
  gemm_slice(use_packed(M, N, K), M, N, K, A, lda, B, ldb, C, ldc);
}

void igemm_nt(int64_t M, int64_t N, int64_t K, const int16_t* A, int64_t lda, const int16_t* B, int64_t ldb,
              int32_t* C, int64_t ldc) {
#if defined(__x86_64__) && !defined(__wasm__)
  if (cpu_use_avx2()) return igemm_nt_avx2(M, N, K, A, lda, B, ldb, C, ldc);
#endif
  igemm_nt_madd<I16x8, I32x4, 4>(static_cast<Index>(M), static_cast<Index>(N), static_cast<Index>(K), A,
                                 static_cast<Index>(lda), B, static_cast<Index>(ldb), C,
                                 static_cast<Index>(ldc), madd8);
}

void iconv_pairs_variant(int variant, int64_t M, int64_t N, int64_t taps, int64_t pairs, const int16_t* A,
                         int64_t lda, const int16_t* G2, int64_t ldg, int32_t* C, int64_t ldc) {
#if defined(__x86_64__) && !defined(__wasm__)
  if (cpu_use_avx2()) return iconv_pairs_avx2(M, N, taps, pairs, A, lda, G2, ldg, C, ldc);
#endif
  switch (variant) {
    case 1:
      return iconv_pairs_tiled<I16x8, I32x4, 4, 3, 3>(M, N, taps, pairs, A, lda, G2, ldg, C, ldc, madd8);
    case 2:
      return iconv_pairs_tiled<I16x8, I32x4, 4, 2, 4>(M, N, taps, pairs, A, lda, G2, ldg, C, ldc, madd8);
    case 3:
      return iconv_pairs_tiled<I16x8, I32x4, 4, 4, 3>(M, N, taps, pairs, A, lda, G2, ldg, C, ldc, madd8);
    default:
      return iconv_pairs_tiled<I16x8, I32x4, 4, 4, 2>(M, N, taps, pairs, A, lda, G2, ldg, C, ldc, madd8);
  }
}

void iconv_pairs(int64_t M, int64_t N, int64_t taps, int64_t pairs, const int16_t* A, int64_t lda,
                 const int16_t* G2, int64_t ldg, int32_t* C, int64_t ldc) {
  iconv_pairs_variant(0, M, N, taps, pairs, A, lda, G2, ldg, C, ldc);
}

// Threads split the larger side in whole tiles (16 columns or 6 rows; 4 rows on the dot-product blocks), so a
// thread's slice tiles like the whole.
void gemm_nt(const Context& ctx, int64_t M, int64_t N, int64_t K, const float* A, int64_t lda, const float* B,
             int64_t ldb, float* C, int64_t ldc) {
  const bool packed = use_packed(M, N, K);
  if (M >= N) {
    const int64_t rows = packed ? 6 : 4;
    parallel_for(ctx, (M + rows - 1) / rows, rows * N * K, [&](int64_t b, int64_t e) {
      const int64_t m0 = b * rows, m1 = std::min(M, e * rows);
      gemm_slice(packed, m1 - m0, N, K, A + m0 * lda, lda, B, ldb, C + m0 * ldc, ldc);
    });
  } else {
    const int64_t cols = packed ? 16 : 4;
    parallel_for(ctx, (N + cols - 1) / cols, cols * M * K, [&](int64_t b, int64_t e) {
      const int64_t n0 = b * cols, n1 = std::min(N, e * cols);
      gemm_slice(packed, M, n1 - n0, K, A, lda, B + n0 * ldb, ldb, C + n0, ldc);
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

// Split in blocks of 4 weight rows, or of 16 outputs where there are more outputs than rows.
void iconv_pairs(const Context& ctx, int64_t M, int64_t N, int64_t taps, int64_t pairs, const int16_t* A,
                 int64_t lda, const int16_t* G2, int64_t ldg, int32_t* C, int64_t ldc) {
  const int64_t work = 2 * taps * pairs;
  if (M >= N) {
    parallel_for(ctx, (M + 3) / 4, 4 * N * work, [&](int64_t b, int64_t e) {
      const int64_t m0 = b * 4, m1 = std::min(M, e * 4);
      iconv_pairs(m1 - m0, N, taps, pairs, A + m0 * lda, lda, G2, ldg, C + m0 * ldc, ldc);
    });
  } else {
    parallel_for(ctx, (N + 15) / 16, 16 * M * work, [&](int64_t b, int64_t e) {
      const int64_t n0 = b * 16, n1 = std::min(N, e * 16);
      iconv_pairs(M, n1 - n0, taps, pairs, A, lda, G2 + n0 * 2, ldg, C + n0, ldc);
    });
  }
}

}  // namespace sotto::nn::cpu
