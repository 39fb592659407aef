// A language model's streamed reply cut into the pieces a voice speaks: the first piece a short clause (so the
// first sound comes sooner), then whole sentences, each handed to speech synthesis as soon as it is complete.
// The same rule as the agent page's web/agent/sentences.js (SentenceSplitter), so `sotto agent` and the page
// speak the same pieces; tests/unit/reply_splitter_test.cpp replays cases that page code wrote
// (tests/fixtures/agent/reply_pieces.json, tools/reply_pieces_reference.mjs).
//
//   ReplySplitter split(/*first_words=*/5);
//   for (text : stream) for (piece : split.push(text)) speak(piece);
//   speak(split.flush());   // what is left when the reply ends ("" if nothing)
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace sotto::text {

class ReplySplitter {
 public:
  // A sentence shorter than this (in UTF-16 units, as the page counts) waits for the next one: a lone "Yes."
  // sounds choppy when synthesised alone, and each synthesis call has a fixed cost.
  static constexpr size_t kMinChars = 12;
  // The first piece's clause cut: at a comma, semicolon, colon or dash after at least this many words.
  static constexpr size_t kFirstClauseMinWords = 3;

  // first_words > 0: the reply's first piece ends at the first clause mark after kFirstClauseMinWords words,
  // else after first_words whole words, else at its sentence's end, whichever comes first; never inside a word
  // (a word is whole once whitespace follows it); a number counts as the words it is read as (one per digit),
  // and one that would take the piece past first_words starts the next piece instead. 0: whole sentences only.
  explicit ReplySplitter(size_t first_words = 0, size_t min_chars = kMinChars)
      : first_words_(first_words), min_chars_(min_chars) {}

  // Adds streamed UTF-8 text (whole characters); -> the pieces it completed, trimmed, in order.
  std::vector<std::string> push(std::string_view utf8);
  // The rest when the reply ends, trimmed ("" if nothing); the splitter is then empty.
  std::string flush();

 private:
  long first_clause() const;  // where the first piece ends in buffer_, or -1 while not known yet
  std::vector<std::string> sentences();
  bool is_abbreviation(size_t from, size_t dot) const;

  std::u32string buffer_;
  size_t first_words_;
  size_t min_chars_;
};

}  // namespace sotto::text
