// The WGSL of gpu/kernels.h. Block layouts on the GPU (words = u32; f16 scales in the low half of a word):
//   Q8_0  9 words:  qs[32] (8 words), d
//   Q4_0  5 words:  qs[16] (4 words: element j in the low nibble of byte j, j + 16 in the high one), d
//   Q5_0  6 words:  qh (bit j = 5th bit of element j), qs[16] (4 words), d
//   Q4_K 36 words:  d | dmin << 16, scales[12] (3 words), qs[128] (32 words)          (GGUF's own layout)
//   Q6_K 53 words:  ql[128] (32 words), qh[64] (16 words), scales[16] int8 (4 words), d (GGUF's + 2 bytes)
// Every quantized dot is integer within a 32-element sub-block, scaled by d_w * d_x as ggml does.
#include "gpu/kernels.h"

#include "core/error.h"

namespace sotto::gpu {

namespace {

const char* kDotHelpers = R"(
fn dot4_fallback(a: u32, b: u32) -> i32 {
  var s = 0i;
  for (var k = 0u; k < 4u; k++) {
    s += (bitcast<i32>(a << (24u - 8u * k)) >> 24u) * (bitcast<i32>(b << (24u - 8u * k)) >> 24u);
  }
  return s;
}
fn xsum(x0: u32, n: u32) -> i32 {
  var s = 0i;
  for (var k = 0u; k < n; k++) { s += dot4(0x01010101u, xq[x0 + k]); }
  return s;
}
fn f16lo(w: u32) -> f32 { return unpack2x16float(w).x; }
)";

const char* kDot4Packed = "fn dot4(a: u32, b: u32) -> i32 { return dot4I8Packed(a, b); }\n";
const char* kDot4Fallback = "fn dot4(a: u32, b: u32) -> i32 { return dot4_fallback(a, b); }\n";

// sub_dot(base, sb): W[row, 32 sb .. 32 sb + 31] . x[same], scaled; `base` is the row's first word.
const char* kSubDotQ8_0 = R"(
fn sub_dotSFX(base: u32, sb: u32) -> f32 {
  let b = base + sb * 9u; let x0 = sb * 8u;
  var s = 0i;
  for (var k = 0u; k < 8u; k++) { s += dot4(WBUF[b + k], xq[x0 + k]); }
  return f32(s) * (f16lo(WBUF[b + 8u]) * xd[sb]);
}
)";

const char* kSubDotQ4_0 = R"(
fn sub_dotSFX(base: u32, sb: u32) -> f32 {
  let b = base + sb * 5u; let x0 = sb * 8u;
  var s = 0i;
  for (var k = 0u; k < 4u; k++) {
    let w = WBUF[b + k];
    s += dot4(w & 0x0F0F0F0Fu, xq[x0 + k]) + dot4((w >> 4u) & 0x0F0F0F0Fu, xq[x0 + 4u + k]);
  }
  s -= 8i * xsum(x0, 8u);
  return f32(s) * (f16lo(WBUF[b + 4u]) * xd[sb]);
}
)";

const char* kSubDotQ5_0 = R"(
fn spread4SFX(bits: u32) -> u32 {
  return ((bits & 1u) << 4u) | ((bits & 2u) << 11u) | ((bits & 4u) << 18u) | ((bits & 8u) << 25u);
}
fn sub_dotSFX(base: u32, sb: u32) -> f32 {
  let b = base + sb * 6u; let x0 = sb * 8u;
  let qh = WBUF[b];
  var s = 0i;
  for (var k = 0u; k < 4u; k++) {
    let w = WBUF[b + 1u + k];
    let lo = (w & 0x0F0F0F0Fu) | spread4SFX(qh >> (4u * k));
    let hi = ((w >> 4u) & 0x0F0F0F0Fu) | spread4SFX(qh >> (16u + 4u * k));
    s += dot4(lo, xq[x0 + k]) + dot4(hi, xq[x0 + 4u + k]);
  }
  s -= 16i * xsum(x0, 8u);
  return f32(s) * (f16lo(WBUF[b + 5u]) * xd[sb]);
}
)";

