// The WGSL of the prompt's matrix x matrix (gpu/kernels.h wgsl_matmat): the decode kernel's rows and lanes,
// each workgroup also covering a tile of kMatmatTokens prompt tokens, so every weight word it loads is used
// for that many tokens instead of one.
#include "core/error.h"
#include "gpu/kernels.h"
#include "gpu/kernels_wgsl.h"

namespace sotto::gpu {

using namespace wgsl_parts;

namespace {

// Each token's sum over a row's LANES lanes: the decode kernel's tree (kMatvecTree in gpu/kernels.cpp; with
// subgroups its strides below the subgroup size as a butterfly, the same sums bit for bit: reduction()), for the
// TOK tokens of the tile at once. Lane 0 ends with token t's sums in acc[t], acc2[t].
const char* kReduceTree = R"(
  for (var t = 0u; t < TOK; t++) {
    red[t * 128u + lid.x] = acc[t];
    RED2_STORE
  }
  workgroupBarrier();
  for (var s = LANES / 2u; s >= TREE_END; s >>= 1u) {
    if (lane < s) {
      for (var t = 0u; t < TOK; t++) {
        red[t * 128u + lid.x] += red[t * 128u + lid.x + s];
        RED2_ADD
      }
    }
    workgroupBarrier();
  }
  for (var t = 0u; t < TOK; t++) {
    acc[t] = red[t * 128u + lid.x];
    ACC2_LOAD
  }
)";
const char* kReduceButterfly = R"(
  for (var s = min(sg, LANES) / 2u; s > 0u; s >>= 1u) {
    for (var t = 0u; t < TOK; t++) {
      acc[t] += subgroupShuffleXor(acc[t], s);
      ACC2_SHUFFLE
    }
  }
)";

}  // namespace

// Workgroup: 128 invocations = 128 / LANES rows x LANES lanes (LANES as the decode kernel: matvec_lanes()), and
// TOK tokens (wg.y * TOK ...). One invocation walks its row's sub-blocks lane, lane + LANES, ... and, for each,
// dots the weights with each of the TOK tokens' activations: per sub-block it reads the weight block once (5 words
// for Q4_0) and TOK x 9 words of activations, which stay in L1 across the workgroup's rows. Each token's sum runs
// in the decode kernel's order (the same lane partials, the same tree over lanes), so a prompt token gets the
// logits a token-by-token run gives. Tiles past the step's token count return at once: one plan serves every
// prompt length up to its size.
std::string wgsl_matmat(DType w, bool swiglu, const KernelFeatures& f, uint32_t cols, bool gelu) {
  std::string src = R"(
struct P { rows: u32, cols: u32, mode: u32, y_off: u32, row_words: u32, n_sub: u32, b_off: u32, x_off: u32,
           y_stride: u32, pad0: u32, pad1: u32, pad2: u32 }
struct Step { pos: u32, n: u32, pad0: u32, pad1: u32 }
@group(0) @binding(0) var<uniform> p: P;
@group(0) @binding(4) var<storage, read_write> y: array<f32>;
@group(0) @binding(5) var<storage, read> bias: array<f32>;
@group(0) @binding(8) var<uniform> step: Step;
)";
  src += f16_helpers(f);
  if (swiglu && gelu) src += kGeluTable;
  std::string dots;  // one sub-block (or vec4 / f16 pair) of the row, for each token of the tile
  if (w == DType::F32) {
    src += R"(
@group(0) @binding(1) var<storage, read> W: array<vec4f>;
@group(0) @binding(2) var<storage, read> x: array<vec4f>;
)";
    if (swiglu) src += "@group(0) @binding(6) var<storage, read> W2: array<vec4f>;\n";
    dots = R"(
      let wv = W[base + i];
      ACC2_LOAD
      for (var t = 0u; t < TOK; t++) {
        let xv = x[(t0 + t) * p.n_sub + p.x_off + i];
        acc[t] += dot(wv, xv);
        ACC2
      }
)";
    replace_all(dots, "ACC2_LOAD", swiglu ? "let wv2 = W2[base + i];" : "");
    replace_all(dots, "ACC2", swiglu ? "acc2[t] += dot(wv2, xv);" : "");
  } else if (w == DType::F16) {  // x rounded to f16 first, as ggml converts it for f16 weights
    src += R"(
@group(0) @binding(1) var<storage, read> W: array<u32>;
@group(0) @binding(2) var<storage, read> x: array<f32>;
)";
    if (swiglu) src += "@group(0) @binding(6) var<storage, read> W2: array<u32>;\n";
    dots = R"(
      let wv = unpack2x16float(W[base + i]);
      ACC2_LOAD
      for (var t = 0u; t < TOK; t++) {
        let xo = (t0 + t) * p.cols + p.x_off + 2u * i;
        let xv = f16r2(x[xo], x[xo + 1u]);
        acc[t] += dot(wv, xv);
        ACC2
      }
)";
    replace_all(dots, "ACC2_LOAD", swiglu ? "let wv2 = unpack2x16float(W2[base + i]);" : "");
    replace_all(dots, "ACC2", swiglu ? "acc2[t] += dot(wv2, xv);" : "");
  } else {
    if (!sub_dot_source(w)) return "";
    src += R"(
@group(0) @binding(1) var<storage, read> W: array<u32>;
@group(0) @binding(2) var<storage, read> xq: array<u32>;
@group(0) @binding(3) var<storage, read> xd: array<f32>;
)";
    if (swiglu) src += "@group(0) @binding(6) var<storage, read> W2: array<u32>;\n";
    src += f.packed_dot ? kDot4Packed : kDot4Fallback;
    src += kDotHelpers;
    // The decode kernel's sub-block dot, reading token t's activations: q8_0 rows of cols / 4 words and
    // cols / 32 scales, one after another.
    src += sub_dot_instance(w, "W[", "", true);
    if (swiglu) src += sub_dot_instance(w, "W2[", "2", true);
    dots = R"(
      for (var t = 0u; t < TOK; t++) {
        let xo = (t0 + t) * (p.cols / 4u);
        let xdo = (t0 + t) * (p.cols / 32u);
        acc[t] += sub_dot(base, i, xo, xdo);
        ACC2
      }
)";
    replace_all(dots, "ACC2", swiglu ? "acc2[t] += sub_dot2(base, i, xo, xdo);" : "");
  }
  src += R"(
