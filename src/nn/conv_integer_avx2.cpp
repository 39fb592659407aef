// AVX2 loops of the int8 conv's input quantization (conv_integer_bias.cpp): the range and the uint8 values
// (minus the zero point, as int16) 8 floats at a time. Round half to even is the rounding mode's default
// (_MM_FROUND_TO_NEAREST_INT), the divide is the same IEEE divide as the scalar x / scale: bitwise the same.
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstdint>

namespace sotto::nn::cpu {

void min_max_avx2(const float* x, int64_t n, float& lo, float& hi) {
  __m256 vlo = _mm256_setzero_ps(), vhi = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 v = _mm256_loadu_ps(x + i);
    vlo = _mm256_min_ps(vlo, v);
    vhi = _mm256_max_ps(vhi, v);
  }
  alignas(32) float l[8], h[8];
  _mm256_store_ps(l, vlo);
  _mm256_store_ps(h, vhi);
  lo = 0.0f, hi = 0.0f;
  for (int j = 0; j < 8; ++j) lo = std::min(lo, l[j]), hi = std::max(hi, h[j]);
  for (; i < n; ++i) lo = std::min(lo, x[i]), hi = std::max(hi, x[i]);
}

void quantize_i16_avx2(const float* x, int64_t n, float scale, int32_t zero_point, int16_t* out) {
  const __m256 vs = _mm256_set1_ps(scale), vzp = _mm256_set1_ps(static_cast<float>(zero_point));
  const __m256 v0 = _mm256_setzero_ps(), v255 = _mm256_set1_ps(255.0f);
  const __m256i izp = _mm256_set1_epi32(zero_point);
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    __m256i q[2];
    for (int h = 0; h < 2; ++h) {
      __m256 v = _mm256_round_ps(_mm256_div_ps(_mm256_loadu_ps(x + i + 8 * h), vs),
                                 _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
      v = _mm256_min_ps(_mm256_max_ps(_mm256_add_ps(v, vzp), v0), v255);
      q[h] = _mm256_sub_epi32(_mm256_cvttps_epi32(v), izp);
    }
    // packs works within 128-bit lanes: fix the order back to 0..15.
    const __m256i packed = _mm256_permute4x64_epi64(_mm256_packs_epi32(q[0], q[1]), 0xD8);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + i), packed);
  }
  const float zp = static_cast<float>(zero_point);
  for (; i < n; ++i) {
    const float v = std::clamp(std::nearbyint(x[i] / scale) + zp, 0.0f, 255.0f);
    out[i] = static_cast<int16_t>(static_cast<int32_t>(v) - zero_point);
  }
}

}  // namespace sotto::nn::cpu

// ---------------------------------------------------------------- AVX-512 VNNI u8 x s8 product
// vpdpbusd multiplies 64 uint8 activations by 64 int8 weights and adds each 4 products into one of 16 int32
// lanes: 4x the multiply-adds per instruction of the int16 pmaddwd kernel (gemm_avx2.cpp) and half the bytes,
// with no intermediate saturation (unlike pmaddubsw), so the sums are exact. Compiled for that target per
// function and called only when the CPU and OS have it (cpu_features().avx512_vnni: conv_integer_bias.cpp).
#define SOTTO_VNNI __attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni")))

