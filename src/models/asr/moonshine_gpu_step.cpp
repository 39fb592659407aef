// The WGSL and the recording of moonshine_gpu_step.h's persistent decoder step.
#include "models/asr/moonshine_gpu_step.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdlib>
#include <string>

#include "core/error.h"
#include "models/asr/moonshine.h"
#include "nn/gpu_ops.h"
#include "nn/gpu_recorder.h"
#include "nn/gpu_wgsl.h"

namespace sotto::asr {

namespace {

using nn::Tensor;

constexpr uint32_t kThreads = 256;
constexpr uint32_t kMaxChunks = 64;  // attention chunks of 32 keys a head: 2,048 encoder frames (49 s)

// Layout of the activations' scratch (floats): the final normed row, the layers' new k and v rows, the residual
// stream x, q·k·v (or the cross-attention's q), the attention partials (max, sum, head_dim outputs per chunk of
// each head), the gated up product.
struct ActLayout {
  uint32_t xn = 0, rows, x, qkv, part, h, total;
  explicit ActLayout(const MoonshineConfig& c) {
    const uint32_t d = static_cast<uint32_t>(c.d_model), layers = static_cast<uint32_t>(c.decoder_layers);
    const uint32_t heads = static_cast<uint32_t>(c.n_heads), hd = static_cast<uint32_t>(c.head_dim);
    const uint32_t ff = static_cast<uint32_t>(c.decoder_ff);
    rows = d;
    x = rows + 2 * layers * d;
    qkv = x + d;
    part = qkv + 3 * d;
    h = part + heads * kMaxChunks * (hd + 2);
    total = h + ff;
  }
};

// One workgroup of 256 invocations in 8 row groups of 32. A matrix phase stages its input in workgroup memory
// (x layer-normed, the attention's chunks combined, or the gated product), then each row group takes rows
// it, it + NRG, ... of the grid's rows: its 32 invocations stride the row's words (adjacent invocations adjacent
// words), the partial sums of RB rows at a time reduced through workgroup memory in two steps. Attention: a
// row group per chunk of 32 keys of a head, invocation j scoring key j, its max, sum and outputs to the scratch;
// the next matrix phase combines a head's chunks as it stages them.
const char* kStepKernel = R"(
const T = 256u;
const RG = 8u;
const NRG = G * RG;
const DW = D / 4u;
const FW = FF / 4u;
const PW = HD + 2u;
const RB = 4u;
const RW = 8u;
const SPIN = 65536u;
// Words of one layer's matrices and their offsets in it; floats of one layer's vectors.
const W_O = 3u * D * DW;
const W_CQ = W_O + D * DW;
const W_CO = W_CQ + D * DW;
const W_UP = W_CO + D * DW;
const W_DOWN = W_UP + 2u * FF * DW;
const LW = W_DOWN + D * FW;
const V_UPB = 3u * D;
const V_DOWNB = V_UPB + 2u * FF;
const VL = V_DOWNB + D;

struct P { pos: u32, tk: u32, kv_rows: u32, cap: u32, slot: u32, nch_self: u32, nch_cross: u32, skip: u32,
           eps: f32, att_scale: f32, final_gsum: f32, pad1: f32,
           sc: array<vec4<f32>, 4u * NL>, gs: array<vec4<f32>, NL>, turns: array<vec4<u32>, 16> };
@group(0) @binding(0) var<uniform> p: P;
@group(0) @binding(1) var<storage, read_write> sync: array<atomic<u32>>;
@group(0) @binding(2) var<storage, read_write> act: array<atomic<u32>>;
@group(0) @binding(3) var<storage, read> W: array<u32>;
@group(0) @binding(4) var<storage, read> V: array<f32>;
@group(0) @binding(5) var<storage, read> kvs: array<vec4<f32>>;
@group(0) @binding(6) var<storage, read> kvx: array<vec4<f32>>;
@group(0) @binding(7) var<storage, read> xin: array<f32>;
@group(0) @binding(8) var<storage, read_write> lg: array<atomic<u32>>;

var<workgroup> st: array<f32, FF>;
const PART = max(RB * T, 3u * RG * HD);
var<workgroup> part: array<f32, PART>;  // row partial sums, or q, k, v per row group
var<workgroup> red: array<vec4<f32>, T>;
var<workgroup> red2: array<vec4<f32>, 32>;
var<workgroup> vacc: array<vec4<f32>, T>;
var<workgroup> flag: u32;
var<private> lid: u32;
var<private> lane: u32;
var<private> rgl: u32;
var<private> wg: u32;
var<private> nbar: u32;
var<private> landed: u32;

fn ld(i: u32) -> f32 { return bitcast<f32>(atomicLoad(&act[i])); }
// Stores are exchanges whose old values grid_arrive() consumes: they have landed before the counter moves.
fn sto(i: u32, v: f32) { landed ^= atomicExchange(&act[i], bitcast<u32>(v)); }

// A grid barrier in two halves: this workgroup's arrival, then the wait for the others'. Between them a
// workgroup issues the next phase's loads that depend on nothing another workgroup writes in this step (its
// first weights, attention's keys), so that their round trip to memory overlaps the wait.
fn grid_arrive() {
  nbar += 1u;
  if (landed == 0x7FC00001u) { atomicAdd(&sync[0], 0u); }
  workgroupBarrier();
  storageBarrier();
  if (lid == 0u && (p.skip & 8u) == 0u) { atomicAdd(&sync[p.slot], 1u); }
}
fn grid_wait() {
  if (lid == 0u && (p.skip & 8u) == 0u) {
    var n = 0u;
    loop {
      if (atomicLoad(&sync[p.slot]) >= nbar * G) { break; }
      n += 1u;
      // Another workgroup gave up (the loop's end word set mid-step), or this one does: the failure mark.
      if ((n & 255u) == 0u && atomicLoad(&lg[0]) != 0u) { break; }
      if (n > SPIN) {
        atomicStore(&lg[1], 0xFFFFFFFFu);
        atomicStore(&lg[0], 0x3f800000u);
        break;
      }
    }
  }
  workgroupBarrier();
}

// The workgroup's sum of one vec4 an invocation (three workgroup barriers).
fn wsum(v: vec4<f32>) -> vec4<f32> {
  red[lid] = v;
  workgroupBarrier();
  if (lid < 32u) {
    var a = vec4<f32>(0.0);
    for (var i = 0u; i < 8u; i++) { a += red[lid * 8u + i]; }
    red2[lid] = a;
  }
  workgroupBarrier();
  var t = vec4<f32>(0.0);
  for (var i = 0u; i < 32u; i++) { t += red2[i]; }
  workgroupBarrier();
  return t;
}

// x layer-normed with the gamma at V[g] into st; returns the sum of st (the offset term of every row), as
// inv * (sum x * gamma - mean * sum gamma).
fn stage_norm(from_input: bool, g: u32, gsum: f32) -> f32 {
  if ((p.skip & 16u) != 0u) { return 0.0; }
  var xv: array<f32, 2>;
  var s = vec4<f32>(0.0);
  for (var k = 0u; k < 2u; k++) {
    let i = lid + k * T;
    var v = 0.0;
    if (i < D) {
      if (from_input) { v = xin[i]; } else { v = ld(p_x + i); }
      s += vec4<f32>(v, v * V[g + i], 0.0, 0.0);
    }
    xv[k] = v;
  }
  let s1 = wsum(s);
  let mean = s1.x / f32(D);
  var c = 0.0;
  for (var k = 0u; k < 2u; k++) {
    if (lid + k * T < D) { let e = xv[k] - mean; c += e * e; }
  }
  let inv = 1.0 / sqrt(wsum(vec4<f32>(c, 0.0, 0.0, 0.0)).x / f32(D) + p.eps);
  for (var k = 0u; k < 2u; k++) {
    let i = lid + k * T;
    if (i < D) { st[i] = (xv[k] - mean) * inv * V[g + i]; }
  }
  workgroupBarrier();
  return inv * (s1.y - mean * gsum);
}

// The attention's output: each head's chunks combined (maxima and sums rescaled as they come), into st; returns
// its sum. Each invocation's two elements' loads for 8 chunks are issued before any is used: loaded one chunk at
// a time, the chain of round trips to the L2 cost more than the rest of the phase.
fn stage_att(nch: u32) -> f32 {
  if ((p.skip & 16u) != 0u) { return 0.0; }
  var mx = array<f32, 2>(-3.0e38, -3.0e38);
  var num = array<f32, 2>(0.0, 0.0);
  var den = array<f32, 2>(0.0, 0.0);
  for (var c0 = 0u; c0 < nch; c0 += 8u) {
    var m: array<f32, 16>;
    var ls: array<f32, 16>;
    var o: array<f32, 16>;
    for (var k = 0u; k < 2u; k++) {
      let e = min(lid + k * T, D - 1u);
      let first = p_part + (e / HD) * nch * PW;
      for (var c = 0u; c < 8u; c++) {
        let at = first + min(c0 + c, nch - 1u) * PW;
        m[8u * k + c] = ld(at);
        ls[8u * k + c] = ld(at + 1u);
        o[8u * k + c] = ld(at + 2u + e % HD);
      }
    }
    for (var k = 0u; k < 2u; k++) {
      for (var c = 0u; c < 8u; c++) {
        if (c0 + c < nch) {
          let mc = m[8u * k + c];
          if (mc > mx[k]) {
            let f = exp(mx[k] - mc);
            num[k] *= f;
            den[k] *= f;
            mx[k] = mc;
          }
          let f = exp(mc - mx[k]);
          num[k] += f * o[8u * k + c];
          den[k] += f * ls[8u * k + c];
        }
      }
    }
  }
  var s = 0.0;
  for (var k = 0u; k < 2u; k++) {
    let e = lid + k * T;
    if (e < D) {
      let v = num[k] / den[k];
      st[e] = v;
      s += v;
    }
  }
  return wsum(vec4<f32>(s, 0.0, 0.0, 0.0)).x;
}

// The gated product into st (every load issued first); returns its sum.
const HT = (FF + T - 1u) / T;
fn stage_h() -> f32 {
  if ((p.skip & 16u) != 0u) { return 0.0; }
  var hv: array<f32, HT>;
  for (var k = 0u; k < HT; k++) { hv[k] = ld(p_h + min(lid + k * T, FF - 1u)); }
  var s = 0.0;
  for (var k = 0u; k < HT; k++) {
    let i = lid + k * T;
    if (i < FF) {
      st[i] = hv[k];
      s += hv[k];
    }
  }
  return wsum(vec4<f32>(s, 0.0, 0.0, 0.0)).x;
}

fn wdot(q: u32, b: u32) -> f32 {
  let qi = bitcast<i32>(q);
  return dot(vec4<f32>(st[b], st[b + 1u], st[b + 2u], st[b + 3u]),
             vec4<f32>(f32(extractBits(qi, 0u, 8u)), f32(extractBits(qi, 8u, 8u)), f32(extractBits(qi, 16u, 8u)),
                       f32(extractBits(qi, 24u, 8u))));
}

fn sigmoid(v: f32) -> f32 { return 1.0 / (1.0 + exp(-v)); }

// The first batch's words of a matrix phase (matvec's first loads), fetched during the barrier before it.
fn fetch(kind: u32, wm: u32, kw: u32, items: u32) -> array<u32, RB * RW> {
  let per = select(1u, 2u, kind == 3u);
  var q: array<u32, RB * RW>;
  for (var sl = 0u; sl < RB; sl++) {
    let it = (sl / per) * NRG + wg * RG + rgl;
    let row = wm + select(it, FF + it, kind == 3u && sl % 2u == 1u) * kw;
    for (var r = 0u; r < RW; r++) {
      let t = lane + 32u * r;
      if (it < items && t < kw) { q[sl * RW + r] = W[row + t]; }
    }
  }
  return q;
}

// A matrix phase of layer l: kind 0 q·k·v, 1 o (+ x, the step's input in the first layer), 2 cross-q, 3 up
// (value row i and gate row FF + i: one output), 4 down (+ bias + x), 5 cross-o (+ x). `wm`: the matrix's first
// word; `sx`: the staged input's sum; `s`, `o`: its scale and offset (q·k·v: s2 and o2(l), a segment each).
fn matvec(kind: u32, l: u32, wm: u32, kw: u32, items: u32, sx: f32, s: f32, o: f32, s2: vec4<f32>,
          pre: array<u32, RB * RW>) {
  let per = select(1u, 2u, kind == 3u);
  let ipb = RB / per;
  let rounds = (items + NRG - 1u) / NRG;
  for (var b0 = 0u; b0 < rounds; b0 += ipb) {
    // RB rows a row group (gated: two items' value and gate rows), RW words of each loaded before any is used,
    // so that a lane has up to RB * RW loads in flight instead of one round trip to memory after another.
    var rw: array<u32, RB>;
    var ok: array<bool, RB>;
    var acc: array<f32, RB>;
    for (var sl = 0u; sl < RB; sl++) {
      let i = sl / per;
      let it = (b0 + i) * NRG + wg * RG + rgl;
      ok[sl] = i < ipb && b0 + i < rounds && it < items;
      rw[sl] = wm + select(it, FF + it, kind == 3u && sl % 2u == 1u) * kw;
      acc[sl] = 0.0;
    }
    for (var t0 = lane; t0 < kw; t0 += 32u * RW) {
      var q = pre;
      if (b0 > 0u || t0 > lane) {
        for (var sl = 0u; sl < RB; sl++) {
          for (var r = 0u; r < RW; r++) {
            let t = t0 + 32u * r;
            if (ok[sl] && t < kw) { q[sl * RW + r] = W[rw[sl] + t]; }
          }
        }
      }
      for (var sl = 0u; sl < RB; sl++) {
        for (var r = 0u; r < RW; r++) {
          let t = t0 + 32u * r;
          if (ok[sl] && t < kw) { acc[sl] += wdot(q[sl * RW + r], 4u * t); }
        }
      }
    }
    for (var sl = 0u; sl < RB; sl++) { part[sl * T + lid] = acc[sl]; }
    workgroupBarrier();
    {
      let slot = lid / 64u;       // RB slots of 8 row groups, 8 invocations a row group's sum
      let rgx = (lid / 8u) % RG;
      let q = lid % 8u;
      var a = 0.0;
      for (var e = 0u; e < 4u; e++) { a += part[slot * T + rgx * 32u + q * 4u + e]; }
      red[lid].x = a;
    }
    workgroupBarrier();
    if (lid < RB * RG) {
      var a = 0.0;
      for (var e = 0u; e < 8u; e++) { a += red[lid * 8u + e].x; }
      red2[lid].x = a;
    }
    workgroupBarrier();
    if (lid < ipb * RG) {
      let i = lid / RG;
      let rgx = lid % RG;
      let it = (b0 + i) * NRG + wg * RG + rgx;
      if (b0 + i < rounds && it < items) {
        let a0 = red2[(per * i) * RG + rgx].x;
        if (kind == 0u) {
          let seg = it / D;
          sto(p_qkv + it, s2[seg] * a0 + o2(l)[seg] * sx);
        } else if (kind == 1u || kind == 2u || kind == 5u) {
          var v = s * a0 + o * sx;
          if (kind != 2u) { v += residual(kind == 1u && l == 0u, it); }
          sto(select(p_x, p_qkv, kind == 2u) + it, v);
        } else if (kind == 3u) {
          let a1 = red2[(per * i + 1u) * RG + rgx].x;
          let val = s * a0 + o * sx + V[l * VL + V_UPB + it];
          let gate = s * a1 + o * sx + V[l * VL + V_UPB + FF + it];
          sto(p_h + it, val * (gate * sigmoid(gate)));
        } else {
          sto(p_x + it, s * a0 + o * sx + V[l * VL + V_DOWNB + it] + ld(p_x + it));
        }
      }
    }
  }
}

fn o2(l: u32) -> vec4<f32> { return p.sc[4u * l + 1u]; }
// The residual before layer l's self-attention output: the step's input for the first layer.
fn residual(first: bool, i: u32) -> f32 {
  if (first) { return xin[i]; }
  return ld(p_x + i);
}

// Dimension e of head h's q (segment 0) or k (segment 1) rotated at the step's position.
fn roped(seg: u32, h: u32, e: u32) -> f32 {
  let base = p_qkv + seg * D + h * HD;
  if (e >= ROT) { return ld(base + e); }
  let pair = e / 2u;
  let xa = ld(base + 2u * pair);
  let xb = ld(base + 2u * pair + 1u);
  let sc2 = rope_sin_cos(p.pos * p.turns[pair / 4u][pair % 4u]);
  return select(xa * sc2.x + xb * sc2.y, xa * sc2.y - xb * sc2.x, e % 2u == 0u);
}

// This invocation's key row in attention's first round (j < pos for self-attention: the cache's rows; the new
// key is not there yet), fetched during the barrier before it.
fn fetch_key(l: u32, cross: bool) -> array<vec4<f32>, HD / 4u> {
  let nch = select(p.nch_self, p.nch_cross, cross);
  let items = NH * nch;
  let it = wg * RG + rgl;
  let h = min(it, items - 1u) / nch;
  let j = (min(it, items - 1u) % nch) * 32u + lane;
  var k: array<vec4<f32>, HD / 4u>;
  if (it < items) {
    if (cross && j < p.tk) {
      let kr = ((2u * l) * p.kv_rows + j) * DW + h * (HD / 4u);
      for (var e = 0u; e < HD / 4u; e++) { k[e] = kvx[kr + e]; }
    } else if (!cross && j < p.pos) {
      let kr = ((2u * l) * p.cap + j) * DW + h * (HD / 4u);
      for (var e = 0u; e < HD / 4u; e++) { k[e] = kvs[kr + e]; }
    }
  }
  return k;
}

// Four dimensions of a row group's query (or new key, value) in workgroup memory, from `at`.
fn part4(at: u32) -> vec4<f32> { return vec4<f32>(part[at], part[at + 1u], part[at + 2u], part[at + 3u]); }

// Layer l's self-attention (over positions 0 ..= pos: the cache, then the new row) or cross-attention.
fn attention(l: u32, cross: bool, kpre: array<vec4<f32>, HD / 4u>) {
  let nch = select(p.nch_self, p.nch_cross, cross);
  let ntk = select(p.pos + 1u, p.tk, cross);
  let items = NH * nch;
  let rounds = (items + NRG - 1u) / NRG;
  let qb = rgl * HD;
  let kb2 = RG * HD + qb;
  let vb2 = 2u * RG * HD + qb;
  for (var r = 0u; r < rounds; r++) {
    let it = r * NRG + wg * RG + rgl;
    let valid = it < items;
    let h = min(it, items - 1u) / nch;
    let c = min(it, items - 1u) % nch;
    let holds_new = valid && !cross && c == nch - 1u;
    if (valid) {
      for (var e = lane; e < HD; e += 32u) {
        if (cross) { part[qb + e] = ld(p_qkv + h * HD + e); } else { part[qb + e] = roped(0u, h, e); }
        if (holds_new) {
          let k = roped(1u, h, e);
          let v = ld(p_qkv + 2u * D + h * HD + e);
          part[kb2 + e] = k;
          part[vb2 + e] = v;
          sto(p_rows + 2u * l * D + h * HD + e, k);
          sto(p_rows + (2u * l + 1u) * D + h * HD + e, v);
        }
      }
    }
    workgroupBarrier();
    let j = c * 32u + lane;
    let live = valid && j < ntk;
    var score = -3.0e38;
    if (live) {
      var acc = 0.0;
      if (!cross && j == p.pos) {
        for (var e = 0u; e < HD; e++) { acc += part[qb + e] * part[kb2 + e]; }
      } else if (r == 0u) {
        for (var e = 0u; e < HD / 4u; e++) { acc += dot(part4(qb + 4u * e), kpre[e]); }
      } else if (cross) {
        let kr = ((2u * l) * p.kv_rows + j) * DW + h * (HD / 4u);
        for (var e = 0u; e < HD / 4u; e++) { acc += dot(part4(qb + 4u * e), kvx[kr + e]); }
      } else {
        let kr = ((2u * l) * p.cap + j) * DW + h * (HD / 4u);
        for (var e = 0u; e < HD / 4u; e++) { acc += dot(part4(qb + 4u * e), kvs[kr + e]); }
      }
      score = acc * p.att_scale;
    }
    // The chunk's max and sum of exponentials: 32 scores through workgroup memory in two steps.
    red[lid].x = score;
    workgroupBarrier();
    if (lane < 4u) {
      var m = -3.0e38;
      for (var e = 0u; e < 8u; e++) { m = max(m, red[rgl * 32u + lane * 8u + e].x); }
      red2[rgl * 4u + lane].x = m;
    }
    workgroupBarrier();
    let m = max(max(red2[rgl * 4u].x, red2[rgl * 4u + 1u].x), max(red2[rgl * 4u + 2u].x, red2[rgl * 4u + 3u].x));
    var z = 0.0;
    if (live) { z = exp(score - m); }
    red[lid].y = z;
    workgroupBarrier();
    if (lane < 4u) {
      var a = 0.0;
      for (var e = 0u; e < 8u; e++) { a += red[rgl * 32u + lane * 8u + e].y; }
      red2[rgl * 4u + lane].y = a;
    }
    workgroupBarrier();
    // The values: invocation (dq, half) sums vec4 dq of the chunk's keys of parity `half`, 8 keys' loads at once;
    // the two halves meet in workgroup memory.
    let dq = lane % 16u;
    let half = lane / 16u;
    var acc4 = vec4<f32>(0.0);
    if (valid && dq < HD / 4u) {
      let n = min(32u, ntk - min(ntk, c * 32u));
      for (var t0 = half; t0 < n; t0 += 16u) {
        var vv: array<vec4<f32>, 8>;
        for (var k = 0u; k < 8u; k++) {
          let jt = c * 32u + min(t0 + 2u * k, n - 1u);
          if (cross) {
            vv[k] = kvx[((2u * l + 1u) * p.kv_rows + jt) * DW + h * (HD / 4u) + dq];
          } else {
            vv[k] = kvs[((2u * l + 1u) * p.cap + jt) * DW + h * (HD / 4u) + dq];
          }
        }
        for (var k = 0u; k < 8u; k++) {
          let t = t0 + 2u * k;
          if (t < n) {
            var v = vv[k];
            if (!cross && c * 32u + t == p.pos) {
              v = part4(vb2 + 4u * dq);
            }
            acc4 += red[rgl * 32u + t].y * v;
          }
        }
      }
    }
    vacc[lid] = acc4;
    workgroupBarrier();
    if (valid) {
      let at = p_part + it * PW;
      if (half == 0u && dq < HD / 4u) {
        let tot = vacc[lid] + vacc[lid + 16u];
        for (var e = 0u; e < 4u; e++) { sto(at + 2u + 4u * dq + e, tot[e]); }
      }
      if (lane == 0u) {
        sto(at, m);
        sto(at + 1u, red2[rgl * 4u].y + red2[rgl * 4u + 1u].y + red2[rgl * 4u + 2u].y + red2[rgl * 4u + 3u].y);
      }
    }
    workgroupBarrier();
  }
}

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) li: u32) {
  lid = li;
  lane = li % 32u;
  rgl = li / 32u;
  wg = wid.x;
  if (lid == 0u) { flag = atomicLoad(&lg[0]); }
  if (workgroupUniformLoad(&flag) != 0u) { return; }
  var pre = fetch(0u, 0u, DW, 3u * D);
  for (var l = 0u; l < NL; l++) {
    let wl = l * LW;
    let vl = l * VL;
    let s0 = p.sc[4u * l];
    let s1 = p.sc[4u * l + 2u];
    let s2 = p.sc[4u * l + 3u];
    let gs = p.gs[l];
    var sx = stage_norm(l == 0u, vl, gs.x);
    if ((p.skip & 4u) == 0u) { matvec(0u, l, wl, DW, 3u * D, sx, 0.0, 0.0, s0, pre); }
    grid_arrive();
    var kpre = fetch_key(l, false);
    grid_wait();
    if ((p.skip & 1u) == 0u) { attention(l, false, kpre); }
    grid_arrive();
    pre = fetch(1u, wl + W_O, DW, D);
    grid_wait();
    sx = stage_att(p.nch_self);
    if ((p.skip & 4u) == 0u) { matvec(1u, l, wl + W_O, DW, D, sx, s0.w, o2(l).w, s0, pre); }
    grid_arrive();
    pre = fetch(2u, wl + W_CQ, DW, D);
    grid_wait();
    sx = stage_norm(false, vl + D, gs.y);
    if ((p.skip & 4u) == 0u) { matvec(2u, l, wl + W_CQ, DW, D, sx, s1.x, s1.y, s0, pre); }
    grid_arrive();
    kpre = fetch_key(l, true);
    grid_wait();
    if ((p.skip & 2u) == 0u) { attention(l, true, kpre); }
    grid_arrive();
    pre = fetch(5u, wl + W_CO, DW, D);
    grid_wait();
    sx = stage_att(p.nch_cross);
    if ((p.skip & 4u) == 0u) { matvec(5u, l, wl + W_CO, DW, D, sx, s1.z, s1.w, s0, pre); }
    grid_arrive();
    pre = fetch(3u, wl + W_UP, DW, FF);
    grid_wait();
    sx = stage_norm(false, vl + 2u * D, gs.z);
    if ((p.skip & 36u) == 0u) { matvec(3u, l, wl + W_UP, DW, FF, sx, s2.x, s2.y, s0, pre); }
    grid_arrive();
    pre = fetch(4u, wl + W_DOWN, FW, D);
    grid_wait();
    sx = stage_h();
    if ((p.skip & 68u) == 0u) { matvec(4u, l, wl + W_DOWN, FW, D, sx, s2.z, s2.w, s0, pre); }
    grid_arrive();
    if (l + 1u < NL) { pre = fetch(0u, wl + LW, DW, 3u * D); }
    grid_wait();
  }
  // The final norm, by one workgroup, into the row the output head reads.
  if (wid.x == 0u) {
    _ = stage_norm(false, NL * VL, p.final_gsum);
    for (var i = lid; i < D; i += T) { atomicStore(&act[p_xn + i], bitcast<u32>(st[i])); }
  }
}
)";

