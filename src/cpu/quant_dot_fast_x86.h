// The register-resident x86 kernels for the weight types of real downloads (q4_0, q5_0, q8_0, q4_K, q6_K),
// shared by two translation units: quant_dot_fast_avx2.cpp compiles them for AVX2, and
// quant_dot_fast_vnni_avx2.cpp compiles them again with AVX-512 VNNI + VL enabled (SOTTO_QUANT_DOT_VNNI
// defined), where each sum of four u8 x s8 products is one vpdpbusd instead of maddubs + madd + add, and the
// compiler has 32 vector registers for the prefill tiles. Include only from *_avx2.cpp files, after
// <immintrin.h>; everything here is internal to the including file.
//
// The weights go from the model file into registers and never touch the stack. The math is quant_dot.h's; the
// generic kernels of quant_dot_avx2.cpp (which decode each block into a stack buffer first) remain for the
// other types and as a second, simpler AVX2 implementation.
//
// Where the time goes. Decode (n = 1) reads every weight once for one multiply-add, so the goal is to keep
// the instruction count per weight byte low enough that DRAM bandwidth, not the core, is the limit:
//   - activations are prepared once per call (per thread, one tile of tokens at a time, into thread-local
//     memory) into exactly the vectors the inner loop consumes: |x| and x (q8_0), offset * sums of 4 (q4_0,
//     q5_0), the d_x's as contiguous f32 so 8 blocks' d_w * d_x take one vector multiply;
//   - offset weights (q4_0: q - 8, q5_0: q - 16, q6_K: q - 32) stay unsigned, so maddubs(q, x) needs no
//     sign trick, and the offset comes back exactly in integers: sum (q - o) x = sum q x - o * sum x, with
//     o * sum x prepared per activation block (q4_0 / q5_0) or taken from q8_K's bsums (q6_K);
//   - K-quants unpack their 6-bit scales once per super-block and broadcast each with one shuffle.
// Prefill (n > 1) runs weight rows against a tile of 4 tokens: each weight block is decoded once and used
// 4 times; the tile's prepared activations stay in L1 while the rows stream past. (On CPUs with AVX-512 VNNI,
// prompts of 8 tokens or more take the tile kernels of quant_dot_fast_vnni_avx2.cpp instead, 16 tokens per
// vector in ggml's scalar float order: see quant_dot.h.) The 32-element types take
// the per-block scales d_w * d_x of 8 blocks in one vector multiply per row and token, and with AVX-512's 32
// registers run 4 rows per pass, which share each activation load.
//
// Float order. q4_0 / q5_0 / q8_0 keep ggml's AVX2 arithmetic exactly: lane k of a block's dot holds the
// products of elements 4k .. 4k + 3, one FMA per block adds it times f32(d_w) * f32(d_x) to 8 running lanes,
// and the lanes are summed as ggml's hsum_float_8 does. That is what lets the model reproduce llama.cpp's
// greedy tokens even where two logits nearly tie (stories260K q4_0 has such a step; packing two blocks per
// vector, 10% faster, changed a token there). The K-quants add the same exact integers in a different order.
//
// Every integer sum is exact (maddubs never saturates: |q| <= 63 unsigned times |x| <= 127, pairs <= 16002;
// q8_0 uses the sign trick with |x| <= 127, see matvec.cpp); vpdpbusd gives the same integers. The VNNI build
// gives q8_0 offset weights too (q + 128, which only vpdpbusd's i32 sums can take).
//
// Tried and dropped (AVX-512 VNNI on Zen 4, prompt kernel, single thread): two tokens per 512-bit vector
// (dword 2k / 2k + 1 = lane k of each token, so each token's float order stays). Zen 4 splits 512-bit ops
// into two 256-bit halves, and the pair's two scales need a 64-bit broadcast (an extra shuffle µop) where a
// 256-bit FMA folds its broadcast {1to8}: q4_0 gained nothing (0.49 vs 0.49 ns per row x block x token).
#pragma once

#include <immintrin.h>

#include <cstddef>
#include <cstring>
#include <vector>

#include "core/half.h"
#include "cpu/quant_dot.h"

