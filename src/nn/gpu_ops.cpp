// WGSL kernels of the ops that run on the GPU so far, each kernel's WGSL once, here. The first group: workgroups
// of 64 threads, one output element per thread (index = global x + global y * 65535 * 64), inputs read once
// (Moonshine's reductions, further down, give a workgroup to each row instead); element-wise kernels are
// memory-bound (8-12 bytes per element); linear's kernels are in gpu_linear.cpp.
#include "nn/gpu_ops.h"

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "nn/gpu_recorder.h"
#include "nn/gpu_wgsl.h"

namespace sotto::nn::gpu_ops {

namespace {

constexpr const char* kBinary = NN_WGSL_INDEX R"(
struct P { n: u32, nb: u32, op: u32, pad: u32 };
@group(0) @binding(0) var<uniform> p: P;
@group(0) @binding(1) var<storage, read> a: array<f32>;
@group(0) @binding(2) var<storage, read> b: array<f32>;
@group(0) @binding(3) var<storage, read_write> y: array<f32>;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) g: vec3<u32>) {
  let i = index(g);
  if (i >= p.n) { return; }
  let x = a[i];
  let z = b[i % p.nb];
  switch p.op {
    case 0u: { y[i] = x + z; }
    case 1u: { y[i] = x - z; }
    case 2u: { y[i] = x * z; }
    default: { y[i] = x / z; }
  }
}
)";

// erf by Abramowitz & Stegun 7.1.26 (|error| < 1.5e-7): WGSL has no erf.
constexpr const char* kActivation = NN_WGSL_INDEX R"(
struct P { n: u32, act: u32, alpha: f32, bias: f32 };
@group(0) @binding(0) var<uniform> p: P;
@group(0) @binding(1) var<storage, read> a: array<f32>;
@group(0) @binding(2) var<storage, read_write> y: array<f32>;
fn erf_approx(x: f32) -> f32 {
  let t = 1.0 / (1.0 + 0.3275911 * abs(x));
  let poly = t * (0.254829592 + t * (-0.284496736 + t * (1.421413741 + t * (-1.453152027 + t * 1.061405429))));
  return sign(x) * (1.0 - poly * exp(-x * x));
}
fn sigmoid(x: f32) -> f32 { return 1.0 / (1.0 + exp(-x)); }
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) g: vec3<u32>) {
  let i = index(g);
  if (i >= p.n) { return; }
  let x = a[i];
  var r = x;
  switch p.act {
    case 1u: { r = max(x, 0.0); }
    case 2u: { r = select(p.alpha * x, x, x >= 0.0); }
    case 3u: { r = sigmoid(x); }
    case 4u: { r = tanh(clamp(x, -15.0, 15.0)); }
    case 5u: { r = x * sigmoid(x); }
    case 6u: { r = 0.5 * x * (1.0 + erf_approx(x * 0.70710678118654752)); }
    case 7u: { r = 0.5 * x * (1.0 + tanh(clamp(0.79788456080286536 * (x + 0.044715 * x * x * x), -15.0, 15.0))); }
    case 8u: { r = exp(x); }
    case 9u: { r = sin(x); }
    case 10u: { r = cos(x); }
    case 11u: { r = atan(x); }
    case 12u: { r = abs(x); }
    case 13u: { r = sqrt(x); }
    case 14u: { r = x * x; }
    case 100u: { r = x * p.alpha + p.bias; }
    default: { }
  }
  y[i] = r;
}
)";

// conv1d's input unrolled for a product: row t of the output holds the in_g * K inputs output time t reads
// (zero where the window leaves the padded input), so a groups = 1 convolution is linear(unrolled, w as
// [Cout, Cin * K]) then a transpose. One element per thread.
constexpr const char* kIm2col = NN_WGSL_INDEX R"(
struct P { total: u32, cols: u32, kernel: u32, length: u32, stride: u32, pad: u32, dilation: u32, pad1: u32 };
@group(0) @binding(0) var<uniform> p: P;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read_write> y: array<f32>;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) g: vec3<u32>) {
  let i = index(g);
  if (i >= p.total) { return; }
  let t = i / p.cols;
  let ck = i % p.cols;
  let pos = i32(t * p.stride + (ck % p.kernel) * p.dilation) - i32(p.pad);
  var v = 0.0;
  if (pos >= 0 && pos < i32(p.length)) { v = x[(ck / p.kernel) * p.length + u32(pos)]; }
  y[i] = v;
}
)";

// pad_reflect along any axis, as [outer, n, inner]: output position pos reads source pos - before, reflected
// at both ends without repeating the edge.
constexpr const char* kPadReflect = NN_WGSL_INDEX R"(
struct P { total: u32, n: u32, inner: u32, before: u32, n_out: u32, pad0: u32, pad1: u32, pad2: u32 };
@group(0) @binding(0) var<uniform> p: P;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read_write> y: array<f32>;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) g: vec3<u32>) {
  let i = index(g);
  if (i >= p.total) { return; }
  let j = i % p.inner;
  let r = i / p.inner;
  let pos = r % p.n_out;
  let o = r / p.n_out;
  var src = i32(pos) - i32(p.before);
  if (src < 0) { src = -src; }
  if (src >= i32(p.n)) { src = 2 * (i32(p.n) - 1) - src; }
  y[i] = x[(o * p.n + u32(src)) * p.inner + j];
}
)";

// slice along any axis, as [outer, n, inner]: one output element per thread.
constexpr const char* kSlice = NN_WGSL_INDEX R"(
struct P { total: u32, n_out: u32, n: u32, inner: u32, begin: u32, pad0: u32, pad1: u32, pad2: u32 };
@group(0) @binding(0) var<uniform> p: P;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read_write> y: array<f32>;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) g: vec3<u32>) {
  let i = index(g);
  if (i >= p.total) { return; }
  let j = i % p.inner;
  let r = i / p.inner;
  let pos = r % p.n_out;
  let o = r / p.n_out;
  y[i] = x[(o * p.n + p.begin + pos) * p.inner + j];
}
)";

// conv1d: one output (channel oc, time t) per thread, in_g * K multiply-adds reading its weight row and the
// input window (no tiling yet).
constexpr const char* kConv1d = NN_WGSL_INDEX R"(
struct P { cout: u32, out_len: u32, in_g: u32, kernel: u32, length: u32, stride: u32, pad: u32, dilation: u32,
           out_g: u32, has_bias: u32, pad1: u32, pad2: u32 };
@group(0) @binding(0) var<uniform> p: P;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read> w: array<f32>;
@group(0) @binding(3) var<storage, read> bias: array<f32>;
@group(0) @binding(4) var<storage, read_write> y: array<f32>;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) g: vec3<u32>) {
  let i = index(g);
  if (i >= p.cout * p.out_len) { return; }
  let oc = i / p.out_len;
  let t = i % p.out_len;
  let grp = oc / p.out_g;
  var s = 0.0;
  for (var c = 0u; c < p.in_g; c++) {
    for (var k = 0u; k < p.kernel; k++) {
      let pos = i32(t * p.stride + k * p.dilation) - i32(p.pad);
      if (pos >= 0 && pos < i32(p.length)) {
        s += w[(oc * p.in_g + c) * p.kernel + k] * x[(grp * p.in_g + c) * p.length + u32(pos)];
      }
    }
  }
  if (p.has_bias != 0u) { s += bias[oc]; }
  y[i] = s;
}
)";

// One LSTM step for every unit: thread j sums its four gates' rows of W_hh with h (4 * H multiply-adds), adds
// the precomputed input projection and bias, and updates c[j] in place and h into the other buffer.
constexpr const char* kLstmStep = NN_WGSL_INDEX R"(
struct P { hidden: u32, t: u32, has_bias: u32, pad: u32 };
@group(0) @binding(0) var<uniform> p: P;
@group(0) @binding(1) var<storage, read> gx: array<f32>;
@group(0) @binding(2) var<storage, read> whh: array<f32>;
@group(0) @binding(3) var<storage, read> b: array<f32>;
@group(0) @binding(4) var<storage, read> h_in: array<f32>;
@group(0) @binding(5) var<storage, read_write> h_out: array<f32>;
@group(0) @binding(6) var<storage, read_write> c: array<f32>;
@group(0) @binding(7) var<storage, read_write> y: array<f32>;
fn sigmoid(x: f32) -> f32 { return 1.0 / (1.0 + exp(-x)); }
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) g: vec3<u32>) {
  let j = index(g);
  let h = p.hidden;
  if (j >= h) { return; }
  var gates: array<f32, 4>;
  for (var q = 0u; q < 4u; q++) {
    let row = q * h + j;
    var s = gx[p.t * 4u * h + row];
    if (p.has_bias != 0u) { s += b[row]; }
    for (var k = 0u; k < h; k++) { s += whh[row * h + k] * h_in[k]; }
    gates[q] = s;
  }
  let c_new = sigmoid(gates[1]) * c[j] + sigmoid(gates[0]) * tanh(clamp(gates[2], -15.0, 15.0));
  c[j] = c_new;
  let h_new = sigmoid(gates[3]) * tanh(clamp(c_new, -15.0, 15.0));
  h_out[j] = h_new;
  y[p.t * h + j] = h_new;
}
)";

