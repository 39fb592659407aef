// The f32 product y = act(rope(norm(x) . W^T + b)) + residual on the GPU (nn::linear, nn::linear_fused_f32):
// four kernels and the rule that picks one from (m, n, K) alone (no timing at load).
//   m < 16             kLinearRows: one output per thread (a step of a recurrent network).
//   enough 64 x 64 blocks to fill the GPU, or K too short to split
//                      kLinear64: 64 x 64 outputs per workgroup of 256 threads.
//   too few 64 x 64 blocks, but 32 x 32 blocks at least one a core of an H100 / H200 (132 = the split target
//   528 / 4, each block's workgroup being 4 slices of K)
//                      kLinearSliceK: 32 x 32 outputs per workgroup of 256 threads, K split over 4 groups of
//                      64 threads inside the workgroup. Moonshine's encoder at 10 s (413 rows, d 416, FFN 1664).
//                      16 x 32 outputs (K over 8 groups of 32) where 32-row blocks are fewer than 2 a core (the
//                      rule's target / 4 cores); SOTTO_GPU_LINEAR_SLICE_ROWS=16 or 32 (native) pins one, to time.
//   too few of either  kLinear64 split over K ranges, partial sums added by kSplitSum (a second dispatch).
//                      Parakeet's products of ~75 rows and K 1024-4096.
// A fifth, linear_tall_wgsl (8 x 4 outputs a thread, one block of all of up to 128 rows), runs only where pinned
// (set_linear_kernel(Tall), natively SOTTO_GPU_LINEAR_KERNEL=tall): made for Parakeet's 75-row products, whose
// 64-row blocks compute 128 rows, and not yet timed on a GPU, so the rule does not choose it.
// A dispatch costs ~12-15 us on an H100 whatever its size, and Moonshine's encoder products take 30-60 us: a
// split-K plan's second dispatch, and the separate bias / GELU / residual dispatches after a product, were a
// third of the encoder's time. Every kernel applies the epilogue as it stores (kSplitSum where split) and, where
// asked, the layer norm of x's rows as it loads them (the tiled kernels compute the rows' statistics first).
#include <algorithm>
#include <bit>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>

#include "nn/gpu_ops.h"
#include "nn/gpu_recorder.h"
#include "nn/gpu_wgsl.h"

namespace sotto::nn::gpu_ops {

namespace {

// The epilogue of every kernel below, on one output (row r, column c) of the product: + bias, then tanh
// (clamped, as the activation kernel) where p.act is Act::Tanh (4), SiLU where Act::Silu (5) or GELU (erf by
// Abramowitz & Stegun 7.1.26, |error| < 1.5e-7, as the activation kernel: WGSL has no erf) where Act::GeluErf
// (6), then x p.scale (1 leaves it as it is), then + residual [m, n]. out_at: where output (r, c) is stored, [m, n] or, where p.stack_cols is nonzero, block c / stack_cols
// of [n / stack_cols, stack_rows, stack_cols] (nn::LinearFusedF32::stack_columns). Each kernel declares p (with
// has_bias, act, has_residual, n, stack_cols, stack_rows), bias and res (stand-ins, unread, where absent).
#define NN_WGSL_LINEAR_EPILOGUE                                                                     \
  "fn out_at(r: u32, c: u32) -> u32 {\n"                                                            \
  "  if (p.stack_cols == 0u) { return r * p.n + c; }\n"                                             \
  "  return ((c / p.stack_cols) * p.stack_rows + r) * p.stack_cols + c % p.stack_cols;\n"           \
  "}\n"                                                                                             \
  "fn erf_approx(x: f32) -> f32 {\n"                                                                \
  "  let t = 1.0 / (1.0 + 0.3275911 * abs(x));\n"                                                   \
  "  let poly = t * (0.254829592 + t * (-0.284496736 + t * (1.421413741 + t * (-1.453152027 + t * " \
  "1.061405429))));\n"                                                                              \
  "  return sign(x) * (1.0 - poly * exp(-x * x));\n"                                                \
  "}\n"                                                                                             \
  "fn finish(v: f32, r: u32, c: u32) -> f32 {\n"                                                    \
  "  var s = v;\n"                                                                                  \
  "  if (p.act == 4u) { s = tanh(clamp(s, -15.0, 15.0)); }\n"                                       \
  "  if (p.act == 5u) { s = s * (1.0 / (1.0 + exp(-s))); }\n"                                       \
  "  if (p.act == 6u) { s = 0.5 * s * (1.0 + erf_approx(s * 0.70710678118654752)); }\n"             \
  "  s *= p.scale;\n"                                                                               \
  "  if (p.has_residual != 0u) { s += res[r * p.n + c]; }\n"                                        \
  "  return s;\n"                                                                                   \
  "}\n"                                                                                             \
  "fn epilogue(v: f32, r: u32, c: u32) -> f32 {\n"                                                  \
  "  var s = v;\n"                                                                                  \
  "  if (p.has_bias != 0u) { s += bias[c]; }\n"                                                     \
  "  return finish(s, r, c);\n"                                                                     \
  "}\n"

// The tiled kernels' epilogue on 4 outputs of a row, columns c .. c + 3 (c a multiple of 4): + bias, then the
// rotary embedding where p.rope_hd (the head width) is nonzero, on interleaved pairs (c, c + 1), (c + 2, c + 3)
// of the first p.rope_rd dims of each head at position r (the rope kernel's angles, from p.turns: gpu_ops.cpp,
// kRope) in columns below p.rope_cols, then finish() per output. Columns past n are left alone (rope needs n
// even: pairs never straddle it).
#define NN_WGSL_LINEAR_EPILOGUE4                                                                   \
  NN_WGSL_ROPE_SIN_COS                                                                             \
  "fn rope_pair(v: vec2<f32>, r: u32, c: u32) -> vec2<f32> {\n"                                    \
  "  if (c >= p.rope_cols) { return v; }\n"                                                        \
  "  let e = c % p.rope_hd;\n"                                                                     \
  "  if (e >= p.rope_rd) { return v; }\n"                                                          \
  "  let pair = e / 2u;\n"                                                                         \
  "  let sc = rope_sin_cos(r * p.turns[pair / 4u][pair % 4u]);\n"                                  \
  "  return vec2<f32>(v.x * sc.y - v.y * sc.x, v.x * sc.x + v.y * sc.y);\n"                        \
  "}\n"                                                                                            \
  "fn epilogue4(v: vec4<f32>, r: u32, c: u32) -> vec4<f32> {\n"                                    \
  "  var s = v;\n"                                                                                 \
  "  if (p.has_bias != 0u) {\n"                                                                    \
  "    for (var j = 0u; j < 4u; j++) { if (c + j < p.n) { s[j] += bias[c + j]; } }\n"              \
  "  }\n"                                                                                          \
  "  if (p.rope_hd != 0u) { s = vec4<f32>(rope_pair(s.xy, r, c), rope_pair(s.zw, r, c + 2u)); }\n" \
  "  for (var j = 0u; j < 4u; j++) { if (c + j < p.n) { s[j] = finish(s[j], r, c + j); } }\n"      \
  "  return s;\n"                                                                                  \
  "}\n"

// The split-K kernels' store of output row r, columns c .. c + 3 (the 64 x 64 and the tall kernel): with one
// split, the epilogue and the output; else the raw sums into split `split`'s partials [splits, m, n].
#define NN_WGSL_LINEAR_STORE4                                                      \
  "fn store4(v: vec4<f32>, r: u32, c: u32, split: u32) {\n"                        \
  "  if (p.splits == 1u) {\n"                                                      \
  "    let e = epilogue4(v, r, c);\n"                                              \
  "    for (var j = 0u; j < 4u; j++) {\n"                                          \
  "      if (c + j < p.n) { y[out_at(r, c + j)] = e[j]; }\n"                       \
  "    }\n"                                                                        \
  "  } else {\n"                                                                   \
  "    let at = split * p.m * p.n + r * p.n + c;\n"                                \
  "    for (var j = 0u; j < 4u; j++) { if (c + j < p.n) { y[at + j] = v[j]; } }\n" \
  "  }\n"                                                                          \
  "}\n"

// linear, plain: one output per thread, K multiply-adds reading its x row and w row. For products of a few rows
// (a step of a recurrent network), where the tiled kernel's blocks would be mostly empty and its workgroup
// barriers cost more than they save (SwiftShader runs Silero ~3x slower with them). A rotated output also
// computes its pair's (2 K multiply-adds: rows are few here) so the rotary embedding needs no kernel of its own.
constexpr const char* kLinearRows = NN_WGSL_INDEX NN_WGSL_LINEAR_EPILOGUE NN_WGSL_LINEAR_EPILOGUE4 R"(
struct P { m: u32, n: u32, k: u32, has_bias: u32, act: u32, has_residual: u32, has_norm: u32, eps: f32,
           rope_hd: u32, rope_rd: u32, rope_cols: u32, stack_cols: u32, stack_rows: u32, scale: f32, pad1: u32,
           pad2: u32, turns: array<vec4<u32>, 16> };
@group(0) @binding(0) var<uniform> p: P;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read> w: array<f32>;
@group(0) @binding(3) var<storage, read> bias: array<f32>;
@group(0) @binding(4) var<storage, read> res: array<f32>;
@group(0) @binding(5) var<storage, read_write> y: array<f32>;
@group(0) @binding(6) var<storage, read> gamma: array<f32>;
// Output (r, c) before its epilogue.
fn dot_row(r: u32, c: u32) -> f32 {
  var s = 0.0;
  if (p.has_norm != 0u) {
    // The row's layer norm, recomputed by each of its outputs (K more reads each: rows are few here).
    var t = 0.0;
    for (var e = 0u; e < p.k; e++) { t += x[r * p.k + e]; }
    let mean = t / f32(p.k);
    t = 0.0;
    for (var e = 0u; e < p.k; e++) { t += (x[r * p.k + e] - mean) * (x[r * p.k + e] - mean); }
    let rstd = 1.0 / sqrt(t / f32(p.k) + p.eps);
    for (var e = 0u; e < p.k; e++) { s += (x[r * p.k + e] - mean) * rstd * gamma[e] * w[c * p.k + e]; }
  } else {
    for (var t = 0u; t < p.k; t++) { s += x[r * p.k + t] * w[c * p.k + t]; }
  }
  if (p.has_bias != 0u) { s += bias[c]; }
  return s;
}
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) g: vec3<u32>) {
  let i = index(g);
  if (i >= p.m * p.n) { return; }
  let r = i / p.n;
  let c = i % p.n;
  var s = dot_row(r, c);
  if (p.rope_hd != 0u && c < p.rope_cols && c % p.rope_hd < p.rope_rd) {
    let other = dot_row(r, c ^ 1u);
    let odd = c % 2u == 1u;
    let rotated = rope_pair(select(vec2<f32>(s, other), vec2<f32>(other, s), odd), r, c - c % 2u);
    s = select(rotated.x, rotated.y, odd);
  }
  y[out_at(r, c)] = finish(s, r, c);
}
)";

