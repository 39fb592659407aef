// Text normalisation for the G2P: what is written -> what is said, as tokens.
#include "text/g2p_text.h"

#include <cstring>

#include "text/g2p_numbers.h"
#include "text/unicode.h"

namespace sotto::g2p {

namespace {

bool is_digit(char c) {
  return c >= '0' && c <= '9';
}
bool is_alpha(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}
bool is_upper(char c) {
  return c >= 'A' && c <= 'Z';
}
char lower(char c) {
  return is_upper(c) ? static_cast<char>(c + 32) : c;
}
std::string lowercase(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = lower(c);
  return out;
}
bool all_digits(std::string_view s) {
  if (s.empty()) return false;
  for (char c : s)
    if (!is_digit(c)) return false;
  return true;
}
bool all_alpha(std::string_view s) {
  if (s.empty()) return false;
  for (char c : s)
    if (!is_alpha(c)) return false;
  return true;
}
bool has_digit(std::string_view s) {
  for (char c : s)
    if (is_digit(c)) return true;
  return false;
}

// Latin letters with diacritics -> ASCII (U+00C0..U+017F); 0 drops the character.
std::string_view latin_ascii(uint32_t cp) {
  static constexpr const char* k00C0[] = {
      "A", "A", "A", "A", "A", "A", "AE", "C", "E", "E", "E", "E", "I", "I", "I",  "I",   // C0
      "D", "N", "O", "O", "O", "O", "O",  "",  "O", "U", "U", "U", "U", "Y", "TH", "ss",  // D0
      "a", "a", "a", "a", "a", "a", "ae", "c", "e", "e", "e", "e", "i", "i", "i",  "i",   // E0
      "d", "n", "o", "o", "o", "o", "o",  "",  "o", "u", "u", "u", "u", "y", "th", "y"};
  if (cp >= 0xC0 && cp <= 0xFF) return k00C0[cp - 0xC0];
  if (cp >= 0x100 && cp <= 0x17F) {
    // Latin Extended-A pairs upper/lower letters; the base letters in order of the block.
    static constexpr std::string_view kBase =
        "AaAaAaCcCcCcCcDdDdEeEeEeEeEeGgGgGgGgHhHhIiIiIiIiIiJjJjKkkLlLlLlLlLlNnNnNnnNnOoOoOoOoRrRrRrSsSsSsSsTt"
        "TtTt"
        "UuUuUuUuUuUuWwYyYZzZzZzs";
    const uint32_t i = cp - 0x100;
    if (i == 0x32 || i == 0x33) return i == 0x32 ? "IJ" : "ij";
    if (i == 0x52 || i == 0x53) return i == 0x52 ? "OE" : "oe";
    if (i < kBase.size()) return kBase.substr(i, 1);
  }
  return "";
}

constexpr struct {
  const char* abbr;  // lowercase, without the final period
  const char* said;
} kAbbreviations[] = {{"mr", "Mr"},
                      {"mrs", "Mrs"},
                      {"ms", "Miz"},
                      {"dr", "Doctor"},
                      {"prof", "Professor"},
                      {"jr", "Junior"},
                      {"sr", "Senior"},
                      {"mt", "Mount"},
                      {"vs", "versus"},
                      {"etc", "etc"},
                      {"approx", "approximately"},
                      {"inc", "Incorporated"},
                      {"ltd", "Limited"},
                      {"corp", "Corporation"},
                      {"co", "Company"},
                      {"ave", "Avenue"},
                      {"blvd", "Boulevard"},
                      {"rd", "Road"},
                      {"dept", "Department"},
                      {"gen", "General"},
                      {"gov", "Governor"},
                      {"sen", "Senator"},
                      {"rep", "Representative"},
                      {"capt", "Captain"},
                      {"lt", "Lieutenant"},
                      {"sgt", "Sergeant"},
                      {"col", "Colonel"},
                      {"fig", "Figure"},
                      {"jan", "January"},
                      {"feb", "February"},
                      {"mar", "March"},
                      {"apr", "April"},
                      {"jun", "June"},
                      {"jul", "July"},
                      {"aug", "August"},
                      {"sep", "September"},
                      {"sept", "September"},
                      {"oct", "October"},
                      {"nov", "November"},
                      {"dec", "December"},
                      {"e.g", "for example"},
                      {"i.e", "that is"},
                      {"est", "established"},
                      {"min", "minutes"},
                      {"hr", "hour"},
                      {"hrs", "hours"},
                      {"st", ""},
                      {"no", ""}};

const char* abbreviation(std::string_view word_without_period) {
  const std::string w = lowercase(word_without_period);
  for (const auto& a : kAbbreviations)
    if (w == a.abbr) return a.said;
  return nullptr;
}

constexpr struct {
  const char* unit;  // case-sensitive, as written after a number
  const char* one;
  const char* many;
} kUnits[] = {{"km", "kilometer", "kilometers"},
              {"cm", "centimeter", "centimeters"},
              {"mm", "millimeter", "millimeters"},
              {"kg", "kilogram", "kilograms"},
              {"mg", "milligram", "milligrams"},
              {"lb", "pound", "pounds"},
              {"lbs", "pound", "pounds"},
              {"oz", "ounce", "ounces"},
              {"ft", "foot", "feet"},
              {"mph", "miles per hour", "miles per hour"},
              {"kph", "kilometers per hour", "kilometers per hour"},
              {"km/h", "kilometers per hour", "kilometers per hour"},
              {"GB", "gigabyte", "gigabytes"},
              {"MB", "megabyte", "megabytes"},
              {"KB", "kilobyte", "kilobytes"},
              {"kB", "kilobyte", "kilobytes"},
              {"TB", "terabyte", "terabytes"},
              {"GHz", "gigahertz", "gigahertz"},
              {"MHz", "megahertz", "megahertz"},
              {"kHz", "kilohertz", "kilohertz"},
              {"Hz", "hertz", "hertz"},
              {"ms", "millisecond", "milliseconds"},
              {"ml", "milliliter", "milliliters"},
              {"mL", "milliliter", "milliliters"},
              {"kW", "kilowatt", "kilowatts"},
              {"kWh", "kilowatt hour", "kilowatt hours"},
              {"sec", "second", "seconds"},
              {"min", "minute", "minutes"},
              {"hrs", "hour", "hours"},
              {"hr", "hour", "hours"},
              {"yrs", "year", "years"},
              {"x", "times", "times"},
              {"bn", "billion", "billion"},
              {"tn", "trillion", "trillion"}};

// Scales written after an amount of money: $5M, £3bn, $20K.
const char* money_scale(std::string_view s) {
  if (s == "K" || s == "k") return "thousand";
  if (s == "M" || s == "m" || s == "mn") return "million";
  if (s == "B" || s == "bn") return "billion";
  if (s == "T" || s == "tn") return "trillion";
  return nullptr;
}

const char* unit_words(std::string_view unit, bool one) {
  for (const auto& u : kUnits)
    if (unit == u.unit) return one ? u.one : u.many;
  return nullptr;
}

bool is_scale_word(std::string_view w) {
  return w == "hundred" || w == "thousand" || w == "million" || w == "billion" || w == "trillion";
}

// Builds the tokens of one text.
class Tokenizer {
 public:
  Tokenizer(std::string_view text, const WordRules& rules) : text_(text), rules_(rules) {}

