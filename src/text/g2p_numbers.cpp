// Numbers as English words, the way misaki reads them (it calls the num2words package): cardinals without
// "and" (misaki drops it), ordinals, and years read in pairs ("nineteen oh-five", "twenty twenty-four").
// Words come out space-separated in ASCII; the caller looks each one up in the lexicon.
#include "text/g2p_numbers.h"

#include <charconv>

namespace sotto::g2p {

namespace {

constexpr const char* kOnes[] = {"zero",    "one",     "two",       "three",    "four",
                                 "five",    "six",     "seven",     "eight",    "nine",
                                 "ten",     "eleven",  "twelve",    "thirteen", "fourteen",
                                 "fifteen", "sixteen", "seventeen", "eighteen", "nineteen"};
constexpr const char* kTens[] = {"",      "",      "twenty",  "thirty", "forty",
                                 "fifty", "sixty", "seventy", "eighty", "ninety"};
constexpr const char* kScales[] = {"", "thousand", "million", "billion", "trillion", "quadrillion"};

void append_word(std::string& out, std::string_view w) {
  if (!out.empty()) out.push_back(' ');
  out.append(w);
}

void below_thousand(uint64_t n, std::string& out) {
  if (n >= 100) {
    append_word(out, kOnes[n / 100]);
    append_word(out, "hundred");
    n %= 100;
    if (n == 0) return;
  }
  if (n < 20) {
    append_word(out, kOnes[n]);
  } else {
    append_word(out, kTens[n / 10]);
    if (n % 10) append_word(out, kOnes[n % 10]);
  }
}

}  // namespace

std::string cardinal_words(uint64_t n) {
  std::string out;
  if (n == 0) return "zero";
  if (n >= 1000000000000000000ull) {
    // Past the scales: digit by digit.
    char digits[24];
    const auto [end, ec] = std::to_chars(digits, digits + sizeof digits, n);
    return digit_words(std::string_view(digits, static_cast<size_t>(end - digits)));
  }
  uint32_t groups[7] = {};
  int n_groups = 0;
  for (uint64_t v = n; v > 0; v /= 1000) groups[n_groups++] = static_cast<uint32_t>(v % 1000);
  for (int g = n_groups - 1; g >= 0; --g) {
    if (groups[g] == 0) continue;
    below_thousand(groups[g], out);
    if (g > 0) append_word(out, kScales[g]);
  }
  return out;
}

std::string ordinal_words(uint64_t n) {
  std::string out = cardinal_words(n);
  const size_t last = out.rfind(' ') == std::string::npos ? 0 : out.rfind(' ') + 1;
  const std::string w = out.substr(last);
  out.resize(last);
  static constexpr struct {
    const char* cardinal;
    const char* ordinal;
  } kIrregular[] = {{"one", "first"},    {"two", "second"}, {"three", "third"},   {"five", "fifth"},
                    {"eight", "eighth"}, {"nine", "ninth"}, {"twelve", "twelfth"}};
  for (const auto& [c, o] : kIrregular)
    if (w == c) return out + o;
  if (!w.empty() && w.back() == 'y') return out + w.substr(0, w.size() - 1) + "ieth";
  return out + w + "th";
}

std::string year_words(uint64_t n) {
  const uint64_t high = n / 100, low = n % 100;
  if (high == 0 || (high % 10 == 0 && low < 10) || high >= 100) return cardinal_words(n);
  std::string out = cardinal_words(high);
  if (low == 0) {
    out += " hundred";
  } else if (low < 10) {
    out += " oh ";
    out += kOnes[low];
  } else {
    out += ' ';
    out += cardinal_words(low);
  }
  return out;
}

std::string digit_words(std::string_view digits) {
  std::string out;
  for (char c : digits)
    if (c >= '0' && c <= '9') append_word(out, kOnes[c - '0']);
  return out;
}

}  // namespace sotto::g2p
