// The GPU kernel of linear_int8_fused (nn/fused.h): one dispatch for a decoder step's norm + int8 product +
// bias + rope + gate + residual (+ KV-cache append), where the separate ops took 2-6 dispatches of ~10 us each
// on an H200 (their count, not their bytes, was the step's time).
#include <algorithm>
#include <cmath>
#include <cstring>

#include "nn/fused.h"
#include "nn/gpu_ops.h"
#include "nn/gpu_recorder.h"
#include "nn/gpu_wgsl.h"

namespace sotto::nn::gpu_ops {

namespace {

// A workgroup of 64 threads computes `rows` (1 or 2) rows of W for one row of x: `lanes` threads a row, striding
// over K in words of 4 int8 weights (or bytes, when K is not a multiple of 4), adjacent threads reading adjacent
// words, their sums reduced in workgroup memory. With a
// norm, every workgroup first reduces its x row's mean and variance (K floats from cache: cheaper than another
// dispatch) and normalises x as it reads it. Gated: the workgroup's rows are a value row and its gate row
// N / 2 further on. Rope pairs (2i, 2i+1) sit in one workgroup (2-row groups start at even rows, heads have
// even width); their angle is the rope kernel's exact fixed-point turn (gpu_ops.cpp, kRope).
// The kernel with its workgroup array for combined x sized XS: 1024 words where x comes from attention
// partials, else 4 (WebGPU zeroes workgroup memory in every workgroup: 4 KB it does not need would be zeroed
// by each of a step's ~50,000 product workgroups).
#define NN_LINEAR_INT8_FUSED(XS)                           \
  NN_WGSL_ROPE_SIN_COS R"(
fn row_of(w: vec3<u32>) -> u32 { return w.x + w.y * 65535u; }
struct P { m: u32, n: u32, k: u32, n_out: u32, flags: u32, eps: f32, segment: u32, groups: u32,
           rope_cols: u32, head_dim: u32, rotary_dim: u32, position0: u32, cache_row: u32, lanes: u32, rows: u32,
           pad0: u32, scale: vec4<f32>, offset: vec4<f32>, turns: array<vec4<u32>, 16>,
           x_heads: u32, x_blocks: u32, stop_slot: u32, pad1: u32 };
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
)"                                 \
                       "var<workgroup> xs: array<f32, " XS \
                       ">;\n"                              \
                       R"(var<workgroup> head_max: array<f32, 16>;
var<workgroup> head_inv: array<f32, 16>;
var<workgroup> stopped: u32;
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
  // The stop word (a greedy loop past its end), in whichever input binding the op leaves free.
  if (p.stop_slot != 0u) {
    if (lid == 0u) {
      var word = bitcast<u32>(residual[0]);
      if (p.stop_slot == 1u) { word = bitcast<u32>(gamma[0]); }
      if (p.stop_slot == 2u) { word = bitcast<u32>(bias[0]); }
      stopped = word;
    }
    if (workgroupUniformLoad(&stopped) != 0u) { return; }
  }
  let r = wg / p.groups;
  let g = wg % p.groups;
  var xb = r * p.k;
  // x from attention partials: each head's blocks rescaled to their largest max and divided by the sum, in
  // the combine kernel's order (gpu_ops.cpp, kAttentionCombine), into workgroup memory.
  let combined = p.x_blocks > 1u;
  if (combined) {
    let hd = p.k / p.x_heads;
    let stride = hd + 2u;
    if (lid < p.x_heads) {
      let base = (r * p.x_heads + lid) * p.x_blocks * stride;
      var mx = -3.0e38;
      for (var b = 0u; b < p.x_blocks; b++) { mx = max(mx, x[base + b * stride]); }
      var l = 0.0;
      for (var b = 0u; b < p.x_blocks; b++) { l += x[base + b * stride + 1u] * exp(x[base + b * stride] - mx); }
      head_max[lid] = mx;
      head_inv[lid] = 1.0 / l;
    }
    workgroupBarrier();
    for (var e = lid; e < p.k; e += 64u) {
      let h = e / hd;
      let base = (r * p.x_heads + h) * p.x_blocks * stride;
      var acc = 0.0;
      for (var b = 0u; b < p.x_blocks; b++) {
        let at = base + b * stride;
        acc += x[at + 2u + e % hd] * exp(x[at] - head_max[h]);
      }
      xs[e] = acc * head_inv[h];
    }
    workgroupBarrier();
    xb = 0u;
  }
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
        var xv: vec4<f32>;
        if (combined) {
          xv = vec4<f32>(xs[kk], xs[kk + 1u], xs[kk + 2u], xs[kk + 3u]);
        } else {
          xv = vec4<f32>(x[kk], x[kk + 1u], x[kk + 2u], x[kk + 3u]);
        }
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
        var xv: f32;
        if (combined) { xv = xs[t]; } else { xv = x[xb + t]; }
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
      let sc = rope_sin_cos(frac);
      let sn = sc.x;
      let cs = sc.y;
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
)"
constexpr const char* kLinearInt8Fused = NN_LINEAR_INT8_FUSED("4");
constexpr const char* kLinearInt8FusedCombine = NN_LINEAR_INT8_FUSED("1024");
#undef NN_LINEAR_INT8_FUSED

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
  const bool combined = f.x_blocks > 1;
  // K from the weights; with combined x, M from the partials' size.
  const int64_t k = w.defined() && w.rank() == 2 ? w.dim(1) : 0, n = w.defined() ? w.dim(0) : 0;
  const int64_t x_row =
      combined ? (f.x_heads > 0 && k % f.x_heads == 0 ? f.x_heads * f.x_blocks * (k / f.x_heads + 2) : 0)
               : x.dim(-1);
  const int64_t m = x_row > 0 && x.elements() % x_row == 0 ? x.elements() / x_row : 0;
  const int64_t segment = f.segment > 0 ? f.segment : n;
  const int64_t n_out = split ? segment : f.gated_silu ? n / 2 : n;
  auto f32_vec = [](const Tensor& t, int64_t len) {
    return !t.defined() || (on_gpu(t) && t.dtype() == DType::F32 && t.elements() == len);
  };
  const bool rope_ok = f.rope_columns == 0 ||
                       (f.head_dim > 0 && f.head_dim % 2 == 0 && f.rotary_dim >= 2 && f.rotary_dim % 2 == 0 &&
                        f.rotary_dim <= f.head_dim && f.rotary_dim <= 128 && f.rope_columns % 2 == 0 &&
                        f.rope_columns <= n && f.position0 >= 0 && !f.gated_silu);
  const bool combine_ok = !combined || (f.x_heads >= 1 && f.x_heads <= 16 && k <= 1024 && m > 0 &&
                                        !f.norm_gamma.defined() && (k / f.x_heads) % 4 == 0);
  // The stop word goes in the first of gamma / bias / residual the op leaves free.
  const uint32_t stop_slot = !f.stop.defined()         ? 0u
                             : !f.norm_gamma.defined() ? 1u
                             : !f.bias.defined()       ? 2u
                             : !f.residual.defined()   ? 3u
                                                       : 4u;
  if (x.dtype() != DType::F32 || !on_gpu(w) || w.dtype() != DType::I8 || w.rank() != 2 ||
      (!combined && x.dim(-1) != k) || m == 0 || n == 0 || (n + segment - 1) / segment > 4 ||
      !f32_vec(f.norm_gamma, k) || !f32_vec(f.bias, n) || !f32_vec(f.residual, m * n_out) ||
      (f.gated_silu && (n % 2 != 0 || split)) || !rope_ok || !combine_ok || stop_slot == 4u ||
      (f.stop.defined() && (!on_gpu(f.stop) || f.stop.dtype() != DType::I32)) ||
      (split && (n != 3 * segment || !f32_vec(f.cache_v, f.cache_v.elements()) ||
                 !f32_vec(f.cache_k, f.cache_k.elements()) || f.cache_k.dim(-1) != segment ||
                 f.cache_v.dim(-1) != segment || f.cache_row < 0 || f.cache_row + m > f.cache_k.dim(0) ||
                 f.cache_row + m > f.cache_v.dim(0))))
    return unsupported(x, "linear_int8_fused of these tensors");
  Tensor out = x.ctx().empty({m, n_out});
  if (!combined) {
    Shape shape = x.shape();
    shape[-1] = n_out;
    out = out.reshape(shape);
  }
  // Threads a row: 32 (2 rows a workgroup: rope pairs and gate pairs stay together), 64 for long rows
  // without either. A decoder step's products are latency-bound (one x row, 52-416 workgroups for most), so
  // each thread's loop over K is kept to a few iterations.
  const int64_t lanes = (k >= 1024 && !f.gated_silu && f.rope_columns == 0) ? 64 : 32, rows = 64 / lanes;
  const int64_t groups = f.gated_silu ? (n / 2 + rows / 2 - 1) / (rows / 2) : (n + rows - 1) / rows;
  const uint32_t flags = (f.norm_gamma.defined() ? 1u : 0u) | (f.bias.defined() ? 2u : 0u) |
                         (f.residual.defined() ? 4u : 0u) | (f.gated_silu ? 8u : 0u) | (split ? 16u : 0u);
  uint32_t params[24 + 64 + 4] = {word(m),
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
  if (f.rope_columns > 0) rope_turns(f.rope_base, f.rotary_dim, params + 24);
  params[88] = word(combined ? f.x_heads : 0);
  params[89] = word(combined ? f.x_blocks : 0);
  params[90] = stop_slot;
  // Bindings must exist: x stands in for absent read-only inputs (the stop word for the first of them); absent
  // caches get their own scratch buffers (two writable bindings may not share one).
  auto input = [&](const Tensor& t, uint32_t slot) -> const Tensor& {
    return t.defined() ? t : stop_slot == slot ? f.stop : x;
  };
  const Tensor& gamma = input(f.norm_gamma, 1);
  const Tensor& bias = input(f.bias, 2);
  const Tensor& residual = input(f.residual, 3);
  const Tensor ck = split ? f.cache_k : x.ctx().empty({1});
  const Tensor cv = split ? f.cache_v : x.ctx().empty({1});
  rec.dispatch(combined ? "nn_linear_int8_fused_combine" : "nn_linear_int8_fused",
               combined ? kLinearInt8FusedCombine : kLinearInt8Fused, params,
               {&x, &w, &gamma, &bias, &residual, &out, &ck, &cv}, static_cast<uint64_t>(m * groups) * 64);
  return out;
}

// ---------------------------------------------------------------- attention_int8_fused

namespace {

// A decoder attention with its projection in one dispatch: a workgroup of 256 threads per (head h, block b of
// `block` keys). It layer-norms x (K <= 1024 floats, a multiple of 16) into workgroup memory, computes its
// head's 1-3 x head_dim projection rows (q; or q, k, v; see below), rotates q and k (the fixed-point turn of linear_int8_fused's kernel), and the last block
// appends k and v to the caches. Then the block's attention as gpu_ops.cpp's kAttention4: thread j scores key
// j (the new row's key from workgroup memory, not the cache: other heads' workgroups write that row, and no
// workgroup reads it from memory), the max and sum of exponentials reduced in workgroup memory, and 16 groups
// of 16 threads sum probabilities times values (vec4 dims), reduced in workgroup memory. One block writes the
// head's output; several write attention_partials' layout for the product after it to combine.
// Each of a cross-attention's key blocks (7 for a 10 s clip) recomputes its head's q (52 x 416 int8 weights,
// 21 KB), the price of not waiting on a dispatch for it; a self-attention's cache is one block up to 64 tokens.
// KV: the keys' access (read_write for self-attention's caches, read for cross-attention's encoder keys);
// APPEND: self-attention's cache append.
#define NN_ATTENTION_INT8_FUSED(KV, APPEND)                     \
  NN_WGSL_ROPE_SIN_COS R"(
fn row_of(w: vec3<u32>) -> u32 { return w.x + w.y * 65535u; }
struct P { k: u32, d: u32, hd: u32, heads: u32, segs: u32, tk: u32, block: u32, blocks: u32,
           eps: f32, att_scale: f32, rotary_dim: u32, rope_segs: u32, position: u32, cache_row: u32,
           has_stop: u32, pad0: u32, scale: vec4<f32>, offset: vec4<f32>, turns: array<vec4<u32>, 16> };
@group(0) @binding(0) var<uniform> p: P;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read> w: array<vec4<u32>>;
@group(0) @binding(3) var<storage, read> gamma: array<f32>;
)"                                      \
                       "@group(0) @binding(4) var<storage, " KV \
                       "> kc: array<vec4<f32>>;\n"              \
                       "@group(0) @binding(5) var<storage, " KV \
                       "> vc: array<vec4<f32>>;\n"              \
                       R"(
@group(0) @binding(6) var<storage, read_write> out: array<f32>;
@group(0) @binding(7) var<storage, read> stop: array<u32>;
var<workgroup> xn: array<f32, 1024>;
var<workgroup> red: array<f32, 256>;
var<workgroup> part: array<f32, 1536>;  // the product's partial sums, then the values' (vec4 a thread)
var<workgroup> proj: array<f32, 192>;
var<workgroup> probs: array<f32, 64>;
var<workgroup> stopped: u32;
fn reduce_sum(v: f32, lid: u32) -> f32 {
  red[lid] = v;
  workgroupBarrier();
  for (var s = 128u; s > 0u; s >>= 1u) {
    if (lid < s) { red[lid] += red[lid + s]; }
    workgroupBarrier();
  }
  let r = red[0];
  workgroupBarrier();
  return r;
}
fn reduce_max(v: f32, lid: u32) -> f32 {
  red[lid] = v;
  workgroupBarrier();
  for (var s = 128u; s > 0u; s >>= 1u) {
    if (lid < s) { red[lid] = max(red[lid], red[lid + s]); }
    workgroupBarrier();
  }
  let r = red[0];
  workgroupBarrier();
  return r;
}
fn proj4(at: u32) -> vec4<f32> { return vec4<f32>(proj[at], proj[at + 1u], proj[at + 2u], proj[at + 3u]); }
@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let wg = row_of(wid);
  if (wg >= p.heads * p.blocks) { return; }
  if (p.has_stop != 0u) {
    if (lid == 0u) { stopped = stop[0]; }
    if (workgroupUniformLoad(&stopped) != 0u) { return; }
  }
  let h = wg / p.blocks;
  let b = wg % p.blocks;
  let hd = p.hd;
  let d4 = hd / 4u;
  let self_att = p.segs == 3u;
  // The layer norm of x, as linear_int8_fused's kernel: (x - mean) * inv * gamma.
  var sum = 0.0;
  for (var i = lid; i < p.k; i += 256u) { sum += x[i]; }
  let mean = reduce_sum(sum, lid) / f32(p.k);
  var var_sum = 0.0;
  for (var i = lid; i < p.k; i += 256u) { let c = x[i] - mean; var_sum += c * c; }
  let inv = 1.0 / sqrt(reduce_sum(var_sum, lid) / f32(p.k) + p.eps);
  var xs = 0.0;
  for (var i = lid; i < p.k; i += 256u) {
    let v = (x[i] - mean) * inv * gamma[i];
    xn[i] = v;
    xs += v;
  }
  let sum_x = reduce_sum(xs, lid);  // its barriers also publish xn
  // The head's projection rows (row r of segment r / hd is W's row seg * d + h * hd + r % hd): 8 threads a row,
  // 32 rows at a time, each thread's sum over its 16-byte words of the row (adjacent threads read adjacent
  // words) left in workgroup memory, so that the whole product is one pass of independent loads and one barrier
  // (a decoder step's workgroup is latency-bound: ~16 loads a thread for Moonshine's q/k/v, not 64 in 10
  // barrier-separated rounds). The offset term uses the sum of the normed x, the same for every row.
  let lane = lid % 8u;
  let slot = lid / 8u;
  let words = p.k / 16u;
  let rows = p.segs * hd;
  for (var r = slot; r < rows; r += 32u) {
    let wb = ((r / hd) * p.d + h * hd + r % hd) * words;
    var a = 0.0;
    for (var t = lane; t < words; t += 8u) {
      let q4 = w[wb + t];
      for (var c = 0u; c < 4u; c++) {
        let qw = bitcast<i32>(q4[c]);
        let kk = 16u * t + 4u * c;
        let xv = vec4<f32>(xn[kk], xn[kk + 1u], xn[kk + 2u], xn[kk + 3u]);
        a += dot(xv, vec4<f32>(f32(extractBits(qw, 0u, 8u)), f32(extractBits(qw, 8u, 8u)),
                               f32(extractBits(qw, 16u, 8u)), f32(extractBits(qw, 24u, 8u))));
      }
    }
    part[8u * r + lane] = a;
  }
  workgroupBarrier();
  if (lid < rows) {
    var a = 0.0;
    for (var i = 0u; i < 8u; i++) { a += part[8u * lid + i]; }
    let seg = lid / hd;
    proj[lid] = p.scale[seg] * a + p.offset[seg] * sum_x;
  }
  workgroupBarrier();
  // Rotary embedding on pairs (2i, 2i + 1), i < rotary_dim / 2, of the first rope_segs segments (q, k).
  let pairs = p.rotary_dim / 2u;
  if (lid < p.rope_segs * pairs) {
    let pair = lid % pairs;
    let at = (lid / pairs) * hd + 2u * pair;
    let xa = proj[at];
    let xb = proj[at + 1u];
    let frac = p.position * p.turns[pair / 4u][pair % 4u];
    let sc = rope_sin_cos(frac);
    let sn = sc.x;
    let cs = sc.y;
    proj[at] = xa * cs - xb * sn;
    proj[at + 1u] = xa * sn + xb * cs;
  }
  workgroupBarrier();
  let d4_all = p.d / 4u;
  let kv_base = h * d4;
)" APPEND R"(
  let j0 = b * p.block;
  let j = j0 + lid;
  let live = lid < p.block && j < p.tk;
  var score = -3.0e38;
  if (live) {
    var acc = vec4<f32>(0.0);
    if (self_att && j == p.cache_row) {
      for (var e = 0u; e < d4; e++) { acc += proj4(4u * e) * proj4(hd + 4u * e); }
    } else {
      let kb = j * d4_all + kv_base;
      for (var e = 0u; e < d4; e++) { acc += proj4(4u * e) * kc[kb + e]; }
    }
    score = (acc.x + acc.y + acc.z + acc.w) * p.att_scale;
  }
  let m = reduce_max(score, lid);
  var z = 0.0;
  if (live) { z = exp(score - m); }
  if (lid < 64u) { probs[lid] = z; }
  let l = reduce_sum(z, lid);  // its barriers also publish probs
  let n = min(p.block, p.tk - j0);
  let grp = lid / 16u;
  let e4 = lid % 16u;
  var acc = vec4<f32>(0.0);
  if (e4 < d4) {
    for (var t = grp; t < n; t += 16u) {
      let jt = j0 + t;
      if (self_att && jt == p.cache_row) {
        acc += probs[t] * proj4(2u * hd + 4u * e4);
      } else {
        acc += probs[t] * vc[jt * d4_all + kv_base + e4];
      }
    }
  }
  for (var c = 0u; c < 4u; c++) { part[4u * lid + c] = acc[c]; }
  workgroupBarrier();
  let at = (h * p.blocks + b) * (hd + 2u);
  if (lid < d4) {
    var tot = vec4<f32>(0.0);
    for (var g = 0u; g < 16u; g++) {
      let src = 4u * (16u * g + lid);
      tot += vec4<f32>(part[src], part[src + 1u], part[src + 2u], part[src + 3u]);
    }
    for (var c = 0u; c < 4u; c++) {
      if (p.blocks == 1u) {
        out[h * hd + 4u * lid + c] = tot[c] / l;
      } else {
        out[at + 2u + 4u * lid + c] = tot[c];
      }
    }
  }
  if (p.blocks > 1u && lid == 0u) {
    out[at] = m;
    out[at + 1u] = l;
  }
}
)"
// The new row's key and value into the caches (the last block holds it).
#define NN_APPEND_KV \
  R"(  if (b == p.blocks - 1u && lid < d4) {
    kc[p.cache_row * d4_all + kv_base + lid] = proj4(hd + 4u * lid);
    vc[p.cache_row * d4_all + kv_base + lid] = proj4(2u * hd + 4u * lid);
  }
)"
constexpr const char* kAttentionInt8FusedSelf = NN_ATTENTION_INT8_FUSED("read_write", NN_APPEND_KV);
constexpr const char* kAttentionInt8FusedCross = NN_ATTENTION_INT8_FUSED("read", "");
#undef NN_APPEND_KV
#undef NN_ATTENTION_INT8_FUSED

