// The WGSL of models/llm/gpu/layer_kernel.h: a llama/qwen2 decoder layer for one token as one persistent dispatch.
#include "models/llm/gpu/layer_kernel.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "core/error.h"
#include "gpu/kernels_wgsl.h"

namespace sotto::gpu {

namespace {

// Rows a group of 32 invocations sums per round at most (their partial sums share workgroup memory): 5 lets
// Qwen2.5-0.5B's gate·up (4,864 rows) take one round on 132 workgroups.
constexpr uint32_t kRowsPerRound = 5;

uint32_t max_chunks(const LayerKernelShape& s) {
  return (s.n_ctx + 31) / 32;
}

const char* kLayerKernel = R"(
struct Step { pos: u32, n: u32, pad1: u32, pad2: u32 }
// A layer: its kind (which of the matrix functions below its types take), where each weight starts in W, where
// its caches start in kc and vc, where its new k and v rows go in the scratch (words).
struct Layer { kind: u32, qkv: u32, wo: u32, gate: u32, up: u32, down: u32, attn_norm: u32, ffn_norm: u32,
               bias: u32, qkv2: u32, kc: u32, vc: u32, row: u32, pad1: u32, pad2: u32, pad3: u32 }
// The dispatch's layers, run one after another, and its barrier counter's slot in sync.
struct Layers { slot: u32, pad1: u32, pad2: u32, pad3: u32, l: array<Layer, NL> }
@group(0) @binding(0) var<uniform> step: Step;
@group(0) @binding(1) var<uniform> layers: Layers;
@group(0) @binding(2) var<storage, read_write> sync: array<atomic<u32>>;
@group(0) @binding(3) var<storage, read_write> xa: array<atomic<u32>>;
@group(0) @binding(4) var<storage, read_write> sa: array<atomic<u32>>;
@group(0) @binding(5) var<storage, read> W: array<u32>;
// Every layer's caches, only read here: bound writable, the H200 took ~20 us a layer for attention's cache loads,
// ~3 bound read-only (bench/results/history-2026-12-03.md). A layer's new rows at pos go to the scratch (layer.row), and a
// dispatch after the layers writes them into the caches (wgsl_layer_kernel_rows).
@group(0) @binding(6) var<storage, read> kc: array<u32>;
@group(0) @binding(7) var<storage, read> vc: array<u32>;

const T = 256u;                  // invocations; groups of 32 ("row groups") share a row or an attention chunk
const RG = T / 32u;
const NRG = G * RG;              // row groups in the grid
const QKV = (NH + 2u * NKV) * HD;
const OUT = NH * HD;             // attention's output, wo's input
const KROW = NKV * HD / 2u;      // words of one position's k (or v) in the cache
const PW = HD + 2u;              // an attention chunk's partial result: max, sum, HD outputs
const S_PART = QKV;              // scratch: q·k·v, the partials, the SwiGLU product, the new k and v rows, RoPE
const S_H = S_PART + NH * MAXCH * PW;
const NW = max(max(D, OUT), FF) / 4u;  // words of the widest staged input
const NWT = (NW + T - 1u) / T;
const SPIN = 1048576u;

var<workgroup> red: array<f32, T>;
var<workgroup> pr: array<f32, T>;
var<workgroup> bmax: array<atomic<u32>, NW / 8u>;
var<workgroup> bfirst: array<atomic<u32>, NW / 64u + 1u>;
var<workgroup> bval: array<f32, NW / 64u + 1u>;
var<workgroup> xq: array<u32, NW>;
var<workgroup> xd: array<f32, NW / 8u>;
var<workgroup> smax: array<f32, NW / 8u>;  // q8_K staging through subgroups: each subgroup's largest magnitude
var<workgroup> sval: array<f32, NW / 8u>;  // ... and its first value of that magnitude
var<workgroup> part: array<f32, T * 2u * ROWS>;
var<workgroup> qs: array<f32, RG * HD>;
var<workgroup> ks: array<f32, RG * HD>;
var<workgroup> vs: array<f32, RG * HD>;
var<private> vals: array<vec4f, NWT>;
var<private> lid: u32;
var<private> lane: u32;
var<private> rgl: u32;   // this invocation's row group in the workgroup
var<private> rg: u32;    // ... in the grid
var<private> rga: u32;   // ... in the grid for attention: the chunks spread over the workgroups first
var<private> barriers: u32;
var<private> landed: u32;
var<private> sgs: u32;   // the subgroup size (where the adapter has subgroups)
var<private> layer: Layer;  // the one running

fn ld_x(i: u32) -> f32 { return bitcast<f32>(atomicLoad(&xa[i])); }
fn ld_s(i: u32) -> f32 { return bitcast<f32>(atomicLoad(&sa[i])); }
// Stores are exchanges whose old values grid_sync() consumes: they have landed before the barrier's counter moves.
fn st_x(i: u32, v: f32) { landed ^= atomicExchange(&xa[i], bitcast<u32>(v)); }
fn st_s(i: u32, v: f32) { landed ^= atomicExchange(&sa[i], bitcast<u32>(v)); }

// A grid barrier in two halves: this workgroup's arrival, then the wait for the others'. Between them the
// workgroup may issue loads that do not depend on the other workgroups' work (the next phase's weights), so that
// their round trip to memory overlaps the wait.
fn grid_sync() {
  grid_arrive();
  grid_wait();
}
fn grid_arrive() {
  barriers += 1u;
  if (landed == 0x7FC00001u) { atomicAdd(&sync[0], 0u); }
  workgroupBarrier();
  storageBarrier();
  if (lid == 0u) { atomicAdd(&sync[layers.slot], 1u); }
}
fn grid_wait() {
  if (lid == 0u) {
    var n = 0u;
    loop {
      if (atomicLoad(&sync[layers.slot]) >= barriers * G) { break; }
      n += 1u;
      // Giving up raises the failure flag with what this workgroup saw: which of the dispatch's barriers
      // (bits 16-30) and how many arrivals the counter held (bits 0-15; a full barrier needs barriers * G).
      if (n > SPIN) {
        let seen = min(atomicLoad(&sync[layers.slot]), 0xFFFFu);
        atomicStore(&sync[0], 0x80000000u | (min(barriers, 0x7FFFu) << 16u) | seen);
        break;
      }
    }
  }
  workgroupBarrier();
}

// The sum of one value per invocation over the workgroup: with subgroups (SG_STAGING) their sums, then the
// T / sg of those (one workgroup barrier); else a tree through workgroup memory (eight).
fn workgroup_sum(v: f32, sg: u32) -> f32 {
  if (SG_STAGING) {
    SUM_SG
  }
  red[lid] = v;
  workgroupBarrier();
  for (var s = T / 2u; s > 0u; s >>= 1u) {
    if (lid < s) { red[lid] += red[lid + s]; }
    workgroupBarrier();
  }
  let total = red[0];
  workgroupBarrier();
  return total;
}

// n values of x into vals (word lid + i * T), RMS-normed with weight `which` (0 attn_norm, 1 ffn_norm).
// The norm's weights are loaded with x, before the sum's workgroup barriers: loaded after them, their round
// trip to memory came on top of x's.
fn stage_x(which: u32, sg: u32) {
  var ss = 0.0;
  var nw: array<vec4f, NWT>;
  for (var i = 0u; i < NWT; i++) {
    let wi = lid + i * T;
    var v = vec4f(0.0);
    if (wi < D / 4u) {
      v = vec4f(ld_x(4u * wi), ld_x(4u * wi + 1u), ld_x(4u * wi + 2u), ld_x(4u * wi + 3u));
      let at = select(layer.ffn_norm, layer.attn_norm, which == 0u) + 4u * wi;
      nw[i] = vec4f(bitcast<f32>(W[at]), bitcast<f32>(W[at + 1u]), bitcast<f32>(W[at + 2u]), bitcast<f32>(W[at + 3u]));
    }
    vals[i] = v;
    ss += dot(v, v);
  }
  let scale = 1.0 / sqrt(workgroup_sum(ss, sg) / f32(D) + EPS);
  for (var i = 0u; i < NWT; i++) {
    if (lid + i * T < D / 4u) { vals[i] = vals[i] * scale * nw[i]; }
  }
}

// The SwiGLU product (FF values) into vals.
fn stage_h() {
  for (var i = 0u; i < NWT; i++) {
    let wi = lid + i * T;
    var v = vec4f(0.0);
    if (wi < FF / 4u) {
      v = vec4f(ld_s(S_H + 4u * wi), ld_s(S_H + 4u * wi + 1u), ld_s(S_H + 4u * wi + 2u), ld_s(S_H + 4u * wi + 3u));
    }
    vals[i] = v;
  }
}

// Attention's output (OUT values) into vals: each head's chunks combined (their maxima and sums rescaled), CB
// chunks' loads issued before any is used: a loop loading one chunk a step waited a round trip to the L2 each,
// twice a chunk, and after 1,024 tokens (32 chunks) the combining cost the H200 ~18 us a layer. The sums are
// still taken chunk by chunk in order (a chunk index past the last rereads it, the max unchanged by it, its
// terms not added).
const CB = 8u;
fn stage_attention(nch: u32) {
  for (var i = 0u; i < NWT; i++) {
    let wi = lid + i * T;
    var v = vec4f(0.0);
    if (wi < OUT / 4u) {
      let h = (4u * wi) / HD;
      let dd = (4u * wi) % HD;
      let first = S_PART + h * nch * PW;
      var mx = -3.0e38;
      for (var c0 = 0u; c0 < nch; c0 += CB) {
        var m: array<f32, CB>;
        for (var k = 0u; k < CB; k++) { m[k] = ld_s(first + min(c0 + k, nch - 1u) * PW); }
        for (var k = 0u; k < CB; k++) { mx = max(mx, m[k]); }
      }
      var num = vec4f(0.0);
      var den = 0.0;
      for (var c0 = 0u; c0 < nch; c0 += CB) {
        var ml: array<vec2f, CB>;
        var o: array<vec4f, CB>;
        for (var k = 0u; k < CB; k++) {
          let at = first + min(c0 + k, nch - 1u) * PW;
          ml[k] = vec2f(ld_s(at), ld_s(at + 1u));
          o[k] = vec4f(ld_s(at + 2u + dd), ld_s(at + 3u + dd), ld_s(at + 4u + dd), ld_s(at + 5u + dd));
        }
        for (var k = 0u; k < CB; k++) {
          if (c0 + k < nch) {
            let f = exp(ml[k].x - mx);
            den += f * ml[k].y;
            num += f * o[k];
          }
        }
      }
      v = num / den;
    }
    vals[i] = v;
  }
}

// Word wi (vals[i]) as q8_0 codes into xq, its block's largest magnitude amax giving the scale (into xd, as f16,
// once per block) and the multiplier 127 / amax; halves round to even (WGSL's round()), as the CPU's
// quantize_activations_q8_0 (cpu/quant_dot.h) and the separate kernels' quantizer (gpu/kernels.cpp).
fn store_q8_0(i: u32, wi: u32, amax: f32) {
  let d = amax / 127.0;
  let id = select(0.0, 127.0 / amax, amax != 0.0);
  var word = 0u;
  for (var e = 0u; e < 4u; e++) {
    word |= (bitcast<u32>(i32(round(vals[i][e] * id))) & 0xFFu) << (8u * e);
  }
  xq[wi] = word;
  if (wi % 8u == 0u) { xd[wi / 8u] = f16r(d); }
}

// Word wi (vals[i]) as q8_K codes into xq: its block's largest magnitude amax and the first value of that
// magnitude, `first`, give the scale (-127 / first; its inverse into xd, f32).
fn store_q8_k(i: u32, wi: u32, amax: f32, first: f32) {
  var iscale = 0.0;
  var d = 0.0;
  if (amax != 0.0) {
    iscale = -127.0 / first;
    d = 1.0 / iscale;
  }
  var word = 0u;
  for (var e = 0u; e < 4u; e++) {
    let q = min(127.0, round(iscale * vals[i][e]));
    word |= (bitcast<u32>(i32(q)) & 0xFFu) << (8u * e);
  }
  xq[wi] = word;
  if (wi % 8u == 0u) { xd[wi / 8u] = d; }
}

// vals (nw words) into q8_0 blocks in xq / xd, as the separate kernels' quantizer (kQuantizeQ8_0): a block's
// largest magnitude across its 8 invocations by shuffles where subgroups hold 8 to 64 (SG_STAGING), else through
// workgroup atomics (two more barriers).
fn stage_q8_0(nw: u32, sg: u32) {
  if (SG_STAGING) {
    Q8_0_SG
  } else {
    quantize(nw);
  }
}
fn quantize(nw: u32) {
  for (var b = lid; b < NW / 8u; b += T) { atomicStore(&bmax[b], 0u); }
  workgroupBarrier();
  for (var i = 0u; i < NWT; i++) {
    let wi = lid + i * T;
    if (wi < nw) {
      let v = vals[i];
      atomicMax(&bmax[wi / 8u], bitcast<u32>(max(max(abs(v.x), abs(v.y)), max(abs(v.z), abs(v.w)))));
    }
  }
  workgroupBarrier();
  for (var i = 0u; i < NWT; i++) {
    let wi = lid + i * T;
    if (wi < nw) {
      store_q8_0(i, wi, bitcast<f32>(atomicLoad(&bmax[wi / 8u])));
    }
  }
  workgroupBarrier();
}

// vals (nw words, a multiple of 64) into q8_K blocks for K-quant weights, as kQuantizeQ8_K: per 256 values the
// first of largest magnitude maps to -127 (d = 1 / iscale in f32, in each of the block's eight xd slots). With
// subgroups of 8 to 64 (SG_STAGING) each subgroup finds its own first, then a block's subgroups are compared (two
// barriers); else through workgroup atomics (five).
fn stage_q8_k(nw: u32, sg: u32) {
  if (SG_STAGING) {
    Q8_K_SG
  } else {
    quantize_k(nw);
  }
}
fn quantize_k(nw: u32) {
  for (var b = lid; b < NW / 64u + 1u; b += T) {
    atomicStore(&bmax[b], 0u);
    atomicStore(&bfirst[b], 0u);
  }
  workgroupBarrier();
  for (var i = 0u; i < NWT; i++) {
    let wi = lid + i * T;
    if (wi < nw) {
      let v = vals[i];
      atomicMax(&bmax[wi / 64u], bitcast<u32>(max(max(abs(v.x), abs(v.y)), max(abs(v.z), abs(v.w)))));
    }
  }
  workgroupBarrier();
  for (var i = 0u; i < NWT; i++) {
    let wi = lid + i * T;
    if (wi < nw) {
      let amax = bitcast<f32>(atomicLoad(&bmax[wi / 64u]));
      for (var e = 0u; e < 4u; e++) {
        if (abs(vals[i][e]) == amax) { atomicMax(&bfirst[wi / 64u], 0xFFFFFFFFu - (4u * wi + e)); }
      }
    }
  }
  workgroupBarrier();
  for (var i = 0u; i < NWT; i++) {  // the value itself, from the invocation holding it
    let wi = lid + i * T;
    if (wi < nw) {
      let first = 0xFFFFFFFFu - atomicLoad(&bfirst[wi / 64u]);
      if (first / 4u == wi) { bval[wi / 64u] = vals[i][first % 4u]; }
    }
  }
  workgroupBarrier();
  for (var i = 0u; i < NWT; i++) {
    let wi = lid + i * T;
    if (wi < nw) {
      let kb = wi / 64u;
      store_q8_k(i, wi, bitcast<f32>(atomicLoad(&bmax[kb])), bval[kb]);
    }
  }
  workgroupBarrier();
}

// Rows of one matrix from the staged input: round r, row group rg takes rows (r * MROWS + k) * NRG + rg (MROWS,
// the matrix's rows per round, at most ROWS).
MATVECS

fn rope_at(base: u32, d: u32, pos: u32) -> f32 {
  if (d >= NROT) { return ld_s(base + d); }
  let half_rot = NROT / 2u;
  var i: u32; var a: u32; var b: u32;
  if (HALVES) { i = d % half_rot; a = i; b = i + half_rot; } else { i = d / 2u; a = 2u * i; b = 2u * i + 1u; }
  let c = ld_s(S_ROPE + (pos * half_rot + i) * 2u);
  let s = ld_s(S_ROPE + (pos * half_rot + i) * 2u + 1u);
  let x0 = ld_s(base + a);
  let x1 = ld_s(base + b);
  return select(x0 * s + x1 * c, x0 * c - x1 * s, d == a);
}

// Word w of a key's score (q and the current key from workgroup memory), and key k's share of dimension dc.
fn score_word_wg(kw: u32, w: u32, at_pos: bool) -> f32 {
  let k = select(unpack2x16float(kw), vec2f(ks[rgl * HD + 2u * w], ks[rgl * HD + 2u * w + 1u]), at_pos);
  return qs[rgl * HD + 2u * w] * k.x + qs[rgl * HD + 2u * w + 1u] * k.y;
}
fn weighted_wg(vw: u32, dc: u32, key: u32, pos: u32, k: u32) -> f32 {
  let pair = unpack2x16float(vw);
  let v = select(select(pair.x, pair.y, (dc & 1u) == 1u), vs[rgl * HD + dc], key == pos);
  return pr[rgl * 32u + k] * select(0.0, v, key <= pos);
}

// Attention over positions 0 ..= pos: chunk c of head h per row group, its max, sum and outputs to the scratch.
fn attention(pos: u32, nch: u32) {
  let items = NH * nch;
  for (var it0 = 0u; it0 < items; it0 += NRG) {
    let it = it0 + rg;
    let valid = it < items;
    let h = min(it, items - 1u) / nch;
    let c = min(it, items - 1u) % nch;
    let kvh = h / (NH / NKV);
    let last = c == nch - 1u;
    for (var d = lane; d < select(0u, HD, valid); d += 32u) {  // a row group with no chunk loads nothing
      qs[rgl * HD + d] = f16r(rope_at(h * HD, d, pos));
      if (last) {
        ks[rgl * HD + d] = f16r(rope_at((NH + kvh) * HD, d, pos));
        vs[rgl * HD + d] = f16r(ld_s((NH + NKV + kvh) * HD + d));
      }
    }
    workgroupBarrier();
    if (valid && last && h % (NH / NKV) == 0u) {  // the new k and v rows to the scratch, once per KV head
      for (var w = lane; w < HD / 2u; w += 32u) {
        atomicStore(&sa[layer.row + kvh * (HD / 2u) + w], pack_f16(ks[rgl * HD + 2u * w], ks[rgl * HD + 2u * w + 1u]));
        atomicStore(&sa[layer.row + KROW + kvh * (HD / 2u) + w], pack_f16(vs[rgl * HD + 2u * w], vs[rgl * HD + 2u * w + 1u]));
      }
    }
    // A key per invocation: its score, from the key's row loaded first, a variable per word (KEY_LOADS). Keys past
    // pos read row pos (any finite values: their weight is 0); the key at pos, not in the cache yet, from ks.
    let j = c * 32u + lane;
    let kbase = layer.kc + min(j, pos) * KROW + kvh * (HD / 2u);
KEY_LOADS
    var acc = 0.0;
SCORE_TERMS_WG
    let s = select(-3.0e38, acc * SCALE, valid && j <= pos);
    pr[lid] = s;
    workgroupBarrier();
    for (var st = 16u; st > 0u; st >>= 1u) {
      if (lane < st) { pr[lid] = max(pr[lid], pr[lid + st]); }
      workgroupBarrier();
    }
    let m = pr[rgl * 32u];
    workgroupBarrier();
    let p = select(0.0, exp(s - m), valid && j <= pos);
    pr[lid] = p;
    red[lid] = p;
    workgroupBarrier();
    for (var st = 16u; st > 0u; st >>= 1u) {
      if (lane < st) { red[lid] += red[lid + st]; }
      workgroupBarrier();
    }
    let l = red[rgl * 32u];
    // A dimension per invocation: the chunk's weighted values, its 32 value words loaded first (VALUES_WG).
VALUES_WG
    if (valid && lane == 0u) {
      st_s(S_PART + it * PW, m);
      st_s(S_PART + it * PW + 1u, l);
    }
    workgroupBarrier();
  }
}

// Staging through subgroups (erased where the adapter has none). A subgroup is taken to hold consecutive local
// invocation indices (lid % sg its lane), as on the adapters seen (attention_sg relies on it too).
fn workgroup_sum_sg(v: f32) -> f32 {
  let t = subgroupAdd(v);
  if (lid % sgs == 0u) { red[lid / sgs] = t; }
  workgroupBarrier();
  var total = 0.0;
  for (var i = 0u; i < T / sgs; i++) { total += red[i]; }
  return total;  // red is written next after a grid barrier (which starts with a workgroup barrier)
}
fn quantize_sg(nw: u32) {
  for (var i = 0u; i < NWT; i++) {
    let wi = lid + i * T;
    let v = vals[i];
    // A block's 8 words are 8 consecutive invocations (words past nw are 0 and whole blocks).
    var m = max(max(abs(v.x), abs(v.y)), max(abs(v.z), abs(v.w)));
    m = max(m, subgroupShuffleXor(m, 1u));
    m = max(m, subgroupShuffleXor(m, 2u));
    m = max(m, subgroupShuffleXor(m, 4u));
    if (wi < nw) { store_q8_0(i, wi, m); }
  }
  workgroupBarrier();
}
fn quantize_k_sg(nw: u32) {
  for (var i = 0u; i < NWT; i++) {
    let wi = lid + i * T;
    let v = vals[i];
    let a = max(max(abs(v.x), abs(v.y)), max(abs(v.z), abs(v.w)));
    var e = 3u;  // the word's first value of magnitude a
    if (abs(v.z) == a) { e = 2u; }
    if (abs(v.y) == a) { e = 1u; }
    if (abs(v.x) == a) { e = 0u; }
    let m = subgroupMax(a);
    let first = subgroupMin(select(0xFFFFFFFFu, 4u * wi + e, a == m));
    let val = subgroupAdd(select(0.0, v[e], 4u * wi + e == first));  // one invocation adds a value, the rest 0
    if (lid % sgs == 0u && wi < nw) {  // a subgroup's words are all below nw or all past it
      smax[wi / sgs] = m;
      sval[wi / sgs] = val;
    }
  }
  workgroupBarrier();
  for (var i = 0u; i < NWT; i++) {
    let wi = lid + i * T;
    if (wi < nw) {
      // The block's subgroups in order: the first holding the largest magnitude gives the value.
      let n = 64u / sgs;
      let s0 = (wi / 64u) * n;
      var amax = smax[s0];
      var val = sval[s0];
      for (var j = 1u; j < n; j++) {
        if (smax[s0 + j] > amax) {
          amax = smax[s0 + j];
          val = sval[s0 + j];
        }
      }
      store_q8_k(i, wi, amax, val);
    }
  }
  workgroupBarrier();
}

// Attention as above with a subgroup of 32 invocations per chunk (where the adapter's subgroups hold 32): the
// rotated q and the current k and v held a word (two dimensions) per invocation and passed between them by
// shuffles, the maximum and the sum by subgroup reductions: no workgroup barriers (the version above waits at a
// dozen a chunk). The chunk's keys and values are loaded a word per invocation, all before any is used.
const NWL = (HD / 2u + 31u) / 32u;  // words of a head each invocation holds
// This invocation's word of a key times q's (0 past the head's words); the current key at pos.
fn score_share(kw: u32, qw: u32, kn: u32, at_pos: bool, word: u32) -> f32 {
  let q = unpack2x16float(qw);
  let k = unpack2x16float(select(kw, kn, at_pos));
  return select(0.0, q.x * k.x + q.y * k.y, word < HD / 2u);
}
// Key k's share of the chunk's output words (the current value at pos, none past it).
fn weighted(vw: u32, vn: u32, p: f32, key: u32, pos: u32) -> vec2f {
  let v = unpack2x16float(select(vw, vn, key == pos));
  return subgroupShuffle(p, key % 32u) * select(vec2f(0.0), v, key <= pos);
}
fn attention_sg(pos: u32, nch: u32) {
  let items = NH * nch;
  for (var it0 = 0u; it0 < items; it0 += NRG) {
    let it = it0 + rga;
    let valid = it < items;
    let h = min(it, items - 1u) / nch;
    let c = min(it, items - 1u) % nch;
    let kvh = h / (NH / NKV);
    let last = c == nch - 1u;
    let j = c * 32u + lane;
    // The chunk's keys and values a word (two dimensions) per invocation, word w0 of each of the 32 positions
    // (KEY_COLUMNS, VALUE_LOADS0): each load reads one 128-byte line for the whole subgroup. Keys past pos read
    // row pos (any finite values: their weight is 0).
    let w0 = min(lane, HD / 2u - 1u);
KEY_COLUMNS
VALUE_LOADS0
    // q, k and v of the current position as f16 pairs (the cache's rounding); k and v in the last chunk only.
    var qw: array<u32, NWL>;
    var kn: array<u32, NWL>;
    var vn: array<u32, NWL>;
    if (valid) {
      for (var r = 0u; r < NWL; r++) {
        let w = min(lane + 32u * r, HD / 2u - 1u);
        qw[r] = pack_f16(rope_at(h * HD, 2u * w, pos), rope_at(h * HD, 2u * w + 1u, pos));
        if (last) {
          kn[r] = pack_f16(rope_at((NH + kvh) * HD, 2u * w, pos), rope_at((NH + kvh) * HD, 2u * w + 1u, pos));
          vn[r] = pack_f16(ld_s((NH + NKV + kvh) * HD + 2u * w), ld_s((NH + NKV + kvh) * HD + 2u * w + 1u));
          if (h % (NH / NKV) == 0u && lane + 32u * r < HD / 2u) {  // to the scratch, once per KV head
            atomicStore(&sa[layer.row + kvh * (HD / 2u) + w], kn[r]);
            atomicStore(&sa[layer.row + KROW + kvh * (HD / 2u) + w], vn[r]);
          }
        }
      }
    }
    // Each invocation's share of the 32 scores (its words' products; the key at pos, not in the cache yet, from kn),
    // then summed across the subgroup so that invocation j ends with key j's score: at each of five steps an
    // invocation keeps the half of its sums its lane bit selects and adds its partner's of the same keys.
SCORE_SHARES
    let acc = SCORE_SUM;
    let ok = valid && j <= pos;
    let s = select(-3.0e38, acc * SCALE, ok);
    let m = subgroupMax(s);
    let p = select(0.0, exp(s - m), ok);
    let l = subgroupAdd(p);
    // A word (two dimensions) per invocation: the chunk's weighted values.
WEIGHTED_VALUES
    if (valid && lane == 0u) {
      st_s(S_PART + it * PW, m);
      st_s(S_PART + it * PW + 1u, l);
    }
  }
}

@compute @workgroup_size(256)
fn main(@builtin(local_invocation_index) li: u32, @builtin(workgroup_id) wg: vec3u SUBGROUP_SIZE) {
  lid = li;
  lane = li % 32u;
  rgl = li / 32u;
  rg = wg.x * RG + rgl;
  rga = rgl * G + wg.x;
  barriers = 0u;
  landed = 0u;
  SET_SGS
  let pos = step.pos;
  let nch = pos / 32u + 1u;
  for (var li = 0u; li < NL; li++) {
    layer = layers.l[li];
    let kind = layers.l[li].kind;  // uniform (the branches on it hold subgroup operations)
    // Each matrix phase's first weights are fetched between the arrival and the wait of the grid barrier before
    // the phase. (On the H200: +10 % decode on Q4_0, +9 % on Q4_K_M; fetched after the wait instead,
    // +6 % / +3 %; a barrier earlier still, no faster on Q4_0 and 3 % slower on Q4_K_M.)
    if (li > 0u) { grid_arrive(); }  // the previous layer's x complete
FETCH_QKV
    if (li > 0u) { grid_wait(); }
    // q, k, v = Wqkv . rms_norm(x) (+ bias)
    stage_x(0u, SG_ARG);
PHASE_QKV
    grid_sync();
    if (SG32) {
      ATTENTION_SG
    } else {
      attention(pos, nch);
    }
    grid_arrive();
FETCH_WO
    grid_wait();
    // x += Wo . attention
    stage_attention(nch);
PHASE_WO
    grid_arrive();
FETCH_GATE_UP
    grid_wait();
    // h = silu(Wg . rms_norm(x)) * (Wu . rms_norm(x))
    stage_x(1u, SG_ARG);
PHASE_GATE_UP
    grid_arrive();
FETCH_DOWN
    grid_wait();
    // x += Wd . h
    stage_h();
PHASE_DOWN
  }
}
)";

// One matrix's rows from the staged input: DOT is a row's sub-block sb times the input; OUTPUT stores row `row`'s
// sum `s` (and `s2`, the up matrix's, for gate·up; `before`, BEFORE's value: x's row for the residual adds, the
// bias for q·k·v).
const char* kMatvec = R"(
FETCH_FNS
fn NAME() {
  let rounds = (ROWS_TOTAL + NRG * MROWS - 1u) / (NRG * MROWS);
  for (var r = 0u; r < rounds; r++) {
    // What OUTPUT adds to, loaded before the dots so that its round trip overlaps theirs; by invocations
    // 0 .. MROWS - 1, row lane of the round (the others load the last one's again: the same line, one request).
    // Row groups past the matrix's last row load nothing, here and in NAME_fetch (where every one loaded the
    // last row, their requests to its few lines queued at one part of the L2).
    let before_row = (r * MROWS + min(lane, MROWS - 1u)) * NRG + rg;
    var before = 0.0;
    if (before_row < ROWS_TOTAL) { before = BEFORE; }
    for (var k = 0u; k < MROWS; k++) {
      let row = (r * MROWS + k) * NRG + rg;
      var acc = 0.0;
      var acc2 = 0.0;
      if (row < ROWS_TOTAL) {
        // A fixed count of sub-blocks per invocation, those past the row's end reading its last (their products
        // dropped): the loop unrolls and every load is issued before the first product waits (a loop to NSUB
        // waited a memory round trip per sub-block, ~5 in a row of 4,864).
        for (var i = 0u; i < PER_LANE; i++) {
          let sb = min(lane + 32u * i, NSUB - 1u);
          let on = lane + 32u * i < NSUB;
          acc += select(0.0, DOT, on);
          ACC2
        }
      }
      part[(rgl * 2u * ROWS + 2u * k) * 32u + lane] = acc;
      part[(rgl * 2u * ROWS + 2u * k + 1u) * 32u + lane] = acc2;
    }
    workgroupBarrier();
    if (lane < MROWS) {
      let row = (r * MROWS + lane) * NRG + rg;
      if (row < ROWS_TOTAL) {
        var s = 0.0;
        var s2 = 0.0;
        for (var j = 0u; j < 32u; j++) {
          s += part[(rgl * 2u * ROWS + 2u * lane) * 32u + j];
          s2 += part[(rgl * 2u * ROWS + 2u * lane + 1u) * 32u + j];
        }
        OUTPUT
      }
    }
    workgroupBarrier();
  }
}
)";

