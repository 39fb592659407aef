// f16 / bf16 conversions: exhaustive round trips over every 16-bit pattern, the f16 decoding checked against
// an independent formula (ldexp in double), and f32 -> f16 rounding checked against the CPU's F16C
// instructions (an independent implementation in silicon) where the CPU has them, otherwise against a brute
// force nearest-value search. Hand-picked edge cases come from IEEE 754's definitions.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <iostream>
#include <random>

#include "core/half.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define SOTTO_TEST_F16C 1
#endif

namespace sotto {
namespace {

bool is_f16_nan(uint16_t h) {
  return (h & 0x7c00) == 0x7c00 && (h & 0x03ff) != 0;
}
bool is_bf16_nan(uint16_t b) {
  return (b & 0x7f80) == 0x7f80 && (b & 0x007f) != 0;
}

// IEEE binary16 by its definition: (-1)^s * 2^(e-15) * (1 + m/1024), subnormals 2^-14 * (m/1024).
double f16_by_definition(uint16_t h) {
  const int exponent = (h >> 10) & 0x1f;
  const int mantissa = h & 0x3ff;
  const double sign = (h & 0x8000) ? -1.0 : 1.0;
  if (exponent == 0x1f) return mantissa ? std::nan("") : sign * INFINITY;
  if (exponent == 0) return sign * std::ldexp(mantissa, -24);
  return sign * std::ldexp(1024 + mantissa, exponent - 25);
}

std::mt19937_64 fresh_rng() {
  const uint64_t seed = std::random_device{}();
  std::cout << "[ seed ] " << seed << "\n";
  return std::mt19937_64(seed);
}

// Random f32 bit patterns: a third anywhere, a third in and around f16's range (2^-26 .. 2^17), a third
// exactly halfway between two f16 values (the ties that round-to-nearest-even decides).
float random_f32(std::mt19937_64& rng) {
  const uint32_t bits = static_cast<uint32_t>(rng());
  switch (rng() % 3) {
    case 0:
      return std::bit_cast<float>(bits);
    case 1: {
      const uint32_t exponent = 101 + static_cast<uint32_t>(rng() % 43);  // 2^-26 .. 2^16
      return std::bit_cast<float>((bits & 0x807fffffu) | (exponent << 23));
    }
    default: {
      const auto h = static_cast<uint16_t>(bits & 0x7bff);  // a finite f16 below the largest
      const double below = f16_by_definition(h);
      const double above = f16_by_definition(static_cast<uint16_t>(h + 1));
      const auto halfway = static_cast<float>((below + above) / 2);  // exact in f32
      return (bits & 0x80000000u) ? -halfway : halfway;
    }
  }
}

// Nearest f16 by search over the ordered positive f16 values, ties to the even bit pattern.
uint16_t nearest_f16_by_search(float x) {
  const uint16_t sign = std::signbit(x) ? 0x8000 : 0;
  const double target = std::fabs(static_cast<double>(x));
  if (target >= 65520.0) return sign | 0x7c00;  // halfway from 65504 to 2^16 and beyond: infinity
  uint16_t lo = 0, hi = 0x7bff;                 // largest lo with value <= target
  while (lo < hi) {
    const auto mid = static_cast<uint16_t>((lo + hi + 1) / 2);
    if (f16_by_definition(mid) <= target)
      lo = mid;
    else
      hi = static_cast<uint16_t>(mid - 1);
  }
  if (lo == 0x7bff) return sign | lo;
  const double below = target - f16_by_definition(lo);
  const double above = f16_by_definition(static_cast<uint16_t>(lo + 1)) - target;
  const bool up = above < below || (above == below && (lo & 1));
  return sign | static_cast<uint16_t>(lo + (up ? 1 : 0));
}

#ifdef SOTTO_TEST_F16C
__attribute__((target("f16c"))) uint16_t f16c_from_f32(float x) {
  return static_cast<uint16_t>(_cvtss_sh(x, _MM_FROUND_TO_NEAREST_INT));
}
__attribute__((target("f16c"))) float f16c_to_f32(uint16_t h) {
  return _cvtsh_ss(h);
}
bool cpu_has_f16c() {
  return __builtin_cpu_supports("f16c");
}
#endif

TEST(Half, F16ToF32MatchesTheDefinitionForEveryValue) {
  for (uint32_t h = 0; h < 65536; ++h) {
    const float got = f16_to_f32(static_cast<uint16_t>(h));
    const double want = f16_by_definition(static_cast<uint16_t>(h));
    if (is_f16_nan(static_cast<uint16_t>(h))) {
      ASSERT_TRUE(std::isnan(got)) << h;
      // The payload moves to the top of the f32 mantissa (as F16C does).
      ASSERT_EQ(std::bit_cast<uint32_t>(got) & 0x007fe000u, static_cast<uint32_t>(h & 0x3ff) << 13) << h;
    } else {
      ASSERT_EQ(static_cast<double>(got), want) << h;
    }
    ASSERT_EQ(std::signbit(got), (h & 0x8000) != 0) << h;
  }
}

TEST(Half, F16RoundTripsThroughF32ForEveryValue) {
  for (uint32_t h = 0; h < 65536; ++h) {
    const auto bits = static_cast<uint16_t>(h);
    const uint16_t back = f32_to_f16(f16_to_f32(bits));
    if (is_f16_nan(bits)) {
      ASSERT_EQ(back, bits | 0x0200) << h;  // a signalling NaN comes back quiet, payload and sign kept
    } else {
      ASSERT_EQ(back, bits) << h;
    }
  }
}

TEST(Half, Bf16RoundTripsThroughF32ForEveryValue) {
  for (uint32_t b = 0; b < 65536; ++b) {
    const auto bits = static_cast<uint16_t>(b);
    const float value = bf16_to_f32(bits);
    ASSERT_EQ(std::bit_cast<uint32_t>(value), b << 16);
    const uint16_t back = f32_to_bf16(value);
    if (is_bf16_nan(bits)) {
      ASSERT_EQ(back, bits | 0x0040) << b;
    } else {
      ASSERT_EQ(back, bits) << b;
    }
  }
}

TEST(Half, F32ToF16EdgeCases) {
  EXPECT_EQ(f32_to_f16(1.0f), 0x3C00);
  EXPECT_EQ(f32_to_f16(-2.0f), 0xC000);
  EXPECT_EQ(f32_to_f16(-0.0f), 0x8000);
  EXPECT_EQ(f32_to_f16(65504.0f), 0x7BFF);    // largest finite
  EXPECT_EQ(f32_to_f16(65519.996f), 0x7BFF);  // just below the halfway point to 2^16
  EXPECT_EQ(f32_to_f16(65520.0f), 0x7C00);    // halfway, 65504's mantissa is odd: up to inf
  EXPECT_EQ(f32_to_f16(1e10f), 0x7C00);
  EXPECT_EQ(f32_to_f16(-INFINITY), 0xFC00);
  EXPECT_EQ(f32_to_f16(0x1p-24f), 0x0001);             // smallest subnormal
  EXPECT_EQ(f32_to_f16(0x1p-25f), 0x0000);             // half of it: tie to even (0)
  EXPECT_EQ(f32_to_f16(0x1.000002p-25f), 0x0001);      // just above half
  EXPECT_EQ(f32_to_f16(0x3p-25f), 0x0002);             // 1.5 units: tie to even (2)
  EXPECT_EQ(f32_to_f16(0x1.ff8p-15f), 0x03FF);         // largest subnormal, 1023 * 2^-24
  EXPECT_EQ(f32_to_f16(0x1.ffcp-15f), 0x0400);         // 1023.5 units: tie, up out of the subnormals
  EXPECT_EQ(f32_to_f16(1.0f + 0x1p-11f), 0x3C00);      // tie between 1 and 1 + 2^-10: even (1)
  EXPECT_EQ(f32_to_f16(1.0f + 0x3p-11f), 0x3C02);      // tie between 1 + 2^-10 and 1 + 2^-9: even
  EXPECT_EQ(f32_to_f16(1.0f + 0x1.002p-11f), 0x3C01);  // just above the tie
  EXPECT_EQ(f32_to_f16(std::bit_cast<float>(0x7fc00000u)), 0x7E00);  // quiet NaN
  EXPECT_EQ(f32_to_f16(std::bit_cast<float>(0xff800001u)), 0xFE00);  // signalling NaN, low payload: quiet
  EXPECT_EQ(f32_to_f16(std::bit_cast<float>(0x7f802000u)), 0x7E01);  // payload's top bits kept
}

TEST(Half, F32ToBf16EdgeCases) {
  EXPECT_EQ(f32_to_bf16(1.0f), 0x3F80);
  EXPECT_EQ(f32_to_bf16(std::bit_cast<float>(0x3F808000u)), 0x3F80);  // tie, even stays
  EXPECT_EQ(f32_to_bf16(std::bit_cast<float>(0x3F818000u)), 0x3F82);  // tie, odd rounds up
  EXPECT_EQ(f32_to_bf16(std::bit_cast<float>(0x3F808001u)), 0x3F81);
  EXPECT_EQ(f32_to_bf16(std::bit_cast<float>(0x7F7FFFFFu)), 0x7F80);  // FLT_MAX rounds to inf
  EXPECT_EQ(f32_to_bf16(-INFINITY), 0xFF80);
  EXPECT_EQ(f32_to_bf16(std::bit_cast<float>(0x00008000u)), 0x0000);  // subnormal tie: even (0)
  EXPECT_EQ(f32_to_bf16(std::bit_cast<float>(0x7f800001u)), 0x7FC0);  // signalling NaN made quiet
  EXPECT_EQ(f32_to_bf16(std::bit_cast<float>(0xffc00000u)), 0xFFC0);
}

TEST(Half, F32ToF16RoundsToNearestEvenOnRandomValues) {
  std::mt19937_64 rng = fresh_rng();
  bool use_f16c = false;
#ifdef SOTTO_TEST_F16C
  use_f16c = cpu_has_f16c();
#endif
  std::cout << "[ reference ] " << (use_f16c ? "F16C _cvtss_sh" : "nearest-value search") << "\n";
  for (int i = 0; i < 2'000'000; ++i) {
    const float x = random_f32(rng);
    const uint16_t got = f32_to_f16(x);
    uint16_t want;
#ifdef SOTTO_TEST_F16C
    if (use_f16c) {
      want = f16c_from_f32(x);
    } else {
      want = std::isnan(x) ? got : nearest_f16_by_search(x);
    }
#else
    want = std::isnan(x) ? got : nearest_f16_by_search(x);
#endif
    ASSERT_EQ(got, want) << "f32 bits 0x" << std::hex << std::bit_cast<uint32_t>(x) << " = " << x;
    if (i % 64 == 0 && !std::isnan(x)) {  // the search agrees with F16C too (slower, so a sample)
      ASSERT_EQ(got, nearest_f16_by_search(x)) << std::bit_cast<uint32_t>(x);
    }
  }
}

#ifdef SOTTO_TEST_F16C
TEST(Half, F16ToF32MatchesF16CForEveryValue) {
  if (!cpu_has_f16c()) GTEST_SKIP() << "CPU has no F16C";
  for (uint32_t h = 0; h < 65536; ++h) {
    const auto bits = static_cast<uint16_t>(h);
    uint32_t got = std::bit_cast<uint32_t>(f16_to_f32(bits));
    // F16C quiets signalling NaNs while widening; sotto keeps the bits as they are (as numpy does), so NaNs
    // compare with the quiet bit set.
    if (is_f16_nan(bits)) got |= 0x00400000u;
    ASSERT_EQ(got, std::bit_cast<uint32_t>(f16c_to_f32(bits))) << h;
  }
}
#endif

TEST(Half, F32ToBf16RoundsToNearestEvenOnRandomValues) {
  std::mt19937_64 rng = fresh_rng();
  for (int i = 0; i < 1'000'000; ++i) {
    const auto bits = static_cast<uint32_t>(rng());
    const float x = std::bit_cast<float>(bits);
    if (std::isnan(x) || std::isinf(x)) continue;
    // The two neighbours (truncation and one bf16 step further from zero), compared in exact double
    // arithmetic. The step is taken in double so that above the largest bf16 it is 2^128, the point IEEE
    // rounds against.
    const auto truncated = static_cast<uint16_t>(bits >> 16);
    const int exponent = static_cast<int>((bits >> 23) & 0xff);
    const double step = std::ldexp(1.0, (exponent == 0 ? 1 : exponent) - 127 - 7);
    const double below = std::fabs(static_cast<double>(bf16_to_f32(truncated)));
    const double above = below + step;
    const double target = std::fabs(static_cast<double>(x));
    const double to_below = target - below;
    const double to_above = above - target;
    const bool up = to_above < to_below || (to_above == to_below && (truncated & 1));
    const auto want = static_cast<uint16_t>(truncated + (up ? 1 : 0));
    ASSERT_EQ(f32_to_bf16(x), want) << std::hex << bits;
  }
}

}  // namespace
}  // namespace sotto