const char* kSubDotQ4_K = R"(
fn scale_byteSFX(b: u32, i: u32) -> u32 { return (WBUF[b + 1u + i / 4u] >> (8u * (i % 4u))) & 0xFFu; }
fn sub_dotSFX(base: u32, sb: u32) -> f32 {
  let b = base + (sb / 8u) * 36u; let j = sb % 8u; let x0 = sb * 8u;
  var sc: u32; var m: u32;
  if (j < 4u) {
    sc = scale_byteSFX(b, j) & 63u; m = scale_byteSFX(b, j + 4u) & 63u;
  } else {
    sc = (scale_byteSFX(b, j + 4u) & 0xFu) | ((scale_byteSFX(b, j - 4u) >> 6u) << 4u);
    m = (scale_byteSFX(b, j + 4u) >> 4u) | ((scale_byteSFX(b, j) >> 6u) << 4u);
  }
  let q0 = b + 4u + 8u * (j / 2u); let shift = 4u * (j % 2u);
  var s = 0i;
  for (var k = 0u; k < 8u; k++) { s += dot4((WBUF[q0 + k] >> shift) & 0x0F0F0F0Fu, xq[x0 + k]); }
  let dm = unpack2x16float(WBUF[b]);
  return xd[sb] * (dm.x * f32(sc) * f32(s) - dm.y * f32(m) * f32(xsum(x0, 8u)));
}
)";

const char* kSubDotQ6_K = R"(
fn scale_i8SFX(b: u32, i: u32) -> f32 { return f32(bitcast<i32>(WBUF[b + 48u + i / 4u] << (24u - 8u * (i % 4u))) >> 24u); }
fn sub_dotSFX(base: u32, sb: u32) -> f32 {
  let b = base + (sb / 8u) * 53u; let j = sb % 8u; let x0 = sb * 8u;
  let n = j / 4u; let t = j % 4u;
  let ql0 = b + 16u * n + 8u * (t & 1u); let lshift = 4u * (t >> 1u);
  let qh0 = b + 32u + 8u * n;
  var s0 = 0i; var s1 = 0i;
  for (var k = 0u; k < 8u; k++) {
    let q = ((WBUF[ql0 + k] >> lshift) & 0x0F0F0F0Fu) | (((WBUF[qh0 + k] >> (2u * t)) & 0x03030303u) << 4u);
    let p = dot4(q, xq[x0 + k]) - 32i * dot4(0x01010101u, xq[x0 + k]);
    if (k < 4u) { s0 += p; } else { s1 += p; }
  }
  let si = 8u * n + 2u * t;
  return f16lo(WBUF[b + 52u]) * xd[sb] * (scale_i8SFX(b, si) * f32(s0) + scale_i8SFX(b, si + 1u) * f32(s1));
}
)";

const char* sub_dot_source(DType w) {
  switch (w) {
    case DType::Q8_0:
      return kSubDotQ8_0;
    case DType::Q4_0:
      return kSubDotQ4_0;
    case DType::Q5_0:
      return kSubDotQ5_0;
    case DType::Q4_K:
      return kSubDotQ4_K;
    case DType::Q6_K:
      return kSubDotQ6_K;
    default:
      return nullptr;
  }
}

const char* kMatvecParams = R"(
struct P { rows: u32, cols: u32, mode: u32, y_off: u32, row_words: u32, n_sub: u32, b_off: u32, x_off: u32,
           eps: f32, pad0: u32, pad1: u32, pad2: u32 }
@group(0) @binding(0) var<uniform> p: P;
)";

// The 32-lane sum of each row's partial dots, then the output with bias / residual / SwiGLU applied.
const char* kMatvecReduce = R"(
  red[lid.x] = acc;
  RED2_STORE
  workgroupBarrier();
  for (var s = LANES / 2u; s > 0u; s >>= 1u) {
    if (lane < s) { red[lid.x] += red[lid.x + s]; RED2_ADD }
    workgroupBarrier();
  }
  if (lane == 0u && row < p.rows) {
    var v = red[lid.x];
    OUTPUT
    if ((p.mode & 1u) != 0u) { v += bias[p.b_off + row]; }
    let o = p.y_off + row;
    if ((p.mode & 2u) != 0u) { v += y[o]; }
    y[o] = v;
  }
}
)";

