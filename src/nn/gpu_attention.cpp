// Attention of many query rows on the GPU (an encoder's self-attention: Moonshine's 415 x 415 keys for 10 s, 8
// heads of 52), flash-attention style: a workgroup per (block of 16 queries, head) streams the keys through
// workgroup memory in tiles of 16 and keeps each query's running max, sum and weighted values in registers,
// so K and V are read from memory once per 16 queries and nothing is written between the scores and the
// output. The one-query kernels (gpu_ops.cpp, kAttention4) give a workgroup to each (query, head, 64 keys) and
// read every key from memory for every query (~290 MB from cache per Moonshine encoder layer, ~125 us on an
// H100), then a combine dispatch.
#include <algorithm>
#include <bit>
#include <cmath>

#include "nn/gpu_ops.h"
#include "nn/gpu_recorder.h"
#include "nn/gpu_wgsl.h"

namespace sotto::nn::gpu_ops {

namespace {

// 64 threads: 16 queries x 4 lanes. Lane c of a query takes keys c, c + 4, ... of each tile (an online
// softmax of its own: max m, sum l, weighted values acc), then the 4 lanes are combined, each scaled by
// exp(m_lane - max). Heads of a multiple of 4 dims up to 64: q and acc are 16 vec4s in registers. Workgroup
// memory: the K and V tiles (16 keys x 16 vec4 each, 8 KB), reused after the keys for lanes 1-3's acc (12 KB).
// The scale is applied to q once.
constexpr const char* kAttentionTiled = R"(
fn row_of(w: vec3<u32>) -> u32 { return w.x + w.y * 65535u; }
struct P { tq: u32, tk: u32, heads: u32, kv_heads: u32, head_dim: u32, causal: u32, scale: f32, pad0: u32 };
@group(0) @binding(0) var<uniform> p: P;
@group(0) @binding(1) var<storage, read> q: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read> k: array<vec4<f32>>;
@group(0) @binding(3) var<storage, read> v: array<vec4<f32>>;
@group(0) @binding(4) var<storage, read_write> y: array<vec4<f32>>;
var<workgroup> tile: array<vec4<f32>, 768>;
var<workgroup> ml: array<vec2<f32>, 64>;
@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let w = row_of(wid);
  if (w >= ((p.tq + 15u) / 16u) * p.heads) { return; }
  let h = w % p.heads;
  let qi = lid / 4u;
  let lane = lid % 4u;
  let i = (w / p.heads) * 16u + qi;
  let d4 = p.head_dim / 4u;
  let kv4 = p.kv_heads * d4;
  let kvb4 = (h / (p.heads / p.kv_heads)) * d4;
  let qb4 = i * p.heads * d4 + h * d4;
  var qr: array<vec4<f32>, 16>;
  var acc: array<vec4<f32>, 16>;
  for (var e = 0u; e < 16u; e++) {
    qr[e] = vec4<f32>(0.0);
    acc[e] = vec4<f32>(0.0);
    if (i < p.tq && e < d4) { qr[e] = q[qb4 + e] * p.scale; }
  }
  // Causal: query i sees keys up to tk - tq + i (the cache ahead of the queries).
  var limit = 0u;
  if (i < p.tq) {
    limit = p.tk;
    if (p.causal != 0u) { limit = min(p.tk, p.tk - p.tq + i + 1u); }
  }
  var m = -3.0e38;
  var l = 0.0;
  for (var j0 = 0u; j0 < p.tk; j0 += 16u) {
    workgroupBarrier();
    for (var t = lid; t < 256u; t += 64u) {
      let key = j0 + t / 16u;
      let e = t % 16u;
      var kk = vec4<f32>(0.0);
      var vv = vec4<f32>(0.0);
      if (key < p.tk && e < d4) {
        kk = k[key * kv4 + kvb4 + e];
        vv = v[key * kv4 + kvb4 + e];
      }
      tile[t] = kk;
      tile[256u + t] = vv;
    }
    workgroupBarrier();
    for (var c = lane; c < 16u; c += 4u) {
      if (j0 + c < limit) {
        var a = vec4<f32>(0.0);
        for (var e = 0u; e < 16u; e++) { if (e < d4) { a += qr[e] * tile[c * 16u + e]; } }
        let s = a.x + a.y + a.z + a.w;
        if (s > m) {
          let corr = exp(m - s);
          l *= corr;
          for (var e = 0u; e < 16u; e++) { acc[e] *= corr; }
          m = s;
        }
        let pr = exp(s - m);
        l += pr;
        for (var e = 0u; e < 16u; e++) { if (e < d4) { acc[e] += pr * tile[256u + c * 16u + e]; } }
      }
    }
  }
  workgroupBarrier();
  ml[lid] = vec2<f32>(m, l);
  if (lane != 0u) {
    for (var e = 0u; e < 16u; e++) { if (e < d4) { tile[(qi * 3u + lane - 1u) * 16u + e] = acc[e]; } }
  }
  workgroupBarrier();
  if (lane == 0u && i < p.tq) {
    var mx = m;
    for (var r = 1u; r < 4u; r++) { mx = max(mx, ml[lid + r].x); }
    let c0 = exp(m - mx);
    var total = l * c0;
    for (var e = 0u; e < 16u; e++) { acc[e] *= c0; }
    for (var r = 1u; r < 4u; r++) {
      let cr = exp(ml[lid + r].x - mx);
      total += ml[lid + r].y * cr;
      for (var e = 0u; e < 16u; e++) { if (e < d4) { acc[e] += tile[(qi * 3u + r - 1u) * 16u + e] * cr; } }
    }
    let inv = 1.0 / total;
    for (var e = 0u; e < 16u; e++) { if (e < d4) { y[qb4 + e] = acc[e] * inv; } }
  }
}
)";

}  // namespace

bool attention_tiled_fits(const Tensor& q, const Tensor& k, const Tensor& v, const AttentionOptions& o) {
  const int64_t heads = o.n_heads, kv_heads = o.n_kv_heads > 0 ? o.n_kv_heads : o.n_heads;
  const int64_t head_dim = q.dim(1) / heads;
  const auto aligned = [](const Tensor& t) { return t.gpu_offset() % 16 == 0 && t.bytes() % 16 == 0; };
  return q.dim(0) >= 16 && head_dim % 4 == 0 && head_dim <= 64 && (kv_heads * head_dim) % 4 == 0 &&
         aligned(q) && aligned(k) && aligned(v);
}

Tensor attention_tiled(const Tensor& q, const Tensor& k, const Tensor& v, const AttentionOptions& o) {
  GpuRecorder& rec = *q.ctx().gpu();
  const int64_t heads = o.n_heads, kv_heads = o.n_kv_heads > 0 ? o.n_kv_heads : o.n_heads;
  const int64_t tq = q.dim(0), tk = k.dim(0), head_dim = q.dim(1) / heads;
  const float scale = o.scale != 0.0f ? o.scale : 1.0f / std::sqrt(static_cast<float>(head_dim));
  Tensor out = q.ctx().empty(q.shape());
  const uint32_t params[] = {static_cast<uint32_t>(tq),       static_cast<uint32_t>(tk),
                             static_cast<uint32_t>(heads),    static_cast<uint32_t>(kv_heads),
                             static_cast<uint32_t>(head_dim), o.causal ? 1u : 0u,
                             std::bit_cast<uint32_t>(scale),  0};
  rec.dispatch("nn_attention_tiled", kAttentionTiled, params, {&q, &k, &v, &out},
               static_cast<uint64_t>((tq + 15) / 16 * heads) * 64);
  return out;
}

}  // namespace sotto::nn::gpu_ops
