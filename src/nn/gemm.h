// The CPU's matrix-product kernels under linear / matmul / conv / lstm / attention. Both operands are
// K-contiguous ("NT": C = A . B^T), which is how a Linear's input and weight, and a conv's weight rows and its
// unrolled input columns, lie in memory. The hot loop of every network on the op layer is here.
#pragma once

#include <cstdint>

namespace sotto::nn {
class Context;
}

namespace sotto::nn::cpu {

// C[m * ldc + n] = sum_k A[m * lda + k] * B[n * ldb + k], m < M, n < N. Single-threaded; AVX2+FMA when the CPU
// has it, else 4-lane vectors (SSE natively, SIMD128 in wasm). At least 6 rows and 16 columns (8 on 4 lanes)
// run the packed 6 x 2-vector micro-kernel (gemm_kernel.h); thinner products (a decoder step's one row) the
// dot-product blocks.
void gemm_nt(int64_t M, int64_t N, int64_t K, const float* A, int64_t lda, const float* B, int64_t ldb,
             float* C, int64_t ldc);
// The same split over ctx's thread pool along the larger of M and N.
void gemm_nt(const Context& ctx, int64_t M, int64_t N, int64_t K, const float* A, int64_t lda, const float* B,
             int64_t ldb, float* C, int64_t ldc);
// The scalar reference (double accumulation).
void gemm_nt_ref(int64_t M, int64_t N, int64_t K, const float* A, int64_t lda, const float* B, int64_t ldb,
                 float* C, int64_t ldc);

// Integer: C[m * ldc + n] = sum_k A[m * lda + k] * B[n * ldb + k] in int32, A and B int16 (uint8/int8 values
// with their zero points already subtracted, so |value| <= 255 and K < 2^15 cannot overflow).
void igemm_nt(int64_t M, int64_t N, int64_t K, const int16_t* A, int64_t lda, const int16_t* B, int64_t ldb,
              int32_t* C, int64_t ldc);
void igemm_nt(const Context& ctx, int64_t M, int64_t N, int64_t K, const int16_t* A, int64_t lda,
              const int16_t* B, int64_t ldb, int32_t* C, int64_t ldc);

// A stride-1 conv's int16 product with time in the vector lanes (gemm_kernel.h's iconv_block):
// C[m * ldc + t] = sum_{j < taps} sum_{i < 2 pairs} A[m * lda + j * 2 pairs + i] * G[t + j][i], t < N, where G
// is given pair-major: G2[(p * ldg + r) * 2 + h] = G[r][2p + h], at least N + taps - 1 rows per pair. Same
// value range as igemm_nt.
void iconv_pairs(int64_t M, int64_t N, int64_t taps, int64_t pairs, const int16_t* A, int64_t lda,
                 const int16_t* G2, int64_t ldg, int32_t* C, int64_t ldc);
void iconv_pairs(const Context& ctx, int64_t M, int64_t N, int64_t taps, int64_t pairs, const int16_t* A,
                 int64_t lda, const int16_t* G2, int64_t ldg, int32_t* C, int64_t ldc);
// Block shape variants for bench/kokoro_wasm_kernel.mjs (0: the one iconv_pairs uses).
void iconv_pairs_variant(int variant, int64_t M, int64_t N, int64_t taps, int64_t pairs, const int16_t* A,
                         int64_t lda, const int16_t* G2, int64_t ldg, int32_t* C, int64_t ldc);

// The AVX2 builds of the same kernels (gemm_avx2.cpp); call only when cpu_use_avx2().
void gemm_nt_avx2(int64_t M, int64_t N, int64_t K, const float* A, int64_t lda, const float* B, int64_t ldb,
                  float* C, int64_t ldc);
void gemm_nt_packed_avx2(int64_t M, int64_t N, int64_t K, const float* A, int64_t lda, const float* B,
                         int64_t ldb, float* C, int64_t ldc);
void igemm_nt_avx2(int64_t M, int64_t N, int64_t K, const int16_t* A, int64_t lda, const int16_t* B,
                   int64_t ldb, int32_t* C, int64_t ldc);
void iconv_pairs_avx2(int64_t M, int64_t N, int64_t taps, int64_t pairs, const int16_t* A, int64_t lda,
                      const int16_t* G2, int64_t ldg, int32_t* C, int64_t ldc);
// The packed kernel on AVX-512 (gemm_prepacked_avx512_avx2.cpp); call only when cpu_use_avx512_f32().
void gemm_nt_packed_avx512(int64_t M, int64_t N, int64_t K, const float* A, int64_t lda, const float* B,
                           int64_t ldb, float* C, int64_t ldc);

}  // namespace sotto::nn::cpu

