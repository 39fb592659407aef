// NVIDIA Parakeet TDT (parakeet-tdt-0.6b-v2 / v3): a FastConformer encoder and a Token-and-Duration
// Transducer decoder (Rekesh et al. 2023, "Fast Conformer with Linearly Scalable Attention"; Xu et al. 2023,
// "Efficient Sequence Transduction by Jointly Predicting Tokens and Durations"), on sotto's op layer
// (nn/ops.h).
//
//   audio 16 kHz -> nemo128 log-mel [128, T] (audio/mel.h)
//   subsampling x8: conv2d 1->C 3x3 s2 + ReLU, 2 x [depthwise 3x3 s2 + pointwise 1x1 + ReLU],
//                   [C, T/8, 16] -> per frame C*16 -> linear -> d_model (80 ms a frame)
//   N FastConformer blocks (v2/v3: 24, d_model 1024, 8 heads, FF 4096):
//     x += 0.5 FF(LN(x))                      FF = linear -> SiLU -> linear
//     x += MHSA(LN(x))                        Transformer-XL relative positions: pos_bias_u/v, linear_pos,
//                                             rel-shift, sinusoids over positions T-1 .. -(T-1) (sin, cos
//                                             interleaved); no input scaling (xscaling off in v2/v3)
//     x += Conv(LN(x))                        pointwise C->2C, GLU, depthwise k=9, batch norm (folded into
//                                             the depthwise conv at load), SiLU, pointwise C->C
//     x += 0.5 FF(LN(x));  x = LN(x)
//   TDT: prediction net = embedding [V+1, 640] (blank = V is also the start symbol) -> 2-layer LSTM 640 ->
//        linear; joint = linear_out(ReLU(linear_enc(enc_t) + pred)) -> V+1 token logits + 5 duration logits.
//   Greedy: token and duration argmax per step; the prediction net advances only on non-blank; a blank with
//   duration 0 moves one frame; at most max_symbols_per_step symbols on one frame, then one frame on (NeMo's
//   guard; transformers' generate() has none and can loop on a frame until its length cap).
//
// Files: the Hugging Face transformers layout (config.json + model.safetensors of ParakeetForTDT); the config
// is checked against every tensor's shape. Where the time goes (v2 shape, 6 s, 2 threads): the 24 blocks'
// products (gemm: ~3/4 of the encoder's samples; encoder ~0.74 s here against ONNX Runtime's ~0.61 s on the
// same export, bench/results/2026-12-05-parakeet-cpu.md), the elementwise ops and the subsampling's convs a
// few per cent each, then the decoder's LSTM, one step per emitted token (two 640-wide layers, ~26 MB of
// float32 weights read a step: ~0.9 ms).
//
// Long audio: the encoder's attention is global (memory and time grow with T^2: 2 h would be 90,000 frames),
// so transcribe() cuts audio longer than max_chunk_s (30 s) into consecutive chunks, each cut on an
// encoder-frame boundary at the quietest 80 ms in the chunk's last quarter (at most 4 s back), and decodes
// each on its own (a word across a cut may still be split when no pause is near). A caller with a VAD
// (models/vad/segmenter.h) should pass speech segments instead: cuts then fall in silence. Local attention
// (NeMo's rel_pos_local_attn) would avoid the cuts, but v2/v3 were trained with global attention.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <unordered_set>
#include <vector>

#include "audio/mel.h"
#include "core/error.h"
#include "nn/ops.h"
#include "nn/weights.h"

namespace sotto::asr {

struct ParakeetConfig {
  // Encoder.
  int d_model = 1024, n_layers = 24, n_heads = 8, ff_dim = 4096, conv_kernel = 9;
  int subsampling_channels = 256, subsampling_factor = 8, n_mels = 128;
  bool attention_bias = false, convolution_bias = false, scale_input = false;
  // Decoder and joint.
  int vocab_size = 1025;  // tokens + blank (transformers' vocab_size)
  int blank_id = 1024;
  int decoder_hidden = 640, decoder_layers = 2, max_symbols_per_step = 10;
  std::vector<int> durations = {0, 1, 2, 3, 4};
  std::string joint_activation = "relu";

