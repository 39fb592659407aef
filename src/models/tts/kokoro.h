// Kokoro-82M v1.0 text-to-speech (hexgrad; StyleTTS 2's inference path with an iSTFTNet vocoder) on the op
// layer (nn/ops.h), read from the kokoro-onnx export quantized to dynamic int8 (kokoro-v1.0.int8.onnx,
// 92,361,271 bytes). The graph, as read from the file with tools/kokoro_reference.py --list-stages (module
// paths are the node names'; T = phoneme ids + 2, F = frames of 600 samples = 25 ms at 24 kHz):
//
//   inputs     tokens [1, T] int64 (0, ids..., 0); style [1, 256] = the voice's row n, n = the number of
//              phoneme ids (kokoro-js and kokoro-onnx; another pipeline uses n - 1); speed [1].
//              style[:128] conditions the decoder, style[128:] the prosody predictor.
//   bert       ALBERT (PL-BERT): int8 embeddings (word 178x128, position 512x128, token type) dequantized,
//              summed, LayerNorm (eps 1e-12) -> 128->768 mapping -> ONE shared layer applied 12 times:
//              q,k,v (768x768 int8) -> 12-head attention in float (q and k each scaled by 8^-1/2) -> dense ->
//              residual + LayerNorm -> FFN 768->2048 FastGelu (tanh) -> 2048->768 -> residual + LayerNorm.
//   bert_encoder  768 -> 512 (d_en).
//   predictor.text_encoder (DurationEncoder): x = [d_en, style_p] (640) -> 3 x (BiLSTM 640 -> 2x256, AdaLayerNorm
//              (layer norm without affine, eps 1e-5, then (1 + gamma) x + beta with gamma, beta = fc(style_p)),
//              concat style_p) -> d [T, 640].
//   durations  BiLSTM 640 -> 512 -> duration_proj 512 -> 50 -> sigmoid -> sum over the 50 -> / speed ->
//              Round (half to even) -> Clip(min 1) frames per token.
//   alignment  one-hot [T, F] from the durations (CumSum / Range / Less / GreaterOrEqual in the graph);
//              en = d^T . aln and asr = t_en . aln are exactly row repeats (repeat_by_durations).
//   F0 / N     shared BiLSTM 640 -> 512 on en; then per branch 3 AdainResBlk1d: (512,512), (512,256, upsample:
//              depthwise ConvTranspose k3 s2 on the residual, nearest x2 + 1x1 conv on the shortcut),
//              (256,256); each block: AdaIN (instance norm eps 1e-5, (1 + gamma) x + beta) -> LeakyReLU 0.2 ->
//              conv k3 -> AdaIN -> LeakyReLU -> conv k3, (residual + shortcut) / sqrt 2; then a 1x1 conv to one
//              channel: F0 [2F] (Hz) and N [2F].
//   text_encoder  int8 embedding 178x512 -> 3 x (conv k5 -> LayerNorm over channels (eps 1e-5) -> LeakyReLU
//              0.2) -> BiLSTM 512 -> 2x256 = t_en [T, 512].
//   decoder    F0 and N: conv k3 stride 2 each -> [1, F]; x = [asr, F0, N] (514) -> encode AdainResBlk1d(514,
//              1024); asr_res = 1x1 conv 512 -> 64; 4 x decode blocks on [x, asr_res, F0, N] (1090): 3 x (1090,
//              1024), then (1090, 512, upsample) -> [512, 2F].
//   generator  iSTFTNet: harmonic source: F0 nearest x300 -> 9 harmonics h f0 / 24000 mod 1 -> per frame (a
//              linear 1/300 resize that lands on the frame's own value) -> CumSum over frames x 2 pi x 300 ->
//              linear x300 resize (half pixel) -> sin x 0.1, zero where F0 <= 10 Hz (unvoiced; the export has no
//              noise: two runs are identical) -> Linear 9 -> 1 -> tanh = source [600 F]. STFT of the source
//              (n_fft 20, hop 5, Hann, reflect-centred) -> magnitude and phase (atan2) = har [22, 120 F + 1].
//              x: LeakyReLU 0.1 -> ConvTranspose 512 -> 256 (k20, s10) + noise_convs.0(har) (conv k12 s6) through
//              AdaINResBlock1 (k7) -> mean of 3 AdaINResBlock1 (k3, 7, 11; dilations 1, 3, 5; Snake x + sin^2(a x)
//              / a) -> LeakyReLU 0.1 -> ConvTranspose 256 -> 128 (k12, s6), reflect pad (1, 0) + noise_convs.1(har)
//              (1x1) through AdaINResBlock1 (k11) -> mean of 3 resblocks -> LeakyReLU 0.01 -> conv_post 128 -> 22
//              (k7, float) -> magnitude exp(x[:11]), phase sin(x[11:]) -> inverse STFT as ConvTranspose of
//              [mag cos p, mag sin p] with the file's inverse_basis [22, 1, 20] stride 5, the first 20 samples
//              divided by window_sum (only there: the export's quirk), x 4, trimmed 10 at each end -> audio
//              [600 F] at 24 kHz.
//
// Arithmetic (what "the same as ONNX Runtime" means here): every MatMul / Conv with int8 weights is ONNX
// Runtime's dynamic quantization -- the activation quantized per tensor to uint8 (DynamicQuantizeLinear: round
// half to even), integer accumulation, then x_scale * w_scale (per output column for the linears; per tensor
// for the convs, whose weights are uint8 with a zero point; conv biases are quantized to the accumulator as
// floor(b / (x_scale w_scale))). LSTMs are DynamicQuantizeLSTM (int8 weights, per-direction scale). ALBERT's
// attention products, the ConvTransposes, conv_post and the inverse STFT are float.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.h"
#include "nn/ops.h"
#include "nn/tensor.h"
#include "nn/weights.h"

