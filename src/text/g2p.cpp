// The G2P's pipeline: clean text -> tokens (g2p_text.cpp) -> tags guessed from neighbours -> phonemes right to
// left (a word's reading can depend on the next word's first sound) -> one string, or one per sentence.
#include "text/g2p.h"

#include <algorithm>

#include "text/g2p_numbers.h"
#include "text/g2p_text.h"
#include "text/g2p_words.h"

namespace sotto::g2p {

namespace {

bool is_alpha(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}
bool is_upper(char c) {
  return c >= 'A' && c <= 'Z';
}
bool is_lower(char c) {
  return c >= 'a' && c <= 'z';
}
bool is_digit(char c) {
  return c >= '0' && c <= '9';
}
std::string lowercase(std::string_view s) {
  std::string out(s);
  for (char& c : out)
    if (is_upper(c)) c = static_cast<char>(c + 32);
  return out;
}
bool in(std::string_view w, std::initializer_list<std::string_view> set) {
  for (std::string_view s : set)
    if (w == s) return true;
  return false;
}

// ---------------------------------------------------------------------------------------------------------
// Tags from neighbours: the few distinctions misaki's lexicon keys on (heteronyms, "a", "that", "used", "in").

bool is_determiner(std::string_view w) {
  return in(w, {"the",   "a",    "an",      "this",  "these", "those", "my",   "your",
                "his",   "her",  "its",     "our",   "their", "some",  "any",  "no",
                "every", "each", "another", "whose", "which", "what",  "one's"});
}
bool is_modal(std::string_view w) {
  return in(w, {"will",      "would",   "can",  "could",  "shall", "should",  "may",      "might",
                "must",      "'ll",     "'d",   "won't",  "can't", "cannot",  "couldn't", "wouldn't",
                "shouldn't", "mustn't", "do",   "does",   "did",   "don't",   "doesn't",  "didn't",
                "let's",     "please",  "i'll", "you'll", "we'll", "they'll", "he'll",    "she'll",
                "i'd",       "you'd",   "we'd", "they'd", "to",    "gonna",   "wanna",    "gotta"});
}
bool is_have(std::string_view w) {
  return in(w, {"have", "has", "had", "having", "'ve", "i've", "you've", "we've", "they've", "haven't",
                "hasn't", "hadn't"});
}
bool is_be(std::string_view w) {
  return in(w,
            {"is",     "are",     "was", "were",   "be",    "been",    "being", "am",   "isn't", "aren't",
             "wasn't", "weren't", "i'm", "you're", "we're", "they're", "it's",  "he's", "she's", "that's"});
}
bool is_subject(std::string_view w) {
  return in(w, {"i", "you", "we", "they", "he", "she", "it", "who"});
}
bool is_preposition(std::string_view w) {
  return in(w, {"of",      "in",     "on",     "at",      "for",     "with",    "from",    "into",
                "about",   "over",   "under",  "after",   "before",  "between", "through", "during",
                "without", "within", "across", "against", "among",   "around",  "behind",  "beyond",
                "near",    "upon",   "onto",   "toward",  "towards", "via",     "per"});
}

void guess_tags(std::vector<Token>& toks) {
  const size_t n = toks.size();
  // Sentence starts, and whether the text has lowercase at all (an all-caps text is not all names).
  bool any_lower = false;
  for (const Token& t : toks)
    for (char c : t.text) any_lower |= is_lower(c);
  bool start = true;
  for (Token& t : toks) {
    t.sentence_start = start && t.kind == Token::Kind::Word;
    if (t.kind == Token::Kind::Word || t.kind == Token::Kind::Ready) start = false;
    if (t.kind == Token::Kind::Punct && (t.text == "." || t.text == "!" || t.text == "?" || t.text == "\x9c"))
      start = true;
  }
  auto word_at = [&](size_t i) -> std::string {
    if (i >= n || toks[i].kind != Token::Kind::Word) return {};
    return lowercase(toks[i].text);
  };
  auto ends_phrase = [&](size_t i) {  // nothing but punctuation (or the end) after token i
    return i + 1 >= n ||
           (toks[i + 1].kind == Token::Kind::Punct && toks[i + 1].text != "\x9d" && toks[i + 1].text != "(");
  };
  for (size_t i = 0; i < n; ++i) {
    Token& t = toks[i];
    if (t.kind != Token::Kind::Word) continue;
    const std::string w = lowercase(t.text);
    const std::string prev = i > 0 ? word_at(i - 1) : std::string{};
    const std::string next = word_at(i + 1);
    const bool caps = t.text.size() > 1 && is_upper(t.text[0]) && is_upper(t.text[1]);
    if (w == "i" && t.text == "I") {
      t.pos = Pos::PRP;
    } else if (w == "a") {
      t.pos = ends_phrase(i) ? Pos::NN : Pos::DT;
    } else if (w == "that") {
      // Determiner ("that book", "like that.") or pronoun, versus conjunction or relative ("said that he",
      // "the book that changed").
      const bool complementizer =
          in(prev, {"say",      "said",       "says",       "think",     "thought", "know",      "knew",
                    "believe",  "believed",   "hope",       "hoped",     "feel",    "felt",      "so",
                    "such",     "now",        "given",      "except",    "realize", "realized",  "mean",
                    "means",    "meant",      "show",       "shows",     "showed",  "ensure",    "suggest",
                    "suggests", "suggested",  "claim",      "claimed",   "note",    "noted",     "found",
                    "find",     "told",       "tell",       "agree",     "agreed",  "sure",      "clear",
                    "fact",     "idea",       "news",       "reported",  "way",     "than",      "us",
                    "him",      "them",       "expected",   "decided",   "learned", "heard",     "wished",
                    "argued",   "insisted",   "announced",  "explained", "added",   "warned",    "admitted",
                    "promised", "understood", "remembered", "assumed",   "stated",  "confirmed", "revealed"});
      const bool next_is_subject =
          is_subject(next) || in(next, {"someone", "somebody", "everyone", "everybody", "nobody", "people",
                                        "something", "nothing", "everything"});
      // "the team that won", "any name that identifies": after a determiner and its noun, a relative.
      const std::string prev2 = i >= 2 ? word_at(i - 2) : std::string{};
      const bool after_noun =
          !prev.empty() && !ends_phrase(i) && !is_preposition(prev) &&
          (is_determiner(prev2) || in(prev2, {"all", "any", "many", "few", "several", "same", "other", "only",
                                              "best", "first", "last"}));
      const bool next_is_content =
          !next.empty() && !next_is_subject && !is_determiner(next) && !is_be(next) && !is_modal(next) &&
          !is_have(next) && !is_preposition(next) &&
          !in(next, {"there", "and", "or", "but", "if", "not", "me", "him", "us", "them"}) &&
          !(next.size() > 3 && next.substr(next.size() - 2) == "ed");
      const bool question =
          in(prev, {"is", "was", "are", "does", "did"}) && i >= 1 && toks[i - 1].sentence_start;
      const bool dt =
          !after_noun && prev != "all" &&
          (ends_phrase(i) || t.sentence_start || question ||
           in(next, {"is", "was", "will", "would", "'s", "'ll"}) ||
           (!complementizer &&
            (is_preposition(prev) || in(prev, {"like", "do", "did", "does", "about", "is", "was"})) &&
            !next_is_subject && !is_determiner(next) && next != "there") ||
           (!complementizer && next_is_content && !is_determiner(prev) && prev != "and"));
      t.pos = dt ? Pos::DT : Pos::IN;
    } else if (is_determiner(w)) {
      t.pos = Pos::DT;
    } else if (w == "by") {
      t.pos = ends_phrase(i) ? Pos::RB : Pos::IN;
    } else if (w == "in") {
      t.pos = ends_phrase(i) ? Pos::RP : Pos::IN;
    } else if (w == "to") {
      t.pos = Pos::TO;
    } else if (is_preposition(w)) {
      t.pos = Pos::IN;
    } else if (w == "used") {
      t.pos = next == "to" && !is_be(prev) ? Pos::VBD : Pos::VBN;
    } else if ((w == "am" || w == "pm") && caps) {
      t.pos = Pos::NN;
    } else if (caps && any_lower) {
      t.pos = Pos::NNP;
    } else if (is_upper(t.text[0]) && !t.sentence_start && any_lower) {
      t.pos = Pos::NNP;
    } else if (is_modal(prev)) {
      t.pos = Pos::VB;
    } else if (is_have(prev)) {
      t.pos = Pos::VBN;
    } else if (is_be(prev)) {
      t.pos = Pos::VBN;  // participles ("was read") and adjectives; lexicon keys VBN before ADJ
    } else if (in(prev, {"i", "you", "we", "they"})) {
      t.pos = Pos::VBP;
    } else if (w.size() > 2 && w.back() == 's' && i > 0 && toks[i - 1].pos == Pos::NNP) {
      t.pos = Pos::VBZ;  // "Smith lives"
    } else if (in(prev, {"he", "she", "it", "who"})) {
      t.pos = Pos::VBD;  // "she read", "he wound": past reads are the common case in prose
    } else if (in(prev, {"and", "or"}) && i >= 2 && toks[i - 2].kind == Token::Kind::Word) {
      t.pos = toks[i - 2].pos;  // "is empty or invalid": coordinated words share a tag
    } else if (in(prev, {"him", "them", "me", "us"})) {
      t.pos = Pos::VB;  // "watched him tear"
    } else if (is_determiner(prev) || is_preposition(prev) ||
               in(prev,
                  {"first", "second", "third", "last", "next", "new", "big", "small", "large", "great",
                   "sharp", "slight", "huge", "major", "minor", "further", "final", "annual", "recent"})) {
      t.pos = Pos::NN;
    } else if (t.sentence_start &&
               (is_determiner(next) || in(next, {"me", "him", "her", "us", "them", "it"}))) {
      t.pos = Pos::VB;  // imperatives: "Close the door", "Record it"
    }
  }
}

// ---------------------------------------------------------------------------------------------------------
// Words made of parts (hyphens, camelCase, apostrophes, dots): misaki's subtokens, longest known span first.

struct Part {
  std::string text;
  std::string ps;
  bool done = false;
  bool junk = false;  // - _ ' . only: silent
};

std::vector<Part> split_parts(std::string_view w) {
  std::vector<Part> parts;
  size_t i = 0;
  while (i < w.size()) {
    size_t j = i + 1;
    const char c = w[i];
    if (is_alpha(c)) {
      // Letters with inner apostrophes; a cut where a lowercase letter meets an uppercase one.
      while (j < w.size()) {
        if (is_alpha(w[j])) {
          if (is_lower(w[j - 1]) && is_upper(w[j])) break;
          ++j;
        } else if (w[j] == '\'' && j + 1 < w.size() && is_alpha(w[j + 1])) {
          j += 2;
        } else {
          break;
        }
      }
    } else if (is_digit(c)) {
      while (j < w.size() && is_digit(w[j])) ++j;
    } else if (c == '-' || c == '_') {
      while (j < w.size() && (w[j] == '-' || w[j] == '_')) ++j;
    } else if (c == '\'') {
      while (j < w.size() && w[j] == '\'') ++j;
    }
    Part p;
    p.text = std::string(w.substr(i, j - i));
    p.junk = !is_alpha(c) && !is_digit(c) &&
             (c == '-' || c == '_' || c == '\'' || c == '.' || c == ',' || c == '/');
    parts.push_back(std::move(p));
    i = j;
  }
  return parts;
}

int stress_weight(std::string_view ps) {
  int w = 0;
  for (char c : ps)
    w += (c == 'A' || c == 'I' || c == 'O' || c == 'Q' || c == 'W' || c == 'Y' || c == ph::kDezh ||
          c == ph::kTesh)
             ? 2
             : 1;
  return w;
}

NextSound next_after(NextSound next, std::string_view ps) {
  for (char c : ps) {
    if (is_vowel(c)) return NextSound{1, false};
    if (is_consonant(c)) return NextSound{0, false};
    if (c == ';' || c == ':' || c == ',' || c == '.' || c == '!' || c == '?' || c == ph::kEmDash ||
        c == ph::kEllipsis)
      return NextSound{-1, false};
  }
  return NextSound{next.vowel, false};
}

class Phonemizer {
 public:
  Phonemizer(const Lexicon& lex, const LetterToSound& lts) : rules_(lex), lts_(lts) {}

