// SIMD128 kernel of linear_int8_affine (linear_int8.cpp) for the wasm builds: four rows of int8 weights at a
// time against one row of x, 8 weights a step (int8 -> int16 -> two int32x4 -> two f32x4, multiply-add into two
// accumulators per row), so each x load serves four rows; bound by reading the weights, as natively.
#include <wasm_simd128.h>

#include <cstdint>

namespace sotto::nn::cpu {

namespace {

inline float hsum(v128_t v) {
  return wasm_f32x4_extract_lane(v, 0) + wasm_f32x4_extract_lane(v, 1) + wasm_f32x4_extract_lane(v, 2) +
         wasm_f32x4_extract_lane(v, 3);
}

// acc += x[0..8) * float(q[0..8)), the 8 products in two f32x4 halves. The relaxed build multiplies and adds
// in f32x4.relaxed_madd (one vfmadd where the CPU has FMA): 7 instructions per 8 weights instead of 9.
inline v128_t step8(v128_t acc, v128_t x_lo, v128_t x_hi, const int8_t* q) {
  const v128_t w16 = wasm_i16x8_load8x8(q);
  const v128_t lo = wasm_f32x4_convert_i32x4(wasm_i32x4_extend_low_i16x8(w16));
  const v128_t hi = wasm_f32x4_convert_i32x4(wasm_i32x4_extend_high_i16x8(w16));
#if defined(__wasm_relaxed_simd__)
  return wasm_f32x4_relaxed_madd(x_hi, hi, wasm_f32x4_relaxed_madd(x_lo, lo, acc));
#else
  return wasm_f32x4_add(acc, wasm_f32x4_add(wasm_f32x4_mul(x_lo, lo), wasm_f32x4_mul(x_hi, hi)));
#endif
}

}  // namespace

void linear_int8_rows_wasm(const float* x, int64_t m, int64_t k, const int8_t* q, int64_t n_begin,
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
      v128_t a0 = wasm_f32x4_splat(0), a1 = a0, a2 = a0, a3 = a0;
      for (int64_t t = 0; t < k8; t += 8) {
        const v128_t x_lo = wasm_v128_load(xi + t), x_hi = wasm_v128_load(xi + t + 4);
        a0 = step8(a0, x_lo, x_hi, q0 + t);
        a1 = step8(a1, x_lo, x_hi, q1 + t);
        a2 = step8(a2, x_lo, x_hi, q2 + t);
        a3 = step8(a3, x_lo, x_hi, q3 + t);
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
      v128_t a = wasm_f32x4_splat(0);
      for (int64_t t = 0; t < k8; t += 8)
        a = step8(a, wasm_v128_load(xi + t), wasm_v128_load(xi + t + 4), qj + t);
      float s = hsum(a);
      for (int64_t t = k8; t < k; ++t) s += xi[t] * static_cast<float>(qj[t]);
      y[i * n + j] = s;
    }
  }
}

}  // namespace sotto::nn::cpu
