// The dtype table, ggml ids, sizes, and one hand-built block per type whose decoded values are worked out by
// hand in the comments from the layouts in ggml-common.h (restated in core/quant_blocks.h). f16 constants:
// 0x3C00 = 1.0, 0x3800 = 0.5, 0x3400 = 0.25, 0x4000 = 2.0, 0xBC00 = -1.0 (IEEE 754 binary16).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "core/dtype.h"
#include "core/quant_blocks.h"

namespace sotto {
namespace {

template <class Block>
std::vector<float> decode(DType t, const Block& block) {
  EXPECT_EQ(sizeof(Block), dtype_info(t).block_bytes);
  std::vector<float> out(dtype_info(t).block_elems, -12345.0f);
  dequantize_row_ref(t, &block, out.data(), static_cast<int64_t>(out.size()));
  return out;
}

void expect_values(const std::vector<float>& got, const std::vector<float>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_EQ(got[i], want[i]) << "element " << i;
}

// ---------------------------------------------------------------- table

TEST(DType, NamesSizesAndGgmlIdsMatchGgml) {
  struct Row {
    DType type;
    const char* name;
    uint32_t block_elems, block_bytes, ggml_id;
  };
  // ggml.h's GGML_TYPE_* ids and ggml-common.h's block sizes.
  const Row rows[] = {
      {DType::F32, "f32", 1, 4, 0},        {DType::F16, "f16", 1, 2, 1},
      {DType::BF16, "bf16", 1, 2, 30},     {DType::F64, "f64", 1, 8, 28},
      {DType::I8, "i8", 1, 1, 24},         {DType::I16, "i16", 1, 2, 25},
      {DType::I32, "i32", 1, 4, 26},       {DType::I64, "i64", 1, 8, 27},
      {DType::Q4_0, "q4_0", 32, 18, 2},    {DType::Q4_1, "q4_1", 32, 20, 3},
      {DType::Q5_0, "q5_0", 32, 22, 6},    {DType::Q5_1, "q5_1", 32, 24, 7},
      {DType::Q8_0, "q8_0", 32, 34, 8},    {DType::Q8_1, "q8_1", 32, 36, 9},
      {DType::Q2_K, "q2_K", 256, 84, 10},  {DType::Q3_K, "q3_K", 256, 110, 11},
      {DType::Q4_K, "q4_K", 256, 144, 12}, {DType::Q5_K, "q5_K", 256, 176, 13},
      {DType::Q6_K, "q6_K", 256, 210, 14}, {DType::Q8_K, "q8_K", 256, 292, 15},
  };
  for (const Row& row : rows) {
    SCOPED_TRACE(row.name);
    EXPECT_EQ(dtype_name(row.type), row.name);
    EXPECT_EQ(dtype_info(row.type).block_elems, row.block_elems);
    EXPECT_EQ(dtype_info(row.type).block_bytes, row.block_bytes);
    EXPECT_EQ(dtype_info(row.type).quantized, row.block_elems > 1);
    EXPECT_EQ(dtype_to_ggml(row.type), row.ggml_id);
    Result<DType> back = dtype_from_ggml(row.ggml_id);
    ASSERT_TRUE(back.ok()) << back.message();
    EXPECT_EQ(*back, row.type);
  }
  for (DType t : {DType::U8, DType::U16, DType::U32, DType::U64, DType::Bool}) {
    EXPECT_EQ(dtype_to_ggml(t), kNoGgmlType) << dtype_name(t);
  }
  EXPECT_EQ(dtype_name(DType::U8), "u8");
  EXPECT_EQ(dtype_name(DType::U16), "u16");
  EXPECT_EQ(dtype_name(DType::U32), "u32");
  EXPECT_EQ(dtype_name(DType::U64), "u64");
  EXPECT_EQ(dtype_name(DType::Bool), "bool");
}

TEST(DType, EveryTypeCanBeDequantized) {
  for (int i = 0; i < static_cast<int>(DType::Count); ++i)
    EXPECT_TRUE(dtype_can_dequantize(static_cast<DType>(i)));
  EXPECT_FALSE(dtype_can_dequantize(DType::Count));
}

TEST(DType, UnsupportedGgmlIdsNameTheType) {
  EXPECT_EQ(dtype_from_ggml(16).message(), "ggml type 16 (iq2_xxs) is not supported");
  EXPECT_EQ(dtype_from_ggml(23).message(), "ggml type 23 (iq4_xs) is not supported");
  EXPECT_EQ(dtype_from_ggml(35).message(), "ggml type 35 (tq2_0) is not supported");
  EXPECT_EQ(dtype_from_ggml(4).message(), "ggml type 4 (q4_2, removed from ggml) is not supported");
  EXPECT_EQ(dtype_from_ggml(1000).message(), "ggml type 1000 is unknown");
  EXPECT_EQ(dtype_from_ggml(kNoGgmlType).message(), "ggml type 4294967295 is unknown");
}

TEST(DType, BytesCountWholeBlocksAndRefuseOverflow) {
  EXPECT_EQ(dtype_bytes(DType::F32, 10), 40u);
  EXPECT_EQ(dtype_bytes(DType::F32, 0), 0u);
  EXPECT_EQ(dtype_bytes(DType::Q4_0, 64), 36u);
  EXPECT_EQ(dtype_bytes(DType::Q6_K, 512), 420u);
  EXPECT_EQ(dtype_bytes(DType::Q4_0, 33), std::nullopt);  // not a whole number of blocks
  EXPECT_EQ(dtype_bytes(DType::Q4_K, 128), std::nullopt);
  EXPECT_EQ(dtype_bytes(DType::F32, (uint64_t{1} << 62) - 1), UINT64_MAX - 3);  // 2^64 - 4: just fits
  EXPECT_EQ(dtype_bytes(DType::F32, uint64_t{1} << 62), std::nullopt);          // 2^64: does not
  // 2^59 - 1 blocks of 18 bytes fit in 64 bits; 2^56 - 1 blocks of 292 bytes (q8_K) do not.
  EXPECT_EQ(dtype_bytes(DType::Q4_0, UINT64_MAX - 31), ((uint64_t{1} << 59) - 1) * 18);
  EXPECT_EQ(dtype_bytes(DType::Q8_K, UINT64_MAX - 255), std::nullopt);
  EXPECT_EQ(dtype_bytes(DType::Count, 1), std::nullopt);
}

// ---------------------------------------------------------------- plain types

TEST(DequantizeRef, PlainTypes) {
  const uint16_t f16[] = {0x0001, 0x7BFF, 0xFC00, 0x3555, 0x8000};
  std::vector<float> out(5);
  dequantize_row_ref(DType::F16, f16, out.data(), 5);
  // 2^-24 (smallest subnormal), 65504 (largest finite), -inf, (1 + 341/1024) / 4, -0
  expect_values(out, {0x1p-24f, 65504.0f, -INFINITY, 1365.0f / 4096.0f, -0.0f});
  EXPECT_TRUE(std::signbit(out[4]));

  const uint16_t bf16[] = {0x3F80, 0xC040, 0x7F80, 0x0001, 0x4049};
  dequantize_row_ref(DType::BF16, bf16, out.data(), 5);
  // bf16 is the top half of an f32: 1.0, -3.0, inf, 2^-133 (f32 subnormal 0x00010000), 0x40490000 = 3.140625
  expect_values(out, {1.0f, -3.0f, INFINITY, 0x1p-133f, 3.140625f});

  const float f32[] = {1.5f, -0.0f, 3e38f};
  std::vector<float> f32_out(3);
  dequantize_row_ref(DType::F32, f32, f32_out.data(), 3);
  expect_values(f32_out, {1.5f, -0.0f, 3e38f});

  const double f64[] = {1.5, -2.25};
  std::vector<float> two(2);
  dequantize_row_ref(DType::F64, f64, two.data(), 2);
  expect_values(two, {1.5f, -2.25f});

  const int8_t i8[] = {-5, 127};
  dequantize_row_ref(DType::I8, i8, two.data(), 2);
  expect_values(two, {-5.0f, 127.0f});
  const uint16_t u16[] = {65535, 7};
  dequantize_row_ref(DType::U16, u16, two.data(), 2);
  expect_values(two, {65535.0f, 7.0f});
  const int64_t i64[] = {-(int64_t{1} << 40), 3};
  dequantize_row_ref(DType::I64, i64, two.data(), 2);
  expect_values(two, {-0x1p40f, 3.0f});
  const uint8_t flags[] = {2, 0};
  dequantize_row_ref(DType::Bool, flags, two.data(), 2);
  expect_values(two, {1.0f, 0.0f});
}

TEST(DequantizeRef, ReadsUnalignedSource) {
  // An f32 and a q8_0 block at odd addresses (a file's bytes need not be aligned for the struct).
  alignas(8) uint8_t bytes[64] = {};
  const float value = -7.25f;
  std::memcpy(bytes + 1, &value, 4);
  float out = 0;
  dequantize_row_ref(DType::F32, bytes + 1, &out, 1);
  EXPECT_EQ(out, -7.25f);

  BlockQ8_0 block{};
  block.d = 0x4000;  // 2.0
  for (int i = 0; i < 32; ++i) block.qs[i] = static_cast<int8_t>(i - 16);
  std::memcpy(bytes + 3, &block, sizeof block);
  std::vector<float> decoded(32);
  dequantize_row_ref(DType::Q8_0, bytes + 3, decoded.data(), 32);
  for (int i = 0; i < 32; ++i) EXPECT_EQ(decoded[i], 2.0f * static_cast<float>(i - 16));
}

// ---------------------------------------------------------------- 32-element blocks

TEST(DequantizeRef, Q4_0) {
  BlockQ4_0 block;
  block.d = 0x3800;                              // 0.5
  std::memset(block.qs, 0x88, sizeof block.qs);  // q = 8 in both nibbles: (8 - 8) * 0.5 = 0
  block.qs[0] = 0x03;  // element 0: low nibble 3 -> (3 - 8) * 0.5 = -2.5; element 16: high 0 -> -4
  block.qs[1] = 0xF1;  // element 1: (1 - 8) * 0.5 = -3.5; element 17: (15 - 8) * 0.5 = 3.5
  std::vector<float> want(32, 0.0f);
  want[0] = -2.5f, want[16] = -4.0f, want[1] = -3.5f, want[17] = 3.5f;
  expect_values(decode(DType::Q4_0, block), want);
}

TEST(DequantizeRef, Q4_1) {
  BlockQ4_1 block;
  block.d = 0x3C00;                              // 1.0
  block.m = 0xBC00;                              // -1.0: value = q * 1 - 1
  std::memset(block.qs, 0x00, sizeof block.qs);  // q = 0 -> -1
  block.qs[0] = 0x52;                            // element 0: 2 - 1 = 1; element 16: 5 - 1 = 4
  block.qs[15] = 0x0F;                           // element 15: 15 - 1 = 14; element 31: 0 - 1 = -1
  std::vector<float> want(32, -1.0f);
  want[0] = 1.0f, want[16] = 4.0f, want[15] = 14.0f;
  expect_values(decode(DType::Q4_1, block), want);
}

TEST(DequantizeRef, Q5_0) {
  BlockQ5_0 block;
  block.d = 0x4000;  // 2.0
  // qh as a little-endian u32 = 0x00800001: bit 0 (element 0) and bit 23 (element 23) set.
  const uint8_t qh[4] = {0x01, 0x00, 0x80, 0x00};
  std::memcpy(block.qh, qh, 4);
  std::memset(block.qs, 0x00, sizeof block.qs);  // q = 0, no 5th bit: (0 - 16) * 2 = -32
  block.qs[0] = 0x21;  // element 0: 1 | 16 = 17 -> (17 - 16) * 2 = 2; element 16: 2 -> (2 - 16) * 2 = -28
  block.qs[7] = 0xF0;  // element 7: 0 -> -32; element 23: 15 | 16 = 31 -> (31 - 16) * 2 = 30
  std::vector<float> want(32, -32.0f);
  want[0] = 2.0f, want[16] = -28.0f, want[23] = 30.0f;
  expect_values(decode(DType::Q5_0, block), want);
}

TEST(DequantizeRef, Q5_1) {
  BlockQ5_1 block;
  block.d = 0x3800;                                // 0.5
  block.m = 0x4000;                                // 2.0: value = q * 0.5 + 2
  const uint8_t qh[4] = {0x00, 0x00, 0x01, 0x00};  // bit 16: element 16's 5th bit
  std::memcpy(block.qh, qh, 4);
  std::memset(block.qs, 0x00, sizeof block.qs);  // q = 0 -> 2
  block.qs[0] = 0x3A;  // element 0: 10 * 0.5 + 2 = 7; element 16: (3 | 16) = 19 * 0.5 + 2 = 11.5
  std::vector<float> want(32, 2.0f);
  want[0] = 7.0f, want[16] = 11.5f;
  expect_values(decode(DType::Q5_1, block), want);
}

TEST(DequantizeRef, Q8_0AndQ8_1) {
  BlockQ8_0 block;
  block.d = 0x3400;                                          // 0.25
  std::memset(block.qs, 4, sizeof block.qs);                 // 4 * 0.25 = 1
  block.qs[0] = -128, block.qs[1] = 127, block.qs[31] = -1;  // -32, 31.75, -0.25
  std::vector<float> want(32, 1.0f);
  want[0] = -32.0f, want[1] = 31.75f, want[31] = -0.25f;
  expect_values(decode(DType::Q8_0, block), want);

  BlockQ8_1 block1;
  block1.d = 0xBC00;  // -1.0
  block1.s = 0x1234;  // the sum field is not part of the values
  for (int i = 0; i < 32; ++i) block1.qs[i] = static_cast<int8_t>(i - 16);
  std::vector<float> want1(32);
  for (int i = 0; i < 32; ++i) want1[i] = static_cast<float>(16 - i);  // (i - 16) * -1
  expect_values(decode(DType::Q8_1, block1), want1);
}

}  // namespace
}  // namespace sotto