// The sum of squares of an RMSNorm as an unevaluated pair hi + lo (Knuth's TwoSum, ~48 bits), and the mean
// rounded once to f32: the CPU sums the f32 squares in double and rounds sum / n to f32 once (as ggml does), so
// an f32 running sum would give a scale an ulp or more off, moving some q8_0 codes by 1.
const char* kFloatFloat = R"(
fn two_sum(a: f32, b: f32) -> vec2f {
  let s = a + b;
  let bb = s - a;
  return vec2f(s, (a - (s - bb)) + (b - bb));
}
fn ff_add(a: vec2f, t: f32) -> vec2f {
  let s = two_sum(a.x, t);
  return two_sum(s.x, s.y + a.y);
}
fn ff_add2(a: vec2f, b: vec2f) -> vec2f {
  let s = two_sum(a.x, b.x);
  return two_sum(s.x, s.y + a.y + b.y);
}
fn ff_mean(a: vec2f, n: u32) -> f32 {
  let fn_ = f32(n);
  let q = a.x / fn_;
  return q + (fma(-q, fn_, a.x) + a.y) / fn_;
}
)";

// Every workgroup quantizes x (optionally RMS-normalised first: mode bit 4) into q8_0 blocks in workgroup
// memory itself, as ggml's quantize_row_q8_0 does (d = amax / 127, q = roundf(v * (1 / d)), d kept as f16), so
// neither the norm nor the quantization costs a dispatch of its own.
const char* kQuantizePrologue = R"(
  let normalize = (p.mode & 4u) != 0u;
  var scale = 1.0;
  if (normalize) {
    var ss = vec2f(0.0);
    for (var i = lid.x; i < p.cols; i += 128u) { let v = x[p.x_off + i]; ss = ff_add(ss, v * v); }
    ssr[lid.x] = ss;
    workgroupBarrier();
    for (var s = 64u; s > 0u; s >>= 1u) {
      if (lid.x < s) { ssr[lid.x] = ff_add2(ssr[lid.x], ssr[lid.x + s]); }
      workgroupBarrier();
    }
    scale = 1.0 / sqrt(ff_mean(ssr[0], p.cols) + p.eps);
    workgroupBarrier();
  }
  for (var b = lid.x; b < p.cols / 32u; b += 128u) {
    var amax = 0.0;
    for (var e = 0u; e < 32u; e++) {
      var v = x[p.x_off + 32u * b + e];
      if (normalize) { v = v * scale * nw[32u * b + e]; }
      amax = max(amax, abs(v));
    }
    let d = amax / 127.0;
    let id = select(0.0, 1.0 / d, d != 0.0);
    for (var k = 0u; k < 8u; k++) {
      var word = 0u;
      for (var e = 0u; e < 4u; e++) {
        let i = 32u * b + 4u * k + e;
        var v = x[p.x_off + i];
        if (normalize) { v = v * scale * nw[i]; }
        let a = abs(v * id);
        var r = floor(a);
        if (a - r >= 0.5) { r += 1.0; }
        word |= (bitcast<u32>(i32(select(r, -r, v < 0.0))) & 0xFFu) << (8u * e);
      }
      xq[8u * b + k] = word;
    }
    xd[b] = unpack2x16float(pack2x16float(vec2f(d, 0.0))).x;
  }
  workgroupBarrier();
)";

void replace_all(std::string& s, std::string_view from, std::string_view to) {
  for (size_t at = s.find(from); at != std::string::npos; at = s.find(from, at + to.size()))
    s.replace(at, from.size(), to);
}

}  // namespace

bool gpu_matvec_supported(DType w) {
  return w == DType::F32 || w == DType::F16 || sub_dot_source(w) != nullptr;
}
bool gpu_needs_q8(DType w) {
  return w != DType::F32 && w != DType::F16;
}

