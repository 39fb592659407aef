// Errors as values. Nothing in the engine throws: a failure is a Status (or a Result<T> that holds one) whose
// message says what went wrong and where, in one line a user can act on, e.g.
//   gguf: tensor 'blk.3.attn_q.weight' ends at byte 9123456, past the end of the file (9000000 bytes)
// The same code runs in WebAssembly, where there is no libc printf: messages are built with cat(), which
// formats numbers with std::to_chars.
#pragma once

#include <charconv>
#include <concepts>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

namespace sotto {

namespace detail {
inline void append(std::string& out, std::string_view s) {
  out.append(s);
}
inline void append(std::string& out, const char* s) {
  out.append(s ? s : "(null)");
}
inline void append(std::string& out, const std::string& s) {
  out.append(s);
}
inline void append(std::string& out, char c) {
  out.push_back(c);
}
inline void append(std::string& out, bool b) {
  out.append(b ? "true" : "false");
}
template <std::integral T>
  requires(!std::same_as<T, char> && !std::same_as<T, bool>)
void append(std::string& out, T v) {
  char buf[24];
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v);
  out.append(buf, end);
}
template <std::floating_point T>
void append(std::string& out, T v) {
  char buf[40];
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, static_cast<double>(v));
  out.append(buf, ec == std::errc() ? end : buf);
}
}  // namespace detail

// cat("tensor '", name, "' has ", n, " dims") -> one string. Integers and floats print in full.
template <class... Parts>
std::string cat(const Parts&... parts) {
  std::string out;
  (detail::append(out, parts), ...);
  return out;
}

// A name from a file for a message: in single quotes, with control bytes, invalid UTF-8, quotes and
// backslashes written as \xNN (\n, \t, \', \\), so a corrupted key or tensor name prints on one line, in
// full (a NUL does not cut it) and cannot move the terminal's cursor: 'lla\x00a.\x1bmbedding_length'.
inline std::string quoted(std::string_view text) {
  std::string out = "'";
  auto hex = [&](unsigned char c) {
    constexpr char kDigits[] = "0123456789abcdef";
    out += "\\x";
    out += kDigits[c >> 4];
    out += kDigits[c & 15];
  };
  for (size_t i = 0; i < text.size();) {
    const unsigned char c = static_cast<unsigned char>(text[i]);
    if (c == '\'' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
      ++i;
    } else if (c == '\n' || c == '\t') {
      out += c == '\n' ? "\\n" : "\\t";
      ++i;
    } else if (c >= 0x20 && c < 0x7f) {
      out += static_cast<char>(c);
      ++i;
    } else if (c < 0x80 || c == 0x7f) {
      hex(c);
      ++i;
    } else {
      // A whole valid UTF-8 sequence stays as it is (no overlong forms, no surrogates, at most U+10FFFF).
      const size_t n = c >= 0xf0 ? 4 : c >= 0xe0 ? 3 : c >= 0xc2 ? 2 : 0;
      bool valid = n > 0 && c <= 0xf4 && i + n <= text.size();
      for (size_t k = 1; valid && k < n; ++k)
        valid = (static_cast<unsigned char>(text[i + k]) & 0xc0) == 0x80;
      if (valid && n >= 3) {
        const unsigned char c1 = static_cast<unsigned char>(text[i + 1]);
        valid = !(c == 0xe0 && c1 < 0xa0) && !(c == 0xed && c1 >= 0xa0) && !(c == 0xf0 && c1 < 0x90) &&
                !(c == 0xf4 && c1 >= 0x90);
      }
      if (!valid) {
        hex(c);
        ++i;
        continue;
      }
      out.append(text.substr(i, n));
      i += n;
    }
  }
  return out + "'";
}

class [[nodiscard]] Status {
 public:
  Status() = default;
  static Status failure(std::string message) {
    Status s;
    s.failed_ = true;
    s.message_ = std::move(message);
    return s;
  }
  bool ok() const { return !failed_; }
  explicit operator bool() const { return ok(); }
  const std::string& message() const { return message_; }
  // Prefix context ("while reading model.gguf: ") without losing the original reason.
  Status& context(std::string_view prefix) {
    if (failed_) message_.insert(0, std::string(prefix) + ": ");
    return *this;
  }

 private:
  bool failed_ = false;
  std::string message_;
};

// error("gguf: ", n_tensors, " tensors is more than the file can hold") -> a failed Status.
template <class... Parts>
Status error(const Parts&... parts) {
  return Status::failure(cat(parts...));
}

template <class T>
class [[nodiscard]] Result {
 public:
  Result(T value) : value_(std::move(value)) {}  // NOLINT: implicit by design, like std::expected
  Result(Status failed) : status_(std::move(failed)) {
    if (status_.ok()) status_ = Status::failure("internal error: Result built from an ok Status");
  }
  bool ok() const { return value_.has_value(); }
  explicit operator bool() const { return ok(); }
  const Status& status() const { return status_; }
  const std::string& message() const { return status_.message(); }
  T& value() & { return *value_; }
  const T& value() const& { return *value_; }
  T&& value() && { return std::move(*value_); }
  T* operator->() { return &*value_; }
  const T* operator->() const { return &*value_; }
  T& operator*() & { return *value_; }
  const T& operator*() const& { return *value_; }

 private:
  std::optional<T> value_;
  Status status_;
};

}  // namespace sotto

// Return early on failure. SOTTO_TRY(status_expr); SOTTO_ASSIGN(auto x, result_expr);
#define SOTTO_TRY(expr)                                    \
  do {                                                     \
    ::sotto::Status sotto_try_status_ = (expr);            \
    if (!sotto_try_status_.ok()) return sotto_try_status_; \
  } while (0)

#define SOTTO_CONCAT_INNER(a, b) a##b
#define SOTTO_CONCAT(a, b) SOTTO_CONCAT_INNER(a, b)
#define SOTTO_ASSIGN(decl, expr) SOTTO_ASSIGN_IMPL(SOTTO_CONCAT(sotto_result_, __LINE__), decl, expr)
#define SOTTO_ASSIGN_IMPL(tmp, decl, expr) \
  auto tmp = (expr);                       \
  if (!tmp.ok()) return tmp.status();      \
  decl = std::move(tmp).value()