// Softmax and layer norm over the last axis: a workgroup per row, its threads striding over the row for each
// pass (max / mean, sum / variance, write), reduced in workgroup memory.
constexpr const char* kRows = NN_WGSL_REDUCE R"(
struct P { rows: u32, n: u32, op: u32, eps: f32, has_gamma: u32, has_beta: u32, pad0: u32, pad1: u32 };
@group(0) @binding(0) var<uniform> p: P;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read> gamma: array<f32>;
@group(0) @binding(3) var<storage, read> beta: array<f32>;
@group(0) @binding(4) var<storage, read_write> y: array<f32>;
@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let r = row_of(wid);
  if (r >= p.rows) { return; }
  let base = r * p.n;
  if (p.op == 0u) {
    var m = -3.4e38;
    for (var i = lid; i < p.n; i += 64u) { m = max(m, x[base + i]); }
    m = reduce_max(m, lid);
    var s = 0.0;
    for (var i = lid; i < p.n; i += 64u) { s += exp(x[base + i] - m); }
    s = reduce_sum(s, lid);
    for (var i = lid; i < p.n; i += 64u) { y[base + i] = exp(x[base + i] - m) / s; }
    return;
  }
  var mean = 0.0;
  for (var i = lid; i < p.n; i += 64u) { mean += x[base + i]; }
  mean = reduce_sum(mean, lid) / f32(p.n);
  var v = 0.0;
  for (var i = lid; i < p.n; i += 64u) { let d = x[base + i] - mean; v += d * d; }
  let inv = 1.0 / sqrt(reduce_sum(v, lid) / f32(p.n) + p.eps);
  for (var i = lid; i < p.n; i += 64u) {
    var o = (x[base + i] - mean) * inv;
    if (p.has_gamma != 0u) { o *= gamma[i]; }
    if (p.has_beta != 0u) { o += beta[i]; }
    y[base + i] = o;
  }
}
)";

// ---------------------------------------------------------------- Moonshine's kernels
// Group norm of x [C, T] in three dispatches of this kernel (`stage`), each with a workgroup per (group, chunk of
// the group's values): 0 sums each chunk; 1 reduces those partial sums to the mean and sums each chunk's squared
// deviations (the CPU op's two passes); 2 reduces those to the variance and writes the chunk with the channel's
// gamma and beta. Moonshine's one group holds 416 x ~2,500 values: one workgroup would take ~10 ms on an H200.
constexpr const char* kGroupNorm = NN_WGSL_REDUCE R"(
struct P { groups: u32, per: u32, length: u32, channels_per_group: u32, eps: f32, has_gamma: u32, has_beta: u32,
           chunks: u32, stage: u32, pad0: u32, pad1: u32, pad2: u32 };
@group(0) @binding(0) var<uniform> p: P;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read> gamma: array<f32>;
@group(0) @binding(3) var<storage, read> beta: array<f32>;
@group(0) @binding(4) var<storage, read_write> partial: array<f32>;
@group(0) @binding(5) var<storage, read_write> y: array<f32>;
fn total(grp: u32, which: u32, lid: u32) -> f32 {
  var s = 0.0;
  for (var c = lid; c < p.chunks; c += 64u) { s += partial[(which * p.groups + grp) * p.chunks + c]; }
  return reduce_sum(s, lid);
}
@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let w = row_of(wid);
  let grp = w / p.chunks;
  let chunk = w % p.chunks;
  if (grp >= p.groups) { return; }
  let size = (p.per + p.chunks - 1u) / p.chunks;
  let begin = chunk * size;
  let end = min(p.per, begin + size);
  let base = grp * p.per;
  if (p.stage == 0u) {
    var s = 0.0;
    for (var i = begin + lid; i < end; i += 64u) { s += x[base + i]; }
    s = reduce_sum(s, lid);
    if (lid == 0u) { partial[grp * p.chunks + chunk] = s; }
    return;
  }
  let mean = total(grp, 0u, lid) / f32(p.per);
  if (p.stage == 1u) {
    var v = 0.0;
    for (var i = begin + lid; i < end; i += 64u) { let d = x[base + i] - mean; v += d * d; }
    v = reduce_sum(v, lid);
    if (lid == 0u) { partial[(p.groups + grp) * p.chunks + chunk] = v; }
    return;
  }
  let inv = 1.0 / sqrt(total(grp, 1u, lid) / f32(p.per) + p.eps);
  for (var i = begin + lid; i < end; i += 64u) {
    let c = grp * p.channels_per_group + i / p.length;
    var o = (x[base + i] - mean) * inv;
    if (p.has_gamma != 0u) { o *= gamma[c]; }
    if (p.has_beta != 0u) { o += beta[c]; }
    y[base + i] = o;
  }
}
)";

// x [rows, cols] -> [cols, rows], one output element per thread (4-byte elements).
constexpr const char* kTranspose = NN_WGSL_INDEX R"(
struct P { rows: u32, cols: u32, pad0: u32, pad1: u32 };
@group(0) @binding(0) var<uniform> p: P;
@group(0) @binding(1) var<storage, read> x: array<u32>;
@group(0) @binding(2) var<storage, read_write> y: array<u32>;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) g: vec3<u32>) {
  let i = index(g);
  if (i >= p.rows * p.cols) { return; }
  y[i] = x[(i % p.rows) * p.cols + i / p.rows];
}
)";

// One part of a concat: the part [outer, n_part, inner] into the output [outer, n_out, inner] at `done` along
// the axis (a dispatch per part; 4-byte elements).
constexpr const char* kConcatPart = NN_WGSL_INDEX R"(
struct P { total: u32, n_part: u32, n_out: u32, inner: u32, done: u32, pad0: u32, pad1: u32, pad2: u32 };
@group(0) @binding(0) var<uniform> p: P;
@group(0) @binding(1) var<storage, read> x: array<u32>;
@group(0) @binding(2) var<storage, read_write> y: array<u32>;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) g: vec3<u32>) {
  let i = index(g);
  if (i >= p.total) { return; }
  let j = i % p.inner;
  let r = i / p.inner;
  y[((r / p.n_part) * p.n_out + p.done + r % p.n_part) * p.inner + j] = x[i];
}
)";

// A concat of two parts in one dispatch (a decoder step's KV cache grown by one row: 2 dispatches a tensor
// were 32 of a Moonshine step's ~200): each output element [outer, n_a + n_b, inner] reads from a or b.
constexpr const char* kConcat2 = NN_WGSL_INDEX R"(
struct P { total: u32, n_a: u32, n_b: u32, inner: u32 };
@group(0) @binding(0) var<uniform> p: P;
@group(0) @binding(1) var<storage, read> a: array<u32>;
@group(0) @binding(2) var<storage, read> b: array<u32>;
@group(0) @binding(3) var<storage, read_write> y: array<u32>;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) g: vec3<u32>) {
  let i = index(g);
  if (i >= p.total) { return; }
  let j = i % p.inner;
  let r = i / p.inner;
  let n = p.n_a + p.n_b;
  let o = r / n;
  let pos = r % n;
  if (pos < p.n_a) {
    y[i] = a[(o * p.n_a + pos) * p.inner + j];
  } else {
    y[i] = b[(o * p.n_b + pos - p.n_a) * p.inner + j];
  }
}
)";

// Rotary embedding, one output element per thread (it reads its pair partner). Each pair's frequency comes as
// a 32-bit fixed-point fraction of a turn per position (inv_freq / 2 pi * 2^32, computed in double on the CPU),
// so position * frequency mod one turn is an exact integer product wrapping at 2^32: the angle is good to
// ~position * 2^-31 rad at any position (an f32 product would lose ~position * 2^-22). The fraction splits
// exactly into a quarter turn and a remainder in [-pi/4, pi/4), where Taylor polynomials to x^9 / x^10 give
// sin and cos within ~1e-9 (WGSL's own sin and cos only promise 2^-11; SwiftShader's are off by ~2e-4).
constexpr const char* kRope = NN_WGSL_INDEX NN_WGSL_ROPE_SIN_COS R"(
struct P { total: u32, c: u32, head_dim: u32, rotary_dim: u32, position0: u32, interleaved: u32, pad0: u32,
           pad1: u32, turns: array<vec4<u32>, 16> };
@group(0) @binding(0) var<uniform> p: P;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read_write> y: array<f32>;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) g: vec3<u32>) {
  let i = index(g);
  if (i >= p.total) { return; }
  let t = i / p.c;
  let e = (i % p.c) % p.head_dim;
  if (e >= p.rotary_dim) { y[i] = x[i]; return; }
  let half = p.rotary_dim / 2u;
  var pair = e % half;
  var first = e < half;
  var partner = select(i - half, i + half, first);
  if (p.interleaved != 0u) {
    pair = e / 2u;
    first = e % 2u == 0u;
    partner = select(i - 1u, i + 1u, first);
  }
  let frac = (p.position0 + t) * p.turns[pair / 4u][pair % 4u];
  let sc = rope_sin_cos(frac);
  let sn = sc.x;
  let cs = sc.y;
  let xa = select(x[partner], x[i], first);
  let xb = select(x[i], x[partner], first);
  y[i] = select(xa * sn + xb * cs, xa * cs - xb * sn, first);
}
)";

// Scaled dot-product attention split over key blocks (flash-decoding): a workgroup per (query i, head h, block of
// `block` <= 64 keys), so a decoder step's one query still fills the GPU (8 heads x ~26 blocks of 16 cross keys
// for a 10 s clip, where a workgroup per head left 124 of an H200's 132 SMs idle and took ~110 us a dispatch).
// The query row is staged in workgroup memory; thread j scores key j of the block; the block's max and sum of
// exponentials are reduced in workgroup memory; thread e sums probabilities times values for dims e, e + 64, ..
// (adjacent threads read adjacent values). A block writes (max, sum, unnormalised sums [D]) to `part`; the
// combine kernel below rescales the blocks to the largest max and divides. With one block the workgroup writes
// the output itself (no combine dispatch). Causal: query i sees keys up to Tk - Tq + i (a KV cache ahead of the
// queries); a block past that writes max -3e38, sum 0.
constexpr const char* kAttention = NN_WGSL_REDUCE R"(
struct P { tq: u32, tk: u32, heads: u32, kv_heads: u32, head_dim: u32, causal: u32, scale: f32, block: u32,
           blocks: u32, pad0: u32, pad1: u32, pad2: u32 };
