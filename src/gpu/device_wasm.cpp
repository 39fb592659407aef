// The device seam in WebAssembly: every call forwards to a function web/gpu.js implements on the GPUDevice it
// opened in the engine worker (navigator.gpu in a page, npm `webgpu` in Node). JS owns the WebGPU objects;
// this side holds their integer handles. Reads are asynchronous: finish_read() answers Pending until JS has
// seen the map complete, and the caller returns to JS, which awaits the device's pending maps and calls back.
#include <algorithm>
#include <cstddef>
#include <string>
#include <vector>

#include "gpu/device.h"
#include "gpu/webgpu_imports_wasm.h"

namespace sotto::gpu {
namespace {

bool blocking_reads = false;

std::string js_last_error() {
  char buffer[512];
  uint32_t full = sotto_gpu_last_error(buffer, sizeof buffer);
  return std::string(buffer, std::min<uint32_t>(full, sizeof buffer));
}

std::string fixed_string(const char* text, size_t capacity) {
  size_t n = 0;
  while (n < capacity && text[n]) n++;
  return std::string(text, n);
}

class WasmDevice final : public Device {
 public:
  WasmDevice() {
    WasmAdapterInfo raw{};
    sotto_gpu_info(&raw);
    info_.description = fixed_string(raw.description, sizeof raw.description);
    info_.backend = fixed_string(raw.backend, sizeof raw.backend);
    info_.shader_f16 = raw.flags & kWasmShaderF16;
    info_.subgroups = raw.flags & kWasmSubgroups;
    info_.timestamp_query = raw.flags & kWasmTimestamps;
    info_.packed_dot = raw.flags & kWasmPackedDot;
    AdapterLimits& l = info_.limits;
    l.max_buffer_size = static_cast<uint64_t>(raw.max_buffer_size);
    l.max_storage_buffer_binding_size = static_cast<uint64_t>(raw.max_storage_buffer_binding_size);
    l.max_storage_buffers_per_shader_stage = raw.max_storage_buffers_per_shader_stage;
    l.max_compute_workgroup_storage_size = raw.max_compute_workgroup_storage_size;
    l.max_compute_invocations_per_workgroup = raw.max_compute_invocations_per_workgroup;
    l.max_compute_workgroup_size_x = raw.max_compute_workgroup_size_x;
    l.max_compute_workgroups_per_dimension = raw.max_compute_workgroups_per_dimension;
    l.min_storage_buffer_offset_alignment = raw.min_storage_buffer_offset_alignment;
    l.min_uniform_buffer_offset_alignment = raw.min_uniform_buffer_offset_alignment;
  }

  // JS's objects outlive nothing of ours: release what this device made.
  ~WasmDevice() override {
    for (BufferHandle b : buffers_) sotto_gpu_destroy_buffer(b);
    for (uint32_t h : others_) sotto_gpu_release(h);
  }

  const AdapterInfo& info() const override { return info_; }

  Result<BufferHandle> create_buffer(uint64_t bytes, uint32_t usage, std::string_view label) override {
    uint64_t rounded = (bytes + 3) / 4 * 4;
    if (bytes == 0) return error("webgpu: buffer '", label, "' has size 0");
    if (rounded > info_.limits.max_buffer_size)
      return error("webgpu: buffer '", label, "' of ", bytes, " bytes exceeds the device's maxBufferSize (",
                   info_.limits.max_buffer_size, " bytes)");
    BufferHandle b = sotto_gpu_create_buffer(static_cast<double>(rounded), usage, label.data(),
                                             static_cast<uint32_t>(label.size()));
    if (!b)
      return error("webgpu: cannot create buffer '", label, "' of ", bytes, " bytes: ", js_last_error());
    buffers_.push_back(b);
    return b;
  }

  void destroy_buffer(BufferHandle buffer) override {
    // A plain loop: libc++'s std::find on 4-byte integers calls wmemchr, which the wasm build lacks.
    for (size_t i = 0; i < buffers_.size(); i++) {
      if (buffers_[i] != buffer) continue;
      buffers_.erase(buffers_.begin() + static_cast<std::ptrdiff_t>(i));
      sotto_gpu_destroy_buffer(buffer);
      return;
    }
  }

  Status write_buffer(BufferHandle buffer, uint64_t offset, const void* data, uint64_t bytes) override {
    if (offset % 4 || bytes % 4)
      return error("webgpu: write of ", bytes, " bytes at offset ", offset, ": both must be multiples of 4");
    if (bytes > 0xffffffffu) return error("webgpu: write of ", bytes, " bytes is larger than wasm memory");
    if (sotto_gpu_write_buffer(buffer, static_cast<double>(offset), data, static_cast<uint32_t>(bytes)) != 0)
      return error("webgpu: write_buffer: ", js_last_error());
    return {};
  }

