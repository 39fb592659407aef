// The pieces of a Hugging Face tokenizer.json, by id: its model.vocab {piece: id, ...}, as the speech
// recognisers' decoders need them (id -> text; encoding is not needed there). "<0xHH>" pieces are the byte HH
// (byte-fallback BPE, SentencePiece's byte pieces); U+2581 stays, for the caller's word-boundary rule. Added
// tokens outside model.vocab (Parakeet's <blank>) are not pieces. The ids must be 0..n-1, each once; ids are
// checked against the vocabulary's size, so a hostile id cannot size a table.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.h"

namespace sotto {

// Whether `bytes` are a tokenizer.json rather than a binary tokenizer (Moonshine's tokenizer.bin opens with a
// length byte, a SentencePiece model with a protobuf tag): a JSON object opens with '{'.
inline bool is_tokenizer_json(std::span<const uint8_t> bytes) {
  return !bytes.empty() && bytes[0] == '{';
}

// The byte a "<0xHH>" piece stands for (HH upper-case hex, as SentencePiece and tokenizers write it), else none.
std::optional<char> byte_piece(std::string_view piece);

// `file_name` prefixes errors ("tokenizer.json: id 3 is given to two pieces").
Result<std::vector<std::string>> tokenizer_json_pieces(std::span<const uint8_t> bytes,
                                                       std::string_view file_name = "tokenizer.json");

}  // namespace sotto
