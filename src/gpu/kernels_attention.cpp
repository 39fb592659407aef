// The WGSL of gpu/kernels.h's attention family: RoPE (with the per-head q/k RMSNorm before it and q's scale
// after it) plus the KV cache write, and decode attention over the f16 cache (optionally a sliding window).
#include "core/error.h"
#include "gpu/kernels.h"
#include "gpu/kernels_wgsl.h"

namespace sotto::gpu {

std::string wgsl_rope_kv() {
  std::string src = R"(
struct P { n_head: u32, n_head_kv: u32, hd_k: u32, hd_v: u32, n_rot: u32, halves: u32, k_base: u32, v_base: u32,
           k_row_words: u32, v_row_words: u32, mode: u32, eps: f32, q_scale: f32, qkv_stride: u32, pad1: u32, pad2: u32 }
struct Step { pos: u32, n: u32, pad1: u32, pad2: u32 }
@group(0) @binding(0) var<uniform> p: P;
@group(0) @binding(1) var<uniform> step: Step;
@group(0) @binding(2) var<storage, read_write> qkv: array<f32>;
@group(0) @binding(3) var<storage, read> rope: array<f32>;
@group(0) @binding(4) var<storage, read_write> kc: array<u32>;
@group(0) @binding(5) var<storage, read_write> vc: array<u32>;
@group(0) @binding(6) var<storage, read> q_norm: array<f32>;
@group(0) @binding(7) var<storage, read> k_norm: array<f32>;
var<workgroup> buf: array<f32, 256>;
var<workgroup> ssr: array<vec2f, 64>;
FF_HELPERS
@compute @workgroup_size(64)
fn main(@builtin(local_invocation_id) lid: vec3u, @builtin(workgroup_id) wg: vec3u) {
  // Token wg.y of the step's n (a prompt runs many at once; decoding, one) sits at position pos + wg.y, its
  // q, k, v at wg.y * qkv_stride.
  if (wg.y >= max(step.n, 1u)) { return; }
  let h = wg.x;
  let k_off = wg.y * p.qkv_stride + p.n_head * p.hd_k;
  let v_off = k_off + p.n_head_kv * p.hd_k;
  let pos = step.pos + wg.y;
  if (h < p.n_head + p.n_head_kv) {
    let is_k = h >= p.n_head;
    let src = select(wg.y * p.qkv_stride + h * p.hd_k, k_off + (h - p.n_head) * p.hd_k, is_k);
    for (var i = lid.x; i < p.hd_k; i += 64u) { buf[i] = qkv[src + i]; }
    workgroupBarrier();
    // mode 1: RMSNorm over the head first (qwen3, gemma3), the sum of squares as the CPU's double one.
    if ((p.mode & 1u) != 0u) {
      var ss = vec2f(0.0);
      for (var i = lid.x; i < p.hd_k; i += 64u) { let v = buf[i]; ss = ff_add(ss, v * v); }
      ssr[lid.x] = ss;
      workgroupBarrier();
      for (var s = 32u; s > 0u; s >>= 1u) {
        if (lid.x < s) { ssr[lid.x] = ff_add2(ssr[lid.x], ssr[lid.x + s]); }
        workgroupBarrier();
      }
      let scale = 1.0 / sqrt(ff_mean(ssr[0], p.hd_k) + p.eps);
      for (var i = lid.x; i < p.hd_k; i += 64u) { buf[i] = buf[i] * scale * select(q_norm[i], k_norm[i], is_k); }
      workgroupBarrier();
    }
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
      // q_scale (gemma3) after RoPE; 1 otherwise, which changes nothing.
      for (var i = lid.x; i < p.hd_k; i += 64u) { qkv[src + i] = buf[i] * p.q_scale; }
    } else {
      let dst = p.k_base + pos * p.k_row_words + (h - p.n_head) * (p.hd_k / 2u);
      for (var i = lid.x; i < p.hd_k / 2u; i += 64u) {
        kc[dst + i] = pack_f16(buf[2u * i], buf[2u * i + 1u]);
      }
    }
  } else {
    let kvh = h - p.n_head - p.n_head_kv;
    let src = v_off + kvh * p.hd_v;
    let dst = p.v_base + pos * p.v_row_words + kvh * (p.hd_v / 2u);
    for (var i = lid.x; i < p.hd_v / 2u; i += 64u) {
      vc[dst + i] = pack_f16(qkv[src + 2u * i], qkv[src + 2u * i + 1u]);
    }
  }
}
)";
  const std::string helpers = cat(wgsl_float_float(), wgsl_parts::kF16Rne);
  const size_t at = src.find("FF_HELPERS");
  src.replace(at, 10, helpers);
  return src;
}