// linear, register-tiled: a workgroup of 256 threads per 64 x 64 block of outputs, each thread a 4 x 4 square
// of them (16 multiply-adds for each pair of vec4 reads from workgroup memory, where the 32 x 32 kernel does 4
// for 4 scalar reads). K in chunks of 16 staged k-major as vec4s of 4 rows (rows of a k 17 vec4s apart: stores
// from a warp's 16 ks hit 2 banks each, not 16), loaded 16 consecutive ks a row so a warp reads whole 64-byte
// segments. Split-K: a product with too few blocks to fill a large GPU (Parakeet's at 6 s of audio: 75 rows,
// 32-128 blocks for an H200's 132 SMs) gives each block `splits` workgroups over consecutive K ranges, written
// as partial sums [splits, m, n] that kSplitSum adds in split order with the epilogue. Each output sums its own
// K range in order from its start (split-K reorders the sum once per range: differences ~1e-7 relative).
constexpr const char* kLinear64 = NN_WGSL_LINEAR_EPILOGUE NN_WGSL_LINEAR_EPILOGUE4 NN_WGSL_LINEAR_STORE4 R"(
struct P { m: u32, n: u32, k: u32, has_bias: u32, tiles_n: u32, tiles: u32, k_chunk: u32, splits: u32,
           act: u32, has_residual: u32, rope_hd: u32, rope_rd: u32, turns: array<vec4<u32>, 16>, has_norm: u32,
           eps: f32, rope_cols: u32, stack_cols: u32, stack_rows: u32, scale: f32, pad1: u32, pad2: u32 };
