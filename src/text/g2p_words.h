// One word -> phoneme bytes by misaki's rules over its lexicon: gold then silver, the case variants of a key,
// function words that depend on the next sound ("the", "to", "a", "an", "in"), heteronyms by tag,
// -s / -ed / -ing / possessive endings on known stems, capitalised and all-caps stress, initialisms spelled.
// Internal to the G2P (src/text/g2p*.cpp).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "text/g2p_lexicon.h"

namespace sotto::g2p {

// Penn Treebank tags, the subset our context rules guess (misaki gets them from spaCy's tagger).
enum class Pos : uint8_t { X, VB, VBD, VBN, VBP, VBZ, VBG, NN, NNP, JJ, RB, DT, IN, PRP, MD, TO, CC, RP };

// What follows the word: the first sound of the next word (misaki's TokenContext).
struct NextSound {
  int8_t vowel = -1;  // 1: a vowel, 0: a consonant, -1: none (end, or punctuation first)
  bool to = false;    // the next word is "to"
};

// misaki's stress levels, doubled so they are integers: -4 none at all, -2 demote, -1 demote if primary,
// 0 secondary if none, 1 (capitalised word), 2, 4 (all caps) primary if none.
inline constexpr int kNoStress = 100;
std::string apply_stress(std::string ps, int stress2);

bool is_vowel(char phoneme_byte);
bool is_consonant(char phoneme_byte);

class WordRules {
 public:
  // `hidden` (when given) hides lexicon words from every lookup: the held-out evaluation reads a held-out word
  // as if the lexicon had never held it (nor the other held-out words).
  explicit WordRules(const Lexicon& lex, bool (*hidden)(std::string_view) = nullptr)
      : lex_(lex), hidden_(hidden) {}

  // The word's phonemes (appended to out) or false. `word` is ASCII: letters, ' - and . inside.
  bool word(std::string_view word, Pos pos, NextSound next, std::string& out) const;
  // Lexicon lookup with misaki's stress argument (kNoStress for none), for number words and the like.
  bool lookup(std::string_view word, Pos pos, int stress2, const NextSound* next, std::string& out) const;
  // Letters spelled one by one ("FBI" -> ˌɛfbˌiˈI).
  bool spell(std::string_view letters, std::string& out) const;
  // The plural/3rd-person ending after a pronunciation (misaki's _s): s, z or ᵻz (ɪz in GB).
  void add_s(std::string& ps) const;
  void add_ed(std::string& ps) const;
  bool add_ing(std::string& ps) const;
  bool british() const { return lex_.british(); }
  // A word the lexicon does not know read as a known word with a suffix or prefix, by the lexicon's affix
  // rules (Lexicon::affixes, learned by tools/g2p_affixes.py): "abolishers" from "abolish", "unhappiness"
  // from "happiness". Case is ignored; false when no rule fits.
  bool affixes(std::string_view word, std::string& out) const;

 private:
  bool gold_or_silver(std::string_view word, bool gold_only, Lexicon::Entry& e) const;
  bool in_lexicon(std::string_view word) const;
  bool is_known(std::string_view word) const;
  bool special_case(std::string_view word, Pos pos, NextSound next, std::string& out) const;
  bool get_word(std::string_view word, Pos pos, int stress2, NextSound next, std::string& out) const;
  bool stem_s(std::string_view word, Pos pos, int stress2, NextSound next, std::string& out) const;
  bool stem_ed(std::string_view word, Pos pos, int stress2, NextSound next, std::string& out) const;
  bool stem_ing(std::string_view word, Pos pos, int stress2, NextSound next, std::string& out) const;
  bool known_stem(const std::string& stem, std::string& ps) const;

  const Lexicon& lex_;
  bool (*hidden_)(std::string_view);
};

}  // namespace sotto::g2p
