// The quantized dot-product kernels for x86-64 with AVX2 + FMA + F16C (compiled with -mavx2 -mfma -mf16c;
// used only after cpu_use_avx2() says so). The math is in quant_dot.h; the structure mirrors quant_dot.cpp:
// each weight block is decoded into 32-byte chunks of int8 values in element order (plus, for K-quants, the
// 16-bit scales of the chunk's two groups of 16 and the block's mins), then every token of the tile takes
// its dot product with the decoded chunks:
//   unsigned weights (q4_1 q5_1 q2_K q4_K q5_K, 0..31):  maddubs(w, x) -> i16 pairs (<= 2 * 31 * 127)
//   signed weights (q4_0 q5_0 q8_0 q3_K q6_K):            maddubs(|x|, w * sign(x)) -> i16 pairs, the sign
//                                                         trick of matvec_avx2.cpp (needs w != -128)
// then madd with the group scales (or ones) -> exact i32, one int->float conversion and one FMA per block.
#include <immintrin.h>

#include <cstddef>
#include <cstring>

#include "cpu/cpu_features.h"
#include "cpu/quant_dot.h"

namespace sotto {

namespace {

float hsum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

float f16(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return _cvtsh_ss(h);
}

__m256i load256(const void* p) {
  return _mm256_loadu_si256(static_cast<const __m256i*>(p));
}

// 32 bytes, byte i = 0xff where bit i of `bits` is set.
__m256i bits_to_bytes(uint32_t bits) {
  const __m256i spread =
      _mm256_shuffle_epi8(_mm256_set1_epi32(static_cast<int>(bits)),
                          _mm256_setr_epi64x(0, 0x0101010101010101, 0x0202020202020202, 0x0303030303030303));
  const __m256i bit = _mm256_set1_epi64x(static_cast<int64_t>(0x8040201008040201ull));
  return _mm256_cmpeq_epi8(_mm256_and_si256(spread, bit), bit);
}

// 16 low nibbles then 16 high nibbles of 16 bytes: elements 0..31 of a 32-element 4-bit block.
__m256i nibbles32(const uint8_t* qs) {
  const __m128i bytes = _mm_loadu_si128(reinterpret_cast<const __m128i*>(qs));
  return _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(bytes, 4), bytes), _mm256_set1_epi8(0x0f));
}

// The i16 scales of a chunk: lanes 0..7 (bytes 0..15) group a, lanes 8..15 group b.
__m256i chunk_scales(int a, int b) {
  return _mm256_set_m128i(_mm_set1_epi16(static_cast<int16_t>(b)), _mm_set1_epi16(static_cast<int16_t>(a)));
}

enum class Extra { None, Q8_1Sum, KMins };

template <int kChunks>
struct Decoded {
  __m256i q[kChunks];
  __m256i scale[kChunks];  // K-quants only
  __m256i mins;            // q2_K q4_K q5_K: min of each group of 16, as i16
  float d;
  float m;
};