@group(0) @binding(0) var<uniform> p: P;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read> w: array<f32>;
@group(0) @binding(3) var<storage, read> bias: array<f32>;
@group(0) @binding(4) var<storage, read> res: array<f32>;
@group(0) @binding(5) var<storage, read_write> y: array<f32>;
@group(0) @binding(6) var<storage, read> gamma: array<f32>;
var<workgroup> xs: array<vec4<f32>, 272>;
var<workgroup> ws: array<vec4<f32>, 272>;
var<workgroup> stats: array<f32, 256>;
var<workgroup> row_mean: array<f32, 64>;
var<workgroup> row_rstd: array<f32, 64>;
// Row lid / 4's total over its 4 threads (lid % 4), in their order.
fn row_total(v: f32, lid: u32) -> f32 {
  stats[lid] = v;
  workgroupBarrier();
  let b = lid - lid % 4u;
  let t = stats[b] + stats[b + 1u] + stats[b + 2u] + stats[b + 3u];
  workgroupBarrier();
  return t;
}
@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let id = wid.x + wid.y * 65535u;
  let split = id / p.tiles;
  if (split >= p.splits) { return; }
  let tile = id % p.tiles;
  let r0 = (tile / p.tiles_n) * 64u;
  let c0 = (tile % p.tiles_n) * 64u;
  let kb = split * p.k_chunk;
  let ke = min(p.k, kb + p.k_chunk);
  let tx = lid % 16u;
  let ty = lid / 16u;
  var acc0 = vec4<f32>(0.0);
  var acc1 = vec4<f32>(0.0);
  var acc2 = vec4<f32>(0.0);
  var acc3 = vec4<f32>(0.0);
  if (p.has_norm != 0u) {
    // The layer norm of the block's 64 rows first (over all of K, whatever the split): 4 threads a row, its
    // mean, then its variance about it.
    let row = lid / 4u;
    var t = 0.0;
    if (r0 + row < p.m) { for (var e = lid % 4u; e < p.k; e += 4u) { t += x[(r0 + row) * p.k + e]; } }
    let mean = row_total(t, lid) / f32(p.k);
    t = 0.0;
    if (r0 + row < p.m) {
      for (var e = lid % 4u; e < p.k; e += 4u) {
        let d = x[(r0 + row) * p.k + e] - mean;
        t += d * d;
      }
    }
    let rstd = 1.0 / sqrt(row_total(t, lid) / f32(p.k) + p.eps);
    if (lid % 4u == 0u) {
      row_mean[row] = mean;
      row_rstd[row] = rstd;
    }
    workgroupBarrier();
  }
  for (var k0 = kb; k0 < ke; k0 += 16u) {
    let kk = k0 + tx;
    for (var part = 0u; part < 4u; part++) {
      let row = part * 16u + ty;
      var xv = 0.0;
      if (r0 + row < p.m && kk < ke) { xv = x[(r0 + row) * p.k + kk]; }
      if (p.has_norm != 0u && kk < ke) { xv = (xv - row_mean[row]) * row_rstd[row] * gamma[kk]; }
      xs[tx * 17u + row / 4u][row % 4u] = xv;
      var wv = 0.0;
      if (c0 + row < p.n && kk < ke) { wv = w[(c0 + row) * p.k + kk]; }
      ws[tx * 17u + row / 4u][row % 4u] = wv;
    }
    workgroupBarrier();
    for (var t = 0u; t < 16u; t++) {
      let a = xs[t * 17u + ty];
      let b = ws[t * 17u + tx];
      acc0 += a.x * b;
      acc1 += a.y * b;
      acc2 += a.z * b;
      acc3 += a.w * b;
    }
    workgroupBarrier();
  }
  let c = c0 + tx * 4u;
  let r = r0 + ty * 4u;
  var rows = array<vec4<f32>, 4>(acc0, acc1, acc2, acc3);
  for (var i = 0u; i < 4u; i++) {
    if (r + i < p.m) { store4(rows[i], r + i, c, split); }
  }
}
)";

// The split-K partial sums [splits, m, n] added in split order, then the epilogue: one output per thread.
constexpr const char* kSplitSum = NN_WGSL_INDEX NN_WGSL_LINEAR_EPILOGUE R"(
struct P { total: u32, n: u32, splits: u32, has_bias: u32, act: u32, has_residual: u32, stack_cols: u32,
           stack_rows: u32, scale: f32, pad0: u32, pad1: u32, pad2: u32 };
@group(0) @binding(0) var<uniform> p: P;
@group(0) @binding(1) var<storage, read> part: array<f32>;
@group(0) @binding(2) var<storage, read> bias: array<f32>;
@group(0) @binding(3) var<storage, read> res: array<f32>;
@group(0) @binding(4) var<storage, read_write> y: array<f32>;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) g: vec3<u32>) {
  let i = index(g);
  if (i >= p.total) { return; }
  var s = part[i];
  for (var j = 1u; j < p.splits; j++) { s += part[j * p.total + i]; }
  y[out_at(i / p.n, i % p.n)] = epilogue(s, i / p.n, i % p.n);
}
)";

