// GGUF reader. Every count read from the file is checked against the bytes left (times the smallest encoding
// of one item) before anything is reserved for it, so a hostile count fails at once instead of allocating.
#include "io/gguf.h"

#include <algorithm>
#include <cstring>

#include "io/byte_reader.h"

namespace sotto {

namespace {

constexpr uint32_t kMagic = 0x46554747;  // "GGUF" read as a little-endian u32

// Smallest encodings, for count checks: a string is at least its u64 length.
constexpr uint64_t kMinStringBytes = 8;
constexpr uint64_t kMinKeyValueBytes = kMinStringBytes + 4 + 1;  // key, type, a one-byte value
constexpr uint64_t kMinTensorInfoBytes =
    kMinStringBytes + 4 + 8 + 4 + 8;  // name, n_dims, one ne, type, offset

template <class T>
T load(const uint8_t* p) {
  T v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

Result<std::string_view> read_string(ByteReader& in, std::string_view what) {
  SOTTO_ASSIGN(uint64_t length, in.read<uint64_t>(what));
  if (length > in.remaining())
    return error("gguf: ", what, " at byte ", in.pos() - 8, " claims ", length, " bytes but only ",
                 in.remaining(), " remain in the file");
  SOTTO_ASSIGN(auto chars, in.view(length, what));
  return std::string_view(reinterpret_cast<const char*>(chars.data()), chars.size());
}

uint64_t min_value_bytes(GgufType t) {
  if (t == GgufType::String) return kMinStringBytes;
  if (t == GgufType::Array) return 4 + 8;
  return gguf_scalar_bytes(t);
}

Result<GgufType> read_type(ByteReader& in, std::string_view key) {
  uint64_t at = in.pos();
  SOTTO_ASSIGN(uint32_t id, in.read<uint32_t>("value type"));
  if (id >= kGgufTypeCount)
    return error("gguf: key ", quoted(key), " has unknown value type ", id, " at byte ", at);
  return static_cast<GgufType>(id);
}

Result<GgufValue> read_value(ByteReader& in, std::string_view key) {
  GgufValue v;
  SOTTO_ASSIGN(v.type, read_type(in, key));
  if (v.type == GgufType::String) {
    SOTTO_ASSIGN(v.str, read_string(in, "string value"));
    return v;
  }
  if (v.type != GgufType::Array) {
    SOTTO_ASSIGN(v.raw, in.view(gguf_scalar_bytes(v.type), "scalar value"));
    return v;
  }
  SOTTO_ASSIGN(v.array_type, read_type(in, key));
  // The spec allows arrays of arrays; nothing ggml writes uses them and llama.cpp rejects them too.
  if (v.array_type == GgufType::Array)
    return error("gguf: key ", quoted(key), " is an array of arrays, which is not supported");
  SOTTO_ASSIGN(v.array_count, in.read<uint64_t>("array length"));
  uint64_t min_element = min_value_bytes(v.array_type);
  if (v.array_count > in.remaining() / min_element)
    return error("gguf: key ", quoted(key), " claims ", v.array_count, " elements of type ",
                 gguf_type_name(v.array_type), " but only ", in.remaining(), " bytes remain in the file");
  if (v.array_type == GgufType::String) {
    v.array_strings.reserve(static_cast<size_t>(v.array_count));
    for (uint64_t i = 0; i < v.array_count; ++i) {
      SOTTO_ASSIGN(std::string_view s, read_string(in, "array string"));
      v.array_strings.push_back(s);
    }
  } else {
    SOTTO_ASSIGN(v.raw, in.view(v.array_count * min_element, "array data"));
  }
  return v;
}

Result<GgufTensor> read_tensor_info(ByteReader& in) {
  GgufTensor t;
  SOTTO_ASSIGN(t.name, read_string(in, "tensor name"));
  SOTTO_ASSIGN(t.n_dims, in.read<uint32_t>("tensor n_dims"));
  if (t.n_dims == 0 || t.n_dims > kGgufMaxDims)
    return error("gguf: tensor ", quoted(t.name), " has ", t.n_dims, " dimensions; GGUF allows 1 to ",
                 kGgufMaxDims);
  uint64_t n_elems = 1;
  for (uint32_t d = 0; d < t.n_dims; ++d) {
    SOTTO_ASSIGN(t.ne[d], in.read<int64_t>("tensor dimension"));
    if (t.ne[d] < 0)
      return error("gguf: tensor ", quoted(t.name), " has negative dimension ne[", d, "] = ", t.ne[d]);
    uint64_t dim = static_cast<uint64_t>(t.ne[d]);
    if (dim != 0 && n_elems > static_cast<uint64_t>(INT64_MAX) / dim)
      return error("gguf: tensor ", quoted(t.name), " has more elements than fit in 63 bits");
    n_elems *= dim;
  }
  SOTTO_ASSIGN(t.ggml_type, in.read<uint32_t>("tensor type"));
  auto dtype = dtype_from_ggml(t.ggml_type);
  if (!dtype)
    return error("gguf: tensor ", quoted(t.name), ": ", dtype.message());  // the message names the type id
  t.dtype = *dtype;
  uint32_t block = dtype_info(t.dtype).block_elems;
  if (t.ne[0] % block != 0)
    return error("gguf: tensor ", quoted(t.name), " has ne[0] = ", t.ne[0], ", not a multiple of the ",
                 dtype_name(t.dtype), " block size ", block);
  auto bytes = dtype_bytes(t.dtype, n_elems);
  if (!bytes) return error("gguf: tensor ", quoted(t.name), " size overflows (", n_elems, " elements)");
  t.bytes = *bytes;
  SOTTO_ASSIGN(t.offset, in.read<uint64_t>("tensor offset"));  // relative to the data section until checked
  return t;
}

Status check_unique(std::vector<std::string_view> names, std::string_view what) {
  std::sort(names.begin(), names.end());
  auto dup = std::adjacent_find(names.begin(), names.end());
  if (dup != names.end()) return error("gguf: duplicate ", what, " ", quoted(*dup));
  return {};
}

}  // namespace

std::string_view gguf_type_name(GgufType t) {
  static constexpr std::string_view kNames[kGgufTypeCount] = {
      "u8", "i8", "u16", "i16", "u32", "i32", "f32", "bool", "string", "array", "u64", "i64", "f64"};
  auto id = static_cast<uint32_t>(t);
  return id < kGgufTypeCount ? kNames[id] : "?";
}

uint32_t gguf_scalar_bytes(GgufType t) {
  switch (t) {
    case GgufType::U8:
    case GgufType::I8:
    case GgufType::Bool:
      return 1;
    case GgufType::U16:
    case GgufType::I16:
      return 2;
    case GgufType::U32:
    case GgufType::I32:
    case GgufType::F32:
      return 4;
    case GgufType::U64:
    case GgufType::I64:
    case GgufType::F64:
      return 8;
    case GgufType::String:
    case GgufType::Array:
      return 0;
  }
  return 0;
}

// ---------------------------------------------------------------- values

namespace {

bool is_integer_type(GgufType t) {
  switch (t) {
    case GgufType::U8:
    case GgufType::I8:
    case GgufType::U16:
    case GgufType::I16:
    case GgufType::U32:
    case GgufType::I32:
    case GgufType::U64:
    case GgufType::I64:
      return true;
    default:
      return false;
  }
}

bool is_signed_type(GgufType t) {
  return t == GgufType::I8 || t == GgufType::I16 || t == GgufType::I32 || t == GgufType::I64;
}

int64_t load_i64(GgufType t, const uint8_t* p) {
  switch (t) {
    case GgufType::U8:
      return load<uint8_t>(p);
    case GgufType::I8:
      return load<int8_t>(p);
    case GgufType::Bool:
      return load<uint8_t>(p) != 0;
    case GgufType::U16:
      return load<uint16_t>(p);
    case GgufType::I16:
      return load<int16_t>(p);
    case GgufType::U32:
      return load<uint32_t>(p);
    case GgufType::I32:
      return load<int32_t>(p);
    case GgufType::U64:
      return static_cast<int64_t>(load<uint64_t>(p));
    case GgufType::I64:
      return load<int64_t>(p);
    case GgufType::F32:
      return static_cast<int64_t>(load<float>(p));
    case GgufType::F64:
      return static_cast<int64_t>(load<double>(p));
    default:
      return 0;
  }
}

double load_f64(GgufType t, const uint8_t* p) {
  if (t == GgufType::F32) return load<float>(p);
  if (t == GgufType::F64) return load<double>(p);
  if (t == GgufType::U64) return static_cast<double>(load<uint64_t>(p));
  return static_cast<double>(load_i64(t, p));
}

}  // namespace

bool GgufValue::is_integer() const {
  return is_integer_type(type);
}
bool GgufValue::is_number() const {
  return is_integer() || type == GgufType::F32 || type == GgufType::F64;
}
int64_t GgufValue::as_i64() const {
  return raw.empty() ? 0 : load_i64(type, raw.data());
}
uint64_t GgufValue::as_u64() const {
  if (raw.empty()) return 0;
  return type == GgufType::U64 ? load<uint64_t>(raw.data())
                               : static_cast<uint64_t>(load_i64(type, raw.data()));
}
double GgufValue::as_f64() const {
  return raw.empty() ? 0 : load_f64(type, raw.data());
}
double GgufValue::array_f64(uint64_t i) const {
  return load_f64(array_type, raw.data() + i * gguf_scalar_bytes(array_type));
}
int64_t GgufValue::array_i64(uint64_t i) const {
  return load_i64(array_type, raw.data() + i * gguf_scalar_bytes(array_type));
}
std::string GgufValue::type_name() const {
  if (type != GgufType::Array) return std::string(gguf_type_name(type));
  return cat("array[", gguf_type_name(array_type), "]");
}

std::vector<int64_t> GgufTensor::shape() const {
  return {ne.rbegin() + (kGgufMaxDims - n_dims), ne.rend()};
}

TensorInfo GgufTensor::info() const {
  TensorInfo info;
  info.name = std::string(name);
  info.dtype = dtype;
  info.shape = shape();
  info.offset = offset;
  info.bytes = bytes;
  info.data = data;
  return info;
}

// ---------------------------------------------------------------- accessors

const GgufKeyValue* GgufFile::find(std::string_view key) const {
  for (const auto& kv : metadata)
    if (kv.key == key) return &kv;
  return nullptr;
}

const GgufTensor* GgufFile::find_tensor(std::string_view name) const {
  for (const auto& t : tensors)
    if (t.name == name) return &t;
  return nullptr;
}

Result<const GgufValue*> GgufFile::typed(std::string_view key, std::string_view expected,
                                         bool ok_type(const GgufValue&)) const {
  const GgufKeyValue* kv = find(key);
  if (!kv) return error("gguf: key ", quoted(key), " is missing");
  if (!ok_type(kv->value))
    return error("gguf: key ", quoted(key), " is ", kv->value.type == GgufType::Array ? "an " : "a ",
                 kv->value.type_name(), ", expected ", expected);
  return &kv->value;
}

Result<uint32_t> GgufFile::get_u32(std::string_view key) const {
  SOTTO_ASSIGN(const GgufValue* v, typed(key, "u32", [](const GgufValue& x) { return x.is_integer(); }));
  bool fits = is_signed_type(v->type) ? v->as_i64() >= 0 && v->as_i64() <= int64_t{UINT32_MAX}
                                      : v->as_u64() <= UINT32_MAX;
  if (!fits)
    return error("gguf: key ", quoted(key), " = ",
                 is_signed_type(v->type) ? cat(v->as_i64()) : cat(v->as_u64()), " does not fit in u32");
  return static_cast<uint32_t>(v->as_u64());
}

Result<int32_t> GgufFile::get_i32(std::string_view key) const {
  SOTTO_ASSIGN(const GgufValue* v, typed(key, "i32", [](const GgufValue& x) { return x.is_integer(); }));
  bool fits = is_signed_type(v->type) ? v->as_i64() >= INT32_MIN && v->as_i64() <= INT32_MAX
                                      : v->as_u64() <= uint64_t{INT32_MAX};
  if (!fits) return error("gguf: key ", quoted(key), " does not fit in i32");
  return static_cast<int32_t>(v->as_i64());
}

Result<float> GgufFile::get_f32(std::string_view key) const {
  SOTTO_ASSIGN(const GgufValue* v, typed(key, "f32", [](const GgufValue& x) {
                 return x.type == GgufType::F32 || x.type == GgufType::F64;
               }));
  return static_cast<float>(v->as_f64());
}

Result<bool> GgufFile::get_bool(std::string_view key) const {
  SOTTO_ASSIGN(const GgufValue* v,
               typed(key, "bool", [](const GgufValue& x) { return x.type == GgufType::Bool; }));
  return v->raw[0] != 0;
}

Result<std::string_view> GgufFile::get_string(std::string_view key) const {
  SOTTO_ASSIGN(const GgufValue* v,
               typed(key, "string", [](const GgufValue& x) { return x.type == GgufType::String; }));
  return v->str;
}

Result<std::span<const std::string_view>> GgufFile::get_string_array(std::string_view key) const {
  SOTTO_ASSIGN(const GgufValue* v, typed(key, "array[string]", [](const GgufValue& x) {
                 return x.type == GgufType::Array && x.array_type == GgufType::String;
               }));
  return std::span<const std::string_view>(v->array_strings);
}

Result<std::vector<int64_t>> GgufFile::get_int_array(std::string_view key) const {
  SOTTO_ASSIGN(const GgufValue* v, typed(key, "array of integers", [](const GgufValue& x) {
                 return x.type == GgufType::Array && is_integer_type(x.array_type);
               }));
  std::vector<int64_t> out(static_cast<size_t>(v->array_count));
  for (uint64_t i = 0; i < v->array_count; ++i) out[i] = v->array_i64(i);
  return out;
}

Result<std::vector<float>> GgufFile::get_float_array(std::string_view key) const {
  SOTTO_ASSIGN(const GgufValue* v, typed(key, "array of numbers", [](const GgufValue& x) {
                 return x.type == GgufType::Array && x.array_type != GgufType::String &&
                        x.array_type != GgufType::Bool;
               }));
  std::vector<float> out(static_cast<size_t>(v->array_count));
  for (uint64_t i = 0; i < v->array_count; ++i) out[i] = static_cast<float>(v->array_f64(i));
  return out;
}

// ---------------------------------------------------------------- parse

Result<GgufFile> parse_gguf(std::span<const uint8_t> bytes) {
  ByteReader in(bytes, "gguf");
  GgufFile file;
  SOTTO_ASSIGN(uint32_t magic, in.read<uint32_t>("magic"));
  if (magic != kMagic) return error("gguf: bad magic, the file does not start with \"GGUF\"");
  SOTTO_ASSIGN(file.version, in.read<uint32_t>("version"));
  if (file.version == 1)
    return error("gguf: version 1 is unsupported (32-bit counts); re-convert the model to v3");
  if (file.version != 2 && file.version != 3)
    return error("gguf: unsupported version ", file.version, " (this reader handles versions 2 and 3)");
  SOTTO_ASSIGN(uint64_t n_tensors, in.read<uint64_t>("tensor count"));
  SOTTO_ASSIGN(uint64_t n_kv, in.read<uint64_t>("metadata count"));
  if (n_kv > in.remaining() / kMinKeyValueBytes)
    return error("gguf: metadata count ", n_kv, " is more than the file can hold (", in.remaining(),
                 " bytes remain)");

  file.metadata.reserve(static_cast<size_t>(n_kv));
  for (uint64_t i = 0; i < n_kv; ++i) {
    GgufKeyValue kv;
    SOTTO_ASSIGN(kv.key, read_string(in, "metadata key"));
    SOTTO_ASSIGN(kv.value, read_value(in, kv.key));
    file.metadata.push_back(std::move(kv));
  }
  std::vector<std::string_view> keys;
  keys.reserve(file.metadata.size());
  for (const auto& kv : file.metadata) keys.push_back(kv.key);
  SOTTO_TRY(check_unique(std::move(keys), "metadata key"));

  if (const GgufKeyValue* kv = file.find("general.alignment")) {
    if (kv->value.type != GgufType::U32)
      return error("gguf: key 'general.alignment' is a ", kv->value.type_name(), ", expected u32");
    uint64_t alignment = kv->value.as_u64();
    if (alignment == 0 || (alignment & (alignment - 1)) != 0)
      return error("gguf: general.alignment = ", alignment, " is not a power of two");
    file.alignment = static_cast<uint32_t>(alignment);
  }

  if (n_tensors > in.remaining() / kMinTensorInfoBytes)
    return error("gguf: tensor count ", n_tensors, " is more than the file can hold (", in.remaining(),
                 " bytes remain)");
  file.tensors.reserve(static_cast<size_t>(n_tensors));
  for (uint64_t i = 0; i < n_tensors; ++i) {
    SOTTO_ASSIGN(GgufTensor t, read_tensor_info(in));
    file.tensors.push_back(t);
  }
  std::vector<std::string_view> names;
  names.reserve(file.tensors.size());
  for (const auto& t : file.tensors) names.push_back(t.name);
  SOTTO_TRY(check_unique(std::move(names), "tensor name"));

  // pos <= size, so rounding up cannot overflow 64 bits.
  file.data_offset = (in.pos() + file.alignment - 1) / file.alignment * file.alignment;
  if (!file.tensors.empty() && file.data_offset > bytes.size())
    return error("gguf: the data section would start at byte ", file.data_offset,
                 ", past the end of the file (", bytes.size(), " bytes)");
  for (GgufTensor& t : file.tensors) {
    uint64_t relative = t.offset;
    if (relative % file.alignment != 0)
      return error("gguf: tensor ", quoted(t.name), " data offset ", relative,
                   " is not a multiple of the alignment ", file.alignment);
    uint64_t data_bytes = bytes.size() - file.data_offset;
    if (relative > data_bytes || t.bytes > data_bytes - relative) {
      // Report the end without overflowing: relative and t.bytes are each < 2^64 but their sum may not be.
      bool overflows =
          relative > UINT64_MAX - file.data_offset || t.bytes > UINT64_MAX - file.data_offset - relative;
      if (overflows)
        return error("gguf: tensor ", quoted(t.name), " offset ", relative, " + ", t.bytes,
                     " bytes lies past the end of the file (", bytes.size(), " bytes)");
      return error("gguf: tensor ", quoted(t.name), " ends at byte ", file.data_offset + relative + t.bytes,
                   ", past the end of the file (", bytes.size(), " bytes)");
    }
    t.offset = file.data_offset + relative;
    t.data = bytes.data() + t.offset;
  }
  return file;
}

}  // namespace sotto
