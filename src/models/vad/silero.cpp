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

float sigmoid(float x) {
  return 1.0f / (1.0f + std::exp(-x));
}

// Eight independent partial sums: the compiler may keep them in one vector register without reassociating
// a single running sum (which strict IEEE order forbids), ~4x faster than one accumulator.
float dot(const float* a, const float* b, int n) {
  float partial[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int i = 0;
  for (; i + 8 <= n; i += 8)
    for (int j = 0; j < 8; ++j) partial[j] += a[i + j] * b[i + j];
  float sum = 0;
  for (; i < n; ++i) sum += a[i] * b[i];
  for (float p : partial) sum += p;
  return sum;
}

// out[o][t] = bias[o] + sum_i sum_k w[o][i][k] * in[i][t * stride + k - padding], then ReLU. The input is
// first unrolled into `columns` [t][i * kernel + k] (zeros where the padding is) so each output is one dot
// product with the weight row w[o], which is laid out the same way.
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
  for (int o = 0; o < conv.out_channels; ++o)
    for (int t = 0; t < out_length; ++t) {
      const float sum = conv.bias[o] + dot(&conv.weight[static_cast<size_t>(o) * row],
                                           &columns[static_cast<size_t>(t) * row], row);
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
  for (int b = 0; b < bins; ++b) {
    const float* real_row = &w.stft_basis[static_cast<size_t>(b) * w.window_samples];
    const float* imag_row = &w.stft_basis[static_cast<size_t>(b + bins) * w.window_samples];
    for (int t = 0; t < steps; ++t) {
      const float* x = &window_[static_cast<size_t>(t) * w.hop_samples];
      const float re = dot(real_row, x, w.window_samples), im = dot(imag_row, x, w.window_samples);
      spectrum_[b * steps + t] = std::sqrt(re * re + im * im);
    }
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
  for (int g = 0; g < 4 * hn; ++g)
    gates_[g] = w.lstm_bias[g] + dot(&w.lstm_weight_ih[static_cast<size_t>(g) * hn], features, hn) +
                dot(&w.lstm_weight_hh[static_cast<size_t>(g) * hn], h_.data(), hn);
  for (int j = 0; j < hn; ++j) {
    const float input_gate = sigmoid(gates_[j]);
    const float forget_gate = sigmoid(gates_[hn + j]);
    const float candidate = std::tanh(gates_[2 * hn + j]);
    const float output_gate = sigmoid(gates_[3 * hn + j]);
    c_[j] = forget_gate * c_[j] + input_gate * candidate;
    h_[j] = output_gate * std::tanh(c_[j]);
  }

  // Head: ReLU -> 1x1 conv -> sigmoid (one time step, so the graph's mean is this value).
  float logit = w.head_bias;
  for (int j = 0; j < hn; ++j) logit += w.head_weight[j] * (h_[j] > 0.0f ? h_[j] : 0.0f);
  return sigmoid(logit);
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