  std::vector<Token> run(std::string_view text) const {
    std::vector<Token> toks = tokenize(clean_text(text), rules_);
    guess_tags(toks);
    NextSound next;
    for (size_t i = toks.size(); i-- > 0;) {
      Token& t = toks[i];
      if (t.kind == Token::Kind::Word) word(t, next);
      NextSound after = next_after(next, t.ps);
      const std::string w = lowercase(t.text);
      after.to = t.kind == Token::Kind::Word && (t.text == "to" || t.text == "To" || t.text == "TO");
      next = after;
    }
    return toks;
  }

  const WordRules& rules() const { return rules_; }

 private:
  void word(Token& t, NextSound next) const {
    if (rules_.word(t.text, t.pos, next, t.ps)) {
      t.source = Source::Lexicon;
      return;
    }
    std::vector<Part> parts = split_parts(t.text);
    if (parts.size() == 1) {
      t.source = fallback(t.text, t.ps);
      return;
    }
    // Right to left: the longest run of parts ending at `right` that the lexicon knows; a part alone
    // otherwise. Spans are capped at 8 parts so a pathological word stays linear.
    size_t right = parts.size();
    bool any_lts = false;
    NextSound ctx = next;
    while (right > 0) {
      bool found = false;
      for (size_t left = right > 8 ? right - 8 : 0; left < right; ++left) {
        if (right - left == 1 && parts[left].junk) break;
        std::string merged;
        for (size_t k = left; k < right; ++k) merged += parts[k].text;
        std::string ps;
        if (right - left < parts.size() && !is_digit(merged[0]) && rules_.word(merged, t.pos, ctx, ps)) {
          parts[left].ps = ps;
          parts[left].done = true;
          for (size_t k = left + 1; k < right; ++k) parts[k].done = true;
          ctx = next_after(ctx, ps);
          right = left;
          found = true;
          break;
        }
      }
      if (found) continue;
      Part& p = parts[right - 1];
      if (!p.junk) {
        if (is_digit(p.text[0])) {
          const std::string& d = p.text;
          number_ps(
              d.size() > 3 || (d.size() > 1 && d[0] == '0') ? digit_words(d) : cardinal_words(to_u64(d)),
              p.ps);
        } else {
          any_lts |= fallback(p.text, p.ps) == Source::LetterToSound;
        }
      }
      p.done = true;
      ctx = next_after(ctx, p.ps);
      --right;
    }
    const bool spaced = resolve(parts, t.text);
    for (const Part& p : parts) {
      if (p.ps.empty()) continue;
      if (!t.ps.empty() && spaced) t.ps.push_back(' ');
      t.ps += p.ps;
    }
    t.source = any_lts ? Source::LetterToSound : Source::Rule;
  }

