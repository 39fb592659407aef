// The GPU kernel of linear_int8_fused (nn/fused.h): one dispatch for a decoder step's norm + int8 product +
// bias + rope + gate + residual (+ KV-cache append), where the separate ops took 2-6 dispatches of ~10 us each
// on an H200 (their count, not their bytes, was the step's time).
#include <cmath>
#include <cstring>

#include "nn/fused.h"
#include "nn/gpu_ops.h"
#include "nn/gpu_recorder.h"

namespace sotto::nn::gpu_ops {

namespace {

// A workgroup of 64 threads computes `rows` (1 or 2) rows of W for one row of x: `lanes` threads a row, striding
// over K in words of 4 int8 weights (or bytes, when K is not a multiple of 4), adjacent threads reading adjacent
// words, their sums reduced in workgroup memory. With a
// norm, every workgroup first reduces its x row's mean and variance (K floats from cache: cheaper than another
// dispatch) and normalises x as it reads it. Gated: the workgroup's rows are a value row and its gate row
// N / 2 further on. Rope pairs (2i, 2i+1) sit in one workgroup (2-row groups start at even rows, heads have
// even width); their angle is the rope kernel's exact fixed-point turn (gpu_ops.cpp, kRope).
constexpr const char* kLinearInt8Fused = R"(
fn row_of(w: vec3<u32>) -> u32 { return w.x + w.y * 65535u; }
struct P { m: u32, n: u32, k: u32, n_out: u32, flags: u32, eps: f32, segment: u32, groups: u32,
           rope_cols: u32, head_dim: u32, rotary_dim: u32, position0: u32, cache_row: u32, lanes: u32, rows: u32,
           pad0: u32, scale: vec4<f32>, offset: vec4<f32>, turns: array<vec4<u32>, 16> };
@group(0) @binding(0) var<uniform> p: P;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read> w: array<u32>;
@group(0) @binding(3) var<storage, read> gamma: array<f32>;
@group(0) @binding(4) var<storage, read> bias: array<f32>;
@group(0) @binding(5) var<storage, read> residual: array<f32>;
@group(0) @binding(6) var<storage, read_write> y: array<f32>;
@group(0) @binding(7) var<storage, read_write> cache_k: array<f32>;
@group(0) @binding(8) var<storage, read_write> cache_v: array<f32>;
var<workgroup> red: array<f32, 64>;
var<workgroup> red_x: array<f32, 64>;
var<workgroup> res: array<f32, 8>;
fn reduce_sum(v: f32, lid: u32) -> f32 {
  red[lid] = v;
  workgroupBarrier();
  for (var s = 32u; s > 0u; s >>= 1u) {
    if (lid < s) { red[lid] += red[lid + s]; }
    workgroupBarrier();
  }
  let r = red[0];
  workgroupBarrier();
  return r;
}
fn sigmoid(v: f32) -> f32 { return 1.0 / (1.0 + exp(-v)); }
@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let wg = row_of(wid);
  if (wg >= p.m * p.groups) { return; }
  let r = wg / p.groups;
  let g = wg % p.groups;
  let xb = r * p.k;
  let norm = (p.flags & 1u) != 0u;
  let gated = (p.flags & 8u) != 0u;
  var mean = 0.0;
  var inv = 1.0;
  if (norm) {
    var s = 0.0;
    for (var i = lid; i < p.k; i += 64u) { s += x[xb + i]; }
    mean = reduce_sum(s, lid) / f32(p.k);
    var v = 0.0;
    for (var i = lid; i < p.k; i += 64u) { let d = x[xb + i] - mean; v += d * d; }
    inv = 1.0 / sqrt(reduce_sum(v, lid) / f32(p.k) + p.eps);
  }
  let slot = lid / p.lanes;
  let lane = lid % p.lanes;
  let hr = p.rows / 2u;
  let half = p.n / 2u;
  var row = g * p.rows + slot;
  var valid = row < p.n;
  if (gated) {
    let j = g * hr + slot % hr;
    valid = j < half;
    row = select(j, half + j, slot >= hr);
  }
  var s = 0.0;
  var sx = 0.0;
  if (valid) {
    if (p.k % 4u == 0u) {
      let words = p.k / 4u;
      let wb = row * words;
      for (var t = lane; t < words; t += p.lanes) {
        let qw = bitcast<i32>(w[wb + t]);
        let kk = xb + t * 4u;
        var xv = vec4<f32>(x[kk], x[kk + 1u], x[kk + 2u], x[kk + 3u]);
        if (norm) {
          let gk = t * 4u;
          xv = (xv - vec4<f32>(mean)) * inv * vec4<f32>(gamma[gk], gamma[gk + 1u], gamma[gk + 2u], gamma[gk + 3u]);
        }
        let qv = vec4<f32>(f32(extractBits(qw, 0u, 8u)), f32(extractBits(qw, 8u, 8u)), f32(extractBits(qw, 16u, 8u)),
                           f32(extractBits(qw, 24u, 8u)));
        s += dot(xv, qv);
        sx += xv.x + xv.y + xv.z + xv.w;
      }
    } else {
      for (var t = lane; t < p.k; t += p.lanes) {
        let idx = row * p.k + t;
        let qv = extractBits(bitcast<i32>(w[idx / 4u]), (idx % 4u) * 8u, 8u);
        var xv = x[xb + t];
        if (norm) { xv = (xv - mean) * inv * gamma[t]; }
        s += xv * f32(qv);
        sx += xv;
      }
    }
  }
  red[lid] = s;
  red_x[lid] = sx;
  workgroupBarrier();
  for (var h = p.lanes / 2u; h > 0u; h >>= 1u) {
    if (lane < h) {
      red[lid] += red[lid + h];
      red_x[lid] += red_x[lid + h];
    }
    workgroupBarrier();
  }
  if (lane == 0u) {
    let a = red[lid];
    let b = red_x[lid];
    let seg = min(row / p.segment, 3u);
    var out = p.scale[seg] * a + p.offset[seg] * b;
    if ((p.flags & 2u) != 0u && valid) { out += bias[row]; }
    res[slot] = out;
  }
  workgroupBarrier();
  // The epilogue: thread e < rows finishes the workgroup's row e (gated: thread e < rows / 2 its output e).
  if (lid >= p.rows) { return; }
  var col = g * p.rows + lid;
  if (gated) {
    if (lid >= hr) { return; }
    col = g * hr + lid;
    if (col >= half) { return; }
    var val = res[lid] * (res[lid + hr] * sigmoid(res[lid + hr]));
    if ((p.flags & 4u) != 0u) { val += residual[r * p.n_out + col]; }
    y[r * p.n_out + col] = val;
    return;
  }
  if (col >= p.n) { return; }
  var val = res[lid];
  if (col < p.rope_cols) {
    let e = col % p.head_dim;
    if (e < p.rotary_dim) {
      let first = e % 2u == 0u;
      let pair = e / 2u;
      let xa = select(res[lid ^ 1u], val, first);
      let xb = select(val, res[lid ^ 1u], first);
      let frac = (p.position0 + r) * p.turns[pair / 4u][pair % 4u];
      let quarter = (frac + 0x20000000u) >> 30u;
      let rr = f32(bitcast<i32>(frac - (quarter << 30u))) * 1.4629180792671596e-09;
      let r2 = rr * rr;
      let s0 = rr * (1.0 + r2 * (-1.0 / 6.0 + r2 * (1.0 / 120.0 + r2 * (-1.0 / 5040.0 + r2 * (1.0 / 362880.0)))));
      let c0 = 1.0 + r2 * (-0.5 + r2 * (1.0 / 24.0 + r2 * (-1.0 / 720.0 + r2 * (1.0 / 40320.0 + r2 * (-1.0 / 3628800.0)))));
      var sn = s0;
      var cs = c0;
      if (quarter == 1u) { sn = c0; cs = -s0; }
      if (quarter == 2u) { sn = -s0; cs = -c0; }
      if (quarter == 3u) { sn = -c0; cs = s0; }
      val = select(xa * sn + xb * cs, xa * cs - xb * sn, first);
    }
  }
  if ((p.flags & 4u) != 0u) { val += residual[r * p.n_out + col]; }
  if ((p.flags & 16u) != 0u) {
    let seg = col / p.segment;
    let c = col % p.segment;
    if (seg == 0u) { y[r * p.segment + c] = val; }
    if (seg == 1u) { cache_k[(p.cache_row + r) * p.segment + c] = val; }
    if (seg == 2u) { cache_v[(p.cache_row + r) * p.segment + c] = val; }
  } else {
    y[r * p.n_out + col] = val;
  }
}
)";

