#include "nn/gemm.h"
#include "nn/gemm_prepacked_kernel.h"

namespace sotto::nn::cpu {

namespace {
typedef float F8 __attribute__((vector_size(32)));
}  // namespace

void gemm_nt_prepacked_avx2(int64_t M, int64_t N, int64_t K, const float* A, int64_t lda, const float* panels,
                            float* C, int64_t ldc) {
  gemm_nt_prepacked_slice<F8, 8>(M, N, K, A, lda, panels, C, ldc);
}

}  // namespace sotto::nn::cpu