  static uint64_t to_u64(std::string_view d) {
    uint64_t v = 0;
    for (char c : d) v = v * 10 + static_cast<uint64_t>(c - '0');
    return v;
  }

  void number_ps(std::string_view words, std::string& out) const {
    size_t i = 0;
    while (i < words.size()) {
      size_t sp = words.find(' ', i);
      if (sp == std::string_view::npos) sp = words.size();
      std::string ps;
      if (rules_.lookup(words.substr(i, sp - i), Pos::X, kNoStress, nullptr, ps) && !ps.empty()) {
        if (!out.empty()) out.push_back(' ');
        out += ps;
      }
      i = sp + 1;
    }
  }

  // Words the lexicon and its rules do not know: short all-caps words and words without vowel letters are
  // spelled (initialisms), the rest go to the affix rules, then the letter-to-sound model. Says which read it.
  Source fallback(std::string_view w, std::string& out) const {
    size_t letters = 0, vowels = 0, caps = 0;
    for (char c : w) {
      if (!is_alpha(c)) continue;
      ++letters;
      caps += is_upper(c);
      const char l = lowercase(std::string_view(&c, 1))[0];
      vowels += l == 'a' || l == 'e' || l == 'i' || l == 'o' || l == 'u' || l == 'y';
    }
    if (letters == 0) return Source::LetterToSound;
    if ((caps == letters && letters <= 5) || (vowels == 0 && letters <= 5) || letters == 1) {
      if (rules_.spell(w, out)) return Source::Spelled;
    }
    if (letters > 40) {  // not a word: spell it (bounded work, still speakable)
      rules_.spell(w, out);
      return Source::Spelled;
    }
    if (rules_.affixes(w, out)) return Source::Affix;
    out += lts_.read(w);
    return Source::LetterToSound;
  }

