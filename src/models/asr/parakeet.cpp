#include "models/asr/parakeet.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/half.h"
#include "core/thread_pool.h"
#include "io/json.h"
#include "nn/cpu.h"
#include "nn/fused.h"
#include "nn/gemm.h"
#include "nn/gpu_recorder.h"

namespace sotto::asr {

namespace {

using nn::Tensor;

// ---------------------------------------------------------------- config.json

struct ConfigReader {
  const JsonValue& obj;
  std::string_view file;
  std::string_view scope;

  Status int_field(std::string_view key, int& out, bool required = true) const {
    const JsonValue* v = obj.find(key);
    if (!v) return required ? error(file, ": ", scope, quoted(key), " is missing") : Status{};
    const auto n = v->as_u64();
    if (!n || *n > 1u << 24)
      return error(file, ": ", scope, quoted(key), " is not a small non-negative integer");
    out = static_cast<int>(*n);
    return {};
  }
  Status bool_field(std::string_view key, bool& out) const {
    const JsonValue* v = obj.find(key);
    if (!v) return {};
    if (v->kind != JsonValue::Kind::Bool) return error(file, ": ", scope, quoted(key), " is not true/false");
    out = v->boolean;
    return {};
  }
  Status string_field(std::string_view key, std::string& out) const {
    const JsonValue* v = obj.find(key);
    if (!v) return {};
    if (!v->is_string()) return error(file, ": ", scope, quoted(key), " is not a string");
    out = v->text;
    return {};
  }
};

// ---------------------------------------------------------------- weights

struct Loader {
  const nn::WeightSource& src;
  nn::Context& ctx;

