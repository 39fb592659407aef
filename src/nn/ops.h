// The ops every network after the language model is written with. A model calls them on tensors and reads like
// its paper's figure:
//   x = conv1d(x, w.conv1, w.conv1_bias, {.stride = 2});
//   x = gelu(x);
//   x = add(x, attention(layer_norm(x, w.norm, w.norm_bias), ...));
// Each op runs on the backend of its inputs' context (nn/tensor.h): eagerly on the CPU, recorded on the GPU
// (so far add/sub/mul/div, scale, activation, and in f32 linear, conv1d, lstm, pad_reflect, slice, softmax,
// layer_norm, group_norm, transpose, concat, rope, attention, argmax, embedding (f32 / int8 tables) and
// linear_int8_affine, glu, permute, conv2d, attention_rel_pos: see nn/gpu_recorder.h; the others fail the next read with one line). Each op lives in one file of
// src/nn/ with its plain scalar reference (namespace ref, declared in nn/ref.h, beside it: obviously right,
// single-threaded) and its backends' kernels; tests/unit/nn_*_test.cpp check the CPU (AVX2 and portable, 1 and
// 3 threads) and the GPU (SwiftShader) against the references on fresh random inputs of odd sizes,
// src/wasm/nn_check.cpp the wasm builds. Inputs are never written; weights' derived layouts are kept with them
// (Tensor::derived).
//
// Conventions: tensors are row-major, outermost first. Sequence models use [T, C] (time-major: a row per frame)
// unless an op says otherwise; conv ops use [C, T] (channels-major, PyTorch/ONNX Conv without the batch
// dimension) — transpose() between them. Batch is 1 throughout (a voice agent hears and speaks one stream);
// ops accept a leading batch dimension only where they say so. F32 activations everywhere; weights may be F32,
// F16 or int8 where an op says so. Inputs that break an op's contract are programming errors in the model, caught
// by the model's load-time checks (nn/weights.h), so ops assert rather than return errors.
#pragma once

#include <cstdint>
#include <span>

#include "nn/tensor.h"

