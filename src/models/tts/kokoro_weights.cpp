// Kokoro's weights out of the int8 ONNX file (see kokoro.h): every tensor found by name, checked for shape and
// dtype, put on the context. The int8 modules' tensor names come from kokoro_names.inc (read off the graph's
// nodes by tools/kokoro_reference.py --names); float tensors keep their PyTorch names or the export's folded
// weight-norm names ("/decoder/decoder/generator/Mul_output_0").
#include <cfloat>
#include <cstring>
#include <span>
#include <string>
#include <vector>

#include "models/tts/kokoro.h"
#include "nn/ops.h"

namespace sotto::tts {

namespace {

struct ModuleNames {
  const char* module;
  const char* weight;
  const char* scale;
  const char* zero_point;
  const char* bias;
};

constexpr ModuleNames kModules[] = {
#include "models/tts/kokoro_names.inc"
};

// Loads tensors and keeps the first failure, so the weights read as one list of assignments below.
class Loader {
 public:
  Loader(nn::Context& ctx, const nn::WeightSource& source) : ctx_(ctx), source_(source) {}
  const Status& status() const { return status_; }

  nn::Tensor tensor(std::string_view name, const nn::Shape& shape,
                    std::initializer_list<DType> dtypes = {DType::F32}) {
    if (!status_.ok()) return {};
    auto t = source_.load(ctx_, name, shape, dtypes);
    if (!t.ok()) {
      status_ = t.status();
      return {};
    }
    return std::move(t).value();
  }
  // A [1, C, 1] (or any shape of C elements) float tensor as [C].
  nn::Tensor vector(std::string_view name, int64_t c) {
    if (!status_.ok()) return {};
    const nn::StoredTensor* s = source_.find(name);
    if (s == nullptr) return fail(source_.missing(name));
    int64_t n = 1;
    for (int64_t d : s->shape) n *= d;
    if (n != c || s->dtype != DType::F32)
      return fail(error(source_.file_name(), ": tensor ", quoted(name), " has ", n, " elements, expected ", c,
                        " float32"));
    return ctx_.from_bytes({c}, DType::F32, s->bytes);
  }
  float scalar(std::string_view name) {
    if (!status_.ok()) return 0.0f;
    auto v = source_.scalar(name);
    if (!v.ok()) {
      status_ = v.status();
      return 0.0f;
    }
    return *v;
  }

  const ModuleNames* names(std::string_view module) {
    for (const ModuleNames& m : kModules)
      if (module == m.module) return &m;
    if (status_.ok())
      status_ = error(source_.file_name(), ": no int8 weights known for module '", module,
                      "' (not Kokoro v1.0 int8)");
    return nullptr;
  }

  // int8 [in, out] with per-column scales and zero points, float bias [out].
  QuantLinear linear(std::string_view module, int64_t in, int64_t out) {
    QuantLinear l;
    const ModuleNames* n = names(module);
    if (n == nullptr) return l;
    l.w = tensor(n->weight, {in, out}, {DType::I8});
    l.scales = tensor(n->scale, {out});
    l.zero_points = tensor(n->zero_point, {out}, {DType::I8});
    if (*n->bias) l.bias = tensor(n->bias, {out});
    return l;
  }

  // uint8 [out, in, k] with a per-tensor scale and zero point, float bias [out] or none.
  QuantConv conv(std::string_view module, int64_t out, int64_t in, int kernel, int stride = 1,
                 int padding = -1, int dilation = 1) {
    QuantConv c;
    c.kernel = kernel;
    c.stride = stride;
    c.dilation = dilation;
    c.padding = padding >= 0 ? padding : dilation * (kernel - 1) / 2;
    const ModuleNames* n = names(module);
    if (n == nullptr) return c;
    c.w = tensor(n->weight, {out, in, kernel}, {DType::U8});
    const float scale = scalar(n->scale);
    const float zero_point = scalar(n->zero_point);
    if (c.w.defined()) c.w = c.w.with_quant({scale, static_cast<int32_t>(zero_point)});
    if (*n->bias) c.bias = tensor(n->bias, {out});
    return c;
  }

