// GGUF reader and writer: the real llama.cpp fixtures (names, shapes, types, data digests), typed accessors,
// a write → parse round trip of every value type, and hostile files that must fail with a clear error.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <map>

#include "io/gguf.h"
#include "io/gguf_writer.h"
#include "test_support.h"

namespace sotto {
namespace {

using testing::read_fixture;
using testing::sha256_hex;

struct ExpectedTensor {
  const char* name;
  DType dtype;
  std::vector<int64_t> ne;  // GGUF order
  uint64_t offset;          // absolute
  uint64_t bytes;
  const char* sha256;
};

// Rows printed by tools/fixture_digests.py (an independent Python GGUF parser + hashlib).
const std::map<std::string, std::vector<ExpectedTensor>> kExpected = {
    {"llm/stories260K.gguf",
     {{"token_embd.weight",
       DType::F32,
       {64, 512},
       14176,
       131072,
       "452158377d2f8703b5b38935f894b628d3c7e2ac26bc167bfbfc68655dfe2c8a"},
      {"output_norm.weight",
       DType::F32,
       {64},
       145248,
       256,
       "0e94e5b6ed76295de67218f03110c2ffaba21db46cc8a5ccd716bd8ebaf024f7"},
      {"blk.0.ffn_down.weight",
       DType::F32,
       {172, 64},
       370016,
       44032,
       "0db1736259bbf508142cf7161d012a3c01d706b71b3116ff2771c2e64a56c945"},
      {"blk.4.attn_k.weight",
       DType::F32,
       {64, 32},
       1020000,
       8192,
       "ae424abd55c5ac4dfac2b39bdb941c8e7d5d5b221e4ce89fd54c4080b1492ab4"}}},
    {"llm/stories260K-q8_0.gguf",
     {{"output.weight",
       DType::Q8_0,
       {64, 512},
       14240,
       34816,
       "ed44655dda590f9c9467ae6b5d53dcaa4725affb02863a22d48be6953d103f50"},
      {"blk.0.ffn_down.weight",
       DType::F16,
       {172, 64},
       97440,
       22016,
       "5994405942b5b7a8c51f3a3deb001e358c0dd296fec551cb745dece0d08a96f5"},
      {"blk.4.attn_k.weight",
       DType::Q8_0,
       {64, 32},
       320160,
       2176,
       "e19ad1c82d90d1480b064e8999436e5e715813d189598a252d722a420870010f"}}},
    {"llm/stories260K-q4_0.gguf",
     {{"output.weight",
       DType::Q8_0,
       {64, 512},
       14240,
       34816,
       "ed44655dda590f9c9467ae6b5d53dcaa4725affb02863a22d48be6953d103f50"},
      {"token_embd.weight",
       DType::Q4_0,
       {64, 512},
       49312,
       18432,
       "87ca00be177b19594784a5921876ff2c94be3188d47f9a85fbe989da13857eae"},
      {"blk.0.ffn_down.weight",
       DType::F16,
       {172, 64},
       74912,
       22016,
       "5994405942b5b7a8c51f3a3deb001e358c0dd296fec551cb745dece0d08a96f5"},
      {"blk.4.attn_k.weight",
       DType::Q4_0,
       {64, 32},
       235168,
       1152,
       "144055c4cab8b2aa79aea09163bdc20eb0787fae03647416a3f3b38311bcbad1"}}},
};

const char* const kGgufFixtures[] = {"llm/stories260K.gguf",
                                     "llm/stories260K-q8_0.gguf",
                                     "llm/stories260K-q4_0.gguf",
                                     "tokenizer/ggml-vocab-qwen2.gguf",
                                     "tokenizer/ggml-vocab-llama-spm.gguf",
                                     "tokenizer/ggml-vocab-llama-bpe.gguf"};

std::map<DType, int> type_counts(const GgufFile& f) {
  std::map<DType, int> counts;
  for (const auto& t : f.tensors) counts[t.dtype]++;
  return counts;
}

TEST(GgufFixture, Stories260KTensorTableAndData) {
  for (const auto& [rel, rows] : kExpected) {
    SCOPED_TRACE(rel);
    auto bytes = read_fixture(rel);
    ASSERT_FALSE(bytes.empty());
    auto parsed = parse_gguf(bytes);
    ASSERT_TRUE(parsed.ok()) << parsed.message();
    EXPECT_EQ(parsed->version, 3u);
    EXPECT_EQ(parsed->tensors.size(), 48u);  // SOURCES.md
    for (const auto& row : rows) {
      const GgufTensor* t = parsed->find_tensor(row.name);
      ASSERT_NE(t, nullptr) << row.name;
      EXPECT_EQ(t->dtype, row.dtype) << row.name;
      EXPECT_EQ(std::vector<int64_t>(t->ne_dims().begin(), t->ne_dims().end()), row.ne) << row.name;
      std::vector<int64_t> outer_first(row.ne.rbegin(), row.ne.rend());
      EXPECT_EQ(t->shape(), outer_first) << row.name;
      EXPECT_EQ(t->info().shape, outer_first) << row.name;
      EXPECT_EQ(t->offset, row.offset) << row.name;
      EXPECT_EQ(t->bytes, row.bytes) << row.name;
      EXPECT_EQ(t->data, bytes.data() + row.offset) << row.name;  // zero-copy: points into the file
      EXPECT_EQ(sha256_hex({t->data, static_cast<size_t>(t->bytes)}), row.sha256) << row.name;
    }
  }
}

TEST(GgufFixture, Stories260KHyperparameters) {
  // Values from SOURCES.md: dim 64, 5 layers, 8 heads, 4 KV heads, FFN 172, vocab 512, ctx 2048, rope dim 8.
  auto bytes = read_fixture("llm/stories260K.gguf");
  auto f = parse_gguf(bytes);
  ASSERT_TRUE(f.ok()) << f.message();
  EXPECT_EQ(*f->get_string("general.architecture"), "llama");
  EXPECT_EQ(*f->get_u32("llama.embedding_length"), 64u);
  EXPECT_EQ(*f->get_u32("llama.block_count"), 5u);
  EXPECT_EQ(*f->get_u32("llama.attention.head_count"), 8u);
  EXPECT_EQ(*f->get_u32("llama.attention.head_count_kv"), 4u);
  EXPECT_EQ(*f->get_u32("llama.feed_forward_length"), 172u);
  EXPECT_EQ(*f->get_u32("llama.context_length"), 2048u);
  EXPECT_EQ(*f->get_u32("llama.rope.dimension_count"), 8u);
  EXPECT_EQ(f->get_string_array("tokenizer.ggml.tokens")->size(), 512u);
  EXPECT_EQ(f->get_float_array("tokenizer.ggml.scores")->size(), 512u);
  EXPECT_EQ(f->get_int_array("tokenizer.ggml.token_type")->size(), 512u);
  EXPECT_FALSE(f->find("general.file_type"));  // SOURCES.md: the F32 file has none
  EXPECT_EQ(type_counts(*f), (std::map<DType, int>{{DType::F32, 48}}));
}

TEST(GgufFixture, QuantizedTypeCounts) {
  // SOURCES.md: Q8_0 file = 32 Q8_0 + 5 F16 + 11 F32, file_type 7; Q4_0 = 31 Q4_0 + 1 Q8_0 + 5 F16 + 11 F32,
  // file_type 2.
  auto q8 = read_fixture("llm/stories260K-q8_0.gguf");
  auto f8 = parse_gguf(q8);
  ASSERT_TRUE(f8.ok()) << f8.message();
  EXPECT_EQ(type_counts(*f8), (std::map<DType, int>{{DType::Q8_0, 32}, {DType::F16, 5}, {DType::F32, 11}}));
  EXPECT_EQ(*f8->get_u32("general.file_type"), 7u);
  auto q4 = read_fixture("llm/stories260K-q4_0.gguf");
  auto f4 = parse_gguf(q4);
  ASSERT_TRUE(f4.ok()) << f4.message();
  EXPECT_EQ(type_counts(*f4),
            (std::map<DType, int>{{DType::Q4_0, 31}, {DType::Q8_0, 1}, {DType::F16, 5}, {DType::F32, 11}}));
  EXPECT_EQ(*f4->get_u32("general.file_type"), 2u);
  EXPECT_EQ(f4->find_tensor("output.weight")->dtype, DType::Q8_0);
}

TEST(GgufFixture, VocabularyFiles) {
  // Token counts and names from SOURCES.md; token[1] from tools/fixture_digests.py.
  struct Vocab {
    const char* rel;
    size_t n_tokens;
    const char* name;
    const char* model;
    const char* token1;
  };
  const Vocab vocabs[] = {{"tokenizer/ggml-vocab-qwen2.gguf", 151936, "qwen2", "gpt2", "\""},
                          {"tokenizer/ggml-vocab-llama-spm.gguf", 32000, "llama-spm", "llama", "<s>"},
                          {"tokenizer/ggml-vocab-llama-bpe.gguf", 128256, "llama-bpe", "gpt2", "\""}};
  for (const auto& v : vocabs) {
    SCOPED_TRACE(v.rel);
    auto bytes = read_fixture(v.rel);
    auto f = parse_gguf(bytes);
    ASSERT_TRUE(f.ok()) << f.message();
    EXPECT_TRUE(f->tensors.empty());
    auto tokens = f->get_string_array("tokenizer.ggml.tokens");
    ASSERT_TRUE(tokens.ok()) << tokens.message();
    EXPECT_EQ(tokens->size(), v.n_tokens);
    EXPECT_EQ((*tokens)[1], v.token1);
    EXPECT_EQ(*f->get_string("general.name"), v.name);
    EXPECT_EQ(*f->get_string("tokenizer.ggml.model"), v.model);
    // Zero-copy: the views point into the file's bytes.
    EXPECT_GE(reinterpret_cast<const uint8_t*>((*tokens)[0].data()), bytes.data());
    EXPECT_LT(reinterpret_cast<const uint8_t*>((*tokens)[0].data()), bytes.data() + bytes.size());
  }
  auto qwen = read_fixture("tokenizer/ggml-vocab-qwen2.gguf");
  auto f = parse_gguf(qwen);
  ASSERT_TRUE(f.ok());
  auto tokens = *f->get_string_array("tokenizer.ggml.tokens");
  EXPECT_EQ(tokens[151643], "<|endoftext|>");  // SOURCES.md
  EXPECT_EQ(tokens[151644], "<|im_start|>");
  EXPECT_EQ(f->get_string_array("tokenizer.ggml.merges")->size(), 151387u);
}

TEST(GgufAccessors, TypeMismatchMessages) {
  auto bytes = read_fixture("llm/stories260K.gguf");
  auto f = parse_gguf(bytes);
  ASSERT_TRUE(f.ok());
  EXPECT_EQ(f->get_u32("general.name").message(), "gguf: key 'general.name' is a string, expected u32");
  EXPECT_EQ(f->get_string("llama.context_length").message(),
            "gguf: key 'llama.context_length' is a u32, expected string");
  EXPECT_EQ(f->get_u32("tokenizer.ggml.tokens").message(),
            "gguf: key 'tokenizer.ggml.tokens' is an array[string], expected u32");
  EXPECT_EQ(f->get_string_array("tokenizer.ggml.scores").message(),
            "gguf: key 'tokenizer.ggml.scores' is an array[f32], expected array[string]");
  EXPECT_EQ(f->get_f32("no.such.key").message(), "gguf: key 'no.such.key' is missing");
  EXPECT_FALSE(f->get_int_array("tokenizer.ggml.scores").ok());
  EXPECT_NEAR(*f->get_f32("llama.attention.layer_norm_rms_epsilon"), 1e-5f, 1e-12f);
  EXPECT_FALSE(f->get_i32("tokenizer.ggml.padding_token_id").ok());  // 4294967295 does not fit
}

// ---------------------------------------------------------------- writer round trip

TEST(GgufWriter, RoundTripsEveryValueTypeAndTensors) {
  std::mt19937_64 rng(std::random_device{}());
  for (uint32_t alignment : {32u, 64u, 8u}) {
    SCOPED_TRACE(alignment);
    GgufWriter w(alignment);
    auto u8 = static_cast<uint8_t>(rng()), i8raw = static_cast<uint8_t>(rng());
    auto i8 = static_cast<int8_t>(i8raw);
    auto u16 = static_cast<uint16_t>(rng());
    auto i16 = static_cast<int16_t>(static_cast<uint16_t>(rng()));
    auto u32 = static_cast<uint32_t>(rng());
    auto i32 = static_cast<int32_t>(static_cast<uint32_t>(rng()));
    float f32 = std::uniform_real_distribution<float>(-1e6f, 1e6f)(rng);
    uint64_t u64 = rng();
    auto i64 = static_cast<int64_t>(rng());
    double f64 = std::uniform_real_distribution<double>(-1e300, 1e300)(rng);
    std::string str = "random " + std::to_string(rng()) + " \xE2\x96\x81 text";
    std::vector<std::string> strings = {"", "a", "\xE2\x96\x81hello", std::string(1000, 'x'),
                                        std::to_string(rng())};
    std::vector<int32_t> ints(37);
    for (auto& v : ints) v = static_cast<int32_t>(static_cast<uint32_t>(rng()));
    std::vector<double> doubles(5);
    for (auto& v : doubles) v = std::uniform_real_distribution<double>(-1, 1)(rng);
    w.add_u8("t.u8", u8);
    w.add_i8("t.i8", i8);
    w.add_u16("t.u16", u16);
    w.add_i16("t.i16", i16);
    w.add_u32("t.u32", u32);
    w.add_i32("t.i32", i32);
    w.add_f32("t.f32", f32);
    w.add_bool("t.bool", true);
    w.add_string("t.string", str);
    w.add_string_array("t.strings", strings);
    w.add_array<int32_t>("t.ints", GgufType::I32, ints);
    w.add_array<double>("t.doubles", GgufType::F64, doubles);
    w.add_u64("t.u64", u64);
    w.add_i64("t.i64", i64);
    w.add_f64("t.f64", f64);

    struct Made {
      std::string name;
      DType dtype;
      std::vector<int64_t> ne;
      std::vector<uint8_t> data;
    };
    std::vector<Made> made = {{"a.f32", DType::F32, {7, 3}, {}},
                              {"b.f16", DType::F16, {5}, {}},
                              {"c.q8_0", DType::Q8_0, {64, 2, 3}, {}},
                              {"d.q4_0", DType::Q4_0, {32, 1, 1, 2}, {}}};
    for (auto& m : made) {
      uint64_t n = 1;
      for (auto d : m.ne) n *= static_cast<uint64_t>(d);
      m.data = testing::random_bytes(rng, static_cast<size_t>(*dtype_bytes(m.dtype, n)));
      ASSERT_TRUE(w.add_tensor(m.name, m.dtype, m.ne, m.data).ok());
    }
    EXPECT_FALSE(w.add_tensor("bad", DType::Q8_0, std::vector<int64_t>{16}, std::vector<uint8_t>(17)).ok());
    EXPECT_FALSE(w.add_tensor("bad", DType::U16, std::vector<int64_t>{2}, std::vector<uint8_t>(4)).ok());
    std::vector<uint8_t> file = w.finish();

    auto f = parse_gguf(file);
    ASSERT_TRUE(f.ok()) << f.message();
    EXPECT_EQ(f->version, 3u);
    EXPECT_EQ(f->alignment, alignment);
    EXPECT_EQ(f->find("t.u8")->value.as_u64(), u8);
    EXPECT_EQ(f->find("t.i8")->value.as_i64(), i8);
    EXPECT_EQ(f->find("t.u16")->value.as_u64(), u16);
    EXPECT_EQ(f->find("t.i16")->value.as_i64(), i16);
    EXPECT_EQ(*f->get_u32("t.u32"), u32);
    EXPECT_EQ(f->find("t.i32")->value.as_i64(), i32);
    EXPECT_EQ(*f->get_f32("t.f32"), f32);
    EXPECT_EQ(*f->get_bool("t.bool"), true);
    EXPECT_EQ(*f->get_string("t.string"), str);
    auto got_strings = *f->get_string_array("t.strings");
    ASSERT_EQ(got_strings.size(), strings.size());
    for (size_t i = 0; i < strings.size(); ++i) EXPECT_EQ(got_strings[i], strings[i]);
    auto got_ints = *f->get_int_array("t.ints");
    ASSERT_EQ(got_ints.size(), ints.size());
    for (size_t i = 0; i < ints.size(); ++i) EXPECT_EQ(got_ints[i], ints[i]);
    const GgufValue& dv = f->find("t.doubles")->value;
    EXPECT_EQ(dv.type_name(), "array[f64]");
    for (size_t i = 0; i < doubles.size(); ++i) EXPECT_EQ(dv.array_f64(i), doubles[i]);
    EXPECT_EQ(f->find("t.u64")->value.as_u64(), u64);
    EXPECT_EQ(f->find("t.i64")->value.as_i64(), i64);
    EXPECT_EQ(f->find("t.f64")->value.as_f64(), f64);
    EXPECT_EQ(f->find("t.f64")->value.type_name(), "f64");

    ASSERT_EQ(f->tensors.size(), made.size());
    for (size_t i = 0; i < made.size(); ++i) {
      const GgufTensor& t = f->tensors[i];
      EXPECT_EQ(t.name, made[i].name);
      EXPECT_EQ(t.dtype, made[i].dtype);
      EXPECT_EQ(std::vector<int64_t>(t.ne_dims().begin(), t.ne_dims().end()), made[i].ne);
      EXPECT_EQ(t.offset % alignment, 0u);
      ASSERT_EQ(t.bytes, made[i].data.size());
      EXPECT_EQ(std::memcmp(t.data, made[i].data.data(), made[i].data.size()), 0) << t.name;
    }
  }
}

// ---------------------------------------------------------------- hostile files

// A small valid file to patch: one u32 key "k", one 2-D F32 tensor "weights" of ne {8, 4}.
struct SmallFile {
  std::vector<uint8_t> bytes;
  size_t name_at = 0;  // first byte of the tensor name
  size_t n_dims_at() const { return name_at + 7; }
  size_t ne0_at() const { return name_at + 11; }
  size_t ne1_at() const { return name_at + 19; }
  size_t type_at() const { return name_at + 27; }
  size_t offset_at() const { return name_at + 31; }

