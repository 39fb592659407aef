// Attention of many query rows on the GPU (an encoder's self-attention: Moonshine's 415 x 415 keys for 10 s, 8
// heads of 52), flash-attention style: a workgroup per (block of 8 queries, head) streams the keys through
// workgroup memory in tiles of 16 and keeps each query's running max, sum and weighted values in registers,
// so K and V are read from memory once per 8 queries and nothing is written between the scores and the
// output. The one-query kernels (gpu_ops.cpp, kAttention4) give a workgroup to each (query, head, 64 keys) and
// read every key from memory for every query (~290 MB from cache per Moonshine encoder layer, ~125 us on an
// H100), then a combine dispatch.
#include <algorithm>
#include <bit>
#include <cmath>
#include <string>

#include "nn/gpu_ops.h"
#include "nn/gpu_recorder.h"
#include "nn/gpu_wgsl.h"

namespace sotto::nn::gpu_ops {

namespace {

// 64 threads: 8 queries x 8 lanes. Lane c of a query takes keys c and c + 8 of each tile of 16 (an online
// softmax of its own: max m, sum l, weighted values acc), then the 8 lanes are combined, each scaled by
// exp(m_lane - max). The kernel is written out for the head's D4 = head_dim / 4 vec4s (q and acc as named
// registers: arrays indexed in loops were kept in local memory, ~10x slower). Workgroup memory: the K and V
// tiles, a key's D4 vec4s 17 vec4s apart so the 8 lanes' reads of 8 keys fall in distinct banks, reused after
// the keys for lanes 1-7's acc. The scale is applied to q once.
std::string attention_tiled_wgsl(int d4) {
  auto each = [d4](const std::string& pattern) {  // pattern with '#' for the vec4's index
    std::string out;
    for (int e = 0; e < d4; ++e) {
      std::string line = pattern;
      for (size_t at = line.find('#'); at != std::string::npos; at = line.find('#', at))
        line.replace(at, 1, std::to_string(e));
      out += line;
    }
    return out;
  };
  std::string s = R"(
fn row_of(w: vec3<u32>) -> u32 { return w.x + w.y * 65535u; }
struct P { tq: u32, tk: u32, heads: u32, kv_heads: u32, head_dim: u32, causal: u32, scale: f32, q_stride4: u32,
           kv_stride4: u32, k_col4: u32, v_col4: u32, pad0: u32 };
@group(0) @binding(0) var<uniform> p: P;
@group(0) @binding(1) var<storage, read> q: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read> k: array<vec4<f32>>;
@group(0) @binding(3) var<storage, read> v: array<vec4<f32>>;
@group(0) @binding(4) var<storage, read_write> y: array<vec4<f32>>;
const D4 = )" + std::to_string(d4) +
                  R"(u;
var<workgroup> tile: array<vec4<f32>, )" +
                  std::to_string(std::max(544, 56 * d4)) + R"(>;
var<workgroup> ml: array<vec2<f32>, 64>;
@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let w = row_of(wid);
  if (w >= ((p.tq + 7u) / 8u) * p.heads) { return; }
  let h = w % p.heads;
  let qi = lid / 8u;
  let lane = lid % 8u;
  let i = (w / p.heads) * 8u + qi;
  let kv4 = p.kv_stride4;
  let kb4 = p.k_col4 + (h / (p.heads / p.kv_heads)) * D4;
  let vb4 = p.v_col4 + (h / (p.heads / p.kv_heads)) * D4;
  let qb4 = min(i, p.tq - 1u) * p.q_stride4 + h * D4;
  let yb4 = min(i, p.tq - 1u) * p.heads * D4 + h * D4;
)";
  s += each("  let q# = q[qb4 + #u] * p.scale;\n");
  s += each("  var a# = vec4<f32>(0.0);\n");
  s += R"(  // Causal: query i sees keys up to tk - tq + i (the cache ahead of the queries).
  var limit = 0u;
  if (i < p.tq) {
    limit = p.tk;
    if (p.causal != 0u) { limit = min(p.tk, p.tk - p.tq + i + 1u); }
  }
  var m = -3.0e38;
  var l = 0.0;
  for (var j0 = 0u; j0 < p.tk; j0 += 16u) {
    workgroupBarrier();
    for (var t = lid; t < 16u * D4; t += 64u) {
      let key = t / D4;
      let e = t % D4;
      var kk = vec4<f32>(0.0);
      var vv = vec4<f32>(0.0);
      if (j0 + key < p.tk) {
        kk = k[(j0 + key) * kv4 + kb4 + e];
        vv = v[(j0 + key) * kv4 + vb4 + e];
      }
      tile[key * 17u + e] = kk;
      tile[272u + key * 17u + e] = vv;
    }
    workgroupBarrier();
    for (var c = lane; c < 16u; c += 8u) {
      if (j0 + c < limit) {
        let kb = c * 17u;
        var d = vec4<f32>(0.0);
)";
  s += each("        d += q# * tile[kb + #u];\n");
  s += R"(        let s = d.x + d.y + d.z + d.w;
        if (s > m) {
          let corr = exp(m - s);
          l *= corr;
)";
  s += each("          a# *= corr;\n");
  s += R"(          m = s;
        }
        let pr = exp(s - m);
        l += pr;
)";
  s += each("        a# += pr * tile[272u + kb + #u];\n");
  s += R"(      }
    }
  }
  workgroupBarrier();
  ml[lid] = vec2<f32>(m, l);
  let slot = (qi * 7u + lane - 1u) * D4;
  if (lane != 0u) {
)";
  s += each("    tile[slot + #u] = a#;\n");
  s += R"(  }
  workgroupBarrier();
  if (lane == 0u && i < p.tq) {
    var mx = m;
    for (var r = 1u; r < 8u; r++) { mx = max(mx, ml[lid + r].x); }
    let c0 = exp(m - mx);
    var total = l * c0;
)";
  s += each("    a# *= c0;\n");
  s += R"(    for (var r = 1u; r < 8u; r++) {
      let cr = exp(ml[lid + r].x - mx);
      total += ml[lid + r].y * cr;
      let at = (qi * 7u + r - 1u) * D4;
)";
  s += each("      a# += tile[at + #u] * cr;\n");
  s += R"(    }
    let inv = 1.0 / total;
)";
  s += each("    y[yb4 + #u] = a# * inv;\n");
  s += "  }\n}\n";
  return s;
}

}  // namespace

