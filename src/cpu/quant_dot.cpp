// Activation quantizers and the portable quantized dot-product kernels (scalar natively, SIMD128 or relaxed
// SIMD in the wasm builds). The math is in quant_dot.h.
//
// Portable structure: every weight block (32 or 256 values) is decoded into signed int8 values in natural
// element order (offsets such as q4_0's 8 or q6_K's 32 already removed) plus one integer scale per group of
// 16 values and the block's float scales. One generic integer dot (grouped_dot) then serves every type; it is
// the part that runs as SIMD in wasm. The decoders of q4_0, q4_K and q6_K (the types of real downloads) are
// also SIMD in wasm; q8_0 needs no decoding. A tile of up to 4 rows x 4 tokens decodes each weight block once
// and uses it for every token of the tile.
#include "cpu/quant_dot.h"

#include <cstring>

#include "core/half.h"
#include "cpu/cpu_features.h"

#if defined(__wasm_simd128__)
#include <wasm_simd128.h>
#endif

namespace sotto {

// ============================================================================ activation quantizers
namespace {

float abs_value(float v) {
  return v < 0.0f ? -v : v;
}

// ggml's nearest_int(): adding 1.5 * 2^23 leaves the integer rounded to nearest even in the mantissa
// (valid for |v| < 2^22; callers stay within 127).
int nearest_int(float v) {
  const float shifted = v + 12582912.0f;
  uint32_t bits;
  std::memcpy(&bits, &shifted, 4);
  return static_cast<int>(bits & 0x007fffffu) - 0x00400000;
}

// One q8_0-style block as llama.cpp's x86 quantizer (ggml-cpu/arch/x86/quants.c quantize_row_q8_0, also its
// repack's quantize_mat) computes it: d = amax / 127 kept as f16, q = x * (127 / amax) rounded half to even
// (ggml's reference quantizer multiplies by 1 / d and rounds halves away from zero: a different code for some
// values, which changes near-tie tokens; the x86 form is the one our llama.cpp reference runs). Each step is
// its own statement so nothing is fused into an FMA. Returns the unrounded d and sum(q), for q8_1.
struct Block32Result {
  float d;
  int sum;
};
Block32Result quantize_block32(const float* x, uint16_t* d_out, int8_t* qs) {
  float amax = 0.0f;
  for (int i = 0; i < 32; ++i) amax = amax < abs_value(x[i]) ? abs_value(x[i]) : amax;
  const float d = amax / 127.0f;
  const float id = amax != 0.0f ? 127.0f / amax : 0.0f;
  *d_out = f32_to_f16(d);
  int sum = 0;
  for (int i = 0; i < 32; ++i) {
    const float scaled = x[i] * id;
    const int q = nearest_int(scaled);
    qs[i] = static_cast<int8_t>(q);
    sum += q;
  }
  return {d, sum};
}

}  // namespace

void quantize_activations_q8_0_portable(const float* x, BlockQ8_0* y, int64_t n) {
  for (int64_t b = 0; b < n / 32; ++b) quantize_block32(x + 32 * b, &y[b].d, y[b].qs);
}

void quantize_activations_q8_0(const float* x, BlockQ8_0* y, int64_t n) {
#if defined(SOTTO_HAVE_AVX2_QUANT_DOT)
  if (cpu_use_avx2()) return quantize_activations_q8_0_avx2(x, y, n);
#endif
  quantize_activations_q8_0_portable(x, y, n);
}

void quantize_activations_q8_1(const float* x, BlockQ8_1* y, int64_t n) {
  for (int64_t b = 0; b < n / 32; ++b) {
    const Block32Result block = quantize_block32(x + 32 * b, &y[b].d, y[b].qs);
    // ggml multiplies the sum by the unrounded d (not the stored f16), then rounds the product to f16.
    const float s = static_cast<float>(block.sum) * block.d;
    y[b].s = f32_to_f16(s);
  }
}

void quantize_activations_q8_K(const float* x, BlockQ8_K* y, int64_t n) {
#if defined(SOTTO_HAVE_AVX2_QUANT_DOT)
  if (cpu_use_avx2()) return quantize_activations_q8_K_avx2(x, y, n);
#endif
  quantize_activations_q8_K_portable(x, y, n);
}

void quantize_activations_q8_K_portable(const float* x, BlockQ8_K* y, int64_t n) {
  for (int64_t b = 0; b < n / 256; ++b) {
    const float* xb = x + 256 * b;
    BlockQ8_K& out = y[b];
    float amax = 0.0f, max = 0.0f;  // max keeps the sign of the largest magnitude (the first on ties)
    for (int i = 0; i < 256; ++i) {
      if (amax < abs_value(xb[i])) {
        amax = abs_value(xb[i]);
        max = xb[i];
      }
    }
    if (amax == 0.0f) {
      std::memset(&out, 0, sizeof out);
      continue;
    }
    const float iscale = -127.0f / max;
    for (int i = 0; i < 256; ++i) {
      const float scaled = iscale * xb[i];
      const int q = nearest_int(scaled);
      out.qs[i] = static_cast<int8_t>(q > 127 ? 127 : q);
    }
    for (int g = 0; g < 16; ++g) {
      int sum = 0;
      for (int i = 0; i < 16; ++i) sum += out.qs[16 * g + i];
      out.bsums[g] = static_cast<int16_t>(sum);
    }
    out.d = 1.0f / iscale;
  }
}

// ============================================================================ portable kernels
namespace {

template <class T>
T load(const uint8_t* p) {
  T v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

// A weight block decoded to what the integer dot needs.
struct Decoded {
  alignas(16) int8_t buffer[256];
  const int8_t* q = buffer;  // signed values in element order (points into the block itself for q8_0)
  int16_t scale[16] = {};    // integer scale per group of 16 values (K-quants)
  int16_t min[16] = {};      // integer min per group of 16 values (q2_K, q4_K, q5_K)
  float d = 0.0f;            // block scale
  float m = 0.0f;            // q4_1 / q5_1: m (times s_x); K-quants: dmin (times d_x * sum min * bsum)
};

// ---- integer dot: sum over groups of 16 of scale_g * (w_g . x_g) (unscaled: all scales 1)
#if defined(__wasm_simd128__)

// The 16-element dot product w . x, spread over four i32 lanes. Exact for any int8 values.
v128_t group_dot_exact(const int8_t* w, const int8_t* x) {
  const v128_t wv = wasm_v128_load(w), xv = wasm_v128_load(x);
  const v128_t lo = wasm_i32x4_dot_i16x8(wasm_i16x8_extend_low_i8x16(wv), wasm_i16x8_extend_low_i8x16(xv));
  const v128_t hi = wasm_i32x4_dot_i16x8(wasm_i16x8_extend_high_i8x16(wv), wasm_i16x8_extend_high_i8x16(xv));
  return wasm_i32x4_add(lo, hi);
}

// The same with relaxed SIMD where built for it: relaxed dot needs its second operand in [0, 127], so x's
// sign moves onto w (|w| <= 127, see matvec.cpp). Written as in matvec.cpp, a zero accumulator then an add:
// Node 20's V8 (relaxed SIMD still experimental there) gave wrong sums for other arrangements, e.g. the
// dot's result multiplied by a scale, so the scaled K-quant dot below uses the exact form instead.
v128_t group_dot(const int8_t* w, const int8_t* x) {
#if defined(__wasm_relaxed_simd__)
  const v128_t wv = wasm_v128_load(w), xv = wasm_v128_load(x);
  const v128_t sign = wasm_i8x16_shr(xv, 7);
  const v128_t w_signed = wasm_i8x16_sub(wasm_v128_xor(wv, sign), sign);
  return wasm_i32x4_relaxed_dot_i8x16_i7x16_add(w_signed, wasm_i8x16_abs(xv), wasm_i32x4_splat(0));
#else
  return group_dot_exact(w, x);
#endif
}

int32_t hsum_i32(v128_t v) {
  return wasm_i32x4_extract_lane(v, 0) + wasm_i32x4_extract_lane(v, 1) + wasm_i32x4_extract_lane(v, 2) +
         wasm_i32x4_extract_lane(v, 3);
}

int32_t dot_unscaled(const int8_t* w, const int8_t* x, int n_groups) {
  v128_t acc = wasm_i32x4_splat(0);
  for (int g = 0; g < n_groups; ++g) acc = wasm_i32x4_add(acc, group_dot(w + 16 * g, x + 16 * g));
  return hsum_i32(acc);
}

int32_t dot_scaled(const int8_t* w, const int8_t* x, const int16_t* scale, int n_groups) {
  v128_t acc = wasm_i32x4_splat(0);
  for (int g = 0; g < n_groups; ++g)
    acc = wasm_i32x4_add(acc,
                         wasm_i32x4_mul(group_dot_exact(w + 16 * g, x + 16 * g), wasm_i32x4_splat(scale[g])));
  return hsum_i32(acc);
}

#else

int32_t dot_unscaled(const int8_t* w, const int8_t* x, int n_groups) {
  int32_t sum = 0;
  for (int i = 0; i < 16 * n_groups; ++i) sum += w[i] * x[i];
  return sum;
}

int32_t dot_scaled(const int8_t* w, const int8_t* x, const int16_t* scale, int n_groups) {
  int32_t sum = 0;
  for (int g = 0; g < n_groups; ++g) {
    int32_t group = 0;
    for (int i = 0; i < 16; ++i) group += w[16 * g + i] * x[16 * g + i];
    sum += scale[g] * group;
  }
  return sum;
}

#endif

// ---- decoders, one per weight type (element order and bit placement as dequantize_row_ref's)

void decode_q4_0(const uint8_t* src, Decoded& out) {
  const auto* block = reinterpret_cast<const BlockQ4_0*>(src);
  out.d = f16_to_f32(load<uint16_t>(src));
#if defined(__wasm_simd128__)
  const v128_t bytes = wasm_v128_load(block->qs), mask = wasm_i8x16_splat(0x0f), eight = wasm_i8x16_splat(8);
  wasm_v128_store(out.buffer, wasm_i8x16_sub(wasm_v128_and(bytes, mask), eight));
  wasm_v128_store(out.buffer + 16, wasm_i8x16_sub(wasm_u8x16_shr(bytes, 4), eight));
#else
  for (int i = 0; i < 16; ++i) {
    out.buffer[i] = static_cast<int8_t>((block->qs[i] & 0x0f) - 8);
    out.buffer[i + 16] = static_cast<int8_t>((block->qs[i] >> 4) - 8);
  }
#endif
}

void decode_q4_1(const uint8_t* src, Decoded& out) {
  const auto block = load<BlockQ4_1>(src);
  out.d = f16_to_f32(block.d);
  out.m = f16_to_f32(block.m);
  for (int i = 0; i < 16; ++i) {
    out.buffer[i] = static_cast<int8_t>(block.qs[i] & 0x0f);
    out.buffer[i + 16] = static_cast<int8_t>(block.qs[i] >> 4);
  }
}

template <int kOffset>
void decode_5bit(const uint8_t* qs, uint32_t qh, Decoded& out) {
  for (int i = 0; i < 16; ++i) {
    out.buffer[i] = static_cast<int8_t>(((qs[i] & 0x0f) | (((qh >> i) & 1u) << 4)) - kOffset);
    out.buffer[i + 16] = static_cast<int8_t>(((qs[i] >> 4) | (((qh >> (i + 16)) & 1u) << 4)) - kOffset);
  }
}

void decode_q5_0(const uint8_t* src, Decoded& out) {
  const auto block = load<BlockQ5_0>(src);
  out.d = f16_to_f32(block.d);
  decode_5bit<16>(block.qs, load<uint32_t>(block.qh), out);
}

void decode_q5_1(const uint8_t* src, Decoded& out) {
  const auto block = load<BlockQ5_1>(src);
  out.d = f16_to_f32(block.d);
  out.m = f16_to_f32(block.m);
  decode_5bit<0>(block.qs, load<uint32_t>(block.qh), out);
}

void decode_q8_0(const uint8_t* src, Decoded& out) {
  out.d = f16_to_f32(load<uint16_t>(src));
  out.q = reinterpret_cast<const BlockQ8_0*>(src)->qs;
}

void decode_q2_K(const uint8_t* src, Decoded& out) {
  const auto* block = reinterpret_cast<const BlockQ2_K*>(src);
  out.d = f16_to_f32(load<uint16_t>(src + offsetof(BlockQ2_K, d)));
  out.m = f16_to_f32(load<uint16_t>(src + offsetof(BlockQ2_K, dmin)));
  for (int g = 0; g < 16; ++g) {
    out.scale[g] = static_cast<int16_t>(block->scales[g] & 0x0f);
    out.min[g] = static_cast<int16_t>(block->scales[g] >> 4);
  }
  for (int half = 0; half < 2; ++half)
    for (int s = 0; s < 4; ++s)
      for (int l = 0; l < 32; ++l)
        out.buffer[128 * half + 32 * s + l] = static_cast<int8_t>((block->qs[32 * half + l] >> (2 * s)) & 3);
}

void decode_q3_K(const uint8_t* src, Decoded& out) {
  const auto* block = reinterpret_cast<const BlockQ3_K*>(src);
  out.d = f16_to_f32(load<uint16_t>(src + offsetof(BlockQ3_K, d)));
  for (int g = 0; g < 16; ++g) out.scale[g] = static_cast<int16_t>(unpack_q3_K_scale(block->scales, g));
  for (int half = 0; half < 2; ++half) {
    for (int s = 0; s < 4; ++s) {
      const int high_bit = 4 * half + s;
      for (int l = 0; l < 32; ++l) {
        const int low = (block->qs[32 * half + l] >> (2 * s)) & 3;
        const int minus = (block->hmask[l] >> high_bit) & 1 ? 0 : 4;
        out.buffer[128 * half + 32 * s + l] = static_cast<int8_t>(low - minus);
      }
    }
  }
}

void k4_scales(const uint8_t* packed, Decoded& out) {
  for (int j = 0; j < 8; ++j) {
    const ScaleMin sm = unpack_k4_scale_min(packed, j);
    out.scale[2 * j] = out.scale[2 * j + 1] = sm.scale;
    out.min[2 * j] = out.min[2 * j + 1] = sm.min;
  }
}

void decode_q4_K(const uint8_t* src, Decoded& out) {
  const auto* block = reinterpret_cast<const BlockQ4_K*>(src);
  out.d = f16_to_f32(load<uint16_t>(src));
  out.m = f16_to_f32(load<uint16_t>(src + 2));
  k4_scales(block->scales, out);
  for (int c = 0; c < 4; ++c) {
#if defined(__wasm_simd128__)
    const v128_t mask = wasm_i8x16_splat(0x0f);
    for (int h = 0; h < 2; ++h) {
      const v128_t bytes = wasm_v128_load(block->qs + 32 * c + 16 * h);
      wasm_v128_store(out.buffer + 64 * c + 16 * h, wasm_v128_and(bytes, mask));
      wasm_v128_store(out.buffer + 64 * c + 32 + 16 * h, wasm_u8x16_shr(bytes, 4));
    }
#else
    for (int l = 0; l < 32; ++l) {
      out.buffer[64 * c + l] = static_cast<int8_t>(block->qs[32 * c + l] & 0x0f);
      out.buffer[64 * c + 32 + l] = static_cast<int8_t>(block->qs[32 * c + l] >> 4);
    }
#endif
  }
}

void decode_q5_K(const uint8_t* src, Decoded& out) {
  const auto* block = reinterpret_cast<const BlockQ5_K*>(src);
  out.d = f16_to_f32(load<uint16_t>(src));
  out.m = f16_to_f32(load<uint16_t>(src + 2));
  k4_scales(block->scales, out);
  for (int c = 0; c < 4; ++c) {
    for (int l = 0; l < 32; ++l) {
      const uint8_t q = block->qs[32 * c + l], h = block->qh[l];
      out.buffer[64 * c + l] = static_cast<int8_t>((q & 0x0f) | (((h >> (2 * c)) & 1) << 4));
      out.buffer[64 * c + 32 + l] = static_cast<int8_t>((q >> 4) | (((h >> (2 * c + 1)) & 1) << 4));
    }
  }
}

void decode_q6_K(const uint8_t* src, Decoded& out) {
  const auto* block = reinterpret_cast<const BlockQ6_K*>(src);
  out.d = f16_to_f32(load<uint16_t>(src + offsetof(BlockQ6_K, d)));
  for (int g = 0; g < 16; ++g) out.scale[g] = block->scales[g];
  for (int half = 0; half < 2; ++half) {
    const uint8_t* ql = block->ql + 64 * half;
    const uint8_t* qh = block->qh + 32 * half;
    int8_t* q = out.buffer + 128 * half;
#if defined(__wasm_simd128__)
    const v128_t mask = wasm_i8x16_splat(0x0f), three = wasm_i8x16_splat(3), bias = wasm_i8x16_splat(32);
    for (int h = 0; h < 2; ++h) {
      const v128_t low_a = wasm_v128_load(ql + 16 * h), low_b = wasm_v128_load(ql + 32 + 16 * h);
      const v128_t high = wasm_v128_load(qh + 16 * h);
      const v128_t v0 =
          wasm_v128_or(wasm_v128_and(low_a, mask), wasm_i8x16_shl(wasm_v128_and(high, three), 4));
      const v128_t v1 = wasm_v128_or(wasm_v128_and(low_b, mask),
                                     wasm_i8x16_shl(wasm_v128_and(wasm_u8x16_shr(high, 2), three), 4));
      const v128_t v2 = wasm_v128_or(wasm_u8x16_shr(low_a, 4),
                                     wasm_i8x16_shl(wasm_v128_and(wasm_u8x16_shr(high, 4), three), 4));
      const v128_t v3 = wasm_v128_or(wasm_u8x16_shr(low_b, 4), wasm_i8x16_shl(wasm_u8x16_shr(high, 6), 4));
      wasm_v128_store(q + 16 * h, wasm_i8x16_sub(v0, bias));
      wasm_v128_store(q + 32 + 16 * h, wasm_i8x16_sub(v1, bias));
      wasm_v128_store(q + 64 + 16 * h, wasm_i8x16_sub(v2, bias));
      wasm_v128_store(q + 96 + 16 * h, wasm_i8x16_sub(v3, bias));
    }
#else
    for (int l = 0; l < 32; ++l) {
      q[l] = static_cast<int8_t>(((ql[l] & 0x0f) | ((qh[l] & 3) << 4)) - 32);
      q[l + 32] = static_cast<int8_t>(((ql[l + 32] & 0x0f) | (((qh[l] >> 2) & 3) << 4)) - 32);
      q[l + 64] = static_cast<int8_t>(((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32);
      q[l + 96] = static_cast<int8_t>(((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32);
    }
#endif
  }
}

// ---- per-block terms, by activation format
enum class MinKind { None, Q8_1Sum, KBsums };

template <MinKind kMin>
float term_q8_0(const Decoded& w, const uint8_t* x) {
  const auto* xb = reinterpret_cast<const BlockQ8_0*>(x);
  return w.d * f16_to_f32(load<uint16_t>(x)) * static_cast<float>(dot_unscaled(w.q, xb->qs, 2));
}

template <MinKind kMin>
float term_q8_1(const Decoded& w, const uint8_t* x) {
  const auto* xb = reinterpret_cast<const BlockQ8_1*>(x);
  const float dx = f16_to_f32(load<uint16_t>(x)), sx = f16_to_f32(load<uint16_t>(x + 2));
  return w.d * dx * static_cast<float>(dot_unscaled(w.q, xb->qs, 2)) + w.m * sx;
}

template <MinKind kMin>
float term_q8_K(const Decoded& w, const uint8_t* x) {
  const auto* xb = reinterpret_cast<const BlockQ8_K*>(x);
  const float dx = load<float>(x);
  float sum = w.d * dx * static_cast<float>(dot_scaled(w.q, xb->qs, w.scale, 16));
  if constexpr (kMin == MinKind::KBsums) {
    int32_t min_sum = 0;
    for (int g = 0; g < 16; ++g) min_sum += w.min[g] * xb->bsums[g];
    sum -= w.m * dx * static_cast<float>(min_sum);
  }
  return sum;
}

// ---- the tile driver: up to 4 rows x 4 tokens, each weight block decoded once per tile
template <int kElems, size_t kBlockBytes, size_t kXBlockBytes, void (*kDecode)(const uint8_t*, Decoded&),
          float (*kTerm)(const Decoded&, const uint8_t*)>
void rows_quantized(const void* weights, int64_t cols, const void* xq, int64_t n, size_t xq_stride, float* y,
                    int64_t y_stride, int64_t row_begin, int64_t row_end) {
  const int64_t n_blocks = cols / kElems;
  const size_t row_bytes = static_cast<size_t>(n_blocks) * kBlockBytes;
  const auto* w = static_cast<const uint8_t*>(weights);
  const auto* x = static_cast<const uint8_t*>(xq);
  for (int64_t t0 = 0; t0 < n; t0 += 4) {
    const int tokens = static_cast<int>(n - t0 < 4 ? n - t0 : 4);
    for (int64_t r0 = row_begin; r0 < row_end; r0 += 4) {
      const int rows = static_cast<int>(row_end - r0 < 4 ? row_end - r0 : 4);
      float acc[4][4] = {};
      Decoded decoded;
      for (int64_t b = 0; b < n_blocks; ++b) {
        for (int r = 0; r < rows; ++r) {
          kDecode(w + static_cast<size_t>(r0 + r) * row_bytes + static_cast<size_t>(b) * kBlockBytes,
                  decoded);
          for (int t = 0; t < tokens; ++t)
            acc[r][t] += kTerm(
                decoded, x + static_cast<size_t>(t0 + t) * xq_stride + static_cast<size_t>(b) * kXBlockBytes);
        }
      }
      for (int r = 0; r < rows; ++r)
        for (int t = 0; t < tokens; ++t) y[(t0 + t) * y_stride + r0 + r] = acc[r][t];
    }
  }
}

// ---- q4_0 in block order (quant_dot.h): acc = fma(f32(isum), f32(d_w) * f32(d_x), acc), blocks in order.
// The wasm builds have no scalar FMA; there the product (exact in f64: 16-bit integer times f32) and the sum
// are formed in f64 and rounded once to f32 (an FMA except where that rounding lands on an f32 tie: a rare
// double rounding, the same as the wasm row kernels').
float fma_f32(float a, float b, float c) {
#if defined(__wasm__)
  return static_cast<float>(static_cast<double>(a) * static_cast<double>(b) + static_cast<double>(c));
#else
  return __builtin_fmaf(a, b, c);
#endif
}

void q4_0_block_order(const void* weights, int64_t cols, const void* xq, int64_t n, size_t xq_stride,
                      float* y, int64_t y_stride, int64_t row_begin, int64_t row_end) {
  const int64_t n_blocks = cols / 32;
  const size_t row_bytes = static_cast<size_t>(n_blocks) * sizeof(BlockQ4_0);
  const auto* w = static_cast<const uint8_t*>(weights);
  const auto* x = static_cast<const uint8_t*>(xq);
  for (int64_t r = row_begin; r < row_end; ++r) {
    for (int64_t t = 0; t < n; ++t) {
      const auto* xb = reinterpret_cast<const BlockQ8_0*>(x + static_cast<size_t>(t) * xq_stride);
      float acc = 0.0f;
      Decoded decoded;
      for (int64_t b = 0; b < n_blocks; ++b) {
        decode_q4_0(w + static_cast<size_t>(r) * row_bytes + static_cast<size_t>(b) * sizeof(BlockQ4_0),
                    decoded);
        const float scale = decoded.d * f16_to_f32(xb[b].d);
        acc = fma_f32(static_cast<float>(dot_unscaled(decoded.q, xb[b].qs, 2)), scale, acc);
      }
      y[t * y_stride + r] = acc;
    }
  }
}

// ---- float weights: f32 / f16 / bf16 weights with activations in the same type, summed in f32
template <class T, float (*kToF32)(T)>
void rows_float(const void* weights, int64_t cols, const void* xq, int64_t n, size_t xq_stride, float* y,
                int64_t y_stride, int64_t row_begin, int64_t row_end) {
  const auto* w = static_cast<const uint8_t*>(weights);
  const auto* x = static_cast<const uint8_t*>(xq);
  constexpr int kChunk = 64;
  for (int64_t r = row_begin; r < row_end; ++r) {
    const uint8_t* wr = w + static_cast<size_t>(r) * static_cast<size_t>(cols) * sizeof(T);
    for (int64_t t = 0; t < n; ++t) {
      const uint8_t* xt = x + static_cast<size_t>(t) * xq_stride;
      float lanes[8] = {};  // independent chains the compiler can vectorize
      float tail = 0.0f;
      int64_t c = 0;
      for (; c + kChunk <= cols; c += kChunk) {
        float wf[kChunk], xf[kChunk];
        for (int i = 0; i < kChunk; ++i) {
          wf[i] = kToF32(load<T>(wr + (c + i) * sizeof(T)));
          xf[i] = kToF32(load<T>(xt + (c + i) * sizeof(T)));
        }
        for (int i = 0; i < kChunk; i += 8)
          for (int k = 0; k < 8; ++k) lanes[k] += wf[i + k] * xf[i + k];
      }
      for (; c < cols; ++c) tail += kToF32(load<T>(wr + c * sizeof(T))) * kToF32(load<T>(xt + c * sizeof(T)));
      y[t * y_stride + r] = ((lanes[0] + lanes[1]) + (lanes[2] + lanes[3])) +
                            ((lanes[4] + lanes[5]) + (lanes[6] + lanes[7])) + tail;
    }
  }
}

// f16 weights as llama.cpp's x86 CPU backend computes them (ggml_vec_dot_f16 built for AVX-512, the variant
// it loads on such CPUs): four accumulators of 16 f32 lanes over chunks of 64 values, each value added with
// an FMA; the four reduced as (a0 + a2) + (a1 + a3), then the 16 lanes as _mm512_reduce_add_ps does (halves,
// quarters, then [0,1] + [2,3]); the values past the last whole chunk added in f64, each product rounded to
// f32 first; the sum rounded to f32 at the end. Tokens one at a time, as ggml's mul_mat does for f16.
float f16_lanes_total(const float (&lanes)[64]) {
  float v[16];
  for (int l = 0; l < 16; ++l) v[l] = (lanes[l] + lanes[32 + l]) + (lanes[16 + l] + lanes[48 + l]);
  float h8[8], h4[4];
  for (int l = 0; l < 8; ++l) h8[l] = v[8 + l] + v[l];
  for (int l = 0; l < 4; ++l) h4[l] = h8[4 + l] + h8[l];
  return (h4[0] + h4[2]) + (h4[1] + h4[3]);
}

void rows_f16_ggml(const void* weights, int64_t cols, const void* xq, int64_t n, size_t xq_stride, float* y,
                   int64_t y_stride, int64_t row_begin, int64_t row_end) {
  const auto* w = static_cast<const uint8_t*>(weights);
  const auto* x = static_cast<const uint8_t*>(xq);
  const int64_t whole = cols / 64 * 64;
  for (int64_t r = row_begin; r < row_end; ++r) {
    const uint8_t* wr = w + static_cast<size_t>(r) * static_cast<size_t>(cols) * 2;
    for (int64_t t = 0; t < n; ++t) {
      const uint8_t* xt = x + static_cast<size_t>(t) * xq_stride;
      float lanes[64] = {};
      for (int64_t c = 0; c < whole; c += 64)
        for (int l = 0; l < 64; ++l)
          lanes[l] = fma_f32(f16_to_f32(load<uint16_t>(wr + 2 * (c + l))),
                             f16_to_f32(load<uint16_t>(xt + 2 * (c + l))), lanes[l]);
      double sum = whole > 0 ? static_cast<double>(f16_lanes_total(lanes)) : 0.0;
      for (int64_t c = whole; c < cols; ++c) {
        const float product = f16_to_f32(load<uint16_t>(wr + 2 * c)) * f16_to_f32(load<uint16_t>(xt + 2 * c));
        sum += static_cast<double>(product);
      }
      y[t * y_stride + r] = static_cast<float>(sum);
    }
  }
}

float identity_f32(float v) {
  return v;
}

}  // namespace

QuantDotRowsFn quant_dot_portable(DType w) {
#if defined(__wasm_simd128__)
  if (QuantDotRowsFn fast = quant_dot_wasm_fast(w)) return fast;
#endif
  return quant_dot_portable_generic(w);
}

QuantDotRowsFn quant_dot_portable_generic(DType w) {
  constexpr size_t k8_0 = sizeof(BlockQ8_0), k8_1 = sizeof(BlockQ8_1), k8_K = sizeof(BlockQ8_K);
  switch (w) {
    case DType::F32:
      return rows_float<float, identity_f32>;
    case DType::F16:
      return rows_f16_ggml;
    case DType::BF16:
      return rows_float<uint16_t, bf16_to_f32>;
    case DType::Q4_0:
      return rows_quantized<32, sizeof(BlockQ4_0), k8_0, decode_q4_0, term_q8_0<MinKind::None>>;
    case DType::Q4_1:
      return rows_quantized<32, sizeof(BlockQ4_1), k8_1, decode_q4_1, term_q8_1<MinKind::Q8_1Sum>>;
    case DType::Q5_0:
      return rows_quantized<32, sizeof(BlockQ5_0), k8_0, decode_q5_0, term_q8_0<MinKind::None>>;
    case DType::Q5_1:
      return rows_quantized<32, sizeof(BlockQ5_1), k8_1, decode_q5_1, term_q8_1<MinKind::Q8_1Sum>>;
    case DType::Q8_0:
      return rows_quantized<32, sizeof(BlockQ8_0), k8_0, decode_q8_0, term_q8_0<MinKind::None>>;
    case DType::Q2_K:
      return rows_quantized<256, sizeof(BlockQ2_K), k8_K, decode_q2_K, term_q8_K<MinKind::KBsums>>;
    case DType::Q3_K:
      return rows_quantized<256, sizeof(BlockQ3_K), k8_K, decode_q3_K, term_q8_K<MinKind::None>>;
    case DType::Q4_K:
      return rows_quantized<256, sizeof(BlockQ4_K), k8_K, decode_q4_K, term_q8_K<MinKind::KBsums>>;
    case DType::Q5_K:
      return rows_quantized<256, sizeof(BlockQ5_K), k8_K, decode_q5_K, term_q8_K<MinKind::KBsums>>;
    case DType::Q6_K:
      return rows_quantized<256, sizeof(BlockQ6_K), k8_K, decode_q6_K, term_q8_K<MinKind::None>>;
    default:
      return nullptr;
  }
}

size_t tile_vecs(DType act, int64_t cols) {
  return act == DType::Q8_K ? static_cast<size_t>(cols / 256) * kTileVecsPerSuperBlock
                            : static_cast<size_t>(cols / 32) * kTileVecsPerBlock;
}

void tile_prepare(DType act, const void* xq, size_t xq_stride, int tokens, int64_t cols, TileVec* tile) {
  std::memset(tile, 0, tile_vecs(act, cols) * sizeof(TileVec));
  const auto lane = [](TileVec& v, int t, const void* value) { std::memcpy(v.bytes + 4 * t, value, 4); };
  for (int t = 0; t < tokens; ++t) {
    const auto* row = static_cast<const uint8_t*>(xq) + t * xq_stride;
    if (act == DType::Q8_K) {
      const auto* x = reinterpret_cast<const BlockQ8_K*>(row);
      for (int64_t b = 0; b < cols / 256; ++b) {
        TileVec* v = tile + b * kTileVecsPerSuperBlock;
        for (int g = 0; g < 64; ++g) lane(v[g], t, x[b].qs + 4 * g);
        for (int j = 0; j < 16; ++j) {
          const int32_t sum = x[b].bsums[j];
          lane(v[64 + j], t, &sum);
        }
        lane(v[80], t, &x[b].d);
      }
    } else {
      const auto* x = reinterpret_cast<const BlockQ8_0*>(row);
      for (int64_t b = 0; b < cols / 32; ++b) {
        TileVec* v = tile + b * kTileVecsPerBlock;
        for (int g = 0; g < 8; ++g) lane(v[g], t, x[b].qs + 4 * g);
        int32_t sum = 0;
        for (int8_t q : x[b].qs) sum += q;
        const float d = f16_to_f32(x[b].d);
        lane(v[8], t, &sum);
        lane(v[9], t, &d);
      }
    }
  }
}

QuantDotTileFn quant_dot_tile([[maybe_unused]] DType w) {
#if defined(SOTTO_HAVE_AVX2_QUANT_DOT)
  if (cpu_use_avx2() && cpu_features().avx512_vnni) return quant_dot_tile_vnni(w);
#endif
#if defined(__wasm_simd128__)
  return quant_dot_tile_wasm(w);
#endif
  return nullptr;
}

bool quant_dot_block_order(DType w, int64_t rows) {
  return w == DType::Q4_0 && rows % 8 == 0;
}

QuantDotRowsFn quant_dot_block_order_portable() {
  return q4_0_block_order;
}

QuantDotRowsFn quant_dot_rows_for(DType w, int64_t rows) {
  if (!quant_dot_block_order(w, rows)) return quant_dot_rows(w);
#if defined(SOTTO_HAVE_AVX2_QUANT_DOT)
  if (cpu_use_avx2())
    return cpu_features().avx512_vnni ? quant_dot_block_order_vnni() : quant_dot_block_order_avx2();
#endif
  return quant_dot_block_order_portable();
}

QuantDotRowsFn quant_dot_rows(DType w) {
#if defined(SOTTO_HAVE_AVX2_QUANT_DOT)
  if (cpu_use_avx2()) {
    if (QuantDotRowsFn fn = quant_dot_avx2(w)) return fn;
  }
#endif
  return quant_dot_portable(w);
}

}  // namespace sotto
