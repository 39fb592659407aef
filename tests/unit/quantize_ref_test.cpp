// Reference quantizers round-tripped on fresh random data: quantize, dequantize with dequantize_row_ref, and
// check every value is within the format's step of the input. The bounds come from each format's arithmetic
// (stated next to each check); the steps are read back from the quantized blocks themselves. Byte-exactness
// against gguf-py and llama.cpp is in dtype_reference_test.cpp.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <iostream>
#include <random>
#include <vector>

#include "core/dtype.h"
#include "core/half.h"
#include "core/quant_blocks.h"
#include "core/quantize_ref.h"

namespace sotto {
namespace {

// Blocks of different character: normal values at scales from 2^-8 to 2^8, one-sided blocks, outliers.
std::vector<float> random_values(std::mt19937_64& rng, int n) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_real_distribution<float> log_scale(-8.0f, 8.0f);
  std::vector<float> x(static_cast<size_t>(n));
  for (int start = 0; start < n; start += 32) {
    const float scale = std::exp2(log_scale(rng));
    const auto kind = rng() % 4;
    for (int i = start; i < start + 32 && i < n; ++i) {
      float v = normal(rng) * scale;
      if (kind == 1) v = std::fabs(v);
      if (kind == 2) v = -std::fabs(v);
      if (kind == 3 && rng() % 16 == 0) v *= 30.0f;
      x[static_cast<size_t>(i)] = v;
    }
  }
  return x;
}

struct RoundTrip {
  std::vector<float> input, output;
  std::vector<uint8_t> bytes;
};

RoundTrip round_trip(DType t, int n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  RoundTrip r;
  r.input = random_values(rng, n);
  r.bytes.assign(*dtype_bytes(t, static_cast<uint64_t>(n)), 0xEE);
  r.output.assign(static_cast<size_t>(n), NAN);
  quantize_row_ref(t, r.input.data(), r.bytes.data(), n);
  dequantize_row_ref(t, r.bytes.data(), r.output.data(), n);
  return r;
}

uint64_t fresh_seed() {
  const uint64_t seed = std::random_device{}();
  std::cout << "[ seed ] " << seed << "\n";
  return seed;
}

// Float rounding in the decoder/encoder arithmetic: a few ulps of the value.
float rounding_slack(float x) {
  return std::fabs(x) * 0x1p-20f + 1e-30f;
}

template <class Block>
Block block_at(const std::vector<uint8_t>& bytes, size_t index) {
  Block b;
  std::memcpy(&b, bytes.data() + index * sizeof(Block), sizeof b);
  return b;
}

constexpr int kN = 256 * 64;  // 64 super-blocks, 512 small blocks

TEST(QuantizeRef, PlainTypesRoundTrip) {
  const uint64_t seed = fresh_seed();
  const RoundTrip f32 = round_trip(DType::F32, kN, seed);
  EXPECT_EQ(f32.input, f32.output);
  const RoundTrip f16 = round_trip(DType::F16, kN, seed);
  const RoundTrip bf16 = round_trip(DType::BF16, kN, seed);
  for (size_t i = 0; i < f16.input.size(); ++i) {
    ASSERT_EQ(f16.output[i], f16_to_f32(f32_to_f16(f16.input[i])));
    ASSERT_EQ(bf16.output[i], bf16_to_f32(f32_to_bf16(bf16.input[i])));
    ASSERT_LE(std::fabs(bf16.output[i] - bf16.input[i]), std::fabs(bf16.input[i]) * 0x1p-8f);  // half of 2^-7
  }
}

TEST(QuantizeRef, Q8_0RoundTrip) {
  const RoundTrip r = round_trip(DType::Q8_0, kN, fresh_seed());
  for (size_t b = 0; b < r.input.size() / 32; ++b) {
    // Rounds to nearest with step d (largest magnitude -> 127); d is then rounded to f16 (2^-11 relative),
    // which moves a value of up to 127 steps by up to 127 * 2^-11 * d.
    const float d = std::fabs(f16_to_f32(block_at<BlockQ8_0>(r.bytes, b).d));
    for (size_t i = 32 * b; i < 32 * b + 32; ++i)
      ASSERT_LE(std::fabs(r.output[i] - r.input[i]),
                d * (0.5f + 127.0f / 2048.0f) + rounding_slack(r.input[i]))
          << "element " << i;
  }
}

// q4_0 / q5_0: the largest magnitude maps to -8 (-16) steps; values beyond +7.5 (+15.5) steps on the other
// side are clamped to the top level +7 (+15): up to a whole step of error there, half a step elsewhere.
template <class Block, int kHalfLevels>
void check_symmetric(DType t) {
  const RoundTrip r = round_trip(t, kN, fresh_seed());
  for (size_t b = 0; b < r.input.size() / 32; ++b) {
    const float signed_d = f16_to_f32(block_at<Block>(r.bytes, b).d);
    const float d = std::fabs(signed_d);
    const float f16_shift = d * static_cast<float>(kHalfLevels) / 2048.0f;
    for (size_t i = 32 * b; i < 32 * b + 32; ++i) {
      const float err = std::fabs(r.output[i] - r.input[i]);
      const float slack = f16_shift + rounding_slack(r.input[i]);
      if (err <= 0.5f * d + slack) continue;
      ASSERT_LE(err, d + slack) << "element " << i;
      EXPECT_GE(r.input[i] / signed_d, static_cast<float>(kHalfLevels) - 0.5f - 0.01f)
          << "element " << i << " is off by more than half a step but is not a clamped top value";
    }
  }
}
TEST(QuantizeRef, Q4_0RoundTrip) {
  check_symmetric<BlockQ4_0, 8>(DType::Q4_0);
}
TEST(QuantizeRef, Q5_0RoundTrip) {
  check_symmetric<BlockQ5_0, 16>(DType::Q5_0);
}

// q4_1 / q5_1: min -> 0, max -> 15 (31), round to nearest: half a step, plus the f16 rounding of d (over up
// to kLevels steps) and of the min.
template <class Block, int kLevels>
void check_asymmetric(DType t) {
  const RoundTrip r = round_trip(t, kN, fresh_seed());
  for (size_t b = 0; b < r.input.size() / 32; ++b) {
    const Block block = block_at<Block>(r.bytes, b);
    const float d = f16_to_f32(block.d);
    const float m = f16_to_f32(block.m);
    const float bound = d * (0.5f + static_cast<float>(kLevels) / 2048.0f) + std::fabs(m) / 2048.0f;
    for (size_t i = 32 * b; i < 32 * b + 32; ++i)
      ASSERT_LE(std::fabs(r.output[i] - r.input[i]), bound + rounding_slack(r.input[i])) << "element " << i;
  }
}
TEST(QuantizeRef, Q4_1RoundTrip) {
  check_asymmetric<BlockQ4_1, 15>(DType::Q4_1);
}
TEST(QuantizeRef, Q5_1RoundTrip) {
  check_asymmetric<BlockQ5_1, 31>(DType::Q5_1);
}

TEST(QuantizeRef, Q8_KRoundTrip) {
  const RoundTrip r = round_trip(DType::Q8_K, kN, fresh_seed());
  for (size_t b = 0; b < r.input.size() / 256; ++b) {
    const BlockQ8_K block = block_at<BlockQ8_K>(r.bytes, b);
    const float d = std::fabs(block.d);  // an f32: no scale rounding
    for (int g = 0; g < 16; ++g) {       // bsums are the sums of each 16 quants
      int sum = 0;
      for (int i = 0; i < 16; ++i) sum += block.qs[16 * g + i];
      EXPECT_EQ(block.bsums[g], sum);
    }
    for (size_t i = 256 * b; i < 256 * b + 256; ++i)
      ASSERT_LE(std::fabs(r.output[i] - r.input[i]), 0.5f * d + rounding_slack(r.input[i]))
          << "element " << i;
  }
}

// q4_K / q5_K: each 32-element sub-block is within half its stored step, and the step is not wastefully
// large: at most the sub-block's range (with the one-sided offset) over kLevels, plus one unit of d and dmin.
template <class Block, int kLevels>
void check_k_asymmetric(DType t) {
  const RoundTrip r = round_trip(t, kN, fresh_seed());
  for (size_t b = 0; b < r.input.size() / 256; ++b) {
    const Block block = block_at<Block>(r.bytes, b);
    const float d = f16_to_f32(block.d);
    const float dmin = f16_to_f32(block.dmin);
    for (int j = 0; j < 8; ++j) {
      const ScaleMin stored = unpack_k4_scale_min(block.scales, j);
      const float step = d * static_cast<float>(stored.scale);
      const float* x = r.input.data() + 256 * b + 32 * j;
      float lo = 0.0f, hi = 0.0f;
      for (int i = 0; i < 32; ++i) lo = std::min(lo, x[i]), hi = std::max(hi, x[i]);
      EXPECT_LE(dmin * static_cast<float>(stored.min), -lo + dmin + rounding_slack(lo));
      EXPECT_LE(step, (hi - lo + dmin) / static_cast<float>(kLevels) + d + rounding_slack(hi - lo));
      for (int i = 0; i < 32; ++i) {
        const size_t e = 256 * b + 32 * j + static_cast<size_t>(i);
        // (x + offset) / step is rounded: slack in proportion to the larger of the terms.
        const float slack =
            rounding_slack(std::fabs(r.input[e]) + dmin * static_cast<float>(stored.min) + step);
        ASSERT_LE(std::fabs(r.output[e] - r.input[e]), 0.5f * step + slack) << "element " << e;
      }
    }
  }
}
TEST(QuantizeRef, Q4_KRoundTrip) {
  check_k_asymmetric<BlockQ4_K, 15>(DType::Q4_K);
}
TEST(QuantizeRef, Q5_KRoundTrip) {
  check_k_asymmetric<BlockQ5_K, 31>(DType::Q5_K);
}

TEST(QuantizeRef, Q6_KRoundTrip) {
  const RoundTrip r = round_trip(DType::Q6_K, kN, fresh_seed());
  for (size_t b = 0; b < r.input.size() / 256; ++b) {
    const BlockQ6_K block = block_at<BlockQ6_K>(r.bytes, b);
    const float d = f16_to_f32(block.d);
    for (int j = 0; j < 16; ++j) {
      // Levels -32..31 with step d * scale_j; the step covers the largest magnitude at 31.5 steps.
      const float step = std::fabs(d * static_cast<float>(block.scales[j]));
      float amax = 0.0f;
      for (int i = 0; i < 16; ++i) amax = std::max(amax, std::fabs(r.input[256 * b + 16 * j + i]));
      EXPECT_LE(step, amax / 31.5f + d + rounding_slack(amax));
      for (int i = 0; i < 16; ++i) {
        const size_t e = 256 * b + 16 * j + static_cast<size_t>(i);
        ASSERT_LE(std::fabs(r.output[e] - r.input[e]),
                  0.5f * step + rounding_slack(std::fabs(r.input[e]) + step))
            << "element " << e;
      }
    }
  }
}

TEST(QuantizeRef, ZeroAndNonFiniteInputsGiveValidBlocks) {
  for (DType t : {DType::Q4_0, DType::Q4_1, DType::Q5_0, DType::Q5_1, DType::Q8_0, DType::Q4_K, DType::Q5_K,
                  DType::Q6_K, DType::Q8_K}) {
    SCOPED_TRACE(std::string(dtype_name(t)));
    std::vector<float> zeros(256, 0.0f);
    std::vector<uint8_t> bytes(*dtype_bytes(t, 256));
    std::vector<float> out(256, NAN);
    quantize_row_ref(t, zeros.data(), bytes.data(), 256);
    dequantize_row_ref(t, bytes.data(), out.data(), 256);
    for (float v : out) ASSERT_EQ(v, 0.0f);
    // NaN and infinity must not be undefined behaviour (float -> int conversions are clamped first).
    std::vector<float> bad(256, 1.0f);
    bad[3] = NAN, bad[100] = INFINITY, bad[200] = -INFINITY;
    quantize_row_ref(t, bad.data(), bytes.data(), 256);
    dequantize_row_ref(t, bytes.data(), out.data(), 256);
  }
  EXPECT_FALSE(dtype_can_quantize(DType::Q2_K));
  EXPECT_FALSE(dtype_can_quantize(DType::I32));
}

}  // namespace
}  // namespace sotto
