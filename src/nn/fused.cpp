// linear_int8_fused (nn/fused.h): the scalar reference, which is also the CPU path, and the GPU dispatch
// (kernel in gpu_fused.cpp).
#include "nn/fused.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "nn/cpu.h"
#include "nn/gpu_ops.h"
#include "nn/ref.h"

namespace sotto::nn {

int64_t stacked_rows(int64_t m, int64_t columns) {
  const int64_t step = 64 / std::gcd<int64_t>(columns, 64);  // rows x columns x 4 bytes a multiple of 256
  return (m + step - 1) / step * step;
}

namespace {

// y [M, N] with `rope` (ref::rope or nn::rope) on its columns [0, f.rope_columns) (all where 0 or N).
Tensor rope_columns_with(const Tensor& y, const LinearFusedF32& f,
                         Tensor (*rope)(const Tensor&, int, int, float, int64_t, bool)) {
  const int64_t n = y.dim(-1);
  if (f.rope_columns <= 0 || f.rope_columns == n)
    return rope(y, f.rope_heads, f.rotary_dim, f.rope_base, 0, true);
  const Tensor parts[] = {
      rope(slice(y, -1, 0, f.rope_columns), f.rope_heads, f.rotary_dim, f.rope_base, 0, true),
      slice(y, -1, f.rope_columns, n)};
  return concat(parts, -1);
}

// y [M, N] as LinearFusedF32::stack_columns lays it out: [N / columns, stacked_rows(M, columns), columns], the
// padding rows zero.
Tensor stacked(const Tensor& y, int64_t columns) {
  const int64_t n = y.dim(-1), m = y.elements() / n, rows = stacked_rows(m, columns), blocks = n / columns;
  Tensor out = y.ctx().zeros({blocks, rows, columns});
  const float* src = y.f32();
  float* dst = out.f32();
  for (int64_t j = 0; j < blocks; ++j)
    for (int64_t r = 0; r < m; ++r)
      std::copy_n(src + r * n + j * columns, columns, dst + (j * rows + r) * columns);
  return out;
}

}  // namespace

Tensor rope_columns(const Tensor& y, const LinearFusedF32& f) {
  return rope_columns_with(y, f, nn::rope);
}

namespace ref {

// Attention partials [M, heads, blocks, head_dim + 2] (attention_partials) combined: [M, heads * head_dim].
Tensor combine_partials(const Tensor& part, int64_t heads, int64_t blocks, int64_t k) {
  const int64_t hd = k / heads, stride = hd + 2, m = part.elements() / (heads * blocks * stride);
  Tensor out = part.ctx().empty({m, k});
  const float* p = part.f32();
  for (int64_t r = 0; r < m; ++r)
    for (int64_t h = 0; h < heads; ++h) {
      const float* base = p + (r * heads + h) * blocks * stride;
      double mx = -3e38, l = 0;
      for (int64_t b = 0; b < blocks; ++b) mx = std::max(mx, static_cast<double>(base[b * stride]));
      for (int64_t b = 0; b < blocks; ++b) l += base[b * stride + 1] * std::exp(base[b * stride] - mx);
      for (int64_t e = 0; e < hd; ++e) {
        double acc = 0;
        for (int64_t b = 0; b < blocks; ++b)
          acc += base[b * stride + 2 + e] * std::exp(base[b * stride] - mx);
        out.f32()[r * k + h * hd + e] = static_cast<float>(acc / l);
      }
    }
  return out;
}

Tensor linear_int8_fused(const Tensor& x1, const Int8LinearFused& f) {
  const Tensor x0 = cpu::as_f32(x1);
  const Tensor x = f.x_blocks > 1 ? combine_partials(x0, f.x_heads, f.x_blocks, f.w.dim(1)) : x0;
  const int64_t k = x.dim(-1), m = x.elements() / k, n = f.w.dim(0);
  const int64_t segment = f.segment > 0 ? f.segment : n;
  const bool split = f.cache_k.defined();
  const int64_t n_out = split ? segment : f.gated_silu ? n / 2 : n;
  Shape shape = x.shape();
  shape[-1] = n_out;
  Tensor out = x.ctx().zeros(shape);
  if (f.stop.defined() && f.stop.data<int32_t>()[0] != 0) return out;  // the loop has ended
  const std::vector<float> gamma = f.norm_gamma.defined() ? *f.norm_gamma.ctx().to_floats(f.norm_gamma)
                                                          : std::vector<float>(static_cast<size_t>(k), 1.0f);
  const std::vector<float> bias =
      f.bias.defined() ? *f.bias.ctx().to_floats(f.bias) : std::vector<float>(static_cast<size_t>(n));
  const std::vector<float> residual =
      f.residual.defined() ? *f.residual.ctx().to_floats(f.residual) : std::vector<float>();
  const int8_t* q = f.w.data<int8_t>();
  std::vector<float> xn(static_cast<size_t>(k)), y(static_cast<size_t>(n));
  for (int64_t r = 0; r < m; ++r) {
    const float* xr = x.f32() + r * k;
    for (int64_t t = 0; t < k; ++t) xn[t] = xr[t];
    if (f.norm_gamma.defined()) {
      double mean = 0, var = 0;
      for (int64_t t = 0; t < k; ++t) mean += xr[t];
      mean /= static_cast<double>(k);
      for (int64_t t = 0; t < k; ++t) var += (xr[t] - mean) * (xr[t] - mean);
      var /= static_cast<double>(k);
      for (int64_t t = 0; t < k; ++t)
        xn[t] = static_cast<float>((xr[t] - mean) / std::sqrt(var + f.norm_eps)) * gamma[t];
    }
    for (int64_t j = 0; j < n; ++j) {
      const size_t s = static_cast<size_t>(std::min<int64_t>(j / segment, 3));
      double sum = 0;
      for (int64_t t = 0; t < k; ++t)
        sum += static_cast<double>(xn[t]) * (static_cast<float>(q[j * k + t]) * f.scale[s] + f.offset[s]);
      y[j] = static_cast<float>(sum + bias[j]);
    }
    for (int64_t c = 0; c + 1 < f.rope_columns; c += 2) {
      const int64_t e = c % f.head_dim;
      if (e >= f.rotary_dim) continue;
      const double angle = static_cast<double>(f.position0 + r) *
                           std::pow(static_cast<double>(f.rope_base), -static_cast<double>(e) / f.rotary_dim);
      const double a = y[c], b = y[c + 1];
      y[c] = static_cast<float>(a * std::cos(angle) - b * std::sin(angle));
      y[c + 1] = static_cast<float>(a * std::sin(angle) + b * std::cos(angle));
    }
    for (int64_t j = 0; j < n_out; ++j) {
      float v = y[j];
      if (f.gated_silu) {
        const double g = y[j + n / 2];
        v = static_cast<float>(v * (g / (1 + std::exp(-g))));
      }
      if (f.residual.defined()) v += residual[static_cast<size_t>(r * n_out + j)];
      out.f32()[r * n_out + j] = v;
    }
    if (split)
      for (int64_t j = 0; j < segment; ++j) {
        f.cache_k.f32()[(f.cache_row + r) * segment + j] = y[segment + j];
        f.cache_v.f32()[(f.cache_row + r) * segment + j] = y[2 * segment + j];
      }
  }
  return out;
}

// The projection by linear_int8_fused's reference (which appends k and v to the caches), then the attention by
// nn::ref's, over the caches' rows up to and including the new ones (self) or over k / v (cross).
Tensor attention_int8_fused(const Tensor& x, const Int8AttentionFused& f) {
  const Tensor q = ref::linear_int8_fused(x, f.proj);
  if (f.proj.stop.defined() && f.proj.stop.data<int32_t>()[0] != 0) return q;  // zeros: the loop has ended
  const bool self = f.proj.cache_k.defined();
  const int64_t rows = f.proj.cache_row + q.dim(0);
  const Tensor k = self ? slice(f.proj.cache_k, 0, 0, rows) : cpu::as_f32(f.k);
  const Tensor v = self ? slice(f.proj.cache_v, 0, 0, rows) : cpu::as_f32(f.v);
  return ref::attention(q, k, v, {.n_heads = static_cast<int>(f.n_heads), .causal = self});
}

Tensor conv1d_fused_f32(const Tensor& x, const Tensor& w, const Tensor& b, const Conv1dOptions& o,
                        const Conv1dFusedF32& f) {
  const Tensor y = ref::activation(ref::conv1d(cpu::as_f32(x), w, b, o), f.act);
  return f.time_major ? transpose(y) : y;
}

Tensor glu_depthwise_conv1d_silu(const Tensor& x, const Tensor& w, const Tensor& b) {
  const Tensor g = transpose(ref::glu(cpu::as_f32(x), -1));
  const int64_t k = w.dim(2);
  const Tensor y =
      ref::conv1d(g, w, b, {.padding = static_cast<int>((k - 1) / 2), .groups = static_cast<int>(g.dim(0))});
  return transpose(ref::activation(y, Act::Silu));
}

Tensor linear_fused_f32(const Tensor& x, const Tensor& w, const Tensor& b, const LinearFusedF32& f) {
  const Tensor xn =
      f.norm_gamma.defined() ? ref::layer_norm(cpu::as_f32(x), f.norm_gamma, {}, f.norm_eps) : cpu::as_f32(x);
  Tensor y = ref::linear(xn, w, b);
  if (f.rope_heads > 0) y = rope_columns_with(y, f, ref::rope);
  y = ref::activation(y, f.act);
  if (f.scale != 1.0f) y = nn::scale(y, f.scale);  // on the CPU its own reference
  if (f.residual.defined()) y = ref::binary(y, cpu::as_f32(f.residual), '+');
  return f.stack_columns > 0 ? stacked(y, f.stack_columns) : y;
}

void greedy_step(const Tensor& logits, const GreedyLoop& g) {
  int32_t* log = g.log.data<int32_t>();
  if (log[0] != 0) return;
  const std::vector<float> v = *logits.ctx().to_floats(logits);
  size_t best = 0;
  for (size_t i = 1; i < v.size(); ++i)
    if (v[i] > v[best]) best = i;  // the first maximum
  const auto token = static_cast<int32_t>(best);
  if (token == g.eos) {
    log[0] = kGreedyEnded;
  } else {
    log[2 + log[1]] = token;
    log[1] += 1;
    if (log[1] >= g.max_tokens) log[0] = kGreedyEnded;
  }
  const int64_t d = g.table.dim(1);
  const int8_t* row = g.table.data<int8_t>() + best * static_cast<size_t>(d);
  for (int64_t e = 0; e < d; ++e) g.x.f32()[e] = static_cast<float>(row[e]) * g.scale + g.offset;
}

}  // namespace ref

Tensor linear_int8_fused(const Tensor& x, const Int8LinearFused& f) {
  if (gpu_ops::on_gpu(x)) return gpu_ops::linear_int8_fused(x, f);
  NN_ASSERT(f.w.dtype() == DType::I8 && f.w.rank() == 2 && (f.x_blocks > 1 || f.w.dim(1) == x.dim(-1)));
  return ref::linear_int8_fused(x, f);
}

Tensor conv1d_fused_f32(const Tensor& x, const Tensor& w, const Tensor& b, const Conv1dOptions& o,
                        const Conv1dFusedF32& f) {
  if (gpu_ops::on_gpu(x)) return gpu_ops::conv1d_fused_f32(x, w, b, o, f);
  const Tensor y = activation(conv1d(x, w, b, o), f.act);
  return f.time_major ? transpose(y) : y;
}

Tensor glu_depthwise_conv1d_silu(const Tensor& x, const Tensor& w, const Tensor& b) {
  NN_ASSERT(x.rank() == 2 && x.dim(1) % 2 == 0 && w.rank() == 3 && w.dim(0) == x.dim(1) / 2 &&
            w.dim(1) == 1 && w.dim(2) % 2 == 1);
  if (gpu_ops::on_gpu(x)) return gpu_ops::glu_depthwise_conv1d_silu(x, w, b);
  const int64_t c = w.dim(0), k = w.dim(2);
  const Tensor y = conv1d(transpose(glu(x, -1)), w, b,
                          {.padding = static_cast<int>((k - 1) / 2), .groups = static_cast<int>(c)});
  return transpose(silu(y));
}

Tensor linear_fused_f32_around(const Tensor& x, const LinearFusedF32& f,
                               const std::function<Tensor(const Tensor&)>& product) {
  Tensor y = product(f.norm_gamma.defined() ? layer_norm(x, f.norm_gamma, {}, f.norm_eps) : x);
  if (f.rope_heads > 0) y = rope_columns(y, f);
  if (f.act != Act::Identity) y = activation(y, f.act);
  if (f.scale != 1.0f) y = scale(y, f.scale);
  if (f.residual.defined()) y = add(y, f.residual);
  return f.stack_columns > 0 ? stacked(y, f.stack_columns) : y;
}

Tensor linear_fused_f32(const Tensor& x, const Tensor& w, const Tensor& b, const LinearFusedF32& f) {
  if (gpu_ops::on_gpu(x)) return gpu_ops::linear_fused_f32(x, w, b, f);
  return linear_fused_f32_around(x, f, [&](const Tensor& xn) { return linear(xn, w, b); });
}

Tensor attention_partials(const Tensor& q, const Tensor& k, const Tensor& v, const AttentionOptions& o,
                          int64_t* blocks) {
  if (gpu_ops::on_gpu(q)) return gpu_ops::attention_partials(q, k, v, o, blocks);
  *blocks = 0;
  return attention(q, k, v, o);
}

Tensor attention_int8_fused(const Tensor& x, const Int8AttentionFused& f, int64_t* blocks) {
  *blocks = 0;
  if (gpu_ops::on_gpu(x)) return gpu_ops::attention_int8_fused(x, f, blocks);
  return ref::attention_int8_fused(x, f);
}

void greedy_step(const Tensor& logits, const GreedyLoop& g) {
  if (gpu_ops::on_gpu(logits)) return gpu_ops::greedy_step(logits, g);
  ref::greedy_step(logits, g);
}

}  // namespace sotto::nn
