#include "models/vad/silero.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <initializer_list>
#include <string>
#include <string_view>

namespace sotto::vad {

namespace {

std::string shape_text(std::span<const int64_t> shape) {
  std::string out = "[";
  for (size_t i = 0; i < shape.size(); ++i) out += cat(i ? "," : "", shape[i]);
  return out + "]";
}

// The float32 tensor `name` in graph `scope`, with exactly `shape`, copied out (file bytes are unaligned).
Result<std::vector<float>> read_tensor(const OnnxModel& model, std::string_view scope, std::string_view name,
                                       std::initializer_list<int64_t> shape) {
  const OnnxTensor* t = model.find_in_scope(scope, name);
  if (!t) return error("vad: tensor '", name, "' missing from ", scope, " (not a Silero VAD v5/v6 file?)");
  const std::vector<int64_t> expected(shape);
  if (t->shape != expected)
    return error("vad: tensor '", name, "' has shape ", shape_text(t->shape), ", expected ",
                 shape_text(expected));
  if (t->dtype != DType::F32)
    return error("vad: tensor '", name, "' is ", onnx_data_type_name(t->onnx_data_type),
                 ", expected float32");
  const std::span<const uint8_t> bytes = t->bytes();
  if (bytes.size() != t->n_elements * sizeof(float))
    return error("vad: tensor '", name, "' holds ", bytes.size(), " bytes, expected ",
                 t->n_elements * sizeof(float));
  std::vector<float> values(t->n_elements);
  if (!values.empty()) std::memcpy(values.data(), bytes.data(), bytes.size());
  return values;
}

Result<Conv1d> read_conv(const OnnxModel& model, std::string_view scope, int index, int out_channels,
                         int in_channels, int stride) {
  Conv1d conv;
  conv.out_channels = out_channels;
  conv.in_channels = in_channels;
  conv.kernel = 3;
  conv.stride = stride;
  conv.padding = 1;
  const std::string prefix = cat("encoder.", index, ".reparam_conv.");
  SOTTO_ASSIGN(conv.weight, read_tensor(model, scope, prefix + "weight", {out_channels, in_channels, 3}));
  SOTTO_ASSIGN(conv.bias, read_tensor(model, scope, prefix + "bias", {out_channels}));
  return conv;
}

// Four-lane float vectors through clang's vector extension: SSE registers natively, SIMD128 in wasm. Loads
// go through memcpy (weights and windows need not be 16-byte aligned).
typedef float F4 __attribute__((vector_size(16)));

F4 load4(const float* p) {
  F4 v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

float lane_sum(F4 v) {
  return (v[0] + v[1]) + (v[2] + v[3]);
}

typedef int32_t I4 __attribute__((vector_size(16)));

F4 splat(float x) {
  return F4{x, x, x, x};
}

// e^x for four lanes: x clamped to [-87, 88] (so 2^n stays a normal float), n = round(x / ln 2) by the
// 1.5 * 2^23 trick, r = x - n ln 2 (|r| <= 0.35, ln 2 split in two for exactness), e^r by its Taylor series
// to r^7 (truncation error < 6e-9 relative), times 2^n built in the exponent bits. ~1 ulp; the same
// arithmetic natively and in wasm, instead of the library's exp (double precision in sotto's wasm libc: a
// fifth of the VAD's time there).
F4 exp4(F4 x) {
  x = __builtin_elementwise_min(__builtin_elementwise_max(x, splat(-87.0f)), splat(88.0f));
  const F4 shifter = splat(12582912.0f);  // 1.5 * 2^23: adding it rounds to an integer
  const F4 n = (x * splat(1.44269504088896341f) + shifter) - shifter;
  const F4 r = (x - n * splat(0.693359375f)) - n * splat(-2.12194440e-4f);
  F4 p = splat(1.0f / 5040);
  p = p * r + splat(1.0f / 720);
  p = p * r + splat(1.0f / 120);
  p = p * r + splat(1.0f / 24);
  p = p * r + splat(1.0f / 6);
  p = p * r + splat(0.5f);
  p = p * r + splat(1.0f);
  p = p * r + splat(1.0f);
  const I4 bits = (__builtin_convertvector(n, I4) + 127) << 23;
  F4 scale;
  std::memcpy(&scale, &bits, sizeof scale);
  return p * scale;
}

F4 sigmoid4(F4 x) {
  return splat(1.0f) / (splat(1.0f) + exp4(-x));
}

// tanh x = sign(x) (1 - 2 / (e^{2|x|} + 1)): absolute error ~1e-7 near 0, where the relative error grows.
F4 tanh4(F4 x) {
  const F4 magnitude = __builtin_elementwise_abs(x);
  const F4 t = splat(1.0f) - splat(2.0f) / (exp4(magnitude + magnitude) + splat(1.0f));
  return __builtin_elementwise_copysign(t, x);
}

// A block of R rows of `w` times C vectors of `x`: out[r * out_stride + c] = sum_i w[r * k + i] *
// x[c * x_stride + i]. Each weight load serves C vectors and each input load R rows, so the loads per
// multiply-add fall from 2 (a plain dot product) to 1/C + 1/R: the network is small enough to live in L1/L2,
// and loads, not arithmetic, bound it. Every (r, c) keeps four lane sums (fixed order: deterministic).
template <int R, int C>
void gemm_block(const float* w, int k, const float* x, int x_stride, float* out, int out_stride) {
  F4 acc[R][C] = {};
  int i = 0;
  for (; i + 4 <= k; i += 4) {
    F4 xv[C];
    for (int c = 0; c < C; ++c) xv[c] = load4(x + static_cast<size_t>(c) * x_stride + i);
    for (int r = 0; r < R; ++r) {
      const F4 wv = load4(w + static_cast<size_t>(r) * k + i);
      for (int c = 0; c < C; ++c) acc[r][c] += wv * xv[c];
    }
  }
  for (int r = 0; r < R; ++r)
    for (int c = 0; c < C; ++c) {
      float sum = lane_sum(acc[r][c]);
      for (int j = i; j < k; ++j)
        sum += w[static_cast<size_t>(r) * k + j] * x[static_cast<size_t>(c) * x_stride + j];
      out[static_cast<size_t>(r) * out_stride + c] = sum;
    }
}

// out[r * out_stride + c] = dot(row r of w [rows][k], vector c of x (x_stride apart)), r < rows, c < cols.
// Blocks: 2 x 4 for the 4-step front end, 2 x 2, and 4 x 1 for the single-step layers and the LSTM.
void gemm(const float* w, int rows, int k, const float* x, int cols, int x_stride, float* out,
          int out_stride) {
  int c = 0;
  for (; c + 4 <= cols; c += 4) {
    int r = 0;
    for (; r + 2 <= rows; r += 2)
      gemm_block<2, 4>(w + static_cast<size_t>(r) * k, k, x + static_cast<size_t>(c) * x_stride, x_stride,
                       out + static_cast<size_t>(r) * out_stride + c, out_stride);
    for (; r < rows; ++r)
      gemm_block<1, 4>(w + static_cast<size_t>(r) * k, k, x + static_cast<size_t>(c) * x_stride, x_stride,
                       out + static_cast<size_t>(r) * out_stride + c, out_stride);
  }
  for (; c + 2 <= cols; c += 2) {
    int r = 0;
    for (; r + 2 <= rows; r += 2)
      gemm_block<2, 2>(w + static_cast<size_t>(r) * k, k, x + static_cast<size_t>(c) * x_stride, x_stride,
                       out + static_cast<size_t>(r) * out_stride + c, out_stride);
    for (; r < rows; ++r)
      gemm_block<1, 2>(w + static_cast<size_t>(r) * k, k, x + static_cast<size_t>(c) * x_stride, x_stride,
                       out + static_cast<size_t>(r) * out_stride + c, out_stride);
  }
  for (; c < cols; ++c) {
    int r = 0;
    for (; r + 4 <= rows; r += 4)
      gemm_block<4, 1>(w + static_cast<size_t>(r) * k, k, x + static_cast<size_t>(c) * x_stride, x_stride,
                       out + static_cast<size_t>(r) * out_stride + c, out_stride);
    for (; r < rows; ++r)
      gemm_block<1, 1>(w + static_cast<size_t>(r) * k, k, x + static_cast<size_t>(c) * x_stride, x_stride,
                       out + static_cast<size_t>(r) * out_stride + c, out_stride);
  }
}

// out[o][t] = bias[o] + sum_i sum_k w[o][i][k] * in[i][t * stride + k - padding], then ReLU. The input is
// first unrolled into `columns` [t][i * kernel + k] (zeros where the padding is) so each output is one dot
// product of the weight row w[o], laid out the same way, with a column: one gemm.
void conv1d_relu(const Conv1d& conv, const float* in, int in_length, float* out,
                 std::vector<float>& columns) {
  const int out_length = conv.output_length(in_length);
  const int row = conv.in_channels * conv.kernel;
  columns.assign(static_cast<size_t>(out_length) * row, 0.0f);
  for (int t = 0; t < out_length; ++t)
    for (int i = 0; i < conv.in_channels; ++i)
      for (int k = 0; k < conv.kernel; ++k) {
        const int position = t * conv.stride + k - conv.padding;
        if (position >= 0 && position < in_length)
          columns[static_cast<size_t>(t) * row + i * conv.kernel + k] = in[i * in_length + position];
      }
  gemm(conv.weight.data(), conv.out_channels, row, columns.data(), out_length, row, out, out_length);
  for (int o = 0; o < conv.out_channels; ++o)
    for (int t = 0; t < out_length; ++t) {
      const float sum = conv.bias[o] + out[o * out_length + t];
      out[o * out_length + t] = sum > 0.0f ? sum : 0.0f;
    }
}

}  // namespace

Result<SileroWeights> load_silero_weights(const OnnxModel& model, uint32_t sample_rate_hz) {
  if (sample_rate_hz != 16000 && sample_rate_hz != 8000)
    return error("vad: Silero runs at 16000 or 8000 Hz, not ", sample_rate_hz);
  SileroWeights w;
  const int scale = sample_rate_hz == 16000 ? 2 : 1;  // 8 kHz halves every length in the front end
  w.sample_rate_hz = sample_rate_hz;
  w.frame_samples = 256 * scale;
  w.context_samples = 32 * scale;
  w.window_samples = 128 * scale;
  w.hop_samples = 64 * scale;
  w.pad_right_samples = 32 * scale;
  w.frequency_bins = w.window_samples / 2 + 1;

  // Each sample rate's weights live in one branch of the top If node; find that branch by its STFT basis.
  const std::vector<int64_t> basis_shape = {2 * w.frequency_bins, 1, w.window_samples};
  const std::vector<const OnnxTensor*> bases = model.find_all("stft.forward_basis_buffer");
  if (bases.empty())
    return error("vad: tensor 'stft.forward_basis_buffer' missing (not a Silero VAD v5/v6 file?)");
  const OnnxTensor* basis = nullptr;
  for (const OnnxTensor* t : bases)
    if (t->shape == basis_shape) basis = t;
  if (!basis)
    return error("vad: tensor 'stft.forward_basis_buffer' has shape ", shape_text(bases[0]->shape),
                 ", expected ", shape_text(basis_shape), " for ", sample_rate_hz, " Hz");
  const std::string scope = basis->scope;

  SOTTO_ASSIGN(w.stft_basis, read_tensor(model, scope, "stft.forward_basis_buffer",
                                         {2 * w.frequency_bins, 1, w.window_samples}));
  SOTTO_ASSIGN(w.encoder[0], read_conv(model, scope, 0, 128, w.frequency_bins, 1));
  SOTTO_ASSIGN(w.encoder[1], read_conv(model, scope, 1, 64, 128, 2));
  SOTTO_ASSIGN(w.encoder[2], read_conv(model, scope, 2, 64, 64, 2));
  SOTTO_ASSIGN(w.encoder[3], read_conv(model, scope, 3, 128, 64, 1));
  const int h = w.hidden;
  SOTTO_ASSIGN(w.lstm_weight_ih, read_tensor(model, scope, "decoder.rnn.weight_ih", {4 * h, h}));
  SOTTO_ASSIGN(w.lstm_weight_hh, read_tensor(model, scope, "decoder.rnn.weight_hh", {4 * h, h}));
  SOTTO_ASSIGN(std::vector<float> bias_ih, read_tensor(model, scope, "decoder.rnn.bias_ih", {4 * h}));
  SOTTO_ASSIGN(std::vector<float> bias_hh, read_tensor(model, scope, "decoder.rnn.bias_hh", {4 * h}));
  w.lstm_bias.resize(bias_ih.size());
  for (size_t i = 0; i < bias_ih.size(); ++i) w.lstm_bias[i] = bias_ih[i] + bias_hh[i];
  SOTTO_ASSIGN(w.head_weight, read_tensor(model, scope, "decoder.decoder.2.weight", {1, h, 1}));
  SOTTO_ASSIGN(std::vector<float> head_bias, read_tensor(model, scope, "decoder.decoder.2.bias", {1}));
  w.head_bias = head_bias[0];

  // The encoder must reduce the STFT's time steps to exactly one LSTM step (the graph's mean over time is
  // then the identity); true for both rates' fixed frame sizes.
  int length =
      (w.context_samples + w.frame_samples + w.pad_right_samples - w.window_samples) / w.hop_samples + 1;
  for (const Conv1d& conv : w.encoder) length = conv.output_length(length);
  if (length != 1) return error("vad: encoder leaves ", length, " time steps, expected 1");
  return w;
}

SileroVad::SileroVad(const SileroWeights& weights) : weights_(&weights) {
  reset();
}

void SileroVad::reset() {
  const SileroWeights& w = *weights_;
  window_.assign(static_cast<size_t>(w.context_samples + w.frame_samples + w.pad_right_samples), 0.0f);
  h_.assign(w.hidden, 0.0f);
  c_.assign(w.hidden, 0.0f);
  gates_.assign(4 * static_cast<size_t>(w.hidden), 0.0f);
}

float SileroVad::forward(std::span<const float> frame) {
  const SileroWeights& w = *weights_;
  const int input_samples = w.context_samples + w.frame_samples;

  // Window = [previous window's last context samples | new frame | right reflect padding].
  std::memmove(window_.data(), window_.data() + w.frame_samples, sizeof(float) * w.context_samples);
  for (int i = 0; i < w.frame_samples; ++i) {
    const float x = i < static_cast<int>(frame.size()) ? frame[i] : 0.0f;
    window_[w.context_samples + i] = std::isfinite(x) ? x : 0.0f;
  }
  // Reflect (edge not repeated): x[n + j] = x[n - 2 - j].
  for (int j = 0; j < w.pad_right_samples; ++j) window_[input_samples + j] = window_[input_samples - 2 - j];

  // STFT magnitude: [frequency_bins][steps].
  const int steps = (static_cast<int>(window_.size()) - w.window_samples) / w.hop_samples + 1;
  const int bins = w.frequency_bins;
  spectrum_.resize(static_cast<size_t>(bins) * steps);
  // The basis rows (real, then imaginary) times the `steps` windows, hop_samples apart in window_.
  stft_.resize(static_cast<size_t>(2 * bins) * steps);
  gemm(w.stft_basis.data(), 2 * bins, w.window_samples, window_.data(), steps, w.hop_samples, stft_.data(),
       steps);
  for (int b = 0; b < bins; ++b)
    for (int t = 0; t < steps; ++t) {
      const float re = stft_[b * steps + t], im = stft_[(b + bins) * steps + t];
      spectrum_[b * steps + t] = std::sqrt(re * re + im * im);
    }

  // Encoder: ping-pong between two activation buffers.
  const float* in = spectrum_.data();
  int length = steps;
  std::vector<float>* out = &act_a_;
  for (const Conv1d& conv : w.encoder) {
    const int out_length = conv.output_length(length);
    out->resize(static_cast<size_t>(conv.out_channels) * out_length);
    conv1d_relu(conv, in, length, out->data(), columns_);
    in = out->data();
    length = out_length;
    out = out == &act_a_ ? &act_b_ : &act_a_;
  }
  const float* features = in;  // [hidden][1]

  // LSTM cell, PyTorch gate order i, f, g, o.
  const int hn = w.hidden;
  gates_hh_.resize(4 * static_cast<size_t>(hn));
  gemm(w.lstm_weight_ih.data(), 4 * hn, hn, features, 1, hn, gates_.data(), 1);
  gemm(w.lstm_weight_hh.data(), 4 * hn, hn, h_.data(), 1, hn, gates_hh_.data(), 1);
  for (int g = 0; g < 4 * hn; ++g) gates_[g] = w.lstm_bias[g] + gates_[g] + gates_hh_[g];
  for (int j = 0; j < hn; j += 4) {  // hidden is 128: whole vectors
    const F4 input_gate = sigmoid4(load4(&gates_[j]));
    const F4 forget_gate = sigmoid4(load4(&gates_[hn + j]));
    const F4 candidate = tanh4(load4(&gates_[2 * hn + j]));
    const F4 output_gate = sigmoid4(load4(&gates_[3 * hn + j]));
    const F4 c = forget_gate * load4(&c_[j]) + input_gate * candidate;
    const F4 h = output_gate * tanh4(c);
    std::memcpy(&c_[j], &c, sizeof c);
    std::memcpy(&h_[j], &h, sizeof h);
  }

  // Head: ReLU -> 1x1 conv -> sigmoid (one time step, so the graph's mean is this value).
  float logit = w.head_bias;
  for (int j = 0; j < hn; ++j) logit += w.head_weight[j] * (h_[j] > 0.0f ? h_[j] : 0.0f);
  return sigmoid4(splat(logit))[0];
}

std::vector<float> speech_probabilities(SileroVad& vad, std::span<const float> samples) {
  const size_t frame = static_cast<size_t>(vad.frame_samples());
  std::vector<float> probs;
  probs.reserve((samples.size() + frame - 1) / frame);
  for (size_t start = 0; start < samples.size(); start += frame)
    probs.push_back(vad.forward(samples.subspan(start, std::min(frame, samples.size() - start))));
  return probs;
}

}  // namespace sotto::vad
