// The op-by-op cross-backend check (in the spirit of llama.cpp's test-backend-ops): every GPU kernel is run on
// fresh random inputs of several shapes and compared with the CPU's arithmetic. Portable code, so the same
// harness runs natively (tests/unit/gpu_ops_test.cpp, Dawn on Vulkan) and from wasm in the page.
//
// References and tolerances (errors are max |gpu - cpu| over the output, divided by the scale named):
//   matvec      sum over blocks of dequantized W x dequantized q8_0(x) (q8_K(x) for K-quants; x quantized by
//               the CPU's own quantize_activations_q8_0 / _q8_K), in double; F32: W.x in double. Error / max_r sum_i |W_ri x_i|:
//               1e-5 (only the order of float additions differs; the integer parts are exact). With the
//               RMSNorm fused in: 1e-3 (an f32 vs double sum of squares can move one q8_0 code by 1).
//   norm_quant  y vs rms_norm in double (rel. 1e-5); q8_0 codes vs the CPU quantizer on the CPU's y: at most
//               1 apart (a float-rounding difference in y can move a value across a rounding boundary).
//   quantize    q8_0 alone (no norm) vs the CPU's quantize_activations_q8_0, halfway cases included: codes
//               and scales exact.
//   embed       vs dequantize_row_ref: exact.
//   rope_kv     q and the f16 K cache vs the CPU formula with the same cos/sin table: 1e-5 / one f16 ulp.
//   attention   vs attend_head_ref (cpu/attention.h) on the same f16 cache: 2e-3 of max |v| (GPU exp differs
//               from libm in the last bits, and the f16 running sum can then round differently).
//   argmax      exact index.
//   f32 -> f16  vs the CPU's f32_to_f16: exact (integer rounding, or f16 casts where they pass this check).
//   subgroups   the subgroup reductions vs the workgroup-memory trees: bit for bit.
//   sample      the token sotto::Sampler draws from the same logits and u: exact, except in trials where
//               a decision lies within 1e-5 of its boundary (counted and shown; op_check_sampling.cpp).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "core/error.h"
#include "gpu/device.h"
#include "models/llm/sampler.h"

namespace sotto::gpu {

struct OpCheck {
  std::string op;     // "matvec q4_0", "attention", ...
  std::string shape;  // "rows 13 cols 64"
  double error = 0;   // as described above
  double tolerance = 0;
  bool passed = false;
};

struct OpCheckOptions {
  uint64_t seed = 1;
  bool packed_dot = true;  // false: the shift-and-multiply fallback of dot4I8Packed
  // false: the workgroup-memory trees even where the device has subgroups
  bool subgroups = true;
  // false: the integer f32 -> f16 rounding even where f16 casts round to nearest even
  // (native_f16_rounds_to_nearest_even in gpu/ops.h)
  bool f16 = true;
};

// Runs every check; a failure to build or run a kernel is an error, a numeric mismatch is a failed entry.
Result<std::vector<OpCheck>> run_op_checks(Device& device, const OpCheckOptions& options);

class Ops;
// The prompt plan's kernels (models/llm/gpu/op_check_prompt.cpp), part of run_op_checks(): matrix x matrix as matvec above
// (1e-5; 1e-3 behind an RMSNorm), outputs outside the run's rows unchanged, the per-token embedding exact.
Status check_prompt_ops(Ops& ops, uint64_t seed, std::vector<OpCheck>& out);
// The kernels' f32 -> f16 rounding against the CPU's (models/llm/gpu/op_check_f16.cpp): exact.
Status check_f16_conversion(Ops& ops, uint64_t seed, std::vector<OpCheck>& out);
// Where the device has subgroups (models/llm/gpu/op_check_subgroups.cpp), part of run_op_checks(): the subgroup layout
// the reductions assume, and every reducing kernel (matvec, matmat, norm_quant, argmax) with subgroups on
// against the workgroup-memory tree: bit for bit.
Status check_subgroup_reductions(Ops& ops, uint64_t seed, std::vector<OpCheck>& out);
// The sampling checks (models/llm/gpu/op_check_sampling.cpp), part of run_op_checks().
Status check_sampling_ops(Ops& ops, uint64_t seed, std::vector<OpCheck>& out);
// How close the CPU Sampler's decisions on `logits` with draw u come to their boundaries (the draw against
// each cumulative probability walked, top-p's sum against top_p, min-p's threshold, the order of penalized
// logits): below ~1e-5 a GPU choice may differ from the CPU's by float rounding (op_check_sampling.cpp).
double sampling_boundary_distance(std::span<const float> logits, std::span<const int32_t> history,
                                  const SamplerParams& p, float u);

// One line per check: "ok   matvec q4_0  rows 13 cols 64  error 1.2e-07 (tolerance 1e-05)".
std::string format_op_checks(const std::vector<OpCheck>& checks);

}  // namespace sotto::gpu
