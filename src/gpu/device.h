// The narrow device seam between sotto's GPU backend and WebGPU. Two implementations:
//   device_dawn_native.cpp  natively: the standard webgpu.h C API of a Dawn library loaded with dlopen
//                           (npm bun-webgpu-linux-x64's libwebgpu_wrapper.so), Vulkan backend
//   device_wasm.cpp         in the browser / Node: a few functions imported from JS (web/gpu.js) that call
//                           navigator.gpu (or npm `webgpu` in Node)
// Everything above this interface (kernels, plans, models) is written once and runs on both.
//
// Objects are small integer handles so they cross the wasm/JS boundary as numbers. 0 is never a valid handle.
//
// How a model uses it (decode step):
//   record once:  pipelines from WGSL, buffers, bind groups  ->  std::vector<Dispatch> plan
//   every token:  write_buffer(uniforms) ; run(plan) ; read(token buffer)   (one command buffer per run)
//
// Reading back is asynchronous in the browser (mapAsync), so reads are split in two: start_read() after the
// work that produces the data has been run, then finish_read(). Natively finish_read() waits. In wasm it
// returns DeviceStatus::Pending until JS has seen the map complete; the caller then returns to JS, which awaits
// the device's pending promise and calls back in (see web/gpu.js), and finish_read() then succeeds.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.h"

namespace sotto::gpu {

using BufferHandle = uint32_t;
using PipelineHandle = uint32_t;
using BindGroupHandle = uint32_t;
using ReadHandle = uint32_t;

// Buffer usages: the WebGPU bits we use, with WebGPU's values (GPUBufferUsage) so JS can pass them through.
enum BufferUsage : uint32_t {
  kUsageMapRead = 0x0001,
  kUsageCopySrc = 0x0004,
  kUsageCopyDst = 0x0008,
  kUsageUniform = 0x0040,
  kUsageStorage = 0x0080,
};

struct AdapterLimits {
  uint64_t max_buffer_size = 0;
  uint64_t max_storage_buffer_binding_size = 0;
  uint32_t max_storage_buffers_per_shader_stage = 0;
  uint32_t max_compute_workgroup_storage_size = 0;
  uint32_t max_compute_invocations_per_workgroup = 0;
  uint32_t max_compute_workgroup_size_x = 0;
  uint32_t max_compute_workgroups_per_dimension = 0;
  uint32_t min_storage_buffer_offset_alignment = 256;
  uint32_t min_uniform_buffer_offset_alignment = 256;
};

struct AdapterInfo {
  std::string description;       // "NVIDIA H200 (vulkan)", "SwiftShader Device (Subzero) (vulkan)", ...
  std::string backend;           // "vulkan", "browser", ...
  bool shader_f16 = false;       // WGSL `enable f16;`
  bool subgroups = false;        // WGSL `enable subgroups;`
  bool timestamp_query = false;  // per-dispatch GPU timings
  bool packed_dot = true;        // dot4I8Packed (WGSL language feature packed_4x8_integer_dot_product)
  AdapterLimits limits;
  // A CPU adapter (SwiftShader): every workgroup costs and there is no cache worth dodging, so benchmarks,
  // probes and load-time searches take their small forms there.
  bool cpu() const { return description.find("SwiftShader") != std::string::npos; }
};

// One buffer range bound to one @binding of a pipeline's group 0.
struct Binding {
  uint32_t binding = 0;
  BufferHandle buffer = 0;
  uint64_t offset = 0;
  uint64_t size = 0;  // 0: to the end of the buffer
};

// One command of a plan. A plan is run in one compute pass (WebGPU orders the dispatches of a pass and makes
// each see the previous one's storage writes). A copy ends the pass and starts a new one after it.
struct Dispatch {
  PipelineHandle pipeline = 0;
  BindGroupHandle bind_group = 0;
  uint32_t groups_x = 1, groups_y = 1, groups_z = 1;
  // When copy_bytes > 0 this command is a buffer copy instead of a dispatch.
  BufferHandle copy_src = 0, copy_dst = 0;
  uint64_t copy_src_offset = 0, copy_dst_offset = 0, copy_bytes = 0;
};

enum class DeviceStatus : int32_t { Ok = 0, Pending = 1, Error = 2 };

class Device {
 public:
  virtual ~Device() = default;

  virtual const AdapterInfo& info() const = 0;

  // Buffers. Sizes are rounded up to 4 bytes. Fails clearly when `bytes` exceeds the adapter's limits or
  // the allocation fails (out of memory is reported, never fatal).
  virtual Result<BufferHandle> create_buffer(uint64_t bytes, uint32_t usage, std::string_view label) = 0;
  virtual void destroy_buffer(BufferHandle buffer) = 0;
  // Queued write (ordered before the next run()). `bytes` a multiple of 4.
  virtual Status write_buffer(BufferHandle buffer, uint64_t offset, const void* data, uint64_t bytes) = 0;

  // A compute pipeline from WGSL source (entry point `entry`, layout derived from the shader). Compile
  // errors come back with the compiler's message.
  virtual Result<PipelineHandle> create_pipeline(std::string_view wgsl, std::string_view entry,
                                                 std::string_view label) = 0;
  virtual Result<BindGroupHandle> create_bind_group(PipelineHandle pipeline,
                                                    std::span<const Binding> bindings) = 0;

  // Encodes `commands` into one command buffer and submits it.
  virtual Status run(std::span<const Dispatch> commands) = 0;
  // The same, measuring each command's GPU time with timestamp queries (when info().timestamp_query):
  // natively it waits and fills `timings_ns` (one per command, copies 0). Without timestamps it runs the
  // commands and leaves `timings_ns` empty.
  virtual Status run_timed(std::span<const Dispatch> commands, std::vector<uint64_t>* timings_ns) {
    timings_ns->clear();
    return run(commands);
  }

  // Asynchronous readback of `bytes` from `buffer` at `offset` (multiples of 4), ordered after every run()
  // so far. finish_read copies into `dst`: Ok, Pending (wasm only: return to JS and call again), or Error
  // (lost device; message in last_error()).
  virtual Result<ReadHandle> start_read(BufferHandle buffer, uint64_t offset, uint64_t bytes) = 0;
  virtual DeviceStatus finish_read(ReadHandle read, void* dst) = 0;

  // Natively: blocks until all submitted work is done. In wasm this is never needed (use reads).
  virtual Status wait_idle() = 0;

  // The last asynchronous error (uncaptured validation error, device lost), "" when none.
  virtual std::string last_error() const = 0;
  virtual bool lost() const = 0;
};

struct DeviceOptions {
  bool prefer_high_performance = true;
  bool request_timestamps = false;  // ask for timestamp-query when the adapter has it
  bool disable_f16 = false;         // test the fallback paths on an adapter that has them
  bool disable_subgroups = false;
};

// Opens the platform's device: natively the Dawn library (SOTTO_DAWN_LIBRARY, or libwebgpu_wrapper.so found
// next to the executable / in node_modules/bun-webgpu-linux-x64), in wasm the device web/gpu.js prepared.
// Errors say what is missing: "webgpu: cannot load libwebgpu_wrapper.so (...)", "webgpu: no adapter".
Result<std::unique_ptr<Device>> open_device(const DeviceOptions& options = {});

}  // namespace sotto::gpu
