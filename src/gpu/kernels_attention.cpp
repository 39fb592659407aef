// The WGSL of gpu/kernels.h's attention family: RoPE (with the per-head q/k RMSNorm before it and q's scale
// after it) plus the KV cache write, and attention over the f16 cache (optionally a sliding window), which in
// decoding does the RoPE and cache write itself (rope_head, one function for both, or rope_pairs with the same
// arithmetic for heads without the q/k norm), and with the f32 sum can split a head's keys over many workgroups
// (flash-decoding). All run 128 invocations a workgroup, the size every kernel of a layer shares.
#include "core/error.h"
#include "gpu/kernels.h"
#include "gpu/kernels_wgsl.h"

namespace sotto::gpu {

// The head at qkv[src ...] (hd_k values) into buf, normed (mode 1) and rotated for position `pos`. Shared by
// rope_kv and by attention with RoPE inside (decoding), so both give the same values bit for bit.
const char* kRopeHead = R"(
fn rope_head(lid: u32, src: u32, is_k: bool, pos: u32) {
  for (var i = lid; i < p.hd_k; i += 128u) { buf[i] = qkv[src + i]; }
  workgroupBarrier();
  // mode 1: RMSNorm over the head first (qwen3, gemma3), the sum of squares as the CPU's double one.
  // Only the first 64 invocations sum, in the 64-wide tree the kernel had at 64 invocations: the same scale
  // bit for bit.
  if ((p.mode & 1u) != 0u) {
    if (lid < 64u) {
      var ss = vec2f(0.0);
      for (var i = lid; i < p.hd_k; i += 64u) { let v = buf[i]; ss = ff_add(ss, v * v); }
      ssr[lid] = ss;
    }
    workgroupBarrier();
    for (var s = 32u; s > 0u; s >>= 1u) {
      if (lid < s) { ssr[lid] = ff_add2(ssr[lid], ssr[lid + s]); }
      workgroupBarrier();
    }
    let scale = 1.0 / sqrt(ff_mean(ssr[0], p.hd_k) + p.eps);
    for (var i = lid; i < p.hd_k; i += 128u) { buf[i] = buf[i] * scale * select(q_norm[i], k_norm[i], is_k); }
    workgroupBarrier();
  }
  let half_rot = p.n_rot / 2u;
  for (var i = lid; i < half_rot; i += 128u) {
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
}
)";

// Decoding's q and k heads of up to 128 dims without the q/k norm, rotated at once: q into buf[0 ...], k into
// buf[128 ...], invocations 0-63 taking q's pairs and 64-127 k's, each pair read from qkv and rotated with
// rope_head's arithmetic, so the values are its values bit for bit. buf is ready after the caller's barrier.
const char* kRopePairs = R"(
fn rope_pairs(lid: u32, q_src: u32, k_src: u32, pos: u32) {
  let is_k = lid >= 64u;
  let i = lid & 63u;
  let src = select(q_src, k_src, is_k);
  let dst = select(0u, 128u, is_k);
  let half_rot = p.n_rot / 2u;
  if (i < half_rot) {
    let a = select(2u * i, i, p.halves != 0u);
    let b = select(2u * i + 1u, i + half_rot, p.halves != 0u);
    let c = rope[(pos * half_rot + i) * 2u];
    let s = rope[(pos * half_rot + i) * 2u + 1u];
    let x0 = qkv[src + a];
    let x1 = qkv[src + b];
    buf[dst + a] = x0 * c - x1 * s;
    buf[dst + b] = x0 * s + x1 * c;
  }
  for (var j = p.n_rot + i; j < p.hd_k; j += 64u) { buf[dst + j] = qkv[src + j]; }  // dims past n_rot
}
)";

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
@compute @workgroup_size(128)
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
    rope_head(lid.x, src, is_k, pos);
    if (!is_k) {
      // q_scale (gemma3) after RoPE; 1 otherwise, which changes nothing.
      for (var i = lid.x; i < p.hd_k; i += 128u) { qkv[src + i] = buf[i] * p.q_scale; }
    } else {
      let dst = p.k_base + pos * p.k_row_words + (h - p.n_head) * (p.hd_k / 2u);
      for (var i = lid.x; i < p.hd_k / 2u; i += 128u) {
        kc[dst + i] = pack_f16(buf[2u * i], buf[2u * i + 1u]);
      }
    }
  } else {
    let kvh = h - p.n_head - p.n_head_kv;
    let src = v_off + kvh * p.hd_v;
    let dst = p.v_base + pos * p.v_row_words + kvh * (p.hd_v / 2u);
    for (var i = lid.x; i < p.hd_v / 2u; i += 128u) {
      vc[dst + i] = pack_f16(qkv[src + 2u * i], qkv[src + 2u * i + 1u]);
    }
  }
}
)";
  const std::string helpers = cat(wgsl_float_float(), wgsl_parts::kF16Rne, kRopeHead);
  const size_t at = src.find("FF_HELPERS");
  src.replace(at, 10, helpers);
  return src;
}