// ---- decoders ----------------------------------------------------------------------------------------------
struct Q4_0 {
  static constexpr int kChunks = 1, kElems = 32;
  static constexpr size_t kBytes = sizeof(BlockQ4_0), kXBytes = sizeof(BlockQ8_0);
  static constexpr bool kSigned = true, kScaled = false;
  static constexpr Extra kExtra = Extra::None;
  static void decode(const uint8_t* b, Decoded<1>& out) {
    out.d = f16(b);
    out.q[0] = _mm256_sub_epi8(nibbles32(b + 2), _mm256_set1_epi8(8));
  }
};
struct Q4_1 {
  static constexpr int kChunks = 1, kElems = 32;
  static constexpr size_t kBytes = sizeof(BlockQ4_1), kXBytes = sizeof(BlockQ8_1);
  static constexpr bool kSigned = false, kScaled = false;
  static constexpr Extra kExtra = Extra::Q8_1Sum;
  static void decode(const uint8_t* b, Decoded<1>& out) {
    out.d = f16(b);
    out.m = f16(b + 2);
    out.q[0] = nibbles32(b + 4);
  }
};
template <bool kHasMin>
__m256i five_bits(const uint8_t* qh_bytes, const uint8_t* qs) {
  uint32_t qh;
  std::memcpy(&qh, qh_bytes, 4);
  const __m256i high = _mm256_and_si256(bits_to_bytes(qh), _mm256_set1_epi8(0x10));
  const __m256i q = _mm256_or_si256(nibbles32(qs), high);
  return kHasMin ? q : _mm256_sub_epi8(q, _mm256_set1_epi8(16));
}
struct Q5_0 {
  static constexpr int kChunks = 1, kElems = 32;
  static constexpr size_t kBytes = sizeof(BlockQ5_0), kXBytes = sizeof(BlockQ8_0);
  static constexpr bool kSigned = true, kScaled = false;
  static constexpr Extra kExtra = Extra::None;
  static void decode(const uint8_t* b, Decoded<1>& out) {
    out.d = f16(b);
    out.q[0] = five_bits<false>(b + 2, b + 6);
  }
};
struct Q5_1 {
  static constexpr int kChunks = 1, kElems = 32;
  static constexpr size_t kBytes = sizeof(BlockQ5_1), kXBytes = sizeof(BlockQ8_1);
  static constexpr bool kSigned = false, kScaled = false;
  static constexpr Extra kExtra = Extra::Q8_1Sum;
  static void decode(const uint8_t* b, Decoded<1>& out) {
    out.d = f16(b);
    out.m = f16(b + 2);
    out.q[0] = five_bits<true>(b + 4, b + 8);
  }
};
struct Q8_0 {
  static constexpr int kChunks = 1, kElems = 32;
  static constexpr size_t kBytes = sizeof(BlockQ8_0), kXBytes = sizeof(BlockQ8_0);
  static constexpr bool kSigned = true, kScaled = false;
  static constexpr Extra kExtra = Extra::None;
  static void decode(const uint8_t* b, Decoded<1>& out) {
    out.d = f16(b);
    out.q[0] = load256(b + 2);
  }
};
struct Q2_K {
  static constexpr int kChunks = 8, kElems = 256;
  static constexpr size_t kBytes = sizeof(BlockQ2_K), kXBytes = sizeof(BlockQ8_K);
  static constexpr bool kSigned = false, kScaled = true;
  static constexpr Extra kExtra = Extra::KMins;
  static void decode(const uint8_t* b, Decoded<8>& out) {
    const auto* block = reinterpret_cast<const BlockQ2_K*>(b);
    out.d = f16(b + offsetof(BlockQ2_K, d));
    out.m = f16(b + offsetof(BlockQ2_K, dmin));
    const __m256i packed =
        _mm256_cvtepu8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(block->scales)));
    out.mins = _mm256_srli_epi16(packed, 4);
    for (int k = 0; k < 8; ++k)
      out.scale[k] = chunk_scales(block->scales[2 * k] & 15, block->scales[2 * k + 1] & 15);
    for (int h = 0; h < 2; ++h) {
      const __m256i bytes = load256(block->qs + 32 * h);
      for (int s = 0; s < 4; ++s)
        out.q[4 * h + s] =
            _mm256_and_si256(_mm256_srl_epi16(bytes, _mm_cvtsi32_si128(2 * s)), _mm256_set1_epi8(3));
    }
  }
};
struct Q3_K {
  static constexpr int kChunks = 8, kElems = 256;
  static constexpr size_t kBytes = sizeof(BlockQ3_K), kXBytes = sizeof(BlockQ8_K);
  static constexpr bool kSigned = true, kScaled = true;
  static constexpr Extra kExtra = Extra::None;
  static void decode(const uint8_t* b, Decoded<8>& out) {
    const auto* block = reinterpret_cast<const BlockQ3_K*>(b);
    out.d = f16(b + offsetof(BlockQ3_K, d));
    for (int k = 0; k < 8; ++k)
      out.scale[k] =
          chunk_scales(unpack_q3_K_scale(block->scales, 2 * k), unpack_q3_K_scale(block->scales, 2 * k + 1));
    const __m256i hmask = load256(block->hmask);
    for (int h = 0; h < 2; ++h) {
      const __m256i bytes = load256(block->qs + 32 * h);
      for (int s = 0; s < 4; ++s) {
        const __m256i low =
            _mm256_and_si256(_mm256_srl_epi16(bytes, _mm_cvtsi32_si128(2 * s)), _mm256_set1_epi8(3));
        const __m256i bit = _mm256_set1_epi8(static_cast<char>(1 << (4 * h + s)));
        const __m256i unset = _mm256_cmpeq_epi8(_mm256_and_si256(hmask, bit), _mm256_setzero_si256());
        out.q[4 * h + s] = _mm256_sub_epi8(low, _mm256_and_si256(unset, _mm256_set1_epi8(4)));
      }
    }
  }
};
void k4_scales_mins(const uint8_t* packed, Decoded<8>& out) {
  alignas(32) int16_t mins[16];
  for (int j = 0; j < 8; ++j) {
    const ScaleMin sm = unpack_k4_scale_min(packed, j);
    out.scale[j] = _mm256_set1_epi16(sm.scale);  // chunk j is sub-block j: both groups share the scale
    mins[2 * j] = mins[2 * j + 1] = sm.min;
  }
  out.mins = _mm256_load_si256(reinterpret_cast<const __m256i*>(mins));
}
struct Q4_K {
  static constexpr int kChunks = 8, kElems = 256;
  static constexpr size_t kBytes = sizeof(BlockQ4_K), kXBytes = sizeof(BlockQ8_K);
  static constexpr bool kSigned = false, kScaled = true;
  static constexpr Extra kExtra = Extra::KMins;
  static void decode(const uint8_t* b, Decoded<8>& out) {
    const auto* block = reinterpret_cast<const BlockQ4_K*>(b);
    out.d = f16(b);
    out.m = f16(b + 2);
    k4_scales_mins(block->scales, out);
    const __m256i mask = _mm256_set1_epi8(0x0f);
    for (int c = 0; c < 4; ++c) {
      const __m256i bytes = load256(block->qs + 32 * c);
      out.q[2 * c] = _mm256_and_si256(bytes, mask);
      out.q[2 * c + 1] = _mm256_and_si256(_mm256_srli_epi16(bytes, 4), mask);
    }
  }
};
struct Q5_K {
  static constexpr int kChunks = 8, kElems = 256;
  static constexpr size_t kBytes = sizeof(BlockQ5_K), kXBytes = sizeof(BlockQ8_K);
  static constexpr bool kSigned = false, kScaled = true;
  static constexpr Extra kExtra = Extra::KMins;
  static void decode(const uint8_t* b, Decoded<8>& out) {
    const auto* block = reinterpret_cast<const BlockQ5_K*>(b);
    out.d = f16(b);
    out.m = f16(b + 2);
    k4_scales_mins(block->scales, out);
    const __m256i mask = _mm256_set1_epi8(0x0f), fifth = _mm256_set1_epi8(0x10);
    const __m256i qh = load256(block->qh);
    for (int c = 0; c < 4; ++c) {
      const __m256i bytes = load256(block->qs + 32 * c);
      const __m256i bit_lo = _mm256_set1_epi8(static_cast<char>(1 << (2 * c)));
      const __m256i bit_hi = _mm256_set1_epi8(static_cast<char>(1 << (2 * c + 1)));
      const __m256i high_lo =
          _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(qh, bit_lo), bit_lo), fifth);
      const __m256i high_hi =
          _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(qh, bit_hi), bit_hi), fifth);
      out.q[2 * c] = _mm256_or_si256(_mm256_and_si256(bytes, mask), high_lo);
      out.q[2 * c + 1] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(bytes, 4), mask), high_hi);
    }
  }
};
struct Q6_K {
  static constexpr int kChunks = 8, kElems = 256;
  static constexpr size_t kBytes = sizeof(BlockQ6_K), kXBytes = sizeof(BlockQ8_K);
  static constexpr bool kSigned = true, kScaled = true;
  static constexpr Extra kExtra = Extra::None;
  static void decode(const uint8_t* b, Decoded<8>& out) {
    const auto* block = reinterpret_cast<const BlockQ6_K*>(b);
    out.d = f16(b + offsetof(BlockQ6_K, d));
    for (int k = 0; k < 8; ++k) out.scale[k] = chunk_scales(block->scales[2 * k], block->scales[2 * k + 1]);
    const __m256i mask = _mm256_set1_epi8(0x0f), three = _mm256_set1_epi8(3), bias = _mm256_set1_epi8(32);
    for (int h = 0; h < 2; ++h) {
      const __m256i ql0 = load256(block->ql + 64 * h), ql1 = load256(block->ql + 64 * h + 32);
      const __m256i qh = load256(block->qh + 32 * h);
      const __m256i hi0 = _mm256_slli_epi16(_mm256_and_si256(qh, three), 4);
      const __m256i hi1 = _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 2), three), 4);
      const __m256i hi2 = _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 4), three), 4);
      const __m256i hi3 = _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 6), three), 4);
      out.q[4 * h] = _mm256_sub_epi8(_mm256_or_si256(_mm256_and_si256(ql0, mask), hi0), bias);
      out.q[4 * h + 1] = _mm256_sub_epi8(_mm256_or_si256(_mm256_and_si256(ql1, mask), hi1), bias);
      out.q[4 * h + 2] =
          _mm256_sub_epi8(_mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql0, 4), mask), hi2), bias);
      out.q[4 * h + 3] =
          _mm256_sub_epi8(_mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql1, 4), mask), hi3), bias);
    }
  }
};

