// The WGSL of gpu/layer_kernel.h: a llama/qwen2 decoder layer for one token as one persistent dispatch.
#include "gpu/layer_kernel.h"

#include <algorithm>
#include <cstring>

#include "core/error.h"
#include "gpu/kernels_wgsl.h"

namespace sotto::gpu {

namespace {

// Rows a group of 32 invocations sums per round (their partial sums share workgroup memory).
constexpr uint32_t kRowsPerRound = 4;

uint32_t max_chunks(const LayerKernelShape& s) {
  return (s.n_ctx + 31) / 32;
}

const char* kLayerKernel = R"(
struct Step { pos: u32, n: u32, pad1: u32, pad2: u32 }
// The layer: its barrier counter's slot in sync, and where each weight starts in W (words).
struct Layer { slot: u32, qkv: u32, wo: u32, gate: u32, up: u32, down: u32, attn_norm: u32, ffn_norm: u32,
               bias: u32, pad1: u32, pad2: u32, pad3: u32 }
@group(0) @binding(0) var<uniform> step: Step;
@group(0) @binding(1) var<uniform> layer: Layer;
@group(0) @binding(2) var<storage, read_write> sync: array<atomic<u32>>;
@group(0) @binding(3) var<storage, read_write> xa: array<atomic<u32>>;
@group(0) @binding(4) var<storage, read_write> sa: array<atomic<u32>>;
@group(0) @binding(5) var<storage, read> W: array<u32>;
@group(0) @binding(6) var<storage, read_write> kc: array<u32>;
@group(0) @binding(7) var<storage, read_write> vc: array<u32>;
@group(0) @binding(8) var<storage, read> rope: array<f32>;

const T = 256u;                  // invocations; groups of 32 ("row groups") share a row or an attention chunk
const RG = T / 32u;
const NRG = G * RG;              // row groups in the grid
const QKV = (NH + 2u * NKV) * HD;
const OUT = NH * HD;             // attention's output, wo's input
const KROW = NKV * HD / 2u;      // words of one position's k (or v) in the cache
const PW = HD + 2u;              // an attention chunk's partial result: max, sum, HD outputs
const S_PART = QKV;              // scratch: q·k·v, then the partials, then the SwiGLU product
const S_H = S_PART + NH * MAXCH * PW;
const NW = max(max(D, OUT), FF) / 4u;  // words of the widest staged input
const NWT = (NW + T - 1u) / T;
const SPIN = 1048576u;

var<workgroup> red: array<f32, T>;
var<workgroup> pr: array<f32, T>;
var<workgroup> bmax: array<atomic<u32>, NW / 8u>;
var<workgroup> xq: array<u32, NW>;
var<workgroup> xd: array<f32, NW / 8u>;
var<workgroup> part: array<f32, T * 2u * ROWS>;
var<workgroup> qs: array<f32, RG * HD>;
var<workgroup> ks: array<f32, RG * HD>;
var<workgroup> vs: array<f32, RG * HD>;
var<private> vals: array<vec4f, NWT>;
var<private> lid: u32;
var<private> lane: u32;
var<private> rgl: u32;   // this invocation's row group in the workgroup
var<private> rg: u32;    // ... in the grid
var<private> barriers: u32;
var<private> landed: u32;

fn ld_x(i: u32) -> f32 { return bitcast<f32>(atomicLoad(&xa[i])); }
fn ld_s(i: u32) -> f32 { return bitcast<f32>(atomicLoad(&sa[i])); }
// Stores are exchanges whose old values grid_sync() consumes: they have landed before the barrier's counter moves.
fn st_x(i: u32, v: f32) { landed ^= atomicExchange(&xa[i], bitcast<u32>(v)); }
fn st_s(i: u32, v: f32) { landed ^= atomicExchange(&sa[i], bitcast<u32>(v)); }

fn grid_sync() {
  if ((LEAVE_OUT & 32u) != 0u) {
    workgroupBarrier();
    return;
  }
  barriers += 1u;
  if (landed == 0x7FC00001u) { atomicAdd(&sync[0], 0u); }
  workgroupBarrier();
  storageBarrier();
  if (lid == 0u) {
    atomicAdd(&sync[layer.slot], 1u);
    var n = 0u;
    loop {
      if (atomicLoad(&sync[layer.slot]) >= barriers * G) { break; }
      n += 1u;
      if (n > SPIN) { atomicStore(&sync[0], 1u); break; }
    }
  }
  workgroupBarrier();
}

// n values of x into vals (word lid + i * T), RMS-normed with weight `which` (0 attn_norm, 1 ffn_norm).
fn stage_x(which: u32) {
  var ss = 0.0;
  for (var i = 0u; i < NWT; i++) {
    let wi = lid + i * T;
    var v = vec4f(0.0);
    if (wi < D / 4u) { v = vec4f(ld_x(4u * wi), ld_x(4u * wi + 1u), ld_x(4u * wi + 2u), ld_x(4u * wi + 3u)); }
    vals[i] = v;
    ss += dot(v, v);
  }
  red[lid] = ss;
  workgroupBarrier();
  for (var s = T / 2u; s > 0u; s >>= 1u) {
    if (lid < s) { red[lid] += red[lid + s]; }
    workgroupBarrier();
  }
  let scale = 1.0 / sqrt(red[0] / f32(D) + EPS);
  workgroupBarrier();
  for (var i = 0u; i < NWT; i++) {
    let wi = lid + i * T;
    if (wi < D / 4u) {
      let at = select(layer.ffn_norm, layer.attn_norm, which == 0u) + 4u * wi;
      let w = vec4f(bitcast<f32>(W[at]), bitcast<f32>(W[at + 1u]), bitcast<f32>(W[at + 2u]), bitcast<f32>(W[at + 3u]));
      vals[i] = vals[i] * scale * w;
    }
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

// Attention's output (OUT values) into vals: each head's chunks combined (their maxima and sums rescaled).
fn stage_attention(nch: u32) {
  for (var i = 0u; i < NWT; i++) {
    let wi = lid + i * T;
    var v = vec4f(0.0);
    if (wi < OUT / 4u) {
      let h = (4u * wi) / HD;
      let dd = (4u * wi) % HD;
      var mx = -3.0e38;
      for (var c = 0u; c < nch; c++) { mx = max(mx, ld_s(S_PART + (h * nch + c) * PW)); }
      var num = vec4f(0.0);
      var den = 0.0;
      for (var c = 0u; c < nch; c++) {
        let at = S_PART + (h * nch + c) * PW;
        let f = exp(ld_s(at) - mx);
        den += f * ld_s(at + 1u);
        num += f * vec4f(ld_s(at + 2u + dd), ld_s(at + 3u + dd), ld_s(at + 4u + dd), ld_s(at + 5u + dd));
      }
      v = num / den;
    }
    vals[i] = v;
  }
}

// vals (nw words) into q8_0 blocks in xq / xd, as the separate kernels' quantizer (kQuantizeQ8_0).
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
      let d = bitcast<f32>(atomicLoad(&bmax[wi / 8u])) / 127.0;
      let id = select(0.0, 1.0 / d, d != 0.0);
      var word = 0u;
      for (var e = 0u; e < 4u; e++) {
        let v = vals[i][e];
        let a = abs(v * id);
        var r = floor(a);
        if (a - r >= 0.5) { r += 1.0; }
        word |= (bitcast<u32>(i32(select(r, -r, v < 0.0))) & 0xFFu) << (8u * e);
      }
      xq[wi] = word;
      if (wi % 8u == 0u) { xd[wi / 8u] = f16r(d); }
    }
  }
  workgroupBarrier();
}

// Rows of one matrix from the staged input: round r, row group rg takes rows (r * ROWS + k) * NRG + rg.
MATVECS

fn rope_at(base: u32, d: u32, pos: u32) -> f32 {
  if (d >= NROT) { return ld_s(base + d); }
  let half_rot = NROT / 2u;
  var i: u32; var a: u32; var b: u32;
  if (HALVES) { i = d % half_rot; a = i; b = i + half_rot; } else { i = d / 2u; a = 2u * i; b = 2u * i + 1u; }
  let c = rope[(pos * half_rot + i) * 2u];
  let s = rope[(pos * half_rot + i) * 2u + 1u];
  let x0 = ld_s(base + a);
  let x1 = ld_s(base + b);
  return select(x0 * s + x1 * c, x0 * c - x1 * s, d == a);
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
    for (var d = lane; d < HD; d += 32u) {
      qs[rgl * HD + d] = f16r(rope_at(h * HD, d, pos));
      if (last) {
        ks[rgl * HD + d] = f16r(rope_at((NH + kvh) * HD, d, pos));
        vs[rgl * HD + d] = f16r(ld_s((NH + NKV + kvh) * HD + d));
      }
    }
    workgroupBarrier();
    if (valid && last && h % (NH / NKV) == 0u) {  // the current position's row of the cache, once per KV head
      for (var w = lane; w < HD / 2u; w += 32u) {
        kc[pos * KROW + kvh * (HD / 2u) + w] = pack_f16(ks[rgl * HD + 2u * w], ks[rgl * HD + 2u * w + 1u]);
        vc[pos * KROW + kvh * (HD / 2u) + w] = pack_f16(vs[rgl * HD + 2u * w], vs[rgl * HD + 2u * w + 1u]);
      }
    }
    // A key per invocation: its score. The key's words are loaded first, all at once (a loop that used each
    // word as it came waited for 32 memory latencies in turn: attention was half the layer). Keys past pos read
    // row pos (any finite values: their weight is 0); the key at pos, being written now, comes from ks.
    let j = c * 32u + lane;
    let kbase = min(j, pos) * KROW + kvh * (HD / 2u);
    var kw: array<u32, HD / 2u>;
    for (var w = 0u; w < HD / 2u; w++) { kw[w] = kc[kbase + w]; }
    var acc = 0.0;
    for (var w = 0u; w < HD / 2u; w++) {
      let k = select(unpack2x16float(kw[w]), vec2f(ks[rgl * HD + 2u * w], ks[rgl * HD + 2u * w + 1u]), j == pos);
      acc += qs[rgl * HD + 2u * w] * k.x + qs[rgl * HD + 2u * w + 1u] * k.y;
    }
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
    // A dimension per invocation: the chunk's weighted values, its 32 value words loaded first (as the keys').
    for (var r = 0u; r < (HD + 31u) / 32u; r++) {
      let d = lane + 32u * r;
      let dc = min(d, HD - 1u);
      var vw: array<u32, 32>;
      for (var k = 0u; k < 32u; k++) { vw[k] = vc[min(c * 32u + k, pos) * KROW + kvh * (HD / 2u) + dc / 2u]; }
      var o = 0.0;
      for (var k = 0u; k < 32u; k++) {
        let key = c * 32u + k;
        let pair = unpack2x16float(vw[k]);
        let v = select(select(pair.x, pair.y, (dc & 1u) == 1u), vs[rgl * HD + dc], key == pos);
        o += pr[rgl * 32u + k] * select(0.0, v, key <= pos);
      }
      if (valid && d < HD) { st_s(S_PART + it * PW + 2u + d, o); }
    }
    if (valid && lane == 0u) {
      st_s(S_PART + it * PW, m);
      st_s(S_PART + it * PW + 1u, l);
    }
    workgroupBarrier();
  }
}

