// SIMD128 kernel of linear_int8_affine (linear_int8.cpp; the loop in linear_int8_kernel.h) for the wasm builds:
// 8 weights a step, i16x8.load8x8 widens them to int16, i32x4.dot_i16x8_s multiplies them by 8 of x and adds
// pairs into 4 int32 lanes, one add accumulates: 3 instructions per 8 weights (converting the weights to float
// and multiply-adding took 7). Plain SIMD128, so the SIMD128 and relaxed builds run the same code.
#include <wasm_simd128.h>

#include <algorithm>

#include "nn/linear_int8_kernel.h"

namespace sotto::nn::cpu {

namespace {

struct Simd128 {
  using Vec = v128_t;
  static constexpr int64_t kStep = 8;
  static Vec zero() { return wasm_i32x4_splat(0); }
  static Vec load(const int16_t* x) { return wasm_v128_load(x); }
  static Vec step(Vec acc, Vec x, const int8_t* q) {
    return wasm_i32x4_add(acc, wasm_i32x4_dot_i16x8(wasm_i16x8_load8x8(q), x));
  }
  static int64_t lanes_sum(Vec v) {
    return int64_t{wasm_i32x4_extract_lane(v, 0)} + wasm_i32x4_extract_lane(v, 1) +
           wasm_i32x4_extract_lane(v, 2) + wasm_i32x4_extract_lane(v, 3);
  }
};

}  // namespace

// linear_int8_affine_prepacked's 5 x 8 tile: per pair of k, the panel's 8 columns in two vectors of int16
// pairs, each row's pair of x splatted, i32x4.dot_i16x8_s and an add into 10 int32 accumulators; every 256
// pairs (the int32 bound, linear_int8.cpp) those are widened into int64 totals (spilled: once a block).
void linear_int8_tile_wasm(int64_t pairs, const int32_t* a, const int16_t* b, int64_t* c) {
  constexpr int kRows = 5;
  constexpr int64_t kBlock = 256;
  v128_t total[kRows][4];
  for (auto& r : total) r[0] = r[1] = r[2] = r[3] = wasm_i64x2_splat(0);
  for (int64_t p0 = 0; p0 < pairs; p0 += kBlock) {
    v128_t acc[kRows][2];
    for (auto& r : acc) r[0] = r[1] = wasm_i32x4_splat(0);
    for (int64_t p = p0; p < std::min(pairs, p0 + kBlock); ++p, a += kRows, b += 16) {
      const v128_t b0 = wasm_v128_load(b), b1 = wasm_v128_load(b + 8);
      for (int i = 0; i < kRows; ++i) {
        const v128_t x = wasm_v128_load32_splat(a + i);
        acc[i][0] = wasm_i32x4_add(acc[i][0], wasm_i32x4_dot_i16x8(x, b0));
        acc[i][1] = wasm_i32x4_add(acc[i][1], wasm_i32x4_dot_i16x8(x, b1));
      }
    }
    for (int i = 0; i < kRows; ++i)
      for (int h = 0; h < 2; ++h) {
        total[i][2 * h] = wasm_i64x2_add(total[i][2 * h], wasm_i64x2_extend_low_i32x4(acc[i][h]));
        total[i][2 * h + 1] = wasm_i64x2_add(total[i][2 * h + 1], wasm_i64x2_extend_high_i32x4(acc[i][h]));
      }
  }
  for (int i = 0; i < kRows; ++i)
    for (int q = 0; q < 4; ++q) wasm_v128_store(c + i * 8 + 2 * q, total[i][q]);
}

void linear_int8_rows_wasm(const int16_t* xq, int64_t m, int64_t k, const int8_t* q, int64_t n_begin,
                           int64_t n_end, float* y, int64_t n) {
  linear_int8_rows<Simd128>(xq, m, k, q, n_begin, n_end, y, n);
}

}  // namespace sotto::nn::cpu
