// Moonshine's forward pass on nn/ops.h (the architecture is in moonshine.h).
#include "models/asr/moonshine.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <unordered_map>

#include "api/clock.h"
#include "nn/cpu.h"
#include "nn/fused.h"
#include "nn/gemm.h"
#include "nn/gpu_recorder.h"
#include "nn/ops.h"
#include "text/tokenizer_json.h"

namespace sotto::asr {

using nn::Tensor;

// ---------------------------------------------------------------- the encoder

Tensor moonshine_encoder_linear(const MoonshineWeights& w, const Tensor& x, const MoonshineMatrix& m,
                                const Tensor& b) {
  if (m.w.dtype() == DType::I16) return nn::cpu::linear_int8_affine_prepacked(x, m.w, m.scale, m.offset, b);
  return w.encoder_packed ? nn::cpu::linear_prepacked(x, m.w, b) : nn::linear(x, m.w, b);
}

Tensor moonshine_encode(const MoonshineWeights& w, const Tensor& audio) {
  const MoonshineConfig& c = w.config;
  // Each product with the ops around it (nn/fused.h): act(rope(norm(x) . W^T + b)) + residual. On the GPU one
  // dispatch each (the norms as the product loads x; rope, GELU and the residual add in its store: 7
  // dispatches a layer saved). The CPU's packed products (moonshine_encoder_linear) take the same ops one by one.
  auto product = [&](const Tensor& x, const MoonshineMatrix& m, const Tensor& b,
                     const nn::LinearFusedF32& f) {
    if (!w.encoder_packed && m.w.dtype() != DType::I16) return nn::linear_fused_f32(x, m.w, b, f);
    return nn::linear_fused_f32_around(
        x, f, [&](const Tensor& xn) { return moonshine_encoder_linear(w, xn, m, b); });
  };
  Tensor x = audio.reshape({1, audio.elements()});
  x = nn::conv1d_fused_f32(x, w.conv1, {}, {.stride = 64}, {.act = nn::Act::Tanh});
  x = nn::group_norm(x, 1, w.group_norm_gamma, w.group_norm_beta, c.norm_eps);
  x = nn::conv1d_fused_f32(x, w.conv2, w.conv2_b, {.stride = 3}, {.act = nn::Act::GeluErf});
  // [T, C] out for the layers.
  x = nn::conv1d_fused_f32(x, w.conv3, w.conv3_b, {.stride = 2},
                           {.act = nn::Act::GeluErf, .time_major = true});

  for (const MoonshineEncoderLayer& l : w.encoder) {
    const nn::LinearFusedF32 normed = {.norm_gamma = l.attn_norm, .norm_eps = c.norm_eps};
    nn::LinearFusedF32 rotated = normed;
    rotated.rope_heads = c.n_heads;
    rotated.rotary_dim = c.rotary_dim;
    rotated.rope_base = c.rope_base;
    Tensor attended;
    if (l.qkv.defined()) {
      // q, k and v as one product (GPU), q's and k's heads rotated, the attention reading the three in place.
      nn::LinearFusedF32 stacked = rotated;
      stacked.rope_heads = 2 * c.n_heads;
      stacked.rope_columns = 2 * c.d_model;
      attended = nn::attention_stacked(product(x, {l.qkv}, {}, stacked), {.n_heads = c.n_heads});
    } else {
      const Tensor q = product(x, l.q, {}, rotated), k = product(x, l.k, {}, rotated);
      attended = nn::attention(q, k, product(x, l.v, {}, normed), {.n_heads = c.n_heads});
    }
    x = product(attended, l.o, {}, {.residual = x});
    const Tensor h = product(x, l.fc1, l.fc1_b,
                             {.norm_gamma = l.mlp_norm, .norm_eps = c.norm_eps, .act = nn::Act::GeluErf});
    x = product(h, l.fc2, l.fc2_b, {.residual = x});
  }
  return nn::layer_norm(x, w.encoder_norm, {}, c.norm_eps);
}

// ---------------------------------------------------------------- the decoder

namespace {

Tensor apply(const MoonshineMatrix& m, const Tensor& x, const Tensor& b = {}) {
  if (m.w.dtype() == DType::I8) return nn::linear_int8_affine(x, m.w, m.scale, m.offset, b);
  return nn::linear(x, m.w, b);
}

// Rows of the embedding table, dequantized as the graph does (q * scale, then + offset, in float).
Tensor embed(const MoonshineMatrix& table, const Tensor& ids) {
  if (table.w.dtype() != DType::I8) return nn::embedding(table.w, ids);
  return nn::scale(nn::embedding(table.w.with_quant({table.scale, 0}), ids), 1.0f, table.offset);
}

}  // namespace

MoonshineDecoderState moonshine_decoder_start(const MoonshineWeights& w, const Tensor& encoded,
                                              int64_t capacity) {
  MoonshineDecoderState s;
  if (w.cross_kv.defined()) {
    // One product, its output in blocks of d columns stacked [16, T padded to even, d]: each layer's K and V is
    // then the first T rows of its block, a view at a 256-byte multiple that the attentions bind as [T, d].
    const int64_t d = w.config.d_model, t = encoded.dim(0);
    const Tensor kv = nn::linear_fused_f32(encoded, w.cross_kv, {}, {.stack_columns = d});
    const int64_t rows = kv.dim(1);
    const Tensor blocks = kv.reshape({kv.dim(0) * rows, d});
    s.cross_all = blocks;
    for (int64_t i = 0; i < static_cast<int64_t>(w.decoder.size()); ++i) {
      s.cross_k.push_back(blocks.rows(2 * i * rows, 2 * i * rows + t));
      s.cross_v.push_back(blocks.rows((2 * i + 1) * rows, (2 * i + 1) * rows + t));
    }
  } else {
    for (const MoonshineDecoderLayer& l : w.decoder) {
      s.cross_k.push_back(moonshine_encoder_linear(w, encoded, l.cross_k, {}));
      s.cross_v.push_back(moonshine_encoder_linear(w, encoded, l.cross_v, {}));
    }
  }
  s.self_k.resize(w.decoder.size());
  s.self_v.resize(w.decoder.size());
  bool fused =
      capacity > 0 && w.embedding.w.dtype() == DType::I8 && w.embedding.w.ctx().backend() == nn::Backend::Gpu;
  for (const MoonshineDecoderLayer& l : w.decoder)
    fused = fused && l.qkv.defined() && l.o.w.dtype() == DType::I8 && l.cross_q.w.dtype() == DType::I8 &&
            l.cross_o.w.dtype() == DType::I8 && l.up.w.dtype() == DType::I8 && l.down.w.dtype() == DType::I8;
  if (fused) {
    s.capacity = capacity;
    nn::Context& ctx = encoded.ctx();
    if (w.step_kernel && !w.step_kernel->gave_up && s.cross_all.defined())
      s.step = moonshine_step_buffers(w, encoded.dim(0), capacity);
    if (s.step.act.defined()) {
      // The caches as views of the kernel's one tensor, so that the separate step can take over from it.
      const int64_t rows = s.step.caches.dim(0) / (2 * static_cast<int64_t>(w.decoder.size()));
      for (size_t i = 0; i < w.decoder.size(); ++i) {
        const int64_t at = 2 * static_cast<int64_t>(i) * rows;
        s.self_k[i] = s.step.caches.rows(at, at + capacity);
        s.self_v[i] = s.step.caches.rows(at + rows, at + rows + capacity);
      }
    } else {
      for (size_t i = 0; i < w.decoder.size(); ++i) {
        s.self_k[i] = ctx.empty({capacity, w.config.d_model});
        s.self_v[i] = ctx.empty({capacity, w.config.d_model});
      }
    }
  }
  return s;
}

Tensor moonshine_embed(const MoonshineWeights& w, const Tensor& ids) {
  return embed(w.embedding, ids);
}

namespace {

// The first n rows of a preallocated cache [capacity, d]: its storage seen with fewer rows (rows past n are
// not yet written; the attention reads only these).
Tensor leading_rows(const Tensor& cache, int64_t n) {
  return cache.reshape({n, cache.dim(1)});
}

nn::Int8LinearFused product(const MoonshineMatrix& m) {
  nn::Int8LinearFused f;
  f.w = m.w;
  f.scale[0] = m.scale;
  f.offset[0] = m.offset;
  return f;
}

// The output head (the embedding table, int8) on the final normed row; a no-op once the loop's `stop` is set.
Tensor output_head(const MoonshineWeights& w, const Tensor& normed, const Tensor& stop) {
  nn::Int8LinearFused head = product(w.embedding);
  head.stop = stop;
  return nn::linear_int8_fused(normed, head);
}

// The decoder step of moonshine_decode in fused GPU dispatches (nn/fused.h), the same arithmetic in the same
// order: per layer the stacked q/k/v product (norm, rope, KV-cache append), self-attention, o (+ residual),
// cross q (norm), cross-attention, cross o (+ residual), up (norm, bias, gated SiLU), down (bias, residual).
// `stop` (optional): nn/fused.h's stop word, making the step's products no-ops once a loop recorded ahead on the
// GPU has ended. The attentions' key blocks are combined inside the o products (8 dispatches fewer), and for one
// row each attention takes its projection's dispatch too: 6 dispatches a layer.
Tensor decode_fused(const MoonshineWeights& w, MoonshineDecoderState& s, Tensor x, int64_t n, bool all_logits,
                    const Tensor& stop = {}) {
  const MoonshineConfig& c = w.config;
  const int64_t d = c.d_model;
  // One row (every greedy step): each attention is one dispatch with the projection before it
  // (nn::attention_int8_fused); several rows (a prompt) keep the product and the attention apart.
  const bool one_row = n == 1;
  for (size_t i = 0; i < w.decoder.size(); ++i) {
    const MoonshineDecoderLayer& l = w.decoder[i];
    nn::Int8LinearFused qkv;
    qkv.w = l.qkv;
    qkv.segment = d;
    qkv.scale = l.qkv_scale;
    qkv.offset = l.qkv_offset;
    qkv.norm_gamma = l.attn_norm;
    qkv.norm_eps = c.norm_eps;
    qkv.rope_columns = 2 * d;
    qkv.head_dim = c.head_dim;
    qkv.rotary_dim = c.rotary_dim;
    qkv.rope_base = c.rope_base;
    qkv.position0 = s.n_past;
    qkv.cache_k = s.self_k[i];
    qkv.cache_v = s.self_v[i];
    qkv.cache_row = s.n_past;
    qkv.stop = stop;
    nn::Int8LinearFused o = product(l.o);
    Tensor att;
    if (one_row) {
      nn::Int8AttentionFused self;
      self.proj = qkv;
      self.n_heads = c.n_heads;
      att = nn::attention_int8_fused(x, self, &o.x_blocks);
    } else {
      const Tensor q = nn::linear_int8_fused(x, qkv);
      att = nn::attention(q, leading_rows(s.self_k[i], s.n_past + n), leading_rows(s.self_v[i], s.n_past + n),
                          {.n_heads = c.n_heads, .causal = true});
    }
    o.x_heads = c.n_heads;
    o.residual = x;
    o.stop = stop;
    x = nn::linear_int8_fused(att, o);

    nn::Int8LinearFused cq = product(l.cross_q);
    cq.norm_gamma = l.cross_norm;
    cq.norm_eps = c.norm_eps;
    cq.stop = stop;
    nn::Int8LinearFused co = product(l.cross_o);
    nn::Int8AttentionFused ca{.proj = cq, .k = s.cross_k[i], .v = s.cross_v[i], .n_heads = c.n_heads};
    const Tensor cross = one_row ? nn::attention_int8_fused(x, ca, &co.x_blocks)
                                 : nn::attention_partials(nn::linear_int8_fused(x, cq), s.cross_k[i],
                                                          s.cross_v[i], {.n_heads = c.n_heads}, &co.x_blocks);
    co.x_heads = c.n_heads;
    co.residual = x;
    co.stop = stop;
    x = nn::linear_int8_fused(cross, co);

    nn::Int8LinearFused up = product(l.up);
    up.norm_gamma = l.mlp_norm;
    up.norm_eps = c.norm_eps;
    up.bias = l.up_b;
    up.gated_silu = true;
    up.stop = stop;
    nn::Int8LinearFused down = product(l.down);
    down.bias = l.down_b;
    down.residual = x;
    down.stop = stop;
    x = nn::linear_int8_fused(nn::linear_int8_fused(x, up), down);
  }
  s.n_past += n;
  if (!all_logits && n > 1) x = nn::slice(x, 0, n - 1, n);
  // The final norm as its own dispatch: inside the head's product each of its 16,384 workgroups would reduce
  // the row's mean and variance again.
  return output_head(w, nn::layer_norm(x, w.decoder_norm, {}, c.norm_eps), stop);
}

}  // namespace

Tensor moonshine_decode(const MoonshineWeights& w, MoonshineDecoderState& s, std::span<const int32_t> ids,
                        bool all_logits) {
  nn::Context& ctx = w.embedding.w.ctx();
  const Tensor id_tensor = ctx.from_bytes({static_cast<int64_t>(ids.size())}, DType::I32,
                                          {reinterpret_cast<const uint8_t*>(ids.data()), ids.size() * 4});
  return moonshine_decode_ids(w, s, id_tensor, all_logits);
}

Tensor moonshine_decode_ids(const MoonshineWeights& w, MoonshineDecoderState& s, const Tensor& id_tensor,
                            bool all_logits) {
  const MoonshineConfig& c = w.config;
  const int64_t n = id_tensor.elements();
  Tensor x = embed(w.embedding, id_tensor);
  if (s.capacity > 0) return decode_fused(w, s, x, n, all_logits);

  for (size_t i = 0; i < w.decoder.size(); ++i) {
    const MoonshineDecoderLayer& l = w.decoder[i];
    Tensor h = nn::layer_norm(x, l.attn_norm, {}, c.norm_eps);
    const Tensor q = nn::rope(apply(l.q, h), c.n_heads, c.rotary_dim, c.rope_base, s.n_past, true);
    Tensor k = nn::rope(apply(l.k, h), c.n_heads, c.rotary_dim, c.rope_base, s.n_past, true);
    Tensor v = apply(l.v, h);
    if (s.n_past > 0) {
      const Tensor ks[] = {s.self_k[i], k}, vs[] = {s.self_v[i], v};
      k = nn::concat(ks, 0);
      v = nn::concat(vs, 0);
    }
    s.self_k[i] = k;
    s.self_v[i] = v;
    x = nn::add(x, apply(l.o, nn::attention(q, k, v, {.n_heads = c.n_heads, .causal = true})));

    h = nn::layer_norm(x, l.cross_norm, {}, c.norm_eps);
    Tensor cross = nn::attention(apply(l.cross_q, h), s.cross_k[i], s.cross_v[i], {.n_heads = c.n_heads});
    x = nn::add(x, apply(l.cross_o, cross));

    h = nn::layer_norm(x, l.mlp_norm, {}, c.norm_eps);
    Tensor u = apply(l.up, h, l.up_b);  // [n, 2 ff]: value half, then gate half
    Tensor gated = nn::mul(nn::slice(u, -1, 0, c.decoder_ff),
                           nn::silu(nn::slice(u, -1, c.decoder_ff, 2 * c.decoder_ff)));
    x = nn::add(x, apply(l.down, gated, l.down_b));
  }
  s.n_past += n;
  if (!all_logits && n > 1) x = nn::slice(x, 0, n - 1, n);
  // The output head reads the whole embedding table (13.6 M weights): most of a token's time.
  return apply(w.embedding, nn::layer_norm(x, w.decoder_norm, {}, c.norm_eps));
}

namespace {

// Greedy decoding with one step in flight on the GPU: step t + 1 is recorded and submitted with step t's argmax
// as its input id (a GPU tensor) before token t is read, so recording, encoding and the 4-byte read of one step
// overlap the GPU's work on the next (the read waits for its own copy only). When token t is EOS, step t + 1
// was wasted work (its cache row is never read). The tokens are those of the one-at-a-time loop.
Result<std::vector<int32_t>> decode_pipelined(const MoonshineWeights& w, MoonshineDecoderState& s,
                                              size_t max_tokens) {
  nn::Context& ctx = w.embedding.w.ctx();
  nn::GpuRecorder& rec = *ctx.gpu();
  struct Step {
    Tensor token;  // I32 [1] on the GPU
    gpu::ReadHandle read = 0;
  };
  auto submit = [&](const Tensor& ids) -> Result<Step> {
    Step st;
    st.token = nn::argmax(moonshine_decode_ids(w, s, ids, false));
    SOTTO_TRY(rec.flush());
    SOTTO_ASSIGN(st.read, rec.device().start_read(st.token.gpu_buffer(), st.token.gpu_offset(), 4));
    return st;
  };
  const int32_t bos = w.config.bos;
  SOTTO_ASSIGN(Step current,
               submit(ctx.from_bytes({1}, DType::I32, {reinterpret_cast<const uint8_t*>(&bos), 4})));
  std::vector<int32_t> tokens;
  while (tokens.size() < max_tokens) {
    Step next;
    const bool more = tokens.size() + 1 < max_tokens;
    if (more) {
      SOTTO_ASSIGN(next, submit(current.token));
    }
    int32_t best = 0;
    const gpu::DeviceStatus st = rec.device().finish_read(current.read, &best);
    if (st == gpu::DeviceStatus::Pending)
      return error("moonshine: reading a token back needs an asynchronous wait here (not supported yet)");
    if (st != gpu::DeviceStatus::Ok)
      return error("moonshine: reading a token failed: ", rec.device().last_error());
    if (best == w.config.eos || !more) {
      if (best != w.config.eos) tokens.push_back(best);
      break;
    }
    tokens.push_back(best);
    current = std::move(next);
  }
  return tokens;
}

// Greedy decoding with the loop on the GPU: each step is the fused step on the fixed input row g.x, then
// nn::greedy_step (argmax, log, the next input row), so no token comes back to the host between steps. Steps are
// recorded kBatchSteps at a time, with one batch in flight while the previous batch's log is read: the GPU
// never waits for the host, and the host reads once per batch instead of once per token. After EOS the
// remaining steps are no-ops (their products, attentions and greedy step return at once; the final norm still
// runs, on a row nobody reads). Batches of 4 steps: the rule is that the batch in flight when EOS is read
// (up to 4 + 3 no-op steps with the rest of EOS's batch) is wasted GPU time after the result, paid by whatever
// runs next; with a batch always queued behind the one being read, a batch needs only to be recorded faster
// than the GPU runs it (~4 x 52 dispatches), which any size does, so the smallest size that amortises a read
// and a submit over a few steps.
// SOTTO_MOONSHINE_BATCH_STEPS=N overrides the batch natively (1-16) for benchmarking.
int64_t batch_steps() {
  int64_t n = 4;
#if !defined(__wasm__)
  if (const char* env = std::getenv("SOTTO_MOONSHINE_BATCH_STEPS"))
    n = std::clamp<int64_t>(std::strtol(env, nullptr, 10), 1, 16);
#endif
  return n;
}

Result<std::vector<int32_t>> decode_batched(const MoonshineWeights& w, MoonshineDecoderState& s,
                                            size_t max_tokens, bool* gave_up) {
  const int64_t kBatchSteps = batch_steps();
  nn::Context& ctx = w.embedding.w.ctx();
  nn::GpuRecorder& rec = *ctx.gpu();
  nn::GreedyLoop g;
  g.table = w.embedding.w;
  g.scale = w.embedding.scale;
  g.offset = w.embedding.offset;
  g.eos = w.config.eos;
  g.max_tokens = static_cast<int64_t>(max_tokens);
  g.log = ctx.zeros({2 + g.max_tokens}, DType::I32);
  const int32_t bos = w.config.bos;
  g.x = embed(w.embedding, ctx.from_bytes({1}, DType::I32, {reinterpret_cast<const uint8_t*>(&bos), 4}));
  // Each step logs a token or ends the loop: max_tokens + 1 steps always end it.
  const int64_t max_steps = g.max_tokens + 1;
  int64_t recorded = 0;
  auto record_batch = [&]() -> Status {
    const int64_t batch = std::min(kBatchSteps, max_steps - recorded);
    for (int64_t i = 0; i < batch; ++i) {
      if (s.step.act.defined()) {
        nn::greedy_step(output_head(w, moonshine_step_kernel(w, s, g.x, g.log), g.log), g);
      } else {
        nn::greedy_step(decode_fused(w, s, g.x, 1, false, g.log), g);
      }
    }
    recorded += batch;
    return rec.flush();
  };
  // A read is started right after the batch it covers is submitted and before the next one is, so it waits
  // for that batch only; the batch in flight when the loop is seen to end needs no read (its steps are no-ops).
  auto start_read = [&]() {
    return rec.device().start_read(g.log.gpu_buffer(), g.log.gpu_offset(),
                                   static_cast<uint64_t>(g.log.bytes()));
  };
  std::vector<int32_t> words(static_cast<size_t>(2 + g.max_tokens));
  SOTTO_TRY(record_batch());
  SOTTO_ASSIGN(gpu::ReadHandle read, start_read());
  while (true) {
    const bool more = recorded < max_steps;
    if (more) SOTTO_TRY(record_batch());
    const gpu::DeviceStatus st = rec.device().finish_read(read, words.data());
    if (st == gpu::DeviceStatus::Pending)
      return error("moonshine: reading the tokens back needs an asynchronous wait here (not supported yet)");
    if (st != gpu::DeviceStatus::Ok)
      return error("moonshine: reading the tokens failed: ", rec.device().last_error());
    if (words[0] != 0 && words[1] == -1) {
      // The step kernel's failure mark: a grid barrier waited too long (not every workgroup resident).
      *gave_up = true;
      return std::vector<int32_t>{};
    }
    if (words[0] != 0)
      return std::vector<int32_t>(
          words.begin() + 2,
          words.begin() + 2 + std::clamp<int32_t>(words[1], 0, static_cast<int32_t>(g.max_tokens)));
    if (!more) return error("moonshine: the greedy loop on the GPU did not end after ", max_steps, " steps");
    SOTTO_ASSIGN(read, start_read());
  }
}

}  // namespace

Result<std::vector<int32_t>> moonshine_greedy_gpu(const MoonshineWeights& w, MoonshineDecoderState& state,
                                                  size_t max_tokens, MoonshineGpuLoop loop) {
  nn::Context& ctx = w.embedding.w.ctx();
  if (!ctx.gpu() || state.capacity < static_cast<int64_t>(max_tokens) + 1 || state.n_past != 0)
    return error("moonshine: the GPU loop needs a fresh fused decoder state for ", max_tokens + 1, " tokens");
  if (max_tokens == 0) return std::vector<int32_t>{};
  if (loop == MoonshineGpuLoop::OneStepInFlight) return decode_pipelined(w, state, max_tokens);
  bool gave_up = false;
  SOTTO_ASSIGN(std::vector<int32_t> tokens, decode_batched(w, state, max_tokens, &gave_up));
  if (!gave_up) return tokens;
  // Decoded again by the separate dispatches (their caches are the same views), the kernel off for the model.
  w.step_kernel->gave_up = true;
  state.step = {};
  state.n_past = 0;
  return decode_batched(w, state, max_tokens, &gave_up);
}

Result<MoonshineResult> moonshine_transcribe(const MoonshineWeights& w, std::span<const float> audio_16k) {
  const MoonshineConfig& c = w.config;
  if (audio_16k.empty()) return error("moonshine: no audio");
  for (float v : audio_16k)
    if (!std::isfinite(v)) return error("moonshine: the audio holds NaN or infinite samples");
  // The conv stem needs 895 samples (56 ms) for one output frame; shorter audio is padded with silence.
  std::vector<float> samples(audio_16k.begin(), audio_16k.end());
  if (samples.size() < 895) samples.resize(895, 0.0f);

  nn::Context& ctx = w.embedding.w.ctx();
  MoonshineResult r;
  const double t0 = now_ms();
  const Tensor audio = ctx.from_floats({static_cast<int64_t>(samples.size())}, samples);
  const Tensor encoded = moonshine_encode(w, audio);
  const auto max_tokens =
      static_cast<size_t>(static_cast<double>(audio_16k.size()) / c.sample_rate_hz * c.max_tokens_per_s) + 1;
  MoonshineDecoderState state = moonshine_decoder_start(w, encoded, static_cast<int64_t>(max_tokens) + 1);
  (void)ctx.to_floats(nn::slice(encoded, 0, 0, 1));  // on the GPU, waits for the encoder: encode_ms is honest
  const double t1 = now_ms();
  r.encode_ms = t1 - t0;

  if (state.capacity > 0 && ctx.gpu()) {
    SOTTO_ASSIGN(r.tokens, moonshine_greedy_gpu(w, state, max_tokens));
    r.decode_ms = now_ms() - t1;
    return r;
  }
  int32_t token = c.bos;
  while (r.tokens.size() < max_tokens) {
    // The argmax where the logits are (on the GPU a 4-byte read instead of the 128 KB row); ties: the first.
    const Tensor logits = moonshine_decode(w, state, {&token, 1}, false);
    SOTTO_ASSIGN(std::vector<float> top, ctx.to_floats(nn::argmax(logits)));
    const auto best = static_cast<int32_t>(top[0]);
    if (best == c.eos) break;
    r.tokens.push_back(best);
    token = best;
  }
  r.decode_ms = now_ms() - t1;
  return r;
}

// ---------------------------------------------------------------- the tokenizer

Result<MoonshineTokenizer> MoonshineTokenizer::parse(std::span<const uint8_t> bytes) {
  MoonshineTokenizer t;
  if (is_tokenizer_json(bytes)) {
    SOTTO_ASSIGN(t.pieces_, tokenizer_json_pieces(bytes));
    if (t.pieces_.size() < 3)
      return error("tokenizer.json: ", t.pieces_.size(), " pieces, not a Moonshine tokenizer");
    return t;
  }
  size_t i = 0;
  while (i < bytes.size()) {
    const size_t n = bytes[i];
    if (bytes.size() - i - 1 < n)
      return error("tokenizer.bin: entry ", t.pieces_.size(), " at byte ", i, " claims ", n,
                   " bytes but the file ends at byte ", bytes.size());
    t.pieces_.emplace_back(reinterpret_cast<const char*>(bytes.data() + i + 1), n);
    i += 1 + n;
  }
  if (t.pieces_.size() < 3)
    return error("tokenizer.bin: ", t.pieces_.size(), " entries, not a Moonshine tokenizer");
  return t;
}

std::string MoonshineTokenizer::decode(std::span<const int32_t> ids) const {
  std::string bytes;
  for (int32_t id : ids)
    if (id > 2 && static_cast<size_t>(id) < pieces_.size()) bytes += pieces_[static_cast<size_t>(id)];
  std::string out;
  static constexpr std::string_view kSpace = "\xe2\x96\x81";  // U+2581, SentencePiece's word boundary
  for (size_t i = 0; i < bytes.size();) {
    if (bytes.compare(i, kSpace.size(), kSpace) == 0) {
      out += ' ';
      i += kSpace.size();
    } else {
      out += bytes[i++];
    }
  }
  const size_t first = out.find_first_not_of(' ');
  if (first == std::string::npos) return {};
  return out.substr(first, out.find_last_not_of(' ') - first + 1);
}

// ---------------------------------------------------------------- loading

namespace {

// A constant value in a graph: an initializer, or the exporter's dequantization of one (Cast -> Mul -> Add,
// each with a one-element other side), evaluated in float in the graph's order so the weights are bit for bit
// the ones ONNX Runtime multiplies with.
struct Constant {
  std::vector<int64_t> shape;
  std::vector<float> values;
};

class GraphConstants {
 public:
  GraphConstants(const OrtModel& m, std::string_view file) : file_(file) {
    for (const OrtNode& n : m.nodes)
      for (const std::string& o : n.outputs) producer_.emplace(o, &n);
    for (const OrtTensor& t : m.tensors) initializer_.emplace(t.name, &t);
  }

