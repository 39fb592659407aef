// Matrix x vector kernels: scalar references, the portable versions, the thread split and the dispatch table.
//
// Layout of src/cpu (the pattern every CPU kernel family follows):
//   - one file per kernel family per backend: matvec.cpp (references + portable code, which becomes
//     SIMD128 / relaxed SIMD in the wasm builds), matvec_avx2.cpp (x86 AVX2+FMA, native only);
//   - each kernel's scalar *_ref() sits here, beside its fast versions, and the tests compare every variant
//     with it on random shapes;
//   - a MatvecKernels table per instruction set; matvec_kernels() picks one at run time (cpu_features.h), so
//     one native binary runs anywhere and SOTTO_CPU=portable exercises the portable path on an AVX2 machine.
//
// q8_0 dot products, per instruction set (q values are in [-127, 127], see matvec.h):
//   scalar      int32 sum of int8 x int8 products, then one float multiply by d_a * d_b per block.
//   SIMD128     widen both to i16 and use i32x4.dot_i16x8_s: exact for any int8 values.
//   relaxed     i32x4.relaxed_dot_i8x16_i7x16_add_s is only deterministic when its second operand is in
//               [0, 127]. Signed x signed goes through the sign trick: w * x = (w * sign(x)) * |x|, with |x|
//               in [0, 127] as the i7 operand and w * sign(x) (|w| <= 127, so no -128 overflow) as the i8
//               one.
//   AVX2        the same sign trick for maddubs (unsigned x signed bytes -> i16 pairs, which cannot saturate
//               since 2 * 127 * 128 < 32768), then madd with ones -> i32.
// The integer part is exact everywhere; only the order of the float accumulation of per-block terms differs.
#include "cpu/matvec.h"

#include <algorithm>
#include <cstddef>

#include "core/half.h"
#include "cpu/cpu_features.h"

#if defined(__wasm_simd128__)
#include <wasm_simd128.h>
#endif

