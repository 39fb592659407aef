// Letter-to-sound for words in no lexicon: our own model, trained by tools/g2p_lts_train.py on misaki's
// lexicon (data/g2p/lts-en-*.bin, carried at the end of each g2p-en-*.bin lexicon file). Each letter is
// aligned with zero, one or two phonemes (a stress mark rides with its vowel); a letter's phonemes are those
// of the widest letter context around it seen in training (up to five letters each side), backing off to
// narrower ones.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.h"

namespace sotto::g2p {

class LetterToSound {
 public:
  // Reads the tables (copied); an empty span gives a model that knows nothing (every word comes out empty).
  static Result<LetterToSound> load(std::span<const uint8_t> bytes, std::string_view name);

  // Phoneme bytes (see g2p_lexicon.h) for a word of ASCII letters (case ignored, other characters skipped),
  // with one primary stress.
  std::string read(std::string_view word) const;

  bool empty() const { return outputs_.empty(); }

 private:
  struct Level {
    int left = 0, right = 0;
    size_t offset = 0, n_records = 0;  // into records_: n_records of (left + 1 + right) letters + u16 index
  };
  int find(const Level& level, std::string_view context) const;

  std::vector<std::string> outputs_;  // phoneme bytes
  std::vector<Level> levels_;         // narrowest first
  std::vector<uint8_t> records_;
};

}  // namespace sotto::g2p
