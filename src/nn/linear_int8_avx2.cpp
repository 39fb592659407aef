// AVX2 kernel of linear_int8_affine (linear_int8.cpp): the exact integer product of x quantized to int16 (one
// row) with four rows of int8 weights at a time, 16 weights a step (vpmovsxbw widens them to int16, vpmaddwd
// multiplies by 16 of x and adds pairs into 8 int32 lanes, vpaddd accumulates), so each x load serves four rows.
#include <immintrin.h>

#include <algorithm>
#include <cstdint>

namespace sotto::nn::cpu {

namespace {

// Columns summed in int32 lanes before they are moved into the int64 total: a lane takes 2 products a step of
// 16, each |q x xq| <= 128 x 32767 < 2^22, so 1024 columns (128 products) stay below 2^29.
constexpr int64_t kChunk = 1024;

inline int64_t lanes_sum(__m256i v) {
  alignas(32) int32_t l[8];
  _mm256_store_si256(reinterpret_cast<__m256i*>(l), v);
  int64_t s = 0;
  for (int32_t x : l) s += x;
  return s;
}

inline __m256i step16(__m256i acc, __m256i x, const int8_t* q) {
  const __m256i w = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(q)));
  return _mm256_add_epi32(acc, _mm256_madd_epi16(w, x));
}

}  // namespace

void linear_int8_rows_avx2(const int16_t* xq, int64_t m, int64_t k, const int8_t* q, int64_t n_begin,
                           int64_t n_end, float* y, int64_t n) {
  const int64_t k16 = k & ~int64_t{15};
  for (int64_t i = 0; i < m; ++i) {
    const int16_t* xi = xq + i * k;
    int64_t j = n_begin;
    for (; j + 4 <= n_end; j += 4) {
      const int8_t* q0 = q + j * k;
      const int8_t* q1 = q0 + k;
      const int8_t* q2 = q1 + k;
      const int8_t* q3 = q2 + k;
      int64_t s0 = 0, s1 = 0, s2 = 0, s3 = 0;
      for (int64_t c = 0; c < k16; c += kChunk) {
        const int64_t c_end = std::min(k16, c + kChunk);
        __m256i a0 = _mm256_setzero_si256(), a1 = a0, a2 = a0, a3 = a0;
        for (int64_t t = c; t < c_end; t += 16) {
          const __m256i x = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xi + t));
          a0 = step16(a0, x, q0 + t);
          a1 = step16(a1, x, q1 + t);
          a2 = step16(a2, x, q2 + t);
          a3 = step16(a3, x, q3 + t);
        }
        s0 += lanes_sum(a0);
        s1 += lanes_sum(a1);
        s2 += lanes_sum(a2);
        s3 += lanes_sum(a3);
      }
      for (int64_t t = k16; t < k; ++t) {
        s0 += int32_t{xi[t]} * q0[t];
        s1 += int32_t{xi[t]} * q1[t];
        s2 += int32_t{xi[t]} * q2[t];
        s3 += int32_t{xi[t]} * q3[t];
      }
      y[i * n + j] = static_cast<float>(s0);
      y[i * n + j + 1] = static_cast<float>(s1);
      y[i * n + j + 2] = static_cast<float>(s2);
      y[i * n + j + 3] = static_cast<float>(s3);
    }
    for (; j < n_end; ++j) {
      const int8_t* qj = q + j * k;
      int64_t s = 0;
      for (int64_t c = 0; c < k16; c += kChunk) {
        const int64_t c_end = std::min(k16, c + kChunk);
        __m256i a = _mm256_setzero_si256();
        for (int64_t t = c; t < c_end; t += 16)
          a = step16(a, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xi + t)), qj + t);
        s += lanes_sum(a);
      }
      for (int64_t t = k16; t < k; ++t) s += int32_t{xi[t]} * qj[t];
      y[i * n + j] = static_cast<float>(s);
    }
  }
}

}  // namespace sotto::nn::cpu