  std::vector<Token> run() {
    split_chunks();
    // A chunk may read the next one too (a unit or "million" after a number) and step past it.
    for (chunk_index_ = 0; chunk_index_ < chunks_.size(); ++chunk_index_) {
      chunk(chunks_[chunk_index_]);
      if (!out_.empty()) out_.back().space_after = true;
    }
    if (!out_.empty()) out_.back().space_after = false;
    return std::move(out_);
  }

 private:
  void split_chunks() {
    size_t i = 0;
    while (i < text_.size()) {
      while (i < text_.size() && text_[i] == ' ') ++i;
      const size_t start = i;
      while (i < text_.size() && text_[i] != ' ') ++i;
      if (i > start) chunks_.push_back(text_.substr(start, i - start));
    }
  }

  std::string_view next_chunk() const {
    return chunk_index_ + 1 < chunks_.size() ? chunks_[chunk_index_ + 1] : std::string_view{};
  }

  void punct(std::string_view ps) {
    if (ps.empty()) return;
    Token t;
    t.kind = Token::Kind::Punct;
    t.text = std::string(ps);
    t.ps = t.text;
    t.source = Source::Punctuation;
    out_.push_back(std::move(t));
  }
  void word(std::string_view w) {
    if (w.empty()) return;
    Token t;
    t.text = std::string(w);
    out_.push_back(std::move(t));
  }
  // Words said one after another ("kilometers per hour").
  void words(std::string_view ws) {
    size_t i = 0;
    while (i < ws.size()) {
      const size_t sp = ws.find(' ', i);
      const size_t end = sp == std::string_view::npos ? ws.size() : sp;
      word(ws.substr(i, end - i));
      if (end < ws.size()) out_.back().space_after = true;
      i = end + 1;
    }
  }
  // Number words looked up without context, as misaki's get_number does; one token.
  void ready(std::string_view number_words, Source source = Source::Number) {
    Token t;
    t.kind = Token::Kind::Ready;
    t.text = std::string(number_words);
    t.source = source;
    size_t i = 0;
    while (i < number_words.size()) {
      size_t sp = number_words.find(' ', i);
      if (sp == std::string_view::npos) sp = number_words.size();
      const std::string_view w = number_words.substr(i, sp - i);
      if (!w.empty()) {
        std::string ps;
        if (w == "point" || w == "oh-point") {
          rules_.lookup("point", Pos::X, -4, nullptr, ps);
        } else if (w == "dollars" || w == "cents" || w == "pounds" || w == "euros") {
          // Plural units: the singular's pronunciation plus -s, as misaki builds "dollars".
          std::string stem;
          if (rules_.lookup(w.substr(0, w.size() - 1), Pos::X, kNoStress, nullptr, stem)) {
            rules_.add_s(stem);
            ps = stem;
          } else {
            rules_.word(w, Pos::X, NextSound{}, ps);
          }
        } else if (!rules_.lookup(w, Pos::X, kNoStress, nullptr, ps)) {
          rules_.word(w, Pos::X, NextSound{}, ps);
        }
        if (!ps.empty()) {
          if (!t.ps.empty()) t.ps.push_back(' ');
          t.ps += ps;
        }
      }
      i = sp + 1;
    }
    out_.push_back(std::move(t));
  }