// Invocations per row: 32 for wide rows; 8 where a row has few 32-blocks (896-wide: 28), so each invocation
// works on several blocks and a workgroup covers 16 rows.
uint32_t matvec_lanes(DType w, int64_t cols) {
  return gpu_needs_q8(w) && cols / 32 < 64 ? 8 : 32;
}
bool gpu_embed_supported(DType w) {
  return w == DType::F32 || w == DType::F16 || w == DType::Q8_0 || w == DType::Q4_0;
}

std::string wgsl_matvec(DType w, bool swiglu, const KernelFeatures& f, uint32_t cols, bool staged) {
  std::string src = kMatvecParams;
  std::string body;
  if (w == DType::F16) {  // x rounded to f16 first, as ggml converts it for f16 weights
    src += R"(
@group(0) @binding(1) var<storage, read> W: array<u32>;
@group(0) @binding(2) var<storage, read> x: array<f32>;
@group(0) @binding(4) var<storage, read_write> y: array<f32>;
@group(0) @binding(5) var<storage, read> bias: array<f32>;
fn f16r2(a: f32, b: f32) -> vec2f { return unpack2x16float(pack2x16float(vec2f(a, b))); }
)";
    if (swiglu) src += "@group(0) @binding(6) var<storage, read> W2: array<u32>;\n";
    body = R"(
    let base = row * p.row_words;
    for (var i = lane; i < p.n_sub; i += LANES) {
      let xv = f16r2(x[p.x_off + 2u * i], x[p.x_off + 2u * i + 1u]);
      acc += dot(unpack2x16float(W[base + i]), xv);
      ACC2_F16
    }
)";
  } else if (w == DType::F32) {
    src += R"(
@group(0) @binding(1) var<storage, read> W: array<vec4f>;
@group(0) @binding(2) var<storage, read> x: array<vec4f>;
@group(0) @binding(4) var<storage, read_write> y: array<f32>;
@group(0) @binding(5) var<storage, read> bias: array<f32>;
)";
    if (swiglu) src += "@group(0) @binding(6) var<storage, read> W2: array<vec4f>;\n";
    body = R"(
    let base = row * p.row_words;
    for (var i = lane; i < p.n_sub; i += LANES) {
      acc += dot(W[base + i], x[p.x_off + i]);
      ACC2_F32
    }
)";
  } else {
    src += R"(
@group(0) @binding(1) var<storage, read> W: array<u32>;
@group(0) @binding(4) var<storage, read_write> y: array<f32>;
@group(0) @binding(5) var<storage, read> bias: array<f32>;
)";
    if (staged) {  // q8_0 activations made by a norm_quant dispatch before
      src +=
          "@group(0) @binding(2) var<storage, read> xq: array<u32>;\n"
          "@group(0) @binding(3) var<storage, read> xd: array<f32>;\n";
    } else {
      src +=
          cat("@group(0) @binding(2) var<storage, read> x: array<f32>;\n",
              "@group(0) @binding(3) var<storage, read> nw: array<f32>;\n", "var<workgroup> xq: array<u32, ",
              cols / 4, "u>;\n", "var<workgroup> xd: array<f32, ", cols / 32, "u>;\n");
    }
    if (swiglu) src += "@group(0) @binding(6) var<storage, read> W2: array<u32>;\n";
    src += f.packed_dot ? kDot4Packed : kDot4Fallback;
    src += kDotHelpers;
    auto instance = [&](std::string_view buffer, std::string_view suffix) {
      std::string sub = sub_dot_source(w);
      replace_all(sub, "WBUF[", cat(buffer, "["));
      replace_all(sub, "SFX(", cat(suffix, "("));
      return sub;
    };
    src += instance("W", "");
    if (swiglu) src += instance("W2", "2");  // the same dot reading W2
    body = R"(
    let base = row * p.row_words;
    for (var sb = lane; sb < p.n_sub; sb += LANES) {
      acc += sub_dot(base, sb);
      ACC2_Q
    }
)";
  }
  src += "var<workgroup> red: array<f32, 128>;\n";
  if (gpu_needs_q8(w) && !staged) src += cat("var<workgroup> ssr: array<vec2f, 128>;\n", kFloatFloat);
  if (swiglu) src += "var<workgroup> red2: array<f32, 128>;\n";
  src += R"(
