// Weight-type-generic dot products between quantized weight rows and quantized activations, the way
// llama.cpp's CPU backend computes them, for matrix x vector (one token) and matrix x matrix (a tile of
// tokens). cpu/linear.h is the interface the model uses; this header is the kernel layer underneath it.
//
// Activations are quantized once per call, exactly as ggml's reference quantizers do, to the format ggml
// pairs with the weight type (q8_0, q8_1, q8_K, or f16 / bf16 / f32 for float weights). Every dot product
// then has an exact integer part and the same per-block scale products as ggml's vec_dot_*:
//   q4_0 q5_0 q8_0 . q8_0   sum_b  d_w * d_x * sum_i q_w q_x                 (q_w with its offset removed)
//   q4_1 q5_1      . q8_1   sum_b  d_w * d_x * sum_i q_w q_x + m_w * s_x     (s_x = d_x * sum_i q_x)
//   q2_K q4_K q5_K . q8_K   sum_b  d_w * d_x * sum_g sc_g sum_i q_w q_x - dmin_w * d_x * sum_g min_g bsum_g
//   q3_K q6_K      . q8_K   sum_b  d_w * d_x * sum_g sc_g sum_i q_w q_x       (signed q_w, signed sc_g)
// Only the order in which the float per-block terms are added differs from ggml.
//
// Every kernel works on a range of weight rows and n tokens: y[t * y_stride + r] = W[r, :] . x_t for
// r in [row_begin, row_end), t in [0, n). Decode (n = 1) runs four rows per pass; prefill runs tiles of
// rows x tokens so each weight block is decoded once per tile.
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/dtype.h"
#include "core/quant_blocks.h"