  Result<Tensor> get(const std::string& name, const nn::Shape& shape) const {
    return src.load(ctx, name, shape);
  }
  // A bias the config says exists (or not): present when `has`, and then with this shape.
  Result<Tensor> bias(const std::string& name, int64_t n, bool has) const {
    if (!has) {
      if (src.find(name))
        return error(src.file_name(), ": tensor '", name,
                     "' is present but config.json says there are no biases");
      return Tensor{};
    }
    return get(name, {n});
  }
};

}  // namespace

int ParakeetConfig::subsampled_mels() const {
  int f = n_mels;
  for (int s = 1; s < subsampling_factor; s *= 2) f = (f + 2 - 3) / 2 + 1;
  return f;
}

Result<ParakeetConfig> parse_parakeet_config(std::string_view json_text, std::string_view file_name) {
  SOTTO_ASSIGN(const JsonValue root, parse_json(json_text, file_name));
  if (!root.is_object()) return error(file_name, ": not a JSON object");
  ParakeetConfig c;
  std::string model_type;
  const ConfigReader top{root, file_name, ""};
  SOTTO_TRY(top.string_field("model_type", model_type));
  if (model_type != "parakeet_tdt")
    return error(file_name, ": model_type is ", quoted(model_type),
                 ", expected 'parakeet_tdt' (ParakeetForTDT)");
  const JsonValue* enc = root.find("encoder_config");
  if (!enc || !enc->is_object()) return error(file_name, ": 'encoder_config' is missing");
  const ConfigReader e{*enc, file_name, "encoder_config."};
  SOTTO_TRY(e.int_field("hidden_size", c.d_model));
  SOTTO_TRY(e.int_field("num_hidden_layers", c.n_layers));
  SOTTO_TRY(e.int_field("num_attention_heads", c.n_heads));
  SOTTO_TRY(e.int_field("intermediate_size", c.ff_dim));
  SOTTO_TRY(e.int_field("conv_kernel_size", c.conv_kernel));
  SOTTO_TRY(e.int_field("subsampling_conv_channels", c.subsampling_channels));
  SOTTO_TRY(e.int_field("subsampling_factor", c.subsampling_factor));
  SOTTO_TRY(e.int_field("num_mel_bins", c.n_mels));
  SOTTO_TRY(e.bool_field("attention_bias", c.attention_bias));
  SOTTO_TRY(e.bool_field("convolution_bias", c.convolution_bias));
  SOTTO_TRY(e.bool_field("scale_input", c.scale_input));
  int kv_heads = c.n_heads, sub_kernel = 3, sub_stride = 2;
  SOTTO_TRY(e.int_field("num_key_value_heads", kv_heads, false));
  SOTTO_TRY(e.int_field("subsampling_conv_kernel_size", sub_kernel, false));
  SOTTO_TRY(e.int_field("subsampling_conv_stride", sub_stride, false));
  std::string act = "silu";
  SOTTO_TRY(e.string_field("hidden_act", act));

  SOTTO_TRY(top.int_field("vocab_size", c.vocab_size));
  SOTTO_TRY(top.int_field("blank_token_id", c.blank_id));
  SOTTO_TRY(top.int_field("decoder_hidden_size", c.decoder_hidden));
  SOTTO_TRY(top.int_field("num_decoder_layers", c.decoder_layers));
  SOTTO_TRY(top.int_field("max_symbols_per_step", c.max_symbols_per_step, false));
  SOTTO_TRY(top.string_field("hidden_act", c.joint_activation));
  if (const JsonValue* d = root.find("durations")) {
    if (!d->is_array() || d->items.empty() || d->items.size() > 64)
      return error(file_name, ": 'durations' is not a list of 1..64 integers");
    c.durations.clear();
    for (const JsonValue& item : d->items) {
      const auto n = item.as_u64();
      if (!n || *n > 1000) return error(file_name, ": 'durations' holds a value that is not a frame count");
      c.durations.push_back(static_cast<int>(*n));
    }
  }

  // What this implementation runs (the NeMo v2/v3 shapes and any smaller one of the same form).
  if (c.d_model == 0 || c.n_heads == 0 || c.d_model % c.n_heads != 0)
    return error(file_name, ": hidden_size ", c.d_model, " is not a multiple of num_attention_heads ",
                 c.n_heads);
  if (c.d_model % 2 != 0)
    return error(file_name, ": hidden_size ", c.d_model, " is odd (sinusoids come in pairs)");
  if (kv_heads != c.n_heads)
    return error(file_name, ": num_key_value_heads ", kv_heads, " differs from the heads");
  if (sub_kernel != 3 || sub_stride != 2)
    return error(file_name, ": subsampling conv ", sub_kernel, "x", sub_kernel, " stride ", sub_stride,
                 " (only 3x3 stride 2 is implemented)");
  if (c.subsampling_factor != 8 && c.subsampling_factor != 4 && c.subsampling_factor != 2 &&
      c.subsampling_factor != 16)
    return error(file_name, ": subsampling_factor ", c.subsampling_factor, " is not a power of two up to 16");
  if (c.conv_kernel % 2 == 0) return error(file_name, ": conv_kernel_size ", c.conv_kernel, " is even");
  if (act != "silu")
    return error(file_name, ": encoder hidden_act ", quoted(act), " (only silu is implemented)");
  if (c.joint_activation != "relu")
    return error(file_name, ": joint hidden_act ", quoted(c.joint_activation), " (only relu is implemented)");
  if (c.n_mels != 128)
    return error(file_name, ": num_mel_bins ", c.n_mels, " (the nemo128 front end gives 128)");
  if (c.vocab_size < 2 || c.blank_id != c.vocab_size - 1)
    return error(file_name, ": blank_token_id ", c.blank_id, " is not the last of vocab_size ", c.vocab_size);
  if (c.decoder_layers < 1 || c.decoder_hidden < 1) return error(file_name, ": no decoder layers");
  if (c.max_symbols_per_step < 1) return error(file_name, ": max_symbols_per_step is 0");
  return c;
}

Result<ParakeetWeights> load_parakeet_weights(const nn::WeightSource& source, const ParakeetConfig& c,
                                              std::unique_ptr<nn::Context> ctx_owned) {
  ParakeetWeights w;
  w.config = c;
  w.ctx = std::move(ctx_owned);
  const Loader l{source, *w.ctx};
  const int64_t C = c.subsampling_channels, D = c.d_model, F = c.ff_dim, H = c.decoder_hidden;
  const int n_convs = [&] {
    int n = 0;
    for (int s = 1; s < c.subsampling_factor; s *= 2) ++n;
    return n;
  }();

  const std::string sub = "encoder.subsampling.";
  SOTTO_ASSIGN(w.sub_conv0_w, l.get(sub + "layers.0.weight", {C, 1, 3, 3}));
  SOTTO_ASSIGN(w.sub_conv0_b, l.get(sub + "layers.0.bias", {C}));
  for (int i = 1; i < n_convs; ++i) {
    // layers: 0 conv, 1 ReLU, then per stage: depthwise, pointwise, ReLU (indices 3i-1, 3i, 3i+1).
    const std::string dw = sub + "layers." + std::to_string(3 * i - 1) + ".",
                      pw = sub + "layers." + std::to_string(3 * i) + ".";
    SOTTO_ASSIGN(Tensor dw_w, l.get(dw + "weight", {C, 1, 3, 3}));
    SOTTO_ASSIGN(Tensor dw_b, l.get(dw + "bias", {C}));
    SOTTO_ASSIGN(Tensor pw_w, l.get(pw + "weight", {C, C, 1, 1}));
    SOTTO_ASSIGN(Tensor pw_b, l.get(pw + "bias", {C}));
    w.sub_dw_w.push_back(dw_w);
    w.sub_dw_b.push_back(dw_b);
    w.sub_pw_w.push_back(pw_w);
    w.sub_pw_b.push_back(pw_b);
  }
  SOTTO_ASSIGN(w.sub_linear_w, l.get(sub + "linear.weight", {D, C * c.subsampled_mels()}));
  SOTTO_ASSIGN(w.sub_linear_b, l.get(sub + "linear.bias", {D}));

  const bool ab = c.attention_bias, cb = c.convolution_bias;
  for (int i = 0; i < c.n_layers; ++i) {
    const std::string p = "encoder.layers." + std::to_string(i) + ".";
    ParakeetBlock b;
    auto norm = [&](const std::string& n, Tensor& g, Tensor& beta) -> Status {
      SOTTO_ASSIGN(g, l.get(p + n + ".weight", {D}));
      SOTTO_ASSIGN(beta, l.get(p + n + ".bias", {D}));
      return {};
    };
    auto ff = [&](const std::string& n, Tensor& w1, Tensor& b1, Tensor& w2, Tensor& b2) -> Status {
      SOTTO_ASSIGN(w1, l.get(p + n + ".linear1.weight", {F, D}));
      SOTTO_ASSIGN(b1, l.bias(p + n + ".linear1.bias", F, ab));
      SOTTO_ASSIGN(w2, l.get(p + n + ".linear2.weight", {D, F}));
      SOTTO_ASSIGN(b2, l.bias(p + n + ".linear2.bias", D, ab));
      return {};
    };
    SOTTO_TRY(norm("norm_feed_forward1", b.ff1_norm_w, b.ff1_norm_b));
    SOTTO_TRY(ff("feed_forward1", b.ff1_w1, b.ff1_b1, b.ff1_w2, b.ff1_b2));
    SOTTO_TRY(norm("norm_self_att", b.attn_norm_w, b.attn_norm_b));
    const std::string a = p + "self_attn.";
    SOTTO_ASSIGN(b.wq, l.get(a + "q_proj.weight", {D, D}));
    SOTTO_ASSIGN(b.bq, l.bias(a + "q_proj.bias", D, ab));
    SOTTO_ASSIGN(b.wk, l.get(a + "k_proj.weight", {D, D}));
    SOTTO_ASSIGN(b.bk, l.bias(a + "k_proj.bias", D, ab));
    SOTTO_ASSIGN(b.wv, l.get(a + "v_proj.weight", {D, D}));
    SOTTO_ASSIGN(b.bv, l.bias(a + "v_proj.bias", D, ab));
    SOTTO_ASSIGN(b.wo, l.get(a + "o_proj.weight", {D, D}));
    SOTTO_ASSIGN(b.bo, l.bias(a + "o_proj.bias", D, ab));
    SOTTO_ASSIGN(b.w_pos, l.get(a + "relative_k_proj.weight", {D, D}));
    SOTTO_ASSIGN(b.pos_bias_u, l.get(a + "bias_u", {c.n_heads, c.head_dim()}));
    SOTTO_ASSIGN(b.pos_bias_v, l.get(a + "bias_v", {c.n_heads, c.head_dim()}));
    SOTTO_TRY(norm("norm_conv", b.conv_norm_w, b.conv_norm_b));
    const std::string cv = p + "conv.";
    SOTTO_ASSIGN(Tensor pw1, l.get(cv + "pointwise_conv1.weight", {2 * D, D, 1}));
    b.pw1_w = pw1.reshape({2 * D, D});
    SOTTO_ASSIGN(b.pw1_b, l.bias(cv + "pointwise_conv1.bias", 2 * D, cb));
    SOTTO_ASSIGN(b.dw_w, l.get(cv + "depthwise_conv.weight", {D, 1, c.conv_kernel}));
    SOTTO_ASSIGN(b.dw_b, l.bias(cv + "depthwise_conv.bias", D, cb));
    SOTTO_ASSIGN(Tensor bn_g, l.get(cv + "norm.weight", {D}));
    SOTTO_ASSIGN(Tensor bn_b, l.get(cv + "norm.bias", {D}));
    SOTTO_ASSIGN(Tensor bn_m, l.get(cv + "norm.running_mean", {D}));
    SOTTO_ASSIGN(Tensor bn_v, l.get(cv + "norm.running_var", {D}));
    nn::fold_batch_norm(*w.ctx, b.dw_w, b.dw_b, bn_g, bn_b, bn_m, bn_v, 1e-5f);
    SOTTO_ASSIGN(Tensor pw2, l.get(cv + "pointwise_conv2.weight", {D, D, 1}));
    b.pw2_w = pw2.reshape({D, D});
    SOTTO_ASSIGN(b.pw2_b, l.bias(cv + "pointwise_conv2.bias", D, cb));
    SOTTO_TRY(norm("norm_feed_forward2", b.ff2_norm_w, b.ff2_norm_b));
    SOTTO_TRY(ff("feed_forward2", b.ff2_w1, b.ff2_b1, b.ff2_w2, b.ff2_b2));
    SOTTO_TRY(norm("norm_out", b.out_norm_w, b.out_norm_b));
    // The shifts of the norms before products go into those products' biases, so that each norm runs inside
    // its product on the GPU (block()); the out norm, before the next block's residual, keeps its own.
    auto fold = [&](Tensor& beta, std::initializer_list<std::pair<const Tensor*, Tensor*>> products) {
      for (auto [m, bias] : products) *bias = nn::fold_norm_shift(*w.ctx, *m, *bias, beta);
      beta = Tensor{};
    };
    fold(b.ff1_norm_b, {{&b.ff1_w1, &b.ff1_b1}});
    fold(b.attn_norm_b, {{&b.wq, &b.bq}, {&b.wk, &b.bk}, {&b.wv, &b.bv}});
    fold(b.conv_norm_b, {{&b.pw1_w, &b.pw1_b}});
    fold(b.ff2_norm_b, {{&b.ff2_w1, &b.ff2_b1}});
    w.blocks.push_back(std::move(b));
  }

  const int64_t V = c.vocab_size, n_dur = static_cast<int64_t>(c.durations.size());
  SOTTO_ASSIGN(w.enc_proj_w, l.get("encoder_projector.weight", {H, D}));
  SOTTO_ASSIGN(w.enc_proj_b, l.get("encoder_projector.bias", {H}));
  if (const nn::StoredTensor* e = source.find("decoder.embedding.weight");
      e && !e->shape.empty() && e->shape[0] != V)
    return error(source.file_name(), ": tensor 'decoder.embedding.weight' holds ", e->shape[0],
                 " rows but config.json says vocab_size ", V,
                 " (tokens + blank): the config is not this model's");
  SOTTO_ASSIGN(w.embedding, l.get("decoder.embedding.weight", {V, H}));
  for (int i = 0; i < c.decoder_layers; ++i) {
    const std::string s = std::to_string(i);
    nn::LstmWeights lw;
    SOTTO_ASSIGN(lw.w_ih, l.get("decoder.lstm.weight_ih_l" + s, {4 * H, H}));
    SOTTO_ASSIGN(lw.w_hh, l.get("decoder.lstm.weight_hh_l" + s, {4 * H, H}));
    SOTTO_ASSIGN(Tensor b_ih, l.get("decoder.lstm.bias_ih_l" + s, {4 * H}));
    SOTTO_ASSIGN(Tensor b_hh, l.get("decoder.lstm.bias_hh_l" + s, {4 * H}));
    lw.b = nn::add(b_ih, b_hh);
    w.lstm.push_back(lw);
  }
  SOTTO_ASSIGN(w.dec_proj_w, l.get("decoder.decoder_projector.weight", {H, H}));
  SOTTO_ASSIGN(w.dec_proj_b, l.get("decoder.decoder_projector.bias", {H}));
  if (const nn::StoredTensor* j = source.find("joint.head.weight");
      j && !j->shape.empty() && j->shape[0] != V + n_dur)
    return error(source.file_name(), ": tensor 'joint.head.weight' has ", j->shape[0],
                 " outputs but config.json says ", V, " tokens + blank and ", n_dur, " durations");
  SOTTO_ASSIGN(w.joint_w, l.get("joint.head.weight", {V + n_dur, H}));
  SOTTO_ASSIGN(w.joint_b, l.get("joint.head.bias", {V + n_dur}));
  return w;
}

// ---------------------------------------------------------------- model

ParakeetModel::~ParakeetModel() = default;

Result<std::unique_ptr<ParakeetModel>> ParakeetModel::load(std::string_view config_json,
                                                           std::span<const uint8_t> safetensors_bytes,
                                                           std::string file_name, int n_threads) {
  auto pool = std::make_unique<ThreadPool>(n_threads);
  SOTTO_ASSIGN(auto m, load(config_json, safetensors_bytes, std::move(file_name), *pool));
  m->own_pool_ = std::move(pool);
  return m;
}

Result<std::unique_ptr<ParakeetModel>> ParakeetModel::load(std::string_view config_json,
                                                           std::span<const uint8_t> safetensors_bytes,
                                                           std::string file_name, ThreadPool& pool) {
  SOTTO_ASSIGN(ParakeetConfig config, parse_parakeet_config(config_json));
  SOTTO_ASSIGN(auto source, nn::open_weights(std::move(file_name), safetensors_bytes));
  std::unique_ptr<ParakeetModel> m(new ParakeetModel());
  SOTTO_ASSIGN(m->weights_, load_parakeet_weights(*source, config, nn::Context::cpu(&pool)));
  return m;
}

namespace {
// The encoder's matrices: the subsampling's Linear and every Linear and pointwise conv of the blocks (~99 % of
// the weight bytes), which use_half_matrices, use_packed_matrices and use_bf16x3_products each convert.
std::vector<Tensor*> encoder_matrices(ParakeetWeights& w) {
  std::vector<Tensor*> out = {&w.sub_linear_w};
  for (ParakeetBlock& b : w.blocks)
    out.insert(out.end(), {&b.ff1_w1, &b.ff1_w2, &b.wq, &b.wk, &b.wv, &b.wo, &b.w_pos, &b.pw1_w, &b.pw2_w,
                           &b.ff2_w1, &b.ff2_w2});
  return out;
}

// A float32 matrix whose row count is a multiple of `rows` (the kernel's panel), not packed yet.
bool packable(const Tensor& t, int64_t rows, const std::unordered_set<const void*>& packed) {
  return t.defined() && t.dtype() == DType::F32 && t.rank() == 2 && t.dim(0) % rows == 0 &&
         !packed.count(t.f32());
}
}  // namespace

void ParakeetModel::use_half_matrices() {
  nn::Context& ctx = *weights_.ctx;
  auto half = [&](Tensor& t) {
    if (!t.defined() || t.dtype() != DType::F32) return;
    std::vector<uint16_t> h(static_cast<size_t>(t.elements()));
    for (size_t i = 0; i < h.size(); ++i) h[i] = f32_to_f16(t.f32()[i]);
    t = ctx.from_bytes(t.shape(), DType::F16, {reinterpret_cast<const uint8_t*>(h.data()), h.size() * 2});
  };
  for (Tensor* t : encoder_matrices(weights_)) half(*t);
  half(weights_.enc_proj_w);
  half(weights_.dec_proj_w);
  half(weights_.joint_w);
}

void ParakeetModel::use_packed_matrices() {
  nn::Context& ctx = *weights_.ctx;
  const int64_t width = nn::cpu::gemm_panel_width();
  auto pack = [&](Tensor& t) {
    if (!packable(t, width, packed_)) return;
    t = nn::cpu::pack_weight(ctx, t);
    packed_.insert(t.f32());
  };
  for (Tensor* t : encoder_matrices(weights_)) pack(*t);
}

bool ParakeetModel::use_bf16x3_products() {
  if (!nn::cpu::gemm_bf16_use_amx() || weights_.ctx->backend() != nn::Backend::Cpu) return false;
  nn::Context& ctx = *weights_.ctx;
  auto pack = [&](Tensor& t) {
    if (!packable(t, 16, packed_)) return;
    t = nn::cpu::pack_weight_bf16x3(ctx, t);
    bf16_.insert(t.data<uint16_t>());
  };
  for (Tensor* t : encoder_matrices(weights_)) pack(*t);
  return true;
}

Tensor ParakeetModel::linear(const Tensor& x, const Tensor& w, const Tensor& b) const {
  if (w.defined() && bf16_.count(w.data<uint16_t>())) return nn::cpu::linear_bf16x3(x, w, b);
  if (!w.defined() || !packed_.count(w.f32())) return nn::linear(x, w, b);
  return nn::cpu::linear_prepacked(x, w, b);
}

// Sinusoids for relative positions T-1 .. -(T-1) (row r holds position T-1-r), sin and cos interleaved,
// computed as transformers does in float32: angle = float(position * inv_freq), then sin / cos. A row depends
// only on its position, so the table of the longest clip so far is kept and a shorter clip's are its middle
// rows (a view; ~1.7 ms of the host's time for 6 s of audio, 17 ms for 60 s, made once). On the GPU a view
// must start at a multiple of 256 bytes: where a row is not, the table is made for each clip.
Tensor ParakeetModel::positions(int64_t t) {
  const int64_t d = weights_.config.d_model;
  const bool keep = weights_.ctx->backend() == nn::Backend::Cpu || (d * 4) % 256 == 0;
  if (keep && positions_.defined() && t <= positions_t_)
    return positions_.rows(positions_t_ - t, positions_t_ + t - 1);
  const int64_t n = 2 * t - 1;
  std::vector<float> pe(static_cast<size_t>(n * d));  // made here, then uploaded (the context may be a GPU's)
  std::vector<float> inv_freq(static_cast<size_t>(d / 2));
  for (int64_t k = 0; k < d / 2; ++k)
    inv_freq[static_cast<size_t>(k)] =
        static_cast<float>(1.0 / std::pow(10000.0, static_cast<double>(2 * k) / static_cast<double>(d)));
  for (int64_t r = 0; r < n; ++r) {
    const float pos = static_cast<float>(t - 1 - r);
    float* row = pe.data() + r * d;
    for (int64_t k = 0; k < d / 2; ++k) {
      const float angle = pos * inv_freq[static_cast<size_t>(k)];
      row[2 * k] = static_cast<float>(std::sin(static_cast<double>(angle)));
      row[2 * k + 1] = static_cast<float>(std::cos(static_cast<double>(angle)));
    }
  }
  const Tensor table = weights_.ctx->from_floats({n, d}, pe);
  if (keep) positions_ = table, positions_t_ = t;
  return table;
}

Tensor ParakeetModel::block(const Tensor& x0, const ParakeetBlock& b, const Tensor& p) {
  const ParakeetConfig& c = weights_.config;
  constexpr float eps = 1e-5f;
  // Each product with the ops around it (nn/fused.h): act(norm(x) . W^T + b) * scale + residual, the norms'
  // shifts folded into the products' biases at load. On the GPU one dispatch each (the norm as the product
  // loads x, SiLU, the half step and the residual add as it stores: 13 dispatches a block fewer); the CPU's
  // products (packed or split-bf16, this->linear) take the ops one by one, as do half-precision matrices.
  const bool fused = weights_.ctx->backend() == nn::Backend::Gpu;
  auto product = [&](const Tensor& x, const Tensor& w, const Tensor& bias, const nn::LinearFusedF32& f) {
    if (fused && w.dtype() == DType::F32) return nn::linear_fused_f32(x, w, bias, f);
    return nn::linear_fused_f32_around(x, f, [&](const Tensor& xn) { return linear(xn, w, bias); });
  };
  // x + 1/2 FF(LayerNorm(x)), FF = Linear, SiLU, Linear.
  auto half_step_feed_forward = [&](const Tensor& x, const Tensor& gamma, const Tensor& w1, const Tensor& b1,
                                    const Tensor& w2, const Tensor& b2) {
    const Tensor h = product(x, w1, b1, {.norm_gamma = gamma, .norm_eps = eps, .act = nn::Act::Silu});
    return product(h, w2, b2, {.scale = 0.5f, .residual = x});
  };
  Tensor x = half_step_feed_forward(x0, b.ff1_norm_w, b.ff1_w1, b.ff1_b1, b.ff1_w2, b.ff1_b2);

  const nn::LinearFusedF32 normed = {.norm_gamma = b.attn_norm_w, .norm_eps = eps};
  Tensor q, k, v;
  if (b.w_qkv.defined()) {
    // q, k and v as one product (GPU), its output in three blocks of d_model columns [3, T padded, d_model]: each
    // block's first T rows a view at a 256-byte multiple that the attention binds as [T, d_model].
    nn::LinearFusedF32 stacked = normed;
    stacked.stack_columns = c.d_model;
    const Tensor qkv = nn::linear_fused_f32(x, b.w_qkv, b.b_qkv, stacked);
    const int64_t rows = qkv.dim(1), t = x.dim(0);
    const Tensor blocks = qkv.reshape({3 * rows, c.d_model});
    q = blocks.rows(0, t), k = blocks.rows(rows, rows + t), v = blocks.rows(2 * rows, 2 * rows + t);
  } else {
    q = product(x, b.wq, b.bq, normed), k = product(x, b.wk, b.bk, normed),
    v = product(x, b.wv, b.bv, normed);
  }
  const Tensor att = nn::attention_rel_pos(q, k, v, p, b.pos_bias_u, b.pos_bias_v, {.n_heads = c.n_heads});
  x = product(att, b.wo, b.bo, {.residual = x});

  // Conv module, time-major: pointwise to GLU's two halves, GLU, depthwise conv (batch norm folded in), SiLU,
  // pointwise.
  const Tensor y = product(x, b.pw1_w, b.pw1_b, {.norm_gamma = b.conv_norm_w, .norm_eps = eps});
  x = product(nn::glu_depthwise_conv1d_silu(y, b.dw_w, b.dw_b), b.pw2_w, b.pw2_b, {.residual = x});

  x = half_step_feed_forward(x, b.ff2_norm_w, b.ff2_w1, b.ff2_b1, b.ff2_w2, b.ff2_b2);
  return nn::layer_norm(x, b.out_norm_w, b.out_norm_b, eps);
}

audio::MelFeatures ParakeetModel::mel(std::span<const float> audio_16k) const {
  ThreadPool* pool = weights_.ctx->backend() == nn::Backend::Cpu ? weights_.ctx->pool() : own_pool_.get();
  return audio::nemo_log_mel(audio_16k, {}, pool);
}

Tensor ParakeetModel::encode(std::span<const float> mel, int64_t n_frames) {
  const ParakeetWeights& w = weights_;
  const ParakeetConfig& c = w.config;
  nn::Context& ctx = *w.ctx;
  // [n_mels, T] -> [1, T, n_mels]: conv2d's H is time, W is frequency (transformers' layout).
  Tensor x = nn::transpose(ctx.from_floats({c.n_mels, n_frames}, mel)).reshape({1, n_frames, c.n_mels});
  const nn::Conv2dOptions s2{.stride_h = 2, .stride_w = 2, .pad_h = 1, .pad_w = 1};
  x = nn::relu(nn::conv2d(x, w.sub_conv0_w, w.sub_conv0_b, s2));
  for (size_t i = 0; i < w.sub_dw_w.size(); ++i) {
    nn::Conv2dOptions dw = s2;
    dw.groups = c.subsampling_channels;
    x = nn::conv2d(x, w.sub_dw_w[i], w.sub_dw_b[i], dw);
    x = nn::relu(nn::conv2d(x, w.sub_pw_w[i], w.sub_pw_b[i]));
  }
  // [C, T', F'] -> [T', C * F'] (channel-major within a frame, as transformers flattens).
  const int64_t t = x.dim(1);
  const int order[] = {1, 0, 2};
  x = nn::permute(x, order).reshape({t, x.dim(0) * x.dim(2)});
  x = linear(x, w.sub_linear_w, w.sub_linear_b);
  if (c.scale_input) x = nn::scale(x, std::sqrt(static_cast<float>(c.d_model)));

  const Tensor pos = positions(t);
  if (w.w_pos_all.defined()) {
    // Every block's projection of the table in one product (GPU), in blocks of d_model columns: block i's first
    // 2T - 1 rows are its view.
    const int64_t d = c.d_model, n = pos.dim(0);
    const Tensor all = nn::linear_fused_f32(pos, w.w_pos_all, {}, {.stack_columns = d});
    const int64_t rows = all.dim(1);
    const Tensor blocks = all.reshape({all.dim(0) * rows, d});
    for (size_t i = 0; i < w.blocks.size(); ++i) {
      const int64_t at = static_cast<int64_t>(i) * rows;
      x = block(x, w.blocks[i], blocks.rows(at, at + n));
    }
    return x;
  }
  for (const ParakeetBlock& b : w.blocks) x = block(x, b, linear(pos, b.w_pos));
  return x;
}

TdtResult ParakeetModel::decode(const Tensor& encoder_out) {
  const ParakeetWeights& w = weights_;
  const ParakeetConfig& c = w.config;
  nn::Context& ctx = *w.ctx;
  if (ctx.gpu()) return decode_on_gpu(encoder_out);
  const int64_t n_frames = encoder_out.dim(0), H = c.decoder_hidden, V = c.vocab_size;
  // [T', H], once for every frame; read to the host.
  auto read = [&](const Tensor& t) {  // empty when the read fails (an op without a GPU kernel)
    auto v = ctx.to_floats(t);
    return v.ok() ? std::move(*v) : std::vector<float>{};
  };
  const std::vector<float> enc = read(nn::linear(encoder_out, w.enc_proj_w, w.enc_proj_b));

  std::vector<Tensor> h(w.lstm.size()), cs(w.lstm.size());
  for (size_t i = 0; i < w.lstm.size(); ++i) h[i] = cs[i] = ctx.zeros({H});
  Tensor g;
  // The prediction net on one token: embedding, the LSTM layers (state carried), projection.
  auto advance = [&](int32_t token) {
    const int32_t id = token;
    Tensor y = nn::embedding(w.embedding,
                             ctx.from_bytes({1}, DType::I32, {reinterpret_cast<const uint8_t*>(&id), 4}));
    for (size_t i = 0; i < w.lstm.size(); ++i) {
      Tensor ho, co;
      y = nn::lstm(y, w.lstm[i], false, h[i], cs[i], &ho, &co);
      h[i] = ho.reshape({H});
      cs[i] = co.reshape({H});
    }
    g = nn::linear(y, w.dec_proj_w, w.dec_proj_b).reshape({H});
  };
  advance(c.blank_id);  // the start symbol (blank), through the LSTM once

  std::vector<float> logits;
  auto step = [&](int64_t t) {
    if (enc.size() != static_cast<size_t>(n_frames * H)) return TdtStep{c.blank_id, 1};  // a failed read
    const Tensor row =
        ctx.from_floats({H}, std::span<const float>(enc.data() + t * H, static_cast<size_t>(H)));
    const Tensor out = nn::linear(nn::relu(nn::add(row, g)).reshape({1, H}), w.joint_w, w.joint_b);
    logits = read(out);
    if (logits.size() != static_cast<size_t>(out.dim(1))) return TdtStep{c.blank_id, 1};
    const float* l = logits.data();
    // First maximum wins ties, as torch.argmax does.
    const int64_t tok = std::max_element(l, l + V) - l;
    const int64_t dur = std::max_element(l + V, l + out.dim(1)) - (l + V);
    const bool finite = std::isfinite(l[tok]);
    return TdtStep{finite ? static_cast<int32_t>(tok) : c.blank_id,
                   finite ? c.durations[static_cast<size_t>(dur)] : 1};
  };
  return tdt_greedy(n_frames, c.blank_id, c.max_symbols_per_step, step, advance);
}

Result<TdtResult> ParakeetModel::transcribe(std::span<const float> audio, double max_chunk_s) {
  for (size_t i = 0; i < audio.size(); ++i)
    if (!std::isfinite(audio[i])) return error("parakeet: audio sample ", i, " is not a finite number");
  const int hop = 160,
            frames_per_out = hop * weights_.config.subsampling_factor;  // samples per encoder frame
  const int64_t chunk = std::max<int64_t>(
      frames_per_out, static_cast<int64_t>(max_chunk_s * 16000.0) / frames_per_out * frames_per_out);
  // Each cut falls on an encoder-frame boundary in the last quarter of the chunk (at most 4 s before it), at
  // the frame of least energy there (the latest of equals), so words are rarely split.
  const int64_t total = static_cast<int64_t>(audio.size());
  auto energy = [&](int64_t at) {
    double e = 0;
    for (int64_t i = std::max<int64_t>(0, at - frames_per_out / 2);
         i < std::min(total, at + frames_per_out / 2); ++i)
      e += static_cast<double>(audio[static_cast<size_t>(i)]) * audio[static_cast<size_t>(i)];
    return e;
  };
  TdtResult all;
  for (int64_t start = 0; start < total;) {
    int64_t end = total;
    if (total - start > chunk) {
      end = start + chunk;
      const int64_t search = std::min<int64_t>(chunk / 4, 4 * 16000) / frames_per_out;
      double best = energy(end);
      for (int64_t k = 1; k <= search; ++k) {
        const int64_t at = start + chunk - k * frames_per_out;
        if (const double e = energy(at); e < best) best = e, end = at;
      }
    }
    const audio::MelFeatures mel =
        this->mel(audio.subspan(static_cast<size_t>(start), static_cast<size_t>(end - start)));
    if (mel.n_frames > 0) {
      const TdtResult r = decode(encode(mel.data, mel.n_frames));
      const int32_t offset = static_cast<int32_t>(start / frames_per_out);
      for (size_t i = 0; i < r.tokens.size(); ++i) {
        all.tokens.push_back(r.tokens[i]);
        all.frames.push_back(r.frames[i] + offset);
        all.durations.push_back(r.durations[i]);
      }
    }
    start = end;
  }
  if (weights_.ctx->gpu()) SOTTO_TRY(weights_.ctx->gpu()->status());  // a GPU op's or read's failure
  return all;
}

}  // namespace sotto::asr
