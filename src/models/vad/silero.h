// Silero VAD v5 / v6 (silero_vad.onnx) on sotto's op layer (nn/ops.h): the weights are read from the ONNX
// file's initializers/Constants into nn tensors and forward() is the graph below written with ops. It is ~300K
// parameters and ~0.7M multiply-adds per 32 ms frame, so per-call overhead matters more than threads: one
// thread (a context without a pool), every conv one register-blocked product (nn/gemm.h), vector exp / tanh.
//
// The graph, as read from the file's If node (then_branch = 16 kHz, else_branch = 8 kHz; numbers for 16 kHz,
// 8 kHz in brackets):
//   input      context (64 [32] samples: the end of the previous window, zeros at first) + 512 [256] new
//   pad        reflect-pad on the RIGHT only by 64 [32] -> 640 [320] samples (pads = [0, 0, 0, 64])
//   stft       conv1d with stft.forward_basis_buffer [258,1,256] ([130,1,128]), stride 128 [64], no pad
//              -> 4 time steps; rows 0..128 real, 129..257 imaginary; magnitude sqrt(re^2 + im^2) [129,4]
//   encoder    4 x (conv1d k=3 pad=1 + ReLU): [128,129] s1, [64,128] s2, [64,64] s2, [128,64] s1 -> [128,1]
//   decoder    LSTM cell (PyTorch gate order i,f,g,o; bias_ih + bias_hh), state (h, c) carried between frames
//              then ReLU(h) -> conv1d [1,128,1] + bias -> sigmoid -> mean over time (one step here)
// The ONNX state tensor [2,1,128] is (h, c).
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "core/error.h"
#include "io/onnx.h"
#include "nn/ops.h"

namespace sotto::gpu {
class Device;
}

namespace sotto::vad {

// An encoder layer: conv1d k=3 pad=1 (weight [out][in][3], bias [out]) + ReLU.
struct EncoderConv {
  nn::Tensor weight, bias;
  int stride = 1;
};

struct SileroWeights {
  uint32_t sample_rate_hz = 16000;
  int frame_samples = 512;     // new samples per call
  int context_samples = 64;    // previous samples prepended to each frame
  int window_samples = 256;    // STFT window (the basis' kernel)
  int hop_samples = 128;       // STFT stride
  int pad_right_samples = 64;  // reflect padding after the window
  int frequency_bins = 129;    // window / 2 + 1
  int hidden = 128;            // LSTM size

  // Declared first so it is destroyed last: the tensors below live in it.
  std::unique_ptr<nn::Context> ctx = nn::Context::cpu();
  nn::Tensor stft_basis;  // [2 * frequency_bins, 1, window_samples]: real rows, then imaginary rows
  std::array<EncoderConv, 4> encoder;
  nn::LstmWeights lstm;    // w_ih, w_hh [4 * hidden, hidden] (gates i, f, g, o), b = bias_ih + bias_hh
  nn::Tensor head_weight;  // [1, hidden]  (decoder.decoder.2.weight [1,128,1])
  nn::Tensor head_bias;    // [1]
};

// Reads the weights for `sample_rate_hz` (16000, or 8000 from the else branch) out of a parsed Silero VAD
// file. Every tensor is found by name in the branch that holds stft.forward_basis_buffer of the right size,
// checked for dtype float32 and exact shape; a mismatch fails with e.g.
//   vad: tensor 'encoder.1.reparam_conv.weight' has shape [64,128,5], expected [64,128,3]
Result<SileroWeights> load_silero_weights(const OnnxModel& model, uint32_t sample_rate_hz = 16000);

// One stream: carries the LSTM state and the sample context from call to call.
class SileroVad {
 public:
  // Keeps a reference: the weights must outlive it. With `device` the stream runs on the GPU (its own copy of
  // the weights there, the forward pass recorded as WebGPU dispatches and read back once per frame).
  explicit SileroVad(const SileroWeights& weights, gpu::Device* device = nullptr);

  // Speech probability of the next frame_samples() samples (exactly that many; shorter spans are zero-padded,
  // extra samples ignored). NaN/Inf samples are read as 0 so one bad sample cannot poison the carried state.
  float forward(std::span<const float> frame);
  // Back to the start of a stream: zero state, zero context.
  void reset();

  // The first GPU failure (a lost device, a kernel that failed to compile), or ok; forward() returns NaN then.
  Status status() const { return status_; }

  int frame_samples() const { return weights_->frame_samples; }
  uint32_t sample_rate_hz() const { return weights_->sample_rate_hz; }

 private:
  const SileroWeights* weights_;
  // This stream's activations (pooled: no allocation after the first frame), on the CPU or the GPU; declared
  // before gpu_weights_, whose tensors live in it on the GPU.
  std::unique_ptr<nn::Context> ctx_;
  std::unique_ptr<SileroWeights> gpu_weights_;
  Status status_;
  std::vector<float> input_;  // context + frame
  nn::Tensor h_, c_;          // LSTM state [hidden]
};

// Probabilities for a whole signal: frames of frame_samples() from the start, the last partial frame
// zero-padded (Silero's own get_speech_timestamps does the same). An empty signal gives no frames.
std::vector<float> speech_probabilities(SileroVad& vad, std::span<const float> samples);

}  // namespace sotto::vad
