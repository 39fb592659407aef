// Which CPU kernel variant runs. Natively the AVX2+FMA kernels (files *_avx2.cpp) are used when CPUID says
// the CPU and OS support them, unless SOTTO_CPU=portable is set in the environment or a test forces the
// portable path. In WebAssembly the variant is fixed at compile time (SIMD128, or relaxed SIMD when built
// with -mrelaxed-simd); the page picks which .wasm to load.
#pragma once

#include <string_view>

namespace sotto {

struct CpuFeatures {
  bool avx2_fma = false;  // AVX2 + FMA + F16C, with OS support for the YMM registers
  // With avx2_fma: AVX-512 F + BW + VL + VNNI, with OS support for the ZMM and mask registers (vpdpbusd on
  // 256-bit vectors: the quantized kernels of quant_dot_fast_vnni_avx2.cpp).
  bool avx512_vnni = false;
  // With avx2_fma: AVX-512 F on an Intel CPU (full-width 512-bit FMA units), for the f32 products' 16-lane
  // kernel (gemm_prepacked_avx512_avx2.cpp). AMD's Zen 4 runs 512-bit FMAs as two 256-bit halves, so there
  // the wider kernel gains no multiply-adds and its 32-column panels crowd L1 (30-40 % slower, measured).
  bool avx512_f32 = false;
  // With avx512_f32: Intel's tile unit (Sapphire Rapids and later) with Linux's grant of its 8 KB of state per
  // thread (arch_prctl ARCH_REQ_XCOMP_PERM, asked once here; without it the first tile instruction faults).
  // amx_int8: TDPBSUD (the int8 convs, conv_integer_amx_avx2.cpp); amx_bf16: TDPBF16PS and AVX-512 BF16's
  // conversions (the bf16 products, gemm_bf16_amx_avx2.cpp).
  bool amx_int8 = false;
  bool amx_bf16 = false;
};

// Detected once (thread-safe, idempotent); already masked by SOTTO_CPU=portable (nothing) or SOTTO_CPU=avx2
// (no avx512_vnni).
CpuFeatures cpu_features();

// Tests: force the portable kernels (true) or go back to what was detected (false). Not for use while
// kernels are running on other threads.
void cpu_force_portable(bool force);

// True when the AVX2 kernels should run now.
bool cpu_use_avx2();

// True when the f32 products' AVX-512 kernel should run now (cpu_use_avx2() and avx512_f32).
bool cpu_use_avx512_f32();

// "avx2", "portable", "wasm-simd128" or "wasm-relaxed-simd": the variant cpu_use_avx2() and the build select.
std::string_view cpu_kernel_variant();

// Platform hook (cpu_features_native.cpp / cpu_features_wasm.cpp): the raw detection.
CpuFeatures detect_cpu_features();

}  // namespace sotto