// The first round's weight words of a matrix (of both, for gate·up), loaded into registers by NAME_fetch() between
// the grid barrier's arrival and its wait, and read by NAME_words() in round 0 (later rounds load their own).
// Without it each phase waited a round trip to memory for its weights after the barrier, the staging and the
// workgroup barriers of the quantizer, one after another.
const char* kMatvecFetch = R"(
var<private> pre_NAME: array<array<u32, WORDS>, MROWS * PER_LANE>;
fn NAME_fetch() {
  for (var k = 0u; k < MROWS; k++) {
    let row = k * NRG + rg;
    if (row >= ROWS_TOTAL) { break; }
    for (var i = 0u; i < PER_LANE; i++) {
      let sb = min(lane + 32u * i, NSUB - 1u);
      pre_NAME[k * PER_LANE + i] = LD;
      FETCH_UP
    }
  }
}
fn NAME_words(r: u32, k: u32, i: u32, row: u32, sb: u32) -> array<u32, WORDS> {
  if (r == 0u) { return pre_NAME[k * PER_LANE + i]; }
  return LD;
}
)";
// ... and the up matrix's, for gate·up.
const char* kMatvecFetchUp = R"(
var<private> pre2_NAME: array<array<u32, WORDS>, MROWS * PER_LANE>;
fn NAME_words2(r: u32, k: u32, i: u32, row: u32, sb: u32) -> array<u32, WORDS> {
  if (r == 0u) { return pre2_NAME[k * PER_LANE + i]; }
  return LD_UP;
}
)";

