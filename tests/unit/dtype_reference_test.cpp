// sotto's dequantizers and quantizers against independent implementations:
//  - gguf-py's numpy (de)quantizers, through tests/data/dequant_reference.bin (tools/dequant_reference.py);
//  - llama.cpp itself, through the stories260K fixtures: llama-quantize turned the f32 file into the q8_0 and
//    q4_0 files (fixtures/SOURCES.md), so decoding their tensors must land near the f32 originals, and
//    re-quantizing the originals must give back the very bytes llama.cpp wrote. Tensor offsets come from
//    gguf-py's GGUFReader (tests/data/stories260K_tensors.txt, tools/gguf_tensor_table.py), not from sotto.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/half.h"
#include "core/quantize_ref.h"

namespace sotto {
namespace {

std::vector<uint8_t> read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

uint32_t read_u32(const std::vector<uint8_t>& bytes, size_t& pos) {
  uint32_t v = 0;
  std::memcpy(&v, bytes.data() + pos, 4);
  pos += 4;
  return v;
}

struct ReferenceRecord {
  bool quantize;  // false: bytes -> values; true: values -> bytes
  DType type;
  std::vector<uint8_t> bytes;
  std::vector<float> values;
};

std::vector<ReferenceRecord> load_reference() {
  const std::vector<uint8_t> file =
      read_file(std::string(SOTTO_SOURCE_DIR) + "/tests/data/dequant_reference.bin");
  std::vector<ReferenceRecord> records;
  if (file.size() < 12 || std::memcmp(file.data(), "SOTTODQ1", 8) != 0) return records;
  size_t pos = 8;
  const uint32_t n_records = read_u32(file, pos);
  for (uint32_t r = 0; r < n_records && pos + 16 <= file.size(); ++r) {
    ReferenceRecord rec;
    rec.quantize = read_u32(file, pos) == 1;
    Result<DType> type = dtype_from_ggml(read_u32(file, pos));
    const uint32_t n_values = read_u32(file, pos);
    const uint32_t n_bytes = read_u32(file, pos);
    if (!type.ok() || pos + n_bytes + 4ull * n_values > file.size()) break;
    rec.type = *type;
    rec.bytes.assign(file.begin() + static_cast<ptrdiff_t>(pos),
                     file.begin() + static_cast<ptrdiff_t>(pos + n_bytes));
    pos += n_bytes;
    rec.values.resize(n_values);
    std::memcpy(rec.values.data(), file.data() + pos, 4ull * n_values);
    pos += 4ull * n_values;
    records.push_back(std::move(rec));
  }
  EXPECT_EQ(records.size(), n_records);
  return records;
}

TEST(DequantizeRef, BitExactAgainstGgufPy) {
  const std::vector<ReferenceRecord> records = load_reference();
  ASSERT_FALSE(records.empty()) << "tests/data/dequant_reference.bin missing: run tools/dequant_reference.py";
  int types_checked = 0;
  for (const ReferenceRecord& rec : records) {
    if (rec.quantize) continue;
    SCOPED_TRACE(std::string(dtype_name(rec.type)));
    ASSERT_EQ(dtype_bytes(rec.type, rec.values.size()), rec.bytes.size());
    std::vector<float> got(rec.values.size());
    dequantize_row_ref(rec.type, rec.bytes.data(), got.data(), static_cast<int64_t>(got.size()));
    int mismatches = 0;
    for (size_t i = 0; i < got.size(); ++i) {
      // Compared as bits: the same NaN payloads, the same signed zeros.
      if (std::bit_cast<uint32_t>(got[i]) != std::bit_cast<uint32_t>(rec.values[i]) && ++mismatches <= 5)
        ADD_FAILURE() << "element " << i << ": sotto " << got[i] << ", gguf-py " << rec.values[i];
    }
    EXPECT_EQ(mismatches, 0);
    ++types_checked;
  }
  // f16 bf16 q4_0 q4_1 q5_0 q5_1 q8_0 q2_K q3_K q4_K q5_K q6_K (gguf-py has no q8_1/q8_K dequantizer).
  EXPECT_EQ(types_checked, 12);
}

TEST(QuantizeRef, ByteExactAgainstGgufPy) {
  const std::vector<ReferenceRecord> records = load_reference();
  ASSERT_FALSE(records.empty());
  int types_checked = 0;
  for (const ReferenceRecord& rec : records) {
    if (!rec.quantize) continue;
    SCOPED_TRACE(std::string(dtype_name(rec.type)));
    ASSERT_TRUE(dtype_can_quantize(rec.type));
    std::vector<uint8_t> got(rec.bytes.size(), 0xEE);
    quantize_row_ref(rec.type, rec.values.data(), got.data(), static_cast<int64_t>(rec.values.size()));
    const uint32_t block_bytes = dtype_info(rec.type).block_bytes;
    for (size_t i = 0; i < got.size(); ++i)
      ASSERT_EQ(got[i], rec.bytes[i]) << "byte " << i << " (block " << i / block_bytes << ")";
    ++types_checked;
  }
  EXPECT_EQ(types_checked, 6);  // q4_0 q4_1 q5_0 q5_1 q8_0 bf16
}

// ---------------------------------------------------------------- llama.cpp's quantized fixtures

struct FixtureTensor {
  DType type;
  uint64_t offset;
  uint64_t n_elems;
};

// file name -> tensor name -> where it lies.
std::map<std::string, std::map<std::string, FixtureTensor>> load_tensor_table() {
  std::ifstream in(std::string(SOTTO_SOURCE_DIR) + "/tests/data/stories260K_tensors.txt");
  std::map<std::string, std::map<std::string, FixtureTensor>> table;
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    std::string file, name;
    uint32_t ggml_type = 0;
    FixtureTensor t{};
    if (!(fields >> file >> name >> ggml_type >> t.offset >> t.n_elems)) continue;
    Result<DType> type = dtype_from_ggml(ggml_type);
    if (!type.ok()) continue;
    t.type = *type;
    table[file][name] = t;
  }
  return table;
}

struct FixtureComparison {
  std::map<DType, int> tensors_by_type;
};

// void, so gtest's ASSERT_* can return from it; the counts go to `result`.
void compare_with_f32(const std::string& quantized_name, FixtureComparison& result) {
  const auto table = load_tensor_table();
  const std::string dir = std::string(SOTTO_FIXTURES_DIR) + "/llm/";
  const std::vector<uint8_t> f32_file = read_file(dir + "stories260K.gguf");
  const std::vector<uint8_t> quantized_file = read_file(dir + quantized_name);
  ASSERT_TRUE(table.count("stories260K.gguf") && table.count(quantized_name))
      << "tests/data/stories260K_tensors.txt lacks the fixtures: run tools/gguf_tensor_table.py";
  for (const auto& [name, t] : table.at(quantized_name)) {
    SCOPED_TRACE(name + " (" + std::string(dtype_name(t.type)) + ")");
    const FixtureTensor& original = table.at("stories260K.gguf").at(name);
    const uint64_t n_bytes = *dtype_bytes(t.type, t.n_elems);
    ASSERT_EQ(original.type, DType::F32);
    ASSERT_EQ(original.n_elems, t.n_elems);
    ASSERT_LE(t.offset + n_bytes, quantized_file.size());
    ASSERT_LE(original.offset + 4 * t.n_elems, f32_file.size());
    std::vector<float> want(t.n_elems);
    std::memcpy(want.data(), f32_file.data() + original.offset, 4 * t.n_elems);
    std::vector<float> got(t.n_elems);
    const uint8_t* bytes = quantized_file.data() + t.offset;
    dequantize_row_ref(t.type, bytes, got.data(), static_cast<int64_t>(t.n_elems));
    ++result.tensors_by_type[t.type];

    if (t.type == DType::F32 || t.type == DType::F16) {
      // llama.cpp copies f32 and rounds f16 to nearest even: exact after the same rounding here.
      for (uint64_t i = 0; i < t.n_elems; ++i) {
        const float rounded = t.type == DType::F32 ? want[i] : f16_to_f32(f32_to_f16(want[i]));
        ASSERT_EQ(got[i], rounded) << "element " << i;
      }
      continue;
    }
    // Quantized: each block's error is bounded by its step d (read from the block's first two bytes). q8_0
    // rounds to nearest, so |error| <= d/2 plus the f16 rounding of d over up to 127 steps (127 * 2^-11 d).
    // q4_0 maps the largest magnitude to -8 steps and clamps values beyond +7.5 steps to +7: those may be off
    // by up to a whole step; the rest are within d/2 (plus 8 * 2^-11 d for the f16 rounding of d).
    const uint32_t block_bytes = dtype_info(t.type).block_bytes;
    const bool is_q8_0 = t.type == DType::Q8_0;
    for (uint64_t b = 0; b < t.n_elems / 32; ++b) {
      uint16_t d_bits;
      std::memcpy(&d_bits, bytes + b * block_bytes, 2);
      const float signed_step = f16_to_f32(d_bits);
      const float step = std::fabs(signed_step);
      const float half_step_bound = step * (0.5f + (is_q8_0 ? 127.0f : 8.0f) / 2048.0f) * 1.0001f;
      for (uint64_t i = 32 * b; i < 32 * b + 32; ++i) {
        const float err = std::fabs(got[i] - want[i]);
        if (err <= half_step_bound) continue;
        ASSERT_FALSE(is_q8_0) << "element " << i << ": " << got[i] << " vs f32 " << want[i];
        ASSERT_LE(err, step * (1.0f + 8.0f / 2048.0f) * 1.0001f) << "element " << i;
        ASSERT_GE(want[i] / signed_step, 7.5f - 0.01f) << "element " << i << " is off by more than d/2";
      }
    }

    // llama-quantize ran ggml's reference quantizer (no importance matrix): re-quantizing gives its bytes.
    std::vector<uint8_t> requantized(n_bytes);
    quantize_row_ref(t.type, want.data(), requantized.data(), static_cast<int64_t>(t.n_elems));
    EXPECT_EQ(std::memcmp(requantized.data(), bytes, n_bytes), 0)
        << "re-quantized bytes differ from llama.cpp's";
  }
}

TEST(DequantizeRef, Q8_0FixtureMatchesF32Original) {
  FixtureComparison seen;
  ASSERT_NO_FATAL_FAILURE(compare_with_f32("stories260K-q8_0.gguf", seen));
  // 32 q8_0, 11 f32 (norms), 5 f16 (ffn_down: 172 columns is not a multiple of 32), per quantize_q8_0.log.
  EXPECT_EQ(seen.tensors_by_type.at(DType::Q8_0), 32);
  EXPECT_EQ(seen.tensors_by_type.at(DType::F32), 11);
  EXPECT_EQ(seen.tensors_by_type.at(DType::F16), 5);
}

TEST(DequantizeRef, Q4_0FixtureMatchesF32Original) {
  FixtureComparison seen;
  ASSERT_NO_FATAL_FAILURE(compare_with_f32("stories260K-q4_0.gguf", seen));
  // 31 q4_0, output.weight q8_0 (llama.cpp's fallback from q6_K), 11 f32, 5 f16, per quantize_q4_0.log.
  EXPECT_EQ(seen.tensors_by_type.at(DType::Q4_0), 31);
  EXPECT_EQ(seen.tensors_by_type.at(DType::Q8_0), 1);
  EXPECT_EQ(seen.tensors_by_type.at(DType::F32), 11);
  EXPECT_EQ(seen.tensors_by_type.at(DType::F16), 5);
}

}  // namespace
}  // namespace sotto
