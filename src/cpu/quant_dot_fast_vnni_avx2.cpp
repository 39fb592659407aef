// The register-resident kernels (cpu/quant_dot_fast_x86.h) compiled again for CPUs with AVX-512 VNNI + VL
// (Ice Lake and later, Zen 4 and later): the same vector width and the same float order as the AVX2 build,
// so the results are bit for bit the same, but each sum of four u8 x s8 products is one vpdpbusd, and the
// compiler may use all 32 vector registers. The file is compiled with -mavx2 like every *_avx2.cpp; the
// target attribute below adds the AVX-512 features to these functions only, and quant_dot_avx2() calls them
// only when cpu_features().avx512_vnni says the CPU and OS support them.
#include <immintrin.h>

#include <cstddef>
#include <cstring>
#include <vector>

// Every header from outside is included before the attribute region: their inline functions must stay
// compiled for the baseline (the linker keeps one copy of each for the whole program).
#include "core/half.h"
#include "cpu/quant_dot.h"

#define SOTTO_QUANT_DOT_VNNI 1
#pragma clang attribute push(__attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni"))), \
                             apply_to = function)
#include "cpu/quant_dot_fast_x86.h"

namespace sotto {

QuantDotRowsFn quant_dot_avx2_vnni(DType w) {
  return fast_kernel(w);
}

QuantDotRowsFn quant_dot_block_order_vnni() {
  return q4_0_block_order;
}

// ============================================================================ prompt tiles (quant_dot.h)
namespace {

__m512i load_tile(const TileVec& v) {
  return _mm512_load_si512(v.bytes);
}

// Rows r .. r + R - 1 of a pass against a tile: where each row starts, and its 16 f32 sums (lane t: token t).
template <int R>
struct TileRows {
  const uint8_t* w[R];
  __m512 acc[R];
  TileRows(const uint8_t* weights, size_t row_bytes, int64_t r) {
    for (int i = 0; i < R; ++i) {
      w[i] = weights + static_cast<size_t>(r + i) * row_bytes;
      acc[i] = _mm512_setzero_ps();
    }
  }
  // y[t * y_stride + r + i] = row i's sum for token t, for the tile's tokens only.
  void store(int tokens, float* y, int64_t y_stride, int64_t r) const {
    alignas(64) float out[R][kTileTokens];
    for (int i = 0; i < R; ++i) _mm512_store_ps(out[i], acc[i]);
    for (int t = 0; t < tokens; ++t)
      for (int i = 0; i < R; ++i) y[t * y_stride + r + i] = out[i][t];
  }
};

// One 32-element block of a q8_0 tile, loaded once for the rows of a pass: its 8 groups, -2^offset_shift *
// sum x (what a weight type's unsigned offset adds to the integer dot, exactly) and d_x, per token.
struct TileBlock32 {
  __m512i groups[8];
  __m512i offset;
  __m512 d_x;
  TileBlock32(const TileVec* x, int offset_shift) {
    for (int g = 0; g < 8; ++g) groups[g] = load_tile(x[g]);
    offset = _mm512_sub_epi32(_mm512_setzero_si512(),
                              _mm512_sll_epi32(load_tile(x[8]), _mm_cvtsi32_si128(offset_shift)));
    d_x = _mm512_load_ps(x[9].bytes);
  }
};

// Rows r .. r + R - 1 of a 32-element weight type W against a tile of 16 tokens: W::dot() gives a block's
// integer dot for every token, exact, times 2^W::kDotShift; the row adds it times f32(d_w) * f32(d_x) (the
// 2^-kDotShift folded into d_w, exactly) with one FMA per block. Where the time goes, per row and block for 16
// tokens: W::dot()'s 8 vpdpbusd and the ops that make its 8 broadcast weight words, then 4 to scale and add;
// the tile's block is loaded once for the R rows.
template <class W, int R>
void block32_tile_rows(const uint8_t* weights, int64_t n_blocks, size_t row_bytes, const TileVec* tile,
                       int tokens, float* y, int64_t y_stride, int64_t r) {
  TileRows<R> rows(weights, row_bytes, r);
  for (int64_t b = 0; b < n_blocks; ++b) {
    const TileBlock32 x(tile + b * kTileVecsPerBlock, W::kOffsetShift);
    for (int i = 0; i < R; ++i) {
      const uint8_t* w = rows.w[i] + static_cast<size_t>(b) * sizeof(typename W::Block);
      const __m512 scale = _mm512_mul_ps(_mm512_set1_ps(f16(w) * (1.0f / (1 << W::kDotShift))), x.d_x);
      rows.acc[i] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(W::dot(w, x)), scale, rows.acc[i]);
    }
  }
  rows.store(tokens, y, y_stride, r);
}

// q4_0: the block's 16 bytes of nibbles as 4 broadcast 32-bit words; word g's low nibbles are elements
// 4g .. 4g + 3 (group g), its high nibbles elements 16 + 4g .. (group g + 4). The high nibbles are used in
// place (byte & 0xf0 = 16 q), so the low groups' sum is shifted left by 4 to match:
// 16 * sum (q - 8) x = 16 * lo + hi - 128 * sum x, exact in i32 (|.| <= 16 * 32 * 8 * 127 < 2^20, so its f32
// conversion is exact too).
struct Q4_0Tile {
  using Block = BlockQ4_0;
  static constexpr int kOffsetShift = 7, kDotShift = 4;
  static __m512i dot(const uint8_t* w, const TileBlock32& x) {
    const __m512i low_mask = _mm512_set1_epi8(0x0f), high_mask = _mm512_set1_epi8(static_cast<char>(0xf0));
    __m512i lo = _mm512_setzero_si512(), hi = x.offset;
    for (int g = 0; g < 4; ++g) {
      const __m512i q = _mm512_set1_epi32(static_cast<int>(load_u32(w + 2 + 4 * g)));
      lo = _mm512_dpbusd_epi32(lo, _mm512_and_si512(q, low_mask), x.groups[g]);
      hi = _mm512_dpbusd_epi32(hi, _mm512_and_si512(q, high_mask), x.groups[g + 4]);
    }
    return _mm512_add_epi32(_mm512_slli_epi32(lo, 4), hi);
  }
};

// Unsigned weight bytes (one block's 32, in element order) against a tile block: two sums (even and odd
// groups) keep the chains of vpdpbusd short; the first starts at the offset term.
__m512i dot_bytes(const uint8_t* values, __m512i flip, const TileBlock32& x) {
  __m512i even = x.offset, odd = _mm512_setzero_si512();
  for (int g = 0; g < 8; g += 2) {
    const __m512i q0 = _mm512_set1_epi32(static_cast<int>(load_u32(values + 4 * g)));
    const __m512i q1 = _mm512_set1_epi32(static_cast<int>(load_u32(values + 4 * g + 4)));
    even = _mm512_dpbusd_epi32(even, _mm512_xor_si512(q0, flip), x.groups[g]);
    odd = _mm512_dpbusd_epi32(odd, _mm512_xor_si512(q1, flip), x.groups[g + 1]);
  }
  return _mm512_add_epi32(even, odd);
}

// q8_0: the weights go unsigned as q + 128 (vpdpbusd's u8 operand: the sign bit flipped), and the
// 128 * sum x that adds comes off exactly: sum q x = sum (q + 128) x - 128 * sum x.
struct Q8_0Tile {
  using Block = BlockQ8_0;
  static constexpr int kOffsetShift = 7, kDotShift = 0;
  static __m512i dot(const uint8_t* w, const TileBlock32& x) {
    return dot_bytes(w + 2, _mm512_set1_epi8(static_cast<char>(0x80)), x);
  }
};

// q5_0: the block is first decoded to its 32 unsigned values (0..31: the nibbles, 16 where the block's fifth
// bit is set) on the stack, then taken as q8_0's bytes are; the offset comes off as -16 * sum x.
struct Q5_0Tile {
  using Block = BlockQ5_0;
  static constexpr int kOffsetShift = 4, kDotShift = 0;
  static __m512i dot(const uint8_t* w, const TileBlock32& x) {
    alignas(32) uint8_t values[32];
    const __m256i fifth = _mm256_maskz_set1_epi8(load_u32(w + 2), 0x10);  // qh bit i -> 16 in byte i
    _mm256_store_si256(reinterpret_cast<__m256i*>(values), _mm256_or_si256(nibbles32(w + 6), fifth));
    return dot_bytes(values, _mm512_setzero_si512(), x);
  }
};

// Rows r .. r + R - 1 of a q4_K matrix against a tile of 16 tokens (q8_K layout). Per super-block and row:
// the 6-bit scales and mins unpacked as Q4_KFast does; sub-block 2k is the low nibbles of qs[32k .. 32k + 31],
// 2k + 1 the high ones, used in place (16 q, so that sum is shifted right by 4, exactly). The integer parts
// are ggml's, exact in i32: sum_j sc_j * sum_i q_i x_i (|.| <= 8 * 63 * 32 * 15 * 127 < 2^31) and
// sum_j m_j * (the two bsums of sub-block j); then d_w * d_x and dmin_w * d_x scale them.
template <int R>
void q4_K_tile_rows(const uint8_t* weights, int64_t n_blocks, size_t row_bytes, const TileVec* tile,
                    int tokens, float* y, int64_t y_stride, int64_t r) {
  TileRows<R> rows(weights, row_bytes, r);
  const __m512i low_mask = _mm512_set1_epi8(0x0f), high_mask = _mm512_set1_epi8(static_cast<char>(0xf0));
  for (int64_t b = 0; b < n_blocks; ++b) {
    const TileVec* x = tile + b * kTileVecsPerSuperBlock;
    const __m512 d_x = _mm512_load_ps(x[80].bytes);
    for (int i = 0; i < R; ++i) {
      const uint8_t* w = rows.w[i] + static_cast<size_t>(b) * sizeof(BlockQ4_K);
      uint8_t scales_mins[16];  // scales 0..7, then mins 0..7
      unpack_k4_scales_mins(w + 4, scales_mins);
      const uint8_t* qs = w + 16;
      __m512i sum = _mm512_setzero_si512(), min_sum = _mm512_setzero_si512();
      for (int k = 0; k < 4; ++k) {
        __m512i lo = _mm512_setzero_si512(), hi = _mm512_setzero_si512();
        for (int g = 0; g < 8; ++g) {
          const __m512i q = _mm512_set1_epi32(static_cast<int>(load_u32(qs + 32 * k + 4 * g)));
          lo = _mm512_dpbusd_epi32(lo, _mm512_and_si512(q, low_mask), load_tile(x[16 * k + g]));
          hi = _mm512_dpbusd_epi32(hi, _mm512_and_si512(q, high_mask), load_tile(x[16 * k + 8 + g]));
        }
        sum = _mm512_add_epi32(sum, _mm512_mullo_epi32(lo, _mm512_set1_epi32(scales_mins[2 * k])));
        sum = _mm512_add_epi32(
            sum, _mm512_mullo_epi32(_mm512_srai_epi32(hi, 4), _mm512_set1_epi32(scales_mins[2 * k + 1])));
        const __m512i x_lo = _mm512_add_epi32(load_tile(x[64 + 4 * k]), load_tile(x[65 + 4 * k]));
        const __m512i x_hi = _mm512_add_epi32(load_tile(x[66 + 4 * k]), load_tile(x[67 + 4 * k]));
        min_sum =
            _mm512_add_epi32(min_sum, _mm512_mullo_epi32(x_lo, _mm512_set1_epi32(scales_mins[8 + 2 * k])));
        min_sum =
            _mm512_add_epi32(min_sum, _mm512_mullo_epi32(x_hi, _mm512_set1_epi32(scales_mins[9 + 2 * k])));
      }
      rows.acc[i] =
          _mm512_fmadd_ps(_mm512_cvtepi32_ps(sum), _mm512_mul_ps(_mm512_set1_ps(f16(w)), d_x), rows.acc[i]);
      rows.acc[i] = _mm512_fnmadd_ps(_mm512_cvtepi32_ps(min_sum),
                                     _mm512_mul_ps(_mm512_set1_ps(f16(w + 2)), d_x), rows.acc[i]);
    }
  }
  rows.store(tokens, y, y_stride, r);
}

// Rows r .. r + R - 1 of a q6_K matrix against a tile of 16 tokens (q8_K layout). Each row's super-block is
// first decoded to its 256 unsigned values (q + 32, 0..63) in a stack buffer, as Q6_KFast decodes it, whose
// words are then broadcast; each group of 16 (one signed scale) starts its sum at -32 * bsum, so the offset
// comes off exactly: sum_j sc_j * sum_i (q_i - 32) x_i (|.| <= 16 * 128 * 16 * 32 * 127 < 2^31).
template <int R>
void q6_K_tile_rows(const uint8_t* weights, int64_t n_blocks, size_t row_bytes, const TileVec* tile,
                    int tokens, float* y, int64_t y_stride, int64_t r) {
  TileRows<R> rows(weights, row_bytes, r);
  alignas(32) uint8_t values[256];
  for (int64_t b = 0; b < n_blocks; ++b) {
    const TileVec* x = tile + b * kTileVecsPerSuperBlock;
    const __m512 d_x = _mm512_load_ps(x[80].bytes);
    for (int i = 0; i < R; ++i) {
      const auto* block =
          reinterpret_cast<const BlockQ6_K*>(rows.w[i] + static_cast<size_t>(b) * sizeof(BlockQ6_K));
      for (int h = 0; h < 2; ++h) {  // elements 128h + 32k + l
        __m256i q[4];
        q6_K_values(block, h, q);
        for (int k = 0; k < 4; ++k)
          _mm256_store_si256(reinterpret_cast<__m256i*>(values + 128 * h + 32 * k), q[k]);
      }
      __m512i sum = _mm512_setzero_si512();
      for (int j = 0; j < 16; ++j) {
        __m512i group = _mm512_sub_epi32(_mm512_setzero_si512(), _mm512_slli_epi32(load_tile(x[64 + j]), 5));
        for (int g = 0; g < 4; ++g)
          group = _mm512_dpbusd_epi32(group,
                                      _mm512_set1_epi32(static_cast<int>(load_u32(values + 16 * j + 4 * g))),
                                      load_tile(x[4 * j + g]));
        sum = _mm512_add_epi32(sum, _mm512_mullo_epi32(group, _mm512_set1_epi32(block->scales[j])));
      }
      const float d = f16(reinterpret_cast<const uint8_t*>(&block->d));
      rows.acc[i] =
          _mm512_fmadd_ps(_mm512_cvtepi32_ps(sum), _mm512_mul_ps(_mm512_set1_ps(d), d_x), rows.acc[i]);
    }
  }
  rows.store(tokens, y, y_stride, r);
}

// Every row of [row_begin, row_end), 4 per pass (they share the tile's loads), against one tile.
using TileRowsFn = void (*)(const uint8_t* weights, int64_t n_blocks, size_t row_bytes, const TileVec* tile,
                            int tokens, float* y, int64_t y_stride, int64_t r);
template <class Block, int kBlockElems, TileRowsFn Rows4, TileRowsFn Rows1>
void tile_kernel(const void* weights, int64_t cols, const TileVec* tile, int tokens, float* y,
                 int64_t y_stride, int64_t row_begin, int64_t row_end) {
  const int64_t n_blocks = cols / kBlockElems;
  const size_t row_bytes = static_cast<size_t>(n_blocks) * sizeof(Block);
  const auto* w = static_cast<const uint8_t*>(weights);
  int64_t r = row_begin;
  for (; r + 4 <= row_end; r += 4) Rows4(w, n_blocks, row_bytes, tile, tokens, y, y_stride, r);
  for (; r < row_end; ++r) Rows1(w, n_blocks, row_bytes, tile, tokens, y, y_stride, r);
}

}  // namespace

QuantDotTileFn quant_dot_tile_vnni(DType w) {
  switch (w) {
    case DType::Q4_0:
      return tile_kernel<BlockQ4_0, 32, block32_tile_rows<Q4_0Tile, 4>, block32_tile_rows<Q4_0Tile, 1>>;
    case DType::Q5_0:
      return tile_kernel<BlockQ5_0, 32, block32_tile_rows<Q5_0Tile, 4>, block32_tile_rows<Q5_0Tile, 1>>;
    case DType::Q8_0:
      return tile_kernel<BlockQ8_0, 32, block32_tile_rows<Q8_0Tile, 4>, block32_tile_rows<Q8_0Tile, 1>>;
    case DType::Q4_K:
      return tile_kernel<BlockQ4_K, 256, q4_K_tile_rows<4>, q4_K_tile_rows<1>>;
    case DType::Q6_K:
      return tile_kernel<BlockQ6_K, 256, q6_K_tile_rows<4>, q6_K_tile_rows<1>>;
    default:
      return nullptr;
  }
}

}  // namespace sotto
#pragma clang attribute pop
