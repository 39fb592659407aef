// TensorProto: read its fields, check its size against its dims, and expose its bytes (raw_data in place,
// typed fields decoded). Field numbers from onnx/onnx.proto.
#include "io/onnx_internal.h"

#include <cstdint>
#include <cstring>
#include <iterator>
#include <optional>

namespace sotto {

namespace {

struct OnnxTypeRow {
  OnnxDataType onnx;
  std::string_view name;
  std::optional<DType> dtype;  // nullopt: no sotto DType
  uint32_t elem_bytes;
};

// TensorProto.DataType values 0..16 from onnx.proto, in order. FLOAT8*, INT4/UINT4, FLOAT4 (17+) have no row.
constexpr OnnxTypeRow kOnnxTypes[] = {
    {OnnxDataType::Undefined, "undefined", std::nullopt, 0},
    {OnnxDataType::Float, "float32", DType::F32, 4},
    {OnnxDataType::Uint8, "uint8", DType::U8, 1},
    {OnnxDataType::Int8, "int8", DType::I8, 1},
    {OnnxDataType::Uint16, "uint16", DType::U16, 2},
    {OnnxDataType::Int16, "int16", DType::I16, 2},
    {OnnxDataType::Int32, "int32", DType::I32, 4},
    {OnnxDataType::Int64, "int64", DType::I64, 8},
    {OnnxDataType::String, "string", std::nullopt, 0},
    {OnnxDataType::Bool, "bool", DType::Bool, 1},
    {OnnxDataType::Float16, "float16", DType::F16, 2},
    {OnnxDataType::Double, "float64", DType::F64, 8},
    {OnnxDataType::Uint32, "uint32", DType::U32, 4},
    {OnnxDataType::Uint64, "uint64", DType::U64, 8},
    {OnnxDataType::Complex64, "complex64", std::nullopt, 8},
    {OnnxDataType::Complex128, "complex128", std::nullopt, 16},
    {OnnxDataType::Bfloat16, "bfloat16", DType::BF16, 2},
};

const OnnxTypeRow* onnx_type_row(int32_t data_type) {
  if (data_type < 0 || data_type >= static_cast<int32_t>(std::size(kOnnxTypes))) return nullptr;
  return &kOnnxTypes[data_type];
}

}  // namespace

std::string onnx_data_type_name(int32_t data_type) {
  const OnnxTypeRow* row = onnx_type_row(data_type);
  return row ? std::string(row->name) : cat("type ", data_type);
}

Result<DType> dtype_from_onnx(int32_t data_type) {
  const OnnxTypeRow* row = onnx_type_row(data_type);
  if (row && row->dtype) return *row->dtype;
  return error("onnx: data type ", data_type, " (", onnx_data_type_name(data_type), ") is not supported");
}

}  // namespace sotto

