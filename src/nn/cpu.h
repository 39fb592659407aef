// Helpers shared by the op files' CPU paths (not part of the op layer's interface): splitting work over the
// context's thread pool, reading weights of any dtype as floats, broadcasting strides.
#pragma once

#include <algorithm>
#include <cassert>
#include <cstdint>
#include <vector>

#include "core/thread_pool.h"
#include "nn/tensor.h"

// Contract checks on op inputs (programming errors in a model, see nn/ops.h): assert in debug builds; in
// release only evaluated for type (so the sizes they name count as used).
#ifdef NDEBUG
#define NN_ASSERT(c) static_cast<void>(sizeof(c))
#else
#define NN_ASSERT(c) assert(c)
#endif

namespace sotto::nn::cpu {

// Runs f(begin, end) over contiguous chunks of [0, n) on the context's pool, or inline when the whole job is
// under ~64K multiply-adds (a pool hand-off costs a few microseconds: more than small ops take).
template <class F>
void parallel_for(const Context& ctx, int64_t n, int64_t work_per_item, F&& f) {
  ThreadPool* pool = ctx.pool();
  int nth = pool ? pool->n_threads() : 1;
  if (nth <= 1 || n < 2 || n * work_per_item < 65536) {
    if (n > 0) f(int64_t{0}, n);
    return;
  }
  nth = static_cast<int>(std::min<int64_t>(nth, n));
  pool->run(
      [&](int ith, int nt) {
        const int64_t begin = n * ith / nt, end = n * (ith + 1) / nt;
        if (begin < end) f(begin, end);
      },
      nth);
}

// Tensor::derived() kinds of the CPU ops.
enum DerivedKind : uint32_t {
  kDerivedF32 = 1,              // a non-F32 weight dequantized (linear, conv)
  kDerivedTransposedF32 = 2,    // matmul's [K, N] weight as [N, K]
  kDerivedInt16Transposed = 3,  // an int8 [K, N] weight widened to int16 [N, K] (zero points not applied)
  kDerivedInt16 = 4,            // an int8 weight as int16 in its own layout, zero point subtracted
};
// A weight as F32, dequantized once and kept with it (as_f32 for activations: they are used once).
Tensor weight_f32(const Tensor& w);

// vec_math_avx2.cpp (call only when cpu_use_avx2()): GELU (erf form) of n floats, and the softmax of each
// of `rows` rows of `cols` scores in place, at 8 lanes.
void gelu_erf_avx2(const float* in, float* out, int64_t n);
void softmax_rows_avx2(float* s, int64_t rows, int64_t cols);

// An int8 [K, N] weight widened to int16 and transposed to [N, K], kept with it (linear.cpp).
Tensor int16_transposed(const Tensor& w);

// Elements [begin, begin + count) of `t` (F32, F16, BF16, I8/U8 dequantized with its QuantParams, I32, I64)
// as floats.
void read_floats(const Tensor& t, int64_t begin, int64_t count, float* out);
// `t` as an F32 tensor on its context (the same tensor when it already is).
Tensor as_f32(const Tensor& t);

// A constant F32 weight [N, K] copied once into gemm_pack_b's panels (same shape; N a multiple of
// gemm_panel_width()), for linear_prepacked: its products then skip the per-call copy of the weight into
// panels, which every thread of a split product makes (nn/gemm.h).
Tensor pack_weight(Context& ctx, const Tensor& w);
// x . w^T + b for w made by pack_weight: bit-identical to nn::linear on the unpacked weight; the output has x's
// shape with its last dimension N, the bias added over ctx's threads.
Tensor linear_prepacked(const Tensor& x, const Tensor& panels, const Tensor& b = {});
// An int8 weight [N, K] (N a multiple of 8) packed once for linear_int8_affine_prepacked: I16 [N, 2 ceil(K/2)],
// in panels of 8 columns of int16 pairs (nn/linear_int8.cpp).
Tensor pack_weight_int8(Context& ctx, const Tensor& w);
// linear_int8_affine(x, w, scale, offset, b) for w packed by pack_weight_int8, bit for bit, at the speed of a
// blocked product: for x with many rows (the decoder's one-row steps keep linear_int8_affine).
Tensor linear_int8_affine_prepacked(const Tensor& x, const Tensor& panels, float scale, float offset,
                                    const Tensor& b = {});
// A constant F32 weight [N, K] (N a multiple of 16) split into gemm_pack_b_bf16x3's panels: BF16
// [N, 2 gemm_bf16_kp(K)]. linear_bf16x3: x . w^T + b on them, in split-bf16 products (nn/gemm.h).
Tensor pack_weight_bf16x3(Context& ctx, const Tensor& w);
Tensor linear_bf16x3(const Tensor& x, const Tensor& panels, const Tensor& b = {});
// Integer elements (I32, I64, I8, U8) as int64.
std::vector<int64_t> read_ints(const Tensor& t);

// Row-major strides of a shape, in elements.
void strides_of(const Shape& s, int64_t* strides);

// Normalises a possibly negative axis.
inline int axis_of(const Shape& s, int axis) {
  const int a = axis < 0 ? s.rank + axis : axis;
  NN_ASSERT(a >= 0 && a < s.rank);
  return a;
}

// [outer, n, inner] view of a shape around `axis`.
struct AxisSplit {
  int64_t outer = 1, n = 1, inner = 1;
};
AxisSplit split_at(const Shape& s, int axis);

// ONNX Runtime's dynamic uint8 quantization of n floats (linear.cpp): the parameters, then one value.
QuantParams dynamic_quant_params(const float* x, int64_t n);
QuantParams quant_params_of_range(float lo, float hi);  // from the min / max with 0
uint8_t quantize_u8(float x, const QuantParams& q);

// Snake of one channel's row (elementwise.cpp): o[t] = in[t] + sin(a in[t])^2 / a; o may be in.
void snake_row(const float* in, float* o, int64_t length, float a);
// DynamicQuantizeLinear's range of n floats (conv_integer_bias.cpp): min over x and 0, max over x and 0.
void min_max(const float* x, int64_t n, float& lo, float& hi);
// out[i] = quantize_u8(x[i], q) - q.zero_point as int16 (conv_integer_bias.cpp, vector lanes).
void quantize_i16(const float* x, int64_t n, const QuantParams& q, int16_t* out);

}  // namespace sotto::nn::cpu
