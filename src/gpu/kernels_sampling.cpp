// The WGSL of gpu/kernels.h's sampler: the CPU Sampler's chain (models/llm/sampler.cpp: repetition penalty ->
// top-k -> top-p -> min-p -> temperature -> draw) in two passes over the logits, so that the chosen token is
// written into the token buffer and only its 4-byte id is ever read back.
//
// The sampling state (a storage buffer the CPU writes before each choice, 32 bytes + 4 per recent id):
//   word 0 u          the uniform draw in [0, 1), from the CPU Sampler's own generator
//   word 1 k          candidates kept (top_k, or the vocabulary when smaller), 1 ..= max_k
//   word 2 flags      1: greedy (the best after the penalty), 2: top-p on, 4: min-p on
//   word 3 temperature, word 4 top_p, word 5 log(min_p) (computed by the CPU, so min-p's threshold is the
//   CPU's own float sum), word 6 repeat_penalty (1: off)
//   word 7 n_recent, words 8.. the distinct recent ids the penalty applies to
#include "core/error.h"
#include "gpu/kernels.h"

namespace sotto::gpu {

namespace {

void replace_all(std::string& s, std::string_view from, std::string_view to) {
  for (size_t at = s.find(from); at != std::string::npos; at = s.find(from, at + to.size()))
    s.replace(at, from.size(), to);
}

// The CPU sampler's total order: larger logit first, the lower id on ties; NONE (an empty slot) is last.
const char* kSampleOrder = R"(
const NONE = 0xFFFFFFFFu;
fn better(av: f32, ai: u32, bv: f32, bi: u32) -> bool {
  return ai != NONE && (bi == NONE || av > bv || (av == bv && ai < bi));
}
)";

}  // namespace

// Pass 1: one workgroup of 256 invocations per 1024 logits. The logits go to workgroup memory, the
// repetition penalty is applied there (the recent ids are distinct, so no two invocations touch one value),
// a bitonic sort orders the 1024 best first (55 barrier-separated stages, two compare-exchanges per
// invocation each), and the first k become this group's candidates: (logit bits, id) pairs at
// cand[2 * (group * max_k + r)]. Reads 4 KiB of logits per group; the sort is the time.
std::string wgsl_sample_candidates() {
  std::string src = R"(
struct P { n: u32, max_k: u32, pad0: u32, pad1: u32 }
@group(0) @binding(0) var<uniform> p: P;
@group(0) @binding(1) var<storage, read> logits: array<f32>;
@group(0) @binding(2) var<storage, read> st: array<u32>;
@group(0) @binding(3) var<storage, read_write> cand: array<u32>;
var<workgroup> sv: array<f32, 1024>;
var<workgroup> si: array<u32, 1024>;
SAMPLE_ORDER
@compute @workgroup_size(256)
fn main(@builtin(local_invocation_id) lid: vec3u, @builtin(workgroup_id) wg: vec3u) {
  let base = wg.x * 1024u;
  for (var k = 0u; k < 4u; k++) {
    let i = k * 256u + lid.x;
    if (base + i < p.n) { sv[i] = logits[base + i]; si[i] = base + i; } else { sv[i] = 0.0; si[i] = NONE; }
  }
  workgroupBarrier();
  // Divide positive / multiply negative logits of the recent tokens, as the CPU.
  let penalty = bitcast<f32>(st[6]);
  let end = min(base + 1024u, p.n);
  for (var j = lid.x; j < st[7]; j += 256u) {
    let id = st[8u + j];
    if (id >= base && id < end) {
      let l = sv[id - base];
      sv[id - base] = select(l * penalty, l / penalty, l > 0.0);
    }
  }
  workgroupBarrier();
  for (var size = 2u; size <= 1024u; size <<= 1u) {
    for (var stride = size >> 1u; stride > 0u; stride >>= 1u) {
      for (var t = 0u; t < 2u; t++) {
        let pair = t * 256u + lid.x;
        let i = 2u * stride * (pair / stride) + pair % stride;
        let j = i + stride;
        // Runs with bit `size` clear end best first, the others worst first; the last run is all 1024.
        let best_first = (i & size) == 0u;
        let swap = select(better(sv[i], si[i], sv[j], si[j]), better(sv[j], si[j], sv[i], si[i]), best_first);
        if (swap) {
          let v = sv[i]; sv[i] = sv[j]; sv[j] = v;
          let d = si[i]; si[i] = si[j]; si[j] = d;
        }
      }
      workgroupBarrier();
    }
  }
  for (var r = lid.x; r < st[1]; r += 256u) {
    let at = 2u * (wg.x * p.max_k + r);
    cand[at] = bitcast<u32>(sv[r]);
    cand[at + 1u] = si[r];
  }
}
)";
  replace_all(src, "SAMPLE_ORDER", kSampleOrder);
  return src;
}

