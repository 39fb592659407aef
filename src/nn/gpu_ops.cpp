// WGSL kernels of the ops that run on the GPU so far. Each kernel: workgroups of 64 threads, one output element
// per thread (index = global x + global y * 65535 * 64), inputs read once; element-wise kernels are
// memory-bound (8-12 bytes per element), linear does K multiply-adds per output reading its x row and w row
// (no tiling yet: these are the checked reference-grade kernels, not the tuned ones).
#include "nn/gpu_ops.h"

#include <bit>
#include <cstring>

#include "nn/gpu_recorder.h"

namespace sotto::nn::gpu_ops {

namespace {

// Plain literals (no std::string globals: the wasm build has no atexit for their destructors).
#define NN_WGSL_INDEX "fn index(g: vec3<u32>) -> u32 { return g.x + g.y * 65535u * 64u; }\n"

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

constexpr const char* kLinear = NN_WGSL_INDEX R"(
struct P { m: u32, n: u32, k: u32, has_bias: u32 };
@group(0) @binding(0) var<uniform> p: P;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read> w: array<f32>;
@group(0) @binding(3) var<storage, read> bias: array<f32>;
@group(0) @binding(4) var<storage, read_write> y: array<f32>;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) g: vec3<u32>) {
  let i = index(g);
  if (i >= p.m * p.n) { return; }
  let r = i / p.n;
  let c = i % p.n;
  var s = 0.0;
  for (var t = 0u; t < p.k; t++) { s += x[r * p.k + t] * w[c * p.k + t]; }
  if (p.has_bias != 0u) { s += bias[c]; }
  y[i] = s;
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

// Softmax and layer norm over the last axis: one thread per row, three passes over it (max / mean, sum /
// variance, write). Rows are short in the networks here (attention scores, channels); no workgroup reduction yet.
constexpr const char* kRows = NN_WGSL_INDEX R"(
struct P { rows: u32, n: u32, op: u32, eps: f32, has_gamma: u32, has_beta: u32, pad0: u32, pad1: u32 };
@group(0) @binding(0) var<uniform> p: P;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read> gamma: array<f32>;
@group(0) @binding(3) var<storage, read> beta: array<f32>;
@group(0) @binding(4) var<storage, read_write> y: array<f32>;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) g: vec3<u32>) {
  let r = index(g);
  if (r >= p.rows) { return; }
  let base = r * p.n;
  if (p.op == 0u) {
    var m = x[base];
    for (var i = 1u; i < p.n; i++) { m = max(m, x[base + i]); }
    var s = 0.0;
    for (var i = 0u; i < p.n; i++) { s += exp(x[base + i] - m); }
    for (var i = 0u; i < p.n; i++) { y[base + i] = exp(x[base + i] - m) / s; }
    return;
  }
  var mean = 0.0;
  for (var i = 0u; i < p.n; i++) { mean += x[base + i]; }
  mean /= f32(p.n);
  var v = 0.0;
  for (var i = 0u; i < p.n; i++) { let d = x[base + i] - mean; v += d * d; }
  let inv = 1.0 / sqrt(v / f32(p.n) + p.eps);
  for (var i = 0u; i < p.n; i++) {
    var o = (x[base + i] - mean) * inv;
    if (p.has_gamma != 0u) { o *= gamma[i]; }
    if (p.has_beta != 0u) { o += beta[i]; }
    y[base + i] = o;
  }
}
)";

uint32_t bits(float f) {
  return std::bit_cast<uint32_t>(f);
}

bool is_suffix(const Shape& small, const Shape& big) {
  if (small.rank > big.rank) return false;
  for (int i = 1; i <= small.rank; ++i)
    if (small[-i] != big[-i]) return false;
  return true;
}

// An empty GPU tensor: what a failed recorder hands on (every later op returns at once).
Tensor empty_on(const Tensor& x) {
  return x.ctx().empty({0});
}

}  // namespace

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

Tensor linear(const Tensor& x, const Tensor& w, const Tensor& b) {
  GpuRecorder& rec = *x.ctx().gpu();
  if (rec.failed()) return empty_on(x);
  if (x.dtype() != DType::F32 || w.dtype() != DType::F32 || w.rank() != 2 || w.dim(1) != x.dim(-1) ||
      (b.defined() && b.dtype() != DType::F32))
    return unsupported(x, "linear other than f32 x . f32 W^T");
  const int64_t k = x.dim(-1), n = w.dim(0), m = x.elements() / k;
  Shape shape = x.shape();
  shape[-1] = n;
  Tensor out = x.ctx().empty(shape);
  const uint32_t params[] = {static_cast<uint32_t>(m), static_cast<uint32_t>(n), static_cast<uint32_t>(k),
                             b.defined() ? 1u : 0u};
  const Tensor& bias = b.defined() ? b : w;  // a binding must exist: w stands in, unread
  rec.dispatch("nn_linear", kLinear, params, {&x, &w, &bias, &out}, static_cast<uint64_t>(m * n));
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

Tensor conv1d(const Tensor& x, const Tensor& w, const Tensor& b, int stride, int padding, int padding_end,
              int dilation, int groups) {
  GpuRecorder& rec = *x.ctx().gpu();
  if (rec.failed()) return empty_on(x);
  if (x.dtype() != DType::F32 || w.dtype() != DType::F32 || x.rank() != 2 || w.rank() != 3 ||
      (b.defined() && b.dtype() != DType::F32))
    return unsupported(x, "conv1d other than f32");
  const int64_t length = x.dim(1), cout = w.dim(0), in_g = w.dim(1), kernel = w.dim(2);
  const int64_t out_len = (length + padding + padding_end - dilation * (kernel - 1) - 1) / stride + 1;
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
  if (w.int8() || w.w_hh.dtype() != DType::F32 || (w.b.defined() && w.b.dtype() != DType::F32))
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
  rec.dispatch("nn_rows", kRows, params, {&x, &g, &b, &out}, static_cast<uint64_t>(rows));
  return out;
}

}  // namespace sotto::nn::gpu_ops