  void chunk(std::string_view c) {
    // Leading quotes and brackets.
    bool opened_quote = false;
    while (!c.empty()) {
      const char f = c.front();
      if (f == '"' || (f == '\'' && !rules_lexicon_word(c))) {
        punct(f == '"' ? "\x9d" : "");
        opened_quote = true;
      } else if (f == '(' || f == '[' || f == '{') {
        punct("(");
      } else if (f == kEmDashChar) {
        punct("\x9b");
      } else if (f == kEllipsisChar) {
        punct("\x9c");
      } else {
        break;
      }
      c.remove_prefix(1);
    }
    // Trailing punctuation, kept to emit after the core.
    std::vector<std::string_view> tail;
    while (!c.empty()) {
      const char b = c.back();
      if (b == '.' && c.size() >= 3 && c.substr(c.size() - 3) == "...") {
        tail.push_back("...");
        c.remove_suffix(3);
        continue;
      }
      if (b == '.') {
        const std::string_view core = c.substr(0, c.size() - 1);
        if (keeps_period(core)) break;
        tail.push_back(".");
      } else if (b == ',' || b == ';' || b == ':' || b == '!' || b == '?') {
        tail.push_back(c.substr(c.size() - 1));
      } else if (b == '"') {
        tail.push_back("\x9e");
      } else if (b == '\'') {
        if (!opened_quote && c.size() > 2 && (c[c.size() - 2] == 's' || c[c.size() - 2] == 'S')) break;
        tail.push_back("");
      } else if (b == ')' || b == ']' || b == '}') {
        tail.push_back(")");
      } else if (b == kEmDashChar) {
        tail.push_back("\x9b");
      } else if (b == kEllipsisChar) {
        tail.push_back("\x9c");
      } else {
        break;
      }
      c.remove_suffix(1);
    }
    if (!c.empty()) core(c);
    for (size_t i = tail.size(); i-- > 0;)
      if (!tail[i].empty()) punct(tail[i]);
  }

  bool rules_lexicon_word(std::string_view c) const {
    // "'cause", "'em": a leading apostrophe that belongs to the word.
    size_t n = 1;
    while (n < c.size() && is_alpha(c[n])) ++n;
    std::string ps;
    return n > 1 && rules_.lookup(c.substr(0, n), Pos::X, kNoStress, nullptr, ps) && c.substr(0, n) != "'s";
  }

  bool keeps_period(std::string_view core) const {
    if (core.empty()) return false;
    if (abbreviation(core)) {
      const std::string w = lowercase(core);
      if (w == "no") return all_digits(next_chunk().substr(0, 1));
      return true;
    }
    // Initials: "U.S", "J", "p.m".
    bool ok = true;
    for (size_t i = 0; i < core.size(); ++i) ok &= (i % 2 == 0) ? is_alpha(core[i]) : core[i] == '.';
    return ok && core.size() % 2 == 1 && (core.size() > 1 || is_upper(core[0]));
  }