namespace sotto {

namespace {  // NOLINT: each including file gets its own copy, compiled for its own instruction set

struct alignas(32) Vec {  // one 256-bit slot of prepared activations
  uint8_t bytes[32];
};

__m256i load256(const void* p) {
  return _mm256_loadu_si256(static_cast<const __m256i*>(p));
}
__m256i load_vec(const Vec& v) {
  return _mm256_load_si256(reinterpret_cast<const __m256i*>(v.bytes));
}
__m256 load_vec_ps(const Vec& v) {
  return _mm256_load_ps(reinterpret_cast<const float*>(v.bytes));
}
void store_vec(Vec& v, __m256i value) {
  _mm256_store_si256(reinterpret_cast<__m256i*>(v.bytes), value);
}
void store_vec(Vec& v, __m256 value) {
  _mm256_store_ps(reinterpret_cast<float*>(v.bytes), value);
}

uint16_t load_u16(const uint8_t* p) {
  uint16_t v;
  std::memcpy(&v, p, 2);
  return v;
}
uint32_t load_u32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}
float f16(const uint8_t* p) {
  return _cvtsh_ss(load_u16(p));
}

float hsum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// 32 bytes, byte i = 0xff where bit i of `bits` is set.
__m256i bits_to_bytes(uint32_t bits) {
  const __m256i spread =
      _mm256_shuffle_epi8(_mm256_set1_epi32(static_cast<int>(bits)),
                          _mm256_setr_epi64x(0, 0x0101010101010101, 0x0202020202020202, 0x0303030303030303));
  const __m256i bit = _mm256_set1_epi64x(static_cast<int64_t>(0x8040201008040201ull));
  return _mm256_cmpeq_epi8(_mm256_and_si256(spread, bit), bit);
}

// Sum of the 16-bit pairs as 8 i32 lanes.
__m256i pair_sums(__m256i i16_pairs) {
  return _mm256_madd_epi16(i16_pairs, _mm256_set1_epi16(1));
}

// acc + the sums of each 4 adjacent products u8 x s8, as 8 i32 lanes (lane k: bytes 4k .. 4k + 3), exactly.
// The callers' products never saturate maddubs' 16-bit pairs (see the top of this file).
__m256i dot4_add(__m256i acc, __m256i u8, __m256i s8) {
#if defined(SOTTO_QUANT_DOT_VNNI)
  return _mm256_dpbusd_epi32(acc, u8, s8);
#else
  return _mm256_add_epi32(acc, pair_sums(_mm256_maddubs_epi16(u8, s8)));
#endif
}

// Prepared activations of the calling thread, grown as needed; never shrunk.
Vec* prepared_scratch(size_t n_vecs) {
  thread_local std::vector<Vec> buffer;
  if (buffer.size() < n_vecs) buffer.resize(n_vecs);
  return buffer.data();
}

// ============================================================================ q4_0 / q5_0
// Prepared per q8_0 block, 2 vectors: x, and -offset * (sums of each 4 consecutive x's) as 8 i32; after the
// blocks, every d_x as f32 (store_x_scales()). Lane k of the weight dot then holds
// sum_{i = 4k .. 4k + 3} (q_i - offset) x_i exactly, the same integer as ggml's sign-trick lane k, so the
// float steps (one FMA per block with d_w * d_x) are ggml's.
// The f16 d (first 2 bytes) of 8 consecutive blocks, block_bytes apart, as 8 u16 lanes.
__m128i block_scales8(const uint8_t* w, size_t block_bytes) {
  __m128i h = _mm_cvtsi32_si128(load_u16(w));
  h = _mm_insert_epi16(h, load_u16(w + block_bytes), 1);
  h = _mm_insert_epi16(h, load_u16(w + 2 * block_bytes), 2);
  h = _mm_insert_epi16(h, load_u16(w + 3 * block_bytes), 3);
  h = _mm_insert_epi16(h, load_u16(w + 4 * block_bytes), 4);
  h = _mm_insert_epi16(h, load_u16(w + 5 * block_bytes), 5);
  h = _mm_insert_epi16(h, load_u16(w + 6 * block_bytes), 6);
  return _mm_insert_epi16(h, load_u16(w + 7 * block_bytes), 7);
}

// The d_x of every q8_0 block as f32, after the 2 vectors per block: 8 blocks' scales load as one vector.
void store_x_scales(const BlockQ8_0* x, int64_t n_blocks, Vec* out) {
  auto* d = reinterpret_cast<float*>(out + 2 * n_blocks);
  for (int64_t b = 0; b < n_blocks; ++b) d[b] = f16(reinterpret_cast<const uint8_t*>(&x[b].d));
}

template <int kOffset>
void prepare_offset_blocks(const uint8_t* xq, int64_t n_blocks, Vec* out) {
  const auto* x = reinterpret_cast<const BlockQ8_0*>(xq);
  for (int64_t b = 0; b < n_blocks; ++b) {
    const __m256i q = load256(x[b].qs);
    store_vec(out[2 * b], q);
    store_vec(
        out[2 * b + 1],
        _mm256_sub_epi32(_mm256_setzero_si256(),
                         pair_sums(_mm256_maddubs_epi16(_mm256_set1_epi8(static_cast<char>(kOffset)), q))));
  }
  store_x_scales(x, n_blocks, out);
}

// The shared step of q4_0 / q5_0: unsigned weights (0..31) in element order against each token; scale[t]
// is f32(d_w) * f32(d_x) of token t in all lanes.
template <int T>
void offset_block_step(__m256i q, const __m256 (&scale)[T], const Vec* const (&x)[T], __m256 (&acc)[T]) {
  for (int t = 0; t < T; ++t) {
    const __m256i isum = dot4_add(load_vec(x[t][1]), q, load_vec(x[t][0]));
    acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), scale[t], acc[t]);
  }
}

