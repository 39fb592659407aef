// Moonshine's decoder step natively on a GPU as one persistent dispatch: the 8 layers of one greedy step run by a
// grid of resident workgroups that meet at grid barriers (eight a layer: after q·k·v, self-attention, o,
// cross-q, cross-attention, cross-o, up and down), then the final norm. The separate fused step
// (moonshine.cpp, decode_fused: six dispatches a layer, ~52 a step) spends most of a step between dispatches
// and in one-workgroup-per-head chains (~12 us a dispatch on an H100, 0.62 ms a token); a grid barrier costs
// ~1.5 us and a dispatch boundary ~3.6 (models/llm/gpu/layer_kernel.h, which this follows: activations through
// atomics, stores as exchanges the barrier consumes, self-attention caches bound read-only with the new rows
// written by a small dispatch after).
//
// Numerics: the fused step's arithmetic (int8 weights with the tensor's scale and offset, layer norms, RoPE's
// fixed-point turn, attention in f32) with sums in another order (rows by 32 invocations, attention in chunks of
// 32 keys combined afterwards, the norm's sum of x from its sums of x and x·gamma), so the logits match the
// fused step's within a tolerance, not bit for bit (tests/unit/moonshine_gpu_step_test.cpp).
//
// The kernel reads every layer's weights from two packs made at load (41.5 MB of int8 and 0.3 MB of f32 beside
// the separate step's tensors, which the fallback below still needs). On an H100 it took a 10 s clip of 50 tokens
// from 38.1 to 31.9 ms and beckett.wav from 14.6 to 12.1 ms (bench/results/2026-12-06-moonshine-gpu-step-kernel.md):
// a step's 64 barriers and fences cost ~100 us of its ~450.
//
// Used natively only (Dawn on Vulkan), as the LLM's layer kernels: a barrier needs every workgroup resident,
// which a browser does not promise. A barrier that waits too long ends the greedy loop with a failure mark
// (log word 1 = -1); the utterance is then decoded again by the separate dispatches, and the kernel is not
// used again for that model.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "nn/tensor.h"

namespace sotto::asr {

struct MoonshineConfig;
struct MoonshineDecoderState;
struct MoonshineWeights;

struct MoonshineStepKernel {
  // Every decoder layer's int8 matrices one after another (q·k·v, o, cross-q, cross-o, up, down), and their
  // norm gammas and biases (attn, cross, mlp norm, up bias, down bias) then the final norm's gamma.
  nn::Tensor w, v;
  // Per layer: the matrices' scales and offsets (uniform words), and each norm gamma's sum.
  std::vector<std::array<float, 16>> scales;
  std::vector<std::array<float, 3>> gamma_sums;
  float final_gamma_sum = 0.0f;
  uint32_t grid = 1;  // workgroups, all resident at once
  bool gave_up = false;
};

// Whether the step kernel can run on this context (native Dawn, enough workgroup memory), and with what grid:
// one workgroup on a CPU adapter (no barrier to wait at), else 64 (one per compute unit or fewer on any
// discrete GPU of the last years; an H100 has 132). SOTTO_MOONSHINE_STEP_KERNEL=0 turns it off, =N sets the grid.
uint32_t moonshine_step_kernel_grid(nn::Context& ctx, const MoonshineConfig& config);

// Per-utterance buffers: the activations' scratch (the final normed row first, a [1, d] view the head reads),
// the barrier counters (one slot a step), the self-attention caches of all layers in one tensor.
struct MoonshineStepBuffers {
  nn::Tensor act, sync, caches;
};
MoonshineStepBuffers moonshine_step_buffers(const MoonshineWeights& w, int64_t encoder_frames,
                                            int64_t capacity);

// Records one greedy step's layers on input row x (F32 [1, d]) at position state.n_past, then the cache append;
// returns the final normed row [1, d]. `log` is the greedy loop's (its word 0 stops the step, the failure mark
// goes in it).
nn::Tensor moonshine_step_kernel(const MoonshineWeights& w, MoonshineDecoderState& s, const nn::Tensor& x,
                                 const nn::Tensor& log);

}  // namespace sotto::asr