@compute @workgroup_size(128)
fn main(@builtin(local_invocation_id) lid: vec3u, @builtin(workgroup_id) wg: vec3u) {
  let lane = lid.x % LANES;
  let row = wg.x * (128u / LANES) + lid.x / LANES;
  PROLOGUE
  var acc = 0.0;
  var acc2 = 0.0;
  if (row < p.rows) {
)";
  src += body;
  src += "  }\n";
  std::string reduce = kMatvecReduce;
  replace_all(reduce, "RED2_STORE", swiglu ? "red2[lid.x] = acc2;" : "");
  replace_all(reduce, "RED2_ADD", swiglu ? "red2[lid.x] += red2[lid.x + s];" : "");
  // silu(g) * u with silu(g) = g / (1 + exp(-g)), as the CPU computes it.
  replace_all(reduce, "OUTPUT", swiglu ? "v = v / (1.0 + exp(-v)) * red2[lid.x];" : "");
  src += reduce;
  replace_all(src, "ACC2_F32", swiglu ? "acc2 += dot(W2[base + i], x[p.x_off + i]);" : "");
  replace_all(src, "ACC2_F16", swiglu ? "acc2 += dot(unpack2x16float(W2[base + i]), xv);" : "");
  replace_all(src, "ACC2_Q", swiglu ? "acc2 += sub_dot2(base, sb);" : "");
  if (!swiglu) replace_all(src, "var acc2 = 0.0;", "");
  replace_all(src, "PROLOGUE", gpu_needs_q8(w) && !staged ? kQuantizePrologue : "");
  src = cat("const LANES = ", matvec_lanes(w, cols), "u;\n", src);
  return src;
}

std::string wgsl_embed(DType w) {
  std::string src = R"(
struct P { n: u32, row_words: u32, pad0: u32, pad1: u32 }
@group(0) @binding(0) var<uniform> p: P;
@group(0) @binding(2) var<storage, read> tok: array<u32>;
@group(0) @binding(3) var<storage, read_write> x: array<f32>;
)";
  switch (w) {
    case DType::F32:
      src +=
          "@group(0) @binding(1) var<storage, read> W: array<f32>;\n"
          "fn deq(base: u32, i: u32) -> f32 { return W[base + i]; }\n";
      break;
    case DType::F16:
      src +=
          "@group(0) @binding(1) var<storage, read> W: array<u32>;\n"
          "fn deq(base: u32, i: u32) -> f32 { let v = unpack2x16float(W[base + i / 2u]);"
          " return select(v.x, v.y, (i & 1u) == 1u); }\n";
      break;
    case DType::Q8_0:
      src += R"(@group(0) @binding(1) var<storage, read> W: array<u32>;
fn deq(base: u32, i: u32) -> f32 {
  let b = base + (i / 32u) * 9u; let e = i % 32u;
  let q = bitcast<i32>(W[b + e / 4u] << (24u - 8u * (e % 4u))) >> 24u;
  return f32(q) * unpack2x16float(W[b + 8u]).x;
}
)";
      break;
    case DType::Q4_0:
      src += R"(@group(0) @binding(1) var<storage, read> W: array<u32>;
fn deq(base: u32, i: u32) -> f32 {
  let b = base + (i / 32u) * 5u; let e = i % 32u; let j = e % 16u;
  let byte = (W[b + j / 4u] >> (8u * (j % 4u))) & 0xFFu;
  let q = select(byte & 0xFu, byte >> 4u, e >= 16u);
  return (f32(q) - 8.0) * unpack2x16float(W[b + 4u]).x;
}
)";
      break;
    default:
      return "";
  }
  src += R"(
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) g: vec3u) {
  if (g.x < p.n) { x[g.x] = deq(tok[0] * p.row_words, g.x); }
}
)";
  return src;
}