@group(0) @binding(0) var<uniform> p: P;
@group(0) @binding(1) var<storage, read> q: array<f32>;
@group(0) @binding(2) var<storage, read> k: array<f32>;
@group(0) @binding(3) var<storage, read> v: array<f32>;
@group(0) @binding(4) var<storage, read_write> part: array<f32>;
@group(0) @binding(5) var<storage, read_write> y: array<f32>;
var<workgroup> qs: array<f32, 256>;
var<workgroup> probs: array<f32, 64>;
@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let w = row_of(wid);
  if (w >= p.tq * p.heads * p.blocks) { return; }
  let b = w % p.blocks;
  let row = w / p.blocks;  // i * heads + h
  let i = row / p.heads;
  let h = row % p.heads;
  let d = p.head_dim;
  let kv_cols = p.kv_heads * d;
  let kv_base = (h / (p.heads / p.kv_heads)) * d;
  var limit = p.tk;
  if (p.causal != 0u) { limit = min(p.tk, p.tk - p.tq + i + 1u); }
  let q_base = i * p.heads * d + h * d;
  for (var e = lid; e < d; e += 64u) { qs[e] = q[q_base + e]; }
  workgroupBarrier();
  let j0 = b * p.block;
  let j = j0 + lid;
  var s = -3.0e38;
  if (lid < p.block && j < limit) {
    let kb = j * kv_cols + kv_base;
    var s0 = 0.0;
    var s1 = 0.0;
    var e = 0u;
    for (; e + 2u <= d; e += 2u) {
      s0 += qs[e] * k[kb + e];
      s1 += qs[e + 1u] * k[kb + e + 1u];
    }
    if (e < d) { s0 += qs[e] * k[kb + e]; }
    s = (s0 + s1) * p.scale;
  }
  let m = reduce_max(s, lid);
  var z = 0.0;
  if (lid < p.block && j < limit) { z = exp(s - m); }
  probs[lid] = z;
  let l = reduce_sum(z, lid);  // its barriers also publish probs
  let n = min(p.block, select(0u, limit - j0, limit > j0));
  let out = row * p.blocks + b;
  for (var e = lid; e < d; e += 64u) {
    var acc = 0.0;
    for (var t = 0u; t < n; t++) { acc += probs[t] * v[(j0 + t) * kv_cols + kv_base + e]; }
    if (p.blocks == 1u) {
      y[q_base + e] = acc / l;
    } else {
      part[out * (d + 2u) + 2u + e] = acc;
    }
  }
  if (p.blocks > 1u && lid == 0u) {
    part[out * (d + 2u)] = m;
    part[out * (d + 2u) + 1u] = l;
  }
}
)";

// kAttention for heads of at most 64 dims, a multiple of 4 (Moonshine's 52), read as vec4: a key's score is
// d / 4 loads instead of d, and the probability-weighted sum splits the block's keys over 4 groups of 16
// threads (thread e4 of a group sums dims 4 e4 .. 4 e4 + 3), reduced in workgroup memory. A decoder step's
// attention is latency-bound (8-208 workgroups, each a chain of dependent loads): fewer, wider loads are the
// gain. Same partial layout and combine kernel.
constexpr const char* kAttention4 = NN_WGSL_REDUCE R"(
struct P { tq: u32, tk: u32, heads: u32, kv_heads: u32, head_dim: u32, causal: u32, scale: f32, block: u32,
           blocks: u32, pad0: u32, pad1: u32, pad2: u32 };
@group(0) @binding(0) var<uniform> p: P;
@group(0) @binding(1) var<storage, read> q: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read> k: array<vec4<f32>>;
@group(0) @binding(3) var<storage, read> v: array<vec4<f32>>;
@group(0) @binding(4) var<storage, read_write> part: array<f32>;
@group(0) @binding(5) var<storage, read_write> y: array<f32>;
var<workgroup> qs: array<vec4<f32>, 16>;
var<workgroup> probs: array<f32, 64>;
var<workgroup> acc4: array<vec4<f32>, 64>;
@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let w = row_of(wid);
  if (w >= p.tq * p.heads * p.blocks) { return; }
  let b = w % p.blocks;
  let row = w / p.blocks;  // i * heads + h
  let i = row / p.heads;
  let h = row % p.heads;
  let d = p.head_dim;
  let d4 = d / 4u;
  let kv4 = p.kv_heads * d / 4u;
  let kvb4 = (h / (p.heads / p.kv_heads)) * d4;
  var limit = p.tk;
  if (p.causal != 0u) { limit = min(p.tk, p.tk - p.tq + i + 1u); }
  let q_base = i * p.heads * d + h * d;
  if (lid < d4) { qs[lid] = q[q_base / 4u + lid]; }
  workgroupBarrier();
  let j0 = b * p.block;
  let j = j0 + lid;
  var s = -3.0e38;
  if (lid < p.block && j < limit) {
    let kb = j * kv4 + kvb4;
    var a = vec4<f32>(0.0);
    for (var e = 0u; e < d4; e++) { a += qs[e] * k[kb + e]; }
    s = (a.x + a.y + a.z + a.w) * p.scale;
  }
  let m = reduce_max(s, lid);
  var z = 0.0;
  if (lid < p.block && j < limit) { z = exp(s - m); }
  probs[lid] = z;
  let l = reduce_sum(z, lid);  // its barriers also publish probs
  let n = min(p.block, select(0u, limit - j0, limit > j0));
  let grp = lid / 16u;
  let e4 = lid % 16u;
  var acc = vec4<f32>(0.0);
  if (e4 < d4) {
    for (var t = grp; t < n; t += 4u) { acc += probs[t] * v[(j0 + t) * kv4 + kvb4 + e4]; }
  }
  acc4[lid] = acc;
  workgroupBarrier();
  let out = row * p.blocks + b;
  if (lid < d4) {
    let tot = acc4[lid] + acc4[lid + 16u] + acc4[lid + 32u] + acc4[lid + 48u];
    for (var c = 0u; c < 4u; c++) {
      if (p.blocks == 1u) {
        y[q_base + 4u * lid + c] = tot[c] / l;
      } else {
        part[out * (d + 2u) + 2u + 4u * lid + c] = tot[c];
      }
    }
  }
  if (p.blocks > 1u && lid == 0u) {
    part[out * (d + 2u)] = m;
    part[out * (d + 2u) + 1u] = l;
  }
}
)";

// The key blocks of one (query, head) combined: a workgroup per (query, head), its threads over the dims, each
// block's sums scaled by exp(block max - overall max).
constexpr const char* kAttentionCombine = R"(
fn row_of(w: vec3<u32>) -> u32 { return w.x + w.y * 65535u; }
struct P { tq: u32, tk: u32, heads: u32, kv_heads: u32, head_dim: u32, causal: u32, scale: f32, block: u32,
           blocks: u32, pad0: u32, pad1: u32, pad2: u32 };
@group(0) @binding(0) var<uniform> p: P;
@group(0) @binding(1) var<storage, read> part: array<f32>;
@group(0) @binding(2) var<storage, read_write> y: array<f32>;
@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let row = row_of(wid);
  if (row >= p.tq * p.heads) { return; }
  let d = p.head_dim;
  let stride = d + 2u;
  let base = row * p.blocks * stride;
  var m = -3.0e38;
  for (var b = 0u; b < p.blocks; b++) { m = max(m, part[base + b * stride]); }
  var l = 0.0;
  for (var b = 0u; b < p.blocks; b++) { l += part[base + b * stride + 1u] * exp(part[base + b * stride] - m); }
  let inv = 1.0 / l;
  let i = row / p.heads;
  let h = row % p.heads;
  for (var e = lid; e < d; e += 64u) {
    var acc = 0.0;
    for (var b = 0u; b < p.blocks; b++) {
      acc += part[base + b * stride + 2u + e] * exp(part[base + b * stride] - m);
    }
    y[i * p.heads * d + h * d + e] = acc * inv;
  }
}
)";

// Weight-only int8 linear, y = scale * (x . q) + offset * sum(x) + b (the CPU op's arithmetic; the graph's is
// x . (q * scale + offset) in float): a workgroup per output element, its threads striding over K (adjacent
// threads read adjacent weight bytes), the int8 weights read as words and unpacked with extractBits.
constexpr const char* kLinearInt8 = NN_WGSL_REDUCE R"(
struct P { m: u32, n: u32, k: u32, has_bias: u32, scale: f32, offset: f32, pad0: u32, pad1: u32 };
@group(0) @binding(0) var<uniform> p: P;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read> w: array<u32>;
@group(0) @binding(3) var<storage, read> bias: array<f32>;
@group(0) @binding(4) var<storage, read_write> y: array<f32>;
@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let o = row_of(wid);
  if (o >= p.m * p.n) { return; }
  let r = o / p.n;
  let c = o % p.n;
  var s = 0.0;
  var sx = 0.0;
  for (var t = lid; t < p.k; t += 64u) {
    let idx = c * p.k + t;
    let qv = extractBits(bitcast<i32>(w[idx / 4u]), (idx % 4u) * 8u, 8u);
    let xv = x[r * p.k + t];
    s += xv * f32(qv);
    sx += xv;
  }
  s = reduce_sum(s, lid);
  sx = reduce_sum(sx, lid);
  if (lid == 0u) {
    var out = p.scale * s + p.offset * sx;
    if (p.has_bias != 0u) { out += bias[c]; }
    y[o] = out;
  }
}
)";

