// ggml's quantized block layouts, byte for byte, so weights are read straight from GGUF files. f16 fields are
// stored as raw uint16_t bits (see core/half.h). The layouts (from ggml-common.h, restated here):
//
//   32-element blocks           element i of the block
//   q4_0  d, qs[16]             i < 16: low nibble of qs[i]; i >= 16: high nibble of qs[i-16]; (q - 8) * d
//   q4_1  d, m, qs[16]          as q4_0, q * d + m
//   q5_0  d, qh[4], qs[16]      4 low bits as q4_0, 5th bit is bit i of qh (a little-endian u32); (q - 16) *
//   d q5_1  d, m, qh[4], qs[16]   as q5_0, q * d + m q8_0  d, qs[32]             qs[i] * d q8_1  d, s, qs[32]
//   qs[i] * d; s = d * sum(qs) (used by dot products only)
//
//   256-element super-blocks (sub-blocks of 16 or 32 elements with their own small scales)
//   q2_K  scales[16] (low nibble scale, high nibble min), qs[64] 2-bit, d, dmin
//   q3_K  hmask[32] (3rd bit), qs[64] (2 low bits), scales[12] (16 6-bit scales, offset 32), d
//   q4_K  d, dmin, scales[12] (8 6-bit scales + 8 6-bit mins), qs[128] 4-bit
//   q5_K  d, dmin, scales[12] as q4_K, qh[32] (5th bit), qs[128] 4-bit
//   q6_K  ql[128] (4 low bits), qh[64] (2 high bits), scales[16] int8, d; values offset by 32
//   q8_K  d (f32), qs[256], bsums[16] (sums of groups of 16 qs, for dot products)
// The bit-level placement of each is spelled out next to its decoder in dtype.cpp.
#pragma once

#include <cstdint>
#include <cstring>

namespace sotto {

inline constexpr int kQK4_0 = 32;  // elements per 32-element block
inline constexpr int kQK_K = 256;  // elements per K-quant super-block
inline constexpr int kKScaleBytes = 12;

struct BlockQ4_0 {
  uint16_t d;
  uint8_t qs[16];
};
struct BlockQ4_1 {
  uint16_t d;
  uint16_t m;
  uint8_t qs[16];
};
struct BlockQ5_0 {
  uint16_t d;
  uint8_t qh[4];
  uint8_t qs[16];
};
struct BlockQ5_1 {
  uint16_t d;
  uint16_t m;
  uint8_t qh[4];
  uint8_t qs[16];
};
struct BlockQ8_0 {
  uint16_t d;
  int8_t qs[32];
};
struct BlockQ8_1 {
  uint16_t d;
  uint16_t s;
  int8_t qs[32];
};
struct BlockQ2_K {
  uint8_t scales[16];
  uint8_t qs[64];
  uint16_t d;
  uint16_t dmin;
};
struct BlockQ3_K {
  uint8_t hmask[32];
  uint8_t qs[64];
  uint8_t scales[12];
  uint16_t d;
};
struct BlockQ4_K {
  uint16_t d;
  uint16_t dmin;
  uint8_t scales[kKScaleBytes];
  uint8_t qs[128];
};
struct BlockQ5_K {
  uint16_t d;
  uint16_t dmin;
  uint8_t scales[kKScaleBytes];
  uint8_t qh[32];
  uint8_t qs[128];
};
struct BlockQ6_K {
  uint8_t ql[128];
  uint8_t qh[64];
  int8_t scales[16];
  uint16_t d;
};
struct BlockQ8_K {
  float d;
  int8_t qs[256];
  int16_t bsums[16];
};

static_assert(sizeof(BlockQ4_0) == 18);
static_assert(sizeof(BlockQ4_1) == 20);
static_assert(sizeof(BlockQ5_0) == 22);
static_assert(sizeof(BlockQ5_1) == 24);
static_assert(sizeof(BlockQ8_0) == 34);
static_assert(sizeof(BlockQ8_1) == 36);
static_assert(sizeof(BlockQ2_K) == 84);
static_assert(sizeof(BlockQ3_K) == 110);
static_assert(sizeof(BlockQ4_K) == 144);
static_assert(sizeof(BlockQ5_K) == 176);
static_assert(sizeof(BlockQ6_K) == 210);
static_assert(sizeof(BlockQ8_K) == 292);

// q4_K / q5_K: scale and min of sub-block j (0..7), 6 bits each, packed into 12 bytes:
//   bytes 0..3  low 6 bits: scales 0..3; top 2 bits: high bits of scales 4..7
//   bytes 4..7  low 6 bits: mins 0..3;   top 2 bits: high bits of mins 4..7
//   bytes 8..11 low nibble: low bits of scales 4..7; high nibble: low bits of mins 4..7
struct ScaleMin {
  uint8_t scale;
  uint8_t min;
};
inline ScaleMin unpack_k4_scale_min(const uint8_t* packed, int j) {
  if (j < 4) return {static_cast<uint8_t>(packed[j] & 63), static_cast<uint8_t>(packed[j + 4] & 63)};
  return {static_cast<uint8_t>((packed[j + 4] & 0x0f) | ((packed[j - 4] >> 6) << 4)),
          static_cast<uint8_t>((packed[j + 4] >> 4) | ((packed[j] >> 6) << 4))};
}

// All 8 scales then all 8 mins (out[j] = unpack_k4_scale_min(packed, j).scale, out[8 + j] = .min), four bytes
// per word operation: the fast kernels unpack them once per super-block.
inline void unpack_k4_scales_mins(const uint8_t* packed, uint8_t out[16]) {
  uint32_t a, b, c;
  std::memcpy(&a, packed, 4);
  std::memcpy(&b, packed + 4, 4);
  std::memcpy(&c, packed + 8, 4);
  const uint32_t words[4] = {a & 0x3f3f3f3fu, (c & 0x0f0f0f0fu) | ((a >> 2) & 0x30303030u), b & 0x3f3f3f3fu,
                             ((c >> 4) & 0x0f0f0f0fu) | ((b >> 2) & 0x30303030u)};
  std::memcpy(out, words, 16);
}

// q3_K: scale of sub-block j (0..15), 6 bits stored with an offset of 32, packed into 12 bytes:
//   low 4 bits: j < 8 low nibble of byte j, else high nibble of byte j-8;
//   high 2 bits: bits 2*(j/4)..2*(j/4)+1 of byte 8 + j%4.
inline int unpack_q3_K_scale(const uint8_t* packed, int j) {
  const int low = j < 8 ? (packed[j] & 0x0f) : (packed[j - 8] >> 4);
  const int high = (packed[8 + j % 4] >> (2 * (j / 4))) & 3;
  return (low | (high << 4)) - 32;
}

}  // namespace sotto