std::string wgsl_norm_quant() {
  std::string src = R"(
struct P { n: u32, mode: u32, x_off: u32, pad: u32, eps: f32, pad1: f32, pad2: f32, pad3: f32 }
@group(0) @binding(0) var<uniform> p: P;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read> w: array<f32>;
@group(0) @binding(3) var<storage, read_write> y: array<f32>;
@group(0) @binding(4) var<storage, read_write> xq: array<u32>;
@group(0) @binding(5) var<storage, read_write> xd: array<f32>;
var<workgroup> ssr: array<vec2f, 256>;
FF_HELPERS
fn round_half_away(v: f32) -> i32 {
  let a = abs(v);
  var r = floor(a);
  if (a - r >= 0.5) { r += 1.0; }
  return i32(select(r, -r, v < 0.0));
}
@compute @workgroup_size(256)
fn main(@builtin(local_invocation_id) lid: vec3u) {
  let normalize = (p.mode & 1u) != 0u;
  var ss = vec2f(0.0);
  for (var i = lid.x; i < p.n; i += 256u) { let v = x[p.x_off + i]; ss = ff_add(ss, v * v); }
  ssr[lid.x] = ss;
  workgroupBarrier();
  for (var s = 128u; s > 0u; s >>= 1u) {
    if (lid.x < s) { ssr[lid.x] = ff_add2(ssr[lid.x], ssr[lid.x + s]); }
    workgroupBarrier();
  }
  let mean = ff_mean(ssr[0], p.n);
  let scale = select(1.0, 1.0 / sqrt(mean + p.eps), normalize);
  for (var i = lid.x; i < p.n; i += 256u) {
    var v = x[p.x_off + i];
    if (normalize) { v = v * scale * w[i]; }
    y[i] = v;
  }
  if ((p.mode & 4u) != 0u) { return; }
  // q8_0 as ggml's quantize_row_q8_0: d = amax / 127, q = roundf(v * (1 / d)), d kept as f16.
  for (var b = lid.x; b < p.n / 32u; b += 256u) {
    var amax = 0.0;
    for (var e = 0u; e < 32u; e++) {
      var v = x[p.x_off + 32u * b + e];
      if (normalize) { v = v * scale * w[32u * b + e]; }
      amax = max(amax, abs(v));
    }
    let d = amax / 127.0;
    let id = select(0.0, 1.0 / d, d != 0.0);
    for (var k = 0u; k < 8u; k++) {
      var word = 0u;
      for (var e = 0u; e < 4u; e++) {
        let i = 32u * b + 4u * k + e;
        var v = x[p.x_off + i];
        if (normalize) { v = v * scale * w[i]; }
        word |= (bitcast<u32>(round_half_away(v * id)) & 0xFFu) << (8u * e);
      }
      xq[8u * b + k] = word;
    }
    xd[b] = unpack2x16float(pack2x16float(vec2f(d, 0.0))).x;
  }
}
)";
  replace_all(src, "FF_HELPERS", kFloatFloat);
  return src;
}

