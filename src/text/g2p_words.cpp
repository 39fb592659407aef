// misaki 0.9.4's word rules (misaki/en.py, Lexicon), written again over our lexicon image.
#include "text/g2p_words.h"

#include <cstring>

namespace sotto::g2p {

namespace {

using namespace ph;

bool is_lower(char c) {
  return c >= 'a' && c <= 'z';
}
bool is_upper(char c) {
  return c >= 'A' && c <= 'Z';
}
bool is_alpha(char c) {
  return is_lower(c) || is_upper(c);
}
char lower(char c) {
  return is_upper(c) ? static_cast<char>(c + 32) : c;
}
char upper(char c) {
  return is_lower(c) ? static_cast<char>(c - 32) : c;
}
std::string lowercase(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = lower(c);
  return out;
}
bool all_lower(std::string_view s) {  // Python's s == s.lower()
  for (char c : s)
    if (is_upper(c)) return false;
  return true;
}
bool all_upper(std::string_view s) {  // s == s.upper()
  for (char c : s)
    if (is_lower(c)) return false;
  return true;
}
bool all_alpha(std::string_view s) {  // str.isalpha() on ASCII
  if (s.empty()) return false;
  for (char c : s)
    if (!is_alpha(c)) return false;
  return true;
}
bool ends_with(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}
bool contains(std::string_view s, char c) {
  return s.find(c) != std::string_view::npos;
}
// Python's str.capitalize() on ASCII.
std::string capitalize(std::string_view s) {
  std::string out = lowercase(s);
  if (!out.empty()) out[0] = upper(out[0]);
  return out;
}

int tag_specific(Pos p, Tag& t) {
  switch (p) {
    case Pos::VBD:
      t = Tag::Vbd;
      return 1;
    case Pos::VBN:
      t = Tag::Vbn;
      return 1;
    case Pos::VBP:
      t = Tag::Vbp;
      return 1;
    case Pos::DT:
      t = Tag::Dt;
      return 1;
    default:
      return 0;
  }
}
Tag tag_parent(Pos p) {
  switch (p) {
    case Pos::VB:
    case Pos::VBD:
    case Pos::VBN:
    case Pos::VBP:
    case Pos::VBZ:
    case Pos::VBG:
      return Tag::Verb;
    case Pos::NN:
    case Pos::NNP:
      return Tag::Noun;
    case Pos::JJ:
      return Tag::Adj;
    case Pos::RB:
      return Tag::Adv;
    case Pos::DT:
      return Tag::Dt;
    default:
      return Tag::Default;
  }
}

// US flap-able vowels before a final t (misaki's US_TAUS).
bool is_us_tau(char c) {
  return contains(std::string_view("AIOWYiu"), c) || c == kAe || c == kAlpha || c == kSchwa ||
         c == kEpsilon || c == kSmallI || c == kTurnedR || c == kUpsilon || c == kTurnedV;
}

}  // namespace

bool is_vowel(char c) {
  return contains(std::string_view("AIOQWYaiu"), c) || c == kAe || c == kAlpha || c == kTurnedAlpha ||
         c == kOpenO || c == kSchwa || c == kEpsilon || c == kReversedEpsilon || c == kSmallI ||
         c == kUpsilon || c == kTurnedV || c == kBarredI;
}

bool is_consonant(char c) {
  return contains(std::string_view("bdfhjklmnpstvwz"), c) || c == kEth || c == kEng || c == kG ||
         c == kTurnedR || c == kFlap || c == kEsh || c == kEzh || c == kDezh || c == kTesh || c == kTheta;
}

std::string apply_stress(std::string ps, int s) {
  auto has = [&](char c) { return ps.find(c) != std::string::npos; };
  auto replace_all = [&](char from, char to) {
    std::string out;
    for (char c : ps)
      if (c != from)
        out.push_back(c);
      else if (to)
        out.push_back(to);
    ps = out;
  };
  // A stress mark put first moves to just before the first vowel (misaki's restress).
  auto restress = [&](char mark) {
    for (size_t i = 0; i < ps.size(); ++i)
      if (is_vowel(ps[i])) {
        ps.insert(ps.begin() + static_cast<long>(i), mark);
        return;
      }
  };
  auto any_vowel = [&] {
    for (char c : ps)
      if (is_vowel(c)) return true;
    return false;
  };
  if (s == kNoStress) return ps;
  if (s < -2) {
    replace_all(kPrimary, 0);
    replace_all(kSecondary, 0);
  } else if (s == -2 || ((s == 0 || s == -1) && has(kPrimary))) {
    replace_all(kSecondary, 0);
    replace_all(kPrimary, kSecondary);
  } else if ((s == 0 || s == 1 || s == 2) && !has(kPrimary) && !has(kSecondary)) {
    if (any_vowel()) restress(kSecondary);
  } else if (s >= 2 && !has(kPrimary) && has(kSecondary)) {
    replace_all(kSecondary, kPrimary);
  } else if (s > 2 && !has(kPrimary) && !has(kSecondary)) {
    if (any_vowel()) restress(kPrimary);
  }
  return ps;
}

// misaki grows each dictionary with case variants: a lowercase key also answers its Capitalised form, a
// Capitalised key its lowercase form (keys of two letters or more).
bool WordRules::gold_or_silver(std::string_view word, bool gold_only, Lexicon::Entry& e) const {
  if (hidden_ && hidden_(lowercase(word))) return false;
  for (int t = 0; t < (gold_only ? 1 : 2); ++t) {
    const auto tier = static_cast<Lexicon::Tier>(t);
    if ((e = lex_.find(word, tier))) return true;
    if (word.size() < 2) continue;
    if (all_lower(word)) {
      const std::string cap = capitalize(word);
      if (cap != word && (e = lex_.find(cap, tier))) return true;
    } else if (word == capitalize(word)) {
      if ((e = lex_.find(lowercase(word), tier))) return true;
    }
  }
  return false;
}

bool WordRules::in_lexicon(std::string_view word) const {
  Lexicon::Entry e;
  return gold_or_silver(word, false, e);
}

bool WordRules::is_known(std::string_view word) const {
  if (in_lexicon(word)) return true;
  if (word.size() == 1 && contains("%&+@", word[0])) return true;
  if (!all_alpha(word)) return false;
  if (word.size() == 1) return true;
  Lexicon::Entry e;
  if (all_upper(word) && gold_or_silver(lowercase(word), true, e)) return true;
  return all_upper(word.substr(1));
}

bool WordRules::spell(std::string_view letters, std::string& out) const {
  std::string ps;
  for (char c : letters) {
    if (!is_alpha(c)) continue;
    const char key[1] = {upper(c)};
    const Lexicon::Entry e = lex_.find(std::string_view(key, 1), Lexicon::Tier::Gold);
    if (!e || !lex_.pronunciation(e, Tag::Default, ps)) return false;
  }
  if (ps.empty()) return false;
  ps = apply_stress(ps, 0);
  // The last letter carries the primary stress.
  const size_t last = ps.rfind(kSecondary);
  if (last != std::string::npos) ps[last] = kPrimary;
  out += ps;
  return true;
}

bool WordRules::lookup(std::string_view word_in, Pos pos, int stress2, const NextSound* next,
                       std::string& out) const {
  std::string word(word_in);
  bool is_nnp = false;
  Lexicon::Entry e;
  if (all_upper(word) && !gold_or_silver(word, true, e)) {
    word = lowercase(word);
    is_nnp = pos == Pos::NNP;
  }
  std::string ps;
  bool found = gold_or_silver(word, is_nnp, e);
  if (found) {
    Tag tag = Tag::Default;
    if (e.has_variants()) {
      Tag specific;
      if (next && next->vowel < 0 && lex_.has_tag(e, Tag::None))
        tag = Tag::None;
      else if (tag_specific(pos, specific) && lex_.has_tag(e, specific))
        tag = specific;
      else if (pos == Pos::VBN && lex_.has_tag(e, Tag::Adj))
        tag = Tag::Adj;  // after "is"/"was" our VBN also stands for an adjective ("is invalid")
      else
        tag = tag_parent(pos);
    }
    found = lex_.pronunciation(e, tag, ps);
  }
  if (!found || (is_nnp && ps.find(kPrimary) == std::string::npos)) {
    std::string spelled;
    if (spell(word, spelled)) {
      out += spelled;
      return true;
    }
    if (!found) return false;
  }
  out += apply_stress(ps, stress2);
  return true;
}

bool WordRules::special_case(std::string_view word, Pos pos, NextSound next, std::string& out) const {
  auto gold = [&](std::string_view w, Tag tag = Tag::Default) {
    const Lexicon::Entry e = lex_.find(w, Lexicon::Tier::Gold);
    return lex_.pronunciation(e, tag, out);
  };
  if (word.size() == 1 && contains("%&+@", word[0])) {
    constexpr std::string_view kNames[] = {"percent", "and", "plus", "at"};
    return lookup(kNames[std::string_view("%&+@").find(word[0])], Pos::X, kNoStress, &next, out);
  }
  // Initialisms written with dots ("U.S.", "p.m."): letters spelled.
  if (word.find('.') != std::string_view::npos) {
    std::string_view trimmed = word;
    while (!trimmed.empty() && trimmed.front() == '.') trimmed.remove_prefix(1);
    while (!trimmed.empty() && trimmed.back() == '.') trimmed.remove_suffix(1);
    bool letters_only = true, short_parts = true;
    size_t part = 0;
    for (char c : word) {
      if (c == '.') {
        part = 0;
      } else {
        letters_only &= is_alpha(c);
        short_parts &= ++part < 3;
      }
    }
    if (trimmed.find('.') != std::string_view::npos && letters_only && short_parts) return spell(word, out);
  }
  if (word == "a" || word == "A") {
    out += pos == Pos::DT ? std::string(1, kTurnedA) : std::string{kPrimary, 'A'};
    return true;
  }
  if (word == "am" || word == "Am" || word == "AM") {
    if (pos == Pos::NN || pos == Pos::NNP) return spell(word, out);
    if (next.vowel < 0 || word != "am") return gold("am");
    out += kTurnedA;
    out += 'm';
    return true;
  }
  if (word == "an" || word == "An" || word == "AN") {
    if (word == "AN" && (pos == Pos::NN || pos == Pos::NNP)) return spell(word, out);
    out += kTurnedA;
    out += 'n';
    return true;
  }
  if (word == "I" && pos == Pos::PRP) {
    out += kSecondary;
    out += 'I';
    return true;
  }
  if ((word == "by" || word == "By" || word == "BY") && pos == Pos::RB) {
    out += 'b';
    out += kPrimary;
    out += 'I';
    return true;
  }
  if (word == "to" || word == "To" || (word == "TO" && (pos == Pos::TO || pos == Pos::IN))) {
    if (next.vowel < 0) return gold("to");
    out += 't';
    out += next.vowel ? kUpsilon : kSchwa;
    return true;
  }
  if (word == "in" || word == "In" || (word == "IN" && pos != Pos::NNP)) {
    if (next.vowel < 0 || pos != Pos::IN) out += kPrimary;
    out += kSmallI;
    out += 'n';
    return true;
  }
  if (word == "the" || word == "The" || (word == "THE" && pos == Pos::DT)) {
    out += kEth;
    out += next.vowel == 1 ? 'i' : kSchwa;
    return true;
  }
  if (pos == Pos::IN && (word == "vs" || word == "VS" || word == "vs." || word == "Vs" || word == "Vs.")) {
    return lookup("versus", Pos::X, kNoStress, &next, out);
  }
  if (word == "used" || word == "Used" || word == "USED") {
    const bool past = (pos == Pos::VBD || pos == Pos::JJ) && next.to;
    return gold("used", past ? Tag::Vbd : Tag::Default);
  }
  return false;
}

void WordRules::add_s(std::string& ps) const {
  if (ps.empty()) return;
  const char c = ps.back();
  if (contains("ptkf", c) || c == kTheta) {
    ps += 's';
  } else if (contains("sz", c) || c == kEsh || c == kEzh || c == kTesh || c == kDezh) {
    ps += british() ? kSmallI : kBarredI;
    ps += 'z';
  } else {
    ps += 'z';
  }
}

void WordRules::add_ed(std::string& ps) const {
  if (ps.empty()) return;
  const char c = ps.back();
  if (contains("pkfs", c) || c == kTheta || c == kEsh || c == kTesh) {
    ps += 't';
  } else if (c == 'd') {
    ps += british() ? kSmallI : kBarredI;
    ps += 'd';
  } else if (c != 't') {
    ps += 'd';
  } else if (british() || ps.size() < 2) {
    ps += kSmallI;
    ps += 'd';
  } else if (is_us_tau(ps[ps.size() - 2])) {
    ps.back() = kFlap;
    ps += kBarredI;
    ps += 'd';
  } else {
    ps += kBarredI;
    ps += 'd';
  }
}

bool WordRules::add_ing(std::string& ps) const {
  if (ps.empty()) return false;
  if (british()) {
    if (ps.back() == kSchwa || ps.back() == kLong) return false;
  } else if (ps.size() > 1 && ps.back() == 't' && is_us_tau(ps[ps.size() - 2])) {
    ps.back() = kFlap;
  }
  ps += kSmallI;
  ps += kEng;
  return true;
}

bool WordRules::stem_s(std::string_view w, Pos pos, int stress2, NextSound next, std::string& out) const {
  if (w.size() < 3 || w.back() != 's') return false;
  std::string stem;
  if (!ends_with(w, "ss") && is_known(w.substr(0, w.size() - 1)))
    stem = w.substr(0, w.size() - 1);
  else if ((ends_with(w, "'s") || (w.size() > 4 && ends_with(w, "es") && !ends_with(w, "ies"))) &&
           is_known(w.substr(0, w.size() - 2)))
    stem = w.substr(0, w.size() - 2);
  else if (w.size() > 4 && ends_with(w, "ies") && is_known(std::string(w.substr(0, w.size() - 3)) + "y"))
    stem = std::string(w.substr(0, w.size() - 3)) + "y";
  else
    return false;
  std::string ps;
  if (!lookup(stem, pos, stress2, &next, ps) || ps.empty()) return false;
  add_s(ps);
  out += ps;
  return true;
}

bool WordRules::stem_ed(std::string_view w, Pos pos, int stress2, NextSound next, std::string& out) const {
  if (w.size() < 4 || w.back() != 'd') return false;
  std::string stem;
  if (!ends_with(w, "dd") && is_known(w.substr(0, w.size() - 1)))
    stem = w.substr(0, w.size() - 1);
  else if (w.size() > 4 && ends_with(w, "ed") && !ends_with(w, "eed") && is_known(w.substr(0, w.size() - 2)))
    stem = w.substr(0, w.size() - 2);
  else
    return false;
  std::string ps;
  if (!lookup(stem, pos, stress2, &next, ps) || ps.empty()) return false;
  add_ed(ps);
  out += ps;
  return true;
}

bool WordRules::stem_ing(std::string_view w, Pos pos, int stress2, NextSound next, std::string& out) const {
  if (w.size() < 5 || !ends_with(w, "ing")) return false;
  const std::string_view base = w.substr(0, w.size() - 3);
  std::string stem;
  auto doubled = [&] {  // ([bcdgklmnprstvxz])\1ing$ or cking$
    if (w.size() < 6) return false;
    const char a = w[w.size() - 5], b = w[w.size() - 4];
    return (a == b && contains("bcdgklmnprstvxz", a)) || (a == 'c' && b == 'k');
  };
  if (w.size() > 5 && is_known(base))
    stem = base;
  else if (is_known(std::string(base) + "e"))
    stem = std::string(base) + "e";
  else if (w.size() > 5 && doubled() && is_known(w.substr(0, w.size() - 4)))
    stem = w.substr(0, w.size() - 4);
  else
    return false;
  std::string ps;
  if (!lookup(stem, pos, stress2, &next, ps) || ps.empty()) return false;
  if (!add_ing(ps)) return false;
  out += ps;
  return true;
}

bool WordRules::get_word(std::string_view word_in, Pos pos, int stress2, NextSound next,
                         std::string& out) const {
  if (special_case(word_in, pos, next, out)) return true;
  std::string word(word_in);
  const std::string wl = lowercase(word);
  if (word.size() > 1 && word != wl && (pos != Pos::NNP || word.size() > 7) && !in_lexicon(word) &&
      (all_upper(word) || all_lower(std::string_view(word).substr(1)))) {
    std::string no_apostrophe;
    for (char c : word)
      if (c != '\'') no_apostrophe.push_back(c);
    std::string scratch;
    if (all_alpha(no_apostrophe) &&
        (in_lexicon(wl) || stem_s(wl, pos, stress2, next, scratch) ||
         stem_ed(wl, pos, stress2, next, scratch) || stem_ing(wl, pos, stress2, next, scratch)))
      word = wl;
  }
  if (is_known(word)) return lookup(word, pos, stress2, &next, out);
  if (ends_with(word, "s'") && is_known(word.substr(0, word.size() - 2) + "'s"))
    return lookup(word.substr(0, word.size() - 2) + "'s", pos, stress2, &next, out);
  if (ends_with(word, "'") && is_known(word.substr(0, word.size() - 1)))
    return lookup(word.substr(0, word.size() - 1), pos, stress2, &next, out);
  if (stem_s(word, pos, stress2, next, out)) return true;
  if (stem_ed(word, pos, stress2, next, out)) return true;
  return stem_ing(word, pos, stress2 == kNoStress ? 1 : stress2, next, out);
}

// A lexicon word's own phonemes (no spelling, no stress change): what tools/g2p_affixes.py learned from.
bool WordRules::known_stem(const std::string& stem, std::string& ps) const {
  ps.clear();
  Lexicon::Entry e;
  return gold_or_silver(stem, false, e) && lex_.pronunciation(e, Tag::Default, ps) && !ps.empty();
}

// As tools/g2p_affixes.py's apply(): the rules come grouped by affix, suffixes longest first, then prefixes.
bool WordRules::affixes(std::string_view word, std::string& out) const {
  const std::vector<Lexicon::AffixRule>& rules = lex_.affixes();
  if (rules.empty() || word.size() > 64) return false;
  const std::string w = lowercase(word);
  for (char c : w)
    if (!is_lower(c)) return false;
  std::string ps;
  // The first stem the lexicon knows: the word less the suffix, that + e (a vowel suffix), a final i read as
  // y, a doubled final consonant made single.
  auto suffix_stem = [&](std::string_view suffix) {
    const std::string base = w.substr(0, w.size() - suffix.size());
    if (base.size() < 2 || (suffix == "s" && base.back() == 's')) return false;
    if (known_stem(base, ps)) return true;
    if (contains("aeiouy", suffix[0]) && known_stem(base + "e", ps)) return true;
    if (base.back() == 'i' && known_stem(base.substr(0, base.size() - 1) + "y", ps)) return true;
    const size_t n = base.size();
    return n >= 3 && base[n - 1] == base[n - 2] && contains("bdgklmnprtvz", base[n - 1]) &&
           known_stem(base.substr(0, n - 1), ps);
  };
  // S: the first vowel has the primary stress, else U; lowercase when the first sound is k or ɡ.
  auto signature = [](std::string_view p) {
    char s = 'U';
    for (size_t i = 0; i < p.size(); ++i)
      if (is_vowel(p[i])) {
        s = i > 0 && p[i - 1] == kPrimary ? 'S' : 'U';
        break;
      }
    size_t first = 0;
    while (first < p.size() && (p[first] == kPrimary || p[first] == kSecondary)) ++first;
    const bool velar = first < p.size() && (p[first] == 'k' || p[first] == kG);
    return velar ? static_cast<char>(s + 32) : s;
  };
  for (size_t i = 0; i < rules.size();) {
    size_t end = i;
    while (end < rules.size() && rules[end].prefix == rules[i].prefix &&
           rules[end].letters == rules[i].letters)
      ++end;
    const std::string_view letters = rules[i].letters;
    if (!rules[i].prefix && w.size() >= letters.size() + 2 && ends_with(w, letters) && suffix_stem(letters)) {
      for (size_t k = i; k < end; ++k) {
        const Lexicon::AffixRule& r = rules[k];
        if ((r.key != '*' && r.key != ps.back()) || ps.size() <= r.drop) continue;
        out += std::string_view(ps).substr(0, ps.size() - r.drop);
        out += r.add;
        return true;
      }
    } else if (rules[i].prefix && w.size() >= letters.size() + 3 &&
               w.compare(0, letters.size(), letters) == 0 && known_stem(w.substr(letters.size()), ps)) {
      const char sig = signature(ps);
      for (size_t k = i; k < end; ++k)
        if (rules[k].key == sig) {
          out += rules[k].add;
          out += ps;
          return true;
        }
    }
    i = end;
  }
  return false;
}

bool WordRules::word(std::string_view word, Pos pos, NextSound next, std::string& out) const {
  if (word.empty() || word.size() > 64) return false;
  const int stress2 = all_lower(word) ? kNoStress : all_upper(word) ? 4 : 1;
  return get_word(word, pos, stress2, next, out);
}

}  // namespace sotto::g2p