// ---- activation side, prepared once per (block, token) for all rows of the tile
template <int kChunks>
struct XPrep {
  __m256i q[kChunks];
  __m256i abs[kChunks];  // signed weights only
  __m256i bsums;         // q8_K
  float d;
  float s;  // q8_1
};

template <class W>
void prepare_x(const uint8_t* x, XPrep<W::kChunks>& out) {
  if constexpr (W::kElems == 256) {
    const auto* xb = reinterpret_cast<const BlockQ8_K*>(x);
    std::memcpy(&out.d, x, 4);
    for (int c = 0; c < 8; ++c) out.q[c] = load256(xb->qs + 32 * c);
    if constexpr (W::kExtra == Extra::KMins) out.bsums = load256(xb->bsums);
  } else {
    out.d = f16(x);
    if constexpr (W::kExtra == Extra::Q8_1Sum) out.s = f16(x + 2);
    out.q[0] = load256(x + W::kXBytes - 32);
  }
  if constexpr (W::kSigned)
    for (int c = 0; c < W::kChunks; ++c) out.abs[c] = _mm256_abs_epi8(out.q[c]);
}

template <class W>
__m256 block_dot(const Decoded<W::kChunks>& w, const XPrep<W::kChunks>& x, __m256 acc, float& extra) {
  __m256i isum = _mm256_setzero_si256();
  for (int c = 0; c < W::kChunks; ++c) {
    const __m256i pairs = W::kSigned ? _mm256_maddubs_epi16(x.abs[c], _mm256_sign_epi8(w.q[c], x.q[c]))
                                     : _mm256_maddubs_epi16(w.q[c], x.q[c]);
    isum = _mm256_add_epi32(isum, _mm256_madd_epi16(pairs, W::kScaled ? w.scale[c] : _mm256_set1_epi16(1)));
  }
  acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), _mm256_set1_ps(w.d * x.d), acc);
  if constexpr (W::kExtra == Extra::KMins)
    acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_madd_epi16(w.mins, x.bsums)), _mm256_set1_ps(-w.m * x.d),
                          acc);
  if constexpr (W::kExtra == Extra::Q8_1Sum) extra += w.m * x.s;
  return acc;
}