namespace sotto::nn::cpu {

// A constant B (a weight) copied once into the packed kernel's column panels, so that its products skip the
// per-call copy of B (a quarter of a Linear's time over ~100 frames, where each weight element serves only
// M rows). Panel p holds columns [p * W, p * W + W), k-major (panel[k * W + j]), W = gemm_panel_width() for
// the kernel this CPU runs; N must be a multiple of W. The products are bit-identical to gemm_nt's packed
// kernel on the same operands (gemm_prepacked.cpp).
int64_t gemm_panel_width();
void gemm_pack_b(int64_t N, int64_t K, const float* B, int64_t ldb, float* panels);
// C[m * ldc + n] = sum_k A[m * lda + k] * B[n][k] for B given as gemm_pack_b's panels; any M >= 1 (rows are
// padded in the kernel), split over ctx's threads in whole panels.
void gemm_nt_prepacked(const Context& ctx, int64_t M, int64_t N, int64_t K, const float* A, int64_t lda,
                       const float* panels, float* C, int64_t ldc);
// Split-bf16 products, three bf16 products per multiply-add, float sums (gemm_bf16.cpp says what is computed
// and how close to float32 it comes): B [N][K] split once into the highs' and the lows' panels of 16 columns
// (N a multiple of 16) in AMX's pair layout, K padded with zeros to kp = gemm_bf16_kp(K) (a multiple of 32):
// panel p's highs at panels + 2 p kp 16, [(r * 16 + j) * 2 + i] = hi(B[16 p + j][2 r + i]), its lows kp 16
// further. gemm_nt_bf16x3 runs on AMX tiles where gemm_bf16_use_amx(), else a slow scalar loop of the same
// arithmetic; gemm_nt_bf16x3_ref is the reference on unpacked operands.
int64_t gemm_bf16_kp(int64_t K);
void gemm_pack_b_bf16x3(int64_t N, int64_t K, const float* B, int64_t ldb, uint16_t* panels);
void gemm_nt_bf16x3(const Context& ctx, int64_t M, int64_t N, int64_t K, const float* A, int64_t lda,
                    const uint16_t* panels, float* C, int64_t ldc);
void gemm_nt_bf16x3_ref(int64_t M, int64_t N, int64_t K, const float* A, int64_t lda, const float* B,
                        int64_t ldb, float* C, int64_t ldc);
// cpu_features().amx_bf16 and not turned off by gemm_bf16_allow_amx(false) (tests: the scalar path).
bool gemm_bf16_use_amx();
void gemm_bf16_allow_amx(bool allow);

// The kernels for one slice (gemm_prepacked_avx512_avx2.cpp: 32-column panels; gemm_prepacked_avx2.cpp:
// 16-column; gemm_prepacked.cpp: 8-column).
void gemm_nt_prepacked_avx512(int64_t M, int64_t N, int64_t K, const float* A, int64_t lda,
                              const float* panels, float* C, int64_t ldc);
void gemm_nt_prepacked_avx2(int64_t M, int64_t N, int64_t K, const float* A, int64_t lda, const float* panels,
                            float* C, int64_t ldc);

}  // namespace sotto::nn::cpu