  // misaki's resolve_tokens: parts of one word are joined with spaces when the word mixes letters with digits
  // or symbols; otherwise joined as one word, with the weaker half of several primary stresses demoted.
  static bool resolve(std::vector<Part>& parts, std::string_view text) {
    int classes = 0;
    for (char c : text) {
      if (c == '\'' || c == ',' || c == '-' || c == '.' || c == '_' || c == '/') continue;
      classes |= is_alpha(c) ? 1 : is_digit(c) ? 2 : 4;
    }
    const bool prespace =
        text.find('/') != std::string_view::npos || (classes != 1 && classes != 2 && classes != 4);
    if (prespace) return true;
    struct Index {
      bool primary;
      int weight;
      size_t i;
    };
    std::vector<Index> idx;
    for (size_t i = 0; i < parts.size(); ++i)
      if (!parts[i].ps.empty())
        idx.push_back({parts[i].ps.find(ph::kPrimary) != std::string::npos, stress_weight(parts[i].ps), i});
    if (idx.size() == 2 && parts[idx[0].i].text.size() == 1) {
      parts[idx[1].i].ps = apply_stress(parts[idx[1].i].ps, -1);
      return false;
    }
    size_t primaries = 0;
    for (const Index& x : idx) primaries += x.primary;
    if (idx.size() < 2 || primaries <= (idx.size() + 1) / 2) return false;
    std::sort(idx.begin(), idx.end(), [](const Index& a, const Index& b) {
      if (a.primary != b.primary) return a.primary < b.primary;
      if (a.weight != b.weight) return a.weight < b.weight;
      return a.i < b.i;
    });
    for (size_t k = 0; k < idx.size() / 2; ++k) parts[idx[k].i].ps = apply_stress(parts[idx[k].i].ps, -1);
    return false;
  }

