// sotto_gpu_probe --token: how fast a whole decode step could run as ONE persistent dispatch on this GPU, before
// anyone writes the real kernel. A synthetic token of a Qwen2.5-0.5B-shaped Q4_0 model: every layer's real
// weight bytes (q·k·v, wo, gate, up, down: 8.4 MB a layer, 24 layers, random), attention over a real-sized f16
// cache split in chunks of 32 keys, the layer's five grid barriers (after q·k·v, attention, wo, gate·up, down),
// the q8_0 staging of each matrix's input (every workgroup norms and quantizes it itself, combining the attention
// chunks first) and Q4_0 dot products. What it computes is meaningless (random weights, no RoPE, no bias, the
// current position's k/v not written, no output head): it measures time, for the design a hand-written
// persistent kernel would have, which the fused plan (gpu/fusion.h, rewritten from the separate kernels) lacks.
//
// The variants below say where the time goes (bench/results/history-2026-12-03.md): on the H200 the first cut took
// ~790 us a token; a subgroup's rows summed one subgroup sum after another cost ~190 us of it (through
// workgroup memory, one lane a row: 616-670 us, ~1,500-1,600 tokens/s for the layers); weight loads issued before the grid
// barrier (prefetch) and 16-byte weight loads made it slower, not faster.
#include <algorithm>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "api/clock.h"
#include "gpu/device.h"
#include "gpu/kernels_wgsl.h"
#include "probe.h"