// Words a phase may hold in registers per invocation for its weights' first round (kMatvecFetch): Q4_K gate·up
// of Qwen2.5-0.5B on 132 workgroups takes 5 rows x 2 matrices x 12 words.
constexpr uint32_t kFetchWords = 128;

}  // namespace

bool layer_kernel_supports(DType w) {
  return w == DType::Q4_0 || w == DType::Q5_0 || w == DType::Q8_0 || w == DType::Q4_K || w == DType::Q6_K;
}

uint64_t layer_kernel_row_word(const LayerKernelShape& s, uint32_t layer) {
  return uint64_t{s.n_head + 2 * s.n_kv} * s.hd + uint64_t{s.n_head} * max_chunks(s) * (s.hd + 2) + s.ff +
         uint64_t{layer} * s.n_kv * s.hd;  // two rows of n_kv * hd / 2 words a layer
}

uint64_t layer_kernel_scratch_words(const LayerKernelShape& s) {
  return layer_kernel_row_word(s, s.row_slots);
}

uint64_t layer_kernel_rope_word(const LayerKernelShape& s) {
  return layer_kernel_scratch_words(s);
}

std::string wgsl_layer_kernel_rows(const LayerKernelShape& s, uint64_t k_first, uint64_t k_stride,
                                   uint64_t v_first, uint64_t v_stride) {
  const uint64_t row = uint64_t{s.n_kv} * s.hd / 2;  // words of a position's k (or v) in the cache
  return cat("const KROW = ", row, "u;\nconst S_ROW = ", layer_kernel_row_word(s, 0),
             "u;\nconst LAYERS = ", s.row_slots, "u;\nconst K0 = ", k_first, "u;\nconst KS = ", k_stride,
             "u;\nconst V0 = ", v_first, "u;\nconst VS = ", v_stride, "u;\n", R"(
struct Step { pos: u32, n: u32, pad1: u32, pad2: u32 }
@group(0) @binding(0) var<uniform> step: Step;
@group(0) @binding(1) var<storage, read> sa: array<u32>;
@group(0) @binding(2) var<storage, read_write> kc: array<u32>;
@group(0) @binding(3) var<storage, read_write> vc: array<u32>;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) g: vec3u) {
  if (g.x < LAYERS * KROW) {
    let l = g.x / KROW;
    let w = g.x % KROW;
    kc[K0 + l * KS + step.pos * KROW + w] = sa[S_ROW + 2u * KROW * l + w];
    vc[V0 + l * VS + step.pos * KROW + w] = sa[S_ROW + 2u * KROW * l + KROW + w];
  }
}
)");
}

