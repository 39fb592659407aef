// Register-resident SIMD128 kernels for q4_0, q5_0, q8_0, q4_K and q6_K (the types of real downloads), used by
// quant_dot_portable() in the wasm builds; the math is quant_dot.h's, the structure that of
// quant_dot_fast_avx2.cpp: activations prepared once per tile of up to 4 tokens (on the stack: no thread-local
// storage in the wasm build) into exactly the vectors the inner loop consumes, weights decoded into registers
// once per step and used for every token of the tile, one f32 FMA-or-mul-add per block and token. Prompts of 8
// tokens or more take the prompt tile kernels at the end of this file instead (relaxed build; quant_dot.h).
//
// Integer dots, per build:
//   SIMD128  i32x4.dot_i16x8_s on weights widened to i16 and activations prepared as i16: exact. K-quant
//            weights are multiplied by their group scale while still i16 (|q * scale| <= 32 * 128 = 4096,
//            so the i16 product is exact), which leaves one dot + one add per 8 values and token.
//   relaxed  q4_0 / q5_0 / q8_0 use i16x8.relaxed_dot_i8x16_i7x16_s, then i32x4.dot_i16x8_s against ones
//            (dot_i7: what i32x4.relaxed_dot_i8x16_i7x16_add_s does, without V8 rebuilding the ones at each
//            use). It is deterministic only when its second operand is in [0, 127]: q4_0's unsigned nibbles
//            (0..15) are that operand as they are, and the offset 8 comes back as 8 * sum(x), prepared per
//            block; q5_0's values (0..31) likewise with 16 * sum(x); q8_0 moves x's sign onto w (the sign
//            trick of matvec.cpp) and uses |x|. q4_K (nibbles) and q6_K (q + 32) are the i7 operand of the
//            relaxed dot too, its i16 pair sums then times the group scale in i32x4.dot_i16x8_s, with x in
//            the pair order that gives each i32 lane the SIMD128 form's integers (see XBlockK): both builds
//            give the same bits (tests/web/kernel_browser.test.mjs). node web/cli.mjs runs the SIMD128 build
//            (Node 20's V8 miscomputed a relaxed dot followed by an i32 multiply, which these do not do).
// Vector constants come from loop_consts(), read once per row: see there for why.
#include <wasm_simd128.h>

#include <bit>
#include <cstddef>
#include <cstring>

#include "core/half.h"
#include "cpu/quant_dot.h"

