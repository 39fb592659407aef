// gemm_nt_prepacked's and gemm_nt's packed AVX-512 kernels: the same blocked product as the AVX2 ones with 16-lane
// vectors (6 x 32 tiles in 12 ZMM accumulators, 32-column panels), twice the multiply-adds per instruction.
// Every function in this file, the kernel templates included, is compiled for AVX-512 F; it is called only
// when cpu_use_avx512_f32() (Intel CPUs with AVX-512 and the OS's ZMM state: cpu/cpu_features.h says why not
// AMD). The sums are made in the same order as the AVX2 kernel's, so the results are bit-identical.
#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx512f,avx2,fma"))), apply_to = function)
#else
#pragma GCC target("avx512f,avx2,fma")
#endif

#include "nn/gemm.h"
#include "nn/gemm_kernel.h"
#include "nn/gemm_prepacked_kernel.h"

namespace sotto::nn::cpu {

namespace {
typedef float F16 __attribute__((vector_size(64)));
}  // namespace

void gemm_nt_prepacked_avx512(int64_t M, int64_t N, int64_t K, const float* A, int64_t lda,
                              const float* panels, float* C, int64_t ldc) {
  gemm_nt_prepacked_slice<F16, 16>(M, N, K, A, lda, panels, C, ldc);
}

// gemm_nt's packed kernel (B copied into panels per call) on the same tiles: gemm.cpp's AVX-512 path.
void gemm_nt_packed_avx512(int64_t M, int64_t N, int64_t K, const float* A, int64_t lda, const float* B,
                           int64_t ldb, float* C, int64_t ldc) {
  gemm_nt_packed<F16, 16>(M, N, K, A, lda, B, ldb, C, ldc);
}

}  // namespace sotto::nn::cpu

#if defined(__clang__)
#pragma clang attribute pop
#endif
