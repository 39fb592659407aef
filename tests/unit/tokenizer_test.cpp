// The LLM tokenizer against llama.cpp: its own test vectors (fixtures/tokenizer/*.inp/.out, from llama.cpp's
// tests/test-tokenizer-0), ids that llama.cpp gave through node-llama-cpp (tests/data/tokenizer/reference.json,
// made by tools/gen_tokenizer_reference.mjs), round trips, the streaming detokenizer, clear errors for broken
// vocabularies, and the time a 100 KB text takes. The large randomized comparison with llama.cpp lives in
// tests/web/tokenizer_random.test.mjs.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "io/gguf.h"
#include "io/gguf_writer.h"
#include "io/json.h"
#include "test_support.h"
#include "text/tokenizer.h"
#include "text/unicode.h"

namespace sotto {
namespace {

struct LoadedTokenizer {
  std::vector<uint8_t> bytes;
  Tokenizer tokenizer;
};

LoadedTokenizer load(const std::string& rel) {
  LoadedTokenizer out;
  out.bytes = testing::read_fixture(rel);
  EXPECT_FALSE(out.bytes.empty()) << rel;
  auto gguf = parse_gguf(out.bytes);
  EXPECT_TRUE(gguf.ok()) << gguf.message();
  auto tokenizer = Tokenizer::from_gguf(*gguf);
  EXPECT_TRUE(tokenizer.ok()) << tokenizer.message();
  if (tokenizer.ok()) out.tokenizer = std::move(tokenizer).value();
  return out;
}

std::string read_text(const std::string& rel) {
  const std::vector<uint8_t> bytes = testing::read_fixture(rel);
  return std::string(bytes.begin(), bytes.end());
}

std::vector<std::string> split(const std::string& text, const std::string& separator) {
  std::vector<std::string> parts;
  size_t at = 0;
  for (size_t next; (next = text.find(separator, at)) != std::string::npos; at = next + separator.size())
    parts.push_back(text.substr(at, next - at));
  parts.push_back(text.substr(at));
  return parts;
}

std::vector<TokenId> parse_ids(const std::string& line) {
  std::vector<TokenId> ids;
  size_t at = 0;
  while (at < line.size()) {
    while (at < line.size() && line[at] == ' ') ++at;
    size_t end = at;
    while (end < line.size() && line[end] != ' ') ++end;
    if (end > at) ids.push_back(std::stoi(line.substr(at, end - at)));
    at = end;
  }
  return ids;
}

class LlamaCppVectors : public ::testing::TestWithParam<const char*> {};

// llama.cpp's test-tokenizer-0 vectors: add_special = false, parse_special = false.
TEST_P(LlamaCppVectors, EveryStringGivesLlamaCppIds) {
  const std::string name = cat("tokenizer/ggml-vocab-", GetParam(), ".gguf");
  const LoadedTokenizer t = load(name);
  const std::vector<std::string> inputs = split(read_text(name + ".inp"), "\n__ggml_vocab_test__\n");
  const std::vector<std::string> outputs = split(read_text(name + ".out"), "\n");
  ASSERT_GE(inputs.size(), 46u);
  ASSERT_GE(outputs.size(), inputs.size());
  size_t matches = 0;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const std::vector<TokenId> ids = t.tokenizer.tokenize(inputs[i], false, false);
    EXPECT_EQ(ids, parse_ids(outputs[i])) << "string " << i << ": '" << inputs[i] << "'";
    matches += ids == parse_ids(outputs[i]);
    // Every vector is valid UTF-8, and comes back unchanged.
    EXPECT_EQ(t.tokenizer.detokenize(ids, false, false), inputs[i]) << "string " << i;
  }
  EXPECT_EQ(matches, inputs.size());
}

INSTANTIATE_TEST_SUITE_P(Vocabularies, LlamaCppVectors, ::testing::Values("qwen2", "llama-spm", "llama-bpe"));

TEST(Tokenizer, MatchesLlamaCppReferenceIds) {
  const std::string path = std::string(SOTTO_SOURCE_DIR) + "/tests/data/tokenizer/reference.json";
  std::FILE* f = std::fopen(path.c_str(), "rb");
  ASSERT_NE(f, nullptr) << path;
  std::string text;
  char buffer[4096];
  for (size_t n; (n = std::fread(buffer, 1, sizeof buffer, f)) > 0;) text.append(buffer, n);
  std::fclose(f);
  auto reference = parse_json(text, "reference.json");
  ASSERT_TRUE(reference.ok()) << reference.message();
  const JsonValue* cases = reference->find("cases");
  ASSERT_NE(cases, nullptr);
  ASSERT_GE(cases->items.size(), 40u);
  std::string loaded_file;
  LoadedTokenizer t;
  for (const JsonValue& c : cases->items) {
    const std::string& file = c.find("file")->text;
    if (file != loaded_file) t = load(loaded_file = file);
    const bool special = c.find("special")->boolean;
    const std::string& input = c.find("text")->text;
    std::vector<TokenId> expected;
    for (const JsonValue& id : c.find("ids")->items) expected.push_back(static_cast<TokenId>(*id.as_u64()));
    EXPECT_EQ(t.tokenizer.tokenize(input, false, special), expected)
        << file << " special=" << special << ": '" << input << "'";
  }
}

TEST(Tokenizer, SpecialTokensOnlyWhenAsked) {
  const LoadedTokenizer t = load("tokenizer/ggml-vocab-qwen2.gguf");
  const TokenId im_start = t.tokenizer.vocab().find("<|im_start|>");
  ASSERT_NE(im_start, kNoToken);
  EXPECT_EQ(t.tokenizer.vocab().types[im_start], TokenType::Control);
  const std::vector<TokenId> parsed = t.tokenizer.tokenize("<|im_start|>user", false, true);
  ASSERT_FALSE(parsed.empty());
  EXPECT_EQ(parsed.front(), im_start);
  const std::vector<TokenId> plain = t.tokenizer.tokenize("<|im_start|>user", false, false);
  EXPECT_EQ(std::count(plain.begin(), plain.end(), im_start), 0);
  // Control tokens render only on request; user text always does.
  EXPECT_EQ(t.tokenizer.detokenize(parsed, false, true), "<|im_start|>user");
  EXPECT_EQ(t.tokenizer.detokenize(parsed, false, false), "user");
}

TEST(Tokenizer, AddSpecialFollowsMetadata) {
  for (const char* rel : {"tokenizer/ggml-vocab-qwen2.gguf", "tokenizer/ggml-vocab-llama-bpe.gguf",
                          "tokenizer/ggml-vocab-llama-spm.gguf", "llm/stories260K.gguf"}) {
    const LoadedTokenizer t = load(rel);
    const Vocab& v = t.tokenizer.vocab();
    std::vector<TokenId> expected;
    if (v.add_bos) expected.push_back(v.bos);
    const std::vector<TokenId> body = t.tokenizer.tokenize("Hello world", false, false);
    expected.insert(expected.end(), body.begin(), body.end());
    if (v.add_eos) expected.push_back(v.eos);
    EXPECT_EQ(t.tokenizer.tokenize("Hello world", true, false), expected) << rel;
  }
  // llama.cpp's defaults where the file does not say: SPM and Llama 3 start with BOS, Qwen2 does not.
  EXPECT_TRUE(load("tokenizer/ggml-vocab-llama-spm.gguf").tokenizer.vocab().add_bos);
  EXPECT_TRUE(load("tokenizer/ggml-vocab-llama-bpe.gguf").tokenizer.vocab().add_bos);
}

TEST(Tokenizer, SpmByteFallbackRoundTrips) {
  // stories260K has 512 tokens: most non-ASCII text falls back to <0xNN> byte tokens.
  const LoadedTokenizer t = load("llm/stories260K.gguf");
  const std::string text = "Zoë says 你好 🙂";
  const std::vector<TokenId> ids = t.tokenizer.tokenize(text, true, false);
  size_t byte_tokens = 0;
  for (TokenId id : ids) byte_tokens += t.tokenizer.vocab().types[id] == TokenType::Byte;
  EXPECT_GE(byte_tokens, 4u + 6u + 2u);  // at least ë, 你好 and the emoji are bytes
  EXPECT_EQ(t.tokenizer.detokenize(ids, true, false),
            " " + text);  // llama.cpp keeps the space after a removed BOS
  EXPECT_EQ(t.tokenizer.detokenize(t.tokenizer.tokenize(text, false, false), false, false), text);
}

TEST(StreamingDetokenizer, HoldsBackPartialCharacters) {
  const LoadedTokenizer t = load("tokenizer/ggml-vocab-qwen2.gguf");
  const std::string text = "Hello 👋🏽 wörld 日本語 👨‍👩‍👧";
  const std::vector<TokenId> ids = t.tokenizer.tokenize(text, false, false);
  StreamingDetokenizer stream(t.tokenizer, false);
  std::string joined;
  for (TokenId id : ids) {
    const std::string chunk = stream.push(id);
    // Every chunk is complete UTF-8: re-encoding its code points gives the same bytes and no U+FFFD.
    std::string reencoded;
    for (uint32_t cpt : decode_utf8_lenient(chunk)) {
      EXPECT_NE(cpt, kReplacementChar);
      append_utf8(reencoded, cpt);
    }
    EXPECT_EQ(reencoded, chunk);
    joined += chunk;
  }
  joined += stream.finish();
  EXPECT_EQ(joined, text);
}

TEST(StreamingDetokenizer, IncompleteTailBecomesReplacementCharacter) {
  const LoadedTokenizer t = load("tokenizer/ggml-vocab-llama-spm.gguf");
  const Vocab& v = t.tokenizer.vocab();
  StreamingDetokenizer stream(t.tokenizer, false);
  // 日 = E6 97 A5 arrives as three byte tokens.
  EXPECT_EQ(stream.push(v.find("<0xE6>")), "");
  EXPECT_EQ(stream.push(v.find("<0x97>")), "");
  EXPECT_EQ(stream.push(v.find("<0xA5>")), "日");
  EXPECT_EQ(stream.push(v.find("<0xF0>")), "");
  EXPECT_EQ(stream.push(v.find("<0x9F>")), "");
  EXPECT_EQ(stream.finish(), "\xEF\xBF\xBD");
  // A lead byte followed by a non-continuation: U+FFFD at once, then the character.
  EXPECT_EQ(stream.push(v.find("<0xE6>")), "");
  EXPECT_EQ(stream.push(v.find("<0x41>")),
            "\xEF\xBF\xBD"
            "A");
}

// A small vocabulary file; `edit` changes it before it is written.
std::vector<uint8_t> vocab_file(const std::function<void(GgufWriter&)>& edit, std::string_view model = "gpt2",
                                std::string_view pre = "qwen2", std::vector<std::string> merges = {"a b"}) {
  GgufWriter w;
  w.add_string("tokenizer.ggml.model", model);
  w.add_string("tokenizer.ggml.pre", pre);
  const std::vector<std::string> tokens = {"a", "b", "ab", "<|end|>"};
  w.add_string_array("tokenizer.ggml.tokens", tokens);
  w.add_string_array("tokenizer.ggml.merges", merges);
  edit(w);
  return w.finish();
}

std::string load_error(const std::vector<uint8_t>& bytes) {
  auto gguf = parse_gguf(bytes);
  if (!gguf) return "gguf: " + gguf.message();
  auto tokenizer = Tokenizer::from_gguf(*gguf);
  return tokenizer.ok() ? std::string("ok") : tokenizer.message();
}

TEST(Tokenizer, BrokenVocabulariesGiveClearErrors) {
  EXPECT_EQ(load_error(vocab_file([](GgufWriter&) {})), "ok");
  EXPECT_NE(
      load_error(vocab_file([](GgufWriter&) {}, "gpt2", "falcon-x")).find("unknown pre-tokenizer 'falcon-x'"),
      std::string::npos);
  EXPECT_NE(load_error(vocab_file([](GgufWriter&) {}, "bert")).find("unsupported tokenizer model 'bert'"),
            std::string::npos);
  EXPECT_NE(load_error(vocab_file([](GgufWriter& w) {
              const std::vector<float> scores = {0, 0, 0};
              w.add_array("tokenizer.ggml.scores", GgufType::F32, std::span<const float>(scores));
            })).find("tokenizer.ggml.scores has 3 entries for 4 tokens"),
            std::string::npos);
  EXPECT_NE(load_error(vocab_file([](GgufWriter& w) {
              w.add_u32("tokenizer.ggml.bos_token_id", 4);
            })).find("bos_token_id = 4 is outside the vocabulary (4 tokens)"),
            std::string::npos);
  EXPECT_NE(load_error(vocab_file([](GgufWriter&) {}, "gpt2", "qwen2", {"ab"})).find("merge 0 ('ab')"),
            std::string::npos);
}

// Tokenizing must scale about linearly with the text (a quadratic merge loop would turn a long paste into a
// hang). Not a timed test: it compares the time for 100 KB with the time for 25 KB of the same text on the
// same machine and build. The time is the thread's CPU time, so that other jobs taking the core (CI runs
// tests two at a time on two cores, beside other work) do not count: with wall time a loaded machine gave
// ratios of 12-16 for this linear code.
double thread_cpu_ms() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) * 1e3 + static_cast<double>(ts.tv_nsec) * 1e-6;
}

