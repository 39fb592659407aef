// The WebGPU smoke test behind the exported sotto_gpu_selftest_begin / _finish: proves in a page or in Node
// that C++ inside wasm can drive the engine worker's GPUDevice through the device seam (buffers, a WGSL
// pipeline with a uniform, bind groups, a plan with a copy between two dispatches, asynchronous readback) and
// that it computes what the CPU computes. Split in two because the readback completes only after wasm has
// returned to JS (web/worker.js awaits the device's pending maps between the two calls).
#include <cmath>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "gpu/device.h"

namespace sotto::gpu {
namespace {

// y = a * x + b over n floats; a, b and n come from a uniform.
constexpr std::string_view kAxpbWgsl = R"(
struct Params { a : f32, b : f32, n : u32, pad : u32 }
@group(0) @binding(0) var<uniform> params : Params;
@group(0) @binding(1) var<storage, read> x : array<f32>;
@group(0) @binding(2) var<storage, read_write> y : array<f32>;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) id : vec3u) {
  if (id.x < params.n) { y[id.x] = params.a * x[id.x] + params.b; }
}
)";

constexpr std::string_view kBrokenWgsl = R"(
@compute @workgroup_size(64)
fn main() { let v : f32 = undefined_name * 2.0; }
)";

struct SelftestState {
  std::unique_ptr<Device> device;
  ReadHandle read = 0;
  std::vector<float> x, expected, got;
  float a = 0, b = 0;
  std::string over_limit_message;
};

SelftestState* state = nullptr;

uint32_t next_random(uint32_t& s) {
  s = s * 1664525u + 1013904223u;
  return s;
}

}  // namespace

// Result of the smoke test, read by web/worker.js (fixed layout, 272 bytes).
struct GpuSelftestResult {
  int32_t status;          // 0 done, 1 pending (await the device, call finish), 2 error (message)
  int32_t passed;          // 1 when the GPU output equals the CPU's within tolerance
  uint32_t n;              // elements computed
  float max_abs_error;     // largest |GPU - CPU|
  float tolerance;         // allowed |GPU - CPU|
  uint32_t over_limit_ok;  // 1 when a buffer past maxBufferSize was refused with a clear error
  char message[248];
};
static_assert(sizeof(GpuSelftestResult) == 272);