// 16 low nibbles then 16 high nibbles: elements 0..31 of a 4-bit block.
__m256i nibbles32(const uint8_t* qs) {
  const __m128i bytes = _mm_loadu_si128(reinterpret_cast<const __m128i*>(qs));
  return _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(bytes, 4), bytes), _mm256_set1_epi8(0x0f));
}

struct Q4_0Fast {
  static constexpr int kBlockElems = 32, kVecsPerStep = 2;
  static constexpr size_t kBlockBytes = sizeof(BlockQ4_0);
  static void prepare(const uint8_t* xq, int64_t n_blocks, Vec* out) {
    prepare_offset_blocks<8>(xq, n_blocks, out);
  }
  template <int T>
  static void step(const uint8_t* w, const __m256 (&scale)[T], const Vec* const (&x)[T], __m256 (&acc)[T]) {
    offset_block_step<T>(nibbles32(w + 2), scale, x, acc);
  }
};

struct Q5_0Fast {
  static constexpr int kBlockElems = 32, kVecsPerStep = 2;
  static constexpr size_t kBlockBytes = sizeof(BlockQ5_0);
  static void prepare(const uint8_t* xq, int64_t n_blocks, Vec* out) {
    prepare_offset_blocks<16>(xq, n_blocks, out);
  }
  template <int T>
  static void step(const uint8_t* w, const __m256 (&scale)[T], const Vec* const (&x)[T], __m256 (&acc)[T]) {
    // Fifth bits: qh bit i belongs to element i.
    const __m256i high = _mm256_and_si256(bits_to_bytes(load_u32(w + 2)), _mm256_set1_epi8(0x10));
    offset_block_step<T>(_mm256_or_si256(nibbles32(w + 6), high), scale, x, acc);
  }
};

// ============================================================================ q8_0: one block a step
// Prepared per block, 2 vectors: |x| and x (for its signs); then the d_x's as f32 (store_x_scales()).
struct Q8_0Fast {
  static constexpr int kBlockElems = 32, kVecsPerStep = 2;
  static constexpr size_t kBlockBytes = sizeof(BlockQ8_0);
#if defined(SOTTO_QUANT_DOT_VNNI)
  // vpdpbusd never saturates, so the weights can go unsigned as q + 128 and work like q4_0's offset weights
  // (prepared: x, and -128 * (sums of 4 x's), exact in i32): one instruction per token instead of the sign
  // trick's two; the lane integers are the same, so are the results (measured: the prompt kernel ~17% faster).
  static void prepare(const uint8_t* xq, int64_t n_blocks, Vec* out) {
    prepare_offset_blocks<128>(xq, n_blocks, out);
  }
  template <int T>
  static void step(const uint8_t* w, const __m256 (&scale)[T], const Vec* const (&x)[T], __m256 (&acc)[T]) {
    const __m256i q = _mm256_xor_si256(load256(w + 2), _mm256_set1_epi8(static_cast<char>(0x80)));  // q + 128
    offset_block_step<T>(q, scale, x, acc);
  }
#else
  static void prepare(const uint8_t* xq, int64_t n_blocks, Vec* out) {
    const auto* x = reinterpret_cast<const BlockQ8_0*>(xq);
    for (int64_t b = 0; b < n_blocks; ++b) {
      const __m256i q = load256(x[b].qs);
      store_vec(out[2 * b], _mm256_abs_epi8(q));
      store_vec(out[2 * b + 1], q);
    }
    store_x_scales(x, n_blocks, out);
  }
  template <int T>
  static void step(const uint8_t* w, const __m256 (&scale)[T], const Vec* const (&x)[T], __m256 (&acc)[T]) {
    const __m256i q = load256(w + 2);
    for (int t = 0; t < T; ++t) {
      // w * x = (w * sign(x)) * |x|: |x| <= 127 is maddubs' unsigned operand, pairs <= 2 * 127 * 127.
      const __m256i isum =
          dot4_add(_mm256_setzero_si256(), load_vec(x[t][0]), _mm256_sign_epi8(q, load_vec(x[t][1])));
      acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), scale[t], acc[t]);
    }
  }
#endif
};

