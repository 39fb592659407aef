// The letter-to-sound tables (generated into g2p_lts_data.cpp by tools/g2p_lts_train.py).
#pragma once

#include <cstddef>
#include <iterator>
#include <string_view>

namespace sotto::g2p {

inline constexpr int kLtsLevels = 9;
// Letters (left, right) of each level's context, narrowest first.
inline constexpr int kLtsLeft[kLtsLevels] = {0, 0, 1, 1, 2, 2, 3, 3, 4};
inline constexpr int kLtsRight[kLtsLevels] = {0, 1, 1, 2, 2, 3, 3, 4, 4};

struct LtsTables {
  const char* const* outputs;  // UTF-8 phonemes (stress marks included) of each output
  size_t n_outputs;
  std::string_view levels[kLtsLevels];  // sorted fixed-width records: context letters + 2 base-64 digits
};

extern const LtsTables kUsTables;
extern const LtsTables kGbTables;

}  // namespace sotto::g2p
