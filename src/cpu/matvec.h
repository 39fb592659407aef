// Matrix x vector, the hot loop of token-by-token decoding: every weight is read once per token for one
// multiply-add, so these kernels are limited by memory bandwidth; their speed is quoted in GB/s of weights.
//
// Conventions: W is row-major, rows x cols (GGUF's [cols, rows] tensors are exactly this); y[r] = W[r,:] . x.
// Each kernel has a scalar *_ref() beside it, the obviously-right version the tests compare against.
// Kernels with a ThreadPool split rows over all its threads; the *_rows() forms compute a row range on the
// calling thread, for use inside a task that is already running on the pool (with barriers between ops).
#pragma once

#include <cstdint>

#include "core/quant_blocks.h"
#include "core/thread_pool.h"

namespace sotto {

inline constexpr int kQK8_0 = 32;  // elements per q8_0 block

// Rows [begin, end) of `rows` that thread ith of nth computes, in units of `rows_per_pass` so passes that
// handle several rows together are never cut (the last range may end on a partial unit).
struct RowRange {
  int begin;
  int end;
};
RowRange split_rows(int rows, int ith, int nth, int rows_per_pass);

// ---- f32
// ---------------------------------------------------------------------------------------------------
void matvec_f32_ref(const float* w, const float* x, float* y, int rows, int cols);
void matvec_f32_rows(const float* w, const float* x, float* y, int row_begin, int row_end, int cols);
void matvec_f32(ThreadPool& pool, const float* w, const float* x, float* y, int rows, int cols);

// ---- q8_0: 8-bit weights x 8-bit activations (llama.cpp's CPU scheme) ------------------------------------
// A q8_0 block holds 32 values as int8 q with one f16 scale d: value = q * d, d = amax / 127, so every q is
// in
// [-127, 127]. The SIMD kernels rely on that range (see matvec.cpp); -128 never comes out of
// quantize_row_q8_0 or ggml's quantizer, and a weight of -128 in a hand-made file gives a wrong number, never
// a crash.

// n must be a multiple of 32. Rounds half away from zero, like ggml's roundf.
void quantize_row_q8_0(const float* x, BlockQ8_0* y, int n);

// sum over blocks of d_a * d_b * (integer dot of the 32 q's); n a multiple of 32.
float dot_q8_0_q8_0_ref(int n, const BlockQ8_0* a, const BlockQ8_0* b);
float dot_q8_0_q8_0(int n, const BlockQ8_0* a, const BlockQ8_0* b);

// W: rows x (cols/32) blocks, row-major; x: cols/32 blocks (the input already quantized, once for all the
// matrices that read it). Four rows per pass: each x block is loaded once and used four times.
void matvec_q8_0_ref(const BlockQ8_0* w, const BlockQ8_0* x, float* y, int rows, int cols);
void matvec_q8_0_rows(const BlockQ8_0* w, const BlockQ8_0* x, float* y, int row_begin, int row_end, int cols);
void matvec_q8_0(ThreadPool& pool, const BlockQ8_0* w, const BlockQ8_0* x, float* y, int rows, int cols);

// ---- dispatch
// ------------------------------------------------------------------------------------------------ One table
// per instruction set; matvec_kernels() picks one per call from cpu_use_avx2(), so SOTTO_CPU=portable and
// cpu_force_portable() take effect at once.
struct MatvecKernels {
  const char* name;
  void (*matvec_f32_rows)(const float* w, const float* x, float* y, int row_begin, int row_end, int cols);
  float (*dot_q8_0_q8_0)(int n, const BlockQ8_0* a, const BlockQ8_0* b);
  void (*matvec_q8_0_rows)(const BlockQ8_0* w, const BlockQ8_0* x, float* y, int row_begin, int row_end,
                           int cols);
};
const MatvecKernels& matvec_kernels();
extern const MatvecKernels kMatvecPortable;  // scalar natively; SIMD128 / relaxed SIMD in wasm
#if defined(__x86_64__) && !defined(__wasm__)
#define SOTTO_HAVE_AVX2_KERNELS 1
extern const MatvecKernels kMatvecAvx2;  // matvec_avx2.cpp
#endif

}  // namespace sotto
