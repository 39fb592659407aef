// The WGSL of gpu/kernels.h. Block layouts on the GPU (words = u32; f16 scales in the low half of a word):
//   Q8_0  9 words:  qs[32] (8 words), d
//   Q4_0  5 words:  qs[16] (4 words: element j in the low nibble of byte j, j + 16 in the high one), d
//   Q5_0  6 words:  qh (bit j = 5th bit of element j), qs[16] (4 words), d
//   Q4_K 36 words:  d | dmin << 16, scales[12] (3 words), qs[128] (32 words)          (GGUF's own layout)
//   Q6_K 53 words:  ql[128] (32 words), qh[64] (16 words), scales[16] int8 (4 words), d (GGUF's + 2 bytes)
// Every quantized dot is integer within a 32-element sub-block, scaled by d_w * d_x as ggml does.
#include "gpu/kernels.h"
#include "gpu/kernels_wgsl.h"

#include "core/error.h"

namespace sotto::gpu {

namespace wgsl_parts {

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

// Each weight type's 32-element sub-block dot in two halves, so that a kernel can load a sub-block's words early
// and use them later (the layer kernel loads a phase's first weights while it waits at the grid barrier before):
//   ldSFX(at, sb) -> array<u32, N>: the words sub-block sb of the row starting at word `at` of WBUF reads, loads
//     only (sub_dot_words(w) gives N);
//   wdotSFX(w, sb, x0, xi) -> f32: those words times the q8_0 activations xq[x0 ..] scaled by xd[xi]; sb is the
//     sub-block's index in its row (a K-quant's place in its super-block).
const char* kSubDotQ8_0 = R"(
fn ldSFX(at: u32, sb: u32) -> array<u32, 9> {
  let b = at + sb * 9u;
  return array<u32, 9>(WBUF[b], WBUF[b + 1u], WBUF[b + 2u], WBUF[b + 3u], WBUF[b + 4u], WBUF[b + 5u], WBUF[b + 6u],
                       WBUF[b + 7u], WBUF[b + 8u]);
}
fn wdotSFX(w: array<u32, 9>, sb: u32, x0: u32, xi: u32) -> f32 {
  var s = 0i;
  for (var k = 0u; k < 8u; k++) { s += dot4(w[k], xq[x0 + k]); }
  return f32(s) * (f16lo(w[8]) * xd[xi]);
}
)";

const char* kSubDotQ4_0 = R"(
fn ldSFX(at: u32, sb: u32) -> array<u32, 5> {
  let b = at + sb * 5u;
  return array<u32, 5>(WBUF[b], WBUF[b + 1u], WBUF[b + 2u], WBUF[b + 3u], WBUF[b + 4u]);
}
fn wdotSFX(w: array<u32, 5>, sb: u32, x0: u32, xi: u32) -> f32 {
  var s = 0i;
  for (var k = 0u; k < 4u; k++) {
    s += dot4(w[k] & 0x0F0F0F0Fu, xq[x0 + k]) + dot4((w[k] >> 4u) & 0x0F0F0F0Fu, xq[x0 + 4u + k]);
  }
  s -= 8i * xsum(x0, 8u);
  return f32(s) * (f16lo(w[4]) * xd[xi]);
}
)";

const char* kSubDotQ5_0 = R"(
fn spread4SFX(bits: u32) -> u32 {
  return ((bits & 1u) << 4u) | ((bits & 2u) << 11u) | ((bits & 4u) << 18u) | ((bits & 8u) << 25u);
}
fn ldSFX(at: u32, sb: u32) -> array<u32, 6> {
  let b = at + sb * 6u;
  return array<u32, 6>(WBUF[b], WBUF[b + 1u], WBUF[b + 2u], WBUF[b + 3u], WBUF[b + 4u], WBUF[b + 5u]);
}
fn wdotSFX(w: array<u32, 6>, sb: u32, x0: u32, xi: u32) -> f32 {
  var s = 0i;
  for (var k = 0u; k < 4u; k++) {
    let lo = (w[1u + k] & 0x0F0F0F0Fu) | spread4SFX(w[0] >> (4u * k));
    let hi = ((w[1u + k] >> 4u) & 0x0F0F0F0Fu) | spread4SFX(w[0] >> (16u + 4u * k));
    s += dot4(lo, xq[x0 + k]) + dot4(hi, xq[x0 + 4u + k]);
  }
  s -= 16i * xsum(x0, 8u);
  return f32(s) * (f16lo(w[5]) * xd[xi]);
}
)";