// linear, K sliced inside the workgroup: a workgroup of 256 threads per 32 x 32 block of outputs, as 4 slices
// of 64 threads; each thread of a slice a 4 x 4 square of the block (16 multiply-adds per pair of vec4 reads
// from workgroup memory), over the slice's 8 of every chunk of 32 ks. The 4 slices' sums are added in slice
// order through workgroup memory at the end, then the epilogue. Against kLinear64 split K ways: the same
// number of threads in flight (Moonshine's 413 x 416 products: 169 workgroups here, 49 x 3 there) with no
// partial sums written and no second dispatch; each 32 x 32 block reads its 64 rows of x and W from L2 (twice
// the 64 x 64 kernel's bytes per output: ~18 MB for a 413 x 416 x 416 product, a few us of L2 bandwidth).
// A chunk: each thread loads 4 consecutive ks of one x row and one W row (a vec4 where K % 4 == 0; a warp reads
// 8 rows x 64 bytes), the next chunk's loaded into registers while this one is multiplied; staged k-major as
// vec4s of 4 rows, 9 vec4s a k (a warp's stores hit each bank at most twice). Workgroup memory: x at [0, 288),
// W at [288, 576), then all of [0, 768) for the slices' sums. Each output sums its slice's ks in order, then
// slices 0 + 1 + 2 + 3: differences from the CPU's order ~1e-7 relative. With a layer norm, the block's 32
// rows' means and variances first (two passes over each row, 8 threads a row: 2 x 32 x K floats from L2,
// ~6 % of the product's loads for K 416), applied to x as each chunk is loaded.
// `rows` 16: blocks of 16 x 32 outputs, as 8 slices of 32 threads (4 of every 32 ks each; the threads loading
// rows 16-31 load W only), the 8 slices' sums added in order through [0, 896): twice the workgroups for the
// same product (Moonshine's 413 x 416 products at 10 s: 338 where 169 leave most of an H100's 132 SMs with one
// workgroup of 8 warps), each reading its 32 W rows per 16 outputs rows (1.5x the 32-row blocks' L2 bytes).
std::string linear_slice_k_wgsl(bool vec4_loads, int rows) {
  const char* loads = vec4_loads ? R"(
@group(0) @binding(1) var<storage, read> x: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read> w: array<vec4<f32>>;
fn load_x(row: u32, k: u32) -> vec4<f32> {
  if (row >= p.m || k >= p.k) { return vec4<f32>(0.0); }
  return x[(row * p.k + k) / 4u];
}
fn load_w(row: u32, k: u32) -> vec4<f32> {
  if (row >= p.n || k >= p.k) { return vec4<f32>(0.0); }
  return w[(row * p.k + k) / 4u];
}
)"
                                 : R"(
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read> w: array<f32>;
fn load_x(row: u32, k: u32) -> vec4<f32> {
  var v = vec4<f32>(0.0);
  if (row >= p.m) { return v; }
  for (var j = 0u; j < 4u; j++) { if (k + j < p.k) { v[j] = x[row * p.k + k + j]; } }
  return v;
}
fn load_w(row: u32, k: u32) -> vec4<f32> {
  var v = vec4<f32>(0.0);
  if (row >= p.n) { return v; }
  for (var j = 0u; j < 4u; j++) { if (k + j < p.k) { v[j] = w[row * p.k + k + j]; } }
  return v;
}
)";
  // rows 32: 4 slices of 64 threads, 8 ks of each chunk a slice; rows 16: 8 slices of 32 threads, 4 ks each.
  const int threads_per_slice = rows / 4 * 8, slices = 256 / threads_per_slice;
  const std::string consts = "const ROWS = " + std::to_string(rows) +
                             "u;\nconst TPS = " + std::to_string(threads_per_slice) +
                             "u;\nconst SLICES = " + std::to_string(slices) +
                             "u;\nconst KPS = " + std::to_string(32 / slices) + "u;\n";
  const std::string shared = "var<workgroup> sh: array<vec4<f32>, " +
                             std::to_string(std::max(768, (slices - 1) * threads_per_slice * 4)) + ">;\n";
  return consts + shared + std::string(NN_WGSL_LINEAR_EPILOGUE NN_WGSL_LINEAR_EPILOGUE4 R"(
struct P { m: u32, n: u32, k: u32, has_bias: u32, tiles_n: u32, act: u32, has_residual: u32, has_norm: u32,
           rope_hd: u32, rope_rd: u32, eps: f32, rope_cols: u32, turns: array<vec4<u32>, 16>, stack_cols: u32,
           stack_rows: u32, scale: f32, pad1: u32 };
@group(0) @binding(0) var<uniform> p: P;
@group(0) @binding(3) var<storage, read> bias: array<f32>;
@group(0) @binding(4) var<storage, read> res: array<f32>;
@group(0) @binding(5) var<storage, read_write> y: array<f32>;
@group(0) @binding(6) var<storage, read> gamma: array<f32>;
var<workgroup> stats: array<f32, 256>;
fn normed(v: vec4<f32>, k: u32, mean: f32, rstd: f32) -> vec4<f32> {
  if (p.has_norm == 0u) { return v; }
  var g = vec4<f32>(0.0);
  for (var j = 0u; j < 4u; j++) { if (k + j < p.k) { g[j] = gamma[k + j]; } }
  return (v - mean) * rstd * g;
}
// Row lr's total over the 8 threads that load it (their lids differ in bits 3-5), in their order.
fn row_total(v: f32, lid: u32) -> f32 {
  stats[lid] = v;
  workgroupBarrier();
  var t = 0.0;
  for (var q = 0u; q < 8u; q++) { t += stats[lid % 8u + 64u * (lid / 64u) + 8u * q]; }
  workgroupBarrier();
  return t;
}
)") + loads +
         R"(
@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let tile = wid.x + wid.y * 65535u;
  let r0 = (tile / p.tiles_n) * ROWS;
  let c0 = (tile % p.tiles_n) * 32u;
  let lr = lid % 8u + 8u * (lid / 64u);
  let lk = 4u * ((lid / 8u) % 8u);
  // x rows past the block's ROWS: none loaded (the thread loads its W row only).
  let x_row = select(p.m, r0 + lr, lr < ROWS);
  let slice = lid / TPS;
  let tx = lid % 8u;
  let ty = (lid % TPS) / 8u;
  var acc0 = vec4<f32>(0.0);
  var acc1 = vec4<f32>(0.0);
  var acc2 = vec4<f32>(0.0);
  var acc3 = vec4<f32>(0.0);
  // The layer norm of x's rows first, where asked: each row's mean, then its variance about it (two passes
  // over the row, 8 threads a row, from L2), applied to x as it is loaded.
  var mean = 0.0;
  var rstd = 1.0;
  if (p.has_norm != 0u) {
    var t = 0.0;
    for (var k0 = 0u; k0 < p.k; k0 += 32u) {
      let v = load_x(x_row, k0 + lk);
      t += v.x + v.y + v.z + v.w;
    }
    mean = row_total(t, lid) / f32(p.k);
    t = 0.0;
    for (var k0 = 0u; k0 < p.k; k0 += 32u) {
      let v = load_x(x_row, k0 + lk);
      for (var j = 0u; j < 4u; j++) {
        if (k0 + lk + j < p.k) { t += (v[j] - mean) * (v[j] - mean); }
      }
    }
    rstd = 1.0 / sqrt(row_total(t, lid) / f32(p.k) + p.eps);
  }
  var xv = normed(load_x(x_row, lk), lk, mean, rstd);
  var wv = load_w(c0 + lr, lk);
  for (var k0 = 0u; k0 < p.k; k0 += 32u) {
    for (var j = 0u; j < 4u; j++) {
      let at = (lk + j) * 9u + lr / 4u;
      sh[at][lr % 4u] = xv[j];
      sh[288u + at][lr % 4u] = wv[j];
    }
    workgroupBarrier();
    if (k0 + 32u < p.k) {
      xv = normed(load_x(x_row, k0 + 32u + lk), k0 + 32u + lk, mean, rstd);
      wv = load_w(c0 + lr, k0 + 32u + lk);
    }
    for (var kk = 0u; kk < KPS; kk++) {
      let at = (slice * KPS + kk) * 9u;
      let a = sh[at + ty];
      let b = sh[288u + at + tx];
      acc0 += a.x * b;
      acc1 += a.y * b;
      acc2 += a.z * b;
      acc3 += a.w * b;
    }
    workgroupBarrier();
  }
  if (slice > 0u) {
    let at = ((slice - 1u) * TPS + lid % TPS) * 4u;
    sh[at] = acc0;
    sh[at + 1u] = acc1;
    sh[at + 2u] = acc2;
    sh[at + 3u] = acc3;
  }
  workgroupBarrier();
  if (slice > 0u) { return; }
  for (var s = 0u; s + 1u < SLICES; s++) {
    let at = (s * TPS + lid) * 4u;
    acc0 += sh[at];
    acc1 += sh[at + 1u];
    acc2 += sh[at + 2u];
    acc3 += sh[at + 3u];
  }
  let c = c0 + tx * 4u;
  let r = r0 + ty * 4u;
  var rows = array<vec4<f32>, 4>(acc0, acc1, acc2, acc3);
  for (var i = 0u; i < 4u; i++) {
    if (r + i >= p.m) { break; }
    let v = epilogue4(rows[i], r + i, c);
    for (var j = 0u; j < 4u; j++) {
      if (c + j < p.n) { y[out_at(r + i, c + j)] = v[j]; }
    }
  }
}
)";
}