namespace sotto::probe {

namespace {

struct TokenShape {
  uint32_t layers, d, n_head, n_kv, ff, ctx;
  uint32_t qkv() const { return (n_head + 2 * n_kv) * 64; }
};

// Variants of the kernel, as bits: what it leaves out (to see where the time goes) or does otherwise.
enum Variant : uint32_t {
  kNoMatrices = 1,   // no weight loads, no dots
  kNoStaging = 2,    // no loading, norm or quantization of the matrices' inputs, no attention combine
  kNoAttention = 4,  //
  kPlainLoads = 8,   // activations through plain loads and stores (not coherent across workgroups: timing)
  kConsumed = 16,    // with prefetch: the words used before the barrier, so their loads cannot sink below it
  kWide = 32,        // a Q4_0 block's quants as one 16-byte load and the scales apart, not five word loads
  kXorDots = 64,     // each block's dot an xor of its words (no dot4I8Packed, no staged input)
  kNoRowSums = 128,  // no sum over a row's lanes
  kTrimmed = 256,    // the staging loops only as long as the input, not the widest
  kSharedRowSums = 512,  // a subgroup's row sums through workgroup memory, one lane a row, all rows at once
  kBest = kTrimmed | kSharedRowSums,
};

std::string variant_name(uint32_t v) {
  static const char* kNames[] = {"no matrices", "no staging",     "no attention", "plain loads",
                                 "consumed",    "16-byte loads",  "xor for dots", "no row sums",
                                 "trimmed",     "shared row sums"};
  std::string s;
  for (uint32_t bit = 0; bit < 10; ++bit)
    if (v & (1u << bit)) s += cat(s.empty() ? "" : ", ", kNames[bit]);
  return s.empty() ? "first cut" : s;
}

// The WGSL of the whole token: `grid` workgroups of `threads` invocations (subgroups of 32 assumed).
std::string token_wgsl(const TokenShape& s, uint32_t grid, uint32_t threads, bool prefetch, uint32_t v) {
  const uint32_t nrg = grid * threads / 32;  // row groups (subgroups) in the grid
  auto rows_each = [&](uint32_t rows) { return (rows + nrg - 1) / nrg; };
  const uint32_t b_d = s.d / 32, b_ff = s.ff / 32;
  const uint32_t bpl_d = (b_d + 31) / 32, bpl_ff = (b_ff + 31) / 32;
  // Prefetch words a lane holds: the most any phase needs (attention: a key row and a value column, 64).
  const uint32_t pre = std::max({64u, 5 * rows_each(s.qkv()) * bpl_d, 5 * rows_each(s.d) * bpl_d,
                                 10 * rows_each(s.ff) * bpl_d, 5 * rows_each(s.d) * bpl_ff});
  const uint32_t nwt = (s.ff / 4 + threads - 1) / threads;  // staged words per invocation (widest input)
  std::string w =
      cat("enable subgroups;\n", "const G = ", grid, "u;\nconst T = ", threads,
          "u;\nconst NSG = T / 32u;\nconst NRG = ", nrg, "u;\nconst NL = ", s.layers, "u;\nconst D = ", s.d,
          "u;\nconst QKV = ", s.qkv(), "u;\nconst FF = ", s.ff, "u;\nconst NH = ", s.n_head,
          "u;\nconst NKV = ", s.n_kv, "u;\nconst CTX = ", s.ctx, "u;\nconst NCH = ", (s.ctx + 31) / 32,
          "u;\nconst PREW = ", pre, "u;\nconst NWT = ", nwt,
          "u;\nconst PREFETCH = ", prefetch ? "true" : "false", ";\nconst SKIP = ", v & 7, "u;\n");
  w += R"(
const PW = 66u;                       // a partial: max, sum, 64 outputs
const X0 = 0u; const Q0 = D; const P0 = D + QKV; const H0 = P0 + NH * NCH * PW;
const VBASE = NL * NKV * CTX * 32u;   // V after K in kv
@group(0) @binding(0) var<storage, read> wqkv: array<WTYPE>;
@group(0) @binding(1) var<storage, read> wo: array<WTYPE>;
@group(0) @binding(2) var<storage, read> wgt: array<WTYPE>;
@group(0) @binding(3) var<storage, read> wup: array<WTYPE>;
@group(0) @binding(4) var<storage, read> wdn: array<WTYPE>;
@group(0) @binding(5) var<storage, read> kv: array<u32>;
@group(0) @binding(6) var<storage, read_write> act: array<ACT_WORD>;
@group(0) @binding(7) var<storage, read_write> sync: array<atomic<u32>>;
var<workgroup> xq: array<u32, FF / 4u>;
var<workgroup> xd: array<f32, FF / 32u>;
var<workgroup> red: array<f32, 32>;
var<private> pre: array<u32, PREW>;
var<private> vals: array<vec4f, NWT>;
var<private> lid: u32;
var<private> lane: u32;
var<private> rg: u32;
var<private> barriers: u32;
var<private> consumed: u32;

fn wload(m: u32, i: u32) -> WTYPE {
  switch m {
    case 0u: { return wqkv[i]; }
    case 1u: { return wo[i]; }
    case 2u: { return wgt[i]; }
    case 3u: { return wup[i]; }
    default: { return wdn[i]; }
  }
}
fn ld(i: u32) -> f32 { return bitcast<f32>(ACT_LOAD); }
fn st(i: u32, v: f32) { ACT_STORE; }

fn grid_sync() {
  if (CONSUME && consumed == 0x9E3779B9u) { st(H0, 0.0); }  // makes the prefetched words arrive first
  barriers += 1u;
  workgroupBarrier();
  storageBarrier();
  if (lid == 0u) {
    atomicAdd(&sync[1], 1u);
    var n = 0u;
    loop {
      if (atomicLoad(&sync[1]) >= barriers * G) { break; }
      n += 1u;
      if (n > 4000000u) { atomicStore(&sync[0], 1u); break; }
    }
  }
  workgroupBarrier();
}

// A matrix of `rows` rows of `blocks` Q4_0 blocks (5 words each) for layer l: lane `lane` of row group rg takes
// rows rg, rg + NRG, ... and blocks lane, lane + 32, ...; `slots`: matrices interleaved (gate and up: 2).
fn prefetch_rows(m: u32, l: u32, rows: u32, blocks: u32, nri: u32, bpl: u32, slots: u32, slot: u32) {
  if ((SKIP & 1u) != 0u) { return; }
  for (var ri = 0u; ri < nri; ri++) {
    for (var bi = 0u; bi < bpl; bi++) {
      let row = rg + ri * NRG; let blk = lane + 32u * bi;
      let at = 5u * ((ri * bpl + bi) * slots + slot);
      if (row < rows && blk < blocks) {
        LOAD_BLOCK
        if (CONSUME) { consumed ^= pre[at] ^ pre[at + 4u]; }
      }
    }
  }
}

fn q4dot(at: u32, blk: u32) -> f32 {
  if (XORDOT) { return f32((pre[at] ^ pre[at + 1u] ^ pre[at + 2u] ^ pre[at + 3u] ^ pre[at + 4u]) & 0xFFFFu); }
  let x0 = blk * 8u;
  var s = 0i;
  var xs = 0i;
  for (var k = 0u; k < 4u; k++) {
    let w = pre[at + k];
    s += dot4I8Packed(w & 0x0F0F0F0Fu, xq[x0 + k]) + dot4I8Packed((w >> 4u) & 0x0F0F0F0Fu, xq[x0 + 4u + k]);
  }
  for (var k = 0u; k < 8u; k++) { xs += dot4I8Packed(0x01010101u, xq[x0 + k]); }
  return f32(s - 8i * xs) * unpack2x16float(pre[at + 4u]).x * xd[blk];
}

// vals[] (nw words of 4 values, word t + i * T) times `scale` into xq / xd as q8_0.
fn quantize(nw: u32, scale: f32) {
  if ((SKIP & 2u) != 0u) { return; }
  for (var i = 0u; i < select(NWT, (nw + T - 1u) / T, TRIM); i++) {
    let wi = lid + i * T;
    let v = vals[i] * scale;
    var m = max(max(abs(v.x), abs(v.y)), max(abs(v.z), abs(v.w)));
    m = max(m, subgroupShuffleXor(m, 1u));
    m = max(m, subgroupShuffleXor(m, 2u));
    m = max(m, subgroupShuffleXor(m, 4u));
    let d = m / 127.0;
    let id = select(0.0, 1.0 / d, d != 0.0);
    let q = vec4i(round(v * id));
    if (wi < nw) {
      xq[wi] = (bitcast<u32>(q.x) & 0xFFu) | ((bitcast<u32>(q.y) & 0xFFu) << 8u) |
               ((bitcast<u32>(q.z) & 0xFFu) << 16u) | ((bitcast<u32>(q.w) & 0xFFu) << 24u);
      if (wi % 8u == 0u) { xd[wi / 8u] = d; }
    }
  }
  workgroupBarrier();
}

// n values from act[src ...] into vals; with `norm`, the RMSNorm's scale (else 1).
fn stage(src: u32, n: u32, norm: bool) -> f32 {
  if ((SKIP & 2u) != 0u) { return 1.0; }
  var ss = 0.0;
  for (var i = 0u; i < select(NWT, (n / 4u + T - 1u) / T, TRIM); i++) {
    let wi = lid + i * T;
    var v = vec4f(0.0);
    if (wi < n / 4u) { v = vec4f(ld(src + 4u * wi), ld(src + 4u * wi + 1u), ld(src + 4u * wi + 2u), ld(src + 4u * wi + 3u)); }
    vals[i] = v;
    ss += dot(v, v);
  }
  if (!norm) { return 1.0; }
  let part = subgroupAdd(ss);
  if (lane == 0u) { red[lid / 32u] = part; }
  workgroupBarrier();
  var total = 0.0;
  for (var k = 0u; k < NSG; k++) { total += red[k]; }
  workgroupBarrier();
  return inverseSqrt(total / f32(n) + 1e-6);
}

// The attention partials of every (head, chunk) into the combined head outputs, as vals (D values).
fn stage_combined() {
  if ((SKIP & 2u) != 0u) { return; }
  for (var i = 0u; i < select(NWT, (D / 4u + T - 1u) / T, TRIM); i++) {
    let wi = lid + i * T;
    var v = vec4f(0.0);
    if (wi < D / 4u) {
      let h = (4u * wi) / 64u; let dd = (4u * wi) % 64u;
      var mx = -3.0e38;
      for (var c = 0u; c < NCH; c++) { mx = max(mx, ld(P0 + (h * NCH + c) * PW)); }
      var num = vec4f(0.0); var den = 0.0;
      for (var c = 0u; c < NCH; c++) {
        let at = P0 + (h * NCH + c) * PW;
        let f = exp(ld(at) - mx);
        den += f * ld(at + 1u);
        num += f * vec4f(ld(at + 2u + dd), ld(at + 3u + dd), ld(at + 4u + dd), ld(at + 5u + dd));
      }
      v = num / den;
    }
    vals[i] = v;
  }
}

const NRI_QKV = )" +
       cat(rows_each(s.qkv())) + R"(u;
const NRI_D = )" +
       cat(rows_each(s.d)) + R"(u;
const NRI_FF = )" +
       cat(rows_each(s.ff)) + R"(u;
