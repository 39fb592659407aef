// gemm_nt_packed (gemm_kernel.h) with B already in panels: the same k blocks, A panels and micro-kernel, so
// each element of C is summed in the same order with the same operations (bit-identical results).
#pragma once

#include "nn/gemm_kernel.h"

namespace sotto::nn::cpu {
namespace {

template <class V, int L>
void gemm_nt_prepacked_slice(Index M, Index N, Index K, const float* A, Index lda, const float* panels,
                             float* C, Index ldc) {
  constexpr Index NR = 2 * L;
  const Index k_blocks = (K + kPackKc - 1) / kPackKc;
  const Index kc_max = (K + k_blocks - 1) / k_blocks;
  const Index mc_max = std::min(kPackMc, (M + kMr - 1) / kMr * kMr);
  const Index nc_max = std::min(kPackNc, (N + NR - 1) / NR * NR);
  std::unique_ptr<float[]> a_pack(new float[static_cast<size_t>(mc_max * kc_max)]);
  for (Index n0 = 0; n0 < N; n0 += nc_max) {
    const Index nc = std::min(nc_max, N - n0);
    for (Index k0 = 0; k0 < K; k0 += kc_max) {
      const Index kc = std::min(kc_max, K - k0);
      for (Index m0 = 0; m0 < M; m0 += mc_max) {
        const Index mc = std::min(mc_max, M - m0);
        pack_panels<kMr>(A + m0 * lda, lda, mc, k0, kc, a_pack.get());
        for (Index j = 0; j < nc; j += NR)
          for (Index i = 0; i < mc; i += kMr)
            micro_kernel<V, L>(kc, a_pack.get() + i * kc, panels + (n0 + j) * K + k0 * NR,
                               C + (m0 + i) * ldc + n0 + j, ldc, std::min(kMr, mc - i), std::min(NR, nc - j),
                               k0 > 0);
      }
    }
  }
}

}  // namespace
}  // namespace sotto::nn::cpu
