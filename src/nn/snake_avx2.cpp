// Snake (nn::snake, elementwise.cpp) 8 lanes at a time: vec::sin4's operations in the same order, as explicit
// AVX intrinsics (no FMA: this file is compiled with -mfma, and a contracted multiply-add would round
// differently), so every value is bitwise the 4-lane loop's. Snake is ~8 % of Kokoro's generator natively.
#include <immintrin.h>

#include <cstdint>

namespace sotto::nn::cpu {

namespace {

__m256 sin8(__m256 x) {
  const __m256 shifter = _mm256_set1_ps(12582912.0f);
  const __m256 n =
      _mm256_sub_ps(_mm256_add_ps(_mm256_mul_ps(x, _mm256_set1_ps(0.636619772367581343f)), shifter), shifter);
  const __m256 r = _mm256_sub_ps(_mm256_sub_ps(_mm256_sub_ps(x, _mm256_mul_ps(n, _mm256_set1_ps(1.5703125f))),
                                               _mm256_mul_ps(n, _mm256_set1_ps(4.837512969970703125e-4f))),
                                 _mm256_mul_ps(n, _mm256_set1_ps(7.54978995489188216e-8f)));
  const __m256 z = _mm256_mul_ps(r, r);
  // s = r + r z ((p0 z + p1) z + p2)
  const __m256 ps =
      _mm256_add_ps(_mm256_mul_ps(_mm256_add_ps(_mm256_mul_ps(_mm256_set1_ps(-1.9515295891e-4f), z),
                                                _mm256_set1_ps(8.3321608736e-3f)),
                                  z),
                    _mm256_set1_ps(-1.6666654611e-1f));
  const __m256 s = _mm256_add_ps(r, _mm256_mul_ps(_mm256_mul_ps(r, z), ps));
  // c = (1 - 0.5 z) + z z ((q0 z + q1) z + q2)
  const __m256 pc =
      _mm256_add_ps(_mm256_mul_ps(_mm256_add_ps(_mm256_mul_ps(_mm256_set1_ps(2.443315711809948e-5f), z),
                                                _mm256_set1_ps(-1.388731625493765e-3f)),
                                  z),
                    _mm256_set1_ps(4.166664568298827e-2f));
  const __m256 c = _mm256_add_ps(_mm256_sub_ps(_mm256_set1_ps(1.0f), _mm256_mul_ps(_mm256_set1_ps(0.5f), z)),
                                 _mm256_mul_ps(_mm256_mul_ps(z, z), pc));
  const __m256i q = _mm256_cvttps_epi32(n);
  const __m256 odd = _mm256_castsi256_ps(
      _mm256_cmpeq_epi32(_mm256_and_si256(q, _mm256_set1_epi32(1)), _mm256_set1_epi32(1)));
  const __m256 v = _mm256_blendv_ps(s, c, odd);
  const __m256 negate = _mm256_castsi256_ps(
      _mm256_cmpeq_epi32(_mm256_and_si256(q, _mm256_set1_epi32(2)), _mm256_set1_epi32(2)));
  return _mm256_blendv_ps(v, _mm256_sub_ps(_mm256_setzero_ps(), v), negate);
}

}  // namespace

// o[t] = in[t] + sin(a in[t])^2 inv for t in [0, k), 8 at a time; returns k, stopping at the first group of 8
// with |a x| >= 8192 (past sin4's range: the caller's loops take over from there).
int64_t snake_row_avx2(const float* in, float* o, int64_t length, float a, float inv) {
  const __m256 va = _mm256_set1_ps(a), vinv = _mm256_set1_ps(inv), limit = _mm256_set1_ps(8192.0f);
  const __m256 abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
  int64_t t = 0;
  for (; t + 8 <= length; t += 8) {
    const __m256 v = _mm256_loadu_ps(in + t), ax = _mm256_mul_ps(v, va);
    if (_mm256_movemask_ps(_mm256_cmp_ps(_mm256_and_ps(ax, abs_mask), limit, _CMP_GE_OQ)) != 0) break;
    const __m256 s = sin8(ax);
    _mm256_storeu_ps(o + t, _mm256_add_ps(v, _mm256_mul_ps(_mm256_mul_ps(s, s), vinv)));
  }
  return t;
}

}  // namespace sotto::nn::cpu
