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
// The phases' items: 64 virtual workgroups, each run by workgroup (item mod grid). Self- and cross-attention
// take 8 items a head (64 / heads), the MLP 64 blocks of hidden units; the partial sums they leave have one
// layout whatever the grid, so one workgroup on SwiftShader computes what 64 do on a GPU.
constexpr uint32_t kItems = 64;
constexpr uint32_t kPartFloats = 2048;  // a product's per-invocation row sums: rows x invocations a row

// Layout of the activations' scratch (floats): the final normed row, the layers' new k and v rows, then the
// partial sums each phase leaves for the next: self-attention's o products (a head's rows, [heads][d]),
// cross-attention's (an item's max and sum of exponentials and its o product of all rows, [64][2 + d]) and the
// MLP's down products ([64][d]), then each item's greatest logit and its index for the greedy step.
struct ActLayout {
  uint32_t xn = 0, rows, po, pc, pd, hd, total;
  explicit ActLayout(const MoonshineConfig& c) {
    const uint32_t d = static_cast<uint32_t>(c.d_model), layers = static_cast<uint32_t>(c.decoder_layers);
    rows = d;
    po = rows + 2 * layers * d;
    pc = po + static_cast<uint32_t>(c.n_heads) * d;
    pd = pc + kItems * (d + 2);
    hd = pd + kItems * d;
    total = hd + 2 * kItems;
  }
};

// A layer is three phases, each ending at a grid barrier:
//   1. x (+ the MLP's partials), norm; per item (head h, block b): head h's q·k·v (all 8 items of a head compute
//      it), its self-attention over every key, and the o product's rows of block b from head h's columns;
//   2. x (+ the heads' o partials), norm; per item (head h, key block b): head h's cross-q, its attention over
//      key chunks b, b + 8, ..., and the cross-o product of all rows from head h's columns on that unnormalised
//      output, with the block's max and sum of exponentials;
//   3. x (+ the 64 cross partials, each scaled by its block's share of its head's softmax), norm; per item
//      (hidden units 26 i .. 26 i + 25): their up and gate rows, the gated SiLU, and the down product's columns
//      for them (moonshine_step_pack: an item's columns padded to whole words).
// Every workgroup keeps x in workgroup memory and adds the same partials in the same order, so all hold the
// same x; the partials cross the barrier through the scratch (atomics: the L2, not a workgroup's L1).
//
// A product: an item's rows (a row's matrix index (r / a) * b + c + r % a), words wc0 .. wc0 + nw of each
// against st[sb ..]: `lpr` invocations a row stride its words, each invocation's share loaded in rounds of
// PJ rows x PT words (QN loads in flight before any is used: one round trip to memory a round, not one a row),
// the row sums through workgroup memory once at the end. The rounds' loops have fixed bounds and fixed array
// indices: a loop that walks the rows and words with running counters keeps the loads in local memory on
// NVIDIA's compiler, each waiting for the one before (2.8x slower a step on an H100).
const char* kStepKernel = R"(
const T = 256u;
const RG = 8u;
const PT = 8u;
const PJ = QN / PT;
const CB = VG / NH;
const R = D / CB;
const U = FF / VG;
const UPW = (U + 3u) / 4u;
const DW = D / 4u;
const HW = HD / 4u;
const BIG = 0xFFFFFFFFu;
// Words of one layer's matrices and their offsets in it; floats of one layer's vectors.
const W_O = 3u * D * DW;
const W_CQ = W_O + D * DW;
const W_CO = W_CQ + D * DW;
const W_UP = W_CO + D * DW;
const W_DOWN = W_UP + 2u * FF * DW;
const LW = W_DOWN + D * VG * UPW;
const V_UPB = 3u * D;
const V_DOWNB = V_UPB + 2u * FF;
const VL = V_DOWNB + D;
// Workgroup memory st: the normed x, then q, k, v, the attention's output, the gated hidden units (and zeros
// up to a whole word: the down matrix's pad columns).
const S_Q = D;
const S_K = S_Q + HD;
const S_V = S_K + HD;
const S_A = S_V + HD;
const S_H = S_A + HD;
// The output head's rows an item, after every layer's weights in W.
const HR = (VOCAB + VG - 1u) / VG;
const HEADW = NL * LW;
const RSN = max(max(D, HR), max(3u * HD, 2u * U));
const ENDED = 0x3f800000u;