  void core(std::string_view c) {
    // Inner em dashes and ellipses cut the chunk.
    for (size_t i = 0; i < c.size(); ++i) {
      if (c[i] == kEmDashChar || c[i] == kEllipsisChar ||
          (c[i] == '-' && i + 1 < c.size() && c[i + 1] == '-')) {
        const size_t skip = c[i] == '-' ? 2 : 1;
        if (i > 0) core(c.substr(0, i));
        punct(c[i] == kEllipsisChar ? "\x9c" : "\x9b");
        if (i + skip < c.size()) core(c.substr(i + skip));
        return;
      }
    }
    if (c == "-" || c == "*") {
      if (out_.empty()) return;  // a list bullet starting the text
      return c == "-" ? punct("\x9b") : void();
    }
    if (c.size() > 1 && c.front() == '~') {  // "~$5", "~20 ms": about
      word("about");
      out_.back().space_after = true;
      return core(c.substr(1));
    }
    if (c == "&") return word("and");
    if (c == "+") return word("plus");
    if (c == "=") return word("equals");
    if (c == "@") return word("at");
    if (c == "%") return word("percent");
    if (c == "/" || c == "#" || c == "~" || c == "^" || c == "|" || c == "\\" || c == "<" || c == ">" ||
        c == "_" || c == "`")
      return;
    if (is_url(c)) return url(c);
    if (c.back() == '.') {  // an abbreviation or initials whose period stayed
      const std::string_view w = c.substr(0, c.size() - 1);
      const char* said = abbreviation(w);
      if (said) {
        const std::string lw = lowercase(w);
        if (lw == "st") {
          const std::string_view n = next_chunk();
          word(!n.empty() && is_upper(n[0]) ? "Saint" : "Street");
        } else if (lw == "no") {
          word("number");
        } else if (lw == "e.g" || lw == "i.e" || lw == "approx") {
          words(said);
        } else {
          word(said);
        }
      } else {
        word(c);
      }
      if (chunk_index_ + 1 == chunks_.size()) punct(".");
      return;
    }
    if (c.front() == '#' && c.size() > 1 && all_digits(c.substr(1))) {
      word("number");
      out_.back().space_after = true;
      return number_core(c.substr(1));
    }
    if (has_digit(c) || c.front() == '$' || c.front() == kPoundChar || c.front() == kEuroChar ||
        c.front() == kYenChar)
      return number_core(c);
    // Words joined by / & _ + are read one by one ("and/or", "AT&T").
    for (size_t i = 0; i < c.size(); ++i) {
      const char s = c[i];
      if (s == '/' || s == '&' || s == '_' || s == '+' || s == '=' || s == '@' || s == '%' || s == '*' ||
          s == '#' || s == '(' || s == ')' || s == '"' || s == ',' || s == ';' || s == '!' || s == '?' ||
          s == ':' || s == '[' || s == ']' || s == '<' || s == '>' || s == '|' || s == '\\' || s == '~' ||
          s == '^' || s == '`' || s == '{' || s == '}' || s == '$' || s == kPoundChar || s == kEuroChar ||
          s == kYenChar) {
        if (i > 0) core(c.substr(0, i));
        if (s == '&') word("and");
        if (s == '+') word("plus");
        if (s == '=') word("equals");
        if (s == '@') word("at");
        if (s == '%') word("percent");
        if (!out_.empty()) out_.back().space_after = true;
        if (i + 1 < c.size()) core(c.substr(i + 1));
        return;
      }
    }
    word(c);
  }

  static bool is_url(std::string_view c) {
    if (c.find("://") != std::string_view::npos) return true;
    if (c.size() > 4 && lowercase(c.substr(0, 4)) == "www.") return true;
    const size_t at = c.find('@');
    if (at != std::string_view::npos && at > 0 && c.find('.', at) != std::string_view::npos &&
        c.find('.', at) + 1 < c.size())
      return true;
    // Bare domains such as example.com or github.io.
    const size_t dot = c.rfind('.');
    if (dot != std::string_view::npos && dot > 0 && dot + 1 < c.size()) {
      const std::string tld = lowercase(c.substr(dot + 1));
      static constexpr const char* kTlds[] = {"com", "org", "net", "io",  "dev",
                                              "edu", "gov", "ai",  "app", "co"};
      for (const char* t : kTlds)
        if (tld == t && all_alpha(c.substr(0, 1))) return true;
    }
    return false;
  }

