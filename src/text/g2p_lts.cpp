#include "text/g2p_lts.h"

#include <cstring>

#include "text/g2p_lexicon.h"
#include "text/g2p_words.h"

namespace sotto::g2p {

namespace {

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

Result<LetterToSound> LetterToSound::load(std::span<const uint8_t> b, std::string_view name) {
  LetterToSound lts;
  if (b.empty()) return lts;
  size_t pos = 0;
  bool bad = false;
  auto u32 = [&] {
    if (bad || b.size() - pos < 4) return (bad = true), 0u;
    const uint32_t v = b[pos] | (b[pos + 1] << 8) | (b[pos + 2] << 16) | (uint32_t(b[pos + 3]) << 24);
    pos += 4;
    return v;
  };
  if (b.size() < 12 || std::memcmp(b.data(), "SOTTOLTS", 8) != 0)
    return error("g2p: ", name, ": the letter-to-sound tables have no SOTTOLTS magic");
  pos = 8;
  if (const uint32_t version = u32(); version != 1)
    return error("g2p: ", name, ": letter-to-sound tables of version ", version, ", expected 1");
  const uint32_t n_outputs = u32();
  if (n_outputs > 65536)
    return error("g2p: ", name, ": ", n_outputs, " letter-to-sound outputs (at most 65536)");
  for (uint32_t i = 0; i < n_outputs && !bad; ++i) {
    if (pos >= b.size() || b.size() - pos - 1 < b[pos]) {
      bad = true;
      break;
    }
    std::string ps;
    if (!from_utf8(std::string_view(reinterpret_cast<const char*>(b.data() + pos + 1), b[pos]), ps))
      return error("g2p: ", name, ": letter-to-sound output ", i, " has a symbol sotto does not know");
    lts.outputs_.push_back(std::move(ps));
    pos += 1 + b[pos];
  }
  const uint32_t n_levels = u32();
  if (n_levels > 16) return error("g2p: ", name, ": ", n_levels, " letter-to-sound levels (at most 16)");
  for (uint32_t l = 0; l < n_levels && !bad; ++l) {
    if (b.size() - pos < 2) {
      bad = true;
      break;
    }
    Level level;
    level.left = b[pos];
    level.right = b[pos + 1];
    pos += 2;
    level.n_records = u32();
    if (level.left > 8 || level.right > 8)
      return error("g2p: ", name, ": letter-to-sound level ", l, " is wider than 8 letters a side");
    const size_t width = static_cast<size_t>(level.left + 1 + level.right) + 2;
    if (bad || level.n_records > (b.size() - pos) / width) {
      bad = true;
      break;
    }
    level.offset = lts.records_.size();
    lts.records_.insert(lts.records_.end(), b.begin() + static_cast<long>(pos),
                        b.begin() + static_cast<long>(pos + level.n_records * width));
    pos += level.n_records * width;
    lts.levels_.push_back(level);
  }
  if (bad) return error("g2p: ", name, ": the letter-to-sound tables end early");
  return lts;
}

// The output index stored for `context` at `level`, or -1: binary search over fixed-width records.
int LetterToSound::find(const Level& level, std::string_view context) const {
  const size_t width = context.size() + 2;
  size_t lo = 0, hi = level.n_records;
  while (lo < hi) {
    const size_t mid = (lo + hi) / 2;
    const uint8_t* rec = records_.data() + level.offset + mid * width;
    const int c = std::memcmp(rec, context.data(), context.size());
    if (c == 0) {
      const int i = rec[width - 2] | (rec[width - 1] << 8);
      return i < static_cast<int>(outputs_.size()) ? i : -1;
    }
    if (c < 0)
      lo = mid + 1;
    else
      hi = mid;
  }
  return -1;
}

std::string LetterToSound::read(std::string_view word) const {
  std::string letters = "########";
  for (char c : word) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c + 32);
    if (c >= 'a' && c <= 'z') letters.push_back(c);
  }
  const size_t n = letters.size() - 8;
  letters += "########";
  std::string out;
  for (size_t i = 0; i < n; ++i) {
    // Widest context first; the narrowest level (the letter alone) holds every letter seen in training.
    for (size_t l = levels_.size(); l-- > 0;) {
      const Level& level = levels_[l];
      const std::string_view ctx(letters.data() + i + 8 - level.left,
                                 static_cast<size_t>(level.left + 1 + level.right));
      const int o = find(level, ctx);
      if (o < 0) continue;
      out += outputs_[static_cast<size_t>(o)];
      break;
    }
  }
  fix_stress(out);
  return out;
}

}  // namespace sotto::g2p
