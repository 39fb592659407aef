// The GPU's f32 -> f16 conversion (gpu/kernels_wgsl.h f16_bits, used for the KV cache, q8_0 scales, f16
// activations and the GELU table index) against the CPU's f32_to_f16 (core/half.h, round to nearest even):
// exact on random values of every magnitude, on values halfway between two f16 numbers (where a driver's
// pack2x16float may round either way: WGSL allows it), subnormals, the overflow edge, zeros and infinities.
#include <bit>
#include <cmath>
#include <cstring>
#include <vector>

#include "core/half.h"
#include "gpu/kernels_wgsl.h"
#include "gpu/op_check.h"
#include "gpu/ops.h"
#include "models/llm/sampler.h"

namespace sotto::gpu {

Status check_f16_conversion(Ops& ops, uint64_t seed, std::vector<OpCheck>& out) {
  Rng rng(seed ^ 0x6631366eull);
  std::vector<float> values;
  for (int i = 0; i < 4096; ++i) {  // random magnitudes from 2^-30 to 2^17, either sign
    // 2^k built from its bits (no libm in wasm)
    const float e = std::bit_cast<float>(static_cast<uint32_t>(127 + rng.next_u64() % 48 - 30) << 23);
    values.push_back((rng.next_unit() * 2.0f - 1.0f) * e);
  }
  for (int i = 0; i < 2048;
       ++i) {  // exactly halfway between two neighbouring f16 values (normal and subnormal)
    const uint16_t h = static_cast<uint16_t>(rng.next_u64() % 0x7bffu);
    const float lo = f16_to_f32(h), hi = f16_to_f32(static_cast<uint16_t>(h + 1));
    values.push_back((lo + hi) * 0.5f * (i % 2 ? -1.0f : 1.0f));
  }
  for (float v : {0.0f, -0.0f, 65504.0f, 65519.0f, 65520.0f, 1e6f, -1e6f, 5.96e-8f, 2.98e-8f, 2.99e-8f,
                  6.1e-5f, INFINITY, -INFINITY})
    values.push_back(v);
  const std::string wgsl = cat(wgsl_parts::kF16Rne, R"(
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
  Device& device = ops.device();
  SOTTO_ASSIGN(PipelineHandle p, device.create_pipeline(wgsl, "main", "f16 conversion check"));
  SOTTO_ASSIGN(BufferHandle bx, ops.upload(values.data(), values.size() * 4, "f16 check x"));
  SOTTO_ASSIGN(BufferHandle by, ops.buffer(values.size() * 8, "f16 check y"));
  const Binding bindings[] = {{0, bx}, {1, by}};
  SOTTO_ASSIGN(BindGroupHandle g, device.create_bind_group(p, bindings));
  Dispatch d;
  d.pipeline = p;
  d.bind_group = g;
  d.groups_x = static_cast<uint32_t>((values.size() + 63) / 64);
  SOTTO_TRY(device.run(std::span<const Dispatch>(&d, 1)));
  std::vector<uint32_t> got(values.size() * 2);
  SOTTO_TRY(ops.read(by, 0, got.data(), got.size() * 4));
  size_t wrong_bits = 0, wrong_rounded = 0;  // f16_bits, and f16r (the value rounded, as f32 bits)
  for (size_t i = 0; i < values.size(); ++i) {
    const uint16_t h = f32_to_f16(values[i]);
    wrong_bits += got[i] != h ? 1 : 0;
    uint32_t rounded;
    const float r = f16_to_f32(h);
    std::memcpy(&rounded, &r, 4);
    wrong_rounded += got[values.size() + i] != rounded ? 1 : 0;
  }
  const std::string shape = cat(values.size(), " values, 2048 of them halfway");
  out.push_back({"f32 -> f16 bits (round to nearest even)", shape, static_cast<double>(wrong_bits), 0,
                 wrong_bits == 0});
  out.push_back({"f32 rounded to f16 precision (f16r)", shape, static_cast<double>(wrong_rounded), 0,
                 wrong_rounded == 0});
  device.destroy_buffer(bx);
  device.destroy_buffer(by);
  return {};
}

}  // namespace sotto::gpu