// linear, tall thread tiles: each thread an 8 x 4 square of outputs (8 rows, 4 columns: 32 multiply-adds for
// 3 vec4 reads from workgroup memory, twice kLinear64's ratio), a block of BM = 8 RT rows x BN = 4 CT columns,
// K sliced S ways inside the workgroup (RT x CT threads a slice, KS of every chunk of S x KS ks each), and
// split over K across workgroups where blocks are few (partial sums added by kSplitSum). Made for Parakeet's
// products of ~75 rows: one 80-row block where 64-row blocks compute 128 rows (or 32-row blocks 96). A chunk's
// x and W rows are loaded 8 ks a thread (two vec4: a whole 32-byte sector), consecutive threads on consecutive
// rows, so the stores into workgroup memory (k-major, BM floats a k for x, BN for W) hit distinct banks; the
// next chunk is loaded into registers while this one is multiplied. Needs K % 4 == 0 and 16-byte-aligned x and
// W. Each output sums its slice's ks in order, then slices 0, 1, ... (and splits 0, 1, ...): differences from
// the CPU's order ~1e-7 relative, as the other kernels. With a layer norm, the block's rows' means and
// variances first (NT / BM threads a row, two passes), applied to x as it is loaded.
std::string linear_tall_wgsl(int rt, int ct, int slices, int ks) {
  const int bm = 8 * rt, bn = 4 * ct, ck = slices * ks, nt = rt * ct * slices;
  const int chunk_vec4 = ck * (bm + bn) / 4, red_vec4 = slices > 1 ? rt * ct * 8 : 0;
  auto u = [](int v) { return std::to_string(v) + "u"; };
  const std::string consts =
      "const RT = " + u(rt) + ";\nconst CT = " + u(ct) + ";\nconst S = " + u(slices) +
      ";\nconst KS = " + u(ks) + ";\nconst BM = " + u(bm) + ";\nconst BN = " + u(bn) +
      ";\nconst CK = " + u(ck) + ";\nconst NT = " + u(nt) + ";\nconst XSLOTS = " + u(bm * ck / 8) +
      ";\nconst SLOTS = " + u((bm + bn) * ck / 8) +
      ";\nconst PER = " + u(((bm + bn) * ck / 8 + nt - 1) / nt) + ";\nconst G = " + u(nt / bm) + ";\n" +
      "var<workgroup> sh: array<vec4<f32>, " + u(std::max(chunk_vec4, red_vec4)) + ">;\n" +
      "var<workgroup> stats: array<f32, " + u(nt) + ">;\n" + "var<workgroup> row_mean: array<f32, " + u(bm) +
      ">;\n" + "var<workgroup> row_rstd: array<f32, " + u(bm) + ">;\n";
  return consts + std::string(NN_WGSL_LINEAR_EPILOGUE NN_WGSL_LINEAR_EPILOGUE4 NN_WGSL_LINEAR_STORE4 R"(
struct P { m: u32, n: u32, k: u32, has_bias: u32, tiles_n: u32, tiles: u32, k_chunk: u32, splits: u32,
           act: u32, has_residual: u32, rope_hd: u32, rope_rd: u32, turns: array<vec4<u32>, 16>, has_norm: u32,
           eps: f32, rope_cols: u32, stack_cols: u32, stack_rows: u32, scale: f32, pad1: u32, pad2: u32 };
@group(0) @binding(0) var<uniform> p: P;
@group(0) @binding(1) var<storage, read> x: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read> w: array<vec4<f32>>;
@group(0) @binding(3) var<storage, read> bias: array<f32>;
@group(0) @binding(4) var<storage, read> res: array<f32>;
@group(0) @binding(5) var<storage, read_write> y: array<f32>;
@group(0) @binding(6) var<storage, read> gamma: array<vec4<f32>>;
// Row `row`'s total over its G threads (lid % BM == row), in their order.
fn row_total(v: f32, lid: u32) -> f32 {
  stats[lid] = v;
  workgroupBarrier();
  var t = 0.0;
  if (lid < G * BM) { for (var q = 0u; q < G; q++) { t += stats[q * BM + lid % BM]; } }
  workgroupBarrier();
  return t;
}
// 4 ks of a row from k (zeros past the matrix or the split's end ke).
fn load4(is_x: bool, row: u32, k: u32, ke: u32) -> vec4<f32> {
  if (is_x) {
    if (row >= p.m || k >= ke) { return vec4<f32>(0.0); }
    let v = x[(row * p.k + k) / 4u];
    if (p.has_norm == 0u) { return v; }
    return (v - row_mean[row % BM]) * row_rstd[row % BM] * gamma[k / 4u];
  }
  if (row >= p.n || k >= ke) { return vec4<f32>(0.0); }
  return w[(row * p.k + k) / 4u];
}
// The chunk from k0: this thread's load slots q, each an x row (slot % BM) or a W row, 8 ks from
// k0 + 8 * (slot / BM) (or / BN).
fn fetch(lid: u32, r0: u32, c0: u32, k0: u32, ke: u32) -> array<vec4<f32>, 2u * PER> {
  var pv: array<vec4<f32>, 2u * PER>;
  for (var q = 0u; q < PER; q++) {
    let slot = lid + q * NT;
    let is_x = slot < XSLOTS;
    let sl = select(slot - XSLOTS, slot, is_x);
    let span = select(BN, BM, is_x);
    let row = select(c0, r0, is_x) + sl % span;
    let k = k0 + 8u * (sl / span);
    pv[2u * q] = load4(is_x, row, k, select(0u, ke, slot < SLOTS));
    pv[2u * q + 1u] = load4(is_x, row, k + 4u, select(0u, ke, slot < SLOTS));
  }
  return pv;
}
@compute @workgroup_size(NT)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let id = wid.x + wid.y * 65535u;
  let split = id / p.tiles;
  if (split >= p.splits) { return; }
  let tile = id % p.tiles;
  let r0 = (tile / p.tiles_n) * BM;
  let c0 = (tile % p.tiles_n) * BN;
  let kb = split * p.k_chunk;
  let ke = min(p.k, kb + p.k_chunk);
  let slice = lid / (RT * CT);
  let tx = lid % CT;
  let ty = (lid % (RT * CT)) / CT;
  if (p.has_norm != 0u) {
    // The layer norm of the block's rows (over all of K, whatever the split): G threads a row, its mean, then
    // its variance about it.
    let row = r0 + lid % BM;
    let live = lid < G * BM && row < p.m;
    var t = 0.0;
    if (live) {
      for (var e = (lid / BM) * 4u; e < p.k; e += 4u * G) {
        let v = x[(row * p.k + e) / 4u];
        t += v.x + v.y + v.z + v.w;
      }
    }
    let mean = row_total(t, lid) / f32(p.k);
    t = 0.0;
    if (live) {
      for (var e = (lid / BM) * 4u; e < p.k; e += 4u * G) {
        let d = x[(row * p.k + e) / 4u] - mean;
        t += dot(d, d);
      }
    }
    let rstd = 1.0 / sqrt(row_total(t, lid) / f32(p.k) + p.eps);
    if (lid < BM) {
      row_mean[lid] = mean;
      row_rstd[lid] = rstd;
    }
    workgroupBarrier();
  }
  var pv = fetch(lid, r0, c0, kb, ke);
  var acc0 = vec4<f32>(0.0);
  var acc1 = vec4<f32>(0.0);
  var acc2 = vec4<f32>(0.0);
  var acc3 = vec4<f32>(0.0);
  var acc4 = vec4<f32>(0.0);
  var acc5 = vec4<f32>(0.0);
  var acc6 = vec4<f32>(0.0);
  var acc7 = vec4<f32>(0.0);
  for (var k0 = kb; k0 < ke; k0 += CK) {
    for (var q = 0u; q < PER; q++) {
      let slot = lid + q * NT;
      if (slot < SLOTS) {
        let is_x = slot < XSLOTS;
        let sl = select(slot - XSLOTS, slot, is_x);
        let span = select(BN, BM, is_x);
        let base = select(CK * BM + (8u * (sl / span)) * BN, (8u * (sl / span)) * BM, is_x) + sl % span;
        for (var j = 0u; j < 8u; j++) {
          let at = base + j * span;
          sh[at / 4u][at % 4u] = pv[2u * q + j / 4u][j % 4u];
        }
      }
    }
    workgroupBarrier();
    if (k0 + CK < ke) { pv = fetch(lid, r0, c0, k0 + CK, ke); }
    for (var kk = 0u; kk < KS; kk++) {
      let k = slice * KS + kk;
      let a0 = sh[(k * BM) / 4u + 2u * ty];
      let a1 = sh[(k * BM) / 4u + 2u * ty + 1u];
      let b = sh[(CK * BM + k * BN) / 4u + tx];
      acc0 += a0.x * b;
      acc1 += a0.y * b;
      acc2 += a0.z * b;
      acc3 += a0.w * b;
      acc4 += a1.x * b;
      acc5 += a1.y * b;
      acc6 += a1.z * b;
      acc7 += a1.w * b;
    }
    workgroupBarrier();
  }
  // The slices' sums in slice order, through workgroup memory (the chunk's space), one slice at a time.
  let own = (lid % (RT * CT)) * 8u;
  for (var s = 1u; s < S; s++) {
    if (slice == s) {
      sh[own] = acc0;
      sh[own + 1u] = acc1;
      sh[own + 2u] = acc2;
      sh[own + 3u] = acc3;
      sh[own + 4u] = acc4;
      sh[own + 5u] = acc5;
      sh[own + 6u] = acc6;
      sh[own + 7u] = acc7;
    }
    workgroupBarrier();
    if (slice == 0u) {
      acc0 += sh[own];
      acc1 += sh[own + 1u];
      acc2 += sh[own + 2u];
      acc3 += sh[own + 3u];
      acc4 += sh[own + 4u];
      acc5 += sh[own + 5u];
      acc6 += sh[own + 6u];
      acc7 += sh[own + 7u];
    }
    workgroupBarrier();
  }
  if (slice > 0u) { return; }
  let c = c0 + tx * 4u;
  let r = r0 + ty * 8u;
  var rows = array<vec4<f32>, 8>(acc0, acc1, acc2, acc3, acc4, acc5, acc6, acc7);
  for (var i = 0u; i < 8u; i++) {
    if (r + i < p.m) { store4(rows[i], r + i, c, split); }
  }
}
)");
}