namespace {

// Where the tiled kernel reads its rows: q's row stride, k and v's, and k's and v's first column, in floats (all
// multiples of 4).
struct TiledLayout {
  int64_t q_stride, kv_stride, k_col, v_col;
};

Tensor dispatch_tiled(const Tensor& q, const Tensor& k, const Tensor& v, int64_t tq, int64_t tk,
                      int64_t head_dim, const AttentionOptions& o, const TiledLayout& at) {
  GpuRecorder& rec = *q.ctx().gpu();
  const int64_t heads = o.n_heads, kv_heads = o.n_kv_heads > 0 ? o.n_kv_heads : o.n_heads;
  const float scale = o.scale != 0.0f ? o.scale : 1.0f / std::sqrt(static_cast<float>(head_dim));
  Tensor out = q.ctx().empty({tq, heads * head_dim});
  auto u32 = [](int64_t x) { return static_cast<uint32_t>(x); };
  const uint32_t params[] = {u32(tq),
                             u32(tk),
                             u32(heads),
                             u32(kv_heads),
                             u32(head_dim),
                             o.causal ? 1u : 0u,
                             std::bit_cast<uint32_t>(scale),
                             u32(at.q_stride / 4),
                             u32(at.kv_stride / 4),
                             u32(at.k_col / 4),
                             u32(at.v_col / 4),
                             0};
  const int d4 = static_cast<int>(head_dim / 4);
  rec.dispatch("nn_attention_tiled_" + std::to_string(d4), attention_tiled_wgsl(d4), params,
               {&q, &k, &v, &out}, static_cast<uint64_t>((tq + 7) / 8 * heads) * 64);
  return out;
}

}  // namespace

bool attention_tiled_fits(const Tensor& q, const Tensor& k, const Tensor& v, const AttentionOptions& o) {
  const int64_t heads = o.n_heads, kv_heads = o.n_kv_heads > 0 ? o.n_kv_heads : o.n_heads;
  const int64_t head_dim = q.dim(1) / heads;
  return q.dim(0) >= 16 && head_dim % 4 == 0 && head_dim <= 64 && (kv_heads * head_dim) % 4 == 0 &&
         vec4_view(q) && vec4_view(k) && vec4_view(v);
}

Tensor attention_tiled(const Tensor& q, const Tensor& k, const Tensor& v, const AttentionOptions& o) {
  const int64_t heads = o.n_heads, kv_heads = o.n_kv_heads > 0 ? o.n_kv_heads : o.n_heads;
  const int64_t head_dim = q.dim(1) / heads;
  return dispatch_tiled(
      q, k, v, q.dim(0), k.dim(0), head_dim, o,
      {.q_stride = heads * head_dim, .kv_stride = kv_heads * head_dim, .k_col = 0, .v_col = 0});
}

Tensor attention_stacked(const Tensor& qkv, const AttentionOptions& o) {
  GpuRecorder& rec = *qkv.ctx().gpu();
  if (rec.failed()) return empty_on(qkv);
  const int64_t heads = o.n_heads, kv_heads = o.n_kv_heads > 0 ? o.n_kv_heads : o.n_heads;
  if (qkv.dtype() != DType::F32 || qkv.rank() != 2 || heads < 1 || kv_heads < 1 || heads % kv_heads != 0 ||
      qkv.dim(1) % (heads + 2 * kv_heads) != 0)
    return unsupported(qkv, "stacked attention of this tensor");
  const int64_t t = qkv.dim(0), width = qkv.dim(1), head_dim = width / (heads + 2 * kv_heads);
  const int64_t q_cols = heads * head_dim, kv_cols = kv_heads * head_dim;
  // Any row count: below 16 rows (a short clip) the one-query kernels would need the columns copied out first.
  if (head_dim % 4 == 0 && head_dim <= 64 && vec4_view(qkv))
    return dispatch_tiled(
        qkv, qkv, qkv, t, t, head_dim, o,
        {.q_stride = width, .kv_stride = width, .k_col = q_cols, .v_col = q_cols + kv_cols});
  // Other head sizes: the three apart, then the attention that fits them.
  return gpu_ops::attention(gpu_ops::slice(qkv, 1, 0, q_cols),
                            gpu_ops::slice(qkv, 1, q_cols, q_cols + kv_cols),
                            gpu_ops::slice(qkv, 1, q_cols + kv_cols, width), o);
}

}  // namespace sotto::nn::gpu_ops
