#include "text/pretokenize.h"

#include "text/unicode.h"

namespace sotto {

namespace {

bool is_cr_or_lf(uint32_t c) {
  return c == '\r' || c == '\n';
}

// [^\s\p{L}\p{N}]: punctuation, symbols, marks, controls, unassigned code points.
bool is_other(uint32_t c) {
  return !is_whitespace(c) && char_class(c) == CharClass::Other;
}

// ASCII-only lowering is exact here: no non-ASCII code point lowercases (simple mapping) to s t m d r e v l.
uint32_t ascii_lower(uint32_t c) {
  return (c >= 'A' && c <= 'Z') ? c + 32 : c;
}

class WordScanner {
 public:
  WordScanner(std::span<const uint32_t> cpts, PreTokenizer kind) : cpts_(cpts), kind_(kind) {}

  std::vector<size_t> run() {
    while (pos_ < cpts_.size()) {
      if (contraction()) continue;
      if (kind_ == PreTokenizer::Gpt2 ? gpt2_word() : qwen_llama3_word()) continue;
      whitespace();
    }
    return lengths_;
  }

 private:
  size_t size() const { return cpts_.size(); }
  bool in_range(size_t i) const { return i < cpts_.size(); }
  bool letter_at(size_t i) const { return in_range(i) && is_letter(cpts_[i]); }
  bool number_at(size_t i) const { return in_range(i) && is_number(cpts_[i]); }
  bool other_at(size_t i) const { return in_range(i) && is_other(cpts_[i]); }
  bool space_at(size_t i) const { return in_range(i) && is_whitespace(cpts_[i]); }

  // Ends the current word at `end` (past the last code point).
  void emit(size_t end) {
    if (end > word_start_) lengths_.push_back(end - word_start_);
    word_start_ = end;
    pos_ = end;
  }

  // 's 't 're 've 'm 'll 'd (either case, except GPT-2 which is lowercase only).
  bool contraction() {
    if (cpts_[pos_] != '\'' || !in_range(pos_ + 1)) return false;
    const bool fold = kind_ != PreTokenizer::Gpt2;
    const uint32_t c1 = fold ? ascii_lower(cpts_[pos_ + 1]) : cpts_[pos_ + 1];
    if (c1 == 's' || c1 == 't' || c1 == 'm' || c1 == 'd') {
      emit(pos_ + 2);
      return true;
    }
    if (!in_range(pos_ + 2)) return false;
    const uint32_t c2 = fold ? ascii_lower(cpts_[pos_ + 2]) : cpts_[pos_ + 2];
    if ((c1 == 'r' && c2 == 'e') || (c1 == 'v' && c2 == 'e') || (c1 == 'l' && c2 == 'l')) {
      emit(pos_ + 3);
      return true;
    }
    return false;
  }

  // [^\r\n\p{L}\p{N}]?\p{L}+ | \p{N} (or \p{N}{1,3}) | ' ?[^\s\p{L}\p{N}]+[\r\n]*'
  bool qwen_llama3_word() {
    const uint32_t c = cpts_[pos_];
    if (!is_cr_or_lf(c) && !is_number(c) && (is_letter(c) || letter_at(pos_ + 1))) {
      size_t end = pos_ + 1;
      while (letter_at(end)) ++end;
      emit(end);
      return true;
    }
    if (is_number(c)) {
      const size_t max_digits = kind_ == PreTokenizer::Llama3 ? 3 : 1;
      size_t end = pos_ + 1;
      while (end - pos_ < max_digits && number_at(end)) ++end;
      emit(end);
      return true;
    }
    const size_t first = c == ' ' ? pos_ + 1 : pos_;
    if (other_at(first)) {
      size_t end = first + 1;
      while (other_at(end)) ++end;
      while (in_range(end) && is_cr_or_lf(cpts_[end])) ++end;
      emit(end);
      return true;
    }
    return false;
  }

  // ' ?\p{L}+' | ' ?\p{N}+' | ' ?[^\s\p{L}\p{N}]+'
  bool gpt2_word() {
    const size_t first = cpts_[pos_] == ' ' ? pos_ + 1 : pos_;
    bool (WordScanner::*same_class)(size_t) const = nullptr;
    if (letter_at(first))
      same_class = &WordScanner::letter_at;
    else if (number_at(first))
      same_class = &WordScanner::number_at;
    else if (other_at(first))
      same_class = &WordScanner::other_at;
    else
      return false;
    size_t end = first + 1;
    while ((this->*same_class)(end)) ++end;
    emit(end);
    return true;
  }

  // \s*[\r\n]+ (not GPT-2) | \s+(?!\S) | \s+ ; a lone code point that matches nothing is a word of its own.
  void whitespace() {
    size_t n_spaces = 0;
    size_t end_of_last_newline = 0;
    while (space_at(pos_ + n_spaces)) {
      if (is_cr_or_lf(cpts_[pos_ + n_spaces])) end_of_last_newline = pos_ + n_spaces + 1;
      ++n_spaces;
    }
    if (kind_ != PreTokenizer::Gpt2 && end_of_last_newline > 0) return emit(end_of_last_newline);
    // A run of spaces before a non-space leaves its last space to start the next word (" word").
    if (n_spaces > 1 && in_range(pos_ + n_spaces)) return emit(pos_ + n_spaces - 1);
    if (n_spaces > 0) return emit(pos_ + n_spaces);
    emit(pos_ + 1);
  }

  std::span<const uint32_t> cpts_;
  PreTokenizer kind_;
  size_t pos_ = 0;
  size_t word_start_ = 0;
  std::vector<size_t> lengths_;
};

}  // namespace

std::vector<size_t> split_words(std::span<const uint32_t> cpts, PreTokenizer kind) {
  return WordScanner(cpts, kind).run();
}

}  // namespace sotto