// ============================================================================ K-quants: one super-block a step
// Prepared per q8_K super-block, 2 vectors: [d_x, 0 x 7] (as float) and the 16 bsums (i16); for q4_K the
// second holds instead the 8 sums of 32 (pairs of bsums), in its low half. The 256 q's are read from the
// q8_K block itself.
template <bool kSumsOf32>
void prepare_k(const uint8_t* xq, int64_t n_blocks, Vec* out) {
  const auto* x = reinterpret_cast<const BlockQ8_K*>(xq);
  for (int64_t b = 0; b < n_blocks; ++b) {
    store_vec(out[2 * b], _mm256_setr_ps(x[b].d, 0, 0, 0, 0, 0, 0, 0));
    const __m256i bsums = load256(x[b].bsums);
    if constexpr (kSumsOf32) {
      const __m128i sums = _mm_hadd_epi16(_mm256_castsi256_si128(bsums), _mm256_extracti128_si256(bsums, 1));
      store_vec(out[2 * b + 1], _mm256_zextsi128_si256(sums));
    } else {
      store_vec(out[2 * b + 1], bsums);
    }
  }
}

// Shuffle control that broadcasts i16 lane lane_lo of the low 128-bit half over that half, and lane lane_hi
// of the high half over the high half.
__m256i broadcast_i16_control(int lane_lo, int lane_hi) {
  const auto pair = [](int lane) { return static_cast<int16_t>((2 * lane) | ((2 * lane + 1) << 8)); };
  return _mm256_set_m128i(_mm_set1_epi16(pair(lane_hi)), _mm_set1_epi16(pair(lane_lo)));
}

struct Q4_KFast {
  static constexpr int kBlockElems = 256, kVecsPerStep = 2;
  static constexpr size_t kBlockBytes = sizeof(BlockQ4_K), kXBlockBytes = sizeof(BlockQ8_K);
  static void prepare(const uint8_t* xq, int64_t n_blocks, Vec* out) { prepare_k<true>(xq, n_blocks, out); }
  // xq: the q8_K block of each token at this step.
  template <int T>
  static void step(const uint8_t* w, const Vec* const (&x)[T], const uint8_t* const (&xq)[T],
                   __m256 (&acc)[T]) {
    // The 12 scale bytes as three words a, b, c (quant_blocks.h): scales 0..3 = a & 63, mins 0..3 = b & 63,
    // scales 4..7 = (c & 15) | (a >> 6) << 4, mins 4..7 = (c >> 4) | (b >> 6) << 4, bytewise.
    const uint32_t a = load_u32(w + 4), b = load_u32(w + 8), c = load_u32(w + 12);
    const uint32_t scales_lo = a & 0x3f3f3f3fu, mins_lo = b & 0x3f3f3f3fu;
    const uint32_t scales_hi = (c & 0x0f0f0f0fu) | ((a >> 2) & 0x30303030u);
    const uint32_t mins_hi = ((c >> 4) & 0x0f0f0f0fu) | ((b >> 2) & 0x30303030u);
    const __m256i scales_mins =
        _mm256_cvtepu8_epi16(_mm_setr_epi32(static_cast<int>(scales_lo), static_cast<int>(scales_hi),
                                            static_cast<int>(mins_lo), static_cast<int>(mins_hi)));
    const __m256i scales = _mm256_permute2x128_si256(scales_mins, scales_mins, 0x00);  // both halves
    const __m128i mins = _mm256_extracti128_si256(scales_mins, 1);
    const uint8_t* qs = w + 16;
    const __m256i mask = _mm256_set1_epi8(0x0f);
    __m256i isum[T];
    for (int t = 0; t < T; ++t) isum[t] = _mm256_setzero_si256();
    for (int k = 0; k < 4; ++k) {  // 32 bytes: sub-block 2k in the low nibbles, 2k + 1 in the high ones
      const __m256i bytes = load256(qs + 32 * k);
      const __m256i lo = _mm256_and_si256(bytes, mask),
                    hi = _mm256_and_si256(_mm256_srli_epi16(bytes, 4), mask);
      const __m256i scale_lo = _mm256_shuffle_epi8(scales, broadcast_i16_control(2 * k, 2 * k));
      const __m256i scale_hi = _mm256_shuffle_epi8(scales, broadcast_i16_control(2 * k + 1, 2 * k + 1));
      for (int t = 0; t < T; ++t) {
        const int8_t* xs = reinterpret_cast<const BlockQ8_K*>(xq[t])->qs + 64 * k;
        const __m256i p_lo = _mm256_madd_epi16(_mm256_maddubs_epi16(lo, load256(xs)), scale_lo);
        const __m256i p_hi = _mm256_madd_epi16(_mm256_maddubs_epi16(hi, load256(xs + 32)), scale_hi);
        isum[t] = _mm256_add_epi32(isum[t], _mm256_add_epi32(p_lo, p_hi));
      }
    }
    const float d = f16(w), dmin = f16(w + 2);
    for (int t = 0; t < T; ++t) {
      const float d_x = _mm256_cvtss_f32(load_vec_ps(x[t][0]));
      const __m128i min_sum = _mm_madd_epi16(mins, _mm256_castsi256_si128(load_vec(x[t][1])));
      acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum[t]), _mm256_set1_ps(d * d_x), acc[t]);
      acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_zextsi128_si256(min_sum)),
                               _mm256_set1_ps(-dmin * d_x), acc[t]);
    }
  }
};

