// SIMD128 loops of the int8 conv's input side (conv_integer_bias.cpp) for the wasm builds, as
// conv_integer_avx2.cpp has them natively: the range, the uint8 values (minus the zero point, as int16) and the
// int16 rows of time (an 8 x 8 transpose in registers). Bitwise the same as the scalar loops: f32x4.div is the
// IEEE divide, f32x4.nearest rounds half to even as __builtin_roundevenf does, and pmin / pmax are defined as
// std::min / std::max are (b < a ? b : a), so a zero of either sign or the clamp's bounds land the same way.
// The product itself is the int16 pairwise multiply-add kernel (gemm.cpp, i32x4.dot_i16x8_s): SIMD128 has no
// exact 8-bit dot product, and one widened from uint8 / int8 loads measured no faster there (more widening
// instructions for half the loaded bytes).
#include <wasm_simd128.h>

#include <algorithm>
#include <cmath>
#include <cstdint>

namespace sotto::nn::cpu {

void min_max_wasm(const float* x, int64_t n, float& lo, float& hi) {
  v128_t vlo = wasm_f32x4_splat(0.0f), vhi = vlo;
  int64_t i = 0;
  for (; i + 4 <= n; i += 4) {
    const v128_t v = wasm_v128_load(x + i);
    vlo = wasm_f32x4_pmin(vlo, v);
    vhi = wasm_f32x4_pmax(vhi, v);
  }
  lo = 0.0f, hi = 0.0f;
  float l[4], h[4];
  wasm_v128_store(l, vlo);
  wasm_v128_store(h, vhi);
  for (int j = 0; j < 4; ++j) lo = std::min(lo, l[j]), hi = std::max(hi, h[j]);
  for (; i < n; ++i) lo = std::min(lo, x[i]), hi = std::max(hi, x[i]);
}

void quantize_i16_wasm(const float* x, int64_t n, float scale, int32_t zero_point, int16_t* out) {
  const v128_t vs = wasm_f32x4_splat(scale), vzp = wasm_f32x4_splat(static_cast<float>(zero_point));
  const v128_t v0 = wasm_f32x4_splat(0.0f), v255 = wasm_f32x4_splat(255.0f);
  const v128_t izp = wasm_i32x4_splat(zero_point);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    v128_t q[2];
    for (int h = 0; h < 2; ++h) {
      const v128_t r = wasm_f32x4_nearest(wasm_f32x4_div(wasm_v128_load(x + i + 4 * h), vs));
      const v128_t v = wasm_f32x4_pmin(wasm_f32x4_pmax(wasm_f32x4_add(r, vzp), v0), v255);
      q[h] = wasm_i32x4_sub(wasm_i32x4_trunc_sat_f32x4(v), izp);
    }
    wasm_v128_store(out + i, wasm_i16x8_narrow_i32x4(q[0], q[1]));
  }
  const float zp = static_cast<float>(zero_point);
  for (; i < n; ++i) {
    const float v = std::clamp(__builtin_roundevenf(x[i] / scale) + zp, 0.0f, 255.0f);
    out[i] = static_cast<int16_t>(static_cast<int32_t>(v) - zero_point);
  }
}

// xq [Cin, T] int16 -> xt row (padding + t) = xq[:, t] as int16, by 8 x 8 tiles transposed in registers
// (interleave 16 -> 32 -> 64 bit), edges scalar. The caller has zeroed the padding rows.
void time_rows_i16_wasm(const int16_t* xq, int64_t cin, int64_t length, int64_t padding, int16_t* xt) {
  const int64_t c8 = cin & ~int64_t{7}, t8 = length & ~int64_t{7};
  for (int64_t i0 = 0; i0 < c8; i0 += 8) {
    for (int64_t t0 = 0; t0 < t8; t0 += 8) {
      v128_t r[8];
      for (int j = 0; j < 8; ++j) r[j] = wasm_v128_load(xq + (i0 + j) * length + t0);
      v128_t a[8], b[8];
      for (int j = 0; j < 4; ++j) {
        a[2 * j] = wasm_i16x8_shuffle(r[2 * j], r[2 * j + 1], 0, 8, 1, 9, 2, 10, 3, 11);
        a[2 * j + 1] = wasm_i16x8_shuffle(r[2 * j], r[2 * j + 1], 4, 12, 5, 13, 6, 14, 7, 15);
      }
      // b[0..3]: rows 0-3 interleaved by 32 bits; b[4..7]: rows 4-7.
      for (int h = 0; h < 2; ++h) {
        const v128_t* p = a + 4 * h;
        b[4 * h + 0] = wasm_i32x4_shuffle(p[0], p[2], 0, 4, 1, 5);
        b[4 * h + 1] = wasm_i32x4_shuffle(p[0], p[2], 2, 6, 3, 7);
        b[4 * h + 2] = wasm_i32x4_shuffle(p[1], p[3], 0, 4, 1, 5);
        b[4 * h + 3] = wasm_i32x4_shuffle(p[1], p[3], 2, 6, 3, 7);
      }
      for (int u = 0; u < 4; ++u) {
        // Column t0 + 2u and t0 + 2u + 1 of the tile: 8 channels each.
        wasm_v128_store(xt + (padding + t0 + 2 * u) * cin + i0, wasm_i64x2_shuffle(b[u], b[4 + u], 0, 2));
        wasm_v128_store(xt + (padding + t0 + 2 * u + 1) * cin + i0, wasm_i64x2_shuffle(b[u], b[4 + u], 1, 3));
      }
    }
    for (int64_t t = t8; t < length; ++t)
      for (int64_t i = i0; i < i0 + 8; ++i) xt[(padding + t) * cin + i] = xq[i * length + t];
  }
  for (int64_t i = c8; i < cin; ++i)
    for (int64_t t = 0; t < length; ++t) xt[(padding + t) * cin + i] = xq[i * length + t];
}

}  // namespace sotto::nn::cpu