// Q4_K: the super-block's d | dmin word, its three scale words, then the sub-block's 8 words of nibbles (shared
// with its neighbour: the low nibbles for even sub-blocks, the high for odd).
const char* kSubDotQ4_K = R"(
fn ldSFX(at: u32, sb: u32) -> array<u32, 12> {
  let b = at + (sb / 8u) * 36u;
  let q = b + 4u + 8u * ((sb % 8u) / 2u);
  return array<u32, 12>(WBUF[b], WBUF[b + 1u], WBUF[b + 2u], WBUF[b + 3u], WBUF[q], WBUF[q + 1u], WBUF[q + 2u],
                        WBUF[q + 3u], WBUF[q + 4u], WBUF[q + 5u], WBUF[q + 6u], WBUF[q + 7u]);
}
fn scale_byteSFX(w: array<u32, 12>, i: u32) -> u32 {
  return (select(select(w[1], w[2], i >= 4u), w[3], i >= 8u) >> (8u * (i % 4u))) & 0xFFu;
}
fn wdotSFX(w: array<u32, 12>, sb: u32, x0: u32, xi: u32) -> f32 {
  let j = sb % 8u;
  var sc: u32; var m: u32;
  if (j < 4u) {
    sc = scale_byteSFX(w, j) & 63u; m = scale_byteSFX(w, j + 4u) & 63u;
  } else {
    sc = (scale_byteSFX(w, j + 4u) & 0xFu) | ((scale_byteSFX(w, j - 4u) >> 6u) << 4u);
    m = (scale_byteSFX(w, j + 4u) >> 4u) | ((scale_byteSFX(w, j) >> 6u) << 4u);
  }
  let shift = 4u * (j % 2u);
  var s = 0i;
  for (var k = 0u; k < 8u; k++) { s += dot4((w[4u + k] >> shift) & 0x0F0F0F0Fu, xq[x0 + k]); }
  let dm = unpack2x16float(w[0]);
  return xd[xi] * (dm.x * f32(sc) * f32(s) - dm.y * f32(m) * f32(xsum(x0, 8u)));
}
)";

// Q6_K: the sub-block's 8 words of low bits, its 8 words of high bits, the word holding its two int8 scales, d.
const char* kSubDotQ6_K = R"(
fn ldSFX(at: u32, sb: u32) -> array<u32, 18> {
  let b = at + (sb / 8u) * 53u; let j = sb % 8u;
  let n = j / 4u; let t = j % 4u;
  let l = b + 16u * n + 8u * (t & 1u);
  let h = b + 32u + 8u * n;
  return array<u32, 18>(WBUF[l], WBUF[l + 1u], WBUF[l + 2u], WBUF[l + 3u], WBUF[l + 4u], WBUF[l + 5u],
                        WBUF[l + 6u], WBUF[l + 7u], WBUF[h], WBUF[h + 1u], WBUF[h + 2u], WBUF[h + 3u],
                        WBUF[h + 4u], WBUF[h + 5u], WBUF[h + 6u], WBUF[h + 7u], WBUF[b + 48u + 2u * n + t / 2u],
                        WBUF[b + 52u]);
}
fn scale_i8SFX(word: u32, i: u32) -> f32 { return f32(bitcast<i32>(word << (24u - 8u * (i % 4u))) >> 24u); }
fn wdotSFX(w: array<u32, 18>, sb: u32, x0: u32, xi: u32) -> f32 {
  let j = sb % 8u;
  let t = j % 4u;
  let lshift = 4u * (t >> 1u);
  var s0 = 0i; var s1 = 0i;
  for (var k = 0u; k < 8u; k++) {
    let q = ((w[k] >> lshift) & 0x0F0F0F0Fu) | (((w[8u + k] >> (2u * t)) & 0x03030303u) << 4u);
    let p = dot4(q, xq[x0 + k]) - 32i * dot4(0x01010101u, xq[x0 + k]);
    if (k < 4u) { s0 += p; } else { s1 += p; }
  }
  let si = 2u * t;  // the scales' bytes in w[16]: 8 n + 2 t and the next, of the 16
  return f16lo(w[17]) * xd[xi] * (scale_i8SFX(w[16], si) * f32(s0) + scale_i8SFX(w[16], si + 1u) * f32(s1));
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

uint32_t sub_dot_words(DType w) {
  switch (w) {
    case DType::Q8_0:
      return 9;
    case DType::Q4_0:
      return 5;
    case DType::Q5_0:
      return 6;
    case DType::Q4_K:
      return 12;
    case DType::Q6_K:
      return 18;
    default:
      return 0;
  }
}

std::string sub_dot_instance(DType w, std::string_view buffer, std::string_view suffix, bool per_token) {
  const char* halves = sub_dot_source(w);
  if (!halves) return "";
  std::string s = cat(halves, per_token ? R"(fn sub_dotSFX(base: u32, sb: u32, xo: u32, xdo: u32) -> f32 {
  return wdotSFX(ldSFX(base, sb), sb, xo + sb * 8u, xdo + sb);
}
)"
                                        : R"(fn sub_dotSFX(base: u32, sb: u32) -> f32 {
  return wdotSFX(ldSFX(base, sb), sb, sb * 8u, sb);
}
)");
  replace_all(s, "WBUF[", buffer);
  replace_all(s, "SFX(", cat(suffix, "("));
  return s;
}

// GELU as ggml's CPU computes it (cpu/gelu.h): x rounded to f16 indexes a table of f16 results (two to a word),
// 0 below -10, x itself from 10 up.
const char* kGeluTable = R"(
@group(0) @binding(7) var<storage, read> gelu_table: array<u32>;
fn gelu_f16(g: f32) -> f32 {
  if (g <= -10.0) { return 0.0; }
  if (g >= 10.0) { return g; }
  let h = f16_bits(g);
  return unpack2x16float((gelu_table[h / 2u] >> (16u * (h % 2u))) & 0xFFFFu).x;
}
)";