std::string wgsl_rope_kv() {
  return R"(
struct P { n_head: u32, n_head_kv: u32, hd_k: u32, hd_v: u32, n_rot: u32, halves: u32, k_base: u32, v_base: u32,
           k_row_words: u32, v_row_words: u32, pad0: u32, pad1: u32 }
struct Step { pos: u32, pad0: u32, pad1: u32, pad2: u32 }
@group(0) @binding(0) var<uniform> p: P;
@group(0) @binding(1) var<uniform> step: Step;
@group(0) @binding(2) var<storage, read_write> qkv: array<f32>;
@group(0) @binding(3) var<storage, read> rope: array<f32>;
@group(0) @binding(4) var<storage, read_write> kc: array<u32>;
@group(0) @binding(5) var<storage, read_write> vc: array<u32>;
var<workgroup> buf: array<f32, 256>;
@compute @workgroup_size(64)
fn main(@builtin(local_invocation_id) lid: vec3u, @builtin(workgroup_id) wg: vec3u) {
  let h = wg.x;
  let k_off = p.n_head * p.hd_k;
  let v_off = k_off + p.n_head_kv * p.hd_k;
  let pos = step.pos;
  if (h < p.n_head + p.n_head_kv) {
    let is_k = h >= p.n_head;
    let src = select(h * p.hd_k, k_off + (h - p.n_head) * p.hd_k, is_k);
    for (var i = lid.x; i < p.hd_k; i += 64u) { buf[i] = qkv[src + i]; }
    workgroupBarrier();
    let half_rot = p.n_rot / 2u;
    for (var i = lid.x; i < half_rot; i += 64u) {
      let a = select(2u * i, i, p.halves != 0u);
      let b = select(2u * i + 1u, i + half_rot, p.halves != 0u);
      let c = rope[(pos * half_rot + i) * 2u];
      let s = rope[(pos * half_rot + i) * 2u + 1u];
      let x0 = buf[a];
      let x1 = buf[b];
      buf[a] = x0 * c - x1 * s;
      buf[b] = x0 * s + x1 * c;
    }
    workgroupBarrier();
    if (!is_k) {
      for (var i = lid.x; i < p.hd_k; i += 64u) { qkv[src + i] = buf[i]; }
    } else {
      let dst = p.k_base + pos * p.k_row_words + (h - p.n_head) * (p.hd_k / 2u);
      for (var i = lid.x; i < p.hd_k / 2u; i += 64u) {
        kc[dst + i] = pack2x16float(vec2f(buf[2u * i], buf[2u * i + 1u]));
      }
    }
  } else {
    let kvh = h - p.n_head - p.n_head_kv;
    let src = v_off + kvh * p.hd_v;
    let dst = p.v_base + pos * p.v_row_words + kvh * (p.hd_v / 2u);
    for (var i = lid.x; i < p.hd_v / 2u; i += 64u) {
      vc[dst + i] = pack2x16float(vec2f(qkv[src + 2u * i], qkv[src + 2u * i + 1u]));
    }
  }
}
)";
}

std::string wgsl_attention(uint32_t max_keys) {
  std::string src = R"(
struct P { n_head: u32, n_head_kv: u32, hd_k: u32, hd_v: u32, k_row_words: u32, v_row_words: u32, k_base: u32,
           v_base: u32, scale: f32, pad0: u32, pad1: u32, pad2: u32 }
struct Step { pos: u32, pad0: u32, pad1: u32, pad2: u32 }
@group(0) @binding(0) var<uniform> p: P;
@group(0) @binding(1) var<uniform> step: Step;
@group(0) @binding(2) var<storage, read> qkv: array<f32>;
@group(0) @binding(3) var<storage, read> kc: array<u32>;
@group(0) @binding(4) var<storage, read> vc: array<u32>;
@group(0) @binding(5) var<storage, read_write> out: array<f32>;
const MAX_KEYS = MAXKu;
var<workgroup> scores: array<f32, MAX_KEYS>;
var<workgroup> qs: array<f32, 256>;
fn f16r(v: f32) -> f32 { return unpack2x16float(pack2x16float(vec2f(v, 0.0))).x; }
@compute @workgroup_size(64)
fn main(@builtin(local_invocation_id) lid: vec3u, @builtin(workgroup_id) wg: vec3u) {
  let h = wg.x;
  let kvh = h / (p.n_head / p.n_head_kv);
  let n_keys = min(step.pos + 1u, MAX_KEYS);
  // q rounded to f16, as ggml's flash attention converts it to the cache's type
  for (var d = lid.x; d < p.hd_k; d += 64u) { qs[d] = f16r(qkv[h * p.hd_k + d]); }
  workgroupBarrier();
  for (var t = lid.x; t < n_keys; t += 64u) {
    let k0 = p.k_base + t * p.k_row_words + kvh * (p.hd_k / 2u);
    var s = 0.0;
    for (var d = 0u; d < p.hd_k / 2u; d++) {
      let kv = unpack2x16float(kc[k0 + d]);
      s += kv.x * qs[2u * d] + kv.y * qs[2u * d + 1u];
    }
    scores[t] = s * p.scale;
  }
  workgroupBarrier();
  // Online softmax over the keys in order with the running sum of values kept in f16 (ggml's CPU kernel),
  // one output dimension per invocation.
  for (var d = lid.x; d < p.hd_v; d += 64u) {
    var m = -3.4028234e38f;
    var sum = 0.0;
    var acc = 0.0;
    let word = kvh * (p.hd_v / 2u) + d / 2u;
    let odd = (d & 1u) == 1u;
    for (var t = 0u; t < n_keys; t++) {
      let s = scores[t];
      var old_scale = 1.0;
      var weight = 1.0;
      if (s > m) {
        old_scale = exp(m - s);
        m = s;
        acc = f16r(acc * old_scale);
      } else {
        weight = exp(s - m);
      }
      let vv = unpack2x16float(vc[p.v_base + t * p.v_row_words + word]);
      acc = f16r(acc + select(vv.x, vv.y, odd) * weight);
      sum = sum * old_scale + weight;
    }
    let inv = select(1.0 / sum, 0.0, sum == 0.0);
    out[h * p.hd_v + d] = acc * inv;
  }
}
)";
  replace_all(src, "MAXK", cat(max_keys));
  return src;
}