  // The value called `name`, or an empty Constant (no shape, no values) when it is not a constant.
  Result<Constant> value(const std::string& name, int depth = 0) const {
    if (depth > 8) return Constant{};
    if (auto it = initializer_.find(name); it != initializer_.end()) {
      const OrtTensor& t = *it->second;
      Constant c;
      c.shape = t.shape;
      c.values.resize(t.n_elements);
      if (t.dtype == DType::F32) {
        std::memcpy(c.values.data(), t.data, t.n_bytes);
      } else if (t.dtype == DType::I8) {
        for (size_t i = 0; i < c.values.size(); ++i)
          c.values[i] = static_cast<float>(static_cast<int8_t>(t.data[i]));
      } else if (t.dtype == DType::U8) {
        for (size_t i = 0; i < c.values.size(); ++i) c.values[i] = static_cast<float>(t.data[i]);
      } else {
        return error(file_, ": tensor ", quoted(name), " is ", dtype_name(t.dtype),
                     ", expected float32 or int8");
      }
      if (c.shape.empty()) c.shape = {1};
      return c;
    }
    auto it = producer_.find(name);
    if (it == producer_.end()) return Constant{};
    const OrtNode& n = *it->second;
    if (n.op_type == "Cast" && n.inputs.size() == 1) return value(n.inputs[0], depth + 1);
    if ((n.op_type == "Mul" || n.op_type == "Add") && n.inputs.size() == 2) {
      SOTTO_ASSIGN(Constant a, value(n.inputs[0], depth + 1));
      if (a.values.empty()) return Constant{};
      SOTTO_ASSIGN(Constant b, value(n.inputs[1], depth + 1));
      if (b.values.empty()) return Constant{};
      if (a.values.size() == 1) std::swap(a, b);
      if (b.values.size() != 1)
        return error(file_, ": node ", quoted(n.name), " (", n.op_type,
                     ") combines two tensors; expected a scale");
      const float s = b.values[0];
      if (n.op_type == "Mul")
        for (float& v : a.values) v *= s;
      else
        for (float& v : a.values) v += s;
      return a;
    }
    return Constant{};
  }