// f32 -> f16 bits rounded to nearest, ties to even, as the CPU's f32_to_f16 (core/half.h) and F16C do. WGSL lets
// pack2x16float round either way (NVIDIA's driver did not round to nearest: Gemma 3's GELU table lookups and f16
// cache drifted from the CPU's), so every conversion goes through this. NaN stays NaN; from 65520 on, infinity.
const char* kF16Rne = R"(
fn f16_bits(x: f32) -> u32 {
  let b = bitcast<u32>(x);
  let sign = (b >> 16u) & 0x8000u;
  let a = b & 0x7FFFFFFFu;
  if (a > 0x7F800000u) { return sign | 0x7E00u; }
  if (a >= 0x477FF000u) { return sign | 0x7C00u; }
  if (a < 0x38800000u) { return sign | u32(round(bitcast<f32>(a) * 16777216.0)); }
  let m = a - 0x38000000u;
  return sign | ((m + 0xFFFu + ((m >> 13u) & 1u)) >> 13u);
}
// v rounded to f16 precision, as an f32, without a branch: this sits in attention's serial walk over the keys
// (twice a key), where a branch cost the H200 ~6 % of decoding after 1,024 tokens. Where the result is a normal
// f16, on the f32 bits (13 mantissa bits dropped, ties to even; a carry moves the exponent); below, a multiple
// of 2^-24 (round() ties to even, the scalings by powers of two exact); from 65520 up, infinity (NaN stays NaN).
fn f16r(v: f32) -> f32 {
  let b = bitcast<u32>(v);
  let a = b & 0x7FFFFFFFu;
  let normal = bitcast<f32>((b + 0xFFFu + ((b >> 13u) & 1u)) & 0xFFFFE000u);
  let subnormal = round(v * 16777216.0) * 5.9604644775390625e-8;
  let huge = select(bitcast<f32>((b & 0x80000000u) | 0x7F800000u), v, a > 0x7F800000u);
  return select(select(normal, subnormal, a < 0x38800000u), huge, a >= 0x477FF000u);
}
fn f16r2(a: f32, b: f32) -> vec2f { return unpack2x16float(f16_bits(a) | (f16_bits(b) << 16u)); }
fn pack_f16(a: f32, b: f32) -> u32 { return f16_bits(a) | (f16_bits(b) << 16u); }
)";

// The same conversions as f16 casts, one instruction each where the hardware has them. WGSL lets a cast round
// either way, so Ops uses these only after native_f16_rounds_to_nearest_even() found them equal to the CPU's
// rounding on the op check's values (halfway cases, subnormals, the overflow edge).
const char* kF16Native = R"(
fn f16_bits(x: f32) -> u32 { return bitcast<u32>(vec2h(f16(x), 0.0h)); }
fn f16r(v: f32) -> f32 { return f32(f16(v)); }
fn f16r2(a: f32, b: f32) -> vec2f { return vec2f(vec2h(f16(a), f16(b))); }
fn pack_f16(a: f32, b: f32) -> u32 { return bitcast<u32>(vec2h(f16(a), f16(b))); }
)";

const char* f16_helpers(const KernelFeatures& f) {
  return f.f16 ? kF16Native : kF16Rne;
}

std::string wgsl_enables(const KernelFeatures& f, bool uses_f16, bool uses_subgroups) {
  return cat(f.f16 && uses_f16 ? "enable f16;\n" : "",
             f.subgroups && uses_subgroups ? "enable subgroups;\n" : "");
}

std::string reduction(std::string_view tree, std::string_view width, std::string_view butterfly,
                      bool subgroups) {
  std::string t(tree);
  replace_all(t, "TREE_END", subgroups ? "sg" : "1u");
  return subgroups ? cat("  if (sg < ", width, ") {", t, "  }\n", butterfly) : t;
}

void replace_all(std::string& s, std::string_view from, std::string_view to) {
  for (size_t at = s.find(from); at != std::string::npos; at = s.find(from, at + to.size()))
    s.replace(at, from.size(), to);
}

}  // namespace wgsl_parts

namespace {

using namespace wgsl_parts;

const char* kMatvecParams = R"(
struct P { rows: u32, cols: u32, mode: u32, y_off: u32, row_words: u32, n_sub: u32, b_off: u32, x_off: u32,
           eps: f32, pad0: u32, pad1: u32, pad2: u32 }
@group(0) @binding(0) var<uniform> p: P;
)";

// The LANES-lane sum of each row's partial dots (a tree: stride LANES / 2, then half that, ... 1; see
// reduction()), then the output with bias / residual / SwiGLU applied. Lane 0 ends with the sum in acc (acc2:
// the SwiGLU's up).
//
// With subgroups the strides below the subgroup size are a butterfly in registers (no barriers: on a GPU whose
// subgroups hold 32 invocations, none at all). At stride s lane i < s adds lane i + s's partial, in that order,
// as the tree does (i ^ s = i + s), so lane 0 gets the tree's sum bit for bit; the lanes past s compute sums
// nobody reads. The strides of at least the subgroup size (a row's lanes spanning subgroups: SwiftShader's hold
// 4) still go through workgroup memory. subgroup_size is uniform (one value per dispatch), so the barriers
// stay in uniform control flow. Invocations fill subgroups in local_invocation_index order, so lane ^ s is the
// subgroup invocation id ^ s for s < subgroup_size (the op check "subgroup layout" tests it).
const char* kMatvecTree = R"(
  red[lid.x] = acc;
  RED2_STORE
  workgroupBarrier();
  for (var s = LANES / 2u; s >= TREE_END; s >>= 1u) {
    if (lane < s) { red[lid.x] += red[lid.x + s]; RED2_ADD }
    workgroupBarrier();
  }
  acc = red[lid.x];
  ACC2_LOAD
)";
const char* kMatvecButterfly = R"(
  for (var s = min(sg, LANES) / 2u; s > 0u; s >>= 1u) {
    acc += subgroupShuffleXor(acc, s);
    ACC2_SHUFFLE
  }
)";