  SmallFile() {
    std::mt19937_64 rng(std::random_device{}());
    GgufWriter w;
    w.add_u32("k", 7);
    std::vector<int64_t> ne = {8, 4};
    EXPECT_TRUE(w.add_tensor("weights", DType::F32, ne, testing::random_bytes(rng, 128)).ok());
    bytes = w.finish();
    std::string_view all(reinterpret_cast<const char*>(bytes.data()), bytes.size());
    name_at = all.find("weights");
  }
  template <class T>
  void set(size_t at, T v) {
    std::memcpy(bytes.data() + at, &v, sizeof v);
  }
  std::string parse_error() const {
    auto r = parse_gguf(bytes);
    return r.ok() ? "(parsed)" : r.message();
  }
};

TEST(GgufHostile, SmallFileParses) {
  SmallFile f;
  auto r = parse_gguf(f.bytes);
  ASSERT_TRUE(r.ok()) << r.message();
  EXPECT_EQ(r->tensors[0].name, "weights");
}

TEST(GgufHostile, ExactMessages) {
  {
    SmallFile f;
    f.set<uint32_t>(4, 1);
    EXPECT_EQ(f.parse_error(), "gguf: version 1 is unsupported (32-bit counts); re-convert the model to v3");
  }
  {
    SmallFile f;
    f.set<uint64_t>(8, uint64_t{1} << 60);  // tensor count
    EXPECT_EQ(
        f.parse_error().rfind("gguf: tensor count 1152921504606846976 is more than the file can hold", 0), 0u)
        << f.parse_error();
  }
  {
    SmallFile f;
    f.set<uint64_t>(16, uint64_t{1} << 60);  // metadata count
    EXPECT_EQ(
        f.parse_error().rfind("gguf: metadata count 1152921504606846976 is more than the file can hold", 0),
        0u);
  }
  {
    SmallFile f;
    f.set<uint32_t>(f.type_at(), 99);
    EXPECT_EQ(f.parse_error(), "gguf: tensor 'weights': ggml type 99 is unknown");  // wording from dtype.cpp
  }
  {
    SmallFile f;
    f.set<uint64_t>(f.offset_at(), 4096);
    EXPECT_EQ(f.parse_error(),
              "gguf: tensor 'weights' ends at byte " + std::to_string(f.bytes.size() - 128 + 4096 + 128) +
                  ", past the end of the file (" + std::to_string(f.bytes.size()) + " bytes)");
  }
  {
    SmallFile f;
    f.set<uint64_t>(f.offset_at(), 4);
    EXPECT_EQ(f.parse_error(), "gguf: tensor 'weights' data offset 4 is not a multiple of the alignment 32");
  }
  {
    SmallFile f;
    f.set<uint32_t>(f.n_dims_at(), 5);
    EXPECT_EQ(f.parse_error(), "gguf: tensor 'weights' has 5 dimensions; GGUF allows 1 to 4");
  }
}

TEST(GgufHostile, BadCountsOffsetsAndShapesFail) {
  std::vector<std::pair<const char*, void (*)(SmallFile&)>> cases = {
      {"bad magic", [](SmallFile& f) { f.bytes[0] = 'X'; }},
      {"version 4", [](SmallFile& f) { f.set<uint32_t>(4, 4); }},
      {"key length huge", [](SmallFile& f) { f.set<uint64_t>(24, ~uint64_t{0}); }},
      {"value type unknown", [](SmallFile& f) { f.set<uint32_t>(24 + 8 + 1, 13); }},
      {"name length huge", [](SmallFile& f) { f.set<uint64_t>(f.name_at - 8, uint64_t{1} << 62); }},
      {"n_dims 0", [](SmallFile& f) { f.set<uint32_t>(f.n_dims_at(), 0); }},
      {"negative ne", [](SmallFile& f) { f.set<int64_t>(f.ne0_at(), -8); }},
      {"ne product overflows",
       [](SmallFile& f) {
         f.set<int64_t>(f.ne0_at(), int64_t{1} << 40);
         f.set<int64_t>(f.ne1_at(), int64_t{1} << 40);
       }},
      {"bytes overflow", [](SmallFile& f) { f.set<int64_t>(f.ne0_at(), INT64_MAX / 2); }},
      {"offset near 2^64", [](SmallFile& f) { f.set<uint64_t>(f.offset_at(), ~uint64_t{0} - 31); }},
      {"ne0 not a block multiple", [](SmallFile& f) { f.set<uint32_t>(f.type_at(), 8); }},  // Q8_0, ne0 = 8
      {"u32 key becomes array", [](SmallFile& f) { f.set<uint32_t>(24 + 8 + 1, 9); }},
  };
  for (auto& [what, patch] : cases) {
    SmallFile f;
    patch(f);
    auto r = parse_gguf(f.bytes);
    EXPECT_FALSE(r.ok()) << what;
    if (!r.ok()) {
      EXPECT_EQ(r.message().rfind("gguf: ", 0), 0u) << r.message();
      EXPECT_EQ(r.message().find('\n'), std::string::npos);
    }
  }
}

TEST(GgufHostile, MetadataProblems) {
  auto parse_error = [](const GgufWriter& w) {
    auto r = parse_gguf(w.finish());
    return r.ok() ? std::string("(parsed)") : r.message();
  };
  {
    GgufWriter w;
    w.add_u32("general.alignment", 48);
    EXPECT_EQ(parse_error(w), "gguf: general.alignment = 48 is not a power of two");
  }
  {
    GgufWriter w;
    w.add_u32("general.alignment", 0);
    EXPECT_EQ(parse_error(w), "gguf: general.alignment = 0 is not a power of two");
  }
  {
    GgufWriter w;
    w.add_string("general.alignment", "32");
    EXPECT_EQ(parse_error(w), "gguf: key 'general.alignment' is a string, expected u32");
  }
  {
    GgufWriter w;
    w.add_u32("same", 1);
    w.add_u32("same", 2);
    EXPECT_EQ(parse_error(w), "gguf: duplicate metadata key 'same'");
  }
  {
    GgufWriter w;
    std::vector<uint8_t> nested = {static_cast<uint8_t>(GgufType::U8), 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 5};
    w.add_array("nested", GgufType::Array, 1, nested);
    EXPECT_EQ(parse_error(w), "gguf: key 'nested' is an array of arrays, which is not supported");
  }
  {
    GgufWriter w;
    std::vector<uint8_t> none;
    w.add_array("strings", GgufType::String, uint64_t{1} << 61, none);  // 2^61 strings claimed, none present
    EXPECT_EQ(
        parse_error(w).rfind("gguf: key 'strings' claims 2305843009213693952 elements of type string", 0),
        0u);
  }
  {
    GgufWriter w;
    std::mt19937_64 rng(std::random_device{}());
    auto data = testing::random_bytes(rng, 16);
    std::vector<int64_t> ne = {4};
    ASSERT_TRUE(w.add_tensor("t", DType::F32, ne, data).ok());
    ASSERT_TRUE(w.add_tensor("t", DType::F32, ne, data).ok());
    EXPECT_EQ(parse_error(w), "gguf: duplicate tensor name 't'");
  }
}

// Every strict prefix of a fixture that cuts into the header or the tensor data must fail cleanly. Each
// prefix is copied into its own exact-size buffer so a sanitizer build catches any read past the end.
TEST(GgufHostile, TruncatedFixturesFail) {
  for (const char* rel : kGgufFixtures) {
    SCOPED_TRACE(rel);
    auto bytes = read_fixture(rel);
    ASSERT_FALSE(bytes.empty());
    auto full = parse_gguf(bytes);
    ASSERT_TRUE(full.ok()) << full.message();
    uint64_t needed = 0;
    for (const auto& t : full->tensors) needed = std::max(needed, t.offset + t.bytes);
    int tried = 0;
    for (size_t n : testing::truncation_points(bytes.size())) {
      std::vector<uint8_t> prefix(bytes.begin(), bytes.begin() + static_cast<ptrdiff_t>(n));
      auto r = parse_gguf(prefix);
      if (n < needed || full->tensors.empty()) {
        EXPECT_FALSE(r.ok()) << "prefix of " << n << " bytes parsed";
        ++tried;
      }
    }
    EXPECT_GT(tried, 4000);
  }
}

// Random byte flips anywhere in the header must never crash; whatever still parses stays inside the file.
TEST(GgufHostile, FlippedBytesNeverEscapeTheFile) {
  std::mt19937_64 rng(std::random_device{}());
  for (const char* rel : {"llm/stories260K-q4_0.gguf", "tokenizer/ggml-vocab-llama-spm.gguf"}) {
    auto original = read_fixture(rel);
    auto full = parse_gguf(original);
    ASSERT_TRUE(full.ok());
    size_t header_end = std::min<size_t>(original.size(), full->data_offset);
    for (int round = 0; round < 300; ++round) {
      std::vector<uint8_t> bytes = original;
      int flips = 1 + static_cast<int>(rng() % 4);
      for (int i = 0; i < flips; ++i) bytes[rng() % header_end] ^= static_cast<uint8_t>(1 + rng() % 255);
      auto r = parse_gguf(bytes);
      if (!r.ok()) continue;
      for (const auto& t : r->tensors) {
        EXPECT_LE(t.offset, bytes.size());
        EXPECT_LE(t.bytes, bytes.size() - t.offset);
      }
    }
  }
}

}  // namespace
}  // namespace sotto