#undef NN_WGSL_LINEAR_EPILOGUE
#undef NN_WGSL_LINEAR_EPILOGUE4
#undef NN_WGSL_LINEAR_STORE4

// The split-K rule's workgroup target and smallest K range: 528 and 128, or for benchmarking other values from
// SOTTO_GPU_LINEAR_SPLIT="TARGET,MIN_CHUNK" (read once; bench/parakeet_gpu.sh sweeps it).
std::pair<int64_t, int64_t> linear_split_rule() {
  static const std::pair<int64_t, int64_t> rule = [] {
    std::pair<int64_t, int64_t> r{528, 128};
#if !defined(__wasm__)  // the wasm build has no getenv / sscanf
    if (const char* env = std::getenv("SOTTO_GPU_LINEAR_SPLIT")) {
      long long target = 0, chunk = 0;
      if (std::sscanf(env, "%lld,%lld", &target, &chunk) == 2 && target >= 1 && chunk >= 16)
        r = {target, chunk};
    }
#endif
    return r;
  }();
  return rule;
}

// The kernel set_linear_kernel pins, or natively SOTTO_GPU_LINEAR_KERNEL = "64" (64 x 64 blocks, split-K where
// they are few: the plan before kLinearSliceK, to time one against the other with one binary) or "slice" (the
// sliced kernel for every product of 16 rows or more).
// The sliced kernel's block rows: by the rule in linear_fused_f32 (0), or natively SOTTO_GPU_LINEAR_SLICE_ROWS=16
// or 32 (read once), or set_linear_slice_rows: 16-row blocks give twice the workgroups, for products of few
// blocks. On an H100 the rule took 0.05-0.2 ms off a 10 s Moonshine encoder; 16 everywhere lost 0.3 ms
// (bench/results/2026-12-06-moonshine-gpu-robustness.md).
int& linear_slice_rows() {
  static int rows = [] {
#if !defined(__wasm__)
    if (const char* env = std::getenv("SOTTO_GPU_LINEAR_SLICE_ROWS")) {
      if (std::strcmp(env, "16") == 0) return 16;
      if (std::strcmp(env, "32") == 0) return 32;
    }
#endif
    return 0;
  }();
  return rows;
}

// The tall kernel's shape: CT column threads (4 columns each), S slices of K, KS ks a slice per chunk, and the
// split-K rule's workgroup target for it; natively SOTTO_GPU_LINEAR_TALL="CT,S,KS,TARGET" (read once), to time.
struct TallShape {
  int ct = 8, slices = 3, ks = 8, target = 264;
};
TallShape& tall_shape() {
  static TallShape shape = [] {
    TallShape t;
#if !defined(__wasm__)
    if (const char* env = std::getenv("SOTTO_GPU_LINEAR_TALL")) {
      TallShape e;
      if (std::sscanf(env, "%d,%d,%d,%d", &e.ct, &e.slices, &e.ks, &e.target) == 4 && e.ct >= 1 &&
          e.ct <= 32 && e.slices >= 1 && e.slices <= 8 && (e.ks == 8 || e.ks == 16) && e.target >= 1)
        t = e;
    }
#endif
    return t;
  }();
  return shape;
}