// Tiles of up to 4 rows x 4 tokens: each weight block decoded once per tile, each x block prepared once per
// tile. Decode (n = 1) is the 4-rows-per-pass case.
template <class W>
void rows_quantized(const void* weights, int64_t cols, const void* xq, int64_t n, size_t xq_stride, float* y,
                    int64_t y_stride, int64_t row_begin, int64_t row_end) {
  const int64_t n_blocks = cols / W::kElems;
  const size_t row_bytes = static_cast<size_t>(n_blocks) * W::kBytes;
  const auto* w = static_cast<const uint8_t*>(weights);
  const auto* x = static_cast<const uint8_t*>(xq);
  for (int64_t t0 = 0; t0 < n; t0 += 4) {
    const int tokens = static_cast<int>(n - t0 < 4 ? n - t0 : 4);
    for (int64_t r0 = row_begin; r0 < row_end; r0 += 4) {
      const int rows = static_cast<int>(row_end - r0 < 4 ? row_end - r0 : 4);
      __m256 acc[4][4];
      float extra[4][4] = {};
      for (auto& row : acc)
        for (auto& a : row) a = _mm256_setzero_ps();
      for (int64_t b = 0; b < n_blocks; ++b) {
        XPrep<W::kChunks> xp[4];
        for (int t = 0; t < tokens; ++t)
          prepare_x<W>(x + static_cast<size_t>(t0 + t) * xq_stride + static_cast<size_t>(b) * W::kXBytes,
                       xp[t]);
        for (int r = 0; r < rows; ++r) {
          const uint8_t* wb =
              w + static_cast<size_t>(r0 + r) * row_bytes + static_cast<size_t>(b) * W::kBytes;
          if (b + 1 < n_blocks) _mm_prefetch(reinterpret_cast<const char*>(wb + W::kBytes) + 64, _MM_HINT_T0);
          Decoded<W::kChunks> decoded;
          W::decode(wb, decoded);
          for (int t = 0; t < tokens; ++t) acc[r][t] = block_dot<W>(decoded, xp[t], acc[r][t], extra[r][t]);
        }
      }
      for (int r = 0; r < rows; ++r)
        for (int t = 0; t < tokens; ++t) y[(t0 + t) * y_stride + r0 + r] = hsum(acc[r][t]) + extra[r][t];
    }
  }
}