bool vec4_tensor(const Tensor& t) {
  return on_gpu(t) && t.dtype() == DType::F32 && vec4_view(t);
}

}  // namespace

Tensor attention_int8_fused(const Tensor& x, const Int8AttentionFused& f, int64_t* blocks_out) {
  *blocks_out = 0;
  GpuRecorder& rec = *x.ctx().gpu();
  if (rec.failed()) return x.ctx().empty({0});
  const Int8LinearFused& pr = f.proj;
  const bool self = pr.cache_k.defined();
  const int64_t heads = f.n_heads, k = x.rank() == 2 ? x.dim(1) : 0;
  const int64_t n = pr.w.defined() && pr.w.rank() == 2 ? pr.w.dim(0) : 0, segs = self ? 3 : 1;
  const int64_t d = n / segs, hd = heads > 0 ? d / heads : 0;
  const int64_t tk = self ? pr.cache_row + 1 : f.k.defined() && f.k.rank() == 2 ? f.k.dim(0) : 0;
  const int64_t rope_segs = d > 0 ? pr.rope_columns / d : 0;
  const bool rope_ok =
      pr.rope_columns == 0 ||
      (pr.rope_columns % d == 0 && rope_segs <= std::min<int64_t>(segs, 2) && pr.head_dim == hd &&
       pr.rotary_dim >= 2 && pr.rotary_dim % 2 == 0 && pr.rotary_dim <= hd && pr.position0 >= 0);
  const bool keys_ok =
      self ? (pr.segment == d && vec4_tensor(pr.cache_k) && vec4_tensor(pr.cache_v) &&
              pr.cache_k.rank() == 2 && pr.cache_k.shape() == pr.cache_v.shape() && pr.cache_k.dim(1) == d &&
              pr.cache_row >= 0 && pr.cache_row < pr.cache_k.dim(0) && !f.k.defined() && !f.v.defined())
           : (tk >= 1 && vec4_tensor(f.k) && vec4_tensor(f.v) && f.k.dim(1) == d &&
              f.v.shape() == f.k.shape() && (pr.segment == 0 || pr.segment == d));
  if (x.dtype() != DType::F32 || x.rank() != 2 || x.dim(0) != 1 || k % 16 != 0 || k < 16 || k > 1024 ||
      !on_gpu(pr.w) || pr.w.dtype() != DType::I8 || pr.w.dim(1) != k || pr.w.gpu_offset() % 16 != 0 ||
      heads < 1 || n % segs != 0 || d % heads != 0 || hd % 4 != 0 || hd < 4 || hd > 64 ||
      !pr.norm_gamma.defined() || !on_gpu(pr.norm_gamma) || pr.norm_gamma.dtype() != DType::F32 ||
      pr.norm_gamma.elements() != k || pr.bias.defined() || pr.residual.defined() || pr.gated_silu ||
      pr.x_blocks > 1 || !rope_ok || !keys_ok ||
      (pr.stop.defined() && (!on_gpu(pr.stop) || pr.stop.dtype() != DType::I32)))
    return unsupported(x, "attention_int8_fused of these tensors");
  const int64_t block = 64, blocks = (tk + block - 1) / block;
  uint32_t params[16 + 8 + 64] = {word(k),
                                  word(d),
                                  word(hd),
                                  word(heads),
                                  word(segs),
                                  word(tk),
                                  word(block),
                                  word(blocks),
                                  float_bits(pr.norm_eps),
                                  float_bits(1.0f / std::sqrt(static_cast<float>(hd))),
                                  word(pr.rope_columns > 0 ? pr.rotary_dim : 0),
                                  word(rope_segs),
                                  word(pr.position0),
                                  word(pr.cache_row),
                                  pr.stop.defined() ? 1u : 0u,
                                  0};
  for (int i = 0; i < 4; ++i) {
    params[16 + i] = float_bits(pr.scale[static_cast<size_t>(i)]);
    params[20 + i] = float_bits(pr.offset[static_cast<size_t>(i)]);
  }
  if (pr.rope_columns > 0) rope_turns(pr.rope_base, pr.rotary_dim, params + 24);
  Tensor out = blocks > 1 ? x.ctx().empty({heads * blocks * (hd + 2)}) : x.ctx().empty({1, d});
  const Tensor& kt = self ? pr.cache_k : f.k;
  const Tensor& vt = self ? pr.cache_v : f.v;
  const Tensor& stop = pr.stop.defined() ? pr.stop : x;
  rec.dispatch(self ? "nn_attention_int8_fused_self" : "nn_attention_int8_fused_cross",
               self ? kAttentionInt8FusedSelf : kAttentionInt8FusedCross, params,
               {&x, &pr.w, &pr.norm_gamma, &kt, &vt, &out, &stop},
               static_cast<uint64_t>(heads * blocks) * 64);
  *blocks_out = blocks > 1 ? blocks : 0;
  return out;
}

