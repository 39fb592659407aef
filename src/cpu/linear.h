// y = x . W^T for every weight type the language model reads: the one entry point the model calls for its
// matrix products, on the CPU, giving the same numbers as llama.cpp's CPU backend up to the order of float
// additions. Activations are first converted to the format ggml pairs with the weight type (see
// cpu/quant_dot.h for the formats and the dot-product math); the kernels then read the weights straight from
// the model file.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/dtype.h"
#include "core/thread_pool.h"

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
};

// y[n x rows] = x[n x cols] . W^T for W row-major rows x cols stored as in GGUF (ne0 = cols) in type w; cols
// a multiple of w's block size. n == 1 is decode (matrix x vector, 4 rows per pass); n > 1 is prefill (tiles
// of rows x tokens, so each weight block is decoded once per tile). Threads split rows. x is quantized once
// per call into `scratch`, on all threads in parallel when n is large. Unsupported types leave y untouched.
void linear(ThreadPool& pool, DType w, const void* weights, int64_t rows, int64_t cols, const float* x,
            int64_t n, float* y, LinearScratch& scratch);

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
