// The native Device: Dawn's standard webgpu.h C API, loaded at run time with dlopen from
// libwebgpu_wrapper.so (npm bun-webgpu-linux-x64), on Dawn's Vulkan backend.
//
// No webgpu.h ships with the library, so the few structs, enums and functions used here are declared in
// gpu/webgpu_abi_native.h, laid out as in webgpu-native/webgpu-headers at commit 1506137 (2025-04-30), the ABI
// the library matches. Every struct is zero-initialised so unused fields take the header's defaults.
//
// On this project's Linux machines Vulkan is SwiftShader (the driver Debian's chromium package ships in
// /usr/lib/chromium); open_device() points the Vulkan loader at it when nothing else is configured, so tests
// and the CLI work without environment variables. On a machine with a GPU driver (VK_ICD_FILENAMES or the
// system's ICDs), that driver is used instead.
#include <dirent.h>
#include <dlfcn.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "gpu/device.h"
#include "gpu/webgpu_abi_native.h"

namespace sotto::gpu {
namespace {

Status load_api(Api& api) {
  std::vector<std::string> candidates;
  if (const char* env = std::getenv("SOTTO_DAWN_LIBRARY"); env && *env) {
    candidates.push_back(env);
  } else {
    candidates.push_back("node_modules/bun-webgpu-linux-x64/libwebgpu_wrapper.so");
    // Next to the executable, and in the source tree the executable was built from (build/bin/..).
    char exe[4096];
    const ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n > 0) {
      std::string dir(exe, static_cast<size_t>(n));
      dir = dir.substr(0, dir.rfind('/'));
      candidates.push_back(dir + "/libwebgpu_wrapper.so");
      for (int up = 0; up < 4; ++up) {
        const size_t slash = dir.rfind('/');
        if (slash == std::string::npos || slash == 0) break;
        dir = dir.substr(0, slash);
        candidates.push_back(dir + "/node_modules/bun-webgpu-linux-x64/libwebgpu_wrapper.so");
      }
    }
    candidates.push_back("libwebgpu_wrapper.so");
  }
  std::string reasons;
  for (const std::string& path : candidates) {
    api.library = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (api.library) break;
    if (reasons.empty()) reasons = dlerror();
  }
  if (!api.library)
    return error("webgpu: cannot load libwebgpu_wrapper.so (", reasons,
                 "; set SOTTO_DAWN_LIBRARY or install npm bun-webgpu-linux-x64)");
#define SOTTO_LOOKUP(name, ret, args)                                  \
  api.name = reinterpret_cast<ret(*) args>(dlsym(api.library, #name)); \
  if (!api.name) return error("webgpu: the Dawn library lacks the function " #name);
  SOTTO_WGPU_FUNCTIONS(SOTTO_LOOKUP)
#undef SOTTO_LOOKUP
  return {};
}

// Without a configured Vulkan driver, use the SwiftShader one Debian's chromium package ships: point the loader
// at its ICD and, when no Vulkan loader is installed, load chromium's loader globally (Dawn dlopens
// "libvulkan.so.1" and then finds this one). A machine with its own driver (an ICD file in the standard
// folders, or VK_ICD_FILENAMES / VK_DRIVER_FILES set) is left alone.
bool has_system_icd() {
  for (const char* dir : {"/usr/share/vulkan/icd.d", "/etc/vulkan/icd.d", "/usr/local/share/vulkan/icd.d"}) {
    DIR* d = opendir(dir);
    if (!d) continue;
    bool any = false;
    while (dirent* e = readdir(d)) any = any || e->d_name[0] != '.';
    closedir(d);
    if (any) return true;
  }
  return false;
}

std::string prepare_vulkan() {
  const std::string chromium = "/usr/lib/chromium";
  const bool have_icd_env = std::getenv("VK_ICD_FILENAMES") || std::getenv("VK_DRIVER_FILES");
  const std::string icd = chromium + "/vk_swiftshader_icd.json";
  std::string problem;
  if (!have_icd_env && !has_system_icd()) {
    if (access(icd.c_str(), R_OK) == 0) {
      setenv("VK_ICD_FILENAMES", icd.c_str(), 0);
    } else {
      problem = cat("no Vulkan driver found: no ICD in /usr/share/vulkan/icd.d or /etc/vulkan/icd.d, ", icd,
                    " absent (install chromium, or set VK_ICD_FILENAMES)");
    }
  }
  if (dlopen("libvulkan.so.1", RTLD_NOW | RTLD_GLOBAL)) return problem;
  const std::string loader = chromium + "/libvulkan.so.1";
  if (!dlopen(loader.c_str(), RTLD_NOW | RTLD_GLOBAL))
    problem += cat(problem.empty() ? "" : "; ", "no Vulkan loader: libvulkan.so.1 is not installed and ",
                   loader, " is absent");
  return problem;
}

// ---------------------------------------------------------------- the device

class DawnDevice final : public Device {
 public:
  ~DawnDevice() override;
  Status open(const DeviceOptions& options);

  const AdapterInfo& info() const override { return info_; }
  Result<BufferHandle> create_buffer(uint64_t bytes, uint32_t usage, std::string_view label) override;
  void destroy_buffer(BufferHandle buffer) override;
  Status write_buffer(BufferHandle buffer, uint64_t offset, const void* data, uint64_t bytes) override;
  Result<PipelineHandle> create_pipeline(std::string_view wgsl, std::string_view entry,
                                         std::string_view label) override;
  Result<BindGroupHandle> create_bind_group(PipelineHandle pipeline,
                                            std::span<const Binding> bindings) override;
  Status run(std::span<const Dispatch> commands) override;
  Status run_timed(std::span<const Dispatch> commands, std::vector<uint64_t>* timings_ns) override;
  Result<ReadHandle> start_read(BufferHandle buffer, uint64_t offset, uint64_t bytes) override;
  DeviceStatus finish_read(ReadHandle read, void* dst) override;
  Status wait_idle() override;
  std::string last_error() const override { return last_error_; }
  bool lost() const override { return lost_; }

 private:
  struct BufferSlot {
    WGPUBuffer buffer = nullptr;
    uint64_t bytes = 0;
  };
  struct ReadSlot {
    WGPUBuffer staging = nullptr;
    uint64_t bytes = 0;
    bool done = false, ok = false;
    bool in_use = false;
  };

  void wait_future(WGPUFuture future, const bool& done);
  Status error_scope_result(std::string_view what);
  Status encode(std::span<const Dispatch> commands, WGPUQuerySet timestamps, WGPUBuffer resolve);
  WGPUBuffer buffer_of(BufferHandle h) const {
    return h > 0 && h <= buffers_.size() ? buffers_[h - 1].buffer : nullptr;
  }

  static void on_lost(const WGPUDevice*, uint32_t reason, WGPUStringView message, void* self, void*) {
    auto* d = static_cast<DawnDevice*>(self);
    if (reason == kDeviceLostDestroyed || reason == kDeviceLostCallbackCancelled || d->closing_) return;
    d->lost_ = true;
    d->last_error_ = cat("webgpu: device lost: ", text(message));
  }
  static void on_error(const WGPUDevice*, uint32_t, WGPUStringView message, void* self, void*) {
    auto* d = static_cast<DawnDevice*>(self);
    if (d->last_error_.empty()) d->last_error_ = cat("webgpu: ", one_line(text(message)));
  }

  Api api_;
  WGPUInstance instance_ = nullptr;
  WGPUAdapter adapter_ = nullptr;
  WGPUDevice device_ = nullptr;
  WGPUQueue queue_ = nullptr;
  bool timed_wait_ = false;
  bool lost_ = false, closing_ = false;
  std::string last_error_;
  AdapterInfo info_;
  std::vector<BufferSlot> buffers_;
  std::vector<WGPUComputePipeline> pipelines_;
  std::vector<WGPUBindGroup> bind_groups_;
  std::vector<ReadSlot> reads_;
};

DawnDevice::~DawnDevice() {
  closing_ = true;
  if (!api_.library) return;
  for (ReadSlot& r : reads_)
    if (r.staging) api_.wgpuBufferRelease(r.staging);
  for (WGPUBindGroup g : bind_groups_)
    if (g) api_.wgpuBindGroupRelease(g);
  for (WGPUComputePipeline p : pipelines_)
    if (p) api_.wgpuComputePipelineRelease(p);
  for (BufferSlot& b : buffers_)
    if (b.buffer) api_.wgpuBufferRelease(b.buffer);
  if (queue_) api_.wgpuQueueRelease(queue_);
  if (device_) {
    api_.wgpuDeviceDestroy(device_);
    api_.wgpuDeviceRelease(device_);
  }
  if (adapter_) api_.wgpuAdapterRelease(adapter_);
  if (instance_) {
    api_.wgpuInstanceProcessEvents(instance_);
    api_.wgpuInstanceRelease(instance_);
  }
  // The library stays loaded: Dawn's threads may outlive the instance by a moment.
}

// Waits for `future` (whose callback sets `done`): WaitAny when the instance allows timed waits, otherwise
// ProcessEvents in a loop that backs off to short sleeps.
void DawnDevice::wait_future(WGPUFuture future, const bool& done) {
  if (timed_wait_) {
    WGPUFutureWaitInfo wait{future, 0};
    api_.wgpuInstanceWaitAny(instance_, 1, &wait, UINT64_MAX);
    if (done) return;
  }
  for (int spin = 0; !done; ++spin) {
    api_.wgpuInstanceProcessEvents(instance_);
    if (done || lost_) break;
    if (spin > 1000) std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
}

Status DawnDevice::open(const DeviceOptions& options) {
  SOTTO_TRY(load_api(api_));
  const std::string vulkan_problem = prepare_vulkan();

  WGPUInstanceDescriptor instance_desc{};
  instance_desc.capabilities.timedWaitAnyEnable = 1;
  instance_desc.capabilities.timedWaitAnyMaxCount = 1;
  instance_ = api_.wgpuCreateInstance(&instance_desc);
  timed_wait_ = instance_ != nullptr;
  if (!instance_) instance_ = api_.wgpuCreateInstance(nullptr);
  if (!instance_) return error("webgpu: wgpuCreateInstance failed");

  struct AdapterResult {
    bool done = false;
    WGPUAdapter adapter = nullptr;
    std::string message;
  } adapter_result;
  WGPURequestAdapterOptions adapter_options{};
  adapter_options.featureLevel = kFeatureLevelCore;
  adapter_options.powerPreference = options.prefer_high_performance ? kPowerHigh : kPowerLow;
  adapter_options.backendType = kBackendVulkan;  // without it Dawn may pick its Null backend
  WGPUCallbackInfo<RequestAdapterCallback> adapter_cb{};
  adapter_cb.mode = kCallbackAllowProcessEvents;
  adapter_cb.callback = [](uint32_t status, WGPUAdapter adapter, WGPUStringView message, void* u1, void*) {
    auto* r = static_cast<AdapterResult*>(u1);
    if (status == kStatusSuccess) r->adapter = adapter;
    r->message = text(message);
    r->done = true;
  };
  adapter_cb.userdata1 = &adapter_result;
  wait_future(api_.wgpuInstanceRequestAdapter(instance_, &adapter_options, adapter_cb), adapter_result.done);
  if (!adapter_result.adapter)
    return error("webgpu: no Vulkan adapter (", adapter_result.message, vulkan_problem.empty() ? "" : "; ",
                 vulkan_problem, ")");
  adapter_ = adapter_result.adapter;

  WGPUAdapterInfo adapter_info{};
  if (api_.wgpuAdapterGetInfo(adapter_, &adapter_info) == kStatusSuccess) {
    info_.description = text(adapter_info.device);
    const std::string desc = text(adapter_info.description);
    if (!desc.empty() && desc != info_.description) info_.description += cat(" (", desc, ")");
    api_.wgpuAdapterInfoFreeMembers(adapter_info);
  }
  info_.backend = "vulkan";
  std::vector<uint32_t> features;
  auto want = [&](uint32_t feature, bool allowed) {
    const bool has = allowed && api_.wgpuAdapterHasFeature(adapter_, feature);
    if (has) features.push_back(feature);
    return has;
  };
  info_.shader_f16 = want(kFeatureShaderF16, !options.disable_f16);
  info_.subgroups = want(kFeatureSubgroups, !options.disable_subgroups);
  info_.timestamp_query = want(kFeatureTimestampQuery, options.request_timestamps);

  // Ask for the adapter's own limits (the defaults are far lower: 128 MiB bindings, 8 storage buffers).
  WGPULimits limits{};
  if (api_.wgpuAdapterGetLimits(adapter_, &limits) != kStatusSuccess)
    return error("webgpu: cannot read the adapter's limits");

  struct DeviceResult {
    bool done = false;
    WGPUDevice device = nullptr;
    std::string message;
  } device_result;
  WGPUDeviceDescriptor device_desc{};
  device_desc.label = view("sotto");
  device_desc.requiredFeatureCount = features.size();
  device_desc.requiredFeatures = features.data();
  device_desc.requiredLimits = &limits;
  device_desc.deviceLostCallbackInfo.mode = kCallbackAllowSpontaneous;
  device_desc.deviceLostCallbackInfo.callback = &DawnDevice::on_lost;
  device_desc.deviceLostCallbackInfo.userdata1 = this;
  device_desc.uncapturedErrorCallbackInfo.callback = &DawnDevice::on_error;
  device_desc.uncapturedErrorCallbackInfo.userdata1 = this;
  // Dawn's robustness transform (every buffer index clamped in the shader, WebGPU's guarantee against
  // untrusted pages) is off natively: each of our kernels bounds its own indices, the buffers stay bounded by
  // Vulkan's robustBufferAccess, which Dawn always enables, and the clamps cost ~13 % of a Moonshine decoder step
  // on an H100 (bench/results/2026-12-06-moonshine-gpu-robustness.md). The browser keeps them (it decides).
  // SOTTO_DAWN_TOGGLES="a,b,-c" adds toggles or, with '-', turns one off (-disable_robustness restores the
  // clamps), for benchmarking what Dawn's checks cost.
  std::vector<std::string> enabled_names = {"disable_robustness"}, disabled_names;
  if (const char* env = std::getenv("SOTTO_DAWN_TOGGLES"); env && *env) {
    for (std::string_view rest = env; !rest.empty();) {
      const size_t comma = std::min(rest.find(','), rest.size());
      const std::string name(rest.substr(0, comma));
      rest.remove_prefix(std::min(comma + 1, rest.size()));
      if (name.empty()) continue;
      if (name[0] == '-') {
        std::erase(enabled_names, name.substr(1));
        disabled_names.push_back(name.substr(1));
      } else {
        enabled_names.push_back(name);
      }
    }
  }
  std::vector<const char*> enabled, disabled;
  for (const std::string& t : enabled_names) enabled.push_back(t.c_str());
  for (const std::string& t : disabled_names) disabled.push_back(t.c_str());
  WGPUDawnTogglesDescriptor toggles{};
  toggles.chain.sType = kSTypeDawnTogglesDescriptor;
  toggles.enabledToggleCount = enabled.size();
  toggles.enabledToggles = enabled.data();
  toggles.disabledToggleCount = disabled.size();
  toggles.disabledToggles = disabled.data();
  device_desc.nextInChain = &toggles.chain;
  WGPUCallbackInfo<RequestDeviceCallback> device_cb{};
  device_cb.mode = kCallbackAllowProcessEvents;
  device_cb.callback = [](uint32_t status, WGPUDevice device, WGPUStringView message, void* u1, void*) {
    auto* r = static_cast<DeviceResult*>(u1);
    if (status == kStatusSuccess) r->device = device;
    r->message = text(message);
    r->done = true;
  };
  device_cb.userdata1 = &device_result;
  wait_future(api_.wgpuAdapterRequestDevice(adapter_, &device_desc, device_cb), device_result.done);
  if (!device_result.device)
    return error("webgpu: cannot create a device on '", info_.description, "' (", device_result.message, ")");
  device_ = device_result.device;
  queue_ = api_.wgpuDeviceGetQueue(device_);

  WGPULimits got{};
  if (api_.wgpuDeviceGetLimits(device_, &got) != kStatusSuccess) got = limits;
  AdapterLimits& l = info_.limits;
  l.max_buffer_size = got.maxBufferSize;
  l.max_storage_buffer_binding_size = got.maxStorageBufferBindingSize;
  l.max_storage_buffers_per_shader_stage = got.maxStorageBuffersPerShaderStage;
  l.max_compute_workgroup_storage_size = got.maxComputeWorkgroupStorageSize;
  l.max_compute_invocations_per_workgroup = got.maxComputeInvocationsPerWorkgroup;
  l.max_compute_workgroup_size_x = got.maxComputeWorkgroupSizeX;
  l.max_compute_workgroups_per_dimension = got.maxComputeWorkgroupsPerDimension;
  l.min_storage_buffer_offset_alignment = got.minStorageBufferOffsetAlignment;
  l.min_uniform_buffer_offset_alignment = got.minUniformBufferOffsetAlignment;
  // SOTTO_GPU_MAX_BINDING=<bytes>: report a smaller storage binding limit, so tests can make small models'
  // matrices split into several buffers as the real files' output tables do.
  if (const char* env = std::getenv("SOTTO_GPU_MAX_BINDING"); env && *env) {
    const unsigned long long cap = std::strtoull(env, nullptr, 10);
    if (cap >= 256 && cap < l.max_storage_buffer_binding_size) l.max_storage_buffer_binding_size = cap;
  }
  return {};
}

Status DawnDevice::error_scope_result(std::string_view what) {
  struct ScopeResult {
    bool done = false;
    uint32_t type = kErrorTypeNoError;
    std::string message;
  } result;
  WGPUCallbackInfo<PopErrorScopeCallback> cb{};
  cb.mode = kCallbackAllowProcessEvents;
  cb.callback = [](uint32_t, uint32_t type, WGPUStringView message, void* u1, void*) {
    auto* r = static_cast<ScopeResult*>(u1);
    r->type = type;
    r->message = text(message);
    r->done = true;
  };
  cb.userdata1 = &result;
  wait_future(api_.wgpuDevicePopErrorScope(device_, cb), result.done);
  if (result.type != kErrorTypeNoError) return error("webgpu: ", what, ": ", one_line(result.message));
  return {};
}

Result<BufferHandle> DawnDevice::create_buffer(uint64_t bytes, uint32_t usage, std::string_view label) {
  if (lost_) return error(last_error_);
  bytes = (bytes + 3) & ~uint64_t{3};
  if (bytes == 0) bytes = 4;
  if (bytes > info_.limits.max_buffer_size)
    return error("webgpu: buffer '", label, "' of ", bytes, " bytes exceeds the adapter's maximum (",
                 info_.limits.max_buffer_size, " bytes)");
  WGPUBufferDescriptor desc{};
  desc.label = view(label);
  desc.usage = usage;
  desc.size = bytes;
  api_.wgpuDevicePushErrorScope(device_, kErrorFilterOutOfMemory);
  api_.wgpuDevicePushErrorScope(device_, kErrorFilterValidation);
  WGPUBuffer buffer = api_.wgpuDeviceCreateBuffer(device_, &desc);
  Status validation = error_scope_result(cat("creating buffer '", label, "'"));
  Status memory = error_scope_result(cat("allocating ", bytes, " bytes for buffer '", label, "'"));
  if (!validation.ok() || !memory.ok() || !buffer) {
    if (buffer) api_.wgpuBufferRelease(buffer);
    if (!memory.ok()) return memory;
    if (!validation.ok()) return validation;
    return error("webgpu: creating buffer '", label, "' failed");
  }
  buffers_.push_back({buffer, bytes});
  return static_cast<BufferHandle>(buffers_.size());
}

void DawnDevice::destroy_buffer(BufferHandle h) {
  if (h == 0 || h > buffers_.size() || !buffers_[h - 1].buffer) return;
  api_.wgpuBufferDestroy(buffers_[h - 1].buffer);
  api_.wgpuBufferRelease(buffers_[h - 1].buffer);
  buffers_[h - 1] = {};
}

Status DawnDevice::write_buffer(BufferHandle h, uint64_t offset, const void* data, uint64_t bytes) {
  WGPUBuffer buffer = buffer_of(h);
  if (!buffer) return error("webgpu: write to unknown buffer ", h);
  if (offset % 4 || bytes % 4 || offset + bytes > buffers_[h - 1].bytes)
    return error("webgpu: write of ", bytes, " bytes at ", offset, " does not fit buffer ", h, " (",
                 buffers_[h - 1].bytes, " bytes) or is not 4-byte aligned");
  if (lost_) return error(last_error_);
  api_.wgpuQueueWriteBuffer(queue_, buffer, offset, data, static_cast<size_t>(bytes));
  return {};
}

Result<PipelineHandle> DawnDevice::create_pipeline(std::string_view wgsl, std::string_view entry,
                                                   std::string_view label) {
  if (lost_) return error(last_error_);
  WGPUShaderSourceWGSL source{};
  source.chain.sType = kSTypeShaderSourceWGSL;
  source.code = view(wgsl);
  WGPUShaderModuleDescriptor module_desc{};
  module_desc.nextInChain = &source.chain;
  module_desc.label = view(label);
  api_.wgpuDevicePushErrorScope(device_, kErrorFilterValidation);
  WGPUShaderModule module = api_.wgpuDeviceCreateShaderModule(device_, &module_desc);
  WGPUComputePipelineDescriptor desc{};
  desc.label = view(label);
  desc.compute.module = module;
  desc.compute.entryPoint = view(entry);
  WGPUComputePipeline pipeline = module ? api_.wgpuDeviceCreateComputePipeline(device_, &desc) : nullptr;
  if (module) api_.wgpuShaderModuleRelease(module);
  Status status = error_scope_result(cat("compiling pipeline '", label, "'"));
  if (!status.ok() || !pipeline) {
    if (pipeline) api_.wgpuComputePipelineRelease(pipeline);
    if (!status.ok()) return status;
    return error("webgpu: compiling pipeline '", label, "' failed");
  }
  pipelines_.push_back(pipeline);
  return static_cast<PipelineHandle>(pipelines_.size());
}

Result<BindGroupHandle> DawnDevice::create_bind_group(PipelineHandle p, std::span<const Binding> bindings) {
  if (p == 0 || p > pipelines_.size()) return error("webgpu: bind group for unknown pipeline ", p);
  std::vector<WGPUBindGroupEntry> entries(bindings.size());
  for (size_t i = 0; i < bindings.size(); ++i) {
    WGPUBuffer buffer = buffer_of(bindings[i].buffer);
    if (!buffer)
      return error("webgpu: binding ", bindings[i].binding, " names unknown buffer ", bindings[i].buffer);
    entries[i] = {};
    entries[i].binding = bindings[i].binding;
    entries[i].buffer = buffer;
    entries[i].offset = bindings[i].offset;
    entries[i].size = bindings[i].size ? bindings[i].size : kWholeSize;
  }
  WGPUBindGroupLayout layout = api_.wgpuComputePipelineGetBindGroupLayout(pipelines_[p - 1], 0);
  WGPUBindGroupDescriptor desc{};
  desc.layout = layout;
  desc.entryCount = entries.size();
  desc.entries = entries.data();
  api_.wgpuDevicePushErrorScope(device_, kErrorFilterValidation);
  WGPUBindGroup group = api_.wgpuDeviceCreateBindGroup(device_, &desc);
  api_.wgpuBindGroupLayoutRelease(layout);
  Status status = error_scope_result("creating a bind group");
  if (!status.ok() || !group) {
    if (group) api_.wgpuBindGroupRelease(group);
    if (!status.ok()) return status;
    return error("webgpu: creating a bind group failed");
  }
  bind_groups_.push_back(group);
  return static_cast<BindGroupHandle>(bind_groups_.size());
}

// Encodes the commands: consecutive dispatches share one compute pass; a copy ends the pass. With a query
// set, each dispatch gets its own pass with begin/end timestamps at 2i, 2i+1.
Status DawnDevice::encode(std::span<const Dispatch> commands, WGPUQuerySet timestamps, WGPUBuffer resolve) {
  if (lost_) return error(last_error_);
  WGPUCommandEncoder encoder = api_.wgpuDeviceCreateCommandEncoder(device_, nullptr);
  WGPUComputePassEncoder pass = nullptr;
  Status status;
  for (size_t i = 0; i < commands.size() && status.ok(); ++i) {
    const Dispatch& c = commands[i];
    if (c.copy_bytes > 0 || timestamps) {
      if (pass) {
        api_.wgpuComputePassEncoderEnd(pass);
        api_.wgpuComputePassEncoderRelease(pass);
        pass = nullptr;
      }
    }
    if (c.copy_bytes > 0) {
      WGPUBuffer src = buffer_of(c.copy_src), dst = buffer_of(c.copy_dst);
      if (!src || !dst)
        status = error("webgpu: copy between unknown buffers ", c.copy_src, ", ", c.copy_dst);
      else
        api_.wgpuCommandEncoderCopyBufferToBuffer(encoder, src, c.copy_src_offset, dst, c.copy_dst_offset,
                                                  c.copy_bytes);
      continue;
    }
    if (c.pipeline == 0 || c.pipeline > pipelines_.size() || c.bind_group == 0 ||
        c.bind_group > bind_groups_.size()) {
      status = error("webgpu: command ", i, " names an unknown pipeline or bind group");
      break;
    }
    if (!pass) {
      WGPUComputePassDescriptor pass_desc{};
      WGPUPassTimestampWrites writes{};
      if (timestamps) {
        writes.querySet = timestamps;
        writes.beginningOfPassWriteIndex = static_cast<uint32_t>(2 * i);
        writes.endOfPassWriteIndex = static_cast<uint32_t>(2 * i + 1);
        pass_desc.timestampWrites = &writes;
      }
      pass = api_.wgpuCommandEncoderBeginComputePass(encoder, &pass_desc);
    }
    api_.wgpuComputePassEncoderSetPipeline(pass, pipelines_[c.pipeline - 1]);
    api_.wgpuComputePassEncoderSetBindGroup(pass, 0, bind_groups_[c.bind_group - 1], 0, nullptr);
    api_.wgpuComputePassEncoderDispatchWorkgroups(pass, c.groups_x, c.groups_y, c.groups_z);
  }
  if (pass) {
    api_.wgpuComputePassEncoderEnd(pass);
    api_.wgpuComputePassEncoderRelease(pass);
  }
  if (timestamps && status.ok())
    api_.wgpuCommandEncoderResolveQuerySet(encoder, timestamps, 0, static_cast<uint32_t>(2 * commands.size()),
                                           resolve, 0);
  WGPUCommandBuffer commands_buffer = api_.wgpuCommandEncoderFinish(encoder, nullptr);
  api_.wgpuCommandEncoderRelease(encoder);
  if (status.ok()) api_.wgpuQueueSubmit(queue_, 1, &commands_buffer);
  api_.wgpuCommandBufferRelease(commands_buffer);
  return status;
}

Status DawnDevice::run(std::span<const Dispatch> commands) {
  return encode(commands, nullptr, nullptr);
}

Status DawnDevice::run_timed(std::span<const Dispatch> commands, std::vector<uint64_t>* timings_ns) {
  timings_ns->clear();
  if (!info_.timestamp_query || commands.empty()) return run(commands);
  const uint32_t count = static_cast<uint32_t>(2 * commands.size());
  WGPUQuerySetDescriptor qdesc{};
  qdesc.type = kQueryTimestamp;
  qdesc.count = count;
  WGPUQuerySet set = api_.wgpuDeviceCreateQuerySet(device_, &qdesc);
  SOTTO_ASSIGN(BufferHandle resolve,
               create_buffer(uint64_t{count} * 8, 0x0200 /* QueryResolve */ | kUsageCopySrc, "timestamps"));
  Status status = encode(commands, set, buffer_of(resolve));
  std::vector<uint64_t> ticks(count);
  if (status.ok()) {
    auto read = start_read(resolve, 0, uint64_t{count} * 8);
    if (!read.ok())
      status = read.status();
    else if (finish_read(*read, ticks.data()) != DeviceStatus::Ok)
      status = error(last_error_);
  }
  destroy_buffer(resolve);
  api_.wgpuQuerySetRelease(set);
  SOTTO_TRY(status);
  for (size_t i = 0; i < commands.size(); ++i)
    timings_ns->push_back(
        commands[i].copy_bytes > 0 || ticks[2 * i + 1] < ticks[2 * i] ? 0 : ticks[2 * i + 1] - ticks[2 * i]);
  return {};
}

Result<ReadHandle> DawnDevice::start_read(BufferHandle h, uint64_t offset, uint64_t bytes) {
  WGPUBuffer buffer = buffer_of(h);
  if (!buffer) return error("webgpu: read from unknown buffer ", h);
  if (offset % 4 || bytes % 4 || bytes == 0 || offset + bytes > buffers_[h - 1].bytes)
    return error("webgpu: read of ", bytes, " bytes at ", offset, " does not fit buffer ", h);
  if (lost_) return error(last_error_);
  // Reuse a finished staging buffer of the right size (a decode loop reads 4 bytes per token).
  size_t slot = reads_.size();
  for (size_t i = 0; i < reads_.size(); ++i)
    if (!reads_[i].in_use && reads_[i].bytes == bytes) {
      slot = i;
      break;
    }
  if (slot == reads_.size()) {
    WGPUBufferDescriptor desc{};
    desc.label = view("readback");
    desc.usage = kUsageMapRead | kUsageCopyDst;
    desc.size = bytes;
    WGPUBuffer staging = api_.wgpuDeviceCreateBuffer(device_, &desc);
    if (!staging) return error("webgpu: cannot create a ", bytes, "-byte readback buffer");
    reads_.push_back({staging, bytes});
  }
  ReadSlot& r = reads_[slot];
  r.in_use = true;
  r.done = r.ok = false;
  WGPUCommandEncoder encoder = api_.wgpuDeviceCreateCommandEncoder(device_, nullptr);
  api_.wgpuCommandEncoderCopyBufferToBuffer(encoder, buffer, offset, r.staging, 0, bytes);
  WGPUCommandBuffer cb = api_.wgpuCommandEncoderFinish(encoder, nullptr);
  api_.wgpuCommandEncoderRelease(encoder);
  api_.wgpuQueueSubmit(queue_, 1, &cb);
  api_.wgpuCommandBufferRelease(cb);
  return static_cast<ReadHandle>(slot + 1);
}

DeviceStatus DawnDevice::finish_read(ReadHandle h, void* dst) {
  if (h == 0 || h > reads_.size() || !reads_[h - 1].in_use) {
    last_error_ = cat("webgpu: finish_read of unknown read ", h);
    return DeviceStatus::Error;
  }
  ReadSlot& r = reads_[h - 1];
  WGPUCallbackInfo<BufferMapCallback> cb{};
  cb.mode = kCallbackAllowProcessEvents;
  cb.callback = [](uint32_t status, WGPUStringView, void* u1, void*) {
    auto* slot = static_cast<ReadSlot*>(u1);
    slot->ok = status == kStatusSuccess;
    slot->done = true;
  };
  cb.userdata1 = &r;
  wait_future(api_.wgpuBufferMapAsync(r.staging, kMapModeRead, 0, static_cast<size_t>(r.bytes), cb), r.done);
  r.in_use = false;
  if (!r.done || !r.ok) {
    if (last_error_.empty()) last_error_ = "webgpu: mapping a readback buffer failed";
    return DeviceStatus::Error;
  }
  const void* mapped = api_.wgpuBufferGetConstMappedRange(r.staging, 0, static_cast<size_t>(r.bytes));
  if (mapped) std::memcpy(dst, mapped, static_cast<size_t>(r.bytes));
  api_.wgpuBufferUnmap(r.staging);
  return mapped ? DeviceStatus::Ok : DeviceStatus::Error;
}

Status DawnDevice::wait_idle() {
  if (lost_) return error(last_error_);
  // The queue-done callback has the map callback's shape (status, message, userdata).
  struct Done {
    bool done = false;
  } done;
  WGPUCallbackInfo<BufferMapCallback> cb{};
  cb.mode = kCallbackAllowProcessEvents;
  cb.callback = [](uint32_t, WGPUStringView, void* u1, void*) { static_cast<Done*>(u1)->done = true; };
  cb.userdata1 = &done;
  wait_future(api_.wgpuQueueOnSubmittedWorkDone(queue_, cb), done.done);
  if (lost_) return error(last_error_);
  return {};
}

}  // namespace

Result<std::unique_ptr<Device>> open_device(const DeviceOptions& options) {
  auto device = std::make_unique<DawnDevice>();
  SOTTO_TRY(device->open(options));
  return std::unique_ptr<Device>(std::move(device));
}

}  // namespace sotto::gpu
