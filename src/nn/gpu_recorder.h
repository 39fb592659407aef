// The op layer's GPU backend: a context on a gpu::Device (nn::Context::webgpu) whose ops record dispatches
// instead of running them; reading a tensor back (Context::to_floats) submits what was recorded as one command
// buffer and waits for the read. Buffers are pooled by the context like CPU storage. Recording is cheap when
// shapes repeat: pipelines are compiled once per kernel, uniform blocks are kept per distinct content, and bind
// groups per (pipeline, buffers) combination, so a forward pass that repeats the last one's shapes (and so,
// through the pool, its buffers) creates no GPU object at all.
//
// Ops with a GPU kernel so far: add/sub/mul/div (suffix broadcast), scale, activation, and in f32 linear,
// conv1d, lstm, pad_reflect, slice, softmax and layer_norm over the last axis, group_norm, transpose, concat,
// rope, attention (full, causal over a cache, cross, grouped KV), argmax over the last axis, embedding and
// weight-only int8 linear_int8_affine: Moonshine's whole forward pass; glu, permute, conv2d and
// attention_rel_pos: Parakeet's (gpu_ops.cpp); nn/fused.h's linear_int8_fused, a decoder step's norm + int8 product +
// bias + rope + gate + residual + KV-cache append in one dispatch (gpu_fused.cpp). The others mark the
// recorder failed and return an empty tensor; the failure comes back from the next read as one line. Reading
// back is synchronous (native Dawn); the browser's asynchronous read is not wired yet.
//
// A forward pass with other lengths (a new sentence, a longer clip) should make few GPU objects too, since each
// costs the host microseconds: a uniform block is bound by its place in the submission, not by its content (the
// arena below), a tensor that owns its storage binds the whole storage, and the context pools GPU storages in
// size classes (nn/tensor.cpp), so the same buffers and bind groups come back when the lengths change a little.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.h"
#include "gpu/device.h"

namespace sotto::nn {

class Tensor;

class GpuRecorder {
 public:
  explicit GpuRecorder(gpu::Device& device);
  ~GpuRecorder();

  gpu::Device& device() { return device_; }

  // Records `wgsl` (entry point main, workgroup size 64, compiled once per `name`) over `threads` invocations:
  // binding 0 the uniform block `params` (4-byte words, padded to 16 bytes), bindings 1.. the tensors in order.
  void dispatch(std::string_view name, std::string_view wgsl, std::span<const uint32_t> params,
                std::initializer_list<const Tensor*> tensors, uint64_t threads);
  // Submits what was recorded and forgets it.
  Status flush();
  // Submits on its own every `n` recorded dispatches (0: only at flush() and reads), so a long forward pass
  // starts on the GPU while the host still records the rest of it: with one submit at the end, the GPU waits
  // for the whole recording and encoding (~150 dispatches for Moonshine's encoder) before its first dispatch.
  // The default is 64 (on an H100 0.4-0.7 ms faster than one submit per read for Moonshine's 10 s clip and 0.1
  // ms faster than every 32, bench/results/2026-12-06-moonshine-gpu.md); natively SOTTO_GPU_SUBMIT_EVERY=N
  // sets it for benchmarking.
  void set_submit_every(size_t n) { submit_every_ = n; }
  // The first failure since the context was made ("" when none): an op without a GPU kernel, a compile error.
  void fail(std::string message);
  bool failed() const { return !error_.empty(); }
  Status status() const;
  // Dispatches submitted so far, and GPU objects (pipelines, uniform arena chunks, bind groups) made so far:
  // tests check that a repeated forward pass makes no new objects.
  uint64_t dispatches_run() const { return dispatches_run_; }
  uint64_t objects_made() const { return pipelines_.size() + arena_.size() + bind_groups_.size(); }
  // Profiling (where the adapter has timestamp queries): every later flush times each dispatch on the GPU;
  // profile() lists each kernel's dispatches and GPU milliseconds, the largest first, and the flushes' count.
  void set_profiling(bool on) { profiling_ = on; }
  std::string profile() const;
  // Host time spent recording dispatches and encoding and submitting them (not waiting for reads), in ns since
  // the context was made: set against a pass's wall time it says whether the GPU waited for the host.
  uint64_t host_ns() const { return host_ns_; }

 private:
  // dispatch() without the submit: false where it failed (the failure is kept).
  bool record(std::string_view name, std::string_view wgsl, std::span<const uint32_t> params,
              std::initializer_list<const Tensor*> tensors, uint64_t threads);

  gpu::Device& device_;
  std::string error_;
  std::vector<gpu::Dispatch> plan_;
  std::vector<const std::string*> plan_names_;  // the kernel of each recorded dispatch (pipelines_' keys)
  bool profiling_ = false;
  size_t submit_every_ = 0;
  uint64_t flushes_ = 0;
  std::map<std::string, std::pair<uint64_t, uint64_t>, std::less<>> profile_;  // kernel: dispatches, GPU ns
  uint64_t dispatches_run_ = 0;
  uint64_t host_ns_ = 0;
  std::map<std::string, gpu::PipelineHandle, std::less<>> pipelines_;
  // The uniform arena: each recorded dispatch's block in its own 256-byte slot(s) (WebGPU's uniform offset
  // alignment), slots numbered from 0 again in each submission, in chunks of 64 KB made as a submission first
  // needs them. flush() writes the submission's blocks with one write_buffer per chunk before submitting; the
  // queue orders that write after every earlier submission, so only a slot used twice in one submission would
  // clash, and none is.
  static constexpr uint64_t kSlotBytes = 256;
  static constexpr uint64_t kChunkBytes = 65536;
  std::vector<gpu::BufferHandle> arena_;
  // This submission's blocks, from the arena's start (kSlotBytes / 4 words a slot).
  std::vector<uint32_t> staged_;
  std::map<std::vector<uint64_t>, gpu::BindGroupHandle> bind_groups_;
};

}  // namespace sotto::nn