// ---- float weights ---------------------------------------------------------------------------------------
struct F32 {
  using T = float;
  static __m256 load8(const uint8_t* p) { return _mm256_loadu_ps(reinterpret_cast<const float*>(p)); }
  static float load1(const uint8_t* p) {
    float v;
    std::memcpy(&v, p, 4);
    return v;
  }
};
struct F16 {
  using T = uint16_t;
  static __m256 load8(const uint8_t* p) {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  }
  static float load1(const uint8_t* p) { return f16(p); }
};
struct BF16 {
  using T = uint16_t;
  static __m256 load8(const uint8_t* p) {
    const __m256i wide = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
    return _mm256_castsi256_ps(_mm256_slli_epi32(wide, 16));
  }
  static float load1(const uint8_t* p) {
    uint16_t h;
    std::memcpy(&h, p, 2);
    const uint32_t bits = static_cast<uint32_t>(h) << 16;
    float v;
    std::memcpy(&v, &bits, 4);
    return v;
  }
};

// f16 weights in llama.cpp's x86 order (quant_dot.cpp rows_f16_ggml, the scalar form of the same steps): a
// 16-lane accumulator as two 8-lane halves, four of them over chunks of 64 values, one FMA per value.
void rows_f16_ggml(const void* weights, int64_t cols, const void* xq, int64_t n, size_t xq_stride, float* y,
                   int64_t y_stride, int64_t row_begin, int64_t row_end) {
  const auto* w = static_cast<const uint8_t*>(weights);
  const auto* x = static_cast<const uint8_t*>(xq);
  const int64_t whole = cols / 64 * 64;
  for (int64_t r = row_begin; r < row_end; ++r) {
    const uint8_t* wr = w + static_cast<size_t>(r) * static_cast<size_t>(cols) * 2;
    for (int64_t t = 0; t < n; ++t) {
      const uint8_t* xt = x + static_cast<size_t>(t) * xq_stride;
      __m256 acc[8];
      for (auto& a : acc) a = _mm256_setzero_ps();
      for (int64_t c = 0; c < whole; c += 64)
        for (int k = 0; k < 8; ++k)
          acc[k] =
              _mm256_fmadd_ps(F16::load8(wr + 2 * (c + 8 * k)), F16::load8(xt + 2 * (c + 8 * k)), acc[k]);
      double sum = 0.0;
      if (whole > 0) {
        // acc[2j], acc[2j + 1]: lanes 0..7 and 8..15 of accumulator j. (a0 + a2) + (a1 + a3), then the 16
        // lanes: upper 8 + lower 8, upper 4 + lower 4, [0,1] + [2,3], lane 0 + lane 1.
        const __m256 lo = _mm256_add_ps(_mm256_add_ps(acc[0], acc[4]), _mm256_add_ps(acc[2], acc[6]));
        const __m256 hi = _mm256_add_ps(_mm256_add_ps(acc[1], acc[5]), _mm256_add_ps(acc[3], acc[7]));
        const __m256 h8 = _mm256_add_ps(hi, lo);
        const __m128 h4 = _mm_add_ps(_mm256_extractf128_ps(h8, 1), _mm256_castps256_ps128(h8));
        const __m128 h2 = _mm_add_ps(h4, _mm_movehl_ps(h4, h4));
        sum = static_cast<double>(_mm_cvtss_f32(_mm_add_ss(h2, _mm_movehdup_ps(h2))));
      }
      for (int64_t c = whole; c < cols; ++c) sum += static_cast<double>(f16(wr + 2 * c) * f16(xt + 2 * c));
      y[t * y_stride + r] = static_cast<float>(sum);
    }
  }
}

