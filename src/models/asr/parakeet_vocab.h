// Parakeet's token pieces, read from NeMo's SentencePiece model (tokenizer.model, a protobuf ModelProto:
// field 1 = repeated SentencePiece {1: piece, 2: score, 3: type}; a BYTE piece (type 6) "<0xHH>" is the byte
// HH) or from the Hugging Face layout's tokenizer.json (transformers' ParakeetConverter: a BPE whose
// model.vocab holds the same pieces at the same ids; its added <blank> is not a piece), and turned back into
// text: pieces joined, U+2581 ("▁", SentencePiece's word start) read as a space, the leading space dropped. The
// decoder's token ids are the pieces' indices (blank = the piece count, one past the last).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "core/error.h"

namespace sotto::asr {

struct ParakeetVocab {
  std::vector<std::string> pieces;
};

// `file_name` prefixes errors ("tokenizer.model: ModelProto field 1 at byte 12: ...").
Result<ParakeetVocab> parse_sentencepiece_vocab(std::span<const uint8_t> bytes,
                                                std::string_view file_name = "tokenizer.model");
// tokenizer.json's pieces (text/tokenizer_json.h).
Result<ParakeetVocab> parse_tokenizer_json_vocab(std::span<const uint8_t> bytes,
                                                 std::string_view file_name = "tokenizer.json");
// Either file, told by its bytes (is_tokenizer_json).
Result<ParakeetVocab> parse_parakeet_vocab(std::span<const uint8_t> bytes, std::string_view file_name);
// The vocabulary must have exactly vocab_size - 1 pieces (the model's token count without blank).
Status check_vocab_size(const ParakeetVocab& vocab, int model_vocab_size, std::string_view file_name);
// Text of a token sequence (ids outside the vocabulary are skipped).
std::string detokenize(const ParakeetVocab& vocab, std::span<const int32_t> tokens);

}  // namespace sotto::asr