// The 128 values q + 32 (0..63) of half h of a q6_K super-block, as 4 chunks of 32 in element order (chunk k:
// elements 128h + 32k .. + 31). Element l of chunk k: low 4 bits from ql (chunks 0, 1 low nibbles, 2, 3 high),
// bits 4..5 from bits 2k, 2k + 1 of qh[l].
void q6_K_values(const BlockQ6_K* block, int h, __m256i (&q)[4]) {
  const __m256i mask = _mm256_set1_epi8(0x0f), high_mask = _mm256_set1_epi8(0x30);
  const __m256i ql0 = load256(block->ql + 64 * h), ql1 = load256(block->ql + 64 * h + 32);
  const __m256i qh = load256(block->qh + 32 * h);
  q[0] = _mm256_or_si256(_mm256_and_si256(ql0, mask), _mm256_and_si256(_mm256_slli_epi16(qh, 4), high_mask));
  q[1] = _mm256_or_si256(_mm256_and_si256(ql1, mask), _mm256_and_si256(_mm256_slli_epi16(qh, 2), high_mask));
  q[2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql0, 4), mask), _mm256_and_si256(qh, high_mask));
  q[3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql1, 4), mask),
                         _mm256_and_si256(_mm256_srli_epi16(qh, 2), high_mask));
}

struct Q6_KFast {
  static constexpr int kBlockElems = 256, kVecsPerStep = 2;
  static constexpr size_t kBlockBytes = sizeof(BlockQ6_K), kXBlockBytes = sizeof(BlockQ8_K);
  static void prepare(const uint8_t* xq, int64_t n_blocks, Vec* out) { prepare_k<false>(xq, n_blocks, out); }
  template <int T>
  static void step(const uint8_t* w, const Vec* const (&x)[T], const uint8_t* const (&xq)[T],
                   __m256 (&acc)[T]) {
    const auto* block = reinterpret_cast<const BlockQ6_K*>(w);
    // The 16 signed group scales as i16; q - 32 comes back as -32 * sum_g scale_g * bsum_g.
    const __m256i scales =
        _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(block->scales)));
    __m256i isum[T];
    for (int t = 0; t < T; ++t)
      isum[t] = _mm256_sub_epi32(_mm256_setzero_si256(),
                                 _mm256_slli_epi32(_mm256_madd_epi16(scales, load_vec(x[t][1])), 5));
    for (int h = 0; h < 2; ++h) {  // 128 elements: groups 8h .. 8h + 7
      const __m256i half_scales = h == 0 ? _mm256_permute2x128_si256(scales, scales, 0x00)
                                         : _mm256_permute2x128_si256(scales, scales, 0x11);
      __m256i q[4];
      q6_K_values(block, h, q);
      for (int k = 0; k < 4; ++k) {  // chunk k holds groups 8h + 2k (first 16) and 8h + 2k + 1
        const __m256i scale = _mm256_shuffle_epi8(half_scales, broadcast_i16_control(2 * k, 2 * k + 1));
        for (int t = 0; t < T; ++t) {
          const int8_t* xs = reinterpret_cast<const BlockQ8_K*>(xq[t])->qs + 128 * h + 32 * k;
          isum[t] =
              _mm256_add_epi32(isum[t], _mm256_madd_epi16(_mm256_maddubs_epi16(q[k], load256(xs)), scale));
        }
      }
    }
    const float d = f16(reinterpret_cast<const uint8_t*>(&block->d));
    for (int t = 0; t < T; ++t) {
      const float d_x = _mm256_cvtss_f32(load_vec_ps(x[t][0]));
      acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum[t]), _mm256_set1_ps(d * d_x), acc[t]);
    }
  }
};