// The layers' new k and v rows (the scratch's rows block) into the self-attention caches at the step's row.
const char* kStepRows = R"(
struct P { pos: u32, cap: u32, n: u32, d: u32, rows: u32, pad0: u32, pad1: u32, pad2: u32 };
@group(0) @binding(0) var<uniform> p: P;
@group(0) @binding(1) var<storage, read> act: array<f32>;
@group(0) @binding(2) var<storage, read_write> caches: array<f32>;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  let i = gid.x;
  if (i >= p.n) { return; }
  caches[((i / p.d) * p.cap + p.pos) * p.d + i % p.d] = act[p.rows + i];
}
)";

std::string step_source(const MoonshineConfig& c, uint32_t grid) {
  const ActLayout a(c);
  std::string consts = cat("const G = ", grid, "u;\nconst D = ", c.d_model, "u;\nconst HD = ", c.head_dim,
                           "u;\nconst NH = ", c.n_heads, "u;\nconst FF = ", c.decoder_ff,
                           "u;\nconst NL = ", c.decoder_layers, "u;\nconst ROT = ", c.rotary_dim, "u;\n");
  consts += cat("const p_xn = ", a.xn, "u;\nconst p_rows = ", a.rows, "u;\nconst p_x = ", a.x,
                "u;\nconst p_qkv = ", a.qkv, "u;\nconst p_part = ", a.part, "u;\nconst p_h = ", a.h, "u;\n");
  return consts + NN_WGSL_ROPE_SIN_COS + kStepKernel;
}

