// gemm_nt_packed (gemm_kernel.h) with B already in panels: the same k blocks, A panels and micro-kernel, so
// each element of C is summed in the same order with the same operations (bit-identical results).
#pragma once

#include "nn/gemm_kernel.h"

namespace sotto::nn::cpu {
namespace {

// panels: gemm_pack_b's layout, each NR-wide panel holding all K depths (column j's at j * K).
template <class V, int L>
void gemm_nt_prepacked_slice(Index M, Index N, Index K, const float* A, Index lda, const float* panels,
                             float* C, Index ldc) {
  gemm_nt_blocked<V, L>(M, N, K, A, lda, C, ldc, [&](Index n0, Index, Index k0, Index) {
    return std::pair<const float*, Index>(panels + n0 * K + k0 * 2 * L, K);
  });
}

}  // namespace
}  // namespace sotto::nn::cpu
