// GPU kernels of the ops Kokoro adds to the op layer: snake, AdaIN / instance norm (group norm's kernel), the
// ONNX export's atan2, resize, repeat by durations, transposed conv1d, batched f32 matmul, and ONNX Runtime's
// dynamic int8 (DynamicQuantizeLinear to uint8, then MatMulInteger / ConvInteger accumulation). Plain kernels,
// one output per thread (64 per workgroup), checked against nn/ref.h; where the time goes (the int8 products, the
// LSTM, AdaIN, the quantization) tuned kernels beside them, each tested against the plain one.
//
// Dynamic int8 on the GPU: the range is two workgroup reductions (chunks, then one workgroup over the chunks'
// partials) writing scale and zero point into a 4-float tensor that later kernels read: no read back to the host.
// The arithmetic is the CPU's, step for step: scale = (max - min) / 255, zero point and q by WGSL's round (half to
// even), integer sums in i32 (|sum| < 255 * 255 * K: K up to 33,000 fits), then f32(sum) * (x_scale * w_scale).
// Every division there is div_rn (correctly rounded, in integer arithmetic): WGSL's own division may be 2.5 ulp
// off, and one ulp at a rounding boundary is a whole quantization step.
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdlib>
#include <iterator>
#include <limits>
#include <string>
#include <vector>

#include "nn/gpu_ops.h"
#include "nn/gpu_recorder.h"
#include "nn/gpu_wgsl.h"
#include "nn/resize_source.h"

namespace sotto::nn::gpu_ops {

namespace {

// DynamicQuantizeLinear's range on the GPU: chunks of ~4,096 values, at most 1,024 (every quantizing workgroup
// reads 2 floats a chunk), each reduced by one workgroup; x of at most kQuantizeReadsX values is read whole by
// every quantizing workgroup instead (the style vectors of the ~70 AdaINs).
constexpr int64_t kQuantizeReadsX = 1024;
int64_t quant_range_chunks(int64_t n) {
  return std::clamp<int64_t>(n / 4096, 1, 1024);
}

// Tensor::derived() kinds of the weight layouts these kernels make once per weight (the CPU ops' are below 20).
enum DerivedKind : uint32_t {
  kDerivedConvIntegerWords = 24,       // kConvIntegerPack's words of a ConvInteger weight
  kDerivedConvTransposeTapMajor = 40,  // kConvTransposePack's [Cin][K][Cout rounded up to 4]
};

uint32_t u32(int64_t v) {
  return static_cast<uint32_t>(v);
}

uint32_t fbits(float f) {
  return std::bit_cast<uint32_t>(f);
}

Tensor none_on(const Tensor& x) {
  return x.ctx().empty({0});
}

// y = x + sin(alpha_c x)^2 / alpha_c over x [C, T].
constexpr const char* kSnake = NN_WGSL_INDEX R"(
struct P { n: u32, length: u32, pad0: u32, pad1: u32 };
@group(0) @binding(0) var<uniform> p: P;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read> alpha: array<f32>;
@group(0) @binding(3) var<storage, read_write> y: array<f32>;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) g: vec3<u32>) {
  let i = index(g);
  if (i >= p.n) { return; }
  let a = alpha[i / p.length];
  let v = x[i];
  let s = sin(a * v);
  y[i] = v + s * s * (1.0 / a);
}
)";

// AdaIN, (1 + gamma) instance_norm(x) + beta over x [C, T], for T < 8,192 (the decoder's and the generator's first
// stage: group_norm takes one chunk a row there): one workgroup per channel runs group_norm's three passes (sum,
// squared deviations, normalize) in one dispatch with the same float sums in the same order, and adds 1 to gamma
// as the scale op would: group_norm(x, C, 1 + gamma, beta)'s outputs, in one dispatch instead of four (bit for bit
// where the driver contracts multiply-adds alike in both; NVIDIA's differs by an ulp on some elements).
constexpr const char* kAdaInRows = NN_WGSL_REDUCE R"(
struct P { channels: u32, length: u32, eps: f32, pad0: u32 };
@group(0) @binding(0) var<uniform> p: P;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read> gamma: array<f32>;
@group(0) @binding(3) var<storage, read> beta: array<f32>;
@group(0) @binding(4) var<storage, read_write> y: array<f32>;
@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let c = row_of(wid);
  if (c >= p.channels) { return; }
  let base = c * p.length;
  var s = 0.0;
  for (var i = lid; i < p.length; i += 64u) { s += x[base + i]; }
  let mean = reduce_sum(s, lid) / f32(p.length);
  var v = 0.0;
  for (var i = lid; i < p.length; i += 64u) { let d = x[base + i] - mean; v += d * d; }
  let inv = 1.0 / sqrt(reduce_sum(v, lid) / f32(p.length) + p.eps);
  let g = gamma[c] * 1.0 + 1.0;
  for (var i = lid; i < p.length; i += 64u) {
    var o = (x[base + i] - mean) * inv;
    o *= g;
    o += beta[c];
    y[base + i] = o;
  }
}
)";

// The export's Atan + Where: atan(y / x), +- float(pi) where x < 0.
constexpr const char* kAtan2 = NN_WGSL_INDEX R"(
struct P { n: u32, pad0: u32, pad1: u32, pad2: u32 };
@group(0) @binding(0) var<uniform> p: P;
@group(0) @binding(1) var<storage, read> ys: array<f32>;
@group(0) @binding(2) var<storage, read> xs: array<f32>;
@group(0) @binding(3) var<storage, read_write> o: array<f32>;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) g: vec3<u32>) {
  let i = index(g);
  if (i >= p.n) { return; }
  let yv = ys[i];
  let xv = xs[i];
  let a = atan(yv / xv);
  var r = a;
  if (xv < 0.0) { r = select(a - 3.14159274101257324, a + 3.14159274101257324, yv > 0.0); }
  o[i] = r;
}
)";

// Along the last axis from a table of (i0, i1, w1) per output position (made on the host as the reference
// makes it): y = x[i0] + (x[i1] - x[i0]) w1.
constexpr const char* kResize = NN_WGSL_INDEX R"(
struct P { n: u32, in_len: u32, out_len: u32, pad0: u32 };
@group(0) @binding(0) var<uniform> p: P;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read> table: array<f32>;
@group(0) @binding(3) var<storage, read_write> y: array<f32>;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) g: vec3<u32>) {
  let i = index(g);
  if (i >= p.n) { return; }
  let r = i / p.out_len;
  let d = i % p.out_len;
  let a = x[r * p.in_len + u32(table[3u * d])];
  let b = x[r * p.in_len + u32(table[3u * d + 1u])];
  y[i] = a + (b - a) * table[3u * d + 2u];
}
)";

// Rows gathered by an index table (repeat by durations): y[r, :] = x[rows[r], :].
constexpr const char* kGatherRows = NN_WGSL_INDEX R"(
struct P { n: u32, cols: u32, pad0: u32, pad1: u32 };
@group(0) @binding(0) var<uniform> p: P;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read> rows: array<u32>;
@group(0) @binding(3) var<storage, read_write> y: array<f32>;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) g: vec3<u32>) {
  let i = index(g);
  if (i >= p.n) { return; }
  y[i] = x[rows[i / p.cols] * p.cols + i % p.cols];
}
)";

// Transposed conv1d, gathered: output (oc, p) sums w[i][oc][k] x[i][t] over the taps k with
// t = (p + pad - k dilation) / stride a whole step inside the input, and the group's input channels.
constexpr const char* kConvTranspose = NN_WGSL_INDEX R"(
struct P { cout: u32, out_len: u32, in_g: u32, out_g: u32, kernel: u32, length: u32, stride: u32, padding: u32,
           dilation: u32, has_bias: u32, pad0: u32, pad1: u32 };
@group(0) @binding(0) var<uniform> p: P;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read> w: array<f32>;
@group(0) @binding(3) var<storage, read> bias: array<f32>;
@group(0) @binding(4) var<storage, read_write> y: array<f32>;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) g: vec3<u32>) {
  let o = index(g);
  if (o >= p.cout * p.out_len) { return; }
  let oc = o / p.out_len;
  let pos = o % p.out_len;
  let grp = oc / p.out_g;
  let ocl = oc % p.out_g;
  var s = 0.0;
  for (var k = 0u; k < p.kernel; k++) {
    let q = i32(pos + p.padding) - i32(k * p.dilation);
    if (q < 0 || u32(q) % p.stride != 0u) { continue; }
    let t = u32(q) / p.stride;
    if (t >= p.length) { continue; }
    for (var i = 0u; i < p.in_g; i++) {
      let ci = grp * p.in_g + i;
      s += w[(ci * p.out_g + ocl) * p.kernel + k] * x[ci * p.length + t];
    }
  }
  if (p.has_bias != 0u) { s += bias[oc]; }
  y[o] = s;
}
)";

// Transposed conv1d for groups 1, dilation 1, kernel <= 32 (the generator's upsampling): a workgroup owns 64
// positions x 16 output channels; per chunk of 4 input channels it stages the inputs the tile's taps reach
// (<= 96 of them) and w in workgroup memory (9.5 KB), and each thread walks only its position's taps,
// k = (p + pad) mod stride, + stride, ...: per tap and input channel one x load, four vec4 weight loads (one
// address across the workgroup), 16 multiply-adds. Float sums in (channel, tap) order.
constexpr const char* kConvTransposeTiled = R"(
struct P { cout: u32, out_len: u32, cin: u32, kernel: u32, length: u32, stride: u32, padding: u32, t_tiles: u32,
           has_bias: u32, pad0: u32, pad1: u32, pad2: u32 };
@group(0) @binding(0) var<uniform> p: P;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read> w: array<f32>;
@group(0) @binding(3) var<storage, read> bias: array<f32>;
@group(0) @binding(4) var<storage, read_write> y: array<f32>;
var<workgroup> xs: array<f32, 384>;         // [4 input channels][96 inputs from tb]
var<workgroup> ws: array<vec4<f32>, 512>;   // [4 input channels][kernel <= 32][4]: output channels 4q .. 4q+3
fn floor_div(a: i32, b: i32) -> i32 { return select(-((-a + b - 1) / b), a / b, a >= 0); }
@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let wg = wid.x + wid.y * 65535u;
  let p0 = (wg % p.t_tiles) * 64u;
  let oc0 = (wg / p.t_tiles) * 16u;
  let st = i32(p.stride);
  let tb = floor_div(i32(p0 + p.padding) - i32(p.kernel) + 1, st);
  let q = p0 + lid + p.padding;
  var a0 = vec4<f32>(0.0);
  var a1 = vec4<f32>(0.0);
  var a2 = vec4<f32>(0.0);
  var a3 = vec4<f32>(0.0);
  let taps = 4u * p.kernel;
  for (var c0 = 0u; c0 < p.cin; c0 += 4u) {
    workgroupBarrier();
    for (var e = lid; e < 384u; e += 64u) {
      let ci = c0 + e / 96u;
      let t = tb + i32(e % 96u);
      var v = 0.0;
      if (ci < p.cin && t >= 0 && t < i32(p.length)) { v = x[ci * p.length + u32(t)]; }
      xs[e] = v;
    }
    for (var e = lid; e < 16u * taps; e += 64u) {
      let o = e / taps;
      let r = e % taps;
      let ci = c0 + r / p.kernel;
      let oc = oc0 + o;
      var v = 0.0;
      if (ci < p.cin && oc < p.cout) { v = w[(ci * p.cout + oc) * p.kernel + r % p.kernel]; }
      ws[r * 4u + o / 4u][o % 4u] = v;
    }
    workgroupBarrier();
    let cn = min(4u, p.cin - c0);
    for (var cl = 0u; cl < cn; cl++) {
      for (var k = q % p.stride; k < p.kernel && k <= q; k += p.stride) {
        let xv = xs[cl * 96u + u32(i32((q - k) / p.stride) - tb)];
        let b = (cl * p.kernel + k) * 4u;
        a0 += xv * ws[b];
        a1 += xv * ws[b + 1u];
        a2 += xv * ws[b + 2u];
        a3 += xv * ws[b + 3u];
      }
    }
  }
  let pos = p0 + lid;
  if (pos >= p.out_len) { return; }
  var acc = array<vec4<f32>, 4>(a0, a1, a2, a3);
  for (var j = 0u; j < 16u; j++) {
    let oc = oc0 + j;
    if (oc >= p.cout) { return; }
    var v = acc[j / 4u][j % 4u];
    if (p.has_bias != 0u) { v += bias[oc]; }
    y[oc * p.out_len + pos] = v;
  }
}
)";

// Transposed conv1d for groups 1, dilation 1 (the generator's upsamplings and the inverse STFT), by phases.
// Output position p meets only the taps k = r, r + stride, ... with r = (p + pad) mod stride, and input t = m - j
// for tap k = r + j stride, where m = (p + pad) div stride: the positions of one phase r are a product of
// [Cout, Cin x taps(r)] by a Toeplitz [Cin x taps(r), m] of x, with the same taps for all of them. A workgroup
// owns one phase, TM consecutive m and TC output channels; each thread RC channels x RM positions (m strided by
// TM / RM) in registers. Per chunk of input channels it stages x (the TM + taps - 1 inputs the tile's m reach,
// per channel) and the chunk's weight rows (input channel, tap) x TC channels from the weight laid out once as
// [Cin][K][Cout rounded up to 4] (a contiguous row per (channel, tap), no index division in the copy), then per
// (channel, tap) a thread reads RM inputs and RC / 4 vec4 weights from workgroup memory for RM x RC multiply-adds.
// The staging (global loads, index math, two barriers) is paid once per chunk of up to CI_MAX channels.
// Where the time goes, at the bench sentence's shapes: the 16-channel tiled kernel's thread does 128 multiply-adds
// per chunk of 4 channels against 20 staged weights, each placed with four divisions by run-time values, and two
// barriers, so the index math and barriers, not the arithmetic, set its time (ups.0: 976 workgroups of 64, 16,384
// multiply-adds, 2,560 weight loads and ~10,000 divisions a thread). Here ups.0 is 280 workgroups of 128 (10
// phases x 7 m tiles x 4 channel tiles), 32 chunks of 16 channels, 1,024 multiply-adds a chunk per thread against
// 12 x and 4 vec4 weight loads; ups.1 732 workgroups (6 x 61 x 2), 16 chunks of 1,024; the inverse STFT (Cout 1)
// on the narrow tile 230 workgroups (5 x 46 x 1), 6 chunks, its vec4 a quarter used.
// Float sums in (input channel, tap) order from 0, bias added last: the 16-channel tiled kernel's expression
// for expression (zero products for inputs outside x where it skips the tap: adding +-0 leaves a sum as it is).
struct ConvTransposePhaseTile {
  int tc, tm, rc, rm;  // channels and m per workgroup; channels and m per thread
  int ci_max;          // input channels per staged chunk, at most
  int rows_max;        // weight rows (channel, tap) per staged chunk, at most: taps <= rows_max
  int threads() const { return (tc / rc) * (tm / rm); }
  int x_pitch() const { return tm + 32; }  // taps - 1 <= 31 inputs before the tile's first m
};
// 256 / 128 output channels (ups.0, ups.1): 64 x 64 tiles, 8 x 4 a thread; 128 threads; 14 KB staged.
constexpr ConvTransposePhaseTile kPhaseWide{64, 64, 8, 4, 16, 32};
// Up to 16 output channels (the inverse STFT's one): 4 channels x 512 m, 4 x 4 a thread; 128 threads; 10.5 KB.
constexpr ConvTransposePhaseTile kPhaseNarrow{4, 512, 4, 4, 4, 128};