std::string wgsl_layer_kernel(const LayerKernelShape& s, const KernelFeatures& f) {
  using wgsl_parts::replace_all;
  // The floats by their bits: exact, and no printf (the wasm build's libc has none).
  auto bits = [](float v) {
    uint32_t u = 0;
    std::memcpy(&u, &v, 4);
    return cat("bitcast<f32>(", u, "u)");
  };
  const std::string eps = bits(s.eps), scale = bits(s.scale);
  // The subgroup attention where subgroups hold 32 invocations (a dispatch-wide value, so the branch on it is
  // uniform); workgroup_attention takes the workgroup-memory one anyway.
  const bool sg_attention = f.subgroups && !s.workgroup_attention;
  // Likewise the staging's sums and quantizers through subgroups; workgroup_staging takes the workgroup-memory ones.
  const bool sg_staging = f.subgroups && !s.workgroup_staging;
  std::string src = cat(wgsl_parts::wgsl_enables(f, true, sg_attention || sg_staging), "const G = ", s.grid,
                        "u;\nconst D = ", s.d, "u;\nconst NH = ", s.n_head, "u;\nconst NKV = ", s.n_kv,
                        "u;\nconst HD = ", s.hd, "u;\nconst NROT = ", s.n_rot, "u;\nconst FF = ", s.ff,
                        "u;\nconst MAXCH = ", max_chunks(s), "u;\nconst NL = ", s.n_layers,
                        "u;\nconst S_ROPE = ", layer_kernel_rope_word(s), "u;\nconst ROWS = ", kRowsPerRound,
                        "u;\nconst HALVES = ", s.rope_halves ? "true" : "false", ";\nconst EPS = ", eps,
                        ";\nconst SCALE = ", scale, ";\n");
  src += wgsl_parts::f16_helpers(f);
  src += f.packed_dot ? wgsl_parts::kDot4Packed : wgsl_parts::kDot4Fallback;
  src += wgsl_parts::kDotHelpers;
  auto sub_dot = [&](DType w, std::string_view offset, std::string_view suffix) {
    return wgsl_parts::sub_dot_instance(w, cat("W[layer.", offset, " + "), suffix);
  };
  // A matrix phase's function NAME: rows_total rows of cols from the staged input, a row's sub-block through the
  // functions of `suffix` (those of up_suffix too for gate·up), words_per_row words a row; `dot`, where given,
  // in their place (q·k·v in two runs, whose types differ by row). `before`: BEFORE's value (kMatvec). The
  // first round's weights are fetched during the grid barrier before (kMatvecFetch) where dot is not given and
  // they fit in kFetchWords, unless no_fetch; `fetches` says whether.
  auto matvec = [&](std::string_view name, uint32_t rows_total, uint32_t cols, DType w, uint32_t row_words,
                    std::string_view suffix, std::string_view up_suffix, std::string_view dot,
                    std::string_view output, std::string_view before, bool& fetches) {
    const uint32_t nrg = s.grid * (kLayerKernelThreads / 32);
    // Rows a row group sums per round: enough for one round where ROWS allows (each round waits on memory).
    const uint32_t mrows = std::clamp((rows_total + nrg - 1) / nrg, 1u, kRowsPerRound);
    const uint32_t per_lane = (cols / 32 + 31) / 32;
    const bool up = !up_suffix.empty();
    fetches = dot.empty() && !s.no_fetch &&
              mrows * per_lane * wgsl_parts::sub_dot_words(w) * (up ? 2 : 1) <= kFetchWords;
    std::string m = kMatvec;
    const std::string at = cat("row * ", row_words, "u");
    if (fetches) {
      std::string fetch = cat(kMatvecFetch, up ? kMatvecFetchUp : "");
      replace_all(fetch, "FETCH_UP", up ? "pre2_NAME[k * PER_LANE + i] = LD_UP;" : "");
      replace_all(fetch, "LD_UP", cat("ld", up_suffix, "(", at, ", sb)"));
      replace_all(fetch, "LD", cat("ld", suffix, "(", at, ", sb)"));
      replace_all(fetch, "WORDS", cat(wgsl_parts::sub_dot_words(w)));
      replace_all(m, "FETCH_FNS", fetch);
      replace_all(m, "DOT", cat("wdot", suffix, "(NAME_words(r, k, i, row, sb), sb, sb * 8u, sb)"));
      replace_all(m, "ACC2",
                  up ? cat("acc2 += select(0.0, wdot", up_suffix,
                           "(NAME_words2(r, k, i, row, sb), sb, sb * 8u, sb), on);")
                     : "");
    } else {
      replace_all(m, "FETCH_FNS", "");
      replace_all(m, "DOT", dot.empty() ? cat("sub_dot", suffix, "(", at, ", sb)") : std::string(dot));
      replace_all(m, "ACC2", up ? cat("acc2 += select(0.0, sub_dot", up_suffix, "(", at, ", sb), on);") : "");
    }
    replace_all(m, "BEFORE", before);
    replace_all(m, "NAME", name);
    replace_all(m, "ROWS_TOTAL", cat(rows_total, "u"));
    replace_all(m, "NSUB", cat(cols / 32, "u"));
    replace_all(m, "PER_LANE", cat(per_lane, "u"));
    replace_all(m, "MROWS", cat(mrows, "u"));
    replace_all(m, "OUTPUT", output);
    return m;
  };
  // BEFORE's value for row before_row (kMatvec): x's for the residual adds.
  const std::string residual = "ld_x(before_row)";
  // The staging's quantizer: q8_K for the K-quants, as the separate kernels (gpu_needs_q8_k).
  auto quantizer = [](DType w) { return gpu_needs_q8_k(w) ? "stage_q8_k" : "stage_q8_0"; };
  const uint32_t qkv_rows = (s.n_head + 2 * s.n_kv) * s.hd;
  // Each phase's code per kind (its quantizer and matrix function, named by the kind); where kinds' code is the
  // same but for the name, the first kind's serves them all.
  std::vector<std::string> phases[4];   // q·k·v, wo, gate·up, down: per kind, the call
  std::vector<std::string> fetches[4];  // ... and the call fetching its first weights ("" where none)
  std::vector<std::string> seen[4];     // per phase: the distinct functions' source without the kind's name
  std::vector<size_t> owner[4];         // ... and the kind whose functions they are
  std::vector<bool> owner_fetches[4];   // ... and whether they fetch
  std::string matvecs;
  for (size_t k = 0; k < s.kinds.size(); ++k) {
    const LayerKernelTypes& t = s.kinds[k];
    // The kind's functions are written with names ending in "_KIND": kinds whose functions are the same text
    // share one copy, its names ending in "_k" of the first kind that has it.
    const std::string n = "_KIND";
    // q·k·v's two runs (Q4_K_M's v) are one loop: a row group's row is in one run or the other, so the branch
    // is uniform across its 32 invocations (two loops one after the other cost a second round of memory
    // latency).
    const uint32_t run1_rows = t.qkv_run1_rows > 0 ? t.qkv_run1_rows : qkv_rows;
    std::string qkv_fns = sub_dot(t.qkv, "qkv", "_qkv" + n);
    std::string qkv_dot;
    if (run1_rows < qkv_rows) {
      qkv_fns += sub_dot(t.qkv2, "qkv2", "_qkv2" + n) +
                 cat("fn dot_qkv", n, "(row: u32, sb: u32) -> f32 {\n  if (row < ", run1_rows,
                     "u) { return sub_dot_qkv", n, "(row * ", t.qkv_words, "u, sb); }\n  return sub_dot_qkv2",
                     n, "((row - ", run1_rows, "u) * ", t.qkv2_words, "u, sb);\n}\n");
      qkv_dot = cat("dot_qkv", n, "(row, sb)");
    }
    bool fetch[4] = {};
    const std::string fns[4] = {
        qkv_fns + matvec("mv_qkv" + n, qkv_rows, s.d, t.qkv, t.qkv_words, "_qkv" + n, "", qkv_dot,
                         t.bias ? "st_s(row, s + before);" : "st_s(row, s);",
                         t.bias ? "bitcast<f32>(W[layer.bias + before_row])" : "0.0", fetch[0]),
        sub_dot(t.wo, "wo", "_o" + n) + matvec("mv_wo" + n, s.d, s.n_head * s.hd, t.wo, t.wo_words, "_o" + n,
                                               "", "", "st_x(row, before + s);", residual, fetch[1]),
        sub_dot(t.gate, "gate", "_g" + n) + sub_dot(t.gate, "up", "_u" + n) +
            matvec("mv_gate_up" + n, s.ff, s.d, t.gate, t.gate_words, "_g" + n, "_u" + n, "",
                   "st_s(S_H + row, s / (1.0 + exp(-s)) * s2);", "0.0", fetch[2]),
        sub_dot(t.down, "down", "_d" + n) + matvec("mv_down" + n, s.d, s.ff, t.down, t.down_words, "_d" + n,
                                                   "", "", "st_x(row, before + s);", residual, fetch[3])};
    const char* names[4] = {"mv_qkv", "mv_wo", "mv_gate_up", "mv_down"};
    const std::string inputs[4] = {"D / 4u", "OUT / 4u", "D / 4u", "FF / 4u"};
    const DType types[4] = {t.qkv, t.wo, t.gate, t.down};
    for (int ph = 0; ph < 4; ++ph) {
      const std::string& unnamed = fns[ph];
      size_t same = 0;
      while (same < seen[ph].size() && seen[ph][same] != unnamed) ++same;
      if (same == seen[ph].size()) {
        seen[ph].push_back(unnamed);
        owner[ph].push_back(k);
        owner_fetches[ph].push_back(fetch[ph]);
        std::string named = unnamed;
        replace_all(named, n, cat("_", k));
        matvecs += named;
      }
      const bool fetched = owner_fetches[ph][same];
      same = owner[ph][same];
      phases[ph].push_back(
          cat(quantizer(types[ph]), "(", inputs[ph], ", SG_ARG); ", names[ph], "_", same, "();"));
      fetches[ph].push_back(fetched ? cat(names[ph], "_", same, "_fetch();") : "");
    }
  }
  std::string body = kLayerKernel;
  replace_all(body, "MATVECS", matvecs);
  // A phase's calls by the layer's kind: `kind` is uniform, so the branches may hold subgroup operations.
  auto by_kind = [](const std::vector<std::string>& calls, std::string_view indent) {
    bool all_same = true;
    for (const std::string& c : calls) all_same = all_same && c == calls[0];
    if (all_same) return calls[0].empty() ? std::string() : cat(indent, calls[0], "\n");
    std::string code;
    for (size_t k = 0; k < calls.size(); ++k)
      code += cat(k == 0 ? cat(indent, "if") : " else if", " (kind == ", k, "u) { ", calls[k], " }");
    return code + "\n";
  };
  const char* slots[4] = {"PHASE_QKV\n", "PHASE_WO\n", "PHASE_GATE_UP\n", "PHASE_DOWN\n"};
  const char* fetch_slots[4] = {"FETCH_QKV\n", "FETCH_WO\n", "FETCH_GATE_UP\n", "FETCH_DOWN\n"};
  for (int ph = 0; ph < 4; ++ph) {
    replace_all(body, slots[ph], by_kind(phases[ph], "      "));
    replace_all(body, fetch_slots[ph], by_kind(fetches[ph], "    "));
  }
  replace_all(body, "SUBGROUP_SIZE", f.subgroups ? ", @builtin(subgroup_size) sg: u32" : "");
  replace_all(body, "SET_SGS", f.subgroups ? "sgs = sg;" : "");
  replace_all(body, "SG32", sg_attention ? "sg == 32u" : "false");
  replace_all(body, "ATTENTION_SG", sg_attention ? "attention_sg(pos, nch);" : "");
  // The staging branches on the subgroup size passed down from main's builtin (uniform; a private variable
  // would not be to WGSL's analysis).
  replace_all(body, "SG_ARG", f.subgroups ? "sg" : "0u");
  replace_all(body, "SG_STAGING", sg_staging ? "sg >= 8u && sg <= 64u" : "false");
  replace_all(body, "SUM_SG", sg_staging ? "return workgroup_sum_sg(v);" : "");
  replace_all(body, "Q8_0_SG", sg_staging ? "quantize_sg(nw);" : "");
  replace_all(body, "Q8_K_SG", sg_staging ? "quantize_k_sg(nw);" : "");
  // Both attentions' loads and sums, written out word by word.
  std::string key_loads, value_loads, weighted_values;
  const uint32_t hw = s.hd / 2, nwl = (hw + 31) / 32;  // a head's words; words each invocation holds
  // A row group with no chunk (most of them: 14 chunks on 1,056 row groups, on the H200 at short contexts) loads
  // nothing, its words 0. When every row group loaded the last chunk's keys, values, q and RoPE rows, their
  // requests to the same few lines of the L2 made attention cost the H200 8.5 us a layer; 4.8 without (Q4_0,
  // timed against the kernel with attention left out).
  auto guarded = [](const std::vector<std::string>& names, const std::vector<std::string>& loads,
                    std::string_view indent) {
    std::string code;
    for (const std::string& name : names) code += cat(indent, "var ", name, " = 0u;\n");
    code += cat(indent, "if (valid) {\n");
    for (size_t i = 0; i < names.size(); ++i) code += cat(indent, "  ", names[i], " = ", loads[i], ";\n");
    return code + cat(indent, "}\n");
  };
  std::vector<std::string> row_names, row_words;  // the workgroup-memory attention: a key row per invocation
  for (uint32_t w = 0; w < hw; ++w) {
    row_names.push_back(cat("kw", w));
    row_words.push_back(cat("kc[kbase + ", w, "u]"));
  }
  key_loads = guarded(row_names, row_words, "    ");
  // The subgroup attention: word lane + 32 r of each key, its share of each score, then the transposing sum.
  std::vector<std::string> key_names, key_words;
  std::string key_columns;
  std::string score_shares;
  std::vector<std::string> sums;
  for (uint32_t k = 0; k < 32; ++k) {
    std::string share;
    for (uint32_t r = 0; r < nwl; ++r) {
      const std::string word = cat("min(lane + ", 32 * r, "u, HD / 2u - 1u)");
      key_names.push_back(cat("kt", r, "_", k));
      key_words.push_back(
          cat("kc[layer.kc + min(c * 32u + ", k, "u, pos) * KROW + kvh * (HD / 2u) + ", word, "]"));
      share += cat(r ? " + " : "", "score_share(kt", r, "_", k, ", qw[", r, "], kn[", r, "], c * 32u + ", k,
                   "u == pos, lane + ", 32 * r, "u)");
    }
    score_shares += cat("    let a", k, " = ", share, ";\n");
    sums.push_back(cat("a", k));
  }
  key_columns = guarded(key_names, key_words, "    ");
  for (uint32_t step = 16; step >= 1; step /= 2) {
    std::vector<std::string> next;
    for (uint32_t i = 0; i < step; ++i) {
      const std::string& lo = sums[i];
      const std::string& hi = sums[i + step];
      const std::string name = cat("t", step, "_", i);
      score_shares += cat("    let ", name, " = select(", lo, ", ", hi, ", (lane & ", step,
                          "u) != 0u) + subgroupShuffleXor(select(", hi, ", ", lo, ", (lane & ", step,
                          "u) != 0u), ", step, "u);\n");
      next.push_back(name);
    }
    sums = std::move(next);
  }
  for (uint32_t r = 0; r < nwl; ++r) {
    std::string& loads = r == 0 ? value_loads : weighted_values;
    if (r > 0) weighted_values += cat("    let w", r, " = min(lane + ", 32 * r, "u, HD / 2u - 1u);\n");
    std::vector<std::string> names, words;
    for (uint32_t k = 0; k < 32; ++k) {
      names.push_back(cat("vw", r, "_", k));
      words.push_back(cat("vc[layer.vc + min(c * 32u + ", k, "u, pos) * KROW + kvh * (HD / 2u) + w", r, "]"));
    }
    loads += guarded(names, words, "    ");
    weighted_values += "    {\n      var o = vec2f(0.0);\n";
    for (uint32_t k = 0; k < 32; ++k)
      weighted_values +=
          cat("      o += weighted(vw", r, "_", k, ", vn[", r, "], p, c * 32u + ", k, "u, pos);\n");
    weighted_values += cat(
        "      if (valid && lane + ", 32 * r, "u < HD / 2u) {\n        st_s(S_PART + it * PW + 2u + 2u * w",
        r, ", o.x);\n        st_s(S_PART + it * PW + 3u + 2u * w", r, ", o.y);\n      }\n    }\n");
  }
  std::string score_terms_wg, values_wg;
  for (uint32_t w = 0; w < hw; ++w)
    score_terms_wg += cat("    acc += score_word_wg(kw", w, ", ", w, "u, j == pos);\n");
  for (uint32_t r = 0; r < (s.hd + 31) / 32; ++r) {
    values_wg += cat("    {\n      let d = lane + ", 32 * r, "u;\n      let dc = min(d, HD - 1u);\n");
    std::vector<std::string> names, words;
    for (uint32_t k = 0; k < 32; ++k) {
      names.push_back(cat("vw", k));
      words.push_back(cat("vc[layer.vc + min(c * 32u + ", k, "u, pos) * KROW + kvh * (HD / 2u) + dc / 2u]"));
    }
    values_wg += guarded(names, words, "      ");
    values_wg += "      var o = 0.0;\n";
    for (uint32_t k = 0; k < 32; ++k)
      values_wg += cat("      o += weighted_wg(vw", k, ", dc, c * 32u + ", k, "u, pos, ", k, "u);\n");
    values_wg += "      if (valid && d < HD) { st_s(S_PART + it * PW + 2u + d, o); }\n    }\n";
  }
  replace_all(body, "SCORE_TERMS_WG\n", score_terms_wg);
  replace_all(body, "VALUES_WG\n", values_wg);
  replace_all(body, "KEY_LOADS\n", key_loads);
  replace_all(body, "VALUE_LOADS0\n", value_loads);
  replace_all(body, "KEY_COLUMNS\n", key_columns);
  replace_all(body, "SCORE_SHARES\n", score_shares);
  replace_all(body, "SCORE_SUM", sums[0]);
  replace_all(body, "WEIGHTED_VALUES\n", weighted_values);
  // No subgroup functions in the source where they are not used (nor allowed, without the feature).
  auto erase = [&](std::string_view from, std::string_view to) {
    const size_t begin = body.find(from);
    body.erase(begin, body.find(to) - begin);
  };
  if (!sg_attention) erase("// Attention as above with a subgroup", "@compute");
  if (!sg_staging) erase("// Staging through subgroups", "// Attention as above with a subgroup");
  return src + body;
}

}  // namespace sotto::gpu
