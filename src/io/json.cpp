// Strict JSON: no comments, no trailing commas, no leading zeros, no NaN, strings must be valid UTF-8 and
// escapes must be well formed (surrogate pairs included); duplicate object keys are rejected.
#include "io/json.h"

#include <algorithm>
#include <charconv>

namespace sotto {

namespace {

void append_utf8(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

class Parser {
 public:
  Parser(std::string_view text, std::string_view format, int max_depth)
      : s_(text), format_(format), max_depth_(max_depth) {}

  Result<JsonValue> parse_document() {
    JsonValue v;
    SOTTO_TRY(parse_value(v, 0));
    skip_space();
    if (pos_ != s_.size()) return fail("unexpected text after the JSON value");
    return v;
  }

 private:
  Status fail(std::string_view what) const { return error(format_, ": JSON at byte ", pos_, ": ", what); }

  void skip_space() {
    while (pos_ < s_.size() && (s_[pos_] == ' ' || s_[pos_] == '\t' || s_[pos_] == '\n' || s_[pos_] == '\r'))
      ++pos_;
  }
  bool consume(char c) {
    if (pos_ < s_.size() && s_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }
  bool consume_word(std::string_view w) {
    if (s_.substr(pos_, w.size()) != w) return false;
    pos_ += w.size();
    return true;
  }

  Status parse_value(JsonValue& v, int depth) {
    skip_space();
    if (pos_ >= s_.size()) return fail("unexpected end of text");
    char c = s_[pos_];
    if (c == '{' || c == '[') {
      if (depth >= max_depth_) return fail(cat("nesting deeper than ", max_depth_, " levels"));
      return c == '{' ? parse_object(v, depth + 1) : parse_array(v, depth + 1);
    }
    if (c == '"') {
      v.kind = JsonValue::Kind::String;
      return parse_string(v.text);
    }
    if (c == '-' || (c >= '0' && c <= '9')) return parse_number(v);
    if (consume_word("true")) {
      v.kind = JsonValue::Kind::Bool;
      v.boolean = true;
      return {};
    }
    if (consume_word("false")) {
      v.kind = JsonValue::Kind::Bool;
      return {};
    }
    if (consume_word("null")) return {};
    return fail("expected a value");
  }

  Status parse_object(JsonValue& v, int depth) {
    v.kind = JsonValue::Kind::Object;
    ++pos_;
    skip_space();
    if (consume('}')) return {};
    for (;;) {
      skip_space();
      if (pos_ >= s_.size() || s_[pos_] != '"') return fail("expected a string key");
      std::string key;
      SOTTO_TRY(parse_string(key));
      skip_space();
      if (!consume(':')) return fail("expected ':'");
      v.members.push_back({std::move(key), JsonValue{}});
      SOTTO_TRY(parse_value(v.members.back().value, depth));
      skip_space();
      if (consume('}')) return check_unique_keys(v);
      if (!consume(',')) return fail("expected ',' or '}'");
    }
  }

  // Sorting once keeps a header with millions of keys O(n log n) rather than quadratic.
  Status check_unique_keys(const JsonValue& v) const {
    std::vector<std::string_view> keys;
    keys.reserve(v.members.size());
    for (const auto& member : v.members) keys.push_back(member.key);
    std::sort(keys.begin(), keys.end());
    auto dup = std::adjacent_find(keys.begin(), keys.end());
    if (dup != keys.end()) return fail(cat("duplicate key ", quoted(*dup)));
    return {};
  }

  Status parse_array(JsonValue& v, int depth) {
    v.kind = JsonValue::Kind::Array;
    ++pos_;
    skip_space();
    if (consume(']')) return {};
    for (;;) {
      v.items.emplace_back();
      SOTTO_TRY(parse_value(v.items.back(), depth));
      skip_space();
      if (consume(']')) return {};
      if (!consume(',')) return fail("expected ',' or ']'");
    }
  }

  Result<uint32_t> parse_hex4() {
    if (s_.size() - pos_ < 4) return fail("truncated \\u escape");
    uint32_t cp = 0;
    auto [end, ec] = std::from_chars(s_.data() + pos_, s_.data() + pos_ + 4, cp, 16);
    if (ec != std::errc() || end != s_.data() + pos_ + 4) return fail("bad \\u escape");
    pos_ += 4;
    return cp;
  }

  Status parse_string(std::string& out) {
    ++pos_;  // opening quote
    for (;;) {
      if (pos_ >= s_.size()) return fail("unterminated string");
      auto c = static_cast<uint8_t>(s_[pos_]);
      if (c == '"') {
        ++pos_;
        return {};
      }
      if (c < 0x20) return fail("control character in string");
      if (c != '\\') {
        size_t n = utf8_sequence_length(s_, pos_);
        if (n == 0) return fail("invalid UTF-8 in string");
        out.append(s_.substr(pos_, n));
        pos_ += n;
        continue;
      }
      ++pos_;
      if (pos_ >= s_.size()) return fail("unterminated string");
      char e = s_[pos_++];
      switch (e) {
        case '"':
          out.push_back('"');
          break;
        case '\\':
          out.push_back('\\');
          break;
        case '/':
          out.push_back('/');
          break;
        case 'b':
          out.push_back('\b');
          break;
        case 'f':
          out.push_back('\f');
          break;
        case 'n':
          out.push_back('\n');
          break;
        case 'r':
          out.push_back('\r');
          break;
        case 't':
          out.push_back('\t');
          break;
        case 'u': {
          SOTTO_ASSIGN(uint32_t cp, parse_hex4());
          if (cp >= 0xDC00 && cp <= 0xDFFF) return fail("unpaired low surrogate");
          if (cp >= 0xD800 && cp <= 0xDBFF) {
            if (!consume_word("\\u")) return fail("unpaired high surrogate");
            SOTTO_ASSIGN(uint32_t low, parse_hex4());
            if (low < 0xDC00 || low > 0xDFFF) return fail("unpaired high surrogate");
            cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
          }
          append_utf8(out, cp);
          break;
        }
        default:
          return fail("bad escape");
      }
    }
  }

  Status parse_number(JsonValue& v) {
    size_t start = pos_;
    consume('-');
    auto digit = [&] { return pos_ < s_.size() && s_[pos_] >= '0' && s_[pos_] <= '9'; };
    if (!digit()) return fail("bad number");
    if (s_[pos_] == '0') {
      ++pos_;
    } else {
      while (digit()) ++pos_;
    }
    if (consume('.')) {
      if (!digit()) return fail("bad number");
      while (digit()) ++pos_;
    }
    if (pos_ < s_.size() && (s_[pos_] == 'e' || s_[pos_] == 'E')) {
      ++pos_;
      if (!consume('+')) consume('-');
      if (!digit()) return fail("bad number");
      while (digit()) ++pos_;
    }
    v.kind = JsonValue::Kind::Number;
    v.text = std::string(s_.substr(start, pos_ - start));
    return {};
  }

  std::string_view s_;
  std::string_view format_;
  int max_depth_;
  size_t pos_ = 0;
};

}  // namespace

// Length of the valid UTF-8 sequence at s[i], or 0 when it is not one (overlong, surrogate, > U+10FFFF).
size_t utf8_sequence_length(std::string_view s, size_t i) {
  auto at = [&](size_t k) { return static_cast<uint8_t>(s[k]); };
  uint8_t c = at(i);
  size_t n = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3 : (c >> 3) == 0x1E ? 4 : 0;
  if (n == 0 || i + n > s.size()) return 0;
  uint32_t cp = n == 1 ? c : n == 2 ? (c & 0x1F) : n == 3 ? (c & 0x0F) : (c & 0x07);
  for (size_t k = 1; k < n; ++k) {
    if ((at(i + k) & 0xC0) != 0x80) return 0;
    cp = (cp << 6) | (at(i + k) & 0x3F);
  }
  static constexpr uint32_t kMinForLength[5] = {0, 0, 0x80, 0x800, 0x10000};
  if (cp < kMinForLength[n] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
  return n;
}

const JsonValue* JsonValue::find(std::string_view key) const {
  for (const auto& member : members)
    if (member.key == key) return &member.value;
  return nullptr;
}

std::optional<uint64_t> JsonValue::as_u64() const {
  if (kind != Kind::Number || text.empty()) return std::nullopt;
  uint64_t v = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return v;
}

Result<JsonValue> parse_json(std::string_view text, std::string_view format, int max_depth) {
  return Parser(text, format, max_depth).parse_document();
}

}  // namespace sotto
