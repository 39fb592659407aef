// Parakeet's greedy TDT loop on the GPU with no read back per step. The host's loop (asr::tdt_greedy, the
// reference) reads the joint's logits at every step to choose the token and the frame advance: ~113 submits and
// waits for a 6 s clip, most of the whole transcription's time on an H200. Here the loop's state (frame, symbols
// on this frame, whether a token was emitted, the last token, the tokens so far) lives in a GPU buffer and every
// step is the same five kernels: the joint's logits at the state's frame, the pick (both argmaxes and the loop's
// bookkeeping, one workgroup), then the prediction net (each LSTM layer's gates, its cell update, the
// projection), which runs only when the pick emitted a token. The host records steps in batches as long as the
// frames left (each step advances a frame or emits a token) and reads the state after each batch: a handful of
// reads, not one per step. Steps past the end do nothing.
#include <algorithm>
#include <cstring>
#include <vector>

#include "nn/gpu_ops.h"
#include "nn/gpu_recorder.h"
#include "nn/gpu_wgsl.h"

namespace sotto::nn::gpu_ops {

namespace {

// The state buffer's words.
enum : uint32_t { kFrame, kSymbols, kEmitted, kToken, kCount, kDone, kStateWords = 8 };

#define NN_WGSL_TDT_STATE                                                                           \
  "const FRAME = 0u; const SYMBOLS = 1u; const EMITTED = 2u; const TOKEN = 3u; const COUNT = 4u;\n" \
  "const DONE = 5u;\n"

// The joint's logits at the state's frame: y[r] = w[r] . relu(enc[frame] + g) + b[r], a workgroup per row.
// After the end the frame is clamped (the pick ignores those steps).
constexpr const char* kTdtJoint = NN_WGSL_REDUCE NN_WGSL_TDT_STATE R"(
struct P { rows: u32, h: u32, frames: u32, pad: u32 };
@group(0) @binding(0) var<uniform> p: P;
@group(0) @binding(1) var<storage, read> st: array<u32>;
@group(0) @binding(2) var<storage, read> enc: array<f32>;
@group(0) @binding(3) var<storage, read> g: array<f32>;
@group(0) @binding(4) var<storage, read> w: array<f32>;
@group(0) @binding(5) var<storage, read> b: array<f32>;
@group(0) @binding(6) var<storage, read_write> y: array<f32>;
@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let r = row_of(wid);
  if (r >= p.rows) { return; }
  let e = min(st[FRAME], p.frames - 1u) * p.h;
  var s = 0.0;
  for (var k = lid; k < p.h; k += 64u) { s += w[r * p.h + k] * max(enc[e + k] + g[k], 0.0); }
  s = reduce_sum(s, lid);
  if (lid == 0u) { y[r] = s + b[r]; }
}
)";

// One step's choice and bookkeeping, as asr::tdt_greedy: the first maximum of the token logits and of the
// duration logits; a token other than blank is logged (token, frame, duration) and marked emitted for the
// prediction net; blank with duration 0 moves one frame; at most max_symbols tokens on one frame. A non-finite
// maximum counts as blank with duration 1 (as the host's step).
constexpr const char* kTdtPick = NN_WGSL_TDT_STATE R"(
struct P { vocab: u32, n_durations: u32, blank: u32, frames: u32, max_symbols: u32, cap: u32, pad0: u32,
           pad1: u32, durations: array<vec4<u32>, 2> };
@group(0) @binding(0) var<uniform> p: P;
@group(0) @binding(1) var<storage, read_write> st: array<u32>;
@group(0) @binding(2) var<storage, read> logits: array<f32>;
@group(0) @binding(3) var<storage, read_write> out_log: array<u32>;
var<workgroup> best_v: array<f32, 256>;
var<workgroup> best_i: array<u32, 256>;
var<workgroup> done: u32;
fn better(v: f32, i: u32, bv: f32, bi: u32) -> bool { return v > bv || (v == bv && i < bi); }
// The first maximum of logits[begin, end), over the workgroup.
fn first_max(begin: u32, end: u32, lid: u32) -> u32 {
  var bv = -3.4e38;
  var bi = end;
  for (var i = begin + lid; i < end; i += 256u) {
    let v = logits[i];
    if (bi == end || v > bv) { bv = v; bi = i; }
  }
  best_v[lid] = bv;
  best_i[lid] = bi;
  workgroupBarrier();
  for (var s = 128u; s > 0u; s >>= 1u) {
    if (lid < s && best_i[lid + s] != end && (best_i[lid] == end || better(best_v[lid + s], best_i[lid + s], best_v[lid], best_i[lid]))) {
      best_v[lid] = best_v[lid + s];
      best_i[lid] = best_i[lid + s];
    }
    workgroupBarrier();
  }
  let r = best_i[0];
  workgroupBarrier();
  return r;
}
@compute @workgroup_size(256)
fn main(@builtin(local_invocation_index) lid: u32) {
  if (lid == 0u) { done = st[DONE]; }
  if (workgroupUniformLoad(&done) != 0u) { return; }
  let tok = first_max(0u, p.vocab, lid);
  let dur = first_max(p.vocab, p.vocab + p.n_durations, lid) - p.vocab;
  if (lid != 0u) { return; }
  var token = tok;
  var d = p.durations[dur / 4u][dur % 4u];
  let v = logits[tok];
  if (v != v || abs(v) > 3.4e38) { token = p.blank; d = 1u; }
  var symbols = st[SYMBOLS];
  let t = st[FRAME];
  st[EMITTED] = 0u;
  if (token != p.blank) {
    let n = st[COUNT];
    if (n < p.cap) {
      out_log[3u * n] = token;
      out_log[3u * n + 1u] = t;
      out_log[3u * n + 2u] = d;
      st[COUNT] = n + 1u;
    }
    st[EMITTED] = 1u;
    st[TOKEN] = token;
    symbols += 1u;
  } else if (d == 0u) {
    d = 1u;
  }
  if (d == 0u && symbols >= p.max_symbols) { d = 1u; }
  if (d > 0u) { symbols = 0u; }
  st[SYMBOLS] = symbols;
  st[FRAME] = t + d;
  if (t + d >= p.frames) { st[DONE] = 1u; }
}
)";

