// Moonshine base (English) speech recognition (Useful Sensors, "Moonshine: Speech Recognition for Live
// Transcription and Voice Commands", 2024; Hugging Face's MoonshineForConditionalGeneration), from the .ort
// files of the moonshine-cpp 0.1.4 package, written once against nn/ops.h.
//
// The network, as read from the files' graphs (tools/moonshine/ort_dump.py prints them):
//   encoder  input: raw 16 kHz audio [N]
//     conv1 [416,1,127] stride 64, no bias -> tanh -> group norm (1 group, eps 1e-5, gamma/beta [416])
//     conv2 [832,416,7] stride 3 + bias -> GELU (erf)
//     conv3 [416,832,3] stride 2 + bias -> GELU (erf)        -> [T, 416], T = ((N-127)/64+1-7)/3+1-3)/2+1
//     8 x pre-norm transformer layer (d_model 416, 8 heads of 52, no attention biases):
//       x += o(attention(rope(q(h)), rope(k(h)), v(h)))   h = layer_norm(x)      (full attention)
//       x += fc2(gelu(fc1(layer_norm(x)) + b1)) + b2       fc1 416 -> 1664
//     layer_norm                                            -> last_hidden_state [T, 416]
//   decoder  input: token ids, the encoder output; per layer a self-attention KV cache
//     embedding [32768, 416] (tied with the output head, no scaling)
//     8 x layer:
//       x += o(attention(rope(q(h)), rope(k(h)), v(h), causal))   h = layer_norm(x), k/v appended to the cache
//       x += o'(attention(q'(layer_norm(x)), k'(enc), v'(enc)))   k'/v' computed once per utterance
//       u = up(layer_norm(x)) + b (416 -> 3328); x += down(u[:1664] * silu(u[1664:])) + b   (gated SiLU)
//     layer_norm -> logits = x . embedding^T [32768] (ids >= 32000 are never in the tokenizer)
//   Layer norms are LayerNorm without bias (mean and variance, eps 1e-5, gamma only), not RMS norm.
//   Rotary embedding: the first 32 of each head's 52 dims, interleaved pairs (2i, 2i+1) (GPT-J style), inverse
//   frequencies 10000^(-2i/32), positions from 0 in the encoder and from the cache length in the decoder.
//   Attention scale 1/sqrt(52) (the graph multiplies q and k by 52^-1/4 each).
//   Weights: every matrix and conv weight is weight-only int8 with ONE float scale and ONE float offset per
//   tensor, dequantized in the graph as Cast(int8) -> Mul(scale) -> Add(zero_point): w = q * scale + offset
//   (the "zero point" is added in float, not subtracted in int8). Matrices are stored [in, out] (ONNX MatMul).
//   At load the encoder's are dequantized to F32 [out, in] (its products have a row per frame: compute-bound,
//   nn::linear's f32 gemm), the decoder's and the embedding are kept int8, transposed to [out, in], with their
//   scale and offset (a decoder step is one row: bound by the weight bytes it reads, nn::linear_int8_affine),
//   except the cross-attention keys / values, applied once per utterance to every frame (F32).
//   Initializer names are the exporter's ("onnx::MatMul_1947_quantized"), so the loader finds each weight
//   through the graph: the MatMul whose output is "/layers.0/self_attn/q_proj/MatMul_output_0" reads it.
//
// Greedy decoding starts from BOS (1) and stops at EOS (2) or after about 6.5 tokens per second of audio.
// tokenizer.bin: 32,000 entries [u8 length][bytes] (ids 0/1/2 <unk>/<s>/</s>, 3..258 raw bytes, "▁" a space).
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "core/error.h"
#include "io/onnx.h"
#include "io/ort.h"
#include "models/asr/moonshine_gpu_step.h"
#include "nn/tensor.h"