var<workgroup> red: array<f32, 128u * TOK>;
RED2_DECL
@compute @workgroup_size(128)
fn main(@builtin(local_invocation_id) lid: vec3u, @builtin(workgroup_id) wg: vec3u SUBGROUP_SIZE) {
  let t0 = wg.y * TOK;
  if (t0 >= max(step.n, 1u)) { return; }
  let lane = lid.x % LANES;
  let row = wg.x * (128u / LANES) + lid.x / LANES;
  var acc: array<f32, TOK>;
  var acc2: array<f32, TOK>;
  if (row < p.rows) {
    let base = row * p.row_words;
    for (var i = lane; i < p.n_sub; i += LANES) {
DOTS
    }
  }
REDUCE
  if (lane == 0u && row < p.rows) {
    for (var t = 0u; t < TOK && t0 + t < max(step.n, 1u); t++) {
      var v = acc[t];
      OUTPUT
      if ((p.mode & 1u) != 0u) { v += bias[p.b_off + row]; }
      let o = (t0 + t) * p.y_stride + p.y_off + row;
      if ((p.mode & 2u) != 0u) { v += y[o]; }
      y[o] = v;
    }
  }
}
)";
  replace_all(src, "REDUCE", reduction(kReduceTree, "LANES", kReduceButterfly, f.subgroups));
  replace_all(src, "DOTS", dots);
  replace_all(src, "RED2_DECL", swiglu ? "var<workgroup> red2: array<f32, 128u * TOK>;" : "");
  replace_all(src, "RED2_STORE", swiglu ? "red2[t * 128u + lid.x] = acc2[t];" : "");
  replace_all(src, "RED2_ADD", swiglu ? "red2[t * 128u + lid.x] += red2[t * 128u + lid.x + s];" : "");
  replace_all(src, "ACC2_LOAD", swiglu ? "acc2[t] = red2[t * 128u + lid.x];" : "");
  replace_all(src, "ACC2_SHUFFLE", swiglu ? "acc2[t] += subgroupShuffleXor(acc2[t], s);" : "");
  replace_all(src, "SUBGROUP_SIZE", f.subgroups ? ", @builtin(subgroup_size) sg: u32" : "");
  // silu(g) * u with silu(g) = g / (1 + exp(-g)), as the CPU computes it; or gelu(g) * u from ggml's table.
  replace_all(src, "OUTPUT",
              !swiglu ? ""
              : gelu  ? "v = gelu_f16(v) * acc2[t];"
                      : "v = v / (1.0 + exp(-v)) * acc2[t];");
  if (!swiglu) replace_all(src, "var acc2: array<f32, TOK>;", "");
  return cat(wgsl_enables(f, true, true), "const LANES = ", matvec_lanes(w),
             "u;\nconst TOK = ", kMatmatTokens, "u;\n", src);
}

}  // namespace sotto::gpu