// The prediction net's products, when the pick emitted a token: z[r] = w1[r] . v1 + w2[r] . v2 + b[r], a
// workgroup per row. v1 is the embedding's row of the state's token when `embed` is set (the first LSTM layer's
// input); without a second pair k2 is 0.
constexpr const char* kTdtGates = NN_WGSL_REDUCE NN_WGSL_TDT_STATE R"(
struct P { rows: u32, k1: u32, k2: u32, embed: u32 };
@group(0) @binding(0) var<uniform> p: P;
@group(0) @binding(1) var<storage, read> st: array<u32>;
@group(0) @binding(2) var<storage, read> w1: array<f32>;
@group(0) @binding(3) var<storage, read> v1: array<f32>;
@group(0) @binding(4) var<storage, read> w2: array<f32>;
@group(0) @binding(5) var<storage, read> v2: array<f32>;
@group(0) @binding(6) var<storage, read> b: array<f32>;
@group(0) @binding(7) var<storage, read_write> z: array<f32>;
var<workgroup> emitted: u32;
@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
  let r = row_of(wid);
  if (r >= p.rows) { return; }
  if (lid == 0u) { emitted = st[EMITTED]; }
  if (workgroupUniformLoad(&emitted) == 0u) { return; }
  var off = 0u;
  if (p.embed != 0u) { off = st[TOKEN] * p.k1; }
  var s = 0.0;
  for (var k = lid; k < p.k1; k += 64u) { s += w1[r * p.k1 + k] * v1[off + k]; }
  for (var k = lid; k < p.k2; k += 64u) { s += w2[r * p.k2 + k] * v2[k]; }
  s = reduce_sum(s, lid);
  if (lid == 0u) { z[r] = s + b[r]; }
}
)";

// The LSTM cell from its gates z [4H] (i, f, g, o), when the pick emitted a token: c and h updated in place.
constexpr const char* kTdtCell = NN_WGSL_INDEX NN_WGSL_TDT_STATE R"(
struct P { h: u32, pad0: u32, pad1: u32, pad2: u32 };
@group(0) @binding(0) var<uniform> p: P;
@group(0) @binding(1) var<storage, read> st: array<u32>;
@group(0) @binding(2) var<storage, read> z: array<f32>;
@group(0) @binding(3) var<storage, read_write> c: array<f32>;
@group(0) @binding(4) var<storage, read_write> h: array<f32>;
fn sigmoid(x: f32) -> f32 { return 1.0 / (1.0 + exp(-x)); }
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  let j = index(gid);
  if (j >= p.h || st[EMITTED] == 0u) { return; }
  let c_new = sigmoid(z[p.h + j]) * c[j] + sigmoid(z[j]) * tanh(clamp(z[2u * p.h + j], -15.0, 15.0));
  c[j] = c_new;
  h[j] = sigmoid(z[3u * p.h + j]) * tanh(clamp(c_new, -15.0, 15.0));
}
)";

uint32_t u32(int64_t v) {
  return static_cast<uint32_t>(v);
}

}  // namespace