namespace sotto::asr {

struct MoonshineConfig {
  int d_model = 416;
  int n_heads = 8;
  int head_dim = 52;
  int rotary_dim = 32;
  float rope_base = 10000.0f;
  float norm_eps = 1e-5f;
  int encoder_layers = 8;
  int decoder_layers = 8;
  int encoder_ff = 1664;
  int decoder_ff = 1664;  // up_proj gives 2 x this (value, gate)
  int vocab = 32768;
  int bos = 1, eos = 2;
  int sample_rate_hz = 16000;
  double max_tokens_per_s = 6.5;
};

// A matrix as the file stores it: int8 [out, in] with the tensor's float scale and offset (read as int8 by
// nn::linear_int8_affine: a decoder step is bound by the weight bytes it reads), or F32 [out, in] when the file
// holds floats. The CPU's many-row products (the encoder's, the cross K/V) hold it packed once instead:
// nn::cpu::gemm_pack_b's F32 panels (MoonshineWeights::encoder_packed) or, in WebAssembly, the int8 weight's
// int16 panels (I16, nn::cpu::pack_weight_int8) with its scale and offset (moonshine_encoder_linear).
struct MoonshineMatrix {
  nn::Tensor w;
  float scale = 1.0f, offset = 0.0f;
};

// q..o [416, 416] and fc1 / fc2 [out, in].
struct MoonshineEncoderLayer {
  nn::Tensor attn_norm;
  MoonshineMatrix q, k, v, o;
  // GPU: q, k and v stacked [3 x 416, 416] (q, k, v undefined there), one product where three were three
  // dispatches, read by nn::attention_stacked in place.
  nn::Tensor qkv;
  nn::Tensor mlp_norm, fc1_b, fc2_b;
  MoonshineMatrix fc1, fc2;
};

struct MoonshineDecoderLayer {
  nn::Tensor attn_norm;
  MoonshineMatrix q, k, v, o;
  // GPU weights with int8 q, k, v only: the three stacked [3 x 416, 416], each with its scale and offset, for
  // one fused dispatch (norm, product, rope, KV-cache append; nn/fused.h). Kept beside q, k, v (4 MB more for
  // the 8 layers). The CPU runs the three products (stacking them gave no measurable gain there).
  nn::Tensor qkv;
  std::array<float, 4> qkv_scale = {1, 1, 1, 1}, qkv_offset = {0, 0, 0, 0};
  nn::Tensor cross_norm;
  MoonshineMatrix cross_q, cross_o;
  // [416, 416], applied once per utterance to every encoder frame: F32, or packed as the encoder's matrices.
  // Undefined on the GPU, which has MoonshineWeights::cross_kv instead.
  MoonshineMatrix cross_k, cross_v;
  nn::Tensor mlp_norm, up_b, down_b;
  MoonshineMatrix up, down;
};

struct MoonshineWeights {
  MoonshineConfig config;
  nn::Tensor conv1, conv2, conv2_b, conv3, conv3_b, group_norm_gamma, group_norm_beta;
  std::vector<MoonshineEncoderLayer> encoder;
  // The encoder's matrices and the decoder's cross K/V are packed once at load (CPU backend): each product then skips the per-call copy of
  // its weight into panels, which every thread of a split product makes (~8 % of a linear on one thread).
  bool encoder_packed = false;
  nn::Tensor encoder_norm;
  MoonshineMatrix embedding;  // [vocab, d_model]: the input table and the output head
  std::vector<MoonshineDecoderLayer> decoder;
  nn::Tensor decoder_norm;
  // GPU: every decoder layer's cross_k and cross_v stacked, F32 [2 x 8 x 416, 416] (layer i's K at block 2i, V at
  // 2i + 1), for one product over the encoder output where 16 products were 16 dispatches (each of 169
  // workgroups, too few to fill a large GPU).
  nn::Tensor cross_kv;
  // Natively on a GPU: the decoder step as one persistent dispatch (moonshine_gpu_step.h), where it can run.
  std::shared_ptr<MoonshineStepKernel> step_kernel;
};

// Reads both parsed files' weights onto `ctx`, every shape checked; errors name the file and the tensor or
// graph node, e.g. "decoder_model_merged.ort: no MatMul writes '/model/decoder/layers.3/mlp/up_proj/...'".
// A .onnx file is read into the same form (read_moonshine_graph).
Result<MoonshineWeights> load_moonshine_weights(nn::Context& ctx, const OrtModel& encoder,
                                                std::string_view encoder_name, const OrtModel& decoder,
                                                std::string_view decoder_name, bool int16_products = false);
// A graph's weights and node list from a .ort file, or from a .onnx one into the same form (the tensors then
// view `onnx`'s bytes: keep it and the file alive). `name` prefixes errors; a name ending in ".ort" is read
// as ONNX Runtime's format whatever the bytes.
Result<OrtModel> read_moonshine_graph(std::span<const uint8_t> bytes, std::string_view name, OnnxModel& onnx);

class MoonshineTokenizer {
 public:
  // tokenizer.bin (the package's) or, when the bytes open with '{', a Hugging Face tokenizer.json (its
  // model.vocab {piece: id}; "<0xHH>" pieces are that byte, as byte-fallback BPE writes them).
  static Result<MoonshineTokenizer> parse(std::span<const uint8_t> bytes);
  // The text of `ids` (special and unknown ids skipped, "▁" as a space, leading space dropped).
  std::string decode(std::span<const int32_t> ids) const;
  size_t size() const { return pieces_.size(); }