std::string conv_transpose_phases_wgsl(const ConvTransposePhaseTile& t) {
  const int tc4 = t.tc / 4, rc4 = t.rc / 4, mstep = t.tm / t.rm, wslots = t.rows_max * tc4 / t.threads();
  auto n = [](int v) { return std::to_string(v) + "u"; };
  std::string s;
  s += "const NT: u32 = " + n(t.threads()) + ";\nconst TC4: u32 = " + n(tc4) +
       ";\nconst TM: u32 = " + n(t.tm) + ";\nconst MSTEP: u32 = " + n(mstep) +
       ";\nconst XP: u32 = " + n(t.x_pitch()) + ";\n";
  s += "var<workgroup> xs: array<f32, " + std::to_string(t.ci_max * t.x_pitch()) + ">;\n";
  s += "var<workgroup> ws: array<vec4<f32>, " + std::to_string(t.rows_max * tc4) + ">;\n";
  s += R"(
struct P { cout: u32, out_len: u32, cin: u32, kernel: u32, length: u32, stride: u32, padding: u32, cout4: u32,
           m_start: u32, m_tiles: u32, c_tiles: u32, ci_chunk: u32, has_bias: u32, pad0: u32, pad1: u32,
           pad2: u32 };
@group(0) @binding(0) var<uniform> p: P;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read> wp: array<vec4<f32>>;
@group(0) @binding(3) var<storage, read> bias: array<f32>;
@group(0) @binding(4) var<storage, read_write> y: array<f32>;
@compute @workgroup_size(NT)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let wg = wid.x + wid.y * 65535u;
  if (wg >= p.stride * p.m_tiles * p.c_tiles) { return; }
  let ct = wg % p.c_tiles;
  let r = (wg / p.c_tiles) / p.m_tiles;
  let m0 = p.m_start + ((wg / p.c_tiles) % p.m_tiles) * TM;
  var nt = 0u;
  if (r < p.kernel) { nt = (p.kernel - r + p.stride - 1u) / p.stride; }
  let tm = lid % MSTEP;
  let wt = (lid / MSTEP) * )" +
       n(rc4) + R"(;
  let row_len = p.kernel * p.cout4;
)";
  for (int i = 0; i < t.rm; ++i)
    for (int v = 0; v < rc4; ++v)
      s += "  var a" + std::to_string(i) + "_" + std::to_string(v) + " = vec4<f32>(0.0);\n";
  // The weight rows' offsets within a chunk do not change from chunk to chunk: found once (one division each).
  for (int w = 0; w < wslots; ++w) {
    const std::string k = std::to_string(w);
    s += "  let we" + k + " = lid + " + n(w * t.threads()) + ";\n";
    s += "  var wc" + k + " = 0xffffffffu;\n  var wo" + k + " = 0u;\n";
    s += "  if (nt > 0u && ct * TC4 + we" + k + " % TC4 < p.cout4) {\n";
    s += "    let row = we" + k + " / TC4;\n";
    s += "    wc" + k + " = row / nt;\n";
    s += "    wo" + k + " = (wc" + k + " * p.kernel + r + (row % nt) * p.stride) * p.cout4 + ct * TC4 + we" +
         k + " % TC4;\n  }\n";
  }
  s += R"(  if (nt > 0u) {
    for (var c0 = 0u; c0 < p.cin; c0 += p.ci_chunk) {
      let cn = min(p.ci_chunk, p.cin - c0);
      workgroupBarrier();
      let xw = TM + nt - 1u;
      for (var e = lid; e < cn * XP; e += NT) {
        let u = e % XP;
        let t = i32(m0 + u) - i32(nt - 1u);
        var v = 0.0;
        if (u < xw && t >= 0 && t < i32(p.length)) { v = x[(c0 + e / XP) * p.length + u32(t)]; }
        xs[e] = v;
      }
)";
  for (int w = 0; w < wslots; ++w) {
    const std::string k = std::to_string(w);
    s += "      var wv" + k + " = vec4<f32>(0.0);\n";
    s += "      if (wc" + k + " < cn) { wv" + k + " = wp[c0 * row_len + wo" + k + "]; }\n";
    s += "      ws[we" + k + "] = wv" + k + ";\n";
  }
  s += R"(      workgroupBarrier();
      for (var cl = 0u; cl < cn; cl++) {
        for (var j = 0u; j < nt; j++) {
          let wb = (cl * nt + j) * TC4 + wt;
          let xb = cl * XP + nt - 1u - j + tm;
)";
  for (int v = 0; v < rc4; ++v) s += "          let w" + std::to_string(v) + " = ws[wb + " + n(v) + "];\n";
  for (int i = 0; i < t.rm; ++i)
    s += "          let x" + std::to_string(i) + " = xs[xb + " + n(i * mstep) + "];\n";
  for (int i = 0; i < t.rm; ++i)
    for (int v = 0; v < rc4; ++v) {
      const std::string a = "a" + std::to_string(i) + "_" + std::to_string(v);
      s += "          " + a + " += x" + std::to_string(i) + " * w" + std::to_string(v) + ";\n";
    }
  s += R"(        }
      }
    }
  }
)";
  for (int i = 0; i < t.rm; ++i) {
    s += "  {\n    let q = (m0 + tm + " + n(i * mstep) + ") * p.stride + r;\n";
    s += "    if (q >= p.padding && q - p.padding < p.out_len) {\n      let pos = q - p.padding;\n";
    for (int v = 0; v < rc4; ++v) {
      const std::string a = "a" + std::to_string(i) + "_" + std::to_string(v);
      s += "      for (var c = 0u; c < 4u; c++) {\n";
      s += "        let oc = (ct * TC4 + wt + " + n(v) + ") * 4u + c;\n";
      s += "        if (oc < p.cout) {\n          var v = " + a + "[c];\n";
      s += "          if (p.has_bias != 0u) { v += bias[oc]; }\n";
      s += "          y[oc * p.out_len + pos] = v;\n        }\n      }\n";
    }
    s += "    }\n  }\n";
  }
  s += "}\n";
  return s;
}

// conv_transpose1d's weight [Cin, Cout, K] as [Cin][K][Cout rounded up to 4] (zeros past Cout), made once per
// weight (Tensor::derived): the phase kernel's staged rows.
constexpr const char* kConvTransposePack = NN_WGSL_INDEX R"(
struct P { n: u32, cout: u32, cout_pad: u32, kernel: u32 };
@group(0) @binding(0) var<uniform> p: P;
@group(0) @binding(1) var<storage, read> w: array<f32>;
@group(0) @binding(2) var<storage, read_write> y: array<f32>;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) g: vec3<u32>) {
  let o = index(g);
  if (o >= p.n) { return; }
  let oc = o % p.cout_pad;
  let k = (o / p.cout_pad) % p.kernel;
  let ci = (o / p.cout_pad) / p.kernel;
  var v = 0.0;
  if (oc < p.cout) { v = w[(ci * p.cout + oc) * p.kernel + k]; }
  y[o] = v;
}
)";

// a [B, M, K] . b [K, N] (shared) or [B, K, N], one output per thread.
constexpr const char* kMatmul = NN_WGSL_INDEX R"(
struct P { batches: u32, m: u32, k: u32, n: u32, shared_b: u32, pad0: u32, pad1: u32, pad2: u32 };
@group(0) @binding(0) var<uniform> p: P;
@group(0) @binding(1) var<storage, read> a: array<f32>;
@group(0) @binding(2) var<storage, read> b: array<f32>;
@group(0) @binding(3) var<storage, read_write> y: array<f32>;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) g: vec3<u32>) {
  let o = index(g);
  if (o >= p.batches * p.m * p.n) { return; }
  let bi = o / (p.m * p.n);
  let r = (o / p.n) % p.m;
  let c = o % p.n;
  var boff = 0u;
  if (p.shared_b == 0u) { boff = bi * p.k * p.n; }
  var s = 0.0;
  for (var t = 0u; t < p.k; t++) { s += a[(bi * p.m + r) * p.k + t] * b[boff + t * p.n + c]; }
  y[o] = s;
}
)";

// a / b correctly rounded (to nearest, ties to even), as the CPU's division is: WGSL allows 2.5 ulp, and
// compilers turn division by a constant into a multiply by its reciprocal (SwiftShader's scale = range / 255 came
// out an ulp off). The significands' long division, 26 quotient bits, then rounding on the remainder. Normal
// finite operands with a normal quotient (what quantization scales and activations are); 0 / b is 0.
#define NN_WGSL_DIV_RN                                                                 \
  "fn div_rn(a: f32, b: f32) -> f32 {\n"                                               \
  "  if (a == 0.0) { return 0.0; }\n"                                                  \
  "  let fa = frexp(abs(a));\n"                                                        \
  "  let fb = frexp(abs(b));\n"                                                        \
  "  let mb = u32(fb.fract * 16777216.0);\n"                                           \
  "  var r = u32(fa.fract * 16777216.0);\n"                                            \
  "  var q = 0u;\n"                                                                    \
  "  for (var i = 0u; i < 26u; i++) {\n"                                               \
  "    q <<= 1u;\n"                                                                    \
  "    if (r >= mb) { r -= mb; q |= 1u; }\n"                                           \
  "    r <<= 1u;\n"                                                                    \
  "  }\n"                                                                              \
  "  var drop = 1u;\n"                                                                 \
  "  if (q >= 33554432u) { drop = 2u; }\n"                                             \
  "  let mask = (1u << drop) - 1u;\n"                                                  \
  "  let rest = q & mask;\n"                                                           \
  "  let half = 1u << (drop - 1u);\n"                                                  \
  "  var m = q >> drop;\n"                                                             \
  "  if (rest > half || (rest == half && (r != 0u || (m & 1u) == 1u))) { m += 1u; }\n" \
  "  let v = ldexp(f32(m), fa.exp - fb.exp - 25 + i32(drop));\n"                       \
  "  return select(v, -v, (a < 0.0) != (b < 0.0));\n"                                  \
  "}\n" NN_WGSL_ROUND_DIV

// round(div_rn(a, b)) (ties to even), what quantization wants of each value, from inv = 1 / b in WGSL's division
// (<= 2.5 ulp): q = a inv is within |a / b| (2.5 + 0.5) 2^-23 = 3.6e-7 |q| of the exact quotient, and div_rn's
// quotient within 2^-24 of it, so where q's fraction is farther than 2^-20 |q| (9.5e-7 |q|) from a half, both
// round to the same integer: q's. Only the rest (~1e-4 of quantized values) pay div_rn's 26-step long division,
// which otherwise made a quantization pass ALU-bound (and each LSTM step's chain ~1 us longer). q - trunc(q) is
// exact, and 0.5 - f is exact where it matters (f >= 0.25). floor_div: floor(div_rn(a, b)) the same way, q's
// floor unless q is that close to an integer (the ConvIntegers' bias in output steps, once per output).
// quant_params: DynamicQuantizeLinear's (scale, zero point, 1 / scale) for the range [lo, hi] (lo <= 0 <= hi);
// quant_u8: a value's uint8 under them (as a float), for the quantize pass and the LSTM steps alike.
#define NN_WGSL_ROUND_DIV                                                                 \
  "fn round_div(a: f32, b: f32, inv: f32) -> f32 {\n"                                     \
  "  let q = a * inv;\n"                                                                  \
  "  let f = abs(q - trunc(q));\n"                                                        \
  "  if (abs(f - 0.5) > abs(q) * 9.5367431640625e-7) { return round(q); }\n"              \
  "  return round(div_rn(a, b));\n"                                                       \
  "}\n"                                                                                   \
  "fn floor_div(a: f32, b: f32, inv: f32) -> f32 {\n"                                     \
  "  let q = a * inv;\n"                                                                  \
  "  if (abs(q - round(q)) > abs(q) * 9.5367431640625e-7) { return floor(q); }\n"         \
  "  return floor(div_rn(a, b));\n"                                                       \
  "}\n"                                                                                   \
  "fn quant_params(lo: f32, hi: f32) -> vec3<f32> {\n"                                    \
  "  var scale = 1.0;\n"                                                                  \
  "  if (hi != lo) { scale = div_rn(hi - lo, 255.0); }\n"                                 \
  "  let inv = 1.0 / scale;\n"                                                            \
  "  return vec3<f32>(scale, clamp(round_div(0.0 - lo, scale, inv), 0.0, 255.0), inv);\n" \
  "}\n"                                                                                   \
  "fn quant_u8(v: f32, qv: vec3<f32>) -> f32 {\n"                                         \
  "  return clamp(round_div(v, qv.x, qv.z) + qv.y, 0.0, 255.0);\n"                        \
  "}\n"

#define NN_WGSL_MINMAX                                                                                   \
  "var<workgroup> lo_s: array<f32, 64>;\n"                                                               \
  "var<workgroup> hi_s: array<f32, 64>;\n"                                                               \
  "fn reduce_lo_hi(lo: f32, hi: f32, lid: u32) -> vec2<f32> {\n"                                         \
  "  lo_s[lid] = lo;\n"                                                                                  \
  "  hi_s[lid] = hi;\n"                                                                                  \
  "  workgroupBarrier();\n"                                                                              \
  "  for (var s = 32u; s > 0u; s >>= 1u) {\n"                                                            \
  "    if (lid < s) { lo_s[lid] = min(lo_s[lid], lo_s[lid + s]); hi_s[lid] = max(hi_s[lid], hi_s[lid + " \
  "s]); }\n"                                                                                             \
  "    workgroupBarrier();\n"                                                                            \
  "  }\n"                                                                                                \
  "  return vec2<f32>(lo_s[0], hi_s[0]);\n"                                                              \
  "}\n"

// DynamicQuantizeLinear's range, stage 0: workgroup w reduces chunk w of x into partial[2w], partial[2w+1].
constexpr const char* kQuantRange = NN_WGSL_MINMAX R"(
struct P { n: u32, chunks: u32, pad0: u32, pad1: u32 };
@group(0) @binding(0) var<uniform> p: P;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read_write> partial: array<f32>;
@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  var lo = 0.0;
  var hi = 0.0;
  let w = wid.x;
  if (w >= p.chunks) { return; }
  let size = (p.n + p.chunks - 1u) / p.chunks;
  let end = min(p.n, (w + 1u) * size);
  for (var i = w * size + lid; i < end; i += 64u) { lo = min(lo, x[i]); hi = max(hi, x[i]); }
  let r = reduce_lo_hi(lo, hi, lid);
  if (lid == 0u) { partial[2u * w] = r.x; partial[2u * w + 1u] = r.y; }
}
)";

// nn_snake (above), and its output's range for the int8 conv after it (Kokoro's generator): workgroup w writes
// chunk w of y, the chunks of nn_quant_range, and their (min, max) with 0 into partial[2w], partial[2w + 1], as
// nn_quant_range would from y, so the conv's quantization skips that dispatch and its pass over y.
constexpr const char* kSnakeRange = NN_WGSL_MINMAX R"(
struct P { n: u32, length: u32, chunks: u32, pad0: u32 };
@group(0) @binding(0) var<uniform> p: P;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read> alpha: array<f32>;
@group(0) @binding(3) var<storage, read_write> y: array<f32>;
@group(0) @binding(4) var<storage, read_write> partial: array<f32>;
@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let w = wid.x;
  if (w >= p.chunks) { return; }
  let size = (p.n + p.chunks - 1u) / p.chunks;
  let end = min(p.n, (w + 1u) * size);
  var lo = 0.0;
  var hi = 0.0;
  for (var i = w * size + lid; i < end; i += 64u) {
    let a = alpha[i / p.length];
    let v = x[i];
    let s = sin(a * v);
    let r = v + s * s * (1.0 / a);
    y[i] = r;
    lo = min(lo, r);
    hi = max(hi, r);
  }
  let r = reduce_lo_hi(lo, hi, lid);
  if (lid == 0u) { partial[2u * w] = r.x; partial[2u * w + 1u] = r.y; }
}
)";

// Stage 1 and the quantization in one dispatch: every workgroup reduces the chunks' partials (<= 1,024 pairs,
// from L2) to the scale and zero point itself, workgroup 0 writes qp = (scale, zero point, min, max) for the
// consumers, and thread j packs 4 uint8 into word j: one dispatch fewer per quantized activation than a separate
// one-workgroup stage (~250 of them in Kokoro's forward). Where x has <= 1,024 values (p.chunks = 0: the style
// vectors of the ~70 AdaINs) each workgroup reduces x itself and the range dispatch is skipped. Layout
// (p.length == 0): x's elements 4j .. 4j + 3; or, for the packed ConvInteger, x [C, length] as [C / 4 rounded up,
// length] words of 4 channels at one position (channels past C hold the zero point), so that its staging loads
// one word per 4 channels.
constexpr const char* kQuantize = NN_WGSL_MINMAX NN_WGSL_DIV_RN R"(
struct P { n: u32, chunks: u32, length: u32, channels: u32 };
@group(0) @binding(0) var<uniform> p: P;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read> partial: array<f32>;
@group(0) @binding(3) var<storage, read_write> qp: array<f32>;
@group(0) @binding(4) var<storage, read_write> q: array<u32>;
@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  var lo = 0.0;
  var hi = 0.0;
  if (p.chunks == 0u) {
    for (var i = lid; i < p.n; i += 64u) { lo = min(lo, x[i]); hi = max(hi, x[i]); }
  }
  for (var c = lid; c < p.chunks; c += 64u) { lo = min(lo, partial[2u * c]); hi = max(hi, partial[2u * c + 1u]); }
  let r = reduce_lo_hi(lo, hi, lid);
  let qv = quant_params(r.x, r.y);
  let wg = wid.x + wid.y * 65535u;
  if (wg == 0u && lid == 0u) {
    qp[0] = qv.x;
    qp[1] = qv.y;
    qp[2] = r.x;
    qp[3] = r.y;
  }
  let j = wg * 64u + lid;
  var first = 4u * j;  // element e of the word: x[first + e * stride], when valid
  var stride = 1u;
  var valid = p.n - min(p.n, first);
  if (p.length != 0u) {
    if (j >= (p.channels + 3u) / 4u * p.length) { return; }
    let c = 4u * (j / p.length);
    first = c * p.length + j % p.length;
    stride = p.length;
    valid = p.channels - c;
  } else if (first >= p.n) {
    return;
  }
  var word = 0u;
  for (var e = 0u; e < 4u; e++) {
    var v = qv.y;
    if (e < valid) { v = quant_u8(x[first + e * stride], qv); }
    word |= u32(v) << (8u * e);
  }
  q[j] = word;
}
)";

#define NN_WGSL_BYTES                                                                \
  "fn ubyte(a: u32, i: u32) -> i32 { return i32((a >> (8u * (i % 4u))) & 255u); }\n" \
  "fn sbyte(a: u32, i: u32) -> i32 { return extractBits(bitcast<i32>(a), 8u * (i % 4u), 8u); }\n"

// MatMulInteger on the quantized x [M, K] (uint8) and w [K, N] (int8 or uint8; signed_w), per-column zero
// points (int8 / uint8 zp_signed) and scales when has_col, else the uniform's per-tensor ones. A workgroup owns
// 16 rows x 64 columns, a thread one column's 16 rows: per chunk of 64 k, x - x_zp is staged as i32 vec4s of 4
// rows, so each k is one weight byte (loads coalesced along N) and four vec4 loads (one address across the
// workgroup) for 16 multiply-adds. Integer sums: the same whatever the order.
constexpr const char* kMatmulInteger = NN_WGSL_BYTES R"(
struct P { m: u32, n: u32, k: u32, signed_w: u32, has_col: u32, zp_signed: u32, w_zp: i32, w_scale: f32,
           n_tiles: u32, pad0: u32, pad1: u32, pad2: u32 };
