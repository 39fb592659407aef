// The G2P's text side: raw UTF-8 -> a plain ASCII form (curly quotes straightened, accents dropped, other
// scripts and emoji removed), then tokens, with what an LLM writes read out as words (numbers, money, times,
// units, abbreviations, URLs). Internal to src/text/g2p*.cpp.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "text/g2p.h"
#include "text/g2p_words.h"

namespace sotto::g2p {

// Bytes the ASCII form uses for characters ASCII lacks.
inline constexpr char kEmDashChar = '\x1c';
inline constexpr char kEllipsisChar = '\x1d';
inline constexpr char kPoundChar = '\x10';
inline constexpr char kEuroChar = '\x11';
inline constexpr char kYenChar = '\x12';

struct Token {
  enum class Kind : uint8_t { Word, Punct, Ready };
  Kind kind = Kind::Word;
  std::string text;  // ASCII; for Punct the phoneme bytes it stands for
  std::string ps;    // phoneme bytes, once known (Ready tokens carry them from the start)
  Pos pos = Pos::X;
  Source source = Source::Lexicon;
  bool space_after = false;
  bool sentence_start = false;
};

std::string clean_text(std::string_view utf8);
std::vector<Token> tokenize(std::string_view ascii, const WordRules& rules);

}  // namespace sotto::g2p
