// Fused ops: a weight-only int8 product together with the small ops around it in a transformer decoder step
// (the layer norm before it, per-segment quantization of concatenated matrices, bias, rotary embedding, gated
// SiLU, the residual add, the KV-cache append). On the GPU each call is one dispatch where the separate ops
// were 2-6: a Moonshine decoder step on an H200 was ~200 dispatches of ~10 us each, bound by their count, not
// by the 41 MB of weights it reads. On the CPU the op is its plain scalar reference (models keep their unfused
// CPU path, which is faster there).
#pragma once

#include <array>
#include <cstdint>
#include <functional>

#include "nn/ops.h"
#include "nn/tensor.h"

namespace sotto::nn {

struct Int8LinearFused {
  // W: I8 [N, K], dequantized w = q * scale[s] + offset[s] for the rows of segment s = row / segment (at most
  // 4 segments; segment 0: one segment of N rows). Several per-tensor quantized matrices stacked (q, k, v)
  // keep their own scale and offset.
  Tensor w;
  int64_t segment = 0;
  std::array<float, 4> scale = {1, 1, 1, 1}, offset = {0, 0, 0, 0};
  // Layer norm without bias of each row of x first: (x - mean) / sqrt(var + eps) * gamma (undefined: none).
  Tensor norm_gamma;
  float norm_eps = 1e-5f;
  Tensor bias;  // F32 [N] or undefined
  // Rotary embedding, interleaved pairs (2i, 2i+1) (GPT-J), on output columns [0, rope_columns) in heads of
  // head_dim (even) whose first rotary_dim dims rotate, row r of x at position position0 + r.
  int64_t rope_columns = 0;
  int head_dim = 0, rotary_dim = 0;
  float rope_base = 10000.0f;
  int64_t position0 = 0;
  // Gated SiLU: the output is [M, N / 2], y[:, j] * silu(y[:, j + N / 2]).
  bool gated_silu = false;
  Tensor residual;  // [M, N_out] added last, or undefined
  // KV-cache append (3 segments): segment 1's columns go to rows cache_row .. cache_row + M - 1 of cache_k and
  // segment 2's to cache_v (both F32 [R, segment]), and the output holds segment 0 only ([M, segment]). The
  // caches are written in place: rows past every view of them read so far, so no earlier
  // result changes.
  Tensor cache_k, cache_v;
  int64_t cache_row = 0;
  // x given as attention_partials' key blocks (x_blocks > 1): per row of M and head of x_heads, x_blocks blocks
  // of (max, sum of exponentials, head_dim = K / x_heads unnormalised sums), combined as nn::attention's
  // combine step does (same order) before the product. Saves the combine dispatch after a cross-attention.
  int64_t x_heads = 0, x_blocks = 0;
  // I32 [>= 1]: while word 0 is nonzero the op does nothing (output and caches left as they are): a greedy
  // loop recorded ahead on the GPU makes its steps after the end no-ops with it. Undefined: always runs.
  Tensor stop;
};

// x [M, K] F32 -> [M, N_out]: N_out = N, N / 2 (gated) or segment (KV-cache append). Order of the arithmetic:
// (combine,) norm, product (scale * (x . q) + offset * sum(x), as linear_int8_affine), bias, rope, gate,
// residual. With x_blocks > 1, x is [M * x_heads * x_blocks * (K / x_heads + 2)] and K is given by w.
Tensor linear_int8_fused(const Tensor& x, const Int8LinearFused& f);

// Scaled dot-product attention as nn::attention, its key blocks left uncombined for a following
// linear_int8_fused (x_heads, x_blocks): returns the partials and sets *blocks (> 1), or returns the combined
// output and sets *blocks = 0 where the attention takes one block or another kernel (then nothing is saved).
Tensor attention_partials(const Tensor& q, const Tensor& k, const Tensor& v, const AttentionOptions& o,
                          int64_t* blocks);

// A decoder attention with the product before it, for one query row: the layer-normed x projected to the
// query (cross-attention: proj.w [D, K]) or to the stacked query, key and value of the new row (self-attention:
// proj.w [3D, K], segment D, rotary embedding on q and k, k and v appended to proj.cache_k / cache_v at
// proj.cache_row), then scaled dot-product attention of the query over `k` / `v` [T, D] (cross) or the
// caches' first cache_row + 1 rows (self, the new row last). On the GPU one dispatch: a workgroup per (head,
// block of 64 keys) recomputes its head's projection (norm of x in the workgroup, 1-3 x head_dim rows of W:
// Moonshine's 21-63 KB), so the two dependent dispatches of the product and the attention are one.
// Returns as attention_partials does: the key blocks' partials with *blocks (> 1) set for a following
// linear_int8_fused (x_heads, x_blocks), or the combined output [M, D] with *blocks = 0.
struct Int8AttentionFused {
  Int8LinearFused proj;  // w, segment, scale, offset, norm_gamma, norm_eps, rope, caches, stop
  Tensor k, v;           // cross-attention: F32 [T, D]; self-attention: undefined
  int64_t n_heads = 0;
};
Tensor attention_int8_fused(const Tensor& x, const Int8AttentionFused& f, int64_t* blocks);

// One step of greedy decoding kept on the GPU (a loop recorded ahead, read once per batch of steps): the first
// maximum of `logits` [1, V]; unless the loop has ended, it is logged (when not `eos`) and its row of the int8
// embedding table, dequantized (q * scale + offset), written to `x` [1, D] as the next step's input. The loop
// ends at `eos` or when `max_tokens` tokens are logged.
struct GreedyLoop {
  Tensor table;  // I8 [V, D]
  float scale = 1.0f, offset = 0.0f;
  int32_t eos = 0;
  int64_t max_tokens = 0;
  // I32 [2 + max_tokens]: word 0 ended (the `stop` of linear_int8_fused), word 1 tokens logged, then the tokens.
  Tensor log;
  Tensor x;  // F32 [1, D], written in place
};
void greedy_step(const Tensor& logits, const GreedyLoop& g);
// log word 0 once the loop has ended: 1.0f's bits (linear_int8_fused reads it through a float binding).
constexpr int32_t kGreedyEnded = 0x3f800000;

// An f32 product with what is around it in a transformer's encoder layer: act(rope(norm(x) . W^T + b)) +
// residual. norm: nn::layer_norm without bias, where norm_gamma is defined; act Identity, Tanh, Silu or GeluErf;
// scale: the activation's output times it before the residual (Parakeet's half-step feed-forward adds;
// 1: none); residual [M, N] or undefined; rope: nn::rope's rotary embedding (interleaved pairs, row r at position r)
// where rope_heads > 0. On the GPU one dispatch where the separate ops took 2-4 (Moonshine's encoder: the
// norms before q / k / v and fc1, q and k with their rope, the FFN's GELU, both residual adds). On the CPU
// layer_norm, nn::linear, rope, activation and add (models keep their CPU path, which packs its weights).
struct LinearFusedF32 {
  // Layer norm without bias of each row of x first: (x - mean) / sqrt(var + eps) * gamma (undefined: none).
  Tensor norm_gamma = {};
  float norm_eps = 1e-5f;
  Act act = Act::Identity;
  float scale = 1.0f;
  Tensor residual = {};
  int rope_heads = 0, rotary_dim = 0;
  float rope_base = 10000.0f;
  // The rotary embedding on output columns [0, rope_columns) only (0: all N), in rope_heads heads of
  // rope_columns / rope_heads: a stacked q / k / v product rotates q and k (2 x heads of head_dim) and not v.
  int64_t rope_columns = 0;
  // Stacked output: with stack_columns > 0 (dividing N), column block j ([M, stack_columns]) of the result is
  // written as block j of [N / stack_columns, stacked_rows(M, stack_columns), stack_columns], each block
  // padded to rows that start it at a multiple of 256 bytes (rows past M not written), so that its first M
  // rows are a view (Tensor::rows) an op can bind on the GPU. Several products of one input (Moonshine's 16
  // cross-attention K / V projections of the encoder output) are then one product whose results are each
  // contiguous. The residual, where given, is [M, N] as usual.
  int64_t stack_columns = 0;
};
// The rows of each block of a stacked output: m rounded up to make a block of `columns` floats a multiple of
// 256 bytes.
int64_t stacked_rows(int64_t m, int64_t columns);
Tensor linear_fused_f32(const Tensor& x, const Tensor& w, const Tensor& b, const LinearFusedF32& f);
// linear_fused_f32's ops one by one around `product` (x, normed where f asks, -> x . W^T + b): what
// linear_fused_f32 runs on the CPU with nn::linear, and what a model with products of its own (packed or
// split-bf16 matrices) runs with those.
Tensor linear_fused_f32_around(const Tensor& x, const LinearFusedF32& f,
                               const std::function<Tensor(const Tensor&)>& product);
// y [M, N] with f's rotary embedding on its columns [0, f.rope_columns) (all where 0 or N), by nn::rope, slice
// and concat on y's backend: linear_fused_f32's rope where a kernel cannot apply it as it stores.
Tensor rope_columns(const Tensor& y, const LinearFusedF32& f);

// conv1d (x [Cin, T], w [Cout, Cin, K] F32, groups 1) with its activation (Identity, Tanh or GeluErf), the
// output [Cout, T'] or, time_major, [T', Cout]. On the GPU a large convolution is an unrolled product whose
// store applies the activation and which is [T', Cout] as it comes: Moonshine's conv stem saves its separate
// tanh / GELU dispatches and the two transposes between its last conv and the encoder layers. On the CPU
// nn::conv1d, then activation, then transpose.
struct Conv1dFusedF32 {
  Act act = Act::Identity;
  bool time_major = false;
};
Tensor conv1d_fused_f32(const Tensor& x, const Tensor& w, const Tensor& b, const Conv1dOptions& o,
                        const Conv1dFusedF32& f);

// The middle of a conformer's convolution module, time-major: silu(depthwise_conv1d(glu(x))) for x [T, 2C] (the
// first pointwise product's output; GLU gates its first C columns by the sigmoid of its last C), w [C, 1, K]
// (K odd, zero padding (K - 1) / 2 each side: T out), b [C] or undefined (a batch norm folded in), out [T, C].
// On the GPU one dispatch where the separate ops took five (GLU, two transposes, the conv, SiLU): Parakeet's
// conv module. On the CPU those ops.
Tensor glu_depthwise_conv1d_silu(const Tensor& x, const Tensor& w, const Tensor& b);

namespace ref {
Tensor glu_depthwise_conv1d_silu(const Tensor& x, const Tensor& w, const Tensor& b);
Tensor conv1d_fused_f32(const Tensor& x, const Tensor& w, const Tensor& b, const Conv1dOptions& o,
                        const Conv1dFusedF32& f);
Tensor linear_fused_f32(const Tensor& x, const Tensor& w, const Tensor& b, const LinearFusedF32& f);
Tensor linear_int8_fused(const Tensor& x, const Int8LinearFused& f);
// Combined output [M, D] (blocks not used: the reference does not split keys).
Tensor attention_int8_fused(const Tensor& x, const Int8AttentionFused& f);
// Attention partials [M, heads, blocks, D / heads + 2] combined into [M, D].
Tensor combine_partials(const Tensor& part, int64_t heads, int64_t blocks, int64_t d);
void greedy_step(const Tensor& logits, const GreedyLoop& g);
}  // namespace ref

}  // namespace sotto::nn