@group(0) @binding(0) var<uniform> p: P;
@group(0) @binding(1) var<storage, read> xq: array<u32>;
@group(0) @binding(2) var<storage, read> qp: array<f32>;
@group(0) @binding(3) var<storage, read> w: array<u32>;
@group(0) @binding(4) var<storage, read> scales: array<f32>;
@group(0) @binding(5) var<storage, read> zps: array<u32>;
@group(0) @binding(6) var<storage, read_write> y: array<f32>;
var<workgroup> xs: array<vec4<i32>, 256>;  // [64 k][4]: rows 4q .. 4q+3
@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let wg = wid.x + wid.y * 65535u;
  let c = (wg % p.n_tiles) * 64u + lid;
  let r0 = (wg / p.n_tiles) * 16u;
  let xzp = i32(qp[1]);
  var wzp = p.w_zp;
  var ws = p.w_scale;
  if (p.has_col != 0u && c < p.n) {
    ws = scales[c];
    if (p.zp_signed != 0u) { wzp = sbyte(zps[c / 4u], c); } else { wzp = ubyte(zps[c / 4u], c); }
  }
  var a0 = vec4<i32>(0);
  var a1 = vec4<i32>(0);
  var a2 = vec4<i32>(0);
  var a3 = vec4<i32>(0);
  for (var k0 = 0u; k0 < p.k; k0 += 64u) {
    workgroupBarrier();
    for (var e = lid; e < 1024u; e += 64u) {
      let kl = e % 64u;
      let rl = e / 64u;
      var v = 0i;
      if (r0 + rl < p.m && k0 + kl < p.k) {
        let xi = (r0 + rl) * p.k + k0 + kl;
        v = ubyte(xq[xi / 4u], xi) - xzp;
      }
      xs[kl * 4u + rl / 4u][rl % 4u] = v;
    }
    workgroupBarrier();
    if (c < p.n) {
      let kn = min(64u, p.k - k0);
      for (var kl = 0u; kl < kn; kl++) {
        let wi = (k0 + kl) * p.n + c;
        var wv = ubyte(w[wi / 4u], wi);
        if (p.signed_w != 0u) { wv = sbyte(w[wi / 4u], wi); }
        wv -= wzp;
        a0 += wv * xs[kl * 4u];
        a1 += wv * xs[kl * 4u + 1u];
        a2 += wv * xs[kl * 4u + 2u];
        a3 += wv * xs[kl * 4u + 3u];
      }
    }
  }
  if (c >= p.n) { return; }
  let step = qp[0] * ws;
  var acc = array<vec4<i32>, 4>(a0, a1, a2, a3);
  for (var rl = 0u; rl < 16u; rl++) {
    let r = r0 + rl;
    if (r >= p.m) { return; }
    y[r * p.n + c] = f32(acc[rl / 4u][rl % 4u]) * step;
  }
}
)";

// MatMulInteger with dot4U8Packed, for the small-M products (ALBERT's 79 rows, the LSTMs' input projections):
// a workgroup owns 4 rows x 16 columns and splits K over 16 threads, so a 79 x 768 product makes 960
// workgroups (the 16-row kernel above: 60, most of a big GPU idle) and each thread's chain of loads is K / 64
// long. Thread (column group cg, split s) owns 4 rows x 4 columns: per 4 k it loads one word of each of 4
// weight rows (4 columns each), transposes the 4 x 4 bytes into one word per column (4 k), and does 16 dot4s
// against the 4 rows' x words. Bytes are unsigned as in the packed conv: W' = w + 128 for int8 (w XOR 0x80),
// w_zp' = w_zp + 128, and sum (X - x_zp)(W' - w_zp') = sum X W' - w_zp' sum X - x_zp sum W' + K x_zp w_zp',
// with X and W' 0 past K (their terms vanish in both forms). The split's partials (linear in the split) are
// added in workgroup memory. Integer sums, exact: the outputs are the 16-row kernel's bit for bit.
constexpr const char* kMatmulIntegerPacked = NN_WGSL_BYTES R"(
struct P { m: u32, n: u32, k: u32, signed_w: u32, has_col: u32, zp_signed: u32, w_zp: i32, w_scale: f32,
           n_tiles: u32, pad0: u32, pad1: u32, pad2: u32 };
@group(0) @binding(0) var<uniform> p: P;
@group(0) @binding(1) var<storage, read> xq: array<u32>;
@group(0) @binding(2) var<storage, read> qp: array<f32>;
@group(0) @binding(3) var<storage, read> w: array<u32>;
@group(0) @binding(4) var<storage, read> scales: array<f32>;
@group(0) @binding(5) var<storage, read> zps: array<u32>;
@group(0) @binding(6) var<storage, read_write> y: array<f32>;
var<workgroup> red: array<vec4<i32>, 256>;  // [16 splits][4 column groups][4 rows]: 4 columns each
fn d4(a: u32, b: u32) -> i32 { return i32(dot4U8Packed(a, b)); }
// x's bytes k = 4 kw .. 4 kw + 3 of row r (0 past K).
fn xword(r: u32, kw: u32) -> u32 {
  if (r >= p.m) { return 0u; }
  if (p.k % 4u == 0u) { return xq[r * (p.k / 4u) + kw]; }
  var word = 0u;
  for (var j = 0u; j < 4u; j++) {
    let kk = 4u * kw + j;
    if (kk < p.k) { let i = r * p.k + kk; word |= u32(ubyte(xq[i / 4u], i)) << (8u * j); }
  }
  return word;
}
// w's row k, columns c0 .. c0 + 3 (c0 a multiple of 4) as unsigned bytes W' (0 past K).
fn wrow(k: u32, c0: u32) -> u32 {
  if (k >= p.k || c0 >= p.n) { return 0u; }
  var word = 0u;
  if (p.n % 4u == 0u) {
    word = w[(k * p.n + c0) / 4u];
  } else {
    for (var j = 0u; j < 4u && c0 + j < p.n; j++) {
      let i = k * p.n + c0 + j;
      word |= u32(ubyte(w[i / 4u], i)) << (8u * j);
    }
  }
  return word ^ select(0u, 0x80808080u, p.signed_w != 0u);
}
// Column c's zero point (w_zp', offset for unsigned bytes) and scale.
fn col_zp(c: u32) -> i32 {
  var z = p.w_zp;
  if (p.has_col != 0u && c < p.n) {
    if (p.zp_signed != 0u) { z = sbyte(zps[c / 4u], c); } else { z = ubyte(zps[c / 4u], c); }
  }
  return z + select(0, 128, p.signed_w != 0u);
}
@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let wg = wid.x + wid.y * 65535u;
  let c_tile = (wg % p.n_tiles) * 16u;
  let r0 = (wg / p.n_tiles) * 4u;
  let cg = lid % 4u;
  let s = lid / 4u;
  let c0 = c_tile + 4u * cg;
  let xzp = i32(qp[1]);
  let ones = 0x01010101u;
  var a0 = vec4<i32>(0);
  var a1 = vec4<i32>(0);
  var a2 = vec4<i32>(0);
  var a3 = vec4<i32>(0);
  var sx = vec4<i32>(0);
  var sw = vec4<i32>(0);
  let kw_n = (p.k + 3u) / 4u;
  for (var kw = s; kw < kw_n; kw += 16u) {
    let w0 = wrow(4u * kw, c0);
    let w1 = wrow(4u * kw + 1u, c0);
    let w2 = wrow(4u * kw + 2u, c0);
    let w3 = wrow(4u * kw + 3u, c0);
    // 4 x 4 byte transpose: column j's word holds rows 4 kw .. 4 kw + 3.
    let t0 = (w0 & 0x00ff00ffu) | ((w1 & 0x00ff00ffu) << 8u);
    let t1 = ((w0 >> 8u) & 0x00ff00ffu) | (w1 & 0xff00ff00u);
    let t2 = (w2 & 0x00ff00ffu) | ((w3 & 0x00ff00ffu) << 8u);
    let t3 = ((w2 >> 8u) & 0x00ff00ffu) | (w3 & 0xff00ff00u);
    let col = vec4<u32>((t0 & 0xffffu) | (t2 << 16u), (t1 & 0xffffu) | (t3 << 16u), (t0 >> 16u) | (t2 & 0xffff0000u),
                        (t1 >> 16u) | (t3 & 0xffff0000u));
    let x0 = xword(r0, kw);
    let x1 = xword(r0 + 1u, kw);
    let x2 = xword(r0 + 2u, kw);
    let x3 = xword(r0 + 3u, kw);
    a0 += vec4<i32>(d4(x0, col.x), d4(x0, col.y), d4(x0, col.z), d4(x0, col.w));
    a1 += vec4<i32>(d4(x1, col.x), d4(x1, col.y), d4(x1, col.z), d4(x1, col.w));
    a2 += vec4<i32>(d4(x2, col.x), d4(x2, col.y), d4(x2, col.z), d4(x2, col.w));
    a3 += vec4<i32>(d4(x3, col.x), d4(x3, col.y), d4(x3, col.z), d4(x3, col.w));
    sx += vec4<i32>(d4(x0, ones), d4(x1, ones), d4(x2, ones), d4(x3, ones));
    sw += vec4<i32>(d4(ones, col.x), d4(ones, col.y), d4(ones, col.z), d4(ones, col.w));
  }
  let wz = vec4<i32>(col_zp(c0), col_zp(c0 + 1u), col_zp(c0 + 2u), col_zp(c0 + 3u));
  let b = s * 16u + cg * 4u;
  red[b] = a0 - wz * sx.x - xzp * sw;
  red[b + 1u] = a1 - wz * sx.y - xzp * sw;
  red[b + 2u] = a2 - wz * sx.z - xzp * sw;
  red[b + 3u] = a3 - wz * sx.w - xzp * sw;
  workgroupBarrier();
  // Thread lid: row lid / 16, column lid % 16 of the tile.
  let rl = lid / 16u;
  let cl = lid % 16u;
  let r = r0 + rl;
  let c = c_tile + cl;
  if (r >= p.m || c >= p.n) { return; }
  var sum = i32(p.k) * xzp * col_zp(c);
  for (var t = 0u; t < 16u; t++) { sum += red[t * 16u + (cl / 4u) * 4u + rl][cl % 4u]; }
  var ws = p.w_scale;
  if (p.has_col != 0u) { ws = scales[c]; }
  y[r * p.n + c] = f32(sum) * (qp[0] * ws);
}
)";

// ConvInteger on the quantized x [Cin, T] and w [Cout, Cin, K] (groups 1), padding taps contributing 0 (the
// zero point), then the bias rounded down to the output step as ONNX Runtime's quantized graph adds it:
// floor(b / step) * step, step = x_scale * w_scale.
constexpr const char* kConvInteger = NN_WGSL_INDEX NN_WGSL_BYTES NN_WGSL_DIV_RN R"(
struct P { cout: u32, out_len: u32, cin: u32, kernel: u32, length: u32, stride: u32, padding: u32, dilation: u32,
           signed_w: u32, w_zp: i32, w_scale: f32, has_bias: u32 };
@group(0) @binding(0) var<uniform> p: P;
@group(0) @binding(1) var<storage, read> xq: array<u32>;
@group(0) @binding(2) var<storage, read> qp: array<f32>;
@group(0) @binding(3) var<storage, read> w: array<u32>;
@group(0) @binding(4) var<storage, read> bias: array<f32>;
@group(0) @binding(5) var<storage, read_write> y: array<f32>;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) g: vec3<u32>) {
  let o = index(g);
  if (o >= p.cout * p.out_len) { return; }
  let oc = o / p.out_len;
  let t = o % p.out_len;
  let xzp = i32(qp[1]);
  var acc = 0i;
  for (var k = 0u; k < p.kernel; k++) {
    let pos = i32(t * p.stride + k * p.dilation) - i32(p.padding);
    if (pos < 0 || pos >= i32(p.length)) { continue; }
    for (var i = 0u; i < p.cin; i++) {
      let wi = (oc * p.cin + i) * p.kernel + k;
      var wv = ubyte(w[wi / 4u], wi);
      if (p.signed_w != 0u) { wv = sbyte(w[wi / 4u], wi); }
      let xi = i * p.length + u32(pos);
      acc += (ubyte(xq[xi / 4u], xi) - xzp) * (wv - p.w_zp);
    }
  }
  let step = qp[0] * p.w_scale;
  var v = f32(acc) * step;
  if (p.has_bias != 0u) { v += floor_div(bias[oc], step, 1.0 / step) * step; }
  y[o] = v;
}
)";

// ConvInteger, tiled, for stride 1 with (kernel - 1) dilation <= 64 and kernel <= 11 (all of Kokoro's decoder
// and generator convs, where most of the multiply-adds are): a workgroup owns 128 positions x 16 output
// channels, each thread two positions (lid, lid + 64) x 16 channels; per chunk of 8 input channels it stages
// x - x_zp (padding taps 0) and w - w_zp in workgroup memory as i32 (11.8 KB: inside WebGPU's default 16 KB),
// so each thread's inner step is two x loads, four vec4 weight loads (one address across the workgroup) and 32
// multiply-adds, instead of two global loads and a byte unpack per multiply-add. The sums are integers, exact in
// any order: the outputs are the plain kernel's bit for bit.
constexpr const char* kConvIntegerTiled = NN_WGSL_BYTES NN_WGSL_DIV_RN R"(
struct P { cout: u32, out_len: u32, cin: u32, kernel: u32, length: u32, padding: u32, dilation: u32,
           t_tiles: u32, signed_w: u32, w_zp: i32, w_scale: f32, has_bias: u32 };
@group(0) @binding(0) var<uniform> p: P;
@group(0) @binding(1) var<storage, read> xq: array<u32>;
@group(0) @binding(2) var<storage, read> qp: array<f32>;
@group(0) @binding(3) var<storage, read> w: array<u32>;
@group(0) @binding(4) var<storage, read> bias: array<f32>;
@group(0) @binding(5) var<storage, read_write> y: array<f32>;
var<workgroup> xs: array<i32, 1536>;        // [8 input channels][192 positions]
var<workgroup> ws: array<vec4<i32>, 352>;   // [8 input channels][kernel <= 11][4]: output channels 4q .. 4q+3
fn put(acc: vec4<i32>, j0: u32, t: u32, step: f32) {
  for (var q = 0u; q < 4u; q++) {
    let oc = j0 + q;
    if (oc >= p.cout) { return; }
    var v = f32(acc[q]) * step;
    if (p.has_bias != 0u) { v += floor_div(bias[oc], step, 1.0 / step) * step; }
    y[oc * p.out_len + t] = v;
  }
}
@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let wg = wid.x + wid.y * 65535u;
  let t0 = (wg % p.t_tiles) * 128u;
  let oc0 = (wg / p.t_tiles) * 16u;
  let xzp = i32(qp[1]);
  let span = 128u + (p.kernel - 1u) * p.dilation;
  let taps = 8u * p.kernel;
  var a0 = vec4<i32>(0);
  var a1 = vec4<i32>(0);
  var a2 = vec4<i32>(0);
  var a3 = vec4<i32>(0);
  var b0 = vec4<i32>(0);
  var b1 = vec4<i32>(0);
  var b2 = vec4<i32>(0);
  var b3 = vec4<i32>(0);
  for (var c0 = 0u; c0 < p.cin; c0 += 8u) {
    workgroupBarrier();
    for (var e = lid; e < 8u * span; e += 64u) {
      let cl = e / span;
      let ci = c0 + cl;
      let pos = i32(t0 + e % span) - i32(p.padding);
      var v = 0i;
      if (ci < p.cin && pos >= 0 && pos < i32(p.length)) {
        let xi = ci * p.length + u32(pos);
        v = ubyte(xq[xi / 4u], xi) - xzp;
      }
      xs[cl * 192u + e % span] = v;
    }
    for (var e = lid; e < 16u * taps; e += 64u) {
      let o = e / taps;
      let r = e % taps;
      let ci = c0 + r / p.kernel;
      let oc = oc0 + o;
      var v = 0i;
      if (ci < p.cin && oc < p.cout) {
        let wi = (oc * p.cin + ci) * p.kernel + r % p.kernel;
        if (p.signed_w != 0u) { v = sbyte(w[wi / 4u], wi); } else { v = ubyte(w[wi / 4u], wi); }
        v -= p.w_zp;
      }
      ws[r * 4u + o / 4u][o % 4u] = v;
    }
    workgroupBarrier();
    let cn = min(8u, p.cin - c0);
    for (var cl = 0u; cl < cn; cl++) {
      for (var k = 0u; k < p.kernel; k++) {
        let xi = cl * 192u + lid + k * p.dilation;
        let x0 = xs[xi];
        let x1 = xs[xi + 64u];
        let b = (cl * p.kernel + k) * 4u;
        let w0 = ws[b];
        let w1 = ws[b + 1u];
        let w2 = ws[b + 2u];
        let w3 = ws[b + 3u];
        a0 += x0 * w0;
        a1 += x0 * w1;
        a2 += x0 * w2;
        a3 += x0 * w3;
        b0 += x1 * w0;
        b1 += x1 * w1;
        b2 += x1 * w2;
        b3 += x1 * w3;
      }
    }
  }
  let step = qp[0] * p.w_scale;
  let t = t0 + lid;
  if (t < p.out_len) {
    put(a0, oc0, t, step);
    put(a1, oc0 + 4u, t, step);
    put(a2, oc0 + 8u, t, step);
    put(a3, oc0 + 12u, t, step);
  }
  if (t + 64u < p.out_len) {
    put(b0, oc0, t + 64u, step);
    put(b1, oc0 + 4u, t + 64u, step);
    put(b2, oc0 + 8u, t + 64u, step);
    put(b3, oc0 + 12u, t + 64u, step);
  }
}
)";