namespace sotto::onnx_detail {

bool onnx_data_type_supported(int32_t data_type) {
  const OnnxTypeRow* row = onnx_type_row(data_type);
  return row && row->dtype;
}

uint32_t onnx_elem_bytes(DType t) {
  for (const OnnxTypeRow& row : kOnnxTypes)
    if (row.dtype == t) return row.elem_bytes;
  return 1;  // unreachable: build_tensor only asks for DTypes from the table
}

using pb::Field;
using pb::Reader;
using pb::WireType;

namespace {

enum TensorField : uint32_t {
  kDims = 1,
  kDataType = 2,
  kSegment = 3,
  kFloatData = 4,
  kInt32Data = 5,
  kStringData = 6,
  kInt64Data = 7,
  kName = 8,
  kRawData = 9,
  kDoubleData = 10,
  kUint64Data = 11,
  kExternalData = 13,
  kDataLocation = 14,
};

constexpr int kMaxDims = 64;  // ONNX sets no limit; no real model comes close, and it bounds `sotto info`

struct Spans {
  std::vector<std::span<const uint8_t>> parts;
  uint64_t bytes() const {
    uint64_t n = 0;
    for (auto p : parts) n += p.size();
    return n;
  }
};

// Fixed-width values (float_data, double_data): the parts concatenated must be exactly n * width bytes.
Status copy_fixed(const Spans& s, uint32_t width, uint64_t n, std::string_view field, const std::string& who,
                  std::vector<uint8_t>& out) {
  const uint64_t have = s.bytes();
  if (have % width != 0 || have / width != n)
    return error("onnx: tensor ", quoted(who), " has ", have / width, " values in ", field,
                 " but its dims hold ", n);
  out.resize(static_cast<size_t>(have));
  size_t at = 0;
  for (auto p : s.parts) {
    if (!p.empty()) std::memcpy(out.data() + at, p.data(), p.size());
    at += p.size();
  }
  return {};
}

// Varint values (int32_data, int64_data, uint64_data), each range-checked to [lo, hi] (as int64, or as uint64
// when `is_unsigned`) and stored in `width` little-endian bytes.
Status copy_varints(const Spans& s, uint32_t width, bool is_unsigned, int64_t lo, int64_t hi, uint64_t n,
                    std::string_view field, const std::string& who, std::vector<uint8_t>& out) {
  uint64_t count = 0;
  for (auto p : s.parts) {
    auto c = pb::count_packed_varints(p);
    if (!c) return error("onnx: tensor ", quoted(who), " has a cut-off varint in ", field);
    count += *c;
  }
  if (count != n)
    return error("onnx: tensor ", quoted(who), " has ", count, " values in ", field, " but its dims hold ",
                 n);
  // count <= the field's bytes, so this allocation is bounded by the file size times `width` (checked against
  // size_t for wasm32, where 8 bytes per 1-byte varint could pass 4 GiB).
  if (n > SIZE_MAX / width)
    return error("onnx: tensor ", quoted(who), " is too large to decode (", n, " values)");
  out.resize(static_cast<size_t>(n * width));
  uint64_t index = 0;
  for (auto p : s.parts) {
    size_t pos = 0;
    while (pos < p.size()) {
      auto v = pb::decode_varint(p, pos);
      if (!v) return error("onnx: tensor ", quoted(who), " has a varint over 10 bytes in ", field);
      const bool in_range = is_unsigned ? *v <= static_cast<uint64_t>(hi)
                                        : static_cast<int64_t>(*v) >= lo && static_cast<int64_t>(*v) <= hi;
      if (!in_range)
        return error("onnx: tensor ", quoted(who), " ", field, "[", index,
                     "] = ", is_unsigned ? cat(*v) : cat(static_cast<int64_t>(*v)), " does not fit its type");
      // Two's complement little-endian: the low `width` bytes of the 64-bit value are the narrowed value.
      std::memcpy(out.data() + index * width, &*v, width);
      ++index;
    }
  }
  return {};
}

// A decimal external_data value ("offset", "length"); nullopt when it is not one.
std::optional<uint64_t> parse_decimal(std::string_view s) {
  if (s.empty() || s.size() > 19) return std::nullopt;
  uint64_t v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return std::nullopt;
    v = v * 10 + static_cast<uint64_t>(c - '0');
  }
  return v;
}

// Points `out` at its bytes in the external file named by the tensor's "location", after checking the name
// stays beside the model and the range lies inside that file and matches the tensor's size.
Status attach_external(const TensorProtoView& t, const std::string& who, uint64_t n_bytes,
                       const OnnxReadExternal& read_external, OnnxTensor& out) {
  const std::string& location = t.external_location;
  if (location.empty())
    return error("onnx: tensor ", quoted(who), " has external data without a 'location' entry");
  if (location[0] == '/' || location[0] == '\\' || location.find("..") != std::string::npos ||
      location.find(':') != std::string::npos)
    return error("onnx: tensor ", quoted(who), " has external data at '", location,
                 "', outside the model's directory");
  uint64_t offset = 0;
  if (!t.external_offset.empty()) {
    const std::optional<uint64_t> v = parse_decimal(t.external_offset);
    if (!v)
      return error("onnx: tensor ", quoted(who), " has external data offset '", t.external_offset,
                   "', not a number");
    offset = *v;
  }
  if (!t.external_length.empty()) {
    const std::optional<uint64_t> v = parse_decimal(t.external_length);
    if (!v)
      return error("onnx: tensor ", quoted(who), " has external data length '", t.external_length,
                   "', not a number");
    if (*v != n_bytes)
      return error("onnx: tensor ", quoted(who), " has ", *v, " bytes of external data in '", location,
                   "' but its dims and type (", onnx_data_type_name(t.data_type), ") need ", n_bytes);
  }
  auto read = read_external(location);
  if (!read.ok()) return error("onnx: tensor ", quoted(who), ": ", read.message());
  const std::span<const uint8_t> bytes = *read;
  if (offset > bytes.size() || n_bytes > bytes.size() - offset)
    return error("onnx: tensor ", quoted(who), " ends at byte ", offset + n_bytes, " of '", location,
                 "', past its end (", bytes.size(), " bytes)");
  out.from_file = true;
  out.file_data = bytes.data() + offset;
  out.file_offset = offset;
  out.external_location = location;
  return {};
}

}  // namespace