// ============================================================================ drivers
// Rows [row_begin, row_end) against tokens t0 .. t0 + T - 1, whose prepared activations start at x_tokens[t].
// Rows r .. r + R - 1 of a 32-element block type against tokens t0 .. t0 + T - 1. Each block's scale is
// f32(d_w) * f32(d_x), one rounding, as ggml; those of 8 blocks take one vector multiply per row and token
// (the same products, bit for bit). With R > 1 the rows share the activation loads.
template <class W, int R, int T>
void block32_rows(const uint8_t* weights, int64_t n_blocks, size_t row_bytes, const Vec* const (&x_tokens)[T],
                  float* y, int64_t y_stride, int64_t t0, int64_t r) {
  const uint8_t* w_rows[R];
  __m256 acc[R][T];
  for (int i = 0; i < R; ++i) {
    w_rows[i] = weights + static_cast<size_t>(r + i) * row_bytes;
    for (int t = 0; t < T; ++t) acc[i][t] = _mm256_setzero_ps();
  }
  const float* d_x[T];
  for (int t = 0; t < T; ++t) d_x[t] = reinterpret_cast<const float*>(x_tokens[t] + 2 * n_blocks);
  const auto block = [&](int64_t b, const __m256(&scale)[R][T]) {
    const Vec* x[T];
    for (int t = 0; t < T; ++t) x[t] = x_tokens[t] + b * W::kVecsPerStep;
    for (int i = 0; i < R; ++i)
      W::template step<T>(w_rows[i] + static_cast<size_t>(b) * W::kBlockBytes, scale[i], x, acc[i]);
  };
  int64_t b = 0;
  for (; b + 8 <= n_blocks; b += 8) {
    alignas(32) float products[R][T][8];
    for (int i = 0; i < R; ++i) {
      const __m256 d_w =
          _mm256_cvtph_ps(block_scales8(w_rows[i] + static_cast<size_t>(b) * W::kBlockBytes, W::kBlockBytes));
      for (int t = 0; t < T; ++t)
        _mm256_store_ps(products[i][t], _mm256_mul_ps(d_w, _mm256_loadu_ps(d_x[t] + b)));
    }
    for (int j = 0; j < 8; ++j) {
      __m256 scale[R][T];
      for (int i = 0; i < R; ++i)
        for (int t = 0; t < T; ++t) scale[i][t] = _mm256_broadcast_ss(products[i][t] + j);
      block(b + j, scale);
    }
  }
  for (; b < n_blocks; ++b) {
    __m256 scale[R][T];
    for (int i = 0; i < R; ++i) {
      const __m256 d_w = _mm256_set1_ps(f16(w_rows[i] + static_cast<size_t>(b) * W::kBlockBytes));
      for (int t = 0; t < T; ++t) scale[i][t] = _mm256_mul_ps(d_w, _mm256_broadcast_ss(d_x[t] + b));
    }
    block(b, scale);
  }
  for (int i = 0; i < R; ++i)
    for (int t = 0; t < T; ++t) y[(t0 + t) * y_stride + r + i] = hsum(acc[i][t]);
}

// Rows of a 32-element block type per pass in a prefill tile: 4 where the 32 registers of AVX-512 hold the
// rows' 16 accumulators and the shared activations (measured: 2 rows ~20% faster than 1, 4 a few % more);
// 1 with AVX2's 16 registers (2 spill: measured 20% slower).
#if defined(SOTTO_QUANT_DOT_VNNI)
constexpr int kTileRows = 4;
#else
constexpr int kTileRows = 1;
#endif

// Rows [row_begin, row_end) against tokens t0 .. t0 + T - 1, whose prepared activations start at x_tokens[t].
template <class W, int T>
void rows_tile(const uint8_t* weights, int64_t n_blocks, size_t row_bytes, const Vec* const (&x_tokens)[T],
               const uint8_t* const (&xq_tokens)[T], float* y, int64_t y_stride, int64_t t0,
               int64_t row_begin, int64_t row_end) {
  if constexpr (W::kBlockElems == 32) {
    int64_t r = row_begin;
    if constexpr (T > 1)
      for (; r + kTileRows <= row_end; r += kTileRows)
        block32_rows<W, kTileRows, T>(weights, n_blocks, row_bytes, x_tokens, y, y_stride, t0, r);
    for (; r < row_end; ++r)
      block32_rows<W, 1, T>(weights, n_blocks, row_bytes, x_tokens, y, y_stride, t0, r);
  } else {
    for (int64_t r = row_begin; r < row_end; ++r) {
      const uint8_t* w_row = weights + static_cast<size_t>(r) * row_bytes;
      __m256 acc[T];
      for (int t = 0; t < T; ++t) acc[t] = _mm256_setzero_ps();
      for (int64_t b = 0; b < n_blocks; ++b) {
        const Vec* x[T];
        const uint8_t* xq[T];
        for (int t = 0; t < T; ++t) {
          x[t] = x_tokens[t] + b * W::kVecsPerStep;
          xq[t] = xq_tokens[t] + static_cast<size_t>(b) * W::kXBlockBytes;
        }
        W::template step<T>(w_row + static_cast<size_t>(b) * W::kBlockBytes, x, xq, acc);
      }
      for (int t = 0; t < T; ++t) y[(t0 + t) * y_stride + r] = hsum(acc[t]);
    }
  }
}