const char* kMatvecOutput = R"(  if (lane == 0u && row < p.rows) {
    var v = acc;
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

// q8_0 as llama.cpp's x86 quantize_row_q8_0 and the CPU's quantize_activations_q8_0 (cpu/quant_dot.h):
// d = amax / 127 kept as f16, q = v * (127 / amax) rounded half to even (WGSL's round()); ggml's reference
// form, roundf(v * (1 / d)), gives another code for some values. Of the values x[p.x_off + i], times
// scale * NW[i] when `normalize`, into xq / xd: the one quantizer of the matrix x vector prologue (workgroup
// memory, 128 invocations) and of norm_quant (storage, also 128). One invocation per word (4 values) rather
// than per 32-value block: each block's largest |value| gathers in bmax through an atomic max of the f32 bits
// (non-negative floats order as their bits), so a thread reads 8 values instead of 64 one after another: the
// serial reads, not the arithmetic, made this the slow part of those kernels.
const char* kQuantizeQ8_0 = R"(
  for (var wi = lid.x; wi < NVALS / 4u; wi += STRIDEu) {
    var m = 0.0;
    for (var e = 0u; e < 4u; e++) {
      var v = x[p.x_off + 4u * wi + e];
      if (normalize) { v = v * scale * NW[4u * wi + e]; }
      m = max(m, abs(v));
    }
    atomicMax(&bmax[wi / 8u], bitcast<u32>(m));
  }
  workgroupBarrier();
  for (var wi = lid.x; wi < NVALS / 4u; wi += STRIDEu) {
    let b = wi / 8u;
    let amax = bitcast<f32>(atomicLoad(&bmax[b]));
    let d = amax / 127.0;
    let id = select(0.0, 127.0 / amax, amax != 0.0);
    var word = 0u;
    for (var e = 0u; e < 4u; e++) {
      let i = 4u * wi + e;
      var v = x[p.x_off + i];
      if (normalize) { v = v * scale * NW[i]; }
      word |= (bitcast<u32>(i32(round(v * id))) & 0xFFu) << (8u * e);
    }
    xq[8u * b + wi % 8u] = word;
    if (wi % 8u == 0u) { xd[b] = f16r(d); }
  }
)";

// q8_K for K-quant weights, as ggml's quantize_row_q8_K (cpu/quant_dot.h): per 256 values, the first value of
// largest magnitude maps to -127 (iscale = -127 / max, round half to even, at most 127), d = 1 / iscale kept in
// f32. The block's d goes to the xd slot of each of its eight 32-value sub-blocks, so the K-quant sub-block dots
// read it where they read a q8_0 scale. bfirst finds the first index of the largest magnitude through an atomic
// max of (~index).
const char* kQuantizeQ8_K = R"(
  for (var wi = lid.x; wi < NVALS / 4u; wi += STRIDEu) {
    var m = 0.0;
    for (var e = 0u; e < 4u; e++) {
      var v = x[p.x_off + 4u * wi + e];
      if (normalize) { v = v * scale * NW[4u * wi + e]; }
      m = max(m, abs(v));
    }
    atomicMax(&bmax[wi / 64u], bitcast<u32>(m));
  }
  workgroupBarrier();
  for (var wi = lid.x; wi < NVALS / 4u; wi += STRIDEu) {
    let amax = bitcast<f32>(atomicLoad(&bmax[wi / 64u]));
    for (var e = 0u; e < 4u; e++) {
      let i = 4u * wi + e;
      var v = x[p.x_off + i];
      if (normalize) { v = v * scale * NW[i]; }
      if (abs(v) == amax) { atomicMax(&bfirst[wi / 64u], 0xFFFFFFFFu - i); }
    }
  }
  workgroupBarrier();
  for (var wi = lid.x; wi < NVALS / 4u; wi += STRIDEu) {
    let kb = wi / 64u;
    var iscale = 0.0;
    var d = 0.0;
    if (bitcast<f32>(atomicLoad(&bmax[kb])) != 0.0) {
      let first = 0xFFFFFFFFu - atomicLoad(&bfirst[kb]);
      var mx = x[p.x_off + first];
      if (normalize) { mx = mx * scale * NW[first]; }
      iscale = -127.0 / mx;
      d = 1.0 / iscale;
    }
    let b = wi / 8u;
    var word = 0u;
    for (var e = 0u; e < 4u; e++) {
      let i = 4u * wi + e;
      var v = x[p.x_off + i];
      if (normalize) { v = v * scale * NW[i]; }
      let q = min(127.0, round(iscale * v));
      word |= (bitcast<u32>(i32(q)) & 0xFFu) << (8u * e);
    }
    xq[8u * b + wi % 8u] = word;
    if (wi % 8u == 0u) { xd[b] = d; }
  }
)";