  // URLs and e-mail addresses: the scheme dropped, parts read as words or spelled, separators named.
  void url(std::string_view c) {
    const size_t scheme = c.find("://");
    if (scheme != std::string_view::npos) c.remove_prefix(scheme + 3);
    while (!c.empty() && c.back() == '/') c.remove_suffix(1);
    size_t i = 0;
    while (i < c.size()) {
      const char ch = c[i];
      if (is_alpha(ch)) {
        size_t j = i;
        while (j < c.size() && is_alpha(c[j])) ++j;
        const std::string part = lowercase(c.substr(i, j - i));
        std::string ps;
        if (part == "www") {
          word("W");
          out_.back().space_after = true;
          word("W");
          out_.back().space_after = true;
          word("W");
        } else if (part.size() <= 3 && !rules_.lookup(part, Pos::X, kNoStress, nullptr, ps)) {
          spelled(part);
        } else {
          word(part);
        }
        i = j;
      } else if (is_digit(ch)) {
        size_t j = i;
        while (j < c.size() && is_digit(c[j])) ++j;
        ready(j - i <= 2 ? cardinal_words(parse_u64(c.substr(i, j - i))) : digit_words(c.substr(i, j - i)));
        i = j;
      } else {
        const char* name = ch == '.'   ? "dot"
                           : ch == '/' ? "slash"
                           : ch == '@' ? "at"
                           : ch == '-' ? "dash"
                           : ch == '_' ? "underscore"
                           : ch == ':' ? "colon"
                           : ch == '?' ? "question mark"
                           : ch == '=' ? "equals"
                           : ch == '&' ? "and"
                           : ch == '#' ? "hash"
                           : ch == '~' ? "tilde"
                                       : nullptr;
        if (name) words(name);
        ++i;
      }
      if (!out_.empty()) out_.back().space_after = i < c.size();
    }
  }

  void spelled(std::string_view letters) {
    std::string ps;
    if (!rules_.spell(letters, ps)) return;
    Token t;
    t.kind = Token::Kind::Ready;
    t.text = std::string(letters);
    t.ps = ps;
    t.source = Source::Spelled;
    out_.push_back(std::move(t));
  }

  static uint64_t parse_u64(std::string_view digits) {
    uint64_t v = 0;
    for (char d : digits) {
      if (!is_digit(d)) continue;
      if (v > 1844674407370955160ull) return UINT64_MAX;
      v = v * 10 + static_cast<uint64_t>(d - '0');
    }
    return v;
  }

  // A number as misaki reads it: integer part, optional decimals ("point" and digits).
  static std::string decimal_words(std::string_view whole, std::string_view frac) {
    std::string w;
    if (whole.size() > 18)
      w = digit_words(whole);
    else if (!whole.empty())
      w = cardinal_words(parse_u64(whole));
    else
      w = "";
    if (!frac.empty()) {
      // num2words(float) drops trailing zeros, keeps at least one digit.
      while (frac.size() > 1 && frac.back() == '0') frac.remove_suffix(1);
      if (!w.empty()) w += ' ';
      w += "point ";
      w += digit_words(frac);
    }
    return w;
  }

