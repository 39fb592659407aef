// GgufWriter: metadata is encoded as it is added; tensors are kept until finish() lays out the file.
#include "io/gguf_writer.h"

#include <cstring>

namespace sotto {

namespace {

void put_bytes(std::vector<uint8_t>& out, const void* p, size_t n) {
  // resize + memcpy rather than insert(): g++-12 -O3 reports a false stringop-overflow inside
  // vector::insert of a few bytes (GCC bug 107852).
  if (n == 0) return;
  size_t old_size = out.size();
  out.resize(old_size + n);
  std::memcpy(out.data() + old_size, p, n);
}
template <class T>
void put(std::vector<uint8_t>& out, T v) {
  put_bytes(out, &v, sizeof v);
}
void put_string(std::vector<uint8_t>& out, std::string_view s) {
  put<uint64_t>(out, s.size());
  put_bytes(out, s.data(), s.size());
}

}  // namespace

GgufWriter::GgufWriter(uint32_t alignment) : alignment_(alignment) {
  if (alignment_ != kGgufDefaultAlignment) add_u32("general.alignment", alignment_);
}

void GgufWriter::put_key(std::string_view key, GgufType type) {
  put_string(kv_bytes_, key);
  put<uint32_t>(kv_bytes_, static_cast<uint32_t>(type));
  ++n_kv_;
}

void GgufWriter::add_scalar(std::string_view key, GgufType type, const void* v, size_t n) {
  put_key(key, type);
  put_bytes(kv_bytes_, v, n);
}

void GgufWriter::add_string(std::string_view key, std::string_view v) {
  put_key(key, GgufType::String);
  put_string(kv_bytes_, v);
}

void GgufWriter::add_string_array(std::string_view key, std::span<const std::string> values) {
  put_key(key, GgufType::Array);
  put<uint32_t>(kv_bytes_, static_cast<uint32_t>(GgufType::String));
  put<uint64_t>(kv_bytes_, values.size());
  for (const auto& s : values) put_string(kv_bytes_, s);
}

void GgufWriter::add_array(std::string_view key, GgufType element_type, uint64_t count,
                           std::span<const uint8_t> raw) {
  put_key(key, GgufType::Array);
  put<uint32_t>(kv_bytes_, static_cast<uint32_t>(element_type));
  put<uint64_t>(kv_bytes_, count);
  put_bytes(kv_bytes_, raw.data(), raw.size());
}

Status GgufWriter::add_tensor(std::string_view name, DType dtype, std::span<const int64_t> ne,
                              std::span<const uint8_t> data) {
  if (ne.empty() || ne.size() > kGgufMaxDims)
    return error("gguf writer: tensor '", name, "' has ", ne.size(), " dimensions; GGUF allows 1 to ",
                 kGgufMaxDims);
  if (dtype_to_ggml(dtype) == kNoGgmlType)
    return error("gguf writer: tensor '", name, "' has dtype ", dtype_name(dtype),
                 ", which GGUF cannot store");
  uint64_t n_elems = 1;
  for (int64_t d : ne) n_elems *= static_cast<uint64_t>(d);
  auto bytes = dtype_bytes(dtype, n_elems);
  if (!bytes || *bytes != data.size())
    return error("gguf writer: tensor '", name, "' has ", data.size(), " bytes of data, its shape needs ",
                 bytes ? cat(*bytes) : std::string("an impossible size"));
  tensors_.push_back({std::string(name), dtype, {ne.begin(), ne.end()}, {data.begin(), data.end()}});
  return {};
}

std::vector<uint8_t> GgufWriter::finish() const {
  std::vector<uint8_t> out;
  put<uint32_t>(out, 0x46554747);  // "GGUF"
  put<uint32_t>(out, 3);
  put<uint64_t>(out, tensors_.size());
  put<uint64_t>(out, n_kv_);
  put_bytes(out, kv_bytes_.data(), kv_bytes_.size());
  auto align = [&](uint64_t n) { return (n + alignment_ - 1) / alignment_ * alignment_; };
  uint64_t offset = 0;
  for (const auto& t : tensors_) {
    put_string(out, t.name);
    put<uint32_t>(out, static_cast<uint32_t>(t.ne.size()));
    for (int64_t d : t.ne) put<int64_t>(out, d);
    put<uint32_t>(out, dtype_to_ggml(t.dtype));
    put<uint64_t>(out, offset);
    offset = align(offset + t.data.size());
  }
  out.resize(align(out.size()), 0);
  uint64_t data_start = out.size();
  for (const auto& t : tensors_) {
    put_bytes(out, t.data.data(), t.data.size());
    out.resize(data_start + align(out.size() - data_start), 0);
  }
  return out;
}

}  // namespace sotto
