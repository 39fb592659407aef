// The split-bf16 product on AMX tiles (Intel Sapphire Rapids and later), called from gemm_bf16.cpp when
// cpu_features().amx_bf16: C = sum over k of a_hi b_hi + a_hi b_lo + a_lo b_hi, each operand split into a bf16
// and the bf16 of what it left (gemm_bf16.cpp says why three products and how close to float32 they come).
//
// One TDPBF16PS multiplies a 16 x 32 tile of bf16 (16 rows of A, 32 steps of k) by a 16 x 32 tile of bf16 pairs
// (16 pairs of k-steps, each for 16 columns) into 16 x 16 float sums: 8,192 multiply-adds in one instruction,
// against 16 for an AVX-512 FMA, so three of them still do 170 times the work of one FMA. The products of two
// bf16 are exact in float; the order and rounding of their sums are the hardware's (within a few float
// roundings of the reference, which the test checks).
//
// B is packed once (gemm_pack_b_bf16x3, a weight at load) into panels of 16 columns in the tile's pair layout
// (row r of a panel holds, for each of its 16 columns, k = 2r and 2r + 1), the high halves' panel then the low
// halves'. A is split per call into rows of kp (K rounded up to 32, zero-padded), highs and lows apart.
//
// Eight tiles: per 16 rows and 32 columns, 2 of sums, 2 of A (high, low), 4 of B (high, low of 2 panels). Each
// 32-step of k loads 6 KB for 6 products (96 cycles of the tile unit): the panels of a column pair (K x 256
// bytes) come from memory once and then from L2 for each further 16 rows.
//
// Where the time goes (one core of a 2-core Sapphire Rapids VM, 80 rows, K and N 1024-4096): ~130 G multiply-adds
// a second, 1.9x the float32 packed kernel on AVX-512, ~35 % of the tile unit's rate (the same loop on tiles
// held in L1 runs at ~95 %): the tile loads wait on L2. Tried without gain: A laid out tile by tile (its rows
// 2-8 KB apart share few L1 sets), k in chunks that serve every row tile from L1, and prefetching the next
// chunk's panels.
#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <cstring>

#define SOTTO_AMX_BF16 __attribute__((target("amx-tile,amx-bf16,avx512f,avx512bf16,avx512vl,avx512bw")))

#include "nn/amx_tiles.h"

namespace sotto::nn::cpu {

namespace {
// hi = bf16(x), lo = bf16(x - hi), 16 lanes.
SOTTO_AMX_BF16 inline void split16(__m512 x, __m256i& h, __m256i& l) {
  h = reinterpret_cast<__m256i>(_mm512_cvtneps_pbh(x));
  const __m512 back = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
  l = reinterpret_cast<__m256i>(_mm512_cvtneps_pbh(_mm512_sub_ps(x, back)));
}
}  // namespace

// Rows [m0, m1) of A (f32, lda) split into hi and lo (bf16, kp a row): hi = bf16(x) (nearest, ties to even),
// lo = bf16(x - hi) (x - hi is exact in float); k from K to kp zero.
SOTTO_AMX_BF16 void split_rows_bf16_amx(const float* A, int64_t lda, int64_t K, int64_t kp, int64_t m0,
                                        int64_t m1, uint16_t* hi, uint16_t* lo) {
  for (int64_t m = m0; m < m1; ++m) {
    const float* x = A + m * lda;
    uint16_t* yh = hi + m * kp;
    uint16_t* yl = lo + m * kp;
    for (int64_t k = 0; k < kp; k += 16) {
      const __mmask16 mask = k + 16 <= K ? 0xffff : k < K ? static_cast<__mmask16>((1u << (K - k)) - 1) : 0;
      __m256i h, l;
      split16(_mm512_maskz_loadu_ps(mask, x + k), h, l);
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(yh + k), h);
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(yl + k), l);
    }
  }
}

namespace {

// Tile T into C: in place when all 16 rows are outputs, else the first n_rows through a buffer.
template <int T>
SOTTO_AMX_BF16 void store(float* c, int64_t ldc, int64_t n_rows) {
  if (n_rows == 16) return _tile_stored(T, c, ldc * 4);
  alignas(64) float part[16 * 16];
  _tile_stored(T, part, 64);
  for (int64_t i = 0; i < n_rows; ++i) std::memcpy(c + i * ldc, part + i * 16, 64);
}

// Rows m .. m + 16 (`rows` of them outputs, the rest A's padding) by NT (1 or 2) panels from p. Tiles 0-1 the
// sums, 2-3 A's high and low halves, 4-5 the first panel's, 6-7 the second's.
template <int NT>
SOTTO_AMX_BF16 void block(int64_t m, int64_t p, int64_t kp, const uint16_t* a_hi, const uint16_t* a_lo,
                          const uint16_t* panels, float* C, int64_t ldc, int64_t rows) {
  _tile_zero(0);
  if constexpr (NT == 2) _tile_zero(1);
  const int64_t half = kp * 16;  // bf16 elements of one panel's highs (or lows)
  const uint16_t* ah = a_hi + m * kp;
  const uint16_t* al = a_lo + m * kp;
  const uint16_t* b0 = panels + p * 2 * half;
  const uint16_t* b1 = b0 + 2 * half;
  for (int64_t k = 0; k < kp; k += 32) {
    // The two sums' products alternate: each TDPBF16PS waits for the last one into the same tile.
    _tile_loadd(2, ah + k, kp * 2);
    _tile_loadd(4, b0 + k * 16, 64);
    _tile_dpbf16ps(0, 2, 4);
    if constexpr (NT == 2) {
      _tile_loadd(6, b1 + k * 16, 64);
      _tile_dpbf16ps(1, 2, 6);
    }
    _tile_loadd(5, b0 + half + k * 16, 64);
    _tile_dpbf16ps(0, 2, 5);
    if constexpr (NT == 2) {
      _tile_loadd(7, b1 + half + k * 16, 64);
      _tile_dpbf16ps(1, 2, 7);
    }
    _tile_loadd(3, al + k, kp * 2);
    _tile_dpbf16ps(0, 3, 4);
    if constexpr (NT == 2) _tile_dpbf16ps(1, 3, 6);
  }
  float* c0 = C + m * ldc + p * 16;
  store<0>(c0, ldc, rows);
  if constexpr (NT == 2) store<1>(c0 + 16, ldc, rows);
}

}  // namespace

// C[m * ldc + n] for m < M and n in panels [p0, p1) (16 columns each): a_hi / a_lo hold A's rows split
// (split_rows_bf16_amx, M rounded up to 16 rows, kp a row), panels gemm_pack_b_bf16x3's.
SOTTO_AMX_BF16 void gemm_nt_bf16x3_amx(int64_t M, int64_t p0, int64_t p1, int64_t kp, const uint16_t* a_hi,
                                       const uint16_t* a_lo, const uint16_t* panels, float* C, int64_t ldc) {
  load_full_tiles();
  for (int64_t p = p0; p < p1; p += 2)
    for (int64_t m = 0; m < M; m += 16) {
      const int64_t rows = std::min<int64_t>(16, M - m);
      p + 2 <= p1 ? block<2>(m, p, kp, a_hi, a_lo, panels, C, ldc, rows)
                  : block<1>(m, p, kp, a_hi, a_lo, panels, C, ldc, rows);
    }
  _tile_release();
}

}  // namespace sotto::nn::cpu