// ---------------------------------------------------------------- greedy_step

namespace {

// A greedy step in two dispatches. Stage 0: a workgroup per chunk of 1,024 logits writes the chunk's first
// maximum (value, index), as gpu_ops.cpp's kArgmaxChunks. Stage 1, one workgroup: the best of the chunks' pairs
// (the lower index on ties: the row's first maximum), the loop's bookkeeping in `log`, and the token's
// embedding row (32,768 x 416 int8 table; 416 bytes read) dequantized into x for the next step. Once the loop
// has ended both stages return at once. The ended word is 1.0f's bits: linear_int8_fused reads it through a
// float binding, where a denormal pattern could be flushed to zero.
constexpr const char* kGreedyStep = R"(
fn row_of(w: vec3<u32>) -> u32 { return w.x + w.y * 65535u; }
struct P { n: u32, chunks: u32, stage: u32, d: u32, vocab: u32, eos: u32, max_tokens: u32, pad0: u32,
           scale: f32, offset: f32, pad1: u32, pad2: u32 };
@group(0) @binding(0) var<uniform> p: P;
@group(0) @binding(1) var<storage, read> logits: array<f32>;
@group(0) @binding(2) var<storage, read_write> part: array<u32>;
@group(0) @binding(3) var<storage, read_write> log: array<u32>;
@group(0) @binding(4) var<storage, read> table: array<u32>;
@group(0) @binding(5) var<storage, read_write> x: array<f32>;
const ENDED = 0x3f800000u;
var<workgroup> best_v: array<f32, 64>;
var<workgroup> best_i: array<u32, 64>;
var<workgroup> ended: u32;
fn better(v: f32, i: u32, bv: f32, bi: u32) -> bool {
  return i != 0xffffffffu && (bi == 0xffffffffu || v > bv || (v == bv && i < bi));
}
@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let w = row_of(wid);
  if (lid == 0u) { ended = log[0]; }
  if (workgroupUniformLoad(&ended) != 0u) { return; }
  var bv = -3.4e38;
  var bi = 0xffffffffu;
  if (p.stage == 0u) {
    if (w >= p.chunks) { return; }
    let begin = w * 1024u;
    let end = min(p.n, begin + 1024u);
    for (var j = begin + lid; j < end; j += 64u) {
      let v = logits[j];
      if (better(v, j, bv, bi)) { bv = v; bi = j; }
    }
  } else {
    for (var c = lid; c < p.chunks; c += 64u) {
      let v = bitcast<f32>(part[2u * c]);
      let i = part[2u * c + 1u];
      if (better(v, i, bv, bi)) { bv = v; bi = i; }
    }
  }
  best_v[lid] = bv;
  best_i[lid] = bi;
  workgroupBarrier();
  for (var s = 32u; s > 0u; s >>= 1u) {
    if (lid < s && better(best_v[lid + s], best_i[lid + s], best_v[lid], best_i[lid])) {
      best_v[lid] = best_v[lid + s];
      best_i[lid] = best_i[lid + s];
    }
    workgroupBarrier();
  }
  if (p.stage == 0u) {
    if (lid == 0u) {
      part[2u * w] = bitcast<u32>(best_v[0]);
      part[2u * w + 1u] = best_i[0];
    }
    return;
  }
  let token = min(best_i[0], p.vocab - 1u);
  if (lid == 0u) {
    if (token == p.eos) {
      log[0] = ENDED;
    } else {
      let n = log[1];
      log[2u + n] = token;
      log[1] = n + 1u;
      if (n + 1u >= p.max_tokens) { log[0] = ENDED; }
    }
  }
  for (var e = lid; e < p.d; e += 64u) {
    let idx = token * p.d + e;
    let q = extractBits(bitcast<i32>(table[idx / 4u]), (idx % 4u) * 8u, 8u);
    x[e] = f32(q) * p.scale + p.offset;
  }
}
)";

}  // namespace

