// Moonshine's decoder step natively on a GPU as one persistent dispatch: the 8 layers of one greedy step run by a
// grid of resident workgroups that meet at grid barriers, three a layer (after self-attention with its o
// product, after cross-attention with its o product, after the MLP: moonshine_gpu_step.cpp says how each
// phase's work is split so that no phase waits for another's full result), then the output head and the greedy
// step (argmax, the token's log and its embedding row as the next input) behind one more barrier. The separate
// fused step (moonshine.cpp, decode_fused: six dispatches a layer, ~52 a step) spends most of a step between
// dispatches; a grid barrier costs ~1.5 us and a dispatch boundary ~3.6 (models/llm/gpu/layer_kernel.h, which
// this follows: activations through atomics, stores as exchanges the barrier consumes, self-attention caches
// bound read-only with the new rows written by a small dispatch after).
//
// Numerics: the fused step's arithmetic (int8 weights with the tensor's scale and offset, layer norms, RoPE's
// fixed-point turn, attention in f32) with sums in another order (a row's words by up to 32 invocations, a
// product's rows split in column blocks whose partial sums are added afterwards, attention in blocks of keys
// combined by their softmax shares, the norm's sum of x from its sums of x and x·gamma), so the logits match the
// fused step's within a tolerance, not bit for bit (tests/unit/moonshine_gpu_test.cpp).
//
// The kernel reads every layer's weights and the output head from two packs made at load (55 MB of int8 and
// 0.3 MB of f32 beside the separate step's tensors, which the fallback below still needs).
//
// Used natively only (Dawn on Vulkan), as the LLM's layer kernels: a barrier needs every workgroup resident,
// which a browser does not promise. A barrier that waits too long ends the greedy loop with a failure mark
// (log word 1 = -1); the utterance is then decoded again by the separate dispatches, and the kernel is not
// used again for that model.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "nn/fused.h"
#include "nn/tensor.h"

namespace sotto::asr {

struct MoonshineConfig;
struct MoonshineDecoderState;
struct MoonshineWeights;

struct MoonshineStepKernel {
  // w: every decoder layer's int8 matrices one after another (q·k·v, o, cross-q, cross-o, up, down: its columns
  // in the MLP items' blocks, moonshine_step_pack), then the output head (the embedding table). v: their norm
  // gammas and biases (attn, cross, mlp norm, up bias, down bias), then the final norm's gamma.
  nn::Tensor w, v;
  // Per layer: the matrices' scales and offsets (uniform words), and each norm gamma's sum.
  std::vector<std::array<float, 16>> scales;
  std::vector<std::array<float, 3>> gamma_sums;
  float final_gamma_sum = 0.0f;
  uint32_t grid = 1;  // workgroups, all resident at once
  // A grid barrier's polls before it gives up: ~30-60 ms on a GPU, a thousand times a phase there. Tests that
  // run a grid of several workgroups on SwiftShader raise it (a phase there takes seconds).
  uint32_t spin = 65536;
  bool gave_up = false;
};

// Whether the kernel's items fit the shapes: 64 divided among the heads, d among a head's 64 / heads blocks,
// the hidden units in 64 equal blocks (moonshine_step_pack pads each to whole words), heads of at most 64
// dimensions, making up d.
bool moonshine_step_kernel_fits(const MoonshineConfig& config);

// The kernel's weights from the loader's pack (each layer's int8 matrices as the file has them): the down
// matrix's columns in the MLP items' blocks of ff / 64 units, each padded with zero bytes to whole 32-bit words
// (Moonshine base: 26 units, two zero bytes), so that an item's columns start at a word.
std::vector<uint8_t> moonshine_step_pack(const MoonshineConfig& config, const std::vector<uint8_t>& loaded);

// Whether the step kernel can run on this context (native Dawn, enough workgroup memory), and with what grid:
// one workgroup on a CPU adapter (no barrier to wait at), else 64 (one per compute unit or fewer on any
// discrete GPU of the last years; an H100 has 132). SOTTO_MOONSHINE_STEP_KERNEL=0 turns it off, =N sets the grid.
uint32_t moonshine_step_kernel_grid(nn::Context& ctx, const MoonshineConfig& config);

// Per-utterance buffers: the activations' scratch (the final normed row first, a [1, d] view the head reads),
// the barrier counters (one slot a step), the self-attention caches of all layers in one tensor.
struct MoonshineStepBuffers {
  nn::Tensor act, sync, caches;
};
MoonshineStepBuffers moonshine_step_buffers(const MoonshineWeights& w, int64_t capacity);

// Records one step's layers on input row x (F32 [1, d]) at position state.n_past, then the cache append;
// returns the final normed row [1, d]. `log` is the greedy loop's (its word 0 stops the step, the failure mark
// goes in it). With `greedy` (its table the model's embedding, its x this x) the kernel also takes the greedy
// step: the output head, the first maximum logged as nn::greedy_step does, its embedding row written into x.
nn::Tensor moonshine_step_kernel(const MoonshineWeights& w, MoonshineDecoderState& s, const nn::Tensor& x,
                                 const nn::Tensor& log, const nn::GreedyLoop* greedy = nullptr);

}  // namespace sotto::asr