namespace sotto::nn {

// ---------------------------------------------------------------- elementwise and broadcast
// Numpy broadcasting over up to Shape::kMaxRank dims.
Tensor add(const Tensor& a, const Tensor& b);
Tensor sub(const Tensor& a, const Tensor& b);
Tensor mul(const Tensor& a, const Tensor& b);
Tensor div(const Tensor& a, const Tensor& b);
Tensor scale(const Tensor& x, float s, float bias = 0.0f);  // x * s + bias

enum class Act : uint8_t {
  Identity,
  Relu,
  LeakyRelu,  // alpha
  Sigmoid,
  Tanh,
  Silu,
  GeluErf,   // 0.5 x (1 + erf(x / sqrt 2))
  GeluTanh,  // 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))  (ONNX Runtime's FastGelu)
  Exp,
  Sin,
  Cos,
  Atan,
  Abs,
  Sqrt,
  Square,
};
Tensor activation(const Tensor& x, Act act, float alpha = 0.01f);
inline Tensor relu(const Tensor& x) {
  return activation(x, Act::Relu);
}
inline Tensor sigmoid(const Tensor& x) {
  return activation(x, Act::Sigmoid);
}
inline Tensor tanh(const Tensor& x) {
  return activation(x, Act::Tanh);
}
inline Tensor silu(const Tensor& x) {
  return activation(x, Act::Silu);
}
inline Tensor gelu(const Tensor& x) {
  return activation(x, Act::GeluErf);
}
inline Tensor leaky_relu(const Tensor& x, float alpha) {
  return activation(x, Act::LeakyRelu, alpha);
}
// GLU over `axis`: the first half times sigmoid of the second half.
Tensor glu(const Tensor& x, int axis = -1);
// Snake (BigVGAN / iSTFTNet): x + 1/alpha_c sin^2(alpha_c x), alpha per channel, x [C, T], alpha [C].
Tensor snake(const Tensor& x, const Tensor& alpha);

// ---------------------------------------------------------------- shape
Tensor transpose(const Tensor& x);                            // [A, B] -> [B, A] (copies)
Tensor permute(const Tensor& x, std::span<const int> order);  // general (copies)
Tensor concat(std::span<const Tensor> parts, int axis);
Tensor slice(const Tensor& x, int axis, int64_t begin, int64_t end);  // [begin, end) along axis (copies)
Tensor pad(const Tensor& x, int axis, int64_t before, int64_t after, float value = 0.0f);
Tensor pad_reflect(const Tensor& x, int axis, int64_t before, int64_t after);
// Nearest / linear resize of the last axis to `length` (ONNX Resize, coordinate mode as named).
enum class ResizeMode : uint8_t { Nearest, LinearHalfPixel, LinearAlignCorners };
Tensor resize(const Tensor& x, int64_t length, ResizeMode mode);

// ---------------------------------------------------------------- reductions and normalisation
Tensor softmax(const Tensor& x, int axis = -1);
Tensor argmax(const Tensor& x, int axis = -1);  // I32 indices
Tensor cumsum(const Tensor& x, int axis);
Tensor reduce_mean(const Tensor& x, int axis);

// y = (x - mean) / sqrt(var + eps) * gamma + beta over the last axis (gamma, beta [C] or undefined).
Tensor layer_norm(const Tensor& x, const Tensor& gamma, const Tensor& beta, float eps);
Tensor rms_norm(const Tensor& x, const Tensor& gamma, float eps);
// Group norm of x [C, T] with `groups` groups of C / groups channels (gamma, beta [C]).
Tensor group_norm(const Tensor& x, int groups, const Tensor& gamma, const Tensor& beta, float eps);
// Instance norm of x [C, T]: each channel over time (gamma, beta [C] or undefined).
Tensor instance_norm(const Tensor& x, const Tensor& gamma, const Tensor& beta, float eps);
// AdaIN (StyleTTS2 / Kokoro): instance_norm(x) * (1 + gamma) + beta with gamma, beta [C] from the style.
Tensor adain(const Tensor& x, const Tensor& gamma, const Tensor& beta, float eps);
// DynamicQuantizeLinear's range of a tensor (min over its values and 0, max over them and 0), as the op that
// made the tensor found it on the way: the int8 conv that reads the tensor next then skips its own pass.
struct ValueRange {
  float lo = 0.0f, hi = 0.0f;
  bool known = false;
  // On the GPU: the value's range as the int8 quantization's first stage writes it, (min, max) with 0 per
  // chunk of the chunks that stage would take (gpu_kokoro.cpp), so the conv skips that pass over its input.
  Tensor gpu_partial;
};
// snake(adain(x, gamma, beta, eps), alpha) in one pass over the channels of x [C, T], bitwise the two ops
// (Kokoro's generator has every dilated conv behind this pair). With `range`, also the result's range for
// the conv after it (on the GPU as range->gpu_partial, Snake's dispatch writing it).
Tensor adain_snake(const Tensor& x, const Tensor& gamma, const Tensor& beta, float eps, const Tensor& alpha,
                   ValueRange* range = nullptr);
// Batch norm is folded into the preceding conv's weight and bias at load (fold_batch_norm in nn/weights.h).

// ---------------------------------------------------------------- matrix products
// y = x . W^T + b: x [..., K], w [N, K] (PyTorch Linear layout) F32, F16, or I8/U8 with QuantParams (weight-
// only int8: dequantized as it is read), b [N] or undefined.
Tensor linear(const Tensor& x, const Tensor& w, const Tensor& b = {});
// ONNX MatMul: a [..., M, K] . b [K, N] (b a 2-D weight: F32, F16 or int8 weight-only) or b [..., K, N] F32
// batched like a.
Tensor matmul(const Tensor& a, const Tensor& b);
// ONNX Runtime's dynamic int8 product: DynamicQuantizeLinear(x) (per tensor, uint8, scale = (max(0,max x) -
// min(0,min x)) / 255, zero point = round-half-even(-min / scale) clamped, q = saturate(round-half-even(x /
// scale) + zp)), then MatMulInteger with w (I8 or U8 [K, N], zero point w.quant().zero_point or per-column
// `w_zero_points`), integer accumulation, then * x_scale * w_scale (per tensor, or per column `w_scales` [N]).
Tensor matmul_integer_dynamic(const Tensor& x, const Tensor& w, const Tensor& w_scales = {},
                              const Tensor& w_zero_points = {});
// DynamicQuantizeLinear alone: x (F32, any shape) -> U8 with its QuantParams attached (scale = 1 when x is all
// zeros, as ONNX Runtime does).
Tensor dynamic_quantize_linear(const Tensor& x);

// Weight-only int8 with one float scale and one float offset per tensor, as ONNX exporters write it (Cast ->
// Mul(scale) -> Add(offset): w = q * scale + offset, the offset added in float): y = x . W^T + b, w I8 [N, K]
// read as int8 (a decoder step reads 4x fewer weight bytes than F32), b F32 [N] or undefined.
Tensor linear_int8_affine(const Tensor& x, const Tensor& w, float scale, float offset, const Tensor& b = {});

// ---------------------------------------------------------------- convolutions ([C, T] and [C, H, W])
struct Conv1dOptions {
  int stride = 1, padding = 0, dilation = 1, groups = 1;
  int padding_end = -1;  // -1: the same as padding (asymmetric padding when set)
};
// x [Cin, T], w [Cout, Cin / groups, K] (F32/F16), b [Cout] or undefined -> [Cout, T'].
Tensor conv1d(const Tensor& x, const Tensor& w, const Tensor& b, const Conv1dOptions& o = {});
// The same with ONNX Runtime's ConvInteger dynamic quantization of x (see matmul_integer_dynamic), w int8.
Tensor conv1d_integer_dynamic(const Tensor& x, const Tensor& w, const Tensor& b, const Conv1dOptions& o = {},
                              const Tensor& w_scales = {});
// The same with ONNX Runtime's quantized bias (quantize_dynamic's ConvInteger + bias): b enters the int32
// accumulator as floor(b / (x_scale * w_scale)), i.e. rounded down to a multiple of the output scale. w per-tensor
// quantized (nn/conv_integer_bias.cpp).
Tensor conv1d_integer_dynamic_quantized_bias(const Tensor& x, const Tensor& w, const Tensor& b,
                                             const Conv1dOptions& o = {});
// The same with x's range already known (from adain_snake): bitwise the call above.
Tensor conv1d_integer_dynamic_quantized_bias(const Tensor& x, const Tensor& w, const Tensor& b,
                                             const Conv1dOptions& o, const ValueRange& x_range);
struct ConvTranspose1dOptions {
  int stride = 1, padding = 0, output_padding = 0, dilation = 1, groups = 1;
};
// x [Cin, T], w [Cin, Cout / groups, K] (ONNX / PyTorch ConvTranspose layout) -> [Cout, T'].
Tensor conv_transpose1d(const Tensor& x, const Tensor& w, const Tensor& b,
                        const ConvTranspose1dOptions& o = {});
struct Conv2dOptions {
  int stride_h = 1, stride_w = 1, pad_h = 0, pad_w = 0, dilation_h = 1, dilation_w = 1, groups = 1;
};
// x [Cin, H, W], w [Cout, Cin / groups, KH, KW] -> [Cout, H', W'].
Tensor conv2d(const Tensor& x, const Tensor& w, const Tensor& b, const Conv2dOptions& o = {});

// ---------------------------------------------------------------- recurrent
// One LSTM direction over x [T, In]: PyTorch gate order i, f, g, o (ONNX's i, o, f, c is converted at load),
// w_ih [4H, In], w_hh [4H, H], b [4H] (bias_ih + bias_hh), initial state h0, c0 [H] (undefined: zeros). Returns
// [T, H]; `reverse` runs from the last frame. h_out / c_out (when given) receive the final state.
struct LstmWeights {
  Tensor w_ih, w_hh, b;
  // int8 weights (w_ih / w_hh I8 or U8) follow ONNX Runtime's DynamicQuantizeLSTM: they keep its [K, N]
  // layout, w_ih [In, 4H] and w_hh [H, 4H] (columns in gate order i, f, g, o after the load-time reorder), with
  // per-tensor or per-column ([4H]) scales and zero points below. The whole input sequence x is dynamically
  // quantized at once (one range over every frame, as ONNX Runtime projects the input in one product), h at
  // every step; products accumulate in int32 (matmul_integer_dynamic).
  Tensor w_ih_scales, w_hh_scales, w_ih_zero_points, w_hh_zero_points;
  bool int8() const { return w_ih.dtype() == DType::I8 || w_ih.dtype() == DType::U8; }
};
Tensor lstm(const Tensor& x, const LstmWeights& w, bool reverse = false, const Tensor& h0 = {},
            const Tensor& c0 = {}, Tensor* h_out = nullptr, Tensor* c_out = nullptr);
// Both directions, outputs concatenated per frame -> [T, 2H].
Tensor bilstm(const Tensor& x, const LstmWeights& forward, const LstmWeights& backward);

// ---------------------------------------------------------------- attention and position
// Rotary embedding on x [T, n_heads * head_dim] in place of a copy: the first `rotary_dim` dims of each head
// rotate by pos * base^(-2i / rotary_dim), positions position0 .. position0 + T - 1. `interleaved`: pairs
// (2i, 2i+1) (GPT-J); otherwise halves (i, i + rotary_dim / 2) (GPT-NeoX / Llama).
Tensor rope(const Tensor& x, int n_heads, int rotary_dim, float base, int64_t position0, bool interleaved);
struct AttentionOptions {
  int n_heads = 1;
  int n_kv_heads = 0;  // 0: n_heads
  float scale = 0.0f;  // 0: 1 / sqrt(head_dim)
  bool causal = false;
  // Causal with a cache: query i sits at absolute position kv_length - q_length + i.
};
// Scaled dot-product attention: q [Tq, H * D], k, v [Tk, Hkv * D] -> [Tq, H * D]. Self-attention passes the
// same source for q/k/v projections; cross-attention passes the encoder's k, v; a KV cache is k/v tensors the
// model grows with concat().
Tensor attention(const Tensor& q, const Tensor& k, const Tensor& v, const AttentionOptions& o);
// Self-attention of one stacked projection: qkv [T, (H + 2 Hkv) * D], each row q [H * D], k and v [Hkv * D] side
// by side (one product with the three matrices stacked, where three products were three dispatches) ->
// [T, H * D], as attention() of the three column ranges. On the GPU the tiled kernel reads them in place (row
// stride and column offsets) where D is a multiple of 4 up to 64, whatever T; elsewhere they are copied out.
Tensor attention_stacked(const Tensor& qkv, const AttentionOptions& o);
// Transformer-XL relative-position attention (FastConformer): scores = ((q + pos_bias_u) k^T + rel_shift((q +
// pos_bias_v) p^T)) * scale, p [2T - 1, H * D] the projected position embeddings, pos_bias_u/v [H, D].
Tensor attention_rel_pos(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& p,
                         const Tensor& pos_bias_u, const Tensor& pos_bias_v, const AttentionOptions& o);

// ---------------------------------------------------------------- lookup, durations, spectra
// Rows of `table` [V, D] (F32, F16, or I8/U8 with QuantParams) for each index of `ids` (I32/I64) -> [n, D].
Tensor embedding(const Tensor& table, const Tensor& ids);
// Row t of x [T, C] repeated durations[t] times (I32/I64 [T]) -> [sum durations, C].
Tensor repeat_by_durations(const Tensor& x, const Tensor& durations);
// STFT of a signal [N] with `window` [n_fft] (zero padded centred when shorter), hop, optional centre
// padding (reflect): -> [2, n_fft / 2 + 1, frames] (real, imaginary).
Tensor stft(const Tensor& signal, const Tensor& window, int n_fft, int hop, bool center);
// The inverse: spectrum [2, n_fft / 2 + 1, frames] with overlap-add and window-square normalisation -> [N].
Tensor istft(const Tensor& spectrum, const Tensor& window, int n_fft, int hop, bool center);

// ---------------------------------------------------------------- vocoder sources (nn/sine_source.cpp, nn/atan2.cpp)
// ONNX Runtime CPU's STFT arithmetic, operation for operation (nn/stft_onnxruntime.cpp): signal [N] (already
// padded: no centring here), window [n_fft] -> [2, n_fft / 2 + 1, frames] (real, imaginary). Use it where a
// model reads the phase of bins that are exactly 0 in exact arithmetic (DC and Nyquist of a real signal): their
// sign comes from the algorithm's rounding. nn::stft is the exact-DFT reference it is tested against.
Tensor stft_onnxruntime(const Tensor& signal, const Tensor& window, int n_fft, int hop);
// atan2(y, x) elementwise, same shapes, as PyTorch's ONNX export writes it (ONNX has no Atan2): a = atan(y / x);
// where x < 0: a + pi if y > 0 else a - pi. (x = 0: atan(+-inf) = +-pi/2; x = y = 0: NaN, as the graph gives.)
Tensor atan2(const Tensor& y, const Tensor& x);
// The neural-source-filter harmonic source (NSF / HiFTNet SineGen, no noise) with ONNX Runtime's float
// arithmetic of the exported graph: f0 [N] per frame (Hz) -> [N * upsample, harmonics], sample s of harmonic h
// (1-based) = amplitude * sin(phase_h(s)) where f0(s / upsample) > voiced_threshold_hz, else 0.
//   rad[j][h]   = v - floor(v), v = (f0[j] * h) / sample_rate_hz
//   phase[j][h] = ((cumsum_{i <= j} rad[i][h]) * 2) * pi * upsample
//   phase_h(s)  = linear resize of phase[.][h] by `upsample`, half-pixel centres, clamped at the ends.
Tensor sine_source(const Tensor& f0, int harmonics, int upsample, float sample_rate_hz, float amplitude,
                   float voiced_threshold_hz);

}  // namespace sotto::nn