// ConvInteger with 4 input channels per u32 and dot4U8Packed (dp4a where the hardware has it: one dot4 is 4
// multiply-adds), for the same convs as the tiled one. Bytes must be unsigned: W' = w + 128 for int8 weights
// (w_zp' = w_zp + 128), and sum (X - x_zp)(W' - w_zp') = sum X W' - w_zp' sum X - x_zp sum W' + N x_zp w_zp' over
// the same N = 4 ceil(Cin / 4) K terms, exact in i32 (|sum X W'| < 255 * 255 * N: < 2^31 for Cin K < 33,000).
// Padding taps and the channels past Cin hold X = x_zp and the packed weights' bytes past Cin are 0: their terms
// are 0 in the left-hand form. Integer sums are exact in any order and any split of the channels, so the outputs
// are the plain kernel's bit for bit.
//
// The weights are packed once per weight tensor (kept with it by Tensor::derived) into the words the product's
// inner loop reads, [Cout / 64][Cin / 4][K][64 output channels] words of 4 input channels' W' (both rounded up;
// bytes past Cout or Cin are 0), then sum W' per output channel: staging a tile's weights is a straight copy.
constexpr const char* kConvIntegerPack = NN_WGSL_INDEX R"(
struct P { cout: u32, cin: u32, kernel: u32, cwords: u32, words: u32, signed_w: u32, pad0: u32, pad1: u32 };
@group(0) @binding(0) var<uniform> p: P;
@group(0) @binding(1) var<storage, read> w: array<u32>;
@group(0) @binding(2) var<storage, read_write> wp: array<u32>;
fn wbyte(i: u32) -> u32 {
  let v = (w[i / 4u] >> (8u * (i % 4u))) & 255u;
  return select(v, v ^ 128u, p.signed_w != 0u);  // int8 w + 128 as an unsigned byte
}
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) g: vec3<u32>) {
  let i = index(g);
  if (i < p.words) {
    let r = i / 64u;  // (oc tile ceil(Cin / 4) + channel word) K + tap
    let k = r % p.kernel;
    let cw = (r / p.kernel) % p.cwords;
    let oc = (r / p.kernel / p.cwords) * 64u + i % 64u;
    var word = 0u;
    for (var j = 0u; j < 4u; j++) {
      let ci = 4u * cw + j;
      if (oc < p.cout && ci < p.cin) { word |= wbyte((oc * p.cin + ci) * p.kernel + k) << (8u * j); }
    }
    wp[i] = word;
  } else if (i < p.words + p.cout) {
    let oc = i - p.words;
    var s = 0u;
    for (var e = 0u; e < p.cin * p.kernel; e++) { s += wbyte(oc * p.cin * p.kernel + e); }
    wp[i] = s;
  }
}
)";

// The product. A workgroup of 256 owns 128 positions x 64 output channels (of one split of the input channels,
// below); thread (og = lid / 32, pl = lid % 32) owns positions pl + 32 j (j < 4) x output channels 8 og .. 8 og + 7:
// 32 i32 sums in registers. Per stage of 16 input channels the workgroup stages 4 channel words of x (x comes
// quantized in words of 4 channels at one position, kQuantize's second layout; 128 + (K - 1) dilation <= 192
// positions a word, x_zp outside x) and the tile's packed weights (4 K x 64 words, one contiguous run) in
// workgroup memory (14.8 KB of WebGPU's 16 KB). The time is then the inner step, per (channel word, tap): 4 x
// loads (consecutive across a warp: no bank conflict), 2 vec4 weight loads (one address across a warp: a
// broadcast) and 36 dot4s (32 products and the 4 positions' sum X for the w_zp' term): 6 workgroup loads per 36
// dot4s, where a stage's staging (its 4 K steps) costs a thread 3 x words and K / 4 vec4 copies. Where the tiles
// are few (the decoder's T ~ 390 x 1,024 channels: 64 tiles, against 132 SMs on an H100) the channel words are
// split over up to 8 workgroups (p.splits, in whole stages), each writing its partial integer sums, and
// kConvIntegerSplitSum adds them and finishes as this kernel does with one split.
constexpr const char* kConvIntegerDot4 = NN_WGSL_DIV_RN R"(
struct P { cout: u32, out_len: u32, kernel: u32, length: u32, padding: u32, dilation: u32, t_tiles: u32,
           oc_tiles: u32, cwords: u32, split_words: u32, splits: u32, w_zp: i32, w_scale: f32, has_bias: u32,
           pad0: u32, pad1: u32 };
@group(0) @binding(0) var<uniform> p: P;
@group(0) @binding(1) var<storage, read> xq: array<u32>;
@group(0) @binding(2) var<storage, read> qp: array<f32>;
@group(0) @binding(3) var<storage, read> wp: array<vec4<u32>>;
@group(0) @binding(4) var<storage, read> bias: array<f32>;
@group(0) @binding(5) var<storage, read_write> out: array<u32>;  // y's f32 bits, or i32 partials [splits, Cout, T]
var<workgroup> xs: array<u32, 768>;        // [4 channel words][192 positions]
var<workgroup> ws: array<vec4<u32>, 704>;  // [4 channel words][kernel <= 11][16]: output channels 4q .. 4q + 3
var<workgroup> base: array<i32, 64>;       // N x_zp w_zp' - x_zp sum W' per output channel of the tile
var<workgroup> bq: array<f32, 64>;         // floor(bias / step) per output channel (26 steps of div_rn: once)
fn d4(a: u32, b: u32) -> i32 { return i32(dot4U8Packed(a, b)); }
// acc: output channels oc0 + c .. oc0 + c + 3 at position t.
fn put(acc: vec4<i32>, oc0: u32, c: u32, t: u32, sx: i32, split: u32) {
  if (t >= p.out_len) { return; }
  let step = qp[0] * p.w_scale;
  for (var q = 0u; q < 4u; q++) {
    let oc = oc0 + c + q;
    if (oc >= p.cout) { return; }
    let s = acc[q] - p.w_zp * sx;
    if (p.splits > 1u) {
      out[(split * p.cout + oc) * p.out_len + t] = bitcast<u32>(s);
    } else {
      var v = f32(s + base[c + q]) * step;
      if (p.has_bias != 0u) { v += bq[c + q] * step; }
      out[oc * p.out_len + t] = bitcast<u32>(v);
    }
  }
}
@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let wg = wid.x + wid.y * 65535u;
  if (wg >= p.t_tiles * p.oc_tiles * p.splits) { return; }
  let t0 = (wg % p.t_tiles) * 128u;
  let ot = (wg / p.t_tiles) % p.oc_tiles;
  let split = wg / (p.t_tiles * p.oc_tiles);
  let pl = lid % 32u;
  let og = lid / 32u;
  let xzp = u32(qp[1]);
  let ones = 0x01010101u;
  let kw = 16u * p.kernel;  // vec4s of packed weights per channel word of a tile
  if (lid < 64u && p.splits == 1u) {
    let oc = ot * 64u + lid;
    var sw = 0i;
    var b = 0.0;
    if (oc < p.cout) {
      sw = bitcast<i32>(wp[p.oc_tiles * p.cwords * kw + oc / 4u][oc % 4u]);
      if (p.has_bias != 0u) { b = floor(div_rn(bias[oc], qp[0] * p.w_scale)); }
    }
    base[lid] = i32(4u * p.cwords * p.kernel) * i32(xzp) * p.w_zp - i32(xzp) * sw;
    bq[lid] = b;
  }
  let span = 128u + (p.kernel - 1u) * p.dilation;
  let c_begin = split * p.split_words;
  let c_end = min(p.cwords, c_begin + p.split_words);
  var a0 = vec4<i32>(0);
  var a1 = vec4<i32>(0);
  var a2 = vec4<i32>(0);
  var a3 = vec4<i32>(0);
  var b0 = vec4<i32>(0);
  var b1 = vec4<i32>(0);
  var b2 = vec4<i32>(0);
  var b3 = vec4<i32>(0);
  var sx = vec4<i32>(0);
  for (var c0 = c_begin; c0 < c_end; c0 += 4u) {
    let cn = min(4u, c_end - c0);
    workgroupBarrier();
    for (var e = lid; e < cn * 192u; e += 256u) {
      let j = e % 192u;
      let pos = i32(t0 + j) - i32(p.padding);
      var word = xzp * ones;
      if (j < span && pos >= 0 && pos < i32(p.length)) { word = xq[(c0 + e / 192u) * p.length + u32(pos)]; }
      xs[e] = word;
    }
    let wb = (ot * p.cwords + c0) * kw;
    for (var e = lid; e < cn * kw; e += 256u) { ws[e] = wp[wb + e]; }
    workgroupBarrier();
    for (var cw = 0u; cw < cn; cw++) {
      for (var k = 0u; k < p.kernel; k++) {
        let xi = cw * 192u + pl + k * p.dilation;
        let x0 = xs[xi];
        let x1 = xs[xi + 32u];
        let x2 = xs[xi + 64u];
        let x3 = xs[xi + 96u];
        let wi = (cw * p.kernel + k) * 16u + 2u * og;
        let w0 = ws[wi];
        let w1 = ws[wi + 1u];
        a0 += vec4<i32>(d4(x0, w0.x), d4(x0, w0.y), d4(x0, w0.z), d4(x0, w0.w));
        b0 += vec4<i32>(d4(x0, w1.x), d4(x0, w1.y), d4(x0, w1.z), d4(x0, w1.w));
        a1 += vec4<i32>(d4(x1, w0.x), d4(x1, w0.y), d4(x1, w0.z), d4(x1, w0.w));
        b1 += vec4<i32>(d4(x1, w1.x), d4(x1, w1.y), d4(x1, w1.z), d4(x1, w1.w));
        a2 += vec4<i32>(d4(x2, w0.x), d4(x2, w0.y), d4(x2, w0.z), d4(x2, w0.w));
        b2 += vec4<i32>(d4(x2, w1.x), d4(x2, w1.y), d4(x2, w1.z), d4(x2, w1.w));
        a3 += vec4<i32>(d4(x3, w0.x), d4(x3, w0.y), d4(x3, w0.z), d4(x3, w0.w));
        b3 += vec4<i32>(d4(x3, w1.x), d4(x3, w1.y), d4(x3, w1.z), d4(x3, w1.w));
        sx += vec4<i32>(d4(x0, ones), d4(x1, ones), d4(x2, ones), d4(x3, ones));
      }
    }
  }
  workgroupBarrier();
  let oc0 = ot * 64u;
  let c = 8u * og;
  let t = t0 + pl;
  put(a0, oc0, c, t, sx.x, split);
  put(b0, oc0, c + 4u, t, sx.x, split);
  put(a1, oc0, c, t + 32u, sx.y, split);
  put(b1, oc0, c + 4u, t + 32u, sx.y, split);
  put(a2, oc0, c, t + 64u, sx.z, split);
  put(b2, oc0, c + 4u, t + 64u, sx.z, split);
  put(a3, oc0, c, t + 96u, sx.w, split);
  put(b3, oc0, c + 4u, t + 96u, sx.w, split);
}
)";

// kConvIntegerDot4's second pass where it splits the channels: output (oc, t) adds the splits' partial sums
// (reading 4 splits bytes) and finishes with the same integer and float steps as one split does.
constexpr const char* kConvIntegerSplitSum = NN_WGSL_INDEX NN_WGSL_DIV_RN R"(
struct P { cout: u32, out_len: u32, splits: u32, terms: i32, w_zp: i32, w_scale: f32, has_bias: u32, sums_at: u32 };
@group(0) @binding(0) var<uniform> p: P;
@group(0) @binding(1) var<storage, read> qp: array<f32>;
@group(0) @binding(2) var<storage, read> wp: array<vec4<u32>>;
@group(0) @binding(3) var<storage, read> bias: array<f32>;
@group(0) @binding(4) var<storage, read> part: array<i32>;
@group(0) @binding(5) var<storage, read_write> y: array<f32>;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) g: vec3<u32>) {
  let i = index(g);
  if (i >= p.cout * p.out_len) { return; }
  let oc = i / p.out_len;
  let xzp = i32(u32(qp[1]));
  var s = p.terms * xzp * p.w_zp - xzp * bitcast<i32>(wp[p.sums_at + oc / 4u][oc % 4u]);
  for (var j = 0u; j < p.splits; j++) { s += part[j * p.cout * p.out_len + i]; }
  let step = qp[0] * p.w_scale;
  var v = f32(s) * step;
  if (p.has_bias != 0u) { v += floor_div(bias[oc], step, 1.0 / step) * step; }
  y[i] = v;
}
)";

// One step of ONNX Runtime's DynamicQuantizeLSTM: each workgroup quantizes h (the whole of it, redundantly: H is
// a few hundred) into workgroup memory, then owns 4 hidden units j: thread (g, jl, ks) sums a quarter of the k of
// gate column g H + j, sum_k (hq_k - zp_h) (w[k][col] - zp_col) (integers: exact in any split), and the unit's
// thread adds the quarters, gates = gx + sum * (h_scale * w_scale) + bias, and updates the cell. A step is a
// chain of H / 4 dependent loads per thread over H / 4 workgroups, not 4 H loads over H / 64: the step's latency
// is what the LSTMs' ~1,200 sequential dispatches add up. The state buffer holds h twice (read one half, write the
// other: p.flip) and c: [3H].
constexpr const char* kLstmInt8Step = NN_WGSL_MINMAX NN_WGSL_DIV_RN NN_WGSL_BYTES R"(
struct P { hidden: u32, t: u32, flip: u32, signed_w: u32, zp_mode: u32, w_zp: i32, pad0: u32, pad1: u32 };
@group(0) @binding(0) var<uniform> p: P;
@group(0) @binding(1) var<storage, read> gx: array<f32>;
@group(0) @binding(2) var<storage, read> w: array<u32>;
@group(0) @binding(3) var<storage, read> cols: array<f32>;
@group(0) @binding(4) var<storage, read> zps: array<u32>;
@group(0) @binding(5) var<storage, read_write> state: array<f32>;
@group(0) @binding(6) var<storage, read_write> y: array<f32>;
var<workgroup> hq: array<i32, 1024>;
var<workgroup> part: array<i32, 64>;
fn sigm(x: f32) -> f32 { return 1.0 / (1.0 + exp(-x)); }
@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let hn = p.hidden;
  let h_in = p.flip * hn;
  let h_out = (1u - p.flip) * hn;
  var lo = 0.0;
  var hi = 0.0;
  for (var k = lid; k < hn; k += 64u) { lo = min(lo, state[h_in + k]); hi = max(hi, state[h_in + k]); }
  let r = reduce_lo_hi(lo, hi, lid);
  let qv = quant_params(r.x, r.y);
  let scale = qv.x;
  for (var k = lid; k < hn; k += 64u) { hq[k] = i32(quant_u8(state[h_in + k], qv)) - i32(qv.y); }
  workgroupBarrier();
  let n = 4u * hn;
  let g = lid / 16u;
  let jl = (lid / 4u) % 4u;
  let ks = lid % 4u;
  let j = wid.x * 4u + jl;
  var acc = 0i;
  if (j < hn) {
    let col = g * hn + j;
    var wzp = p.w_zp;
    if (p.zp_mode == 1u) { wzp = sbyte(zps[col / 4u], col); }
    if (p.zp_mode == 2u) { wzp = ubyte(zps[col / 4u], col); }
    let k1 = min(hn, (ks + 1u) * ((hn + 3u) / 4u));
    for (var k = ks * ((hn + 3u) / 4u); k < k1; k++) {
      let wi = k * n + col;
      var wv = ubyte(w[wi / 4u], wi);
      if (p.signed_w != 0u) { wv = sbyte(w[wi / 4u], wi); }
      acc += hq[k] * (wv - wzp);
    }
  }
  part[lid] = acc;
  workgroupBarrier();
  if (lid >= 4u) { return; }
  let ju = wid.x * 4u + lid;
  if (ju >= hn) { return; }
  var gate: array<f32, 4>;
  for (var gi = 0u; gi < 4u; gi++) {
    let b = gi * 16u + lid * 4u;
    let sum = part[b] + part[b + 1u] + part[b + 2u] + part[b + 3u];
    let col = gi * hn + ju;
    gate[gi] = gx[p.t * n + col] + f32(sum) * (scale * cols[col]) + cols[n + col];
  }
  let c = sigm(gate[1]) * state[2u * hn + ju] + sigm(gate[0]) * tanh(clamp(gate[2], -15.0, 15.0));
  state[2u * hn + ju] = c;
  let h = sigm(gate[3]) * tanh(clamp(c, -15.0, 15.0));
  state[h_out + ju] = h;
  y[p.t * hn + ju] = h;
}
)";