namespace sotto::nn::cpu {

namespace {

// The lane sums of a 4 x 4 block's accumulators into c (4 rows of 4) as one reduction tree: pairs of
// accumulators interleaved and added (32-bit, then 64-bit unpacks: each 128-bit lane then holds its quarter's
// sums of one row's 4 outputs), then the four quarters added across lanes. ~45 instructions for the 16 sums
// where one reduce_add each took ~140: at Kokoro's K = 3 x 128 that was as much as the block's multiply-adds.
SOTTO_VNNI inline void store_sums_4x4(const __m512i (&acc)[4][4], int32_t* c, int64_t ldc) {
  __m512i u[4];
  for (int i = 0; i < 4; ++i) {
    const __m512i t01 = _mm512_add_epi32(_mm512_unpacklo_epi32(acc[i][0], acc[i][1]),
                                         _mm512_unpackhi_epi32(acc[i][0], acc[i][1]));
    const __m512i t23 = _mm512_add_epi32(_mm512_unpacklo_epi32(acc[i][2], acc[i][3]),
                                         _mm512_unpackhi_epi32(acc[i][2], acc[i][3]));
    u[i] = _mm512_add_epi32(_mm512_unpacklo_epi64(t01, t23), _mm512_unpackhi_epi64(t01, t23));
  }
  // x01's lanes: u0's quarters 0 + 2, 1 + 3, then u1's; s's lane i: row i's 4 sums.
  const __m512i x01 =
      _mm512_add_epi32(_mm512_shuffle_i32x4(u[0], u[1], 0x44), _mm512_shuffle_i32x4(u[0], u[1], 0xEE));
  const __m512i x23 =
      _mm512_add_epi32(_mm512_shuffle_i32x4(u[2], u[3], 0x44), _mm512_shuffle_i32x4(u[2], u[3], 0xEE));
  const __m512i s =
      _mm512_add_epi32(_mm512_shuffle_i32x4(x01, x23, 0x88), _mm512_shuffle_i32x4(x01, x23, 0xDD));
  _mm_storeu_si128(reinterpret_cast<__m128i*>(c), _mm512_castsi512_si128(s));
  _mm_storeu_si128(reinterpret_cast<__m128i*>(c + ldc), _mm512_extracti32x4_epi32(s, 1));
  _mm_storeu_si128(reinterpret_cast<__m128i*>(c + 2 * ldc), _mm512_extracti32x4_epi32(s, 2));
  _mm_storeu_si128(reinterpret_cast<__m128i*>(c + 3 * ldc), _mm512_extracti32x4_epi32(s, 3));
}

// R rows of A (int8 weights) times C rows of B (uint8 activations), K-contiguous; the last K % 64 bytes read
// under a mask (masked-off bytes are zero and not touched in memory).
template <int R, int C>
SOTTO_VNNI void vnni_block(int64_t K, const int8_t* a, int64_t lda, const uint8_t* b, int64_t ldb, int32_t* c,
                           int64_t ldc) {
  __m512i acc[R][C];
  for (int i = 0; i < R; ++i)
    for (int j = 0; j < C; ++j) acc[i][j] = _mm512_setzero_si512();
  int64_t k = 0;
  for (; k + 64 <= K; k += 64) {
    __m512i bv[C];
    for (int j = 0; j < C; ++j) bv[j] = _mm512_loadu_si512(b + j * ldb + k);
    for (int i = 0; i < R; ++i) {
      const __m512i av = _mm512_loadu_si512(a + i * lda + k);
      for (int j = 0; j < C; ++j) acc[i][j] = _mm512_dpbusd_epi32(acc[i][j], bv[j], av);
    }
  }
  if (k < K) {
    const __mmask64 m = ~uint64_t{0} >> (64 - (K - k));
    __m512i bv[C];
    for (int j = 0; j < C; ++j) bv[j] = _mm512_maskz_loadu_epi8(m, b + j * ldb + k);
    for (int i = 0; i < R; ++i) {
      const __m512i av = _mm512_maskz_loadu_epi8(m, a + i * lda + k);
      for (int j = 0; j < C; ++j) acc[i][j] = _mm512_dpbusd_epi32(acc[i][j], bv[j], av);
    }
  }
  if constexpr (R == 4 && C == 4) {
    store_sums_4x4(acc, c, ldc);
  } else {
    for (int i = 0; i < R; ++i)
      for (int j = 0; j < C; ++j) c[i * ldc + j] = _mm512_reduce_add_epi32(acc[i][j]);
  }
}

}  // namespace

// C[m * ldc + n] = sum_k A[m * lda + k] * B[n * ldb + k], A int8, B uint8, int32 sums. B in chunks of ~128 KB
// (kept in L2 while every block of 4 rows of A passes over them).
SOTTO_VNNI void igemm_u8s8_nt_vnni(int64_t M, int64_t N, int64_t K, const int8_t* A, int64_t lda,
                                   const uint8_t* B, int64_t ldb, int32_t* C, int64_t ldc) {
  const int64_t chunk = std::max<int64_t>(4, (128 * 1024 / std::max<int64_t>(K, 1)) & ~int64_t{3});
  for (int64_t n0 = 0; n0 < N; n0 += chunk) {
    const int64_t n1 = std::min(N, n0 + chunk);
    int64_t m = 0;
    for (; m + 4 <= M; m += 4) {
      int64_t n = n0;
      for (; n + 4 <= n1; n += 4)
        vnni_block<4, 4>(K, A + m * lda, lda, B + n * ldb, ldb, C + m * ldc + n, ldc);
      for (; n < n1; ++n) vnni_block<4, 1>(K, A + m * lda, lda, B + n * ldb, ldb, C + m * ldc + n, ldc);
    }
    for (; m < M; ++m) {
      int64_t n = n0;
      for (; n + 4 <= n1; n += 4)
        vnni_block<1, 4>(K, A + m * lda, lda, B + n * ldb, ldb, C + m * ldc + n, ldc);
      for (; n < n1; ++n) vnni_block<1, 1>(K, A + m * lda, lda, B + n * ldb, ldb, C + m * ldc + n, ldc);
    }
  }
}

// ---------------------------------------------------------------- the stride-1 conv on input quads
// The same product with time in the lanes: 16 steps of one tap and 4 input channels are one 64-byte load from
// the input quads (input_quads_avx2, conv_integer_amx_avx2.cpp: a word = channels 4 c4 .. 4 c4 + 3 of one padded
// row), and one output channel's 4 weights of them a broadcast word: vpdpbusd then adds into 16 consecutive
// outputs of that channel. No lane sums to reduce (igemm_u8s8_nt_vnni's blocks spend ~1/3 of their time there at
// Kokoro's K), no unrolled time rows, and every tap and dilation read in place (no gather per residue).

namespace {

// R output channels x C vectors of 16 steps from (m, t); the last vector keeps `valid` % 16 steps when short.
template <int R, int C>
SOTTO_VNNI void quads_block(int64_t m, int64_t t, int64_t kernel, int64_t dilation, int64_t quads,
                            const uint32_t* w, const uint8_t* q, int64_t qs, int32_t* acc, int64_t ldc,
                            int64_t valid) {
  __m512i sums[R][C];
  for (int r = 0; r < R; ++r)
    for (int c = 0; c < C; ++c) sums[r][c] = _mm512_setzero_si512();
  for (int64_t k = 0; k < kernel; ++k) {
    const uint8_t* b = q + (t + k * dilation) * 4;
    const uint32_t* wk = w + (m * kernel + k) * quads;
    for (int64_t c4 = 0; c4 < quads; ++c4) {
      __m512i x[C];
      for (int c = 0; c < C; ++c) x[c] = _mm512_loadu_si512(b + c4 * qs * 4 + 64 * c);
      for (int r = 0; r < R; ++r) {
        const __m512i wv = _mm512_set1_epi32(static_cast<int32_t>(wk[r * kernel * quads + c4]));
        for (int c = 0; c < C; ++c) sums[r][c] = _mm512_dpbusd_epi32(sums[r][c], x[c], wv);
      }
    }
  }
  for (int r = 0; r < R; ++r)
    for (int c = 0; c < C; ++c) {
      int32_t* out = acc + (m + r) * ldc + t + 16 * c;
      const int64_t n = std::min<int64_t>(16, valid - 16 * c);
      if (n == 16)
        _mm512_storeu_si512(out, sums[r][c]);
      else
        _mm512_mask_storeu_epi32(out, static_cast<__mmask16>((1u << n) - 1), sums[r][c]);
    }
}

// quads_block by (R - 1, C - 1): the block shapes a conv's edges need, from 6 channels x 4 vectors down.
using QuadsBlock = void (*)(int64_t, int64_t, int64_t, int64_t, int64_t, const uint32_t*, const uint8_t*,
                            int64_t, int32_t*, int64_t, int64_t);
constexpr QuadsBlock kQuadsBlocks[6][4] = {
    {quads_block<1, 1>, quads_block<1, 2>, quads_block<1, 3>, quads_block<1, 4>},
    {quads_block<2, 1>, quads_block<2, 2>, quads_block<2, 3>, quads_block<2, 4>},
    {quads_block<3, 1>, quads_block<3, 2>, quads_block<3, 3>, quads_block<3, 4>},
    {quads_block<4, 1>, quads_block<4, 2>, quads_block<4, 3>, quads_block<4, 4>},
    {quads_block<5, 1>, quads_block<5, 2>, quads_block<5, 3>, quads_block<5, 4>},
    {quads_block<6, 1>, quads_block<6, 2>, quads_block<6, 3>, quads_block<6, 4>},
};

}  // namespace

// acc[m * ldc + t] = sum over taps k and channel quads c4 of the 4 products of w[m][k][c4] (int8 x 4) with
// q(c4, t + k * dilation) for m < M and t in [t_begin, t_end); w [M][kernel][quads] words (channels past Cin
// zero), q the input quads with qs >= t_end + 15 + (kernel - 1) * dilation (a short last vector reads, and
// drops, up to 15 steps beyond). Steps in blocks of 64 (outer: that block's input, quads x ~64 words, stays in
// L1), output channels in sixes within them: 24 accumulators, 4 loads and 6 broadcasts per 24 vpdpbusd.
SOTTO_VNNI void iconv_u8s8_quads_vnni(int64_t M, int64_t t_begin, int64_t t_end, int64_t kernel,
                                      int64_t dilation, int64_t quads, const uint32_t* w, const uint8_t* q,
                                      int64_t qs, int32_t* acc, int64_t ldc) {
  for (int64_t t = t_begin; t < t_end; t += 64) {
    const int64_t n = std::min<int64_t>(64, t_end - t);
    for (int64_t m = 0; m < M; m += 6)
      kQuadsBlocks[std::min<int64_t>(6, M - m) - 1][(n + 15) / 16 - 1](m, t, kernel, dilation, quads, w, q,
                                                                       qs, acc, ldc, n);
  }
}

}  // namespace sotto::nn::cpu

