// The dtype table, ggml type ids, and the scalar dequantizers every optimized kernel is tested against.
//
// The decoders follow ggml's reference order of float operations (scale products first, then the multiply,
// then the addition/subtraction as its own statement so no compiler fuses it into an FMA), so their output is
// bit-identical to gguf-py's numpy dequantizers (tests/unit/dtype_reference_test.cpp) and, by the same
// arithmetic, to ggml's dequantize_row_*.
#include "core/dtype.h"

#include <array>
#include <cstring>

#include "core/half.h"
#include "core/quant_blocks.h"

namespace sotto {

namespace {

constexpr std::array<DTypeInfo, static_cast<size_t>(DType::Count)> kDTypeTable = {{
    {"f32", 1, 4, false},
    {"f16", 1, 2, false},
    {"bf16", 1, 2, false},
    {"f64", 1, 8, false},
    {"i8", 1, 1, false},
    {"u8", 1, 1, false},
    {"i16", 1, 2, false},
    {"u16", 1, 2, false},
    {"i32", 1, 4, false},
    {"u32", 1, 4, false},
    {"i64", 1, 8, false},
    {"u64", 1, 8, false},
    {"bool", 1, 1, false},
    {"q4_0", 32, sizeof(BlockQ4_0), true},
    {"q4_1", 32, sizeof(BlockQ4_1), true},
    {"q5_0", 32, sizeof(BlockQ5_0), true},
    {"q5_1", 32, sizeof(BlockQ5_1), true},
    {"q8_0", 32, sizeof(BlockQ8_0), true},
    {"q8_1", 32, sizeof(BlockQ8_1), true},
    {"q2_K", 256, sizeof(BlockQ2_K), true},
    {"q3_K", 256, sizeof(BlockQ3_K), true},
    {"q4_K", 256, sizeof(BlockQ4_K), true},
    {"q5_K", 256, sizeof(BlockQ5_K), true},
    {"q6_K", 256, sizeof(BlockQ6_K), true},
    {"q8_K", 256, sizeof(BlockQ8_K), true},
}};

// GGML_TYPE_* ids (ggml.h) of the types that have one.
struct GgmlId {
  DType type;
  uint32_t id;
};
constexpr GgmlId kGgmlIds[] = {
    {DType::F32, 0},   {DType::F16, 1},   {DType::Q4_0, 2},  {DType::Q4_1, 3},  {DType::Q5_0, 6},
    {DType::Q5_1, 7},  {DType::Q8_0, 8},  {DType::Q8_1, 9},  {DType::Q2_K, 10}, {DType::Q3_K, 11},
    {DType::Q4_K, 12}, {DType::Q5_K, 13}, {DType::Q6_K, 14}, {DType::Q8_K, 15}, {DType::I8, 24},
    {DType::I16, 25},  {DType::I32, 26},  {DType::I64, 27},  {DType::F64, 28},  {DType::BF16, 30},
};

// Names of the ggml ids sotto does not support, so the error says what the file holds.
std::string_view unsupported_ggml_name(uint32_t id) {
  switch (id) {
    case 4:
      return "q4_2, removed from ggml";
    case 5:
      return "q4_3, removed from ggml";
    case 16:
      return "iq2_xxs";
    case 17:
      return "iq2_xs";
    case 18:
      return "iq3_xxs";
    case 19:
      return "iq1_s";
    case 20:
      return "iq4_nl";
    case 21:
      return "iq3_s";
    case 22:
      return "iq2_s";
    case 23:
      return "iq4_xs";
    case 29:
      return "iq1_m";
    case 31:
      return "q4_0_4_4, removed from ggml";
    case 32:
      return "q4_0_4_8, removed from ggml";
    case 33:
      return "q4_0_8_8, removed from ggml";
    case 34:
      return "tq1_0";
    case 35:
      return "tq2_0";
    case 36:
      return "iq4_nl_4_4, removed from ggml";
    case 37:
      return "iq4_nl_4_8, removed from ggml";
    case 38:
      return "iq4_nl_8_8, removed from ggml";
    case 39:
      return "mxfp4";
    default:
      return {};
  }
}

// Blocks in a file need not be aligned for their struct (an 18-byte q4_0 block, an f32 at an odd offset), so
// each is copied out rather than cast.
template <class T>
T load(const uint8_t* src) {
  T value;
  std::memcpy(&value, src, sizeof value);
  return value;
}

// ---------------------------------------------------------------- 32-element blocks

void dequantize_q4_0(const uint8_t* src, float* dst, int64_t n_blocks) {
  for (int64_t b = 0; b < n_blocks; ++b, src += sizeof(BlockQ4_0), dst += 32) {
    const auto block = load<BlockQ4_0>(src);
    const float d = f16_to_f32(block.d);
    for (int i = 0; i < 16; ++i) {
      dst[i] = static_cast<float>((block.qs[i] & 0x0f) - 8) * d;
      dst[i + 16] = static_cast<float>((block.qs[i] >> 4) - 8) * d;
    }
  }
}

void dequantize_q4_1(const uint8_t* src, float* dst, int64_t n_blocks) {
  for (int64_t b = 0; b < n_blocks; ++b, src += sizeof(BlockQ4_1), dst += 32) {
    const auto block = load<BlockQ4_1>(src);
    const float d = f16_to_f32(block.d);
    const float m = f16_to_f32(block.m);
    for (int i = 0; i < 16; ++i) {
      const float low = static_cast<float>(block.qs[i] & 0x0f) * d;
      const float high = static_cast<float>(block.qs[i] >> 4) * d;
      dst[i] = low + m;
      dst[i + 16] = high + m;
    }
  }
}

void dequantize_q5_0(const uint8_t* src, float* dst, int64_t n_blocks) {
  for (int64_t b = 0; b < n_blocks; ++b, src += sizeof(BlockQ5_0), dst += 32) {
    const auto block = load<BlockQ5_0>(src);
    const float d = f16_to_f32(block.d);
    const uint32_t qh = load<uint32_t>(block.qh);  // bit i: the 5th bit of element i (little-endian u32)
    for (int i = 0; i < 16; ++i) {
      const int low = (block.qs[i] & 0x0f) | static_cast<int>(((qh >> i) & 1u) << 4);
      const int high = (block.qs[i] >> 4) | static_cast<int>(((qh >> (i + 16)) & 1u) << 4);
      dst[i] = static_cast<float>(low - 16) * d;
      dst[i + 16] = static_cast<float>(high - 16) * d;
    }
  }
}

void dequantize_q5_1(const uint8_t* src, float* dst, int64_t n_blocks) {
  for (int64_t b = 0; b < n_blocks; ++b, src += sizeof(BlockQ5_1), dst += 32) {
    const auto block = load<BlockQ5_1>(src);
    const float d = f16_to_f32(block.d);
    const float m = f16_to_f32(block.m);
    const uint32_t qh = load<uint32_t>(block.qh);
    for (int i = 0; i < 16; ++i) {
      const int low = (block.qs[i] & 0x0f) | static_cast<int>(((qh >> i) & 1u) << 4);
      const int high = (block.qs[i] >> 4) | static_cast<int>(((qh >> (i + 16)) & 1u) << 4);
      const float low_scaled = static_cast<float>(low) * d;
      const float high_scaled = static_cast<float>(high) * d;
      dst[i] = low_scaled + m;
      dst[i + 16] = high_scaled + m;
    }
  }
}

void dequantize_q8_0(const uint8_t* src, float* dst, int64_t n_blocks) {
  for (int64_t b = 0; b < n_blocks; ++b, src += sizeof(BlockQ8_0), dst += 32) {
    const auto block = load<BlockQ8_0>(src);
    const float d = f16_to_f32(block.d);
    for (int i = 0; i < 32; ++i) dst[i] = static_cast<float>(block.qs[i]) * d;
  }
}

void dequantize_q8_1(const uint8_t* src, float* dst, int64_t n_blocks) {
  for (int64_t b = 0; b < n_blocks; ++b, src += sizeof(BlockQ8_1), dst += 32) {
    const auto block = load<BlockQ8_1>(src);
    const float d = f16_to_f32(block.d);
    for (int i = 0; i < 32; ++i) dst[i] = static_cast<float>(block.qs[i]) * d;
  }
}

// ---------------------------------------------------------------- 256-element super-blocks

// Each 128-element half reads 32 qs bytes four times, 2 bits at a time (shift 0, 2, 4, 6); each pass gives 32
// elements in two sub-blocks of 16 (qs bytes 0..15 and 16..31) with their own scale/min byte.
void dequantize_q2_K(const uint8_t* src, float* dst, int64_t n_blocks) {
  for (int64_t b = 0; b < n_blocks; ++b, src += sizeof(BlockQ2_K)) {
    const auto block = load<BlockQ2_K>(src);
    const float d = f16_to_f32(block.d);
    const float dmin = f16_to_f32(block.dmin);
    int sub_block = 0;
    for (int half = 0; half < 2; ++half) {
      const uint8_t* qs = block.qs + 32 * half;
      for (int shift = 0; shift < 8; shift += 2) {
        for (int group = 0; group < 2; ++group, ++sub_block) {
          const uint8_t scale_min = block.scales[sub_block];
          const float scale = d * static_cast<float>(scale_min & 0x0f);
          const float min = dmin * static_cast<float>(scale_min >> 4);
          for (int l = 0; l < 16; ++l) {
            const float scaled = scale * static_cast<float>((qs[16 * group + l] >> shift) & 3);
            *dst++ = scaled - min;
          }
        }
      }
    }
  }
}

// As q2_K for the 2 low bits; the third bit comes from hmask: bit `pass` (0..7) of hmask[l] for the pass-th
// group of 32 elements. A set bit means q is used as is, a clear bit subtracts 4 (so q ranges -4..3).
void dequantize_q3_K(const uint8_t* src, float* dst, int64_t n_blocks) {
  for (int64_t b = 0; b < n_blocks; ++b, src += sizeof(BlockQ3_K)) {
    const auto block = load<BlockQ3_K>(src);
    const float d = f16_to_f32(block.d);
    int sub_block = 0;
    int pass = 0;
    for (int half = 0; half < 2; ++half) {
      const uint8_t* qs = block.qs + 32 * half;
      for (int shift = 0; shift < 8; shift += 2, ++pass) {
        for (int group = 0; group < 2; ++group, ++sub_block) {
          const float scale = d * static_cast<float>(unpack_q3_K_scale(block.scales, sub_block));
          for (int l = 16 * group; l < 16 * group + 16; ++l) {
            const int q = ((qs[l] >> shift) & 3) - (((block.hmask[l] >> pass) & 1) ? 0 : 4);
            *dst++ = scale * static_cast<float>(q);
          }
        }
      }
    }
  }
}

// Each 64 elements use 32 qs bytes: low nibbles are the first 32 elements (sub-block 2k), high nibbles the
// next 32 (sub-block 2k+1). q5_K adds a 5th bit: bit 2k of qh[l] for the low nibble, bit 2k+1 for the high.
void dequantize_q4_K(const uint8_t* src, float* dst, int64_t n_blocks) {
  for (int64_t b = 0; b < n_blocks; ++b, src += sizeof(BlockQ4_K)) {
    const auto block = load<BlockQ4_K>(src);
    const float d = f16_to_f32(block.d);
    const float dmin = f16_to_f32(block.dmin);
    for (int chunk = 0; chunk < 4; ++chunk) {
      const uint8_t* qs = block.qs + 32 * chunk;
      for (int nibble = 0; nibble < 2; ++nibble) {
        const ScaleMin packed = unpack_k4_scale_min(block.scales, 2 * chunk + nibble);
        const float scale = d * static_cast<float>(packed.scale);
        const float min = dmin * static_cast<float>(packed.min);
        for (int l = 0; l < 32; ++l) {
          const float scaled = scale * static_cast<float>((qs[l] >> (4 * nibble)) & 0x0f);
          *dst++ = scaled - min;
        }
      }
    }
  }
}

void dequantize_q5_K(const uint8_t* src, float* dst, int64_t n_blocks) {
  for (int64_t b = 0; b < n_blocks; ++b, src += sizeof(BlockQ5_K)) {
    const auto block = load<BlockQ5_K>(src);
    const float d = f16_to_f32(block.d);
    const float dmin = f16_to_f32(block.dmin);
    for (int chunk = 0; chunk < 4; ++chunk) {
      const uint8_t* qs = block.qs + 32 * chunk;
      for (int nibble = 0; nibble < 2; ++nibble) {
        const int sub_block = 2 * chunk + nibble;
        const ScaleMin packed = unpack_k4_scale_min(block.scales, sub_block);
        const float scale = d * static_cast<float>(packed.scale);
        const float min = dmin * static_cast<float>(packed.min);
        for (int l = 0; l < 32; ++l) {
          const int q = ((qs[l] >> (4 * nibble)) & 0x0f) | (((block.qh[l] >> sub_block) & 1) << 4);
          const float scaled = scale * static_cast<float>(q);
          *dst++ = scaled - min;
        }
      }
    }
  }
}

// Each 128-element half uses 64 ql bytes and 32 qh bytes. For l in 0..31, the four elements l, l+32, l+64,
// l+96 of the half take their low 4 bits from ql[l] low, ql[l+32] low, ql[l] high, ql[l+32] high, and their
// high 2 bits from qh[l] bits 0-1, 2-3, 4-5, 6-7. Sub-blocks are 16 elements, one int8 scale each.
void dequantize_q6_K(const uint8_t* src, float* dst, int64_t n_blocks) {
  for (int64_t b = 0; b < n_blocks; ++b, src += sizeof(BlockQ6_K), dst += 256) {
    const auto block = load<BlockQ6_K>(src);
    const float d = f16_to_f32(block.d);
    for (int half = 0; half < 2; ++half) {
      const uint8_t* ql = block.ql + 64 * half;
      const uint8_t* qh = block.qh + 32 * half;
      const int8_t* scales = block.scales + 8 * half;
      float* out = dst + 128 * half;
      for (int quarter = 0; quarter < 4; ++quarter) {
        const uint8_t* low_source = ql + 32 * (quarter & 1);
        const int low_shift = 4 * (quarter >> 1);
        for (int l = 0; l < 32; ++l) {
          const int q = (((low_source[l] >> low_shift) & 0x0f) | (((qh[l] >> (2 * quarter)) & 3) << 4)) - 32;
          const float scale = d * static_cast<float>(scales[2 * quarter + l / 16]);
          out[32 * quarter + l] = scale * static_cast<float>(q);
        }
      }
    }
  }
}

void dequantize_q8_K(const uint8_t* src, float* dst, int64_t n_blocks) {
  for (int64_t b = 0; b < n_blocks; ++b, src += sizeof(BlockQ8_K), dst += 256) {
    const auto block = load<BlockQ8_K>(src);
    for (int i = 0; i < 256; ++i) dst[i] = block.d * static_cast<float>(block.qs[i]);
  }
}

// ---------------------------------------------------------------- plain types

template <class T>
void convert_plain(const uint8_t* src, float* dst, int64_t n) {
  for (int64_t i = 0; i < n; ++i) dst[i] = static_cast<float>(load<T>(src + i * sizeof(T)));
}

}  // namespace

const DTypeInfo& dtype_info(DType t) {
  const auto index = static_cast<size_t>(t);
  static constexpr DTypeInfo kInvalid = {"invalid", 1, 0, false};
  return index < kDTypeTable.size() ? kDTypeTable[index] : kInvalid;
}

std::optional<uint64_t> dtype_bytes(DType t, uint64_t n_elems) {
  const DTypeInfo& info = dtype_info(t);
  if (info.block_bytes == 0 || n_elems % info.block_elems != 0) return std::nullopt;
  const uint64_t n_blocks = n_elems / info.block_elems;
  if (n_blocks > UINT64_MAX / info.block_bytes) return std::nullopt;
  return n_blocks * info.block_bytes;
}

Result<DType> dtype_from_ggml(uint32_t ggml_type) {
  for (const GgmlId& entry : kGgmlIds)
    if (entry.id == ggml_type) return entry.type;
  const std::string_view name = unsupported_ggml_name(ggml_type);
  if (!name.empty()) return error("ggml type ", ggml_type, " (", name, ") is not supported");
  return error("ggml type ", ggml_type, " is unknown");
}

uint32_t dtype_to_ggml(DType t) {
  for (const GgmlId& entry : kGgmlIds)
    if (entry.type == t) return entry.id;
  return kNoGgmlType;
}

bool dtype_can_dequantize(DType t) {
  return static_cast<size_t>(t) < kDTypeTable.size();
}

void dequantize_row_ref(DType t, const void* src_bytes, float* dst, int64_t n) {
  if (!dtype_can_dequantize(t) || n <= 0) return;
  const auto* src = static_cast<const uint8_t*>(src_bytes);
  const int64_t n_blocks = n / dtype_info(t).block_elems;  // a partial trailing block is not decoded
  switch (t) {
    case DType::F32:
      convert_plain<float>(src, dst, n);
      break;
    case DType::F64:
      convert_plain<double>(src, dst, n);
      break;
    case DType::I8:
      convert_plain<int8_t>(src, dst, n);
      break;
    case DType::U8:
      convert_plain<uint8_t>(src, dst, n);
      break;
    case DType::I16:
      convert_plain<int16_t>(src, dst, n);
      break;
    case DType::U16:
      convert_plain<uint16_t>(src, dst, n);
      break;
    case DType::I32:
      convert_plain<int32_t>(src, dst, n);
      break;
    case DType::U32:
      convert_plain<uint32_t>(src, dst, n);
      break;
    case DType::I64:
      convert_plain<int64_t>(src, dst, n);
      break;
    case DType::U64:
      convert_plain<uint64_t>(src, dst, n);
      break;
    case DType::Bool:
      for (int64_t i = 0; i < n; ++i) dst[i] = src[i] != 0 ? 1.0f : 0.0f;
      break;
    case DType::F16:
      for (int64_t i = 0; i < n; ++i) dst[i] = f16_to_f32(load<uint16_t>(src + 2 * i));
      break;
    case DType::BF16:
      for (int64_t i = 0; i < n; ++i) dst[i] = bf16_to_f32(load<uint16_t>(src + 2 * i));
      break;
    case DType::Q4_0:
      dequantize_q4_0(src, dst, n_blocks);
      break;
    case DType::Q4_1:
      dequantize_q4_1(src, dst, n_blocks);
      break;
    case DType::Q5_0:
      dequantize_q5_0(src, dst, n_blocks);
      break;
    case DType::Q5_1:
      dequantize_q5_1(src, dst, n_blocks);
      break;
    case DType::Q8_0:
      dequantize_q8_0(src, dst, n_blocks);
      break;
    case DType::Q8_1:
      dequantize_q8_1(src, dst, n_blocks);
      break;
    case DType::Q2_K:
      dequantize_q2_K(src, dst, n_blocks);
      break;
    case DType::Q3_K:
      dequantize_q3_K(src, dst, n_blocks);
      break;
    case DType::Q4_K:
      dequantize_q4_K(src, dst, n_blocks);
      break;
    case DType::Q5_K:
      dequantize_q5_K(src, dst, n_blocks);
      break;
    case DType::Q6_K:
      dequantize_q6_K(src, dst, n_blocks);
      break;
    case DType::Q8_K:
      dequantize_q8_K(src, dst, n_blocks);
      break;
    case DType::Count:
      break;
  }
}

}  // namespace sotto
