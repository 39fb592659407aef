// An int16 packed product against the packed f32 one (gemm_prepacked_kernel.h, as sotto.wasm runs it) on
// Moonshine's encoder linears, for bench/wasm_kernels/gemm_i16.mjs (issue #28): y = scale * (x . q^T) with q
// int8 [N, K] (the file's weights) and x float [M, K], one thread.
//
// The int16 product: each row of x quantized to int16 (x ~ xs * xq, |xq| <= 32767, as nn::linear_int8_affine
// does), q widened to int16 and packed at load in panels of 8 columns, k-pair major (panel[(p * 8 + j) * 2 + h]
// = q[j][2p + h]); x packed per block in panels of MR rows of int32 pairs. Per k pair the micro-kernel loads
// 2 vectors of B, splats MR pairs of x (v128.load32_splat), and i32x4.dot_i16x8_s + i32x4.add give each of the
// MR x 8 outputs 2 multiply-adds: 8 multiply-adds per dot instruction against f32x4.relaxed_madd's 4, but an
// add beside each dot. Exact integer sums per k block of at most 512 (each lane sums <= 512 products of
// |xq| <= 32767 and |q| <= 128: < 2^31), converted to float per block and added in a fixed order.
// `peak_f32` / `peak_i16`: the instruction alone, 12 chains without loads (relaxed_madd; dot + add).
// Build (relaxed SIMD; no libc: a bump allocator serves the scratch):
//   clang++-19 --target=wasm32-wasi -msimd128 -mrelaxed-simd -O2 -std=c++20 -nostdlib -fno-exceptions \
//     -fno-rtti -isystem /usr/lib/llvm-19/include/wasm32-wasi/c++/v1 -isystem /usr/include/wasm32-wasi -Isrc \
//     -Wl,--no-entry -Wl,--export-dynamic -Wl,--allow-undefined -o /tmp/gemm_i16.wasm \
//     bench/wasm_kernels/gemm_i16.cpp
#include <stddef.h>
#include <stdint.h>
#include <wasm_simd128.h>

#include "nn/gemm_prepacked_kernel.h"

static unsigned char heap[96 << 20];
static size_t heap_used = 0;
static void* bump(size_t n) {
  void* p = heap + heap_used;
  heap_used += (n + 63) & ~size_t{63};
  return p;
}
void* operator new[](size_t n) {
  return bump(n);
}
void operator delete[](void*) noexcept {}
void operator delete[](void*, size_t) noexcept {}
extern "C" void* memcpy(void* d, const void* s, size_t n) {
  return __builtin_memmove(d, s, n);
}
extern "C" void* memmove(void* d, const void* s, size_t n) {
  auto* dd = static_cast<unsigned char*>(d);
  const auto* ss = static_cast<const unsigned char*>(s);
  if (dd < ss)
    for (size_t i = 0; i < n; ++i) dd[i] = ss[i];
  else
    for (size_t i = n; i-- > 0;) dd[i] = ss[i];
  return d;
}
extern "C" void* memset(void* d, int v, size_t n) {
  auto* dd = static_cast<unsigned char*>(d);
  for (size_t i = 0; i < n; ++i) dd[i] = static_cast<unsigned char>(v);
  return d;
}

typedef float F4 __attribute__((vector_size(16)));
using sotto::nn::cpu::Index;