// A complexity guard, not a speed test: 4 times the text must cost far less than the 16 times a quadratic
// merge loop would take. The smaller run is a quarter, not less, so that both runs' working sets have left
// the core's own caches: a 6 KB run that stays in them is ~4x faster per byte, which a loaded machine's
// shared cache makes worse still (a 1/16 comparison measured 67x for linear code). Linear is 4; the bound is
// 10, the fastest of five interleaved runs of each is taken, and the short run is floored at 1 ms.
void expect_linear_growth(const Tokenizer& t, const std::string& text, bool parse_special) {
#ifdef SOTTO_TEST_UNDER_SANITIZER
  GTEST_SKIP() << "the sanitizers' shadow memory changes what a byte costs with the working set's size";
#endif
  const std::string quarter = text.substr(0, text.size() / 4);
  double ms_full = 1e300;
  double ms_part = 1e300;
  for (int repeat = 0; repeat < 5; ++repeat) {
    double start = thread_cpu_ms();
    (void)t.tokenize(text, false, parse_special);
    ms_full = std::min(ms_full, thread_cpu_ms() - start);
    start = thread_cpu_ms();
    (void)t.tokenize(quarter, false, parse_special);
    ms_part = std::min(ms_part, thread_cpu_ms() - start);
  }
  EXPECT_LT(ms_full / std::max(ms_part, 1.0), 10.0)
      << text.substr(0, 20) << ": " << ms_part << " ms for 1/4, " << ms_full << " ms for all";
}