  // The constant input of the node writing `output`: input `index`, or with index -1 the one input that is
  // constant.
  Result<Constant> input_of(const std::string& output, int index = -1) const {
    auto it = producer_.find(output);
    if (it == producer_.end()) return error(file_, ": no node writes ", quoted(output));
    const OrtNode& n = *it->second;
    if (index >= 0) {
      if (static_cast<size_t>(index) >= n.inputs.size())
        return error(file_, ": node ", quoted(n.name), " has no input ", index);
      SOTTO_ASSIGN(Constant c, value(n.inputs[static_cast<size_t>(index)]));
      if (c.values.empty())
        return error(file_, ": input ", index, " of node ", quoted(n.name), " is not a weight");
      return c;
    }
    Constant found;
    for (const std::string& in : n.inputs) {
      SOTTO_ASSIGN(Constant c, value(in));
      if (c.values.empty()) continue;
      if (!found.values.empty()) return error(file_, ": node ", quoted(n.name), " has two weight inputs");
      found = std::move(c);
    }
    if (found.values.empty())
      return error(file_, ": node ", quoted(n.name), " (writing ", quoted(output), ") has no weight");
    return found;
  }

  // The exporter's dequantization chain ending in `name`: Add(Mul(Cast(q int8), scale), offset), both scalars.
  struct Int8Chain {
    const OrtTensor* q = nullptr;
    float scale = 1.0f, offset = 0.0f;
  };
  Result<Int8Chain> int8_chain(const std::string& name) const {
    const OrtNode* add = node_writing(name, "Add");
    const OrtNode* mul = add ? node_writing(add->inputs[0], "Mul") : nullptr;
    const OrtNode* cast = mul ? node_writing(mul->inputs[0], "Cast") : nullptr;
    if (!cast) return Int8Chain{};
    auto q = initializer_.find(cast->inputs[0]);
    if (q == initializer_.end() || q->second->dtype != DType::I8) return Int8Chain{};
    SOTTO_ASSIGN(Constant scale, value(mul->inputs[1]));
    SOTTO_ASSIGN(Constant offset, value(add->inputs[1]));
    if (scale.values.size() != 1 || offset.values.size() != 1) return Int8Chain{};
    return Int8Chain{q->second, scale.values[0], offset.values[0]};
  }