namespace {

constexpr Index kNr = 8;
constexpr Index kMaxPairs = 256;  // k pairs per block (the overflow bound above)
constexpr Index kMc = 72;         // rows of x per block
constexpr Index kNc = 256;        // columns per block

// x [M, K] -> xq [M, 2 * KP] (zero padded), xs[M]; amax per row, then round half to even (f32x4.nearest).
void quantize_rows(const float* x, Index M, Index K, Index KP, int16_t* xq, float* xs) {
  for (Index i = 0; i < M; ++i) {
    const float* xi = x + i * K;
    int16_t* qi = xq + i * 2 * KP;
    v128_t m4 = wasm_f32x4_splat(0);
    Index t = 0;
    for (; t + 4 <= K; t += 4) m4 = wasm_f32x4_max(m4, wasm_f32x4_abs(wasm_v128_load(xi + t)));
    const F4 mf = reinterpret_cast<const F4&>(m4);
    float amax = 0;
    for (int l = 0; l < 4; ++l) amax = amax > mf[l] ? amax : mf[l];
    for (; t < K; ++t) amax = amax > __builtin_fabsf(xi[t]) ? amax : __builtin_fabsf(xi[t]);
    xs[i] = amax / 32767.0f;
    const float inv = amax > 0 ? 32767.0f / amax : 0.0f;
    const v128_t inv4 = wasm_f32x4_splat(inv);
    t = 0;
    for (; t + 8 <= K; t += 8) {
      const v128_t lo =
          wasm_i32x4_trunc_sat_f32x4(wasm_f32x4_nearest(wasm_f32x4_mul(wasm_v128_load(xi + t), inv4)));
      const v128_t hi =
          wasm_i32x4_trunc_sat_f32x4(wasm_f32x4_nearest(wasm_f32x4_mul(wasm_v128_load(xi + t + 4), inv4)));
      wasm_v128_store(qi + t, wasm_i16x8_narrow_i32x4(lo, hi));
    }
    for (; t < K; ++t) qi[t] = static_cast<int16_t>(__builtin_nearbyintf(xi[t] * inv));
    for (; t < 2 * KP; ++t) qi[t] = 0;
  }
}

// Rows [0, rows) x pairs [p0, p0 + pc) of X (int32 pairs, row stride ldx pairs) into panels of MR rows,
// pair-major (panel[p * MR + r]); a short last panel padded with zero rows.
template <Index MR>
void pack_pairs(const int32_t* X, Index ldx, Index rows, Index p0, Index pc, int32_t* out) {
  for (Index r0 = 0; r0 < rows; r0 += MR, out += MR * pc) {
    const Index r = rows - r0 < MR ? rows - r0 : MR;
    const int32_t* x = X + r0 * ldx + p0;
    for (Index p = 0; p < pc; ++p)
      for (Index i = 0; i < MR; ++i) out[p * MR + i] = i < r ? x[i * ldx + p] : 0;
  }
}

template <Index MR>
void micro_i16(Index pc, const int32_t* ap, const int16_t* bp, float* c, Index ldc, Index mr,
               bool accumulate) {
  v128_t acc[MR][2];
  for (Index i = 0; i < MR; ++i) acc[i][0] = acc[i][1] = wasm_i32x4_splat(0);
  for (Index p = 0; p < pc; ++p, ap += MR, bp += 2 * kNr) {
    const v128_t b0 = wasm_v128_load(bp), b1 = wasm_v128_load(bp + kNr);
    for (Index i = 0; i < MR; ++i) {
      const v128_t a = wasm_v128_load32_splat(ap + i);
      acc[i][0] = wasm_i32x4_add(acc[i][0], wasm_i32x4_dot_i16x8(a, b0));
      acc[i][1] = wasm_i32x4_add(acc[i][1], wasm_i32x4_dot_i16x8(a, b1));
    }
  }
  for (Index i = 0; i < mr; ++i) {
    float* ci = c + i * ldc;
    v128_t c0 = wasm_f32x4_convert_i32x4(acc[i][0]), c1 = wasm_f32x4_convert_i32x4(acc[i][1]);
    if (accumulate) {
      c0 = wasm_f32x4_add(c0, wasm_v128_load(ci));
      c1 = wasm_f32x4_add(c1, wasm_v128_load(ci + 4));
    }
    wasm_v128_store(ci, c0);
    wasm_v128_store(ci + 4, c1);
  }
}

// C [M, N] = scale * (x . q^T) from panels made by pack_b_i16; N a multiple of 8.
template <Index MR>
void gemm_i16(Index M, Index N, Index K, const float* x, const int16_t* panels, float scale, float* C) {
  const Index KP = (K + 1) / 2;
  auto* xq = static_cast<int16_t*>(bump(static_cast<size_t>(M * 2 * KP) * 2));
  auto* xs = static_cast<float*>(bump(static_cast<size_t>(M) * 4));
  quantize_rows(x, M, K, KP, xq, xs);
  const auto* x32 = reinterpret_cast<const int32_t*>(xq);
  const Index k_blocks = (KP + kMaxPairs - 1) / kMaxPairs;
  const Index pc_max = (KP + k_blocks - 1) / k_blocks;
  const Index mc_max = kMc / MR * MR;
  auto* a_pack = static_cast<int32_t*>(bump(static_cast<size_t>(mc_max * pc_max) * 4));
  for (Index n0 = 0; n0 < N; n0 += kNc) {
    const Index nc = N - n0 < kNc ? N - n0 : kNc;
    for (Index p0 = 0; p0 < KP; p0 += pc_max) {
      const Index pc = KP - p0 < pc_max ? KP - p0 : pc_max;
      for (Index m0 = 0; m0 < M; m0 += mc_max) {
        const Index mc = M - m0 < mc_max ? M - m0 : mc_max;
        pack_pairs<MR>(x32 + m0 * KP, KP, mc, p0, pc, a_pack);
        for (Index j = 0; j < nc; j += kNr)
          for (Index i = 0; i < mc; i += MR)
            micro_i16<MR>(pc, a_pack + i * pc, panels + (n0 + j) * 2 * KP + p0 * 2 * kNr,
                          C + (m0 + i) * N + n0 + j, N, mc - i < MR ? mc - i : MR, p0 > 0);
      }
    }
  }
  for (Index i = 0; i < M; ++i) {
    const v128_t s = wasm_f32x4_splat(scale * xs[i]);
    for (Index j = 0; j < N; j += 4)
      wasm_v128_store(C + i * N + j, wasm_f32x4_mul(s, wasm_v128_load(C + i * N + j)));
  }
}

const float* f32_panels = nullptr;
const int16_t* i16_panels = nullptr;
size_t reserved = 0;

}  // namespace