TEST(Tokenizer, HundredKilobytesScaleLinearly) {
  const LoadedTokenizer t = load("tokenizer/ggml-vocab-qwen2.gguf");
  const char* pieces[] = {"The quick brown fox ",
                          "jumps over 1234567 ",
                          "lazy dogs. ",
                          "日本語のテキスト ",
                          "Привет мир ",
                          "😀👍🏽 ",
                          "\n\n",
                          "    indented code();\n",
                          "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"};
  std::mt19937 rng(7);
  std::string text;
  while (text.size() < 100'000) text += pieces[rng() % std::size(pieces)];
  const std::vector<TokenId> ids = t.tokenizer.tokenize(text, false, true);
  EXPECT_GT(ids.size(), 10'000u);
  EXPECT_EQ(t.tokenizer.detokenize(ids, false, false), text);
  expect_linear_growth(t.tokenizer, text, true);
}

TEST(Tokenizer, PathologicalInputsScaleLinearly) {
  const LoadedTokenizer qwen = load("tokenizer/ggml-vocab-qwen2.gguf");
  const LoadedTokenizer spm = load("tokenizer/ggml-vocab-llama-spm.gguf");
  const std::string inputs[] = {std::string(100'000, 'a'), std::string(100'000, ' '),
                                std::string(100'000, '7'),
                                std::string(50'000, '\n') + std::string(50'000, '\t'), [] {
                                  std::string s;
                                  while (s.size() < 100'000) s += "<|im_start|>x";
                                  return s;
                                }()};
  for (const std::string& text : inputs) {
    for (const Tokenizer* t : {&qwen.tokenizer, &spm.tokenizer}) {
      const std::vector<TokenId> ids = t->tokenize(text, false, true);
      EXPECT_EQ(t->detokenize(ids, false, true), text) << text.substr(0, 20);
      expect_linear_growth(*t, text, true);
    }
  }
}

TEST(Tokenizer, RandomBytesAreSafe) {
  const LoadedTokenizer qwen = load("tokenizer/ggml-vocab-qwen2.gguf");
  const LoadedTokenizer spm = load("llm/stories260K.gguf");
  std::mt19937 rng(std::random_device{}());
  for (int round = 0; round < 200; ++round) {
    std::string bytes(rng() % 64, '\0');
    for (char& b : bytes) b = static_cast<char>(rng() % 4 == 0 ? rng() % 128 : rng() % 256);
    for (const Tokenizer* t : {&qwen.tokenizer, &spm.tokenizer}) {
      for (TokenId id : t->tokenize(bytes, true, true)) EXPECT_TRUE(t->valid(id));
    }
    // Spaces aside: SPM writes them as U+2581, whose bytes a preceding broken lead byte can swallow (in
    // llama.cpp too), and then they come back as those three bytes.
    std::replace(bytes.begin(), bytes.end(), ' ', '_');
    EXPECT_EQ(spm.tokenizer.detokenize(spm.tokenizer.tokenize(bytes, false, false), false, false), bytes);
  }
}

}  // namespace
}  // namespace sotto