  const OrtNode* node_writing(const std::string& output, std::string_view op_type) const {
    auto it = producer_.find(output);
    if (it == producer_.end() || it->second->op_type != op_type ||
        it->second->inputs.size() != (op_type == "Cast" ? 1u : 2u))
      return nullptr;
    return it->second;
  }

  std::string_view file() const { return file_; }

 private:
  std::string_view file_;
  std::unordered_map<std::string, const OrtNode*> producer_;
  std::unordered_map<std::string, const OrtTensor*> initializer_;
};

std::string shape_str(const std::vector<int64_t>& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) out += cat(i ? "," : "", s[i]);
  return out + "]";
}

struct Loader {
  nn::Context& ctx;
  const GraphConstants& g;
  bool int16_products = false;  // MoonshineLoadOptions::int16_products

  Result<Constant> checked(const std::string& output, int index, std::vector<int64_t> shape) const {
    SOTTO_ASSIGN(Constant c, g.input_of(output, index));
    if (c.shape != shape)
      return error(g.file(), ": the weight of ", quoted(output), " has shape ", shape_str(c.shape),
                   ", expected ", shape_str(shape));
    return c;
  }
  // A vector (norm gamma, bias) of `n` elements; [n, 1] (the group norm's) is accepted as [n].
  Result<Tensor> vec(const std::string& output, int index, int64_t n,
                     std::vector<float>* keep = nullptr) const {
    SOTTO_ASSIGN(Constant c, g.input_of(output, index));
    if (c.values.size() != static_cast<size_t>(n) || c.shape[0] != n)
      return error(g.file(), ": the weight of ", quoted(output), " has shape ", shape_str(c.shape),
                   ", expected [", n, "]");
    if (keep) keep->insert(keep->end(), c.values.begin(), c.values.end());
    return ctx.from_floats({n}, c.values);
  }
  Result<Tensor> tensor(const std::string& output, int index, std::vector<int64_t> shape) const {
    SOTTO_ASSIGN(Constant c, checked(output, index, shape));
    return ctx.from_floats(nn::Shape(std::span<const int64_t>(shape)), c.values);
  }
  // A weight read as int8 with its scale and offset when the graph dequantizes it (input `index` of the node
  // writing `output`), else as F32. `transpose`: stored [in, out] (MatMul), returned [out, in].
  Result<MoonshineMatrix> int8_matrix(const std::string& output, int index, int64_t in, int64_t out,
                                      bool transpose, std::vector<uint8_t>* keep = nullptr) const {
    const std::vector<int64_t> stored =
        transpose ? std::vector<int64_t>{in, out} : std::vector<int64_t>{out, in};
    SOTTO_ASSIGN(Constant c, checked(output, index, stored));  // checks the shape, whatever the storage
    auto producer = g.node_writing(output, transpose ? "MatMul" : "Gather");
    GraphConstants::Int8Chain chain;
    if (producer) {
      SOTTO_ASSIGN(chain, g.int8_chain(producer->inputs[static_cast<size_t>(index)]));
    }
    MoonshineMatrix m;
    std::vector<uint8_t> bytes;
    if (chain.q) {
      m.scale = chain.scale;
      m.offset = chain.offset;
      const uint8_t* q = chain.q->data;
      bytes.resize(static_cast<size_t>(in * out));
      for (int64_t o = 0; o < out; ++o)
        for (int64_t i = 0; i < in; ++i)
          bytes[static_cast<size_t>(o * in + i)] = transpose ? q[i * out + o] : q[o * in + i];
      m.w = ctx.from_bytes({out, in}, DType::I8, bytes);
      if (keep) keep->insert(keep->end(), bytes.begin(), bytes.end());
      return m;
    }
    std::vector<float> t(c.values.size());
    for (int64_t o = 0; o < out; ++o)
      for (int64_t i = 0; i < in; ++i)
        t[static_cast<size_t>(o * in + i)] = transpose ? c.values[static_cast<size_t>(i * out + o)]
                                                       : c.values[static_cast<size_t>(o * in + i)];
    m.w = ctx.from_floats({out, in}, t);
    return m;
  }