const BPL_D = )" +
       cat(bpl_d) + R"(u;
const BPL_FF = )" +
       cat(bpl_ff) + R"(u;
const NATT = NH * NCH;
var<workgroup> part: array<f32, select(32u, T * max(max(NRI_QKV, NRI_D), 2u * NRI_FF), SHARED_SUMS)>;

fn prefetch_attention(l: u32) {
  if ((SKIP & 4u) != 0u) { return; }
  for (var it = rg; it < NATT; it += NRG) {   // at most one item per row group in the shapes probed
    let h = it / NCH; let c = it % NCH; let kvh = h / (NH / NKV);
    let key = c * 32u + lane;
    if (key < CTX) {
      for (var k = 0u; k < 32u; k++) { pre[k] = kv[((l * NKV + kvh) * CTX + key) * 32u + k]; }
    }
    for (var j = 0u; j < 32u; j++) {
      let kj = min(c * 32u + j, CTX - 1u);
      pre[32u + j] = kv[VBASE + ((l * NKV + kvh) * CTX + kj) * 32u + lane];
    }
    if (CONSUME) { consumed ^= pre[0] ^ pre[32]; }
  }
}

fn attention() {
  if ((SKIP & 4u) != 0u) { return; }
  for (var it0 = 0u; it0 < NATT; it0 += NRG) {
    let it = it0 + rg;
    let h = min(it, NATT - 1u) / NCH; let c = min(it, NATT - 1u) % NCH;
    let q = vec2f(ld(Q0 + h * 64u + 2u * lane), ld(Q0 + h * 64u + 2u * lane + 1u));
    var s = 0.0;
    for (var k = 0u; k < 32u; k++) {
      s += dot(unpack2x16float(pre[k]), vec2f(subgroupShuffle(q.x, k), subgroupShuffle(q.y, k)));
    }
    if (c * 32u + lane >= CTX) { s = -3.0e38; }
    let m = subgroupMax(s);
    let p = exp(s - m);
    let sum = subgroupAdd(p);
    var o = vec2f(0.0);
    for (var j = 0u; j < 32u; j++) { o += subgroupShuffle(p, j) * unpack2x16float(pre[32u + j]); }
    if (it < NATT) {
      let at = P0 + it * PW;
      if (lane == 0u) { st(at, m); st(at + 1u, sum); }
      st(at + 2u + 2u * lane, o.x);
      st(at + 3u + 2u * lane, o.y);
    }
  }
}

