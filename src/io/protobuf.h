// A bounded cursor over the protobuf wire format (https://protobuf.dev/programming-guides/encoding/), enough
// to read ONNX files without a protobuf library. A message is a sequence of (tag, value) pairs; the tag's low
// three bits say how the value is encoded (varint, 8 bytes, length-prefixed, 4 bytes, or a deprecated group)
// and the rest is the field number. Every read checks the bytes that remain first, so a truncated or hostile
// file gives an error naming the message, the field and the absolute byte offset, never a read past the end.
//
// Limits that keep hostile files cheap:
//   - a varint is at most 10 bytes and must fit 64 bits;
//   - a length prefix must fit in the bytes that remain in the enclosing message;
//   - groups (wire types 3/4, unused by ONNX) are skipped field by field with a nesting limit;
//   - callers pass a depth to every nested message and stop at kMaxMessageDepth.
#pragma once

#include <cstdint>
#include <cstring>
#include <optional>
#include <span>
#include <string_view>

#include "core/error.h"

namespace sotto::pb {

// Deep enough for any real ONNX file (Silero VAD nests 4 subgraphs, about 13 messages); small enough that a
// file of nested length prefixes cannot exhaust the stack.
inline constexpr int kMaxMessageDepth = 64;

enum class WireType : uint8_t { Varint = 0, Fixed64 = 1, Len = 2, StartGroup = 3, EndGroup = 4, Fixed32 = 5 };

std::string_view wire_type_name(WireType w);

struct Field {
  uint32_t number = 0;
  WireType wire = WireType::Varint;
  uint64_t tag_offset = 0;  // absolute byte offset of the tag in the file, for messages
};

// Decodes one varint at bytes[pos], advancing pos. nullopt when it runs past the end, is longer than 10 bytes
// or does not fit 64 bits.
inline std::optional<uint64_t> decode_varint(std::span<const uint8_t> bytes, size_t& pos) {
  uint64_t value = 0;
  for (int i = 0; i < 10; ++i) {
    if (pos >= bytes.size()) return std::nullopt;
    const uint8_t b = bytes[pos++];
    // The 10th byte carries only bit 63: anything above 1 would overflow.
    if (i == 9 && b > 1) return std::nullopt;
    value |= static_cast<uint64_t>(b & 0x7f) << (7 * i);
    if ((b & 0x80) == 0) return value;
  }
  return std::nullopt;
}

// Number of varints in a packed repeated field, counted without decoding: one per byte whose high bit is
// clear. nullopt when the last varint is cut off. (Over-long varints are caught when decoding.)
inline std::optional<uint64_t> count_packed_varints(std::span<const uint8_t> bytes) {
  uint64_t n = 0;
  for (uint8_t b : bytes) n += (b & 0x80) == 0;
  if (!bytes.empty() && (bytes.back() & 0x80) != 0) return std::nullopt;
  return n;
}

class Reader {
 public:
  // `format` ("onnx") prefixes messages; `message` ("TensorProto") names what this reader walks;
  // `base_offset` is where `bytes` start in the file.
  Reader(std::span<const uint8_t> bytes, uint64_t base_offset, std::string_view format,
         std::string_view message)
      : bytes_(bytes), base_(base_offset), format_(format), message_(message) {}

  bool at_end() const { return pos_ >= bytes_.size(); }
  uint64_t offset() const { return base_ + pos_; }  // absolute
  std::string_view message_name() const { return message_; }

  Result<Field> next_field();
  Result<uint64_t> varint(const Field& f);
  Result<uint32_t> fixed32(const Field& f);
  Result<uint64_t> fixed64(const Field& f);
  // A length-delimited value viewed in place; the length is checked against the bytes that remain.
  Result<std::span<const uint8_t>> bytes(const Field& f);
  Result<std::string_view> string(const Field& f);
  // A nested message as its own reader (absolute offsets preserved).
  Result<Reader> message(const Field& f, std::string_view nested_name);
  // The raw encoded bytes of a scalar or packed repeated field: for a varint/fixed field the value's own
  // bytes, which are themselves a valid packed encoding of one element; for wire type Len, the payload.
  // Lets a repeated field be read the same way whether the writer packed it or not.
  Result<std::span<const uint8_t>> packed_or_single(const Field& f);
  // Skips a field of any wire type. Groups are walked to their matching end tag, `depth` levels deep at most.
  Status skip(const Field& f, int depth);

  // "onnx: TensorProto field 9 (raw_data) at byte 1234: ..." prefix for callers' own checks.
  Status fail(const Field& f, std::string_view field_name, std::string_view reason) const;
  // Fails unless `f` has one of the expected wire types.
  Status expect(const Field& f, std::string_view field_name, WireType a) const;
  Status expect(const Field& f, std::string_view field_name, WireType a, WireType b) const;

 private:
  Result<uint64_t> read_varint_at_pos(uint64_t start_offset, std::string_view what);

  std::span<const uint8_t> bytes_;
  uint64_t base_;
  std::string_view format_;
  std::string_view message_;
  size_t pos_ = 0;
};

}  // namespace sotto::pb
