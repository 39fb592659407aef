// Attention over the f16 KV cache: the scalar reference, the portable kernel (vectorizable C++), the split of
// (token, head) pairs over threads, and the dispatch table. The AVX2 kernel is in attention_avx2.cpp; the numerics
// both reproduce are described in attention.h.
#include "cpu/attention.h"

#include <algorithm>
#include <atomic>
#include <bit>
#include <cmath>
#include <cstring>
#if defined(__wasm_relaxed_simd__)
#include <wasm_simd128.h>
#endif

#include "core/half.h"
#include "cpu/cpu_features.h"

namespace sotto {

float fma_f16_operands(float a, float b, float c) {
  const double product = static_cast<double>(a) * static_cast<double>(b);  // exact
  const double cd = static_cast<double>(c);
  const double sum = product + cd;
  uint64_t bits = std::bit_cast<uint64_t>(sum);
  // Rounding the double to f32 can only go wrong when the double sits exactly on a midpoint between two
  // floats (its low 29 mantissa bits 1 followed by zeros) after rounding itself. The cheap test below lets
  // through every double whose low 28 bits are not all zero (no midpoint, also not one of a subnormal f32);
  // the rest take the exact path.
  if ((bits & 0xfffffffu) != 0) return static_cast<float>(sum);
  // TwoSum: the exact error of the addition, so sum + error == product + c.
  const double product_part = sum - cd;
  const double error = (product - product_part) + (cd - (sum - product_part));
  if (error != 0.0 && (bits & 1u) == 0) {
    // Inexact and even: the odd neighbour toward the exact value is the round-to-odd result, and round to
    // nearest of a round-to-odd double is the correctly rounded f32 (53 >= 24 + 2).
    const bool toward_larger_magnitude = (error > 0.0) == (sum > 0.0);
    bits = toward_larger_magnitude ? bits + 1 : bits - 1;
  }
  return static_cast<float>(std::bit_cast<double>(bits));
}

namespace {

constexpr int kStep = 32;  // elements per step of ggml's AVX2 f16 loops: 4 accumulators x 8 lanes

// ggml_vec_dot_f16 as it runs on AVX2, one lane at a time; q holds f16 values widened to f32.
float dot_f16_ref(const uint16_t* k, const float* q, int n) {
  const int n_steps = n - n % kStep;
  float lanes[4][8] = {};
  for (int i = 0; i < n_steps; i += kStep)
    for (int j = 0; j < 4; ++j)
      for (int l = 0; l < 8; ++l) lanes[j][l] += f16_to_f32(k[i + 8 * j + l]) * q[i + 8 * j + l];
  float folded[8];
  for (int l = 0; l < 8; ++l) folded[l] = (lanes[0][l] + lanes[2][l]) + (lanes[1][l] + lanes[3][l]);
  const float t0 = folded[0] + folded[4], t1 = folded[1] + folded[5], t2 = folded[2] + folded[6],
              t3 = folded[3] + folded[7];
  double sum = static_cast<double>((t0 + t1) + (t2 + t3));
  for (int i = n_steps; i < n; ++i) sum += static_cast<double>(f16_to_f32(k[i]) * q[i]);
  return static_cast<float>(sum);
}

// acc = f16(acc + v * weight): fused on the 32-element steps, product then sum on the rest (ggml_vec_mad_f16).
void mad_f16_ref(uint16_t* acc, const uint16_t* v, float weight, int n) {
  const int n_steps = n - n % kStep;
  for (int d = 0; d < n_steps; ++d)
    acc[d] = f32_to_f16(fma_f16_operands(f16_to_f32(v[d]), weight, f16_to_f32(acc[d])));
  for (int d = n_steps; d < n; ++d) {
    const float product = f16_to_f32(v[d]) * weight;
    acc[d] = f32_to_f16(f16_to_f32(acc[d]) + product);
  }
}

}  // namespace

void attend_head_ref(const float* q, const uint16_t* k, size_t k_stride, const uint16_t* v, size_t v_stride,
                     int n_keys, int head_dim_k, int head_dim_v, float scale, float* out,
                     AttentionScratch& scratch) {
  scratch.q.resize(static_cast<size_t>(head_dim_k));
  scratch.acc16.assign(static_cast<size_t>(head_dim_v), 0);
  float* q16 = scratch.q.data();
  uint16_t* acc = scratch.acc16.data();
  for (int d = 0; d < head_dim_k; ++d) q16[d] = f16_to_f32(f32_to_f16(q[d]));
  float max_score = -INFINITY, sum = 0.0f;
  for (int p = 0; p < n_keys; ++p) {
    const float s = dot_f16_ref(k + p * k_stride, q16, head_dim_k) * scale;
    float old_scale = 1.0f, weight = 1.0f;
    if (s > max_score) {  // new maximum: earlier terms shrink by exp(old - new), this one weighs 1
      old_scale = std::exp(max_score - s);
      max_score = s;
      for (int d = 0; d < head_dim_v; ++d) acc[d] = f32_to_f16(f16_to_f32(acc[d]) * old_scale);
    } else {
      weight = std::exp(s - max_score);
    }
    mad_f16_ref(acc, v + p * v_stride, weight, head_dim_v);
    const float kept = sum * old_scale;
    sum = kept + weight;
  }
  const float inv_sum = sum == 0.0f ? 0.0f : 1.0f / sum;
  for (int d = 0; d < head_dim_v; ++d) out[d] = f16_to_f32(acc[d]) * inv_sum;
}

// ================================================================ portable kernel
// The reference's arithmetic in the AVX2 kernel's shape (all scores first, then the value pass), with
// branch-free f16 widening and the 32 dot lanes as one flat array, so the compiler vectorizes both loops
// (SIMD128 in the wasm builds).

namespace {

// K and V come as f16 bits, or already widened to f32 (attention_f16 widens each cached row once per call):
// widen() gives the same f32 either way, so both forms compute the same bits.
inline float widen(uint16_t h) {
  return f16_to_f32_branchless(h);
}
inline float widen(float f) {
  return f;
}

template <class KV>
float dot_f16_portable(const KV* k, const float* q, int n) {
  const int n_steps = n - n % kStep;
  float lanes[kStep] = {};  // lane l is accumulator l / 8, lane l % 8
  for (int i = 0; i < n_steps; i += kStep)
    for (int l = 0; l < kStep; ++l) lanes[l] += widen(k[i + l]) * q[i + l];
  float folded[8];
  for (int l = 0; l < 8; ++l) folded[l] = (lanes[l] + lanes[16 + l]) + (lanes[8 + l] + lanes[24 + l]);
  const float t0 = folded[0] + folded[4], t1 = folded[1] + folded[5], t2 = folded[2] + folded[6],
              t3 = folded[3] + folded[7];
  double sum = static_cast<double>((t0 + t1) + (t2 + t3));
  for (int i = n_steps; i < n; ++i) sum += static_cast<double>(widen(k[i]) * q[i]);
  return static_cast<float>(sum);
}

// The fused part first takes fma_f16_operands()'s fast path for all elements in one branch-free
// (vectorized) loop, noting whether any element needed its exact path; that is rare, and then the step is
// redone element by element from the saved accumulator.
template <class KV>
void mad_f16_portable(uint16_t* acc, const KV* v, float weight, int n, uint16_t* saved) {
  const int n_steps = n - n % kStep;
  std::memcpy(saved, acc, static_cast<size_t>(n_steps) * sizeof(uint16_t));
  uint64_t low_bits_all_zero = 0;
  for (int d = 0; d < n_steps; ++d) {
    const double sum =
        static_cast<double>(widen(v[d])) * weight + static_cast<double>(f16_to_f32_branchless(acc[d]));
    low_bits_all_zero |= (std::bit_cast<uint64_t>(sum) & 0xfffffffu) == 0;
    acc[d] = f32_to_f16_branchless(static_cast<float>(sum));
  }
  if (low_bits_all_zero)
    for (int d = 0; d < n_steps; ++d)
      acc[d] = f32_to_f16(fma_f16_operands(widen(v[d]), weight, f16_to_f32(saved[d])));
  for (int d = n_steps; d < n; ++d) {
    const float product = widen(v[d]) * weight;
    acc[d] = f32_to_f16_branchless(f16_to_f32_branchless(acc[d]) + product);
  }
}

template <class KV>
void attend_head_portable_kv(const float* q, const KV* k, size_t k_stride, const KV* v, size_t v_stride,
                             int n_keys, int head_dim_k, int head_dim_v, float scale, float* out,
                             AttentionScratch& scratch) {
  scratch.q.resize(static_cast<size_t>(head_dim_k));
  scratch.scores.resize(static_cast<size_t>(n_keys));
  scratch.acc16.assign(static_cast<size_t>(2 * head_dim_v), 0);
  float* q16 = scratch.q.data();
  float* scores = scratch.scores.data();
  uint16_t* acc = scratch.acc16.data();
  uint16_t* saved = acc + head_dim_v;
  for (int d = 0; d < head_dim_k; ++d) q16[d] = f16_to_f32(f32_to_f16(q[d]));
  for (int p = 0; p < n_keys; ++p) scores[p] = dot_f16_portable(k + p * k_stride, q16, head_dim_k) * scale;

  float max_score = -INFINITY, sum = 0.0f;
  for (int p = 0; p < n_keys; ++p) {
    const float s = scores[p];
    float old_scale = 1.0f, weight = 1.0f;
    if (s > max_score) {
      old_scale = std::exp(max_score - s);
      max_score = s;
      for (int d = 0; d < head_dim_v; ++d)
        acc[d] = f32_to_f16_branchless(f16_to_f32_branchless(acc[d]) * old_scale);
    } else {
      weight = std::exp(s - max_score);
    }
    mad_f16_portable(acc, v + p * v_stride, weight, head_dim_v, saved);
    const float kept = sum * old_scale;
    sum = kept + weight;
  }
  const float inv_sum = sum == 0.0f ? 0.0f : 1.0f / sum;
  for (int d = 0; d < head_dim_v; ++d) out[d] = f16_to_f32_branchless(acc[d]) * inv_sum;
}

void attend_head_portable(const float* q, const uint16_t* k, size_t k_stride, const uint16_t* v,
                          size_t v_stride, int n_keys, int head_dim_k, int head_dim_v, float scale,
                          float* out, AttentionScratch& scratch) {
  attend_head_portable_kv(q, k, k_stride, v, v_stride, n_keys, head_dim_k, head_dim_v, scale, out, scratch);
}

#if defined(__wasm_relaxed_simd__)
// ---------------------------------------------------------------- relaxed SIMD, where its multiply-add fuses
// f32x4.relaxed_madd is a fused multiply-add or a multiply then an add, at the engine's choice (V8: fused
// where the CPU has FMA3), the same for every call on one machine. Fused, it is the single rounding ggml's
// _mm256_fmadd_ps gives, which the portable kernel builds in double (2 lanes per instruction, and a check per
// element). The running sum also stays in f32 lanes holding f16 values, rounded by round_to_f16() instead of
// converted to f16 bits and back. Same bits as the reference for finite values and infinities (a NaN stays a
// NaN, its payload not narrowed to f16's).

v128_t splat_f32(float x) {
  return wasm_f32x4_splat(x);
}

// f16_to_f32(f32_to_f16(x)) in each lane: |x| in [2^e, 2^(e + 1)) plus 2^(e + 13) and minus it again is
// |x| rounded to nearest even at multiples of 2^(e - 10), f16's spacing there. The added power is at least
// 2^-1 (spacing 2^-24, f16's subnormals) and at most 2^28 (|x| >= 2^16 overflows f16 anyway); past f16's
// largest finite value, 65504, the result is infinite, as f32_to_f16 makes it.
v128_t round_to_f16(v128_t x) {
  const v128_t magnitude = wasm_v128_and(x, wasm_i32x4_splat(0x7fffffff));
  const v128_t biased_exponent = wasm_u32x4_shr(magnitude, 23);
  const v128_t magic = wasm_i32x4_shl(
      wasm_i32x4_min(
          wasm_i32x4_max(wasm_i32x4_add(biased_exponent, wasm_i32x4_splat(13)), wasm_i32x4_splat(126)),
          wasm_i32x4_splat(155)),
      23);
  v128_t rounded = wasm_f32x4_sub(wasm_f32x4_add(magnitude, magic), magic);
  rounded = wasm_v128_bitselect(splat_f32(INFINITY), rounded, wasm_f32x4_gt(rounded, splat_f32(65504.0f)));
  return wasm_v128_or(rounded, wasm_v128_and(x, wasm_i32x4_splat(static_cast<int32_t>(0x80000000u))));
}

// Whether this engine fuses relaxed_madd: (1 + 2^-12)^2 - (1 + 2^-11) is 2^-24 exactly with one rounding, 0
// with two (the product rounds to 1 + 2^-11). Inputs through volatile, so the compiler cannot fold it.
bool relaxed_madd_fuses() {
  static std::atomic<int> known{0};  // 0: not probed yet, 1: fused, 2: not
  int state = known.load(std::memory_order_relaxed);
  if (state == 0) {
    volatile float a = 1.0f + 0x1p-12f, c = -(1.0f + 0x1p-11f);
    const v128_t r = wasm_f32x4_relaxed_madd(splat_f32(a), splat_f32(a), splat_f32(c));
    state = wasm_f32x4_extract_lane(r, 0) == 0x1p-24f ? 1 : 2;
    known.store(state, std::memory_order_relaxed);
  }
  return state == 1;
}

// attend_head_portable_kv<float>'s arithmetic with fused madds; only where relaxed_madd_fuses().
void attend_head_relaxed_fused(const float* q, const float* k, size_t k_stride, const float* v,
                               size_t v_stride, int n_keys, int head_dim_k, int head_dim_v, float scale,
                               float* out, AttentionScratch& scratch) {
  scratch.q.resize(static_cast<size_t>(head_dim_k));
  scratch.scores.resize(static_cast<size_t>(n_keys) + static_cast<size_t>(head_dim_v));
  float* q16 = scratch.q.data();
  float* scores = scratch.scores.data();
  float* acc = scores + n_keys;  // the running sum of values, f16 values in f32
  for (int d = 0; d < head_dim_k; ++d) q16[d] = f16_to_f32(f32_to_f16(q[d]));
  for (int p = 0; p < n_keys; ++p) scores[p] = dot_f16_portable(k + p * k_stride, q16, head_dim_k) * scale;
  std::fill(acc, acc + head_dim_v, 0.0f);
  const int n_steps = head_dim_v - head_dim_v % kStep;  // fused on ggml's 32-element steps, as the reference
  float max_score = -INFINITY, sum = 0.0f;
  for (int p = 0; p < n_keys; ++p) {
    const float s = scores[p];
    const float* vp = v + p * v_stride;
    float old_scale = 1.0f, weight = 1.0f;
    if (s > max_score) {
      old_scale = std::exp(max_score - s);
      max_score = s;
      int d = 0;
      for (; d + 4 <= head_dim_v; d += 4) {
        const v128_t a = wasm_v128_load(acc + d);
        wasm_v128_store(acc + d, round_to_f16(wasm_f32x4_mul(a, splat_f32(old_scale))));
      }
      for (; d < head_dim_v; ++d) acc[d] = f16_to_f32(f32_to_f16(acc[d] * old_scale));
    } else {
      weight = std::exp(s - max_score);
    }
    const v128_t w = splat_f32(weight);
    for (int d = 0; d < n_steps; d += 4) {
      const v128_t a = wasm_v128_load(acc + d);
      wasm_v128_store(acc + d, round_to_f16(wasm_f32x4_relaxed_madd(wasm_v128_load(vp + d), w, a)));
    }
    for (int d = n_steps; d < head_dim_v; ++d) acc[d] = f16_to_f32(f32_to_f16(acc[d] + vp[d] * weight));
    const float kept = sum * old_scale;
    sum = kept + weight;
  }
  const float inv_sum = sum == 0.0f ? 0.0f : 1.0f / sum;
  for (int d = 0; d < head_dim_v; ++d) out[d] = acc[d] * inv_sum;
}
#endif

}  // namespace

const AttentionKernels kAttentionPortable = {"portable", attend_head_portable};

bool attention_relaxed_madd_fused() {
#if defined(__wasm_relaxed_simd__)
  return relaxed_madd_fuses();
#else
  return false;
#endif
}

const AttentionKernels& attention_kernels() {
#if defined(__x86_64__) && !defined(__wasm__)
  if (cpu_use_avx2()) return kAttentionAvx2;
#endif
  return kAttentionPortable;
}

namespace {

// Pair i is query token i / n_head, head i % n_head. K and V rows of position p start at k + (p - base) *
// k_row and v + (p - base) * v_row: the cache itself (base 0), or its rows widened to f32 from base on.
template <class KV, class AttendHead>
void attend_pair(AttendHead attend_head, const AttentionArgs& a, const KV* k, int k_row, const KV* v,
                 int v_row, int base, int i, AttentionScratch& scratch) {
  const int t = i / a.n_head, head = i % a.n_head;
  const int kv_head = head / (a.n_head / a.n_head_kv);
  // Keys first .. pos: llama.cpp skips masked keys outright, so starting later gives the same sums.
  const int pos = a.pos0 + t;
  const int first = a.window > 0 ? std::max(0, pos - a.window + 1) : 0;
  attend_head(
      a.q + static_cast<size_t>(t) * a.n_head * a.head_dim_k + static_cast<size_t>(head) * a.head_dim_k,
      k + static_cast<size_t>(first - base) * k_row + static_cast<size_t>(kv_head) * a.head_dim_k,
      static_cast<size_t>(k_row),
      v + static_cast<size_t>(first - base) * v_row + static_cast<size_t>(kv_head) * a.head_dim_v,
      static_cast<size_t>(v_row), pos + 1 - first, a.head_dim_k, a.head_dim_v, a.scale,
      a.out + static_cast<size_t>(t) * a.n_head * a.head_dim_v + static_cast<size_t>(head) * a.head_dim_v,
      scratch);
}

void attend_pair(AttendHeadFn attend_head, const AttentionArgs& a, int i, AttentionScratch& scratch) {
  attend_pair(attend_head, a, a.k, a.k_row, a.v, a.v_row, 0, i, scratch);
}

// The portable kernel widens f16 in integer arithmetic, which costs about as much as the dot product itself:
// widen every cached K and V row the queries read once per call (the threads split the rows), instead of
// once per query head that reads it (n_head / n_head_kv of them) and query token. widen() makes the results
// the same bits as the f16 form's.
void attention_portable_widened(ThreadPool& pool, const AttentionArgs& a, int n_active) {
  const int pairs = a.n_query * a.n_head;
  const int base = a.window > 0 ? std::max(0, a.pos0 - a.window + 1) : 0;  // the first query's first key
  const int n_rows = a.pos0 + a.n_query - base;
  const int k_used = a.n_head_kv * a.head_dim_k, v_used = a.n_head_kv * a.head_dim_v;
  std::vector<float> k32(static_cast<size_t>(n_rows) * k_used), v32(static_cast<size_t>(n_rows) * v_used);
#if defined(__wasm_relaxed_simd__)
  const auto attend_head = relaxed_madd_fuses() ? attend_head_relaxed_fused : attend_head_portable_kv<float>;
#else
  const auto attend_head = attend_head_portable_kv<float>;
#endif
  pool.run(
      [&](int ith, int nth) {
        for (int r = n_rows * ith / nth; r < n_rows * (ith + 1) / nth; ++r) {
          const uint16_t* k16 = a.k + static_cast<size_t>(base + r) * a.k_row;
          const uint16_t* v16 = a.v + static_cast<size_t>(base + r) * a.v_row;
          float* k_out = k32.data() + static_cast<size_t>(r) * k_used;
          float* v_out = v32.data() + static_cast<size_t>(r) * v_used;
          for (int d = 0; d < k_used; ++d) k_out[d] = f16_to_f32_branchless(k16[d]);
          for (int d = 0; d < v_used; ++d) v_out[d] = f16_to_f32_branchless(v16[d]);
        }
        pool.barrier();
        AttentionScratch scratch;
        for (int i = ith; i < pairs; i += nth)
          attend_pair(attend_head, a, k32.data(), k_used, v32.data(), v_used, base, i, scratch);
      },
      n_active);
}

}  // namespace

void attention_f16_ref(const AttentionArgs& a) {
  AttentionScratch scratch;
  for (int i = 0; i < a.n_query * a.n_head; ++i) attend_pair(attend_head_ref, a, i, scratch);
}

namespace {

// Grouped: the work is (block of query tokens, KV head, slice of that KV head's query heads). One token
// (decode) has only n_head_kv groups, fewer than the threads for some models (Gemma 3 270M: 1), so its groups
// are cut into as many slices as it takes to give every thread one. A prompt's tokens go up to kTokenBlock at a
// time, so each cached key and value is widened once for that many tokens' heads (a chat turn of 26 tokens
// at depth reads the whole cache per block), in blocks small enough to leave every thread a few; with a
// sliding window every token has its own first key, so one token at a time.
constexpr int kTokenBlock = 4;

void attention_grouped(ThreadPool& pool, const AttentionArgs& a, AttendGroupFn attend_group) {
  const int group = a.n_head / a.n_head_kv;
  const int token_block =
      a.window > 0 ? 1 : std::clamp(a.n_query * a.n_head_kv / (2 * pool.n_threads()), 1, kTokenBlock);
  const int n_blocks = (a.n_query + token_block - 1) / token_block;
  const int blocks_groups = n_blocks * a.n_head_kv;
  const int n_slices = std::min(group, (pool.n_threads() + blocks_groups - 1) / blocks_groups);
  const int units = blocks_groups * n_slices;
  const size_t q_token = static_cast<size_t>(a.n_head) * a.head_dim_k;
  const size_t out_token = static_cast<size_t>(a.n_head) * a.head_dim_v;
  pool.run(
      [&](int ith, int nth) {
        AttentionScratch scratch;
        for (int i = ith; i < units; i += nth) {
          const int block = i / (a.n_head_kv * n_slices), kv_head = i / n_slices % a.n_head_kv,
                    slice = i % n_slices;
          const int t0 = block * token_block, n_tokens = std::min(token_block, a.n_query - t0);
          const int h0 = kv_head * group + group * slice / n_slices;
          const int h1 = kv_head * group + group * (slice + 1) / n_slices;
          const int pos = a.pos0 + t0;
          const int first = a.window > 0 ? std::max(0, pos - a.window + 1) : 0;
          attend_group(
              a.q + t0 * q_token + static_cast<size_t>(h0) * a.head_dim_k, static_cast<size_t>(a.head_dim_k),
              q_token, h1 - h0, n_tokens,
              a.k + static_cast<size_t>(first) * a.k_row + static_cast<size_t>(kv_head) * a.head_dim_k,
              static_cast<size_t>(a.k_row),
              a.v + static_cast<size_t>(first) * a.v_row + static_cast<size_t>(kv_head) * a.head_dim_v,
              static_cast<size_t>(a.v_row), pos + 1 - first, a.head_dim_k, a.head_dim_v, a.scale,
              a.out + t0 * out_token + static_cast<size_t>(h0) * a.head_dim_v,
              static_cast<size_t>(a.head_dim_v), out_token, scratch);
        }
      },
      std::min(pool.n_threads(), units));
}

}  // namespace

// Pairs are dealt round-robin: in a prompt, later tokens see more keys, and interleaving keeps the threads'
// shares within one token's work of each other. Fewer than 4 pairs per thread is not worth waking a thread.
void attention_f16(ThreadPool& pool, const AttentionArgs& a) {
  const AttentionKernels& kernels = attention_kernels();  // chosen once for all threads
  const AttendHeadFn attend_head = kernels.attend_head;
  const int pairs = a.n_query * a.n_head;
  const int n_active = std::min(pool.n_threads(), std::max(1, pairs / 4));
  if (attend_head == attend_head_portable) return attention_portable_widened(pool, a, n_active);
  if (kernels.attend_group) return attention_grouped(pool, a, kernels.attend_group);
  pool.run(
      [&](int ith, int nth) {
        AttentionScratch scratch;
        for (int i = ith; i < pairs; i += nth) attend_pair(attend_head, a, i, scratch);
      },
      n_active);
}

}  // namespace sotto