// One workgroup per query head and token; per chunk of keys (as many as 2048 K or V words hold, at most 128),
// every invocation loads up to 16 of the chunk's K words into workgroup memory and 16 V words into registers,
// all in flight together, so a chunk costs one memory latency. Then invocation j sums key j's score over the
// head dims in order, the V words replace the K words, and invocation d walks the chunk's keys in order for
// output dim d (and d + 128), the online-softmax state carried from chunk to chunk. Reads 2 * head_dim bytes
// of K and V per key; the walk, one exp per key and dim in a dependent chain, is where long contexts spend
// their time. Results bit for bit those of one walk over all the keys: the same sums in the same order.
// Decoding with the f32 sum, `split` spreads a head's keys over several such workgroups (see below).
std::string wgsl_attention(bool rope_inside, bool f32_sum, bool split) {
  std::string src = R"(
struct P { n_head: u32, n_head_kv: u32, hd_k: u32, hd_v: u32, k_row_words: u32, v_row_words: u32, k_base: u32,
           v_base: u32, scale: f32, window: u32, qkv_stride: u32, out_stride: u32, max_keys: u32,
           n_rot: u32, halves: u32, mode: u32, eps: f32, q_scale: f32, splits: u32, zero: u32 }
struct Step { pos: u32, n: u32, pad1: u32, pad2: u32 }
@group(0) @binding(0) var<uniform> p: P;
@group(0) @binding(1) var<uniform> step: Step;
@group(0) @binding(2) var<storage, read> qkv: array<f32>;
@group(0) @binding(3) var<storage, CACHE_ACCESS> kc: array<u32>;
@group(0) @binding(4) var<storage, CACHE_ACCESS> vc: array<u32>;
@group(0) @binding(5) var<storage, read_write> out: array<f32>;
ROPE_DECLS
SPLIT_DECLS
// The keys go by in chunks staged in workgroup memory: a chunk's K (or V) words, CHUNK_WORDS at most, of at most
// MAX_CHUNK keys (rows of hd/2 words each). Each invocation loads CHUNK_WORDS / 128 of them.
const CHUNK_WORDS = 2048u;
const MAX_CHUNK = 128u;
const WORDS_PER_INVOCATION = 16u;  // CHUNK_WORDS / 128
// K rows sit one word apart more than their length, so that the score loop's invocations (one key each,
// reading the same word of consecutive rows) hit different banks; V rows packed.
var<workgroup> rows: array<u32, 2176>;  // CHUNK_WORDS + MAX_CHUNK
var<workgroup> scores: array<f32, MAX_CHUNK>;
var<workgroup> qs: array<f32, 256>;
WALK_FNS
@compute @workgroup_size(128)
fn main(@builtin(local_invocation_id) lid: vec3u, @builtin(workgroup_id) wg: vec3u) {
  // Query tok of the step's n at position pos + tok: causal, it sees the keys up to its own position,
  // which rope_kv wrote for the whole prompt before. Workgroup y is the query, or (split) its share of the keys.
  let tok = TOKEN;
  if (tok >= max(step.n, 1u)) { return; }
  let pos = step.pos + tok;
  let h = wg.x;
  let kvh = h / (p.n_head / p.n_head_kv);
  let n_keys = min(pos + 1u, p.max_keys);
  // A sliding window (gemma3's local layers): position pos sees keys pos - window + 1 .. pos only.
  let first = select(0u, pos + 1u - p.window, p.window > 0u && pos + 1u > p.window);
  let k_words = p.hd_k / 2u;  // one key's K words in this head, f16 pairs
  let v_words = p.hd_v / 2u;
  let k_stride = k_words + 1u;
  let chunk = min(MAX_CHUNK, CHUNK_WORDS / max(k_words, v_words));
KEY_RANGE
  // q, to be rounded to f16 as ggml's flash attention converts it to the cache's type: loaded (or rotated)
  // here, stored with the first chunk's K rows, so its latency overlaps that chunk's loads (one memory latency
  // less per layer).
  let q_at = tok * p.qkv_stride + h * p.hd_k;
Q_SOURCE
  // The running state of output dimensions lid.x and lid.x + 128, carried from chunk to chunk.
  var st0 = vec3f(-3.4028234e38f, 0.0, 0.0);  // (max score, sum of weights, acc)
  var st1 = st0;
  for (var t0 = lo; t0 < hi; t0 += chunk) {
    let n = min(chunk, hi - t0);
    // The chunk's V and K words all requested before any is used: one memory latency per chunk, not one per
    // key or word. V waits in registers while the scores use the rows.
    var v_held: array<u32, WORDS_PER_INVOCATION>;
    for (var r = 0u; r < WORDS_PER_INVOCATION; r++) {
      let i = r * 128u + lid.x;
      if (i < n * v_words) {
        let j = i / v_words;
        V_LOAD
      }
    }
    for (var r = 0u; r < WORDS_PER_INVOCATION; r++) {
      let i = r * 128u + lid.x;
      if (i < n * k_words) {
        let j = i / k_words;
        let w = i - j * k_words;
        K_LOAD
      }
    }
    if (t0 == lo) {
      if (lid.x < p.hd_k) { qs[lid.x] = f16r(q0); }
      if (lid.x + 128u < p.hd_k) { qs[lid.x + 128u] = f16r(q1); }
    }
    workgroupBarrier();
    // Key t0 + lid.x's score, its dims summed in order.
    if (lid.x < n) {
      let k0 = lid.x * k_stride;
      var s = 0.0;
      for (var d = 0u; d < k_words; d++) {
        let kv = unpack2x16float(rows[k0 + d]);
        s += kv.x * qs[2u * d] + kv.y * qs[2u * d + 1u];
      }
      scores[lid.x] = s * p.scale;
    }
    workgroupBarrier();
    for (var r = 0u; r < WORDS_PER_INVOCATION; r++) {
      let i = r * 128u + lid.x;
      if (i < n * v_words) { rows[i] = v_held[r]; }
    }
    workgroupBarrier();
WALK
    workgroupBarrier();  // the next chunk's loads overwrite rows
  }
JOIN_SHARES
  let o = tok * p.out_stride + h * p.hd_v;
  if (lid.x < p.hd_v) { out[o + lid.x] = st0.z * select(1.0 / st0.y, 0.0, st0.y == 0.0); }
  if (lid.x + 128u < p.hd_v) { out[o + lid.x + 128u] = st1.z * select(1.0 / st1.y, 0.0, st1.y == 0.0); }
}
)";
  // The walk over a chunk's keys. f16 (the default): ggml's CPU kernel, one key after another, the running sum
  // rounded to f16 at each step, so the outputs are the CPU's bit for bit; each step waits for the previous
  // one's rounding (~90 ns a key on the H200). f32: the chunk's keys against the chunk's maximum, the sums in
  // f32, so a step is one multiply-add; not the CPU's bits (within ~1e-3 of the value scale, the f16 sum's own
  // rounding), the choice llama.cpp's GPU backends make.
  if (f32_sum) {
    wgsl_parts::replace_all(
        src, "WALK_FNS\n",
        R"(// A chunk of n keys (scores in `scores`, f16 value pairs in `rows`) into state (max, sum of weights, acc) for
// the output dimension in word `col` (its high half when odd), all in f32.
fn attend_chunk_f32(st: vec3f, n: u32, chunk_max: f32, col: u32, odd: bool, v_words: u32) -> vec3f {
  let m = max(st.x, chunk_max);
  let old_scale = exp(st.x - m);
  var sum = st.y * old_scale;
  var acc = st.z * old_scale;
  for (var j = 0u; j < n; j++) {
    let w = exp(scores[j] - m);
    let v = unpack2x16float(rows[j * v_words + col]);
    sum += w;
    acc = fma(select(v.x, v.y, odd), w, acc);
  }
  return vec3f(m, sum, acc);
}
)");
    wgsl_parts::replace_all(
        src, "WALK",
        R"(    // Online softmax in f32, rescaled once per chunk: the chunk's maximum, then one exp and one multiply-add
    // per key and output dimension, none waiting on a rounding.
    if (lid.x < p.hd_v) {
      var cm = scores[0];
      for (var j = 1u; j < n; j++) { cm = max(cm, scores[j]); }
      let odd = (lid.x & 1u) == 1u;
      st0 = attend_chunk_f32(st0, n, cm, lid.x / 2u, odd, v_words);
      if (lid.x + 128u < p.hd_v) { st1 = attend_chunk_f32(st1, n, cm, (lid.x + 128u) / 2u, odd, v_words); }
    }
)");
  } else {
    wgsl_parts::replace_all(
        src, "WALK_FNS\n",
        R"(// One key of the online softmax, as ggml's CPU kernel: st = (max score m, sum of weights, acc, the running sum
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
)");
    wgsl_parts::replace_all(
        src, "WALK",
        R"(    // Online softmax over the chunk's keys in order with the running sum of values kept in f16 (ggml's CPU
    // kernel), one output dimension per invocation.
    if (lid.x < p.hd_v) {
      let odd = (lid.x & 1u) == 1u;
      for (var j = 0u; j < n; j++) {
        let v = unpack2x16float(rows[j * v_words + lid.x / 2u]);
        st0 = attend_key(st0, scores[j], select(v.x, v.y, odd));
      }
    }
    if (lid.x + 128u < p.hd_v) {
      let odd = (lid.x & 1u) == 1u;
      for (var j = 0u; j < n; j++) {
        let v = unpack2x16float(rows[j * v_words + (lid.x + 128u) / 2u]);
        st1 = attend_key(st1, scores[j], select(v.x, v.y, odd));
      }
    }
)");
  }
  // split (decoding, the f32 sum): workgroup (h, s) walks share s of the keys, whole chunks of them, on as few
  // workgroups as that takes (at most p.splits, fixed when recorded, the shares' size set by the context at
  // each step). With more than one share, each share's state (max, sum of weights, acc) goes to `part`, and
  // the last share of the head to arrive combines them in share order: a long context's keys are read by many
  // workgroups at once rather than one chunk after another by one. The arrival counters (part's first n_head
  // words) are zero again when the combining workgroup leaves.
  if (split) {
    wgsl_parts::replace_all(src, "TOKEN", "0u");
    wgsl_parts::replace_all(src, "SPLIT_DECLS\n",
                            R"(@group(0) @binding(9) var<storage, read_write> part: array<atomic<u32>>;
var<workgroup> landed: atomic<u32>;
var<workgroup> last_share: u32;
)");
    wgsl_parts::replace_all(src, "KEY_RANGE\n", R"(  let split = wg.y;
  let per_share = (n_keys - first + p.splits - 1u) / p.splits;
  let share = max(1u, (per_share + chunk - 1u) / chunk) * chunk;
  let n_used = (n_keys - first + share - 1u) / share;
  if (split >= n_used) { return; }
  let lo = first + split * share;
  let hi = min(lo + share, n_keys);
)");
    wgsl_parts::replace_all(src, "JOIN_SHARES\n", R"(  if (n_used > 1u) {
    let at = p.n_head + (h * p.splits + split) * (p.hd_v + 2u);
    // Stored with atomic exchanges whose old values all feed the arrival count, so that no store can land
    // after it (WGSL has no device-scope fence; gpu/fusion.cpp's grid barrier does the same). p.zero is 0.
    var sink = 0u;
    if (lid.x == 0u) {
      sink = atomicExchange(&part[at], bitcast<u32>(st0.x)) ^ atomicExchange(&part[at + 1u], bitcast<u32>(st0.y));
    }
    if (lid.x < p.hd_v) { sink ^= atomicExchange(&part[at + 2u + lid.x], bitcast<u32>(st0.z)); }
    if (lid.x + 128u < p.hd_v) { sink ^= atomicExchange(&part[at + 130u + lid.x], bitcast<u32>(st1.z)); }
    atomicOr(&landed, sink);
    workgroupBarrier();
    if (lid.x == 0u) {
      let before = atomicAdd(&part[h], 1u + (atomicLoad(&landed) & p.zero));
      last_share = select(0u, 1u, before + 1u == n_used);
    }
    if (workgroupUniformLoad(&last_share) == 0u) { return; }
    if (lid.x == 0u) { atomicStore(&part[h], 0u); }
    // The shares against the largest maximum, summed in share order whichever share arrived last.
    let first_at = p.n_head + h * p.splits * (p.hd_v + 2u);
    var m = -3.4028234e38f;
    for (var s = 0u; s < n_used; s++) { m = max(m, bitcast<f32>(atomicLoad(&part[first_at + s * (p.hd_v + 2u)]))); }
    var sum = 0.0;
    var acc0 = 0.0;
    var acc1 = 0.0;
    for (var s = 0u; s < n_used; s++) {
      let b = first_at + s * (p.hd_v + 2u);
      let f = exp(bitcast<f32>(atomicLoad(&part[b])) - m);
      sum += bitcast<f32>(atomicLoad(&part[b + 1u])) * f;
      if (lid.x < p.hd_v) { acc0 += bitcast<f32>(atomicLoad(&part[b + 2u + lid.x])) * f; }
      if (lid.x + 128u < p.hd_v) { acc1 += bitcast<f32>(atomicLoad(&part[b + 130u + lid.x])) * f; }
    }
    st0 = vec3f(m, sum, acc0);
    st1 = vec3f(m, sum, acc1);
  }
)");
  } else {
    wgsl_parts::replace_all(src, "TOKEN", "wg.y");
    wgsl_parts::replace_all(src, "SPLIT_DECLS\n", "");
    wgsl_parts::replace_all(src, "KEY_RANGE\n", "  let lo = first;\n  let hi = n_keys;\n");
    wgsl_parts::replace_all(src, "JOIN_SHARES\n", "");
  }
  // The rope variant (decoding) first does rope_kv's work for this head's q and its KV head's k and v at this
  // position, with the same code: q rotated (and normed, scaled) as rope_kv would store it, k and v as the f16
  // pairs it would write. The other workgroups of the KV head take its row from cur_k / cur_v, not from the
  // cache that one of them is writing. The prompt variant has none of it (its workgroup memory and bindings
  // cost prefill ~10 % on the H200 when they were only switched off).
  if (rope_inside) {
    wgsl_parts::replace_all(src, "CACHE_ACCESS", "read_write");
    wgsl_parts::replace_all(src, "ROPE_DECLS\n", R"(@group(0) @binding(6) var<storage, read> rope: array<f32>;
@group(0) @binding(7) var<storage, read> q_norm: array<f32>;
@group(0) @binding(8) var<storage, read> k_norm: array<f32>;
var<workgroup> buf: array<f32, 256>;  // the head being rotated
var<workgroup> ssr: array<vec2f, 64>;  // the q/k norm's partial sums
var<workgroup> cur_k: array<u32, 128>;  // this position's K and V rows, f16 pairs
var<workgroup> cur_v: array<u32, 128>;
)");
    wgsl_parts::replace_all(
        src, "Q_SOURCE\n",
        R"(  // What rope_kv does for this head's q and its KV head's k and v at this position, with the same code: q
  // rotated (and normed, scaled) as it would store it, k and v as the f16 pairs it would write.
  let k_at = tok * p.qkv_stride + p.n_head * p.hd_k + kvh * p.hd_k;
  let v_at = tok * p.qkv_stride + (p.n_head + p.n_head_kv) * p.hd_k + kvh * p.hd_v;
  var q0 = 0.0;
  var q1 = 0.0;
  if (p.mode == 0u && p.hd_k <= 128u) {
    // No q/k norm and at most 64 pairs a head: q and k rotated at once (rope_pairs), each pair straight from
    // qkv: one memory latency and one barrier where rope_head takes two of each per head.
    rope_pairs(lid.x, q_at, k_at, pos);
    for (var i = lid.x; i < v_words; i += 128u) { cur_v[i] = pack_f16(qkv[v_at + 2u * i], qkv[v_at + 2u * i + 1u]); }
    workgroupBarrier();
    q0 = buf[min(lid.x, p.hd_k - 1u)] * p.q_scale;  // (q1: no dim 128 and up)
    for (var i = lid.x; i < k_words; i += 128u) { cur_k[i] = pack_f16(buf[128u + 2u * i], buf[128u + 2u * i + 1u]); }
  } else {
    rope_head(lid.x, q_at, false, pos);
    q0 = buf[min(lid.x, p.hd_k - 1u)] * p.q_scale;
    q1 = buf[min(lid.x + 128u, p.hd_k - 1u)] * p.q_scale;
    workgroupBarrier();
    rope_head(lid.x, k_at, true, pos);
    for (var i = lid.x; i < k_words; i += 128u) { cur_k[i] = pack_f16(buf[2u * i], buf[2u * i + 1u]); }
    for (var i = lid.x; i < v_words; i += 128u) { cur_v[i] = pack_f16(qkv[v_at + 2u * i], qkv[v_at + 2u * i + 1u]); }
  }
  workgroupBarrier();
  // The first query head of its KV head writes the cache row (split: its first share; workgroup y is 0 for
  // both, decoding).
  if (h % (p.n_head / p.n_head_kv) == 0u && wg.y == 0u) {
    for (var i = lid.x; i < k_words; i += 128u) { kc[p.k_base + pos * p.k_row_words + kvh * k_words + i] = cur_k[i]; }
    for (var i = lid.x; i < v_words; i += 128u) { vc[p.v_base + pos * p.v_row_words + kvh * v_words + i] = cur_v[i]; }
  }
)");
    wgsl_parts::replace_all(src, "V_LOAD", R"(if (t0 + j == pos) {
          v_held[r] = cur_v[i - j * v_words];
        } else {
          v_held[r] = vc[p.v_base + (t0 + j) * p.v_row_words + kvh * v_words + (i - j * v_words)];
        })");
    wgsl_parts::replace_all(src, "K_LOAD", R"(if (t0 + j == pos) {
          rows[j * k_stride + w] = cur_k[w];
        } else {
          rows[j * k_stride + w] = kc[p.k_base + (t0 + j) * p.k_row_words + kvh * k_words + w];
        })");
    return cat(wgsl_float_float(), wgsl_parts::kF16Rne, kRopeHead, kRopePairs, src);
  }
  wgsl_parts::replace_all(src, "CACHE_ACCESS", "read");
  wgsl_parts::replace_all(src, "ROPE_DECLS\n", "");
  wgsl_parts::replace_all(src, "Q_SOURCE\n", R"(  let q0 = qkv[q_at + min(lid.x, p.hd_k - 1u)];
  let q1 = qkv[q_at + min(lid.x + 128u, p.hd_k - 1u)];
)");
  wgsl_parts::replace_all(
      src, "V_LOAD",
      "v_held[r] = vc[p.v_base + (t0 + j) * p.v_row_words + kvh * v_words + (i - j * v_words)];");
  wgsl_parts::replace_all(
      src, "K_LOAD", "rows[j * k_stride + w] = kc[p.k_base + (t0 + j) * p.k_row_words + kvh * k_words + w];");
  return cat(wgsl_parts::kF16Rne, src);
}

}  // namespace sotto::gpu
