#include "text/unicode.h"

#include <algorithm>
#include <array>

namespace sotto {

namespace unicode_data {
extern const uint32_t kClassRuns[];
extern const uint32_t kClassRunCount;
}  // namespace unicode_data

std::vector<uint32_t> decode_utf8_lenient(std::string_view text) {
  std::vector<uint32_t> cpts;
  cpts.reserve(text.size());
  const auto byte = [&](size_t i) { return static_cast<uint8_t>(text[i]); };
  const auto continues = [&](size_t i) { return i < text.size() && (byte(i) & 0xC0) == 0x80; };
  size_t i = 0;
  while (i < text.size()) {
    const uint8_t lead = byte(i);
    if (lead < 0x80) {
      cpts.push_back(lead);
      i += 1;
    } else if ((lead & 0xE0) == 0xC0 && continues(i + 1)) {
      cpts.push_back((uint32_t{lead} & 0x1F) << 6 | (byte(i + 1) & 0x3F));
      i += 2;
    } else if ((lead & 0xF0) == 0xE0 && continues(i + 1) && continues(i + 2)) {
      cpts.push_back((uint32_t{lead} & 0x0F) << 12 | (byte(i + 1) & 0x3Fu) << 6 | (byte(i + 2) & 0x3F));
      i += 3;
    } else if ((lead & 0xF8) == 0xF0 && continues(i + 1) && continues(i + 2) && continues(i + 3)) {
      const uint32_t cpt = (uint32_t{lead} & 0x07) << 18 | (byte(i + 1) & 0x3Fu) << 12 |
                           (byte(i + 2) & 0x3Fu) << 6 | (byte(i + 3) & 0x3F);
      cpts.push_back(cpt <= kMaxCodepoint ? cpt : kReplacementChar);
      i += 4;
    } else {
      cpts.push_back(kReplacementChar);
      i += 1;
    }
  }
  return cpts;
}

void append_utf8(std::string& out, uint32_t cpt) {
  if (cpt < 0x80) {
    out.push_back(static_cast<char>(cpt));
  } else if (cpt < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cpt >> 6)));
    out.push_back(static_cast<char>(0x80 | (cpt & 0x3F)));
  } else if (cpt < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (cpt >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cpt >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cpt & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (cpt >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cpt >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cpt >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cpt & 0x3F)));
  }
}

CharClass char_class(uint32_t cpt) {
  if (cpt < 0x80) {  // the common case, without the binary search
    if ((cpt | 0x20) >= 'a' && (cpt | 0x20) <= 'z') return CharClass::Letter;
    if (cpt >= '0' && cpt <= '9') return CharClass::Number;
    return CharClass::Other;
  }
  if (cpt > kMaxCodepoint) return CharClass::Other;
  const uint32_t* runs = unicode_data::kClassRuns;
  const uint32_t* end = runs + unicode_data::kClassRunCount;
  // The last run starting at or before cpt.
  const uint32_t* run =
      std::upper_bound(runs, end, cpt, [](uint32_t c, uint32_t entry) { return c < (entry >> 2); });
  return static_cast<CharClass>(run[-1] & 3);
}

bool is_whitespace(uint32_t cpt) {
  if (cpt <= 0x20) return cpt == 0x20 || (cpt >= 0x09 && cpt <= 0x0D);
  if (cpt < 0x85) return false;
  switch (cpt) {
    case 0x0085:
    case 0x00A0:
    case 0x1680:
    case 0x2028:
    case 0x2029:
    case 0x202F:
    case 0x205F:
    case 0x3000:
      return true;
    default:
      return cpt >= 0x2000 && cpt <= 0x200A;
  }
}

namespace {

constexpr bool gpt2_byte_is_printable(int b) {
  return (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
}

// Built at compile time (no guarded statics: the wasm build has no thread-safe-static runtime).
struct Gpt2Table {
  std::array<uint16_t, 256> cpt_of_byte{};
  std::array<char, 256 * 2> utf8{};  // every mapped code point is < U+0180: two UTF-8 bytes at most
  std::array<uint8_t, 256> utf8_len{};
};

constexpr Gpt2Table make_gpt2_table() {
  Gpt2Table t;
  uint16_t next_unprintable = 0x100;
  for (int b = 0; b < 256; ++b) {
    const uint16_t cpt = gpt2_byte_is_printable(b) ? static_cast<uint16_t>(b) : next_unprintable++;
    t.cpt_of_byte[b] = cpt;
    if (cpt < 0x80) {
      t.utf8[b * 2] = static_cast<char>(cpt);
      t.utf8_len[b] = 1;
    } else {
      t.utf8[b * 2] = static_cast<char>(0xC0 | (cpt >> 6));
      t.utf8[b * 2 + 1] = static_cast<char>(0x80 | (cpt & 0x3F));
      t.utf8_len[b] = 2;
    }
  }
  return t;
}

constexpr Gpt2Table kGpt2 = make_gpt2_table();

}  // namespace

std::string_view byte_to_gpt2_char(uint8_t byte) {
  return {kGpt2.utf8.data() + byte * 2, kGpt2.utf8_len[byte]};
}

int gpt2_char_to_byte(uint32_t cpt) {
  if (cpt < 0x100) return gpt2_byte_is_printable(static_cast<int>(cpt)) ? static_cast<int>(cpt) : -1;
  if (cpt >= 0x100 + 68) return -1;
  for (int b = 0; b < 256; ++b)
    if (kGpt2.cpt_of_byte[b] == cpt) return b;
  return -1;
}

}  // namespace sotto
