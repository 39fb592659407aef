#include "nn/tensor.h"

#include <algorithm>
#include <cstring>

#include "core/half.h"
#include "core/thread_pool.h"
#include "gpu/device.h"
#include "nn/gpu_recorder.h"

namespace sotto::nn {

Shape::Shape(std::initializer_list<int64_t> d) : Shape(std::span<const int64_t>(d.begin(), d.size())) {}

Shape::Shape(std::span<const int64_t> d) {
  rank = static_cast<int>(std::min<size_t>(d.size(), kMaxRank));
  for (int i = 0; i < rank; ++i) dims[i] = d[i];
}

int64_t Shape::elements() const {
  int64_t n = 1;
  for (int i = 0; i < rank; ++i) n *= dims[i];
  return n;
}

bool Shape::operator==(const Shape& o) const {
  if (rank != o.rank) return false;
  for (int i = 0; i < rank; ++i)
    if (dims[i] != o.dims[i]) return false;
  return true;
}

std::string Shape::str() const {
  std::string out = "[";
  for (int i = 0; i < rank; ++i) out += cat(i ? "," : "", dims[i]);
  return out + "]";
}

uint32_t element_bytes(DType dtype) {
  return dtype_info(dtype).block_bytes;
}

uint64_t Tensor::bytes() const {
  return static_cast<uint64_t>(elements()) * element_bytes(dtype_);
}

Tensor Tensor::reshape(Shape shape) const {
  Tensor t = *this;
  t.shape_ = shape;
  return t;
}

Tensor Tensor::rows(int64_t begin, int64_t end) const {
  Tensor t = *this;
  const int64_t row_elements = shape_[0] > 0 ? elements() / shape_[0] : 0;
  t.offset_ += static_cast<uint64_t>(begin * row_elements) * element_bytes(dtype_);
  t.shape_[0] = end - begin;
  t.row_view_ = true;
  return t;
}

Tensor Tensor::with_quant(QuantParams q) const {
  Tensor t = *this;
  t.quant_ = q;
  return t;
}

namespace {
struct SpinLock {
  std::atomic_flag& flag;
  explicit SpinLock(std::atomic_flag& f) : flag(f) {
    while (flag.test_and_set(std::memory_order_acquire)) cpu_relax();
  }
  ~SpinLock() { flag.clear(std::memory_order_release); }
};
}  // namespace

bool Tensor::same_view(const DerivedLayout& d, uint32_t kind) const {
  return d.kind == kind && d.offset == offset_ && d.shape == shape_ && d.dtype == dtype_ &&
         d.quant.zero_point == quant_.zero_point && std::memcmp(&d.quant.scale, &quant_.scale, 4) == 0;
}

bool Tensor::find_derived(uint32_t kind, Tensor& out) const {
  if (!storage_) return false;
  SpinLock lock(storage_->derived_lock);
  for (const DerivedLayout& d : storage_->derived)
    if (same_view(d, kind)) {
      out = d.tensor;
      return true;
    }
  return false;
}

void Tensor::keep_derived(uint32_t kind, const Tensor& t) const {
  if (!storage_) return;
  SpinLock lock(storage_->derived_lock);
  for (const DerivedLayout& d : storage_->derived)
    if (same_view(d, kind)) return;
  storage_->derived.push_back({kind, offset_, shape_, dtype_, quant_, t});
}

uint32_t Tensor::gpu_buffer() const {
  return storage_ ? storage_->gpu_buffer : 0;
}

uint64_t Tensor::gpu_binding_bytes(uint64_t max_binding) const {
  const uint64_t own = std::max<uint64_t>(4, (bytes() + 3) / 4 * 4);
  if (row_view_ || offset_ != 0 || !storage_) return own;
  const uint64_t whole = std::max(own, (storage_->bytes + 3) / 4 * 4);
  return max_binding > 0 && whole > max_binding ? own : whole;
}

std::unique_ptr<Context> Context::cpu(ThreadPool* pool) {
  std::unique_ptr<Context> ctx(new Context(Backend::Cpu));
  ctx->pool_ = pool;
  return ctx;
}

std::unique_ptr<Context> Context::webgpu(::sotto::gpu::Device& device) {
  std::unique_ptr<Context> ctx(new Context(Backend::Gpu));
  ctx->gpu_ = std::make_unique<GpuRecorder>(device);
  return ctx;
}

Context::Context(Backend backend) : backend_(backend) {}

Context::~Context() {
  if (gpu_)
    for (const std::unique_ptr<Storage>& s : free_)
      if (s->gpu_buffer) gpu_->device().destroy_buffer(s->gpu_buffer);
}

int Context::n_threads() const {
  return pool_ ? pool_->n_threads() : 1;
}

namespace {
// A GPU storage's size: `bytes` rounded up to the next of 4, 5, 6 or 7 times a power of two (at least 256), so
// a forward pass whose lengths differ a little from the last one's gets the same pooled buffers, and so the same
// bind groups (nn/gpu_recorder.h), for at most a quarter more memory.
uint64_t gpu_size_class(uint64_t bytes) {
  uint64_t step = 64;  // a quarter of the power of two below the size
  while (step * 8 < bytes) step *= 2;
  return std::max<uint64_t>(256, (bytes + step - 1) / step * step);
}
}  // namespace

std::shared_ptr<Storage> Context::allocate(uint64_t bytes) {
  if (gpu_) bytes = gpu_size_class(bytes);
  // Best fit among the pooled storages: the smallest one that holds `bytes`, the first made among equals (GPU
  // buffer handles grow), so a pass that repeats the last one's requests gets the last one's buffers.
  size_t best = free_.size();
  for (size_t i = 0; i < free_.size(); ++i) {
    if (free_[i]->bytes < bytes) continue;
    if (best == free_.size() || free_[i]->bytes < free_[best]->bytes ||
        (free_[i]->bytes == free_[best]->bytes && free_[i]->gpu_buffer < free_[best]->gpu_buffer))
      best = i;
  }
  Storage* s;
  if (best < free_.size()) {
    s = free_[best].release();
    free_.erase(free_.begin() + static_cast<std::ptrdiff_t>(best));
  } else {
    s = new Storage;
    s->ctx = this;
    s->bytes = bytes;
    if (gpu_) {
      auto buffer = gpu_->device().create_buffer(std::max<uint64_t>(4, (bytes + 3) / 4 * 4),
                                                 gpu::kUsageStorage | gpu::kUsageCopySrc | gpu::kUsageCopyDst,
                                                 "nn tensor");
      if (buffer.ok())
        s->gpu_buffer = *buffer;
      else
        gpu_->fail(buffer.message());
    } else {
      s->host.reset(new uint8_t[bytes + 64]);  // default-initialised: not zero-filled
      std::memset(s->host.get() + bytes, 0, 64);
    }
  }
  return std::shared_ptr<Storage>(s, [](Storage* p) { p->ctx->release(p); });
}

void Context::release(Storage* s) {
  // Derived layouts go first (their own storages come back here too), so pooled storages hold none.
  std::vector<DerivedLayout> derived = std::move(s->derived);
  s->derived.clear();
  derived.clear();
  free_.emplace_back(s);
}

Tensor Context::empty(const Shape& shape, DType dtype) {
  Tensor t;
  t.shape_ = shape;
  t.dtype_ = dtype;
  t.ctx_ = this;
  t.storage_ = allocate(t.bytes());
  return t;
}

Tensor Context::zeros(const Shape& shape, DType dtype) {
  if (gpu_) return from_bytes(shape, dtype, std::vector<uint8_t>(element_bytes(dtype) * shape.elements()));
  Tensor t = empty(shape, dtype);
  std::memset(t.host_bytes(), 0, t.bytes());
  return t;
}

Tensor Context::from_bytes(const Shape& shape, DType dtype, std::span<const uint8_t> bytes) {
  Tensor t = empty(shape, dtype);
  const uint64_t n = std::min<uint64_t>(bytes.size(), t.bytes());
  if (gpu_) {
    // Queued writes land before the next submission: run what was recorded first, or a pooled buffer that a
    // recorded dispatch still reads could be overwritten before it runs.
    if (Status s = gpu_->flush(); !s.ok()) gpu_->fail(s.message());
    std::vector<uint8_t> padded((n + 3) / 4 * 4, 0);
    std::memcpy(padded.data(), bytes.data(), n);
    if (!padded.empty() && t.gpu_buffer())
      if (Status s = gpu_->device().write_buffer(t.gpu_buffer(), 0, padded.data(), padded.size()); !s.ok())
        gpu_->fail(s.message());
    return t;
  }
  std::memcpy(t.host_bytes(), bytes.data(), n);
  return t;
}

Tensor Context::from_floats(const Shape& shape, std::span<const float> values) {
  return from_bytes(shape, DType::F32,
                    {reinterpret_cast<const uint8_t*>(values.data()), values.size_bytes()});
}

Result<Tensor> Context::copy_of(const Tensor& t) {
  SOTTO_ASSIGN(const std::vector<uint8_t> bytes, t.ctx().to_bytes(t));
  const Tensor copy = from_bytes(t.shape(), t.dtype(), bytes);
  return t.dtype() == DType::I8 || t.dtype() == DType::U8 ? copy.with_quant(t.quant()) : copy;
}

Result<std::vector<uint8_t>> Context::to_bytes(const Tensor& t) {
  SOTTO_ASSIGN(const PendingRead r, start_read(t));
  return finish_bytes(r);
}

Result<Context::PendingRead> Context::start_read(const Tensor& t) {
  if (!t.defined()) return error("nn: reading an undefined tensor");
  PendingRead r{t};
  const uint64_t bytes = (t.bytes() + 3) / 4 * 4;
  if (gpu_) {
    SOTTO_TRY(gpu_->flush());
    if (bytes > 0) {
      SOTTO_ASSIGN(r.handle, gpu_->device().start_read(t.gpu_buffer(), t.gpu_offset(), bytes));
    }
  }
  return r;
}

Result<std::vector<uint8_t>> Context::finish_bytes(const PendingRead& r) {
  const Tensor& t = r.tensor;
  if (gpu_) {
    const uint64_t bytes = (t.bytes() + 3) / 4 * 4;
    std::vector<uint8_t> out(bytes);
    if (bytes == 0) return out;
    SOTTO_TRY(gpu_->flush());  // what was recorded since start_read runs while the host waits
    const gpu::DeviceStatus st = gpu_->device().finish_read(r.handle, out.data());
    if (st == gpu::DeviceStatus::Pending)
      return error("nn/webgpu: reading a tensor back needs an asynchronous wait here (not supported yet)");
    if (st != gpu::DeviceStatus::Ok)
      return error("nn/webgpu: reading a tensor failed: ", gpu_->device().last_error());
    out.resize(static_cast<size_t>(t.bytes()));
    return out;
  }
  const uint8_t* p = t.host_bytes();
  return std::vector<uint8_t>(p, p + t.bytes());
}

Result<std::vector<float>> Context::to_floats(const Tensor& t) {
  SOTTO_ASSIGN(const PendingRead r, start_read(t));
  return finish_floats(r);
}

Result<std::vector<float>> Context::finish_floats(const PendingRead& r) {
  const Tensor& t = r.tensor;
  SOTTO_ASSIGN(std::vector<uint8_t> raw, finish_bytes(r));
  const int64_t n = t.elements();
  std::vector<float> out(static_cast<size_t>(n));
  const QuantParams q = t.quant();
  for (int64_t i = 0; i < n; ++i) {
    const uint8_t* p = raw.data();
    float v;
    switch (t.dtype()) {
      case DType::F32:
        std::memcpy(&v, p + i * 4, 4);
        break;
      case DType::F16: {
        uint16_t h;
        std::memcpy(&h, p + i * 2, 2);
        v = f16_to_f32(h);
        break;
      }
      case DType::I8:
        v = (static_cast<int8_t>(p[i]) - q.zero_point) * q.scale;
        break;
      case DType::U8:
        v = (static_cast<int32_t>(p[i]) - q.zero_point) * q.scale;
        break;
      case DType::I32: {
        int32_t x;
        std::memcpy(&x, p + i * 4, 4);
        v = static_cast<float>(x);
        break;
      }
      case DType::I64: {
        int64_t x;
        std::memcpy(&x, p + i * 8, 8);
        v = static_cast<float>(x);
        break;
      }
      default:
        return error("nn: cannot read a ", dtype_name(t.dtype()), " tensor as floats");
    }
    out[static_cast<size_t>(i)] = v;
  }
  return out;
}

}  // namespace sotto::nn