std::string wgsl_attention(uint32_t max_keys) {
  std::string src = R"(
struct P { n_head: u32, n_head_kv: u32, hd_k: u32, hd_v: u32, k_row_words: u32, v_row_words: u32, k_base: u32,
           v_base: u32, scale: f32, window: u32, qkv_stride: u32, out_stride: u32 }
struct Step { pos: u32, n: u32, pad1: u32, pad2: u32 }
@group(0) @binding(0) var<uniform> p: P;
@group(0) @binding(1) var<uniform> step: Step;
@group(0) @binding(2) var<storage, read> qkv: array<f32>;
@group(0) @binding(3) var<storage, read> kc: array<u32>;
@group(0) @binding(4) var<storage, read> vc: array<u32>;
@group(0) @binding(5) var<storage, read_write> out: array<f32>;
const MAX_KEYS = MAXKu;
var<workgroup> scores: array<f32, MAX_KEYS>;
var<workgroup> qs: array<f32, 256>;
// One key of the online softmax, as ggml's CPU kernel: st = (max score m, sum of weights, acc, the running sum
// of values kept in f16) after a key of score s and value v.
fn attend_key(st: vec3f, s: f32, v: f32) -> vec3f {
  var m = st.x;
  var acc = st.z;
  var old_scale = 1.0;
  var weight = 1.0;
  if (s > m) {
    old_scale = exp(m - s);
    m = s;
    acc = f16r(acc * old_scale);
  } else {
    weight = exp(s - m);
  }
  return vec3f(m, st.y * old_scale + weight, f16r(acc + v * weight));
}
@compute @workgroup_size(64)
fn main(@builtin(local_invocation_id) lid: vec3u, @builtin(workgroup_id) wg: vec3u) {
  // Query wg.y of the step's n at position pos + wg.y: causal, it sees the keys up to its own position,
  // which rope_kv wrote for the whole prompt before.
  if (wg.y >= max(step.n, 1u)) { return; }
  let pos = step.pos + wg.y;
  let h = wg.x;
  let kvh = h / (p.n_head / p.n_head_kv);
  let n_keys = min(pos + 1u, MAX_KEYS);
  // A sliding window (gemma3's local layers): position pos sees keys pos - window + 1 .. pos only.
  let first = select(0u, pos + 1u - p.window, p.window > 0u && pos + 1u > p.window);
  // q rounded to f16, as ggml's flash attention converts it to the cache's type
  for (var d = lid.x; d < p.hd_k; d += 64u) { qs[d] = f16r(qkv[wg.y * p.qkv_stride + h * p.hd_k + d]); }
  workgroupBarrier();
  for (var t = first + lid.x; t < n_keys; t += 64u) {
    let k0 = p.k_base + t * p.k_row_words + kvh * (p.hd_k / 2u);
    // Four words' loads issued before their (in-order) sums: a loop of one load and one sum waited out a
    // memory latency per word.
    var s = 0.0;
    var d = 0u;
    for (; d + 4u <= p.hd_k / 2u; d += 4u) {
      let kv0 = unpack2x16float(kc[k0 + d]);
      let kv1 = unpack2x16float(kc[k0 + d + 1u]);
      let kv2 = unpack2x16float(kc[k0 + d + 2u]);
      let kv3 = unpack2x16float(kc[k0 + d + 3u]);
      s += kv0.x * qs[2u * d] + kv0.y * qs[2u * d + 1u];
      s += kv1.x * qs[2u * d + 2u] + kv1.y * qs[2u * d + 3u];
      s += kv2.x * qs[2u * d + 4u] + kv2.y * qs[2u * d + 5u];
      s += kv3.x * qs[2u * d + 6u] + kv3.y * qs[2u * d + 7u];
    }
    for (; d < p.hd_k / 2u; d++) {
      let kv = unpack2x16float(kc[k0 + d]);
      s += kv.x * qs[2u * d] + kv.y * qs[2u * d + 1u];
    }
    scores[t] = s * p.scale;
  }
  workgroupBarrier();
  // Online softmax over the keys in order with the running sum of values kept in f16 (ggml's CPU kernel),
  // one output dimension per invocation.
  for (var d = lid.x; d < p.hd_v; d += 64u) {
    var st = vec3f(-3.4028234e38f, 0.0, 0.0);  // (max score, sum of weights, acc)
    let word = kvh * (p.hd_v / 2u) + d / 2u;
    let odd = (d & 1u) == 1u;
    // The same walk, four keys' values loaded ahead of their (in-order) updates.
    var t = first;
    for (; t + 4u <= n_keys; t += 4u) {
      let v0 = unpack2x16float(vc[p.v_base + t * p.v_row_words + word]);
      let v1 = unpack2x16float(vc[p.v_base + (t + 1u) * p.v_row_words + word]);
      let v2 = unpack2x16float(vc[p.v_base + (t + 2u) * p.v_row_words + word]);
      let v3 = unpack2x16float(vc[p.v_base + (t + 3u) * p.v_row_words + word]);
      st = attend_key(st, scores[t], select(v0.x, v0.y, odd));
      st = attend_key(st, scores[t + 1u], select(v1.x, v1.y, odd));
      st = attend_key(st, scores[t + 2u], select(v2.x, v2.y, odd));
      st = attend_key(st, scores[t + 3u], select(v3.x, v3.y, odd));
    }
    for (; t < n_keys; t++) {
      let v0 = unpack2x16float(vc[p.v_base + t * p.v_row_words + word]);
      st = attend_key(st, scores[t], select(v0.x, v0.y, odd));
    }
    let sum = st.y;
    let acc = st.z;
    let inv = select(1.0 / sum, 0.0, sum == 0.0);
    out[wg.y * p.out_stride + h * p.hd_v + d] = acc * inv;
  }
}
)";
  const size_t at = src.find("MAXK");
  src.replace(at, 4, cat(max_keys));
  return cat(wgsl_parts::kF16Rne, src);
}

}  // namespace sotto::gpu