  Result<PipelineHandle> create_pipeline(std::string_view wgsl, std::string_view entry,
                                         std::string_view label) override {
    PipelineHandle p = sotto_gpu_create_pipeline(wgsl.data(), static_cast<uint32_t>(wgsl.size()),
                                                 entry.data(), static_cast<uint32_t>(entry.size()),
                                                 label.data(), static_cast<uint32_t>(label.size()));
    if (!p) return error("webgpu: pipeline '", label, "': ", js_last_error());
    others_.push_back(p);
    return p;
  }

  Result<BindGroupHandle> create_bind_group(PipelineHandle pipeline,
                                            std::span<const Binding> bindings) override {
    BindGroupHandle g =
        sotto_gpu_create_bind_group(pipeline, bindings.data(), static_cast<uint32_t>(bindings.size()));
    if (!g) return error("webgpu: bind group: ", js_last_error());
    others_.push_back(g);
    return g;
  }

  Status run(std::span<const Dispatch> commands) override { return submit(commands, false); }

  // Timestamps resolve asynchronously in JS (web/gpu.js keeps the last timed run's per-command times for the
  // page); here the commands run with timestamp writes and `timings_ns` stays empty.
  Status run_timed(std::span<const Dispatch> commands, std::vector<uint64_t>* timings_ns) override {
    timings_ns->clear();
    return submit(commands, info_.timestamp_query);
  }

  Result<ReadHandle> start_read(BufferHandle buffer, uint64_t offset, uint64_t bytes) override {
    if (offset % 4 || bytes % 4 || bytes == 0)
      return error("webgpu: read of ", bytes, " bytes at offset ", offset,
                   ": both must be multiples of 4, size > 0");
    ReadHandle r = sotto_gpu_start_read(buffer, static_cast<double>(offset), static_cast<double>(bytes));
    if (!r) return error("webgpu: start_read: ", js_last_error());
    return r;
  }

  DeviceStatus finish_read(ReadHandle read, void* dst) override {
    int32_t status = sotto_gpu_finish_read(read, dst);
    while (status == 1 && blocking_reads && sotto_gpu_wait() == 0) status = sotto_gpu_finish_read(read, dst);
    if (status == 0) return DeviceStatus::Ok;
    if (status == 1) return DeviceStatus::Pending;
    return DeviceStatus::Error;
  }

  // Nothing can block in the browser: callers wait through reads.
  Status wait_idle() override {
    if (lost()) return error("webgpu: ", js_last_error());
    return {};
  }

  std::string last_error() const override { return js_last_error(); }
  bool lost() const override { return sotto_gpu_lost() != 0; }

 private:
  Status submit(std::span<const Dispatch> commands, bool timed) {
    if (commands.empty()) return {};
    if (sotto_gpu_run(commands.data(), static_cast<uint32_t>(commands.size()), timed ? 1 : 0) != 0)
      return error("webgpu: run: ", js_last_error());
    return {};
  }

  AdapterInfo info_;
  std::vector<BufferHandle> buffers_;
  std::vector<uint32_t> others_;  // pipelines and bind groups
};

}  // namespace

void wasm_allow_blocking_reads(bool allow) {
  blocking_reads = allow;
}

Result<std::unique_ptr<Device>> open_device(const DeviceOptions& /*options*/) {
  // The options were JS's to apply when it opened the GPUDevice (web/gpu.js openGpu).
  if (!sotto_gpu_available()) {
    std::string why = js_last_error();
    return error("webgpu: no device in this engine (", why.empty() ? "WebGPU was not initialised" : why, ")");
  }
  if (sotto_gpu_lost()) return error("webgpu: the device was lost: ", js_last_error());
  return std::unique_ptr<Device>(new WasmDevice());
}

}  // namespace sotto::gpu

extern "C" {

// 1: finish_read() waits for pending reads (sotto_gpu_wait) instead of answering Pending, for the op layer's
// models, which read back synchronously; JS sets it only around calls it makes through WebAssembly.promising
// (web/vad-ops.js), where sotto_gpu_wait can suspend, and back to 0 after. The engine worker runs one request
// at a time, so nothing else calls into wasm while it is set.
__attribute__((export_name("sotto_gpu_blocking_reads"))) void sotto_gpu_blocking_reads(int32_t allow) {
  sotto::gpu::wasm_allow_blocking_reads(allow != 0);
}

}  // extern "C"
