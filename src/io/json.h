// A small strict JSON parser (RFC 8259) for safetensors headers and for checking the JSON that `sotto info`
// prints. Nesting is bounded (default 64) so a hostile "[[[[..." fails cleanly instead of exhausting the
// stack. Numbers keep their text, so integers such as byte offsets are read back exactly (as_u64), not via
// double.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.h"

namespace sotto {

struct JsonMember;

struct JsonValue {
  enum class Kind : uint8_t { Null, Bool, Number, String, Array, Object };
  Kind kind = Kind::Null;
  bool boolean = false;
  std::string text;                 // String: the unescaped UTF-8; Number: the number exactly as written
  std::vector<JsonValue> items;     // Array
  std::vector<JsonMember> members;  // Object, in file order (keys are unique)

  bool is_string() const { return kind == Kind::String; }
  bool is_array() const { return kind == Kind::Array; }
  bool is_object() const { return kind == Kind::Object; }
  bool is_number() const { return kind == Kind::Number; }
  const JsonValue* find(std::string_view key) const;  // Object member, or nullptr
  // A Number written as a plain non-negative integer that fits in 64 bits ("12", not "1.0", "-1", "1e3").
  std::optional<uint64_t> as_u64() const;
};

struct JsonMember {
  std::string key;
  JsonValue value;
};

// `format` prefixes messages ("safetensors: header JSON at byte 17: expected ':'").
Result<JsonValue> parse_json(std::string_view text, std::string_view format = "json", int max_depth = 64);

// Length of the valid UTF-8 sequence starting at s[i], or 0 when it is not one (truncated, overlong,
// surrogate, above U+10FFFF). Shared by the JSON parser and json_quote().
size_t utf8_sequence_length(std::string_view s, size_t i);

}  // namespace sotto
