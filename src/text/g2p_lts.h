// Letter-to-sound for words in no lexicon: our own model, trained by tools/g2p_lts_train.py on misaki's
// lexicon and compiled in (g2p_lts_data_us.cpp / g2p_lts_data_gb.cpp). Each letter is aligned with zero, one or
// two phonemes (a stress mark rides with its vowel); a letter's phonemes are chosen by the longest letter
// context around it seen in training (up to four letters each side), backing off to shorter ones.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace sotto::g2p {

// Phoneme bytes (see g2p_lexicon.h) for a word of ASCII letters (case ignored; other characters skipped).
// Empty for an empty word.
std::string letters_to_sounds(std::string_view word, bool british);

}  // namespace sotto::g2p