Result<TdtDecoded> tdt_greedy(const Tensor& enc_proj, const TdtDecoder& d) {
  Context& ctx = enc_proj.ctx();
  GpuRecorder& rec = *ctx.gpu();
  const int64_t frames = enc_proj.dim(0), H = enc_proj.dim(1), V = d.vocab_size, R = d.joint_w.dim(0),
                n_durations = R - V;
  if (frames == 0) return TdtDecoded{};
  if (n_durations < 1 || n_durations > 8 || static_cast<int64_t>(d.durations.size()) != n_durations ||
      d.embedding.dim(1) != H || d.lstm.empty() || d.joint_w.dim(1) != H)
    return error("tdt_greedy on the GPU: the joint's shapes do not match the decoder's");
  for (const LstmWeights& l : d.lstm)
    if (l.int8() || !l.b.defined() || l.w_hh.dim(1) != H || l.w_ih.dim(1) != H)
      return error("tdt_greedy on the GPU: LSTM layers must be f32 with a bias and hidden size ", H);
  // Tokens: at most max_symbols on each frame.
  const int64_t cap = frames * std::max(1, d.max_symbols_per_step);
  std::vector<uint32_t> init(kStateWords, 0);
  init[kEmitted] = 1;  // the start: the prediction net runs once on blank
  init[kToken] = u32(d.blank_id);
  Tensor state = ctx.from_bytes({kStateWords}, DType::I32,
                                {reinterpret_cast<const uint8_t*>(init.data()), init.size() * 4});
  Tensor log = ctx.zeros({cap * 3}, DType::I32);
  std::vector<Tensor> h, c;
  for (size_t i = 0; i < d.lstm.size(); ++i) h.push_back(ctx.zeros({H})), c.push_back(ctx.zeros({H}));
  Tensor z = ctx.empty({4 * H}), g = ctx.empty({H}), logits = ctx.empty({R});

  const uint32_t joint_p[] = {u32(R), u32(H), u32(frames), 0};
  std::vector<uint32_t> pick_p = {u32(V),
                                  u32(n_durations),
                                  u32(d.blank_id),
                                  u32(frames),
                                  u32(std::max(1, d.max_symbols_per_step)),
                                  u32(cap),
                                  0,
                                  0};
  for (int i = 0; i < 8; ++i)
    pick_p.push_back(i < n_durations ? u32(d.durations[static_cast<size_t>(i)]) : 0);
  const uint32_t cell_p[] = {u32(H), 0, 0, 0};
  auto net = [&] {  // the prediction net on the state's token (when emitted)
    for (size_t i = 0; i < d.lstm.size(); ++i) {
      const LstmWeights& l = d.lstm[i];
      const uint32_t gates_p[] = {u32(4 * H), u32(H), u32(H), i == 0 ? 1u : 0u};
      const Tensor& input = i == 0 ? d.embedding : h[i - 1];
      rec.dispatch("nn_tdt_gates", kTdtGates, gates_p, {&state, &l.w_ih, &input, &l.w_hh, &h[i], &l.b, &z},
                   static_cast<uint64_t>(4 * H * 64));
      rec.dispatch("nn_tdt_cell", kTdtCell, cell_p, {&state, &z, &c[i], &h[i]}, static_cast<uint64_t>(H));
    }
    const uint32_t proj_p[] = {u32(H), u32(H), 0, 0};
    rec.dispatch("nn_tdt_gates", kTdtGates, proj_p,
                 {&state, &d.proj_w, &h.back(), &d.proj_w, &h.back(), &d.proj_b, &g},
                 static_cast<uint64_t>(H * 64));
  };
  net();
  // Each step advances a frame or emits a token, at most max_symbols tokens a frame: this many steps end it.
  const int64_t max_steps = frames * (std::max(1, d.max_symbols_per_step) + 1) + 1;
  int64_t steps = 0, frame = 0;
  std::vector<uint32_t> st(kStateWords, 0);
  while (true) {
    const int64_t batch = std::max<int64_t>(4, frames - frame);
    for (int64_t s = 0; s < batch; ++s) {
      rec.dispatch("nn_tdt_joint", kTdtJoint, joint_p,
                   {&state, &enc_proj, &g, &d.joint_w, &d.joint_b, &logits}, static_cast<uint64_t>(R * 64));
      rec.dispatch("nn_tdt_pick", kTdtPick, pick_p, {&state, &logits, &log}, 64);  // one workgroup of 256
      net();
    }
    steps += batch;
    SOTTO_ASSIGN(std::vector<uint8_t> bytes, ctx.to_bytes(state));
    std::memcpy(st.data(), bytes.data(), kStateWords * 4);
    frame = st[kFrame];
    if (st[kDone] != 0) break;
    if (steps >= max_steps) return error("tdt_greedy on the GPU: the loop did not reach the last frame");
  }
  TdtDecoded out;
  const int64_t n = std::min<int64_t>(st[kCount], cap);
  if (n > 0) {
    SOTTO_ASSIGN(std::vector<uint8_t> bytes, ctx.to_bytes(log));
    std::vector<uint32_t> words(static_cast<size_t>(n * 3));
    std::memcpy(words.data(), bytes.data(), words.size() * 4);
    for (int64_t i = 0; i < n; ++i) {
      out.tokens.push_back(static_cast<int32_t>(words[static_cast<size_t>(3 * i)]));
      out.frames.push_back(static_cast<int32_t>(words[static_cast<size_t>(3 * i + 1)]));
      out.durations.push_back(static_cast<int32_t>(words[static_cast<size_t>(3 * i + 2)]));
    }
  }
  return out;
}

}  // namespace sotto::nn::gpu_ops
