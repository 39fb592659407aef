// IEEE half (f16) and bfloat16 (bf16) <-> f32 conversions in plain integer arithmetic, so the same code runs
// on any CPU and in WebAssembly. Conversions to f32 are exact (every f16/bf16 value is an f32 value); f32 to
// f16/bf16 rounds to nearest, ties to even, like the F16C instruction and ggml. NaNs stay NaN (made quiet on
// narrowing, keeping the sign and the top payload bits); infinities and signed zeros are kept.
#pragma once

#include <bit>
#include <cstdint>

namespace sotto {

inline float f16_to_f32(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exponent = (h >> 10) & 0x1fu;
  const uint32_t mantissa = h & 0x3ffu;
  if (exponent == 0x1f)  // inf or NaN: widen the payload
    return std::bit_cast<float>(sign | 0x7f800000u | (mantissa << 13));
  if (exponent == 0) {  // zero or subnormal: mantissa * 2^-24, exact in f32
    const float magnitude = static_cast<float>(mantissa) * 0x1p-24f;
    return std::bit_cast<float>(sign | std::bit_cast<uint32_t>(magnitude));
  }
  // Normal: rebias the exponent from 15 to 127.
  return std::bit_cast<float>(sign | ((exponent + 112) << 23) | (mantissa << 13));
}

inline uint16_t f32_to_f16(float f) {
  const uint32_t bits = std::bit_cast<uint32_t>(f);
  const uint16_t sign = static_cast<uint16_t>((bits >> 16) & 0x8000u);
  const uint32_t magnitude = bits & 0x7fffffffu;
  if (magnitude > 0x7f800000u)  // NaN: quiet bit set so a payload that only had low bits stays a NaN
    return static_cast<uint16_t>(sign | 0x7e00u | ((magnitude >> 13) & 0x3ffu));
  // 65520 (0x477ff000) is halfway between f16's largest finite value 65504 (odd mantissa) and 65536: ties to
  // even go up, so from there on the result is infinity.
  if (magnitude >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);
  if (magnitude >= 0x38800000u) {  // >= 2^-14: a normal f16
    uint32_t h = (((magnitude >> 23) - 112) << 10) | ((magnitude >> 13) & 0x3ffu);
    const uint32_t dropped = magnitude & 0x1fffu;
    if (dropped > 0x1000u || (dropped == 0x1000u && (h & 1u))) ++h;  // a carry into the exponent is right
    return static_cast<uint16_t>(sign | h);
  }
  const uint32_t f32_exponent = magnitude >> 23;
  if (f32_exponent < 102) return sign;  // below 2^-25: rounds to zero
  // Subnormal f16: the value in units of 2^-24 is the full 24-bit significand shifted right by 126 - exponent
  // (14..24 bits). Rounding up out of the subnormals gives 0x0400, the smallest normal, as it should.
  const uint32_t significand = (magnitude & 0x7fffffu) | 0x800000u;
  const uint32_t shift = 126 - f32_exponent;
  uint32_t h = significand >> shift;
  const uint32_t dropped = significand & ((1u << shift) - 1);
  const uint32_t half = 1u << (shift - 1);
  if (dropped > half || (dropped == half && (h & 1u))) ++h;
  return static_cast<uint16_t>(sign | h);
}

// bf16 is the top half of an f32.
inline float bf16_to_f32(uint16_t b) {
  return std::bit_cast<float>(static_cast<uint32_t>(b) << 16);
}

inline uint16_t f32_to_bf16(float f) {
  const uint32_t bits = std::bit_cast<uint32_t>(f);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((bits >> 16) | 0x40u);  // quiet NaN
  // Adding 0x7fff plus the lowest kept bit rounds to nearest even; overflow carries into inf correctly.
  return static_cast<uint16_t>((bits + 0x7fffu + ((bits >> 16) & 1u)) >> 16);
}

}  // namespace sotto