  // A MatMul weight [in, out] that multiplies many rows (the encoder's frames), as moonshine_encoder_linear
  // reads it: F32 [out, in], or where `packed` (MoonshineWeights::encoder_packed: the CPU, the shapes fit the
  // panels) packed once: as int16 panels of the file's int8 (int16_products), else as F32 panels (a per-call
  // packing of the weight was ~8 % of a product).
  Result<MoonshineMatrix> many_rows_matrix(const std::string& output, int64_t in, int64_t out,
                                           bool packed) const {
    if (packed && int16_products) {
      SOTTO_ASSIGN(MoonshineMatrix m, int8_matrix(output, 1, in, out, true));
      if (m.w.dtype() == DType::I8) {
        m.w = nn::cpu::pack_weight_int8(ctx, m.w);
        return m;
      }
    }
    SOTTO_ASSIGN(Tensor m, matrix(output, in, out));
    return MoonshineMatrix{packed ? nn::cpu::pack_weight(ctx, m) : m};
  }

  // A MatMul weight stored [in, out], as nn::linear's [out, in]: its values, or the tensor.
  Result<std::vector<float>> matrix_values(const std::string& output, int64_t in, int64_t out) const {
    SOTTO_ASSIGN(Constant c, checked(output, 1, {in, out}));
    std::vector<float> t(c.values.size());
    for (int64_t i = 0; i < in; ++i)
      for (int64_t o = 0; o < out; ++o)
        t[static_cast<size_t>(o * in + i)] = c.values[static_cast<size_t>(i * out + o)];
    return t;
  }
  Result<Tensor> matrix(const std::string& output, int64_t in, int64_t out) const {
    SOTTO_ASSIGN(std::vector<float> t, matrix_values(output, in, out));
    return ctx.from_floats({out, in}, t);
  }
  // Several [in, out] MatMul weights as nn::linear's [out, in] one after another in `stacked` (rows appended).
  Status append_matrices(std::initializer_list<std::string> outputs, int64_t in, int64_t out,
                         std::vector<float>& stacked) const {
    for (const std::string& output : outputs) {
      SOTTO_ASSIGN(std::vector<float> m, matrix_values(output, in, out));
      stacked.insert(stacked.end(), m.begin(), m.end());
    }
    return {};
  }
};

// The step kernel's weights from the packs the loader kept, or none where a matrix was not int8 (the packs then
// miss its bytes) or the shapes are not the kernel's.
std::shared_ptr<MoonshineStepKernel> make_step_kernel(nn::Context& ctx, const MoonshineWeights& w,
                                                      uint32_t grid, const std::vector<uint8_t>& pack_w,
                                                      const std::vector<float>& pack_v) {
  const MoonshineConfig& c = w.config;
  const int64_t d = c.d_model, ff = c.decoder_ff, layers = c.decoder_layers;
  const int64_t layer_bytes = 6 * d * d + 2 * ff * d + d * ff, layer_floats = 4 * d + 2 * ff;
  if (static_cast<int64_t>(pack_w.size()) != layers * layer_bytes ||
      static_cast<int64_t>(pack_v.size()) != layers * layer_floats + d || d % 16 != 0 || d > 512 || ff < d ||
      ff % 4 != 0 || c.head_dim % 4 != 0 || c.rotary_dim > 128 || c.rotary_dim % 2 != 0)
    return nullptr;
  auto k = std::make_shared<MoonshineStepKernel>();
  k->grid = grid;
  k->w = ctx.from_bytes({static_cast<int64_t>(pack_w.size())}, DType::I8, pack_w);
  k->v = ctx.from_floats({static_cast<int64_t>(pack_v.size())}, pack_v);
  auto sum = [&](int64_t at) {
    double t = 0;
    for (int64_t i = 0; i < d; ++i) t += pack_v[static_cast<size_t>(at + i)];
    return static_cast<float>(t);
  };
  for (int64_t i = 0; i < layers; ++i) {
    const MoonshineDecoderLayer& l = w.decoder[static_cast<size_t>(i)];
    k->scales.push_back({l.q.scale, l.k.scale, l.v.scale, l.o.scale, l.q.offset, l.k.offset, l.v.offset,
                         l.o.offset, l.cross_q.scale, l.cross_q.offset, l.cross_o.scale, l.cross_o.offset,
                         l.up.scale, l.up.offset, l.down.scale, l.down.offset});
    const int64_t at = i * layer_floats;
    k->gamma_sums.push_back({sum(at), sum(at + d), sum(at + 2 * d)});
  }
  k->final_gamma_sum = sum(layers * layer_floats);
  return k;
}

}  // namespace

