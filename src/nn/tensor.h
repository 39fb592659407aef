// The op layer's runtime tensor and the context that owns it. Every network after the language model (Silero,
// Moonshine, Kokoro, Parakeet) is written once against nn/ops.h; the context decides where it runs:
//   Backend::Cpu  ops execute eagerly, on the context's thread pool
//   Backend::Gpu  ops record WebGPU dispatches into the context's plan; reading a tensor back runs the plan
// A model never looks at which one it has (ggml's and ratchet's pattern). Weights are tensors too, uploaded
// once at load (nn/weights.h).
//
// Tensors are dense and row-major (outermost dimension first, as ONNX and PyTorch store them). A Tensor is a
// cheap handle: copies share the storage; reshape() is a view of the same storage. Ops never write into their
// inputs (except the ones named *_inplace), so sharing is safe.
#pragma once

#include <atomic>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/error.h"

namespace sotto {
class ThreadPool;
namespace gpu {
class Device;
}
}  // namespace sotto

namespace sotto::nn {

enum class Backend : uint8_t { Cpu, Gpu };

// Up to 6 dimensions, stored inline (shapes are made for every op: no heap allocation).
struct Shape {
  static constexpr int kMaxRank = 6;
  int rank = 0;
  int64_t dims[kMaxRank] = {};

  Shape() = default;
  Shape(std::initializer_list<int64_t> d);
  explicit Shape(std::span<const int64_t> d);

  // Negative i counts from the end: shape[-1] is the innermost dimension.
  int64_t operator[](int i) const { return dims[i < 0 ? rank + i : i]; }
  int64_t& operator[](int i) { return dims[i < 0 ? rank + i : i]; }
  int64_t elements() const;
  std::span<const int64_t> span() const { return {dims, static_cast<size_t>(rank)}; }
  bool operator==(const Shape& o) const;
  std::string str() const;  // "[1,416,20]"
};

class Context;
struct Storage;
struct DerivedLayout;

// Per-tensor affine quantization of an I8/U8 tensor: real = (q - zero_point) * scale (ONNX QuantizeLinear's
// convention). Per-channel scales, where a file has them, are a separate F32 tensor passed to the op.
struct QuantParams {
  float scale = 1.0f;
  int32_t zero_point = 0;
};

class Tensor {
 public:
  Tensor() = default;

  bool defined() const { return storage_ != nullptr; }
  const Shape& shape() const { return shape_; }
  int rank() const { return shape_.rank; }
  int64_t dim(int i) const { return shape_[i]; }
  int64_t elements() const { return shape_.elements(); }
  DType dtype() const { return dtype_; }
  Context& ctx() const { return *ctx_; }
  const QuantParams& quant() const { return quant_; }
  uint64_t bytes() const;

  // The same storage seen with another shape of the same element count.
  Tensor reshape(Shape shape) const;
  // Rows [begin, end) of the outermost dimension: the same storage seen from an offset (no copy). A GPU op binds
  // the view at that offset, which WebGPU requires to be a multiple of 256 bytes (minStorageBufferOffsetAlignment);
  // ops that write blocks meant to be taken apart this way pad them to it (LinearFusedF32::stack_columns).
  Tensor rows(int64_t begin, int64_t end) const;
  // This tensor with per-tensor quantization parameters attached (I8/U8 only).
  Tensor with_quant(QuantParams q) const;

  // CPU tensors only: the elements (contiguous). data<float>() for F32, data<uint16_t>() for F16, ...
  template <class T>
  T* data() const {
    return reinterpret_cast<T*>(host_bytes());
  }
  float* f32() const { return data<float>(); }

  // GPU tensors only: where the elements live.
  uint32_t gpu_buffer() const;
  uint64_t gpu_offset() const { return offset_; }
  // The bytes a GPU op binds: the whole storage for a tensor that owns it (pooled storages are a size class
  // larger than what they hold; binding all of it keeps a dispatch's bind group when the lengths change, and
  // kernels bound their indices themselves), the view's own bytes for rows() views (which may share a storage
  // with an output); the view's own bytes too where the whole storage would pass `max_binding` (the adapter's
  // limit, 0: none), which its size class can where the tensor does not.
  uint64_t gpu_binding_bytes(uint64_t max_binding) const;

  // A layout of this tensor's elements that an op derives once and reuses (a weight transposed to [N, K],
  // zero points subtracted, or dequantized): make() runs the first time `kind` is asked of this view; later
  // calls return the same tensor until the storage is freed. Sound because ops never write into their inputs:
  // a caller that writes into a tensor through data<>() after giving it to an op must not give it again.
  // Safe to call from several threads at once (make() may then run twice; one result is kept).
  template <class Make>
  Tensor derived(uint32_t kind, Make make) const {
    Tensor found;
    if (find_derived(kind, found)) return found;
    Tensor made = make();
    keep_derived(kind, made);
    return made;
  }

