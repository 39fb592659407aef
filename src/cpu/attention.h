// Scaled dot-product attention over an f16 KV cache, with the numerics of llama.cpp's CPU flash-attention
// kernel (ggml_compute_forward_flash_attn_ext_f16, F16 K and V, on an AVX2+FMA+F16C build), so a model run
// through it picks the same greedy tokens as llama.cpp:
//
//   q16    = f16(q)                                   (ggml converts q to K's vec_dot type, f16)
//   s_p    = f32(dot(K_p, q16)) * scale               ggml_vec_dot_f16, see below
//   online softmax over p = 0 .. last:  M = running max, S = running sum, O = running Σ w·V_p kept in f16
//     s_p > M:  O = f16(O * exp(M - s_p)), M = s_p, w = 1       (ggml_vec_scale_f16)
//     else:     w = exp(s_p - M)
//     O = f16(O + V_p * w);  S = S * exp(M_old - M) + w         (ggml_vec_mad_f16)
//   out    = O / S
//
// ggml_vec_dot_f16 on AVX2 takes the first n - n % 32 elements 32 at a time into four 8-lane f32 accumulators
// (FMA; a product of two f16 values is exact in f32, so fused or not gives the same bits), adds them as
// (a0 + a2) + (a1 + a3), folds the 8 lanes as (l0+l4 + l1+l5) + (l2+l6 + l3+l7), widens to double and adds
// the remaining n % 32 products in double. ggml_vec_mad_f16 updates the first n - n % 32 elements with a
// fused multiply-add in f32, the rest with a product rounded to f32 and then a sum (not fused). Every variant
// here reproduces exactly that, so all of them give bit-identical outputs; the tests hold them to it.
//
// Where the time goes: per (query, key, head) one dot of head_dim_k, one exp, one f16 multiply-add of
// head_dim_v. At head_dim 64 (Qwen2.5-0.5B) on one core: AVX2 12.5-18 ns (F16C conversions of the running
// sum, libm's expf, FMA; the grouped kernel widens each cached row once for all query rows that read it, 7
// heads x up to 4 tokens; decode's 7 rows amortize that less); portable ~330
// ns natively, spent on the exact single-rounding multiply-add (done in double, see fma_f16_operands) and the
// f16 conversions in integer arithmetic; the scalar code this replaced took ~420 ns. The relaxed-SIMD wasm
// build, where the engine fuses f32x4.relaxed_madd (V8 on CPUs with FMA), does the multiply-add in f32 lanes and
// rounds to f16 in float arithmetic instead: Qwen2.5-0.5B's 256-token prefill in Chromium went from 18.1 to
// 12.0 s (2 threads, medians of 4, a loaded AVX2 machine; the 64-token one, with little attention, unchanged).
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/thread_pool.h"

