// Kokoro's forward pass, stage by stage as kokoro.h's figure draws it. Where the time goes: the decoder's
// AdainResBlk1d convs (1090 -> 1024 channels, k3, at F frames) and the generator's resblocks (256 / 128 channels
// at 20 F and 120 F frames, k up to 11) are ~90 % of the multiply-adds; ALBERT and the LSTMs are small at T
// tokens but the LSTMs are sequential.
#include "models/tts/kokoro.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <numeric>

#include "api/clock.h"
#include "gpu/device.h"
#include "nn/gpu_recorder.h"
#include "nn/ops.h"

namespace sotto::tts {

namespace {

constexpr float kAdaInEps = 1e-5f;
constexpr float kBertEps = 1e-12f;

// ---------------------------------------------------------------- int8 building blocks
nn::Tensor linear(const nn::Tensor& x, const QuantLinear& l) {
  nn::Tensor y = nn::matmul_integer_dynamic(x, l.w, l.scales, l.zero_points);
  return l.bias.defined() ? nn::add(y, l.bias) : y;
}

// The bias as ONNX Runtime's quantized graph adds it: rounded down to the output scale (see nn/ops.h).
nn::Tensor conv(const nn::Tensor& x, const QuantConv& c, const nn::ValueRange& x_range = {}) {
  return nn::conv1d_integer_dynamic_quantized_bias(
      x, c.w, c.bias, {.stride = c.stride, .padding = c.padding, .dilation = c.dilation}, x_range);
}

nn::Tensor bilstm(const nn::Tensor& x, const QuantBiLstm& l) {
  return nn::bilstm(x, l.forward, l.backward);
}

// A stage's AdaIN products, from the style's 128 values (kokoro.h, KokoroStyleStage): [sum of 2 stride(C)].
nn::Tensor style_products(const KokoroWeights& w, KokoroStyleStage stage, const nn::Tensor& style) {
  const nn::Tensor p = linear(style, w.style_products[stage]);
  return p.reshape({p.dim(-1)});
}

// gamma, beta [C] of AdaIN a: views of its stage's products.
void style_affine(const AdaIn& a, const nn::Tensor& products, nn::Tensor& gamma, nn::Tensor& beta) {
  const int64_t beta_at = a.at + kokoro_style_stride(a.channels);
  gamma = products.rows(a.at, a.at + a.channels);
  beta = products.rows(beta_at, beta_at + a.channels);
}

// AdaIN1d on x [C, T]: instance norm, then (1 + gamma) x + beta.
nn::Tensor adain(const nn::Tensor& x, const AdaIn& a, const nn::Tensor& products) {
  nn::Tensor gamma, beta;
  style_affine(a, products, gamma, beta);
  return nn::adain(x, gamma, beta, kAdaInEps);
}

// snake(adain(x)) in one pass, with the range the int8 conv after it quantizes by.
nn::Tensor adain_snake(const nn::Tensor& x, const AdaIn& a, const nn::Tensor& products,
                       const nn::Tensor& alpha, nn::ValueRange& range) {
  nn::Tensor gamma, beta;
  style_affine(a, products, gamma, beta);
  return nn::adain_snake(x, gamma, beta, kAdaInEps, alpha, &range);
}

// AdaLayerNorm on x [T, C]: layer norm over C without affine, then (1 + gamma) x + beta.
nn::Tensor ada_layer_norm(const nn::Tensor& x, const AdaIn& a, const nn::Tensor& products) {
  nn::Tensor gamma, beta;
  style_affine(a, products, gamma, beta);
  const nn::Tensor normed = nn::layer_norm(x, {}, {}, kAdaInEps);
  return nn::add(nn::mul(normed, nn::scale(gamma, 1.0f, 1.0f)), beta);
}

// StyleTTS 2's AdainResBlk1d on x [C_in, T] -> [C_out, T] (2T when upsampling).
nn::Tensor res_block(const nn::Tensor& x, const AdainResBlock1d& b, const nn::Tensor& products,
                     const nn::Tensor& sqrt2) {
  nn::Tensor r = nn::leaky_relu(adain(x, b.norm1, products), 0.2f);
  if (b.upsample)
    r = nn::conv_transpose1d(
        r, b.pool_w, b.pool_b,
        {.stride = 2, .padding = 1, .output_padding = 1, .groups = static_cast<int>(x.dim(0))});
  r = conv(r, b.conv1);
  r = nn::leaky_relu(adain(r, b.norm2, products), 0.2f);
  r = conv(r, b.conv2);
  nn::Tensor shortcut = x;
  if (b.upsample) shortcut = nn::resize(shortcut, 2 * x.dim(1), nn::ResizeMode::Nearest);
  if (b.shortcut.w.defined()) shortcut = conv(shortcut, b.shortcut);
  return nn::div(nn::add(r, shortcut), sqrt2);
}

// iSTFTNet's AdaINResBlock1 on x [C, T]: three dilated conv pairs, each behind AdaIN and Snake, residual.
nn::Tensor generator_block(nn::Tensor x, const AdaInResBlock1& b, const nn::Tensor& products) {
  for (int j = 0; j < 3; ++j) {
    nn::ValueRange range;
    nn::Tensor t = adain_snake(x, b.adain1[j], products, b.alpha1[j], range);
    t = conv(t, b.convs1[j], range);
    t = adain_snake(t, b.adain2[j], products, b.alpha2[j], range);
    t = conv(t, b.convs2[j], range);
    x = nn::add(t, x);
  }
  return x;
}

// The mean of three resblocks on the same input (the graph adds in order, then divides by 3).
nn::Tensor resblock_mean(const nn::Tensor& x, const AdaInResBlock1* blocks, const nn::Tensor& products,
                         const nn::Tensor& three) {
  nn::Tensor sum = nn::add(generator_block(x, blocks[0], products), generator_block(x, blocks[1], products));
  sum = nn::add(sum, generator_block(x, blocks[2], products));
  return nn::div(sum, three);
}

nn::Tensor style_part(const nn::Tensor& style, int64_t begin) {
  return nn::slice(style, -1, begin, begin + 128);  // [1, 128]
}

}  // namespace

// ---------------------------------------------------------------- ALBERT
nn::Tensor kokoro_albert_pass(const KokoroWeights& w, const nn::Tensor& x0) {
  const nn::Tensor context =
      nn::attention(linear(x0, w.query), linear(x0, w.key), linear(x0, w.value), {.n_heads = 12});
  const nn::Tensor x = nn::layer_norm(nn::add(x0, linear(context, w.attention_dense)), w.attention_norm_w,
                                      w.attention_norm_b, kBertEps);
  const nn::Tensor hidden = nn::activation(linear(x, w.ffn), nn::Act::GeluTanh);
  return nn::layer_norm(nn::add(linear(hidden, w.ffn_output), x), w.full_layer_norm_w, w.full_layer_norm_b,
                        kBertEps);
}

nn::Tensor kokoro_albert(const KokoroWeights& w, const nn::Tensor& tokens) {
  nn::Context& ctx = tokens.ctx();
  const int64_t t = tokens.dim(0);
  std::vector<int64_t> positions(static_cast<size_t>(t));
  std::iota(positions.begin(), positions.end(), int64_t{0});
  const nn::Tensor position_ids = ctx.from_bytes(
      {t}, DType::I64, {reinterpret_cast<const uint8_t*>(positions.data()), positions.size() * 8});
  const nn::Tensor type_ids = ctx.zeros({t}, DType::I64);

  nn::Tensor x =
      nn::add(nn::embedding(w.word_embeddings, tokens), nn::embedding(w.token_type_embeddings, type_ids));
  x = nn::add(x, nn::embedding(w.position_embeddings, position_ids));
  x = nn::layer_norm(x, w.embeddings_norm_w, w.embeddings_norm_b, kBertEps);
  x = linear(x, w.embedding_mapping);
  for (int pass = 0; pass < 12; ++pass)
    x = kokoro_albert_pass(w, x);  // ALBERT: one layer's weights, 12 passes
  return x;
}

// ---------------------------------------------------------------- prosody predictor
nn::Tensor kokoro_duration_encoder(const KokoroWeights& w, const nn::Tensor& bert, const nn::Tensor& style) {
  const nn::Tensor s = style_part(style, 128);
  const nn::Tensor s_rows = nn::add(bert.ctx().zeros({bert.dim(0), 128}), s);  // the style on every token
  const nn::Tensor products = style_products(w, kStyleDuration, s);
  nn::Tensor x = nn::concat(std::array{linear(bert, w.bert_encoder), s_rows}, -1);
  for (int i = 0; i < 3; ++i) {
    x = ada_layer_norm(bilstm(x, w.duration_lstms[i]), w.duration_norms[i], products);
    x = nn::concat(std::array{x, s_rows}, -1);
  }
  return x;  // [T, 640]
}

nn::Tensor kokoro_duration_probs(const KokoroWeights& w, const nn::Tensor& d) {
  return nn::sigmoid(linear(bilstm(d, w.predictor_lstm), w.duration_proj));  // [T, 50]
}

std::vector<float> kokoro_duration_sums(std::span<const float> probs, size_t tokens) {
  const size_t bins = tokens ? probs.size() / tokens : 0;
  std::vector<float> sums(tokens, 0.0f);
  for (size_t i = 0; i < tokens; ++i)
    for (size_t k = 0; k < bins; ++k) sums[i] += probs[i * bins + k];
  return sums;
}

std::vector<int64_t> kokoro_durations(std::span<const float> duration_sums, float speed) {
  std::vector<int64_t> frames(duration_sums.size());
  for (size_t i = 0; i < frames.size(); ++i) {
    const float v =
        std::nearbyint(duration_sums[i] / speed);  // ONNX Round: half to even (default rounding mode)
    frames[i] = v < 1.0f ? 1 : static_cast<int64_t>(v);
  }
  return frames;
}

void kokoro_prosody(const KokoroWeights& w, const nn::Tensor& en, const nn::Tensor& style, nn::Tensor& f0,
                    nn::Tensor& noise) {
  const nn::Tensor products = style_products(w, kStyleProsody, style_part(style, 128));
  const nn::Tensor x = nn::transpose(bilstm(en, w.shared_lstm));  // [512, F]
  f0 = x;
  noise = x;
  for (int i = 0; i < 3; ++i) {
    f0 = res_block(f0, w.f0_blocks[i], products, w.sqrt2);
    noise = res_block(noise, w.n_blocks[i], products, w.sqrt2);
  }
  f0 = conv(f0, w.f0_proj).reshape({2 * x.dim(1)});
  noise = conv(noise, w.n_proj).reshape({2 * x.dim(1)});
}

// ---------------------------------------------------------------- text encoder
nn::Tensor kokoro_text_encoder(const KokoroWeights& w, const nn::Tensor& tokens) {
  nn::Tensor x = nn::transpose(nn::embedding(w.text_embedding, tokens));  // [512, T]
  for (int i = 0; i < 3; ++i) {
    x = conv(x, w.text_convs[i]);
    x = nn::transpose(nn::layer_norm(nn::transpose(x), w.text_norm_w[i], w.text_norm_b[i], kAdaInEps));
    x = nn::leaky_relu(x, 0.2f);
  }
  return bilstm(nn::transpose(x), w.text_lstm);  // [T, 512]
}

// ---------------------------------------------------------------- decoder
nn::Tensor kokoro_decoder(const KokoroWeights& w, const nn::Tensor& asr, const nn::Tensor& f0,
                          const nn::Tensor& noise, const nn::Tensor& style) {
  const nn::Tensor products = style_products(w, kStyleDecoder, style_part(style, 0));
  const nn::Tensor f0_frames = conv(f0.reshape({1, f0.dim(0)}), w.f0_conv);  // [1, F]
  const nn::Tensor n_frames = conv(noise.reshape({1, noise.dim(0)}), w.n_conv);
  nn::Tensor x = res_block(nn::concat(std::array{asr, f0_frames, n_frames}, 0), w.encode, products, w.sqrt2);
  const nn::Tensor asr_res = conv(asr, w.asr_res);  // [64, F]
  for (const AdainResBlock1d& block : w.decode)
    x = res_block(nn::concat(std::array{x, asr_res, f0_frames, n_frames}, 0), block, products, w.sqrt2);
  return x;  // [512, 2F]
}

// ---------------------------------------------------------------- generator
nn::Tensor kokoro_harmonic_source(const KokoroWeights& w, const nn::Tensor& f0) {
  const nn::Tensor sines = nn::sine_source(f0, 9, 300, static_cast<float>(kKokoroSampleRateHz), 0.1f, 10.0f);
  const nn::Tensor source = nn::tanh(nn::add(nn::matmul(sines, w.source_harmonics_w), w.source_harmonics_b));
  return source.reshape({source.dim(0)});  // [600 F]
}

namespace {

// Samples per decoded frame (the decoder's frames are half a duration frame): 300.
constexpr int64_t kSamplesPerDecodedFrame = kKokoroSamplesPerFrame / 2;

// The source reflect-padded as the STFT centres its frames: frame k is padded samples [5 k, 5 k + 20).
nn::Tensor pad_source(const nn::Tensor& source) {
  return nn::pad_reflect(source, 0, 10, 10);
}

// The spectrum of padded samples [300 a, 300 b + 20): har frames [60 a, 60 b + 1) of the piece, the ones the
// generator reads for decoded frames [a, b). Frames are independent, so a window's are the piece's, bit for bit.
nn::Tensor window_spectrum(const KokoroWeights& w, const nn::Tensor& padded, int64_t a, int64_t b) {
  const bool whole = a == 0 && b * kSamplesPerDecodedFrame + 20 == padded.dim(0);
  return kokoro_source_spectrum_padded(
      w,
      whole ? padded : nn::slice(padded, 0, a * kSamplesPerDecodedFrame, b * kSamplesPerDecodedFrame + 20));
}

}  // namespace

nn::Tensor kokoro_source_spectrum(const KokoroWeights& w, const nn::Tensor& source) {
  return kokoro_source_spectrum_padded(w, pad_source(source));
}

nn::Tensor kokoro_source_spectrum_padded(const KokoroWeights& w, const nn::Tensor& padded) {
  // ONNX Runtime's STFT arithmetic: the generator reads the phase of the DC and Nyquist bins, whose sign is
  // decided by rounding (see nn::stft_onnxruntime).
  const nn::Tensor spectrum = nn::stft_onnxruntime(padded, w.stft_window, 20, 5);  // [2, 11, frames]
  const int64_t bins = spectrum.dim(1), frames = spectrum.dim(2);
  const nn::Tensor re = nn::slice(spectrum, 0, 0, 1).reshape({bins, frames});
  const nn::Tensor im = nn::slice(spectrum, 0, 1, 2).reshape({bins, frames});
  const nn::Tensor magnitude = nn::activation(nn::add(nn::mul(re, re), nn::mul(im, im)), nn::Act::Sqrt);
  return nn::concat(std::array{magnitude, nn::atan2(im, re)}, 0);  // [22, frames]
}

nn::Tensor kokoro_generator(const KokoroWeights& w, const nn::Tensor& decoded, const nn::Tensor& har,
                            const nn::Tensor& style, std::vector<nn::Tensor>* stages) {
  const nn::Tensor products = style_products(w, kStyleGenerator, style_part(style, 0));
  nn::Tensor x = nn::leaky_relu(decoded, 0.1f);
  x = nn::conv_transpose1d(x, w.ups_w[0], w.ups_b[0], {.stride = 10, .padding = 5});
  x = nn::add(x, generator_block(conv(har, w.noise_convs[0]), w.noise_res[0], products));
  x = resblock_mean(x, &w.resblocks[0], products, w.three);
  if (stages) stages->push_back(x);

  x = nn::leaky_relu(x, 0.1f);
  x = nn::conv_transpose1d(x, w.ups_w[1], w.ups_b[1], {.stride = 6, .padding = 3});
  x = nn::pad_reflect(x, -1, 1, 0);
  x = nn::add(x, generator_block(conv(har, w.noise_convs[1]), w.noise_res[1], products));
  x = resblock_mean(x, &w.resblocks[3], products, w.three);
  if (stages) stages->push_back(x);

  x = nn::conv1d(nn::leaky_relu(x, 0.01f), w.conv_post_w, w.conv_post_b, {.padding = 3});  // [22, frames]
  if (stages) stages->push_back(x);
  const int64_t bins = x.dim(0) / 2;
  const nn::Tensor magnitude = nn::activation(nn::slice(x, 0, 0, bins), nn::Act::Exp);
  const nn::Tensor phase = nn::activation(nn::slice(x, 0, bins, 2 * bins), nn::Act::Sin);
  const nn::Tensor parts = nn::concat(std::array{nn::mul(magnitude, nn::activation(phase, nn::Act::Cos)),
                                                 nn::mul(magnitude, nn::activation(phase, nn::Act::Sin))},
                                      0);
  // Inverse STFT as the export does it: overlap-add of the basis, then only the first 20 samples divided by
  // the window sum, x 4 (n_fft / hop), n_fft / 2 trimmed at both ends.
  nn::Tensor audio = nn::conv_transpose1d(parts, w.inverse_basis, {}, {.stride = 5});  // [1, L]
  const int64_t length = audio.dim(1);
  audio = nn::concat(
      std::array{nn::div(nn::slice(audio, 1, 0, 20), w.window_sum_divisor), nn::slice(audio, 1, 20, length)},
      1);
  audio = nn::scale(nn::slice(audio, 1, 10, length - 10), 4.0f);
  return audio.reshape({length - 20});
}

// ---------------------------------------------------------------- the whole pass
namespace {

Status check_piece(std::span<const int64_t> ids, std::span<const float> style, float speed) {
  if (ids.empty()) return error("kokoro: no phonemes to speak");
  if (ids.size() > static_cast<size_t>(kKokoroMaxPhonemes))
    return error("kokoro: ", ids.size(), " phoneme ids in one piece; at most ", kKokoroMaxPhonemes,
                 " (split the text into sentences)");
  if (style.size() != static_cast<size_t>(kKokoroStyleDim))
    return error("kokoro: style has ", style.size(), " values, expected ", kKokoroStyleDim);
  if (!(speed >= 0.25f && speed <= 4.0f)) return error("kokoro: speed ", speed, " is outside 0.25 .. 4");
  return {};
}

// Everything before the generator, for the whole piece: the decoder's output and the harmonic source. The
// source's spectrum (an STFT of 120 frames per 25 ms: ~25 ms of one core for a 1.2 s sentence) is left to
// whoever runs the generator, so a streamed piece makes only its first window's before the first chunk.
struct KokoroFront {
  nn::Tensor style, decoded, padded_source;
  int64_t lead_frames = 0;  // the leading pad's aligned frames: the pause before the piece's first phoneme
};

Result<KokoroFront> kokoro_front(nn::Context& ctx, const KokoroWeights& w, std::span<const int64_t> ids,
                                 std::span<const float> style, float speed, KokoroTrace* trace,
                                 KokoroStageMs& ms) {
  SOTTO_TRY(check_piece(ids, style, speed));
  std::vector<int64_t> padded(ids.size() + 2, 0);
  std::copy(ids.begin(), ids.end(), padded.begin() + 1);
  const int64_t t = static_cast<int64_t>(padded.size());
  const nn::Tensor tokens =
      ctx.from_bytes({t}, DType::I64, {reinterpret_cast<const uint8_t*>(padded.data()), padded.size() * 8});
  const nn::Tensor style_t = ctx.from_floats({1, kKokoroStyleDim}, style);

  double mark = now_ms();
  auto lap = [&mark](double& into) {
    const double now = now_ms();
    into += now - mark;
    mark = now;
  };
  const nn::Tensor bert = kokoro_albert(w, tokens);
  lap(ms.albert);
  const nn::Tensor d = kokoro_duration_encoder(w, bert, style_t);
  SOTTO_ASSIGN(const nn::Context::PendingRead probs_read, ctx.start_read(kokoro_duration_probs(w, d)));
  lap(ms.duration);
  // The text encoder needs no durations: on the GPU it runs while the durations come back to the host.
  const nn::Tensor t_en = kokoro_text_encoder(w, tokens);
  lap(ms.text_encoder);
  SOTTO_ASSIGN(const std::vector<float> probs, ctx.finish_floats(probs_read));
  const std::vector<float> sums = kokoro_duration_sums(probs, static_cast<size_t>(t));
  const std::vector<int64_t> durations = kokoro_durations(sums, speed);
  const nn::Tensor frames_per_token = ctx.from_bytes(
      {t}, DType::I64, {reinterpret_cast<const uint8_t*>(durations.data()), durations.size() * 8});
  lap(ms.duration);

  const nn::Tensor en = nn::repeat_by_durations(d, frames_per_token);  // [F, 640]
  nn::Tensor f0, noise;
  kokoro_prosody(w, en, style_t, f0, noise);
  lap(ms.prosody);
  const nn::Tensor asr = nn::transpose(nn::repeat_by_durations(t_en, frames_per_token));  // [512, F]
  lap(ms.text_encoder);
  const nn::Tensor decoded = kokoro_decoder(w, asr, f0, noise, style_t);
  lap(ms.decoder);
  const nn::Tensor source = kokoro_harmonic_source(w, f0);
  const nn::Tensor padded_source = pad_source(source);
  lap(ms.source);
  if (trace != nullptr) {  // har: kokoro_speak adds it
    *trace = {bert, d, ctx.from_floats({t}, sums), en, f0, noise, t_en, asr, decoded, source, {}, durations};
  }
  return KokoroFront{style_t, decoded, padded_source, durations.empty() ? 0 : durations.front()};
}

}  // namespace

Result<std::vector<float>> kokoro_speak(nn::Context& ctx, const KokoroWeights& w,
                                        std::span<const int64_t> ids, std::span<const float> style,
                                        float speed, KokoroTrace* trace, KokoroStageMs* stage_ms) {
  KokoroStageMs ms;
  SOTTO_ASSIGN(KokoroFront front, kokoro_front(ctx, w, ids, style, speed, trace, ms));
  double mark = now_ms();
  const nn::Tensor har = kokoro_source_spectrum_padded(w, front.padded_source);
  if (trace != nullptr) trace->har = har;
  ms.source += now_ms() - mark;
  mark = now_ms();
  const nn::Tensor audio = kokoro_generator(w, front.decoded, har, front.style);
  ms.generator += now_ms() - mark;
  if (stage_ms != nullptr) *stage_ms += ms;
  return ctx.to_floats(audio);
}

// ---------------------------------------------------------------- streaming one piece
Result<KokoroStream> kokoro_stream_begin(nn::Context& ctx, const KokoroWeights& w,
                                         std::span<const int64_t> ids, std::span<const float> style,
                                         float speed, int64_t first_chunk_frames, KokoroStageMs* stage_ms) {
  KokoroStageMs ms;
  SOTTO_ASSIGN(KokoroFront front, kokoro_front(ctx, w, ids, style, speed, nullptr, ms));
  if (stage_ms != nullptr) *stage_ms += ms;
  KokoroStream s;
  s.frames = front.decoded.dim(1);
  // Counted from the first phoneme: the leading pad's frames (~0.3 s of near-silence, 2 decoded frames per
  // aligned one) would otherwise fill a short first chunk, and the first sound would wait for the second.
  s.lead = 2 * front.lead_frames;
  s.chunk = std::max<int64_t>(1, first_chunk_frames) + s.lead;
  s.decoded = std::move(front.decoded);
  s.source = std::move(front.padded_source);
  s.style = std::move(front.style);
  return s;
}

void kokoro_stream_cut_lead(KokoroStream& s, int64_t keep) {
  const int64_t drop = keep < 0 ? 0 : std::min(s.lead - keep, s.frames - 1);
  if (drop <= 0 || s.next > 0) return;
  s.decoded = nn::slice(s.decoded, 1, drop, s.frames);
  s.source = nn::slice(s.source, 0, kSamplesPerDecodedFrame * drop, s.source.dim(0));
  s.frames -= drop;
  s.chunk -= drop;  // the first chunk still ends first_chunk_frames after the first phoneme
  s.lead -= drop;
  s.fade_in = true;
}

Result<std::vector<float>> kokoro_stream_next(nn::Context& ctx, const KokoroWeights& w, KokoroStream& s,
                                              KokoroStageMs* stage_ms) {
  if (s.done()) return std::vector<float>{};
  const double mark = now_ms();
  const int64_t a = s.next;
  int64_t b = std::min(s.frames, a + s.chunk);
  // A remainder shorter than the margin is not worth a window of its own (its context would cost more).
  if (s.frames - b <= kKokoroStreamMarginFrames) b = s.frames;
  const int64_t a0 = std::max<int64_t>(0, a - kKokoroStreamMarginFrames);
  const int64_t b0 = std::min(s.frames, b + kKokoroStreamMarginFrames);

  // The window as a short piece of its own: decoded frames [a0, b0) and the matching har frames (the
  // spectrum's frame 60 k is centred on sample 300 k, and the generator wants 60 n + 1 of them for n frames),
  // made here from the window's own source samples.
  const bool whole = a0 == 0 && b0 == s.frames;
  const nn::Tensor x = whole ? s.decoded : nn::slice(s.decoded, 1, a0, b0);
  const nn::Tensor har = window_spectrum(w, s.source, a0, b0);
  SOTTO_ASSIGN(std::vector<float> window, ctx.to_floats(kokoro_generator(w, x, har, s.style)));

  // window[k] is the piece's sample 300 a0 + k (up to the windowed AdaIN statistics).
  const size_t begin = static_cast<size_t>((a - a0) * kSamplesPerDecodedFrame);
  const size_t end = static_cast<size_t>((b - a0) * kSamplesPerDecodedFrame);
  std::vector<float> out(window.begin() + static_cast<std::ptrdiff_t>(begin),
                         window.begin() + static_cast<std::ptrdiff_t>(end));
  // Crossfade: the previous window's samples just past its chunk fade out as this window's fade in.
  const size_t fade = std::min(s.tail.size(), out.size());
  for (size_t i = 0; i < fade; ++i) {
    const float in = (static_cast<float>(i) + 0.5f) / static_cast<float>(fade);
    out[i] = s.tail[i] * (1.0f - in) + out[i] * in;
  }
  s.tail.clear();
  if (b < s.frames) {
    const size_t tail_end = std::min(window.size(), end + static_cast<size_t>(kKokoroStreamFadeSamples));
    s.tail.assign(window.begin() + static_cast<std::ptrdiff_t>(end),
                  window.begin() + static_cast<std::ptrdiff_t>(tail_end));
  }
  if (s.fade_in) {
    s.fade_in = false;
    const size_t n = std::min(static_cast<size_t>(kKokoroLeadFadeSamples), out.size());
    for (size_t i = 0; i < n; ++i) out[i] *= static_cast<float>(i) / static_cast<float>(n);
  }
  s.next = b;
  s.chunk *= 2;
  if (stage_ms != nullptr) stage_ms->generator += now_ms() - mark;
  return out;
}

Status kokoro_warm_up(nn::Context& ctx, const KokoroWeights& w) {
  const std::array<int64_t, 6> few = {50, 83, 54, 156, 57, 135};  // any few symbols
  std::vector<int64_t> ids(few.begin(), few.end());
  // On a real GPU the first sentence of ~5 s also paid ~25 ms once for what only its length needs (pipelines
  // first used there, the buffer pool growing): an H100 took 54 ms for it and 28-31 ms for a different one of the
  // same length after it (bench/results/gpu-h100-2026-12-06-kokoro-passes.txt). So warm up at that length there.
  // Not on a CPU adapter (SwiftShader), where a sentence takes minutes; natively only for now, as a browser's
  // adapter names SwiftShader in other words.
  // There it runs three times: the buffer pool hands a second pass other buffers than the first (the first
  // found it empty), and bind groups follow buffers; from the third on a pass of similar lengths binds what
  // exists (an H100 made 1,039, 328, then 0 GPU objects in passes of one sentence after a single warm-up, and
  // the first took 25.1 ms against 23.4-24.3 for the later ones: gpu-h100-2026-12-07-kokoro-ab.txt).
  int passes = 1;
#if !defined(__wasm__)
  if (ctx.gpu() && !ctx.gpu()->device().info().cpu()) {
    for (int i = 0; i < 13; ++i) ids.insert(ids.end(), few.begin(), few.end());  // 84 symbols
    passes = 3;
  }
#endif
  const std::vector<float> style(static_cast<size_t>(kKokoroStyleDim), 0.0f);
  for (int pass = 0; pass < passes; ++pass) {
    SOTTO_ASSIGN(std::vector<float> audio, kokoro_speak(ctx, w, ids, style, 1.0f));
    static_cast<void>(audio);
  }
  return {};
}

KokoroStageMs& KokoroStageMs::operator+=(const KokoroStageMs& o) {
  albert += o.albert, duration += o.duration, prosody += o.prosody, text_encoder += o.text_encoder;
  decoder += o.decoder, source += o.source, generator += o.generator;
  return *this;
}

// ---------------------------------------------------------------- sentences
std::vector<std::string> kokoro_split_phonemes(std::string_view phonemes, size_t max_ids) {
  // Byte offsets of code point starts, so pieces never cut a UTF-8 sequence and max_ids counts symbols.
  std::vector<size_t> starts;
  for (size_t i = 0; i < phonemes.size(); ++i)
    if ((static_cast<unsigned char>(phonemes[i]) & 0xC0) != 0x80) starts.push_back(i);
  starts.push_back(phonemes.size());
  auto is = [&](size_t k, std::string_view set) {
    return k + 1 < starts.size() && starts[k + 1] - starts[k] == 1 &&
           set.find(phonemes[starts[k]]) != std::string_view::npos;
  };
  std::vector<std::string> pieces;
  size_t begin = 0;  // in symbols
  const size_t n = starts.size() - 1;
  auto emit = [&](size_t end) {  // [begin, end) symbols, spaces at the edges dropped
    size_t a = begin, b = end;
    while (a < b && is(a, " ")) ++a;
    while (b > a && is(b - 1, " ")) --b;
    if (b > a) pieces.emplace_back(phonemes.substr(starts[a], starts[b] - starts[a]));
    begin = end;
  };
  for (size_t k = 0; k < n; ++k) {
    const bool sentence_end = is(k, ".!?") && (k + 1 == n || is(k + 1, " "));
    if (sentence_end) emit(k + 1);
    if (k + 1 - begin >= max_ids && k + 1 < n) {  // too long: cut at the last clause break or space
      size_t cut = k + 1;
      for (size_t j = k + 1; j > begin + 1; --j)
        if (is(j - 1, ",;:") || is(j - 1, " ")) {
          cut = j;
          break;
        }
      emit(cut);
    }
  }
  emit(n);
  return pieces;
}

}  // namespace sotto::tts