// Rows of a table [V, D] (F32, or I8 / U8 dequantized (q - zero_point) * scale) for each id (I32, or I64 read
// from its low word), ids clamped into the table; one output element per thread.
constexpr const char* kEmbedding = NN_WGSL_INDEX R"(
struct P { total: u32, d: u32, vocab: u32, kind: u32, scale: f32, zero_point: i32, id_words: u32, pad: u32 };
@group(0) @binding(0) var<uniform> p: P;
@group(0) @binding(1) var<storage, read> table: array<u32>;
@group(0) @binding(2) var<storage, read> ids: array<i32>;
@group(0) @binding(3) var<storage, read_write> y: array<f32>;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) g: vec3<u32>) {
  let i = index(g);
  if (i >= p.total) { return; }
  let row = i / p.d;
  let id = u32(clamp(ids[row * p.id_words], 0, i32(p.vocab) - 1));
  let idx = id * p.d + i % p.d;
  if (p.kind == 0u) { y[i] = bitcast<f32>(table[idx]); return; }
  let word = table[idx / 4u];
  let shift = (idx % 4u) * 8u;
  var qv = i32(extractBits(word, shift, 8u));
  if (p.kind == 1u) { qv = extractBits(bitcast<i32>(word), shift, 8u); }
  y[i] = f32(qv - p.zero_point) * p.scale;
}
)";

// The first index of the largest value of each row: a workgroup per row, each thread's best over its stride,
// then a tree over (value, index) pairs preferring the lower index on ties (ONNX ArgMax).
constexpr const char* kArgmax = R"(
fn row_of(w: vec3<u32>) -> u32 { return w.x + w.y * 65535u; }
struct P { rows: u32, n: u32, pad0: u32, pad1: u32 };
@group(0) @binding(0) var<uniform> p: P;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read_write> y: array<i32>;
var<workgroup> best_v: array<f32, 64>;
var<workgroup> best_i: array<u32, 64>;
@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let r = row_of(wid);
  if (r >= p.rows) { return; }
  var bv = -3.4e38;
  var bi = 0xffffffffu;
  for (var j = lid; j < p.n; j += 64u) {
    let v = x[r * p.n + j];
    if (bi == 0xffffffffu || v > bv) { bv = v; bi = j; }
  }
  best_v[lid] = bv;
  best_i[lid] = bi;
  workgroupBarrier();
  for (var s = 32u; s > 0u; s >>= 1u) {
    if (lid < s) {
      let ov = best_v[lid + s];
      let oi = best_i[lid + s];
      let mine = best_i[lid];
      if (oi != 0xffffffffu && (mine == 0xffffffffu || ov > best_v[lid] || (ov == best_v[lid] && oi < mine))) {
        best_v[lid] = ov;
        best_i[lid] = oi;
      }
    }
    workgroupBarrier();
  }
  if (lid == 0u) { y[r] = i32(best_i[0]); }
}
)";

// Argmax of long rows (a decoder step's 32,768 logits) in two dispatches of this kernel: stage 0 gives a
// workgroup to each (row, chunk of 1,024 values) and writes the chunk's best (value, index); stage 1 gives a
// workgroup to each row and picks the best of its chunks' pairs. Both prefer the lower index on ties, so the
// result is the row's first maximum, as kArgmax's (one workgroup over 32,768 values took ~124 us on an H200).
constexpr const char* kArgmaxChunks = R"(
fn row_of(w: vec3<u32>) -> u32 { return w.x + w.y * 65535u; }
struct P { rows: u32, n: u32, chunks: u32, stage: u32 };
@group(0) @binding(0) var<uniform> p: P;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read_write> part: array<u32>;
@group(0) @binding(3) var<storage, read_write> y: array<i32>;
var<workgroup> best_v: array<f32, 64>;
var<workgroup> best_i: array<u32, 64>;
fn better(v: f32, i: u32, bv: f32, bi: u32) -> bool {
  return i != 0xffffffffu && (bi == 0xffffffffu || v > bv || (v == bv && i < bi));
}
@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let w = row_of(wid);
  var bv = -3.4e38;
  var bi = 0xffffffffu;
  if (p.stage == 0u) {
    if (w >= p.rows * p.chunks) { return; }
    let r = w / p.chunks;
    let begin = (w % p.chunks) * 1024u;
    let end = min(p.n, begin + 1024u);
    for (var j = begin + lid; j < end; j += 64u) {
      let v = x[r * p.n + j];
      if (better(v, j, bv, bi)) { bv = v; bi = j; }
    }
  } else {
    if (w >= p.rows) { return; }
    for (var c = lid; c < p.chunks; c += 64u) {
      let at = 2u * (w * p.chunks + c);
      let v = bitcast<f32>(part[at]);
      let i = part[at + 1u];
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
  if (lid == 0u) {
    if (p.stage == 0u) {
      part[2u * w] = bitcast<u32>(best_v[0]);
      part[2u * w + 1u] = best_i[0];
    } else {
      y[w] = i32(best_i[0]);
    }
  }
}
)";

// ---------------------------------------------------------------- Parakeet's (FastConformer's) kernels
// GLU along any axis, as [outer, 2 * half, inner]: the first half times sigmoid of the second; one output
// element per thread.
constexpr const char* kGlu = NN_WGSL_INDEX R"(
struct P { total: u32, half: u32, inner: u32, pad0: u32 };
@group(0) @binding(0) var<uniform> p: P;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read_write> y: array<f32>;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) g: vec3<u32>) {
  let i = index(g);
  if (i >= p.total) { return; }
  let j = i % p.inner;
  let r = i / p.inner;
  let o = r / p.half;
  let a = (o * 2u * p.half + r % p.half) * p.inner + j;
  y[i] = x[a] / (1.0 + exp(-x[a + p.half * p.inner]));
}
)";

// permute of up to 6 dims (4-byte elements): each output element's input offset from the output's dims and
// the input strides taken in the output's order; one element per thread.
constexpr const char* kPermute = NN_WGSL_INDEX R"(
struct P { total: u32, rank: u32, pad0: u32, pad1: u32, dims: array<vec4<u32>, 2>, strides: array<vec4<u32>, 2> };
@group(0) @binding(0) var<uniform> p: P;
@group(0) @binding(1) var<storage, read> x: array<u32>;
@group(0) @binding(2) var<storage, read_write> y: array<u32>;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) g: vec3<u32>) {
  let i = index(g);
  if (i >= p.total) { return; }
  var rest = i;
  var src = 0u;
  for (var a = i32(p.rank) - 1; a >= 0; a--) {
    let n = p.dims[a / 4][a % 4];
    src += (rest % n) * p.strides[a / 4][a % 4];
    rest /= n;
  }
  y[i] = x[src];
}
)";

// conv2d, x [Cin, H, W], w [Cout, Cin / groups, KH, KW]: one output (channel, row, column) per thread, its
// in_g * KH * KW multiply-adds (Parakeet's subsampling: a 3 x 3 conv of one channel, depthwise 3 x 3 and
// pointwise 1 x 1 convs of 256 channels).
constexpr const char* kConv2d = NN_WGSL_INDEX R"(
struct P { cout: u32, oh: u32, ow: u32, in_g: u32, h: u32, w: u32, kh: u32, kw: u32, stride_h: u32, stride_w: u32,
           pad_h: u32, pad_w: u32, dil_h: u32, dil_w: u32, out_g: u32, has_bias: u32 };
@group(0) @binding(0) var<uniform> p: P;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read> wt: array<f32>;
@group(0) @binding(3) var<storage, read> bias: array<f32>;
@group(0) @binding(4) var<storage, read_write> y: array<f32>;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) g: vec3<u32>) {
  let i = index(g);
  if (i >= p.cout * p.oh * p.ow) { return; }
  let oc = i / (p.oh * p.ow);
  let oy = (i / p.ow) % p.oh;
  let ox = i % p.ow;
  let c0 = (oc / p.out_g) * p.in_g;
  var s = 0.0;
  for (var c = 0u; c < p.in_g; c++) {
    for (var ky = 0u; ky < p.kh; ky++) {
      let yy = i32(oy * p.stride_h + ky * p.dil_h) - i32(p.pad_h);
      if (yy < 0 || yy >= i32(p.h)) { continue; }
      for (var kx = 0u; kx < p.kw; kx++) {
        let xx = i32(ox * p.stride_w + kx * p.dil_w) - i32(p.pad_w);
        if (xx < 0 || xx >= i32(p.w)) { continue; }
        s += wt[((oc * p.in_g + c) * p.kh + ky) * p.kw + kx] * x[((c0 + c) * p.h + u32(yy)) * p.w + u32(xx)];
      }
    }
  }
  if (p.has_bias != 0u) { s += bias[oc]; }
  y[i] = s;
}
)";

// Transformer-XL relative-position attention (FastConformer), split over key blocks as kAttention (same
// partial layout, same combine kernel): score(i, j) = ((q_i + u_h) . k_j + (q_i + v_h) . p_{T-1-i+j}) * scale,
// p [2T - 1, H * D] the projected positions (the rel-shift as an index). Thread j of a block computes both dot
// products of its key (`dots`): each thread walks its own rows of k and p, so the loads do not coalesce and the
// loop is a chain of dependent loads; where D is a multiple of 4 (Parakeet's 128) the variant below reads them
// as vec4s, a quarter of the loads and of the chain. The two variants add the same products in another order.
#define NN_REL_POS_ATTENTION(KP_BINDINGS, DOTS)                                                             \
  NN_WGSL_REDUCE                                                                                            \
  "struct P { tq: u32, tk: u32, heads: u32, kv_heads: u32, head_dim: u32, causal: u32, scale: f32, block: " \
  "u32,\n"                                                                                                  \
  "           blocks: u32, pad0: u32, pad1: u32, pad2: u32 };\n"                                            \
  "@group(0) @binding(0) var<uniform> p: P;\n"                                                              \
  "@group(0) @binding(1) var<storage, read> q: array<f32>;\n" KP_BINDINGS                                   \
  "@group(0) @binding(3) var<storage, read> v: array<f32>;\n"                                               \
  "@group(0) @binding(5) var<storage, read> bias_u: array<f32>;\n"                                          \
  "@group(0) @binding(6) var<storage, read> bias_v: array<f32>;\n"                                          \
  "@group(0) @binding(7) var<storage, read_write> part: array<f32>;\n"                                      \
  "@group(0) @binding(8) var<storage, read_write> y: array<f32>;\n"                                         \
  "var<workgroup> qu: array<f32, 256>;\n"                                                                   \
  "var<workgroup> qv: array<f32, 256>;\n"                                                                   \
  "var<workgroup> probs: array<f32, 64>;\n" DOTS R"(