namespace sotto::tts {

inline constexpr int kKokoroSampleRateHz = 24000;
inline constexpr int kKokoroSamplesPerFrame = 600;  // one duration frame: 25 ms
inline constexpr int kKokoroStyleDim = 256;
inline constexpr int kKokoroVoiceRows = 510;
// Phoneme ids per call: ALBERT has 512 positions, two of them taken by the pads at both ends.
inline constexpr int kKokoroMaxPhonemes = 510;

// ---------------------------------------------------------------- phonemes and voices (kokoro_vocab.cpp)
// misaki-style IPA (UTF-8) -> Kokoro's ids, one per code point. Empty input and a symbol outside the table are
// errors naming the symbol and its byte offset (Kokoro's own pipelines drop unknown symbols silently).
Result<std::vector<int64_t>> kokoro_phoneme_ids(std::string_view phonemes);

// A voice: 510 x 256 float32 style vectors, row r for an utterance of r phoneme ids.
struct KokoroVoice {
  std::string name;
  std::vector<float> rows;  // [510][256]
  // The style for an utterance of n phoneme ids: row n (clamped to the last row).
  std::span<const float> style(size_t n_phonemes) const;
};
Result<KokoroVoice> kokoro_voice_from_bytes(std::string_view name, std::span<const uint8_t> bytes);

// ---------------------------------------------------------------- weights
struct QuantLinear {  // y = x . W + b, W int8 [in, out] with per-column scales (and zero points)
  nn::Tensor w, scales, zero_points, bias;
};
struct QuantConv {  // conv1d, W uint8 [out, in, k] with a per-tensor scale and zero point attached
  nn::Tensor w, bias;
  int kernel = 1, stride = 1, padding = 0, dilation = 1;
};
struct QuantBiLstm {
  nn::LstmWeights forward, backward;
};
struct
    AdaIn {  // fc: style [128] -> gamma, beta [C] each, a block of its stage's KokoroWeights::style_products
  int64_t channels = 0;
  int64_t at = 0;  // its gamma's first column in that product; beta's is at + kokoro_style_stride(channels)
};
// Columns from an AdaIN's gamma to its beta in a stacked style product: C rounded up to 64, so that every block
// starts 256 bytes into the product (a GPU binds gamma and beta there as views).
constexpr int64_t kokoro_style_stride(int64_t channels) {
  return (channels + 63) / 64 * 64;
}
// The stages whose AdaINs read the style: each stage's fcs stacked column-wise into one product. The style is
// constant over an utterance, so a stage's 3 to 48 small products (a quantization of the same 128 values, a
// product, a bias add and two slices each) become one; the sums and scales per column are the same, so the
// outputs are bit for bit those of the separate products.
enum KokoroStyleStage { kStyleDuration, kStyleProsody, kStyleDecoder, kStyleGenerator, kStyleStages };
struct AdainResBlock1d {  // StyleTTS 2's AdainResBlk1d
  AdaIn norm1, norm2;
  QuantConv conv1, conv2, shortcut;  // shortcut.w undefined when dim_in == dim_out
  nn::Tensor pool_w, pool_b;         // depthwise ConvTranspose k3 s2 when upsampling
  bool upsample = false;
};
struct
    AdaInResBlock1 {  // the generator's (iSTFTNet) resblock: 3 x (AdaIN, Snake, dilated conv, AdaIN, Snake, conv)
  AdaIn adain1[3], adain2[3];
  nn::Tensor alpha1[3], alpha2[3];  // Snake's alpha [C]
  QuantConv convs1[3], convs2[3];
};

struct KokoroWeights {
  // ALBERT
  nn::Tensor word_embeddings, position_embeddings, token_type_embeddings;  // int8, quant attached
  nn::Tensor embeddings_norm_w, embeddings_norm_b;
  QuantLinear embedding_mapping, query, key, value, attention_dense, ffn, ffn_output;
  nn::Tensor attention_norm_w, attention_norm_b, full_layer_norm_w, full_layer_norm_b;
  QuantLinear bert_encoder;
  // prosody predictor
  QuantBiLstm duration_lstms[3];
  AdaIn duration_norms[3];
  QuantBiLstm predictor_lstm;
  QuantLinear duration_proj;
  QuantBiLstm shared_lstm;
  AdainResBlock1d f0_blocks[3], n_blocks[3];
  QuantConv f0_proj, n_proj;
  // text encoder
  nn::Tensor text_embedding;  // int8, quant attached
  QuantConv text_convs[3];
  nn::Tensor text_norm_w[3], text_norm_b[3];
  QuantBiLstm text_lstm;
  // decoder
  QuantConv f0_conv, n_conv, asr_res;
  AdainResBlock1d encode, decode[4];
  // generator
  nn::Tensor source_harmonics_w, source_harmonics_b;  // Linear 9 -> 1: [9, 1], [1]
  nn::Tensor stft_window;                             // [20]
  QuantConv noise_convs[2];
  AdaInResBlock1 noise_res[2], resblocks[6];
  nn::Tensor ups_w[2], ups_b[2];
  nn::Tensor conv_post_w, conv_post_b;
  nn::Tensor inverse_basis;       // [22, 1, 20]
  nn::Tensor window_sum_divisor;  // [20]: window_sum where > FLT_MIN, else 1
  nn::Tensor sqrt2, three;        // [1]: the graph divides by these (not multiplies by the inverse)
  QuantLinear style_products[kStyleStages];  // every AdaIN fc of a stage: [128, sum of 2 stride(C)]
};

// Reads and checks every tensor (names, shapes, dtypes): a file that is not this Kokoro export fails with one
// line naming the first tensor that does not fit.
Result<KokoroWeights> load_kokoro_weights(nn::Context& ctx, const nn::WeightSource& source);
// The same weights copied to a GPU context (kokoro_gpu.cpp): the forward pass then runs there.
Result<KokoroWeights> kokoro_weights_to_gpu(nn::Context& gpu, const KokoroWeights& cpu);

// ---------------------------------------------------------------- the forward pass, by stage
// Each stage takes what ONNX Runtime's graph feeds it, so tests can run one stage on ONNX Runtime's own inputs
// (teacher-forced) and compare its output. Layouts: sequences [T, C], conv stacks [C, T].
nn::Tensor kokoro_albert(const KokoroWeights& w, const nn::Tensor& tokens);  // tokens I64 [T] -> [T, 768]
// One of ALBERT's twelve passes of its shared layer, x [T, 768] -> [T, 768].
nn::Tensor kokoro_albert_pass(const KokoroWeights& w, const nn::Tensor& x);
// -> d [T, 640]
nn::Tensor kokoro_duration_encoder(const KokoroWeights& w, const nn::Tensor& bert, const nn::Tensor& style);
// d -> the 50 duration sigmoids per token [T, 50]
nn::Tensor kokoro_duration_probs(const KokoroWeights& w, const nn::Tensor& d);
// Their sum per token (read back: the frame count decides every later shape), in order as ReduceSum.
std::vector<float> kokoro_duration_sums(std::span<const float> probs, size_t tokens);
// sums / speed, rounded half to even, at least 1
std::vector<int64_t> kokoro_durations(std::span<const float> duration_sums, float speed);
// en [F, 640] -> F0 [2F], N [2F]
void kokoro_prosody(const KokoroWeights& w, const nn::Tensor& en, const nn::Tensor& style, nn::Tensor& f0,
                    nn::Tensor& noise);
nn::Tensor kokoro_text_encoder(const KokoroWeights& w, const nn::Tensor& tokens);  // -> t_en [T, 512]
// asr [512, F], F0 [2F], N [2F] -> [512, 2F]
nn::Tensor kokoro_decoder(const KokoroWeights& w, const nn::Tensor& asr, const nn::Tensor& f0,
                          const nn::Tensor& noise, const nn::Tensor& style);
// The harmonic source [600 F] from F0 [2F], and its STFT magnitude and phase har [22, 120 F + 1].
nn::Tensor kokoro_harmonic_source(const KokoroWeights& w, const nn::Tensor& f0);
nn::Tensor kokoro_source_spectrum(const KokoroWeights& w, const nn::Tensor& source);
// The same from the source already reflect-padded by 10 samples a side (or a slice of it: frame k of the
// result is centred on padded sample 5 k + 10).
nn::Tensor kokoro_source_spectrum_padded(const KokoroWeights& w, const nn::Tensor& padded);
// x [512, 2F], har -> audio [600 F]. `stages` (when given) receives the outputs after the first and second
// upsampling's resblocks ([256, 20 F], [128, 120 F + 1]) and conv_post's [22, 120 F + 1].
nn::Tensor kokoro_generator(const KokoroWeights& w, const nn::Tensor& x, const nn::Tensor& har,
                            const nn::Tensor& style, std::vector<nn::Tensor>* stages = nullptr);

// The stage outputs of one run (for tests and tools).
struct KokoroTrace {
  nn::Tensor bert, d, duration_sums, en, f0, noise, t_en, asr, decoded, source, har;
  std::vector<int64_t> durations;
};

// Wall milliseconds per stage of one pass (where the time goes; `sotto speak --json` prints the sums).
struct KokoroStageMs {
  double albert = 0, duration = 0, prosody = 0, text_encoder = 0, decoder = 0, source = 0, generator = 0;
  KokoroStageMs& operator+=(const KokoroStageMs& o);
};

// The whole pass: ids (without the pads; 1..510 of them) in the voice's style -> 24 kHz audio.
Result<std::vector<float>> kokoro_speak(nn::Context& ctx, const KokoroWeights& w,
                                        std::span<const int64_t> ids, std::span<const float> style,
                                        float speed, KokoroTrace* trace = nullptr,
                                        KokoroStageMs* stage_ms = nullptr);

// ---------------------------------------------------------------- streaming one piece
// The generator (the iSTFTNet vocoder: ~85 % of a piece's multiply-adds) run on windows of the decoded frames,
// so a piece's first audio exists after a fraction of its time: kokoro_stream_begin runs everything up to the
// decoder's output and the harmonic source for the whole piece (the source's phase is a cumulative sum over the
// piece, so it is made once; its spectrum, frame by frame, is made per window), then each kokoro_stream_next
// runs the source's spectrum and the generator on the next chunk of
// decoded frames (300 samples each) with kKokoroStreamMarginFrames of context on each side (the generator's
// convolutions reach ~12 frames: ups0 +-1, its resblocks +-6 and the noise branch's +-3.6 at 10 samples a
// frame, then +-2 more at 60), keeps the chunk's middle, and crossfades kKokoroStreamFadeSamples into the
// previous chunk's tail. Chunks double in length, so the pipeline keeps ahead of playback when synthesis is
// faster than real time, and a piece no longer than the first chunk plus its margin is one window: the
// whole-piece audio, bit for bit.
//
// Not bit-exact for longer pieces: every AdaIN in the generator (48 of them) normalises each channel by its
// mean and variance over the window, not over the whole piece, so a chunk's level and timbre move slightly
// (measured in tests/unit/kokoro_stream_test.cpp: the log-mel distance to the whole-piece audio, against the
// distance between two correct ONNX Runtime builds).
inline constexpr int64_t kKokoroStreamMarginFrames = 12;  // decoded frames (12.5 ms each) of context a side
inline constexpr int64_t kKokoroStreamFadeSamples = 300;  // one decoded frame

struct KokoroStream {
  nn::Tensor decoded;       // [512, 2F]
  nn::Tensor source;        // the harmonic source, reflect-padded by 10 samples a side [600 F + 20]
  nn::Tensor style;         // [1, 256]
  int64_t frames = 0;       // decoded frames, 2F
  int64_t next = 0;         // the first decoded frame not yet given out
  int64_t chunk = 0;        // the next chunk's length in decoded frames
  int64_t lead = 0;         // decoded frames of the piece's leading pause (the first chunk has them too)
  std::vector<float> tail;  // the last chunk's audio just past its end, faded out into the next chunk
  bool fade_in = false;     // the leading pause was cut (kokoro_stream_cut_lead): the first chunk fades in
  bool done() const { return next >= frames; }
};

// Validates like kokoro_speak, runs the text side, the prosody, the decoder and the harmonic source.
// first_chunk_frames: the first chunk's decoded frames (at least 1; 32 = 0.4 s of audio) after the piece's
// leading pause (the pad's frames, ~0.3 s of near-silence, come in the first chunk too).
Result<KokoroStream> kokoro_stream_begin(nn::Context& ctx, const KokoroWeights& w,
                                         std::span<const int64_t> ids, std::span<const float> style,
                                         float speed, int64_t first_chunk_frames,
                                         KokoroStageMs* stage_ms = nullptr);
// The piece's leading pause (Kokoro's pad: ~0.3 s of near-silence, which a voice agent trims before playing)
// cut to its last `keep` decoded frames (negative: all kept) before any of it is vocoded: the decoded frames and
// the source's spectrum are sliced, so the generator's windows start there (the first window, which the first
// sound waits for, is ~25-35 % shorter for a short first chunk) and the chunks joined are the piece less its
// first (lead - keep) * 300 samples. The frames kept are the generator's left context at the piece's edge; what
// it sees before them is zero padding instead of the pad's own frames, so the kept silence and the first ~10 ms
// of speech differ slightly from the whole piece's (tests/unit/tts_api_test.cpp bounds it). At the edge itself
// the generator rings (a click of ~0.15 in the first ~6 ms, where the whole piece has near-silence): the first
// chunk then fades in over kKokoroLeadFadeSamples, inside the pause kept. Call before the first chunk.
inline constexpr int64_t kKokoroLeadFadeSamples = 600;  // 25 ms at 24 kHz
void kokoro_stream_cut_lead(KokoroStream& stream, int64_t keep);
// The next chunk's 24 kHz audio (empty once done()). Chunks concatenated are the piece, 600 F samples.
Result<std::vector<float>> kokoro_stream_next(nn::Context& ctx, const KokoroWeights& w, KokoroStream& stream,
                                              KokoroStageMs* stage_ms = nullptr);

// One short pass (a few ids, a zero style) so the weights' derived layouts (int8 rows for the VNNI product,
// int16 copies) are made and kept before the first real call: otherwise the first sentence pays for them. On a
// real GPU the pass is a sentence long (84 ids), so that its pipelines and buffers exist too.
Status kokoro_warm_up(nn::Context& ctx, const KokoroWeights& w);

// ---------------------------------------------------------------- sentences
// Splits phonemes into pieces of at most max_ids symbols, at sentence ends (. ! ? followed by a space or the
// end) where possible, else at the last , ; : or space, else hard. Pieces keep their punctuation.
std::vector<std::string> kokoro_split_phonemes(std::string_view phonemes,
                                               size_t max_ids = kKokoroMaxPhonemes);

}  // namespace sotto::tts
