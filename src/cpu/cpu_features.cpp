#include "cpu/cpu_features.h"

#include <atomic>

namespace sotto {

namespace {
// Bit 0: detected; bit 1: avx2_fma; bit 2: avx512_vnni; bit 3: avx512_f32; bit 4: amx_int8; bit 5: amx_bf16.
// Atomics instead of a function-local static, because the wasm build has no runtime for thread-safe static
// initialisation. Racing detections compute the same answer.
std::atomic<unsigned> g_detected{0};
std::atomic<bool> g_force_portable{false};
}  // namespace

CpuFeatures cpu_features() {
  unsigned bits = g_detected.load(std::memory_order_acquire);
  if (!(bits & 1u)) {
    const CpuFeatures detected = detect_cpu_features();
    bits = 1u | (detected.avx2_fma ? 2u : 0u) | (detected.avx512_vnni ? 4u : 0u) |
           (detected.avx512_f32 ? 8u : 0u) | (detected.amx_int8 ? 16u : 0u) | (detected.amx_bf16 ? 32u : 0u);
    g_detected.store(bits, std::memory_order_release);
  }
  CpuFeatures f;
  f.avx2_fma = (bits & 2u) != 0;
  f.avx512_vnni = (bits & 4u) != 0;
  f.avx512_f32 = (bits & 8u) != 0;
  f.amx_int8 = (bits & 16u) != 0;
  f.amx_bf16 = (bits & 32u) != 0;
  return f;
}

void cpu_force_portable(bool force) {
  g_force_portable.store(force, std::memory_order_relaxed);
}

bool cpu_use_avx2() {
  return !g_force_portable.load(std::memory_order_relaxed) && cpu_features().avx2_fma;
}

bool cpu_use_avx512_f32() {
  return cpu_use_avx2() && cpu_features().avx512_f32;
}

std::string_view cpu_kernel_variant() {
#if defined(__wasm_relaxed_simd__)
  return "wasm-relaxed-simd";
#elif defined(__wasm_simd128__)
  return "wasm-simd128";
#else
  return cpu_use_avx2() ? "avx2" : "portable";
#endif
}

}  // namespace sotto
