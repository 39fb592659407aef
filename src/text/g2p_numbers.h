// Numbers as English words (ASCII, space-separated, no "and"): what the G2P then looks up word by word.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace sotto::g2p {

std::string cardinal_words(uint64_t n);            // 1234 -> "one thousand two hundred thirty four"
std::string ordinal_words(uint64_t n);             // 22 -> "twenty second"
std::string year_words(uint64_t n);                // 1905 -> "nineteen oh five", 2000 -> "two thousand"
std::string digit_words(std::string_view digits);  // "042" -> "zero four two"

}  // namespace sotto::g2p