// The RMSNorm's sum of squares: each of 128 invocations' partial ss summed by a tree over ssr (stride 64, 32,
// ... 1, ff_add2(own, partner)) into ssr[0], which every invocation reads after. With subgroups the strides below
// the subgroup size are a butterfly in registers (as kMatvecTree's, the same sum bit for bit), and invocation 0
// stores the sum.
const char* kSumOfSquaresTree = R"(
    ssr[lid.x] = ss;
    workgroupBarrier();
    for (var s = 64u; s >= TREE_END; s >>= 1u) {
      if (lid.x < s) { ssr[lid.x] = ff_add2(ssr[lid.x], ssr[lid.x + s]); }
      workgroupBarrier();
    }
    ss = ssr[lid.x];
)";
const char* kSumOfSquaresButterfly = R"(
    for (var s = min(sg, 128u) / 2u; s > 0u; s >>= 1u) { ss = ff_add2(ss, subgroupShuffleXor(ss, s)); }
    if (lid.x == 0u) { ssr[0] = ss; }
    workgroupBarrier();
)";
std::string sum_of_squares(const KernelFeatures& f) {
  return reduction(kSumOfSquaresTree, "128u", kSumOfSquaresButterfly, f.subgroups);
}

std::string quantize_q8_0(std::string_view n_values, std::string_view norm_weight, uint32_t stride,
                          bool q8_k = false) {
  std::string s = q8_k ? kQuantizeQ8_K : kQuantizeQ8_0;
  replace_all(s, "NVALS", n_values);
  replace_all(s, "NW[", cat(norm_weight, "["));
  replace_all(s, "STRIDE", cat(stride));
  return s;
}

// Every workgroup quantizes x (optionally RMS-normalised first: mode bit 4) into q8_0 blocks in workgroup
// memory itself, so neither the norm nor the quantization costs a dispatch of its own.
const char* kQuantizePrologue = R"(
  let normalize = (p.mode & 4u) != 0u;
  var scale = 1.0;
  if (normalize) {
    var ss = vec2f(0.0);
    for (var i = lid.x; i < p.cols; i += 128u) { let v = x[p.x_off + i]; ss = ff_add(ss, v * v); }
SUM_OF_SQUARES
    scale = 1.0 / sqrt(ff_mean(ssr[0], p.cols) + p.eps);
    workgroupBarrier();
  }
QUANTIZE_Q8_0
  workgroupBarrier();
)";

}  // namespace

const char* wgsl_float_float() {
  return kFloatFloat;
}

std::string features_key(const KernelFeatures& f) {
  return cat(f.packed_dot ? "" : "_nodot", f.subgroups ? "_sg" : "", f.f16 ? "_h" : "");
}

bool gpu_matvec_supported(DType w) {
  return w == DType::F32 || w == DType::F16 || sub_dot_source(w) != nullptr;
}
bool gpu_needs_q8(DType w) {
  return w != DType::F32 && w != DType::F16;
}
bool gpu_needs_q8_k(DType w) {
  return w == DType::Q4_K || w == DType::Q6_K;
}

// Invocations per row: 16 for quantized rows (a workgroup covers 8 rows), 32 for f32 / f16. On the H200,
// decoding Qwen2.5-0.5B Q4_0: 16 lanes for its 896-wide rows (28 blocks, 1-2 per invocation) rather than 8
// (3-4 blocks each, in turn) gives q·k·v and gate·up twice the workgroups and decodes at 816 tokens/s against
// 716 (f32 sum; f16: 765 against 676), at a cost of 3 ms on a 256-token prompt (21.7 ms against 18.7: the prompt
// kernels split rows the same way, so that a prompt's sums are a decoded token's); 32 lanes for the
// 4864-wide ffn_down decoded no faster and cost prompts 12 % more.
uint32_t matvec_lanes(DType w) {
  return gpu_needs_q8(w) ? 16 : 32;
}
bool gpu_embed_supported(DType w) {
  return w == DType::F32 || w == DType::F16 || w == DType::Q8_0 || w == DType::Q4_0 || w == DType::Q5_0;
}