Result<MoonshineWeights> load_moonshine_weights(nn::Context& ctx, const OrtModel& encoder,
                                                std::string_view encoder_name, const OrtModel& decoder,
                                                std::string_view decoder_name, bool int16_products) {
  MoonshineWeights w;
  const MoonshineConfig& c = w.config;
  const int64_t d = c.d_model;
  const int64_t width = nn::cpu::gemm_panel_width();
  const bool packed = ctx.backend() == nn::Backend::Cpu && d % width == 0 && c.encoder_ff % width == 0;
  w.encoder_packed = packed;
  {
    const GraphConstants g(encoder, encoder_name);
    const Loader ld{ctx, g, int16_products};
    SOTTO_ASSIGN(w.conv1, ld.tensor("/conv1/Conv_output_0", 1, {d, 1, 127}));
    SOTTO_ASSIGN(w.group_norm_gamma, ld.vec("/groupnorm/Mul_output_0", -1, d));
    SOTTO_ASSIGN(w.group_norm_beta, ld.vec("/groupnorm/Add_output_0", -1, d));
    SOTTO_ASSIGN(w.conv2, ld.tensor("/conv2/Conv_output_0", 1, {2 * d, d, 7}));
    SOTTO_ASSIGN(w.conv2_b, ld.vec("/conv2/Conv_output_0", 2, 2 * d));
    SOTTO_ASSIGN(w.conv3, ld.tensor("/conv3/Conv_output_0", 1, {d, 2 * d, 3}));
    SOTTO_ASSIGN(w.conv3_b, ld.vec("/conv3/Conv_output_0", 2, d));
    for (int i = 0; i < c.encoder_layers; ++i) {
      const std::string p = cat("/layers.", i, "/");
      MoonshineEncoderLayer l;
      SOTTO_ASSIGN(l.attn_norm, ld.vec(p + "input_layernorm/Mul_output_0", -1, d));
      if (ctx.backend() == nn::Backend::Gpu) {
        std::vector<float> qkv;
        SOTTO_TRY(ld.append_matrices(
            {p + "self_attn/q_proj/MatMul_output_0", p + "self_attn/k_proj/MatMul_output_0",
             p + "self_attn/v_proj/MatMul_output_0"},
            d, d, qkv));
        l.qkv = ctx.from_floats({3 * d, d}, qkv);
      } else {
        SOTTO_ASSIGN(l.q, ld.many_rows_matrix(p + "self_attn/q_proj/MatMul_output_0", d, d, packed));
        SOTTO_ASSIGN(l.k, ld.many_rows_matrix(p + "self_attn/k_proj/MatMul_output_0", d, d, packed));
        SOTTO_ASSIGN(l.v, ld.many_rows_matrix(p + "self_attn/v_proj/MatMul_output_0", d, d, packed));
      }
      SOTTO_ASSIGN(l.o, ld.many_rows_matrix(p + "self_attn/dense/MatMul_output_0", d, d, packed));
      SOTTO_ASSIGN(l.mlp_norm, ld.vec(p + "post_attention_layernorm/Mul_output_0", -1, d));
      SOTTO_ASSIGN(l.fc1, ld.many_rows_matrix(p + "mlp/fc1/MatMul_output_0", d, c.encoder_ff, packed));
      SOTTO_ASSIGN(l.fc1_b, ld.vec(p + "mlp/fc1/Add_output_0", -1, c.encoder_ff));
      SOTTO_ASSIGN(l.fc2, ld.many_rows_matrix(p + "mlp/fc2/MatMul_output_0", c.encoder_ff, d, packed));
      SOTTO_ASSIGN(l.fc2_b, ld.vec(p + "mlp/fc2/Add_output_0", -1, d));
      w.encoder.push_back(std::move(l));
    }
    SOTTO_ASSIGN(w.encoder_norm, ld.vec("last_hidden_state", -1, d));
  }
  {
    const GraphConstants g(decoder, decoder_name);
    const Loader ld{ctx, g, int16_products};
    const bool gpu = ctx.backend() == nn::Backend::Gpu;
    std::vector<float> cross_kv;
    // The step kernel's packs (moonshine_gpu_step.h), where it can run: every layer's int8 matrices and vectors.
    const uint32_t grid = gpu ? moonshine_step_kernel_grid(ctx, c) : 0;
    std::vector<uint8_t> pack_w;
    std::vector<float> pack_v;
    std::vector<uint8_t>* kw = grid > 0 ? &pack_w : nullptr;
    std::vector<float>* kv = grid > 0 ? &pack_v : nullptr;
    SOTTO_ASSIGN(w.embedding,
                 ld.int8_matrix("/model/decoder/embed_tokens/Gather_output_0", 0, d, c.vocab, false));
    for (int i = 0; i < c.decoder_layers; ++i) {
      const std::string p = cat("/model/decoder/layers.", i, "/");
      MoonshineDecoderLayer l;
      SOTTO_ASSIGN(l.attn_norm, ld.vec(p + "input_layernorm/Mul_output_0", -1, d, kv));
      std::vector<uint8_t> qkv;
      std::vector<uint8_t>* keep = ctx.backend() == nn::Backend::Gpu ? &qkv : nullptr;
      SOTTO_ASSIGN(l.q, ld.int8_matrix(p + "self_attn/q_proj/MatMul_output_0", 1, d, d, true, keep));
      SOTTO_ASSIGN(l.k, ld.int8_matrix(p + "self_attn/k_proj/MatMul_output_0", 1, d, d, true, keep));
      SOTTO_ASSIGN(l.v, ld.int8_matrix(p + "self_attn/v_proj/MatMul_output_0", 1, d, d, true, keep));
      if (qkv.size() == static_cast<size_t>(3 * d * d)) {
        l.qkv = ctx.from_bytes({3 * d, d}, DType::I8, qkv);
        l.qkv_scale = {l.q.scale, l.k.scale, l.v.scale, 1.0f};
        l.qkv_offset = {l.q.offset, l.k.offset, l.v.offset, 0.0f};
      }
      if (kw) kw->insert(kw->end(), qkv.begin(), qkv.end());
      SOTTO_ASSIGN(l.o, ld.int8_matrix(p + "self_attn/dense/MatMul_output_0", 1, d, d, true, kw));
      SOTTO_ASSIGN(l.cross_norm, ld.vec(p + "post_attention_layernorm/Mul_output_0", -1, d, kv));
      SOTTO_ASSIGN(l.cross_q, ld.int8_matrix(p + "encoder_attn/q_proj/MatMul_output_0", 1, d, d, true, kw));
      if (gpu) {
        SOTTO_TRY(ld.append_matrices(
            {p + "encoder_attn/k_proj/MatMul_output_0", p + "encoder_attn/v_proj/MatMul_output_0"}, d, d,
            cross_kv));
      } else {
        SOTTO_ASSIGN(l.cross_k, ld.many_rows_matrix(p + "encoder_attn/k_proj/MatMul_output_0", d, d, packed));
        SOTTO_ASSIGN(l.cross_v, ld.many_rows_matrix(p + "encoder_attn/v_proj/MatMul_output_0", d, d, packed));
      }
      SOTTO_ASSIGN(l.cross_o, ld.int8_matrix(p + "encoder_attn/dense/MatMul_output_0", 1, d, d, true, kw));
      SOTTO_ASSIGN(l.mlp_norm, ld.vec(p + "final_layernorm/Mul_output_0", -1, d, kv));
      SOTTO_ASSIGN(l.up, ld.int8_matrix(p + "mlp/up_proj/MatMul_output_0", 1, d, 2 * c.decoder_ff, true, kw));
      SOTTO_ASSIGN(l.up_b, ld.vec(p + "mlp/up_proj/Add_output_0", -1, 2 * c.decoder_ff, kv));
      SOTTO_ASSIGN(l.down, ld.int8_matrix(p + "mlp/down_proj/MatMul_output_0", 1, c.decoder_ff, d, true, kw));
      SOTTO_ASSIGN(l.down_b, ld.vec(p + "mlp/down_proj/Add_output_0", -1, d, kv));
      w.decoder.push_back(std::move(l));
    }
    SOTTO_ASSIGN(w.decoder_norm, ld.vec("/model/decoder/norm/Mul_output_0", -1, d, kv));
    if (grid > 0) w.step_kernel = make_step_kernel(ctx, w, grid, pack_w, pack_v);
    if (gpu) w.cross_kv = ctx.from_floats({2 * c.decoder_layers * d, d}, cross_kv);
  }
  return w;
}

