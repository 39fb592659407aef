// The stride-1 int8 conv's product on AMX (Intel's tile unit, Sapphire Rapids and later), called from
// conv_integer_bias.cpp when cpu_features().amx_int8 (the CPU has AMX-INT8 and Linux grants the tile state).
//
// One TDPBSUD multiplies a 16 x 64 tile of signed bytes (16 output channels, 64 input channels of one tap) by a
// 64 x 16 tile of unsigned bytes (those 64 channels at 16 steps of time) into 16 x 16 int32 sums: 16,384
// multiply-adds in one instruction, against 64 for an AVX-512 VNNI vpdpbusd. The sums are exact integers, the
// same as the VNNI and int16 products, so the conv's output is bitwise the same.
//
// The unsigned tile must be in the "VNNI" layout: tile row j holds, for each of 16 steps of time, the 4 bytes
// of channels 4j .. 4j + 3. So the quantized input is laid out once per conv as quads: q[c4][r] is one 32-bit
// word with channels 4 c4 .. 4 c4 + 3 of padded input row r. Then the tile for (channels c .. c + 63, steps
// t .. t + 15) of tap k is 16 rows of 64 contiguous bytes at q[c / 4 + j][t + k * dilation]: one strided tile
// load for any t, tap and dilation, with no unrolled copy of the input and no gather per dilation residue. The
// signed tiles are laid out once per weight as they are loaded (conv_integer_bias.cpp): for each 16 output
// channels, tap and 64 input channels, 1 KB of its own. (Read in place from the [Cout][K][Cin] copy instead, a
// tile's rows lie K Cin bytes apart: the Kokoro paragraph took 1.02-1.03x the time, interleaved, 1 and 2
// threads.)
#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <cstring>

#define SOTTO_AMX __attribute__((target("amx-tile,amx-int8")))

#include "nn/amx_tiles.h"

namespace sotto::nn::cpu {

// The quads of the padded input rows: q[c4 * qs + r] = channels 4 c4 .. 4 c4 + 3 of row r as uint8 (the
// quantized value + zp; rows outside [padding, padding + length) and up to qs are the zero point, which is
// what a padded input quantizes to; so are channels from cin on, which meet zero weights). xq is [cin][length]
// int16 with the zero point subtracted.
void input_quads_avx2(const int16_t* xq, int64_t cin, int64_t c4_begin, int64_t c4_end, int64_t length,
                      int64_t padding, int32_t zp, int64_t qs, uint8_t* q) {
  const __m128i vzp = _mm_set1_epi16(static_cast<int16_t>(zp));
  for (int64_t c4 = c4_begin; c4 < c4_end; ++c4) {
    uint8_t* out = q + c4 * qs * 4;
    if (4 * c4 + 4 > cin) {  // the channels past cin, and the quad that holds the last of them
      std::memset(out, zp, static_cast<size_t>(qs) * 4);
      for (int64_t j = 0; 4 * c4 + j < cin; ++j)
        for (int64_t t = 0; t < length; ++t)
          out[(padding + t) * 4 + j] = static_cast<uint8_t>(xq[(4 * c4 + j) * length + t] + zp);
      continue;
    }
    std::memset(out, zp, static_cast<size_t>(padding) * 4);
    std::memset(out + (padding + length) * 4, zp, static_cast<size_t>(qs - padding - length) * 4);
    out += padding * 4;
    const int16_t* x[4] = {xq + (4 * c4) * length, xq + (4 * c4 + 1) * length, xq + (4 * c4 + 2) * length,
                           xq + (4 * c4 + 3) * length};
    int64_t t = 0;
    for (; t + 8 <= length; t += 8) {
      __m128i v[4];
      for (int j = 0; j < 4; ++j)
        v[j] = _mm_add_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(x[j] + t)), vzp);
      const __m128i ab = _mm_packus_epi16(v[0], v[1]), cd = _mm_packus_epi16(v[2], v[3]);  // a0..a7 b0..b7
      const __m128i abi = _mm_unpacklo_epi8(ab, _mm_srli_si128(ab, 8));                    // a0 b0 a1 b1 ..
      const __m128i cdi = _mm_unpacklo_epi8(cd, _mm_srli_si128(cd, 8));
      _mm_storeu_si128(reinterpret_cast<__m128i*>(out + t * 4), _mm_unpacklo_epi16(abi, cdi));
      _mm_storeu_si128(reinterpret_cast<__m128i*>(out + t * 4 + 16), _mm_unpackhi_epi16(abi, cdi));
    }
    for (; t < length; ++t)
      for (int j = 0; j < 4; ++j) out[t * 4 + j] = static_cast<uint8_t>(x[j][t] + zp);
  }
}