  void number_core(std::string_view c) {
    // Currency first: $12.50, £5, €1,200, $5M, $3.2bn.
    const char cur = c.front();
    if (cur == '$' || cur == kPoundChar || cur == kEuroChar || cur == kYenChar) {
      c.remove_prefix(1);
      if (c.empty() || !is_digit(c.front())) {
        if (!c.empty()) core(c);
        words(currency_name(cur, false));
        return;
      }
      size_t j = 0;
      while (j < c.size() && (is_digit(c[j]) || c[j] == ',' || c[j] == '.')) ++j;
      std::string_view amount = c.substr(0, j), rest = c.substr(j);
      while (!amount.empty() && (amount.back() == '.' || amount.back() == ',')) amount.remove_suffix(1);
      std::string scale;
      if (const char* u = money_scale(rest)) scale = u;
      const std::string_view n = next_chunk();
      if (scale.empty() && rest.empty() && is_scale_word(lowercase(strip_punct(n)))) {
        scale = lowercase(strip_punct(n));
        ++chunk_index_;  // the scale word is read here, before the currency name
        skip_chunk_ = true;
      }
      currency(cur, amount, scale);
      if (skip_chunk_) {
        skip_chunk_ = false;
        // Keep trailing punctuation of the consumed chunk.
        const std::string_view consumed = chunks_[chunk_index_];
        for (char ch : consumed)
          if (ch == '.' || ch == ',' || ch == '!' || ch == '?' || ch == ';' || ch == ':')
            punct(std::string_view(&ch, 1));
      } else if (!rest.empty() && scale.empty()) {
        core(rest);
      }
      return;
    }
    // Negative numbers.
    if (c.size() > 1 && c.front() == '-' && (is_digit(c[1]) || c[1] == '.')) {
      ready_word("minus");
      return number_core(c.substr(1));
    }
    // Times: 3:45, 10:00, 12:30:15, with am/pm attached or not.
    {
      size_t j = 0;
      while (j < c.size() && is_digit(c[j])) ++j;
      if (j >= 1 && j <= 2 && j + 3 <= c.size() && c[j] == ':' && is_digit(c[j + 1]) && is_digit(c[j + 2]) &&
          (j + 3 == c.size() || !is_digit(c[j + 3]))) {
        const uint64_t h = parse_u64(c.substr(0, j)), m = parse_u64(c.substr(j + 1, 2));
        std::string w = cardinal_words(h);
        if (m == 0)
          w += " o'clock";
        else if (m < 10)
          w += " oh " + cardinal_words(m);
        else
          w += ' ' + cardinal_words(m);
        std::string_view rest = c.substr(j + 3);
        if (rest.size() >= 3 && rest[0] == ':' && is_digit(rest[1]) && is_digit(rest[2])) {
          w += " and " + cardinal_words(parse_u64(rest.substr(1, 2))) + " seconds";
          rest.remove_prefix(3);
        }
        if (m == 0 && (!rest.empty() || is_am_pm(next_chunk()))) w.resize(w.size() - 8);  // "ten pm"
        ready(w);
        if (!rest.empty()) core(rest);
        return;
      }
    }
    // Leading digits (with , and .), then a suffix.
    size_t j = 0;
    while (j < c.size() &&
           (is_digit(c[j]) || ((c[j] == ',' || c[j] == '.') && j + 1 < c.size() && is_digit(c[j + 1]))))
      ++j;
    if (j == 0) {
      // Letters first ("COVID-19", "x86", "mp3"): letters and digits read in turn.
      return mixed(c);
    }
    std::string_view num = c.substr(0, j), rest = c.substr(j);
    std::string digits;
    size_t dots = 0, commas = 0;
    for (char ch : num) {
      if (ch == '.') ++dots;
      if (ch == ',') ++commas;
      if (ch != ',') digits.push_back(ch);
    }
    // Ranges and phone-like runs: 10-20, 555-123-4567, 2020-2024.
    if (!rest.empty() && rest.front() == '-' && rest.size() > 1 && is_digit(rest[1])) {
      size_t groups = 1;
      for (char ch : c) groups += ch == '-';
      bool all_num = true;
      for (char ch : c) all_num &= is_digit(ch) || ch == '-';
      if (groups >= 3 && all_num) {  // a phone or id number: digit by digit, groups as phrases
        size_t i = 0;
        while (i < c.size()) {
          size_t k = c.find('-', i);
          if (k == std::string_view::npos) k = c.size();
          ready(digit_words(c.substr(i, k - i)));
          if (k < c.size()) punct(",");
          out_.back().space_after = true;
          i = k + 1;
        }
        out_.back().space_after = false;
        return;
      }
      plain_number(num, digits, dots, commas, "");
      out_.back().space_after = true;
      word("to");
      out_.back().space_after = true;
      return number_core(rest.substr(1));
    }
    // Suffixes: ordinals, plurals (1990s), percent, units.
    std::string_view suffix = rest;
    if (suffix == "st" || suffix == "nd" || suffix == "rd" || suffix == "th" || suffix == "ST" ||
        suffix == "ND" || suffix == "RD" || suffix == "TH") {
      if (dots == 0) {
        ready(ordinal_words(parse_u64(digits)));
        return;
      }
    }
    if ((suffix == "s" || suffix == "'s") && dots == 0) {
      plain_number(num, digits, dots, commas, "s");
      return;
    }
    if (suffix == "%") {
      plain_number(num, digits, dots, commas, "");
      out_.back().space_after = true;
      word("percent");
      return;
    }
    const bool one = digits == "1";
    if (const char* u = unit_words(suffix, one)) {
      plain_number(num, digits, dots, commas, "");
      out_.back().space_after = true;
      words(u);
      return;
    }
    plain_number(num, digits, dots, commas, "");
    if (!rest.empty()) {
      // A separate unit word after the number is read by the next chunk; here the letters or symbols left.
      if (rest.front() == '-' || rest.front() == '.' || rest.front() == ',') rest.remove_prefix(1);
      if (!rest.empty()) {
        out_.back().space_after = true;
        core(rest);
      }
    } else if (const std::string_view n = next_chunk(); !n.empty()) {
      const std::string_view unit = strip_punct(n);
      if (const char* u = unit_words(unit, one); u && unit.size() > 1 && unit != "ms" && unit != "min" &&
                                                 unit != "sec" && unit != "bn" && unit != "tn") {
        out_.back().space_after = true;
        words(u);
        ++chunk_index_;
        for (char ch : n.substr(unit.size()))
          if (ch == '.' || ch == ',' || ch == '!' || ch == '?' || ch == ';' || ch == ':')
            punct(std::string_view(&ch, 1));
      }
    }
  }