namespace sotto {

// ---- activation quantizers (llama.cpp's x86 arithmetic, bit for bit) -------------------------------------
// n is a multiple of the block size (32, or 256 for q8_K).
// q8_0: d = amax / 127 (kept as f16), q = x * (127 / amax) rounded half to even, as llama.cpp's x86 quantizer
// computes it (ggml's reference one rounds x * (1 / d) halves away from zero).
void quantize_activations_q8_0(const float* x, BlockQ8_0* y, int64_t n);
void quantize_activations_q8_0_portable(const float* x, BlockQ8_0* y, int64_t n);
// q8_1: as q8_0, plus s = d * sum(q) stored as f16.
void quantize_activations_q8_1(const float* x, BlockQ8_1* y, int64_t n);
// q8_K: the value of largest magnitude maps to -127 (iscale = -127 / max, round to nearest even), d = 1 /
// iscale as f32, bsums = sums of each 16 q's.
void quantize_activations_q8_K(const float* x, BlockQ8_K* y, int64_t n);
void quantize_activations_q8_K_portable(const float* x, BlockQ8_K* y, int64_t n);

// ---- kernels --------------------------------------------------------------------------------------------
// weights: rows of `cols` elements in the weight type (row r starts at r * row_bytes); xq: n activation rows
// in the activation type, xq_stride bytes apart.
using QuantDotRowsFn = void (*)(const void* weights, int64_t cols, const void* xq, int64_t n,
                                size_t xq_stride, float* y, int64_t y_stride, int64_t row_begin,
                                int64_t row_end);

// The kernel for weight type w in each instruction set; nullptr where that set has none (the AVX2 set then
// falls back to the portable one). quant_dot_rows() picks per call from cpu_use_avx2().
QuantDotRowsFn quant_dot_portable(DType w);
// The generic portable kernels (each block decoded into a buffer, then one integer dot for every type);
// quant_dot_portable() returns them except where the wasm build has a register-resident kernel.
QuantDotRowsFn quant_dot_portable_generic(DType w);
#if defined(__wasm_simd128__)
QuantDotRowsFn quant_dot_wasm_fast(DType w);  // quant_dot_fast_wasm.cpp: q4_0 q5_0 q8_0 q4_K q6_K
#endif
#if defined(__x86_64__) && !defined(__wasm__)
#define SOTTO_HAVE_AVX2_QUANT_DOT 1
QuantDotRowsFn quant_dot_avx2(DType w);       // quant_dot_avx2.cpp: the fast kernel where there is one, else
                                              // the generic one (each block decoded to the stack first)
QuantDotRowsFn quant_dot_avx2_fast(DType w);  // quant_dot_fast_avx2.cpp: q4_0 q5_0 q8_0 q4_K q6_K
// quant_dot_fast_vnni_avx2.cpp: the same kernels with AVX-512 VNNI + VL (bit for bit the same results); only
// where cpu_features().avx512_vnni.
QuantDotRowsFn quant_dot_avx2_vnni(DType w);
QuantDotRowsFn quant_dot_avx2_generic(DType w);  // quant_dot_avx2.cpp: every type
// The q8_0 / q8_K activation quantizers in AVX2 (bit for bit the portable ones): quantize_activations_q8_0()
// and _q8_K() call them when cpu_use_avx2(); the *_portable() forms never do.
void quantize_activations_q8_0_avx2(const float* x, BlockQ8_0* y, int64_t n);
void quantize_activations_q8_K_avx2(const float* x, BlockQ8_K* y, int64_t n);  // likewise
#endif
QuantDotRowsFn quant_dot_rows(DType w);

// ---- block order: the float order of llama.cpp's repacked q4_0 (its CPU backend on x86) -------------------
// llama.cpp's CPU backend on x86 (AVX2 and up) repacks every q4_0 matrix whose row count is a multiple of 8
// (ggml-cpu/repack.cpp, q4_0_8x8_q8_0) and multiplies it one output per f32 lane: per block, the block's
// integer sum is exact, then acc = fma(f32(isum), f32(d_w) * f32(d_x), acc), blocks in order from acc = 0; for
// prompts and for single tokens alike. Other q4_0 matrices go through ggml_vec_dot_q4_0_q8_0 (8 lanes, the row
// kernels above), again for prompts and single tokens. The last bits of these sums decide greedy tokens at
// near-ties (a tiny model such as stories260K amplifies a last-bit difference to ~0.05 nats within a few
// positions, through the q8_0 codes of later activations), so the model follows the same rule on every
// target: quant_dot_rows_for() gives the block-order kernel exactly where llama.cpp repacks.
bool quant_dot_block_order(DType w, int64_t rows);
// The kernel for a matrix of `rows` rows of type w: quant_dot_rows(w), or the block-order q4_0 kernel where
// quant_dot_block_order(w, rows).
QuantDotRowsFn quant_dot_rows_for(DType w, int64_t rows);
QuantDotRowsFn quant_dot_block_order_portable();  // quant_dot.cpp: decoded blocks, one scalar chain
#if defined(SOTTO_HAVE_AVX2_QUANT_DOT)
QuantDotRowsFn quant_dot_block_order_avx2();  // quant_dot_fast_avx2.cpp: eight rows per pass, a row per lane
QuantDotRowsFn quant_dot_block_order_vnni();  // quant_dot_fast_vnni_avx2.cpp: the same with vpdpbusd
#endif
#if defined(__wasm_simd128__)
QuantDotRowsFn quant_dot_block_order_wasm();  // quant_dot_fast_wasm.cpp: four rows per pass, a row per lane
#endif

// ---- prompt tiles: one token per 32-bit lane (AVX-512 VNNI; relaxed-SIMD wasm) ----------------------------
// The row kernels above keep ggml's AVX2 float order: 8 lanes of partial sums per (row, token), one FMA and one
// conversion per block and token. For prompts (linear() from 8 tokens on), where the weights stay in cache and
// the core's arithmetic is the limit, the tile kernels put one token in each 32-bit lane instead: the
// activations of up to 16 tokens are first rearranged once per call into a tile (tile_prepare()), then each
// 4 bytes of a weight row are broadcast to all lanes and one vpdpbusd (a 512-bit vector: 16 tokens; in wasm a
// relaxed dot per 4 tokens) adds 4 products per token; a block's integer sum is then exact in one lane, and one
// conversion and one FMA finish it. Each (row, token) adds its blocks' float terms in block order in one f32
// lane: ggml's scalar order (its generic vec_dot), not its AVX2 one, so results differ from the row kernels'
// by float rounding only (the integer sums are the same), as llama.cpp's own prompt and decode kernels do.
//
// Tile layout, lane t = token t of the tile (lanes of absent tokens are zero), per block of the row:
//   q8_0 (kTileVecsPerBlock):      0..7: the token's q's 4g .. 4g + 3 as one 32-bit lane (group g);
//                                  8: the sum of the block's 32 q's (i32); 9: d_x (f32).
//   q8_K (kTileVecsPerSuperBlock): 0..63: groups as above; 64..79: bsums (sums of each 16 q's, i32);
//                                  80: d_x (f32).
constexpr int kTileTokens = 16;
constexpr int kTileVecsPerBlock = 10;
constexpr int kTileVecsPerSuperBlock = 81;
struct alignas(64) TileVec {
  uint8_t bytes[64];
};
// TileVecs per tile of activation type `act` (Q8_0 or Q8_K) for rows of `cols` elements.
size_t tile_vecs(DType act, int64_t cols);
// Writes the tile of `tokens` (1..16) activation rows of type `act`, xq_stride bytes apart, to `tile`.
void tile_prepare(DType act, const void* xq, size_t xq_stride, int tokens, int64_t cols, TileVec* tile);
// y[t * y_stride + r] = W[r, :] . x_t for t < tokens, r in [row_begin, row_end).
using QuantDotTileFn = void (*)(const void* weights, int64_t cols, const TileVec* tile, int tokens, float* y,
                                int64_t y_stride, int64_t row_begin, int64_t row_end);
// The tile kernel for weight type w on this CPU: q4_0, q5_0, q8_0, q4_K and q6_K with AVX-512 VNNI; q4_0,
// q5_0, q4_K and q6_K in the relaxed-SIMD wasm build (4 tokens per 128-bit vector). nullptr where there is
// none, and natively where cpu_use_avx2() is off.
QuantDotTileFn quant_dot_tile(DType w);
#if defined(SOTTO_HAVE_AVX2_QUANT_DOT)
QuantDotTileFn quant_dot_tile_vnni(DType w);  // quant_dot_fast_vnni_avx2.cpp
#endif
#if defined(__wasm_simd128__)
QuantDotTileFn quant_dot_tile_wasm(DType w);  // quant_dot_fast_wasm.cpp: q4_0 q5_0 q4_K q6_K, relaxed build
#endif

}  // namespace sotto
