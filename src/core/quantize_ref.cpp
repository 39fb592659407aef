// Reference quantizers. The 32-element ones repeat ggml's reference arithmetic step by step (same float
// operations in the same order, each in its own statement so nothing is fused into an FMA), which is what
// makes their bytes equal ggml's; tests/unit/dtype_reference_test.cpp checks that against gguf-py and
// llama.cpp.
#include "core/quantize_ref.h"

#include <bit>
#include <cstring>

#include "core/half.h"
#include "core/quant_blocks.h"

namespace sotto {

namespace {

template <class T>
void store(uint8_t* dst, const T& value) {
  std::memcpy(dst, &value, sizeof value);
}

float abs_value(float x) {
  return std::bit_cast<float>(std::bit_cast<uint32_t>(x) & 0x7fffffffu);
}

// C's (int)v with the range clamped first, so out-of-range or NaN input is not undefined behaviour.
int truncate_clamped(float v, int lo, int hi) {
  if (!(v > static_cast<float>(lo))) return lo;
  if (v >= static_cast<float>(hi)) return hi;
  return static_cast<int>(v);
}

// roundf(): halves away from zero, as ggml's q8_0 reference uses.
int round_half_away(float v) {
  if (!(abs_value(v) < 2147483520.0f)) return v > 0 ? 2147483520 : (v < 0 ? -2147483520 : 0);
  const auto truncated = static_cast<int>(v);
  const float fraction = v - static_cast<float>(truncated);  // exact: |v| < 2^31 and same sign
  if (fraction >= 0.5f) return truncated + 1;
  if (fraction <= -0.5f) return truncated - 1;
  return truncated;
}

// ggml's nearest_int(): adding 1.5 * 2^23 leaves the rounded (ties to even) integer in the mantissa.
int nearest_int(float v) {
  if (!(abs_value(v) <= 4194303.0f)) v = v > 0 ? 4194303.0f : (v < 0 ? -4194303.0f : 0.0f);
  const float shifted = v + 12582912.0f;
  return static_cast<int>(std::bit_cast<uint32_t>(shifted) & 0x007fffffu) - 0x00400000;
}

// The value of largest magnitude, keeping its sign (the first one on ties, as ggml).
float signed_absmax(const float* x, int n) {
  float amax = 0.0f;
  float max = 0.0f;
  for (int i = 0; i < n; ++i) {
    if (amax < abs_value(x[i])) {
      amax = abs_value(x[i]);
      max = x[i];
    }
  }
  return max;
}

float reciprocal_or_zero(float d) {
  return d != 0.0f ? 1.0f / d : 0.0f;
}

// ---------------------------------------------------------------- 32-element blocks

void quantize_q8_0(const float* x, uint8_t* dst, int64_t n_blocks) {
  for (int64_t b = 0; b < n_blocks; ++b, x += 32, dst += sizeof(BlockQ8_0)) {
    float amax = 0.0f;
    for (int i = 0; i < 32; ++i) amax = amax < abs_value(x[i]) ? abs_value(x[i]) : amax;
    const float d = amax / 127.0f;
    const float id = reciprocal_or_zero(d);
    BlockQ8_0 block;
    block.d = f32_to_f16(d);
    for (int i = 0; i < 32; ++i) {
      const int q = round_half_away(x[i] * id);
      block.qs[i] = static_cast<int8_t>(q < -128 ? -128 : (q > 127 ? 127 : q));
    }
    store(dst, block);
  }
}

// Symmetric 4/5-bit: the largest-magnitude value maps to -8 (-16), so d carries the sign.
void quantize_q4_0(const float* x, uint8_t* dst, int64_t n_blocks) {
  for (int64_t b = 0; b < n_blocks; ++b, x += 32, dst += sizeof(BlockQ4_0)) {
    const float d = signed_absmax(x, 32) / -8.0f;
    const float id = reciprocal_or_zero(d);
    BlockQ4_0 block;
    block.d = f32_to_f16(d);
    for (int i = 0; i < 16; ++i) {
      const float low = x[i] * id;
      const float high = x[i + 16] * id;
      const int q_low = truncate_clamped(low + 8.5f, 0, 15);
      const int q_high = truncate_clamped(high + 8.5f, 0, 15);
      block.qs[i] = static_cast<uint8_t>(q_low | (q_high << 4));
    }
    store(dst, block);
  }
}

void quantize_q5_0(const float* x, uint8_t* dst, int64_t n_blocks) {
  for (int64_t b = 0; b < n_blocks; ++b, x += 32, dst += sizeof(BlockQ5_0)) {
    const float d = signed_absmax(x, 32) / -16.0f;
    const float id = reciprocal_or_zero(d);
    BlockQ5_0 block;
    block.d = f32_to_f16(d);
    uint32_t qh = 0;
    for (int i = 0; i < 16; ++i) {
      const float low = x[i] * id;
      const float high = x[i + 16] * id;
      const int q_low = truncate_clamped(low + 16.5f, 0, 31);
      const int q_high = truncate_clamped(high + 16.5f, 0, 31);
      block.qs[i] = static_cast<uint8_t>((q_low & 0x0f) | ((q_high & 0x0f) << 4));
      qh |= static_cast<uint32_t>(q_low >> 4) << i;
      qh |= static_cast<uint32_t>(q_high >> 4) << (i + 16);
    }
    std::memcpy(block.qh, &qh, 4);
    store(dst, block);
  }
}

// Asymmetric: min maps to 0 and max to 15 (31); d and the min are stored.
struct MinMax {
  float min;
  float max;
};
MinMax min_max(const float* x, int n) {
  MinMax range = {x[0], x[0]};
  for (int i = 1; i < n; ++i) {
    range.min = x[i] < range.min ? x[i] : range.min;
    range.max = x[i] > range.max ? x[i] : range.max;
  }
  return range;
}
struct MinStep {
  float min;
  float d;
};
MinStep min_and_step(const float* x, int n, int levels) {
  const MinMax range = min_max(x, n);
  return {range.min, (range.max - range.min) / static_cast<float>(levels)};
}

void quantize_q4_1(const float* x, uint8_t* dst, int64_t n_blocks) {
  for (int64_t b = 0; b < n_blocks; ++b, x += 32, dst += sizeof(BlockQ4_1)) {
    const MinStep range = min_and_step(x, 32, 15);
    const float id = reciprocal_or_zero(range.d);
    BlockQ4_1 block;
    block.d = f32_to_f16(range.d);
    block.m = f32_to_f16(range.min);
    for (int i = 0; i < 16; ++i) {
      const float low = (x[i] - range.min) * id;
      const float high = (x[i + 16] - range.min) * id;
      const int q_low = truncate_clamped(low + 0.5f, 0, 15);
      const int q_high = truncate_clamped(high + 0.5f, 0, 15);
      block.qs[i] = static_cast<uint8_t>(q_low | (q_high << 4));
    }
    store(dst, block);
  }
}

void quantize_q5_1(const float* x, uint8_t* dst, int64_t n_blocks) {
  for (int64_t b = 0; b < n_blocks; ++b, x += 32, dst += sizeof(BlockQ5_1)) {
    const MinStep range = min_and_step(x, 32, 31);
    const float id = reciprocal_or_zero(range.d);
    BlockQ5_1 block;
    block.d = f32_to_f16(range.d);
    block.m = f32_to_f16(range.min);
    uint32_t qh = 0;
    for (int i = 0; i < 16; ++i) {
      const float low = (x[i] - range.min) * id;
      const float high = (x[i + 16] - range.min) * id;
      const int q_low = truncate_clamped(low + 0.5f, 0, 31);
      const int q_high = truncate_clamped(high + 0.5f, 0, 31);
      block.qs[i] = static_cast<uint8_t>((q_low & 0x0f) | ((q_high & 0x0f) << 4));
      qh |= static_cast<uint32_t>(q_low >> 4) << i;
      qh |= static_cast<uint32_t>(q_high >> 4) << (i + 16);
    }
    std::memcpy(block.qh, &qh, 4);
    store(dst, block);
  }
}

// ---------------------------------------------------------------- 256-element super-blocks

void quantize_q8_K(const float* x, uint8_t* dst, int64_t n_blocks) {
  for (int64_t b = 0; b < n_blocks; ++b, x += 256, dst += sizeof(BlockQ8_K)) {
    BlockQ8_K block{};
    const float max = signed_absmax(x, 256);
    if (max != 0.0f) {
      const float iscale = -127.0f / max;
      for (int i = 0; i < 256; ++i) {
        const int q = nearest_int(iscale * x[i]);
        block.qs[i] = static_cast<int8_t>(q < -127 ? -127 : (q > 127 ? 127 : q));
      }
      for (int g = 0; g < 16; ++g) {
        int sum = 0;
        for (int i = 0; i < 16; ++i) sum += block.qs[16 * g + i];
        block.bsums[g] = static_cast<int16_t>(sum);
      }
      block.d = 1.0f / iscale;
    }
    store(dst, block);
  }
}

// The K-quants' sub-block scales are small integer multiples of one f16 per super-block. Rounding those up
// (never down) keeps every sub-block's range covering its values, so each value is within half a step of its
// sub-block's stored step; ggml instead searches for the scales that minimise the squared error.
uint16_t f16_at_least(float v) {
  uint16_t h = f32_to_f16(v);
  if (f16_to_f32(h) < v && h < 0x7bff) ++h;  // non-negative v: the next f16 up
  return h;
}

int ceil_clamped(float v, int hi) {
  if (!(v > 0.0f)) return 0;
  if (v >= static_cast<float>(hi)) return hi;
  const auto truncated = static_cast<int>(v);
  return static_cast<float>(truncated) < v ? truncated + 1 : truncated;
}

// q4_K / q5_K: sub-block j (32 values) decodes as step_j * q - offset_j with q in 0..kLevels, step_j =
// d * scale_j and offset_j = dmin * min_j (6-bit scale_j, min_j). The offset covers the sub-block's negative
// part (ggml keeps it one-sided: offset >= 0), the step then covers the rest.
template <int kLevels>
void k_quant_asymmetric(const float* x, uint16_t* d_out, uint16_t* dmin_out, uint8_t* packed_scales,
                        uint8_t* levels_out /* 256 */) {
  float offset_needed[8];
  float top[8];
  float max_offset = 0.0f;
  for (int j = 0; j < 8; ++j) {
    const MinMax range = min_max(x + 32 * j, 32);
    offset_needed[j] = range.min < 0.0f ? -range.min : 0.0f;
    top[j] = range.max > 0.0f ? range.max : 0.0f;
    max_offset = offset_needed[j] > max_offset ? offset_needed[j] : max_offset;
  }
  *dmin_out = f16_at_least(max_offset / 63.0f);
  const float dmin = f16_to_f32(*dmin_out);
  uint8_t mins[8];
  float offsets[8];
  float steps_needed[8];
  float max_step = 0.0f;
  for (int j = 0; j < 8; ++j) {
    mins[j] = static_cast<uint8_t>(dmin > 0.0f ? ceil_clamped(offset_needed[j] / dmin, 63) : 0);
    offsets[j] = dmin * static_cast<float>(mins[j]);
    steps_needed[j] = (top[j] + offsets[j]) / static_cast<float>(kLevels);
    max_step = steps_needed[j] > max_step ? steps_needed[j] : max_step;
  }
  *d_out = f16_at_least(max_step / 63.0f);
  const float d = f16_to_f32(*d_out);
  uint8_t scales[8];
  for (int j = 0; j < 8; ++j) {
    scales[j] = static_cast<uint8_t>(d > 0.0f ? ceil_clamped(steps_needed[j] / d, 63) : 0);
    const float step = d * static_cast<float>(scales[j]);
    for (int i = 0; i < 32; ++i) {
      const int q = step > 0.0f ? nearest_int((x[32 * j + i] + offsets[j]) / step) : 0;
      levels_out[32 * j + i] = static_cast<uint8_t>(q < 0 ? 0 : (q > kLevels ? kLevels : q));
    }
  }
  std::memset(packed_scales, 0, kKScaleBytes);
  for (int j = 0; j < 8; ++j) {  // inverse of unpack_k4_scale_min()
    if (j < 4) {
      packed_scales[j] |= scales[j];
      packed_scales[j + 4] |= mins[j];
    } else {
      packed_scales[j + 4] = static_cast<uint8_t>((scales[j] & 0x0f) | ((mins[j] & 0x0f) << 4));
      packed_scales[j - 4] |= static_cast<uint8_t>((scales[j] >> 4) << 6);
      packed_scales[j] |= static_cast<uint8_t>((mins[j] >> 4) << 6);
    }
  }
}

void quantize_q4_K(const float* x, uint8_t* dst, int64_t n_blocks) {
  for (int64_t b = 0; b < n_blocks; ++b, x += 256, dst += sizeof(BlockQ4_K)) {
    BlockQ4_K block;
    uint8_t levels[256];
    k_quant_asymmetric<15>(x, &block.d, &block.dmin, block.scales, levels);
    for (int chunk = 0; chunk < 4; ++chunk)
      for (int l = 0; l < 32; ++l)
        block.qs[32 * chunk + l] =
            static_cast<uint8_t>(levels[64 * chunk + l] | (levels[64 * chunk + 32 + l] << 4));
    store(dst, block);
  }
}

void quantize_q5_K(const float* x, uint8_t* dst, int64_t n_blocks) {
  for (int64_t b = 0; b < n_blocks; ++b, x += 256, dst += sizeof(BlockQ5_K)) {
    BlockQ5_K block;
    uint8_t levels[256];
    k_quant_asymmetric<31>(x, &block.d, &block.dmin, block.scales, levels);
    std::memset(block.qh, 0, sizeof block.qh);
    for (int chunk = 0; chunk < 4; ++chunk) {
      for (int l = 0; l < 32; ++l) {
        const uint8_t low = levels[64 * chunk + l];
        const uint8_t high = levels[64 * chunk + 32 + l];
        block.qs[32 * chunk + l] = static_cast<uint8_t>((low & 0x0f) | ((high & 0x0f) << 4));
        block.qh[l] |= static_cast<uint8_t>(((low >> 4) << (2 * chunk)) | ((high >> 4) << (2 * chunk + 1)));
      }
    }
    store(dst, block);
  }
}

// q6_K: sub-block j (16 values) decodes as d * scale_j * (q - 32) with q in 0..63 and an int8 scale_j. Here
// the scales are positive and cover the sub-block's largest magnitude at 31.5 steps (ggml lets the sign of
// the scale put the largest value at -32, one level more).
void quantize_q6_K(const float* x, uint8_t* dst, int64_t n_blocks) {
  for (int64_t b = 0; b < n_blocks; ++b, x += 256, dst += sizeof(BlockQ6_K)) {
    BlockQ6_K block;
    float steps_needed[16];
    float max_step = 0.0f;
    for (int j = 0; j < 16; ++j) {
      steps_needed[j] = abs_value(signed_absmax(x + 16 * j, 16)) / 31.5f;
      max_step = steps_needed[j] > max_step ? steps_needed[j] : max_step;
    }
    block.d = f16_at_least(max_step / 127.0f);
    const float d = f16_to_f32(block.d);
    uint8_t levels[256];
    for (int j = 0; j < 16; ++j) {
      block.scales[j] = static_cast<int8_t>(d > 0.0f ? ceil_clamped(steps_needed[j] / d, 127) : 0);
      const float step = d * static_cast<float>(block.scales[j]);
      for (int i = 0; i < 16; ++i) {
        const int q = step > 0.0f ? nearest_int(x[16 * j + i] / step) : 0;
        levels[16 * j + i] = static_cast<uint8_t>((q < -32 ? -32 : (q > 31 ? 31 : q)) + 32);
      }
    }
    for (int half = 0; half < 2; ++half) {  // inverse of dequantize_q6_K's interleaving
      const uint8_t* q = levels + 128 * half;
      for (int l = 0; l < 32; ++l) {
        block.ql[64 * half + l] = static_cast<uint8_t>((q[l] & 0x0f) | ((q[l + 64] & 0x0f) << 4));
        block.ql[64 * half + l + 32] = static_cast<uint8_t>((q[l + 32] & 0x0f) | ((q[l + 96] & 0x0f) << 4));
        block.qh[32 * half + l] = static_cast<uint8_t>((q[l] >> 4) | ((q[l + 32] >> 4) << 2) |
                                                       ((q[l + 64] >> 4) << 4) | ((q[l + 96] >> 4) << 6));
      }
    }
    store(dst, block);
  }
}

}  // namespace

bool dtype_can_quantize(DType t) {
  switch (t) {
    case DType::F32:
    case DType::F16:
    case DType::BF16:
    case DType::Q4_0:
    case DType::Q4_1:
    case DType::Q5_0:
    case DType::Q5_1:
    case DType::Q8_0:
    case DType::Q4_K:
    case DType::Q5_K:
    case DType::Q6_K:
    case DType::Q8_K:
      return true;
    default:
      return false;
  }
}

void quantize_row_ref(DType t, const float* src, void* dst_bytes, int64_t n) {
  if (!dtype_can_quantize(t) || n <= 0) return;
  auto* dst = static_cast<uint8_t*>(dst_bytes);
  const int64_t n_blocks = n / dtype_info(t).block_elems;
  switch (t) {
    case DType::F32:
      std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float));
      break;
    case DType::F16:
      for (int64_t i = 0; i < n; ++i) store(dst + 2 * i, f32_to_f16(src[i]));
      break;
    case DType::BF16:
      for (int64_t i = 0; i < n; ++i) store(dst + 2 * i, f32_to_bf16(src[i]));
      break;
    case DType::Q4_0:
      quantize_q4_0(src, dst, n_blocks);
      break;
    case DType::Q4_1:
      quantize_q4_1(src, dst, n_blocks);
      break;
    case DType::Q5_0:
      quantize_q5_0(src, dst, n_blocks);
      break;
    case DType::Q5_1:
      quantize_q5_1(src, dst, n_blocks);
      break;
    case DType::Q8_0:
      quantize_q8_0(src, dst, n_blocks);
      break;
    case DType::Q4_K:
      quantize_q4_K(src, dst, n_blocks);
      break;
    case DType::Q5_K:
      quantize_q5_K(src, dst, n_blocks);
      break;
    case DType::Q6_K:
      quantize_q6_K(src, dst, n_blocks);
      break;
    case DType::Q8_K:
      quantize_q8_K(src, dst, n_blocks);
      break;
    default:
      break;
  }
}

}  // namespace sotto