Result<TensorProtoView> read_tensor_proto(Reader r, int depth) {
  if (depth > pb::kMaxMessageDepth)
    return error("onnx: TensorProto at byte ", r.offset(), " is nested more than ", pb::kMaxMessageDepth,
                 " messages deep");
  TensorProtoView t;
  t.offset = r.offset();
  Spans float_data, int32_data, int64_data, double_data, uint64_data;
  while (!r.at_end()) {
    SOTTO_ASSIGN(Field f, r.next_field());
    switch (f.number) {
      case kDims: {
        SOTTO_TRY(r.expect(f, "dims", WireType::Varint, WireType::Len));
        SOTTO_ASSIGN(auto packed, r.packed_or_single(f));
        auto n = pb::count_packed_varints(packed);
        if (!n) return r.fail(f, "dims", "cut-off varint");
        if (t.dims.size() + *n > kMaxDims) return r.fail(f, "dims", cat("more than ", kMaxDims, " dims"));
        size_t pos = 0;
        while (pos < packed.size()) {
          auto v = pb::decode_varint(packed, pos);
          if (!v) return r.fail(f, "dims", "varint over 10 bytes");
          t.dims.push_back(static_cast<int64_t>(*v));
        }
        break;
      }
      case kDataType: {
        SOTTO_TRY(r.expect(f, "data_type", WireType::Varint));
        SOTTO_ASSIGN(uint64_t v, r.varint(f));
        t.data_type = static_cast<int32_t>(static_cast<int64_t>(v));
        if (static_cast<int64_t>(t.data_type) != static_cast<int64_t>(v))
          return r.fail(f, "data_type", cat("value ", static_cast<int64_t>(v), " is not an int32"));
        break;
      }
      case kName: {
        SOTTO_ASSIGN(std::string_view s, r.string(f));
        t.name = std::string(s);
        break;
      }
      case kRawData: {
        SOTTO_ASSIGN(t.raw, r.bytes(f));  // the last occurrence wins, as in protobuf
        t.has_raw = true;
        break;
      }
      case kFloatData:
      case kInt32Data:
      case kInt64Data:
      case kDoubleData:
      case kUint64Data: {
        // Unpacked values must have their element's wire type, or fixed-width bytes would be read as varints.
        const WireType element_wire = f.number == kFloatData    ? WireType::Fixed32
                                      : f.number == kDoubleData ? WireType::Fixed64
                                                                : WireType::Varint;
        SOTTO_TRY(r.expect(f, "typed data", element_wire, WireType::Len));
        SOTTO_ASSIGN(auto part, r.packed_or_single(f));
        Spans& dst = f.number == kFloatData    ? float_data
                     : f.number == kInt32Data  ? int32_data
                     : f.number == kInt64Data  ? int64_data
                     : f.number == kDoubleData ? double_data
                                               : uint64_data;
        dst.parts.push_back(part);
        break;
      }
      case kStringData:
        t.has_string_data = true;
        SOTTO_TRY(r.skip(f, depth));
        break;
      case kSegment:
        t.has_segment = true;
        SOTTO_TRY(r.skip(f, depth));
        break;
      case kExternalData: {  // StringStringEntryProto { key 1, value 2 }
        t.has_external_entries = true;
        SOTTO_TRY(r.expect(f, "external_data", WireType::Len));
        SOTTO_ASSIGN(Reader entry, r.message(f, "StringStringEntryProto"));
        std::string key, value;
        while (!entry.at_end()) {
          SOTTO_ASSIGN(Field ef, entry.next_field());
          if (ef.number == 1 || ef.number == 2) {
            SOTTO_ASSIGN(std::string_view sv, entry.string(ef));
            (ef.number == 1 ? key : value) = std::string(sv);
          } else {
            SOTTO_TRY(entry.skip(ef, depth + 1));
          }
        }
        if (key == "location") t.external_location = value;
        if (key == "offset") t.external_offset = value;
        if (key == "length") t.external_length = value;
        break;
      }
      case kDataLocation: {
        SOTTO_ASSIGN(uint64_t v, r.varint(f));
        if (v == 1) t.external = true;
        break;
      }
      default:
        SOTTO_TRY(r.skip(f, depth));
        break;
    }
  }
  t.float_data = std::move(float_data.parts);
  t.int32_data = std::move(int32_data.parts);
  t.int64_data = std::move(int64_data.parts);
  t.double_data = std::move(double_data.parts);
  t.uint64_data = std::move(uint64_data.parts);
  return t;
}