  int head_dim() const { return d_model / n_heads; }
  int subsampled_mels() const;  // n_mels after the stride-2 convs (16 for 128 mels, x8)
};

// config.json of a ParakeetForTDT (model_type "parakeet_tdt"), checked for what this implementation runs.
Result<ParakeetConfig> parse_parakeet_config(std::string_view json_text,
                                             std::string_view file_name = "config.json");

// The norms' shifts before products (ff1, attn, conv, ff2 _norm_b) are folded into those products' biases at
// load (nn::fold_norm_shift) and left undefined.
struct ParakeetBlock {
  nn::Tensor ff1_norm_w, ff1_norm_b, ff1_w1, ff1_b1, ff1_w2, ff1_b2;
  nn::Tensor attn_norm_w, attn_norm_b, wq, bq, wk, bk, wv, bv, wo, bo, w_pos, pos_bias_u, pos_bias_v;
  nn::Tensor conv_norm_w, conv_norm_b, pw1_w, pw1_b, dw_w, dw_b, pw2_w, pw2_b;  // dw: batch norm folded in
  nn::Tensor ff2_norm_w, ff2_norm_b, ff2_w1, ff2_b1, ff2_w2, ff2_b2;
  nn::Tensor out_norm_w, out_norm_b;
  // On the GPU (load_on, f32 matrices): wq, wk, wv stacked [3 d_model, d_model] with their biases, for one
  // product whose three column blocks the attention reads in place; wq, wk, wv then undefined.
  nn::Tensor w_qkv, b_qkv;
};

struct ParakeetWeights {
  ParakeetConfig config;
  // Declared first so it is destroyed last: the tensors below live in it.
  std::unique_ptr<nn::Context> ctx;
  nn::Tensor sub_conv0_w, sub_conv0_b;         // [C, 1, 3, 3]
  std::vector<nn::Tensor> sub_dw_w, sub_dw_b;  // [C, 1, 3, 3]
  std::vector<nn::Tensor> sub_pw_w, sub_pw_b;  // [C, C, 1, 1]
  nn::Tensor sub_linear_w, sub_linear_b;       // [d_model, C * subsampled_mels]
  std::vector<ParakeetBlock> blocks;
  // On the GPU (load_on, f32 matrices): every block's w_pos stacked [n_layers d_model, d_model], for one product
  // of the positions' table a clip (each block's w_pos then undefined).
  nn::Tensor w_pos_all;
  nn::Tensor enc_proj_w, enc_proj_b;  // joint's encoder side [dec, d_model]
  nn::Tensor embedding;               // [vocab_size, dec]
  std::vector<nn::LstmWeights> lstm;  // per layer, b = bias_ih + bias_hh
  nn::Tensor dec_proj_w, dec_proj_b;  // joint's prediction side [dec, dec]
  nn::Tensor joint_w, joint_b;        // [vocab_size + durations, dec]
};

// The tensors of `source` for `config`, every name and shape checked (one-line errors naming the file, the
// tensor and both shapes). `ctx` is the CPU context the weights live on (with a pool for threads).
Result<ParakeetWeights> load_parakeet_weights(const nn::WeightSource& source, const ParakeetConfig& config,
                                              std::unique_ptr<nn::Context> ctx);

struct TdtResult {
  std::vector<int32_t> tokens;     // non-blank token ids
  std::vector<int32_t> frames;     // the encoder frame each was emitted on (80 ms units)
  std::vector<int32_t> durations;  // the duration predicted with it (frames)
};

// One greedy TDT step's outcome as the joint gives it: the argmax token and the argmax duration bin's value.
struct TdtStep {
  int32_t token = 0;
  int32_t duration = 0;
};

// The greedy loop's bookkeeping alone, over n_frames encoder frames: `step(t)` evaluates the joint at frame t
// with the current prediction state; `advance(token)` feeds a non-blank token to the prediction net. Shared
// by the model and by the test that replays a real decode's recorded steps.
template <class Step, class Advance>
TdtResult tdt_greedy(int64_t n_frames, int32_t blank_id, int max_symbols_per_step, Step step,
                     Advance advance) {
  TdtResult out;
  int64_t t = 0;
  int symbols = 0;
  while (t < n_frames) {
    const TdtStep s = step(t);
    int32_t d = s.duration;
    if (s.token != blank_id) {
      out.tokens.push_back(s.token);
      out.frames.push_back(static_cast<int32_t>(t));
      out.durations.push_back(d);
      advance(s.token);
      ++symbols;
    } else if (d == 0) {
      d = 1;
    }
    if (d == 0 && symbols >= max_symbols_per_step) d = 1;
    if (d > 0) symbols = 0;
    t += d;
  }
  return out;
}

// Whether `dir` holds a Parakeet model: config.json whose model_type starts with "parakeet" (native; open()
// then refuses any but parakeet_tdt with one line).
bool is_parakeet_dir(const std::string& dir);

class ParakeetModel {
 public:
  // A directory with config.json + model.safetensors (native).
  static Result<std::unique_ptr<ParakeetModel>> open(const std::string& dir, int n_threads = 2);
  // The same from bytes (copied onto the model's context: the caller may free them after), on a pool of
  // n_threads of the model's own (native helper threads; in wasm, where only JS can start helpers, one
  // thread).
  static Result<std::unique_ptr<ParakeetModel>> load(std::string_view config_json,
                                                     std::span<const uint8_t> safetensors_bytes,
                                                     std::string file_name = "model.safetensors",
                                                     int n_threads = 1);
  // The same on the caller's pool (it must outlive the model): the C API's handle passes its own, which on
  // the web is the pool whose helper Web Workers JS started (web/pool.js).
  static Result<std::unique_ptr<ParakeetModel>> load(std::string_view config_json,
                                                     std::span<const uint8_t> safetensors_bytes,
                                                     std::string file_name, ThreadPool& pool);
  // The same, then every weight copied onto `ctx` (nn::Context::webgpu: the encoder and the TDT loop's ops run
  // on the GPU; the device must outlive the model). models/asr/parakeet_gpu.cpp.
  // host_threads: the model's own pool for its host work (the mel; natively only: wasm's helpers come from JS).
  static Result<std::unique_ptr<ParakeetModel>> load_on(std::unique_ptr<nn::Context> ctx,
                                                        std::string_view config_json,
                                                        std::span<const uint8_t> safetensors_bytes,
                                                        std::string file_name = "model.safetensors",
                                                        int host_threads = 1);
  ~ParakeetModel();