std::string wgsl_matvec(DType w, bool swiglu, const KernelFeatures& f, uint32_t cols, bool staged,
                        bool gelu) {
  std::string src = kMatvecParams;
  src += f16_helpers(f);
  if (swiglu && gelu) src += kGeluTable;
  std::string body;
  if (w == DType::F16) {  // x rounded to f16 first, as ggml converts it for f16 weights
    src += R"(
@group(0) @binding(1) var<storage, read> W: array<u32>;
@group(0) @binding(2) var<storage, read> x: array<f32>;
@group(0) @binding(4) var<storage, read_write> y: array<f32>;
@group(0) @binding(5) var<storage, read> bias: array<f32>;
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
      src += cat("@group(0) @binding(2) var<storage, read> x: array<f32>;\n",
                 "@group(0) @binding(3) var<storage, read> nw: array<f32>;\n",
                 "var<workgroup> xq: array<u32, ", cols / 4, "u>;\n", "var<workgroup> xd: array<f32, ",
                 cols / 32, "u>;\n", "var<workgroup> bmax: array<atomic<u32>, ", cols / 32, "u>;\n",
                 "var<workgroup> bfirst: array<atomic<u32>, ", cols / 32, "u>;\n");
    }
    if (swiglu) src += "@group(0) @binding(6) var<storage, read> W2: array<u32>;\n";
    src += f.packed_dot ? kDot4Packed : kDot4Fallback;
    src += kDotHelpers;
    src += sub_dot_instance(w, "W[", "");
    if (swiglu) src += sub_dot_instance(w, "W2[", "2");  // the same dot reading W2
    // Four sub-blocks a step, written out so that their weight loads can be issued together rather than each
    // waiting for the previous sum: a small gain on the H200 (ffn_down 9.9-10.3 us against 10.5-11.2; Q4_K_M's
    // 13.8-14.1 against 14.5-14.6). The sums are still added one by one in the loop's order.
    body = R"(
    let base = row * p.row_words;
    var sb = lane;
    for (; sb + 3u * LANES < p.n_sub; sb += 4u * LANES) {
      let d0 = sub_dot(base, sb);
      let d1 = sub_dot(base, sb + LANES);
      let d2 = sub_dot(base, sb + 2u * LANES);
      let d3 = sub_dot(base, sb + 3u * LANES);
      ACC2_Q4
      acc += d0;
      acc += d1;
      acc += d2;
      acc += d3;
      ACC2_ADD4
    }
    for (; sb < p.n_sub; sb += LANES) {
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
fn main(@builtin(local_invocation_id) lid: vec3u, @builtin(workgroup_id) wg: vec3u SUBGROUP_SIZE) {
  let lane = lid.x % LANES;
  let row = wg.x * (128u / LANES) + lid.x / LANES;
  PROLOGUE
  var acc = 0.0;
  var acc2 = 0.0;
  if (row < p.rows) {
)";
  src += body;
  src += "  }\n";
  std::string reduce = reduction(kMatvecTree, "LANES", kMatvecButterfly, f.subgroups) + kMatvecOutput;
  replace_all(reduce, "RED2_STORE", swiglu ? "red2[lid.x] = acc2;" : "");
  replace_all(reduce, "RED2_ADD", swiglu ? "red2[lid.x] += red2[lid.x + s];" : "");
  replace_all(reduce, "ACC2_LOAD", swiglu ? "acc2 = red2[lid.x];" : "");
  replace_all(reduce, "ACC2_SHUFFLE", swiglu ? "acc2 += subgroupShuffleXor(acc2, s);" : "");
  // silu(g) * u with silu(g) = g / (1 + exp(-g)), as the CPU computes it; or gelu(g) * u from ggml's table.
  replace_all(reduce, "OUTPUT",
              !swiglu ? ""
              : gelu  ? "v = gelu_f16(v) * acc2;"
                      : "v = v / (1.0 + exp(-v)) * acc2;");
  src += reduce;
  replace_all(src, "SUBGROUP_SIZE", f.subgroups ? ", @builtin(subgroup_size) sg: u32" : "");
  replace_all(src, "ACC2_F32", swiglu ? "acc2 += dot(W2[base + i], x[p.x_off + i]);" : "");
  replace_all(src, "ACC2_F16", swiglu ? "acc2 += dot(unpack2x16float(W2[base + i]), xv);" : "");
  replace_all(
      src, "ACC2_Q4",
      swiglu ? "let e0 = sub_dot2(base, sb);\n      let e1 = sub_dot2(base, sb + LANES);\n      let e2 = "
               "sub_dot2(base, sb + 2u * LANES);\n      let e3 = sub_dot2(base, sb + 3u * LANES);"
             : "");
  replace_all(src, "ACC2_ADD4",
              swiglu ? "acc2 += e0;\n      acc2 += e1;\n      acc2 += e2;\n      acc2 += e3;" : "");
  replace_all(src, "ACC2_Q", swiglu ? "acc2 += sub_dot2(base, sb);" : "");
  if (!swiglu) replace_all(src, "var acc2 = 0.0;", "");
  if (gpu_needs_q8(w) && !staged) {
    std::string prologue = kQuantizePrologue;
    replace_all(prologue, "QUANTIZE_Q8_0", quantize_q8_0("p.cols", "nw", 128, gpu_needs_q8_k(w)));
    replace_all(prologue, "SUM_OF_SQUARES", sum_of_squares(f));
    replace_all(src, "PROLOGUE", prologue);
  } else {
    replace_all(src, "PROLOGUE", "");
  }
  return cat(wgsl_enables(f, true, true), "const LANES = ", matvec_lanes(w), "u;\n", src);
}

std::string wgsl_embed(DType w, uint32_t n_parts) {
  if (n_parts == 0 || n_parts > kEmbedMaxParts) return "";
  std::string deq;  // deq(base, i): element i of the row starting at word `base` of W
  switch (w) {
    case DType::F32:
      deq = "fn deq(base: u32, i: u32) -> f32 { return W[base + i]; }\n";
      break;
    case DType::F16:
      deq =
          "fn deq(base: u32, i: u32) -> f32 { let v = unpack2x16float(W[base + i / 2u]);"
          " return select(v.x, v.y, (i & 1u) == 1u); }\n";
      break;
    case DType::Q8_0:
      deq = R"(fn deq(base: u32, i: u32) -> f32 {
  let b = base + (i / 32u) * 9u; let e = i % 32u;
  let q = bitcast<i32>(W[b + e / 4u] << (24u - 8u * (e % 4u))) >> 24u;
  return f32(q) * unpack2x16float(W[b + 8u]).x;
}
)";
      break;
    case DType::Q4_0:
      deq = R"(fn deq(base: u32, i: u32) -> f32 {
  let b = base + (i / 32u) * 5u; let e = i % 32u; let j = e % 16u;
  let byte = (W[b + j / 4u] >> (8u * (j % 4u))) & 0xFFu;
  let q = select(byte & 0xFu, byte >> 4u, e >= 16u);
  return (f32(q) - 8.0) * unpack2x16float(W[b + 4u]).x;
}
)";
      break;
    case DType::Q5_0:  // the 5th bit of element e is bit e of qh
      deq = R"(fn deq(base: u32, i: u32) -> f32 {
  let b = base + (i / 32u) * 6u; let e = i % 32u; let j = e % 16u;
  let byte = (W[b + 1u + j / 4u] >> (8u * (j % 4u))) & 0xFFu;
  let q = select(byte & 0xFu, byte >> 4u, e >= 16u) | (((W[b] >> e) & 1u) << 4u);
  return (f32(q) - 16.0) * unpack2x16float(W[b + 5u]).x;
}
)";
      break;
    default:
      return "";
  }
  // The table's rows first_row .. end_row in parts of part_rows rows (the last may have fewer), one binding
  // each: the invocation reads the part that holds the token and writes nothing when no part does.
  std::string src = R"(