// y = W . staged input for the prefetched rows of one matrix: `mode` 0 writes, 1 adds to what is there.
fn matvec_out(rows: u32, blocks: u32, nri: u32, bpl: u32, dst: u32, mode: u32) {
  if ((SKIP & 1u) != 0u) { return; }
  for (var ri = 0u; ri < nri; ri++) {
    var acc = 0.0;
    let row = rg + ri * NRG;
    for (var bi = 0u; bi < bpl; bi++) {
      let blk = lane + 32u * bi;
      if (row < rows && blk < blocks) { acc += q4dot(5u * (ri * bpl + bi), blk); }
    }
    if (SHARED_SUMS) {
      part[((lid / 32u) * nri + ri) * 32u + lane] = acc;
    } else {
      let total = SUMACC;
      if (lane == 0u && row < rows) {
        if (mode == 1u) { st(dst + row, ld(dst + row) + total); } else { st(dst + row, total); }
      }
    }
  }
  if (SHARED_SUMS) {
    // Each row's 32 partial sums added by one lane, all rows of the subgroup at once.
    workgroupBarrier();
    let row = rg + lane * NRG;
    if (lane < nri && row < rows) {
      var total = 0.0;
      for (var k = 0u; k < 32u; k++) { total += part[((lid / 32u) * nri + lane) * 32u + k]; }
      if (mode == 1u) { st(dst + row, ld(dst + row) + total); } else { st(dst + row, total); }
    }
    workgroupBarrier();
  }
}