std::string wgsl_argmax_partial() {
  return R"(
struct P { n: u32, pad0: u32, pad1: u32, pad2: u32 }
@group(0) @binding(0) var<uniform> p: P;
@group(0) @binding(1) var<storage, read> logits: array<f32>;
@group(0) @binding(2) var<storage, read_write> partial: array<u32>;
var<workgroup> rv: array<f32, 256>;
var<workgroup> ri: array<u32, 256>;
@compute @workgroup_size(256)
fn main(@builtin(local_invocation_id) lid: vec3u, @builtin(workgroup_id) wg: vec3u) {
  var best = -3.4028234e38f;
  var best_i = 0xFFFFFFFFu;
  for (var k = 0u; k < 4u; k++) {
    let i = wg.x * 1024u + k * 256u + lid.x;
    if (i < p.n) {
      let v = logits[i];
      if (v > best || best_i == 0xFFFFFFFFu) { best = v; best_i = i; }
    }
  }
  rv[lid.x] = best;
  ri[lid.x] = best_i;
  workgroupBarrier();
  for (var s = 128u; s > 0u; s >>= 1u) {
    if (lid.x < s) {
      let v = rv[lid.x + s]; let i = ri[lid.x + s];
      if (i != 0xFFFFFFFFu && (ri[lid.x] == 0xFFFFFFFFu || v > rv[lid.x] || (v == rv[lid.x] && i < ri[lid.x]))) {
        rv[lid.x] = v; ri[lid.x] = i;
      }
    }
    workgroupBarrier();
  }
  if (lid.x == 0u) { partial[2u * wg.x] = bitcast<u32>(rv[0]); partial[2u * wg.x + 1u] = ri[0]; }
}
)";
}

std::string wgsl_argmax_final() {
  return R"(
struct P { n_groups: u32, pad0: u32, pad1: u32, pad2: u32 }
@group(0) @binding(0) var<uniform> p: P;
@group(0) @binding(1) var<storage, read> partial: array<u32>;
@group(0) @binding(2) var<storage, read_write> tok: array<u32>;
var<workgroup> rv: array<f32, 256>;
var<workgroup> ri: array<u32, 256>;
@compute @workgroup_size(256)
fn main(@builtin(local_invocation_id) lid: vec3u) {
  var best = -3.4028234e38f;
  var best_i = 0xFFFFFFFFu;
  for (var g = lid.x; g < p.n_groups; g += 256u) {
    let v = bitcast<f32>(partial[2u * g]); let i = partial[2u * g + 1u];
    if (best_i == 0xFFFFFFFFu || v > best || (v == best && i < best_i)) { best = v; best_i = i; }
  }
  rv[lid.x] = best;
  ri[lid.x] = best_i;
  workgroupBarrier();
  for (var s = 128u; s > 0u; s >>= 1u) {
    if (lid.x < s) {
      let v = rv[lid.x + s]; let i = ri[lid.x + s];
      if (i != 0xFFFFFFFFu && (ri[lid.x] == 0xFFFFFFFFu || v > rv[lid.x] || (v == rv[lid.x] && i < ri[lid.x]))) {
        rv[lid.x] = v; ri[lid.x] = i;
      }
    }
    workgroupBarrier();
  }
  if (lid.x == 0u) { tok[0] = ri[0]; }
}
)";
}

}  // namespace sotto::gpu
