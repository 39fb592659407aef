// Register-resident AVX2 kernels for the weight types of real downloads (q4_0, q5_0, q8_0, q4_K, q6_K): the
// weights go from the model file into registers and never touch the stack. The math is quant_dot.h's; the
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
// Prefill (n > 1) runs one weight row against a tile of 4 tokens: each weight block is decoded once and used
// 4 times; the tile's prepared activations stay in L1 while the rows stream past.
//
// Float order. q4_0 / q5_0 / q8_0 keep ggml's AVX2 arithmetic exactly: lane k of a block's dot holds the
// products of elements 4k .. 4k + 3, one FMA per block adds it times f32(d_w) * f32(d_x) to 8 running lanes,
// and the lanes are summed as ggml's hsum_float_8 does. That is what lets the model reproduce llama.cpp's
// greedy tokens even where two logits nearly tie (stories260K q4_0 has such a step; packing two blocks per
// vector, 10% faster, changed a token there). The K-quants add the same exact integers in a different order.
//
// Every integer sum is exact (maddubs never saturates: |q| <= 63 unsigned times |x| <= 127, pairs <= 16002;
// q8_0 uses the sign trick with |x| <= 127, see matvec.cpp).
#include <immintrin.h>

#include <cstddef>
#include <cstring>
#include <vector>

#include "core/half.h"
#include "cpu/quant_dot.h"

namespace sotto {

namespace {

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

// Prepared activations of the calling thread, grown as needed; never shrunk.
Vec* prepared_scratch(size_t n_vecs) {
  thread_local std::vector<Vec> buffer;
  if (buffer.size() < n_vecs) buffer.resize(n_vecs);
  return buffer.data();
}

// ============================================================================ q4_0 / q5_0
// Prepared per q8_0 block, 2 vectors: x, and offset * (sums of each 4 consecutive x's) as 8 i32; after the
// blocks, every d_x as f32 (block_scales()). Lane k of the weight dot then holds sum_{i = 4k .. 4k + 3} (q_i - offset) x_i exactly, the same
// integer as ggml's sign-trick lane k, so the float steps (one FMA per block with d_w * d_x) are ggml's.
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
    store_vec(out[2 * b + 1], pair_sums(_mm256_maddubs_epi16(_mm256_set1_epi8(kOffset), q)));
  }
  store_x_scales(x, n_blocks, out);
}

// The shared step of q4_0 / q5_0: unsigned weights (0..31) in element order against each token; scale[t]
// is f32(d_w) * f32(d_x) of token t in all lanes.
template <int T>
void offset_block_step(__m256i q, const __m256 (&scale)[T], const Vec* const (&x)[T], __m256 (&acc)[T]) {
  for (int t = 0; t < T; ++t) {
    const __m256i isum =
        _mm256_sub_epi32(pair_sums(_mm256_maddubs_epi16(q, load_vec(x[t][0]))), load_vec(x[t][1]));
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
      const __m256i pairs = _mm256_maddubs_epi16(load_vec(x[t][0]), _mm256_sign_epi8(q, load_vec(x[t][1])));
      acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(pair_sums(pairs)), scale[t], acc[t]);
    }
  }
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
    const __m256i mask = _mm256_set1_epi8(0x0f), high_mask = _mm256_set1_epi8(0x30);
    for (int h = 0; h < 2; ++h) {  // 128 elements: groups 8h .. 8h + 7
      const __m256i half_scales = h == 0 ? _mm256_permute2x128_si256(scales, scales, 0x00)
                                         : _mm256_permute2x128_si256(scales, scales, 0x11);
      const __m256i ql0 = load256(block->ql + 64 * h), ql1 = load256(block->ql + 64 * h + 32);
      const __m256i qh = load256(block->qh + 32 * h);
      // Element l of chunk k (0..3): low 4 bits from ql (chunks 0, 1 low nibbles, 2, 3 high), bits 4..5 from
      // bits 2k, 2k + 1 of qh[l].
      const __m256i q[4] = {
          _mm256_or_si256(_mm256_and_si256(ql0, mask), _mm256_and_si256(_mm256_slli_epi16(qh, 4), high_mask)),
          _mm256_or_si256(_mm256_and_si256(ql1, mask), _mm256_and_si256(_mm256_slli_epi16(qh, 2), high_mask)),
          _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql0, 4), mask), _mm256_and_si256(qh, high_mask)),
          _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql1, 4), mask),
                          _mm256_and_si256(_mm256_srli_epi16(qh, 2), high_mask))};
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