uint32_t word(int64_t v) {
  return static_cast<uint32_t>(v);
}

// Workgroup memory the kernel declares (bytes): st, part, red, vacc, red2.
uint32_t workgroup_bytes(const MoonshineConfig& c) {
  const uint32_t part = std::max<uint32_t>(4 * kThreads, static_cast<uint32_t>(3 * 8 * c.head_dim));
  return static_cast<uint32_t>(4 * c.decoder_ff + 4 * part + 2 * 16 * kThreads + 16 * 32);
}

// SOTTO_MOONSHINE_STEP_SKIP=BITS leaves phases out, for timing them (wrong results): 1 self-attention, 2
// cross-attention, 4 the matrix products, 8 the grid barriers' waits, 16 the phases' staging, 32 the up
// product, 64 the down product.
uint32_t skip_bits() {
#if !defined(__wasm__)
  if (const char* env = std::getenv("SOTTO_MOONSHINE_STEP_SKIP"))
    return static_cast<uint32_t>(std::strtoul(env, nullptr, 10));
#endif
  return 0;
}

}  // namespace

uint32_t moonshine_step_kernel_grid(nn::Context& ctx, const MoonshineConfig& c) {
  nn::GpuRecorder* rec = ctx.gpu();
  if (!rec) return 0;
  const gpu::AdapterInfo& info = rec->device().info();
  if (info.backend != "vulkan") return 0;
  if (info.limits.max_compute_workgroup_storage_size < workgroup_bytes(c) ||
      info.limits.max_storage_buffers_per_shader_stage < 8)
    return 0;
  uint32_t grid = info.cpu() ? 1 : 64;
#if !defined(__wasm__)
  if (const char* env = std::getenv("SOTTO_MOONSHINE_STEP_KERNEL"))
    grid = static_cast<uint32_t>(std::clamp<long>(std::strtol(env, nullptr, 10), 0, 1024));
#endif
  return grid;
}

