// Protobuf wire-format cursor; see protobuf.h for the limits it enforces.
#include "io/protobuf.h"

namespace sotto::pb {

std::string_view wire_type_name(WireType w) {
  switch (w) {
    case WireType::Varint:
      return "varint";
    case WireType::Fixed64:
      return "fixed64";
    case WireType::Len:
      return "length-delimited";
    case WireType::StartGroup:
      return "start-group";
    case WireType::EndGroup:
      return "end-group";
    case WireType::Fixed32:
      return "fixed32";
  }
  return "invalid";
}

Result<uint64_t> Reader::read_varint_at_pos(uint64_t start_offset, std::string_view what) {
  const size_t start = pos_;
  auto v = decode_varint(bytes_, pos_);
  if (!v) {
    // Cut off when every byte left has its continuation bit set and there are fewer than 10 of them.
    bool cut_off = bytes_.size() - start < 10;
    for (size_t i = start; i < bytes_.size() && cut_off; ++i) cut_off = (bytes_[i] & 0x80) != 0;
    pos_ = start;
    return error(
        format_, ": ", message_, ' ', what, " at byte ", start_offset, ": ",
        cut_off ? "varint runs past the end of the message" : "varint longer than 10 bytes or over 64 bits");
  }
  return *v;
}

Result<Field> Reader::next_field() {
  const uint64_t tag_offset = offset();
  SOTTO_ASSIGN(uint64_t tag, read_varint_at_pos(tag_offset, "field tag"));
  const uint64_t number = tag >> 3;
  const uint32_t wire = static_cast<uint32_t>(tag & 7);
  if (number == 0 || number > 536870911u)  // protobuf field numbers are 1 .. 2^29-1
    return error(format_, ": ", message_, " field tag at byte ", tag_offset, " has invalid field number ",
                 number);
  if (wire > 5)
    return error(format_, ": ", message_, " field ", number, " at byte ", tag_offset,
                 " has invalid wire type ", wire);
  return Field{static_cast<uint32_t>(number), static_cast<WireType>(wire), tag_offset};
}

Status Reader::fail(const Field& f, std::string_view field_name, std::string_view reason) const {
  return error(format_, ": ", message_, " field ", f.number, " (", field_name, ") at byte ", f.tag_offset,
               ": ", reason);
}

Status Reader::expect(const Field& f, std::string_view field_name, WireType a) const {
  if (f.wire == a) return {};
  return fail(f, field_name, cat("wire type ", wire_type_name(f.wire), ", expected ", wire_type_name(a)));
}

Status Reader::expect(const Field& f, std::string_view field_name, WireType a, WireType b) const {
  if (f.wire == a || f.wire == b) return {};
  return fail(
      f, field_name,
      cat("wire type ", wire_type_name(f.wire), ", expected ", wire_type_name(a), " or ", wire_type_name(b)));
}

Result<uint64_t> Reader::varint(const Field& f) {
  if (f.wire != WireType::Varint) return fail(f, "varint", cat("wire type is ", wire_type_name(f.wire)));
  return read_varint_at_pos(offset(), cat("field ", f.number));
}

Result<uint32_t> Reader::fixed32(const Field& f) {
  if (f.wire != WireType::Fixed32) return fail(f, "fixed32", cat("wire type is ", wire_type_name(f.wire)));
  if (bytes_.size() - pos_ < 4) return fail(f, "fixed32", "value runs past the end of the message");
  uint32_t v;
  std::memcpy(&v, bytes_.data() + pos_, 4);  // little-endian on disk, as on x86-64 and wasm32
  pos_ += 4;
  return v;
}

Result<uint64_t> Reader::fixed64(const Field& f) {
  if (f.wire != WireType::Fixed64) return fail(f, "fixed64", cat("wire type is ", wire_type_name(f.wire)));
  if (bytes_.size() - pos_ < 8) return fail(f, "fixed64", "value runs past the end of the message");
  uint64_t v;
  std::memcpy(&v, bytes_.data() + pos_, 8);
  pos_ += 8;
  return v;
}

Result<std::span<const uint8_t>> Reader::bytes(const Field& f) {
  if (f.wire != WireType::Len) return fail(f, "bytes", cat("wire type is ", wire_type_name(f.wire)));
  SOTTO_ASSIGN(uint64_t length, read_varint_at_pos(offset(), cat("field ", f.number, " length")));
  const uint64_t remaining = bytes_.size() - pos_;
  if (length > remaining)
    return fail(
        f, "bytes",
        cat("length ", length, " runs past the end of the ", message_, " (", remaining, " bytes left)"));
  std::span<const uint8_t> out = bytes_.subspan(pos_, static_cast<size_t>(length));
  pos_ += static_cast<size_t>(length);
  return out;
}

Result<std::string_view> Reader::string(const Field& f) {
  SOTTO_ASSIGN(std::span<const uint8_t> b, bytes(f));
  return std::string_view(reinterpret_cast<const char*>(b.data()), b.size());
}

Result<Reader> Reader::message(const Field& f, std::string_view nested_name) {
  SOTTO_ASSIGN(std::span<const uint8_t> b, bytes(f));
  const uint64_t start = base_ + static_cast<uint64_t>(b.data() - bytes_.data());
  return Reader(b, start, format_, nested_name);
}

Result<std::span<const uint8_t>> Reader::packed_or_single(const Field& f) {
  const size_t start = pos_;
  switch (f.wire) {
    case WireType::Len:
      return bytes(f);
    case WireType::Varint:
      SOTTO_TRY(varint(f).status());
      break;
    case WireType::Fixed32:
      SOTTO_TRY(fixed32(f).status());
      break;
    case WireType::Fixed64:
      SOTTO_TRY(fixed64(f).status());
      break;
    default:
      return fail(f, "repeated scalar", cat("wire type is ", wire_type_name(f.wire)));
  }
  return bytes_.subspan(start, pos_ - start);
}

Status Reader::skip(const Field& f, int depth) {
  switch (f.wire) {
    case WireType::Varint:
      return varint(f).status();
    case WireType::Fixed64:
      return fixed64(f).status();
    case WireType::Fixed32:
      return fixed32(f).status();
    case WireType::Len:
      return bytes(f).status();
    case WireType::EndGroup:
      return fail(f, "end-group", "end of a group that was never started");
    case WireType::StartGroup: {
      if (depth >= kMaxMessageDepth)
        return fail(f, "group", cat("groups nested more than ", kMaxMessageDepth, " deep"));
      while (!at_end()) {
        SOTTO_ASSIGN(Field inner, next_field());
        if (inner.wire == WireType::EndGroup) {
          if (inner.number != f.number)
            return fail(inner, "end-group",
                        cat("closes group ", inner.number, " but group ", f.number, " is open"));
          return {};
        }
        SOTTO_TRY(skip(inner, depth + 1));
      }
      return fail(f, "group", "group is never closed");
    }
  }
  return fail(f, "unknown", "invalid wire type");
}

}  // namespace sotto::pb