  static std::string_view strip_punct(std::string_view s) {
    while (!s.empty() && (s.back() == '.' || s.back() == ',' || s.back() == '!' || s.back() == '?' ||
                          s.back() == ';' || s.back() == ':'))
      s.remove_suffix(1);
    return s;
  }
  static bool is_am_pm(std::string_view s) {
    const std::string w = lowercase(strip_punct(s));
    return w == "am" || w == "pm" || w == "a.m" || w == "p.m";
  }

  void ready_word(std::string_view w) {
    ready(w);
    out_.back().space_after = true;
  }

  // misaki's get_number for a number with no currency: 4-digit integers as years, a leading 0 or more
  // than two dots digit by digit, decimals with "point".
  void plain_number(std::string_view num, const std::string& digits, size_t dots, size_t commas,
                    std::string_view plural) {
    std::string w;
    if (dots > 1) {
      // Versions and dotted ids: "1.2.3" -> one point two point three.
      size_t i = 0;
      while (i < digits.size()) {
        size_t k = digits.find('.', i);
        if (k == std::string::npos) k = digits.size();
        const std::string_view part(digits.data() + i, k - i);
        if (!w.empty()) w += " point ";
        w += (part.size() > 1 && part[0] == '0') || part.size() > 3 ? digit_words(part)
                                                                    : cardinal_words(parse_u64(part));
        i = k + 1;
      }
    } else if (dots == 1) {
      const size_t d = digits.find('.');
      w = decimal_words(std::string_view(digits).substr(0, d), std::string_view(digits).substr(d + 1));
    } else if (digits.size() > 1 && digits[0] == '0') {
      w = digit_words(digits);
    } else if (digits.size() == 4 && commas == 0) {
      w = year_words(parse_u64(digits));
    } else if (digits.size() > 18) {
      w = digit_words(digits);
    } else {
      w = cardinal_words(parse_u64(digits));
    }
    (void)num;
    ready(w);
    if (!plural.empty()) {
      // "1990s": the -s ending on the last word's pronunciation, as misaki does.
      Token& t = out_.back();
      if (!t.ps.empty()) {
        std::string& ps = t.ps;
        // "nineties": a final -y reads as -iz, which misaki's _s gives from "ninety" + z.
        rules_.add_s(ps);
      }
    }
  }

  static const char* currency_name(char cur, bool one) {
    if (cur == '$') return one ? "dollar" : "dollars";
    if (cur == kPoundChar) return one ? "pound" : "pounds";
    if (cur == kEuroChar) return one ? "euro" : "euros";
    return "yen";
  }

  void currency(char cur, std::string_view amount, const std::string& scale) {
    std::string digits;
    for (char ch : amount)
      if (ch != ',') digits.push_back(ch);
    const size_t dot = digits.find('.');
    std::string_view whole =
        std::string_view(digits).substr(0, dot == std::string::npos ? digits.size() : dot);
    std::string_view frac =
        dot == std::string::npos ? std::string_view{} : std::string_view(digits).substr(dot + 1);
    if (!scale.empty()) {  // "$3.5 million" -> three point five million dollars
      ready(decimal_words(whole, frac) + " " + scale + " " + currency_name(cur, false));
      return;
    }
    if (frac.size() > 2 || digits.find('.', dot + 1) != std::string::npos) {
      ready(decimal_words(whole, frac) + " " + currency_name(cur, false));
      return;
    }
    const uint64_t units = whole.empty() ? 0 : (whole.size() > 18 ? 0 : parse_u64(whole));
    std::string cents_text(frac);
    if (cents_text.size() == 1) cents_text += '0';
    const uint64_t cents = parse_u64(cents_text);
    const char* sub = cur == kPoundChar ? "pence" : cur == kYenChar ? "" : "cents";
    std::string w;
    if (units > 0 || cents == 0 || *sub == 0) {
      w = (whole.size() > 18 ? digit_words(whole) : cardinal_words(units)) + " " +
          currency_name(cur, units == 1);
    }
    if (cents > 0 && *sub) {
      if (!w.empty()) w += " and ";
      w += cardinal_words(cents) + " " + (cents == 1 && cur != kPoundChar ? "cent" : sub);
      if (cents == 1 && cur == kPoundChar) w.resize(w.size() - 5), w += "penny";
    }
    ready(w);
  }