// Pass 2: one workgroup of 256. Merges the groups' sorted candidate lists (invocation t holds list t's
// head: at most 256 groups) by k rounds of "best head wins, its list advances" (a tree reduction each) into
// the k best overall. Then one invocation runs the CPU Sampler's arithmetic on them in the CPU's order: softmax with the
// max subtracted and exp in f32, its double sum kept as a float-float pair, top-p's double running sum
// likewise, min-p as logit >= top + log(min_p), softmax at the temperature, and the walk of the f32
// cumulative distribution until u < cumulative. The rounds are the cost: ~1.45 us each on an H200 (the tail
// at top_k 40 over 151936 logits: ~100 us; the argmax: ~11 us); two barriers a round instead of the tree's
// nine measured the same.
std::string wgsl_sample_draw() {
  std::string src = R"(
struct P { n_groups: u32, max_k: u32, pad0: u32, pad1: u32 }
@group(0) @binding(0) var<uniform> p: P;
@group(0) @binding(1) var<storage, read> cand: array<u32>;
@group(0) @binding(2) var<storage, read> st: array<u32>;
@group(0) @binding(3) var<storage, read_write> tok: array<u32>;
var<workgroup> rv: array<f32, 256>;
var<workgroup> ri: array<u32, 256>;
var<workgroup> kv: array<f32, MAX_K>;
var<workgroup> ki: array<u32, MAX_K>;
var<workgroup> kp: array<f32, MAX_K>;
SAMPLE_ORDER
FF_HELPERS
// kp[c] = exp((kv[c] - kv[0]) / temperature) / sum, the sum as the CPU's double one (float-float here).
fn softmax(keep: u32, temperature: f32) {
  let top = kv[0];
  var sum = vec2f(0.0);
  for (var c = 0u; c < keep; c++) {
    let e = exp((kv[c] - top) / temperature);
    kp[c] = e;
    sum = ff_add(sum, e);
  }
  for (var c = 0u; c < keep; c++) {
    let q = kp[c] / sum.x;
    kp[c] = q + (fma(-q, sum.x, kp[c]) - q * sum.y) / sum.x;
  }
}
@compute @workgroup_size(256)
fn main(@builtin(local_invocation_id) lid: vec3u) {
  let k = st[1];
  // Invocation t holds list t's head and the element after it in registers (scalars: an array indexed at run
  // time would live in slow local memory); the list a candidate came from is its id / 1024.
  var hv = 0.0;
  var hi = NONE;
  var nv = 0.0;
  var ni = NONE;
  var cursor = 0u;
  if (lid.x < p.n_groups) {
    let at = 2u * lid.x * p.max_k;
    hv = bitcast<f32>(cand[at]); hi = cand[at + 1u];
    if (k > 1u) { nv = bitcast<f32>(cand[at + 2u]); ni = cand[at + 3u]; }
  }
  for (var r = 0u; r < k; r++) {
    rv[lid.x] = hv; ri[lid.x] = hi;
    workgroupBarrier();
    for (var s = 128u; s > 0u; s >>= 1u) {
      if (lid.x < s && better(rv[lid.x + s], ri[lid.x + s], rv[lid.x], ri[lid.x])) {
        rv[lid.x] = rv[lid.x + s]; ri[lid.x] = ri[lid.x + s];
      }
      workgroupBarrier();
    }
    let winner = ri[0];
    if (lid.x == 0u) { kv[r] = rv[0]; ki[r] = winner; }
    if (winner != NONE && winner / 1024u == lid.x) {  // this list advances; fetch the one after for later
      hv = nv; hi = ni; ni = NONE;
      cursor += 1u;
      if (cursor + 1u < k) {
        let at = 2u * (lid.x * p.max_k + cursor + 1u);
        nv = bitcast<f32>(cand[at]); ni = cand[at + 1u];
      }
    }
    workgroupBarrier();  // every invocation has read round r's winner before round r + 1 overwrites it
  }
  if (lid.x != 0u) { return; }
  let flags = st[2];
  if ((flags & 1u) != 0u) { tok[0] = ki[0]; return; }
  var keep = k;
  if ((flags & 2u) != 0u) {  // the smallest prefix whose probability reaches top_p
    softmax(keep, 1.0);
    let top_p = bitcast<f32>(st[4]);
    var cumulative = vec2f(0.0);
    var n = 0u;
    loop {
      if (n >= keep) { break; }
      cumulative = ff_add(cumulative, kp[n]);
      n++;
      if (cumulative.x > top_p || (cumulative.x == top_p && cumulative.y >= 0.0)) { break; }
    }
    keep = max(n, 1u);
  }
  if ((flags & 4u) != 0u) {  // p_i >= min_p * p_max  <=>  logit_i >= logit_max + log(min_p)
    let threshold = kv[0] + bitcast<f32>(st[5]);
    var n = 1u;
    loop {
      if (n >= keep || kv[n] < threshold) { break; }
      n++;
    }
    keep = n;
  }
  softmax(keep, bitcast<f32>(st[3]));
  let u = bitcast<f32>(st[0]);
  var cumulative = 0.0;
  for (var c = 0u; c < keep; c++) {
    cumulative += kp[c];
    if (u < cumulative) { tok[0] = ki[c]; return; }
  }
  tok[0] = ki[keep - 1u];  // u fell in the rounding gap at the top
}
)";
  replace_all(src, "SAMPLE_ORDER", kSampleOrder);
  replace_all(src, "FF_HELPERS", wgsl_float_float());
  replace_all(src, "MAX_K", cat(kSampleMaxTopK));
  return src;
}

}  // namespace sotto::gpu