uint32_t word(int64_t v) {
  return static_cast<uint32_t>(v);
}

uint32_t float_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

}  // namespace

Tensor linear_int8_fused(const Tensor& x, const Int8LinearFused& f) {
  GpuRecorder& rec = *x.ctx().gpu();
  if (rec.failed()) return x.ctx().empty({0});
  const Tensor& w = f.w;
  const bool split = f.cache_k.defined();
  const int64_t k = x.dim(-1), n = w.defined() ? w.dim(0) : 0, m = k > 0 ? x.elements() / k : 0;
  const int64_t segment = f.segment > 0 ? f.segment : n;
  const int64_t n_out = split ? segment : f.gated_silu ? n / 2 : n;
  auto f32_vec = [](const Tensor& t, int64_t len) {
    return !t.defined() || (on_gpu(t) && t.dtype() == DType::F32 && t.elements() == len);
  };
  const bool rope_ok = f.rope_columns == 0 ||
                       (f.head_dim > 0 && f.head_dim % 2 == 0 && f.rotary_dim >= 2 && f.rotary_dim % 2 == 0 &&
                        f.rotary_dim <= f.head_dim && f.rotary_dim <= 128 && f.rope_columns % 2 == 0 &&
                        f.rope_columns <= n && f.position0 >= 0 && !f.gated_silu);
  if (x.dtype() != DType::F32 || !on_gpu(w) || w.dtype() != DType::I8 || w.rank() != 2 || w.dim(1) != k ||
      m == 0 || n == 0 || (n + segment - 1) / segment > 4 || !f32_vec(f.norm_gamma, k) ||
      !f32_vec(f.bias, n) || !f32_vec(f.residual, m * n_out) || (f.gated_silu && (n % 2 != 0 || split)) ||
      !rope_ok ||
      (split && (n != 3 * segment || !f32_vec(f.cache_v, f.cache_v.elements()) ||
                 !f32_vec(f.cache_k, f.cache_k.elements()) || f.cache_k.dim(-1) != segment ||
                 f.cache_v.dim(-1) != segment || f.cache_row < 0 || f.cache_row + m > f.cache_k.dim(0) ||
                 f.cache_row + m > f.cache_v.dim(0))))
    return unsupported(x, "linear_int8_fused of these tensors");
  Shape shape = x.shape();
  shape[-1] = n_out;
  Tensor out = x.ctx().empty(shape);
  // Threads a row: 32 (2 rows a workgroup: rope pairs and gate pairs stay together), 64 for long rows
  // without either. A decoder step's products are latency-bound (one x row, 52-416 workgroups for most), so
  // each thread's loop over K is kept to a few iterations.
  const int64_t lanes = (k >= 1024 && !f.gated_silu && f.rope_columns == 0) ? 64 : 32, rows = 64 / lanes;
  const int64_t groups = f.gated_silu ? (n / 2 + rows / 2 - 1) / (rows / 2) : (n + rows - 1) / rows;
  const uint32_t flags = (f.norm_gamma.defined() ? 1u : 0u) | (f.bias.defined() ? 2u : 0u) |
                         (f.residual.defined() ? 4u : 0u) | (f.gated_silu ? 8u : 0u) | (split ? 16u : 0u);
  uint32_t params[24 + 64] = {word(m),
                              word(n),
                              word(k),
                              word(n_out),
                              flags,
                              float_bits(f.norm_eps),
                              word(segment),
                              word(groups),
                              word(f.rope_columns),
                              word(f.head_dim > 0 ? f.head_dim : 2),
                              word(f.rotary_dim),
                              word(f.position0),
                              word(f.cache_row),
                              word(lanes),
                              word(rows)};
  for (int i = 0; i < 4; ++i) {
    params[16 + i] = float_bits(f.scale[static_cast<size_t>(i)]);
    params[20 + i] = float_bits(f.offset[static_cast<size_t>(i)]);
  }
  for (int i = 0; i < f.rotary_dim / 2 && f.rope_columns > 0; ++i) {
    const double turns =
        std::pow(static_cast<double>(f.rope_base), -2.0 * i / f.rotary_dim) / (2 * 3.14159265358979323846);
    params[24 + i] = static_cast<uint32_t>(static_cast<uint64_t>(turns * 4294967296.0 + 0.5));
  }
  // Bindings must exist: x stands in for absent read-only inputs; absent caches get their own scratch buffers
  // (two writable bindings may not share one).
  const Tensor& gamma = f.norm_gamma.defined() ? f.norm_gamma : x;
  const Tensor& bias = f.bias.defined() ? f.bias : x;
  const Tensor& residual = f.residual.defined() ? f.residual : x;
  const Tensor ck = split ? f.cache_k : x.ctx().empty({1});
  const Tensor cv = split ? f.cache_v : x.ctx().empty({1});
  rec.dispatch("nn_linear_int8_fused", kLinearInt8Fused, params,
               {&x, &w, &gamma, &bias, &residual, &out, &ck, &cv}, static_cast<uint64_t>(m * groups) * 64);
  return out;
}

}  // namespace sotto::nn::gpu_ops
