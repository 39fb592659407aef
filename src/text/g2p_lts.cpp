#include "text/g2p_lts.h"

#include "text/g2p_lexicon.h"
#include "text/g2p_lts_data.h"
#include "text/g2p_words.h"

namespace sotto::g2p {

namespace {

int base64_digit(char c) {
  if (c >= 'A' && c <= 'Z') return c - 'A';
  if (c >= 'a' && c <= 'z') return c - 'a' + 26;
  if (c >= '0' && c <= '9') return c - '0' + 52;
  return c == '+' ? 62 : 63;
}

// The output index stored for `context` at `level`, or -1. Binary search over fixed-width records.
int find(const LtsTables& t, int level, std::string_view context) {
  const std::string_view recs = t.levels[level];
  const size_t width = context.size() + 2;
  size_t lo = 0, hi = recs.size() / width;
  while (lo < hi) {
    const size_t mid = (lo + hi) / 2;
    const std::string_view key = recs.substr(mid * width, context.size());
    if (key == context) {
      const int i =
          base64_digit(recs[mid * width + width - 2]) * 64 + base64_digit(recs[mid * width + width - 1]);
      return i < static_cast<int>(t.n_outputs) ? i : -1;
    }
    if (key < context)
      lo = mid + 1;
    else
      hi = mid;
  }
  return -1;
}

// One primary stress: the first primary kept (others demoted), or the first secondary promoted, or one put
// before the first vowel.
void fix_stress(std::string& ps) {
  size_t primaries = 0;
  for (char& c : ps)
    if (c == ph::kPrimary && primaries++ > 0) c = ph::kSecondary;
  if (primaries > 0) return;
  for (char& c : ps)
    if (c == ph::kSecondary) {
      c = ph::kPrimary;
      return;
    }
  for (size_t i = 0; i < ps.size(); ++i)
    if (is_vowel(ps[i])) {
      ps.insert(ps.begin() + static_cast<long>(i), ph::kPrimary);
      return;
    }
}

}  // namespace

std::string letters_to_sounds(std::string_view word, bool british) {
  const LtsTables& t = british ? kGbTables : kUsTables;
  std::string letters = "####";
  for (char c : word) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c + 32);
    if (c >= 'a' && c <= 'z') letters.push_back(c);
  }
  const size_t n = letters.size() - 4;
  letters += "####";
  std::string out;
  for (size_t i = 0; i < n; ++i) {
    // Widest context first; level 0 (the letter alone) holds every letter seen in training.
    for (int level = kLtsLevels - 1; level >= 0; --level) {
      const std::string_view ctx(letters.data() + i + 4 - kLtsLeft[level],
                                 static_cast<size_t>(kLtsLeft[level] + 1 + kLtsRight[level]));
      const int o = find(t, level, ctx);
      if (o < 0) continue;
      from_utf8(t.outputs[o], out);
      break;
    }
  }
  fix_stress(out);
  return out;
}

}  // namespace sotto::g2p
