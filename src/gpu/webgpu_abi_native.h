// The subset of the standard webgpu.h C API that device_dawn_native.cpp uses, declared here because
// libwebgpu_wrapper.so ships without a header: structs, enums and functions laid out as in
// webgpu-native/webgpu-headers at commit 1506137 (2025-04-30), the ABI that library matches (callbacks take a
// WGPUStringView message; asynchronous calls return a WGPUFuture). Included by device_dawn_native.cpp only.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace sotto::gpu {
namespace {

// ---------------------------------------------------------------- webgpu.h declarations (subset)
using WGPUBool = uint32_t;
using WGPUFlags = uint64_t;
struct WGPUOpaque;
using WGPUInstance = WGPUOpaque*;
using WGPUAdapter = WGPUOpaque*;
using WGPUDevice = WGPUOpaque*;
using WGPUQueue = WGPUOpaque*;
using WGPUBuffer = WGPUOpaque*;
using WGPUShaderModule = WGPUOpaque*;
using WGPUComputePipeline = WGPUOpaque*;
using WGPUBindGroupLayout = WGPUOpaque*;
using WGPUBindGroup = WGPUOpaque*;
using WGPUCommandEncoder = WGPUOpaque*;
using WGPUCommandBuffer = WGPUOpaque*;
using WGPUComputePassEncoder = WGPUOpaque*;
using WGPUQuerySet = WGPUOpaque*;

constexpr size_t kStrlen = SIZE_MAX;
constexpr uint64_t kWholeSize = UINT64_MAX;

struct WGPUStringView {
  const char* data;
  size_t length;
};
WGPUStringView view(std::string_view s) {
  return {s.data(), s.size()};
}
std::string text(WGPUStringView s) {
  if (!s.data) return "";
  return s.length == kStrlen ? std::string(s.data) : std::string(s.data, s.length);
}

// Compiler messages span lines (source excerpts, carets): errors here are one line.
std::string one_line(std::string_view message) {
  std::string out;
  for (char c : message) {
    if (c == '\n' || c == '\t') c = ' ';
    if (c == ' ' && (out.empty() || out.back() == ' ')) continue;
    out.push_back(c);
  }
  while (!out.empty() && out.back() == ' ') out.pop_back();
  return out;
}

struct WGPUChainedStruct {
  WGPUChainedStruct* next;
  uint32_t sType;
};
struct WGPUFuture {
  uint64_t id;
};
struct WGPUFutureWaitInfo {
  WGPUFuture future;
  WGPUBool completed;
};

enum : uint32_t {
  kSTypeShaderSourceWGSL = 2,
  kSTypeDawnTogglesDescriptor = 0x0005000A,
  kBackendVulkan = 6,
  kFeatureTimestampQuery = 3,
  kFeatureShaderF16 = 0x0A,
  kFeatureSubgroups = 0x11,
  kCallbackAllowProcessEvents = 2,
  kCallbackAllowSpontaneous = 3,
  kWaitSuccess = 1,
  kStatusSuccess = 1,
  kFeatureLevelCore = 2,
  kPowerLow = 1,
  kPowerHigh = 2,
  kErrorFilterValidation = 1,
  kErrorFilterOutOfMemory = 2,
  kErrorTypeNoError = 1,
  kQueryTimestamp = 2,
  kDeviceLostDestroyed = 2,
  kDeviceLostCallbackCancelled = 3,
};
constexpr WGPUFlags kMapModeRead = 1;

struct WGPUInstanceCapabilities {
  WGPUChainedStruct* nextInChain;
  WGPUBool timedWaitAnyEnable;
  size_t timedWaitAnyMaxCount;
};
struct WGPUInstanceDescriptor {
  WGPUChainedStruct* nextInChain;
  WGPUInstanceCapabilities capabilities;
};
struct WGPURequestAdapterOptions {
  WGPUChainedStruct* nextInChain;
  uint32_t featureLevel;
  uint32_t powerPreference;
  WGPUBool forceFallbackAdapter;
  uint32_t backendType;
  void* compatibleSurface;
};
using RequestAdapterCallback = void (*)(uint32_t status, WGPUAdapter adapter, WGPUStringView message,
                                        void* u1, void* u2);
using RequestDeviceCallback = void (*)(uint32_t status, WGPUDevice device, WGPUStringView message, void* u1,
                                       void* u2);
using DeviceLostCallback = void (*)(const WGPUDevice* device, uint32_t reason, WGPUStringView message,
                                    void* u1, void* u2);
using UncapturedErrorCallback = void (*)(const WGPUDevice* device, uint32_t type, WGPUStringView message,
                                         void* u1, void* u2);
using BufferMapCallback = void (*)(uint32_t status, WGPUStringView message, void* u1, void* u2);
using PopErrorScopeCallback = void (*)(uint32_t status, uint32_t type, WGPUStringView message, void* u1,
                                       void* u2);
template <class Callback>
struct WGPUCallbackInfo {  // the common shape of Request*/BufferMap/PopErrorScope/DeviceLost callback infos
  WGPUChainedStruct* nextInChain;
  uint32_t mode;
  Callback callback;
  void* userdata1;
  void* userdata2;
};
struct WGPUUncapturedErrorCallbackInfo {
  WGPUChainedStruct* nextInChain;
  UncapturedErrorCallback callback;
  void* userdata1;
  void* userdata2;
};
struct WGPULimits {
  WGPUChainedStruct* nextInChain;
  uint32_t maxTextureDimension1D, maxTextureDimension2D, maxTextureDimension3D, maxTextureArrayLayers;
  uint32_t maxBindGroups, maxBindGroupsPlusVertexBuffers, maxBindingsPerBindGroup;
  uint32_t maxDynamicUniformBuffersPerPipelineLayout, maxDynamicStorageBuffersPerPipelineLayout;
  uint32_t maxSampledTexturesPerShaderStage, maxSamplersPerShaderStage, maxStorageBuffersPerShaderStage;
  uint32_t maxStorageTexturesPerShaderStage, maxUniformBuffersPerShaderStage;
  uint64_t maxUniformBufferBindingSize;
  uint64_t maxStorageBufferBindingSize;
  uint32_t minUniformBufferOffsetAlignment, minStorageBufferOffsetAlignment, maxVertexBuffers;
  uint64_t maxBufferSize;
  uint32_t maxVertexAttributes, maxVertexBufferArrayStride, maxInterStageShaderVariables;
  uint32_t maxColorAttachments, maxColorAttachmentBytesPerSample;
  uint32_t maxComputeWorkgroupStorageSize, maxComputeInvocationsPerWorkgroup;
  uint32_t maxComputeWorkgroupSizeX, maxComputeWorkgroupSizeY, maxComputeWorkgroupSizeZ;
  uint32_t maxComputeWorkgroupsPerDimension;
};
struct WGPUQueueDescriptor {
  WGPUChainedStruct* nextInChain;
  WGPUStringView label;
};
struct WGPUDawnTogglesDescriptor {
  WGPUChainedStruct chain;
  size_t enabledToggleCount;
  const char* const* enabledToggles;
  size_t disabledToggleCount;
  const char* const* disabledToggles;
};
struct WGPUDeviceDescriptor {
  WGPUChainedStruct* nextInChain;
  WGPUStringView label;
  size_t requiredFeatureCount;
  const uint32_t* requiredFeatures;
  const WGPULimits* requiredLimits;
  WGPUQueueDescriptor defaultQueue;
  WGPUCallbackInfo<DeviceLostCallback> deviceLostCallbackInfo;
  WGPUUncapturedErrorCallbackInfo uncapturedErrorCallbackInfo;
};
struct WGPUAdapterInfo {
  WGPUChainedStruct* nextInChain;
  WGPUStringView vendor, architecture, device, description;
  uint32_t backendType, adapterType, vendorID, deviceID, subgroupMinSize, subgroupMaxSize;
};
struct WGPUBufferDescriptor {
  WGPUChainedStruct* nextInChain;
  WGPUStringView label;
  WGPUFlags usage;
  uint64_t size;
  WGPUBool mappedAtCreation;
};
struct WGPUShaderModuleDescriptor {
  WGPUChainedStruct* nextInChain;
  WGPUStringView label;
};
struct WGPUShaderSourceWGSL {
  WGPUChainedStruct chain;
  WGPUStringView code;
};
struct WGPUComputeState {
  WGPUChainedStruct* nextInChain;
  WGPUShaderModule module;
  WGPUStringView entryPoint;
  size_t constantCount;
  const void* constants;
};
struct WGPUComputePipelineDescriptor {
  WGPUChainedStruct* nextInChain;
  WGPUStringView label;
  void* layout;
  WGPUComputeState compute;
};
struct WGPUBindGroupEntry {
  WGPUChainedStruct* nextInChain;
  uint32_t binding;
  WGPUBuffer buffer;
  uint64_t offset;
  uint64_t size;
  void* sampler;
  void* textureView;
};
struct WGPUBindGroupDescriptor {
  WGPUChainedStruct* nextInChain;
  WGPUStringView label;
  WGPUBindGroupLayout layout;
  size_t entryCount;
  const WGPUBindGroupEntry* entries;
};
struct WGPUPassTimestampWrites {
  WGPUChainedStruct* nextInChain;
  WGPUQuerySet querySet;
  uint32_t beginningOfPassWriteIndex;
  uint32_t endOfPassWriteIndex;
};
struct WGPUComputePassDescriptor {
  WGPUChainedStruct* nextInChain;
  WGPUStringView label;
  const WGPUPassTimestampWrites* timestampWrites;
};
struct WGPUQuerySetDescriptor {
  WGPUChainedStruct* nextInChain;
  WGPUStringView label;
  uint32_t type;
  uint32_t count;
};

// The functions, looked up by name once.
struct Api {
  void* library = nullptr;
#define SOTTO_WGPU_FUNCTIONS(X)                                                                             \
  X(wgpuCreateInstance, WGPUInstance, (const WGPUInstanceDescriptor*))                                      \
  X(wgpuInstanceRequestAdapter, WGPUFuture,                                                                 \
    (WGPUInstance, const WGPURequestAdapterOptions*, WGPUCallbackInfo<RequestAdapterCallback>))             \
  X(wgpuInstanceWaitAny, uint32_t, (WGPUInstance, size_t, WGPUFutureWaitInfo*, uint64_t))                   \
  X(wgpuInstanceProcessEvents, void, (WGPUInstance))                                                        \
  X(wgpuInstanceRelease, void, (WGPUInstance))                                                              \
  X(wgpuAdapterRequestDevice, WGPUFuture,                                                                   \
    (WGPUAdapter, const WGPUDeviceDescriptor*, WGPUCallbackInfo<RequestDeviceCallback>))                    \
  X(wgpuAdapterGetInfo, uint32_t, (WGPUAdapter, WGPUAdapterInfo*))                                          \
  X(wgpuAdapterInfoFreeMembers, void, (WGPUAdapterInfo))                                                    \
  X(wgpuAdapterGetLimits, uint32_t, (WGPUAdapter, WGPULimits*))                                             \
  X(wgpuAdapterHasFeature, WGPUBool, (WGPUAdapter, uint32_t))                                               \
  X(wgpuAdapterRelease, void, (WGPUAdapter))                                                                \
  X(wgpuDeviceGetLimits, uint32_t, (WGPUDevice, WGPULimits*))                                               \
  X(wgpuDeviceGetQueue, WGPUQueue, (WGPUDevice))                                                            \
  X(wgpuDeviceCreateBuffer, WGPUBuffer, (WGPUDevice, const WGPUBufferDescriptor*))                          \
  X(wgpuDeviceCreateShaderModule, WGPUShaderModule, (WGPUDevice, const WGPUShaderModuleDescriptor*))        \
  X(wgpuDeviceCreateComputePipeline, WGPUComputePipeline,                                                   \
    (WGPUDevice, const WGPUComputePipelineDescriptor*))                                                     \
  X(wgpuDeviceCreateBindGroup, WGPUBindGroup, (WGPUDevice, const WGPUBindGroupDescriptor*))                 \
  X(wgpuDeviceCreateCommandEncoder, WGPUCommandEncoder, (WGPUDevice, const void*))                          \
  X(wgpuDeviceCreateQuerySet, WGPUQuerySet, (WGPUDevice, const WGPUQuerySetDescriptor*))                    \
  X(wgpuDevicePushErrorScope, void, (WGPUDevice, uint32_t))                                                 \
  X(wgpuDevicePopErrorScope, WGPUFuture, (WGPUDevice, WGPUCallbackInfo<PopErrorScopeCallback>))             \
  X(wgpuDeviceDestroy, void, (WGPUDevice))                                                                  \
  X(wgpuDeviceRelease, void, (WGPUDevice))                                                                  \
  X(wgpuQueueRelease, void, (WGPUQueue))                                                                    \
  X(wgpuQueueWriteBuffer, void, (WGPUQueue, WGPUBuffer, uint64_t, const void*, size_t))                     \
  X(wgpuQueueSubmit, void, (WGPUQueue, size_t, const WGPUCommandBuffer*))                                   \
  X(wgpuQueueOnSubmittedWorkDone, WGPUFuture, (WGPUQueue, WGPUCallbackInfo<BufferMapCallback>))             \
  X(wgpuBufferDestroy, void, (WGPUBuffer))                                                                  \
  X(wgpuBufferRelease, void, (WGPUBuffer))                                                                  \
  X(wgpuBufferMapAsync, WGPUFuture,                                                                         \
    (WGPUBuffer, WGPUFlags, size_t, size_t, WGPUCallbackInfo<BufferMapCallback>))                           \
  X(wgpuBufferGetConstMappedRange, const void*, (WGPUBuffer, size_t, size_t))                               \
  X(wgpuBufferUnmap, void, (WGPUBuffer))                                                                    \
  X(wgpuShaderModuleRelease, void, (WGPUShaderModule))                                                      \
  X(wgpuComputePipelineGetBindGroupLayout, WGPUBindGroupLayout, (WGPUComputePipeline, uint32_t))            \
  X(wgpuComputePipelineRelease, void, (WGPUComputePipeline))                                                \
  X(wgpuBindGroupLayoutRelease, void, (WGPUBindGroupLayout))                                                \
  X(wgpuBindGroupRelease, void, (WGPUBindGroup))                                                            \
  X(wgpuCommandEncoderBeginComputePass, WGPUComputePassEncoder,                                             \
    (WGPUCommandEncoder, const WGPUComputePassDescriptor*))                                                 \
  X(wgpuCommandEncoderCopyBufferToBuffer, void,                                                             \
    (WGPUCommandEncoder, WGPUBuffer, uint64_t, WGPUBuffer, uint64_t, uint64_t))                             \
  X(wgpuCommandEncoderResolveQuerySet, void,                                                                \
    (WGPUCommandEncoder, WGPUQuerySet, uint32_t, uint32_t, WGPUBuffer, uint64_t))                           \
  X(wgpuCommandEncoderFinish, WGPUCommandBuffer, (WGPUCommandEncoder, const void*))                         \
  X(wgpuCommandEncoderRelease, void, (WGPUCommandEncoder))                                                  \
  X(wgpuCommandBufferRelease, void, (WGPUCommandBuffer))                                                    \
  X(wgpuComputePassEncoderSetPipeline, void, (WGPUComputePassEncoder, WGPUComputePipeline))                 \
  X(wgpuComputePassEncoderSetBindGroup, void,                                                               \
    (WGPUComputePassEncoder, uint32_t, WGPUBindGroup, size_t, const uint32_t*))                             \
  X(wgpuComputePassEncoderDispatchWorkgroups, void, (WGPUComputePassEncoder, uint32_t, uint32_t, uint32_t)) \
  X(wgpuComputePassEncoderEnd, void, (WGPUComputePassEncoder))                                              \
  X(wgpuComputePassEncoderRelease, void, (WGPUComputePassEncoder))                                          \
  X(wgpuQuerySetRelease, void, (WGPUQuerySet))
#define SOTTO_DECLARE(name, ret, args) ret(*name) args = nullptr;
  SOTTO_WGPU_FUNCTIONS(SOTTO_DECLARE)
#undef SOTTO_DECLARE
};

}  // namespace
}  // namespace sotto::gpu