  const ParakeetConfig& config() const { return weights_.config; }
  // The context the weights live on (its gpu() recorder, on WebGPU, profiles the kernels).
  nn::Context& context() { return *weights_.ctx; }
  // Stores the encoder's and joint's matrices (every linear and pointwise-conv weight: ~99 % of the bytes) as
  // float16, halving memory (v2: 2.4 -> 1.2 GB); products widen them per call. On the CI model the encoder
  // moves by ~1e-3 and every token is unchanged (tests/unit/parakeet_test.cpp). Convolution kernels, norms,
  // biases, the embedding and the LSTM stay float32.
  void use_half_matrices();
  // Copies the encoder's float32 matrices (every Linear and pointwise conv of the blocks, and the subsampling's
  // Linear) into the CPU product kernel's panels once (nn/gemm.h gemm_pack_b), in place of their rows: each
  // product then skips re-packing its weight (~25 % of the encoder's time at 6 s of audio). Same bytes, the
  // same results bit for bit; CPU only (the tensors no longer hold rows for other backends).
  void use_packed_matrices();
  // Where the CPU has AMX-BF16 (nn/gemm.h gemm_bf16_use_amx: Intel Sapphire Rapids and later), splits the same
  // matrices into bf16 highs and lows in the tile kernel's panels instead (the same 4 bytes a weight); their
  // products then run as three bf16 products with float sums (nn/gemm_bf16.cpp), each within ~2^-16 of the
  // float product, on tiles that do ~16 times the multiply-adds per cycle of float FMAs. Not the float32
  // function, but close to it: the encoder within ~1e-4 and every token unchanged (tests/unit/parakeet_test.cpp,
  // bench/parakeet.mjs). Returns false, changing nothing, on other CPUs. CPU only.
  bool use_bf16x3_products();

  // The normalised log-mel features of 16 kHz audio (audio/mel.h), on the host over the model's threads (the
  // CPU context's pool; on the GPU, load_on's host_threads): 4-7 ms of one core of the H100 machines' host for
  // 6 s of audio, a fifth of the GPU's whole transcription there.
  audio::MelFeatures mel(std::span<const float> audio_16k) const;
  // Encoder output [T', d_model] of normalised log-mel features [n_mels, T] (channels-major as audio/mel.h
  // gives them).
  nn::Tensor encode(std::span<const float> mel, int64_t n_frames);
  // Greedy TDT over encoder output [T', d_model].
  TdtResult decode(const nn::Tensor& encoder_out);
  // Audio (16 kHz mono) to tokens: mel, encoder, decoder. Non-finite samples are an error naming the first;
  // audio longer than max_chunk_s is decoded in chunks (frames stay in whole-clip units).
  Result<TdtResult> transcribe(std::span<const float> audio_16k, double max_chunk_s = 30.0);

 private:
  ParakeetModel() = default;
  // One block; p: the positions' table projected by the block's w_pos [2T - 1, d_model].
  nn::Tensor block(const nn::Tensor& x, const ParakeetBlock& b, const nn::Tensor& p);
  nn::Tensor positions(int64_t t);
  // decode() when the weights are on the GPU: the loop's state stays there (nn/gpu_tdt.cpp).
  TdtResult decode_on_gpu(const nn::Tensor& encoder_out);
  // nn::linear, or the pre-packed product when use_packed_matrices() or use_bf16x3_products() packed w.
  nn::Tensor linear(const nn::Tensor& x, const nn::Tensor& w, const nn::Tensor& b = {}) const;

  std::unique_ptr<ThreadPool>
      own_pool_;  // load(..., n_threads)'s; declared first: the weights' context uses it
  ParakeetWeights weights_;
  std::unordered_set<const void*> packed_;  // data of the matrices use_packed_matrices() packed
  std::unordered_set<const void*> bf16_;    // data of the matrices use_bf16x3_products() packed
  nn::Tensor positions_;                    // positions()' table for the longest clip so far, of positions_t_
  int64_t positions_t_ = 0;
};

}  // namespace sotto::asr