@compute @workgroup_size(256)
fn main(@builtin(local_invocation_index) li: u32, @builtin(workgroup_id) wg: vec3u) {
  lid = li;
  lane = li % 32u;
  rgl = li / 32u;
  rg = wg.x * RG + rgl;
  barriers = 0u;
  landed = 0u;
  let pos = step.pos;
  let nch = pos / 32u + 1u;
  // q, k, v = Wqkv . rms_norm(x) (+ bias)
  if ((LEAVE_OUT & 1u) == 0u) {
    stage_x(0u);
    quantize(D / 4u);
    mv_qkv();
  }
  grid_sync();
  if ((LEAVE_OUT & 2u) == 0u) { attention(pos, nch); }
  grid_sync();
  // x += Wo . attention
  if ((LEAVE_OUT & 4u) == 0u) {
    stage_attention(nch);
    quantize(OUT / 4u);
    mv_wo();
  }
  grid_sync();
  // h = silu(Wg . rms_norm(x)) * (Wu . rms_norm(x))
  if ((LEAVE_OUT & 8u) == 0u) {
    stage_x(1u);
    quantize(D / 4u);
    mv_gate_up();
  }
  grid_sync();
  // x += Wd . h
  if ((LEAVE_OUT & 16u) == 0u) {
    stage_h();
    quantize(FF / 4u);
    mv_down();
  }
}
)";