template <class W, int T>
void rows_tokens(const uint8_t* weights, int64_t n_blocks, size_t row_bytes, const Vec* prepared,
                 size_t prepared_stride, const uint8_t* xq, size_t xq_stride, float* y, int64_t y_stride,
                 int64_t t0, int64_t row_begin, int64_t row_end) {
  const Vec* x_tokens[T];
  const uint8_t* xq_tokens[T];
  for (int t = 0; t < T; ++t) {
    x_tokens[t] = prepared + static_cast<size_t>(t) * prepared_stride;
    xq_tokens[t] = xq + static_cast<size_t>(t0 + t) * xq_stride;
  }
  rows_tile<W, T>(weights, n_blocks, row_bytes, x_tokens, xq_tokens, y, y_stride, t0, row_begin, row_end);
}

// Tiles of 4 tokens (the last one 1..3): each tile's activations are prepared once, then every row of the
// range runs against them, each weight block decoded once for the tile's tokens. Each token is prepared
// once per call, and the scratch holds one tile, however long the prompt.
template <class W>
void rows_fast(const void* weights, int64_t cols, const void* xq, int64_t n, size_t xq_stride, float* y,
               int64_t y_stride, int64_t row_begin, int64_t row_end) {
  const int64_t n_blocks = cols / W::kBlockElems;
  const size_t row_bytes = static_cast<size_t>(n_blocks) * W::kBlockBytes;
  // 32-element types keep their d_x's as f32 after the vectors: 8 per Vec.
  const size_t prepared_stride = static_cast<size_t>(n_blocks) * W::kVecsPerStep +
                                 (W::kBlockElems == 32 ? static_cast<size_t>(n_blocks + 7) / 8 : 0);
  const auto* x = static_cast<const uint8_t*>(xq);
  const auto* w = static_cast<const uint8_t*>(weights);
  Vec* prepared = prepared_scratch(prepared_stride * 4);
  for (int64_t t0 = 0; t0 < n; t0 += 4) {
    const int tokens = static_cast<int>(n - t0 < 4 ? n - t0 : 4);
    for (int t = 0; t < tokens; ++t)
      W::prepare(x + static_cast<size_t>(t0 + t) * xq_stride, n_blocks,
                 prepared + static_cast<size_t>(t) * prepared_stride);
    switch (tokens) {
      case 4:
        rows_tokens<W, 4>(w, n_blocks, row_bytes, prepared, prepared_stride, x, xq_stride, y, y_stride, t0,
                          row_begin, row_end);
        break;
      case 3:
        rows_tokens<W, 3>(w, n_blocks, row_bytes, prepared, prepared_stride, x, xq_stride, y, y_stride, t0,
                          row_begin, row_end);
        break;
      case 2:
        rows_tokens<W, 2>(w, n_blocks, row_bytes, prepared, prepared_stride, x, xq_stride, y, y_stride, t0,
                          row_begin, row_end);
        break;
      default:
        rows_tokens<W, 1>(w, n_blocks, row_bytes, prepared, prepared_stride, x, xq_stride, y, y_stride, t0,
                          row_begin, row_end);
        break;
    }
  }
}

// ============================================================================ q4_0 in block order
// quant_dot.h's block order (llama.cpp's repacked q4_0 on x86): one output row per f32 lane. Eight rows pass
// together: per block and token, each row's 8 integer lanes (Q4_0Fast's exact sums of 4) are added into one
// lane by a tree of hadds (exact in i32), then one conversion and one FMA with the 8 rows' f32(d_w) * f32(d_x)
// add the block to the 8 running sums, as llama.cpp's gemv does. Rows past the last group of 8 take the same
// steps one lane at a time.

// Lane i = the sum of the 8 lanes of v[i].
__m256i lane_totals8(const __m256i (&v)[8]) {
  const __m256i g0 = _mm256_hadd_epi32(_mm256_hadd_epi32(v[0], v[1]), _mm256_hadd_epi32(v[2], v[3]));
  const __m256i g1 = _mm256_hadd_epi32(_mm256_hadd_epi32(v[4], v[5]), _mm256_hadd_epi32(v[6], v[7]));
  return _mm256_add_epi32(_mm256_permute2x128_si256(g0, g1, 0x20), _mm256_permute2x128_si256(g0, g1, 0x31));
}

int32_t lane_total(__m256i v) {
  __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4e));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xb1));
  return _mm_cvtsi128_si32(s);
}