namespace sotto {

// One layer's attention for n_query consecutive tokens. Query token t sits at position pos0 + t and sees the
// cached positions 0 .. pos0 + t (causal; fewer with a window); query head h reads KV head h / (n_head / n_head_kv) (grouped-query
// attention). The cache rows for those positions must already be written.
struct AttentionArgs {
  const float* q = nullptr;     // n_query rows of n_head * head_dim_k
  const uint16_t* k = nullptr;  // f16 bits; position p's keys for all KV heads start at k + p * k_row
  const uint16_t* v = nullptr;  // f16 bits; position p's values start at v + p * v_row
  int k_row = 0;                // elements per cached position (>= n_head_kv * head_dim_k)
  int v_row = 0;
  int n_query = 0;
  int pos0 = 0;
  int n_head = 0;
  int n_head_kv = 0;
  int head_dim_k = 0;
  int head_dim_v = 0;
  float scale = 1.0f;    // usually 1 / sqrt(head_dim_k)
  float* out = nullptr;  // n_query rows of n_head * head_dim_v
  // Sliding-window attention (Gemma 3's local layers): the token at position p sees only the keys at
  // p - window + 1 .. p, as llama.cpp masks them (LLAMA_SWA_TYPE_STANDARD); 0 means every earlier position.
  int window = 0;
};

// Per-thread buffers of the one-head kernel, grown on first use.
struct AttentionScratch {
  std::vector<float> scores;          // one per key
  std::vector<float> q;               // the query rounded to f16, as f32
  std::vector<uint16_t> acc16;        // the f16 running sum of weighted values (and room for a copy)
  std::vector<float> max_score, sum;  // per head of a group (AttendGroupFn)
  std::vector<float> k32, v32;        // a group's block of keys and values widened to f32
};

// One query head against n_keys cached positions (key p at k + p * k_stride, value at v + p * v_stride).
using AttendHeadFn = void (*)(const float* q, const uint16_t* k, size_t k_stride, const uint16_t* v,
                              size_t v_stride, int n_keys, int head_dim_k, int head_dim_v, float scale,
                              float* out, AttentionScratch& scratch);

// The query rows that read the same KV head: n_heads query heads (query head h of token t at q + t *
// q_token_stride + h * q_stride, its output at out + t * out_token_stride + h * out_stride) of n_tokens
// consecutive tokens, token t seeing the first n_keys + t positions (causal within a prompt block):
// attend_head for each row, the bits unchanged, with each key and value row read once for all rows.
using AttendGroupFn = void (*)(const float* q, size_t q_stride, size_t q_token_stride, int n_heads,
                               int n_tokens, const uint16_t* k, size_t k_stride, const uint16_t* v,
                               size_t v_stride, int n_keys, int head_dim_k, int head_dim_v, float scale,
                               float* out, size_t out_stride, size_t out_token_stride,
                               AttentionScratch& scratch);

// The scalar reference: the formulas above, one element at a time, obviously right.
void attend_head_ref(const float* q, const uint16_t* k, size_t k_stride, const uint16_t* v, size_t v_stride,
                     int n_keys, int head_dim_k, int head_dim_v, float scale, float* out,
                     AttentionScratch& scratch);

// Every head of every query token with the reference, on the calling thread.
void attention_f16_ref(const AttentionArgs& args);

// The same with the fastest kernel for this CPU, (token, head) pairs split over the pool's threads.
void attention_f16(ThreadPool& pool, const AttentionArgs& args);

// Relaxed-SIMD wasm builds only: whether this engine's f32x4.relaxed_madd fuses (probed once), and so whether
// attention_f16 runs the portable kernel with fused multiply-adds (the same bits, see attention.cpp). False in
// every other build.
bool attention_relaxed_madd_fused();

// ---- dispatch
// One table per instruction set; attention_kernels() picks one per call from cpu_use_avx2(), so
// SOTTO_CPU=portable and cpu_force_portable() take effect at once.
struct AttentionKernels {
  const char* name;
  AttendHeadFn attend_head;
  AttendGroupFn attend_group = nullptr;  // when set, attention_f16 runs the heads of a KV head together
};
const AttentionKernels& attention_kernels();
extern const AttentionKernels kAttentionPortable;  // plain C++, auto-vectorized (SIMD128 in wasm)
#if defined(__x86_64__) && !defined(__wasm__)
extern const AttentionKernels kAttentionAvx2;  // attention_avx2.cpp
#endif

// f16 bits -> f32, exactly what f16_to_f32() (core/half.h) gives, without branches so loops over it
// vectorize: the exponent and mantissa moved into f32 position are the value times 2^-112 (for subnormals
// too), one multiply rebiases, and inf/NaN get their all-ones exponent back. Needs subnormals honoured (no
// flush-to-zero), as they are by default natively and always in wasm.
inline float f16_to_f32_branchless(uint16_t h) {
  const uint32_t shifted = static_cast<uint32_t>(h & 0x7fffu) << 13;
  uint32_t bits = std::bit_cast<uint32_t>(std::bit_cast<float>(shifted) * 0x1p112f);
  if ((h & 0x7c00u) == 0x7c00u) bits |= 0x7f800000u;
  return std::bit_cast<float>(bits | (static_cast<uint32_t>(h & 0x8000u) << 16));
}

// f32 -> f16 bits, rounding to nearest even exactly as f32_to_f16() (core/half.h) does, without branches:
// normal results by integer rounding of the rebiased bits (a carry into the exponent is right), subnormal
// ones by rounding |x| * 2^24 to an integer in float arithmetic, then selects for overflow and NaN.
inline uint16_t f32_to_f16_branchless(float x) {
  const uint32_t bits = std::bit_cast<uint32_t>(x);
  const uint32_t magnitude = bits & 0x7fffffffu;
  const uint32_t normal = (magnitude - 0x38000000u + 0xfffu + ((magnitude >> 13) & 1u)) >> 13;
  const float abs_x = std::bit_cast<float>(magnitude < 0x38800000u ? magnitude : 0u);
  const uint32_t subnormal = static_cast<uint32_t>((abs_x * 0x1p24f + 0x1p23f) - 0x1p23f);
  uint32_t h = magnitude < 0x38800000u ? subnormal : normal;
  h = magnitude >= 0x477ff000u ? 0x7c00u : h;                                // overflow: inf
  h = magnitude > 0x7f800000u ? 0x7e00u | ((magnitude >> 13) & 0x3ffu) : h;  // NaN stays NaN
  return static_cast<uint16_t>(((bits >> 16) & 0x8000u) | h);
}

// round_f32(a * b + c) with one rounding, as an FMA instruction gives it, for finite f32 operands. Portable
// code has no FMA instruction (wasm) and no libm fma (the wasm build has no libc), so this computes in
// double: a * b is exact there (24 + 24 bits), the sum is rounded to odd, and rounding that to f32 is then
// the correctly rounded result (53 >= 24 + 2). Exposed for its test against std::fma.
float fma_f16_operands(float a, float b, float c);

}  // namespace sotto