void greedy_step(const Tensor& logits, const GreedyLoop& g) {
  GpuRecorder& rec = *logits.ctx().gpu();
  if (rec.failed()) return;
  const int64_t vocab = g.table.defined() && g.table.rank() == 2 ? g.table.dim(0) : 0;
  const int64_t d = vocab > 0 ? g.table.dim(1) : 0;
  if (logits.dtype() != DType::F32 || logits.elements() != vocab || vocab == 0 || !on_gpu(g.table) ||
      g.table.dtype() != DType::I8 || !on_gpu(g.log) || g.log.dtype() != DType::I32 || g.max_tokens < 1 ||
      g.log.elements() < 2 + g.max_tokens || !on_gpu(g.x) || g.x.dtype() != DType::F32 ||
      g.x.elements() != d || g.eos < 0) {
    (void)unsupported(logits, "greedy_step of these tensors");
    return;
  }
  const int64_t chunks = (vocab + 1023) / 1024;
  const Tensor part = logits.ctx().empty({2 * chunks}, DType::I32);
  for (uint32_t stage = 0; stage < 2; ++stage) {
    const uint32_t params[] = {word(vocab),
                               word(chunks),
                               stage,
                               word(d),
                               word(vocab),
                               static_cast<uint32_t>(g.eos),
                               word(g.max_tokens),
                               0,
                               float_bits(g.scale),
                               float_bits(g.offset),
                               0,
                               0};
    rec.dispatch("nn_greedy_step", kGreedyStep, params, {&logits, &part, &g.log, &g.table, &g.x},
                 stage == 0 ? static_cast<uint64_t>(chunks) * 64 : 64);
  }
}