template <int T>
void q4_0_block_order_tokens(const uint8_t* w, int64_t n_blocks, size_t row_bytes,
                             const Vec* const (&x_tokens)[T], float* y, int64_t y_stride, int64_t t0,
                             int64_t row_begin, int64_t row_end) {
  constexpr size_t kBlock = sizeof(BlockQ4_0);
  const float* d_x[T];
  for (int t = 0; t < T; ++t) d_x[t] = reinterpret_cast<const float*>(x_tokens[t] + 2 * n_blocks);
  int64_t r = row_begin;
  for (; r + 8 <= row_end; r += 8) {
    const uint8_t* rows = w + static_cast<size_t>(r) * row_bytes;
    __m256 acc[T];
    for (int t = 0; t < T; ++t) acc[t] = _mm256_setzero_ps();
    for (int64_t b = 0; b < n_blocks; ++b) {
      const uint8_t* blocks = rows + static_cast<size_t>(b) * kBlock;
      const __m256 d_w = _mm256_cvtph_ps(block_scales8(blocks, row_bytes));
      for (int t = 0; t < T; ++t) {
        const Vec* x = x_tokens[t] + 2 * b;
        __m256i isum[8];
        for (int i = 0; i < 8; ++i)
          isum[i] = dot4_add(load_vec(x[1]), nibbles32(blocks + static_cast<size_t>(i) * row_bytes + 2),
                             load_vec(x[0]));
        acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(lane_totals8(isum)),
                                 _mm256_mul_ps(d_w, _mm256_set1_ps(d_x[t][b])), acc[t]);
      }
    }
    for (int t = 0; t < T; ++t) _mm256_storeu_ps(y + (t0 + t) * y_stride + r, acc[t]);
  }
  for (; r < row_end; ++r) {
    const uint8_t* row = w + static_cast<size_t>(r) * row_bytes;
    for (int t = 0; t < T; ++t) {
      __m128 acc = _mm_setzero_ps();
      for (int64_t b = 0; b < n_blocks; ++b) {
        const uint8_t* block = row + static_cast<size_t>(b) * kBlock;
        const Vec* x = x_tokens[t] + 2 * b;
        const int32_t total = lane_total(dot4_add(load_vec(x[1]), nibbles32(block + 2), load_vec(x[0])));
        acc = _mm_fmadd_ss(_mm_set_ss(static_cast<float>(total)), _mm_set_ss(f16(block) * d_x[t][b]), acc);
      }
      y[(t0 + t) * y_stride + r] = _mm_cvtss_f32(acc);
    }
  }
}

// Tiles of up to 4 tokens, each prepared once (as rows_fast<Q4_0Fast>).
void q4_0_block_order(const void* weights, int64_t cols, const void* xq, int64_t n, size_t xq_stride,
                      float* y, int64_t y_stride, int64_t row_begin, int64_t row_end) {
  const int64_t n_blocks = cols / 32;
  const size_t row_bytes = static_cast<size_t>(n_blocks) * sizeof(BlockQ4_0);
  const size_t prepared_stride = static_cast<size_t>(n_blocks) * 2 + static_cast<size_t>(n_blocks + 7) / 8;
  const auto* x = static_cast<const uint8_t*>(xq);
  const auto* w = static_cast<const uint8_t*>(weights);
  Vec* prepared = prepared_scratch(prepared_stride * 4);
  for (int64_t t0 = 0; t0 < n; t0 += 4) {
    const int tokens = static_cast<int>(n - t0 < 4 ? n - t0 : 4);
    const Vec* x_tokens[4];
    for (int t = 0; t < tokens; ++t) {
      Q4_0Fast::prepare(x + static_cast<size_t>(t0 + t) * xq_stride, n_blocks,
                        prepared + static_cast<size_t>(t) * prepared_stride);
      x_tokens[t] = prepared + static_cast<size_t>(t) * prepared_stride;
    }
    switch (tokens) {
      case 4:
        q4_0_block_order_tokens<4>(w, n_blocks, row_bytes,
                                   {x_tokens[0], x_tokens[1], x_tokens[2], x_tokens[3]}, y, y_stride, t0,
                                   row_begin, row_end);
        break;
      case 3:
        q4_0_block_order_tokens<3>(w, n_blocks, row_bytes, {x_tokens[0], x_tokens[1], x_tokens[2]}, y,
                                   y_stride, t0, row_begin, row_end);
        break;
      case 2:
        q4_0_block_order_tokens<2>(w, n_blocks, row_bytes, {x_tokens[0], x_tokens[1]}, y, y_stride, t0,
                                   row_begin, row_end);
        break;
      default:
        q4_0_block_order_tokens<1>(w, n_blocks, row_bytes, {x_tokens[0]}, y, y_stride, t0, row_begin,
                                   row_end);
        break;
    }
  }
}

// The kernel of each weight type this file has; nullptr for the others.
QuantDotRowsFn fast_kernel(DType w) {
  switch (w) {
    case DType::Q4_0:
      return rows_fast<Q4_0Fast>;
    case DType::Q5_0:
      return rows_fast<Q5_0Fast>;
    case DType::Q8_0:
      return rows_fast<Q8_0Fast>;
    case DType::Q4_K:
      return rows_fast<Q4_KFast>;
    case DType::Q6_K:
      return rows_fast<Q6_KFast>;
    default:
      return nullptr;
  }
}

}  // namespace

}  // namespace sotto