@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let w = row_of(wid);
  if (w >= p.tq * p.heads * p.blocks) { return; }
  let b = w % p.blocks;
  let row = w / p.blocks;
  let i = row / p.heads;
  let h = row % p.heads;
  let d = p.head_dim;
  let cols = p.heads * d;
  var limit = p.tk;
  if (p.causal != 0u) { limit = min(p.tk, p.tk - p.tq + i + 1u); }
  let q_base = i * cols + h * d;
  for (var e = lid; e < d; e += 64u) {
    let qe = q[q_base + e];
    qu[e] = qe + bias_u[h * d + e];
    qv[e] = qe + bias_v[h * d + e];
  }
  workgroupBarrier();
  let j0 = b * p.block;
  let j = j0 + lid;
  var s = -3.0e38;
  if (lid < p.block && j < limit) {
    let ab = dots(j * cols + h * d, (p.tq - 1u - i + j) * cols + h * d, d);
    s = (ab.x + ab.y) * p.scale;
  }
  let m = reduce_max(s, lid);
  var z = 0.0;
  if (lid < p.block && j < limit) { z = exp(s - m); }
  probs[lid] = z;
  let l = reduce_sum(z, lid);
  let n = min(p.block, select(0u, limit - j0, limit > j0));
  let out = row * p.blocks + b;
  for (var e = lid; e < d; e += 64u) {
    var acc = 0.0;
    for (var t = 0u; t < n; t++) { acc += probs[t] * v[(j0 + t) * cols + h * d + e]; }
    if (p.blocks == 1u) {
      y[q_base + e] = acc / l;
    } else {
      part[out * (d + 2u) + 2u + e] = acc;
    }
  }
  if (p.blocks > 1u && lid == 0u) {
    part[out * (d + 2u)] = m;
    part[out * (d + 2u) + 1u] = l;
  }
}
)"

// (q_i + u) . k_j and (q_i + v) . p_r from the rows' first elements kb and pb, element by element.
constexpr const char* kAttentionRelPos = NN_REL_POS_ATTENTION(
    "@group(0) @binding(2) var<storage, read> k: array<f32>;\n"
    "@group(0) @binding(4) var<storage, read> pos: array<f32>;\n",
    R"(
fn dots(kb: u32, pb: u32, d: u32) -> vec2<f32> {
  var ac = 0.0;
  var bd = 0.0;
  for (var e = 0u; e < d; e++) {
    ac += qu[e] * k[kb + e];
    bd += qv[e] * pos[pb + e];
  }
  return vec2<f32>(ac, bd);
}
)");

// The same with k and p read 4 elements a load (D and so H * D multiples of 4: every row starts on a vec4).
constexpr const char* kAttentionRelPos4 = NN_REL_POS_ATTENTION(
    "@group(0) @binding(2) var<storage, read> k: array<vec4<f32>>;\n"
    "@group(0) @binding(4) var<storage, read> pos: array<vec4<f32>>;\n",
    R"(
fn dots(kb: u32, pb: u32, d: u32) -> vec2<f32> {
  var ac = vec4<f32>(0.0);
  var bd = vec4<f32>(0.0);
  for (var e = 0u; e < d; e += 4u) {
    let u = vec4<f32>(qu[e], qu[e + 1u], qu[e + 2u], qu[e + 3u]);
    let w = vec4<f32>(qv[e], qv[e + 1u], qv[e + 2u], qv[e + 3u]);
    ac += u * k[(kb + e) / 4u];
    bd += w * pos[(pb + e) / 4u];
  }
  return vec2<f32>(ac.x + ac.y + ac.z + ac.w, bd.x + bd.y + bd.z + bd.w);
}
)");
#undef NN_REL_POS_ATTENTION

uint32_t bits(float f) {
  return std::bit_cast<uint32_t>(f);
}

// Leading 1s of `small` do not count ([1, X] against [T, X] reads as [X]: the same memory).
bool is_suffix(const Shape& small, const Shape& big) {
  int lead = 0;
  while (lead < small.rank && small.dims[lead] == 1) ++lead;
  const int rank = small.rank - lead;
  if (rank > big.rank) return false;
  for (int i = 1; i <= rank; ++i)
    if (small[-i] != big[-i]) return false;
  return true;
}

}  // namespace

Tensor empty_on(const Tensor& x) {
  return x.ctx().empty({0});
}

Tensor unsupported(const Tensor& x, const char* op) {
  x.ctx().gpu()->fail(cat(op, " has no GPU kernel yet"));
  return empty_on(x);
}

Tensor binary(const Tensor& a, const Tensor& b, char op) {
  GpuRecorder& rec = *a.ctx().gpu();
  if (rec.failed()) return empty_on(a);
  if (a.dtype() != DType::F32 || b.dtype() != DType::F32 || !is_suffix(b.shape(), a.shape()) ||
      b.elements() == 0)
    return unsupported(a, "broadcast arithmetic other than [.., X] op [X] (f32)");
  Tensor out = a.ctx().empty(a.shape());
  const uint32_t code = op == '+' ? 0 : op == '-' ? 1 : op == '*' ? 2 : 3;
  const uint32_t params[] = {static_cast<uint32_t>(a.elements()), static_cast<uint32_t>(b.elements()), code,
                             0};
  rec.dispatch("nn_binary", kBinary, params, {&a, &b, &out}, static_cast<uint64_t>(a.elements()));
  return out;
}

Tensor activation(const Tensor& x, Act act, float alpha) {
  GpuRecorder& rec = *x.ctx().gpu();
  if (rec.failed()) return empty_on(x);
  if (x.dtype() != DType::F32) return unsupported(x, "activation of a non-f32 tensor");
  Tensor out = x.ctx().empty(x.shape());
  const uint32_t params[] = {static_cast<uint32_t>(x.elements()), static_cast<uint32_t>(act), bits(alpha), 0};
  rec.dispatch("nn_activation", kActivation, params, {&x, &out}, static_cast<uint64_t>(x.elements()));
  return out;
}

Tensor scale(const Tensor& x, float s, float bias) {
  GpuRecorder& rec = *x.ctx().gpu();
  if (rec.failed()) return empty_on(x);
  if (x.dtype() != DType::F32) return unsupported(x, "scale of a non-f32 tensor");
  Tensor out = x.ctx().empty(x.shape());
  const uint32_t params[] = {static_cast<uint32_t>(x.elements()), 100u, bits(s), bits(bias)};
  rec.dispatch("nn_activation", kActivation, params, {&x, &out}, static_cast<uint64_t>(x.elements()));
  return out;
}

Tensor pad_reflect(const Tensor& x, int axis, int64_t before, int64_t after) {
  GpuRecorder& rec = *x.ctx().gpu();
  if (rec.failed()) return empty_on(x);
  const int a = axis < 0 ? x.rank() + axis : axis;
  int64_t outer = 1, inner = 1;
  for (int i = 0; i < a; ++i) outer *= x.dim(i);
  for (int i = a + 1; i < x.rank(); ++i) inner *= x.dim(i);
  const int64_t n = x.dim(a), n_out = n + before + after;
  if (x.dtype() != DType::F32 || before >= n || after >= n)
    return unsupported(x, "pad_reflect of this tensor");
  Shape shape = x.shape();
  shape.dims[a] = n_out;
  Tensor out = x.ctx().empty(shape);
  const uint32_t params[] = {static_cast<uint32_t>(out.elements()),
                             static_cast<uint32_t>(n),
                             static_cast<uint32_t>(inner),
                             static_cast<uint32_t>(before),
                             static_cast<uint32_t>(n_out),
                             0,
                             0,
                             0};
  rec.dispatch("nn_pad_reflect", kPadReflect, params, {&x, &out}, static_cast<uint64_t>(out.elements()));
  (void)outer;
  return out;
}

Tensor slice(const Tensor& x, int axis, int64_t begin, int64_t end) {
  GpuRecorder& rec = *x.ctx().gpu();
  if (rec.failed()) return empty_on(x);
  const int a = axis < 0 ? x.rank() + axis : axis;
  int64_t inner = 1;
  for (int i = a + 1; i < x.rank(); ++i) inner *= x.dim(i);
  if (x.dtype() != DType::F32 || begin < 0 || end > x.dim(a) || begin > end)
    return unsupported(x, "slice of this tensor");
  Shape shape = x.shape();
  shape.dims[a] = end - begin;
  Tensor out = x.ctx().empty(shape);
  const uint32_t params[] = {static_cast<uint32_t>(out.elements()),
                             static_cast<uint32_t>(end - begin),
                             static_cast<uint32_t>(x.dim(a)),
                             static_cast<uint32_t>(inner),
                             static_cast<uint32_t>(begin),
                             0,
                             0,
                             0};
  rec.dispatch("nn_slice", kSlice, params, {&x, &out}, static_cast<uint64_t>(out.elements()));
  return out;
}