// One matrix's rows from the staged input; OUTPUT stores row `row`'s sum `s` (and `s2`, the up matrix's, for
// gate·up).
const char* kMatvec = R"(
fn NAME() {
  let rounds = (ROWS_TOTAL + NRG * ROWS - 1u) / (NRG * ROWS);
  for (var r = 0u; r < rounds; r++) {
    for (var k = 0u; k < ROWS; k++) {
      let row = (r * ROWS + k) * NRG + rg;
      var acc = 0.0;
      var acc2 = 0.0;
      if (row < ROWS_TOTAL) {
        for (var sb = lane; sb < NSUB; sb += 32u) {
          acc += sub_dotSFX(row * ROW_WORDS, sb);
          ACC2
        }
      }
      part[(rgl * 2u * ROWS + 2u * k) * 32u + lane] = acc;
      part[(rgl * 2u * ROWS + 2u * k + 1u) * 32u + lane] = acc2;
    }
    workgroupBarrier();
    if (lane < ROWS) {
      let row = (r * ROWS + lane) * NRG + rg;
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

}  // namespace

bool layer_kernel_supports(DType w) {
  return w == DType::Q4_0 || w == DType::Q5_0 || w == DType::Q8_0;
}

uint64_t layer_kernel_scratch_words(const LayerKernelShape& s) {
  return uint64_t{s.n_head + 2 * s.n_kv} * s.hd + uint64_t{s.n_head} * max_chunks(s) * (s.hd + 2) + s.ff;
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
  std::string src =
      cat(wgsl_parts::wgsl_enables(f, true, false), "const G = ", s.grid, "u;\nconst D = ", s.d,
          "u;\nconst NH = ", s.n_head, "u;\nconst NKV = ", s.n_kv, "u;\nconst HD = ", s.hd,
          "u;\nconst NROT = ", s.n_rot, "u;\nconst FF = ", s.ff, "u;\nconst MAXCH = ", max_chunks(s),
          "u;\nconst LEAVE_OUT = ", s.leave_out, "u;\nconst ROWS = ", kRowsPerRound,
          "u;\nconst HALVES = ", s.rope_halves ? "true" : "false", ";\nconst EPS = ", eps,
          ";\nconst SCALE = ", scale, ";\n");
  src += wgsl_parts::f16_helpers(f);
  src += f.packed_dot ? wgsl_parts::kDot4Packed : wgsl_parts::kDot4Fallback;
  src += wgsl_parts::kDotHelpers;
  auto sub_dot = [&](DType w, std::string_view offset, std::string_view suffix) {
    std::string sub = wgsl_parts::sub_dot_source(w);
    replace_all(sub, "WBUF[", cat("W[layer.", offset, " + "));
    replace_all(sub, "SFX(", cat(suffix, "("));
    return sub;
  };
  src += sub_dot(s.qkv, "qkv", "_qkv") + sub_dot(s.wo, "wo", "_o") + sub_dot(s.gate, "gate", "_g") +
         sub_dot(s.gate, "up", "_u") + sub_dot(s.down, "down", "_d");
  auto matvec = [&](std::string_view name, std::string_view rows, uint32_t cols, uint32_t row_words,
                    std::string_view suffix, bool up, std::string_view output) {
    std::string m = kMatvec;
    replace_all(m, "NAME", name);
    replace_all(m, "ROWS_TOTAL", rows);
    replace_all(m, "NSUB", cat(cols / 32, "u"));
    replace_all(m, "ROW_WORDS", cat(row_words, "u"));
    replace_all(m, "SFX", suffix);
    replace_all(m, "ACC2", up ? "acc2 += sub_dot_u(row * ROW_WORDS_U, sb);" : "");
    replace_all(m, "ROW_WORDS_U", cat(row_words, "u"));
    replace_all(m, "OUTPUT", output);
    return m;
  };
  std::string matvecs =
      matvec("mv_qkv", "QKV", s.d, s.qkv_words, "_qkv", false,
             s.bias ? "st_s(row, s + bitcast<f32>(W[layer.bias + row]));" : "st_s(row, s);") +
      matvec("mv_wo", "D", s.n_head * s.hd, s.wo_words, "_o", false, "st_x(row, ld_x(row) + s);") +
      matvec("mv_gate_up", "FF", s.d, s.gate_words, "_g", true,
             "st_s(S_H + row, s / (1.0 + exp(-s)) * s2);") +
      matvec("mv_down", "D", s.ff, s.down_words, "_d", false, "st_x(row, ld_x(row) + s);");
  std::string body = kLayerKernel;
  replace_all(body, "MATVECS", matvecs);
  return src + body;
}

}  // namespace sotto::gpu