fn gate_up_out() {
  if ((SKIP & 1u) != 0u) { return; }
  for (var ri = 0u; ri < NRI_FF; ri++) {
    var g = 0.0; var u = 0.0;
    let row = rg + ri * NRG;
    for (var bi = 0u; bi < BPL_D; bi++) {
      let blk = lane + 32u * bi;
      if (row < FF && blk < D / 32u) {
        g += q4dot(5u * (2u * (ri * BPL_D + bi)), blk);
        u += q4dot(5u * (2u * (ri * BPL_D + bi) + 1u), blk);
      }
    }
    if (SHARED_SUMS) {
      part[((lid / 32u) * 2u * NRI_FF + 2u * ri) * 32u + lane] = g;
      part[((lid / 32u) * 2u * NRI_FF + 2u * ri + 1u) * 32u + lane] = u;
    } else {
      let gs = SUMG; let us = SUMU;
      if (lane == 0u && row < FF) { st(H0 + row, gs / (1.0 + exp(-gs)) * us); }
    }
  }
  if (SHARED_SUMS) {
    workgroupBarrier();
    let row = rg + lane * NRG;
    if (lane < NRI_FF && row < FF) {
      var gs = 0.0; var us = 0.0;
      for (var k = 0u; k < 32u; k++) {
        gs += part[((lid / 32u) * 2u * NRI_FF + 2u * lane) * 32u + k];
        us += part[((lid / 32u) * 2u * NRI_FF + 2u * lane + 1u) * 32u + k];
      }
      st(H0 + row, gs / (1.0 + exp(-gs)) * us);
    }
    workgroupBarrier();
  }
}

fn prefetch_qkv(l: u32) { prefetch_rows(0u, l, QKV, D / 32u, NRI_QKV, BPL_D, 1u, 0u); }
fn prefetch_o(l: u32) { prefetch_rows(1u, l, D, D / 32u, NRI_D, BPL_D, 1u, 0u); }
fn prefetch_gate_up(l: u32) {
  prefetch_rows(2u, l, FF, D / 32u, NRI_FF, BPL_D, 2u, 0u);
  prefetch_rows(3u, l, FF, D / 32u, NRI_FF, BPL_D, 2u, 1u);
}
fn prefetch_down(l: u32) { prefetch_rows(4u, l, D, FF / 32u, NRI_D, BPL_FF, 1u, 0u); }

@compute @workgroup_size(T)
fn main(@builtin(local_invocation_index) li: u32, @builtin(workgroup_id) wg: vec3u) {
  lid = li;
  lane = li % 32u;
  rg = wg.x * NSG + li / 32u;
  barriers = 0u;
  if (PREFETCH) { prefetch_qkv(0u); }
  for (var l = 0u; l < NL; l++) {
    // x -> norm -> q·k·v
    var scale = stage(X0, D, true);
    if (!PREFETCH) { prefetch_qkv(l); }
    quantize(D / 4u, scale);
    matvec_out(QKV, D / 32u, NRI_QKV, BPL_D, Q0, 0u);
    if (PREFETCH) { prefetch_attention(l); }
    grid_sync();
    // attention, a chunk of 32 keys per row group
    if (!PREFETCH) { prefetch_attention(l); }
    attention();
    if (PREFETCH) { prefetch_o(l); }
    grid_sync();
    // the chunks combined -> wo (+= x)
    stage_combined();
    if (!PREFETCH) { prefetch_o(l); }
    quantize(D / 4u, 1.0);
    matvec_out(D, D / 32u, NRI_D, BPL_D, X0, 1u);
    if (PREFETCH) { prefetch_gate_up(l); }
    grid_sync();
    // x -> norm -> gate·up, SwiGLU
    scale = stage(X0, D, true);
    if (!PREFETCH) { prefetch_gate_up(l); }
    quantize(D / 4u, scale);
    gate_up_out();
    if (PREFETCH) { prefetch_down(l); }
    grid_sync();
    // down (+= x)
    scale = stage(H0, FF, false);
    if (!PREFETCH) { prefetch_down(l); }
    quantize(FF / 4u, 1.0);
    matvec_out(D, FF / 32u, NRI_D, BPL_FF, X0, 1u);
    if (PREFETCH && l + 1u < NL) { prefetch_qkv(l + 1u); }
    grid_sync();
  }
}
)";
  const bool vec4 = v & kWide;
  gpu::wgsl_parts::replace_all(w, "WTYPE", vec4 ? "vec4u" : "u32");
  gpu::wgsl_parts::replace_all(
      w, "LOAD_BLOCK",
      vec4 ? R"(// qs as one 16-byte load, the scales of all blocks after all qs (4 a vec4)
        let qb = (l * rows + row) * blocks + blk;
        let q = wload(m, qb);
        let sc = wload(m, NL * rows * blocks + qb / 4u);
        pre[at] = q.x; pre[at + 1u] = q.y; pre[at + 2u] = q.z; pre[at + 3u] = q.w;
        pre[at + 4u] = sc[qb % 4u];)"
           : R"(let base = ((l * rows + row) * blocks + blk) * 5u;
        for (var k = 0u; k < 5u; k++) { pre[at + k] = wload(m, base + k); })");
  gpu::wgsl_parts::replace_all(w, "TRIM", v & kTrimmed ? "true" : "false");
  gpu::wgsl_parts::replace_all(w, "SHARED_SUMS", v & kSharedRowSums ? "true" : "false");
  gpu::wgsl_parts::replace_all(w, "XORDOT", v & kXorDots ? "true" : "false");
  gpu::wgsl_parts::replace_all(w, "SUMACC", v & kNoRowSums ? "acc" : "subgroupAdd(acc)");
  gpu::wgsl_parts::replace_all(w, "SUMG", v & kNoRowSums ? "g" : "subgroupAdd(g)");
  gpu::wgsl_parts::replace_all(w, "SUMU", v & kNoRowSums ? "u" : "subgroupAdd(u)");
  gpu::wgsl_parts::replace_all(w, "CONSUME", v & kConsumed ? "true" : "false");
  gpu::wgsl_parts::replace_all(w, "ACT_WORD", v & kPlainLoads ? "u32" : "atomic<u32>");
  gpu::wgsl_parts::replace_all(w, "ACT_LOAD", v & kPlainLoads ? "act[i]" : "atomicLoad(&act[i])");
  gpu::wgsl_parts::replace_all(
      w, "ACT_STORE", v & kPlainLoads ? "act[i] = bitcast<u32>(v)" : "atomicStore(&act[i], bitcast<u32>(v))");
  return w;
}