 private:
  std::vector<std::string> pieces_;
};

// Audio [N] at 16 kHz -> encoder output [T, d_model].
nn::Tensor moonshine_encode(const MoonshineWeights& w, const nn::Tensor& audio);
// x . m^T + b for one of the encoder's matrices m (packed or not, as w holds them).
nn::Tensor moonshine_encoder_linear(const MoonshineWeights& w, const nn::Tensor& x, const MoonshineMatrix& m,
                                    const nn::Tensor& b = {});

// One utterance's decoder state: the cross-attention keys and values (once per encoder output) and the self-
// attention cache.
struct MoonshineDecoderState {
  std::vector<nn::Tensor> cross_k, cross_v;  // per layer [T_enc, 416]
  std::vector<nn::Tensor> self_k, self_v;    // per layer [n_past, 416], or [capacity, 416] preallocated
  int64_t n_past = 0;
  // GPU: the product every cross K/V is a view of ([16 x T padded to even, 416]: layer i's K block 2i, V 2i + 1),
  // and the step kernel's buffers where it runs (self_k / self_v are then views of step.caches).
  nn::Tensor cross_all;
  MoonshineStepBuffers step;
  // > 0: the GPU's fused decoder step (nn/fused.h: 6 dispatches a layer for one row, 8 for several), the
  // self-attention cache preallocated for this many tokens and appended in place.
  int64_t capacity = 0;
};
// `capacity`: the most tokens (BOS included) this utterance will feed; on the GPU, with the stacked q/k/v
// weights loaded, it selects the fused decoder step. 0: the op-by-op step (any backend, any length).
MoonshineDecoderState moonshine_decoder_start(const MoonshineWeights& w, const nn::Tensor& encoded,
                                              int64_t capacity = 0);
// Feeds `ids` (n tokens at positions n_past ..), appends to the cache, returns the logits of the last token
// [1, vocab], or of every token [n, vocab] with `all_logits` (teacher forcing).
nn::Tensor moonshine_decode(const MoonshineWeights& w, MoonshineDecoderState& state,
                            std::span<const int32_t> ids, bool all_logits = false);
// The same with the ids as a tensor on the model's context (I32 [n]): on the GPU, the previous step's argmax.
nn::Tensor moonshine_decode_ids(const MoonshineWeights& w, MoonshineDecoderState& state,
                                const nn::Tensor& ids, bool all_logits = false);

// The decoder's input rows for `ids` (I32 [n] on the model's context): the embedding table's rows, dequantized.
nn::Tensor moonshine_embed(const MoonshineWeights& w, const nn::Tensor& ids);

// Greedy decoding from BOS on the GPU's fused step (state from moonshine_decoder_start with a capacity of at
// least max_tokens + 1): the tokens without BOS and EOS, at most max_tokens. Batched (what moonshine_transcribe
// runs): the loop's state stays on the GPU (nn::greedy_step), steps recorded in batches with one batch in
// flight, the tokens read once per batch. OneStepInFlight: each step's token read back, the next step recorded
// before the read; the reference the batched loop is tested against.
enum class MoonshineGpuLoop { Batched, OneStepInFlight };
Result<std::vector<int32_t>> moonshine_greedy_gpu(const MoonshineWeights& w, MoonshineDecoderState& state,
                                                  size_t max_tokens,
                                                  MoonshineGpuLoop loop = MoonshineGpuLoop::Batched);

struct MoonshineResult {
  std::vector<int32_t> tokens;  // without BOS and EOS
  double encode_ms = 0, decode_ms = 0;
};
// Greedy transcription of one window of audio (16 kHz, finite samples).
Result<MoonshineResult> moonshine_transcribe(const MoonshineWeights& w, std::span<const float> audio_16k);

// A loaded model directory: the package's (encoder_model.ort, decoder_model_merged.ort, tokenizer.bin) or the
// hub's ONNX layout (encoder_model.onnx, decoder_model_merged.onnx, tokenizer.json), each file's format told by
// its bytes. The files' bytes are only needed while loading.
struct MoonshineModel {
  std::unique_ptr<nn::Context> ctx;
  MoonshineWeights weights;
  MoonshineTokenizer tokenizer;
};
struct MoonshineLoadOptions {
  // Prefix errors; empty: the layout's names for the format the bytes hold.
  std::string_view encoder_name, decoder_name;
  // The CPU's many-row products (the encoder's linears, the cross-attention's K/V) in int16 x int8
  // (nn::cpu::linear_int8_affine_prepacked: x rounded to int16 per row, as the decoder's one-row products
  // are) rather than in float. By default in WebAssembly, where they run 1.5-1.75x relaxed SIMD's float
  // multiply-adds on a Zen 5 (1.0-1.1x on a Zen 2; bench/wasm_kernels/gemm_i16.mjs); natively float (AVX-512
  // / AVX2 FMA). The encoder output moves from ONNX Runtime's by up to ~2e-3 (float: ~2e-4; values up to ~7),
  // the tokens do not (tests/unit/moonshine_test.cpp).
#if defined(__wasm__)
  bool int16_products = true;
#else
  bool int16_products = false;
#endif
};
Result<MoonshineModel> load_moonshine(std::span<const uint8_t> encoder, std::span<const uint8_t> decoder,
                                      std::span<const uint8_t> tokenizer, std::unique_ptr<nn::Context> ctx,
                                      const MoonshineLoadOptions& options = {});

}  // namespace sotto::asr
