// The int8 conv's product timed alone (bench/kokoro_wasm_kernel.mjs): A [M, K] int16 weights times B rows of
// time [N, K] (row stride ldb: the conv's overlapping windows) into int32, `reps` times, on fixed pseudo-random
// values in the range the conv gives (|v| <= 255): variant 0 (gemm.cpp's int16 product, i32x4.dot_i16x8_s);
// 10 + v: iconv_pairs_variant(v) on the same rows laid out pair-major (time in the lanes; Cin = ldb even).
// Variants 99 and 98 time the multiply-add instruction alone (no loads, 12 independent chains: the machine's
// peak for it): i32x4.dot_i16x8_s + i32x4.add (8 multiply-adds), and in the relaxed build
// i32x4.relaxed_dot_i8x16_i7x16_add_s (16). Returns a checksum of C (of the chains for 99 / 98).
#include <cstdint>
#include <vector>

#include "nn/gemm.h"

#include <wasm_simd128.h>

__attribute__((export_name("sotto_nn_bench_igemm"))) uint32_t sotto_nn_bench_igemm(int32_t variant, int32_t M,
                                                                                   int32_t N, int32_t K,
                                                                                   int32_t ldb,
                                                                                   int32_t reps) {
  // Kept across calls (never freed: no static destructors in this wasm) so a timed call only computes.
  if (variant ==
      99) {  // the machine's i32x4.dot_i16x8_s + i32x4.add rate with no loads: 12 independent chains
    v128_t acc[12];
    for (int j = 0; j < 12; ++j) acc[j] = wasm_i32x4_splat(j + 1);
    const v128_t y = wasm_i16x8_splat(3);
    const int64_t iters = int64_t{M} * N * K / 96;  // 8 multiply-adds per dot, 12 dots per iteration
    for (int64_t r = 0; r < reps; ++r)
      for (int64_t i = 0; i < iters; ++i)
        for (int j = 0; j < 12; ++j) acc[j] = wasm_i32x4_add(wasm_i32x4_dot_i16x8(acc[j], y), acc[j]);
    uint32_t h = 0;
    for (int j = 0; j < 12; ++j) h += static_cast<uint32_t>(wasm_i32x4_extract_lane(acc[j], 0));
    return h;
  }
#if defined(__wasm_relaxed_simd__)
  if (variant == 98) {  // the same for relaxed SIMD's i8 x i7 dot with accumulate: 16 multiply-adds each
    v128_t acc[12];
    for (int j = 0; j < 12; ++j) acc[j] = wasm_i32x4_splat(j + 1);
    const v128_t y = wasm_i8x16_splat(3);
    const int64_t iters = int64_t{M} * N * K / 192;
    for (int64_t r = 0; r < reps; ++r)
      for (int64_t i = 0; i < iters; ++i)
        for (int j = 0; j < 12; ++j) acc[j] = wasm_i32x4_relaxed_dot_i8x16_i7x16_add(acc[j], y, acc[j]);
    uint32_t h = 0;
    for (int j = 0; j < 12; ++j) h += static_cast<uint32_t>(wasm_i32x4_extract_lane(acc[j], 0));
    return h;
  }
#endif
  static auto& a = *new std::vector<int16_t>;
  static auto& b = *new std::vector<int16_t>;
  static auto& c = *new std::vector<int32_t>;
  uint32_t s = 12345;
  auto fill = [&](std::vector<int16_t>& v, size_t n) {
    if (v.size() == n) return;
    v.resize(n);
    for (int16_t& x : v) {
      s ^= s << 13, s ^= s >> 17, s ^= s << 5;
      x = static_cast<int16_t>(static_cast<int32_t>(s % 511) - 255);
    }
  };
  fill(a, static_cast<size_t>(M) * K);
  fill(b, static_cast<size_t>(N - 1) * ldb + K);
  c.assign(static_cast<size_t>(M) * N, 0);
  if (variant >= 10) {  // the same product with time in the lanes: B's rows (ldb = Cin) pair-major
    static auto& g2 = *new std::vector<int16_t>;
    const int32_t taps = K / ldb, pairs = ldb / 2, rows = N + taps - 1;
    g2.resize(static_cast<size_t>(rows) * ldb);
    for (int32_t p = 0; p < pairs; ++p)
      for (int32_t r = 0; r < rows; ++r)
        for (int32_t h = 0; h < 2; ++h) g2[(p * rows + r) * 2 + h] = b[r * ldb + 2 * p + h];
    for (int r = 0; r < reps; ++r)
      sotto::nn::cpu::iconv_pairs_variant(variant - 10, M, N, taps, pairs, a.data(), K, g2.data(), rows,
                                          c.data(), N);
  } else {
    for (int r = 0; r < reps; ++r) sotto::nn::cpu::igemm_nt(M, N, K, a.data(), K, b.data(), ldb, c.data(), N);
  }
  uint32_t h = 2166136261u;
  for (int32_t v : c) h = (h ^ static_cast<uint32_t>(v)) * 16777619u;
  return h;
}