struct P { n: u32, row_words: u32, first_row: u32, end_row: u32, part_rows: u32, scale: f32, pad0: u32, pad1: u32 }
@group(0) @binding(0) var<uniform> p: P;
@group(0) @binding(2) var<storage, read> tok: array<u32>;
@group(0) @binding(3) var<storage, read_write> x: array<f32>;
)";
  const char* elem = w == DType::F32 ? "f32" : "u32";
  const uint32_t binding_of_part[kEmbedMaxParts] = {1, 4, 5, 6};
  std::string pick;
  for (uint32_t k = 0; k < n_parts; ++k) {
    src +=
        cat("@group(0) @binding(", binding_of_part[k], ") var<storage, read> W", k, ": array<", elem, ">;\n");
    std::string f = deq;
    replace_all(f, "W[", cat("W", k, "["));
    replace_all(f, "deq(", cat("deq", k, "("));
    src += f;
    pick += cat(k ? " else " : "  ", "if (part == ", k, "u) { v = deq", k, "(row * p.row_words, g.x); }");
  }
  src += R"(
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) g: vec3u) {
  let t = tok[g.y];  // one row of invocations per token of the prompt
  if (g.x >= p.n || t < p.first_row || t >= p.end_row) { return; }
  let part = (t - p.first_row) / p.part_rows;
  let row = (t - p.first_row) % p.part_rows;
  var v = 0.0;
PICK
  x[g.y * p.n + g.x] = v * p.scale;
}
)";
  replace_all(src, "PICK", pick);
  return src;
}

std::string wgsl_norm_quant(bool q8_k, const KernelFeatures& f) {
  std::string src = R"(
struct P { n: u32, mode: u32, x_off: u32, pad: u32, eps: f32, pad1: f32, pad2: f32, pad3: f32 }
@group(0) @binding(0) var<uniform> p: P;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read> w: array<f32>;
@group(0) @binding(3) var<storage, read_write> y: array<f32>;
@group(0) @binding(4) var<storage, read_write> xq: array<u32>;
@group(0) @binding(5) var<storage, read_write> xd: array<f32>;
var<workgroup> ssr: array<vec2f, 128>;
var<workgroup> bmax: array<atomic<u32>, MAX_BLOCKSu>;  // each block's largest |value|, as f32 bits
var<workgroup> bfirst: array<atomic<u32>, MAX_BLOCKSu>;  // q8_K: ~(the first index of that value)
FF_HELPERS
// One workgroup per token (wg.y): token t's values are x[x_off + t n ...], its outputs y[t n ...] and its q8_0
// blocks xq[t n / 4 ...], xd[t n / 32 ...].
@compute @workgroup_size(128)
fn main(@builtin(local_invocation_id) lid: vec3u, @builtin(workgroup_id) wg: vec3u SUBGROUP_SIZE) {
  let normalize = (p.mode & 1u) != 0u;
  let xo = p.x_off + wg.y * p.n;
  let yo = wg.y * p.n;
  // The sum of squares in the matrix x vector prologue's order (128 invocations: same partials, same tree),
  // so a norm here and one fused into a matvec give the same scale bit for bit on every GPU: on the H200 a
  // 256-wide tree gave a different last bit, and the prompt plan (which norms here) drifted from the
  // token-by-token decode (which fuses) on Gemma 3. 128 invocations also let plan fusion (gpu/fusion.h) run
  // it inside a layer's kernel.
  var ss = vec2f(0.0);
  for (var i = lid.x; i < p.n; i += 128u) { let v = x[xo + i]; ss = ff_add(ss, v * v); }
SUM_OF_SQUARES
  let mean = ff_mean(ssr[0], p.n);
  let scale = select(1.0, 1.0 / sqrt(mean + p.eps), normalize);
  for (var i = lid.x; i < p.n; i += 128u) {
    var v = x[xo + i];
    if (normalize) { v = v * scale * w[i]; }
    if ((p.mode & 8u) != 0u) { v = y[yo + i] + v; }  // the residual add after a post-norm (gemma3)
    y[yo + i] = v;
  }
  if ((p.mode & 4u) != 0u) { return; }
  let qo = wg.y * (p.n / 4u);
  let dof = wg.y * (p.n / 32u);
QUANTIZE_Q8_0
}
)";
  std::string quantize = quantize_q8_0("p.n", "w", 128, q8_k);
  replace_all(quantize, "p.x_off", "xo");
  replace_all(quantize, "xq[8u * b", "xq[qo + 8u * b");
  replace_all(quantize, "xd[b]", "xd[dof + b]");
  replace_all(src, "FF_HELPERS", cat(kFloatFloat, f16_helpers(f)));
  replace_all(src, "QUANTIZE_Q8_0", quantize);
  replace_all(src, "MAX_BLOCKS", cat(kNormQuantMaxValues / 32));
  replace_all(src, "SUM_OF_SQUARES", sum_of_squares(f));
  replace_all(src, "SUBGROUP_SIZE", f.subgroups ? ", @builtin(subgroup_size) sg: u32" : "");
  return cat(wgsl_enables(f, true, true), src);
}

