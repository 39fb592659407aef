// The register-resident kernels (cpu/quant_dot_fast_x86.h) compiled for AVX2 + FMA + F16C, and the q8_0 /
// q8_K activation quantizers in AVX2.
#include <immintrin.h>

#include "cpu/quant_dot_fast_x86.h"

namespace sotto {

namespace {

// ============================================================================ activation quantizer
// q8_0 with the portable quantizer's exact arithmetic (llama.cpp's x86 one): d = amax / 127 and id = 127 /
// amax in scalar f32, q = x * id rounded half to even (cvtps in the default rounding mode).
void quantize_q8_0_avx2(const float* x, BlockQ8_0* y, int64_t n) {
  const __m256 sign_bit = _mm256_set1_ps(-0.0f);
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
    const float amax_value = _mm_cvtss_f32(m);
    const float d = amax_value / 127.0f;
    const float id = amax_value != 0.0f ? 127.0f / amax_value : 0.0f;
    y[b].d = f32_to_f16(d);
    __m256i q[4];
    for (int i = 0; i < 4; ++i) q[i] = _mm256_cvtps_epi32(_mm256_mul_ps(v[i], _mm256_set1_ps(id)));
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

}  // namespace

void quantize_activations_q8_0_avx2(const float* x, BlockQ8_0* y, int64_t n) {
  quantize_q8_0_avx2(x, y, n);
}

void quantize_activations_q8_K_avx2(const float* x, BlockQ8_K* y, int64_t n) {
  quantize_q8_K_avx2(x, y, n);
}

QuantDotRowsFn quant_dot_avx2_fast(DType w) {
  return fast_kernel(w);
}

QuantDotRowsFn quant_dot_block_order_avx2() {
  return q4_0_block_order;
}

}  // namespace sotto