namespace sotto {

namespace {

// Prepared activations of one tile live on the stack; wider rows fall back to the generic kernels.
constexpr size_t kMaxPreparedBytes = 192 * 1024;

uint16_t load_u16(const uint8_t* p) {
  uint16_t v;
  std::memcpy(&v, p, 2);
  return v;
}
// f16 -> f32 in a few integer ops (f16_to_f32's branches cost as much as a block's SIMD work): the f16's
// exponent and mantissa shifted into f32 position read as a float 2^112 times too small, normals and
// subnormals alike, so one exact multiply fixes it. Infinities and NaNs take f16_to_f32.
float f16(const uint8_t* p) {
  const uint16_t h = load_u16(p);
  const uint32_t magnitude_bits = h & 0x7fffu;
  if (magnitude_bits >= 0x7c00u) return f16_to_f32(h);
  const float magnitude = std::bit_cast<float>(magnitude_bits << 13) * 0x1p112f;
  return std::bit_cast<float>(std::bit_cast<uint32_t>(magnitude) |
                              (static_cast<uint32_t>(h & 0x8000u) << 16));
}

// The f16 scales of 4 consecutive blocks (block_bytes apart, the first at p) as 4 f32 lanes, with f16()'s
// arithmetic lane-wise and no branch (infinities and NaNs keep their payload, as f16_to_f32): a q4_0 / q8_0
// block spends ~10 scalar instructions on its own scale otherwise, as many as on its 32 weights.
v128_t f16x4(const uint8_t* p, size_t block_bytes) {
  v128_t h = wasm_i32x4_splat(0);  // each f16 in the low half of an i32 lane
  h = wasm_v128_load16_lane(p, h, 0);
  h = wasm_v128_load16_lane(p + block_bytes, h, 2);
  h = wasm_v128_load16_lane(p + 2 * block_bytes, h, 4);
  h = wasm_v128_load16_lane(p + 3 * block_bytes, h, 6);
  const v128_t magnitude_bits = wasm_v128_and(h, wasm_i32x4_splat(0x7fff));
  const v128_t shifted = wasm_i32x4_shl(magnitude_bits, 13);
  const v128_t finite = wasm_f32x4_mul(shifted, wasm_f32x4_splat(0x1p112f));
  const v128_t not_finite = wasm_v128_or(shifted, wasm_i32x4_splat(0x7f800000));
  const v128_t magnitude =
      wasm_v128_bitselect(not_finite, finite, wasm_i32x4_gt(magnitude_bits, wasm_i32x4_splat(0x7bff)));
  return wasm_v128_or(magnitude, wasm_i32x4_shl(wasm_v128_and(h, wasm_i32x4_splat(0x8000)), 16));
}

// Bytes of v shifted right by n (< 8) as u8 lanes, ANDed with mask, which must clear the n high bits of each
// byte: the 16-bit shift is one instruction on x86, the 8-bit one several (x86 has no byte shift).
template <int n>
v128_t bytes_shr_and(v128_t v, v128_t mask) {
  return wasm_v128_and(wasm_u16x8_shr(v, n), mask);
}

float hsum(v128_t v) {
  return (wasm_f32x4_extract_lane(v, 0) + wasm_f32x4_extract_lane(v, 1)) +
         (wasm_f32x4_extract_lane(v, 2) + wasm_f32x4_extract_lane(v, 3));
}
int32_t hsum_i32(v128_t v) {
  return wasm_i32x4_extract_lane(v, 0) + wasm_i32x4_extract_lane(v, 1) + wasm_i32x4_extract_lane(v, 2) +
         wasm_i32x4_extract_lane(v, 3);
}

// acc + f32(isum) * scale.
v128_t scaled_add(v128_t acc, v128_t isum, float scale) {
  const v128_t product = wasm_f32x4_mul(wasm_f32x4_convert_i32x4(isum), wasm_f32x4_splat(scale));
  return wasm_f32x4_add(acc, product);
}

// 8 i16 products of w (i16) and x (i16) summed into 4 i32 lanes, added to acc.
[[maybe_unused]] v128_t dot16_add(v128_t w, v128_t x, v128_t acc) {
  return wasm_i32x4_add(acc, wasm_i32x4_dot_i16x8(w, x));
}

#if defined(__wasm_relaxed_simd__)
// i32x4.relaxed_dot_i8x16_i7x16_add_s(a, b, 0) as its two steps, the i16 pair sums added into i32 lanes by
// i32x4.dot_i16x8_s against `ones` (i16 lanes of 1, kept in a register by the caller): V8 lowers the fused
// instruction on x86 to pmaddubsw, pmaddwd against a vector of ones it rebuilds at every use (2 more
// instructions, 4 of a q4_0 block's ~27), then paddd. The same integers: the i16 pair sums cannot saturate
// here (|a| <= 127, 0 <= b <= 127: at most 2 * 127 * 127 = 32,258 in magnitude).
v128_t dot_i7(v128_t a, v128_t b, v128_t ones) {
  return wasm_i32x4_dot_i16x8(wasm_i16x8_relaxed_dot_i8x16_i7x16(a, b), ones);
}
v128_t dot_i7_add(v128_t a, v128_t b, v128_t c, v128_t ones) {
  return wasm_i32x4_add(dot_i7(a, b, ones), c);
}
#endif

// i16 lanes of 1, read through a volatile pointer (once per row, by block32_rows) so that the compiler cannot
// turn it back into a constant (which V8 would rebuild at each use; see dot_i7).
v128_t ones_i16() {
  alignas(16) static const int16_t kOnes[8] = {1, 1, 1, 1, 1, 1, 1, 1};
  return *static_cast<const volatile v128_t*>(static_cast<const volatile void*>(kOnes));
}

// The vector constants of the decode kernels' block loops, read once per row through volatile pointers like
// ones_i16(): V8 (x64) builds a v128.const from immediates at every use (a few instructions each; clang puts
// constants at their uses, inside the loop), and byte shuffles by constant indices likewise. A q5_0 block used
// 6 of them (~25 instructions of ~60), which made it ~2x a q8_0 block's time; read once, they stay in
// registers or one load away.
struct Consts {
  v128_t ones;       // i16 lanes of 1
  v128_t nibble;     // bytes 0x0f
  v128_t three;      // bytes 3 (q6_K's high bits)
  v128_t fifth_bit;  // bytes 1, 2, 4, .., 128, twice (q5_0: bit j of 8 in byte j)
  v128_t x10;        // bytes 0x10 (q5_0's fifth bit in place)
  v128_t spread_lo;  // byte indices 0 (x8), 1 (x8): q5_0's qh bytes 0, 1 to the bytes of elements 0..15
  v128_t spread_hi;  // byte indices 2 (x8), 3 (x8): qh bytes 2, 3 to elements 16..31
  v128_t pairs;      // byte indices 0, 1, 8, 9, 2, 3, 10, 11, ..: pair_order() (K-quants, relaxed build)
};

v128_t volatile_load(const void* p) {
  return *static_cast<const volatile v128_t*>(p);
}

Consts loop_consts() {
  alignas(16) static const uint8_t kBytes[7][16] = {
      {0x0f, 0x0f, 0x0f, 0x0f, 0x0f, 0x0f, 0x0f, 0x0f, 0x0f, 0x0f, 0x0f, 0x0f, 0x0f, 0x0f, 0x0f, 0x0f},
      {3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3},
      {1, 2, 4, 8, 16, 32, 64, 128, 1, 2, 4, 8, 16, 32, 64, 128},
      {0x10, 0x10, 0x10, 0x10, 0x10, 0x10, 0x10, 0x10, 0x10, 0x10, 0x10, 0x10, 0x10, 0x10, 0x10, 0x10},
      {0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1},
      {2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3},
      {0, 1, 8, 9, 2, 3, 10, 11, 4, 5, 12, 13, 6, 7, 14, 15},
  };
  return {ones_i16(),
          volatile_load(kBytes[0]),
          volatile_load(kBytes[1]),
          volatile_load(kBytes[2]),
          volatile_load(kBytes[3]),
          volatile_load(kBytes[4]),
          volatile_load(kBytes[5]),
          volatile_load(kBytes[6])};
}

// v's bytes at `indices` (all < 16): one pshufb in the relaxed build; SIMD128's swizzle adds a saturating add.
v128_t byte_swizzle(v128_t v, v128_t indices) {
#if defined(__wasm_relaxed_simd__)
  return wasm_i8x16_relaxed_swizzle(v, indices);
#else
  return wasm_i8x16_swizzle(v, indices);
#endif
}

// ============================================================================ q4_0 / q8_0 (q8_0 activations)
// These two keep ggml's AVX2 float order exactly, as quant_dot_fast_avx2.cpp does (the model's greedy tokens
// must be llama.cpp's, and stories260K q4_0 has a step where two logits nearly tie): per block, 8 integer
// lanes, lane k = the products of elements 4k .. 4k + 3; each lane gets lane * (f32(d_w) * f32(d_x)) added with
// ONE rounding (an FMA); at the end the lanes are summed as ggml's hsum_float_8 does. Relaxed SIMD has the
// FMA (f32x4.relaxed_madd, fused on x86 with FMA3 and on ARM); plain SIMD128 has none, so it computes
// lane * scale + acc in f64 (the product of two f32 is exact there) and rounds to f32 after every block.
//
// Prepared per 32-value block, 4 vectors. Relaxed q4_0: x[0..15], x[16..31], then -8 * (sums of each 4 x's)
// for lanes 0..3 and 4..7. Relaxed q8_0: |x| (2 vectors) and the sign masks (2). SIMD128: x as i16 in the
// order A = elements {0,1,4,5,8,9,12,13}, B = {2,3,6,7,10,11,14,15} of each 16, so that dot(A) + dot(B) gives
// the sums of 4 consecutive products in 4 lanes (i32x4.dot_i16x8_s adds adjacent pairs).
struct XBlock32 {
  v128_t v[4];
  float d4[4];  // d_x of this block and the next three (0 past the end): one load per step of 4 blocks
};

#if !defined(__wasm_relaxed_simd__)
// Bytes of 16 values reordered to A then B (see above).
v128_t quad_order(v128_t bytes) {
  return wasm_i8x16_shuffle(bytes, bytes, 0, 1, 4, 5, 8, 9, 12, 13, 2, 3, 6, 7, 10, 11, 14, 15);
}
#endif

// kOffsetShift: the weight type's values are unsigned with offset 2^kOffsetShift (q4_0: 3, q5_0: 4); 0: signed
// weights (q8_0).
template <int kOffsetShift>
void prepare_q8_0(const uint8_t* xq, int64_t n_blocks, XBlock32* out) {
  const auto* x = reinterpret_cast<const BlockQ8_0*>(xq);
  for (int64_t b = 0; b < n_blocks; ++b) {
    const v128_t x0 = wasm_v128_load(x[b].qs), x1 = wasm_v128_load(x[b].qs + 16);
    XBlock32& o = out[b];
    o.d4[0] = f16(reinterpret_cast<const uint8_t*>(&x[b].d));
#if defined(__wasm_relaxed_simd__)
    if constexpr (kOffsetShift > 0) {
      o.v[0] = x0;
      o.v[1] = x1;
      // -2^kOffsetShift * sums: the dot's own add operand removes the offset (exact i32 arithmetic).
      const v128_t zero = wasm_i32x4_splat(0);
      o.v[2] = wasm_i32x4_sub(
          zero, wasm_i32x4_shl(wasm_i32x4_extadd_pairwise_i16x8(wasm_i16x8_extadd_pairwise_i8x16(x0)),
                               kOffsetShift));
      o.v[3] = wasm_i32x4_sub(
          zero, wasm_i32x4_shl(wasm_i32x4_extadd_pairwise_i16x8(wasm_i16x8_extadd_pairwise_i8x16(x1)),
                               kOffsetShift));
    } else {
      o.v[0] = wasm_i8x16_abs(x0);
      o.v[1] = wasm_i8x16_abs(x1);
      o.v[2] = wasm_i8x16_shr(x0, 7);
      o.v[3] = wasm_i8x16_shr(x1, 7);
    }
#else
    const v128_t q0 = quad_order(x0), q1 = quad_order(x1);
    o.v[0] = wasm_i16x8_extend_low_i8x16(q0);
    o.v[1] = wasm_i16x8_extend_high_i8x16(q0);
    o.v[2] = wasm_i16x8_extend_low_i8x16(q1);
    o.v[3] = wasm_i16x8_extend_high_i8x16(q1);
#endif
  }
  for (int64_t b = 0; b < n_blocks; ++b)
    for (int k = 1; k < 4; ++k) out[b].d4[k] = b + k < n_blocks ? out[b + k].d4[0] : 0.0f;
}

// 8 float lanes accumulated in ggml's order; see above.
struct Lanes8 {
#if defined(__wasm_relaxed_simd__)
  v128_t lo = wasm_f32x4_splat(0.0f), hi = wasm_f32x4_splat(0.0f);  // f32 lanes 0..3, 4..7
  void add(v128_t isum_lo, v128_t isum_hi, v128_t s) {              // s: the block's scale in all lanes
    lo = wasm_f32x4_relaxed_madd(wasm_f32x4_convert_i32x4(isum_lo), s, lo);
    hi = wasm_f32x4_relaxed_madd(wasm_f32x4_convert_i32x4(isum_hi), s, hi);
  }
  float lane(int k) const {
    switch (k) {
      case 0:
        return wasm_f32x4_extract_lane(lo, 0);
      case 1:
        return wasm_f32x4_extract_lane(lo, 1);
      case 2:
        return wasm_f32x4_extract_lane(lo, 2);
      case 3:
        return wasm_f32x4_extract_lane(lo, 3);
      case 4:
        return wasm_f32x4_extract_lane(hi, 0);
      case 5:
        return wasm_f32x4_extract_lane(hi, 1);
      case 6:
        return wasm_f32x4_extract_lane(hi, 2);
      default:
        return wasm_f32x4_extract_lane(hi, 3);
    }
  }
#else
  v128_t pair[4] = {wasm_f64x2_splat(0.0), wasm_f64x2_splat(0.0), wasm_f64x2_splat(0.0),
                    wasm_f64x2_splat(0.0)};  // f64 holding f32 values: lanes 0,1 | 2,3 | 4,5 | 6,7
  static v128_t fma_f32(v128_t acc, v128_t isum_pair, v128_t scale) {
    const v128_t exact = wasm_f64x2_add(acc, wasm_f64x2_mul(wasm_f64x2_convert_low_i32x4(isum_pair), scale));
    return wasm_f64x2_promote_low_f32x4(wasm_f32x4_demote_f64x2_zero(exact));
  }
  void add(v128_t isum_lo, v128_t isum_hi, v128_t scale) {  // scale: the block's f32 scale in all lanes
    const v128_t s = wasm_f64x2_promote_low_f32x4(scale);
    pair[0] = fma_f32(pair[0], isum_lo, s);
    pair[1] = fma_f32(pair[1], wasm_i32x4_shuffle(isum_lo, isum_lo, 2, 3, 2, 3), s);
    pair[2] = fma_f32(pair[2], isum_hi, s);
    pair[3] = fma_f32(pair[3], wasm_i32x4_shuffle(isum_hi, isum_hi, 2, 3, 2, 3), s);
  }
  float lane(int k) const {
    const v128_t p = pair[k / 2];
    return static_cast<float>(k % 2 ? wasm_f64x2_extract_lane(p, 1) : wasm_f64x2_extract_lane(p, 0));
  }
#endif
  // ggml's hsum_float_8: (upper half + lower half), then lanes 0 + 2 and 1 + 3, then those two.
  float total() const {
    const float s0 = lane(4) + lane(0), s1 = lane(5) + lane(1), s2 = lane(6) + lane(2),
                s3 = lane(7) + lane(3);
    return (s0 + s2) + (s1 + s3);
  }
};

#if !defined(__wasm_relaxed_simd__)
// Sums of 4 consecutive products of 16 weights (i8, in element order) with prepared x (A, B as i16).
v128_t quad_sums(v128_t w, v128_t x_a, v128_t x_b) {
  const v128_t q = quad_order(w);
  return wasm_i32x4_add(wasm_i32x4_dot_i16x8(wasm_i16x8_extend_low_i8x16(q), x_a),
                        wasm_i32x4_dot_i16x8(wasm_i16x8_extend_high_i8x16(q), x_b));
}
#endif

struct Q4_0Wasm {
  static constexpr DType kType = DType::Q4_0;
  static constexpr int kBlockElems = 32;
  static constexpr size_t kBlockBytes = sizeof(BlockQ4_0);
  using XBlock = XBlock32;
  using Acc = Lanes8;
  static void prepare(const uint8_t* xq, int64_t n_blocks, XBlock* out) {
    prepare_q8_0<3>(xq, n_blocks, out);
  }
  // scale[t]: f32(d_w) * f32(d_x) of this block and token t, in all lanes (see block32_rows).
  template <int T>
  static void step(const uint8_t* w, const v128_t (&scale)[T], const Consts& c, const XBlock* const (&x)[T],
                   Acc (&acc)[T]) {
    const v128_t bytes = wasm_v128_load(w + 2);
    const v128_t mask = c.nibble;
#if defined(__wasm_relaxed_simd__)
    // Unsigned nibbles (0..15) are valid i7 operands; the dot adds the prepared -8 * sums, which removes the
    // offset 8 (saves an i32 subtract per half block and token).
    const v128_t lo = wasm_v128_and(bytes, mask), hi = bytes_shr_and<4>(bytes, mask);
    for (int t = 0; t < T; ++t) {
      const v128_t sum_lo = dot_i7_add(x[t]->v[0], lo, x[t]->v[2], c.ones);
      const v128_t sum_hi = dot_i7_add(x[t]->v[1], hi, x[t]->v[3], c.ones);
      acc[t].add(sum_lo, sum_hi, scale[t]);
    }
#else
    const v128_t eight = wasm_i8x16_splat(8);
    const v128_t lo = wasm_i8x16_sub(wasm_v128_and(bytes, mask), eight);
    const v128_t hi = wasm_i8x16_sub(bytes_shr_and<4>(bytes, mask), eight);
    for (int t = 0; t < T; ++t)
      acc[t].add(quad_sums(lo, x[t]->v[0], x[t]->v[1]), quad_sums(hi, x[t]->v[2], x[t]->v[3]), scale[t]);
#endif
  }
};

struct Q8_0Wasm {
  static constexpr DType kType = DType::Q8_0;
  // A lone token takes two rows per pass (block32_rows): ~5 % faster on the output table's shape in Chromium
  // (1.00-1.07x over four interleaved runs on a loaded machine); q5_0, with more constants live, spills and
  // loses ~6 %.
  static constexpr bool kTwoRows = true;
  static constexpr int kBlockElems = 32;
  static constexpr size_t kBlockBytes = sizeof(BlockQ8_0);
  using XBlock = XBlock32;
  using Acc = Lanes8;
  static void prepare(const uint8_t* xq, int64_t n_blocks, XBlock* out) {
    prepare_q8_0<0>(xq, n_blocks, out);
  }
  template <int T>
  static void step(const uint8_t* w, const v128_t (&scale)[T], const Consts& c, const XBlock* const (&x)[T],
                   Acc (&acc)[T]) {
    signed_step<T>(wasm_v128_load(w + 2), wasm_v128_load(w + 18), scale, c, x, acc);
  }
  // One block of signed 8-bit weights (elements 0..15 in w0, 16..31 in w1; |w| <= 127) against T tokens'
  // prepare_q8_0<false> blocks. Q5_0 comes here too once unpacked.
  template <int T>
  static void signed_step(v128_t w0, v128_t w1, const v128_t (&scale)[T], const Consts& c,
                          const XBlock* const (&x)[T], Acc (&acc)[T]) {
    for (int t = 0; t < T; ++t) {
#if defined(__wasm_relaxed_simd__)
      // (w ^ s) - s negates w where x < 0 (s = -1); |w| <= 127, so never -128.
      const v128_t s0 = x[t]->v[2], s1 = x[t]->v[3];
      const v128_t ws0 = wasm_i8x16_sub(wasm_v128_xor(w0, s0), s0),
                   ws1 = wasm_i8x16_sub(wasm_v128_xor(w1, s1), s1);
      acc[t].add(dot_i7(ws0, x[t]->v[0], c.ones), dot_i7(ws1, x[t]->v[1], c.ones), scale[t]);
#else
      acc[t].add(quad_sums(w0, x[t]->v[0], x[t]->v[1]), quad_sums(w1, x[t]->v[2], x[t]->v[3]), scale[t]);
#endif
    }
  }
};

// Q5_0: q = nibble | (5th bit from qh) << 4, weight (q - 16) * d. The signed weights (-16..15) then go through
// the Q8_0 step (ggml's Q5_0 dot has Q8_0's structure and float order once the bytes are unpacked).
struct Q5_0Wasm {
  static constexpr DType kType = DType::Q5_0;
  static constexpr int kBlockElems = 32;
  static constexpr size_t kBlockBytes = sizeof(BlockQ5_0);
  using XBlock = XBlock32;
  using Acc = Lanes8;
  static void prepare(const uint8_t* xq, int64_t n_blocks, XBlock* out) {
#if defined(__wasm_relaxed_simd__)
    prepare_q8_0<4>(xq, n_blocks, out);
#else
    prepare_q8_0<0>(xq, n_blocks, out);
#endif
  }
  // Byte j of the result: 0x10 where bit j of qh's bytes first_byte, first_byte + 1 (qh: the block's 4 bytes of
  // fifth bits in lanes 0..3; spread: c.spread_lo or c.spread_hi) is set.
  static v128_t fifth_bits(v128_t qh, v128_t spread, const Consts& c) {
    const v128_t bits = byte_swizzle(qh, spread);
    return wasm_v128_and(wasm_i8x16_eq(wasm_v128_and(bits, c.fifth_bit), c.fifth_bit), c.x10);
  }
  template <int T>
  static void step(const uint8_t* w, const v128_t (&scale)[T], const Consts& c, const XBlock* const (&x)[T],
                   Acc (&acc)[T]) {
    const v128_t qh = wasm_v128_load32_zero(w + 2);
    const v128_t bytes = wasm_v128_load(w + 6);
    const v128_t mask = c.nibble;
    const v128_t lo = wasm_v128_or(wasm_v128_and(bytes, mask), fifth_bits(qh, c.spread_lo, c));
    const v128_t hi = wasm_v128_or(bytes_shr_and<4>(bytes, mask), fifth_bits(qh, c.spread_hi, c));
#if defined(__wasm_relaxed_simd__)
    // The unsigned values (0..31) are valid i7 operands: as q4_0, the dot adds the prepared -16 * sums, which
    // removes the offset (no sign moved onto the weights, no subtract: ~10 of a block's ~40 instructions).
    for (int t = 0; t < T; ++t) {
      const v128_t sum_lo = dot_i7_add(x[t]->v[0], lo, x[t]->v[2], c.ones);
      const v128_t sum_hi = dot_i7_add(x[t]->v[1], hi, x[t]->v[3], c.ones);
      acc[t].add(sum_lo, sum_hi, scale[t]);
    }
#else
    const v128_t sixteen = wasm_i8x16_splat(16);
    Q8_0Wasm::signed_step<T>(wasm_i8x16_sub(lo, sixteen), wasm_i8x16_sub(hi, sixteen), scale, c, x, acc);
#endif
  }
};

// Four f32 lanes for the K-quants (their float order is not ggml's anyway).
struct Lanes4 {
  v128_t v = wasm_f32x4_splat(0.0f);
  float total() const { return hsum(v); }
};

// ============================================================================ q4_K / q6_K (q8_K activations)
// Prepared per super-block: the 256 x's, d_x, and for q4_K the 8 sums of 32 as i16.
//   SIMD128: the x's as i16 (32 vectors), for i32x4.dot_i16x8_s against weights widened to i16 and already times
//            their group scale: i32 lane i of a group of 16 gets the products of elements 2i, 2i + 1, 8 + 2i and
//            9 + 2i.
//   relaxed: the x's as i8, each 16 reordered by kPairOrder (16 vectors), so that one relaxed i8 x i7 dot of a
//            group's 16 weights (reordered the same way) and then i32x4.dot_i16x8_s against the group's scale
//            give each i32 lane the products of the same 4 elements: the same integers in every lane as the
//            SIMD128 form, hence the same floats, in ~half the instructions (no widening, no i16 multiply).
//            Weights are the dot's i7 operand: q4_K's nibbles (0..15) as they are, q6_K's q + 32 (0..63), whose
//            offset comes off through off16: -32 * (x[2j] + x[2j + 1]) per i16 lane, added to the dot's i16
//            pair sums (|pair| <= 2 * 63 * 128 = 16,128, |offset| <= 8,192: no overflow).
struct XBlockK {
#if defined(__wasm_relaxed_simd__)
  v128_t x8[16];
  v128_t off16[16];
#else
  v128_t x16[32];
#endif
  v128_t sums32;
  float d;
  float unused[3];
};

#if defined(__wasm_relaxed_simd__)
// Elements 0, 1, 8, 9, 2, 3, 10, 11, ... of 16: i16 pair j of a dot then holds what the SIMD128 form's i32 lane
// j / 2 adds (see above).
v128_t pair_order(v128_t v, const Consts& c) {
  return byte_swizzle(v, c.pairs);
}
#endif

void prepare_q8_K(const uint8_t* xq, int64_t n_blocks, XBlockK* out) {
  const auto* x = reinterpret_cast<const BlockQ8_K*>(xq);
  [[maybe_unused]] const Consts c = loop_consts();
  for (int64_t b = 0; b < n_blocks; ++b) {
    XBlockK& o = out[b];
    o.d = x[b].d;
    for (int i = 0; i < 16; ++i) {
      const v128_t q = wasm_v128_load(x[b].qs + 16 * i);
#if defined(__wasm_relaxed_simd__)
      const v128_t ordered = pair_order(q, c);
      o.x8[i] = ordered;
      o.off16[i] =
          wasm_i16x8_sub(wasm_i16x8_splat(0), wasm_i16x8_shl(wasm_i16x8_extadd_pairwise_i8x16(ordered), 5));
#else
      o.x16[2 * i] = wasm_i16x8_extend_low_i8x16(q);
      o.x16[2 * i + 1] = wasm_i16x8_extend_high_i8x16(q);
#endif
    }
    int16_t sums[8];
    for (int j = 0; j < 8; ++j) sums[j] = static_cast<int16_t>(x[b].bsums[2 * j] + x[b].bsums[2 * j + 1]);
    o.sums32 = wasm_v128_load(sums);
  }
}

#if !defined(__wasm_relaxed_simd__)
// Adds the dot of 16 weights (i16, already times their group scale) with x16[0..1] to isum[t] for each token.
template <int T>
void group_dot(v128_t w_lo, v128_t w_hi, const XBlockK* const (&x)[T], int vec, v128_t (&isum)[T]) {
  for (int t = 0; t < T; ++t)
    isum[t] = dot16_add(w_hi, x[t]->x16[vec + 1], dot16_add(w_lo, x[t]->x16[vec], isum[t]));
}
#endif

struct Q4_KWasm {
  static constexpr DType kType = DType::Q4_K;
  static constexpr int kBlockElems = 256;
  static constexpr size_t kBlockBytes = sizeof(BlockQ4_K);
  using XBlock = XBlockK;
  using Acc = Lanes4;
  static void prepare(const uint8_t* xq, int64_t n_blocks, XBlock* out) { prepare_q8_K(xq, n_blocks, out); }
  template <int T>
  static void step(const uint8_t* w, const XBlock* const (&x)[T], Acc (&acc)[T], const Consts& c) {
    uint8_t scales_mins[16];  // scales 0..7, then mins 0..7
    unpack_k4_scales_mins(w + 4, scales_mins);
    const uint8_t* scales = scales_mins;
    const uint8_t* mins = scales_mins + 8;
    v128_t isum[T];
    for (int t = 0; t < T; ++t) isum[t] = wasm_i32x4_splat(0);
    const uint8_t* qs = w + 16;
    const v128_t mask = c.nibble;
    for (int k = 0; k < 4; ++k) {  // 32 bytes: sub-block 2k in the low nibbles, 2k + 1 in the high ones
      const v128_t scale_lo = wasm_i16x8_splat(scales[2 * k]), scale_hi = wasm_i16x8_splat(scales[2 * k + 1]);
#if defined(__wasm_relaxed_simd__)
      // Elements 64k + 16h .. (low nibbles of bytes 16h ..) and 64k + 32 + 16h .. (high nibbles): x8[4k + h],
      // x8[4k + 2 + h]. i16 pair sums of a sub-block: <= 2 * 2 * 15 * 128 = 7,680.
      const v128_t bytes0 = pair_order(wasm_v128_load(qs + 32 * k), c),
                   bytes1 = pair_order(wasm_v128_load(qs + 32 * k + 16), c);
      const v128_t lo0 = wasm_v128_and(bytes0, mask), lo1 = wasm_v128_and(bytes1, mask);
      const v128_t hi0 = bytes_shr_and<4>(bytes0, mask), hi1 = bytes_shr_and<4>(bytes1, mask);
      for (int t = 0; t < T; ++t) {
        const v128_t* x8 = x[t]->x8 + 4 * k;
        const v128_t sum_lo = wasm_i16x8_add(wasm_i16x8_relaxed_dot_i8x16_i7x16(x8[0], lo0),
                                             wasm_i16x8_relaxed_dot_i8x16_i7x16(x8[1], lo1));
        const v128_t sum_hi = wasm_i16x8_add(wasm_i16x8_relaxed_dot_i8x16_i7x16(x8[2], hi0),
                                             wasm_i16x8_relaxed_dot_i8x16_i7x16(x8[3], hi1));
        isum[t] = wasm_i32x4_add(isum[t], wasm_i32x4_add(wasm_i32x4_dot_i16x8(sum_lo, scale_lo),
                                                         wasm_i32x4_dot_i16x8(sum_hi, scale_hi)));
      }
#else
      for (int h = 0; h < 2; ++h) {
        const v128_t bytes = wasm_v128_load(qs + 32 * k + 16 * h);
        const v128_t lo = wasm_v128_and(bytes, mask), hi = bytes_shr_and<4>(bytes, mask);
        group_dot<T>(wasm_i16x8_mul(wasm_u16x8_extend_low_u8x16(lo), scale_lo),
                     wasm_i16x8_mul(wasm_u16x8_extend_high_u8x16(lo), scale_lo), x, 8 * k + 2 * h, isum);
        group_dot<T>(wasm_i16x8_mul(wasm_u16x8_extend_low_u8x16(hi), scale_hi),
                     wasm_i16x8_mul(wasm_u16x8_extend_high_u8x16(hi), scale_hi), x, 8 * k + 4 + 2 * h, isum);
      }
#endif
    }
    const v128_t mins16 = wasm_u16x8_extend_low_u8x16(wasm_v128_load64_zero(mins));
    const float d = f16(w), dmin = f16(w + 2);
    for (int t = 0; t < T; ++t) {
      const int32_t min_sum = hsum_i32(wasm_i32x4_dot_i16x8(mins16, x[t]->sums32));
      acc[t].v = scaled_add(acc[t].v, isum[t], d * x[t]->d);
      acc[t].v = scaled_add(acc[t].v, wasm_i32x4_make(min_sum, 0, 0, 0), -dmin * x[t]->d);
    }
  }
};

// Values l = 16h .. 16h + 15 of each of the 4 chunks of 32 of a q6_K half (ql, qh: that half's 64 and 32
// bytes), as q + 32 (0..63): chunk k's low 4 bits from ql (chunks 0, 1 low nibbles, 2, 3 high), bits 4..5 from
// bits 2k, 2k + 1 of qh. 16-bit shifts (one x86 instruction; see bytes_shr_and): every byte shifted left is
// <= 3 first, so nothing crosses into the next byte.
void q6_K_values(const uint8_t* ql, const uint8_t* qh, int h, v128_t (&q)[4], const Consts& c) {
  const v128_t mask = c.nibble, three = c.three;
  const v128_t low_a = wasm_v128_load(ql + 16 * h), low_b = wasm_v128_load(ql + 32 + 16 * h);
  const v128_t high = wasm_v128_load(qh + 16 * h);
  q[0] = wasm_v128_or(wasm_v128_and(low_a, mask), wasm_i16x8_shl(wasm_v128_and(high, three), 4));
  q[1] = wasm_v128_or(wasm_v128_and(low_b, mask), wasm_i16x8_shl(bytes_shr_and<2>(high, three), 4));
  q[2] = wasm_v128_or(bytes_shr_and<4>(low_a, mask), wasm_i16x8_shl(bytes_shr_and<4>(high, three), 4));
  q[3] = wasm_v128_or(bytes_shr_and<4>(low_b, mask), wasm_i16x8_shl(bytes_shr_and<6>(high, three), 4));
}

struct Q6_KWasm {
  static constexpr DType kType = DType::Q6_K;
  static constexpr int kBlockElems = 256;
  static constexpr size_t kBlockBytes = sizeof(BlockQ6_K);
  using XBlock = XBlockK;
  using Acc = Lanes4;
  static void prepare(const uint8_t* xq, int64_t n_blocks, XBlock* out) { prepare_q8_K(xq, n_blocks, out); }
  template <int T>
  static void step(const uint8_t* w, const XBlock* const (&x)[T], Acc (&acc)[T], const Consts& c) {
    const auto* block = reinterpret_cast<const BlockQ6_K*>(w);
    v128_t isum[T];
    for (int t = 0; t < T; ++t) isum[t] = wasm_i32x4_splat(0);
    [[maybe_unused]] const v128_t bias = wasm_i8x16_splat(32);
    for (int half = 0; half < 2; ++half) {
      const uint8_t* ql = block->ql + 64 * half;
      const uint8_t* qh = block->qh + 32 * half;
      for (int h = 0; h < 2; ++h) {  // values l = 16h .. 16h + 15 of each of the 4 chunks of 32
        v128_t q[4];
        q6_K_values(ql, qh, h, q, c);
        for (int k = 0; k < 4; ++k) {  // values 128 half + 32 k + 16 h ..: group 8 half + 2 k + h
          const int j = 8 * half + 2 * k + h;
          const v128_t scale = wasm_i16x8_splat(block->scales[j]);
#if defined(__wasm_relaxed_simd__)
          const v128_t ordered = pair_order(q[k], c);  // q + 32: the i7 operand; off16 removes the 32
          for (int t = 0; t < T; ++t) {
            const v128_t sum16 =
                wasm_i16x8_add(wasm_i16x8_relaxed_dot_i8x16_i7x16(x[t]->x8[j], ordered), x[t]->off16[j]);
            isum[t] = wasm_i32x4_add(isum[t], wasm_i32x4_dot_i16x8(sum16, scale));
          }
#else
          const v128_t signed_q = wasm_i8x16_sub(q[k], bias);
          group_dot<T>(wasm_i16x8_mul(wasm_i16x8_extend_low_i8x16(signed_q), scale),
                       wasm_i16x8_mul(wasm_i16x8_extend_high_i8x16(signed_q), scale), x, 2 * j, isum);
#endif
        }
      }
    }
    const float d = f16(reinterpret_cast<const uint8_t*>(&block->d));
    for (int t = 0; t < T; ++t) acc[t].v = scaled_add(acc[t].v, isum[t], d * x[t]->d);
  }
};

// ============================================================================ driver
// Rows [row_begin, row_end) of a 32-element block type against T tokens: each block's scale is f32(d_w) *
// f32(d_x), one rounding, as ggml. A row's scales are worked out first, 4 blocks per f16x4 and multiply per
// token, into `scales`; then one block per iteration. (Unrolled over 4 blocks with the scales in registers,
// V8 hoisted the 16 activation loads to the top of the loop and spilled them: slower.) One row at a time, also
// for a lone token, except where the type asks for two (kTwoRows): two rows per pass sharing the activation
// loads measured ~25 % slower with the 4-block unrolling (it spilled), and without it gains only where few
// constants are live (q8_0).

// Block scales f32(d_w) * f32(d_x) of row w_row for T tokens into scales[t * n_blocks + b].
template <class W, int T>
void row_scales(const uint8_t* w_row, int64_t n_blocks, const typename W::XBlock* prepared, float* scales) {
  constexpr size_t kBytes = W::kBlockBytes;
  int64_t b = 0;
  for (; b + 4 <= n_blocks; b += 4) {
    const v128_t d_w = f16x4(w_row + static_cast<size_t>(b) * kBytes, kBytes);
    for (int t = 0; t < T; ++t)
      wasm_v128_store(scales + t * n_blocks + b,
                      wasm_f32x4_mul(d_w, wasm_v128_load(prepared[t * n_blocks + b].d4)));
  }
  for (; b < n_blocks; ++b) {
    const float d_w = f16(w_row + static_cast<size_t>(b) * kBytes);
    for (int t = 0; t < T; ++t) scales[t * n_blocks + b] = d_w * prepared[t * n_blocks + b].d4[0];
  }
}

template <class W>
constexpr bool two_rows_per_pass() {
  if constexpr (requires { W::kTwoRows; })
    return W::kTwoRows;
  else
    return false;
}

// scales: room for 4 * n_blocks floats.
template <class W, int T>
void block32_rows(const uint8_t* weights, int64_t n_blocks, size_t row_bytes,
                  const typename W::XBlock* prepared, float* scales, float* y, int64_t y_stride, int64_t t0,
                  int64_t row_begin, int64_t row_end) {
  constexpr size_t kBytes = W::kBlockBytes;
  int64_t r = row_begin;
  if constexpr (T == 1 && two_rows_per_pass<W>()) {
    // A lone token, two rows per pass: each activation load and the loop's own work serve both rows; every
    // row's sums are the one-row pass's.
    float* scales1 = scales + n_blocks;
    for (; r + 2 <= row_end; r += 2) {
      const uint8_t* w0 = weights + static_cast<size_t>(r) * row_bytes;
      const uint8_t* w1 = w0 + row_bytes;
      row_scales<W, 1>(w0, n_blocks, prepared, scales);
      row_scales<W, 1>(w1, n_blocks, prepared, scales1);
      typename W::Acc acc0[1], acc1[1];
      const Consts c = loop_consts();
      for (int64_t b = 0; b < n_blocks; ++b) {
        const typename W::XBlock* x[1] = {prepared + b};
        const v128_t s0[1] = {wasm_v128_load32_splat(scales + b)};
        const v128_t s1[1] = {wasm_v128_load32_splat(scales1 + b)};
        W::template step<1>(w0 + static_cast<size_t>(b) * kBytes, s0, c, x, acc0);
        W::template step<1>(w1 + static_cast<size_t>(b) * kBytes, s1, c, x, acc1);
      }
      y[t0 * y_stride + r] = acc0[0].total();
      y[t0 * y_stride + r + 1] = acc1[0].total();
    }
  }
  for (; r < row_end; ++r) {
    const uint8_t* w_row = weights + static_cast<size_t>(r) * row_bytes;
    row_scales<W, T>(w_row, n_blocks, prepared, scales);
    typename W::Acc acc[T];
    const Consts c = loop_consts();
    for (int64_t b = 0; b < n_blocks; ++b) {
      const typename W::XBlock* x[T];
      v128_t scale[T];
      for (int t = 0; t < T; ++t) {
        x[t] = prepared + t * n_blocks + b;
        scale[t] = wasm_v128_load32_splat(scales + t * n_blocks + b);
      }
      W::template step<T>(w_row + static_cast<size_t>(b) * kBytes, scale, c, x, acc);
    }
    for (int t = 0; t < T; ++t) y[(t0 + t) * y_stride + r] = acc[t].total();
  }
}

template <class W, int T>
void rows_tile(const uint8_t* weights, int64_t n_blocks, size_t row_bytes, const typename W::XBlock* prepared,
               float* scales, float* y, int64_t y_stride, int64_t t0, int64_t row_begin, int64_t row_end) {
  if constexpr (W::kBlockElems == 32) {
    block32_rows<W, T>(weights, n_blocks, row_bytes, prepared, scales, y, y_stride, t0, row_begin, row_end);
  } else {
    for (int64_t r = row_begin; r < row_end; ++r) {
      const uint8_t* w_row = weights + static_cast<size_t>(r) * row_bytes;
      typename W::Acc acc[T];
      const Consts c = loop_consts();
      for (int64_t b = 0; b < n_blocks; ++b) {
        const typename W::XBlock* x[T];
        for (int t = 0; t < T; ++t) x[t] = prepared + t * n_blocks + b;
        W::template step<T>(w_row + static_cast<size_t>(b) * W::kBlockBytes, x, acc, c);
      }
      for (int t = 0; t < T; ++t) y[(t0 + t) * y_stride + r] = acc[t].total();
    }
  }
}

template <class W>
void rows_fast(const void* weights, int64_t cols, const void* xq, int64_t n, size_t xq_stride, float* y,
               int64_t y_stride, int64_t row_begin, int64_t row_end) {
  const int64_t n_blocks = cols / W::kBlockElems;
  const size_t row_bytes = static_cast<size_t>(n_blocks) * W::kBlockBytes;
  const auto* x = static_cast<const uint8_t*>(xq);
  const auto* w = static_cast<const uint8_t*>(weights);
  constexpr size_t kMaxBlocks = kMaxPreparedBytes / sizeof(typename W::XBlock);
  if (static_cast<size_t>(4 * n_blocks) > kMaxBlocks)  // rows too wide for the stack tile
    return quant_dot_portable_generic(W::kType)(weights, cols, xq, n, xq_stride, y, y_stride, row_begin,
                                                row_end);
  typename W::XBlock prepared[kMaxBlocks];  // one tile of up to 4 tokens
  float scales[kMaxBlocks];  // a row's block scales for each token of the tile (32-value types)
  for (int64_t t0 = 0; t0 < n; t0 += 4) {
    const int tokens = static_cast<int>(n - t0 < 4 ? n - t0 : 4);
    for (int t = 0; t < tokens; ++t)
      W::prepare(x + static_cast<size_t>(t0 + t) * xq_stride, n_blocks, prepared + t * n_blocks);
    switch (tokens) {
      case 4:
        rows_tile<W, 4>(w, n_blocks, row_bytes, prepared, scales, y, y_stride, t0, row_begin, row_end);
        break;
      case 3:
        rows_tile<W, 3>(w, n_blocks, row_bytes, prepared, scales, y, y_stride, t0, row_begin, row_end);
        break;
      case 2:
        rows_tile<W, 2>(w, n_blocks, row_bytes, prepared, scales, y, y_stride, t0, row_begin, row_end);
        break;
      default:
        rows_tile<W, 1>(w, n_blocks, row_bytes, prepared, scales, y, y_stride, t0, row_begin, row_end);
        break;
    }
  }
}

#if defined(__wasm_relaxed_simd__)
// ============================================================================ prompt tiles (quant_dot.h)
// A 32-value weight type against a tile of 16 tokens (one per 32-bit lane), read as 4 vectors of 4 tokens.
// Per row and block: W::values() gives the block's unsigned values (<= 31: valid i7 operands, so the relaxed
// dot is deterministic), elements 0..15 and 16..31; each 32-bit word is splat to all lanes (group g: elements
// 4g .. 4g + 3), shared by the 16 tokens. Per 4 tokens: 8 relaxed dots (x as i8), summed in i16 four groups
// at a time (|.| <= 4 * 2 * 31 * 128 = 31,744: exact), two i32 dots against ones, the offset -2^kOffsetShift *
// sum x, and one multiply-add with f32(d_w) * f32(d_x): ggml's scalar float order, as the AVX-512 tile
// kernels. Where the time goes, per row, block and token, by our count of wasm instructions: ~7 against ~18
// for the row kernels' 4-token tiles (measured: prefill 256 of the Qwen2.5-0.5B-shaped Q4_0 file in Chromium at
// 163 tokens/s against 100 with the row kernels; bench/results/history-2026-12-03.md).
// Each 32-bit word of v in all lanes: words[i] = word i of v (a group of 4 weight values for every token).
void splat_words(v128_t v, v128_t* words) {
  words[0] = wasm_i32x4_shuffle(v, v, 0, 0, 0, 0);
  words[1] = wasm_i32x4_shuffle(v, v, 1, 1, 1, 1);
  words[2] = wasm_i32x4_shuffle(v, v, 2, 2, 2, 2);
  words[3] = wasm_i32x4_shuffle(v, v, 3, 3, 3, 3);
}

// y[t * y_stride + r] = row r's sum for token t (lane t % 4 of acc[t / 4]), for the tile's tokens only.
void store_tile_row(const v128_t (&acc)[4], int tokens, float* y, int64_t y_stride, int64_t r) {
  alignas(16) float out[kTileTokens];
  for (int s = 0; s < 4; ++s) wasm_v128_store(out + 4 * s, acc[s]);
  for (int t = 0; t < tokens; ++t) y[t * y_stride + r] = out[t];
}

template <class W>
void tile_rows_wasm(const void* weights, int64_t cols, const TileVec* tile, int tokens, float* y,
                    int64_t y_stride, int64_t row_begin, int64_t row_end) {
  const int64_t n_blocks = cols / 32;
  const size_t row_bytes = static_cast<size_t>(n_blocks) * W::kBlockBytes;
  const v128_t ones = ones_i16();
  const Consts c = loop_consts();
  for (int64_t r = row_begin; r < row_end; ++r) {
    const uint8_t* w_row = static_cast<const uint8_t*>(weights) + static_cast<size_t>(r) * row_bytes;
    v128_t acc[4];
    for (v128_t& a : acc) a = wasm_f32x4_splat(0.0f);
    for (int64_t b = 0; b < n_blocks; ++b) {
      const uint8_t* w = w_row + static_cast<size_t>(b) * W::kBlockBytes;
      const TileVec* x = tile + b * kTileVecsPerBlock;
      v128_t lo, hi;
      W::values(w, lo, hi, c);
      v128_t q[8];
      splat_words(lo, q);
      splat_words(hi, q + 4);
      const v128_t d_w = wasm_f32x4_splat(f16(w));
      for (int s = 0; s < 4; ++s) {
        v128_t isum = wasm_i32x4_shl(wasm_v128_load(x[8].bytes + 16 * s), W::kOffsetShift);
        isum = wasm_i32x4_sub(wasm_i32x4_splat(0), isum);
        for (int half = 0; half < 8; half += 4) {
          v128_t sum16 = wasm_i16x8_relaxed_dot_i8x16_i7x16(wasm_v128_load(x[half].bytes + 16 * s), q[half]);
          for (int g = half + 1; g < half + 4; ++g)
            sum16 = wasm_i16x8_add(
                sum16, wasm_i16x8_relaxed_dot_i8x16_i7x16(wasm_v128_load(x[g].bytes + 16 * s), q[g]));
          isum = wasm_i32x4_add(isum, wasm_i32x4_dot_i16x8(sum16, ones));
        }
        const v128_t scale = wasm_f32x4_mul(d_w, wasm_v128_load(x[9].bytes + 16 * s));
        acc[s] = wasm_f32x4_relaxed_madd(wasm_f32x4_convert_i32x4(isum), scale, acc[s]);
      }
    }
    store_tile_row(acc, tokens, y, y_stride, r);
  }
}

// q4_0: the nibbles (offset 8).
struct Q4_0Tile {
  static constexpr size_t kBlockBytes = sizeof(BlockQ4_0);
  static constexpr int kOffsetShift = 3;
  static void values(const uint8_t* w, v128_t& lo, v128_t& hi, [[maybe_unused]] const Consts& c) {
    const v128_t bytes = wasm_v128_load(w + 2), mask = wasm_i8x16_splat(0x0f);
    lo = wasm_v128_and(bytes, mask);
    hi = bytes_shr_and<4>(bytes, mask);
  }
};

// q5_0: the nibbles with 16 added where the fifth bit is set (offset 16).
struct Q5_0Tile {
  static constexpr size_t kBlockBytes = sizeof(BlockQ5_0);
  static constexpr int kOffsetShift = 4;
  static void values(const uint8_t* w, v128_t& lo, v128_t& hi, [[maybe_unused]] const Consts& c) {
    const v128_t qh = wasm_v128_load32_zero(w + 2);
    const v128_t bytes = wasm_v128_load(w + 6), mask = wasm_i8x16_splat(0x0f);
    lo = wasm_v128_or(wasm_v128_and(bytes, mask), Q5_0Wasm::fifth_bits(qh, c.spread_lo, c));
    hi = wasm_v128_or(bytes_shr_and<4>(bytes, mask), Q5_0Wasm::fifth_bits(qh, c.spread_hi, c));
  }
};

// q4_K against a tile of 16 tokens (q8_K layout). Per row and super-block, each sub-block j (32 nibbles, low
// or high halves of 32 bytes) as q4_0's blocks are, its 8 relaxed dots summed in i16 (<= 30,720), then
// multiplied by its scale in the i16 -> i32 dot (exact: <= 2 * 30,720 * 63); the mins term from the tile's
// bsums. ggml's integers, then d * d_x and -dmin * d_x as the AVX-512 tile kernel.
void q4_K_tile_wasm(const void* weights, int64_t cols, const TileVec* tile, int tokens, float* y,
                    int64_t y_stride, int64_t row_begin, int64_t row_end) {
  const int64_t n_blocks = cols / 256;
  const size_t row_bytes = static_cast<size_t>(n_blocks) * sizeof(BlockQ4_K);
  const v128_t mask = loop_consts().nibble;
  for (int64_t r = row_begin; r < row_end; ++r) {
    const uint8_t* w_row = static_cast<const uint8_t*>(weights) + static_cast<size_t>(r) * row_bytes;
    v128_t acc[4];
    for (v128_t& a : acc) a = wasm_f32x4_splat(0.0f);
    for (int64_t b = 0; b < n_blocks; ++b) {
      const uint8_t* w = w_row + static_cast<size_t>(b) * sizeof(BlockQ4_K);
      const TileVec* x = tile + b * kTileVecsPerSuperBlock;
      uint8_t scales_mins[16];  // scales 0..7, then mins 0..7
      unpack_k4_scales_mins(w + 4, scales_mins);
      v128_t sum[4], min_sum[4];
      for (int s = 0; s < 4; ++s) sum[s] = min_sum[s] = wasm_i32x4_splat(0);
      for (int k = 0; k < 4; ++k) {
        const v128_t bytes0 = wasm_v128_load(w + 16 + 32 * k), bytes1 = wasm_v128_load(w + 32 + 32 * k);
        for (int half = 0; half < 2; ++half) {  // sub-block 2k + half: elements 64k + 32 half .. + 31
          const v128_t v0 = half == 0 ? wasm_v128_and(bytes0, mask) : bytes_shr_and<4>(bytes0, mask);
          const v128_t v1 = half == 0 ? wasm_v128_and(bytes1, mask) : bytes_shr_and<4>(bytes1, mask);
          v128_t q[8];
          splat_words(v0, q);
          splat_words(v1, q + 4);
          const int j = 2 * k + half;
          const v128_t scale16 = wasm_i16x8_splat(scales_mins[j]);
          const TileVec* xg = x + 8 * j;
          for (int s = 0; s < 4; ++s) {
            v128_t sum16 = wasm_i16x8_relaxed_dot_i8x16_i7x16(wasm_v128_load(xg[0].bytes + 16 * s), q[0]);
            for (int g = 1; g < 8; ++g)
              sum16 = wasm_i16x8_add(
                  sum16, wasm_i16x8_relaxed_dot_i8x16_i7x16(wasm_v128_load(xg[g].bytes + 16 * s), q[g]));
            sum[s] = wasm_i32x4_add(sum[s], wasm_i32x4_dot_i16x8(sum16, scale16));
            const v128_t x_sum = wasm_i32x4_add(wasm_v128_load(x[64 + 2 * j].bytes + 16 * s),
                                                wasm_v128_load(x[65 + 2 * j].bytes + 16 * s));
            min_sum[s] =
                wasm_i32x4_add(min_sum[s], wasm_i32x4_mul(x_sum, wasm_i32x4_splat(scales_mins[8 + j])));
          }
        }
      }
      const v128_t d = wasm_f32x4_splat(f16(w)), dmin = wasm_f32x4_splat(-f16(w + 2));
      for (int s = 0; s < 4; ++s) {
        const v128_t d_x = wasm_v128_load(x[80].bytes + 16 * s);
        acc[s] = wasm_f32x4_relaxed_madd(wasm_f32x4_convert_i32x4(sum[s]), wasm_f32x4_mul(d, d_x), acc[s]);
        acc[s] =
            wasm_f32x4_relaxed_madd(wasm_f32x4_convert_i32x4(min_sum[s]), wasm_f32x4_mul(dmin, d_x), acc[s]);
      }
    }
    store_tile_row(acc, tokens, y, y_stride, r);
  }
}

// q6_K against a tile of 16 tokens (q8_K layout). Per row and super-block: the values q + 32 (0..63, valid i7
// operands) decoded as Q6_KWasm does, 16 at a time: one scale group. Per group and 4 tokens: 4 relaxed dots,
// summed in i16 two at a time (<= 2 * 2 * 63 * 128 = 32,256: exact), each pair of sums times the group's signed
// scale in the i16 -> i32 dot; the offset comes off as 32 * sum_j sc_j * bsum_j. ggml's integers, then d * d_x.
void q6_K_tile_wasm(const void* weights, int64_t cols, const TileVec* tile, int tokens, float* y,
                    int64_t y_stride, int64_t row_begin, int64_t row_end) {
  const int64_t n_blocks = cols / 256;
  const size_t row_bytes = static_cast<size_t>(n_blocks) * sizeof(BlockQ6_K);
  const Consts c = loop_consts();
  for (int64_t r = row_begin; r < row_end; ++r) {
    const uint8_t* w_row = static_cast<const uint8_t*>(weights) + static_cast<size_t>(r) * row_bytes;
    v128_t acc[4];
    for (v128_t& a : acc) a = wasm_f32x4_splat(0.0f);
    for (int64_t b = 0; b < n_blocks; ++b) {
      const auto* block =
          reinterpret_cast<const BlockQ6_K*>(w_row + static_cast<size_t>(b) * sizeof(BlockQ6_K));
      const TileVec* x = tile + b * kTileVecsPerSuperBlock;
      v128_t sum[4], offset[4];
      for (int s = 0; s < 4; ++s) sum[s] = offset[s] = wasm_i32x4_splat(0);
      for (int half = 0; half < 2; ++half) {
        const uint8_t* ql = block->ql + 64 * half;
        const uint8_t* qh = block->qh + 32 * half;
        for (int h = 0; h < 2; ++h) {
          v128_t values[4];
          q6_K_values(ql, qh, h, values, c);
          for (int k = 0; k < 4; ++k) {  // elements 128 half + 32 k + 16 h ..: scale group j
            const int j = 8 * half + 2 * k + h;
            v128_t q[4];
            splat_words(values[k], q);
            const v128_t scale16 = wasm_i16x8_splat(block->scales[j]);
            const TileVec* xg = x + 4 * j;
            for (int s = 0; s < 4; ++s) {
              const auto dot = [&](int g) {
                return wasm_i16x8_relaxed_dot_i8x16_i7x16(wasm_v128_load(xg[g].bytes + 16 * s), q[g]);
              };
              sum[s] = wasm_i32x4_add(
                  sum[s], wasm_i32x4_add(wasm_i32x4_dot_i16x8(wasm_i16x8_add(dot(0), dot(1)), scale16),
                                         wasm_i32x4_dot_i16x8(wasm_i16x8_add(dot(2), dot(3)), scale16)));
              offset[s] = wasm_i32x4_add(offset[s], wasm_i32x4_mul(wasm_v128_load(x[64 + j].bytes + 16 * s),
                                                                   wasm_i32x4_splat(block->scales[j])));
            }
          }
        }
      }
      const v128_t d = wasm_f32x4_splat(f16(reinterpret_cast<const uint8_t*>(&block->d)));
      for (int s = 0; s < 4; ++s) {
        const v128_t total = wasm_i32x4_sub(sum[s], wasm_i32x4_shl(offset[s], 5));
        acc[s] = wasm_f32x4_relaxed_madd(wasm_f32x4_convert_i32x4(total),
                                         wasm_f32x4_mul(d, wasm_v128_load(x[80].bytes + 16 * s)), acc[s]);
      }
    }
    store_tile_row(acc, tokens, y, y_stride, r);
  }
}
#endif

}  // namespace

QuantDotTileFn quant_dot_tile_wasm([[maybe_unused]] DType w) {
#if defined(__wasm_relaxed_simd__)
  if (w == DType::Q4_0) return tile_rows_wasm<Q4_0Tile>;
  if (w == DType::Q5_0) return tile_rows_wasm<Q5_0Tile>;
  if (w == DType::Q4_K) return q4_K_tile_wasm;
  if (w == DType::Q6_K) return q6_K_tile_wasm;
#endif
  return nullptr;
}

QuantDotRowsFn quant_dot_wasm_fast(DType w) {
  switch (w) {
    case DType::Q4_0:
      return rows_fast<Q4_0Wasm>;
    case DType::Q8_0:
      return rows_fast<Q8_0Wasm>;
    case DType::Q5_0:
      return rows_fast<Q5_0Wasm>;
    case DType::Q4_K:
      return rows_fast<Q4_KWasm>;
    case DType::Q6_K:
      return rows_fast<Q6_KWasm>;
    default:
      return nullptr;
  }
}

}  // namespace sotto
