// WGSL snippets the op layer's GPU kernels share (gpu_ops.cpp, gpu_tdt.cpp). Plain literals (no std::string
// globals: the wasm build has no atexit for their destructors).
#pragma once

#include <cmath>
#include <cstdint>

// The element index of a one-element-per-thread kernel: global x + global y * 65535 * 64 (the recorder spreads
// large dispatches over y).
#define NN_WGSL_INDEX "fn index(g: vec3<u32>) -> u32 { return g.x + g.y * 65535u * 64u; }\n"

// The workgroup kernels give one workgroup (64 threads) to each output row / group / (query, head) / output
// element and reduce across it in workgroup memory (row = workgroup id x + y * 65535, uniform, so the bounds
// check may return before the barriers).
#define NN_WGSL_REDUCE                                              \
  "fn row_of(w: vec3<u32>) -> u32 { return w.x + w.y * 65535u; }\n" \
  "var<workgroup> red: array<f32, 64>;\n"                           \
  "fn reduce_sum(v: f32, lid: u32) -> f32 {\n"                      \
  "  red[lid] = v;\n"                                               \
  "  workgroupBarrier();\n"                                         \
  "  for (var s = 32u; s > 0u; s >>= 1u) {\n"                       \
  "    if (lid < s) { red[lid] += red[lid + s]; }\n"                \
  "    workgroupBarrier();\n"                                       \
  "  }\n"                                                           \
  "  let r = red[0];\n"                                             \
  "  workgroupBarrier();\n"                                         \
  "  return r;\n"                                                   \
  "}\n"                                                             \
  "fn reduce_max(v: f32, lid: u32) -> f32 {\n"                      \
  "  red[lid] = v;\n"                                               \
  "  workgroupBarrier();\n"                                         \
  "  for (var s = 32u; s > 0u; s >>= 1u) {\n"                       \
  "    if (lid < s) { red[lid] = max(red[lid], red[lid + s]); }\n"  \
  "    workgroupBarrier();\n"                                       \
  "  }\n"                                                           \
  "  let r = red[0];\n"                                             \
  "  workgroupBarrier();\n"                                         \
  "  return r;\n"                                                   \
  "}\n"

// Rotary embedding's (sin, cos) of an angle given as a 32-bit fixed-point fraction of a turn (why and how
// exactly: gpu_ops.cpp, kRope); the rope kernel and the fused products and attentions (gpu_fused.cpp) share it.
#define NN_WGSL_ROPE_SIN_COS                                                                                \
  "fn rope_sin_cos(frac: u32) -> vec2<f32> {\n"                                                             \
  "  let quarter = (frac + 0x20000000u) >> 30u;\n"                                                          \
  "  let r = f32(bitcast<i32>(frac - (quarter << 30u))) * 1.4629180792671596e-09;\n"                        \
  "  let r2 = r * r;\n"                                                                                     \
  "  let s0 = r * (1.0 + r2 * (-1.0 / 6.0 + r2 * (1.0 / 120.0 + r2 * (-1.0 / 5040.0 + r2 * (1.0 / "         \
  "362880.0)))));\n"                                                                                        \
  "  let c0 = 1.0 + r2 * (-0.5 + r2 * (1.0 / 24.0 + r2 * (-1.0 / 720.0 + r2 * (1.0 / 40320.0 + r2 * (-1.0 " \
  "/ 3628800.0)))));\n"                                                                                     \
  "  if (quarter == 1u) { return vec2<f32>(c0, -s0); }\n"                                                   \
  "  if (quarter == 2u) { return vec2<f32>(-s0, -c0); }\n"                                                  \
  "  if (quarter == 3u) { return vec2<f32>(-c0, s0); }\n"                                                   \
  "  return vec2<f32>(s0, c0);\n"                                                                           \
  "}\n"

namespace sotto::nn {
// NN_WGSL_ROPE_SIN_COS's frequencies, for pairs 0 .. rotary_dim / 2 - 1: each pair's inv_freq as a 32-bit
// fixed-point fraction of a turn per position (inv_freq / 2 pi * 2^32, computed in double and rounded).
inline void rope_turns(double base, int rotary_dim, uint32_t* turns) {
  for (int i = 0; i < rotary_dim / 2; ++i) {
    const double t = std::pow(base, -2.0 * i / rotary_dim) / (2 * 3.14159265358979323846);
    turns[i] = static_cast<uint32_t>(static_cast<uint64_t>(t * 4294967296.0 + 0.5));
  }
}
}  // namespace sotto::nn