namespace sotto::nn::cpu {

// The int8 conv's input rows (conv_integer_bias.cpp time_rows for uint8): xq [Cin, T] int16 (zero point
// subtracted) -> xt row (padding + t) = xq[:, t] + zp as uint8, by 8 x 8 tiles transposed in registers
// (unpack 16 -> 32 -> 64 bit), edges scalar. The caller has filled the padding rows.
void time_rows_u8_avx2(const int16_t* xq, int64_t cin, int64_t length, int64_t padding, int32_t zp,
                       uint8_t* xt) {
  const __m128i vzp = _mm_set1_epi16(static_cast<int16_t>(zp));
  const int64_t c8 = cin & ~int64_t{7}, t8 = length & ~int64_t{7};
  for (int64_t i0 = 0; i0 < c8; i0 += 8) {
    for (int64_t t0 = 0; t0 < t8; t0 += 8) {
      __m128i r[8];
      for (int j = 0; j < 8; ++j)
        r[j] = _mm_add_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(xq + (i0 + j) * length + t0)),
                             vzp);
      const __m128i a0 = _mm_unpacklo_epi16(r[0], r[1]), a1 = _mm_unpackhi_epi16(r[0], r[1]);
      const __m128i a2 = _mm_unpacklo_epi16(r[2], r[3]), a3 = _mm_unpackhi_epi16(r[2], r[3]);
      const __m128i a4 = _mm_unpacklo_epi16(r[4], r[5]), a5 = _mm_unpackhi_epi16(r[4], r[5]);
      const __m128i a6 = _mm_unpacklo_epi16(r[6], r[7]), a7 = _mm_unpackhi_epi16(r[6], r[7]);
      const __m128i b0 = _mm_unpacklo_epi32(a0, a2), b1 = _mm_unpackhi_epi32(a0, a2);
      const __m128i b2 = _mm_unpacklo_epi32(a1, a3), b3 = _mm_unpackhi_epi32(a1, a3);
      const __m128i b4 = _mm_unpacklo_epi32(a4, a6), b5 = _mm_unpackhi_epi32(a4, a6);
      const __m128i b6 = _mm_unpacklo_epi32(a5, a7), b7 = _mm_unpackhi_epi32(a5, a7);
      // Column t0 + u of the tile: 8 channels as int16 in c[u], then packed to bytes two columns at a time.
      const __m128i c[8] = {_mm_unpacklo_epi64(b0, b4), _mm_unpackhi_epi64(b0, b4),
                            _mm_unpacklo_epi64(b1, b5), _mm_unpackhi_epi64(b1, b5),
                            _mm_unpacklo_epi64(b2, b6), _mm_unpackhi_epi64(b2, b6),
                            _mm_unpacklo_epi64(b3, b7), _mm_unpackhi_epi64(b3, b7)};
      for (int u = 0; u < 8; u += 2) {
        const __m128i bytes = _mm_packus_epi16(c[u], c[u + 1]);
        _mm_storel_epi64(reinterpret_cast<__m128i*>(xt + (padding + t0 + u) * cin + i0), bytes);
        _mm_storel_epi64(reinterpret_cast<__m128i*>(xt + (padding + t0 + u + 1) * cin + i0),
                         _mm_unpackhi_epi64(bytes, bytes));
      }
    }
    for (int64_t t = t8; t < length; ++t)
      for (int64_t i = i0; i < i0 + 8; ++i)
        xt[(padding + t) * cin + i] = static_cast<uint8_t>(xq[i * length + t] + zp);
  }
  for (int64_t i = c8; i < cin; ++i)
    for (int64_t t = 0; t < length; ++t)
      xt[(padding + t) * cin + i] = static_cast<uint8_t>(xq[i * length + t] + zp);
}

}  // namespace sotto::nn::cpu
