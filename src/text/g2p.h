// English text -> Kokoro phonemes, our own G2P (no espeak-ng). It follows misaki 0.9.4 (hexgrad's G2P that
// Kokoro-82M v1.0's English voices were trained on): misaki's US or GB lexicon (src/text/g2p_lexicon.h), its
// rules for stress, -s/-ed/-ing, possessives and function words, numbers read as misaki reads them; where misaki
// runs spaCy's tagger to pick a heteronym's pronunciation we use context rules, and where it falls back to
// espeak-ng we use a letter-to-sound model of our own (src/text/g2p_lts.h). Text normalisation (times,
// currency, units, abbreviations, URLs, ...) covers what an LLM writes.
//
// Output: UTF-8 phonemes in Kokoro v1.0's vocabulary (misaki's symbols, the flap written T), words separated
// by spaces, punctuation ; : , . ! ? — … " ( ) “ ” kept. Any input is accepted: invalid UTF-8, other scripts and
// emoji are dropped, never an error.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.h"
#include "text/g2p_lexicon.h"
#include "text/g2p_lts.h"

namespace sotto::g2p {

enum class Lang : uint8_t { EnUs, EnGb };

// Kokoro reads at most 510 phonemes (code points) a call.
inline constexpr size_t kMaxPhonemesPerCall = 510;

// Where a word's phonemes came from.
// Affix: a word in no lexicon read as a known word with a suffix or prefix (the lexicon's affix rules).
enum class Source : uint8_t { Lexicon, Rule, Number, LetterToSound, Punctuation, Spelled, Affix };

// "lexicon", "rule", "number", "letter-to-sound", "punctuation", "spelled", "affix".
const char* source_name(Source s);

struct WordPhonemes {
  std::string text;      // the word as it was read (after normalisation: "twenty" for part of "20")
  std::string phonemes;  // UTF-8
  Source source = Source::Lexicon;
};

class G2p {
 public:
  // `lexicon` is a g2p-en-us.bin or g2p-en-gb.bin image (tools/g2p_lexicon.py); its language is the G2P's.
  static Result<G2p> load(std::span<const uint8_t> lexicon, std::string_view name);
  static Result<G2p> load_file(const std::string& path);  // native only (g2p_native.cpp)
  // The same with the letter-to-sound model given apart (a data/g2p/jsm-en-*.bin image) in place of the file's
  // own: how the tests read the committed model whatever lexicon file is installed.
  static Result<G2p> load(std::span<const uint8_t> lexicon, std::string_view name,
                          std::span<const uint8_t> letter_to_sound);

  Lang lang() const { return lex_.british() ? Lang::EnGb : Lang::EnUs; }
  const Lexicon& lexicon() const { return lex_; }

  std::string phonemize(std::string_view text) const;
  // The text cut into sentences (and sentences whose phonemes pass max_phonemes cut at ; : , — or a space),
  // each sentence's phonemes: what the TTS speaks one call at a time. Empty sentences are left out.
  struct Sentence {
    std::string text;
    std::string phonemes;
  };
  std::vector<Sentence> phonemize_sentences(std::string_view text,
                                            size_t max_phonemes = kMaxPhonemesPerCall) const;
  // Every token with its phonemes, in order (what tests compare with misaki word by word).
  std::vector<WordPhonemes> words(std::string_view text) const;

  // A word read as if the lexicon held neither it nor any word `hidden` names: misaki's rules on the stems
  // left (-s, -ed, -ing, possessives), else the letter-to-sound model. UTF-8. For the held-out evaluation.
  std::string read_as_unknown(std::string_view word, bool (*hidden)(std::string_view)) const;

  // The letter-to-sound model alone on a word (UTF-8).
  std::string letters_to_sounds(std::string_view word) const;

 private:
  Lexicon lex_;
  LetterToSound lts_;
};

// Sentences of `text` as the TTS streams them: cut after . ! ? … (and closing quotes or brackets after them)
// followed by a space and not ending an abbreviation such as "Dr." or an initial (nor a list number, "1.",
// opening a line), and at line breaks.
std::vector<std::string_view> split_sentences(std::string_view text);

// The same for text still arriving (an LLM's reply, token by token): the sentences complete so far (a boundary
// counts once the next word has begun, or at a newline) and the byte offset where the unfinished rest starts;
// speak those, keep text.substr(rest) and append to it.
struct SentenceSplit {
  std::vector<std::string_view> sentences;
  size_t rest = 0;
};
SentenceSplit split_complete_sentences(std::string_view text);

}  // namespace sotto::g2p