MoonshineStepBuffers moonshine_step_buffers(const MoonshineWeights& w, int64_t encoder_frames,
                                            int64_t capacity) {
  const MoonshineConfig& c = w.config;
  nn::Context& ctx = w.embedding.w.ctx();
  const ActLayout a(c);
  MoonshineStepBuffers b;
  if ((encoder_frames + 31) / 32 > kMaxChunks || (capacity + 31) / 32 > kMaxChunks) return b;
  b.act = ctx.empty({a.total});
  b.sync = ctx.zeros({capacity + 2}, DType::I32);
  // Each layer's k then v cache of `rows` rows; an even count keeps every cache's view at a 256-byte offset.
  const int64_t rows = (capacity + 1) / 2 * 2;
  b.caches = ctx.empty({2 * c.decoder_layers * rows, c.d_model});
  return b;
}

Tensor moonshine_step_kernel(const MoonshineWeights& w, MoonshineDecoderState& s, const Tensor& x,
                             const Tensor& log) {
  const MoonshineConfig& c = w.config;
  const MoonshineStepKernel& k = *w.step_kernel;
  nn::GpuRecorder& rec = *x.ctx().gpu();
  const ActLayout a(c);
  const int64_t rows = s.step.caches.dim(0) / (2 * c.decoder_layers);
  const int64_t tk = s.cross_k[0].dim(0), cross_rows = s.cross_all.dim(0) / (2 * c.decoder_layers);
  const int64_t pos = s.n_past;
  std::vector<uint32_t> params(12 + 4 * 4 * c.decoder_layers + 4 * c.decoder_layers + 64, 0);
  params[0] = word(pos);
  params[1] = word(tk);
  params[2] = word(cross_rows);
  params[3] = word(rows);
  params[4] = word(pos + 1);
  params[5] = word((pos + 1 + 31) / 32);
  params[6] = word((tk + 31) / 32);
  params[7] = skip_bits();
  params[8] = std::bit_cast<uint32_t>(c.norm_eps);
  params[9] = std::bit_cast<uint32_t>(1.0f / std::sqrt(static_cast<float>(c.head_dim)));
  params[10] = std::bit_cast<uint32_t>(k.final_gamma_sum);
  size_t at = 12;
  for (int l = 0; l < c.decoder_layers; ++l)
    for (float f : k.scales[static_cast<size_t>(l)]) params[at++] = std::bit_cast<uint32_t>(f);
  for (int l = 0; l < c.decoder_layers; ++l) {
    for (float f : k.gamma_sums[static_cast<size_t>(l)]) params[at++] = std::bit_cast<uint32_t>(f);
    at++;
  }
  nn::rope_turns(c.rope_base, c.rotary_dim, params.data() + at);
  rec.dispatch(cat("moonshine_step_kernel_", k.grid), step_source(c, k.grid), params,
               {&s.step.sync, &s.step.act, &k.w, &k.v, &s.step.caches, &s.cross_all, &x, &log},
               static_cast<uint64_t>(k.grid) * 64);
  const uint32_t n = static_cast<uint32_t>(2 * c.decoder_layers * c.d_model);
  const uint32_t row_params[8] = {word(pos), word(rows), n, word(c.d_model), a.rows, 0, 0, 0};
  rec.dispatch("moonshine_step_rows", kStepRows, row_params, {&s.step.act, &s.step.caches}, n);
  s.n_past += 1;
  return s.step.act.rows(0, c.d_model).reshape({1, c.d_model});
}

}  // namespace sotto::asr