  // DynamicQuantizeLSTM's W [2, in, 4H], R [2, H, 4H] int8 (gates i, o, f, c), per-direction scale and zero
  // point, B [2, 8H] (input then recurrent biases) -> one LstmWeights per direction in nn's int8 layout: W
  // [in, 4H], R [H, 4H], gate columns reordered to i, f, g, o, b = bias_ih + bias_hh.
  QuantBiLstm bilstm(std::string_view module, int64_t in, int64_t hidden) {
    QuantBiLstm out;
    const ModuleNames* wn = names(module);
    const ModuleNames* rn = names(std::string(module) + "#recurrent");
    if (wn == nullptr || rn == nullptr) return out;
    const int64_t h4 = 4 * hidden;
    nn::Tensor w = tensor(wn->weight, {2, in, h4}, {DType::I8});
    nn::Tensor r = tensor(rn->weight, {2, hidden, h4}, {DType::I8});
    nn::Tensor b = tensor(wn->bias, {2, 2 * h4});
    nn::Tensor w_scale = tensor(wn->scale, {2});
    nn::Tensor w_zero = tensor(wn->zero_point, {2}, {DType::I8});
    nn::Tensor r_scale = tensor(rn->scale, {2});
    nn::Tensor r_zero = tensor(rn->zero_point, {2}, {DType::I8});
    if (!status_.ok()) return out;
    constexpr int kFromOnnxGate[4] = {0, 2, 3, 1};  // nn gate (i, f, g, o) <- ONNX gate (i, o, f, c)
    for (int dir = 0; dir < 2; ++dir) {
      nn::LstmWeights& lw = dir == 0 ? out.forward : out.backward;
      // src [2, rows, 4H] -> this direction's [rows, 4H] with the gate column blocks reordered.
      auto regate = [&](const nn::Tensor& src, int64_t rows) {
        std::vector<int8_t> dst(static_cast<size_t>(rows * h4));
        const int8_t* s = src.data<int8_t>() + dir * rows * h4;
        for (int64_t k = 0; k < rows; ++k)
          for (int g = 0; g < 4; ++g)
            std::memcpy(&dst[static_cast<size_t>(k * h4 + g * hidden)],
                        s + k * h4 + kFromOnnxGate[g] * hidden, static_cast<size_t>(hidden));
        return ctx_.from_bytes({rows, h4}, DType::I8,
                               {reinterpret_cast<const uint8_t*>(dst.data()), dst.size()});
      };
      lw.w_ih = regate(w, in).with_quant({w_scale.f32()[dir], w_zero.data<int8_t>()[dir]});
      lw.w_hh = regate(r, hidden).with_quant({r_scale.f32()[dir], r_zero.data<int8_t>()[dir]});
      std::vector<float> bias(static_cast<size_t>(h4));
      const float* bs = b.f32() + dir * 2 * h4;
      for (int g = 0; g < 4; ++g)
        for (int64_t j = 0; j < hidden; ++j)
          bias[static_cast<size_t>(g * hidden + j)] =
              bs[kFromOnnxGate[g] * hidden + j] + bs[h4 + kFromOnnxGate[g] * hidden + j];
      lw.b = ctx_.from_floats({h4}, bias);
    }
    return out;
  }

  // An AdaIN of `stage`: its fc [128, 2C] is set aside for the stage's stacked product (kokoro.h,
  // KokoroStyleStage), gamma at the next free column, beta stride(C) after it.
  AdaIn adain(std::string_view module, int64_t channels, KokoroStyleStage stage) {
    StyleStack& s = style_[stage];
    const AdaIn a{.channels = channels, .at = s.columns};
    s.fcs.push_back({linear(std::string(module) + "/fc", 128, 2 * channels), a});
    s.columns += 2 * kokoro_style_stride(channels);
    return a;
  }

