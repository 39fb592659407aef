// Format sniffing, JSON quoting, the strict JSON parser, and what describe_gguf/describe_safetensors report.
#include <gtest/gtest.h>

#include <limits>

#include "io/describe.h"
#include "io/gguf_writer.h"
#include "io/json.h"
#include "test_support.h"

namespace sotto {
namespace {

std::span<const uint8_t> as_bytes(std::string_view s) {
  return {reinterpret_cast<const uint8_t*>(s.data()), s.size()};
}

TEST(DetectFormat, Fixtures) {
  struct Case {
    const char* rel;
    FileFormat format;
  };
  const Case cases[] = {
      {"llm/stories260K.gguf", FileFormat::Gguf},
      {"tokenizer/ggml-vocab-qwen2.gguf", FileFormat::Gguf},
      {"vad/silero_vad_16k.safetensors", FileFormat::Safetensors},
      {"vad/silero_vad_v5.1.onnx", FileFormat::Onnx},
      {"vad/silero_vad_v6.2.onnx", FileFormat::Onnx},
      {"audio/test.wav", FileFormat::Wav},
      {"audio/sample.wav", FileFormat::Wav},
      {"audio/Harvard-L2-1.ogg", FileFormat::Unknown},
      {"asr/tokenizer.model", FileFormat::Unknown},
      {"asr/mel_reference.json", FileFormat::Unknown},
      {"audio/sample.expected.txt", FileFormat::Unknown},
      {"llm/quantize_q4_0.log", FileFormat::Unknown},
      {"tokenizer/ggml-vocab-qwen2.gguf.inp", FileFormat::Unknown},
      {"tokenizer/ggml-vocab-qwen2.gguf.out", FileFormat::Unknown},
  };
  for (const auto& c : cases) {
    auto bytes = testing::read_fixture(c.rel);
    ASSERT_FALSE(bytes.empty()) << c.rel;
    EXPECT_EQ(detect_format(bytes), c.format) << c.rel;
  }
  EXPECT_EQ(detect_format({}), FileFormat::Unknown);
}

TEST(DescribeFile, UnrecognizedSaysWhatTheBytesLookLike) {
  auto ogg = testing::read_fixture("audio/Harvard-L2-1.ogg");
  auto r = describe_file(ogg);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.message(),
            "unrecognized format (not GGUF, safetensors, ONNX or WAV): first bytes 4f 67 67 53 00 02 00 00 "
            "\"OggS....\", which look like an Ogg container (audio)");
  EXPECT_NE(describe_file(testing::read_fixture("asr/mel_reference.json")).message().find("JSON text"),
            std::string::npos);
  EXPECT_NE(describe_file(as_bytes("")).message().find("the file is empty"), std::string::npos);
}

TEST(JsonQuote, EscapesAndStaysValid) {
  EXPECT_EQ(json_quote("plain"), "\"plain\"");
  EXPECT_EQ(json_quote("a\"b\\c"), "\"a\\\"b\\\\c\"");
  EXPECT_EQ(json_quote(std::string("\n\x01\x1f", 3)), "\"\\u000a\\u0001\\u001f\"");
  EXPECT_EQ(json_quote("caf\xC3\xA9 \xE2\x96\x81 \xF0\x9F\x98\x80"),
            "\"caf\xC3\xA9 \xE2\x96\x81 \xF0\x9F\x98\x80\"");
  EXPECT_EQ(json_quote("\xFF"), "\"\\ufffd\"");
  EXPECT_EQ(json_quote("\xC0\xAF"), "\"\\ufffd\\ufffd\"");             // overlong '/'
  EXPECT_EQ(json_quote("\xED\xA0\x80"), "\"\\ufffd\\ufffd\\ufffd\"");  // UTF-16 surrogate
  EXPECT_EQ(json_quote("\xE2\x96"), "\"\\ufffd\\ufffd\"");             // truncated sequence
  // Any bytes at all must quote to something the strict parser accepts.
  std::mt19937_64 rng(std::random_device{}());
  for (int round = 0; round < 2000; ++round) {
    auto bytes = testing::random_bytes(rng, rng() % 40);
    std::string s(bytes.begin(), bytes.end());
    auto parsed = parse_json(json_quote(s));
    ASSERT_TRUE(parsed.ok()) << parsed.message();
    EXPECT_TRUE(parsed->is_string());
  }
}

TEST(Json, AcceptsValidDocuments) {
  auto v = parse_json(R"( {"a": [1, -2.5e3, true, false, null, "x\u00e9\ud83d\ude00\n"], "b": {}} )");
  ASSERT_TRUE(v.ok()) << v.message();
  ASSERT_TRUE(v->is_object());
  const JsonValue* a = v->find("a");
  ASSERT_NE(a, nullptr);
  ASSERT_EQ(a->items.size(), 6u);
  EXPECT_EQ(a->items[0].as_u64(), 1u);
  EXPECT_FALSE(a->items[1].as_u64().has_value());
  EXPECT_EQ(a->items[1].text, "-2.5e3");
  EXPECT_EQ(a->items[5].text, "x\xC3\xA9\xF0\x9F\x98\x80\n");
  EXPECT_EQ(parse_json("18446744073709551615")->as_u64(), UINT64_MAX);
  EXPECT_FALSE(parse_json("18446744073709551616")->as_u64().has_value());
}

TEST(Json, RejectsInvalidDocuments) {
  const char* bad[] = {
      "",          "{",     "[1,]", "{\"a\":1,}",  "01",          "1.",       "-",
      ".5",        "1e",    "NaN",  "\"\\x\"",     "\"\x01\"",    "\"\xff\"", "[1 2]",
      "{\"a\" 1}", "{1:2}", "tru",  "\"\\ud800\"", "\"\\udc00\"", "1 2",      "{\"a\":1,\"a\":2}",
      "\"abc"};
  for (const char* s : bad) EXPECT_FALSE(parse_json(s).ok()) << s;
  EXPECT_FALSE(parse_json(std::string(100, '[') + std::string(100, ']')).ok());
  EXPECT_TRUE(parse_json(std::string(60, '[') + std::string(60, ']')).ok());
}

TEST(DescribeGguf, TypeNamesValuesAndTruncatedArrays) {
  GgufWriter w;
  w.add_u32("n", 42);
  w.add_f32("eps", 1e-5f);
  w.add_f32("nan", std::numeric_limits<float>::quiet_NaN());
  w.add_bool("flag", true);
  w.add_string("name", "say \"hi\"\n\xFF");
  std::vector<std::string> tokens;
  for (int i = 0; i < 40; ++i) tokens.push_back("t" + std::to_string(i));
  w.add_string_array("tokens", tokens);
  std::vector<int32_t> small = {3, -1, 4};
  w.add_array<int32_t>("small", GgufType::I32, small);
  std::vector<uint64_t> big = {UINT64_MAX};
  w.add_array<uint64_t>("big", GgufType::U64, big);
  auto file = w.finish();
  auto d = describe_gguf(file);
  ASSERT_TRUE(d.ok()) << d.message();
  EXPECT_EQ(d->format, "gguf v3");
  ASSERT_EQ(d->metadata.size(), 8u);
  auto entry = [&](size_t i) { return d->metadata[i]; };
  EXPECT_EQ(entry(0).type, "u32");
  EXPECT_EQ(entry(0).json, "42");
  EXPECT_EQ(entry(1).json, "1e-05");  // shortest text that reads back as the same f32
  EXPECT_EQ(entry(2).json, "null");
  EXPECT_EQ(entry(2).text, "nan");
  EXPECT_EQ(entry(3).json, "true");
  EXPECT_EQ(entry(4).json, "\"say \\\"hi\\\"\\u000a\\ufffd\"");
  EXPECT_EQ(entry(5).type, "array[string]");
  EXPECT_EQ(entry(5).json,
            "{\"count\":40,\"first\":[\"t0\",\"t1\",\"t2\",\"t3\",\"t4\",\"t5\",\"t6\",\"t7\",\"t8\",\"t9\","
            "\"t10\","
            "\"t11\",\"t12\",\"t13\",\"t14\",\"t15\"]}");
  EXPECT_EQ(entry(6).json, "[3,-1,4]");
  EXPECT_EQ(entry(7).json, "[18446744073709551615]");
  for (const auto& m : d->metadata) {
    EXPECT_TRUE(parse_json(m.json).ok()) << m.key << ": " << m.json;
    EXPECT_EQ(m.text.find('\n'), std::string::npos);
  }
}

TEST(DescribeGguf, VocabularyTextStaysShort) {
  auto bytes = testing::read_fixture("tokenizer/ggml-vocab-qwen2.gguf");
  auto d = describe_file(bytes);
  ASSERT_TRUE(d.ok()) << d.message();
  for (const auto& m : d->metadata) {
    EXPECT_LE(m.text.size(), 130u * 4) << m.key;  // ~120 code points of at most 4 bytes
    EXPECT_TRUE(parse_json(m.json).ok()) << m.key;
    EXPECT_LT(m.json.size(), 4096u) << m.key;
  }
}

TEST(DescribeSafetensors, Fixture) {
  auto bytes = testing::read_fixture("vad/silero_vad_16k.safetensors");
  auto d = describe_file(bytes);
  ASSERT_TRUE(d.ok()) << d.message();
  EXPECT_EQ(d->format, "safetensors");
  EXPECT_EQ(d->tensors.size(), 15u);
}

}  // namespace
}  // namespace sotto
