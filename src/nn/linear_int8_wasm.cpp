// SIMD128 kernel of linear_int8_affine (linear_int8.cpp) for the wasm builds: the exact integer product of x
// quantized to int16 (one row) with four rows of int8 weights at a time, 8 weights a step: i16x8.load8x8 widens
// 8 weights to int16, i32x4.dot_i16x8_s multiplies them by 8 of x and adds pairs into 4 int32 lanes, one add
// accumulates: 3 instructions per 8 weights (converting the weights to float and multiply-adding took 7), and
// each x load serves four rows. Plain SIMD128, so the SIMD128 and relaxed builds run the same code.
#include <wasm_simd128.h>

#include <algorithm>
#include <cstdint>

namespace sotto::nn::cpu {

namespace {

// Columns summed in int32 lanes before they are moved into the int64 total: a lane takes 2 products a step of
// 8, each |q x xq| <= 128 x 32767 < 2^22, so 1024 columns (256 products) stay below 2^30.
constexpr int64_t kChunk = 1024;

inline int64_t lanes_sum(v128_t v) {
  return int64_t{wasm_i32x4_extract_lane(v, 0)} + wasm_i32x4_extract_lane(v, 1) +
         wasm_i32x4_extract_lane(v, 2) + wasm_i32x4_extract_lane(v, 3);
}

inline v128_t step8(v128_t acc, v128_t x, const int8_t* q) {
  return wasm_i32x4_add(acc, wasm_i32x4_dot_i16x8(wasm_i16x8_load8x8(q), x));
}

}  // namespace

void linear_int8_rows_wasm(const int16_t* xq, int64_t m, int64_t k, const int8_t* q, int64_t n_begin,
                           int64_t n_end, float* y, int64_t n) {
  const int64_t k8 = k & ~int64_t{7};
  for (int64_t i = 0; i < m; ++i) {
    const int16_t* xi = xq + i * k;
    int64_t j = n_begin;
    for (; j + 4 <= n_end; j += 4) {
      const int8_t* q0 = q + j * k;
      const int8_t* q1 = q0 + k;
      const int8_t* q2 = q1 + k;
      const int8_t* q3 = q2 + k;
      int64_t s0 = 0, s1 = 0, s2 = 0, s3 = 0;
      for (int64_t c = 0; c < k8; c += kChunk) {
        const int64_t c_end = std::min(k8, c + kChunk);
        v128_t a0 = wasm_i32x4_splat(0), a1 = a0, a2 = a0, a3 = a0;
        for (int64_t t = c; t < c_end; t += 8) {
          const v128_t x = wasm_v128_load(xi + t);
          a0 = step8(a0, x, q0 + t);
          a1 = step8(a1, x, q1 + t);
          a2 = step8(a2, x, q2 + t);
          a3 = step8(a3, x, q3 + t);
        }
        s0 += lanes_sum(a0);
        s1 += lanes_sum(a1);
        s2 += lanes_sum(a2);
        s3 += lanes_sum(a3);
      }
      for (int64_t t = k8; t < k; ++t) {
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
      for (int64_t c = 0; c < k8; c += kChunk) {
        const int64_t c_end = std::min(k8, c + kChunk);
        v128_t a = wasm_i32x4_splat(0);
        for (int64_t t = c; t < c_end; t += 8) a = step8(a, wasm_v128_load(xi + t), qj + t);
        s += lanes_sum(a);
      }
      for (int64_t t = k8; t < k; ++t) s += int32_t{xi[t]} * qj[t];
      y[i * n + j] = static_cast<float>(s);
    }
  }
}

}  // namespace sotto::nn::cpu