 private:
  friend class Context;
  uint8_t* host_bytes() const;
  bool find_derived(uint32_t kind, Tensor& out) const;
  void keep_derived(uint32_t kind, const Tensor& t) const;
  bool same_view(const DerivedLayout& d, uint32_t kind) const;

  std::shared_ptr<Storage> storage_;
  uint64_t offset_ = 0;    // bytes from the start of the storage
  bool row_view_ = false;  // made by rows()
  Shape shape_;
  DType dtype_ = DType::F32;
  QuantParams quant_;
  Context* ctx_ = nullptr;
};

// One Tensor::derived() layout and the view (kind, offset, shape, dtype, quantization) it was derived from.
struct DerivedLayout {
  uint32_t kind;
  uint64_t offset;
  Shape shape;
  DType dtype;
  QuantParams quant;
  Tensor tensor;
};

// Storage of one buffer: host bytes (CPU) or a GPU buffer handle. Pooled by the context: a storage whose last
// tensor goes away returns to the pool, so a forward pass that repeats allocates nothing after the first.
struct Storage {
  Context* ctx = nullptr;
  uint64_t bytes = 0;
  // CPU: bytes + 64 (SIMD tails may read past the end; those 64 are zeroed). The rest is not zero-filled:
  // ops write their whole output (empty() promises nothing, and a pooled storage comes back holding old
  // values anyway), and filling every fresh buffer cost 5-8 % of a Kokoro piece in wasm.
  std::unique_ptr<uint8_t[]> host;
  uint32_t gpu_buffer = 0;  // GPU
  // Tensor::derived()'s layouts of views of this storage; dropped when the storage returns to the pool.
  std::vector<DerivedLayout> derived;
  std::atomic_flag derived_lock;  // a spin lock: no pthread mutex in sotto's wasm libc
};

class GpuRecorder;  // nn/gpu_recorder.h: the GPU backend's plan, pipelines and buffer pool

class Context {
 public:
  // The CPU backend on `pool` (nullptr: single-threaded, the caller's thread).
  static std::unique_ptr<Context> cpu(ThreadPool* pool = nullptr);
  // The GPU backend on `device` (nn/gpu_recorder.h), which must outlive the context.
  static std::unique_ptr<Context> webgpu(::sotto::gpu::Device& device);
  ~Context();
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;

  Backend backend() const { return backend_; }
  ThreadPool* pool() const { return pool_; }
  int n_threads() const;
  GpuRecorder* gpu() const { return gpu_.get(); }

  // A new tensor. empty(): contents unspecified; zeros(): zero-filled.
  Tensor empty(const Shape& shape, DType dtype = DType::F32);
  Tensor zeros(const Shape& shape, DType dtype = DType::F32);
  // A tensor holding a copy of `bytes` (dtype's element size times the shape's elements, checked by the
  // caller; unaligned sources such as file bytes are fine).
  Tensor from_bytes(const Shape& shape, DType dtype, std::span<const uint8_t> bytes);
  Tensor from_floats(const Shape& shape, std::span<const float> values);

  // The tensor's elements as floats (F32, F16, I8/U8 dequantized with its QuantParams, I32, I64). On the GPU
  // this runs what was recorded and waits for the read.
  Result<std::vector<float>> to_floats(const Tensor& t);
  // The raw elements (any dtype), as bytes.
  Result<std::vector<uint8_t>> to_bytes(const Tensor& t);
  // to_floats in two halves, so that ops recorded between them overlap the read: on the GPU start_read
  // submits what was recorded and the copy of `t`, and finish_floats submits what was recorded since and waits
  // for the copy alone, so the GPU runs that later work while the host waits (Kokoro's text encoder while its
  // durations come back). On the CPU start_read keeps `t` and finish_floats reads it.
  struct PendingRead {
    Tensor tensor;
    uint32_t handle = 0;  // the device's read (GPU)
  };
  Result<PendingRead> start_read(const Tensor& t);
  Result<std::vector<float>> finish_floats(const PendingRead& r);
  // A copy of `t`, which may live on another context (a model's weights loaded on the CPU, moved to the GPU),
  // on this one, int8 / uint8 with its quantization.
  Result<Tensor> copy_of(const Tensor& t);

 private:
  friend class Tensor;
  explicit Context(Backend backend);
  std::shared_ptr<Storage> allocate(uint64_t bytes);
  void release(Storage* s);  // the pool's deleter
  Result<std::vector<uint8_t>> finish_bytes(const PendingRead& r);

  Backend backend_;
  ThreadPool* pool_ = nullptr;
  std::unique_ptr<GpuRecorder> gpu_;
  std::vector<std::unique_ptr<Storage>> free_;  // pooled storages, any size
};

// Inline: ops index tensors element by element, and a call per element costs more than the work (wasm).
inline uint8_t* Tensor::host_bytes() const {
  return storage_ ? storage_->host.get() + offset_ : nullptr;
}

// Bytes of one element of a plain (non-block) dtype.
uint32_t element_bytes(DType dtype);

}  // namespace sotto::nn