namespace sotto {

RowRange split_rows(int rows, int ith, int nth, int rows_per_pass) {
  const int64_t units = (static_cast<int64_t>(rows) + rows_per_pass - 1) / rows_per_pass;
  const int64_t u0 = units * ith / nth, u1 = units * (ith + 1) / nth;
  return {static_cast<int>(std::min<int64_t>(u0 * rows_per_pass, rows)),
          static_cast<int>(std::min<int64_t>(u1 * rows_per_pass, rows))};
}

// ============================================================================================ references

void matvec_f32_ref(const float* w, const float* x, float* y, int rows, int cols) {
  for (int r = 0; r < rows; ++r) {
    double sum = 0;  // double: the reference should carry (almost) no rounding error of its own
    for (int c = 0; c < cols; ++c) sum += static_cast<double>(w[static_cast<size_t>(r) * cols + c]) * x[c];
    y[r] = static_cast<float>(sum);
  }
}

namespace {
// Round half away from zero without libc's roundf (absent in the wasm build). Exact: for |v| < 2^23 the
// truncation and the fraction are exact, unlike the classic (int)(v + 0.5), which rounds 0.49999997 up.
int round_half_away(float v) {
  const int t = static_cast<int>(v);
  const float frac = v - static_cast<float>(t);
  if (frac >= 0.5f) return t + 1;
  if (frac <= -0.5f) return t - 1;
  return t;
}
}  // namespace

void quantize_row_q8_0(const float* x, BlockQ8_0* y, int n) {
  for (int b = 0; b < n / kQK8_0; ++b) {
    const float* xb = x + b * kQK8_0;
    float amax = 0;
    for (int i = 0; i < kQK8_0; ++i) amax = std::max(amax, xb[i] < 0 ? -xb[i] : xb[i]);
    const float d = amax / 127.0f;
    const float inv_d = d != 0 ? 1.0f / d : 0.0f;  // as ggml: multiply by 1/d computed from the unrounded d
    y[b].d = f32_to_f16(d);
    for (int i = 0; i < kQK8_0; ++i) y[b].qs[i] = static_cast<int8_t>(round_half_away(xb[i] * inv_d));
  }
}

float dot_q8_0_q8_0_ref(int n, const BlockQ8_0* a, const BlockQ8_0* b) {
  float sum = 0;
  for (int blk = 0; blk < n / kQK8_0; ++blk) {
    int32_t isum = 0;
    for (int i = 0; i < kQK8_0; ++i) isum += a[blk].qs[i] * b[blk].qs[i];
    sum += (f16_to_f32(a[blk].d) * f16_to_f32(b[blk].d)) * static_cast<float>(isum);
  }
  return sum;
}

void matvec_q8_0_ref(const BlockQ8_0* w, const BlockQ8_0* x, float* y, int rows, int cols) {
  const size_t blocks_per_row = static_cast<size_t>(cols / kQK8_0);
  for (int r = 0; r < rows; ++r) y[r] = dot_q8_0_q8_0_ref(cols, w + r * blocks_per_row, x);
}

// ============================================================================================ portable
// Written once over a few helpers that are SIMD128 / relaxed SIMD in wasm and scalar elsewhere.
namespace {

#if defined(__wasm_simd128__)

float hsum(v128_t v) {
  return wasm_f32x4_extract_lane(v, 0) + wasm_f32x4_extract_lane(v, 1) + wasm_f32x4_extract_lane(v, 2) +
         wasm_f32x4_extract_lane(v, 3);
}

v128_t madd(v128_t a, v128_t b, v128_t acc) {
#if defined(__wasm_relaxed_simd__)
  return wasm_f32x4_relaxed_madd(a, b, acc);  // fused where the CPU has FMA
#else
  return wasm_f32x4_add(wasm_f32x4_mul(a, b), acc);
#endif
}

float dot_f32(const float* w, const float* x, int n) {
  v128_t acc0 = wasm_f32x4_splat(0), acc1 = acc0, acc2 = acc0, acc3 = acc0;  // 4 chains hide add latency
  int i = 0;
  for (; i + 16 <= n; i += 16) {
    acc0 = madd(wasm_v128_load(w + i), wasm_v128_load(x + i), acc0);
    acc1 = madd(wasm_v128_load(w + i + 4), wasm_v128_load(x + i + 4), acc1);
    acc2 = madd(wasm_v128_load(w + i + 8), wasm_v128_load(x + i + 8), acc2);
    acc3 = madd(wasm_v128_load(w + i + 12), wasm_v128_load(x + i + 12), acc3);
  }
  float sum = hsum(wasm_f32x4_add(wasm_f32x4_add(acc0, acc1), wasm_f32x4_add(acc2, acc3)));
  for (; i < n; ++i) sum += w[i] * x[i];
  return sum;
}

// One activation block, prepared once and reused for the four weight rows of a pass.
struct XBlock {
#if defined(__wasm_relaxed_simd__)
  v128_t abs_lo, abs_hi;    // |x|: the i7 operand
  v128_t sign_lo, sign_hi;  // 0 or -1 per byte, to move x's sign onto w
#else
  v128_t lo0, hi0, lo1, hi1;  // x widened to i16
#endif
};

XBlock prepare_x(const int8_t* qs) {
  const v128_t x0 = wasm_v128_load(qs), x1 = wasm_v128_load(qs + 16);
#if defined(__wasm_relaxed_simd__)
  return {wasm_i8x16_abs(x0), wasm_i8x16_abs(x1), wasm_i8x16_shr(x0, 7), wasm_i8x16_shr(x1, 7)};
#else
  return {wasm_i16x8_extend_low_i8x16(x0), wasm_i16x8_extend_high_i8x16(x0), wasm_i16x8_extend_low_i8x16(x1),
          wasm_i16x8_extend_high_i8x16(x1)};
#endif
}

// i32x4 whose lanes add up to the integer dot product of the block's 32 weights with x.
v128_t block_dot(const XBlock& xb, const int8_t* w_qs) {
  const v128_t w0 = wasm_v128_load(w_qs), w1 = wasm_v128_load(w_qs + 16);
#if defined(__wasm_relaxed_simd__)
  // (w ^ s) - s negates w where x < 0 (s = -1), leaves it where s = 0.
  const v128_t ws0 = wasm_i8x16_sub(wasm_v128_xor(w0, xb.sign_lo), xb.sign_lo);
  const v128_t ws1 = wasm_i8x16_sub(wasm_v128_xor(w1, xb.sign_hi), xb.sign_hi);
  const v128_t acc = wasm_i32x4_relaxed_dot_i8x16_i7x16_add(ws0, xb.abs_lo, wasm_i32x4_splat(0));
  return wasm_i32x4_relaxed_dot_i8x16_i7x16_add(ws1, xb.abs_hi, acc);
#else
  const v128_t d0 = wasm_i32x4_dot_i16x8(wasm_i16x8_extend_low_i8x16(w0), xb.lo0);
  const v128_t d1 = wasm_i32x4_dot_i16x8(wasm_i16x8_extend_high_i8x16(w0), xb.hi0);
  const v128_t d2 = wasm_i32x4_dot_i16x8(wasm_i16x8_extend_low_i8x16(w1), xb.lo1);
  const v128_t d3 = wasm_i32x4_dot_i16x8(wasm_i16x8_extend_high_i8x16(w1), xb.hi1);
  return wasm_i32x4_add(wasm_i32x4_add(d0, d1), wasm_i32x4_add(d2, d3));
#endif
}

// Per-row float accumulator: four lanes, summed once at the end of the row.
struct RowSum {
  v128_t acc = wasm_f32x4_splat(0);
  void add(v128_t idot, float scale) {
    acc = madd(wasm_f32x4_convert_i32x4(idot), wasm_f32x4_splat(scale), acc);
  }
  float total() const { return hsum(acc); }
};

#else  // scalar (native portable path)

float dot_f32(const float* w, const float* x, int n) {
  float acc[8] = {};  // independent chains: the compiler keeps them in registers and can vectorize
  int i = 0;
  for (; i + 8 <= n; i += 8)
    for (int k = 0; k < 8; ++k) acc[k] += w[i + k] * x[i + k];
  float sum = ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
  for (; i < n; ++i) sum += w[i] * x[i];
  return sum;
}

struct XBlock {
  const int8_t* qs;
};
XBlock prepare_x(const int8_t* qs) {
  return {qs};
}

int32_t block_dot(const XBlock& xb, const int8_t* w_qs) {
  int32_t isum = 0;
  for (int i = 0; i < kQK8_0; ++i) isum += w_qs[i] * xb.qs[i];
  return isum;
}

struct RowSum {
  float acc = 0;
  void add(int32_t idot, float scale) { acc += scale * static_cast<float>(idot); }
  float total() const { return acc; }
};

#endif

void matvec_f32_rows_portable(const float* w, const float* x, float* y, int row_begin, int row_end,
                              int cols) {
  for (int r = row_begin; r < row_end; ++r) y[r] = dot_f32(w + static_cast<size_t>(r) * cols, x, cols);
}

float dot_q8_0_q8_0_portable(int n, const BlockQ8_0* a, const BlockQ8_0* b) {
  RowSum sum;
  for (int blk = 0; blk < n / kQK8_0; ++blk) {
    sum.add(block_dot(prepare_x(b[blk].qs), a[blk].qs), f16_to_f32(a[blk].d) * f16_to_f32(b[blk].d));
  }
  return sum.total();
}

void matvec_q8_0_rows_portable(const BlockQ8_0* w, const BlockQ8_0* x, float* y, int row_begin, int row_end,
                               int cols) {
  const int n_blocks = cols / kQK8_0;
  int r = row_begin;
  // Four rows per pass: each x block is prepared once for four weight rows (the seed's 4-rows lesson).
  for (; r + 4 <= row_end; r += 4) {
    const BlockQ8_0* w0 = w + static_cast<size_t>(r) * n_blocks;
    const BlockQ8_0* rows[4] = {w0, w0 + n_blocks, w0 + 2 * n_blocks, w0 + 3 * n_blocks};
    RowSum sums[4];
    for (int blk = 0; blk < n_blocks; ++blk) {
      const XBlock xb = prepare_x(x[blk].qs);
      const float dx = f16_to_f32(x[blk].d);
      for (int k = 0; k < 4; ++k)
        sums[k].add(block_dot(xb, rows[k][blk].qs), f16_to_f32(rows[k][blk].d) * dx);
    }
    for (int k = 0; k < 4; ++k) y[r + k] = sums[k].total();
  }
  for (; r < row_end; ++r) y[r] = dot_q8_0_q8_0_portable(cols, w + static_cast<size_t>(r) * n_blocks, x);
}

}  // namespace

const MatvecKernels kMatvecPortable = {"portable", matvec_f32_rows_portable, dot_q8_0_q8_0_portable,
                                       matvec_q8_0_rows_portable};

// ============================================================================================ dispatch

const MatvecKernels& matvec_kernels() {
#if defined(SOTTO_HAVE_AVX2_KERNELS)
  if (cpu_use_avx2()) return kMatvecAvx2;
#endif
  return kMatvecPortable;
}

void matvec_f32_rows(const float* w, const float* x, float* y, int row_begin, int row_end, int cols) {
  matvec_kernels().matvec_f32_rows(w, x, y, row_begin, row_end, cols);
}

float dot_q8_0_q8_0(int n, const BlockQ8_0* a, const BlockQ8_0* b) {
  return matvec_kernels().dot_q8_0_q8_0(n, a, b);
}

void matvec_q8_0_rows(const BlockQ8_0* w, const BlockQ8_0* x, float* y, int row_begin, int row_end,
                      int cols) {
  matvec_kernels().matvec_q8_0_rows(w, x, y, row_begin, row_end, cols);
}

// Rows are split in units of 16 (f32) or 4 (q8_0: whole passes); 16 f32 outputs are one cache line of y, so
// threads never write the same line.
void matvec_f32(ThreadPool& pool, const float* w, const float* x, float* y, int rows, int cols) {
  const MatvecKernels& k = matvec_kernels();  // chosen once, so all threads run the same variant
  pool.run([&](int ith, int nth) {
    const RowRange range = split_rows(rows, ith, nth, 16);
    k.matvec_f32_rows(w, x, y, range.begin, range.end, cols);
  });
}

void matvec_q8_0(ThreadPool& pool, const BlockQ8_0* w, const BlockQ8_0* x, float* y, int rows, int cols) {
  const MatvecKernels& k = matvec_kernels();
  pool.run([&](int ith, int nth) {
    const RowRange range = split_rows(rows, ith, nth, 4);
    k.matvec_q8_0_rows(w, x, y, range.begin, range.end, cols);
  });
}

}  // namespace sotto