// Both directions of a bidirectional LSTM in one dispatch per step (the step kernel above, workgroups
// [0, H/4) forward at t = s, [H/4, H/2) backward at t = T - 1 - s): half the sequential dispatches. gx is both
// directions' input projections [2, T, 4H], cols both [scales, bias] [2, 8H], state both [h, h, c] [2, 3H], y the
// concatenated output [T, 2H]; the weights and their zero points are bound per direction.
constexpr const char* kBiLstmInt8Step = NN_WGSL_MINMAX NN_WGSL_DIV_RN NN_WGSL_BYTES R"(
struct P { hidden: u32, s: u32, flip: u32, signed_w: u32, zp_mode: u32, w_zp_f: i32, w_zp_b: i32, steps: u32 };
@group(0) @binding(0) var<uniform> p: P;
@group(0) @binding(1) var<storage, read> gx: array<f32>;
@group(0) @binding(2) var<storage, read> w_f: array<u32>;
@group(0) @binding(3) var<storage, read> w_b: array<u32>;
@group(0) @binding(4) var<storage, read> cols: array<f32>;
@group(0) @binding(5) var<storage, read> zps_f: array<u32>;
@group(0) @binding(6) var<storage, read> zps_b: array<u32>;
@group(0) @binding(7) var<storage, read_write> state: array<f32>;
@group(0) @binding(8) var<storage, read_write> y: array<f32>;
var<workgroup> hq: array<i32, 1024>;
var<workgroup> part: array<i32, 64>;
fn sigm(x: f32) -> f32 { return 1.0 / (1.0 + exp(-x)); }
fn wword(dir: u32, i: u32) -> u32 { if (dir == 0u) { return w_f[i]; } return w_b[i]; }
fn zword(dir: u32, i: u32) -> u32 { if (dir == 0u) { return zps_f[i]; } return zps_b[i]; }
@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let hn = p.hidden;
  let wpd = (hn + 3u) / 4u;
  let dir = wid.x / wpd;
  let wl = wid.x % wpd;
  let t = select(p.s, p.steps - 1u - p.s, dir == 1u);
  let sb = dir * 3u * hn;
  let h_in = sb + p.flip * hn;
  let h_out = sb + (1u - p.flip) * hn;
  var lo = 0.0;
  var hi = 0.0;
  for (var k = lid; k < hn; k += 64u) { lo = min(lo, state[h_in + k]); hi = max(hi, state[h_in + k]); }
  let r = reduce_lo_hi(lo, hi, lid);
  let qv = quant_params(r.x, r.y);
  let scale = qv.x;
  for (var k = lid; k < hn; k += 64u) { hq[k] = i32(quant_u8(state[h_in + k], qv)) - i32(qv.y); }
  workgroupBarrier();
  let n = 4u * hn;
  let g = lid / 16u;
  let jl = (lid / 4u) % 4u;
  let ks = lid % 4u;
  let j = wl * 4u + jl;
  var acc = 0i;
  if (j < hn) {
    let col = g * hn + j;
    var wzp = select(p.w_zp_f, p.w_zp_b, dir == 1u);
    if (p.zp_mode == 1u) { wzp = sbyte(zword(dir, col / 4u), col); }
    if (p.zp_mode == 2u) { wzp = ubyte(zword(dir, col / 4u), col); }
    let k1 = min(hn, (ks + 1u) * ((hn + 3u) / 4u));
    for (var k = ks * ((hn + 3u) / 4u); k < k1; k++) {
      let wi = k * n + col;
      var wv = ubyte(wword(dir, wi / 4u), wi);
      if (p.signed_w != 0u) { wv = sbyte(wword(dir, wi / 4u), wi); }
      acc += hq[k] * (wv - wzp);
    }
  }
  part[lid] = acc;
  workgroupBarrier();
  if (lid >= 4u) { return; }
  let ju = wl * 4u + lid;
  if (ju >= hn) { return; }
  let cb = dir * 2u * n;
  var gate: array<f32, 4>;
  for (var gi = 0u; gi < 4u; gi++) {
    let b = gi * 16u + lid * 4u;
    let sum = part[b] + part[b + 1u] + part[b + 2u] + part[b + 3u];
    let col = gi * hn + ju;
    gate[gi] = gx[(dir * p.steps + t) * n + col] + f32(sum) * (scale * cols[cb + col]) + cols[cb + n + col];
  }
  let c = sigm(gate[1]) * state[sb + 2u * hn + ju] + sigm(gate[0]) * tanh(clamp(gate[2], -15.0, 15.0));
  state[sb + 2u * hn + ju] = c;
  let h = sigm(gate[3]) * tanh(clamp(c, -15.0, 15.0));
  state[h_out + ju] = h;
  y[t * 2u * hn + dir * hn + ju] = h;
}
)";

// A whole bidirectional int8 LSTM in one dispatch (H <= 256): workgroup d runs direction d's steps in order
// (forward t = 0 .. T - 1, backward T - 1 .. 0) with h in workgroup memory and each unit's c in its thread, so
// the per-step kernel's dispatch per step (~30 us each on an H200, most of it launch and a cold start) becomes
// a few workgroup barriers. Per step: h's range (a tree over the NT threads), h quantized as the step kernel does
// it, then thread (g, ks) sums columns 16 g .. 16 g + 15 over the part ks of the k (NT / 64 parts), sum_k hq_k (w[k][col] -
// zp_col) (one word load gives 4 columns; integers, exact in any split), added in workgroup atomics; unit j's
// thread then forms the gates, the cell and h with the step kernel's float expressions (its outputs bit for bit).
// Bindings as the step kernel's less the state (h0 = c0 = 0).
// NT threads a workgroup (256, or 512 where the device allows: a chain of H / 8 rows a thread instead of H / 4),
// prefixed as a WGSL const by the host, with skip(): always false, or, as the grid kernel's fallback, true unless
// the grid kernel before it left its failure mark (kLstmFallbackGuard).
constexpr const char* kBiLstmInt8Seq = NN_WGSL_DIV_RN NN_WGSL_BYTES R"(
const KS: u32 = NT / 64u;  // k splits
struct P { hidden: u32, steps: u32, signed_w: u32, zp_mode: u32, w_zp_f: i32, w_zp_b: i32, pad0: u32, pad1: u32 };
@group(0) @binding(0) var<uniform> p: P;
@group(0) @binding(1) var<storage, read> gx: array<f32>;
@group(0) @binding(2) var<storage, read> w_f: array<u32>;
@group(0) @binding(3) var<storage, read> w_b: array<u32>;
@group(0) @binding(4) var<storage, read> cols: array<f32>;
@group(0) @binding(5) var<storage, read> zps_f: array<u32>;
@group(0) @binding(6) var<storage, read> zps_b: array<u32>;
@group(0) @binding(7) var<storage, read_write> y: array<f32>;
var<workgroup> hs: array<f32, 256>;
var<workgroup> hq: array<i32, 256>;
var<workgroup> lo_s: array<f32, NT>;
var<workgroup> hi_s: array<f32, NT>;
var<workgroup> sums: array<atomic<i32>, 1024>;
fn sigm(x: f32) -> f32 { return 1.0 / (1.0 + exp(-x)); }
fn wword(dir: u32, i: u32) -> u32 { if (dir == 0u) { return w_f[i]; } return w_b[i]; }
fn zword(dir: u32, i: u32) -> u32 { if (dir == 0u) { return zps_f[i]; } return zps_b[i]; }
fn col_zp(dir: u32, col: u32) -> i32 {
  if (p.zp_mode == 1u) { return sbyte(zword(dir, col / 4u), col); }
  if (p.zp_mode == 2u) { return ubyte(zword(dir, col / 4u), col); }
  return select(p.w_zp_f, p.w_zp_b, dir == 1u);
}
// The 4 weights of word i (columns 4 (i mod H) .. + 3 of its row).
fn wvec(dir: u32, i: u32) -> vec4<i32> {
  return unpack(wword(dir, i));
}
fn unpack(word: u32) -> vec4<i32> {
  if (p.signed_w != 0u) {
    let v = bitcast<i32>(word);
    return vec4<i32>(extractBits(v, 0u, 8u), extractBits(v, 8u, 8u), extractBits(v, 16u, 8u), extractBits(v, 24u, 8u));
  }
  return vec4<i32>(vec4<u32>(word & 255u, (word >> 8u) & 255u, (word >> 16u) & 255u, word >> 24u));
}
@compute @workgroup_size(NT)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  if (skip(lid)) { return; }
  let hn = p.hidden;
  let n = 4u * hn;
  let dir = wid.x;
  let cb = dir * 2u * n;
  let g = lid % 64u;
  let kq = (hn + KS - 1u) / KS;
  let k0 = (lid / 64u) * kq;
  let k1 = min(hn, k0 + kq);
  // This thread's 16 columns (words 4 g .. 4 g + 3 of a row of H words) and their zero points.
  var wz: array<vec4<i32>, 4>;
  for (var i = 0u; i < 4u; i++) {
    let c = 16u * g + 4u * i;
    if (c < n) { wz[i] = vec4<i32>(col_zp(dir, c), col_zp(dir, c + 1u), col_zp(dir, c + 2u), col_zp(dir, c + 3u)); }
  }
  if (lid < hn) { hs[lid] = 0.0; }
  for (var e = lid; e < n; e += NT) { atomicStore(&sums[e], 0); }
  var cell = 0.0;
  workgroupBarrier();
  for (var s = 0u; s < p.steps; s++) {
    let t = select(s, p.steps - 1u - s, dir == 1u);
    var lo = 0.0;
    var hi = 0.0;
    if (lid < hn) { lo = min(lo, hs[lid]); hi = max(hi, hs[lid]); }
    lo_s[lid] = lo;
    hi_s[lid] = hi;
    workgroupBarrier();
    for (var st = NT / 2u; st > 0u; st >>= 1u) {
      if (lid < st) { lo_s[lid] = min(lo_s[lid], lo_s[lid + st]); hi_s[lid] = max(hi_s[lid], hi_s[lid + st]); }
      workgroupBarrier();
    }
    let rlo = lo_s[0];
    let rhi = hi_s[0];
    let qv = quant_params(rlo, rhi);
    let scale = qv.x;
    if (lid < hn) { hq[lid] = i32(quant_u8(hs[lid], qv)) - i32(qv.y); }
    workgroupBarrier();
    var a0 = vec4<i32>(0);
    var a1 = vec4<i32>(0);
    var a2 = vec4<i32>(0);
    var a3 = vec4<i32>(0);
    var sh = 0i;
    let wb = 4u * g;
    if (wb < hn) {
      var k = k0;
      if (wb + 4u <= hn) {
        // Two rows at a time, their 8 loads issued before the arithmetic: the loop is a chain of L2 latencies.
        for (; k + 2u <= k1; k += 2u) {
          let row = k * hn + wb;
          let u0 = wword(dir, row);
          let u1 = wword(dir, row + 1u);
          let u2 = wword(dir, row + 2u);
          let u3 = wword(dir, row + 3u);
          let v0 = wword(dir, row + hn);
          let v1 = wword(dir, row + hn + 1u);
          let v2 = wword(dir, row + hn + 2u);
          let v3 = wword(dir, row + hn + 3u);
          let hu = hq[k];
          let hv = hq[k + 1u];
          sh += hu + hv;
          a0 += hu * unpack(u0) + hv * unpack(v0);
          a1 += hu * unpack(u1) + hv * unpack(v1);
          a2 += hu * unpack(u2) + hv * unpack(v2);
          a3 += hu * unpack(u3) + hv * unpack(v3);
        }
      }
      for (; k < k1; k++) {
        let hv = hq[k];
        let row = k * hn + wb;
        sh += hv;
        a0 += hv * wvec(dir, row);
        if (wb + 1u < hn) { a1 += hv * wvec(dir, row + 1u); }
        if (wb + 2u < hn) { a2 += hv * wvec(dir, row + 2u); }
        if (wb + 3u < hn) { a3 += hv * wvec(dir, row + 3u); }
      }
      var acc = array<vec4<i32>, 4>(a0 - wz[0] * sh, a1 - wz[1] * sh, a2 - wz[2] * sh, a3 - wz[3] * sh);
      for (var i = 0u; i < 4u; i++) {
        if (wb + i >= hn) { break; }
        for (var j = 0u; j < 4u; j++) { atomicAdd(&sums[16u * g + 4u * i + j], acc[i][j]); }
      }
    }
    // Every step's sums cleared by the lanes that read them, before the next step's adds (two barriers on).
    workgroupBarrier();
    if (lid < hn) {
      var gate: array<f32, 4>;
      for (var gi = 0u; gi < 4u; gi++) {
        let col = gi * hn + lid;
        let sum = atomicLoad(&sums[col]);
        atomicStore(&sums[col], 0);
        gate[gi] = gx[(dir * p.steps + t) * n + col] + f32(sum) * (scale * cols[cb + col]) + cols[cb + n + col];
      }
      cell = sigm(gate[1]) * cell + sigm(gate[0]) * tanh(clamp(gate[2], -15.0, 15.0));
      let h = sigm(gate[3]) * tanh(clamp(cell, -15.0, 15.0));
      hs[lid] = h;
      y[t * 2u * hn + dir * hn + lid] = h;
    }
    workgroupBarrier();
  }
}
)";

constexpr const char* kLstmSeqPlain = "fn skip(lid: u32) -> bool { return false; }\n";
constexpr const char* kLstmFallbackGuard = R"(
@group(0) @binding(8) var<storage, read> mark: array<u32>;
var<workgroup> mark_s: u32;
fn skip(lid: u32) -> bool {
  if (lid == 0u) { mark_s = mark[0]; }
  return workgroupUniformLoad(&mark_s) == 0u;
}
)";

