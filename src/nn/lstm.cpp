// LSTM (PyTorch gate order i, f, g, o) and the bidirectional pair. The input projection for every frame is one
// product up front (linear / matmul_integer_dynamic); the time goes in the per-step h . W_hh^T, a matrix-vector
// product that cannot be batched across steps (each h depends on the last), threaded over the gate rows when
// the hidden size is large.
#include <cmath>
#include <cstring>

#include "core/thread_pool.h"
#include "nn/cpu.h"
#include "nn/gemm.h"
#include "nn/gpu_ops.h"
#include "nn/ops.h"
#include "nn/ref.h"
#include "nn/vec_math.h"

namespace sotto::nn {

namespace {

// One cell update from the summed gate pre-activations g [4H] (i, f, g, o), four units at a time.
void cell(const float* g, int64_t hidden, float* h, float* c) {
  using namespace vec;
  int64_t j = 0;
  for (; j + 4 <= hidden; j += 4) {
    const F4 i = sigmoid4(load(g + j)), f = sigmoid4(load(g + hidden + j));
    const F4 cand = tanh4(load(g + 2 * hidden + j)), o = sigmoid4(load(g + 3 * hidden + j));
    const F4 cn = f * load(c + j) + i * cand;
    store(c + j, cn);
    store(h + j, o * tanh4(cn));
  }
  for (; j < hidden; ++j) {
    const F4 v = {g[j], g[hidden + j], g[2 * hidden + j], g[3 * hidden + j]};
    const F4 s = sigmoid4(v), t = tanh4(v);
    const float cn = s[1] * c[j] + s[0] * t[2];
    c[j] = cn;
    h[j] = s[3] * tanh4(splat(cn))[0];
  }
}

void init_state(const Tensor& s, int64_t hidden, std::vector<float>& out) {
  out.assign(static_cast<size_t>(hidden), 0.0f);
  if (s.defined()) cpu::read_floats(s, 0, hidden, out.data());
}

void write_state(Context& ctx, Tensor* out, const std::vector<float>& v) {
  if (out) *out = ctx.from_floats({static_cast<int64_t>(v.size())}, v);
}

int64_t hidden_of(const LstmWeights& w) {
  return w.int8() ? w.w_hh.dim(0) : w.w_hh.dim(1);
}

// The int8 recurrent weight, transposed once per call to [4H, H] int16 with zero points subtracted, so each
// step's product is one igemm_nt row.
struct RecurrentInt8 {
  Tensor w;  // [4H, H] I16, zero points not subtracted
  std::vector<float> scales;
  std::vector<int64_t> zero_points;
};

RecurrentInt8 prepare_recurrent(const LstmWeights& lw, int64_t hidden) {
  const int64_t n = 4 * hidden;
  std::vector<int64_t> zps(static_cast<size_t>(n), lw.w_hh.quant().zero_point);
  if (lw.w_hh_zero_points.defined()) {
    const std::vector<int64_t> z = cpu::read_ints(lw.w_hh_zero_points);
    for (int64_t j = 0; j < n; ++j) zps[j] = z.size() == 1 ? z[0] : z[j];
  }
  RecurrentInt8 r;
  r.scales.assign(static_cast<size_t>(n), lw.w_hh.quant().scale);
  if (lw.w_hh_scales.defined()) {
    const Tensor s = cpu::as_f32(lw.w_hh_scales);
    for (int64_t j = 0; j < n; ++j) r.scales[j] = s.elements() == 1 ? s.f32()[0] : s.f32()[j];
  }
  r.w = cpu::int16_transposed(lw.w_hh);  // zero points applied after each step's product
  r.zero_points = zps;
  return r;
}

}  // namespace

namespace ref {
Tensor lstm(const Tensor& x0, const LstmWeights& w, bool reverse, const Tensor& h0, const Tensor& c0,
            Tensor* h_out, Tensor* c_out) {
  Context& ctx = x0.ctx();
  const Tensor x = cpu::as_f32(x0);
  const int64_t steps = x.dim(0), hidden = hidden_of(w), n = 4 * hidden;
  std::vector<float> h, c;
  init_state(h0, hidden, h);
  init_state(c0, hidden, c);
  const Tensor bias = w.b.defined() ? cpu::as_f32(w.b) : ctx.zeros({n});
  const Tensor gx = w.int8() ? ref::matmul_integer_dynamic(x, w.w_ih, w.w_ih_scales, w.w_ih_zero_points)
                             : ref::linear(x, w.w_ih);
  const Tensor whh = w.int8() ? Tensor{} : cpu::as_f32(w.w_hh);
  Tensor out = ctx.empty({steps, hidden});
  std::vector<float> g(static_cast<size_t>(n));
  for (int64_t s = 0; s < steps; ++s) {
    const int64_t t = reverse ? steps - 1 - s : s;
    if (w.int8()) {
      const Tensor gh = ref::matmul_integer_dynamic(ctx.from_floats({1, hidden}, h), w.w_hh, w.w_hh_scales,
                                                    w.w_hh_zero_points);
      for (int64_t j = 0; j < n; ++j) g[j] = gx.f32()[t * n + j] + gh.f32()[j] + bias.f32()[j];
    } else {
      for (int64_t j = 0; j < n; ++j) {
        double sum = 0;
        for (int64_t k = 0; k < hidden; ++k) sum += static_cast<double>(whh.f32()[j * hidden + k]) * h[k];
        g[j] = static_cast<float>(gx.f32()[t * n + j] + sum + bias.f32()[j]);
      }
    }
    for (int64_t j = 0; j < hidden; ++j) {
      const double i = 1 / (1 + std::exp(-static_cast<double>(g[j])));
      const double f = 1 / (1 + std::exp(-static_cast<double>(g[hidden + j])));
      const double cand = std::tanh(static_cast<double>(g[2 * hidden + j]));
      const double o = 1 / (1 + std::exp(-static_cast<double>(g[3 * hidden + j])));
      const double cn = f * c[j] + i * cand;
      c[j] = static_cast<float>(cn);
      h[j] = static_cast<float>(o * std::tanh(cn));
    }
    std::memcpy(out.f32() + t * hidden, h.data(), static_cast<size_t>(hidden) * 4);
  }
  write_state(ctx, h_out, h);
  write_state(ctx, c_out, c);
  return out;
}
}  // namespace ref

namespace {

// One direction's int8 recurrence (ONNX Runtime's DynamicQuantizeLSTM) over the input gates gx [steps, 4H]:
// each step quantizes h, takes one igemm_nt row against the [4H, H] int16 weight, then the zero points' share,
// the scales and the cell. threads: the context whose pool splits each step's product over the gate rows, or
// nullptr for this thread alone (the same integer sums either way).
void recur_int8(const Context* threads, const RecurrentInt8& r, const float* gx, const float* bias,
                int64_t steps, int64_t hidden, bool reverse, float* h, float* c, float* out) {
  const int64_t n = 4 * hidden;
  std::vector<float> g(static_cast<size_t>(n));
  std::vector<int16_t> hq(static_cast<size_t>(hidden));
  std::vector<int32_t> acc(static_cast<size_t>(n));
  for (int64_t s = 0; s < steps; ++s) {
    const int64_t t = reverse ? steps - 1 - s : s;
    const QuantParams q = cpu::dynamic_quant_params(h, hidden);
    int32_t h_sum = 0;
    for (int64_t k = 0; k < hidden; ++k) {
      hq[k] = static_cast<int16_t>(int32_t{cpu::quantize_u8(h[k], q)} - q.zero_point);
      h_sum += hq[k];
    }
    if (threads)
      cpu::igemm_nt(*threads, 1, n, hidden, hq.data(), hidden, r.w.data<int16_t>(), hidden, acc.data(), n);
    else
      cpu::igemm_nt(1, n, hidden, hq.data(), hidden, r.w.data<int16_t>(), hidden, acc.data(), n);
    for (int64_t j = 0; j < n; ++j)
      g[j] = gx[t * n + j] +
             static_cast<float>(acc[j] - static_cast<int32_t>(r.zero_points[j]) * h_sum) *
                 (q.scale * r.scales[j]) +
             bias[j];
    cell(g.data(), hidden, h, c);
    std::memcpy(out + t * hidden, h, static_cast<size_t>(hidden) * 4);
  }
}

}  // namespace

Tensor lstm(const Tensor& x0, const LstmWeights& w, bool reverse, const Tensor& h0, const Tensor& c0,
            Tensor* h_out, Tensor* c_out) {
  if (gpu_ops::on_gpu(x0)) return gpu_ops::lstm(x0, w, reverse, h0, c0, h_out, c_out);
  Context& ctx = x0.ctx();
  const Tensor x = cpu::as_f32(x0);
  NN_ASSERT(x.rank() == 2);
  const int64_t steps = x.dim(0), hidden = hidden_of(w), n = 4 * hidden;
  std::vector<float> h, c;
  init_state(h0, hidden, h);
  init_state(c0, hidden, c);
  const Tensor gx =
      w.int8() ? matmul_integer_dynamic(x, w.w_ih, w.w_ih_scales, w.w_ih_zero_points) : linear(x, w.w_ih);
  const Tensor bias = w.b.defined() ? cpu::as_f32(w.b) : ctx.zeros({n});
  Tensor out = ctx.empty({steps, hidden});
  if (w.int8()) {
    recur_int8(&ctx, prepare_recurrent(w, hidden), gx.f32(), bias.f32(), steps, hidden, reverse, h.data(),
               c.data(), out.f32());
  } else {
    std::vector<float> g(static_cast<size_t>(n));
    const Tensor whh = cpu::weight_f32(w.w_hh);
    for (int64_t s = 0; s < steps; ++s) {
      const int64_t t = reverse ? steps - 1 - s : s;
      cpu::gemm_nt(ctx, 1, n, hidden, h.data(), hidden, whh.f32(), hidden, g.data(), n);
      for (int64_t j = 0; j < n; ++j) g[j] += gx.f32()[t * n + j] + bias.f32()[j];
      cell(g.data(), hidden, h.data(), c.data());
      std::memcpy(out.f32() + t * hidden, h.data(), static_cast<size_t>(hidden) * 4);
    }
  }
  write_state(ctx, h_out, h);
  write_state(ctx, c_out, c);
  return out;
}

// With int8 weights and two or more threads the two directions run side by side, each on one thread: the
// per-step product split over the threads cost a pool hand-off per step (a few microseconds natively, tens in
// wasm, for ~250K multiply-adds), so Kokoro's text side spent more time handing off than multiplying.
// The same integer sums and float steps as lstm(), so the same values.
Tensor bilstm(const Tensor& x, const LstmWeights& forward, const LstmWeights& backward) {
  if (gpu_ops::on_gpu(x) && forward.int8()) return gpu_ops::bilstm_int8(x, forward, backward);
  Context& ctx = x.ctx();
  ThreadPool* pool = ctx.pool();
  if (!forward.int8() || !backward.int8() || pool == nullptr || pool->n_threads() < 2 ||
      hidden_of(forward) != hidden_of(backward)) {
    const Tensor parts[2] = {lstm(x, forward, false), lstm(x, backward, true)};
    return concat(parts, 1);
  }
  const Tensor xf = cpu::as_f32(x);
  NN_ASSERT(xf.rank() == 2);
  const int64_t steps = xf.dim(0), hidden = hidden_of(forward);
  // Everything that allocates on the context first: the threads below only compute.
  struct Direction {
    Tensor gx, bias, out;
    RecurrentInt8 r;
    std::vector<float> h, c;
  } d[2];
  const LstmWeights* weights[2] = {&forward, &backward};
  for (int i = 0; i < 2; ++i) {
    const LstmWeights& w = *weights[i];
    d[i].gx = matmul_integer_dynamic(xf, w.w_ih, w.w_ih_scales, w.w_ih_zero_points);
    d[i].bias = w.b.defined() ? cpu::as_f32(w.b) : ctx.zeros({4 * hidden});
    d[i].out = ctx.empty({steps, hidden});
    d[i].r = prepare_recurrent(w, hidden);
    init_state({}, hidden, d[i].h);
    init_state({}, hidden, d[i].c);
  }
  pool->run(
      [&](int ith, int) {
        Direction& e = d[ith];
        recur_int8(nullptr, e.r, e.gx.f32(), e.bias.f32(), steps, hidden, ith == 1, e.h.data(), e.c.data(),
                   e.out.f32());
      },
      2);
  const Tensor parts[2] = {d[0].out, d[1].out};
  return concat(parts, 1);
}

}  // namespace sotto::nn
