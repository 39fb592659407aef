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
