// Kokoro's weights on the GPU: every tensor of weights loaded on the CPU (where the loader reorders gates and
// reads scales) copied to a GPU context with its quantization. The forward pass is the same code (kokoro.cpp);
// its ops run on the GPU because their inputs live there.
#include <cstring>

#include "models/tts/kokoro.h"
#include "nn/gpu_recorder.h"

namespace sotto::tts {

namespace {

struct Uploader {
  nn::Context& gpu;
  Status status;

  void operator()(nn::Tensor& t) {
    if (!t.defined() || !status.ok()) return;
    Result<nn::Tensor> copy = gpu.copy_of(t);
    if (copy.ok())
      t = *copy;
    else
      status = copy.status();
  }
  void operator()(QuantLinear& l) {
    (*this)(l.w), (*this)(l.scales), (*this)(l.zero_points), (*this)(l.bias);
  }
  void operator()(QuantConv& c) { (*this)(c.w), (*this)(c.bias); }
  void operator()(nn::LstmWeights& l) {
    (*this)(l.w_ih), (*this)(l.w_hh), (*this)(l.b);
    (*this)(l.w_ih_scales), (*this)(l.w_hh_scales), (*this)(l.w_ih_zero_points), (*this)(l.w_hh_zero_points);
  }
  void operator()(QuantBiLstm& l) { (*this)(l.forward), (*this)(l.backward); }
  void operator()(AdainResBlock1d& b) {
    (*this)(b.conv1), (*this)(b.conv2), (*this)(b.shortcut);
    (*this)(b.pool_w), (*this)(b.pool_b);
  }
  void operator()(AdaInResBlock1& b) {
    for (int i = 0; i < 3; ++i) {
      (*this)(b.alpha1[i]), (*this)(b.alpha2[i]);
      (*this)(b.convs1[i]), (*this)(b.convs2[i]);
    }
  }
  template <class T, size_t N>
  void operator()(T (&items)[N]) {
    for (T& item : items) (*this)(item);
  }
};

}  // namespace

Result<KokoroWeights> kokoro_weights_to_gpu(nn::Context& gpu, const KokoroWeights& cpu) {
  KokoroWeights w = cpu;
  Uploader up{gpu, {}};
  up(w.word_embeddings), up(w.position_embeddings), up(w.token_type_embeddings);
  up(w.embeddings_norm_w), up(w.embeddings_norm_b);
  up(w.embedding_mapping), up(w.query), up(w.key), up(w.value), up(w.attention_dense), up(w.ffn);
  up(w.ffn_output);
  up(w.attention_norm_w), up(w.attention_norm_b), up(w.full_layer_norm_w), up(w.full_layer_norm_b);
  up(w.bert_encoder);
  up(w.duration_lstms), up(w.predictor_lstm), up(w.duration_proj), up(w.shared_lstm);
  up(w.f0_blocks), up(w.n_blocks), up(w.f0_proj), up(w.n_proj);
  up(w.text_embedding), up(w.text_convs), up(w.text_norm_w), up(w.text_norm_b), up(w.text_lstm);
  up(w.f0_conv), up(w.n_conv), up(w.asr_res), up(w.encode), up(w.decode);
  up(w.source_harmonics_w), up(w.source_harmonics_b), up(w.stft_window), up(w.noise_convs), up(w.noise_res);
  up(w.resblocks), up(w.ups_w), up(w.ups_b), up(w.conv_post_w), up(w.conv_post_b), up(w.inverse_basis);
  up(w.window_sum_divisor), up(w.sqrt2), up(w.three), up(w.style_products);
  if (!up.status.ok()) return error("kokoro: copying the weights to the GPU: ", up.status.message());
  if (Status s = gpu.gpu() ? gpu.gpu()->status() : Status{}; !s.ok()) return error("kokoro: ", s.message());
  return w;
}

}  // namespace sotto::tts