  // Each stage's AdaIN fcs stacked column-wise; the columns between blocks are zero weights, scales and biases.
  void stack_style_products(KokoroWeights& w) {
    for (int stage = 0; stage < kStyleStages; ++stage) {
      const StyleStack& s = style_[stage];
      const int64_t n = s.columns;
      std::vector<int8_t> wq(static_cast<size_t>(128 * n), 0), zp(static_cast<size_t>(n), 0);
      std::vector<float> scales(static_cast<size_t>(n), 0.0f), bias(static_cast<size_t>(n), 0.0f);
      for (const auto& [f, a] : s.fcs) {
        const int64_t c = a.channels, c2 = 2 * c;
        for (int64_t src = 0; src < c2; ++src) {
          const auto dst = static_cast<size_t>(a.at + (src < c ? src : kokoro_style_stride(c) + src - c));
          for (int64_t k = 0; k < 128; ++k)
            wq[static_cast<size_t>(k * n) + dst] = f.w.data<int8_t>()[k * c2 + src];
          scales[dst] = f.scales.f32()[src];
          zp[dst] = f.zero_points.data<int8_t>()[src];
          bias[dst] = f.bias.defined() ? f.bias.f32()[src] : 0.0f;
        }
      }
      const auto bytes = [](const std::vector<int8_t>& v) {
        return std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(v.data()), v.size());
      };
      w.style_products[stage] = {ctx_.from_bytes({128, n}, DType::I8, bytes(wq)),
                                 ctx_.from_floats({n}, scales), ctx_.from_bytes({n}, DType::I8, bytes(zp)),
                                 ctx_.from_floats({n}, bias)};
    }
  }

  AdainResBlock1d res_block(const std::string& path, const std::string& torch_path, int64_t dim_in,
                            int64_t dim_out, bool upsample, KokoroStyleStage stage) {
    AdainResBlock1d b;
    b.upsample = upsample;
    b.norm1 = adain(path + "/norm1", dim_in, stage);
    b.norm2 = adain(path + "/norm2", dim_out, stage);
    b.conv1 = conv(path + "/conv1", dim_out, dim_in, 3);
    b.conv2 = conv(path + "/conv2", dim_out, dim_out, 3);
    if (dim_in != dim_out) b.shortcut = conv(path + "/conv1x1", dim_out, dim_in, 1);
    if (upsample) {
      b.pool_w = tensor("/" + path + "/Mul_output_0", {dim_in, 1, 3});
      b.pool_b = tensor(torch_path + ".pool.bias", {dim_in});
    }
    return b;
  }

  AdaInResBlock1 generator_block(const std::string& path, const std::string& torch_path, int64_t channels,
                                 int kernel) {
    AdaInResBlock1 b;
    constexpr int kDilations[3] = {1, 3, 5};
    for (int j = 0; j < 3; ++j) {
      const std::string i = std::to_string(j);
      b.adain1[j] = adain(path + "/adain1." + i, channels, kStyleGenerator);
      b.adain2[j] = adain(path + "/adain2." + i, channels, kStyleGenerator);
      b.alpha1[j] = vector(torch_path + ".alpha1." + i, channels);
      b.alpha2[j] = vector(torch_path + ".alpha2." + i, channels);
      b.convs1[j] = conv(path + "/convs1." + i, channels, channels, kernel, 1, -1, kDilations[j]);
      b.convs2[j] = conv(path + "/convs2." + i, channels, channels, kernel);
    }
    return b;
  }

  nn::Tensor constant(float v) { return ctx_.from_floats({1}, {&v, 1}); }
  nn::Context& ctx() { return ctx_; }

 private:
  nn::Tensor fail(Status s) {
    if (status_.ok()) status_ = std::move(s);
    return {};
  }

  struct StyleStack {
    std::vector<std::pair<QuantLinear, AdaIn>> fcs;
    int64_t columns = 0;
  };