// ============================================================================ activation quantizer
// q8_0 with the portable quantizer's exact arithmetic: d = amax / 127 and id = 1 / d in scalar f32, then
// q = round half away from zero of x * id, computed as trunc(v) + (frac >= 0.5) - (frac <= -0.5), the same
// exact steps as round_half_away() in quant_dot.cpp (never _mm256_round_ps, which rounds halves to even).
void quantize_q8_0_avx2(const float* x, BlockQ8_0* y, int64_t n) {
  const __m256 sign_bit = _mm256_set1_ps(-0.0f), half = _mm256_set1_ps(0.5f), one = _mm256_set1_ps(1.0f);
  for (int64_t b = 0; b < n / 32; ++b) {
    const float* xb = x + 32 * b;
    __m256 v[4];
    __m256 amax = _mm256_setzero_ps();
    for (int i = 0; i < 4; ++i) {
      v[i] = _mm256_loadu_ps(xb + 8 * i);
      amax = _mm256_max_ps(_mm256_andnot_ps(sign_bit, v[i]), amax);  // ignores NaN, as the scalar max
    }
    __m128 m = _mm_max_ps(_mm256_castps256_ps128(amax), _mm256_extractf128_ps(amax, 1));
    m = _mm_max_ps(m, _mm_movehl_ps(m, m));
    m = _mm_max_ss(m, _mm_movehdup_ps(m));
    const float d = _mm_cvtss_f32(m) / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    y[b].d = f32_to_f16(d);
    __m256i q[4];
    for (int i = 0; i < 4; ++i) {
      const __m256 scaled = _mm256_mul_ps(v[i], _mm256_set1_ps(id));
      const __m256 truncated = _mm256_round_ps(scaled, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
      const __m256 fraction = _mm256_sub_ps(scaled, truncated);
      const __m256 up = _mm256_and_ps(_mm256_cmp_ps(fraction, half, _CMP_GE_OQ), one);
      const __m256 down =
          _mm256_and_ps(_mm256_cmp_ps(fraction, _mm256_sub_ps(_mm256_setzero_ps(), half), _CMP_LE_OQ), one);
      q[i] = _mm256_cvttps_epi32(_mm256_sub_ps(_mm256_add_ps(truncated, up), down));
    }
    // i32 -> i8 (values within [-127, 127], so the saturating packs are exact); packs work per 128-bit half,
    // the final permute restores element order.
    const __m256i q16 = _mm256_packs_epi32(q[0], q[1]), q16b = _mm256_packs_epi32(q[2], q[3]);
    const __m256i q8 = _mm256_packs_epi16(q16, q16b);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(y[b].qs),
                        _mm256_permutevar8x32_epi32(q8, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7)));
  }
}

// q8_K with the portable quantizer's exact arithmetic: max = the first value of largest magnitude, iscale =
// -127 / max in scalar f32, q = round-to-nearest-even of iscale * x (what ggml's nearest_int() computes by
// adding 1.5 * 2^23, and what cvtps does in the default rounding mode), at most 127; bsums = sums of 16.
void quantize_q8_K_avx2(const float* x, BlockQ8_K* y, int64_t n) {
  const __m256 sign_bit = _mm256_set1_ps(-0.0f);
  for (int64_t b = 0; b < n / 256; ++b) {
    const float* xb = x + 256 * b;
    BlockQ8_K& out = y[b];
    __m256 amax = _mm256_setzero_ps();
    for (int i = 0; i < 32; ++i)
      amax = _mm256_max_ps(_mm256_andnot_ps(sign_bit, _mm256_loadu_ps(xb + 8 * i)), amax);  // ignores NaN
    __m128 m = _mm_max_ps(_mm256_castps256_ps128(amax), _mm256_extractf128_ps(amax, 1));
    m = _mm_max_ps(m, _mm_movehl_ps(m, m));
    m = _mm_max_ss(m, _mm_movehdup_ps(m));
    const float amax_value = _mm_cvtss_f32(m);
    if (amax_value == 0.0f) {
      std::memset(&out, 0, sizeof out);
      continue;
    }
    float max = 0.0f;
    const __m256 amax_splat = _mm256_set1_ps(amax_value);
    for (int i = 0; i < 32; ++i) {
      const int hits = _mm256_movemask_ps(
          _mm256_cmp_ps(_mm256_andnot_ps(sign_bit, _mm256_loadu_ps(xb + 8 * i)), amax_splat, _CMP_EQ_OQ));
      if (hits) {
        max = xb[8 * i + __builtin_ctz(static_cast<unsigned>(hits))];
        break;
      }
    }
    const float iscale = -127.0f / max;
    const __m256 iscale_splat = _mm256_set1_ps(iscale);
    const __m256i limit = _mm256_set1_epi32(127);
    for (int quarter = 0; quarter < 4; ++quarter) {  // 64 values: groups 4 quarter .. 4 quarter + 3
      __m256i q[8];
      for (int i = 0; i < 8; ++i)
        q[i] = _mm256_min_epi32(
            _mm256_cvtps_epi32(_mm256_mul_ps(iscale_splat, _mm256_loadu_ps(xb + 64 * quarter + 8 * i))),
            limit);
      for (int h = 0; h < 2; ++h) {
        const __m256i q16 = _mm256_packs_epi32(q[4 * h], q[4 * h + 1]);
        const __m256i q16b = _mm256_packs_epi32(q[4 * h + 2], q[4 * h + 3]);
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(out.qs + 64 * quarter + 32 * h),
                            _mm256_permutevar8x32_epi32(_mm256_packs_epi16(q16, q16b),
                                                        _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7)));
      }
      const __m256i g0 = _mm256_add_epi32(q[0], q[1]), g1 = _mm256_add_epi32(q[2], q[3]);
      const __m256i g2 = _mm256_add_epi32(q[4], q[5]), g3 = _mm256_add_epi32(q[6], q[7]);
      const __m256i sums = _mm256_hadd_epi32(_mm256_hadd_epi32(g0, g1), _mm256_hadd_epi32(g2, g3));
      const __m128i sums4 = _mm_add_epi32(_mm256_castsi256_si128(sums), _mm256_extracti128_si256(sums, 1));
      _mm_storel_epi64(reinterpret_cast<__m128i*>(out.bsums + 4 * quarter), _mm_packs_epi32(sums4, sums4));
    }
    out.d = 1.0f / iscale;
  }
}

