// Scaled dot-product attention (full, causal with a cache offset, cross, grouped KV heads), Transformer-XL
// relative-position attention, and rotary embeddings. Heads run in parallel; each head's scores are one
// gemm_nt of its queries with its keys (the head's columns gathered into contiguous rows first) and its output
// one gemm_nt of the probabilities with the transposed values.
#include <cmath>
#include <cstring>
#include <memory>

#include "cpu/cpu_features.h"
#include "nn/cpu.h"
#include "nn/gemm.h"
#include "nn/gpu_ops.h"
#include "nn/ops.h"
#include "nn/ref.h"
#include "nn/vec_math.h"

namespace sotto::nn {

namespace {

struct Dims {
  int64_t tq, tk, heads, kv_heads, head_dim;
  float scale;
};

Dims dims_of(const Tensor& q, const Tensor& k, const AttentionOptions& o) {
  Dims d;
  d.tq = q.dim(0);
  d.tk = k.dim(0);
  d.heads = o.n_heads;
  d.kv_heads = o.n_kv_heads > 0 ? o.n_kv_heads : o.n_heads;
  d.head_dim = q.dim(1) / d.heads;
  d.scale = o.scale != 0.0f ? o.scale : 1.0f / std::sqrt(static_cast<float>(d.head_dim));
  NN_ASSERT(q.dim(1) == d.heads * d.head_dim && k.dim(1) == d.kv_heads * d.head_dim &&
            d.heads % d.kv_heads == 0);
  return d;
}

// Columns [h * D, (h + 1) * D) of x [T, C] into out [T, D].
void gather_head(const float* x, int64_t rows, int64_t cols, int64_t h, int64_t d, float* out) {
  for (int64_t t = 0; t < rows; ++t)
    std::memcpy(out + t * d, x + t * cols + h * d, static_cast<size_t>(d) * 4);
}

// Row-wise softmax of s [rows, cols], four lanes at a time (nn/vec_math.h's exp: libm's scalar expf per score
// was most of attention's time outside the products); causal rows end at valid_offset + i.
void softmax_rows(float* s, int64_t rows, int64_t cols, int64_t valid_offset, bool causal) {
#if defined(__x86_64__) && !defined(__wasm__)
  if (!causal && cpu_use_avx2()) return cpu::softmax_rows_avx2(s, rows, cols);
#endif
  using vec::F4;
  for (int64_t i = 0; i < rows; ++i) {
    float* r = s + i * cols;
    const int64_t limit = causal ? std::min(cols, valid_offset + i + 1) : cols;
    int64_t j = 0;
    F4 mx4 = vec::splat(-INFINITY);
    for (; j + 4 <= limit; j += 4) {
      const F4 v = vec::load(r + j);
      mx4 = v > mx4 ? v : mx4;
    }
    float mx = std::max(std::max(mx4[0], mx4[1]), std::max(mx4[2], mx4[3]));
    for (; j < limit; ++j) mx = std::max(mx, r[j]);
    const F4 m4 = vec::splat(mx);
    F4 sum4 = vec::splat(0.0f);
    for (j = 0; j + 4 <= limit; j += 4) {
      const F4 e = vec::exp4(vec::load(r + j) - m4);
      vec::store(r + j, e);
      sum4 += e;
    }
    float sum = (sum4[0] + sum4[1]) + (sum4[2] + sum4[3]);
    if (j < limit) {
      float tail[4] = {-INFINITY, -INFINITY, -INFINITY, -INFINITY};
      for (int64_t t = j; t < limit; ++t) tail[t - j] = r[t] - mx;
      const F4 e = vec::exp4(vec::load(tail));
      for (int64_t t = j; t < limit; ++t) sum += (r[t] = e[t - j]);
    }
    const F4 inv = vec::splat(1.0f / sum);
    for (j = 0; j + 4 <= limit; j += 4) vec::store(r + j, vec::load(r + j) * inv);
    for (; j < limit; ++j) r[j] *= inv[0];
    for (j = limit; j < cols; ++j) r[j] = 0.0f;
  }
}

// The per-head body shared by attention and attention_rel_pos: `scores_of` fills s [Tq, Tk] (already scaled).
template <class ScoresOf>
Tensor attend(Context& ctx, const Tensor& v, const Dims& d, bool causal, ScoresOf scores_of) {
  Tensor out = ctx.empty({d.tq, d.heads * d.head_dim});
  const int64_t group = d.heads / d.kv_heads;
  // Scratch: one set per thread's run of heads, left uninitialised (every element is written before it is
  // read).
  auto run_head = [&](int64_t h, float* s, float* vt) {
    scores_of(h, s);
    softmax_rows(s, d.tq, d.tk, d.tk - d.tq, causal);
    const int64_t kvh = h / group;
    for (int64_t t = 0; t < d.tk; ++t)
      for (int64_t e = 0; e < d.head_dim; ++e)
        vt[e * d.tk + t] = v.f32()[t * d.kv_heads * d.head_dim + kvh * d.head_dim + e];
    // Straight into the head's columns of the output (ldc = the row width).
    cpu::gemm_nt(d.tq, d.head_dim, d.tk, s, d.tk, vt, d.tk, out.f32() + h * d.head_dim, d.heads * d.head_dim);
  };
  cpu::parallel_for(ctx, d.heads, d.tq * d.tk * d.head_dim * 2, [&](int64_t begin, int64_t end) {
    const std::unique_ptr<float[]> s(new float[static_cast<size_t>(d.tq * d.tk)]),
        vt(new float[static_cast<size_t>(d.head_dim * d.tk)]);
    for (int64_t h = begin; h < end; ++h) run_head(h, s.get(), vt.get());
  });
  return out;
}

// Reference: softmax in double over explicit dot products.
template <class Score>
Tensor attend_ref(Context& ctx, const Tensor& v, const Dims& d, bool causal, Score score) {
  Tensor out = ctx.empty({d.tq, d.heads * d.head_dim});
  const int64_t group = d.heads / d.kv_heads, vc = d.kv_heads * d.head_dim;
  std::vector<double> s(static_cast<size_t>(d.tk));
  for (int64_t h = 0; h < d.heads; ++h)
    for (int64_t i = 0; i < d.tq; ++i) {
      const int64_t limit = causal ? std::min(d.tk, d.tk - d.tq + i + 1) : d.tk;
      double mx = -INFINITY, sum = 0;
      for (int64_t j = 0; j < limit; ++j) mx = std::max(mx, s[j] = score(h, i, j));
      for (int64_t j = 0; j < limit; ++j) sum += (s[j] = std::exp(s[j] - mx));
      for (int64_t e = 0; e < d.head_dim; ++e) {
        double acc = 0;
        for (int64_t j = 0; j < limit; ++j)
          acc += s[j] / sum * v.f32()[j * vc + (h / group) * d.head_dim + e];
        out.f32()[i * d.heads * d.head_dim + h * d.head_dim + e] = static_cast<float>(acc);
      }
    }
  return out;
}

}  // namespace

// ---------------------------------------------------------------- attention

namespace ref {
Tensor attention(const Tensor& q0, const Tensor& k0, const Tensor& v0, const AttentionOptions& o) {
  const Tensor q = cpu::as_f32(q0), k = cpu::as_f32(k0), v = cpu::as_f32(v0);
  const Dims d = dims_of(q, k, o);
  const int64_t group = d.heads / d.kv_heads;
  return attend_ref(q.ctx(), v, d, o.causal, [&](int64_t h, int64_t i, int64_t j) {
    double sum = 0;
    for (int64_t e = 0; e < d.head_dim; ++e)
      sum += static_cast<double>(q.f32()[i * d.heads * d.head_dim + h * d.head_dim + e]) *
             k.f32()[j * d.kv_heads * d.head_dim + (h / group) * d.head_dim + e];
    return sum * d.scale;
  });
}
}  // namespace ref

namespace {

float dot(const float* a, const float* b, int64_t n) {
  vec::F4 acc = vec::splat(0.0f);
  int64_t i = 0;
  for (; i + 4 <= n; i += 4) acc += vec::load(a + i) * vec::load(b + i);
  float sum = (acc[0] + acc[1]) + (acc[2] + acc[3]);
  for (; i < n; ++i) sum += a[i] * b[i];
  return sum;
}

// A few query rows (a decoder step: one): keys and values are read in place, a row at a time. Gathering each
// head's keys and transposing its values for two products, as the many-row path does, would copy the whole
// cache per head and step (a cross-attention over 415 frames: ~11 MB a step for Moonshine's 8 layers).
Tensor attend_few_rows(const Tensor& q, const Tensor& k, const Tensor& v, const Dims& d, bool causal) {
  Tensor out = q.ctx().empty({d.tq, d.heads * d.head_dim});
  const int64_t group = d.heads / d.kv_heads, qc = d.heads * d.head_dim, kc = d.kv_heads * d.head_dim;
  cpu::parallel_for(q.ctx(), d.heads, d.tq * d.tk * d.head_dim * 2, [&](int64_t begin, int64_t end) {
    const std::unique_ptr<float[]> s(new float[static_cast<size_t>(d.tk)]);
    for (int64_t h = begin; h < end; ++h) {
      const int64_t kv = (h / group) * d.head_dim;
      for (int64_t i = 0; i < d.tq; ++i) {
        const float* qi = q.f32() + i * qc + h * d.head_dim;
        const int64_t limit = causal ? std::min(d.tk, d.tk - d.tq + i + 1) : d.tk;
        for (int64_t j = 0; j < limit; ++j) s[j] = dot(qi, k.f32() + j * kc + kv, d.head_dim) * d.scale;
        softmax_rows(s.get(), 1, limit, 0, false);
        float* oi = out.f32() + i * qc + h * d.head_dim;
        for (int64_t e = 0; e < d.head_dim; ++e) oi[e] = 0.0f;
        for (int64_t j = 0; j < limit; ++j) {
          const float p = s[j];
          const float* vj = v.f32() + j * kc + kv;
          for (int64_t e = 0; e < d.head_dim; ++e) oi[e] += p * vj[e];
        }
      }
    }
  });
  return out;
}

}  // namespace

Tensor attention_stacked(const Tensor& qkv, const AttentionOptions& o) {
  if (gpu_ops::on_gpu(qkv)) return gpu_ops::attention_stacked(qkv, o);
  const int64_t kv_heads = o.n_kv_heads > 0 ? o.n_kv_heads : o.n_heads, width = qkv.dim(-1);
  const int64_t head_dim = width / (o.n_heads + 2 * kv_heads), q_cols = o.n_heads * head_dim,
                kv_cols = kv_heads * head_dim;
  NN_ASSERT(qkv.rank() == 2 && width == q_cols + 2 * kv_cols);
  return attention(slice(qkv, 1, 0, q_cols), slice(qkv, 1, q_cols, q_cols + kv_cols),
                   slice(qkv, 1, q_cols + kv_cols, width), o);
}

Tensor attention(const Tensor& q0, const Tensor& k0, const Tensor& v0, const AttentionOptions& o) {
  if (gpu_ops::on_gpu(q0)) return gpu_ops::attention(q0, k0, v0, o);
  const Tensor q = cpu::as_f32(q0), k = cpu::as_f32(k0), v = cpu::as_f32(v0);
  const Dims d = dims_of(q, k, o);
  if (d.tq < 6) return attend_few_rows(q, k, v, d, o.causal);
  const int64_t group = d.heads / d.kv_heads;
  return attend(q.ctx(), v, d, o.causal, [&](int64_t h, float* s) {
    // The scale goes on the queries (Tq x D multiplies rather than Tq x Tk).
    const std::unique_ptr<float[]> qh(new float[static_cast<size_t>(d.tq * d.head_dim)]),
        kh(new float[static_cast<size_t>(d.tk * d.head_dim)]);
    gather_head(q.f32(), d.tq, d.heads * d.head_dim, h, d.head_dim, qh.get());
    for (int64_t i = 0; i < d.tq * d.head_dim; ++i) qh[i] *= d.scale;
    gather_head(k.f32(), d.tk, d.kv_heads * d.head_dim, h / group, d.head_dim, kh.get());
    cpu::gemm_nt(d.tq, d.tk, d.head_dim, qh.get(), d.head_dim, kh.get(), d.head_dim, s, d.tk);
  });
}

// ---------------------------------------------------------------- relative position (Transformer-XL)

// p [2T - 1, H * D]: row r is relative distance T - 1 - r (NeMo's RelPositionalEncoding order, largest
// first), so after rel_shift score (i, j) uses row T - 1 - i + j (distance i - j). Self-attention: Tq = Tk.
namespace ref {
Tensor attention_rel_pos(const Tensor& q0, const Tensor& k0, const Tensor& v0, const Tensor& p0,
                         const Tensor& u0, const Tensor& bv0, const AttentionOptions& o) {
  const Tensor q = cpu::as_f32(q0), k = cpu::as_f32(k0), v = cpu::as_f32(v0), p = cpu::as_f32(p0);
  const Tensor u = cpu::as_f32(u0), bv = cpu::as_f32(bv0);
  const Dims d = dims_of(q, k, o);
  const int64_t c = d.heads * d.head_dim;
  return attend_ref(q.ctx(), v, d, o.causal, [&](int64_t h, int64_t i, int64_t j) {
    double ac = 0, bd = 0;
    const int64_t r = d.tq - 1 - i + j;
    for (int64_t e = 0; e < d.head_dim; ++e) {
      const double qe = q.f32()[i * c + h * d.head_dim + e];
      ac += (qe + u.f32()[h * d.head_dim + e]) * k.f32()[j * c + h * d.head_dim + e];
      bd += (qe + bv.f32()[h * d.head_dim + e]) * p.f32()[r * c + h * d.head_dim + e];
    }
    return (ac + bd) * d.scale;
  });
}
}  // namespace ref

Tensor attention_rel_pos(const Tensor& q0, const Tensor& k0, const Tensor& v0, const Tensor& p0,
                         const Tensor& u0, const Tensor& bv0, const AttentionOptions& o) {
  if (gpu_ops::on_gpu(q0)) return gpu_ops::attention_rel_pos(q0, k0, v0, p0, u0, bv0, o);
  const Tensor q = cpu::as_f32(q0), k = cpu::as_f32(k0), v = cpu::as_f32(v0), p = cpu::as_f32(p0);
  const Tensor u = cpu::as_f32(u0), bv = cpu::as_f32(bv0);
  const Dims d = dims_of(q, k, o);
  NN_ASSERT(d.tq == d.tk && p.dim(0) == 2 * d.tq - 1 && d.kv_heads == d.heads);
  const int64_t t = d.tq, np = 2 * t - 1;
  return attend(q.ctx(), v, d, o.causal, [&](int64_t h, float* s) {
    std::vector<float> qu(static_cast<size_t>(t * d.head_dim)), qv(qu.size()), kh(qu.size()),
        ph(static_cast<size_t>(np * d.head_dim)), bd(static_cast<size_t>(t * np));
    gather_head(q.f32(), t, d.heads * d.head_dim, h, d.head_dim, qu.data());
    gather_head(k.f32(), t, d.heads * d.head_dim, h, d.head_dim, kh.data());
    gather_head(p.f32(), np, d.heads * d.head_dim, h, d.head_dim, ph.data());
    for (int64_t i = 0; i < t; ++i)
      for (int64_t e = 0; e < d.head_dim; ++e) {
        qv[i * d.head_dim + e] = qu[i * d.head_dim + e] + bv.f32()[h * d.head_dim + e];
        qu[i * d.head_dim + e] += u.f32()[h * d.head_dim + e];
      }
    cpu::gemm_nt(t, t, d.head_dim, qu.data(), d.head_dim, kh.data(), d.head_dim, s, t);
    cpu::gemm_nt(t, np, d.head_dim, qv.data(), d.head_dim, ph.data(), d.head_dim, bd.data(), np);
    for (int64_t i = 0; i < t; ++i)
      for (int64_t j = 0; j < t; ++j) s[i * t + j] = (s[i * t + j] + bd[i * np + (t - 1 - i + j)]) * d.scale;
  });
}

// ---------------------------------------------------------------- rotary

namespace ref {
Tensor rope(const Tensor& x0, int n_heads, int rotary_dim, float base, int64_t position0, bool interleaved) {
  const Tensor x = cpu::as_f32(x0);
  Tensor out = x.ctx().empty(x.shape());
  std::memcpy(out.f32(), x.f32(), static_cast<size_t>(x.elements()) * 4);
  const int64_t steps = x.dim(0), c = x.dim(1), head_dim = c / n_heads, half = rotary_dim / 2;
  for (int64_t t = 0; t < steps; ++t)
    for (int64_t h = 0; h < n_heads; ++h)
      for (int64_t i = 0; i < half; ++i) {
        const double angle = static_cast<double>(position0 + t) *
                             std::pow(static_cast<double>(base), -2.0 * static_cast<double>(i) / rotary_dim);
        const int64_t a = t * c + h * head_dim + (interleaved ? 2 * i : i);
        const int64_t b = t * c + h * head_dim + (interleaved ? 2 * i + 1 : i + half);
        const double xa = x.f32()[a], xb = x.f32()[b];
        out.f32()[a] = static_cast<float>(xa * std::cos(angle) - xb * std::sin(angle));
        out.f32()[b] = static_cast<float>(xa * std::sin(angle) + xb * std::cos(angle));
      }
  return out;
}
}  // namespace ref

Tensor rope(const Tensor& x0, int n_heads, int rotary_dim, float base, int64_t position0, bool interleaved) {
  if (gpu_ops::on_gpu(x0)) return gpu_ops::rope(x0, n_heads, rotary_dim, base, position0, interleaved);
  const Tensor x = cpu::as_f32(x0);
  NN_ASSERT(x.rank() == 2 && x.dim(1) % n_heads == 0 && rotary_dim % 2 == 0 &&
            rotary_dim <= x.dim(1) / n_heads);
  Tensor out = x.ctx().empty(x.shape());
  std::memcpy(out.f32(), x.f32(), static_cast<size_t>(x.elements()) * 4);
  const int64_t steps = x.dim(0), c = x.dim(1), head_dim = c / n_heads, half = rotary_dim / 2;
  std::vector<double> inv_freq(static_cast<size_t>(half));
  for (int64_t i = 0; i < half; ++i)
    inv_freq[i] = std::pow(static_cast<double>(base), -2.0 * static_cast<double>(i) / rotary_dim);
  std::vector<float> cs(static_cast<size_t>(half)), sn(static_cast<size_t>(half));
  for (int64_t t = 0; t < steps; ++t) {
    for (int64_t i = 0; i < half; ++i) {
      // The angle in double: positions reach tens of thousands, where float frequencies lose the phase.
      const double angle = static_cast<double>(position0 + t) * inv_freq[i];
      cs[i] = static_cast<float>(std::cos(angle));
      sn[i] = static_cast<float>(std::sin(angle));
    }
    for (int64_t h = 0; h < n_heads; ++h) {
      float* y = out.f32() + t * c + h * head_dim;
      for (int64_t i = 0; i < half; ++i) {
        float& a = y[interleaved ? 2 * i : i];
        float& b = y[interleaved ? 2 * i + 1 : i + half];
        const float xa = a, xb = b;
        a = xa * cs[i] - xb * sn[i];
        b = xa * sn[i] + xb * cs[i];
      }
    }
  }
  return out;
}

}  // namespace sotto::nn
