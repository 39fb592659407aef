// StreamingDetokenizer: pieces of byte-level vocabularies often split a character (an emoji is usually two
// or three tokens), and a chat UI must not show half of one. We pass on only complete, valid UTF-8.
#include "text/tokenizer.h"

namespace sotto {

namespace {

constexpr std::string_view kReplacementUtf8 = "\xEF\xBF\xBD";

// Valid range of the second byte after `lead` (RFC 3629: no overlongs, no surrogates, <= U+10FFFF), and
// the sequence length; length 0 for a byte that cannot start a character.
struct LeadInfo {
  size_t length;
  uint8_t second_min, second_max;
};
LeadInfo lead_info(uint8_t lead) {
  if (lead < 0x80) return {1, 0, 0};
  if (lead >= 0xC2 && lead <= 0xDF) return {2, 0x80, 0xBF};
  if (lead == 0xE0) return {3, 0xA0, 0xBF};
  if (lead == 0xED) return {3, 0x80, 0x9F};
  if (lead >= 0xE1 && lead <= 0xEF) return {3, 0x80, 0xBF};
  if (lead == 0xF0) return {4, 0x90, 0xBF};
  if (lead >= 0xF1 && lead <= 0xF3) return {4, 0x80, 0xBF};
  if (lead == 0xF4) return {4, 0x80, 0x8F};
  return {0, 0, 0};
}

}  // namespace

std::string StreamingDetokenizer::push(TokenId id) {
  pending_ += tokenizer_->token_to_piece(id, render_special_);
  return take_complete(false);
}

std::string StreamingDetokenizer::finish() {
  return take_complete(true);
}

std::string StreamingDetokenizer::take_complete(bool at_end) {
  std::string out;
  size_t i = 0;
  while (i < pending_.size()) {
    const LeadInfo info = lead_info(static_cast<uint8_t>(pending_[i]));
    if (info.length == 0) {
      out.append(kReplacementUtf8);
      ++i;
      continue;
    }
    // How many bytes of the sequence are here and valid so far.
    size_t valid = 1;
    while (valid < info.length && i + valid < pending_.size()) {
      const uint8_t b = static_cast<uint8_t>(pending_[i + valid]);
      const bool ok = valid == 1 ? (b >= info.second_min && b <= info.second_max) : (b & 0xC0) == 0x80;
      if (!ok) break;
      ++valid;
    }
    if (valid == info.length) {
      out.append(pending_, i, valid);
      i += valid;
    } else if (i + valid == pending_.size() && !at_end) {
      break;  // a character still arriving: hold it back
    } else {
      out.append(kReplacementUtf8);  // a broken sequence: one U+FFFD for it, then resume after it
      i += valid;
    }
  }
  pending_.erase(0, i);
  return out;
}

}  // namespace sotto
