// The GPU's f32 -> f16 conversion (gpu/kernels_wgsl.h f16_bits, used for the KV cache, q8_0 scales, f16
// activations and the GELU table index) against the CPU's f32_to_f16 (core/half.h, round to nearest even):
// exact on random values of every magnitude, on values halfway between two f16 numbers (where a driver's
// pack2x16float or f16 cast may round either way: WGSL allows it), subnormals, the overflow edge, zeros and
// infinities. The same comparison decides whether the kernels may use f16 casts at all
// (native_f16_rounds_to_nearest_even, gpu/ops.h).
#include <bit>
#include <cmath>
#include <cstring>
#include <vector>

#include "core/half.h"
#include "gpu/kernels_wgsl.h"
#include "gpu/ops.h"
#include "models/llm/gpu/op_check.h"
#include "models/llm/sampler.h"

namespace sotto::gpu {

namespace {

// Random magnitudes from 2^-30 to 2^17 (either sign), 2048 values exactly halfway between two neighbouring f16
// values (normal and subnormal), and the edges: zeros, the largest f16, the overflow threshold, subnormals,
// infinities.
std::vector<float> f16_check_values(uint64_t seed) {
  Rng rng(seed ^ 0x6631366eull);
  std::vector<float> values;
  for (int i = 0; i < 4096; ++i) {
    // 2^k built from its bits (no libm in wasm)
    const float e = std::bit_cast<float>(static_cast<uint32_t>(127 + rng.next_u64() % 48 - 30) << 23);
    values.push_back((rng.next_unit() * 2.0f - 1.0f) * e);
  }
  for (int i = 0; i < 2048; ++i) {
    const uint16_t h = static_cast<uint16_t>(rng.next_u64() % 0x7bffu);
    const float lo = f16_to_f32(h), hi = f16_to_f32(static_cast<uint16_t>(h + 1));
    values.push_back((lo + hi) * 0.5f * (i % 2 ? -1.0f : 1.0f));
  }
  for (float v : {0.0f, -0.0f, 65504.0f, 65519.0f, 65520.0f, 1e6f, -1e6f, 5.96e-8f, 2.98e-8f, 2.99e-8f,
                  6.1e-5f, INFINITY, -INFINITY})
    values.push_back(v);
  return values;
}

// f16_bits(v) for each value, then f16r(v)'s f32 bits, through the kernels' helpers for f (integer or casts).
Result<std::vector<uint32_t>> convert_on_gpu(Device& device, const std::vector<float>& values,
                                             const KernelFeatures& f) {
  const std::string wgsl = cat(wgsl_parts::wgsl_enables(f, true, false), wgsl_parts::f16_helpers(f), R"(
@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read_write> y: array<u32>;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) g: vec3u) {
  let n = arrayLength(&x);
  if (g.x < n) {
    y[g.x] = f16_bits(x[g.x]);
    y[n + g.x] = bitcast<u32>(f16r(x[g.x]));
  }
}
)");
  const uint32_t usage = kUsageStorage | kUsageCopySrc | kUsageCopyDst;
  const uint64_t n = values.size();
  SOTTO_ASSIGN(PipelineHandle p, device.create_pipeline(wgsl, "main", "f16 conversion check"));
  SOTTO_ASSIGN(BufferHandle bx, device.create_buffer(n * 4, usage, "f16 check x"));
  auto by = device.create_buffer(n * 8, usage, "f16 check y");
  if (!by) {
    device.destroy_buffer(bx);
    return by.status();
  }
  std::vector<uint32_t> got(n * 2);
  auto run = [&]() -> Status {
    SOTTO_TRY(device.write_buffer(bx, 0, values.data(), n * 4));
    const Binding bindings[] = {{0, bx}, {1, *by}};
    SOTTO_ASSIGN(BindGroupHandle g, device.create_bind_group(p, bindings));
    Dispatch d;
    d.pipeline = p;
    d.bind_group = g;
    d.groups_x = static_cast<uint32_t>((n + 63) / 64);
    SOTTO_TRY(device.run(std::span<const Dispatch>(&d, 1)));
    SOTTO_ASSIGN(ReadHandle r, device.start_read(*by, 0, n * 8));
    const DeviceStatus s = device.finish_read(r, got.data());
    if (s == DeviceStatus::Pending) return error("webgpu: f16 check: the read cannot block here");
    if (s != DeviceStatus::Ok) return error(device.last_error());
    return {};
  };
  const Status s = run();
  device.destroy_buffer(bx);
  device.destroy_buffer(*by);
  if (!s) return s;
  return got;
}

struct F16Mismatches {
  size_t bits = 0, rounded = 0;  // f16_bits, and f16r (the value rounded, as f32 bits)
};

F16Mismatches compare_with_cpu(const std::vector<float>& values, const std::vector<uint32_t>& got) {
  F16Mismatches m;
  for (size_t i = 0; i < values.size(); ++i) {
    const uint16_t h = f32_to_f16(values[i]);
    m.bits += got[i] != h ? 1 : 0;
    uint32_t rounded;
    const float r = f16_to_f32(h);
    std::memcpy(&rounded, &r, 4);
    m.rounded += got[values.size() + i] != rounded ? 1 : 0;
  }
  return m;
}

}  // namespace

bool native_f16_rounds_to_nearest_even(Device& device) {
  if (!device.info().shader_f16) return false;
  KernelFeatures f;
  f.f16 = true;
  const std::vector<float> values = f16_check_values(1);
  auto got = convert_on_gpu(device, values, f);
  if (!got) return false;
  const F16Mismatches m = compare_with_cpu(values, *got);
  return m.bits == 0 && m.rounded == 0;
}

Status check_f16_conversion(Ops& ops, uint64_t seed, std::vector<OpCheck>& out) {
  const std::vector<float> values = f16_check_values(seed);
  SOTTO_ASSIGN(std::vector<uint32_t> got, convert_on_gpu(ops.device(), values, ops.features()));
  const F16Mismatches m = compare_with_cpu(values, got);
  const std::string shape = cat(values.size(), " values, 2048 of them halfway");
  const char* how = ops.features().f16 ? ", f16 casts" : ", integer";
  out.push_back({cat("f32 -> f16 bits (round to nearest even", how, ")"), shape, static_cast<double>(m.bits),
                 0, m.bits == 0});
  out.push_back({cat("f32 rounded to f16 precision (f16r", how, ")"), shape, static_cast<double>(m.rounded),
                 0, m.rounded == 0});
  return {};
}

}  // namespace sotto::gpu