// Tiles of up to 2 rows x 4 tokens (8 accumulators), 8 elements per step; scalar tail for odd widths.
template <class F>
void rows_float(const void* weights, int64_t cols, const void* xq, int64_t n, size_t xq_stride, float* y,
                int64_t y_stride, int64_t row_begin, int64_t row_end) {
  constexpr size_t kSize = sizeof(typename F::T);
  const auto* w = static_cast<const uint8_t*>(weights);
  const auto* x = static_cast<const uint8_t*>(xq);
  const size_t row_bytes = static_cast<size_t>(cols) * kSize;
  const int64_t vec_cols = cols / 8 * 8;
  for (int64_t t0 = 0; t0 < n; t0 += 4) {
    const int tokens = static_cast<int>(n - t0 < 4 ? n - t0 : 4);
    for (int64_t r0 = row_begin; r0 < row_end; r0 += 2) {
      const int rows = static_cast<int>(row_end - r0 < 2 ? row_end - r0 : 2);
      __m256 acc[2][4];
      for (auto& row : acc)
        for (auto& a : row) a = _mm256_setzero_ps();
      const uint8_t* wr[2] = {w + static_cast<size_t>(r0) * row_bytes,
                              w + static_cast<size_t>(r0 + rows - 1) * row_bytes};
      const uint8_t* xt[4];
      for (int t = 0; t < 4; ++t) xt[t] = x + static_cast<size_t>(t0 + (t < tokens ? t : 0)) * xq_stride;
      for (int64_t c = 0; c < vec_cols; c += 8) {
        __m256 wv[2], xv[4];
        for (int r = 0; r < rows; ++r) wv[r] = F::load8(wr[r] + c * kSize);
        for (int t = 0; t < tokens; ++t) xv[t] = F::load8(xt[t] + c * kSize);
        for (int r = 0; r < rows; ++r)
          for (int t = 0; t < tokens; ++t) acc[r][t] = _mm256_fmadd_ps(wv[r], xv[t], acc[r][t]);
      }
      for (int r = 0; r < rows; ++r)
        for (int t = 0; t < tokens; ++t) {
          float sum = hsum(acc[r][t]);
          for (int64_t c = vec_cols; c < cols; ++c)
            sum += F::load1(wr[r] + c * kSize) * F::load1(xt[t] + c * kSize);
          y[(t0 + t) * y_stride + r0 + r] = sum;
        }
    }
  }
}

}  // namespace

QuantDotRowsFn quant_dot_avx2(DType w) {
  if (cpu_features().avx512_vnni)
    if (QuantDotRowsFn vnni = quant_dot_avx2_vnni(w)) return vnni;
  if (QuantDotRowsFn fast = quant_dot_avx2_fast(w)) return fast;
  return quant_dot_avx2_generic(w);
}

QuantDotRowsFn quant_dot_avx2_generic(DType w) {
  switch (w) {
    case DType::F32:
      return rows_float<F32>;
    case DType::F16:
      return rows_f16_ggml;
    case DType::BF16:
      return rows_float<BF16>;
    case DType::Q4_0:
      return rows_quantized<Q4_0>;
    case DType::Q4_1:
      return rows_quantized<Q4_1>;
    case DType::Q5_0:
      return rows_quantized<Q5_0>;
    case DType::Q5_1:
      return rows_quantized<Q5_1>;
    case DType::Q8_0:
      return rows_quantized<Q8_0>;
    case DType::Q2_K:
      return rows_quantized<Q2_K>;
    case DType::Q3_K:
      return rows_quantized<Q3_K>;
    case DType::Q4_K:
      return rows_quantized<Q4_K>;
    case DType::Q5_K:
      return rows_quantized<Q5_K>;
    case DType::Q6_K:
      return rows_quantized<Q6_K>;
    default:
      return nullptr;
  }
}

}  // namespace sotto
