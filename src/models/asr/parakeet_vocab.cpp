#include "models/asr/parakeet_vocab.h"

#include "io/protobuf.h"
#include "text/tokenizer_json.h"

namespace sotto::asr {

Result<ParakeetVocab> parse_sentencepiece_vocab(std::span<const uint8_t> bytes, std::string_view file_name) {
  ParakeetVocab vocab;
  pb::Reader model(bytes, 0, file_name, "ModelProto");
  while (!model.at_end()) {
    SOTTO_ASSIGN(const pb::Field f, model.next_field());
    if (f.number != 1) {
      SOTTO_TRY(model.skip(f, 1));
      continue;
    }
    SOTTO_TRY(model.expect(f, "pieces", pb::WireType::Len));
    SOTTO_ASSIGN(pb::Reader piece, model.message(f, "SentencePiece"));
    std::string text;
    uint64_t type = 1;  // NORMAL
    while (!piece.at_end()) {
      SOTTO_ASSIGN(const pb::Field pf, piece.next_field());
      if (pf.number == 1) {
        SOTTO_TRY(piece.expect(pf, "piece", pb::WireType::Len));
        SOTTO_ASSIGN(const std::string_view s, piece.string(pf));
        text.assign(s);
      } else if (pf.number == 3) {
        SOTTO_TRY(piece.expect(pf, "type", pb::WireType::Varint));
        SOTTO_ASSIGN(type, piece.varint(pf));
      } else {
        SOTTO_TRY(piece.skip(pf, 2));
      }
    }
    if (const std::optional<char> byte = type == 6 ? byte_piece(text) : std::nullopt)
      text = std::string(1, *byte);
    vocab.pieces.push_back(std::move(text));
  }
  if (vocab.pieces.empty()) return error(file_name, ": no pieces (not a SentencePiece model)");
  return vocab;
}

Result<ParakeetVocab> parse_tokenizer_json_vocab(std::span<const uint8_t> bytes, std::string_view file_name) {
  SOTTO_ASSIGN(std::vector<std::string> pieces, tokenizer_json_pieces(bytes, file_name));
  if (pieces.empty()) return error(file_name, ": no pieces in model.vocab");
  return ParakeetVocab{std::move(pieces)};
}

Result<ParakeetVocab> parse_parakeet_vocab(std::span<const uint8_t> bytes, std::string_view file_name) {
  if (is_tokenizer_json(bytes)) return parse_tokenizer_json_vocab(bytes, file_name);
  return parse_sentencepiece_vocab(bytes, file_name);
}

Status check_vocab_size(const ParakeetVocab& vocab, int model_vocab_size, std::string_view file_name) {
  if (static_cast<int64_t>(vocab.pieces.size()) + 1 != model_vocab_size)
    return error(file_name, ": ", vocab.pieces.size(), " pieces, but the model has ", model_vocab_size - 1,
                 " tokens (+ blank): the tokenizer is not this model's (v2 has 1024, v3 8192)");
  return {};
}

std::string detokenize(const ParakeetVocab& vocab, std::span<const int32_t> tokens) {
  static constexpr std::string_view kWordStart = "\xE2\x96\x81";  // U+2581
  std::string out;
  for (int32_t t : tokens) {
    if (t < 0 || static_cast<size_t>(t) >= vocab.pieces.size()) continue;
    const std::string& p = vocab.pieces[static_cast<size_t>(t)];
    for (size_t i = 0; i < p.size();) {
      if (p.compare(i, kWordStart.size(), kWordStart) == 0) {
        out += ' ';
        i += kWordStart.size();
      } else {
        out += p[i++];
      }
    }
  }
  if (!out.empty() && out.front() == ' ') out.erase(0, 1);
  return out;
}

}  // namespace sotto::asr