namespace {
// A groups = 1 convolution large enough for the tiled product (Moonshine's stem: 2 G multiply-adds for 10 s):
// the input windows unrolled, multiplied, the activation in the product's store; [T', Cout] as the product
// gives it. Undefined where the convolution is small or grouped.
Tensor conv1d_as_product(const Tensor& x, const Tensor& w, const Tensor& b, int stride, int padding,
                         int padding_end, int dilation, int groups, Act act) {
  const int64_t length = x.dim(1), cout = w.dim(0), in_g = w.dim(1), kernel = w.dim(2);
  const int64_t out_len = (length + padding + padding_end - dilation * (kernel - 1) - 1) / stride + 1;
  if (groups != 1 || cout * out_len * in_g * kernel < (int64_t{1} << 22)) return {};
  const int64_t cols = in_g * kernel;
  Tensor unrolled = x.ctx().empty({out_len, cols});
  const uint32_t p[] = {static_cast<uint32_t>(out_len * cols), static_cast<uint32_t>(cols),
                        static_cast<uint32_t>(kernel),         static_cast<uint32_t>(length),
                        static_cast<uint32_t>(stride),         static_cast<uint32_t>(padding),
                        static_cast<uint32_t>(dilation),       0};
  x.ctx().gpu()->dispatch("nn_im2col", kIm2col, p, {&x, &unrolled}, static_cast<uint64_t>(out_len * cols));
  return gpu_ops::linear_fused_f32(unrolled, w.reshape({cout, cols}), b, {.act = act});
}
}  // namespace

Tensor conv1d_fused_f32(const Tensor& x, const Tensor& w, const Tensor& b, const Conv1dOptions& o,
                        const Conv1dFusedF32& f) {
  GpuRecorder& rec = *x.ctx().gpu();
  if (rec.failed()) return empty_on(x);
  if (x.dtype() != DType::F32 || w.dtype() != DType::F32 || x.rank() != 2 || w.rank() != 3 ||
      (b.defined() && b.dtype() != DType::F32))
    return unsupported(x, "conv1d other than f32");
  const int padding_end = o.padding_end < 0 ? o.padding : o.padding_end;
  const Tensor product =
      conv1d_as_product(x, w, b, o.stride, o.padding, padding_end, o.dilation, o.groups, f.act);
  if (product.defined()) return f.time_major ? product : gpu_ops::transpose(product);
  Tensor y = gpu_ops::conv1d(x, w, b, o.stride, o.padding, padding_end, o.dilation, o.groups);
  if (f.act != Act::Identity) y = gpu_ops::activation(y, f.act, 0.0f);
  return f.time_major ? gpu_ops::transpose(y) : y;
}

Tensor conv1d(const Tensor& x, const Tensor& w, const Tensor& b, int stride, int padding, int padding_end,
              int dilation, int groups) {
  GpuRecorder& rec = *x.ctx().gpu();
  if (rec.failed()) return empty_on(x);
  if (x.dtype() != DType::F32 || w.dtype() != DType::F32 || x.rank() != 2 || w.rank() != 3 ||
      (b.defined() && b.dtype() != DType::F32))
    return unsupported(x, "conv1d other than f32");
  const int64_t length = x.dim(1), cout = w.dim(0), in_g = w.dim(1), kernel = w.dim(2);
  const int64_t out_len = (length + padding + padding_end - dilation * (kernel - 1) - 1) / stride + 1;
  const Tensor product =
      conv1d_as_product(x, w, b, stride, padding, padding_end, dilation, groups, Act::Identity);
  if (product.defined()) return gpu_ops::transpose(product);  // [T', Cout] -> [Cout, T']
  Tensor out = x.ctx().empty({cout, out_len});
  const uint32_t params[] = {static_cast<uint32_t>(cout),
                             static_cast<uint32_t>(out_len),
                             static_cast<uint32_t>(in_g),
                             static_cast<uint32_t>(kernel),
                             static_cast<uint32_t>(length),
                             static_cast<uint32_t>(stride),
                             static_cast<uint32_t>(padding),
                             static_cast<uint32_t>(dilation),
                             static_cast<uint32_t>(cout / groups),
                             b.defined() ? 1u : 0u,
                             0,
                             0};
  const Tensor& bias = b.defined() ? b : w;
  rec.dispatch("nn_conv1d", kConv1d, params, {&x, &w, &bias, &out}, static_cast<uint64_t>(cout * out_len));
  return out;
}

Tensor lstm(const Tensor& x, const LstmWeights& w, bool reverse, const Tensor& h0, const Tensor& c0,
            Tensor* h_out, Tensor* c_out) {
  GpuRecorder& rec = *x.ctx().gpu();
  if (rec.failed()) return empty_on(x);
  if (w.int8()) return lstm_int8(x, w, reverse, h0, c0, h_out, c_out);
  if (w.w_hh.dtype() != DType::F32 || (w.b.defined() && w.b.dtype() != DType::F32))
    return unsupported(x, "lstm other than f32");
  Context& ctx = x.ctx();
  const int64_t steps = x.dim(0), hidden = w.w_hh.dim(1);
  const Tensor gx = gpu_ops::linear(x, w.w_ih, {});  // [T, 4H]: the input projection of every frame at once
  Tensor h = h0.defined() ? h0 : ctx.zeros({hidden});
  Tensor c =
      c0.defined() ? gpu_ops::scale(c0, 1.0f, 0.0f) : ctx.zeros({hidden});  // a copy: c is updated in place
  Tensor y = ctx.empty({steps, hidden});
  const Tensor& bias = w.b.defined() ? w.b : w.w_hh;
  for (int64_t s = 0; s < steps; ++s) {
    const int64_t t = reverse ? steps - 1 - s : s;
    Tensor next = ctx.empty({hidden});
    const uint32_t params[] = {static_cast<uint32_t>(hidden), static_cast<uint32_t>(t),
                               w.b.defined() ? 1u : 0u, 0};
    rec.dispatch("nn_lstm_step", kLstmStep, params, {&gx, &w.w_hh, &bias, &h, &next, &c, &y},
                 static_cast<uint64_t>(hidden));
    h = next;
  }
  if (h_out) *h_out = h;
  if (c_out) *c_out = c;
  return y;
}

Tensor rows_op(const Tensor& x, uint32_t op, const Tensor& gamma, const Tensor& beta, float eps) {
  GpuRecorder& rec = *x.ctx().gpu();
  if (rec.failed()) return empty_on(x);
  if (x.dtype() != DType::F32 || (gamma.defined() && gamma.dtype() != DType::F32) ||
      (beta.defined() && beta.dtype() != DType::F32) || x.elements() == 0)
    return unsupported(x, op == 0 ? "softmax of this tensor" : "layer_norm of this tensor");
  const int64_t n = x.dim(-1), rows = x.elements() / n;
  Tensor out = x.ctx().empty(x.shape());
  const uint32_t params[] = {static_cast<uint32_t>(rows), static_cast<uint32_t>(n), op, bits(eps),
                             gamma.defined() ? 1u : 0u,   beta.defined() ? 1u : 0u, 0,  0};
  const Tensor& g = gamma.defined() ? gamma : x;  // bindings must exist: x stands in, unread
  const Tensor& b = beta.defined() ? beta : x;
  rec.dispatch("nn_rows", kRows, params, {&x, &g, &b, &out}, static_cast<uint64_t>(rows) * 64);
  return out;
}

}  // namespace sotto::nn::gpu_ops