namespace {

// glu_depthwise_conv1d_silu: one output (t, c) per thread, c fastest (a warp reads adjacent channels). Each of
// the K taps gates its input again (K sigmoids a value instead of one: cheaper than the GLU's own dispatch and
// its [T, C] round trip through memory at Parakeet's sizes).
constexpr const char* kGluDepthwiseSilu = NN_WGSL_INDEX R"(
struct P { t: u32, c: u32, k: u32, has_bias: u32 };
@group(0) @binding(0) var<uniform> p: P;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read> w: array<f32>;
@group(0) @binding(3) var<storage, read> b: array<f32>;
@group(0) @binding(4) var<storage, read_write> y: array<f32>;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) g: vec3<u32>) {
  let i = index(g);
  if (i >= p.t * p.c) { return; }
  let t = i32(i / p.c);
  let ch = i % p.c;
  let half = i32(p.k / 2u);
  var acc = 0.0;
  for (var j = 0u; j < p.k; j++) {
    let s = t + i32(j) - half;
    if (s < 0 || s >= i32(p.t)) { continue; }
    let row = u32(s) * 2u * p.c;
    acc += w[ch * p.k + j] * (x[row + ch] / (1.0 + exp(-x[row + p.c + ch])));
  }
  if (p.has_bias != 0u) { acc += b[ch]; }
  y[i] = acc * (1.0 / (1.0 + exp(-acc)));
}
)";

}  // namespace

Tensor glu_depthwise_conv1d_silu(const Tensor& x, const Tensor& w, const Tensor& b) {
  GpuRecorder& rec = *x.ctx().gpu();
  if (rec.failed()) return empty_on(x);
  if (x.dtype() != DType::F32 || w.dtype() != DType::F32 || (b.defined() && b.dtype() != DType::F32))
    return unsupported(x, "glu_depthwise_conv1d_silu other than f32");
  const int64_t t = x.dim(0), c = w.dim(0), k = w.dim(2);
  Tensor out = x.ctx().empty({t, c});
  const uint32_t params[] = {word(t), word(c), word(k), b.defined() ? 1u : 0u};
  rec.dispatch("nn_glu_depthwise_silu", kGluDepthwiseSilu, params, {&x, &w, b.defined() ? &b : &w, &out},
               static_cast<uint64_t>(t * c));
  return out;
}

}  // namespace sotto::nn::gpu_ops