  WordRules rules_;
  const LetterToSound& lts_;
};

// The tokens' phonemes as one string (phoneme bytes): each token's, a space where the text had one.
std::string join(const std::vector<Token>& toks) {
  std::string out;
  for (const Token& t : toks) {
    out += t.ps;
    if (t.space_after && !out.empty() && out.back() != ' ') out.push_back(' ');
  }
  while (!out.empty() && out.back() == ' ') out.pop_back();
  return out;
}

// Cuts a phoneme string (UTF-8) into pieces of at most `max` code points: after the last . ! ? … that fits,
// else ; :, else , —, else a space, else anywhere on a character boundary.
void cut(std::string_view ps, size_t max, std::vector<std::string>& out) {
  std::vector<uint32_t> cps;
  std::vector<size_t> offsets;  // byte offset of each code point, and the end
  for (size_t i = 0; i < ps.size();) {
    const auto lead = static_cast<unsigned char>(ps[i]);
    const size_t n = lead < 0x80 ? 1 : lead < 0xE0 ? 2 : lead < 0xF0 ? 3 : 4;
    uint32_t cp = n == 1 ? lead : lead & (0xFF >> (n + 1));
    for (size_t k = 1; k < n && i + k < ps.size(); ++k)
      cp = (cp << 6) | (static_cast<unsigned char>(ps[i + k]) & 0x3F);
    cps.push_back(cp);
    offsets.push_back(i);
    i += n;
  }
  offsets.push_back(ps.size());
  size_t begin = 0;
  while (cps.size() - begin > max) {
    const size_t limit = begin + max;  // the piece is [begin, at)
    size_t at = 0;
    static constexpr uint32_t kWaterfall[4][4] = {
        {'.', '!', '?', 0x2026}, {';', ':', 0, 0}, {',', 0x2014, 0, 0}, {' ', 0, 0, 0}};
    for (const auto& set : kWaterfall) {
      for (size_t i = limit; i > begin + 1 && at == 0; --i)
        for (uint32_t m : set)
          if (m && cps[i - 1] == m) at = i;
      if (at) break;
    }
    if (at == 0) at = limit;
    std::string_view piece = ps.substr(offsets[begin], offsets[at] - offsets[begin]);
    while (!piece.empty() && piece.back() == ' ') piece.remove_suffix(1);
    if (!piece.empty()) out.emplace_back(piece);
    begin = at;
    while (begin < cps.size() && cps[begin] == ' ') ++begin;
  }
  if (begin < cps.size()) out.emplace_back(ps.substr(offsets[begin]));
}

bool is_abbreviation_before(std::string_view text, size_t dot) {
  size_t start = dot;
  while (start > 0 && text[start - 1] != ' ' && text[start - 1] != '\n' && text[start - 1] != '\t' &&
         text[start - 1] != '(' && text[start - 1] != '"')
    --start;
  const std::string w = lowercase(text.substr(start, dot - start));
  if (w.empty()) return false;
  static constexpr std::string_view kAbbr[] = {
      "mr",  "mrs",    "ms",   "dr",  "prof", "sr",  "jr",  "sgt", "col",  "gen",  "rep", "sen",  "gov",
      "lt",  "maj",    "capt", "st",  "mt",   "etc", "co",  "inc", "ltd",  "dept", "vs",  "p",    "pg",
      "jan", "feb",    "mar",  "apr", "jun",  "jul", "aug", "sep", "sept", "oct",  "nov", "dec",  "no",
      "fig", "approx", "e.g",  "i.e", "a.m",  "p.m", "u.s", "u.k", "ph.d", "est",  "ave", "blvd", "rd"};
  for (std::string_view a : kAbbr)
    if (w == a) return true;
  // An initial ("J.") or dotted initials ("U.S.A").
  bool initials = true;
  for (size_t i = 0; i < w.size(); ++i) initials &= (i % 2 == 0) ? is_alpha(w[i]) : w[i] == '.';
  return initials && w.size() % 2 == 1;
}

}  // namespace

namespace {

// `final`: the text is all there is (its end ends a sentence); otherwise a boundary counts only once the next
// word has begun, and the unfinished rest is left for later.
SentenceSplit split(std::string_view text, bool final) {
  std::vector<std::string_view> out;
  auto push = [&](size_t b, size_t e) {
    while (b < e && (text[b] == ' ' || text[b] == '\n' || text[b] == '\r' || text[b] == '\t')) ++b;
    while (e > b && (text[e - 1] == ' ' || text[e - 1] == '\n' || text[e - 1] == '\r' || text[e - 1] == '\t'))
      --e;
    if (e > b) out.push_back(text.substr(b, e - b));
  };
  size_t begin = 0, i = 0;
  while (i < text.size()) {
    const char c = text[i];
    if (c == '\n') {
      push(begin, i);
      begin = ++i;
      continue;
    }
    const bool ellipsis =
        c == '\xE2' && i + 2 < text.size() && text[i + 1] == '\x80' && text[i + 2] == '\xA6';
    if (c != '.' && c != '!' && c != '?' && !ellipsis) {
      ++i;
      continue;
    }
    size_t end = i + (ellipsis ? 3 : 1);
    // Runs of marks, then closing quotes and brackets (ASCII, or ” ’ as UTF-8).
    while (end < text.size()) {
      const char d = text[end];
      if (d == '.' || d == '!' || d == '?' || d == '"' || d == '\'' || d == ')' || d == ']') {
        ++end;
      } else if (d == '\xE2' && end + 2 < text.size() && text[end + 1] == '\x80' &&
                 (text[end + 2] == '\x9D' || text[end + 2] == '\x99' || text[end + 2] == '\xA6')) {
        end += 3;
      } else {
        break;
      }
    }
    const bool at_end = end >= text.size();
    const bool space_after =
        !at_end && (text[end] == ' ' || text[end] == '\n' || text[end] == '\t' || text[end] == '\r');
    if (!at_end && !space_after) {
      i = end;
      continue;
    }
    size_t next = end;
    while (next < text.size() && (text[next] == ' ' || text[next] == '\t')) ++next;
    if (!final && next >= text.size()) break;  // the next word (lowercase or not) is still to come
    const bool lower_next = next < text.size() && is_lower(text[next]);
    // A list number ("1." opening a line) is not a sentence.
    bool list_number = c == '.' && end == i + 1 && i > begin;
    for (size_t k = begin; k < i && list_number; ++k)
      list_number =
          is_digit(text[k]) || text[k] == ' ' || text[k] == '\n' || text[k] == '\t' || text[k] == '\r';
    if (list_number && !at_end) {
      i = end;
      continue;
    }
    if (c == '.' && end == i + 1 && (is_abbreviation_before(text, i) || lower_next) && !at_end) {
      i = end;
      continue;
    }
    push(begin, end);
    begin = end;
    i = end;
  }
  if (!final) return {std::move(out), begin};
  push(begin, text.size());
  return {std::move(out), text.size()};
}

}  // namespace

std::vector<std::string_view> split_sentences(std::string_view text) {
  return split(text, true).sentences;
}

SentenceSplit split_complete_sentences(std::string_view text) {
  return split(text, false);
}

const char* source_name(Source s) {
  switch (s) {
    case Source::Lexicon:
      return "lexicon";
    case Source::Rule:
      return "rule";
    case Source::Number:
      return "number";
    case Source::LetterToSound:
      return "letter-to-sound";
    case Source::Punctuation:
      return "punctuation";
    case Source::Spelled:
      return "spelled";
    case Source::Affix:
      return "affix";
  }
  return "?";
}

Result<G2p> G2p::load(std::span<const uint8_t> lexicon, std::string_view name) {
  G2p g;
  SOTTO_ASSIGN(g.lex_, Lexicon::load(lexicon, name));
  SOTTO_ASSIGN(g.lts_, LetterToSound::load(g.lex_.lts_section(), name));
  return g;
}

Result<G2p> G2p::load(std::span<const uint8_t> lexicon, std::string_view name,
                      std::span<const uint8_t> letter_to_sound) {
  G2p g;
  SOTTO_ASSIGN(g.lex_, Lexicon::load(lexicon, name));
  SOTTO_ASSIGN(g.lts_, LetterToSound::load(letter_to_sound, name));
  return g;
}

std::string G2p::phonemize(std::string_view text) const {
  return to_utf8(join(Phonemizer(lex_, lts_).run(text)));
}

std::vector<G2p::Sentence> G2p::phonemize_sentences(std::string_view text, size_t max_phonemes) const {
  std::vector<Sentence> out;
  if (max_phonemes == 0) max_phonemes = 1;
  const Phonemizer p(lex_, lts_);
  for (std::string_view s : split_sentences(text)) {
    const std::string ps = to_utf8(join(p.run(s)));
    std::vector<std::string> pieces;
    cut(ps, max_phonemes, pieces);
    for (std::string& piece : pieces) out.push_back({std::string(s), std::move(piece)});
  }
  return out;
}

std::vector<WordPhonemes> G2p::words(std::string_view text) const {
  std::vector<WordPhonemes> out;
  for (Token& t : Phonemizer(lex_, lts_).run(text))
    out.push_back({std::move(t.text), to_utf8(t.ps), t.source});
  return out;
}

std::string G2p::read_as_unknown(std::string_view word, bool (*hidden)(std::string_view)) const {
  std::string ps;
  const WordRules rules(lex_, hidden);
  if (!rules.word(word, Pos::X, NextSound{}, ps) && !rules.affixes(word, ps)) ps = lts_.read(word);
  return to_utf8(ps);
}

std::string G2p::letters_to_sounds(std::string_view word) const {
  return to_utf8(lts_.read(word));
}

}  // namespace sotto::g2p