Result<double> time_token(gpu::Device& device, const gpu::Dispatch& d, int runs, gpu::BufferHandle sync) {
  std::vector<double> ms;
  const uint32_t zeros[2] = {0, 0};
  for (int batch = 0; batch < 6; ++batch) {
    const double t0 = now_ms();
    for (int r = 0; r < runs; ++r) {
      SOTTO_TRY(device.write_buffer(sync, 0, zeros, 8));
      SOTTO_TRY(device.run(std::span<const gpu::Dispatch>(&d, 1)));
    }
    SOTTO_TRY(device.wait_idle());
    if (batch > 0) ms.push_back((now_ms() - t0) / runs);
  }
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

}  // namespace

Status probe_token(gpu::Device& device) {
  if (!device.info().subgroups || !device.info().packed_dot)
    return error("gpu-probe --token: needs subgroups and dot4I8Packed");
  const bool cpu = device.info().cpu();
  const uint32_t storage = gpu::kUsageStorage | gpu::kUsageCopySrc | gpu::kUsageCopyDst;
  std::mt19937 rng(7);
  const std::vector<uint32_t> ctxs = cpu ? std::vector<uint32_t>{40} : std::vector<uint32_t>{80, 1024};
  for (uint32_t ctx : ctxs) {
    const TokenShape s = cpu ? TokenShape{1, 128, 2, 1, 256, ctx} : TokenShape{24, 896, 14, 2, 4864, ctx};
    // Weights: 5 words per Q4_0 block, random (scales included: their values do not change the time).
    const uint64_t blocks_d = s.d / 32, blocks_ff = s.ff / 32;
    const uint64_t words[5] = {s.layers * s.qkv() * blocks_d * 5, s.layers * s.d * blocks_d * 5,
                               s.layers * s.ff * blocks_d * 5, s.layers * s.ff * blocks_d * 5,
                               s.layers * s.d * blocks_ff * 5};
    gpu::BufferHandle buf[8] = {};
    uint64_t weight_bytes = 0;
    auto random_buffer = [&](uint64_t n, const char* name) -> Result<gpu::BufferHandle> {
      SOTTO_ASSIGN(gpu::BufferHandle b, device.create_buffer(n * 4, storage, name));
      std::vector<uint32_t> v(n);
      for (uint32_t& x : v) x = rng() & 0x3BFF3BFFu;  // f16 halves below 1.0: finite scales and values
      SOTTO_TRY(device.write_buffer(b, 0, v.data(), n * 4));
      return b;
    };
    for (int m = 0; m < 5; ++m) {
      SOTTO_ASSIGN(buf[m], random_buffer(words[m], "probe weights"));
      weight_bytes += words[m] * 4;
    }
    SOTTO_ASSIGN(buf[5], random_buffer(uint64_t{2} * s.layers * s.n_kv * s.ctx * 32, "probe kv"));
    const uint64_t act_words = s.d + s.qkv() + uint64_t{s.n_head} * ((s.ctx + 31) / 32) * 66 + s.ff;
    SOTTO_ASSIGN(buf[6], device.create_buffer(act_words * 4, storage, "probe activations"));
    {
      std::vector<float> x(act_words, 0.0f);
      std::uniform_real_distribution<float> u(-1.0f, 1.0f);
      for (float& v : x) v = u(rng);
      SOTTO_TRY(device.write_buffer(buf[6], 0, x.data(), act_words * 4));
    }
    SOTTO_ASSIGN(buf[7], device.create_buffer(8, storage, "probe sync"));
    std::printf("one dispatch per token, %u layers, %.1f MB of Q4_0 weights, %u keys:\n", s.layers,
                static_cast<double>(weight_bytes) / 1e6, s.ctx);
    struct Config {
      uint32_t grid, threads;
      bool prefetch;
      uint32_t variant;
    };
    // A GPU: the first cut and the best, then the best without each part (what that part costs), and other
    // grids; a CPU adapter (SwiftShader): that the kernels compile and their barriers hold, in miniature.
    std::vector<Config> configs = {{2, 128, true, 0}, {2, 128, false, kTrimmed}};
    if (!cpu && ctx == ctxs.front()) {
      configs = {{132, 256, false, 0},
                 {132, 256, true, 0},
                 {132, 256, true, kConsumed},
                 {132, 256, false, kWide},
                 {132, 256, false, kTrimmed},
                 {132, 256, false, kSharedRowSums},
                 {132, 256, false, kBest},
                 {132, 256, true, kBest | kConsumed},
                 {132, 256, false, kBest | kNoAttention | kNoStaging},
                 {132, 256, false, kBest | kNoAttention | kNoMatrices},
                 {132, 256, false, kBest | kNoStaging | kNoMatrices},
                 {132, 256, false, kNoAttention | kNoStaging | kNoMatrices},
                 {132, 512, false, kBest},
                 {264, 128, false, kBest}};
    } else if (!cpu) {
      configs = {{132, 256, false, 0}, {132, 256, false, kBest}, {132, 256, false, kBest | kNoAttention}};
    }
    for (const Config& c : configs) {
      const std::string wgsl = token_wgsl(s, c.grid, c.threads, c.prefetch, c.variant);
      const std::string what =
          cat("grid ", c.grid, " x ", c.threads, c.prefetch ? ", prefetch, " : ", ", variant_name(c.variant));
      auto p = device.create_pipeline(wgsl, "main", "probe token");
      if (!p.ok()) {
        std::printf("  %s: %s\n", what.c_str(), p.message().c_str());
        continue;
      }
      gpu::Binding b[8];
      for (uint32_t i = 0; i < 8; ++i) b[i] = {i, buf[i]};
      SOTTO_ASSIGN(gpu::BindGroupHandle g, device.create_bind_group(*p, b));
      gpu::Dispatch d;
      d.pipeline = *p;
      d.bind_group = g;
      d.groups_x = c.grid;
      SOTTO_ASSIGN(double ms, time_token(device, d, cpu ? 1 : 20, buf[7]));
      SOTTO_ASSIGN(gpu::ReadHandle r, device.start_read(buf[7], 0, 4));
      uint32_t gave_up = 0;
      if (device.finish_read(r, &gave_up) != gpu::DeviceStatus::Ok) return error(device.last_error());
      std::printf("  %-58s %8.1f us a token (%5.0f tokens/s), weights at %4.0f GB/s%s\n", what.c_str(),
                  ms * 1000.0, 1000.0 / ms, static_cast<double>(weight_bytes) / (ms * 1e6),
                  gave_up ? "  GAVE UP (not all resident)" : "");
    }
    for (gpu::BufferHandle h : buf) device.destroy_buffer(h);
  }
  return {};
}

}  // namespace sotto::probe
