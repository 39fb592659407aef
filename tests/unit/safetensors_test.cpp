// safetensors reader: the real Silero VAD file (tensor table and data digests from tools/fixture_digests.py,
// which parses the header with Python's json module), hand-built files of every dtype, and hostile headers.
#include <gtest/gtest.h>

#include <cstring>

#include "io/safetensors.h"
#include "test_support.h"

namespace sotto {
namespace {

using testing::read_fixture;

// Builds a safetensors file: 8-byte length, `header`, then `data`.
std::vector<uint8_t> make_file(const std::string& header, const std::vector<uint8_t>& data) {
  std::vector<uint8_t> out(8);
  uint64_t n = header.size();
  std::memcpy(out.data(), &n, 8);
  out.insert(out.end(), header.begin(), header.end());
  out.insert(out.end(), data.begin(), data.end());
  return out;
}

std::string parse_error(const std::vector<uint8_t>& file) {
  auto r = parse_safetensors(file);
  return r.ok() ? "(parsed)" : r.message();
}

TEST(SafetensorsFixture, SileroVadTensorTable) {
  struct Row {
    const char* name;
    std::vector<int64_t> shape;
    uint64_t offset, bytes;
    const char* sha256;
  };
  // From tools/fixture_digests.py (Python json + hashlib); all F32.
  const Row rows[] = {
      {"stft_conv.weight",
       {258, 1, 256},
       1216,
       264192,
       "3b69ddad309d34245d2960d93be421e5a99360c26e200e7efb309da25b6eecd9"},
      {"conv1.weight",
       {128, 129, 3},
       265408,
       198144,
       "b855bc1ddb85994ce86ec3953ba0151a2f1b8a5b21ea25971f70cb7e5a5df9c9"},
      {"conv1.bias", {128}, 463552, 512, "c728b2679c0d1ceed03c576a8849843650f7ee138b8e70a16de6567c8e54977f"},
      {"conv2.weight",
       {64, 128, 3},
       464064,
       98304,
       "7494a64d74a6f57b6adef8db36871f112b52104875b21543f852e38a50659a06"},
      {"conv2.bias", {64}, 562368, 256, "0460e9e00088d05913c61fa7adb98602fe7bfdeac7f71123e443cd7693d2b05e"},
      {"conv3.weight",
       {64, 64, 3},
       562624,
       49152,
       "7e8ccc2c39d7ce346a0e5b9d429f8cadfcbacd42a52b44b68e9f929ef6d464bd"},
      {"conv3.bias", {64}, 611776, 256, "ff68d83093ef2a679ea0a1bd289dabf16a4784b056ec356017ccd91d122d2b53"},
      {"conv4.weight",
       {128, 64, 3},
       612032,
       98304,
       "eb357e6bdba554f19538d10f5085241acd99c7731778a8738c92fa7c27190d55"},
      {"conv4.bias", {128}, 710336, 512, "3b43683ce256a5e0ed3819ddda31a23c0310024430a5ab9ffb6ea215018007fb"},
      {"lstm_cell.weight_ih",
       {512, 128},
       710848,
       262144,
       "a26beff59f75349224ef0a6bbc091091f684bff01b5db8a43eb12e5e2884d5bd"},
      {"lstm_cell.weight_hh",
       {512, 128},
       972992,
       262144,
       "71873f3762cb371c01a0b55bbea525b3c7c1c978f70d2cc82500b049c7d17c4e"},
      {"lstm_cell.bias_ih",
       {512},
       1235136,
       2048,
       "133c02c56e6d14e96e98efb94678f65c33e7d7258e79ddf896613bd7fbdbb1e0"},
      {"lstm_cell.bias_hh",
       {512},
       1237184,
       2048,
       "be332961b28ba402294387ab1aa6fe76ff57a36a68f6b62b2c43e9c6d7b8b8d8"},
      {"final_conv.weight",
       {1, 128, 1},
       1239232,
       512,
       "18b753c930e2bd69d83f4b6eb14b619f7cfa5bb6c23f31ad9eb4122351af0470"},
      {"final_conv.bias",
       {1},
       1239744,
       4,
       "a12ffa447c86cc469d9f512471f18a9f2fa47b2e526c55a7633b55794d237478"},
  };
  auto bytes = read_fixture("vad/silero_vad_16k.safetensors");
  auto f = parse_safetensors(bytes);
  ASSERT_TRUE(f.ok()) << f.message();
  EXPECT_EQ(f->header_bytes, 1208u);
  EXPECT_EQ(f->data_offset, 1216u);
  EXPECT_TRUE(f->metadata.empty());
  ASSERT_EQ(f->tensors.size(), std::size(rows));
  for (size_t i = 0; i < std::size(rows); ++i) {
    const TensorInfo& t = f->tensors[i];
    EXPECT_EQ(t.name, rows[i].name);
    EXPECT_EQ(t.dtype, DType::F32);
    EXPECT_EQ(t.shape, rows[i].shape) << t.name;
    EXPECT_EQ(t.offset, rows[i].offset) << t.name;
    EXPECT_EQ(t.bytes, rows[i].bytes) << t.name;
    EXPECT_EQ(t.data, bytes.data() + t.offset);
    EXPECT_EQ(testing::sha256_hex(t.span()), rows[i].sha256) << t.name;
  }
}

TEST(Safetensors, EveryDtypeAndMetadata) {
  std::mt19937_64 rng(std::random_device{}());
  struct D {
    const char* name;
    DType dtype;
    uint64_t elem_bytes;  // from the safetensors spec
  };
  const D dtypes[] = {{"F64", DType::F64, 8},   {"F32", DType::F32, 4}, {"F16", DType::F16, 2},
                      {"BF16", DType::BF16, 2}, {"I64", DType::I64, 8}, {"I32", DType::I32, 4},
                      {"I16", DType::I16, 2},   {"I8", DType::I8, 1},   {"U8", DType::U8, 1},
                      {"BOOL", DType::Bool, 1}};
  std::string header = "{\"__metadata__\":{\"format\":\"pt\",\"note\":\"caf\\u00e9\"}";
  std::vector<uint8_t> data;
  std::vector<std::pair<uint64_t, uint64_t>> ranges;
  for (const auto& d : dtypes) {
    uint64_t rows = 1 + rng() % 5, cols = 1 + rng() % 7;
    uint64_t size = rows * cols * d.elem_bytes;
    ranges.emplace_back(data.size(), size);
    header += std::string(",\"t_") + d.name + "\":{\"dtype\":\"" + d.name + "\",\"shape\":[" +
              std::to_string(rows) + "," + std::to_string(cols) + "],\"data_offsets\":[" +
              std::to_string(data.size()) + "," + std::to_string(data.size() + size) + "]}";
    auto chunk = testing::random_bytes(rng, size);
    data.insert(data.end(), chunk.begin(), chunk.end());
  }
  header += ",\"scalar\":{\"dtype\":\"F32\",\"shape\":[],\"data_offsets\":[" + std::to_string(data.size()) +
            "," + std::to_string(data.size() + 4) +
            "]}}   ";  // trailing spaces: writers pad the header to 8 bytes
  auto tail = testing::random_bytes(rng, 4);
  data.insert(data.end(), tail.begin(), tail.end());
  auto file = make_file(header, data);
  auto f = parse_safetensors(file);
  ASSERT_TRUE(f.ok()) << f.message();
  ASSERT_EQ(f->metadata.size(), 2u);
  EXPECT_EQ(f->metadata[1].second, "caf\xC3\xA9");
  ASSERT_EQ(f->tensors.size(), std::size(dtypes) + 1);
  for (size_t i = 0; i < std::size(dtypes); ++i) {
    const TensorInfo& t = f->tensors[i];
    EXPECT_EQ(t.dtype, dtypes[i].dtype);
    EXPECT_EQ(t.offset, 8 + header.size() + ranges[i].first);
    EXPECT_EQ(t.bytes, ranges[i].second);
    EXPECT_EQ(std::memcmp(t.data, data.data() + ranges[i].first, t.bytes), 0);
  }
  EXPECT_TRUE(f->tensors.back().shape.empty());
  EXPECT_EQ(f->tensors.back().bytes, 4u);
}

TEST(SafetensorsHostile, ExactMessages) {
  std::vector<uint8_t> data(16, 0x5a);
  EXPECT_EQ(parse_error(make_file(R"({"x":{"dtype":"F8_E4M3","shape":[16],"data_offsets":[0,16]}})", data)),
            "safetensors: tensor 'x' has unsupported dtype 'F8_E4M3'");
  EXPECT_EQ(parse_error(make_file(R"({"x":{"dtype":"F32","shape":[4],"data_offsets":[16,0]}})", data)),
            "safetensors: tensor 'x' data_offsets [16, 0] end before they begin");
  std::string past_end = R"({"x":{"dtype":"F32","shape":[8],"data_offsets":[0,32]}})";  // 55 bytes
  EXPECT_EQ(parse_error(make_file(past_end, data)),
            "safetensors: tensor 'x' ends at byte 95, past the end of the file (79 bytes)");  // 8 + 55 + 32,
                                                                                              // 8 + 55 + 16
  EXPECT_EQ(parse_error(make_file(R"({"x":{"dtype":"F32","shape":[3],"data_offsets":[0,16]}})", data)),
            "safetensors: tensor 'x' has 16 bytes of data but its F32 shape needs 12");
  std::vector<uint8_t> huge(16, 0);
  uint64_t big = uint64_t{1} << 62;
  std::memcpy(huge.data(), &big, 8);
  EXPECT_EQ(parse_error(huge),
            "safetensors: header length 4611686018427387904 is over the 100000000-byte limit");
  uint64_t past = 9;
  std::memcpy(huge.data(), &past, 8);
  EXPECT_EQ(parse_error(huge), "safetensors: header length 9 runs past the end of the file (16 bytes)");
}

TEST(SafetensorsHostile, BadHeadersFail) {
  std::vector<uint8_t> data(16, 0x5a);
  const char* headers[] = {
      "",
      "[]",
      "{",
      "{\"x\":1}",
      R"({"x":{"shape":[4],"data_offsets":[0,16]}})",
      R"({"x":{"dtype":"F32","data_offsets":[0,16]}})",
      R"({"x":{"dtype":"F32","shape":[4]}})",
      R"({"x":{"dtype":"F32","shape":[-4],"data_offsets":[0,16]}})",
      R"({"x":{"dtype":"F32","shape":[4.0],"data_offsets":[0,16]}})",
      R"({"x":{"dtype":"F32","shape":[4],"data_offsets":[0]}})",
      R"({"x":{"dtype":"F32","shape":[4],"data_offsets":[0,16,32]}})",
      R"({"x":{"dtype":"F32","shape":[4],"data_offsets":[0,18446744073709551616]}})",
      R"({"x":{"dtype":"F32","shape":[4294967296,4294967296,16],"data_offsets":[0,16]}})",
      R"({"x":{"dtype":"F32","shape":[4611686018427387904],"data_offsets":[0,16]}})",
      R"({"x":{"dtype":"F32","shape":[4],"data_offsets":[0,16]},"x":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}})",
      R"({"__metadata__":{"a":1}})",
      R"({"__metadata__":[]})",
      R"({"x":{"dtype":"F32","shape":[4],"data_offsets":[0,16]},})",
      R"({"x":{"dtype":"F32","shape":[[[[[[[[[[4]]]]]]]]]],"data_offsets":[0,16]}})",
  };
  for (const char* h : headers) {
    std::string msg = parse_error(make_file(h, data));
    EXPECT_EQ(msg.rfind("safetensors: ", 0), 0u) << h << " -> " << msg;
  }
  // Deep nesting must fail at the depth limit, not overflow the stack.
  std::string bomb = "{\"x\":" + std::string(1'000'000, '[');
  EXPECT_NE(parse_error(make_file(bomb, data)).find("nesting deeper than"), std::string::npos);
}

TEST(SafetensorsHostile, TruncatedAndFlippedFixtureFails) {
  auto bytes = read_fixture("vad/silero_vad_16k.safetensors");
  ASSERT_FALSE(bytes.empty());
  int tried = 0;
  for (size_t n : testing::truncation_points(bytes.size())) {
    std::vector<uint8_t> prefix(bytes.begin(), bytes.begin() + static_cast<ptrdiff_t>(n));
    EXPECT_FALSE(parse_safetensors(prefix).ok()) << n;
    ++tried;
  }
  EXPECT_GT(tried, 4000);
  std::mt19937_64 rng(std::random_device{}());
  for (int round = 0; round < 2000; ++round) {
    std::vector<uint8_t> copy(bytes.begin(), bytes.begin() + 1216);  // header only, data section dropped
    copy.resize(1216 + 2048);
    copy[rng() % 1216] ^= static_cast<uint8_t>(1 + rng() % 255);
    auto r = parse_safetensors(copy);
    if (!r.ok()) continue;
    for (const auto& t : r->tensors) EXPECT_LE(t.offset + t.bytes, copy.size());
  }
}

}  // namespace
}  // namespace sotto
