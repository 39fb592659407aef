// Decoder layers written by hand for a persistent grid: one dispatch runs consecutive llama/qwen2 layers (all of
// a model's whose weights share a buffer) for one decoded token, its workgroups meeting at grid barriers: four a
// layer (after q·k·v, attention, wo, gate·up) and one between layers. Q4_0, Q5_0, Q8_0 weights stage their input
// as q8_0, Q4_K and Q6_K as q8_K, as the separate kernels do.
//
// Why another fused form: the fused plan (gpu/fusion.h) rewrites the separate kernels, and each phase then does
// what its separate kernel did per virtual workgroup, on 128 invocations: on the H200 a layer cost ~57 us that
// way, its phases as long as the dispatches they replaced (bench/results/history-2026-12-03.md). `sotto_gpu_probe
// --token` timed a kernel laid out for a resident grid instead, ~26 us a layer; this is that
// layout with the real arithmetic:
//   - few, wide workgroups (256 invocations, about one per compute unit), each staging a phase's input once:
//     x normed and quantized to q8_0 (or the attention chunks combined, or the SwiGLU product) in workgroup
//     memory, then rows of the matrix from it;
//   - a row is summed by 32 invocations, each taking every 32nd q8_0 sub-block; the 32 partial sums go through
//     workgroup memory and one invocation adds them, several rows at once (a subgroup sum per row, one row after
//     another, cost the probe ~190 us a token);
//   - attention in chunks of 32 keys, one per group of 32 invocations, the current position's k and v rotated
//     and rounded to f16 by the chunk that holds them; the wo phase combines a head's chunks. Where subgroups
//     hold 32 invocations (NVIDIA's), a chunk is one subgroup: invocation w loads word w of each of the 32 keys
//     and values (a 128-byte line per load), the scores are summed across it by shuffles (five steps leave
//     invocation j with key j's score), no workgroup barriers. Elsewhere (SwiftShader: 4) each invocation loads
//     a key's row, and the chunk's maximum and sum go through workgroup memory;
//   - the KV caches are bound read-only: bound writable, the H200 took ~20 us a layer for attention's cache
//     loads (half the token), ~3 read-only (bench/results/history-2026-12-03.md). Each layer's new k and v rows go to the
//     scratch, and a small dispatch after the layers writes them all into the caches (wgsl_layer_kernel_rows);
//   - layers one after another in one dispatch: a dispatch boundary cost ~3.6 us on the H200, a grid barrier
//     ~1.5;
//   - each matrix phase's first weights loaded into registers while its workgroup waits at the grid barrier
//     before the phase (they depend on nothing the other workgroups write), where they fit in kFetchWords words
//     an invocation: without it the weights' round trip to memory came after the barrier, the staging and the
//     quantizer's workgroup barriers, one after another;
//   - row groups with nothing to do in a phase (no attention chunk, or past a matrix's last row) load nothing:
//     running the last chunk's or row's code with clamped indices, ~1,000 of them asked the L2 for the same few
//     lines, and attention cost the H200 8.5 us a layer instead of 4.8 (bench/results/history-2026-12-03.md).
// Activations written in the dispatch are read and written with atomics (gpu/fusion.h says why); a barrier that
// waits too long raises the failure flag, and the model runs that token again unfused.
//
// Numerics: those of the separate kernels (the q8_0 quantizer, RoPE's arithmetic, q, k and v rounded to f16 as
// the cache holds them), attention summing in f32 (as AttentionSum::F32), but the sums in another order, so the
// logits are the separate plan's (recorded with the f32 sum) within a tolerance, not bit for bit; the model
// checks them at load (models/llm/gpu/llm_gpu_layer_kernel.cpp).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "gpu/kernels.h"

