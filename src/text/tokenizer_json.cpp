#include "text/tokenizer_json.h"

#include "io/json.h"

namespace sotto {

namespace {

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

}  // namespace

std::optional<char> byte_piece(std::string_view p) {
  if (p.size() != 6 || !p.starts_with("<0x") || p[5] != '>' || hex_digit(p[3]) < 0 || hex_digit(p[4]) < 0)
    return std::nullopt;
  return static_cast<char>(hex_digit(p[3]) * 16 + hex_digit(p[4]));
}

Result<std::vector<std::string>> tokenizer_json_pieces(std::span<const uint8_t> bytes,
                                                       std::string_view file_name) {
  const std::string_view text(reinterpret_cast<const char*>(bytes.data()), bytes.size());
  SOTTO_ASSIGN(JsonValue root, parse_json(text, file_name));
  const JsonValue* model = root.find("model");
  const JsonValue* vocab = model && model->is_object() ? model->find("vocab") : nullptr;
  if (!vocab || !vocab->is_object()) return error(file_name, ": no model.vocab object");
  std::vector<std::string> pieces(vocab->members.size());
  std::vector<bool> seen(pieces.size());
  for (const JsonMember& m : vocab->members) {
    const std::optional<uint64_t> id = m.value.as_u64();
    if (!id || *id >= pieces.size())
      return error(file_name, ": model.vocab[", quoted(m.key), "] is not an id below ", pieces.size());
    if (seen[*id]) return error(file_name, ": id ", *id, " is given to two pieces");
    seen[*id] = true;
    const std::optional<char> byte = byte_piece(m.key);
    pieces[*id] = byte ? std::string(1, *byte) : m.key;
  }
  return pieces;
}

}  // namespace sotto
