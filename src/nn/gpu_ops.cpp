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

constexpr const char* kIndex = R"(
fn index(g: vec3<u32>) -> u32 { return g.x + g.y * 65535u * 64u; }
)";

const std::string kBinary = std::string(kIndex) + R"(
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
const std::string kActivation = std::string(kIndex) + R"(
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

const std::string kLinear = std::string(kIndex) + R"(
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

}  // namespace sotto::nn::gpu_ops
