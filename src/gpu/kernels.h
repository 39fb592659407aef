// WGSL sources of sotto's GPU kernels, built as strings so one kernel family can be specialised (weight type,
// packed-dot or fallback, fused SwiGLU, attention context size) without a shader preprocessor.
//
// Weights live on the GPU in a repacked form of their GGUF blocks, each block padded to whole 32-bit words so
// WGSL reads them as array<u32> (webgpu has no byte loads): see gpu_block_words() and repack_rows() in
// gpu/ops.h. Activations for quantized weights are q8_0 blocks like llama.cpp's CPU path: 32 int8 packed four
// to a word (xq) and one f32 scale per block, rounded through f16 as ggml stores it (xd); the matrix x vector
// kernels make them in workgroup memory from f32 x (fusing the RMSNorm before them too).
#pragma once

#include <cstdint>
#include <string>

#include "core/dtype.h"

namespace sotto::gpu {

struct KernelFeatures {
  bool packed_dot = true;  // dot4I8Packed; false: the same integer dot with shifts
  // The lane reductions (matrix x vector / matrix, the RMSNorm's sum of squares, argmax) finish in registers
  // with subgroupShuffleXor where a row's lanes share a subgroup, the shared-memory tree elsewhere: the same
  // sums bit for bit, fewer barriers. Needs the device's `subgroups` feature.
  bool subgroups = false;
  // f32 -> f16 rounding by f16 casts instead of integer arithmetic (f16_bits, f16r): only where the device
  // has `shader-f16` and its casts round to nearest even (native_f16_rounds_to_nearest_even in gpu/ops.h).
  bool f16 = false;
};
// The part of a pipeline's cache key that says which of these a kernel was built with: "", "_nodot_sg_h", ...
std::string features_key(const KernelFeatures& f);

// True for the weight types the GPU matrix x vector kernels read: F32 F16 Q8_0 Q4_0 Q5_0 Q4_K Q6_K.
bool gpu_matvec_supported(DType w);
// False for F32 / F16 weights, which read f32 activations.
bool gpu_needs_q8(DType w);
// True for the K-quants (Q4_K, Q6_K), whose activations are quantized as q8_K (256-value blocks, f32 scale), as
// llama.cpp's CPU path does; the others take q8_0. Either way the GPU layout is the same: 32 int8 per 8 words
// and one f32 scale per 32 values (q8_K repeats its block's scale in its 8 slots).
bool gpu_needs_q8_k(DType w);
// True for the types the embedding lookup dequantizes: F32 F16 Q8_0 Q4_0.
bool gpu_embed_supported(DType w);

// Invocations per row of the matrix x vector kernel (128 / lanes rows per workgroup).
uint32_t matvec_lanes(DType w);
// y[row] (+)= W[row, :] . x (+ bias[row]); 128 / matvec_lanes() rows per workgroup of 128 invocations. `swiglu`: y = silu(W.x) *
// (W2.x). Quantized types: each workgroup first quantizes x (cols values, RMS-normalised with weight nw when
// mode bit 4 is set) to q8_0 in workgroup memory, or, `staged`, reads q8_0 blocks a norm_quant dispatch made
// (xq, xd): cheaper for matrices of many rows, where every workgroup would redo the same quantization. F32
// reads x as f32, F16 as f32 rounded to f16.
// `gelu` (with `swiglu`): y = gelu(W.x) * (W2.x), GELU from ggml's f16 table (binding 7), Gemma's GeGLU.
std::string wgsl_matvec(DType w, bool swiglu, const KernelFeatures& f, uint32_t cols, bool staged,
                        bool gelu = false);
// Tokens per workgroup of the prompt's matrix x matrix.
constexpr uint32_t kMatmatTokens = 8;
// The prompt's Y = X W^T (+ bias) (+= Y), SwiGLU / GeGLU as wgsl_matvec: the decode kernel's rows x lanes layout
// over tiles of kMatmatTokens tokens (workgroup y), each token's sum in the decode kernel's order. Quantized
// weights read q8_0 rows a norm_quant dispatch made for every token (cols / 4 words and cols / 32 scales per
// token); F32 / F16 read f32 rows of cols. Token t writes y[t * y_stride + y_off + row]. Workgroups past the
// step uniform's token count return at once (gpu/kernels_prefill.cpp).
std::string wgsl_matmat(DType w, bool swiglu, const KernelFeatures& f, uint32_t cols, bool gelu = false);
// x[t][i] = dequantize(W[tok[t], i]) * scale for each token t (workgroup y), from a table split by rows into n_parts buffers
// (at most kEmbedMaxParts per dispatch; a table over the binding limit is split); nothing is written when the
// token is in none of them.
constexpr uint32_t kEmbedMaxParts = 4;
std::string wgsl_embed(DType w, uint32_t n_parts);
// y = x / rms(x) * w (mode 1) or y = x (mode 0); mode 8: y += that instead (the post-norm residual add);
// then y quantized to q8_0 (xq, xd) when mode bit 4 is clear. One workgroup per token (workgroup y), each
// token's vectors n values after the previous one's.
constexpr uint32_t kNormQuantMaxValues = 16384;  // the most values norm_quant quantizes per token
std::string wgsl_norm_quant(bool q8_k = false, const KernelFeatures& f = {});
// Optional per-head RMSNorm of q and k (qwen3, gemma3), RoPE on q and k heads (in place in the qkv buffer),
// q times q_scale, and the new K/V row written to the f16 cache (gpu/kernels_attention.cpp). Workgroup y is
// the token: the step uniform's pos + y, for y below its token count n.
std::string wgsl_rope_kv();
// Attention, one workgroup per query head (x) and token (y: position pos + y, causal: it sees cache positions
// 0 .. pos + y, the last `window` of them when window > 0), the keys staged in chunks: ~10 KB of workgroup
// memory whatever the context. rope_inside (decoding, one token): the kernel first does wgsl_rope_kv's work for
// its head and KV head at pos itself, with the same code, and writes that cache row (one dispatch fewer).
// f32_sum: the values summed in f32 a chunk of keys at a time (faster, not the CPU's bits); otherwise in f16,
// key by key, as ggml's CPU kernel (the CPU's outputs bit for bit). split (decoding, f32_sum; workgroup y is a
// share of the keys, not a token): a head's keys spread over up to P.splits workgroups, the last to finish
// combining their states through a `part` buffer of attention_partial_words() (its first n_head words zero).
std::string wgsl_attention(bool rope_inside, bool f32_sum = false, bool split = false);
constexpr uint32_t kMaxAttentionSplits = 32;
// Keys per chunk of the attention kernel's walk (its CHUNK_WORDS / MAX_CHUNK): a split's shares are whole chunks.
constexpr uint32_t attention_chunk_keys(uint32_t hd_k, uint32_t hd_v) {
  const uint32_t words = (hd_k > hd_v ? hd_k : hd_v) / 2;
  return words == 0 ? 128 : (2048 / words < 128 ? 2048 / words : 128);
}
constexpr uint32_t attention_partial_words(uint32_t n_head, uint32_t hd_v, uint32_t splits) {
  return n_head + n_head * splits * (hd_v + 2);
}
// WGSL helpers for an RMSNorm's sum of squares in ~48 bits (two_sum, ff_add, ff_add2, ff_mean), shared by the
// kernels that normalize.
const char* wgsl_float_float();
// Greedy argmax over logits in two passes (per-workgroup partials, then one workgroup); tok[0] = the index.
std::string wgsl_argmax_partial(const KernelFeatures& f = {});
std::string wgsl_argmax_final(const KernelFeatures& f = {});
// Sampling on the GPU as the CPU Sampler draws (gpu/kernels_sampling.cpp: the state buffer's layout):
// per-1024-logit candidates (penalty applied, the best k kept), then one workgroup merges them and draws;
// tok[0] = the token. k <= kSampleMaxTopK; at most kSampleMaxRecent distinct recent ids; n <= 256 * 1024
// (gemma3's 262144 tokens: one list per invocation of the merge).
constexpr uint32_t kSampleMaxTopK = 128;
constexpr uint32_t kSampleMaxRecent = 1024;
constexpr uint32_t kSampleMaxVocab = 256 * 1024;
std::string wgsl_sample_candidates();
std::string wgsl_sample_draw();

}  // namespace sotto::gpu
