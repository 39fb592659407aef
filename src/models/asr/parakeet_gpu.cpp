// Parakeet on another context (the GPU's): the weights are read and checked on the CPU as load() does (batch
// norm folded there), then each tensor is copied onto the new context. The encoder is parakeet.cpp's forward
// pass, unchanged: every op it calls has a GPU kernel (nn/gpu_ops.cpp). The greedy TDT loop keeps its state on
// the GPU (decode_on_gpu, nn/gpu_tdt.cpp) instead of reading the joint's logits back at every step.
#include "models/asr/parakeet.h"

#include <algorithm>

#include "nn/gpu_ops.h"
#include "nn/gpu_recorder.h"

namespace sotto::asr {

Result<std::unique_ptr<ParakeetModel>> ParakeetModel::load_on(std::unique_ptr<nn::Context> ctx,
                                                              std::string_view config_json,
                                                              std::span<const uint8_t> safetensors_bytes,
                                                              std::string file_name, int host_threads) {
#if defined(__wasm__)
  host_threads = 1;  // a pool's helpers there are Web Workers that JS starts for the C API's own pool
#endif
  SOTTO_ASSIGN(std::unique_ptr<ParakeetModel> m,
               load(config_json, safetensors_bytes, std::move(file_name), std::max(1, host_threads)));
  ParakeetWeights& w = m->weights_;
  nn::Context& to = *ctx;
  Status failed;
  auto move = [&](nn::Tensor& t) {
    if (!t.defined() || !failed.ok()) return;
    Result<nn::Tensor> copy = to.copy_of(t);
    if (copy.ok())
      t = *copy;
    else
      failed = copy.status();
  };
  for (nn::Tensor* t : {&w.sub_conv0_w, &w.sub_conv0_b, &w.sub_linear_w, &w.sub_linear_b, &w.enc_proj_w,
                        &w.enc_proj_b, &w.embedding, &w.dec_proj_w, &w.dec_proj_b, &w.joint_w, &w.joint_b})
    move(*t);
  for (auto* list : {&w.sub_dw_w, &w.sub_dw_b, &w.sub_pw_w, &w.sub_pw_b})
    for (nn::Tensor& t : *list) move(t);
  // q, k and v as one product: 3 x d_model columns fill a large GPU without splitting K (no second dispatch to
  // add the splits) and read the normed rows once, where three products took six dispatches.
  for (ParakeetBlock& b : w.blocks) {
    if (b.wq.dtype() != DType::F32 || b.wk.dtype() != DType::F32 || b.wv.dtype() != DType::F32) continue;
    const int64_t d = b.wq.dim(0), k = b.wq.dim(1);
    nn::Tensor stacked = w.ctx->empty({3 * d, k}), bias = w.ctx->zeros({3 * d});
    int64_t at = 0;
    for (auto [mat, vec] : {std::pair{&b.wq, &b.bq}, std::pair{&b.wk, &b.bk}, std::pair{&b.wv, &b.bv}}) {
      std::copy_n(mat->f32(), d * k, stacked.f32() + at * k);
      if (vec->defined()) std::copy_n(vec->f32(), d, bias.f32() + at);
      *mat = *vec = nn::Tensor{};
      at += d;
    }
    b.w_qkv = stacked, b.b_qkv = bias;
  }
  // Every block's relative-position projection of the one table as one product, each block's result a view: one
  // dispatch a clip where each block took one and a split-K sum.
  if (!w.blocks.empty() && std::all_of(w.blocks.begin(), w.blocks.end(), [](const ParakeetBlock& b) {
        return b.w_pos.dtype() == DType::F32;
      })) {
    const int64_t d = w.blocks[0].w_pos.dim(0), k = w.blocks[0].w_pos.dim(1);
    nn::Tensor all = w.ctx->empty({static_cast<int64_t>(w.blocks.size()) * d, k});
    for (size_t i = 0; i < w.blocks.size(); ++i) {
      std::copy_n(w.blocks[i].w_pos.f32(), d * k, all.f32() + static_cast<int64_t>(i) * d * k);
      w.blocks[i].w_pos = nn::Tensor{};
    }
    w.w_pos_all = all;
    move(w.w_pos_all);
  }
  for (ParakeetBlock& b : w.blocks)
    for (nn::Tensor* t :
         {&b.ff1_norm_w,  &b.ff1_norm_b,  &b.ff1_w1,      &b.ff1_b1,     &b.ff1_w2,     &b.ff1_b2,
          &b.attn_norm_w, &b.attn_norm_b, &b.wq,          &b.bq,         &b.wk,         &b.bk,
          &b.wv,          &b.bv,          &b.wo,          &b.bo,         &b.w_pos,      &b.pos_bias_u,
          &b.pos_bias_v,  &b.conv_norm_w, &b.conv_norm_b, &b.pw1_w,      &b.pw1_b,      &b.dw_w,
          &b.dw_b,        &b.pw2_w,       &b.pw2_b,       &b.ff2_norm_w, &b.ff2_norm_b, &b.ff2_w1,
          &b.ff2_b1,      &b.ff2_w2,      &b.ff2_b2,      &b.out_norm_w, &b.out_norm_b, &b.w_qkv,
          &b.b_qkv})
      move(*t);
  for (nn::LstmWeights& l : w.lstm)
    for (nn::Tensor* t :
         {&l.w_ih, &l.w_hh, &l.b, &l.w_ih_scales, &l.w_hh_scales, &l.w_ih_zero_points, &l.w_hh_zero_points})
      move(*t);
  SOTTO_TRY(failed);
  // Every tensor now lives on `ctx`; the CPU context that held them goes (after them).
  std::unique_ptr<nn::Context> cpu = std::move(w.ctx);
  w.ctx = std::move(ctx);
  return m;
}

TdtResult ParakeetModel::decode_on_gpu(const nn::Tensor& encoder_out) {
  const ParakeetWeights& w = weights_;
  const ParakeetConfig& c = w.config;
  const nn::Tensor enc = nn::linear(encoder_out, w.enc_proj_w, w.enc_proj_b);
  auto r = nn::gpu_ops::tdt_greedy(enc, {.embedding = w.embedding,
                                         .lstm = w.lstm,
                                         .proj_w = w.dec_proj_w,
                                         .proj_b = w.dec_proj_b,
                                         .joint_w = w.joint_w,
                                         .joint_b = w.joint_b,
                                         .blank_id = c.blank_id,
                                         .vocab_size = c.vocab_size,
                                         .durations = c.durations,
                                         .max_symbols_per_step = c.max_symbols_per_step});
  if (!r) {  // the recorder keeps the first failure: transcribe() reports it
    w.ctx->gpu()->fail(r.message());
    return {};
  }
  return TdtResult{std::move(r->tokens), std::move(r->frames), std::move(r->durations)};
}

}  // namespace sotto::asr