// The bidirectional int8 LSTM over 2 G workgroups (G a direction), natively where every workgroup of the grid
// is resident: the one-workgroup kernel above spends ~17 us a step on an H100 re-reading the whole recurrent
// weight (4 H x H bytes: 256 KB at H = 256) from L2 through one SM. Here workgroup w of a direction owns units
// [w U, w U + U) with all 4 gates of each (4 U columns), so the cell and h stay in the unit's thread; its
// columns' weights (4 U H bytes: 16 KB at G = 16) are loaded once into registers (WR words a thread: KS k
// splits of KQ rows x CPT columns, 4 rows a word) and a step reads no weight at all. Per step every workgroup
// reads the previous h (H floats, atomics: another workgroup wrote them in this dispatch, and NVIDIA's L1 is
// not coherent), forms its range and quantization with the one-workgroup kernel's float expressions (the same
// scale, zero point and hq everywhere), sums its columns' integer products (exact in any split), forms gates,
// cell and h as that kernel does (its outputs bit for bit), writes its h slice (atomic exchanges, for the
// next step's readers) and y, and meets the direction's others at a grid barrier (a counter per direction). A
// step is then one L2 round trip for h, the range's workgroup tree, ~KQ multiply-adds a thread and the barrier.
// The exchange buffer xch: [0] the failure mark, [1 + d] direction d's barrier count, then h [2 directions,
// 2 parities, H]. A barrier that waits past p.spin raises the mark and every workgroup leaves; the fallback
// dispatch after it (the one-workgroup kernel with kLstmFallbackGuard) then runs the whole LSTM again.
// Host constants (prefixed): H, U, G, KS, KW (KQ / 4), CPT, NCT (columns a pass: min(4 U, NT)), SIGNED.
constexpr const char* kBiLstmInt8Grid = NN_WGSL_DIV_RN R"(
const NT = 256u;
const N = 4u * H;
const NC = 4u * U;
const KQ = 4u * KW;
const HQ = KS * KW;
const WR = CPT * KW;
struct P { steps: u32, zp_mode: u32, w_zp_f: i32, w_zp_b: i32, spin: u32, pad0: u32, pad1: u32, pad2: u32 };
@group(0) @binding(0) var<uniform> p: P;
@group(0) @binding(1) var<storage, read> gx: array<f32>;
@group(0) @binding(2) var<storage, read> w_f: array<u32>;
@group(0) @binding(3) var<storage, read> w_b: array<u32>;
@group(0) @binding(4) var<storage, read> cols: array<f32>;
@group(0) @binding(5) var<storage, read> zps_f: array<u32>;
@group(0) @binding(6) var<storage, read> zps_b: array<u32>;
@group(0) @binding(7) var<storage, read_write> y: array<f32>;
@group(0) @binding(8) var<storage, read_write> xch: array<atomic<u32>>;
var<workgroup> hs: array<f32, H>;
var<workgroup> hq4: array<vec4<i32>, HQ>;
var<workgroup> lo_s: array<f32, NT>;
var<workgroup> hi_s: array<f32, NT>;
var<workgroup> part: array<i32, KS * NC>;
var<workgroup> stop: u32;
var<private> landed: u32;
fn sigm(x: f32) -> f32 { return 1.0 / (1.0 + exp(-x)); }
fn wword(dir: u32, i: u32) -> u32 { if (dir == 0u) { return w_f[i]; } return w_b[i]; }
fn zword(dir: u32, i: u32) -> u32 { if (dir == 0u) { return zps_f[i]; } return zps_b[i]; }
fn col_zp(dir: u32, col: u32) -> i32 {
  if (p.zp_mode == 1u) { return extractBits(bitcast<i32>(zword(dir, col / 4u)), 8u * (col % 4u), 8u); }
  if (p.zp_mode == 2u) { return i32((zword(dir, col / 4u) >> (8u * (col % 4u))) & 255u); }
  return select(p.w_zp_f, p.w_zp_b, dir == 1u);
}
fn unpack(word: u32) -> vec4<i32> {
  if (SIGNED) {
    let v = bitcast<i32>(word);
    return vec4<i32>(extractBits(v, 0u, 8u), extractBits(v, 8u, 8u), extractBits(v, 16u, 8u), extractBits(v, 24u, 8u));
  }
  return vec4<i32>(vec4<u32>(word & 255u, (word >> 8u) & 255u, (word >> 16u) & 255u, word >> 24u));
}
fn h_at(dir: u32, parity: u32) -> u32 { return 3u + (2u * dir + parity) * H; }
// The direction's grid barrier: false where it waited past the spin limit or saw the mark another raised.
fn grid_barrier(lid: u32, dir: u32, arrivals: u32) -> bool {
  // The h exchanges' old values consumed: the stores have landed before the count moves.
  if (landed == 0x7FC00001u) { atomicAdd(&xch[0], 0u); }
  workgroupBarrier();
  storageBarrier();
  if (lid == 0u) {
    atomicAdd(&xch[1u + dir], 1u);
    var n = 0u;
    var gave_up = 0u;
    loop {
      if (atomicLoad(&xch[1u + dir]) >= arrivals) { break; }
      n += 1u;
      if ((n & 255u) == 0u && atomicLoad(&xch[0]) != 0u) { gave_up = 1u; break; }
      if (n > p.spin) { atomicStore(&xch[0], 1u); gave_up = 1u; break; }
    }
    stop = gave_up;
  }
  return workgroupUniformLoad(&stop) == 0u;
}
@compute @workgroup_size(NT)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  if (lid == 0u) { stop = atomicLoad(&xch[0]); }
  if (workgroupUniformLoad(&stop) != 0u) { return; }
  let dir = wid.x / G;
  let j0 = (wid.x % G) * U;
  let cb = dir * 2u * N;
  // This thread's columns lc = lid % NCT + NCT c (c < CPT) of the 4 U (lc = gate U + unit) over rows
  // [KQ ks, KQ ks + KQ), their bytes 4 rows a word.
  let ks = lid / NCT;
  let k0 = ks * KQ;
  var wr: array<u32, WR>;
  var wz: array<i32, CPT>;
  for (var c = 0u; c < CPT; c++) {
    let lc = lid % NCT + NCT * c;
    let j = j0 + lc % U;
    if (ks >= KS || lc >= NC || j >= H) { continue; }
    let col = (lc / U) * H + j;
    wz[c] = col_zp(dir, col);
    for (var i = 0u; i < KW; i++) {
      var word = 0u;
      for (var b = 0u; b < 4u; b++) {
        let k = k0 + 4u * i + b;
        if (k < H) {
          let wi = k * N + col;
          word |= ((wword(dir, wi / 4u) >> (8u * (wi % 4u))) & 255u) << (8u * b);
        }
      }
      wr[c * KW + i] = word;
    }
  }
  // Unit threads: unit j's 4 gate columns' scales and biases, and its cell.
  let ju = j0 + lid;
  let unit = lid < U && ju < H;
  var cs = vec4<f32>(0.0);
  var bs = vec4<f32>(0.0);
  if (unit) {
    for (var gi = 0u; gi < 4u; gi++) {
      cs[gi] = cols[cb + gi * H + ju];
      bs[gi] = cols[cb + N + gi * H + ju];
    }
  }
  var cell = 0.0;
  for (var s = 0u; s < p.steps; s++) {
    let t = select(s, p.steps - 1u - s, dir == 1u);
    // The step's input gates first: they depend on nothing this step computes.
    var gxs = vec4<f32>(0.0);
    if (unit) {
      for (var gi = 0u; gi < 4u; gi++) { gxs[gi] = gx[(dir * p.steps + t) * N + gi * H + ju]; }
    }
    var lo = 0.0;
    var hi = 0.0;
    if (lid < H) {
      var hv = 0.0;
      if (s > 0u) { hv = bitcast<f32>(atomicLoad(&xch[h_at(dir, s % 2u) + lid])); }
      hs[lid] = hv;
      lo = min(lo, hv);
      hi = max(hi, hv);
    }
    lo_s[lid] = lo;
    hi_s[lid] = hi;
    workgroupBarrier();
    for (var st = NT / 2u; st > 0u; st >>= 1u) {
      if (lid < st) { lo_s[lid] = min(lo_s[lid], lo_s[lid + st]); hi_s[lid] = max(hi_s[lid], hi_s[lid + st]); }
      workgroupBarrier();
    }
    let rlo = lo_s[0];
    let rhi = hi_s[0];
    let qv = quant_params(rlo, rhi);
    let scale = qv.x;
    if (lid < HQ) {
      var q = vec4<i32>(0);
      for (var b = 0u; b < 4u; b++) {
        let k = 4u * lid + b;
        if (k < H) { q[b] = i32(quant_u8(hs[k], qv)) - i32(qv.y); }
      }
      hq4[lid] = q;
    }
    workgroupBarrier();
    if (ks < KS) {
      var sh = 0i;
      for (var i = 0u; i < KW; i++) {
        let q = hq4[ks * KW + i];
        sh += q.x + q.y + q.z + q.w;
      }
      for (var c = 0u; c < CPT; c++) {
        let lc = lid % NCT + NCT * c;
        if (lc >= NC) { break; }
        var acc = 0i;
        for (var i = 0u; i < KW; i++) { acc += dot(hq4[ks * KW + i], unpack(wr[c * KW + i])); }
        part[ks * NC + lc] = acc - wz[c] * sh;
      }
    }
    workgroupBarrier();
    if (unit) {
      var gate: array<f32, 4>;
      for (var gi = 0u; gi < 4u; gi++) {
        var sum = 0i;
        for (var q = 0u; q < KS; q++) { sum += part[q * NC + gi * U + lid]; }
        gate[gi] = gxs[gi] + f32(sum) * (scale * cs[gi]) + bs[gi];
      }
      cell = sigm(gate[1]) * cell + sigm(gate[0]) * tanh(clamp(gate[2], -15.0, 15.0));
      let h = sigm(gate[3]) * tanh(clamp(cell, -15.0, 15.0));
      landed ^= atomicExchange(&xch[h_at(dir, (s + 1u) % 2u) + ju], bitcast<u32>(h));
      y[t * 2u * H + dir * H + ju] = h;
    }
    if (s + 1u < p.steps) {
      if (!grid_barrier(lid, dir, (s + 1u) * G)) { return; }
    }
  }
}
)";

// Zeroes the grid kernel's failure mark and barrier counts before it runs.
constexpr const char* kBiLstmGridReset = R"(
struct P { n: u32, pad0: u32, pad1: u32, pad2: u32 };
@group(0) @binding(0) var<uniform> p: P;
@group(0) @binding(1) var<storage, read_write> xch: array<u32>;
@compute @workgroup_size(64)
fn main(@builtin(local_invocation_index) lid: u32) {
  if (lid < p.n) { xch[lid] = 0u; }
}
)";

// sine_source, stage 1: one thread per harmonic runs the export's cumulative phase over the frames in its float
// order (the phase reaches 10^4..10^5 rad: its low bits are the CumSum's, not a tidier sum's).
constexpr const char* kSinePhase = NN_WGSL_DIV_RN R"(
struct P { n: u32, harmonics: u32, upsample: u32, rate: f32 };
@group(0) @binding(0) var<uniform> p: P;
@group(0) @binding(1) var<storage, read> f: array<f32>;
@group(0) @binding(2) var<storage, read_write> phase: array<f32>;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) g: vec3<u32>) {
  let h = g.x;
  if (h >= p.harmonics) { return; }
  var cumulative = 0.0;
  for (var j = 0u; j < p.n; j++) {
    let v = div_rn(f[j] * f32(h + 1u), p.rate);
    cumulative += v - floor(v);
    phase[h * p.n + j] = ((cumulative * 2.0) * 3.14159274101257324) * f32(p.upsample);
  }
}
)";

// sine_source, stage 2: per (sample, harmonic) the linear (half-pixel) upsampling of the phase and its sine. The
// phase is reduced by 2 pi in two parts (Cody-Waite: 6.28125 has 8 bits, so k * 6.28125 is exact for k < 2^16)
// before WGSL's sin, which is specified on [-pi, pi] only.
constexpr const char* kSineSamples = NN_WGSL_INDEX NN_WGSL_DIV_RN R"(
struct P { n: u32, harmonics: u32, upsample: u32, samples: u32, amplitude: f32, threshold: f32, pad0: u32, pad1: u32 };
@group(0) @binding(0) var<uniform> p: P;
@group(0) @binding(1) var<storage, read> f: array<f32>;
@group(0) @binding(2) var<storage, read> phase: array<f32>;
@group(0) @binding(3) var<storage, read_write> y: array<f32>;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) g: vec3<u32>) {
  let o = index(g);
  if (o >= p.samples * p.harmonics) { return; }
  let s = o / p.harmonics;
  let h = o % p.harmonics;
  var x = div_rn(f32(s) + 0.5, f32(p.upsample)) - 0.5;
  x = min(max(x, 0.0), f32(p.n - 1u));
  let i0 = u32(x);
  var i1 = p.n - 1u;
  if (i0 + 1u < p.n) { i1 = i0 + 1u; }
  var w0 = abs(x - f32(i1));
  var w1 = abs(x - f32(i0));
  if (i0 == i1) { w0 = 0.5; w1 = 0.5; }
  let value = w0 * phase[h * p.n + i0] + w1 * phase[h * p.n + i1];
  let k = round(value * 0.15915494309189535);
  let r = (value - k * 6.28125) - k * 0.0019353071795864769;
  var out = 0.0;
  if (f[s / p.upsample] > p.threshold) { out = sin(r) * p.amplitude; }
  y[o] = out;
}
)";

// ONNX Runtime's STFT for a length that is no power of two (Bluestein), one frame per thread, operation for
// operation as nn/stft_onnxruntime.cpp does it, with its tables (chirp, twiddles, the filter's transform).
constexpr const char* kStftBluestein = NN_WGSL_INDEX R"(
struct P { frames: u32, n: u32, m: u32, bits: u32, hop: u32, bins: u32, pad0: u32, pad1: u32 };
@group(0) @binding(0) var<uniform> p: P;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read> win: array<f32>;
@group(0) @binding(3) var<storage, read> tables: array<vec2<f32>>;
@group(0) @binding(4) var<storage, read_write> y: array<f32>;
fn cmul(a: vec2<f32>, b: vec2<f32>) -> vec2<f32> { return vec2<f32>(a.x * b.x - a.y * b.y, a.x * b.y + a.y * b.x); }
fn rev(v: u32, bits: u32) -> u32 { return reverseBits(v) >> (32u - bits); }
fn fft(a: ptr<function, array<vec2<f32>, 64>>) {
  var o: array<vec2<f32>, 64>;
  for (var i = 0u; i < p.m; i++) { o[i] = cmul(cmul(vec2<f32>(1.0, 0.0), (*a)[rev(i, p.bits)]), vec2<f32>(1.0, 0.0)); }
  var cur = 0u;
  for (var size = 2u; size <= p.m; size <<= 1u) {
    let mid = size >> 1u;
    cur++;
    for (var k = 0u; k < mid; k++) {
      let fw = tables[p.n + rev(k, cur)];
      let sw = tables[p.n + rev(mid + k, cur)];
      for (var j = 0u; j < p.m; j += size) {
        let even = o[k + j];
        let odd = o[k + j + mid];
        o[k + j] = even + cmul(fw, odd);
        o[k + j + mid] = even + cmul(sw, odd);
      }
    }
  }
  *a = o;
}
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) g: vec3<u32>) {
  let t = index(g);
  if (t >= p.frames) { return; }
  var a: array<vec2<f32>, 64>;
  for (var k = 0u; k < p.m; k++) { a[k] = vec2<f32>(0.0, 0.0); }
  for (var k = 0u; k < p.n; k++) {
    let v = vec2<f32>(x[t * p.hop + k], 0.0) * win[k];
    a[k] = cmul(v, tables[k]);
  }
  fft(&a);
  for (var k = 0u; k < p.m; k++) { a[k] = cmul(a[k], tables[p.n + p.m + k]); }
  fft(&a);
  for (var k = 0u; k < p.bins; k++) {
    var c = a[0];
    if (k != 0u) { c = a[p.m - k]; }
    c = c / f32(p.m);
    let v = cmul(c, tables[k]) * 1.0;
    y[k * p.frames + t] = v.x;
    y[(p.bins + k) * p.frames + t] = v.y;
  }
}
)";
}  // namespace

Tensor snake(const Tensor& x, const Tensor& alpha, Tensor* range_partial) {
  GpuRecorder& rec = *x.ctx().gpu();
  if (rec.failed()) return none_on(x);
  if (x.dtype() != DType::F32 || x.rank() != 2 || !on_gpu(alpha) || alpha.dtype() != DType::F32 ||
      alpha.elements() != x.dim(0) || x.elements() == 0)
    return unsupported(x, "snake of these tensors");
  Tensor out = x.ctx().empty(x.shape());
  if (range_partial && x.elements() > kQuantizeReadsX) {
    const int64_t chunks = quant_range_chunks(x.elements());
    *range_partial = x.ctx().empty({2 * chunks});
    const uint32_t params[] = {u32(x.elements()), u32(x.dim(1)), u32(chunks), 0};
    rec.dispatch("nn_snake_range", kSnakeRange, params, {&x, &alpha, &out, range_partial},
                 static_cast<uint64_t>(chunks) * 64);
    return out;
  }
  const uint32_t params[] = {u32(x.elements()), u32(x.dim(1)), 0, 0};
  rec.dispatch("nn_snake", kSnake, params, {&x, &alpha, &out}, static_cast<uint64_t>(x.elements()));
  return out;
}

Tensor adain(const Tensor& x, const Tensor& gamma, const Tensor& beta, float eps) {
  if (!on_gpu(gamma) || !on_gpu(beta)) return unsupported(x, "adain with host gamma / beta");
  GpuRecorder& rec = *x.ctx().gpu();
  if (rec.failed()) return none_on(x);
  if (x.dtype() == DType::F32 && x.rank() == 2 && x.dim(1) < 8192 && x.elements() > 0 &&
      gamma.dtype() == DType::F32 && beta.dtype() == DType::F32 && gamma.elements() == x.dim(0) &&
      beta.elements() == x.dim(0)) {
    Tensor out = x.ctx().empty(x.shape());
    const uint32_t params[] = {u32(x.dim(0)), u32(x.dim(1)), fbits(eps), 0};
    rec.dispatch("nn_adain_rows", kAdaInRows, params, {&x, &gamma, &beta, &out},
                 static_cast<uint64_t>(x.dim(0) * 64));
    return out;
  }
  return gpu_ops::group_norm(x, static_cast<int>(x.dim(0)), gpu_ops::scale(gamma, 1.0f, 1.0f), beta, eps);
}

Tensor atan2(const Tensor& y, const Tensor& x) {
  GpuRecorder& rec = *y.ctx().gpu();
  if (rec.failed()) return none_on(y);
  if (y.dtype() != DType::F32 || !on_gpu(x) || x.dtype() != DType::F32 || !(x.shape() == y.shape()))
    return unsupported(y, "atan2 of these tensors");
  Tensor out = y.ctx().empty(y.shape());
  const uint32_t params[] = {u32(y.elements()), 0, 0, 0};
  rec.dispatch("nn_atan2", kAtan2, params, {&y, &x, &out}, static_cast<uint64_t>(y.elements()));
  return out;
}

Tensor resize(const Tensor& x, int64_t length, ResizeMode mode) {
  GpuRecorder& rec = *x.ctx().gpu();
  if (rec.failed()) return none_on(x);
  if (x.dtype() != DType::F32 || x.elements() == 0 || length < 1)
    return unsupported(x, "resize of this tensor");
  const int64_t in_len = x.dim(-1), rows = x.elements() / in_len;
  // The same (i0, i1, w1) as the CPU op computes in double, uploaded (3 floats per output position).
  std::vector<float> table(static_cast<size_t>(3 * length));
  for (int64_t d = 0; d < length; ++d) {
    const auto [i0, i1, w1] = resize_source(d, in_len, length, mode);
    table[static_cast<size_t>(3 * d)] = static_cast<float>(i0);
    table[static_cast<size_t>(3 * d + 1)] = static_cast<float>(i1);
    table[static_cast<size_t>(3 * d + 2)] = w1;
  }
  const Tensor t = x.ctx().from_floats({3 * length}, table);
  Shape shape = x.shape();
  shape[-1] = length;
  Tensor out = x.ctx().empty(shape);
  const uint32_t params[] = {u32(rows * length), u32(in_len), u32(length), 0};
  rec.dispatch("nn_resize", kResize, params, {&x, &t, &out}, static_cast<uint64_t>(rows * length));
  return out;
}

Tensor repeat_by_durations(const Tensor& x, std::span<const int64_t> reps) {
  GpuRecorder& rec = *x.ctx().gpu();
  if (rec.failed()) return none_on(x);
  if (x.dtype() != DType::F32 || x.rank() != 2 || static_cast<int64_t>(reps.size()) != x.dim(0))
    return unsupported(x, "repeat_by_durations of these tensors");
  std::vector<uint32_t> rows;
  for (size_t t = 0; t < reps.size(); ++t)
    for (int64_t k = 0; k < reps[t]; ++k) rows.push_back(static_cast<uint32_t>(t));
  const int64_t total = static_cast<int64_t>(rows.size()), cols = x.dim(1);
  Tensor out = x.ctx().empty({total, cols});
  if (total == 0) return out;
  const Tensor index = x.ctx().from_bytes({total}, DType::I32,
                                          {reinterpret_cast<const uint8_t*>(rows.data()), rows.size() * 4});
  const uint32_t params[] = {u32(total * cols), u32(cols), 0, 0};
  rec.dispatch("nn_gather_rows", kGatherRows, params, {&x, &index, &out},
               static_cast<uint64_t>(total * cols));
  return out;
}

namespace {
ConvTransposeKernel conv_transpose_kernel = ConvTransposeKernel::Auto;
}  // namespace

void set_conv_transpose_kernel(ConvTransposeKernel k) {
  conv_transpose_kernel = k;
}