struct P { pos: u32, tk: u32, kv_rows: u32, cap: u32, slot: u32, nch_self: u32, nch_cross: u32, skip: u32,
           eps: f32, att_scale: f32, final_gsum: f32, pad1: f32,
           greedy: u32, eos: u32, max_tokens: u32, pad2: u32, head_scale: f32, head_offset: f32, pad3: f32, pad4: f32,
           sc: array<vec4<f32>, 4u * NL>, gs: array<vec4<f32>, NL>, turns: array<vec4<u32>, 16> };
@group(0) @binding(0) var<uniform> p: P;
@group(0) @binding(1) var<storage, read_write> sync: array<atomic<u32>>;
@group(0) @binding(2) var<storage, read_write> act: array<atomic<u32>>;
@group(0) @binding(3) var<storage, read> W: array<u32>;
@group(0) @binding(4) var<storage, read> V: array<f32>;
@group(0) @binding(5) var<storage, read> kvs: array<vec4<f32>>;
@group(0) @binding(6) var<storage, read> kvx: array<vec4<f32>>;
@group(0) @binding(7) var<storage, read_write> xin: array<f32>;
@group(0) @binding(8) var<storage, read_write> lg: array<atomic<u32>>;

var<workgroup> xs: array<f32, D>;
var<workgroup> st: array<f32, S_H + 4u * UPW>;
var<workgroup> part: array<f32, PARTN>;
var<workgroup> rs: array<f32, RSN>;
var<workgroup> red: array<vec4<f32>, T>;
var<workgroup> red2: array<vec4<f32>, 32>;
var<workgroup> vacc: array<vec4<f32>, T>;
var<workgroup> cm: array<f32, VG>;
var<workgroup> cwt: array<f32, VG>;
var<workgroup> flag: u32;
var<workgroup> token: u32;
var<private> lid: u32;
var<private> lane: u32;
var<private> rgl: u32;
var<private> nbar: u32;
var<private> landed: u32;

fn ld(i: u32) -> f32 { return bitcast<f32>(atomicLoad(&act[i])); }
// Stores are exchanges whose old values grid_arrive() consumes: they have landed before the counter moves.
fn sto(i: u32, v: f32) { landed ^= atomicExchange(&act[i], bitcast<u32>(v)); }

// A grid barrier in two halves: this workgroup's arrival, then the wait for the others'. Between them a
// workgroup loads the next phase's first weights, which depend on nothing another workgroup writes.
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

