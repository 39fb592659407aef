// safetensors reader: the header is parsed with the strict JSON parser, then every entry is checked — known
// dtype, non-negative shape whose byte size fits 64 bits, begin <= end, end within the data section and
// end - begin equal to the shape's size.
#include "io/safetensors.h"

#include <cstring>

#include "io/json.h"

namespace sotto {

namespace {

struct DTypeName {
  std::string_view name;
  DType dtype;
};
constexpr DTypeName kDTypes[] = {
    {"F64", DType::F64},   {"F32", DType::F32}, {"F16", DType::F16}, {"BF16", DType::BF16},
    {"I64", DType::I64},   {"I32", DType::I32}, {"I16", DType::I16}, {"I8", DType::I8},
    {"U64", DType::U64},   {"U32", DType::U32}, {"U16", DType::U16}, {"U8", DType::U8},
    {"BOOL", DType::Bool},
};

Result<TensorInfo> read_entry(const std::string& name, const JsonValue& entry, uint64_t data_offset,
                              uint64_t data_bytes, const uint8_t* file) {
  if (!entry.is_object()) return error("safetensors: entry ", quoted(name), " is not an object");
  TensorInfo t;
  t.name = name;
  const JsonValue* dtype = entry.find("dtype");
  if (!dtype || !dtype->is_string())
    return error("safetensors: tensor ", quoted(name), " has no \"dtype\" string");
  auto parsed = safetensors_dtype(dtype->text);
  if (!parsed)
    return error("safetensors: tensor ", quoted(name), " has unsupported dtype ", quoted(dtype->text));
  t.dtype = *parsed;

  const JsonValue* shape = entry.find("shape");
  if (!shape || !shape->is_array())
    return error("safetensors: tensor ", quoted(name), " has no \"shape\" array");
  uint64_t n_elems = 1;
  for (const JsonValue& dim : shape->items) {
    auto d = dim.as_u64();
    if (!d || *d > static_cast<uint64_t>(INT64_MAX))
      return error("safetensors: tensor ", quoted(name),
                   " has a shape entry that is not a non-negative integer");
    if (*d != 0 && n_elems > UINT64_MAX / *d)
      return error("safetensors: tensor ", quoted(name), " size overflows");
    n_elems *= *d;
    t.shape.push_back(static_cast<int64_t>(*d));
  }
  auto size = dtype_bytes(t.dtype, n_elems);
  if (!size) return error("safetensors: tensor ", quoted(name), " size overflows");

  const JsonValue* offsets = entry.find("data_offsets");
  if (!offsets || !offsets->is_array() || offsets->items.size() != 2)
    return error("safetensors: tensor ", quoted(name), " has no \"data_offsets\" [begin, end] pair");
  auto begin = offsets->items[0].as_u64();
  auto end = offsets->items[1].as_u64();
  if (!begin || !end)
    return error("safetensors: tensor ", quoted(name), " data_offsets are not non-negative integers");
  if (*begin > *end)
    return error("safetensors: tensor ", quoted(name), " data_offsets [", *begin, ", ", *end,
                 "] end before they begin");
  if (*end > data_bytes)
    return error("safetensors: tensor ", quoted(name), " ends at byte ", data_offset + *end,
                 ", past the end of the file (", data_offset + data_bytes, " bytes)");
  if (*end - *begin != *size)
    return error("safetensors: tensor ", quoted(name), " has ", *end - *begin, " bytes of data but its ",
                 dtype->text, " shape needs ", *size);
  t.offset = data_offset + *begin;
  t.bytes = *size;
  t.data = file + t.offset;
  return t;
}

}  // namespace

std::optional<DType> safetensors_dtype(std::string_view name) {
  for (const auto& d : kDTypes)
    if (d.name == name) return d.dtype;
  return std::nullopt;
}

std::string_view safetensors_dtype_name(DType t) {
  for (const auto& d : kDTypes)
    if (d.dtype == t) return d.name;
  return dtype_name(t);
}

const TensorInfo* SafetensorsFile::find_tensor(std::string_view name) const {
  for (const auto& t : tensors)
    if (t.name == name) return &t;
  return nullptr;
}

Result<SafetensorsFile> parse_safetensors(std::span<const uint8_t> bytes) {
  SafetensorsFile file;
  if (bytes.size() < 8)
    return error("safetensors: the file is ", bytes.size(), " bytes, too short for the 8-byte header length");
  std::memcpy(&file.header_bytes, bytes.data(), 8);
  if (file.header_bytes > kSafetensorsMaxHeaderBytes)
    return error("safetensors: header length ", file.header_bytes, " is over the ",
                 kSafetensorsMaxHeaderBytes, "-byte limit");
  if (file.header_bytes > bytes.size() - 8)
    return error("safetensors: header length ", file.header_bytes, " runs past the end of the file (",
                 bytes.size(), " bytes)");
  file.data_offset = 8 + file.header_bytes;
  std::string_view header(reinterpret_cast<const char*>(bytes.data()) + 8,
                          static_cast<size_t>(file.header_bytes));
  if (header.empty() || header[0] != '{') return error("safetensors: the header does not start with '{'");
  // Depth 3 is all a valid header needs (root, entry, shape); a little slack for odd but valid metadata.
  SOTTO_ASSIGN(JsonValue root, parse_json(header, "safetensors: header", 8));
  if (!root.is_object()) return error("safetensors: the header is not a JSON object");

  uint64_t data_bytes = bytes.size() - file.data_offset;
  for (const auto& [name, entry] : root.members) {
    if (name == "__metadata__") {
      if (!entry.is_object()) return error("safetensors: __metadata__ is not an object");
      for (const auto& [key, value] : entry.members) {
        if (!value.is_string())
          return error("safetensors: __metadata__ value ", quoted(key), " is not a string");
        file.metadata.emplace_back(key, value.text);
      }
      continue;
    }
    SOTTO_ASSIGN(TensorInfo t, read_entry(name, entry, file.data_offset, data_bytes, bytes.data()));
    file.tensors.push_back(std::move(t));
  }
  return file;
}

}  // namespace sotto