LinearKernel& linear_kernel() {
  static LinearKernel kernel = [] {
#if !defined(__wasm__)
    if (const char* env = std::getenv("SOTTO_GPU_LINEAR_KERNEL")) {
      if (std::strcmp(env, "64") == 0) return LinearKernel::Tiled64;
      if (std::strcmp(env, "slice") == 0) return LinearKernel::SliceK;
      if (std::strcmp(env, "tall") == 0) return LinearKernel::Tall;
    }
#endif
    return LinearKernel::Auto;
  }();
  return kernel;
}

}  // namespace

void set_linear_kernel(LinearKernel k) {
  linear_kernel() = k;
}

void set_linear_tall_shape(int ct, int slices, int ks, int target) {
  tall_shape() = {.ct = std::clamp(ct, 1, 32),
                  .slices = std::clamp(slices, 1, 8),
                  .ks = ks == 16 ? 16 : 8,
                  .target = std::max(1, target)};
}

void set_linear_slice_rows(int rows) {
  linear_slice_rows() = rows == 16 || rows == 0 ? rows : 32;
}

Tensor linear_fused_f32(const Tensor& x, const Tensor& w, const Tensor& b, const LinearFusedF32& f) {
  GpuRecorder& rec = *x.ctx().gpu();
  if (rec.failed()) return empty_on(x);
  if (x.dtype() != DType::F32 || w.dtype() != DType::F32 || w.rank() != 2 || w.dim(1) != x.dim(-1) ||
      (b.defined() && b.dtype() != DType::F32))
    return unsupported(x, "linear other than f32 x . f32 W^T");
  if (f.act != Act::Identity && f.act != Act::Tanh && f.act != Act::Silu && f.act != Act::GeluErf)
    return unsupported(x, "linear with this activation");
  const int64_t k = x.dim(-1), n = w.dim(0), m = x.elements() / k;
  if (f.residual.defined() && (f.residual.dtype() != DType::F32 || f.residual.elements() != m * n))
    return unsupported(x, "linear with a residual of another shape");
  const int64_t rope_cols = f.rope_columns > 0 ? f.rope_columns : n;
  const int64_t head_dim = f.rope_heads > 0 ? rope_cols / f.rope_heads : 0;
  if (f.rope_heads > 0 &&
      (rope_cols > n || rope_cols % f.rope_heads != 0 || head_dim % 2 != 0 || f.rotary_dim < 2 ||
       f.rotary_dim % 2 != 0 || f.rotary_dim > head_dim || f.rotary_dim > 128 || m > (int64_t{1} << 31)))
    return unsupported(x, "linear with this rotary embedding");
  if (f.norm_gamma.defined() && (f.norm_gamma.dtype() != DType::F32 || f.norm_gamma.elements() != k))
    return unsupported(x, "linear with a layer norm of another width");
  if (f.stack_columns < 0 || (f.stack_columns > 0 && n % f.stack_columns != 0))
    return unsupported(x, "linear stacked in blocks that do not divide its columns");
  Shape shape = x.shape();
  shape[-1] = n;
  const int64_t stack_rows = f.stack_columns > 0 ? stacked_rows(m, f.stack_columns) : 0;
  Tensor out =
      x.ctx().empty(f.stack_columns > 0 ? Shape{n / f.stack_columns, stack_rows, f.stack_columns} : shape);
  const Tensor& bias = b.defined() ? b : w;  // bindings must exist: w stands in, unread
  const Tensor& res = f.residual.defined() ? f.residual : w;
  const uint32_t has_bias = b.defined() ? 1u : 0u, act = static_cast<uint32_t>(f.act),
                 has_res = f.residual.defined() ? 1u : 0u;
  auto u32 = [](int64_t v) { return static_cast<uint32_t>(v); };
  const uint32_t stack_cols = u32(f.stack_columns);
  // 64 x 64 blocks; where they are fewer than ~4 a core of a large GPU (an H200's 132), either 32 x 32 blocks
  // with K sliced 4 ways in the workgroup (where those blocks alone reach the target's quarter), or K split
  // into up to that many ranges of at least 128 (a second dispatch adds them).
  const auto [target_workgroups, min_chunk] = linear_split_rule();
  const int64_t tiles_n = (n + 63) / 64, tiles = ((m + 63) / 64) * tiles_n;
  int64_t splits =
      std::clamp<int64_t>((target_workgroups + tiles - 1) / tiles, 1, std::max<int64_t>(1, k / min_chunk));
  const int64_t tiles32_n = (n + 31) / 32, tiles32 = ((m + 31) / 32) * tiles32_n;
  const LinearKernel pinned = linear_kernel();
  const Tensor& gamma = f.norm_gamma.defined() ? f.norm_gamma : w;
  const uint32_t has_norm = f.norm_gamma.defined() ? 1u : 0u, eps = std::bit_cast<uint32_t>(f.norm_eps);
  // The tall kernel's plan: one block of 8 x ceil(m / 8) rows (at most 128), its columns, slices and chunk.
  const TallShape ts = tall_shape();
  const int64_t tall_rt = std::min<int64_t>(16, (m + 7) / 8), tall_bm = 8 * tall_rt, tall_bn = 4 * ts.ct;
  const int64_t tall_slices = std::min<int64_t>(ts.slices, 256 / (tall_rt * ts.ct));
  const int64_t tall_ck = tall_slices * ts.ks, tall_nt = tall_rt * ts.ct * tall_slices;
  const int64_t tall_shared =
      std::max(tall_ck * (tall_bm + tall_bn) / 4, tall_slices > 1 ? tall_nt / tall_slices * 8 : 0) * 16 +
      4 * tall_nt + 8 * tall_bm;
  const bool tall = pinned == LinearKernel::Tall && m >= 16 && k % 4 == 0 && x.gpu_offset() % 16 == 0 &&
                    w.gpu_offset() % 16 == 0 && gamma.gpu_offset() % 16 == 0 && tall_slices >= 1 &&
                    tall_nt >= tall_bm && tall_shared <= 16384;
  const int64_t tall_tiles_n = (n + tall_bn - 1) / tall_bn,
                tall_tiles = (m + tall_bm - 1) / tall_bm * tall_tiles_n;
  if (tall) {
    splits = std::clamp<int64_t>((ts.target + tall_tiles - 1) / tall_tiles, 1,
                                 std::max<int64_t>(1, k / min_chunk));
  }
  const bool slice_k =
      !tall && (pinned == LinearKernel::SliceK ||
                (pinned == LinearKernel::Auto && splits > 1 && tiles32 * 4 >= target_workgroups));
  if (f.rope_heads > 0 && m >= 16 && !slice_k && splits > 1) {
    // Split-K's sum stores one output per thread without its pair: the rotary embedding takes its own kernel.
    if (f.stack_columns > 0) return unsupported(x, "linear with rope and a stacked output, split over K");
    const LinearFusedF32 product = {.norm_gamma = f.norm_gamma, .norm_eps = f.norm_eps};
    Tensor y = nn::rope_columns(gpu_ops::linear_fused_f32(x, w, b, product).reshape({m, n}), f);
    if (f.act != Act::Identity) y = gpu_ops::activation(y, f.act, 0.0f);
    if (f.scale != 1.0f) y = nn::scale(y, f.scale);
    if (f.residual.defined()) y = gpu_ops::binary(y, f.residual.reshape({m, n}), '+');
    return y.reshape(shape);
  }
  // Every kernel's uniform block holds the rope fields and the turns of its rope_rd / 2 frequencies (at words
  // 12-75), and the stacked output's block width and rows.
  uint32_t params[84] = {};
  auto set_rope = [&](int hd_at, int cols_at) {
    if (f.rope_heads <= 0) return;
    params[hd_at] = u32(head_dim);
    params[hd_at + 1] = u32(f.rotary_dim);
    params[cols_at] = u32(rope_cols);
    rope_turns(f.rope_base, f.rotary_dim, params + 12);
  };
  if (m < 16) {
    const uint32_t head[] = {u32(m), u32(n), u32(k), has_bias, act, has_res, has_norm, eps};
    std::copy(std::begin(head), std::end(head), params);
    set_rope(8, 10);
    params[11] = stack_cols;
    // The row kernel's turns follow its 16 scalar words.
    uint32_t rows_params[80] = {};
    std::copy(params, params + 12, rows_params);
    rows_params[12] = u32(stack_rows);
    rows_params[13] = std::bit_cast<uint32_t>(f.scale);
    std::copy(params + 12, params + 76, rows_params + 16);
    rec.dispatch("nn_linear_rows", kLinearRows, rows_params, {&x, &w, &bias, &res, &out, &gamma},
                 static_cast<uint64_t>(m * n));
    return out;
  }
  if (slice_k) {
    const bool vec4_loads = k % 4 == 0 && x.gpu_offset() % 16 == 0 && w.gpu_offset() % 16 == 0;
    // Made once and kept (a static std::string's destructor would need __cxa_atexit, which wasm lacks).
    static const std::string* wgsl[2][2] = {
        {new std::string(linear_slice_k_wgsl(false, 32)), new std::string(linear_slice_k_wgsl(true, 32))},
        {new std::string(linear_slice_k_wgsl(false, 16)), new std::string(linear_slice_k_wgsl(true, 16))}};
    static const char* names[2][2] = {{"nn_linear_slice_k", "nn_linear_slice_k_vec4"},
                                      {"nn_linear_slice_k16", "nn_linear_slice_k16_vec4"}};
    // Auto: 16-row blocks where 32-row ones are fewer than 2 a core of the target's GPU (its 4 workgroups a
    // core): Moonshine's 413 x 416 products at 10 s (169 blocks), not its 413 x 1248 or 413 x 1664 (507, 676).
    const int setting = linear_slice_rows();
    const int64_t cores = target_workgroups / 4;
    const int rows = setting != 0 ? setting : (tiles32 < 2 * cores ? 16 : 32);
    const int variant = rows == 16 ? 1 : 0;
    const int64_t blocks = (m + rows - 1) / rows * tiles32_n;
    const uint32_t head[] = {u32(m), u32(n), u32(k), has_bias, u32(tiles32_n), act, has_res, has_norm};
    std::copy(std::begin(head), std::end(head), params);
    set_rope(8, 11);
    params[10] = eps;
    params[76] = stack_cols;
    params[77] = u32(stack_rows);
    params[78] = std::bit_cast<uint32_t>(f.scale);
    // One workgroup of 256 per block: the recorder counts threads in 64s.
    rec.dispatch(names[variant][vec4_loads ? 1 : 0], *wgsl[variant][vec4_loads ? 1 : 0],
                 std::span<const uint32_t>(params, 80), {&x, &w, &bias, &res, &out, &gamma},
                 static_cast<uint64_t>(blocks * 64));
    return out;
  }
  // K ranges of whole chunks (16 ks for the 64 x 64 kernel, S x KS for the tall one).
  const int64_t chunk = tall ? tall_ck : 16;
  const int64_t k_chunk = ((k + splits - 1) / splits + chunk - 1) / chunk * chunk;
  splits = (k + k_chunk - 1) / k_chunk;
  const uint32_t head[] = {u32(m),
                           u32(n),
                           u32(k),
                           has_bias,
                           u32(tall ? tall_tiles_n : tiles_n),
                           u32(tall ? tall_tiles : tiles),
                           u32(k_chunk),
                           u32(splits),
                           act,
                           has_res};
  std::copy(std::begin(head), std::end(head), params);
  set_rope(10, 78);
  params[76] = has_norm;
  params[77] = eps;
  params[79] = stack_cols;
  params[80] = u32(stack_rows);
  params[81] = std::bit_cast<uint32_t>(f.scale);
  // One workgroup per (split, block): the recorder counts threads in 64s, whatever the kernel's group size.
  const char* name = "nn_linear64";
  const std::string* wgsl = nullptr;
  if (tall) {
    // Each shape's kernel made once and kept (no static destructor: wasm lacks __cxa_atexit).
    static auto* made = new std::map<std::string, std::string>();
    const std::string key = "nn_linear_tall_" + std::to_string(tall_rt) + "x" + std::to_string(ts.ct) + "_s" +
                            std::to_string(tall_slices) + "k" + std::to_string(ts.ks);
    auto it = made->find(key);
    if (it == made->end())
      it = made->emplace(key, linear_tall_wgsl(static_cast<int>(tall_rt), ts.ct,
                                               static_cast<int>(tall_slices), ts.ks))
               .first;
    name = it->first.c_str();
    wgsl = &it->second;
  }
  const std::string_view kernel = wgsl ? std::string_view(*wgsl) : std::string_view(kLinear64);
  const int64_t blocks = tall ? tall_tiles : tiles;
  if (splits == 1) {
    rec.dispatch(name, kernel, params, {&x, &w, &bias, &res, &out, &gamma},
                 static_cast<uint64_t>(blocks * 64));
    return out;
  }
  Tensor part = x.ctx().empty({splits, m, n});
  rec.dispatch(name, kernel, params, {&x, &w, &bias, &res, &part, &gamma},
               static_cast<uint64_t>(splits * blocks * 64));
  const uint32_t sum_params[] = {u32(m * n),
                                 u32(n),
                                 u32(splits),
                                 has_bias,
                                 act,
                                 has_res,
                                 stack_cols,
                                 u32(stack_rows),
                                 std::bit_cast<uint32_t>(f.scale),
                                 0,
                                 0,
                                 0};
  rec.dispatch("nn_split_sum", kSplitSum, sum_params, {&part, &bias, &res, &out},
               static_cast<uint64_t>(m * n));
  return out;
}

Tensor linear(const Tensor& x, const Tensor& w, const Tensor& b) {
  return gpu_ops::linear_fused_f32(x, w, b, {});
}

}  // namespace sotto::nn::gpu_ops