// xs layer-normed with the gamma at V[g] into st; returns the sum of st (the offset term of every row), as
// inv * (sum x * gamma - mean * sum gamma).
fn stage_norm(g: u32, gsum: f32) -> f32 {
  if ((p.skip & 16u) != 0u) { return 0.0; }
  var xv: array<f32, 2>;
  var s = vec4<f32>(0.0);
  for (var k = 0u; k < 2u; k++) {
    let i = lid + k * T;
    var v = 0.0;
    if (i < D) {
      v = xs[i];
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

// x += the n partial rows at `at`, `stride` floats apart, in item order (each weighted by cwt[g] where
// `weighted`), and the vector at V[bias] unless bias is BIG: each invocation's loads issued at once.
fn gather(at: u32, stride: u32, n: u32, weighted: bool, bias: u32) {
  if ((p.skip & 16u) == 0u) {
    for (var k = 0u; k < 2u; k++) {
      let i = lid + k * T;
      if (i < D) {
        var v: array<f32, VG>;
        for (var g = 0u; g < VG; g++) {
          if (g < n) { v[g] = ld(at + g * stride + i); }
        }
        var s = 0.0;
        for (var g = 0u; g < VG; g++) {
          if (g < n) { s += select(1.0, cwt[g], weighted) * v[g]; }
        }
        if (bias != BIG) { s += V[bias + i]; }
        xs[i] += s;
      }
    }
  }
  workgroupBarrier();
}

// x += the MLP's partials of layer l and its down bias.
fn gather_mlp(l: u32) { gather(p_pd, D, VG, false, l * VL + V_DOWNB); }

// x += the heads' self-attention o partials (each head's normalised output through its columns).
fn gather_self() { gather(p_po, D, NH, false, BIG); }

// x += the cross-attention partials, item b of head h weighted by exp(m_b - M_h) / L_h: its block's share of
// the head's softmax (M_h the head's max, L_h its sum of exponentials over all blocks).
fn gather_cross() {
  if (lid < VG) {
    cm[lid] = ld(p_pc + lid * (D + 2u));
    cwt[lid] = ld(p_pc + lid * (D + 2u) + 1u);
  }
  workgroupBarrier();
  var w = 0.0;
  if (lid < VG) {
    let h0 = (lid / CB) * CB;
    var mx = -3.0e38;
    for (var b = 0u; b < CB; b++) { mx = max(mx, cm[h0 + b]); }
    var l = 0.0;
    for (var b = 0u; b < CB; b++) { l += exp(cm[h0 + b] - mx) * cwt[h0 + b]; }
    w = exp(cm[lid] - mx) / l;
  }
  workgroupBarrier();
  if (lid < VG) { cwt[lid] = w; }
  workgroupBarrier();
  gather(p_pc + 2u, D + 2u, VG, true, BIG);
}

fn wdot(q: u32, b: u32) -> f32 {
  let qi = bitcast<i32>(q);
  return dot(vec4<f32>(st[b], st[b + 1u], st[b + 2u], st[b + 3u]),
             vec4<f32>(f32(extractBits(qi, 0u, 8u)), f32(extractBits(qi, 8u, 8u)), f32(extractBits(qi, 16u, 8u)),
                       f32(extractBits(qi, 24u, 8u))));
}

fn sigmoid(v: f32) -> f32 { return 1.0 / (1.0 + exp(-v)); }

struct Pd { nrows: u32, a: u32, b: u32, c: u32, wm: u32, kw: u32, wc0: u32, nw: u32, sb: u32, lpr: u32, sh: u32,
            nt: u32, nj: u32 }

// Invocations a row (a power of two, 2^sh): the fewest rounds of PJ x PT loads (ties to more invocations a
// row: longer runs of adjacent words), within the row sums' workgroup memory.
fn pdesc(nrows: u32, a: u32, b: u32, c: u32, wm: u32, kw: u32, wc0: u32, nw: u32, sb: u32) -> Pd {
  var best = 0u;
  var cost = BIG;
  for (var sh = 0u; sh <= 5u; sh++) {
    let l = 1u << sh;
    if (nrows * l <= PARTN) {
      let n = ((nrows + (T >> sh) - 1u) / (T >> sh) + PJ - 1u) / PJ * (((nw + l - 1u) >> sh) + PT - 1u) / PT;
      if (n <= cost) {
        best = sh;
        cost = n;
      }
    }
  }
  let l = 1u << best;
  let nj = ((nrows + (T >> best) - 1u) / (T >> best) + PJ - 1u) / PJ;
  let nt = (((nw + l - 1u) >> best) + PT - 1u) / PT;
  return Pd(nrows, a, b, c, wm, kw, wc0, nw, sb, l, best, nt, nj);
}

// The first word of this invocation's j-th row, or BIG past the item's rows.
fn prow(d: Pd, j: u32) -> u32 {
  let r = (lid >> d.sh) + j * (T >> d.sh);
  if (r >= d.nrows) { return BIG; }
  return d.wm + ((r / d.a) * d.b + d.c + r % d.a) * d.kw + d.wc0;
}

// Round ps of this invocation's share of the product: PT words (every 2^sh-th from its lane's) of PJ rows
// (every (T >> sh)-th from its own). Fixed loop bounds and indices: the compiler keeps q in registers with all
// QN loads in flight, one round trip to memory a round.
fn pload(d: Pd, ps: u32) -> array<u32, QN> {
  let jr = ps / d.nt;
  let w0 = (lid & (d.lpr - 1u)) + (ps % d.nt) * PT * d.lpr;
  var q: array<u32, QN>;
  for (var a = 0u; a < PJ; a++) {
    let at = prow(d, jr * PJ + a);
    for (var b = 0u; b < PT; b++) {
      let w = w0 + b * d.lpr;
      if (at != BIG && w < d.nw) { q[a * PT + b] = W[at + w]; }
    }
  }
  return q;
}

// The product's raw row sums (sum of int8 weight x input) into rs; `pre`: its first round, where has_pre.
fn product(d: Pd, pre: array<u32, QN>, has_pre: bool) {
  let lr = lid & (d.lpr - 1u);
  for (var jr = 0u; jr < d.nj; jr++) {
    var acc: array<f32, PJ>;
    for (var tr = 0u; tr < d.nt; tr++) {
      var q = pre;
      if (!has_pre || jr + tr > 0u) { q = pload(d, jr * d.nt + tr); }
      let w0 = lr + tr * PT * d.lpr;
      for (var a = 0u; a < PJ; a++) {
        for (var b = 0u; b < PT; b++) {
          let w = w0 + b * d.lpr;
          if (w < d.nw) { acc[a] += wdot(q[a * PT + b], d.sb + 4u * w); }
        }
      }
    }
    for (var a = 0u; a < PJ; a++) {
      let r = (lid >> d.sh) + (jr * PJ + a) * (T >> d.sh);
      if (r < d.nrows) { part[r * d.lpr + lr] = acc[a]; }
    }
  }
  workgroupBarrier();
  for (var r = lid; r < d.nrows; r += T) {
    var s = 0.0;
    for (var i = 0u; i < d.lpr; i++) { s += part[r * d.lpr + i]; }
    rs[r] = s;
  }
  workgroupBarrier();
}

// Layer l's products for an item (see the layout above).
fn pd_qkv(l: u32, h: u32) -> Pd { return pdesc(3u * HD, HD, D, h * HD, l * LW, DW, 0u, DW, 0u); }
fn pd_o(l: u32, h: u32, b: u32) -> Pd { return pdesc(R, BIG, 0u, b * R, l * LW + W_O, DW, h * HW, HW, S_A); }
fn pd_cq(l: u32, h: u32) -> Pd { return pdesc(HD, BIG, 0u, h * HD, l * LW + W_CQ, DW, 0u, DW, 0u); }
fn pd_co(l: u32, h: u32) -> Pd { return pdesc(D, BIG, 0u, 0u, l * LW + W_CO, DW, h * HW, HW, S_A); }
fn pd_up(l: u32, u0: u32) -> Pd { return pdesc(2u * U, U, FF, u0, l * LW + W_UP, DW, 0u, DW, 0u); }
fn pd_down(l: u32, it: u32) -> Pd { return pdesc(D, BIG, 0u, 0u, l * LW + W_DOWN, VG * UPW, it * UPW, UPW, S_H); }

fn st4(at: u32) -> vec4<f32> { return vec4<f32>(st[at], st[at + 1u], st[at + 2u], st[at + 3u]); }

// Sum of st[at .. at + n] (every invocation the same).
fn st_sum(at: u32, n: u32) -> f32 {
  var s = 0.0;
  for (var i = 0u; i < n; i++) { s += st[at + i]; }
  return s;
}

// Head h's attention over key chunks c0, c0 + cstep, ... (nb of them, 32 keys each) with the query at st[S_Q]
// (self-attention: key pos is the new row at st[S_K], its value at st[S_V]): the output unnormalised, relative
// to the returned max, into st[S_A]; returns (max, sum of exponentials). A row group per chunk, invocation j
// scoring key j; each row group carries its running max, sum and outputs over its chunks, then the row groups
// are combined.
fn attend(l: u32, cross: bool, h: u32, c0: u32, cstep: u32, nb: u32) -> vec2<f32> {
  let ntk = select(p.pos + 1u, p.tk, cross);
  let dq = lane % 16u;
  let half = lane / 16u;
  var mrun = -3.0e38;
  var lrun = 0.0;
  var acc4 = vec4<f32>(0.0);
  let rounds = (nb + RG - 1u) / RG;
  for (var rd = 0u; rd < rounds; rd++) {
    let i = rd * RG + rgl;
    let valid = i < nb;
    let c = c0 + cstep * min(i, nb - 1u);
    let j = c * 32u + lane;
    let live = valid && j < ntk;
    var score = -3.0e38;
    if (live) {
      var acc = 0.0;
      if (!cross && j == p.pos) {
        for (var e = 0u; e < HW; e++) { acc += dot(st4(S_Q + 4u * e), st4(S_K + 4u * e)); }
      } else {
        var k: array<vec4<f32>, HW>;
        if (cross) {
          let kr = ((2u * l) * p.kv_rows + j) * DW + h * HW;
          for (var e = 0u; e < HW; e++) { k[e] = kvx[kr + e]; }
        } else {
          let kr = ((2u * l) * p.cap + j) * DW + h * HW;
          for (var e = 0u; e < HW; e++) { k[e] = kvs[kr + e]; }
        }
        for (var e = 0u; e < HW; e++) { acc += dot(st4(S_Q + 4u * e), k[e]); }
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
    let zs = red2[rgl * 4u].y + red2[rgl * 4u + 1u].y + red2[rgl * 4u + 2u].y + red2[rgl * 4u + 3u].y;
    // The values: invocation (dq, half) sums vec4 dq of the chunk's keys of parity `half`, 8 keys' loads at once.
    var a4 = vec4<f32>(0.0);
    if (valid && dq < HW) {
      let n = min(32u, ntk - min(ntk, c * 32u));
      for (var t0 = half; t0 < n; t0 += 16u) {
        var vv: array<vec4<f32>, 8>;
        for (var k = 0u; k < 8u; k++) {
          let jt = c * 32u + min(t0 + 2u * k, n - 1u);
          if (cross) {
            vv[k] = kvx[((2u * l + 1u) * p.kv_rows + jt) * DW + h * HW + dq];
          } else {
            vv[k] = kvs[((2u * l + 1u) * p.cap + jt) * DW + h * HW + dq];
          }
        }
        for (var k = 0u; k < 8u; k++) {
          let t = t0 + 2u * k;
          if (t < n) {
            var v = vv[k];
            if (!cross && c * 32u + t == p.pos) { v = st4(S_V + 4u * dq); }
            a4 += red[rgl * 32u + t].y * v;
          }
        }
      }
    }
    if (valid) {
      let mn = max(mrun, m);
      let fo = exp(mrun - mn);
      let fnew = exp(m - mn);
      lrun = lrun * fo + zs * fnew;
      acc4 = acc4 * fo + a4 * fnew;
      mrun = mn;
    }
    workgroupBarrier();
  }
  vacc[lid] = acc4;
  if (lane == 0u) { red2[rgl] = vec4<f32>(mrun, lrun, 0.0, 0.0); }
  workgroupBarrier();
  var mw = -3.0e38;
  for (var g = 0u; g < RG; g++) { mw = max(mw, red2[g].x); }
  var lt = 0.0;
  for (var g = 0u; g < RG; g++) { lt += exp(red2[g].x - mw) * red2[g].y; }
  if (lid < HD) {
    let q4 = lid / 4u;
    let comp = lid % 4u;
    var o = 0.0;
    for (var g = 0u; g < RG; g++) {
      o += exp(red2[g].x - mw) * (vacc[g * 32u + q4][comp] + vacc[g * 32u + 16u + q4][comp]);
    }
    st[S_A + lid] = o;
  }
  workgroupBarrier();
  return vec2<f32>(mw, lt);
}

fn o2(l: u32) -> vec4<f32> { return p.sc[4u * l + 1u]; }

// Dimension e of q (at rs[0 ..]) or k (rs[HD ..]) rotated at the step's position.
fn roped(base: u32, e: u32) -> f32 {
  if (e >= ROT) { return rs[base + e]; }
  let pair = e / 2u;
  let xa = rs[base + 2u * pair];
  let xb = rs[base + 2u * pair + 1u];
  let sc2 = rope_sin_cos(p.pos * p.turns[pair / 4u][pair % 4u]);
  return select(xa * sc2.x + xb * sc2.y, xa * sc2.y - xb * sc2.x, e % 2u == 0u);
}

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) li: u32) {
  lid = li;
  lane = li % 32u;
  rgl = li / 32u;
  if (lid == 0u) { flag = atomicLoad(&lg[0]); }
  if (workgroupUniformLoad(&flag) != 0u) { return; }
  for (var i = lid; i < D; i += T) { xs[i] = xin[i]; }
  workgroupBarrier();
  // A workgroup past the 64 items (a wider grid) has none, but still meets the barriers; its first item's
  // loads are clamped to the last item's.
  let first = min(wid.x, VG - 1u);
  let no = array<u32, QN>();
  var pre = pload(pd_qkv(0u, first / CB), 0u);
  for (var l = 0u; l < NL; l++) {
    let vl = l * VL;
    let s0 = p.sc[4u * l];
    let s1 = p.sc[4u * l + 2u];
    let s2 = p.sc[4u * l + 3u];
    let gs = p.gs[l];
    // 1. Self-attention.
    if (l > 0u) { gather_mlp(l - 1u); }
    var sx = stage_norm(vl, gs.x);
    for (var it = wid.x; it < VG; it += G) {
      let h = it / CB;
      let b = it % CB;
      if ((p.skip & 4u) == 0u) { product(pd_qkv(l, h), pre, it == wid.x); }
      for (var e = lid; e < 3u * HD; e += T) {
        let seg = e / HD;
        rs[e] = s0[seg] * rs[e] + o2(l)[seg] * sx;
      }
      workgroupBarrier();
      for (var e = lid; e < 3u * HD; e += T) {
        var v = rs[e];
        if (e < 2u * HD) { v = roped((e / HD) * HD, e % HD); }
        st[S_Q + e] = v;
        if (b == 0u && e >= HD) { sto(p_rows + (2u * l + e / HD - 1u) * D + h * HD + e % HD, v); }
      }
      workgroupBarrier();
      var ml = vec2<f32>(0.0, 1.0);
      if ((p.skip & 1u) == 0u) { ml = attend(l, false, h, 0u, 1u, p.nch_self); }
      if ((p.skip & 4u) == 0u) { product(pd_o(l, h, b), no, false); }
      let so = st_sum(S_A, HD);
      for (var r = lid; r < R; r += T) { sto(p_po + h * D + b * R + r, (s0.w * rs[r] + o2(l).w * so) / ml.y); }
      workgroupBarrier();
    }
    grid_arrive();
    pre = pload(pd_cq(l, first / CB), 0u);
    grid_wait();
    // 2. Cross-attention.
    gather_self();
    sx = stage_norm(vl + D, gs.y);
    for (var it = wid.x; it < VG; it += G) {
      let h = it / CB;
      let b = it % CB;
      if ((p.skip & 4u) == 0u) { product(pd_cq(l, h), pre, it == wid.x); }
      for (var e = lid; e < HD; e += T) { st[S_Q + e] = s1.x * rs[e] + s1.y * sx; }
      workgroupBarrier();
      var nb = 0u;
      if (b < p.nch_cross) { nb = (p.nch_cross - b + CB - 1u) / CB; }
      var ml = vec2<f32>(0.0, 1.0);
      if ((p.skip & 2u) == 0u) { ml = attend(l, true, h, b, CB, nb); }
      if ((p.skip & 4u) == 0u) { product(pd_co(l, h), no, false); }
      let so = st_sum(S_A, HD);
      let at = p_pc + it * (D + 2u);
      for (var r = lid; r < D; r += T) { sto(at + 2u + r, s1.z * rs[r] + s1.w * so); }
      if (lid == 0u) {
        sto(at, ml.x);
        sto(at + 1u, ml.y);
      }
      workgroupBarrier();
    }
    grid_arrive();
    pre = pload(pd_up(l, first * U), 0u);
    grid_wait();
    // 3. MLP.
    gather_cross();
    sx = stage_norm(vl + 2u * D, gs.z);
    for (var it = wid.x; it < VG; it += G) {
      let u0 = it * U;
      if ((p.skip & 36u) == 0u) { product(pd_up(l, u0), pre, it == wid.x); }
      for (var r = lid; r < 4u * UPW; r += T) {
        if (r >= U) {
          st[S_H + r] = 0.0;  // the pad bytes' inputs
          continue;
        }
        let val = s2.x * rs[r] + s2.y * sx + V[vl + V_UPB + u0 + r];
        let gate = s2.x * rs[U + r] + s2.y * sx + V[vl + V_UPB + FF + u0 + r];
        st[S_H + r] = val * (gate * sigmoid(gate));
      }
      workgroupBarrier();
      if ((p.skip & 68u) == 0u) { product(pd_down(l, it), no, false); }
      let sh = st_sum(S_H, U);
      for (var r = lid; r < D; r += T) { sto(p_pd + it * D + r, s2.z * rs[r] + s2.w * sh); }
      workgroupBarrier();
    }
    grid_arrive();
    if (l + 1u < NL) { pre = pload(pd_qkv(l + 1u, first / CB), 0u); }
    grid_wait();
  }
  // The final norm into the row the output head reads (one workgroup; every one where the head follows).
  if (p.greedy == 0u) {
    if (wid.x == 0u) {
      gather_mlp(NL - 1u);
      _ = stage_norm(NL * VL, p.final_gsum);
      for (var i = lid; i < D; i += T) { atomicStore(&act[p_xn + i], bitcast<u32>(st[i])); }
    }
    return;
  }
  gather_mlp(NL - 1u);
  let sxf = stage_norm(NL * VL, p.final_gsum);
  if (wid.x == 0u) {
    for (var i = lid; i < D; i += T) { atomicStore(&act[p_xn + i], bitcast<u32>(st[i])); }
  }
  // The greedy step: each item's logits (HR rows of the embedding table) and their first maximum, then the first
  // maximum of the items', the token logged and its embedding row the next step's input (nn::greedy_step's).
  for (var it = wid.x; it < VG; it += G) {
    let r0 = min(it * HR, VOCAB);
    let n = min(HR, VOCAB - r0);
    if (n > 0u && (p.skip & 4u) == 0u) { product(pdesc(n, BIG, 0u, r0, HEADW, DW, 0u, DW, 0u), no, false); }
    var bv = -3.4e38;
    var bi = BIG;
    for (var r = lid; r < n; r += T) {
      let v = p.head_scale * rs[r] + p.head_offset * sxf;
      if (bi == BIG || v > bv) {
        bv = v;
        bi = r0 + r;
      }
    }
    red[lid] = vec4<f32>(bv, bitcast<f32>(bi), 0.0, 0.0);
    workgroupBarrier();
    if (lid == 0u) {
      for (var i = 1u; i < T; i++) {
        let c = red[i];
        let ci = bitcast<u32>(c.y);
        if (ci != BIG && (bi == BIG || c.x > bv || (c.x == bv && ci < bi))) {
          bv = c.x;
          bi = ci;
        }
      }
      sto(p_hd + 2u * it, bv);
      sto(p_hd + 2u * it + 1u, bitcast<f32>(bi));
    }
    workgroupBarrier();
  }
  grid_arrive();
  grid_wait();
  if (wid.x != 0u) { return; }
  if (lid == 0u) {
    var bv = -3.4e38;
    var bi = BIG;
    for (var i = 0u; i < VG; i++) {
      let v = ld(p_hd + 2u * i);
      let ci = bitcast<u32>(ld(p_hd + 2u * i + 1u));
      if (ci != BIG && (bi == BIG || v > bv)) {
        bv = v;
        bi = ci;
      }
    }
    let tk = min(bi, VOCAB - 1u);
    token = tk;
    // Nothing is logged once the loop has ended, or a barrier gave up (the failure mark: a count of -1).
    let n = atomicLoad(&lg[1]);
    if (atomicLoad(&lg[0]) == 0u && n < p.max_tokens) {
      if (tk == p.eos) {
        atomicStore(&lg[0], ENDED);
      } else {
        atomicStore(&lg[2u + n], tk);
        atomicStore(&lg[1], n + 1u);
        if (n + 1u >= p.max_tokens) { atomicStore(&lg[0], ENDED); }
      }
    }
  }
  let tk = workgroupUniformLoad(&token);
  for (var e = lid; e < D; e += T) {
    let q = extractBits(bitcast<i32>(W[HEADW + tk * DW + e / 4u]), (e % 4u) * 8u, 8u);
    xin[e] = f32(q) * p.head_scale + p.head_offset;
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

// A product's loads an invocation issues before using any, a round of 8 rows x 8 words: an item's q·k·v share
// (156 rows of 104 words) in two rounds with 16 invocations a row. SOTTO_MOONSHINE_STEP_QN=N (8-128, a multiple
// of 8) overrides it natively for timing.
uint32_t loads_in_flight() {
#if !defined(__wasm__)
  if (const char* env = std::getenv("SOTTO_MOONSHINE_STEP_QN"))
    return static_cast<uint32_t>(std::clamp<long>(std::strtol(env, nullptr, 10), 8, 128)) / 8 * 8;
#endif
  return 64;
}

std::string step_source(const MoonshineConfig& c, uint32_t grid, uint32_t spin) {
  const ActLayout a(c);
  std::string consts = cat("const G = ", grid, "u;\nconst D = ", c.d_model, "u;\nconst HD = ", c.head_dim,
                           "u;\nconst NH = ", c.n_heads, "u;\nconst FF = ", c.decoder_ff,
                           "u;\nconst NL = ", c.decoder_layers, "u;\nconst ROT = ", c.rotary_dim, "u;\n");
  consts +=
      cat("const p_xn = ", a.xn, "u;\nconst p_rows = ", a.rows, "u;\nconst p_po = ", a.po,
          "u;\nconst p_pc = ", a.pc, "u;\nconst p_pd = ", a.pd, "u;\nconst p_hd = ", a.hd,
          "u;\nconst VOCAB = ", c.vocab, "u;\nconst QN = ", loads_in_flight(), "u;\nconst SPIN = ", spin,
          "u;\nconst VG = ", kItems, "u;\nconst PARTN = ", kPartFloats, "u;\n");
  return consts + NN_WGSL_ROPE_SIN_COS + kStepKernel;
}

uint32_t word(int64_t v) {
  return static_cast<uint32_t>(v);
}

// Workgroup memory the kernel declares (bytes): xs, st, part, rs, cm and cwt; red, red2, vacc.
uint32_t workgroup_bytes(const MoonshineConfig& c) {
  const uint32_t d = static_cast<uint32_t>(c.d_model), hd = static_cast<uint32_t>(c.head_dim);
  const uint32_t u = static_cast<uint32_t>(c.decoder_ff) / kItems;
  const uint32_t floats =
      d + (d + 4 * hd + (u + 3) / 4 * 4) + kPartFloats + std::max({d, 3 * hd, 2 * u}) + 2 * kItems;
  return 4 * floats + 16 * (2 * kThreads + 32);
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

std::vector<uint8_t> moonshine_step_pack(const MoonshineConfig& c, const std::vector<uint8_t>& loaded) {
  const size_t d = static_cast<size_t>(c.d_model), ff = static_cast<size_t>(c.decoder_ff);
  const size_t u = ff / kItems, up = (u + 3) / 4 * 4, head = 6 * d * d + 2 * ff * d;
  std::vector<uint8_t> out;
  out.reserve(loaded.size() / (head + d * ff) * (head + d * kItems * up));
  for (size_t at = 0; at + head + d * ff <= loaded.size(); at += head + d * ff) {
    out.insert(out.end(), loaded.begin() + static_cast<std::ptrdiff_t>(at),
               loaded.begin() + static_cast<std::ptrdiff_t>(at + head));
    for (size_t row = 0; row < d; ++row) {
      const uint8_t* r = loaded.data() + at + head + row * ff;
      for (size_t item = 0; item < kItems; ++item) {
        out.insert(out.end(), r + item * u, r + item * u + u);
        out.insert(out.end(), up - u, 0);
      }
    }
  }
  return out;
}

bool moonshine_step_kernel_fits(const MoonshineConfig& c) {
  const int64_t items = kItems;
  return c.n_heads > 0 && items % c.n_heads == 0 && c.d_model % (items / c.n_heads) == 0 &&
         c.decoder_ff % items == 0 && c.head_dim % 4 == 0 && c.head_dim <= 64 && c.rotary_dim <= c.head_dim &&
         c.n_heads * c.head_dim == c.d_model;
}

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

MoonshineStepBuffers moonshine_step_buffers(const MoonshineWeights& w, int64_t capacity) {
  const MoonshineConfig& c = w.config;
  nn::Context& ctx = w.embedding.w.ctx();
  const ActLayout a(c);
  MoonshineStepBuffers b;
  b.act = ctx.empty({a.total});
  b.sync = ctx.zeros({capacity + 2}, DType::I32);
  // Each layer's k then v cache of `rows` rows; an even count keeps every cache's view at a 256-byte offset.
  const int64_t rows = (capacity + 1) / 2 * 2;
  b.caches = ctx.empty({2 * c.decoder_layers * rows, c.d_model});
  return b;
}

Tensor moonshine_step_kernel(const MoonshineWeights& w, MoonshineDecoderState& s, const Tensor& x,
                             const Tensor& log, const nn::GreedyLoop* greedy) {
  const MoonshineConfig& c = w.config;
  const MoonshineStepKernel& k = *w.step_kernel;
  nn::GpuRecorder& rec = *x.ctx().gpu();
  const ActLayout a(c);
  const int64_t rows = s.step.caches.dim(0) / (2 * c.decoder_layers);
  const int64_t tk = s.cross_k[0].dim(0), cross_rows = s.cross_all.dim(0) / (2 * c.decoder_layers);
  const int64_t pos = s.n_past;
  std::vector<uint32_t> params(20 + 4 * 4 * c.decoder_layers + 4 * c.decoder_layers + 64, 0);
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
  if (greedy) {
    params[12] = 1;
    params[13] = static_cast<uint32_t>(greedy->eos);
    params[14] = word(greedy->max_tokens);
    params[16] = std::bit_cast<uint32_t>(greedy->scale);
    params[17] = std::bit_cast<uint32_t>(greedy->offset);
  }
  size_t at = 20;
  for (int l = 0; l < c.decoder_layers; ++l)
    for (float f : k.scales[static_cast<size_t>(l)]) params[at++] = std::bit_cast<uint32_t>(f);
  for (int l = 0; l < c.decoder_layers; ++l) {
    for (float f : k.gamma_sums[static_cast<size_t>(l)]) params[at++] = std::bit_cast<uint32_t>(f);
    at++;
  }
  nn::rope_turns(c.rope_base, c.rotary_dim, params.data() + at);
  rec.dispatch(cat("moonshine_step_kernel_", k.grid, "_", k.spin), step_source(c, k.grid, k.spin), params,
               {&s.step.sync, &s.step.act, &k.w, &k.v, &s.step.caches, &s.cross_all, &x, &log},
               static_cast<uint64_t>(k.grid) * 64);
  const uint32_t n = static_cast<uint32_t>(2 * c.decoder_layers * c.d_model);
  const uint32_t row_params[8] = {word(pos), word(rows), n, word(c.d_model), a.rows, 0, 0, 0};
  rec.dispatch("moonshine_step_rows", kStepRows, row_params, {&s.step.act, &s.step.caches}, n);
  s.n_past += 1;
  return s.step.act.rows(0, c.d_model).reshape({1, c.d_model});
}

}  // namespace sotto::asr