// ============================================================================ drivers
// Rows [row_begin, row_end) against tokens t0 .. t0 + T - 1, whose prepared activations start at x_tokens[t].
template <class W, int T>
void rows_tile(const uint8_t* weights, int64_t n_blocks, size_t row_bytes, const Vec* const (&x_tokens)[T],
               const uint8_t* const (&xq_tokens)[T], float* y, int64_t y_stride, int64_t t0,
               int64_t row_begin, int64_t row_end) {
  for (int64_t r = row_begin; r < row_end; ++r) {
    const uint8_t* w_row = weights + static_cast<size_t>(r) * row_bytes;
    __m256 acc[T];
    for (int t = 0; t < T; ++t) acc[t] = _mm256_setzero_ps();
    if constexpr (W::kBlockElems == 256) {
      for (int64_t b = 0; b < n_blocks; ++b) {
        const Vec* x[T];
        const uint8_t* xq[T];
        for (int t = 0; t < T; ++t) {
          x[t] = x_tokens[t] + b * W::kVecsPerStep;
          xq[t] = xq_tokens[t] + static_cast<size_t>(b) * W::kXBlockBytes;
        }
        W::template step<T>(w_row + static_cast<size_t>(b) * W::kBlockBytes, x, xq, acc);
      }
    } else {
      // 32-element blocks. Each block's scale is f32(d_w) * f32(d_x), one rounding, as ggml. Decode computes
      // those of 8 blocks with one vector multiply (the same products, bit for bit); a tile of tokens takes
      // one multiply per block and token (batching 8 blocks there spills the accumulators).
      const float* d_x[T];
      for (int t = 0; t < T; ++t) d_x[t] = reinterpret_cast<const float*>(x_tokens[t] + 2 * n_blocks);
      const auto block = [&](int64_t b, const __m256(&scale)[T]) {
        const Vec* x[T];
        for (int t = 0; t < T; ++t) x[t] = x_tokens[t] + b * W::kVecsPerStep;
        W::template step<T>(w_row + static_cast<size_t>(b) * W::kBlockBytes, scale, x, acc);
      };
      int64_t b = 0;
      if constexpr (T == 1) {
        for (; b + 8 <= n_blocks; b += 8) {
          const __m256 d_w =
              _mm256_cvtph_ps(block_scales8(w_row + static_cast<size_t>(b) * W::kBlockBytes, W::kBlockBytes));
          alignas(32) float products[8];
          _mm256_store_ps(products, _mm256_mul_ps(d_w, _mm256_loadu_ps(d_x[0] + b)));
          for (int j = 0; j < 8; ++j) {
            const __m256 scale[1] = {_mm256_broadcast_ss(products + j)};
            block(b + j, scale);
          }
        }
      }
      for (; b < n_blocks; ++b) {
        const __m256 d_w = _mm256_set1_ps(f16(w_row + static_cast<size_t>(b) * W::kBlockBytes));
        __m256 scale[T];
        for (int t = 0; t < T; ++t) scale[t] = _mm256_mul_ps(d_w, _mm256_broadcast_ss(d_x[t] + b));
        block(b, scale);
      }
    }
    for (int t = 0; t < T; ++t) y[(t0 + t) * y_stride + r] = hsum(acc[t]);
  }
}

// Tokens t0 .. t0 + T - 1 (prepared at prepared[t * prepared_stride]) against rows [row_begin, row_end).
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

}  // namespace

void quantize_activations_q8_0_avx2(const float* x, BlockQ8_0* y, int64_t n) {
  quantize_q8_0_avx2(x, y, n);
}

void quantize_activations_q8_K_avx2(const float* x, BlockQ8_K* y, int64_t n) {
  quantize_q8_K_avx2(x, y, n);
}

QuantDotRowsFn quant_dot_avx2_fast(DType w) {
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

}  // namespace sotto
