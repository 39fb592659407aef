// The attention kernel for x86-64 with AVX2 + FMA + F16C (compiled with -mavx2 -mfma -mf16c; used only after
// cpu_use_avx2() says so). Bit-identical to attend_head_ref() (attention.cpp): the lanes, the order of the
// additions and the roundings are ggml's, and F16C conversions are exact / round to nearest even like
// core/half.h.
//
// Two passes per head: first every score (independent dot products, so the out-of-order core overlaps them),
// then the online softmax and the f16 value sum, which is a chain through the accumulator. The accumulator
// stays in f16 in memory, as in ggml; at head_dim 64 it is two cache lines.
#include <immintrin.h>

#include <algorithm>
#include <cmath>

#include "cpu/attention.h"

namespace sotto {

namespace {

constexpr int kStep = 32;

// c + a * b with the product rounded first. The empty asm hides the product from the compiler, which would
// otherwise fuse the two into an FMA in this file (-mfma; clang's -ffp-contract=on, gcc's =fast), changing
// the last bit where ggml does not fuse.
float unfused_mul_add(float a, float b, float c) {
  float product = a * b;
  __asm__("" : "+x"(product));
  return c + product;
}

__m256 load_f16x8(const uint16_t* p) {
  return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}

void store_f16x8(uint16_t* p, __m256 x) {
  _mm_storeu_si128(reinterpret_cast<__m128i*>(p), _mm256_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT));
}

float f16(uint16_t h) {
  return _cvtsh_ss(h);
}

uint16_t to_f16(float x) {
  return static_cast<uint16_t>(_cvtss_sh(x, _MM_FROUND_TO_NEAREST_INT));
}

// ggml_vec_dot_f16: 4 accumulators x 8 lanes over whole steps, (a0 + a2) + (a1 + a3), the lanes folded with
// two horizontal adds, then the leftover products in double.
// K as f16 bits, or already widened to f32 (exactly, so the same products and bits).
__m256 load8(const uint16_t* p) {
  return load_f16x8(p);
}
__m256 load8(const float* p) {
  return _mm256_loadu_ps(p);
}
float widen(uint16_t h) {
  return f16(h);
}
float widen(float x) {
  return x;
}

template <class K>
float dot_f16(const K* k, const float* q, int n) {
  const int n_steps = n - n % kStep;
  __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
  for (int i = 0; i < n_steps; i += kStep) {
    a0 = _mm256_fmadd_ps(load8(k + i), _mm256_loadu_ps(q + i), a0);
    a1 = _mm256_fmadd_ps(load8(k + i + 8), _mm256_loadu_ps(q + i + 8), a1);
    a2 = _mm256_fmadd_ps(load8(k + i + 16), _mm256_loadu_ps(q + i + 16), a2);
    a3 = _mm256_fmadd_ps(load8(k + i + 24), _mm256_loadu_ps(q + i + 24), a3);
  }
  const __m256 folded = _mm256_add_ps(_mm256_add_ps(a0, a2), _mm256_add_ps(a1, a3));
  const __m128 t0 = _mm_add_ps(_mm256_castps256_ps128(folded), _mm256_extractf128_ps(folded, 1));
  const __m128 t1 = _mm_hadd_ps(t0, t0);
  double sum = static_cast<double>(_mm_cvtss_f32(_mm_hadd_ps(t1, t1)));
  for (int i = n_steps; i < n; ++i) sum += static_cast<double>(widen(k[i]) * q[i]);
  return static_cast<float>(sum);
}

// dot_f16 of one query against 8 keys (key j at k + j * k_stride), for n a multiple of 32 (no leftover
// products, so the double step is exact and skipped): the same lanes and sums, with the 8 keys' final folds
// done together. Per key, dot_f16 adds the halves (t_i = l_i + l_(i+4)) and then hadd twice, giving
// (t0 + t1) + (t2 + t3); here the halves of keys j and j + 4 share a register and two hadds over the four
// such registers give the same sums for all 8 keys, in key order.
__m256 dot8_f16(const float* k, size_t k_stride, const float* q, int n) {
  __m256 folded[8];
  for (int j = 0; j < 8; ++j) {
    const float* kj = k + j * k_stride;
    __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
    for (int i = 0; i < n; i += kStep) {
      a0 = _mm256_fmadd_ps(_mm256_loadu_ps(kj + i), _mm256_loadu_ps(q + i), a0);
      a1 = _mm256_fmadd_ps(_mm256_loadu_ps(kj + i + 8), _mm256_loadu_ps(q + i + 8), a1);
      a2 = _mm256_fmadd_ps(_mm256_loadu_ps(kj + i + 16), _mm256_loadu_ps(q + i + 16), a2);
      a3 = _mm256_fmadd_ps(_mm256_loadu_ps(kj + i + 24), _mm256_loadu_ps(q + i + 24), a3);
    }
    folded[j] = _mm256_add_ps(_mm256_add_ps(a0, a2), _mm256_add_ps(a1, a3));
  }
  __m256 halves[4];  // [t of key j | t of key j + 4]
  for (int j = 0; j < 4; ++j)
    halves[j] = _mm256_add_ps(_mm256_permute2f128_ps(folded[j], folded[j + 4], 0x20),
                              _mm256_permute2f128_ps(folded[j], folded[j + 4], 0x31));
  const __m256 pairs01 = _mm256_hadd_ps(halves[0], halves[1]);  // keys 0, 1 | 4, 5: t0 + t1, t2 + t3
  const __m256 pairs23 = _mm256_hadd_ps(halves[2], halves[3]);  // keys 2, 3 | 6, 7
  return _mm256_hadd_ps(pairs01, pairs23);                      // keys 0, 1, 2, 3 | 4, 5, 6, 7
}

void scale_f16(uint16_t* acc, float factor, int n) {
  const __m256 f = _mm256_set1_ps(factor);
  int d = 0;
  for (; d + 8 <= n; d += 8) store_f16x8(acc + d, _mm256_mul_ps(load_f16x8(acc + d), f));
  for (; d < n; ++d) acc[d] = to_f16(f16(acc[d]) * factor);
}

// acc = f16(acc + v * weight): FMA on whole steps, product-then-sum on the rest (ggml_vec_mad_f16).
template <class V>
void mad_f16(uint16_t* acc, const V* v, float weight, int n) {
  const int n_steps = n - n % kStep;
  const __m256 w = _mm256_set1_ps(weight);
  for (int d = 0; d < n_steps; d += 8)
    store_f16x8(acc + d, _mm256_fmadd_ps(load8(v + d), w, load_f16x8(acc + d)));
  int d = n_steps;
  for (; d + 8 <= n; d += 8) {
    __m256 product = _mm256_mul_ps(load8(v + d), w);
    __asm__("" : "+x"(product));  // keep it unfused, see unfused_mul_add()
    store_f16x8(acc + d, _mm256_add_ps(load_f16x8(acc + d), product));
  }
  for (; d < n; ++d) acc[d] = to_f16(unfused_mul_add(widen(v[d]), weight, f16(acc[d])));
}

// n rows of n_cols f16 values (row r at src + r * stride) widened to f32, packed.
void widen_rows(const uint16_t* src, size_t stride, int n, int n_cols, float* dst) {
  for (int r = 0; r < n; ++r, src += stride, dst += n_cols) {
    int d = 0;
    for (; d + 8 <= n_cols; d += 8) _mm256_storeu_ps(dst + d, load_f16x8(src + d));
    for (; d < n_cols; ++d) dst[d] = f16(src[d]);
  }
}

void attend_head_avx2(const float* q, const uint16_t* k, size_t k_stride, const uint16_t* v, size_t v_stride,
                      int n_keys, int head_dim_k, int head_dim_v, float scale, float* out,
                      AttentionScratch& scratch) {
  scratch.q.resize(static_cast<size_t>(head_dim_k));
  scratch.scores.resize(static_cast<size_t>(n_keys));
  scratch.acc16.assign(static_cast<size_t>(head_dim_v), 0);
  float* q16 = scratch.q.data();
  float* scores = scratch.scores.data();
  uint16_t* acc = scratch.acc16.data();

  int d = 0;
  for (; d + 8 <= head_dim_k; d += 8)
    _mm256_storeu_ps(q16 + d,
                     _mm256_cvtph_ps(_mm256_cvtps_ph(_mm256_loadu_ps(q + d), _MM_FROUND_TO_NEAREST_INT)));
  for (; d < head_dim_k; ++d) q16[d] = f16(to_f16(q[d]));

  for (int p = 0; p < n_keys; ++p) scores[p] = dot_f16(k + p * k_stride, q16, head_dim_k) * scale;

  float max_score = -INFINITY, sum = 0.0f;
  for (int p = 0; p < n_keys; ++p) {
    const float s = scores[p];
    float old_scale = 1.0f, weight = 1.0f;
    if (s > max_score) {
      old_scale = std::exp(max_score - s);
      max_score = s;
      scale_f16(acc, old_scale, head_dim_v);
    } else {
      weight = std::exp(s - max_score);
    }
    mad_f16(acc, v + p * v_stride, weight, head_dim_v);
    sum = unfused_mul_add(sum, old_scale, weight);
  }
  const float inv_sum = sum == 0.0f ? 0.0f : 1.0f / sum;
  const __m256 inv = _mm256_set1_ps(inv_sum);
  d = 0;
  for (; d + 8 <= head_dim_v; d += 8) _mm256_storeu_ps(out + d, _mm256_mul_ps(load_f16x8(acc + d), inv));
  for (; d < head_dim_v; ++d) out[d] = f16(acc[d]) * inv_sum;
}

// Keys a group pass scores before it sums their values: the block's K and V rows (16 KiB each at head_dim 64)
// stay in L1/L2 between the two passes, and the scores of all the rows fit beside them.
constexpr int kGroupBlock = 128;

// The query rows that read one KV head against the same keys: n_heads query heads (grouped-query attention)
// of n_tokens consecutive tokens, token t seeing the first n_keys + t positions (causal within a prompt
// block). A deep cache is far larger than the CPU's caches, so reading each key and value row once for all
// the rows instead of once per row divides the memory traffic and the F16C widening by the row count (7
// heads for Qwen2.5-0.5B, times the tokens of a chat turn's block), and the rows' independent f16
// accumulators overlap their latency chains. Per row it is attend_head_avx2's arithmetic in the same order
// (the online softmax is sequential over keys either way), so the bits are the same.
void attend_group_avx2(const float* q, size_t q_stride, size_t q_token_stride, int n_heads, int n_tokens,
                       const uint16_t* k, size_t k_stride, const uint16_t* v, size_t v_stride, int n_keys,
                       int head_dim_k, int head_dim_v, float scale, float* out, size_t out_stride,
                       size_t out_token_stride, AttentionScratch& scratch) {
  const int n_rows = n_heads * n_tokens;  // row r is token r / n_heads, head r % n_heads
  scratch.q.resize(static_cast<size_t>(n_rows) * head_dim_k);
  scratch.scores.resize(static_cast<size_t>(n_rows) * kGroupBlock);
  scratch.acc16.assign(static_cast<size_t>(n_rows) * head_dim_v, 0);
  scratch.max_score.assign(static_cast<size_t>(n_rows), -INFINITY);
  scratch.sum.assign(static_cast<size_t>(n_rows), 0.0f);
  float* q16 = scratch.q.data();
  float* scores = scratch.scores.data();
  uint16_t* acc = scratch.acc16.data();
  float* max_score = scratch.max_score.data();
  float* sum = scratch.sum.data();

  for (int r = 0; r < n_rows; ++r) {
    const float* qr = q + static_cast<size_t>(r / n_heads) * q_token_stride + (r % n_heads) * q_stride;
    float* q16r = q16 + static_cast<size_t>(r) * head_dim_k;
    int d = 0;
    for (; d + 8 <= head_dim_k; d += 8)
      _mm256_storeu_ps(q16r + d,
                       _mm256_cvtph_ps(_mm256_cvtps_ph(_mm256_loadu_ps(qr + d), _MM_FROUND_TO_NEAREST_INT)));
    for (; d < head_dim_k; ++d) q16r[d] = f16(to_f16(qr[d]));
  }

  // Each block's keys and values are widened to f32 once for all rows: the F16C conversions, not the
  // multiply-adds, bound this loop, and otherwise every row would repeat them.
  scratch.k32.resize(static_cast<size_t>(kGroupBlock) * head_dim_k);
  scratch.v32.resize(static_cast<size_t>(kGroupBlock) * head_dim_v);
  float* k32 = scratch.k32.data();
  float* v32 = scratch.v32.data();
  const bool widened = n_rows > 1;
  const int last_keys = n_keys + n_tokens - 1;  // the last token's
  for (int p0 = 0; p0 < last_keys; p0 += kGroupBlock) {
    const int n_block = std::min(kGroupBlock, last_keys - p0);
    // Token t sees key p0 + p when p0 + p < n_keys + t: the rows from first_row(p) on (later tokens see more).
    auto first_row = [&](int p) { return std::max(0, p0 + p - n_keys + 1) * n_heads; };
    if (widened) {
      widen_rows(k + p0 * k_stride, k_stride, n_block, head_dim_k, k32);
      widen_rows(v + p0 * v_stride, v_stride, n_block, head_dim_v, v32);
    }
    for (int r = 0; r < n_rows; ++r) {
      // Keys of the block row r's token sees.
      const int n_seen = std::clamp(n_keys + r / n_heads - p0, 0, n_block);
      const float* q16r = q16 + static_cast<size_t>(r) * head_dim_k;
      float* scores_r = scores + r * kGroupBlock;
      int p = 0;
      if (widened && head_dim_k % kStep == 0)
        for (; p + 8 <= n_seen; p += 8)
          _mm256_storeu_ps(scores_r + p,
                           _mm256_mul_ps(dot8_f16(k32 + static_cast<size_t>(p) * head_dim_k,
                                                  static_cast<size_t>(head_dim_k), q16r, head_dim_k),
                                         _mm256_set1_ps(scale)));
      for (; p < n_seen; ++p)
        scores_r[p] = widened ? dot_f16(k32 + static_cast<size_t>(p) * head_dim_k, q16r, head_dim_k) * scale
                              : dot_f16(k + (p0 + p) * k_stride, q16r, head_dim_k) * scale;
    }
    for (int p = 0; p < n_block; ++p) {
      const uint16_t* vp = v + (p0 + p) * v_stride;
      const float* vp32 = v32 + static_cast<size_t>(p) * head_dim_v;
      for (int r = first_row(p); r < n_rows; ++r) {
        uint16_t* acc_r = acc + static_cast<size_t>(r) * head_dim_v;
        const float s = scores[r * kGroupBlock + p];
        float old_scale = 1.0f, weight = 1.0f;
        if (s > max_score[r]) {
          old_scale = std::exp(max_score[r] - s);
          max_score[r] = s;
          scale_f16(acc_r, old_scale, head_dim_v);
        } else {
          weight = std::exp(s - max_score[r]);
        }
        if (widened)
          mad_f16(acc_r, vp32, weight, head_dim_v);
        else
          mad_f16(acc_r, vp, weight, head_dim_v);
        sum[r] = unfused_mul_add(sum[r], old_scale, weight);
      }
    }
  }
  for (int r = 0; r < n_rows; ++r) {
    const uint16_t* acc_r = acc + static_cast<size_t>(r) * head_dim_v;
    float* out_r = out + static_cast<size_t>(r / n_heads) * out_token_stride + (r % n_heads) * out_stride;
    const float inv_sum = sum[r] == 0.0f ? 0.0f : 1.0f / sum[r];
    const __m256 inv = _mm256_set1_ps(inv_sum);
    int d = 0;
    for (; d + 8 <= head_dim_v; d += 8)
      _mm256_storeu_ps(out_r + d, _mm256_mul_ps(load_f16x8(acc_r + d), inv));
    for (; d < head_dim_v; ++d) out_r[d] = f16(acc_r[d]) * inv_sum;
  }
}

}  // namespace

const AttentionKernels kAttentionAvx2 = {"avx2", attend_head_avx2, attend_group_avx2};

}  // namespace sotto
