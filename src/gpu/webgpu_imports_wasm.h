// The functions web/gpu.js provides to the module (imported from "env") so that device_wasm.cpp can drive a
// GPUDevice that lives in the engine worker. Every import is synchronous; nothing throws across the boundary:
// a failure returns 0 (handles) or a nonzero status, and sotto_gpu_last_error() says why.
//
// Sizes and offsets cross as doubles (exact below 2^53) so JS sees Numbers, not BigInts. Structs cross as
// pointers into wasm memory; their layouts are fixed here and read with DataView in web/gpu.js.
#pragma once

#include <cstddef>
#include <cstdint>

#include "gpu/device.h"

namespace sotto::gpu {

// What JS knows about the adapter and device it opened, written by sotto_gpu_info (144 bytes).
struct WasmAdapterInfo {
  double max_buffer_size;                          // 0
  double max_storage_buffer_binding_size;          // 8
  uint32_t max_storage_buffers_per_shader_stage;   // 16
  uint32_t max_compute_workgroup_storage_size;     // 20
  uint32_t max_compute_invocations_per_workgroup;  // 24
  uint32_t max_compute_workgroup_size_x;           // 28
  uint32_t max_compute_workgroups_per_dimension;   // 32
  uint32_t min_storage_buffer_offset_alignment;    // 36
  uint32_t min_uniform_buffer_offset_alignment;    // 40
  uint32_t flags;        // 44: 1 shader_f16, 2 subgroups, 4 timestamps, 8 packed dot
  char description[80];  // 48: NUL-terminated, cut to fit
  char backend[16];      // 128
};
static_assert(sizeof(WasmAdapterInfo) == 144);

enum WasmAdapterFlags : uint32_t {
  kWasmShaderF16 = 1,
  kWasmSubgroups = 2,
  kWasmTimestamps = 4,
  kWasmPackedDot = 8,
};

// The JS reads Binding (24 bytes) and Dispatch (56 bytes) arrays in place: pin their layouts.
static_assert(sizeof(Binding) == 24 && offsetof(Binding, buffer) == 4 && offsetof(Binding, offset) == 8 &&
              offsetof(Binding, size) == 16);
static_assert(sizeof(Dispatch) == 56 && offsetof(Dispatch, groups_x) == 8 &&
              offsetof(Dispatch, copy_src) == 20 && offsetof(Dispatch, copy_dst) == 24 &&
              offsetof(Dispatch, copy_src_offset) == 32 && offsetof(Dispatch, copy_dst_offset) == 40 &&
              offsetof(Dispatch, copy_bytes) == 48);

// Lets finish_read() wait for a pending read instead of answering Pending, through sotto_gpu_wait (JSPI).
// Only for code that reads synchronously (the op harness), called through a WebAssembly.promising export.
void wasm_allow_blocking_reads(bool allow);

}  // namespace sotto::gpu

#define SOTTO_GPU_IMPORT(name) __attribute__((import_module("env"), import_name(#name)))

extern "C" {
// 1 when JS has opened a device for this module (Engine gpu init), else 0.
SOTTO_GPU_IMPORT(sotto_gpu_available) int32_t sotto_gpu_available();
SOTTO_GPU_IMPORT(sotto_gpu_info) void sotto_gpu_info(sotto::gpu::WasmAdapterInfo* out);
// The last error message (a failed call, an uncaptured validation error, the device lost), copied into
// `dst` up to `capacity` bytes; returns its full length.
SOTTO_GPU_IMPORT(sotto_gpu_last_error) uint32_t sotto_gpu_last_error(char* dst, uint32_t capacity);
SOTTO_GPU_IMPORT(sotto_gpu_lost) int32_t sotto_gpu_lost();

SOTTO_GPU_IMPORT(sotto_gpu_create_buffer)
uint32_t sotto_gpu_create_buffer(double bytes, uint32_t usage, const char* label, uint32_t label_bytes);
SOTTO_GPU_IMPORT(sotto_gpu_destroy_buffer) void sotto_gpu_destroy_buffer(uint32_t buffer);
SOTTO_GPU_IMPORT(sotto_gpu_write_buffer)
int32_t sotto_gpu_write_buffer(uint32_t buffer, double offset, const void* data, uint32_t bytes);
SOTTO_GPU_IMPORT(sotto_gpu_create_pipeline)
uint32_t sotto_gpu_create_pipeline(const char* wgsl, uint32_t wgsl_bytes, const char* entry,
                                   uint32_t entry_bytes, const char* label, uint32_t label_bytes);
SOTTO_GPU_IMPORT(sotto_gpu_create_bind_group)
uint32_t sotto_gpu_create_bind_group(uint32_t pipeline, const sotto::gpu::Binding* bindings, uint32_t count);
// Drops a pipeline or bind group handle.
SOTTO_GPU_IMPORT(sotto_gpu_release) void sotto_gpu_release(uint32_t handle);
// Encodes and submits the commands (one compute pass per copy-separated run). timed != 0: one pass per
// dispatch with timestamp writes; JS resolves the timings asynchronously (web/gpu.js lastTimings).
SOTTO_GPU_IMPORT(sotto_gpu_run)
int32_t sotto_gpu_run(const sotto::gpu::Dispatch* commands, uint32_t count, int32_t timed);
SOTTO_GPU_IMPORT(sotto_gpu_start_read)
uint32_t sotto_gpu_start_read(uint32_t buffer, double offset, double bytes);
// 0 ok (data copied to dst, the read is released), 1 pending, 2 error (the read is released).
SOTTO_GPU_IMPORT(sotto_gpu_finish_read) int32_t sotto_gpu_finish_read(uint32_t read, void* dst);
// Suspends wasm until the device's pending work has settled (a WebAssembly.Suspending import where the host
// has JS Promise Integration) and returns 0; returns 1 at once where waiting is impossible.
SOTTO_GPU_IMPORT(sotto_gpu_wait) int32_t sotto_gpu_wait();
}