  // Letters and digits mixed ("COVID-19", "mp3", "x86", "4K"): each run read on its own.
  void mixed(std::string_view c) {
    size_t i = 0;
    bool first = true;
    while (i < c.size()) {
      size_t j = i;
      if (is_digit(c[i])) {
        while (j < c.size() && is_digit(c[j])) ++j;
        const std::string_view d = c.substr(i, j - i);
        ready((d.size() > 3 || (d.size() > 1 && d[0] == '0')) ? digit_words(d)
                                                              : cardinal_words(parse_u64(d)));
      } else if (is_alpha(c[i]) || c[i] == '\'') {
        while (j < c.size() && (is_alpha(c[j]) || c[j] == '\'')) ++j;
        word(c.substr(i, j - i));
      } else {
        j = i + 1;
        if (c[i] == '.' && j < c.size() && is_digit(c[j])) ready("point");
      }
      if (!out_.empty() && j > i && !first) out_[out_.size() - 1].space_after = false;
      if (!out_.empty()) out_.back().space_after = true;
      first = false;
      i = j;
    }
  }

  std::string_view text_;
  const WordRules& rules_;
  std::vector<std::string_view> chunks_;
  size_t chunk_index_ = 0;
  bool skip_chunk_ = false;
  std::vector<Token> out_;
};

}  // namespace

std::string clean_text(std::string_view utf8) {
  const std::vector<uint32_t> cps = decode_utf8_lenient(utf8);
  std::string out;
  out.reserve(utf8.size());
  auto space = [&] {
    if (!out.empty() && out.back() != ' ') out.push_back(' ');
  };
  for (size_t i = 0; i < cps.size(); ++i) {
    const uint32_t cp = cps[i];
    if (cp < 0x80) {
      if (cp < 0x20 || cp == 0x7f)
        space();
      else
        out.push_back(static_cast<char>(cp));
      continue;
    }
    switch (cp) {
      case 0x2018:
      case 0x2019:
      case 0x201B:
      case 0x2032:
      case 0x02BC:
        out.push_back('\'');
        continue;
      case 0x201C:
      case 0x201D:
      case 0x201E:
      case 0x201F:
      case 0x00AB:
      case 0x00BB:
      case 0x2033:
        out.push_back('"');
        continue;
      case 0x2010:
      case 0x2011:
      case 0x2012:
      case 0x2013:
      case 0x2212:
        out.push_back('-');
        continue;
      case 0x2014:
      case 0x2015:
        out.push_back(kEmDashChar);
        continue;
      case 0x2026:
        out.push_back(kEllipsisChar);
        continue;
      case 0x00A3:
        out.push_back(kPoundChar);
        continue;
      case 0x20AC:
        out.push_back(kEuroChar);
        continue;
      case 0x00A5:
        out.push_back(kYenChar);
        continue;
      case 0x00D7:
        out += " times ";
        continue;
      case 0x00F7:
        out += " divided by ";
        continue;
      case 0x00B1:
        out += " plus or minus ";
        continue;
      case 0x00BD:
        out += " and a half";
        continue;
      case 0x00BC:
        out += " and a quarter";
        continue;
      case 0x00BE:
        out += " and three quarters";
        continue;
      case 0x00B0:
        if (i + 1 < cps.size() && (cps[i + 1] == 'C' || cps[i + 1] == 'F')) {
          out += cps[i + 1] == 'C' ? " degrees Celsius" : " degrees Fahrenheit";
          ++i;
        } else {
          out += " degrees";
        }
        continue;
      default:
        break;
    }
    const std::string_view ascii = latin_ascii(cp);
    if (!ascii.empty()) {
      out += ascii;
      continue;
    }
    // Everything else (other scripts, emoji, symbols, U+FFFD from invalid UTF-8) separates words.
    space();
  }
  return out;
}

std::vector<Token> tokenize(std::string_view ascii, const WordRules& rules) {
  return Tokenizer(ascii, rules).run();
}

}  // namespace sotto::g2p
