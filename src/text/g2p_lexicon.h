// The pronunciation lexicon the G2P looks words up in: misaki 0.9.4's gold and silver dictionaries (US or GB
// English, Apache-2.0), stored by tools/g2p_lexicon.py as sorted, front-coded blocks of 16 entries, and read
// here in place (a lookup is a binary search over block heads, then a scan of at most 16 keys).
//
// Phonemes travel through the G2P as one byte per symbol ("phoneme bytes"): ASCII symbols (A I O Q W Y, the
// plain consonants, punctuation, space) stand for themselves and every other symbol is a byte >= 0x80 listed
// in kPhonemeSymbols; to_utf8() turns such a string into the text Kokoro reads.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.h"

namespace sotto::g2p {

// Phoneme bytes >= 0x80, in order: kPhonemeSymbols[b - 0x80].
inline constexpr std::string_view kPhonemeSymbols[] = {"ˈ", "ˌ", "æ", "ð", "ŋ", "ɑ", "ɒ", "ɔ", "ə", "ɛ", "ɜ",
                                                       "ɡ", "ɪ", "ɹ", "ɾ", "ʃ", "ʊ", "ʌ", "ʒ", "ʔ", "ʤ", "ʧ",
                                                       "θ", "ᵊ", "ᵻ", "ː", "ɐ", "—", "…", "“", "”"};
namespace ph {
inline constexpr char kPrimary = '\x80', kSecondary = '\x81', kAe = '\x82', kEth = '\x83', kEng = '\x84',
                      kAlpha = '\x85', kTurnedAlpha = '\x86', kOpenO = '\x87', kSchwa = '\x88',
                      kEpsilon = '\x89', kReversedEpsilon = '\x8a', kG = '\x8b', kSmallI = '\x8c',
                      kTurnedR = '\x8d', kFlap = '\x8e', kEsh = '\x8f', kUpsilon = '\x90', kTurnedV = '\x91',
                      kEzh = '\x92', kGlottal = '\x93', kDezh = '\x94', kTesh = '\x95', kTheta = '\x96',
                      kSchwaSup = '\x97', kBarredI = '\x98', kLong = '\x99', kTurnedA = '\x9a',
                      kEmDash = '\x9b', kEllipsis = '\x9c', kLeftQuote = '\x9d', kRightQuote = '\x9e';
}  // namespace ph

// Phoneme bytes -> UTF-8, with misaki's last step for Kokoro v1.0 (flap ɾ written T, glottal stop ʔ written t).
std::string to_utf8(std::string_view phoneme_bytes);
// UTF-8 phonemes (as misaki writes them) -> phoneme bytes; false if a symbol has no byte.
bool from_utf8(std::string_view utf8, std::string& out);

// misaki's coarse POS tags that key a heteronym's pronunciations.
enum class Tag : uint8_t { Default, None, Noun, Verb, Adj, Adv, Vbd, Vbn, Vbp, Dt, Count };

class Lexicon {
 public:
  enum class Tier : uint8_t { Gold, Silver };

  // Reads a g2p-en-*.bin image (copied; `name` names it in errors).
  static Result<Lexicon> load(std::span<const uint8_t> bytes, std::string_view name);

  bool british() const { return british_; }

  // A found entry: one pronunciation, or pronunciations by tag (heteronyms).
  struct Entry {
    const uint8_t* value = nullptr;  // null: no entry
    explicit operator bool() const { return value != nullptr; }
    bool has_variants() const { return value && (*value & 0x80); }
  };
  Entry find(std::string_view key, Tier tier) const;
  // Whether a heteronym lists a pronunciation for exactly `tag`.
  bool has_tag(Entry e, Tag tag) const;
  // Appends the pronunciation (phoneme bytes) for `tag` (Default when the entry has none for it); false when
  // the entry holds none (a heteronym variant may be empty).
  bool pronunciation(Entry e, Tag tag, std::string& out) const;

  // How a known word's phonemes change with a suffix or prefix (tools/g2p_affixes.py), in the order to try
  // them: suffixes longest first (for one suffix, the rules keyed by the stem's last phoneme, then '*'), then
  // prefixes longest first. Empty for a version 2 file.
  struct AffixRule {
    bool prefix = false;
    std::string letters;  // a-z
    char key = '*';       // suffix: the stem's last phoneme byte or '*'; prefix: signature S U s u (see .py)
    uint8_t drop = 0;     // phonemes taken off the stem's end
    std::string add;      // phoneme bytes appended (suffix) or put before (prefix)
  };
  const std::vector<AffixRule>& affixes() const { return affixes_; }

  size_t entries(Tier tier) const { return tables_[static_cast<int>(tier)].n_entries; }
  size_t bytes() const { return image_.size(); }
  // The letter-to-sound tables the file carries after the dictionaries (empty if none); see g2p_lts.h.
  std::span<const uint8_t> lts_section() const { return {image_.data() + lts_offset_, lts_bytes_}; }

 private:
  struct Table {
    uint32_t n_entries = 0, n_blocks = 0;
    size_t block_starts = 0;  // byte offset of u32 block_start[n_blocks + 1] in image_
    size_t data = 0, data_bytes = 0;
  };
  uint32_t block_start(const Table& t, uint32_t i) const;
  Status load_affixes(std::span<const uint8_t> bytes, std::string_view name);

  std::vector<uint8_t> image_;
  bool british_ = false;
  uint8_t code_to_byte_[256] = {};  // file phoneme code -> phoneme byte
  uint8_t tag_of_code_[256] = {};   // file tag code -> Tag
  Table tables_[2];
  size_t lts_offset_ = 0, lts_bytes_ = 0;
  std::vector<AffixRule> affixes_;
};

}  // namespace sotto::g2p
