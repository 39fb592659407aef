// AVX2 kernel of linear_int8_affine (linear_int8.cpp): four rows of int8 weights at a time against one row of
// x, 16 weights a step (two 8-lane conversions int8 -> int32 -> float and FMAs), so each x vector load serves
// four rows and the loop is bound by reading the weights.
#include <immintrin.h>

#include <cstdint>

namespace sotto::nn::cpu {

namespace {

inline __m256 widen8(const int8_t* p) {
  return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p))));
}

inline float hsum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

}  // namespace

void linear_int8_rows_avx2(const float* x, int64_t m, int64_t k, const int8_t* q, int64_t n_begin,
                           int64_t n_end, float* y, int64_t n) {
  const int64_t k8 = k & ~int64_t{7};
  for (int64_t i = 0; i < m; ++i) {
    const float* xi = x + i * k;
    int64_t j = n_begin;
    for (; j + 4 <= n_end; j += 4) {
      const int8_t* q0 = q + j * k;
      const int8_t* q1 = q0 + k;
      const int8_t* q2 = q1 + k;
      const int8_t* q3 = q2 + k;
      __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps(), a2 = _mm256_setzero_ps(),
             a3 = _mm256_setzero_ps();
      for (int64_t t = 0; t < k8; t += 8) {
        const __m256 xv = _mm256_loadu_ps(xi + t);
        a0 = _mm256_fmadd_ps(xv, widen8(q0 + t), a0);
        a1 = _mm256_fmadd_ps(xv, widen8(q1 + t), a1);
        a2 = _mm256_fmadd_ps(xv, widen8(q2 + t), a2);
        a3 = _mm256_fmadd_ps(xv, widen8(q3 + t), a3);
      }
      float s0 = hsum(a0), s1 = hsum(a1), s2 = hsum(a2), s3 = hsum(a3);
      for (int64_t t = k8; t < k; ++t) {
        s0 += xi[t] * static_cast<float>(q0[t]);
        s1 += xi[t] * static_cast<float>(q1[t]);
        s2 += xi[t] * static_cast<float>(q2[t]);
        s3 += xi[t] * static_cast<float>(q3[t]);
      }
      y[i * n + j] = s0;
      y[i * n + j + 1] = s1;
      y[i * n + j + 2] = s2;
      y[i * n + j + 3] = s3;
    }
    for (; j < n_end; ++j) {
      const int8_t* qj = q + j * k;
      __m256 a = _mm256_setzero_ps();
      for (int64_t t = 0; t < k8; t += 8) a = _mm256_fmadd_ps(_mm256_loadu_ps(xi + t), widen8(qj + t), a);
      float s = hsum(a);
      for (int64_t t = k8; t < k; ++t) s += xi[t] * static_cast<float>(qj[t]);
      y[i * n + j] = s;
    }
  }
}

}  // namespace sotto::nn::cpu
