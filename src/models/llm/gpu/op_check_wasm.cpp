// The op-by-op cross-backend harness (models/llm/gpu/op_check.h) from the page: the exported sotto_gpu_op_check runs
// every check on the engine worker's GPUDevice and returns the report as JSON. The harness reads back
// synchronously, so JS calls this export through WebAssembly.promising and each pending read suspends wasm
// (sotto_gpu_wait, JS Promise Integration) until the map completes.
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <string>

#include "gpu/device.h"
#include "gpu/webgpu_imports_wasm.h"
#include "io/describe.h"
#include "models/llm/gpu/op_check.h"

namespace sotto::gpu {
namespace {

// JSON has no NaN or infinity: a broken kernel's error reads as null.
std::string json_number(double v) {
  return std::isfinite(v) ? cat(v) : std::string("null");
}

std::string op_check_json(uint64_t seed, bool packed_dot) {
  Result<std::unique_ptr<Device>> device = open_device();
  if (!device.ok()) return cat("{\"ok\":false,\"error\":", json_quote(device.message()), "}");
  OpCheckOptions options;
  options.seed = seed;
  options.packed_dot = packed_dot && (*device)->info().packed_dot;
  wasm_allow_blocking_reads(true);
  Result<std::vector<OpCheck>> checks = run_op_checks(**device, options);
  wasm_allow_blocking_reads(false);
  if (!checks.ok()) return cat("{\"ok\":false,\"error\":", json_quote(checks.message()), "}");
  std::string json = cat("{\"ok\":true,\"adapter\":", json_quote((*device)->info().description),
                         ",\"packed_dot\":", options.packed_dot,
                         ",\"text\":", json_quote(format_op_checks(*checks)), ",\"checks\":[");
  for (size_t i = 0; i < checks->size(); i++) {
    const OpCheck& c = (*checks)[i];
    json += cat(i ? "," : "", "{\"op\":", json_quote(c.op), ",\"shape\":", json_quote(c.shape),
                ",\"error\":", json_number(c.error), ",\"tolerance\":", json_number(c.tolerance),
                ",\"passed\":", c.passed, "}");
  }
  return json + "]}";
}

}  // namespace
}  // namespace sotto::gpu

extern "C" {

// -> NUL-terminated JSON {ok, error | adapter, packed_dot, text, checks:[{op, shape, error, tolerance,
// passed}]}, to free with sotto_free. packed_dot 0 checks the dot4I8Packed fallback kernels.
__attribute__((export_name("sotto_gpu_op_check"))) char* sotto_gpu_op_check(uint32_t seed,
                                                                            int32_t packed_dot) {
  std::string json = sotto::gpu::op_check_json(seed, packed_dot != 0);
  char* out = static_cast<char*>(malloc(json.size() + 1));
  if (!out) return nullptr;
  memcpy(out, json.data(), json.size() + 1);
  return out;
}

}  // extern "C"
