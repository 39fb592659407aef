// One hand-built super-block per K-quant type; the expected values are worked out by hand in the comments
// from the layouts in ggml-common.h / ggml-quants.c (restated in core/quant_blocks.h and core/dtype.cpp).
// f16 constants: 0x3C00 = 1.0, 0x3800 = 0.5 (IEEE 754 binary16).
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "core/dtype.h"
#include "core/quant_blocks.h"

namespace sotto {
namespace {

template <class Block>
std::vector<float> decode(DType t, const Block& block) {
  EXPECT_EQ(sizeof(Block), dtype_info(t).block_bytes);
  std::vector<float> out(256, -12345.0f);
  dequantize_row_ref(t, &block, out.data(), 256);
  return out;
}

void expect_values(const std::vector<float>& got, const std::vector<float>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_EQ(got[i], want[i]) << "element " << i;
}

TEST(DequantizeRef, Q2_K) {
  BlockQ2_K block;
  block.d = 0x3C00;     // 1.0
  block.dmin = 0x3800;  // 0.5
  // 16 sub-blocks of 16; scale byte = min << 4 | scale. 0x21: scale 1, min 2 -> value = 1 * q - 0.5 * 2 = q
  // - 1.
  std::memset(block.scales, 0x21, sizeof block.scales);
  block.scales[3] = 0x53;                        // sub-block 3 (elements 48..63): scale 3, min 5 -> 3q - 2.5
  std::memset(block.qs, 0x00, sizeof block.qs);  // q = 0 -> -1 (sub-block 3: -2.5)
  // Elements 48..63 are the first half's second pass (bits 2-3) over qs[16..31]: qs[16] = 0b1100 gives
  // element 48 q = 3 -> 3 * 3 - 2.5 = 6.5 (its bits 0-1, element 16, stay 0).
  block.qs[16] = 0x0C;
  // qs[32] is the second half's first byte; bits 6-7 (its fourth pass) are element 128 + 96 = 224, sub-block
  // 14 (scale 0x21): q = 3 -> 3 - 1 = 2.
  block.qs[32] = 0xC0;
  std::vector<float> want(256, -1.0f);
  for (int i = 48; i < 64; ++i) want[i] = -2.5f;
  want[48] = 6.5f;
  want[224] = 2.0f;
  expect_values(decode(DType::Q2_K, block), want);
}

TEST(DequantizeRef, Q3_K) {
  BlockQ3_K block;
  block.d = 0x3C00;  // 1.0
  // 16 6-bit scales stored as scale + 32. All 33 (-> +1): 33 = 0b10'0001, low nibble 1 (bytes 0..7 hold
  // sub-blocks j and j + 8 in their low/high nibbles -> 0x11), high bits 2 (bytes 8..11 hold 2 bits for
  // sub-blocks k, k+4, k+8, k+12 -> 0b10101010).
  std::memset(block.scales, 0x11, 8);
  std::memset(block.scales + 8, 0xAA, 4);
  // Sub-block 5 -> 29 (-3) = 0b01'1101: low nibble D in byte 5; high bits 01 in byte 9 (= 8 + 5 % 4), bits
  // 2-3.
  block.scales[5] = 0x1D;
  block.scales[9] = 0xA6;  // 0b1010'0110
  // Sub-block 12 -> 60 (+28) = 0b11'1100: low nibble C in byte 4's high nibble; high bits 11 in byte 8, bits
  // 6-7.
  block.scales[4] = 0xC1;
  block.scales[8] = 0xEA;                              // 0b1110'1010
  std::memset(block.qs, 0x55, sizeof block.qs);        // every 2-bit q = 1
  std::memset(block.hmask, 0xFF, sizeof block.hmask);  // bit set: no -4
  // Default: q = 1 -> value = scale. Sub-block 5 is pass 2 (bits 4-5) group 2 (qs/hmask 16..31):
  // elements 80..95.
  block.qs[20] = 0x75;     // element 84: bits 4-5 = 3 -> 3 * -3 = -9
  block.hmask[21] = 0xFB;  // element 85: bit 2 clear -> (1 - 4) * -3 = 9
  // Sub-block 12 is pass 6 (second half, bits 4-5, hmask bit 6), group 1 (qs 32..47, hmask 0..15): 192..207.
  block.hmask[3] = 0xBF;  // element 195: (1 - 4) * 28 = -84
  std::vector<float> want(256, 1.0f);
  for (int i = 80; i < 96; ++i) want[i] = -3.0f;
  for (int i = 192; i < 208; ++i) want[i] = 28.0f;
  want[84] = -9.0f, want[85] = 9.0f, want[195] = -84.0f;
  expect_values(decode(DType::Q3_K, block), want);
}

// q4_K/q5_K scales for sub-blocks 0..7: scale = {1, 2, 3, 4, 37, 5, 6, 63}, min = {0, 2, 4, 6, 40, 1, 0, 63}.
// Bytes 0..3: scales 0..3 | high 2 bits of scales 4..7 (37 = 0b10'0101 -> 2, 63 -> 3) << 6.
// Bytes 4..7: mins 0..3 | high 2 bits of mins 4..7 (40 = 0b10'1000 -> 2, 63 -> 3) << 6.
// Bytes 8..11: low nibbles of scales 4..7 | low nibbles of mins 4..7 << 4: 0x85, 0x15, 0x06, 0xFF.
constexpr uint8_t kK4Scales[12] = {0x81, 0x02, 0x03, 0xC4, 0x80, 0x02, 0x04, 0xC6, 0x85, 0x15, 0x06, 0xFF};

TEST(DequantizeRef, Q4_KScaleUnpacking) {
  const uint8_t scales[8] = {1, 2, 3, 4, 37, 5, 6, 63};
  const uint8_t mins[8] = {0, 2, 4, 6, 40, 1, 0, 63};
  for (int j = 0; j < 8; ++j) {
    EXPECT_EQ(unpack_k4_scale_min(kK4Scales, j).scale, scales[j]) << j;
    EXPECT_EQ(unpack_k4_scale_min(kK4Scales, j).min, mins[j]) << j;
  }
  // The word-wise form the fast kernels use: the same 8 scales and 8 mins, for the bytes above and for every
  // value of each byte position (the others fixed), so every bit reaches its place.
  uint8_t packed[12];
  std::memcpy(packed, kK4Scales, 12);
  for (int at = 0; at < 12; ++at)
    for (int value = 0; value < 256; ++value) {
      packed[at] = static_cast<uint8_t>(value);
      uint8_t all[16];
      unpack_k4_scales_mins(packed, all);
      for (int j = 0; j < 8; ++j) {
        ASSERT_EQ(all[j], unpack_k4_scale_min(packed, j).scale)
            << "byte " << at << " = " << value << ", j " << j;
        ASSERT_EQ(all[8 + j], unpack_k4_scale_min(packed, j).min)
            << "byte " << at << " = " << value << ", j " << j;
      }
      packed[at] = kK4Scales[at];
    }
}

// Values of the default quants (qs = 0x21: low nibble 1 for even sub-blocks, high nibble 2 for odd ones) with
// d = 1 and dmin = 0.5: scale * q - 0.5 * min.
const float kK4Defaults[8] = {1 * 1 - 0.0f,   2 * 2 - 1.0f, 3 * 1 - 2.0f, 4 * 2 - 3.0f,
                              37 * 1 - 20.0f, 5 * 2 - 0.5f, 6 * 1 - 0.0f, 63 * 2 - 31.5f};

TEST(DequantizeRef, Q4_K) {
  BlockQ4_K block;
  block.d = 0x3C00;     // 1.0
  block.dmin = 0x3800;  // 0.5
  std::memcpy(block.scales, kK4Scales, 12);
  std::memset(block.qs, 0x21, sizeof block.qs);
  // Each 64 elements read 32 bytes: low nibbles are sub-block 2c, high nibbles sub-block 2c + 1.
  block.qs[100] =
      0xF0;  // chunk 3, l = 4: element 196 (sub-block 6) q = 0 -> 0; element 228 (7): 63 * 15 - 31.5
  block.qs[33] =
      0x0F;  // chunk 1, l = 1: element 65 (sub-block 2): 3 * 15 - 2 = 43; element 97 (3): 0 - 3 = -3
  std::vector<float> want(256);
  for (int i = 0; i < 256; ++i) want[i] = kK4Defaults[i / 32];
  want[196] = 0.0f, want[228] = 913.5f, want[65] = 43.0f, want[97] = -3.0f;
  expect_values(decode(DType::Q4_K, block), want);
}

TEST(DequantizeRef, Q5_K) {
  BlockQ5_K block;
  block.d = 0x3C00;     // 1.0
  block.dmin = 0x3800;  // 0.5
  std::memcpy(block.scales, kK4Scales, 12);
  std::memset(block.qs, 0x21, sizeof block.qs);
  std::memset(block.qh, 0x00, sizeof block.qh);  // no 5th bits: same values as the q4_K defaults
  // Bit j of qh[l] is the 5th bit of element l of sub-block j.
  block.qh[7] = 0x21;  // element 7 (sub-block 0): (1 | 16) * 1 - 0 = 17; element 167 (5): (2 | 16) * 5 - 0.5
  block.qs[100] = 0xF0;  // element 196 (sub-block 6): q = 0 -> 0; element 228 (7): q = 15 ...
  block.qh[4] = 0x80;    // ... plus bit 7 of qh[4]: (15 | 16) = 31 -> 63 * 31 - 31.5 = 1921.5
  std::vector<float> want(256);
  for (int i = 0; i < 256; ++i) want[i] = kK4Defaults[i / 32];
  want[7] = 17.0f, want[167] = 89.5f, want[196] = 0.0f, want[228] = 1921.5f;
  expect_values(decode(DType::Q5_K, block), want);
}

TEST(DequantizeRef, Q6_K) {
  BlockQ6_K block;
  block.d = 0x3800;  // 0.5
  // Sub-block scales 1, -2, 3, -4, ..., 15, -16 (int8).
  for (int j = 0; j < 16; ++j) block.scales[j] = static_cast<int8_t>(j % 2 == 0 ? j + 1 : -(j + 1));
  // Defaults: low nibbles 1, 2-bit highs 2 -> q = (1 | 2 << 4) - 32 = 1 -> value = 0.5 * scale[i / 16].
  std::memset(block.ql, 0x11, sizeof block.ql);
  std::memset(block.qh, 0xAA, sizeof block.qh);
  // First half, l = 5: ql[5] low -> element 5, ql[5] high -> element 69, ql[37] -> elements 37 and 101;
  // qh[5] bits 0-1, 2-3, 4-5, 6-7 -> elements 5, 37, 69, 101; set them to 0, 3, 1, 2.
  block.ql[5] = 0x3F;
  block.qh[5] = 0x9C;  // 0b10'01'11'00
  // element 5:  (15 | 0 << 4) - 32 = -17, sub-block 0 (scale 1)  -> 0.5 * 1 * -17 = -8.5
  // element 37: (1 | 3 << 4) - 32 = 17,   sub-block 2 (scale 3)  -> 0.5 * 3 * 17 = 25.5
  // element 69: (3 | 1 << 4) - 32 = -13,  sub-block 4 (scale 5)  -> 0.5 * 5 * -13 = -32.5
  // element 101: default                                          -> 0.5 * 7 * 1 = 3.5
  // Second half (ql 64.., qh 32.., elements 128..), l = 8: ql[104] (= 64 + 32 + 8) low -> element 168,
  // high -> element 232; qh[40] bits 2-3 -> element 168, bits 6-7 -> element 232.
  block.ql[104] = 0xE0;
  block.qh[40] = 0xE2;  // 0b11'10'00'10: elements 136, 168, 200, 232 get highs 2, 0, 2, 3
  // element 168: (0 | 0 << 4) - 32 = -32, sub-block 10 (scale 11) -> 0.5 * 11 * -32 = -176
  // element 232: (14 | 3 << 4) - 32 = 30,  sub-block 14 (scale 15) -> 0.5 * 15 * 30 = 225
  std::vector<float> want(256);
  for (int i = 0; i < 256; ++i) want[i] = 0.5f * static_cast<float>(block.scales[i / 16]);
  want[5] = -8.5f, want[37] = 25.5f, want[69] = -32.5f, want[168] = -176.0f, want[232] = 225.0f;
  expect_values(decode(DType::Q6_K, block), want);
}

TEST(DequantizeRef, Q8_K) {
  BlockQ8_K block;
  block.d = 0.125f;  // q8_K's scale is an f32
  for (int i = 0; i < 256; ++i) block.qs[i] = static_cast<int8_t>(i % 7 - 3);
  block.qs[255] = -128;
  std::memset(block.bsums, 0x7F, sizeof block.bsums);  // sums for dot products, not part of the values
  std::vector<float> want(256);
  for (int i = 0; i < 256; ++i) want[i] = 0.125f * static_cast<float>(i % 7 - 3);
  want[255] = -16.0f;
  expect_values(decode(DType::Q8_K, block), want);
}

}  // namespace
}  // namespace sotto
