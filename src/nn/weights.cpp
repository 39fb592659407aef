// One weight source over every format: each reader (io/) parses its file as before; this file turns its
// tensor table into StoredTensors, picks the reader by magic bytes, and checks what a model asks for.
#include "nn/weights.h"

#include <cmath>
#include <cstring>
#include <map>
#include <unordered_map>

#include "core/half.h"
#include "io/gguf.h"
#include "io/onnx.h"
#include "io/ort.h"
#include "io/safetensors.h"
#include "nn/cpu.h"

namespace sotto::nn {

namespace {

std::string shape_text(std::span<const int64_t> shape) {
  std::string out = "[";
  for (size_t i = 0; i < shape.size(); ++i) out += cat(i ? "," : "", shape[i]);
  return out + "]";
}

// A tensor table with a name index. ONNX sources keep the parsed model (it owns decoded tensors' bytes, and
// its lookup knows ONNX's scoped names).
class TableSource : public WeightSource {
 public:
  TableSource(std::string file_name, std::vector<StoredTensor> tensors)
      : file_name_(std::move(file_name)), tensors_(std::move(tensors)) {
    for (size_t i = 0; i < tensors_.size(); ++i) by_name_.emplace(tensors_[i].name, i);
  }
  const std::string& file_name() const override { return file_name_; }
  std::span<const StoredTensor> tensors() const override { return tensors_; }
  const StoredTensor* find(std::string_view name) const override {
    const auto it = by_name_.find(std::string(name));
    if (it != by_name_.end()) return &tensors_[it->second];
    if (onnx_) {
      // ONNX's other names for a tensor: its value name or TensorProto name when unique (io/onnx.h).
      if (const OnnxTensor* t = onnx_->find(name))
        return &tensors_[static_cast<size_t>(t - onnx_->tensors.data())];
    }
    return nullptr;
  }

  std::unique_ptr<OnnxModel> onnx_;