namespace {

void set_message(GpuSelftestResult* out, std::string_view text) {
  size_t n = std::min(text.size(), sizeof out->message - 1);
  memcpy(out->message, text.data(), n);
  out->message[n] = '\0';
}

void fail(GpuSelftestResult* out, const std::string& message) {
  out->status = 2;
  out->passed = 0;
  set_message(out, message);
  delete state;
  state = nullptr;
}

Status record_and_run(SelftestState& s, uint32_t n, bool broken_shader) {
  Device& d = *s.device;
  // Over the limit: refused before JS is asked, with the limit in the message.
  Result<BufferHandle> too_big =
      d.create_buffer(d.info().limits.max_buffer_size + 4, kUsageStorage, "too_big");
  s.over_limit_message = too_big.ok() ? std::string() : too_big.message();
  if (too_big.ok()) d.destroy_buffer(*too_big);

  SOTTO_ASSIGN(PipelineHandle pipeline,
               d.create_pipeline(broken_shader ? kBrokenWgsl : kAxpbWgsl, "main", "selftest_axpb"));
  uint64_t bytes = uint64_t{n} * 4;
  SOTTO_ASSIGN(BufferHandle params, d.create_buffer(16, kUsageUniform | kUsageCopyDst, "params"));
  SOTTO_ASSIGN(BufferHandle x, d.create_buffer(bytes, kUsageStorage | kUsageCopyDst, "x"));
  SOTTO_ASSIGN(BufferHandle y, d.create_buffer(bytes, kUsageStorage | kUsageCopySrc, "y"));
  SOTTO_ASSIGN(BufferHandle x2, d.create_buffer(bytes, kUsageStorage | kUsageCopyDst, "x2"));
  SOTTO_ASSIGN(BufferHandle y2, d.create_buffer(bytes, kUsageStorage | kUsageCopySrc, "y2"));
  struct {
    float a, b;
    uint32_t n, pad;
  } uniform{s.a, s.b, n, 0};
  SOTTO_TRY(d.write_buffer(params, 0, &uniform, sizeof uniform));
  SOTTO_TRY(d.write_buffer(x, 0, s.x.data(), bytes));
  Binding first[] = {{0, params, 0, 0}, {1, x, 0, 0}, {2, y, 0, 0}};
  Binding second[] = {{0, params, 0, 0}, {1, x2, 0, 0}, {2, y2, 0, 0}};
  SOTTO_ASSIGN(BindGroupHandle g1, d.create_bind_group(pipeline, first));
  SOTTO_ASSIGN(BindGroupHandle g2, d.create_bind_group(pipeline, second));
  // y = a x + b; copy y -> x2; y2 = a x2 + b: the copy must split the pass and order both dispatches.
  uint32_t groups = (n + 63) / 64;
  Dispatch plan[3];
  plan[0].pipeline = pipeline;
  plan[0].bind_group = g1;
  plan[0].groups_x = groups;
  plan[1].copy_src = y;
  plan[1].copy_dst = x2;
  plan[1].copy_bytes = bytes;
  plan[2].pipeline = pipeline;
  plan[2].bind_group = g2;
  plan[2].groups_x = groups;
  // Timed where the device has timestamps: web/gpu.js then keeps per-command GPU times for the page.
  std::vector<uint64_t> timings_ns;
  SOTTO_TRY(d.run_timed(plan, &timings_ns));
  SOTTO_ASSIGN(s.read, d.start_read(y2, 0, bytes));
  return {};
}

void check(GpuSelftestResult* out) {
  SelftestState& s = *state;
  float max_error = 0, tolerance = 0;
  for (size_t i = 0; i < s.x.size(); i++) {
    max_error = std::max(max_error, std::fabs(s.got[i] - s.expected[i]));
    // Two multiply-adds in f32, each possibly fused on the GPU: a few ulps of the largest term.
    float scale = std::fabs(s.a) * (std::fabs(s.a * s.x[i]) + std::fabs(s.b)) + std::fabs(s.b);
    tolerance = std::max(tolerance, 4e-7f * 4 * scale);
  }
  out->status = 0;
  out->max_abs_error = max_error;
  out->tolerance = tolerance;
  out->over_limit_ok = s.over_limit_message.find("maxBufferSize") != std::string::npos;
  out->passed = max_error <= tolerance && out->over_limit_ok;
  set_message(out, cat(s.device->info().description, "; over-limit buffer: ", s.over_limit_message));
  delete state;
  state = nullptr;
}

}  // namespace

}  // namespace sotto::gpu

#define SOTTO_EXPORT(name) __attribute__((export_name(#name)))

extern "C" {

// Starts the smoke test over n elements (mode 1: with a shader that does not compile, to see the error come
// back). Fills `out`; status 1 means: await the device's pending work in JS, then call _finish.
SOTTO_EXPORT(sotto_gpu_selftest_begin)
void sotto_gpu_selftest_begin(uint32_t n, uint32_t seed, int32_t mode, sotto::gpu::GpuSelftestResult* out) {
  using namespace sotto::gpu;
  memset(out, 0, sizeof *out);
  delete state;
  state = new SelftestState();
  if (n == 0 || n > (1u << 24)) return fail(out, sotto::cat("gpu selftest: n = ", n, " is not in 1..2^24"));
  sotto::Result<std::unique_ptr<Device>> device = open_device();
  if (!device.ok()) return fail(out, device.message());
  state->device = std::move(*device);
  uint32_t s = seed | 1;
  state->a = static_cast<float>(next_random(s) >> 8) / 16777216.0f * 4 - 2;
  state->b = static_cast<float>(next_random(s) >> 8) / 16777216.0f * 2 - 1;
  state->x.resize(n);
  state->expected.resize(n);
  for (uint32_t i = 0; i < n; i++) {
    float xi = static_cast<float>(next_random(s) >> 8) / 16777216.0f * 200 - 100;
    state->x[i] = xi;
    state->expected[i] = state->a * (state->a * xi + state->b) + state->b;
  }
  sotto::Status st = record_and_run(*state, n, mode == 1);
  if (!st.ok()) return fail(out, st.message());
  out->n = n;
  out->status = 1;
}

SOTTO_EXPORT(sotto_gpu_selftest_finish) void sotto_gpu_selftest_finish(sotto::gpu::GpuSelftestResult* out) {
  using namespace sotto::gpu;
  if (!state || !state->device) return fail(out, "gpu selftest: finish without a begin");
  state->got.resize(state->x.size());
  DeviceStatus status = state->device->finish_read(state->read, state->got.data());
  if (status == DeviceStatus::Pending) {
    out->status = 1;
    return;
  }
  if (status == DeviceStatus::Error) return fail(out, state->device->last_error());
  check(out);
}

}  // extern "C"
