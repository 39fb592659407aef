// The op layer's packed f32 product (gemm_kernel.h's gemm_nt_packed, 4 lanes, as sotto.wasm runs it) alone in
// wasm, for bench/wasm_kernels/gemm_f32.mjs: Moonshine encoder shapes, one thread. `peak` times the
// multiply-add alone (12 independent chains, no loads): f32x4.mul + f32x4.add in the SIMD128 build,
// f32x4.relaxed_madd in the relaxed one. Build both (no libc: a bump allocator serves the kernel's scratch):
//   for v in simd128 relaxed; do clang++-19 --target=wasm32-wasi -msimd128 $([ $v = relaxed ] && echo -mrelaxed-simd) \
//     -O2 -std=c++20 -nostdlib -fno-exceptions -fno-rtti -isystem /usr/lib/llvm-19/include/wasm32-wasi/c++/v1 \
//     -isystem /usr/include/wasm32-wasi -Isrc -Wl,--no-entry -Wl,--export-dynamic -Wl,--allow-undefined \
//     -o /tmp/gemm_f32_$v.wasm bench/wasm_kernels/gemm_f32.cpp; done
#include <stddef.h>
#include <stdint.h>
#include <wasm_simd128.h>

#include "nn/gemm_kernel.h"

static unsigned char heap[96 << 20];
static size_t heap_used = 0;
void* operator new[](size_t n) {
  void* p = heap + heap_used;
  heap_used += (n + 63) & ~size_t{63};
  return p;
}
void operator delete[](void*) noexcept {}
void operator delete[](void*, size_t) noexcept {}
extern "C" void* memcpy(void* d, const void* s, size_t n) {
  return __builtin_memmove(d, s, n);
}
extern "C" void* memmove(void* d, const void* s, size_t n) {
  auto* dd = static_cast<unsigned char*>(d);
  const auto* ss = static_cast<const unsigned char*>(s);
  if (dd < ss)
    for (size_t i = 0; i < n; ++i) dd[i] = ss[i];
  else
    for (size_t i = n; i-- > 0;) dd[i] = ss[i];
  return d;
}
extern "C" void* memset(void* d, int v, size_t n) {
  auto* dd = static_cast<unsigned char*>(d);
  for (size_t i = 0; i < n; ++i) dd[i] = static_cast<unsigned char>(v);
  return d;
}

typedef float F4 __attribute__((vector_size(16)));

// Operands live at the start of the heap; the kernel's scratch after `reserved` bytes, reset per call.
static size_t reserved = 0;
extern "C" __attribute__((export_name("buf"))) void* buf(int32_t bytes) {
  reserved = (static_cast<size_t>(bytes) + 63) & ~size_t{63};
  heap_used = reserved;
  return heap;
}

extern "C" __attribute__((export_name("gemm"))) void gemm(int32_t M, int32_t N, int32_t K, const float* A,
                                                          const float* B, float* C) {
  heap_used = reserved;
  sotto::nn::cpu::gemm_nt_packed<F4, 4>(M, N, K, A, K, B, K, C, N);
}

// 12 chains of `iters` multiply-adds of 4 lanes each: 48 * iters multiply-adds.
extern "C" __attribute__((export_name("peak"))) float peak(int32_t iters) {
  F4 acc[12];
  for (int j = 0; j < 12; ++j) acc[j] = F4{1, 1, 1, 1} * static_cast<float>(j);
  const F4 a = {0.999f, 0.999f, 0.999f, 0.999f}, b = {0.001f, 0.001f, 0.001f, 0.001f};
  for (int32_t i = 0; i < iters; ++i)
    for (int j = 0; j < 12; ++j) acc[j] = sotto::nn::cpu::fma_vec<F4, 4>(b, acc[j], a);  // acc * a + b
  float s = 0;
  for (int j = 0; j < 12; ++j) s += acc[j][0];
  return s;
}