Result<OrtModel> read_moonshine_graph(std::span<const uint8_t> bytes, std::string_view name,
                                      OnnxModel& onnx) {
  if (is_ort(bytes) || name.ends_with(".ort")) {
    auto m = parse_ort(bytes);
    if (!m) return error(name, ": ", m.message());
    return m;
  }
  auto parsed = parse_onnx(bytes);
  if (!parsed) return error(name, ": ", parsed.message());
  onnx = std::move(parsed).value();
  OrtModel m;
  for (const OnnxTensor& t : onnx.tensors)
    m.tensors.push_back({.name = t.name,
                         .scope = t.scope,
                         .dtype = t.dtype,
                         .data_type = t.onnx_data_type,
                         .shape = t.shape,
                         .n_elements = t.n_elements,
                         .file_offset = t.file_offset,
                         .n_bytes = t.n_bytes,
                         .data = t.bytes().data()});
  for (const OnnxNode& n : onnx.nodes)
    m.nodes.push_back({.name = n.name,
                       .op_type = n.op_type,
                       .domain = n.domain,
                       .scope = n.scope,
                       .inputs = n.inputs,
                       .outputs = n.outputs});
  return m;
}

Result<MoonshineModel> load_moonshine(std::span<const uint8_t> encoder, std::span<const uint8_t> decoder,
                                      std::span<const uint8_t> tokenizer, std::unique_ptr<nn::Context> ctx,
                                      const MoonshineLoadOptions& o) {
  auto name_of = [](std::string_view given, std::span<const uint8_t> bytes, const char* stem) {
    return given.empty() ? cat(stem, is_ort(bytes) ? ".ort" : ".onnx") : std::string(given);
  };
  const std::string enc_name = name_of(o.encoder_name, encoder, "encoder_model"),
                    dec_name = name_of(o.decoder_name, decoder, "decoder_model_merged");
  OnnxModel enc_onnx, dec_onnx;
  SOTTO_ASSIGN(OrtModel enc, read_moonshine_graph(encoder, enc_name, enc_onnx));
  SOTTO_ASSIGN(OrtModel dec, read_moonshine_graph(decoder, dec_name, dec_onnx));
  MoonshineModel m;
  SOTTO_ASSIGN(m.weights, load_moonshine_weights(*ctx, enc, enc_name, dec, dec_name, o.int16_products));
  SOTTO_ASSIGN(m.tokenizer, MoonshineTokenizer::parse(tokenizer));
  m.ctx = std::move(ctx);
  return m;
}

}  // namespace sotto::asr
