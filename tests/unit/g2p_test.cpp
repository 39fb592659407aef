// The G2P against misaki 0.9.4 (the G2P Kokoro v1.0 was trained on), on tests/data/g2p/texts.txt: misaki's
// phonemes for every text were made by tools/g2p_misaki_reference.py (spaCy tagger, lexicon and rules, no
// espeak-ng) and stored in misaki_{us,gb}.tsv. Needs models/g2p-en-*.bin (scripts/get-models.sh g2p); skips
// without them.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "test_support.h"
#include "text/g2p.h"
#include "text/g2p_numbers.h"
#include "text/unicode.h"

namespace sotto::g2p {
namespace {

std::string source_path(const std::string& rel) {
  return std::string(SOTTO_SOURCE_DIR) + "/" + rel;
}

const G2p* model(Lang lang) {
  static const auto load = [](const char* name) -> std::unique_ptr<G2p> {
    auto g = G2p::load_file(source_path(std::string("models/") + name));
    if (!g) return nullptr;
    return std::make_unique<G2p>(std::move(g).value());
  };
  static const std::unique_ptr<G2p> us = load("g2p-en-us.bin"), gb = load("g2p-en-gb.bin");
  return lang == Lang::EnUs ? us.get() : gb.get();
}

#define NEED_MODEL(lang)        \
  const G2p* g2p = model(lang); \
  if (!g2p) GTEST_SKIP() << "models/g2p-en-*.bin missing (bash scripts/get-models.sh g2p makes them)"

// Kokoro v1.0's phoneme vocabulary: the keys of the model's config.json "vocab" (as shipped in the kokoro-onnx
// package's config.json, 114 symbols).
const std::u32string kKokoroVocab =
    U";:,.!?—…\"()“” "
    U"\u0303ʣʥʦʨᵝꭧAIOQSTWYᵊabcdefhijklmnopqrstuvwxyzɑɐɒæβɔɕçɖðʤəɚɛɜɟɡɥɨɪʝɯɰŋɳɲɴøɸθœɹɾɻʁɽʂʃʈʧʊʋʌɣɤχʎʒʔˈˌːʰʲ↓→↗"
    U"↘ᵻ";

bool in_kokoro_vocab(std::string_view utf8) {
  for (uint32_t cp : decode_utf8_lenient(utf8))
    if (kKokoroVocab.find(static_cast<char32_t>(cp)) == std::u32string::npos) return false;
  return true;
}

struct RefToken {
  std::string text, phonemes, tag, rating;
};
struct RefText {
  int index = 0;
  std::string text, phonemes;
  std::vector<RefToken> tokens;
};

std::vector<std::string> split_tabs(const std::string& line) {
  std::vector<std::string> f;
  size_t i = 0;
  while (true) {
    const size_t t = line.find('\t', i);
    f.push_back(line.substr(i, t == std::string::npos ? std::string::npos : t - i));
    if (t == std::string::npos) break;
    i = t + 1;
  }
  return f;
}

std::vector<RefText> read_reference(const std::string& rel) {
  std::vector<RefText> out;
  std::ifstream in(source_path(rel));
  std::string line;
  while (std::getline(in, line)) {
    const auto f = split_tabs(line);
    if (f[0] == "T" && f.size() >= 4) {
      out.push_back({std::atoi(f[1].c_str()), f[2], f[3], {}});
    } else if (f[0] == "W" && f.size() >= 5 && !out.empty()) {
      out.back().tokens.push_back({f[1], f[2], f[3], f[4]});
    }
  }
  return out;
}

bool is_lexicon_word(const RefToken& t) {
  if (t.phonemes == "<none>" || t.phonemes.empty() || (t.rating != "3" && t.rating != "4")) return false;
  bool letter = false;
  for (char c : t.text) {
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) {
      letter = true;
    } else if (c != '\'' && c != '-' && c != '.') {
      return false;
    }
  }
  return letter;
}

struct Agreement {
  int same = 0, total = 0;
  double share() const { return total ? static_cast<double>(same) / total : 0; }
};

// Words misaki read from its lexicon (and rules) in each text, found in our tokens by their text in order;
// a word we tokenised differently counts as a mismatch.
enum class Split { EveryFifthHeldOut, AllHeldOut, AllTuned };

void compare(const G2p& g2p, const std::vector<RefText>& ref, Split split, Agreement& tuned,
             Agreement& held_out, bool print_misses) {
  for (const RefText& r : ref) {
    const std::vector<WordPhonemes> ours = g2p.words(r.text);
    const bool out = split == Split::AllHeldOut || (split == Split::EveryFifthHeldOut && r.index % 5 == 4);
    Agreement& a = out ? held_out : tuned;
    size_t pos = 0;
    for (size_t ti = 0; ti < r.tokens.size(); ++ti) {
      const RefToken& t = r.tokens[ti];
      if (!is_lexicon_word(t)) continue;
      // Units after a number are read as words on purpose ("250 MB" -> megabytes; misaki spells M B).
      if (ti > 0 && r.tokens[ti - 1].tag == "CD" &&
          (t.text == "MB" || t.text == "GB" || t.text == "TB" || t.text == "KB" || t.text == "km" ||
           t.text == "kg"))
        continue;
      ++a.total;
      size_t found = ours.size();
      for (size_t k = pos; k < ours.size() && k < pos + 24; ++k)
        if (ours[k].text == t.text) {
          found = k;
          break;
        }
      if (found == ours.size()) {
        if (print_misses)
          std::printf("  %s[%d] '%s': misaki %s, ours not a token\n", out ? "held-out" : "tuned", r.index,
                      t.text.c_str(), t.phonemes.c_str());
        continue;
      }
      pos = found + 1;
      if (ours[found].phonemes == t.phonemes)
        ++a.same;
      else if (print_misses)
        std::printf("  %s[%d] '%s' (%s): misaki %s, ours %s\n", out ? "held-out" : "tuned", r.index,
                    t.text.c_str(), t.tag.c_str(), t.phonemes.c_str(), ours[found].phonemes.c_str());
    }
  }
}

// texts.txt: every fifth text held out; texts_license.txt and texts_docs.txt: all held out; texts_that.txt: all
// tuned.
void agreement_test(Lang lang, const std::string& reference) {
  NEED_MODEL(lang);
  const auto ref = read_reference(reference + ".tsv");
  const auto license = read_reference(reference + "_license.tsv");
  const auto that = read_reference(reference + "_that.tsv");
  const auto docs = read_reference(reference + "_docs.tsv");
  ASSERT_GT(ref.size(), 90u) << reference;
  ASSERT_GT(license.size(), 20u) << reference;
  Agreement tuned, held_out;
  const bool print = std::getenv("SOTTO_G2P_MISSES") != nullptr;
  compare(*g2p, ref, Split::EveryFifthHeldOut, tuned, held_out, print);
  compare(*g2p, license, Split::AllHeldOut, tuned, held_out, print);
  compare(*g2p, that, Split::AllTuned, tuned, held_out, print);
  compare(*g2p, docs, Split::AllHeldOut, tuned, held_out, print);
  std::printf(
      "[ g2p     ] %s: lexicon words identical to misaki: tuned %d/%d (%.1f%%), held out %d/%d (%.1f%%)\n",
      reference.c_str(), tuned.same, tuned.total, 100 * tuned.share(), held_out.same, held_out.total,
      100 * held_out.share());
  EXPECT_GE(tuned.share(), 0.97);
  EXPECT_GE(held_out.share(), 0.97);
  EXPECT_GT(held_out.total, 4500);
}

TEST(G2p, UsLexiconWordsAgreeWithMisaki) {
  agreement_test(Lang::EnUs, "tests/data/g2p/misaki_us");
}

TEST(G2p, GbLexiconWordsAgreeWithMisaki) {
  agreement_test(Lang::EnGb, "tests/data/g2p/misaki_gb");
}

// Everything we write is a symbol Kokoro's token table has (an unknown symbol would be dropped silently).
TEST(G2p, OutputUsesOnlyKokoroSymbols) {
  for (Lang lang : {Lang::EnUs, Lang::EnGb}) {
    NEED_MODEL(lang);
    for (const RefText& r : read_reference("tests/data/g2p/misaki_us.tsv")) {
      const std::string ps = g2p->phonemize(r.text);
      EXPECT_TRUE(in_kokoro_vocab(ps)) << r.text << " -> " << ps;
    }
  }
}

// Numbers, money, times, units, abbreviations, URLs, symbols, emoji: the written form read as misaki reads the
// spoken one (tests/data/g2p/normalize.tsv; misaki cannot read most written forms itself).
void pairs_test(Lang lang, const char* reference) {
  NEED_MODEL(lang);
  std::ifstream in(source_path(reference));
  std::string line;
  int n = 0;
  while (std::getline(in, line)) {
    const auto f = split_tabs(line);
    if (f.size() != 4 || f[0] != "P") continue;
    ++n;
    EXPECT_EQ(g2p->phonemize(f[1]), f[3]) << "written: " << f[1] << "\nspoken: " << f[2];
  }
  EXPECT_GT(n, 30) << reference;
}

TEST(G2p, UsReadsWrittenFormsAsMisakiReadsThemSpoken) {
  pairs_test(Lang::EnUs, "tests/data/g2p/misaki_us_pairs.tsv");
}

TEST(G2p, GbReadsWrittenFormsAsMisakiReadsThemSpoken) {
  pairs_test(Lang::EnGb, "tests/data/g2p/misaki_gb_pairs.tsv");
}

TEST(G2p, NumberWordsMatchNum2words) {
  // num2words 0.5.14's English (the package misaki reads numbers with), with its "and" and punctuation
  // dropped as misaki drops them.
  EXPECT_EQ(cardinal_words(0), "zero");
  EXPECT_EQ(cardinal_words(1234567), "one million two hundred thirty four thousand five hundred sixty seven");
  EXPECT_EQ(cardinal_words(1000000000000ull), "one trillion");
  EXPECT_EQ(ordinal_words(21), "twenty first");
  EXPECT_EQ(ordinal_words(100), "one hundredth");
  EXPECT_EQ(ordinal_words(12), "twelfth");
  EXPECT_EQ(year_words(1999), "nineteen ninety nine");
  EXPECT_EQ(year_words(2005), "two thousand five");
  EXPECT_EQ(year_words(2010), "twenty ten");
  EXPECT_EQ(year_words(1905), "nineteen oh five");
  EXPECT_EQ(year_words(1900), "nineteen hundred");
  EXPECT_EQ(year_words(1066), "ten sixty six");
}

TEST(G2p, SplitsSentencesAsTheTtsStreamsThem) {
  const auto s = split_sentences(
      "Dr. Smith went to Washington. He arrived at 5 p.m. on Monday! Did he?  \"Yes.\" J. R. R. Tolkien "
      "wrote it.\n"
      "New line without a stop\n\nA last one...");
  ASSERT_EQ(s.size(), 7u);
  EXPECT_EQ(s[0], "Dr. Smith went to Washington.");
  EXPECT_EQ(s[1], "He arrived at 5 p.m. on Monday!");
  EXPECT_EQ(s[2], "Did he?");
  EXPECT_EQ(s[3], "\"Yes.\"");
  EXPECT_EQ(s[4], "J. R. R. Tolkien wrote it.");
  EXPECT_EQ(s[5], "New line without a stop");
  EXPECT_EQ(s[6], "A last one...");
}

// Text arriving piece by piece: each sentence is given once, when the next word has begun, and all the
// sentences given plus the final rest are what split_sentences gives for the whole text.
TEST(G2p, SplitsStreamingTextIntoCompleteSentences) {
  const std::string text =
      "Dr. Smith went to Washington. He paid $3.50 at 5 p.m. on Monday! Did he?  \"Yes.\" Then\nsome more "
      "text";
  const std::vector<std::string_view> whole = split_sentences(text);
  for (size_t step : {1u, 3u, 7u}) {
    std::vector<std::string> got;
    std::string buffer;
    for (size_t i = 0; i < text.size(); i += step) {
      buffer += text.substr(i, step);
      const SentenceSplit s = split_complete_sentences(buffer);
      for (std::string_view v : s.sentences) got.emplace_back(v);
      buffer.erase(0, s.rest);
    }
    for (std::string_view v : split_sentences(buffer)) got.emplace_back(v);
    ASSERT_EQ(got.size(), whole.size()) << "step " << step;
    for (size_t k = 0; k < got.size(); ++k) EXPECT_EQ(got[k], whole[k]) << "step " << step;
  }
  EXPECT_TRUE(split_complete_sentences("It costs 3.").sentences.empty());  // "3.5" may follow
  // A numbered list: "1." opens its item, it is no sentence of its own.
  const auto list = split_sentences("Steps:\n1. Open it.\n2. Close it.");
  ASSERT_EQ(list.size(), 3u);
  EXPECT_EQ(list[1], "1. Open it.");
  EXPECT_EQ(split_complete_sentences("Done. N").sentences.size(), 1u);
}

TEST(G2p, SentencesFitKokorosLimit) {
  NEED_MODEL(Lang::EnUs);
  // One 3,000-word sentence with commas now and then, then a short one.
  std::string text;
  for (int i = 0; i < 3000; ++i) text += (i % 37 == 36) ? "thinking, " : "thinking ";
  text += "end. Short one.";
  const auto sentences = g2p->phonemize_sentences(text);
  ASSERT_GT(sentences.size(), 10u);
  size_t total = 0;
  for (const auto& s : sentences) {
    const size_t n = decode_utf8_lenient(s.phonemes).size();
    EXPECT_LE(n, kMaxPhonemesPerCall);
    EXPECT_GT(n, 0u);
    total += n;
  }
  EXPECT_EQ(sentences.back().phonemes, g2p->phonemize("Short one."));
  EXPECT_GT(total, 3000u * 7);
}

// Whatever comes in, the G2P answers (possibly empty) Kokoro phonemes, quickly.
TEST(G2p, BadInputGivesSaneOutput) {
  NEED_MODEL(Lang::EnUs);
  EXPECT_EQ(g2p->phonemize(""), "");
  EXPECT_EQ(g2p->phonemize("   \n\t "), "");
  EXPECT_TRUE(g2p->phonemize_sentences("").empty());
  EXPECT_EQ(g2p->phonemize("🎉👍🏽❤️"), "");
  EXPECT_EQ(g2p->phonemize("Привет мир 你好 مرحبا"), "");
  EXPECT_EQ(g2p->phonemize("?!"), "?!");
  EXPECT_EQ(g2p->phonemize(std::string("\xff\xfe\xc3 hi \xe2\x82", 10)), g2p->phonemize("hi"));
  EXPECT_EQ(g2p->phonemize("café naïve"), g2p->phonemize("cafe naive"));

  std::mt19937_64 rng(sotto::testing::test_seed());
  const std::string alphabet = "abcXYZ019 .,;:!?'\"-$%&@/#()_\xe2\x80\x94\xc3\xa9\xff";
  for (int round = 0; round < 1; ++round) {
    std::string text;
    for (int i = 0; i < 100000; ++i) text.push_back(alphabet[rng() % alphabet.size()]);
    const auto t0 = std::chrono::steady_clock::now();
    const std::string ps = g2p->phonemize(text);
    const auto sentences = g2p->phonemize_sentences(text);
    const double ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    EXPECT_TRUE(in_kokoro_vocab(ps));
    for (const auto& s : sentences) EXPECT_LE(decode_utf8_lenient(s.phonemes).size(), kMaxPhonemesPerCall);
    EXPECT_LT(ms, 20000.0);
  }
  // Pathological single tokens: long runs of letters, digits, hyphens, dots.
  for (const std::string& t :
       {std::string(20000, 'a'), std::string(20000, '9'), std::string(20000, '-'), std::string(20000, '.'),
        std::string(20000, 'A'), std::string(3000, '1') + "st"}) {
    const std::string ps = g2p->phonemize(t);
    EXPECT_TRUE(in_kokoro_vocab(ps)) << t.substr(0, 10);
  }
  std::string hyphens;
  for (int i = 0; i < 5000; ++i) hyphens += "ab-";
  EXPECT_TRUE(in_kokoro_vocab(g2p->phonemize(hyphens)));
}

// The smallest valid file (the fuzzer's seed): no entries, no letter-to-sound tables. Everything reads as
// nothing but punctuation, and nothing crashes.
TEST(G2p, EmptyLexiconAnswersSafely) {
  std::ifstream in(source_path("tests/fuzz/corpus/g2p/lexicon_empty"), std::ios::binary);
  std::vector<uint8_t> image((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  ASSERT_GT(image.size(), 1u);
  auto g = G2p::load(std::span<const uint8_t>(image).subspan(1), "lexicon_empty");
  ASSERT_TRUE(g.ok()) << g.message();
  EXPECT_EQ(g->phonemize("Hello, world! 42 cats."), ", ! .");
}

TEST(G2p, BrokenLexiconIsAClearError) {
  const std::vector<uint8_t> bytes;
  auto empty = G2p::load(bytes, "empty.bin");
  ASSERT_FALSE(empty.ok());
  EXPECT_NE(empty.message().find("empty.bin"), std::string::npos) << empty.message();
  NEED_MODEL(Lang::EnUs);
  std::ifstream in(source_path("models/g2p-en-us.bin"), std::ios::binary);
  std::vector<uint8_t> image((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  for (size_t cut : {size_t{8}, size_t{20}, size_t{200}, image.size() / 2, image.size() - 1}) {
    auto r = G2p::load(std::span<const uint8_t>(image.data(), cut), "cut.bin");
    EXPECT_FALSE(r.ok()) << cut;
  }
  std::mt19937_64 rng(sotto::testing::test_seed());
  for (int i = 0; i < 20; ++i) {  // flipped bytes: either rejected or a lexicon that answers safely
    std::vector<uint8_t> bad = image;
    bad[rng() % 4096] ^= static_cast<uint8_t>(1 + rng() % 255);
    auto r = G2p::load(bad, "flipped.bin");
    if (r.ok()) (void)r->phonemize("The quick brown fox jumps over the lazy dog.");
  }
  // The affix rules are the file's last section: cut inside it, or flipped there.
  for (size_t back : {size_t{1}, size_t{7}, size_t{300}}) {
    auto r = G2p::load(std::span<const uint8_t>(image.data(), image.size() - back), "cut.bin");
    EXPECT_FALSE(r.ok()) << back;
  }
  for (int i = 0; i < 50; ++i) {
    std::vector<uint8_t> bad = image;
    bad[bad.size() - 1 - rng() % 8192] ^= static_cast<uint8_t>(1 + rng() % 255);
    auto r = G2p::load(bad, "flipped.bin");
    if (r.ok()) (void)r->read_as_unknown("unhappinesses overdoers", nullptr);
  }
}

// Words the lexicon does not hold read as a known word with an affix (tools/g2p_affixes.py's rules): each word
// here hidden from the lexicon comes out as the lexicon has it, from its stem's phonemes.
bool hide_affix_examples(std::string_view w) {
  for (std::string_view h : {"abolishers", "unfriendliness", "hopelessness", "overreacting", "nonsmokers"})
    if (w == h) return true;
  return false;
}

TEST(G2p, AffixRulesReadDerivedWords) {
  NEED_MODEL(Lang::EnUs);
  ASSERT_FALSE(g2p->lexicon().affixes().empty()) << "models/g2p-en-us.bin has no affix rules (version 2?)";
  for (const char* w : {"abolishers", "unfriendliness", "hopelessness", "overreacting", "nonsmokers"}) {
    const std::string lexicon = g2p->phonemize(w);
    EXPECT_EQ(g2p->read_as_unknown(w, hide_affix_examples), lexicon) << w;
  }
}

uint32_t crc32(std::string_view s) {
  uint32_t c = 0xFFFFFFFFu;
  for (char ch : s) {
    c ^= static_cast<uint8_t>(ch);
    for (int k = 0; k < 8; ++k) c = (c >> 1) ^ (0xEDB88320u & (0u - (c & 1)));
  }
  return ~c;
}

// Lexicon words the letter-to-sound model never saw (tools/g2p_jsm_train.py holds out words whose crc32 is
// 0 mod 20), read by the committed model (data/g2p/jsm-en-*.bin, whatever models/g2p-en-*.bin carries) alone
// and with misaki's rules and the affix rules on the known stems left first (read_as_unknown). The trainer
// printed 69.8 % (US) / 74.7 % (GB) exact on all held-out words; these lists are every 4th of them (model alone
// 69.3 % / 74.5 %, with the rules first 69.0 % / 72.7 %); the floors sit ~1 point under.
bool held_out(std::string_view w) {
  return crc32(w) % 20 == 0;
}

// espeak-ng's reading of the same words (tools/g2p_espeak_reference.mjs, misaki's rewrite into Kokoro's
// symbols): what Kokoro's own pipeline says for words outside misaki's lexicon, printed beside ours.
double espeak_agreement(const std::string& list) {
  std::ifstream in(source_path(list));
  std::string line;
  int n = 0, same = 0;
  while (std::getline(in, line)) {
    const auto f = split_tabs(line);
    if (f.size() != 3) continue;
    ++n;
    same += f[1] == f[2];
  }
  return n ? static_cast<double>(same) / n : 0;
}

void letter_to_sound_test(Lang lang, const char* list, double min_exact, double min_reading) {
  NEED_MODEL(lang);
  std::ifstream lex_in(source_path(lang == Lang::EnUs ? "models/g2p-en-us.bin" : "models/g2p-en-gb.bin"),
                       std::ios::binary);
  const std::vector<uint8_t> lexicon((std::istreambuf_iterator<char>(lex_in)),
                                     std::istreambuf_iterator<char>());
  std::ifstream jsm_in(source_path(lang == Lang::EnUs ? "data/g2p/jsm-en-us.bin" : "data/g2p/jsm-en-gb.bin"),
                       std::ios::binary);
  const std::vector<uint8_t> jsm((std::istreambuf_iterator<char>(jsm_in)), std::istreambuf_iterator<char>());
  auto with_jsm = G2p::load(lexicon, "lexicon", jsm);
  ASSERT_TRUE(with_jsm.ok()) << with_jsm.message();
  ASSERT_TRUE(!jsm.empty()) << "data/g2p/jsm-en-*.bin missing";
  g2p = &*with_jsm;
  std::ifstream in(source_path(list));
  std::string line;
  int n = 0, exact = 0, no_stress = 0, reading_ok = 0;
  auto unstressed = [](std::string s) {
    for (const char* mark : {"ˈ", "ˌ"})
      for (size_t p = s.find(mark); p != std::string::npos; p = s.find(mark)) s.erase(p, 2);
    return s;
  };
#ifdef SOTTO_TEST_UNDER_SANITIZER
  const int step = 10;  // every 10th word: ~10x slower under the sanitizers
#else
  const int step = 1;
#endif
  int line_no = 0;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#' || line_no++ % step != 0) continue;
    const auto f = split_tabs(line);
    ASSERT_EQ(f.size(), 2u) << line;
    ASSERT_EQ(crc32(f[0]) % 20, 0u) << f[0] << " is not a held-out word";
    ++n;
    std::string expected = f[1];  // misaki writes ɾ and ʔ as T and t in its output (Kokoro v1.0's symbols)
    for (size_t p = expected.find("ɾ"); p != std::string::npos; p = expected.find("ɾ"))
      expected.replace(p, 2, "T");
    for (size_t p = expected.find("ʔ"); p != std::string::npos; p = expected.find("ʔ"))
      expected.replace(p, 2, "t");
    const std::string ps = g2p->letters_to_sounds(f[0]);
    exact += ps == expected;
    reading_ok += g2p->read_as_unknown(f[0], held_out) == expected;
    no_stress += unstressed(ps) == unstressed(expected);
    if (std::getenv("SOTTO_G2P_MISSES") && ps != expected)
      std::printf("  %s: lexicon %s, model %s\n", f[0].c_str(), expected.c_str(), ps.c_str());
  }
  std::printf(
      "[ g2p     ] %s: %d held-out words: letter-to-sound %.1f%% exact, %.1f%% ignoring stress; with "
      "misaki's -s/-ed/-ing and the affix rules on the known stems left first %.1f%% (espeak-ng, Kokoro's "
      "usual fallback: %.1f%%)\n",
      list, n, 100.0 * exact / n, 100.0 * no_stress / n, 100.0 * reading_ok / n,
      100.0 * espeak_agreement(lang == Lang::EnUs ? "tests/data/g2p/espeak_heldout_us.tsv"
                                                  : "tests/data/g2p/espeak_heldout_gb.tsv"));
  EXPECT_GT(n * step, 2000);
  if (step > 1) return;
  EXPECT_GE(static_cast<double>(exact) / n, min_exact);
  EXPECT_GE(static_cast<double>(reading_ok) / n, min_reading);
}

TEST(G2p, UsLetterToSoundOnHeldOutWords) {
  letter_to_sound_test(Lang::EnUs, "tests/data/g2p/lts_heldout_us.tsv", 0.70, 0.695);
}

TEST(G2p, GbLetterToSoundOnHeldOutWords) {
  letter_to_sound_test(Lang::EnGb, "tests/data/g2p/lts_heldout_gb.tsv", 0.745, 0.727);
}

// 1,000 words of prose, numbers and names: the time one phonemize() call takes natively.
TEST(G2p, ThousandWordsInFewMilliseconds) {
  NEED_MODEL(Lang::EnUs);
  std::string text;
  int words = 0;
  for (const RefText& r : read_reference("tests/data/g2p/misaki_us.tsv")) {
    if (words >= 1000) break;
    text += r.text + " ";
    for (char c : r.text) words += c == ' ';
    ++words;
  }
  ASSERT_GE(words, 1000);
  double best_ms = 1e9;
  for (int i = 0; i < 5; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    const std::string ps = g2p->phonemize(text);
    best_ms = std::min(
        best_ms, std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    ASSERT_FALSE(ps.empty());
  }
  std::printf("[ g2p     ] %d words in %.2f ms (best of 5)\n", words, best_ms);
#if !defined(NDEBUG) || defined(__SANITIZE_ADDRESS__)
  GTEST_SKIP() << "timing is only checked in optimised builds without sanitizers";
#else
#ifdef SOTTO_TEST_UNDER_SANITIZER
  GTEST_SKIP() << "timing is only checked without sanitizers";
#endif
  EXPECT_LT(best_ms, 10.0);
#endif
}

// Each word in no lexicon is labelled by what read it: the affix rules ("overcaffeinated" = over- +
// "caffeinated") or the letter-to-sound model; words the lexicon's own rules read stay "lexicon".
TEST(G2pSource, UnknownWordsSayWhatReadThem) {
  NEED_MODEL(Lang::EnUs);
  const std::vector<WordPhonemes> ws = g2p->words("overcaffeinated zorgvelt happiness");
  ASSERT_EQ(ws.size(), 3u);
  EXPECT_STREQ(source_name(ws[0].source), "affix") << ws[0].text;
  EXPECT_STREQ(source_name(ws[1].source), "letter-to-sound") << ws[1].text;
  EXPECT_STREQ(source_name(ws[2].source), "lexicon") << ws[2].text;
}

}  // namespace
}  // namespace sotto::g2p