Status build_tensor(const TensorProtoView& t, std::span<const uint8_t> file, OnnxTensor& out,
                    const OnnxReadExternal* read_external) {
  const std::string& who = out.unique_name;
  const bool has_any_data = t.has_raw || !t.float_data.empty() || !t.int32_data.empty() ||
                            !t.int64_data.empty() || !t.double_data.empty() || !t.uint64_data.empty();
  // data_location EXTERNAL, or external_data entries standing in for the data a writer forgot to mark.
  const bool external = t.external || (t.has_external_entries && !has_any_data);
  if (external && !(read_external && *read_external))
    return error("onnx: tensor ", quoted(who), " keeps its data in an external file, which is not supported");
  if (t.has_segment) return error("onnx: tensor ", quoted(who), " is segmented, which is not supported");
  SOTTO_ASSIGN(DType dtype, dtype_from_onnx(t.data_type));
  const uint32_t width = onnx_elem_bytes(dtype);

  uint64_t n = 1;
  for (size_t i = 0; i < t.dims.size(); ++i) {
    const int64_t d = t.dims[i];
    if (d < 0) return error("onnx: tensor ", quoted(who), " has negative dim ", d, " at index ", i);
    if (d != 0 && n > UINT64_MAX / static_cast<uint64_t>(d))
      return error("onnx: tensor ", quoted(who), " has dims whose product overflows 64 bits");
    n *= static_cast<uint64_t>(d);
  }
  if (n > UINT64_MAX / width) return error("onnx: tensor ", quoted(who), " is too large (", n, " elements)");
  const uint64_t n_bytes = n * width;

  out.tensor_name = t.name;
  out.onnx_data_type = t.data_type;
  out.dtype = dtype;
  out.shape = t.dims;
  out.n_elements = n;
  out.n_bytes = n_bytes;

  const bool has_float = !t.float_data.empty(), has_i32 = !t.int32_data.empty(),
             has_i64 = !t.int64_data.empty(), has_f64 = !t.double_data.empty(),
             has_u64 = !t.uint64_data.empty();
  const int typed_fields = has_float + has_i32 + has_i64 + has_f64 + has_u64;

  if (external) return attach_external(t, who, n_bytes, *read_external, out);

  if (t.has_raw) {
    if (typed_fields > 0)
      return error("onnx: tensor ", quoted(who), " has both raw_data and typed data fields");
    if (t.raw.size() != n_bytes)
      return error("onnx: tensor ", quoted(who), " has ", t.raw.size(),
                   " bytes of raw_data but its dims and type (", onnx_data_type_name(t.data_type), ") need ",
                   n_bytes);
    out.from_file = true;
    out.file_data = t.raw.data();
    out.file_offset = static_cast<uint64_t>(t.raw.data() - file.data());
    return {};
  }

  out.from_file = false;
  out.file_offset = t.offset;
  const auto data_type = static_cast<OnnxDataType>(t.data_type);
  // Which typed field ONNX uses for each type (onnx.proto, TensorProto comments).
  const bool want_float = data_type == OnnxDataType::Float, want_f64 = data_type == OnnxDataType::Double,
             want_i64 = data_type == OnnxDataType::Int64,
             want_u64 = data_type == OnnxDataType::Uint32 || data_type == OnnxDataType::Uint64;
  const bool want_i32 = !(want_float || want_f64 || want_i64 || want_u64);
  if ((has_float && !want_float) || (has_f64 && !want_f64) || (has_i64 && !want_i64) ||
      (has_u64 && !want_u64) || (has_i32 && !want_i32))
    return error("onnx: tensor ", quoted(who), " of type ", onnx_data_type_name(t.data_type),
                 " stores values in a typed field meant for another type");
  if (typed_fields == 0) {
    if (n == 0) return {};
    return error("onnx: tensor ", quoted(who), " has no data (its dims hold ", n, " values)");
  }

  Spans s;
  if (want_float) {
    s.parts = t.float_data;
    return copy_fixed(s, 4, n, "float_data", who, out.decoded);
  }
  if (want_f64) {
    s.parts = t.double_data;
    return copy_fixed(s, 8, n, "double_data", who, out.decoded);
  }
  if (want_i64) {
    s.parts = t.int64_data;
    return copy_varints(s, 8, false, INT64_MIN, INT64_MAX, n, "int64_data", who, out.decoded);
  }
  if (want_u64) {
    s.parts = t.uint64_data;
    if (data_type == OnnxDataType::Uint64)  // hi = -1 read as unsigned is UINT64_MAX: every value fits
      return copy_varints(s, 8, true, 0, -1, n, "uint64_data", who, out.decoded);
    return copy_varints(s, 4, true, 0, int64_t{UINT32_MAX}, n, "uint64_data", who, out.decoded);
  }
  s.parts = t.int32_data;
  int64_t lo = INT32_MIN, hi = INT32_MAX;
  switch (data_type) {
    case OnnxDataType::Int8:
      lo = -128, hi = 127;
      break;
    case OnnxDataType::Uint8:
      lo = 0, hi = 255;
      break;
    case OnnxDataType::Int16:
      lo = -32768, hi = 32767;
      break;
    case OnnxDataType::Uint16:
    case OnnxDataType::Float16:
    case OnnxDataType::Bfloat16:
      lo = 0, hi = 65535;
      break;
    case OnnxDataType::Bool:
      lo = 0, hi = 1;
      break;
    default:
      break;
  }
  // int32_data values are varint-encoded int32s (negative ones sign-extended to 10 bytes).
  return copy_varints(s, width, lo >= 0, lo, hi, n, "int32_data", who, out.decoded);
}

}  // namespace sotto::onnx_detail