namespace {

// MT x NT tiles of 16 x 16 sums (MT, NT in {1, 2}): output channels m .. m + 16 MT, steps t .. t + 16 NT.
// Tiles 0-3 the sums, 4-5 the weights, 6-7 the input. `full` = NT * 16 steps are all outputs: stored in place;
// else the last tile goes through `part` and only `valid` steps of it are copied.
template <int MT, int NT>
SOTTO_AMX void block(int64_t m, int64_t t, int64_t kernel, int64_t dilation, int64_t cin, const int8_t* w,
                     const uint8_t* q, int64_t qs, int32_t* acc, int64_t ldc, int64_t valid) {
  // Tiles of 64 input channels a tap; the next 16 output channels' tiles are a whole tap set further.
  const int64_t blocks = cin / 64, next_m = kernel * blocks * 1024;
  _tile_zero(0);
  if constexpr (NT == 2) _tile_zero(1);
  if constexpr (MT == 2) _tile_zero(2);
  if constexpr (MT == 2 && NT == 2) _tile_zero(3);
  for (int64_t k = 0; k < kernel; ++k)
    for (int64_t c = 0; c < cin; c += 64) {
      const int8_t* a = w + (((m / 16) * kernel + k) * blocks + c / 64) * 1024;
      const uint8_t* b = q + ((c / 4) * qs + t + k * dilation) * 4;
      _tile_loadd(4, a, 64);
      _tile_loadd(6, b, qs * 4);
      if constexpr (NT == 2) _tile_loadd(7, b + 64, qs * 4);
      if constexpr (MT == 2) _tile_loadd(5, a + next_m, 64);
      _tile_dpbsud(0, 4, 6);
      if constexpr (NT == 2) _tile_dpbsud(1, 4, 7);
      if constexpr (MT == 2) _tile_dpbsud(2, 5, 6);
      if constexpr (MT == 2 && NT == 2) _tile_dpbsud(3, 5, 7);
    }
  int32_t* c0 = acc + m * ldc + t;
  if (valid == 16 * NT) {
    _tile_stored(0, c0, ldc * 4);
    if constexpr (NT == 2) _tile_stored(1, c0 + 16, ldc * 4);
    if constexpr (MT == 2) _tile_stored(2, c0 + 16 * ldc, ldc * 4);
    if constexpr (MT == 2 && NT == 2) _tile_stored(3, c0 + 16 * ldc + 16, ldc * 4);
    return;
  }
  static_assert(NT == 1 || NT == 2);
  alignas(64) int32_t part[16 * 16];  // NT == 1 here: one partial column of tiles
  _tile_stored(0, part, 64);
  for (int i = 0; i < 16; ++i) std::memcpy(c0 + i * ldc, part + i * 16, static_cast<size_t>(valid) * 4);
  if constexpr (MT == 2) {
    _tile_stored(2, part, 64);
    for (int i = 0; i < 16; ++i)
      std::memcpy(c0 + (16 + i) * ldc, part + i * 16, static_cast<size_t>(valid) * 4);
  }
}

}  // namespace

// acc[m * ldc + t] = sum over taps k and channels c of w[m][k][c] * q(c, t + k * dilation) for m < M and t in
// [t_begin, t_end): w int8 tiles [M / 16][kernel][cin / 64][16][64] (row r of tile (i, k, b): w[16 i + r][k]
// [64 b .. 64 b + 63]), q the input quads (input_quads_avx2) with qs >= t_end + 15 +
// (kernel - 1) * dilation (a partial last tile reads, and drops, up to 15 steps beyond). M % 16 == 0,
// cin % 64 == 0 (the caller rounds Cin up with zero weights).
SOTTO_AMX void iconv_u8s8_amx(int64_t M, int64_t t_begin, int64_t t_end, int64_t kernel, int64_t dilation,
                              int64_t cin, const int8_t* w, const uint8_t* q, int64_t qs, int32_t* acc,
                              int64_t ldc) {
  load_full_tiles();
  // Steps in pairs of tiles, output channels in pairs of tiles within them: the weights (at most a few hundred
  // KB) stay in L2 while each pair of input tiles is used by every output channel.
  for (int64_t t = t_begin; t < t_end; t += 32) {
    const int64_t n = std::min<int64_t>(32, t_end - t);
    for (int64_t m = 0; m < M; m += 32) {
      const bool two_m = m + 32 <= M;
      if (n == 32) {
        two_m ? block<2, 2>(m, t, kernel, dilation, cin, w, q, qs, acc, ldc, 32)
              : block<1, 2>(m, t, kernel, dilation, cin, w, q, qs, acc, ldc, 32);
        continue;
      }
      for (int64_t u = t; u < t + n; u += 16) {
        const int64_t valid = std::min<int64_t>(16, t + n - u);
        two_m ? block<2, 1>(m, u, kernel, dilation, cin, w, q, qs, acc, ldc, valid)
              : block<1, 1>(m, u, kernel, dilation, cin, w, q, qs, acc, ldc, valid);
      }
    }
  }
  _tile_release();
}

}  // namespace sotto::nn::cpu
