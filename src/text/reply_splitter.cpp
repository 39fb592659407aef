// The rule reads as web/agent/sentences.js does, on code points where the page works on UTF-16 units: the
// marks it looks for are all in the Basic Multilingual Plane, and lengths are counted in UTF-16 units.
#include "text/reply_splitter.h"

#include <algorithm>
#include <array>

#include "text/unicode.h"

namespace sotto::text {

namespace {

// JavaScript's \s (what the page's regular expressions match).
bool js_space(char32_t c) {
  if (c == ' ' || (c >= 0x09 && c <= 0x0D)) return true;
  if (c < 0xA0) return false;
  return c == 0xA0 || c == 0x1680 || (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 ||
         c == 0x202F || c == 0x205F || c == 0x3000 || c == 0xFEFF;
}

bool closer(char32_t c) {
  return c == '"' || c == '\'' || c == ')' || c == ']';
}

bool clause_mark(char32_t c) {
  return c == ',' || c == ';' || c == ':' || c == 0x2014 || c == 0x2013;  // em and en dash
}

std::u32string_view trimmed(std::u32string_view s) {
  while (!s.empty() && js_space(s.front())) s.remove_prefix(1);
  while (!s.empty() && js_space(s.back())) s.remove_suffix(1);
  return s;
}

size_t utf16_length(std::u32string_view s) {
  size_t n = 0;
  for (char32_t c : s) n += c >= 0x10000 ? 2 : 1;
  return n;
}

std::string to_utf8(std::u32string_view s) {
  std::string out;
  for (char32_t c : s) append_utf8(out, c);
  return out;
}

// Words whose final period does not end a sentence.
constexpr std::array<std::string_view, 17> kAbbreviations = {"mr",     "mrs", "ms",  "dr",  "prof", "sr",
                                                             "jr",     "st",  "vs",  "etc", "e.g",  "i.e",
                                                             "approx", "no",  "fig", "inc", "ltd"};

// Whether a piece has anything a voice would say: a letter or a digit (the page's [\p{L}\p{N}]).
bool has_word(std::u32string_view s) {
  return std::any_of(s.begin(), s.end(), [](char32_t c) { return is_letter(c) || is_number(c); });
}

bool ascii_letter(char32_t c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

}  // namespace

std::vector<std::string> ReplySplitter::push(std::string_view utf8) {
  for (uint32_t c : decode_utf8_lenient(utf8)) buffer_.push_back(static_cast<char32_t>(c));
  std::vector<std::string> out;
  if (first_words_ > 0) {
    const long clause = first_clause();
    if (clause < 0) {
      // Still inside the first clause: a sentence end may yet come first.
      out = sentences();
      if (!out.empty()) first_words_ = 0;
      return out;
    }
    out.push_back(to_utf8(trimmed(std::u32string_view(buffer_).substr(0, static_cast<size_t>(clause)))));
    buffer_.erase(0, static_cast<size_t>(clause));
    first_words_ = 0;
  }
  for (std::string& s : sentences()) out.push_back(std::move(s));
  return out;
}

long ReplySplitter::first_clause() const {
  size_t words = 0;
  bool in_word = false;
  size_t word_start = 0;
  long last_end = -1;  // where the word before this one ended
  for (size_t i = 0; i < buffer_.size(); ++i) {
    if (!js_space(buffer_[i])) {
      if (!in_word) word_start = i;
      in_word = true;
      continue;
    }
    if (!in_word) continue;
    // A number counts as the words it is read as (one per digit, roughly); one that would take the piece past
    // first_words_ starts the next piece instead, once this one has kFirstClauseMinWords words.
    size_t digits = 0;
    for (size_t k = word_start; k < i; ++k) digits += buffer_[k] >= '0' && buffer_[k] <= '9';
    const size_t w = std::max<size_t>(1, digits);
    if (w > 1 && words + w > first_words_ && words >= kFirstClauseMinWords) return last_end;
    words += w;
    last_end = static_cast<long>(i);
    in_word = false;
    // buffer_[i - 1] is the word's last character: a clause mark ends it, or the word is a lone dash.
    const char32_t last = buffer_[i - 1];
    const bool dash = last == '-' || last == 0x2014 || last == 0x2013;
    const bool mark = clause_mark(last) || (dash && i >= 2 && js_space(buffer_[i - 2]));
    if ((mark && words >= kFirstClauseMinWords) || words >= first_words_) return static_cast<long>(i);
    // A sentence end comes out of sentences() as a whole sentence.
    size_t end = i - 1;
    if (closer(buffer_[end]) && end > 0) --end;
    const char32_t e = buffer_[end];
    if ((e == '.' || e == '!' || e == '?') &&
        utf16_length(trimmed(std::u32string_view(buffer_).substr(0, i))) >= min_chars_)
      return -1;
  }
  return -1;
}

std::vector<std::string> ReplySplitter::sentences() {
  std::vector<std::string> out;
  size_t from = 0;
  for (size_t i = 0; i < buffer_.size(); ++i) {
    const char32_t c = buffer_[i];
    size_t end;
    if (c == '\n') {
      end = i;
    } else if (c == '.' || c == '!' || c == '?' || c == ';' || c == ':') {
      // A boundary only once the next character is known to be whitespace (a streamed "3." may become "3.5").
      if (i + 1 >= buffer_.size()) break;
      const char32_t next = buffer_[i + 1];
      const bool closed_then_space = closer(next) && i + 2 < buffer_.size() && js_space(buffer_[i + 2]);
      if (!js_space(next) && !closed_then_space) continue;
      if (c == '.' && is_abbreviation(from, i)) continue;
      if (c == ':' || c == ';') continue;  // clauses, kept with their sentence
      end = closer(next) ? i + 1 : i;
    } else {
      continue;
    }
    const std::u32string_view sentence = trimmed(std::u32string_view(buffer_).substr(from, end + 1 - from));
    // A piece with nothing to say (a line that is only a quote mark or a rule) stays with the next one.
    if (has_word(sentence) && (utf16_length(sentence) >= min_chars_ || c == '\n')) {
      out.push_back(to_utf8(sentence));
      from = end + 1;
    }
  }
  buffer_.erase(0, from);
  return out;
}

std::string ReplySplitter::flush() {
  first_words_ = 0;
  std::string rest = to_utf8(trimmed(buffer_));
  buffer_.clear();
  return rest;
}

bool ReplySplitter::is_abbreviation(size_t from, size_t dot) const {
  size_t start = dot;
  while (start > from && (ascii_letter(buffer_[start - 1]) || buffer_[start - 1] == '.')) --start;
  const std::u32string_view word = std::u32string_view(buffer_).substr(start, dot - start);
  if (word.size() == 1 && word[0] >= 'A' && word[0] <= 'Z') return true;  // an initial: "J. R. R."
  std::string lower;
  for (char32_t c : word) lower.push_back(static_cast<char>(c >= 'A' && c <= 'Z' ? c + 32 : c));
  return std::find(kAbbreviations.begin(), kAbbreviations.end(), lower) != kAbbreviations.end();
}

}  // namespace sotto::text
