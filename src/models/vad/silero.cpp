#include "models/vad/silero.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <initializer_list>
#include <limits>
#include <string>
#include <string_view>

namespace sotto::vad {

namespace {

std::string shape_text(std::span<const int64_t> shape) {
  std::string out = "[";
  for (size_t i = 0; i < shape.size(); ++i) out += cat(i ? "," : "", shape[i]);
  return out + "]";
}

// The float32 tensor `name` in graph `scope`, with exactly `shape`, as an nn tensor on `ctx`.
Result<nn::Tensor> read_tensor(nn::Context& ctx, const OnnxModel& model, std::string_view scope,
                               std::string_view name, std::initializer_list<int64_t> shape) {
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
  return ctx.from_bytes(nn::Shape(std::span<const int64_t>(expected)), DType::F32, bytes);
}

Result<EncoderConv> read_conv(nn::Context& ctx, const OnnxModel& model, std::string_view scope, int index,
                              int out_channels, int in_channels, int stride) {
  EncoderConv conv;
  conv.stride = stride;
  const std::string prefix = cat("encoder.", index, ".reparam_conv.");
  SOTTO_ASSIGN(conv.weight,
               read_tensor(ctx, model, scope, prefix + "weight", {out_channels, in_channels, 3}));
  SOTTO_ASSIGN(conv.bias, read_tensor(ctx, model, scope, prefix + "bias", {out_channels}));
  return conv;
}

int conv_length(int length, int stride) {  // k = 3, pad = 1
  return (length + 2 - 3) / stride + 1;
}

}  // namespace

Result<SileroWeights> load_silero_weights(const OnnxModel& model, uint32_t sample_rate_hz) {
  if (sample_rate_hz != 16000 && sample_rate_hz != 8000)
    return error("vad: Silero runs at 16000 or 8000 Hz, not ", sample_rate_hz);
  SileroWeights w;
  nn::Context& ctx = *w.ctx;
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

  SOTTO_ASSIGN(w.stft_basis, read_tensor(ctx, model, scope, "stft.forward_basis_buffer",
                                         {2 * w.frequency_bins, 1, w.window_samples}));
  SOTTO_ASSIGN(w.encoder[0], read_conv(ctx, model, scope, 0, 128, w.frequency_bins, 1));
  SOTTO_ASSIGN(w.encoder[1], read_conv(ctx, model, scope, 1, 64, 128, 2));
  SOTTO_ASSIGN(w.encoder[2], read_conv(ctx, model, scope, 2, 64, 64, 2));
  SOTTO_ASSIGN(w.encoder[3], read_conv(ctx, model, scope, 3, 128, 64, 1));
  const int h = w.hidden;
  SOTTO_ASSIGN(w.lstm.w_ih, read_tensor(ctx, model, scope, "decoder.rnn.weight_ih", {4 * h, h}));
  SOTTO_ASSIGN(w.lstm.w_hh, read_tensor(ctx, model, scope, "decoder.rnn.weight_hh", {4 * h, h}));
  SOTTO_ASSIGN(nn::Tensor bias_ih, read_tensor(ctx, model, scope, "decoder.rnn.bias_ih", {4 * h}));
  SOTTO_ASSIGN(nn::Tensor bias_hh, read_tensor(ctx, model, scope, "decoder.rnn.bias_hh", {4 * h}));
  w.lstm.b = nn::add(bias_ih, bias_hh);
  SOTTO_ASSIGN(nn::Tensor head_weight, read_tensor(ctx, model, scope, "decoder.decoder.2.weight", {1, h, 1}));
  w.head_weight = head_weight.reshape({1, h});
  SOTTO_ASSIGN(w.head_bias, read_tensor(ctx, model, scope, "decoder.decoder.2.bias", {1}));

  // The encoder must reduce the STFT's time steps to exactly one LSTM step (the graph's mean over time is
  // then the identity); true for both rates' fixed frame sizes.
  int length =
      (w.context_samples + w.frame_samples + w.pad_right_samples - w.window_samples) / w.hop_samples + 1;
  for (const EncoderConv& conv : w.encoder) length = conv_length(length, conv.stride);
  if (length != 1) return error("vad: encoder leaves ", length, " time steps, expected 1");
  return w;
}

namespace {

// A copy of `t` on `ctx` (the GPU upload).
nn::Tensor copy_to(nn::Context& ctx, const nn::Tensor& t) {
  return ctx.from_bytes(t.shape(), t.dtype(), {t.data<uint8_t>(), static_cast<size_t>(t.bytes())});
}

}  // namespace

SileroVad::SileroVad(const SileroWeights& weights, gpu::Device* device) : weights_(&weights) {
  if (device) {
    ctx_ = nn::Context::webgpu(*device);
    auto g = std::make_unique<SileroWeights>();
    g->sample_rate_hz = weights.sample_rate_hz;
    g->frame_samples = weights.frame_samples;
    g->context_samples = weights.context_samples;
    g->window_samples = weights.window_samples;
    g->hop_samples = weights.hop_samples;
    g->pad_right_samples = weights.pad_right_samples;
    g->frequency_bins = weights.frequency_bins;
    g->hidden = weights.hidden;
    g->stft_basis = copy_to(*ctx_, weights.stft_basis);
    for (size_t i = 0; i < weights.encoder.size(); ++i) {
      g->encoder[i].weight = copy_to(*ctx_, weights.encoder[i].weight);
      g->encoder[i].bias = copy_to(*ctx_, weights.encoder[i].bias);
      g->encoder[i].stride = weights.encoder[i].stride;
    }
    g->lstm.w_ih = copy_to(*ctx_, weights.lstm.w_ih);
    g->lstm.w_hh = copy_to(*ctx_, weights.lstm.w_hh);
    g->lstm.b = copy_to(*ctx_, weights.lstm.b);
    g->head_weight = copy_to(*ctx_, weights.head_weight);
    g->head_bias = copy_to(*ctx_, weights.head_bias);
    gpu_weights_ = std::move(g);
    weights_ = gpu_weights_.get();
  } else {
    ctx_ = nn::Context::cpu();
  }
  reset();
}

void SileroVad::reset() {
  const SileroWeights& w = *weights_;
  input_.assign(static_cast<size_t>(w.context_samples + w.frame_samples), 0.0f);
  h_ = ctx_->zeros({w.hidden});
  c_ = ctx_->zeros({w.hidden});
}

// The graph of silero.h, one op per line of its figure.
float SileroVad::forward(std::span<const float> frame) {
  using namespace nn;
  const SileroWeights& w = *weights_;

  // Input = [the previous input's last context samples | the new frame].
  std::memmove(input_.data(), input_.data() + w.frame_samples, sizeof(float) * w.context_samples);
  for (int i = 0; i < w.frame_samples; ++i) {
    const float x = i < static_cast<int>(frame.size()) ? frame[i] : 0.0f;
    input_[w.context_samples + i] = std::isfinite(x) ? x : 0.0f;
  }
  Tensor x = ctx_->from_floats({1, static_cast<int64_t>(input_.size())}, input_);
  x = pad_reflect(x, 1, 0, w.pad_right_samples);

  // STFT magnitude: the basis as a conv, rows 0..bins real and bins..2 bins imaginary -> [bins, steps].
  const Tensor spectrum = conv1d(x, w.stft_basis, {}, {.stride = w.hop_samples});
  const int64_t bins = w.frequency_bins;
  const Tensor re = slice(spectrum, 0, 0, bins), im = slice(spectrum, 0, bins, 2 * bins);
  x = activation(add(activation(re, Act::Square), activation(im, Act::Square)), Act::Sqrt);

  // Encoder: 4 x (conv1d k=3 pad=1 + ReLU) -> [hidden, 1].
  for (const EncoderConv& conv : w.encoder)
    x = relu(conv1d(x, conv.weight, conv.bias, {.stride = conv.stride, .padding = 1}));

  // Decoder: one LSTM step (state carried between frames), ReLU, 1x1 conv, sigmoid.
  const Tensor h = lstm(x.reshape({1, w.hidden}), w.lstm, false, h_, c_, &h_, &c_);
  const Tensor p = sigmoid(linear(relu(h), w.head_weight, w.head_bias));
  if (ctx_->backend() == Backend::Cpu) return p.f32()[0];
  auto read = ctx_->to_floats(p);  // runs the frame's recorded dispatches
  if (!read.ok() || read->empty()) {
    if (status_.ok())
      status_ = error("vad: ", read.ok() ? std::string("the GPU returned no probability") : read.message());
    return std::numeric_limits<float>::quiet_NaN();
  }
  return (*read)[0];
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
