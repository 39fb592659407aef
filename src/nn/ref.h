// The plain scalar references of the ops in nn/ops.h: single-threaded, double accumulation where sums are long,
// written to be obviously right rather than fast. Each lives beside its op (same file); the op checks
// (tests/unit/nn_*_test.cpp) compare every backend against them on fresh random inputs. CPU tensors only.
#pragma once

#include <span>

#include "nn/ops.h"

namespace sotto::nn::ref {

Tensor binary(const Tensor& a, const Tensor& b, char op);  // '+', '-', '*', '/' with numpy broadcasting
Tensor activation(const Tensor& x, Act act, float alpha = 0.01f);
Tensor glu(const Tensor& x, int axis = -1);
Tensor snake(const Tensor& x, const Tensor& alpha);

Tensor softmax(const Tensor& x, int axis = -1);
Tensor layer_norm(const Tensor& x, const Tensor& gamma, const Tensor& beta, float eps);
Tensor rms_norm(const Tensor& x, const Tensor& gamma, float eps);
Tensor group_norm(const Tensor& x, int groups, const Tensor& gamma, const Tensor& beta, float eps);

Tensor linear(const Tensor& x, const Tensor& w, const Tensor& b = {});
Tensor linear_int8_affine(const Tensor& x, const Tensor& w, float scale, float offset, const Tensor& b = {});
// linear_int8_affine's own algorithm (x quantized per row to int16, exact integer sums; nn/linear_int8.cpp)
// with a plain scalar product: the kernels must give it bit for bit.
Tensor linear_int8_affine_quantized_x(const Tensor& x, const Tensor& w, float scale, float offset,
                                      const Tensor& b = {});
Tensor matmul(const Tensor& a, const Tensor& b);
Tensor matmul_integer_dynamic(const Tensor& x, const Tensor& w, const Tensor& w_scales = {},
                              const Tensor& w_zero_points = {});

Tensor conv1d(const Tensor& x, const Tensor& w, const Tensor& b, const Conv1dOptions& o = {});
Tensor conv1d_integer_dynamic(const Tensor& x, const Tensor& w, const Tensor& b, const Conv1dOptions& o = {},
                              const Tensor& w_scales = {});
Tensor conv1d_integer_dynamic_quantized_bias(const Tensor& x, const Tensor& w, const Tensor& b,
                                             const Conv1dOptions& o = {});
Tensor conv_transpose1d(const Tensor& x, const Tensor& w, const Tensor& b,
                        const ConvTranspose1dOptions& o = {});
Tensor conv2d(const Tensor& x, const Tensor& w, const Tensor& b, const Conv2dOptions& o = {});

Tensor lstm(const Tensor& x, const LstmWeights& w, bool reverse = false, const Tensor& h0 = {},
            const Tensor& c0 = {}, Tensor* h_out = nullptr, Tensor* c_out = nullptr);

Tensor attention(const Tensor& q, const Tensor& k, const Tensor& v, const AttentionOptions& o);
Tensor attention_rel_pos(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& p,
                         const Tensor& pos_bias_u, const Tensor& pos_bias_v, const AttentionOptions& o);
Tensor rope(const Tensor& x, int n_heads, int rotary_dim, float base, int64_t position0, bool interleaved);

Tensor stft(const Tensor& signal, const Tensor& window, int n_fft, int hop, bool center);
Tensor istft(const Tensor& spectrum, const Tensor& window, int n_fft, int hop, bool center);

}  // namespace sotto::nn::ref