namespace sotto::gpu {

constexpr uint32_t kLayerKernelThreads = 256;

// One layer's matrices: their types and words per row. Layers of one dispatch may differ (Q4_K_M's v and down
// take more bits in some layers); the kernel holds each kind's matrix functions once.
struct LayerKernelTypes {
  DType qkv = DType::Q4_0, wo = DType::Q4_0, gate = DType::Q4_0, down = DType::Q4_0;
  uint32_t qkv_words = 0, wo_words = 0, gate_words = 0, down_words = 0;  // words per row
  // q·k·v in two runs of different types (Q4_K_M's v): the first run's rows (0: one run), the second's type and
  // words per row (its weights at the Layer uniform's qkv2). Both runs stage alike (q8_0, or q8_K for both).
  uint32_t qkv_run1_rows = 0, qkv2_words = 0;
  DType qkv2 = DType::Q4_0;
  bool bias = false;  // q·k·v bias
  bool operator==(const LayerKernelTypes&) const = default;
};

struct LayerKernelShape {
  uint32_t grid = 1;  // workgroups; every one must be resident at once
  uint32_t d = 0, n_head = 0, n_kv = 0, hd = 0, n_rot = 0, ff = 0, n_ctx = 0;
  bool rope_halves = false;  // RoPE pairs (i, i + n_rot / 2) (neox, qwen2) rather than (2i, 2i + 1)
  float eps = 1e-6f, scale = 1.0f;
  uint32_t n_layers = 1;   // layers one dispatch runs, one after another (a grid barrier between)
  uint32_t row_slots = 1;  // the model's layers: each stages its new k and v rows in the scratch
  std::vector<LayerKernelTypes> kinds;  // the kinds among the dispatch's layers (each Layer uniform's `kind`)
  // Paths that keep the results right, for comparing them where subgroups of 32 would take the faster ones:
  // the workgroup-memory attention, and the staging's sums and quantizers through workgroup memory (what an
  // adapter without subgroups runs); and no phase's first weights fetched during the grid barrier before it.
  bool workgroup_attention = false;
  bool workgroup_staging = false;
  bool no_fetch = false;
};

// Whether the kernel handles weights of this type (q8_0 activations: Q4_0, Q5_0, Q8_0; q8_K: Q4_K, Q6_K, whose
// matrices' inputs must be whole 256-value blocks).
bool layer_kernel_supports(DType w);
// The scratch buffer's words: q·k·v, the attention chunks' partial results, the SwiGLU product, then each layer's
// new k and v rows (layer_kernel_row_word(s, layer) on); then the RoPE table from word layer_kernel_rope_word()
// on ([pos][n_rot / 2] (cos, sin), f32).
uint64_t layer_kernel_scratch_words(const LayerKernelShape& s);
uint64_t layer_kernel_row_word(const LayerKernelShape& s, uint32_t layer);
uint64_t layer_kernel_rope_word(const LayerKernelShape& s);
// Words of the Layer uniform (per layer, after the dispatch's 4: its barrier counter's slot, then padding):
// kind, the word offsets in W of q·k·v, wo, gate, up, down, attn_norm, ffn_norm, the q·k·v bias, q·k·v's second
// run; of the layer's caches in the k and v cache buffers; of its new rows in the scratch; padding.
constexpr uint32_t kLayerUniformWords = 16;
// Every layer's new k and v rows from the scratch into the caches, after the token's layers (a layer's kernel
// binds the caches read-only). Layer l's caches start at word k_first + l * k_stride (v alike) of bindings 2
// and 3; binding 0 the step, 1 the scratch; ceil(row_slots * n_kv * hd / 2 / 64) workgroups.
std::string wgsl_layer_kernel_rows(const LayerKernelShape& s, uint64_t k_first, uint64_t k_stride,
                                   uint64_t v_first, uint64_t v_stride);
// Bindings: 0 step (uniform: pos), 1 the layers (uniform: the barrier counter's slot, then kLayerUniformWords
// per layer), 2 sync (atomic words: the failure flag, then the counters), 3 x (the residual stream, f32 as u32),
// 4 scratch (with the RoPE table), 5 W (the layers' weights, one buffer), 6 the k caches, 7 the v caches (read
// only, every layer's).
std::string wgsl_layer_kernel(const LayerKernelShape& s, const KernelFeatures& f);

}  // namespace sotto::gpu
