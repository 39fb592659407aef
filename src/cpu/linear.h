// y = x . W^T for every weight type the language model reads: the one entry point the model calls for its
// matrix products, on the CPU, giving the same numbers as llama.cpp's CPU backend up to the order of float
// additions. Activations are first converted to the format ggml pairs with the weight type (see
// cpu/quant_dot.h for the formats and the dot-product math); the kernels then read the weights straight from
// the model file.
#pragma once

#include <cstddef>
#include <cstdint>
#include <type_traits>
#include <vector>

#include "core/dtype.h"
#include "core/thread_pool.h"
#include "cpu/quant_dot.h"

namespace sotto {

// Activation format llama.cpp's CPU backend converts x to before a dot product with weights of type w:
// F32 -> F32, F16 -> F16, BF16 -> BF16, Q4_0/Q5_0/Q8_0 -> Q8_0, Q4_1/Q5_1 -> Q8_1, Q2_K..Q6_K -> Q8_K.
// F32 for types linear_supported() rejects.
DType activation_type(DType w);

// F32 F16 BF16 Q8_0 Q4_0 Q4_1 Q5_0 Q5_1 Q2_K Q3_K Q4_K Q5_K Q6_K.
bool linear_supported(DType w);

// Reused between calls so quantizing x allocates only when a call needs more room than any before.
struct LinearScratch {
  std::vector<uint8_t> xq;
  std::vector<TileVec> tiles;  // prompts: x rearranged for the tile kernels (quant_dot.h)
};

// y[n x rows] = x[n x cols] . W^T for W row-major rows x cols stored as in GGUF (ne0 = cols) in type w; cols
// a multiple of w's block size. n == 1 is decode (matrix x vector, 4 rows per pass); n > 1 is prefill (tiles
// of rows x tokens, so each weight block is decoded once per tile; from 8 tokens on, where the CPU has one,
// the tile kernels of quant_dot.h with 16 tokens per vector). Threads split rows. x is quantized once
// per call into `scratch`, on all threads in parallel when n is large. Unsupported types leave y untouched.
void linear(ThreadPool& pool, DType w, const void* weights, int64_t rows, int64_t cols, const float* x,
            int64_t n, float* y, LinearScratch& scratch);

// One of several products of the same x run together by linear_shared_x().
struct LinearJob {
  DType w;
  const void* weights;
  int64_t rows;
  float* y;  // n x rows
};

// y_j = x . W_j^T for every job (e.g. q, k and v; gate and up), in one pass over the pool: x is quantized once
// when the weights take the same activation format, and each thread computes its share of every job's rows,
// so there is one wake-up and one wait instead of one per matrix (for decode the matrices are small: ~1 MB
// each, and each pass also pays a cold start of the memory stream and a wait for the slower thread). Jobs
// whose formats differ run one linear() each. Every y is exactly what linear() gives.
void linear_shared_x(ThreadPool& pool, const LinearJob* jobs, int n_jobs, int64_t cols, const float* x,
                     int64_t n, LinearScratch& scratch);

// linear() of one token whose x is computed in the same pass over the pool: each thread first writes its share
// of x with fill(ctx, begin, end) (x[begin, end), whole activation blocks) and quantizes it, then, after a
// barrier, computes its rows. For decode this turns a serial pass over x by the caller (the SwiGLU before
// ffn_down: 4864 exp()s, ~4% of a token) into a parallel one. y is exactly what linear() gives for the same x.
using FillX = void (*)(void* ctx, int64_t begin, int64_t end);
void linear_filled_x(ThreadPool& pool, DType w, const void* weights, int64_t rows, int64_t cols, float* x,
                     FillX fill, void* ctx, float* y, LinearScratch& scratch);
template <class F>
void linear_filled_x(ThreadPool& pool, DType w, const void* weights, int64_t rows, int64_t cols, float* x,
                     F&& fill, float* y, LinearScratch& scratch) {
  linear_filled_x(
      pool, w, weights, rows, cols, x,
      [](void* c, int64_t begin, int64_t end) { (*static_cast<std::remove_reference_t<F>*>(c))(begin, end); },
      &fill, y, scratch);
}

// The same in pieces, callable from inside a task already running on the pool, so a model can fuse steps
// with barriers: quantize each row of x with quantize_activations() (activation_bytes() each), then have
// each thread compute its rows with linear_rows(): y[t * y_stride + r] for t < n, r in [row_begin, row_end).
size_t activation_bytes(DType w, int64_t cols);
void quantize_activations(DType w, const float* x, int64_t cols, void* xq);
void linear_rows(DType w, const void* weights, int64_t cols, const void* xq, int64_t n, size_t xq_stride,
                 float* y, int64_t y_stride, int64_t row_begin, int64_t row_end);

// Scalar reference: dequantize W rows with dequantize_row_ref, quantize x as the kernels do and dequantize
// it back, and dot in double: the obviously-right version the tests compare against.
void linear_ref(DType w, const void* weights, int64_t rows, int64_t cols, const float* x, int64_t n,
                float* y);

}  // namespace sotto