Tensor conv_transpose1d(const Tensor& x, const Tensor& w, const Tensor& b, const ConvTranspose1dOptions& o,
                        int64_t out_len) {
  GpuRecorder& rec = *x.ctx().gpu();
  if (rec.failed()) return none_on(x);
  if (x.dtype() != DType::F32 || x.rank() != 2 || !on_gpu(w) || w.dtype() != DType::F32 || w.rank() != 3 ||
      w.dim(0) != x.dim(0) || o.groups < 1 || x.dim(0) % o.groups != 0 || out_len < 1 ||
      (b.defined() && (!on_gpu(b) || b.dtype() != DType::F32)))
    return unsupported(x, "conv_transpose1d of these tensors");
  const int64_t out_g = w.dim(1), cout = out_g * o.groups;
  Tensor out = x.ctx().empty({cout, out_len});
  const uint32_t params[] = {u32(cout),
                             u32(out_len),
                             u32(x.dim(0) / o.groups),
                             u32(out_g),
                             u32(w.dim(2)),
                             u32(x.dim(1)),
                             u32(o.stride),
                             u32(o.padding),
                             u32(o.dilation),
                             b.defined() ? 1u : 0u,
                             0,
                             0};
  const Tensor& bias = b.defined() ? b : w;
  const int64_t kernel = w.dim(2), cin = x.dim(0), taps_max = (kernel + o.stride - 1) / o.stride;
  const bool plain_only = o.groups != 1 || o.dilation != 1;
  if (!plain_only && taps_max <= 32 &&
      (conv_transpose_kernel == ConvTransposeKernel::Auto ||
       conv_transpose_kernel == ConvTransposeKernel::Phases)) {
    // Where the time goes (ups.0 / ups.1): Cout x out_len x Cin x K / stride multiply-adds, 1.0 G and 1.5 G.
    const ConvTransposePhaseTile& tile = cout > 16 ? kPhaseWide : kPhaseNarrow;
    const int64_t cout4 = (cout + 3) / 4;
    const Tensor wp = w.derived(kDerivedConvTransposeTapMajor, [&] {
      Tensor packed = x.ctx().empty({cin * kernel * cout4 * 4});
      const uint32_t pack[] = {u32(packed.elements()), u32(cout), u32(cout4 * 4), u32(kernel)};
      rec.dispatch("nn_conv_transpose1d_pack", kConvTransposePack, pack, {&w, &packed},
                   static_cast<uint64_t>(packed.elements()));
      return packed;
    });
    // m = (p + pad) div stride over the outputs; every phase's tiles cover the whole range (the few m past
    // either end in some phases are skipped at the store).
    const int64_t m_start = o.padding / o.stride,
                  m_count = (out_len - 1 + o.padding) / o.stride - m_start + 1;
    const int64_t m_tiles = (m_count + tile.tm - 1) / tile.tm, c_tiles = (cout + tile.tc - 1) / tile.tc;
    const int64_t ci_chunk = std::min<int64_t>(tile.ci_max, tile.rows_max / taps_max);
    const uint32_t phased[] = {u32(cout),
                               u32(out_len),
                               u32(cin),
                               u32(kernel),
                               u32(x.dim(1)),
                               u32(o.stride),
                               u32(o.padding),
                               u32(cout4),
                               u32(m_start),
                               u32(m_tiles),
                               u32(c_tiles),
                               u32(ci_chunk),
                               b.defined() ? 1u : 0u,
                               0,
                               0,
                               0};
    // Made once and kept (a static std::string's destructor would need __cxa_atexit, which wasm lacks).
    static const std::string* wide = new std::string(conv_transpose_phases_wgsl(kPhaseWide));
    static const std::string* narrow = new std::string(conv_transpose_phases_wgsl(kPhaseNarrow));
    const bool is_wide = &tile == &kPhaseWide;
    rec.dispatch(is_wide ? "nn_conv_transpose1d_phases64" : "nn_conv_transpose1d_phases4",
                 is_wide ? *wide : *narrow, phased, {&x, &wp, &bias, &out},
                 static_cast<uint64_t>(o.stride * m_tiles * c_tiles * 64));
    return out;
  }
  if (!plain_only && kernel <= 32 && conv_transpose_kernel != ConvTransposeKernel::Plain) {
    const int64_t t_tiles = (out_len + 63) / 64, c_tiles = (cout + 15) / 16;
    const uint32_t tiled[] = {u32(cout),
                              u32(out_len),
                              u32(x.dim(0)),
                              u32(kernel),
                              u32(x.dim(1)),
                              u32(o.stride),
                              u32(o.padding),
                              u32(t_tiles),
                              b.defined() ? 1u : 0u,
                              0,
                              0,
                              0};
    rec.dispatch("nn_conv_transpose1d_tiled", kConvTransposeTiled, tiled, {&x, &w, &bias, &out},
                 static_cast<uint64_t>(t_tiles * c_tiles * 64));
    return out;
  }
  rec.dispatch("nn_conv_transpose1d", kConvTranspose, params, {&x, &w, &bias, &out},
               static_cast<uint64_t>(cout * out_len));
  return out;
}

Tensor matmul(const Tensor& a, const Tensor& b) {
  GpuRecorder& rec = *a.ctx().gpu();
  if (rec.failed()) return none_on(a);
  if (a.dtype() != DType::F32 || !on_gpu(b) || b.dtype() != DType::F32 || a.rank() < 2 || b.rank() < 2 ||
      a.dim(-1) != b.dim(-2) || a.elements() == 0)
    return unsupported(a, "matmul of these tensors");
  const int64_t m = a.dim(-2), k = a.dim(-1), n = b.dim(-1), batches = a.elements() / (m * k);
  const bool shared = b.rank() == 2;
  if (!shared && b.elements() != batches * k * n) return unsupported(a, "matmul of these tensors");
  Shape shape = a.shape();
  shape[-1] = n;
  Tensor out = a.ctx().empty(shape);
  const uint32_t params[] = {u32(batches), u32(m), u32(k), u32(n), shared ? 1u : 0u, 0, 0, 0};
  rec.dispatch("nn_matmul", kMatmul, params, {&a, &b, &out}, static_cast<uint64_t>(batches * m * n));
  return out;
}

namespace {

// DynamicQuantizeLinear on the GPU in two dispatches; channel_words: the packed ConvInteger's layout (x [C, T]
// as [C / 4 rounded up, T] words of 4 channels).
Tensor quantize_dynamic(const Tensor& x, Tensor* params, bool channel_words, const Tensor* range_partial) {
  GpuRecorder& rec = *x.ctx().gpu();
  if (rec.failed()) return none_on(x);
  if (x.dtype() != DType::F32 || x.elements() == 0 || (channel_words && x.rank() != 2))
    return unsupported(x, "dynamic_quantize_linear of this tensor");
  Context& ctx = x.ctx();
  const int64_t n = x.elements();
  const int64_t chunks = quant_range_chunks(n);
  const bool small = n <= kQuantizeReadsX;
  Tensor partial = range_partial && !small ? *range_partial : ctx.empty({2 * chunks});
  if (partial.elements() != 2 * chunks)
    return unsupported(x, "a range of other chunks for this quantization");
  Tensor qp = ctx.empty({4});
  const uint32_t p0[] = {u32(n), u32(chunks), 0, 0};
  if (!small && !range_partial)
    rec.dispatch("nn_quant_range", kQuantRange, p0, {&x, &partial}, static_cast<uint64_t>(chunks) * 64);
  const int64_t length = channel_words ? x.dim(1) : 0, channels = channel_words ? x.dim(0) : 0;
  const int64_t words = channel_words ? (channels + 3) / 4 * length : (n + 3) / 4;
  Tensor q = channel_words ? ctx.empty({4 * words}, DType::U8) : ctx.empty(x.shape(), DType::U8);
  const uint32_t p1[] = {u32(n), small ? 0u : u32(chunks), u32(length), u32(channels)};
  rec.dispatch("nn_quantize", kQuantize, p1, {&x, &partial, &qp, &q}, static_cast<uint64_t>(words));
  if (params) *params = qp;
  return q;
}

}  // namespace

Tensor dynamic_quantize_linear(const Tensor& x, Tensor* params) {
  return quantize_dynamic(x, params, false, nullptr);
}

namespace {
MatmulIntegerKernel matmul_integer_kernel = MatmulIntegerKernel::Auto;
}  // namespace

void set_matmul_integer_kernel(MatmulIntegerKernel k) {
  matmul_integer_kernel = k;
}

Tensor matmul_integer_dynamic(const Tensor& x, const Tensor& w, const Tensor& w_scales,
                              const Tensor& w_zero_points) {
  GpuRecorder& rec = *x.ctx().gpu();
  if (rec.failed()) return none_on(x);
  const bool col = w_scales.defined() || w_zero_points.defined();
  if (x.dtype() != DType::F32 || !on_gpu(w) || w.rank() != 2 || x.dim(-1) != w.dim(0) ||
      (w.dtype() != DType::I8 && w.dtype() != DType::U8) ||
      (col && (!on_gpu(w_scales) || !on_gpu(w_zero_points) || w_scales.dtype() != DType::F32 ||
               w_scales.elements() != w.dim(1) || w_zero_points.elements() != w.dim(1) ||
               (w_zero_points.dtype() != DType::I8 && w_zero_points.dtype() != DType::U8))))
    return unsupported(x, "matmul_integer_dynamic of these tensors");
  const int64_t k = x.dim(-1), n = w.dim(1), m = x.elements() / k;
  Tensor qp;
  const Tensor xq = dynamic_quantize_linear(x, &qp);
  Shape shape = x.shape();
  shape[-1] = n;
  Tensor out = x.ctx().empty(shape);
  const int64_t n_tiles = (n + 63) / 64;
  const uint32_t params[] = {u32(m),
                             u32(n),
                             u32(k),
                             w.dtype() == DType::I8 ? 1u : 0u,
                             col ? 1u : 0u,
                             col && w_zero_points.dtype() == DType::I8 ? 1u : 0u,
                             static_cast<uint32_t>(w.quant().zero_point),
                             fbits(w.quant().scale),
                             u32(n_tiles),
                             0,
                             0,
                             0};
  const Tensor& s = col ? w_scales : qp;  // bindings must exist: stand-ins, unread
  const Tensor& z = col ? w_zero_points : qp;
  const bool packed = matmul_integer_kernel == MatmulIntegerKernel::Packed ||
                      (matmul_integer_kernel == MatmulIntegerKernel::Auto && rec.device().info().packed_dot);
  if (packed) {
    const int64_t tiles16 = (n + 15) / 16;
    uint32_t p4[12];
    std::copy(std::begin(params), std::end(params), p4);
    p4[8] = u32(tiles16);
    rec.dispatch("nn_matmul_integer_packed", kMatmulIntegerPacked, p4, {&xq, &qp, &w, &s, &z, &out},
                 static_cast<uint64_t>(tiles16 * ((m + 3) / 4) * 64));
    return out;
  }
  rec.dispatch("nn_matmul_integer", kMatmulInteger, params, {&xq, &qp, &w, &s, &z, &out},
               static_cast<uint64_t>(n_tiles * ((m + 15) / 16) * 64));
  return out;
}

namespace {
ConvIntegerKernel conv_integer_kernel = ConvIntegerKernel::Auto;

// w [Cout, Cin, K] in kConvIntegerPack's words, packed on the GPU at the first call with this weight (the
// model's warm-up) and kept with it.
Tensor packed_conv_weights(GpuRecorder& rec, const Tensor& w) {
  return w.derived(kDerivedConvIntegerWords, [&] {
    const int64_t cout = w.dim(0), cin = w.dim(1), kernel = w.dim(2), cwords = (cin + 3) / 4;
    const int64_t words = (cout + 63) / 64 * cwords * kernel * 64;
    Tensor wp = w.ctx().empty({words + (cout + 3) / 4 * 4}, DType::U32);
    const uint32_t params[] = {
        u32(cout), u32(cin), u32(kernel), u32(cwords), u32(words), w.dtype() == DType::I8 ? 1u : 0u, 0, 0};
    rec.dispatch("nn_conv_integer_pack", kConvIntegerPack, params, {&w, &wp},
                 static_cast<uint64_t>(words + cout));
    return wp;
  });
}

// kConvIntegerDot4 over xq in channel words; bias: b, or a stand-in when !has_bias.
void conv_integer_dot4(GpuRecorder& rec, const Tensor& xq, const Tensor& qp, const Tensor& w,
                       const Tensor& bias, bool has_bias, int64_t length, const Conv1dOptions& o,
                       const Tensor& out) {
  const int64_t cout = w.dim(0), cin = w.dim(1), kernel = w.dim(2), out_len = out.dim(1),
                cwords = (cin + 3) / 4;
  const int64_t t_tiles = (out_len + 127) / 128, oc_tiles = (cout + 63) / 64, tiles = t_tiles * oc_tiles;
  // Few tiles (the decoder's 1,090 -> 1,024 channels at T ~ 390: 64; the generator's 256 at T ~ 3,900: 124) leave
  // most of a large GPU idle: split the channel words, in whole stages of 4, so that ~512 workgroups run, at most
  // 8 ways. Each split writes and the second pass reads 4 bytes per output; with < 256 tiles the partials stay
  // under 8 x 256 x 128 x 64 x 4 bytes = 64 MB, inside WebGPU's 128 MB binding.
  int64_t split_words = (cwords + 3) / 4 * 4;
  if (tiles < 256) {
    const int64_t ways = std::min<int64_t>(8, (512 + tiles - 1) / tiles);
    split_words = ((cwords + ways - 1) / ways + 3) / 4 * 4;
  }
  const int64_t splits = (cwords + split_words - 1) / split_words;
  const Tensor wp = packed_conv_weights(rec, w);
  const int32_t w_zp = w.quant().zero_point + (w.dtype() == DType::I8 ? 128 : 0);
  const uint32_t params[] = {u32(cout),
                             u32(out_len),
                             u32(kernel),
                             u32(length),
                             u32(o.padding),
                             u32(o.dilation),
                             u32(t_tiles),
                             u32(oc_tiles),
                             u32(cwords),
                             u32(split_words),
                             u32(splits),
                             static_cast<uint32_t>(w_zp),
                             fbits(w.quant().scale),
                             has_bias ? 1u : 0u,
                             0,
                             0};
  const uint64_t groups = static_cast<uint64_t>(t_tiles * oc_tiles * splits);
  if (splits == 1) {
    rec.dispatch("nn_conv_integer_dot4", kConvIntegerDot4, params, {&xq, &qp, &wp, &bias, &out}, groups * 64);
    return;
  }
  Tensor part = out.ctx().empty({splits, cout, out_len}, DType::I32);
  rec.dispatch("nn_conv_integer_dot4", kConvIntegerDot4, params, {&xq, &qp, &wp, &bias, &part}, groups * 64);
  const uint32_t sum[] = {u32(cout),
                          u32(out_len),
                          u32(splits),
                          u32(4 * cwords * kernel),
                          static_cast<uint32_t>(w_zp),
                          fbits(w.quant().scale),
                          has_bias ? 1u : 0u,
                          u32(oc_tiles * cwords * kernel * 16)};
  rec.dispatch("nn_conv_integer_split_sum", kConvIntegerSplitSum, sum, {&qp, &wp, &bias, &part, &out},
               static_cast<uint64_t>(cout * out_len));
}
}  // namespace

void set_conv_integer_kernel(ConvIntegerKernel k) {
  conv_integer_kernel = k;
}

Tensor conv1d_integer_dynamic_quantized_bias(const Tensor& x, const Tensor& w, const Tensor& b,
                                             const Conv1dOptions& o, const Tensor* x_range_partial) {
  GpuRecorder& rec = *x.ctx().gpu();
  if (rec.failed()) return none_on(x);
  if (x.dtype() != DType::F32 || x.rank() != 2 || !on_gpu(w) || w.rank() != 3 || w.dim(1) != x.dim(0) ||
      (w.dtype() != DType::I8 && w.dtype() != DType::U8) || o.groups != 1 ||
      (b.defined() && (!on_gpu(b) || b.dtype() != DType::F32 || b.elements() != w.dim(0))))
    return unsupported(x, "conv1d_integer_dynamic_quantized_bias of these tensors");
  const int64_t length = x.dim(1), cout = w.dim(0), kernel = w.dim(2);
  const int64_t pad_end = o.padding_end < 0 ? o.padding : o.padding_end;
  const int64_t out_len = (length + o.padding + pad_end - o.dilation * (kernel - 1) - 1) / o.stride + 1;
  if (out_len < 1) return unsupported(x, "conv1d_integer_dynamic_quantized_bias of these tensors");
  const bool packed = conv_integer_kernel == ConvIntegerKernel::TiledPacked ||
                      (conv_integer_kernel == ConvIntegerKernel::Auto && rec.device().info().packed_dot);
  const bool use_tiled = conv_integer_kernel != ConvIntegerKernel::Plain && o.stride == 1 && kernel <= 11 &&
                         (kernel - 1) * o.dilation <= 64;
  Tensor qp;
  const Tensor xq = quantize_dynamic(x, &qp, use_tiled && packed, x_range_partial);
  Tensor out = x.ctx().empty({cout, out_len});
  const uint32_t params[] = {u32(cout),
                             u32(out_len),
                             u32(x.dim(0)),
                             u32(kernel),
                             u32(length),
                             u32(o.stride),
                             u32(o.padding),
                             u32(o.dilation),
                             w.dtype() == DType::I8 ? 1u : 0u,
                             static_cast<uint32_t>(w.quant().zero_point),
                             fbits(w.quant().scale),
                             b.defined() ? 1u : 0u};
  const Tensor& bias = b.defined() ? b : qp;
  if (use_tiled && packed) {
    conv_integer_dot4(rec, xq, qp, w, bias, b.defined(), length, o, out);
    return out;
  }
  if (use_tiled) {
    const int64_t t_tiles = (out_len + 127) / 128, c_tiles = (cout + 15) / 16;
    const uint32_t tiled[] = {u32(cout),   u32(out_len),   u32(x.dim(0)),   u32(kernel),
                              u32(length), u32(o.padding), u32(o.dilation), u32(t_tiles),
                              params[8],   params[9],      params[10],      params[11]};
    rec.dispatch("nn_conv_integer_tiled", kConvIntegerTiled, tiled, {&xq, &qp, &w, &bias, &out},
                 static_cast<uint64_t>(t_tiles * c_tiles * 64));
    return out;
  }
  rec.dispatch("nn_conv_integer", kConvInteger, params, {&xq, &qp, &w, &bias, &out},
               static_cast<uint64_t>(cout * out_len));
  return out;
}

}  // namespace sotto::nn::gpu_ops