 private:
  std::string file_name_;
  std::vector<StoredTensor> tensors_;
  std::unordered_map<std::string, size_t> by_name_;
};

bool is_gguf(std::span<const uint8_t> b) {
  return b.size() >= 4 && std::memcmp(b.data(), "GGUF", 4) == 0;
}

// ONNX Runtime's .ort files are flatbuffers with the file identifier "ORTM" at bytes 4..7.
bool is_ort(std::span<const uint8_t> b) {
  return b.size() >= 8 && std::memcmp(b.data() + 4, "ORTM", 4) == 0;
}

// safetensors: a little-endian u64 header length, then a JSON object.
bool is_safetensors(std::span<const uint8_t> b) {
  if (b.size() < 9) return false;
  uint64_t n = 0;
  std::memcpy(&n, b.data(), 8);
  return b[8] == '{' && n >= 2 && n <= b.size() - 8;
}

Result<std::unique_ptr<WeightSource>> open_gguf(std::string file_name, std::span<const uint8_t> bytes) {
  auto parsed = parse_gguf(bytes);
  if (!parsed.ok()) return error(file_name, ": ", parsed.message());
  std::vector<StoredTensor> tensors;
  for (const GgufTensor& t : parsed->tensors)  // GGUF stores dims innermost first: shape() reverses them
    tensors.push_back({std::string(t.name), t.dtype, t.shape(), {t.data, static_cast<size_t>(t.bytes)}});
  return std::unique_ptr<WeightSource>(new TableSource(std::move(file_name), std::move(tensors)));
}

Result<std::unique_ptr<WeightSource>> open_safetensors(std::string file_name,
                                                       std::span<const uint8_t> bytes) {
  auto parsed = parse_safetensors(bytes);
  if (!parsed.ok()) return error(file_name, ": ", parsed.message());
  std::vector<StoredTensor> tensors;
  for (const TensorInfo& t : parsed->tensors) tensors.push_back({t.name, t.dtype, t.shape, t.span()});
  return std::unique_ptr<WeightSource>(new TableSource(std::move(file_name), std::move(tensors)));
}

Result<std::unique_ptr<WeightSource>> open_onnx(std::string file_name, std::span<const uint8_t> bytes,
                                                const ReadSibling& read_sibling) {
  // Each external file is fetched once, however many tensors live in it.
  std::map<std::string, std::span<const uint8_t>, std::less<>> siblings;
  OnnxReadExternal read_external;
  if (read_sibling) {
    read_external = [&](std::string_view location) -> Result<std::span<const uint8_t>> {
      const auto it = siblings.find(location);
      if (it != siblings.end()) return it->second;
      auto got = read_sibling(location);
      if (!got.ok()) return error("cannot read external data '", location, "': ", got.message());
      siblings.emplace(std::string(location), *got);
      return *got;
    };
  }
  auto parsed = parse_onnx(bytes, read_external);
  if (!parsed.ok()) return error(file_name, ": ", parsed.message());
  auto model = std::make_unique<OnnxModel>(std::move(*parsed));
  std::vector<StoredTensor> tensors;
  for (const OnnxTensor& t : model->tensors) tensors.push_back({t.unique_name, t.dtype, t.shape, t.bytes()});
  auto source = std::make_unique<TableSource>(std::move(file_name), std::move(tensors));
  source->onnx_ = std::move(model);
  return std::unique_ptr<WeightSource>(std::move(source));
}

// .ort: every initializer, the main graph's by name, a subgraph's (an If branch's) as "<scope>/<name>"
// (io/ort.h's scope).
Result<std::unique_ptr<WeightSource>> open_ort(std::string file_name, std::span<const uint8_t> bytes) {
  auto parsed = parse_ort(bytes);
  if (!parsed.ok()) return error(file_name, ": ", parsed.message());
  std::vector<StoredTensor> tensors;
  for (const OrtTensor& t : parsed->tensors)
    tensors.push_back({t.scope.empty() ? t.name : t.scope + "/" + t.name, t.dtype, t.shape, t.bytes()});
  return std::unique_ptr<WeightSource>(new TableSource(std::move(file_name), std::move(tensors)));
}

bool plain(DType d) {
  switch (d) {
    case DType::F32:
    case DType::F16:
    case DType::BF16:
    case DType::I8:
    case DType::U8:
    case DType::I16:
    case DType::I32:
    case DType::I64:
      return true;
    default:
      return false;
  }
}

}  // namespace

Status WeightSource::missing(std::string_view name, std::string_view what) const {
  if (what.empty()) return error(file_name(), ": tensor '", name, "' is missing");
  return error(file_name(), ": tensor '", name, "' is missing (", what, ")");
}

Result<Tensor> WeightSource::load_any(Context& ctx, std::string_view name) const {
  const StoredTensor* t = find(name);
  if (!t) return missing(name);
  if (!plain(t->dtype))
    return error(file_name(), ": tensor '", name, "' is ", dtype_name(t->dtype),
                 ", which the op layer does not take (f32, f16, bf16, int8/uint8, int16, int32, int64)");
  if (t->shape.size() > static_cast<size_t>(Shape::kMaxRank))
    return error(file_name(), ": tensor '", name, "' has ", t->shape.size(), " dims, more than ",
                 Shape::kMaxRank);
  const Shape shape(t->shape);
  const uint64_t need = static_cast<uint64_t>(shape.elements()) * element_bytes(t->dtype);
  if (t->bytes.size() != need)
    return error(file_name(), ": tensor '", name, "' holds ", t->bytes.size(), " bytes, its shape ",
                 shape_text(t->shape), " and type ", dtype_name(t->dtype), " need ", need);
  return ctx.from_bytes(shape, t->dtype, t->bytes);
}

Result<Tensor> WeightSource::load(Context& ctx, std::string_view name, const Shape& shape,
                                  std::initializer_list<DType> dtypes) const {
  const StoredTensor* t = find(name);
  if (!t) return missing(name);
  bool dtype_ok = dtypes.size() == 0;
  std::string wanted;
  for (DType d : dtypes) {
    dtype_ok = dtype_ok || d == t->dtype;
    wanted += cat(wanted.empty() ? "" : " or ", dtype_name(d));
  }
  if (!dtype_ok)
    return error(file_name(), ": tensor '", name, "' is ", dtype_name(t->dtype), ", expected ", wanted);
  if (t->shape != std::vector<int64_t>(shape.span().begin(), shape.span().end()))
    return error(file_name(), ": tensor '", name, "' has shape ", shape_text(t->shape), ", expected ",
                 shape.str());
  return load_any(ctx, name);
}

Result<float> WeightSource::scalar(std::string_view name) const {
  const StoredTensor* t = find(name);
  if (!t) return missing(name);
  uint64_t n = 1;
  for (int64_t d : t->shape) n *= static_cast<uint64_t>(d);
  if (n != 1)
    return error(file_name(), ": tensor '", name, "' has shape ", shape_text(t->shape),
                 ", expected one value");
  const uint8_t* p = t->bytes.data();
  const auto need = [&](size_t bytes) -> Status {
    if (t->bytes.size() < bytes) return error(file_name(), ": tensor '", name, "' is cut short");
    return {};
  };
  switch (t->dtype) {
    case DType::F32: {
      SOTTO_TRY(need(4));
      float v;
      std::memcpy(&v, p, 4);
      return v;
    }
    case DType::F16: {
      SOTTO_TRY(need(2));
      uint16_t h;
      std::memcpy(&h, p, 2);
      return f16_to_f32(h);
    }
    case DType::F64: {
      SOTTO_TRY(need(8));
      double v;
      std::memcpy(&v, p, 8);
      return static_cast<float>(v);
    }
    case DType::I8:
      SOTTO_TRY(need(1));
      return static_cast<float>(static_cast<int8_t>(p[0]));
    case DType::U8:
      SOTTO_TRY(need(1));
      return static_cast<float>(p[0]);
    case DType::I32: {
      SOTTO_TRY(need(4));
      int32_t v;
      std::memcpy(&v, p, 4);
      return static_cast<float>(v);
    }
    case DType::I64: {
      SOTTO_TRY(need(8));
      int64_t v;
      std::memcpy(&v, p, 8);
      return static_cast<float>(v);
    }
    default:
      return error(file_name(), ": tensor '", name, "' is ", dtype_name(t->dtype), ", not a number type");
  }
}

Result<std::unique_ptr<WeightSource>> open_weights(std::string file_name, std::span<const uint8_t> bytes,
                                                   ReadSibling read_sibling) {
  if (is_gguf(bytes)) return open_gguf(std::move(file_name), bytes);
  if (is_ort(bytes)) return open_ort(std::move(file_name), bytes);
  if (is_safetensors(bytes)) return open_safetensors(std::move(file_name), bytes);
  // ONNX files open with ModelProto's ir_version (field 1, varint: tag byte 0x08).
  if (!bytes.empty() && bytes[0] == 0x08) return open_onnx(std::move(file_name), bytes, read_sibling);
  return error(file_name, ": not a GGUF, safetensors, ONNX or .ort file");
}

void fold_batch_norm(Context& ctx, Tensor& w, Tensor& b, const Tensor& gamma, const Tensor& beta,
                     const Tensor& mean, const Tensor& var, float eps) {
  const Tensor wf = cpu::as_f32(w);
  const int64_t cout = wf.dim(0), per = wf.elements() / cout;
  const Tensor g = cpu::as_f32(gamma), be = cpu::as_f32(beta), mu = cpu::as_f32(mean), v = cpu::as_f32(var);
  const Tensor bf = b.defined() ? cpu::as_f32(b) : ctx.zeros({cout});
  Tensor nw = ctx.empty(wf.shape()), nb = ctx.empty({cout});
  for (int64_t c = 0; c < cout; ++c) {
    const float k = g.f32()[c] / std::sqrt(v.f32()[c] + eps);
    for (int64_t i = 0; i < per; ++i) nw.f32()[c * per + i] = wf.f32()[c * per + i] * k;
    nb.f32()[c] = (bf.f32()[c] - mu.f32()[c]) * k + be.f32()[c];
  }
  w = nw;
  b = nb;
}

Tensor fold_norm_shift(Context& ctx, const Tensor& w, const Tensor& b, const Tensor& beta) {
  const Tensor wf = cpu::as_f32(w), be = cpu::as_f32(beta), bf = b.defined() ? cpu::as_f32(b) : Tensor();
  const int64_t n = wf.dim(0), k = wf.dim(1);
  Tensor nb = ctx.empty({n});
  for (int64_t r = 0; r < n; ++r) {
    double s = bf.defined() ? static_cast<double>(bf.f32()[r]) : 0.0;
    for (int64_t i = 0; i < k; ++i) s += static_cast<double>(wf.f32()[r * k + i]) * be.f32()[i];
    nb.f32()[r] = static_cast<float>(s);
  }
  return nb;
}

}  // namespace sotto::nn
