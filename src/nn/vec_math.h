// Four-lane float math through clang's vector extension (SSE natively, SIMD128 in wasm) for the activations
// and the LSTM cell: the same arithmetic on every build, and no calls into sotto's wasm libc, whose exp /
// tanh run in double precision (a fifth of Silero's time there when they were used per element).
#pragma once

#include <cstdint>
#include <cstring>

namespace sotto::nn::vec {

typedef float F4 __attribute__((vector_size(16)));
typedef int32_t I4 __attribute__((vector_size(16)));

inline F4 splat(float x) {
  return F4{x, x, x, x};
}

inline F4 load(const float* p) {
  F4 v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

inline void store(float* p, F4 v) {
  std::memcpy(p, &v, sizeof v);
}

// e^x: x clamped to [-87, 88] (so 2^n stays a normal float), n = round(x / ln 2) by the 1.5 * 2^23 trick, r =
// x - n ln 2 (|r| <= 0.35, ln 2 split in two for exactness), e^r by its Taylor series to r^7 (truncation error
// < 6e-9 relative), times 2^n built in the exponent bits. ~1 ulp. Written over any float vector V (4 lanes
// here; 8 in the AVX2 files, nn/*_avx2.cpp), the same operations in the same order on each.
template <class V>
V fill(float x) {
  return V{} + x;
}

// a * b + c: one FMA where the build has it (AVX2 files contract the expression; the relaxed wasm build asks
// for f32x4.relaxed_madd, fused where the CPU has FMA), else a multiply and an add. The polynomials below
// are chains of these.
template <class V>
V mul_add(V a, V b, V c) {
#if defined(__wasm_relaxed_simd__)
  if constexpr (sizeof(V) == 16) return __builtin_wasm_relaxed_madd_f32x4(a, b, c);
#endif
  return a * b + c;
}

template <class V>
V exp_v(V x) {
  typedef int32_t IV __attribute__((vector_size(sizeof(V))));
  // Clamped by compare and select: __builtin_elementwise_min/max lower to scalar fminf/fmaxf calls in wasm.
  x = x < fill<V>(-87.0f) ? fill<V>(-87.0f) : x;
  x = x > fill<V>(88.0f) ? fill<V>(88.0f) : x;
  const V shifter = fill<V>(12582912.0f);  // 1.5 * 2^23: adding it rounds to an integer
  const V n = (x * fill<V>(1.44269504088896341f) + shifter) - shifter;
  const V r = (x - n * fill<V>(0.693359375f)) - n * fill<V>(-2.12194440e-4f);
  V p = fill<V>(1.0f / 5040);
  p = mul_add(p, r, fill<V>(1.0f / 720));
  p = mul_add(p, r, fill<V>(1.0f / 120));
  p = mul_add(p, r, fill<V>(1.0f / 24));
  p = mul_add(p, r, fill<V>(1.0f / 6));
  p = mul_add(p, r, fill<V>(0.5f));
  p = mul_add(p, r, fill<V>(1.0f));
  p = mul_add(p, r, fill<V>(1.0f));
  const IV bits = (__builtin_convertvector(n, IV) + 127) << 23;
  V scale;
  std::memcpy(&scale, &bits, sizeof scale);
  return p * scale;
}

inline F4 exp4(F4 x) {
  return exp_v(x);
}

inline F4 sigmoid4(F4 x) {
  return splat(1.0f) / (splat(1.0f) + exp4(-x));
}

// tanh x = sign(x) (1 - 2 / (e^{2|x|} + 1)): absolute error ~1e-7 near 0, where the relative error grows.
inline F4 tanh4(F4 x) {
  const F4 magnitude = __builtin_elementwise_abs(x);
  const F4 t = splat(1.0f) - splat(2.0f) / (exp4(magnitude + magnitude) + splat(1.0f));
  return __builtin_elementwise_copysign(t, x);
}

// sin x for |x| < 8192 (callers check): n = round(x * 2 / pi) by the 1.5 * 2^23 trick, r = x - n pi / 2 in
// three parts (Cody-Waite: n * 1.5703125 is exact for |n| < 2^15), |r| <= pi / 4, then Cephes' sinf / cosf
// polynomials on r and the quadrant n mod 4 picks sin r, cos r, -sin r or -cos r. ~1 ulp.
inline F4 sin4(F4 x) {
  const F4 shifter = splat(12582912.0f);
  const F4 n = (x * splat(0.636619772367581343f) + shifter) - shifter;
  const F4 r = ((x - n * splat(1.5703125f)) - n * splat(4.837512969970703125e-4f)) -
               n * splat(7.54978995489188216e-8f);
  const F4 z = r * r;
  const F4 s =
      r + r * z * ((splat(-1.9515295891e-4f) * z + splat(8.3321608736e-3f)) * z + splat(-1.6666654611e-1f));
  const F4 c = splat(1.0f) - splat(0.5f) * z +
               z * z *
                   ((splat(2.443315711809948e-5f) * z + splat(-1.388731625493765e-3f)) * z +
                    splat(4.166664568298827e-2f));
  const I4 q = __builtin_convertvector(n, I4);
  const F4 v = (q & 1) != 0 ? c : s;
  return (q & 2) != 0 ? -v : v;
}

// erf by Abramowitz & Stegun 7.1.26 (as the GPU backend's kernel): 1 - t (a1 + t (a2 + ...)) e^{-x^2} with
// t = 1 / (1 + p |x|), sign restored; absolute error <= 1.5e-7. GELU's erf runs on every element of a
// transformer's MLP: libm's scalar erff was a fifth of Moonshine's encoder.
template <class V>
V erf_v(V x) {
  const V a = __builtin_elementwise_abs(x);
  const V t = fill<V>(1.0f) / (fill<V>(1.0f) + fill<V>(0.3275911f) * a);
  V p = fill<V>(1.061405429f);
  p = mul_add(p, t, fill<V>(-1.453152027f));
  p = mul_add(p, t, fill<V>(1.421413741f));
  p = mul_add(p, t, fill<V>(-0.284496736f));
  p = mul_add(p, t, fill<V>(0.254829592f));
  const V y = fill<V>(1.0f) - p * t * exp_v(-(a * a));
  return __builtin_elementwise_copysign(y, x);
}

inline F4 erf4(F4 x) {
  return erf_v(x);
}

// GELU (exact form): x / 2 (1 + erf(x / sqrt 2)).
template <class V>
V gelu_erf_v(V x) {
  return fill<V>(0.5f) * x * (fill<V>(1.0f) + erf_v(x * fill<V>(0.70710678118654752f)));
}

inline F4 gelu_erf4(F4 x) {
  return gelu_erf_v(x);
}

// f applied to n floats, four at a time; the tail goes through a zero-padded vector.
template <class F>
void map4(const float* in, float* out, int64_t n, F f) {
  int64_t i = 0;
  for (; i + 4 <= n; i += 4) store(out + i, f(load(in + i)));
  if (i < n) {
    float tail[4] = {};
    for (int64_t j = i; j < n; ++j) tail[j - i] = in[j];
    const F4 r = f(load(tail));
    for (int64_t j = i; j < n; ++j) out[j] = r[j - i];
  }
}

}  // namespace sotto::nn::vec