namespace sotto::nn::gpu_ops {

Tensor lstm_int8(const Tensor& x, const LstmWeights& w, bool reverse, const Tensor& h0, const Tensor& c0,
                 Tensor* h_out, Tensor* c_out) {
  GpuRecorder& rec = *x.ctx().gpu();
  if (rec.failed()) return none_on(x);
  const int64_t hidden = w.w_hh.dim(0), n = 4 * hidden, steps = x.dim(0);
  auto col_ok = [&](const Tensor& t, DType d) {
    return !t.defined() ||
           (on_gpu(t) && t.elements() == n && (t.dtype() == d || (d == DType::I8 && t.dtype() == DType::U8)));
  };
  if (x.dtype() != DType::F32 || x.rank() != 2 || !on_gpu(w.w_hh) || w.w_hh.rank() != 2 ||
      w.w_hh.dim(1) != n || hidden > 1024 || (w.w_hh.dtype() != DType::I8 && w.w_hh.dtype() != DType::U8) ||
      !col_ok(w.w_hh_scales, DType::F32) || !col_ok(w.w_hh_zero_points, DType::I8) ||
      (w.b.defined() && (!on_gpu(w.b) || w.b.elements() != n)) || (h0.defined() && h0.elements() != hidden) ||
      (c0.defined() && c0.elements() != hidden))
    return unsupported(x, "lstm (int8) of these tensors");
  Context& ctx = x.ctx();
  const Tensor gx = gpu_ops::matmul_integer_dynamic(x, w.w_ih, w.w_ih_scales, w.w_ih_zero_points);  // [T, 4H]
  // cols: the recurrent scales then the bias; state: h, h, c.
  const Tensor scales =
      w.w_hh_scales.defined()
          ? w.w_hh_scales
          : ctx.from_floats({n}, std::vector<float>(static_cast<size_t>(n), w.w_hh.quant().scale));
  const Tensor bias = w.b.defined() ? w.b : ctx.zeros({n});
  const Tensor both[2] = {scales, bias};
  const Tensor cols = gpu_ops::concat(both, 0);
  const Tensor zero = ctx.zeros({hidden});
  const Tensor parts[3] = {h0.defined() ? h0.reshape({hidden}) : zero, zero,
                           c0.defined() ? c0.reshape({hidden}) : zero};
  const Tensor state = gpu_ops::concat(parts, 0);
  Tensor y = ctx.empty({steps, hidden});
  const uint32_t zp_mode = !w.w_hh_zero_points.defined()             ? 0u
                           : w.w_hh_zero_points.dtype() == DType::I8 ? 1u
                                                                     : 2u;
  const Tensor& zps = w.w_hh_zero_points.defined() ? w.w_hh_zero_points : cols;
  for (int64_t s = 0; s < steps; ++s) {
    const int64_t t = reverse ? steps - 1 - s : s;
    const uint32_t params[] = {u32(hidden), u32(t),
                               u32(s % 2),  w.w_hh.dtype() == DType::I8 ? 1u : 0u,
                               zp_mode,     static_cast<uint32_t>(w.w_hh.quant().zero_point),
                               0,           0};
    rec.dispatch("nn_lstm_int8_step", kLstmInt8Step, params, {&gx, &w.w_hh, &cols, &zps, &state, &y},
                 static_cast<uint64_t>((hidden + 3) / 4 * 64));
  }
  const int64_t last = steps % 2;  // the half the last step wrote
  if (h_out)
    *h_out = gpu_ops::scale(gpu_ops::slice(state, 0, last * hidden, (last + 1) * hidden), 1.0f, 0.0f);
  if (c_out) *c_out = gpu_ops::scale(gpu_ops::slice(state, 0, 2 * hidden, 3 * hidden), 1.0f, 0.0f);
  return y;
}

namespace {
LstmKernel lstm_kernel = LstmKernel::Auto;
LstmGrid lstm_grid_pin;

// Workgroups a direction for kBiLstmInt8Grid (0: the one-workgroup kernel alone). Natively on Dawn's Vulkan
// backend on a GPU, where a grid this small is resident at once (the browser promises nothing, and SwiftShader
// runs workgroups a few at a time on its threads). SOTTO_KOKORO_LSTM_GRID=N sets it (0: off).
uint32_t lstm_grid_workgroups(GpuRecorder& rec) {
  if (lstm_grid_pin.workgroups >= 0) return static_cast<uint32_t>(lstm_grid_pin.workgroups);
  const gpu::AdapterInfo& info = rec.device().info();
  if (info.backend != "vulkan" || info.cpu() || info.limits.max_storage_buffers_per_shader_stage < 8)
    return 0;
  uint32_t grid = 16;
#if !defined(__wasm__)
  if (const char* env = std::getenv("SOTTO_KOKORO_LSTM_GRID"))
    grid = static_cast<uint32_t>(std::clamp<long>(std::strtol(env, nullptr, 10), 0, 256));
#endif
  return grid;
}
}  // namespace

void set_lstm_kernel(LstmKernel k) {
  lstm_kernel = k;
}

void set_lstm_grid(const LstmGrid& g) {
  lstm_grid_pin = g;
}

Tensor bilstm_int8(const Tensor& x, const LstmWeights& fw, const LstmWeights& bw) {
  GpuRecorder& rec = *x.ctx().gpu();
  if (rec.failed()) return none_on(x);
  const int64_t hidden = fw.w_hh.dim(0), n = 4 * hidden, steps = x.dim(0);
  auto same = [](const Tensor& a, const Tensor& b) {
    return a.defined() == b.defined() && (!a.defined() || a.dtype() == b.dtype());
  };
  // One dispatch serves both only where the directions agree in layout; otherwise one lstm each.
  if (!fw.int8() || !bw.int8() || bw.w_hh.dim(0) != hidden || bw.w_hh.dtype() != fw.w_hh.dtype() ||
      !same(fw.w_hh_zero_points, bw.w_hh_zero_points) || !same(fw.w_hh_scales, bw.w_hh_scales) ||
      !same(fw.b, bw.b) || steps < 1) {
    const Tensor parts[2] = {lstm_int8(x, fw, false, {}, {}, nullptr, nullptr),
                             lstm_int8(x, bw, true, {}, {}, nullptr, nullptr)};
    return gpu_ops::concat(parts, 1);
  }
  auto col_ok = [&](const Tensor& t, DType d) {
    return !t.defined() ||
           (on_gpu(t) && t.elements() == n && (t.dtype() == d || (d == DType::I8 && t.dtype() == DType::U8)));
  };
  for (const LstmWeights* w : {&fw, &bw})
    if (x.dtype() != DType::F32 || x.rank() != 2 || !on_gpu(w->w_hh) || w->w_hh.rank() != 2 ||
        w->w_hh.dim(1) != n || hidden > 1024 ||
        (w->w_hh.dtype() != DType::I8 && w->w_hh.dtype() != DType::U8) ||
        !col_ok(w->w_hh_scales, DType::F32) || !col_ok(w->w_hh_zero_points, DType::I8) ||
        (w->b.defined() && (!on_gpu(w->b) || w->b.elements() != n)))
      return unsupported(x, "bilstm (int8) of these tensors");
  Context& ctx = x.ctx();
  Tensor cols_parts[4], gx_parts[2];
  int i = 0;
  for (const LstmWeights* w : {&fw, &bw}) {
    gx_parts[i / 2] =
        gpu_ops::matmul_integer_dynamic(x, w->w_ih, w->w_ih_scales, w->w_ih_zero_points);  // [T, 4H]
    cols_parts[i++] =
        w->w_hh_scales.defined()
            ? w->w_hh_scales.reshape({n})
            : ctx.from_floats({n}, std::vector<float>(static_cast<size_t>(n), w->w_hh.quant().scale));
    cols_parts[i++] = w->b.defined() ? w->b.reshape({n}) : ctx.zeros({n});
  }
  const Tensor gx = gpu_ops::concat(gx_parts, 0);      // [2T, 4H]
  const Tensor cols = gpu_ops::concat(cols_parts, 0);  // [8H] x 2
  Tensor y = ctx.empty({steps, 2 * hidden});
  const uint32_t zp_mode = !fw.w_hh_zero_points.defined()             ? 0u
                           : fw.w_hh_zero_points.dtype() == DType::I8 ? 1u
                                                                      : 2u;
  const Tensor& zf = fw.w_hh_zero_points.defined() ? fw.w_hh_zero_points : cols;
  const Tensor& zb = bw.w_hh_zero_points.defined() ? bw.w_hh_zero_points : cols;
  const uint32_t max_threads = rec.device().info().limits.max_compute_invocations_per_workgroup;
  const bool persistent = lstm_kernel == LstmKernel::Persistent || lstm_kernel == LstmKernel::Persistent256 ||
                          (lstm_kernel == LstmKernel::Auto && max_threads >= 256);
  if (persistent && hidden <= 256) {
    const bool wide = lstm_kernel != LstmKernel::Persistent256 && max_threads >= 512;
    const bool is_signed = fw.w_hh.dtype() == DType::I8;
    // The grid kernel first where it runs; the one-workgroup kernel after it then runs only where the grid
    // kernel left its failure mark (an empty dispatch otherwise: a few us).
    const uint32_t grid = lstm_kernel == LstmKernel::Auto ? lstm_grid_workgroups(rec) : 0;
    Tensor xch;
    // Without the fallback (tests) y starts as NaN, so that what the grid kernel leaves unwritten shows.
    if (grid > 0 && !lstm_grid_pin.fallback)
      y = ctx.from_floats({steps, 2 * hidden}, std::vector<float>(static_cast<size_t>(steps * 2 * hidden),
                                                                  std::numeric_limits<float>::quiet_NaN()));
    if (grid > 0) {
      // U units a workgroup, all 4 gates of each: 4 U columns in passes of NCT threads, the rest of the 256
      // threads splitting the k into KS parts of KQ rows (a multiple of 4: one register word holds 4 rows).
      const int64_t units = (hidden + grid - 1) / grid, workgroups = (hidden + units - 1) / units;
      const int64_t nc = 4 * units, nct = std::min<int64_t>(nc, 256), cpt = (nc + nct - 1) / nct;
      const int64_t ks = 256 / nct, kw = ((hidden + ks - 1) / ks + 3) / 4;
      const std::string consts =
          cat("const H = ", hidden, "u;\nconst U = ", units, "u;\nconst G = ", workgroups,
              "u;\nconst KS = ", ks, "u;\nconst KW = ", kw, "u;\nconst CPT = ", cpt, "u;\nconst NCT = ", nct,
              "u;\nconst SIGNED = ", is_signed ? "true" : "false", ";\n");
      xch = ctx.empty({3 + 4 * hidden}, DType::I32);
      const uint32_t reset[] = {3, 0, 0, 0};
      rec.dispatch("nn_bilstm_int8_grid_reset", kBiLstmGridReset, reset, {&xch}, 64);
      const uint32_t params[] = {u32(steps),
                                 zp_mode,
                                 static_cast<uint32_t>(fw.w_hh.quant().zero_point),
                                 static_cast<uint32_t>(bw.w_hh.quant().zero_point),
                                 lstm_grid_pin.spin_limit,
                                 0,
                                 0,
                                 0};
      // The pipeline is compiled once per name: the name carries every constant.
      rec.dispatch(cat("nn_bilstm_int8_grid", workgroups, "_h", hidden, is_signed ? "_i8" : "_u8"),
                   consts + kBiLstmInt8Grid, params, {&gx, &fw.w_hh, &bw.w_hh, &cols, &zf, &zb, &y, &xch},
                   static_cast<uint64_t>(2 * workgroups * 64));
      if (!lstm_grid_pin.fallback) return y;
    }
    // The source with its NT (a few KB, made per LSTM: the pipeline is compiled once per name).
    const std::string source = std::string(wide ? "const NT: u32 = 512u;\n" : "const NT: u32 = 256u;\n") +
                               (grid > 0 ? kLstmFallbackGuard : kLstmSeqPlain) + kBiLstmInt8Seq;
    const uint32_t params[] = {u32(hidden),
                               u32(steps),
                               fw.w_hh.dtype() == DType::I8 ? 1u : 0u,
                               zp_mode,
                               static_cast<uint32_t>(fw.w_hh.quant().zero_point),
                               static_cast<uint32_t>(bw.w_hh.quant().zero_point),
                               0,
                               0};
    // Two workgroups, one per direction (threads counts 64 per workgroup).
    const std::string name =
        cat(wide ? "nn_bilstm_int8_seq512" : "nn_bilstm_int8_seq256", grid > 0 ? "_fallback" : "");
    if (grid > 0)
      rec.dispatch(name, source, params, {&gx, &fw.w_hh, &bw.w_hh, &cols, &zf, &zb, &y, &xch}, 128);
    else
      rec.dispatch(name, source, params, {&gx, &fw.w_hh, &bw.w_hh, &cols, &zf, &zb, &y}, 128);
    return y;
  }
  const Tensor state = ctx.zeros({6 * hidden});
  for (int64_t s = 0; s < steps; ++s) {
    const uint32_t params[] = {u32(hidden),
                               u32(s),
                               u32(s % 2),
                               fw.w_hh.dtype() == DType::I8 ? 1u : 0u,
                               zp_mode,
                               static_cast<uint32_t>(fw.w_hh.quant().zero_point),
                               static_cast<uint32_t>(bw.w_hh.quant().zero_point),
                               u32(steps)};
    rec.dispatch("nn_bilstm_int8_step", kBiLstmInt8Step, params,
                 {&gx, &fw.w_hh, &bw.w_hh, &cols, &zf, &zb, &state, &y},
                 static_cast<uint64_t>(2 * ((hidden + 3) / 4) * 64));
  }
  return y;
}

}  // namespace sotto::nn::gpu_ops

namespace sotto::nn {
void stft_onnxruntime_tables(int n_fft, std::vector<float>& chirp, std::vector<float>& twiddles,
                             std::vector<float>& b_fft, int& m);
}  // namespace sotto::nn

namespace sotto::nn::gpu_ops {

Tensor sine_source(const Tensor& f0, int harmonics, int upsample, float sample_rate_hz, float amplitude,
                   float voiced_threshold_hz) {
  GpuRecorder& rec = *f0.ctx().gpu();
  if (rec.failed()) return none_on(f0);
  if (f0.dtype() != DType::F32 || f0.rank() != 1 || f0.elements() == 0 || harmonics < 1 || upsample < 1)
    return unsupported(f0, "sine_source of this tensor");
  const int64_t n = f0.dim(0), samples = n * upsample;
  Tensor phase = f0.ctx().empty({harmonics, n});
  const uint32_t p1[] = {u32(n), u32(harmonics), u32(upsample), fbits(sample_rate_hz)};
  rec.dispatch("nn_sine_phase", kSinePhase, p1, {&f0, &phase}, static_cast<uint64_t>(harmonics));
  Tensor out = f0.ctx().empty({samples, harmonics});
  const uint32_t p2[] = {
      u32(n), u32(harmonics), u32(upsample), u32(samples), fbits(amplitude), fbits(voiced_threshold_hz), 0,
      0};
  rec.dispatch("nn_sine_samples", kSineSamples, p2, {&f0, &phase, &out},
               static_cast<uint64_t>(samples * harmonics));
  return out;
}

Tensor stft_onnxruntime(const Tensor& signal, const Tensor& window, int n_fft, int hop) {
  GpuRecorder& rec = *signal.ctx().gpu();
  if (rec.failed()) return none_on(signal);
  std::vector<float> chirp, twiddles, b_fft;
  int m = 0;
  if (n_fft >= 2) stft_onnxruntime_tables(n_fft, chirp, twiddles, b_fft, m);
  if (signal.dtype() != DType::F32 || signal.rank() != 1 || !on_gpu(window) || window.elements() != n_fft ||
      m == 0 || m > 64 || hop < 1 || signal.dim(0) < n_fft)
    return unsupported(signal,
                       "stft_onnxruntime of this length (the GPU kernel takes Bluestein lengths <= 33)");
  const int64_t frames = (signal.dim(0) - n_fft) / hop + 1, bins = n_fft / 2 + 1;
  std::vector<float> tables = chirp;
  tables.insert(tables.end(), twiddles.begin(), twiddles.end());
  tables.insert(tables.end(), b_fft.begin(), b_fft.end());
  const Tensor t = signal.ctx().from_floats({static_cast<int64_t>(tables.size())}, tables);
  Tensor out = signal.ctx().empty({2, bins, frames});
  const uint32_t params[] = {u32(frames), u32(n_fft), u32(m), u32(std::countr_zero(static_cast<uint32_t>(m))),
                             u32(hop),    u32(bins),  0,      0};
  rec.dispatch("nn_stft_bluestein", kStftBluestein, params, {&signal, &window, &t, &out},
               static_cast<uint64_t>(frames));
  return out;
}

}  // namespace sotto::nn::gpu_ops