// Operands at the start of the heap; prepare's panels after them; per-call scratch after `reserved`.
extern "C" __attribute__((export_name("buf"))) void* buf(int32_t bytes) {
  heap_used = 0;
  bump(static_cast<size_t>(bytes));
  reserved = heap_used;
  return heap;
}

// Packs q [N, K] (int8) both ways: dequantized float panels (gemm_pack_b's 8-wide layout) and int16 pairs.
extern "C" __attribute__((export_name("prepare"))) void prepare(int32_t N, int32_t K, const int8_t* q,
                                                                float scale) {
  heap_used = reserved;
  auto* f = static_cast<float*>(bump(static_cast<size_t>(N * K) * 4));
  for (Index p = 0; p < N; p += kNr)
    for (Index k = 0; k < K; ++k)
      for (Index j = 0; j < kNr; ++j)
        f[(p * K) + k * kNr + j] = static_cast<float>(q[(p + j) * K + k]) * scale;
  const Index KP = (K + 1) / 2;
  auto* s = static_cast<int16_t*>(bump(static_cast<size_t>(N * 2 * KP) * 2));
  for (Index p = 0; p < N; p += kNr)
    for (Index kp = 0; kp < KP; ++kp)
      for (Index j = 0; j < kNr; ++j)
        for (Index h = 0; h < 2; ++h)
          s[p * 2 * KP + (kp * kNr + j) * 2 + h] = 2 * kp + h < K ? q[(p + j) * K + 2 * kp + h] : 0;
  f32_panels = f;
  i16_panels = s;
  reserved = heap_used;
}

extern "C" __attribute__((export_name("gemm_f32"))) void gemm_f32(int32_t M, int32_t N, int32_t K,
                                                                  const float* x, float* C) {
  heap_used = reserved;
  sotto::nn::cpu::gemm_nt_prepacked_slice<F4, 4>(M, N, K, x, K, f32_panels, C, N);
}

#define GEMM_I16(MR)                                                            \
  extern "C" __attribute__((export_name("gemm_i16_" #MR))) void gemm_i16_##MR(  \
      int32_t M, int32_t N, int32_t K, const float* x, float scale, float* C) { \
    heap_used = reserved;                                                       \
    gemm_i16<MR>(M, N, K, x, i16_panels, scale, C);                             \
  }
GEMM_I16(4)
GEMM_I16(5)
GEMM_I16(6)

// 12 chains of `iters` f32x4.relaxed_madd: 48 * iters multiply-adds.
extern "C" __attribute__((export_name("peak_f32"))) float peak_f32(int32_t iters) {
  F4 acc[12];
  for (int j = 0; j < 12; ++j) acc[j] = F4{1, 1, 1, 1} * static_cast<float>(j);
  const F4 a = {0.999f, 0.999f, 0.999f, 0.999f}, b = {0.001f, 0.001f, 0.001f, 0.001f};
  for (int32_t i = 0; i < iters; ++i)
    for (int j = 0; j < 12; ++j) acc[j] = sotto::nn::cpu::fma_vec<F4, 4>(b, acc[j], a);
  float s = 0;
  for (int j = 0; j < 12; ++j) s += acc[j][0];
  return s;
}

// 12 chains of `iters` i32x4.dot_i16x8_s + i32x4.add: 96 * iters multiply-adds (each chain's dot reads its
// own accumulator, so the compiler cannot hoist it).
extern "C" __attribute__((export_name("peak_i16"))) int32_t peak_i16(int32_t iters, int32_t seed) {
  v128_t acc[12];
  for (int j = 0; j < 12; ++j) acc[j] = wasm_i32x4_splat(j);
  const v128_t b = wasm_i16x8_splat(static_cast<int16_t>(seed));
  for (int32_t i = 0; i < iters; ++i)
    for (int j = 0; j < 12; ++j) acc[j] = wasm_i32x4_add(acc[j], wasm_i32x4_dot_i16x8(acc[j], b));
  int32_t s = 0;
  for (int j = 0; j < 12; ++j) s += wasm_i32x4_extract_lane(acc[j], 0);
  return s;
}
