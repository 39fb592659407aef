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
void compare(const G2p& g2p, const std::vector<RefText>& ref, bool all_held_out, Agreement& tuned,
             Agreement& held_out, bool print_misses) {
  for (const RefText& r : ref) {
    const std::vector<WordPhonemes> ours = g2p.words(r.text);
    Agreement& a = all_held_out || r.index % 5 == 4 ? held_out : tuned;
    size_t pos = 0;
    for (const RefToken& t : r.tokens) {
      if (!is_lexicon_word(t)) continue;
      ++a.total;
      size_t found = ours.size();
      for (size_t k = pos; k < ours.size() && k < pos + 24; ++k)
        if (ours[k].text == t.text) {
          found = k;
          break;
        }
      if (found == ours.size()) {
        if (print_misses)
          std::printf("  [%d] '%s': misaki %s, ours not a token\n", r.index, t.text.c_str(),
                      t.phonemes.c_str());
        continue;
      }
      pos = found + 1;
      if (ours[found].phonemes == t.phonemes)
        ++a.same;
      else if (print_misses)
        std::printf("  [%d] '%s' (%s): misaki %s, ours %s\n", r.index, t.text.c_str(), t.tag.c_str(),
                    t.phonemes.c_str(), ours[found].phonemes.c_str());
    }
  }
}

// texts.txt: every fifth text held out; texts_license.txt: all held out.
void agreement_test(Lang lang, const std::string& reference) {
  NEED_MODEL(lang);
  const auto ref = read_reference(reference + ".tsv");
  const auto license = read_reference(reference + "_license.tsv");
  ASSERT_GT(ref.size(), 90u) << reference;
  ASSERT_GT(license.size(), 20u) << reference;
  Agreement tuned, held_out;
  const bool print = std::getenv("SOTTO_G2P_MISSES") != nullptr;
  compare(*g2p, ref, false, tuned, held_out, print);
  compare(*g2p, license, true, tuned, held_out, print);
  std::printf(
      "[ g2p     ] %s: lexicon words identical to misaki: tuned %d/%d (%.1f%%), held out %d/%d (%.1f%%)\n",
      reference.c_str(), tuned.same, tuned.total, 100 * tuned.share(), held_out.same, held_out.total,
      100 * held_out.share());
  EXPECT_GE(tuned.share(), 0.97);
  EXPECT_GE(held_out.share(), 0.97);
  EXPECT_GT(held_out.total, 1200);
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

}  // namespace
}  // namespace sotto::g2p
