// A bounds-checked little-endian cursor over a file's bytes. Every read checks the remaining length first,
// so a truncated or hostile file produces an error that names the field and the offset, never a read past
// the end. Counts read from a file must be checked against remaining() before anything is allocated for them.
#pragma once

#include <cstdint>
#include <cstring>
#include <span>
#include <string_view>

#include "core/error.h"

namespace sotto {

class ByteReader {
 public:
  // `format` prefixes every message ("gguf", "onnx" ...).
  ByteReader(std::span<const uint8_t> bytes, std::string_view format) : bytes_(bytes), format_(format) {}

  uint64_t pos() const { return pos_; }
  uint64_t size() const { return bytes_.size(); }
  uint64_t remaining() const { return bytes_.size() - pos_; }
  const uint8_t* here() const { return bytes_.data() + pos_; }
  std::span<const uint8_t> bytes() const { return bytes_; }

  // Fails unless n more bytes exist; `what` names the field for the message.
  Status need(uint64_t n, std::string_view what) const {
    if (n > remaining())
      return error(format_, ": ", what, " at byte ", pos_, " needs ", n, " bytes but the file ends at byte ",
                   bytes_.size());
    return {};
  }
  Status skip(uint64_t n, std::string_view what) {
    SOTTO_TRY(need(n, what));
    pos_ += n;
    return {};
  }
  Status seek(uint64_t offset, std::string_view what) {
    if (offset > bytes_.size())
      return error(format_, ": ", what, " points to byte ", offset, ", past the end of the file (",
                   bytes_.size(), " bytes)");
    pos_ = offset;
    return {};
  }

  template <class T>
  Result<T> read(std::string_view what) {
    static_assert(std::is_trivially_copyable_v<T>);
    SOTTO_TRY(need(sizeof(T), what));
    T v;
    std::memcpy(&v, here(), sizeof(T));  // files are little-endian, as are x86-64 and wasm32
    pos_ += sizeof(T);
    return v;
  }

  // n raw bytes viewed in place.
  Result<std::span<const uint8_t>> view(uint64_t n, std::string_view what) {
    SOTTO_TRY(need(n, what));
    std::span<const uint8_t> s(here(), static_cast<size_t>(n));
    pos_ += n;
    return s;
  }

 private:
  std::span<const uint8_t> bytes_;
  std::string_view format_;
  uint64_t pos_ = 0;
};

}  // namespace sotto
