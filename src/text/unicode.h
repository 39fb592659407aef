// The little Unicode the LLM tokenizers need: UTF-8 decoding that behaves exactly like llama.cpp's (so that
// invalid input tokenizes the same way), the \p{L} / \p{N} / \s classes of a code point, and GPT-2's
// byte <-> printable-character mapping used by byte-level BPE vocabularies.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace sotto {

inline constexpr uint32_t kReplacementChar = 0xFFFD;
inline constexpr uint32_t kMaxCodepoint = 0x10FFFF;

// Bytes of the UTF-8 sequence that starts with `lead`, judged by its top four bits only (1 for a stray
// continuation byte). llama.cpp's SPM tokenizer cuts text into symbols this way.
inline size_t utf8_sequence_length(uint8_t lead) {
  constexpr uint8_t kLength[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};
  return kLength[lead >> 4];
}

// Decodes text into code points as llama.cpp does: a lead byte followed by the right number of continuation
// bytes is accepted as is (overlong forms and surrogates included); anything else becomes U+FFFD and
// consumes one byte. Sequences that decode above U+10FFFF also become U+FFFD (llama.cpp fails on them).
std::vector<uint32_t> decode_utf8_lenient(std::string_view text);

// Appends the UTF-8 form of `cpt` (<= U+10FFFF).
void append_utf8(std::string& out, uint32_t cpt);

enum class CharClass : uint8_t { Other = 0, Letter = 1, Number = 2 };
// \p{L} / \p{N} per Unicode 15.1 (the version llama.cpp's tables come from).
CharClass char_class(uint32_t cpt);
inline bool is_letter(uint32_t cpt) {
  return char_class(cpt) == CharClass::Letter;
}
inline bool is_number(uint32_t cpt) {
  return char_class(cpt) == CharClass::Number;
}
// \s: Unicode White_Space.
bool is_whitespace(uint32_t cpt);

// GPT-2 byte-level BPE writes every byte as a printable character: bytes that are printable Latin-1 stay
// themselves, the other 68 map to U+0100 + n in byte order. byte_to_gpt2_char(b) is that code point's UTF-8.
std::string_view byte_to_gpt2_char(uint8_t byte);
// The byte a GPT-2 character stands for, or -1 when `cpt` is not one of the 256.
int gpt2_char_to_byte(uint32_t cpt);

}  // namespace sotto
