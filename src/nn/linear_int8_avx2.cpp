// AVX2 kernel of linear_int8_affine (linear_int8.cpp; the loop in linear_int8_kernel.h): 16 weights a step,
// vpmovsxbw widens them to int16, vpmaddwd multiplies by 16 of x and adds pairs into 8 int32 lanes, vpaddd
// accumulates.
#include <immintrin.h>

#include "nn/linear_int8_kernel.h"

namespace sotto::nn::cpu {

namespace {

struct Avx2 {
  using Vec = __m256i;
  static constexpr int64_t kStep = 16;
  static Vec zero() { return _mm256_setzero_si256(); }
  static Vec load(const int16_t* x) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x)); }
  static Vec step(Vec acc, Vec x, const int8_t* q) {
    const __m256i w = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(q)));
    return _mm256_add_epi32(acc, _mm256_madd_epi16(w, x));
  }
  static int64_t lanes_sum(Vec v) {
    alignas(32) int32_t l[8];
    _mm256_store_si256(reinterpret_cast<__m256i*>(l), v);
    int64_t s = 0;
    for (int32_t x : l) s += x;
    return s;
  }
};

}  // namespace

void linear_int8_rows_avx2(const int16_t* xq, int64_t m, int64_t k, const int8_t* q, int64_t n_begin,
                           int64_t n_end, float* y, int64_t n) {
  linear_int8_rows<Avx2>(xq, m, k, q, n_begin, n_end, y, n);
}

}  // namespace sotto::nn::cpu