namespace sotto::nn::gpu_ops {

namespace {

uint32_t u32(int64_t v) {
  return static_cast<uint32_t>(v);
}

// Threads for `rows` workgroups of 64 (the workgroup kernels' rows).
uint64_t workgroups(int64_t rows) {
  return static_cast<uint64_t>(rows) * 64;
}

bool four_bytes(DType t) {
  return t == DType::F32 || t == DType::I32;
}

}  // namespace

Tensor group_norm(const Tensor& x, int groups, const Tensor& gamma, const Tensor& beta, float eps) {
  GpuRecorder& rec = *x.ctx().gpu();
  if (rec.failed()) return empty_on(x);
  if (x.dtype() != DType::F32 || x.rank() < 1 || groups < 1 || x.dim(0) % groups != 0 ||
      (gamma.defined() && gamma.dtype() != DType::F32) || (beta.defined() && beta.dtype() != DType::F32))
    return unsupported(x, "group_norm of this tensor");
  const int64_t channels = x.dim(0), length = x.elements() / channels, per_group = channels / groups;
  Tensor out = x.ctx().empty(x.shape());
  // Chunks of ~4,096 values (64 per thread), at most 256 per group: the partial sums a pass reduces stay short.
  const int64_t per = per_group * length, chunks = std::clamp<int64_t>(per / 4096, 1, 256);
  Tensor partial = x.ctx().empty({2 * groups * chunks});
  const Tensor& g = gamma.defined() ? gamma : x;  // bindings must exist: x stands in, unread
  const Tensor& b = beta.defined() ? beta : x;
  for (uint32_t pass = 0; pass < 3; ++pass) {
    const uint32_t params[] = {u32(groups),
                               u32(per),
                               u32(length),
                               u32(per_group),
                               bits(eps),
                               gamma.defined() ? 1u : 0u,
                               beta.defined() ? 1u : 0u,
                               u32(chunks),
                               pass,
                               0,
                               0,
                               0};
    rec.dispatch("nn_group_norm", kGroupNorm, params, {&x, &g, &b, &partial, &out},
                 workgroups(groups * chunks));
  }
  return out;
}

Tensor transpose(const Tensor& x) {
  GpuRecorder& rec = *x.ctx().gpu();
  if (rec.failed()) return empty_on(x);
  if (!four_bytes(x.dtype()) || x.rank() != 2) return unsupported(x, "transpose of this tensor");
  Tensor out = x.ctx().empty({x.dim(1), x.dim(0)}, x.dtype());
  const uint32_t params[] = {u32(x.dim(0)), u32(x.dim(1)), 0, 0};
  rec.dispatch("nn_transpose", kTranspose, params, {&x, &out}, static_cast<uint64_t>(x.elements()));
  return out;
}

Tensor concat(std::span<const Tensor> parts, int axis) {
  const Tensor& first = parts[0];
  GpuRecorder& rec = *first.ctx().gpu();
  if (rec.failed()) return empty_on(first);
  const int a = axis < 0 ? first.rank() + axis : axis;
  Shape shape = first.shape();
  shape.dims[a] = 0;
  for (const Tensor& p : parts) {
    if (!on_gpu(p) || p.rank() != first.rank() || p.dtype() != first.dtype() || !four_bytes(p.dtype()))
      return unsupported(first, "concat of these tensors");
    for (int i = 0; i < p.rank(); ++i)
      if (i != a && p.dim(i) != first.dim(i)) return unsupported(first, "concat of these tensors");
    shape.dims[a] += p.dim(a);
  }
  int64_t inner = 1;
  for (int i = a + 1; i < first.rank(); ++i) inner *= first.dim(i);
  Tensor out = first.ctx().empty(shape, first.dtype());
  if (parts.size() == 2) {
    const uint32_t params[] = {u32(out.elements()), u32(parts[0].dim(a)), u32(parts[1].dim(a)), u32(inner)};
    rec.dispatch("nn_concat2", kConcat2, params, {&parts[0], &parts[1], &out},
                 static_cast<uint64_t>(out.elements()));
    return out;
  }
  int64_t done = 0;
  for (const Tensor& p : parts) {
    const uint32_t params[] = {
        u32(p.elements()), u32(p.dim(a)), u32(shape.dims[a]), u32(inner), u32(done), 0, 0, 0};
    rec.dispatch("nn_concat_part", kConcatPart, params, {&p, &out}, static_cast<uint64_t>(p.elements()));
    done += p.dim(a);
  }
  return out;
}

Tensor rope(const Tensor& x, int n_heads, int rotary_dim, float base, int64_t position0, bool interleaved) {
  GpuRecorder& rec = *x.ctx().gpu();
  if (rec.failed()) return empty_on(x);
  if (x.dtype() != DType::F32 || x.rank() != 2 || n_heads < 1 || x.dim(1) % n_heads != 0 || rotary_dim < 2 ||
      rotary_dim % 2 != 0 || rotary_dim > x.dim(1) / n_heads || rotary_dim > 128 || position0 < 0 ||
      position0 + x.dim(0) > (int64_t{1} << 31))
    return unsupported(x, "rope of this tensor");
  Tensor out = x.ctx().empty(x.shape());
  uint32_t params[8 + 64] = {u32(x.elements()), u32(x.dim(1)),  u32(x.dim(1) / n_heads),
                             u32(rotary_dim),   u32(position0), interleaved ? 1u : 0u};
  rope_turns(base, rotary_dim, params + 8);
  rec.dispatch("nn_rope", kRope, params, {&x, &out}, static_cast<uint64_t>(x.elements()));
  return out;
}

// The uniform block of the attention kernels (kAttention, kAttention4 and kAttentionCombine read the same).
static std::array<uint32_t, 12> attention_params(int64_t tq, int64_t tk, int64_t heads, int64_t kv_heads,
                                                 int64_t head_dim, bool causal, float scale, int64_t block,
                                                 int64_t blocks) {
  return {u32(tq),
          u32(tk),
          u32(heads),
          u32(kv_heads),
          u32(head_dim),
          causal ? 1u : 0u,
          bits(scale),
          u32(block),
          u32(blocks),
          0,
          0,
          0};
}

Tensor attention(const Tensor& q, const Tensor& k, const Tensor& v, const AttentionOptions& o) {
  GpuRecorder& rec = *q.ctx().gpu();
  if (rec.failed()) return empty_on(q);
  const int64_t heads = o.n_heads, kv_heads = o.n_kv_heads > 0 ? o.n_kv_heads : o.n_heads;
  if (q.dtype() != DType::F32 || k.dtype() != DType::F32 || v.dtype() != DType::F32 || !on_gpu(k) ||
      !on_gpu(v) || q.rank() != 2 || k.rank() != 2 || v.rank() != 2 || heads < 1 || q.dim(1) % heads != 0 ||
      heads % kv_heads != 0 || k.dim(1) != kv_heads * (q.dim(1) / heads) || v.shape() != k.shape() ||
      q.dim(1) / heads > 256 || (o.causal && k.dim(0) < q.dim(0)) || k.dim(0) < 1)
    return unsupported(q, "attention of these tensors");
  if (attention_tiled_fits(q, k, v, o)) return attention_tiled(q, k, v, o);
  const int64_t tq = q.dim(0), tk = k.dim(0), head_dim = q.dim(1) / heads;
  const float scale = o.scale != 0.0f ? o.scale : 1.0f / std::sqrt(static_cast<float>(head_dim));
  // Blocks of 64 keys, halved down to 16 while that leaves fewer than ~256 workgroups (a decoder step's one
  // query: more, smaller blocks keep more of the GPU's cores busy), except that up to 64 keys stay one block:
  // the combine dispatch it saves costs more (~10 us on an H200) than one workgroup scoring 64 keys.
  // The vec4 kernel keeps blocks of 64: its probability-weighted sum splits a block over 4 thread groups, and
  // fewer blocks make the combine dispatch shorter (it loops over them).
  const bool wide = head_dim % 4 == 0 && head_dim <= 64;
  int64_t block = 64;
  while (!wide && block > 16 && tk > 64 && tq * heads * ((tk + block - 1) / block) < 256) block /= 2;
  const int64_t blocks = (tk + block - 1) / block;
  Tensor part = q.ctx().empty({blocks > 1 ? tq * heads * blocks * (head_dim + 2) : 1});
  Tensor out = q.ctx().empty(q.shape());
  const std::array<uint32_t, 12> params =
      attention_params(tq, tk, heads, kv_heads, head_dim, o.causal, scale, block, blocks);
  if (head_dim % 4 == 0 && head_dim <= 64 && (kv_heads * head_dim) % 4 == 0 && vec4_view(q) && vec4_view(k) &&
      vec4_view(v))
    rec.dispatch("nn_attention4", kAttention4, params, {&q, &k, &v, &part, &out},
                 workgroups(tq * heads * blocks));
  else
    rec.dispatch("nn_attention", kAttention, params, {&q, &k, &v, &part, &out},
                 workgroups(tq * heads * blocks));
  if (blocks > 1)
    rec.dispatch("nn_attention_combine", kAttentionCombine, params, {&part, &out}, workgroups(tq * heads));
  return out;
}

Tensor linear_int8_affine(const Tensor& x, const Tensor& w, float scale, float offset, const Tensor& b) {
  GpuRecorder& rec = *x.ctx().gpu();
  if (rec.failed()) return empty_on(x);
  if (x.dtype() != DType::F32 || w.dtype() != DType::I8 || !on_gpu(w) || w.rank() != 2 ||
      w.dim(1) != x.dim(-1) || (b.defined() && (b.dtype() != DType::F32 || b.elements() != w.dim(0))))
    return unsupported(x, "linear_int8_affine of these tensors");
  const int64_t k = x.dim(-1), n = w.dim(0), m = x.elements() / k;
  Shape shape = x.shape();
  shape[-1] = n;
  Tensor out = x.ctx().empty(shape);
  const uint32_t params[] = {u32(m), u32(n), u32(k), b.defined() ? 1u : 0u, bits(scale), bits(offset), 0, 0};
  const Tensor& bias = b.defined() ? b : x;
  rec.dispatch("nn_linear_int8", kLinearInt8, params, {&x, &w, &bias, &out}, workgroups(m * n));
  return out;
}

Tensor embedding(const Tensor& table, const Tensor& ids) {
  GpuRecorder& rec = *table.ctx().gpu();
  if (rec.failed()) return empty_on(table);
  const DType t = table.dtype();
  if ((t != DType::F32 && t != DType::I8 && t != DType::U8) || table.rank() != 2 || !on_gpu(ids) ||
      (ids.dtype() != DType::I32 && ids.dtype() != DType::I64))
    return unsupported(table, "embedding of these tensors");
  const int64_t n = ids.elements(), d = table.dim(1);
  Tensor out = table.ctx().empty({n, d});
  const uint32_t params[] = {u32(n * d),
                             u32(d),
                             u32(table.dim(0)),
                             t == DType::F32  ? 0u
                             : t == DType::I8 ? 1u
                                              : 2u,
                             bits(table.quant().scale),
                             static_cast<uint32_t>(table.quant().zero_point),
                             ids.dtype() == DType::I64 ? 2u : 1u,
                             0};
  rec.dispatch("nn_embedding", kEmbedding, params, {&table, &ids, &out}, static_cast<uint64_t>(n * d));
  return out;
}

Tensor argmax(const Tensor& x) {
  GpuRecorder& rec = *x.ctx().gpu();
  if (rec.failed()) return empty_on(x);
  if (x.dtype() != DType::F32 || x.rank() < 1 || x.elements() == 0)
    return unsupported(x, "argmax of this tensor");
  const int64_t n = x.dim(-1), rows = x.elements() / n;
  Shape shape;
  for (int i = 0; i + 1 < x.rank(); ++i) shape.dims[shape.rank++] = x.dim(i);
  Tensor out = x.ctx().empty(shape, DType::I32);
  if (n > 4096) {
    const int64_t chunks = (n + 1023) / 1024;
    Tensor part = x.ctx().empty({rows * chunks * 2}, DType::I32);
    for (uint32_t stage = 0; stage < 2; ++stage) {
      const uint32_t params[] = {u32(rows), u32(n), u32(chunks), stage};
      rec.dispatch("nn_argmax_chunks", kArgmaxChunks, params, {&x, &part, &out},
                   workgroups(stage == 0 ? rows * chunks : rows));
    }
    return out;
  }
  const uint32_t params[] = {u32(rows), u32(n), 0, 0};
  rec.dispatch("nn_argmax", kArgmax, params, {&x, &out}, workgroups(rows));
  return out;
}

Tensor glu(const Tensor& x, int axis) {
  GpuRecorder& rec = *x.ctx().gpu();
  if (rec.failed()) return empty_on(x);
  const int a = axis < 0 ? x.rank() + axis : axis;
  if (x.dtype() != DType::F32 || a < 0 || a >= x.rank() || x.dim(a) % 2 != 0)
    return unsupported(x, "glu of this tensor");
  int64_t inner = 1;
  for (int i = a + 1; i < x.rank(); ++i) inner *= x.dim(i);
  Shape shape = x.shape();
  shape.dims[a] /= 2;
  Tensor out = x.ctx().empty(shape);
  const uint32_t params[] = {u32(out.elements()), u32(shape.dims[a]), u32(inner), 0};
  rec.dispatch("nn_glu", kGlu, params, {&x, &out}, static_cast<uint64_t>(out.elements()));
  return out;
}

Tensor permute(const Tensor& x, std::span<const int> order) {
  GpuRecorder& rec = *x.ctx().gpu();
  if (rec.failed()) return empty_on(x);
  if (!four_bytes(x.dtype()) || static_cast<int>(order.size()) != x.rank())
    return unsupported(x, "permute of this tensor");
  int64_t in_strides[Shape::kMaxRank] = {};
  int64_t stride = 1;
  for (int i = x.rank() - 1; i >= 0; --i) {
    in_strides[i] = stride;
    stride *= x.dim(i);
  }
  Shape shape;
  shape.rank = x.rank();
  uint32_t params[4 + 16] = {0, u32(x.rank()), 0, 0};
  for (int i = 0; i < x.rank(); ++i) {
    shape.dims[i] = x.dim(order[static_cast<size_t>(i)]);
    params[4 + i] = u32(shape.dims[i]);
    params[12 + i] = u32(in_strides[order[static_cast<size_t>(i)]]);
  }
  Tensor out = x.ctx().empty(shape, x.dtype());
  params[0] = u32(out.elements());
  rec.dispatch("nn_permute", kPermute, params, {&x, &out}, static_cast<uint64_t>(out.elements()));
  return out;
}

Tensor conv2d(const Tensor& x, const Tensor& w, const Tensor& b, const Conv2dOptions& o) {
  GpuRecorder& rec = *x.ctx().gpu();
  if (rec.failed()) return empty_on(x);
  if (x.dtype() != DType::F32 || w.dtype() != DType::F32 || !on_gpu(w) || x.rank() != 3 || w.rank() != 4 ||
      o.groups < 1 || w.dim(0) % o.groups != 0 || w.dim(1) * o.groups != x.dim(0) ||
      (b.defined() && b.dtype() != DType::F32))
    return unsupported(x, "conv2d of these tensors");
  const int64_t h = x.dim(1), wd = x.dim(2), cout = w.dim(0), in_g = w.dim(1), kh = w.dim(2), kw = w.dim(3);
  const int64_t oh = (h + 2 * o.pad_h - o.dilation_h * (kh - 1) - 1) / o.stride_h + 1;
  const int64_t ow = (wd + 2 * o.pad_w - o.dilation_w * (kw - 1) - 1) / o.stride_w + 1;
  if (oh < 1 || ow < 1) return unsupported(x, "conv2d with no output");
  // A pointwise conv is a product, W [Cout, Cin] x [Cin, H W]: as the tiled linear between two transposes
  // (Parakeet's subsampling, 256 -> 256 channels over ~5,000 positions) instead of a thread per output looping
  // over the input channels.
  if (kh == 1 && kw == 1 && o.groups == 1 && o.stride_h == 1 && o.stride_w == 1 && o.pad_h == 0 &&
      o.pad_w == 0)
    return gpu_ops::transpose(
               gpu_ops::linear(gpu_ops::transpose(x.reshape({in_g, h * wd})), w.reshape({cout, in_g}), b))
        .reshape({cout, h, wd});
  Tensor out = x.ctx().empty({cout, oh, ow});
  const uint32_t params[] = {u32(cout),
                             u32(oh),
                             u32(ow),
                             u32(in_g),
                             u32(h),
                             u32(wd),
                             u32(kh),
                             u32(kw),
                             u32(o.stride_h),
                             u32(o.stride_w),
                             u32(o.pad_h),
                             u32(o.pad_w),
                             u32(o.dilation_h),
                             u32(o.dilation_w),
                             u32(cout / o.groups),
                             b.defined() ? 1u : 0u};
  const Tensor& bias = b.defined() ? b : w;
  rec.dispatch("nn_conv2d", kConv2d, params, {&x, &w, &bias, &out}, static_cast<uint64_t>(out.elements()));
  return out;
}

Tensor attention_rel_pos(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& p,
                         const Tensor& pos_bias_u, const Tensor& pos_bias_v, const AttentionOptions& o) {
  GpuRecorder& rec = *q.ctx().gpu();
  if (rec.failed()) return empty_on(q);
  const int64_t heads = o.n_heads;
  const Tensor* all[] = {&q, &k, &v, &p, &pos_bias_u, &pos_bias_v};
  for (const Tensor* t : all)
    if (!on_gpu(*t) || t->dtype() != DType::F32) return unsupported(q, "attention_rel_pos of these tensors");
  if (q.rank() != 2 || heads < 1 || q.dim(1) % heads != 0 || k.shape() != q.shape() ||
      v.shape() != q.shape() || (o.n_kv_heads != 0 && o.n_kv_heads != heads) || p.rank() != 2 ||
      p.dim(0) != 2 * q.dim(0) - 1 || p.dim(1) != q.dim(1) || pos_bias_u.elements() != q.dim(1) ||
      pos_bias_v.elements() != q.dim(1) || q.dim(1) / heads > 256 || q.dim(0) < 1)
    return unsupported(q, "attention_rel_pos of these tensors");
  const int64_t t = q.dim(0), head_dim = q.dim(1) / heads;
  const float scale = o.scale != 0.0f ? o.scale : 1.0f / std::sqrt(static_cast<float>(head_dim));
  int64_t block = 64;
  while (block > 16 && t * heads * ((t + block - 1) / block) < 256) block /= 2;
  const int64_t blocks = (t + block - 1) / block;
  Tensor part = q.ctx().empty({blocks > 1 ? t * heads * blocks * (head_dim + 2) : 1});
  Tensor out = q.ctx().empty(q.shape());
  const uint32_t params[] = {
      u32(t),      u32(t), u32(heads), u32(heads), u32(head_dim), o.causal ? 1u : 0u, bits(scale), u32(block),
      u32(blocks), 0,      0,          0};
  const bool by4 = head_dim % 4 == 0;
  rec.dispatch(by4 ? "nn_attention_rel_pos4" : "nn_attention_rel_pos",
               by4 ? kAttentionRelPos4 : kAttentionRelPos, params,
               {&q, &k, &v, &p, &pos_bias_u, &pos_bias_v, &part, &out}, workgroups(t * heads * blocks));
  if (blocks > 1)
    rec.dispatch("nn_attention_combine", kAttentionCombine, params, {&part, &out}, workgroups(t * heads));
  return out;
}

// ---------------------------------------------------------------- attention_partials (nn/fused.h)
// attention's vec4 kernel with its key blocks left for the caller to combine: a Moonshine decoder step's cross
// o product combines them as it reads x (gpu_fused.cpp), which saves the combine dispatch (8 a step).
Tensor attention_partials(const Tensor& q, const Tensor& k, const Tensor& v, const AttentionOptions& o,
                          int64_t* blocks_out) {
  *blocks_out = 0;
  const int64_t heads = o.n_heads, kv_heads = o.n_kv_heads > 0 ? o.n_kv_heads : o.n_heads;
  const int64_t head_dim = heads > 0 && q.rank() == 2 ? q.dim(1) / heads : 0;
  const bool wide = head_dim > 0 && head_dim % 4 == 0 && head_dim <= 64 && (kv_heads * head_dim) % 4 == 0;
  if (q.ctx().gpu()->failed() || !wide || k.rank() != 2 || k.dim(0) <= 64 || !on_gpu(k) || !on_gpu(v) ||
      !vec4_view(q) || !vec4_view(k) || !vec4_view(v))
    return gpu_ops::attention(q, k, v, o);  // one block, or another kernel: combined here
  if (q.dtype() != DType::F32 || k.dtype() != DType::F32 || v.dtype() != DType::F32 ||
      q.dim(1) % heads != 0 || heads % kv_heads != 0 || k.dim(1) != kv_heads * head_dim ||
      v.shape() != k.shape() || (o.causal && k.dim(0) < q.dim(0)))
    return unsupported(q, "attention_partials of these tensors");
  const int64_t tq = q.dim(0), tk = k.dim(0), block = 64, blocks = (tk + block - 1) / block;
  const float scale = o.scale != 0.0f ? o.scale : 1.0f / std::sqrt(static_cast<float>(head_dim));
  Tensor part = q.ctx().empty({tq * heads * blocks * (head_dim + 2)});
  const std::array<uint32_t, 12> params =
      attention_params(tq, tk, heads, kv_heads, head_dim, o.causal, scale, block, blocks);
  const Tensor unused = q.ctx().empty({4});  // y: written only with one block
  q.ctx().gpu()->dispatch("nn_attention4", kAttention4, params, {&q, &k, &v, &part, &unused},
                          workgroups(tq * heads * blocks));
  *blocks_out = blocks;
  return part;
}

}  // namespace sotto::nn::gpu_ops