  nn::Context& ctx_;
  const nn::WeightSource& source_;
  Status status_;
  StyleStack style_[kStyleStages];
};

// An int8 table with its per-tensor scale and zero point attached.
nn::Tensor quant_table(Loader& l, const std::string& name, int64_t rows, int64_t cols,
                       const std::string& zero_point) {
  nn::Tensor t = l.tensor(name + "_quantized", {rows, cols}, {DType::I8});
  const float scale = l.scalar(name + "_scale");
  const float zp = l.scalar(zero_point);
  return t.defined() ? t.with_quant({scale, static_cast<int32_t>(zp)}) : t;
}

}  // namespace

Result<KokoroWeights> load_kokoro_weights(nn::Context& ctx, const nn::WeightSource& source) {
  Loader l(ctx, source);
  KokoroWeights w;
  const std::string emb_zp = "encoder.bert.embeddings.word_embeddings.weight_zero_point";

  // ALBERT
  const std::string bert = "encoder/bert/encoder/albert_layer_groups.0/albert_layers.0";
  const std::string bert_t = "encoder.bert.encoder.albert_layer_groups.0.albert_layers.0";
  w.word_embeddings = quant_table(l, "encoder.bert.embeddings.word_embeddings.weight", 178, 128, emb_zp);
  w.position_embeddings =
      quant_table(l, "encoder.bert.embeddings.position_embeddings.weight", 512, 128, emb_zp);
  w.token_type_embeddings =
      quant_table(l, "encoder.bert.embeddings.token_type_embeddings.weight", 2, 128, emb_zp);
  w.embeddings_norm_w = l.tensor("encoder.bert.embeddings.LayerNorm.weight", {128});
  w.embeddings_norm_b = l.tensor("encoder.bert.embeddings.LayerNorm.bias", {128});
  w.embedding_mapping = l.linear("encoder/bert/encoder/embedding_hidden_mapping_in", 128, 768);
  w.query = l.linear(bert + "/attention/query", 768, 768);
  w.key = l.linear(bert + "/attention/key", 768, 768);
  w.value = l.linear(bert + "/attention/value", 768, 768);
  w.attention_dense = l.linear(bert + "/attention/dense", 768, 768);
  w.attention_norm_w = l.tensor(bert_t + ".attention.LayerNorm.weight", {768});
  w.attention_norm_b = l.tensor(bert_t + ".attention.LayerNorm.bias", {768});
  w.ffn = l.linear(bert + "/ffn", 768, 2048);
  w.ffn_output = l.linear(bert + "/ffn_output", 2048, 768);
  w.full_layer_norm_w = l.tensor(bert_t + ".full_layer_layer_norm.weight", {768});
  w.full_layer_norm_b = l.tensor(bert_t + ".full_layer_layer_norm.bias", {768});
  w.bert_encoder = l.linear("encoder/bert_encoder", 768, 512);

  // prosody predictor
  for (int i = 0; i < 3; ++i) {
    const std::string p = "encoder/predictor/text_encoder/lstms.";
    w.duration_lstms[i] = l.bilstm(p + std::to_string(2 * i), 640, 256);
    w.duration_norms[i] = l.adain(p + std::to_string(2 * i + 1), 512, kStyleDuration);
  }
  w.predictor_lstm = l.bilstm("encoder/predictor/lstm", 640, 256);
  w.duration_proj = l.linear("encoder/predictor/duration_proj/linear_layer", 512, 50);
  w.shared_lstm = l.bilstm("encoder/shared", 640, 256);
  for (const char* branch : {"F0", "N"}) {
    AdainResBlock1d* blocks = branch[0] == 'F' ? w.f0_blocks : w.n_blocks;
    const std::string p = std::string("encoder/") + branch + ".";
    const std::string t = std::string("encoder.predictor.") + branch + ".";
    blocks[0] = l.res_block(p + "0", t + "0", 512, 512, false, kStyleProsody);
    blocks[1] = l.res_block(p + "1", t + "1", 512, 256, true, kStyleProsody);
    blocks[2] = l.res_block(p + "2", t + "2", 256, 256, false, kStyleProsody);
  }
  w.f0_proj = l.conv("encoder/F0_proj", 1, 256, 1);
  w.n_proj = l.conv("encoder/N_proj", 1, 256, 1);

  // text encoder
  w.text_embedding = quant_table(l, "encoder.text_encoder.embedding.weight", 178, 512, emb_zp);
  for (int i = 0; i < 3; ++i) {
    const std::string c = "encoder/text_encoder/cnn." + std::to_string(i) + "/cnn." + std::to_string(i);
    w.text_convs[i] = l.conv(c + ".0", 512, 512, 5);
    w.text_norm_w[i] = l.tensor("encoder.text_encoder.cnn." + std::to_string(i) + ".1.gamma", {512});
    w.text_norm_b[i] = l.tensor("encoder.text_encoder.cnn." + std::to_string(i) + ".1.beta", {512});
  }
  w.text_lstm = l.bilstm("encoder/text_encoder/lstm", 512, 256);

  // decoder
  w.f0_conv = l.conv("decoder/decoder/F0_conv", 1, 1, 3, 2, 1);
  w.n_conv = l.conv("decoder/decoder/N_conv", 1, 1, 3, 2, 1);
  w.asr_res = l.conv("decoder/decoder/asr_res/asr_res.0", 64, 512, 1);
  w.encode = l.res_block("decoder/decoder/encode", "decoder.decoder.encode", 514, 1024, false, kStyleDecoder);
  for (int i = 0; i < 4; ++i)
    w.decode[i] = l.res_block("decoder/decoder/decode." + std::to_string(i),
                              "decoder.decoder.decode." + std::to_string(i), 1090, i == 3 ? 512 : 1024,
                              i == 3, kStyleDecoder);

  // generator
  const std::string g = "decoder/decoder/generator";
  const std::string gt = "decoder.decoder.generator";
  w.source_harmonics_w = l.tensor("onnx::MatMul_6993", {9, 1});
  w.source_harmonics_b = l.tensor(gt + ".m_source.l_linear.bias", {1});
  w.stft_window = l.tensor("/decoder/decoder/generator/Constant_17_output_0", {20});
  w.noise_convs[0] = l.conv(g + "/noise_convs.0", 256, 22, 12, 6, 3);
  w.noise_convs[1] = l.conv(g + "/noise_convs.1", 128, 22, 1);
  w.noise_res[0] = l.generator_block(g + "/noise_res.0", gt + ".noise_res.0", 256, 7);
  w.noise_res[1] = l.generator_block(g + "/noise_res.1", gt + ".noise_res.1", 128, 11);
  constexpr int kKernels[3] = {3, 7, 11};
  for (int i = 0; i < 6; ++i)
    w.resblocks[i] =
        l.generator_block(g + "/resblocks." + std::to_string(i), gt + ".resblocks." + std::to_string(i),
                          i < 3 ? 256 : 128, kKernels[i % 3]);
  w.ups_w[0] = l.tensor("/" + g + "/Mul_output_0", {512, 256, 20});
  w.ups_b[0] = l.tensor(gt + ".ups.0.bias", {256});
  w.ups_w[1] = l.tensor("/" + g + "/Mul_1_output_0", {256, 128, 12});
  w.ups_b[1] = l.tensor(gt + ".ups.1.bias", {128});
  w.conv_post_w = l.tensor("/" + g + "/Mul_2_output_0", {22, 128, 7});
  w.conv_post_b = l.tensor(gt + ".conv_post.bias", {22});
  w.inverse_basis = l.tensor(gt + ".stft.istft.stft.inverse_basis", {22, 1, 20});
  nn::Tensor window_sum = l.tensor(gt + ".stft.istft.stft.window_sum", {20});
  SOTTO_TRY(l.status());

  std::vector<float> divisor(20);
  for (int i = 0; i < 20; ++i) divisor[i] = window_sum.f32()[i] > FLT_MIN ? window_sum.f32()[i] : 1.0f;
  w.window_sum_divisor = ctx.from_floats({20}, divisor);
  w.sqrt2 = l.constant(1.41421353816986083984375f);  // the graph's Div constant (float32 sqrt 2)
  w.three = l.constant(3.0f);
  l.stack_style_products(w);
  return w;
}

}  // namespace sotto::tts