namespace {

// Each invocation's best (value, index) merged over the workgroup's 128 by a tree (stride 64, 32, ... 1: the
// partner's pair replaces one's own when its value is larger, or equal at a lower index), lid 0 ending with
// the workgroup's. With subgroups the strides below the subgroup size are a butterfly in registers, lid 0
// merging (own, partner) in the tree's order: the same pair (kMatvecTree says why).
const char* kArgmaxTree = R"(
  rv[lid.x] = best;
  ri[lid.x] = best_i;
  workgroupBarrier();
  for (var s = 64u; s >= TREE_END; s >>= 1u) {
    if (lid.x < s) { merge(lid.x, rv[lid.x + s], ri[lid.x + s]); }
    workgroupBarrier();
  }
  best = rv[lid.x];
  best_i = ri[lid.x];
)";
const char* kArgmaxButterfly = R"(
  for (var s = min(sg, 128u) / 2u; s > 0u; s >>= 1u) {
    let v = subgroupShuffleXor(best, s);
    let i = subgroupShuffleXor(best_i, s);
    if (better(v, i, best, best_i)) { best = v; best_i = i; }
  }
)";
const char* kArgmaxMerge = R"(
fn better(v: f32, i: u32, best: f32, best_i: u32) -> bool {
  return i != 0xFFFFFFFFu && (best_i == 0xFFFFFFFFu || v > best || (v == best && i < best_i));
}
fn merge(at: u32, v: f32, i: u32) {
  if (better(v, i, rv[at], ri[at])) { rv[at] = v; ri[at] = i; }
}
)";

std::string argmax_source(const KernelFeatures& f, std::string src) {
  replace_all(src, "ARGMAX_TREE", reduction(kArgmaxTree, "128u", kArgmaxButterfly, f.subgroups));
  replace_all(src, "SUBGROUP_SIZE", f.subgroups ? ", @builtin(subgroup_size) sg: u32" : "");
  return cat(wgsl_enables(f, false, true), kArgmaxMerge, src);
}

}  // namespace

std::string wgsl_argmax_partial(const KernelFeatures& f) {
  return argmax_source(f, R"(
struct P { n: u32, pad0: u32, pad1: u32, pad2: u32 }
@group(0) @binding(0) var<uniform> p: P;
@group(0) @binding(1) var<storage, read> logits: array<f32>;
@group(0) @binding(2) var<storage, read_write> partial: array<u32>;
var<workgroup> rv: array<f32, 128>;
var<workgroup> ri: array<u32, 128>;
@compute @workgroup_size(128)
fn main(@builtin(local_invocation_id) lid: vec3u, @builtin(workgroup_id) wg: vec3u SUBGROUP_SIZE) {
  var best = -3.4028234e38f;
  var best_i = 0xFFFFFFFFu;
  for (var k = 0u; k < 8u; k++) {
    let i = wg.x * 1024u + k * 128u + lid.x;
    if (i < p.n) {
      let v = logits[i];
      if (v > best || best_i == 0xFFFFFFFFu) { best = v; best_i = i; }
    }
  }
ARGMAX_TREE
  if (lid.x == 0u) { partial[2u * wg.x] = bitcast<u32>(best); partial[2u * wg.x + 1u] = best_i; }
}
)");
}

std::string wgsl_argmax_final(const KernelFeatures& f) {
  return argmax_source(f, R"(
struct P { n_groups: u32, pad0: u32, pad1: u32, pad2: u32 }
@group(0) @binding(0) var<uniform> p: P;
@group(0) @binding(1) var<storage, read> partial: array<u32>;
@group(0) @binding(2) var<storage, read_write> tok: array<u32>;
var<workgroup> rv: array<f32, 128>;
var<workgroup> ri: array<u32, 128>;
@compute @workgroup_size(128)
fn main(@builtin(local_invocation_id) lid: vec3u SUBGROUP_SIZE) {
  var best = -3.4028234e38f;
  var best_i = 0xFFFFFFFFu;
  for (var g = lid.x; g < p.n_groups; g += 128u) {
    let v = bitcast<f32>(partial[2u * g]); let i = partial[2u * g + 1u];
    if (best_i == 0xFFFFFFFFu || v > best || (v == best && i < best_i)) { best = v; best_i = i; }
  }
ARGMAX_TREE
  if (lid.x == 0u) { tok[0] = best_i; }
}
)");
}

}  // namespace sotto::gpu
