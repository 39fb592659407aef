// The decoder's weight-only int8 products in wasm, alone, for bench/wasm_kernels/linear_int8.mjs: the integer
// kernel (src/nn/linear_int8_wasm.cpp: x quantized to int16, i32x4.dot_i16x8_s) against the float kernel it
// replaced (weights converted to float, multiply-add; pass its source as OLD, e.g. from `git show
// 66a3064:src/nn/linear_int8_wasm.cpp` with the function renamed linear_int8_rows_wasm_f32 in namespace
// sotto::nn::cpu_old). One thread, one row of x (a decoder step). Build (no libc):
//   git show 66a3064:src/nn/linear_int8_wasm.cpp | sed 's/rows_wasm(/rows_wasm_f32(/; s/nn::cpu {/nn::cpu_old {/' > /tmp/old.cpp
//   for v in simd128 relaxed; do clang++-19 --target=wasm32-wasi -msimd128 $([ $v = relaxed ] && echo -mrelaxed-simd) \
//     -O2 -std=c++20 -nostdlib -fno-exceptions -fno-rtti -isystem /usr/lib/llvm-19/include/wasm32-wasi/c++/v1 \
//     -isystem /usr/include/wasm32-wasi -Isrc -DOLD=\"/tmp/old.cpp\" -Wl,--no-entry -Wl,--export-dynamic \
//     -Wl,--allow-undefined -o /tmp/linear_int8_$v.wasm bench/wasm_kernels/linear_int8.cpp; done
#include <stddef.h>
#include <stdint.h>

#include "../../src/nn/linear_int8_wasm.cpp"
#include OLD

static unsigned char heap[80 << 20];

extern "C" __attribute__((export_name("buf"))) void* buf() {
  return heap;
}

// y[0, j] for the n rows of q [n, k]: the integer kernel on xq (int16) or the float one on x.
extern "C" __attribute__((export_name("int16"))) void int16(int32_t n, int32_t k, const int16_t* xq,
                                                            const int8_t* q, float* y) {
  sotto::nn::cpu::linear_int8_rows_wasm(xq, 1, k, q, 0, n, y, n);
}
extern "C" __attribute__((export_name("f32"))) void f32(int32_t n, int32_t k, const float* x, const int8_t* q,
                                                        float* y) {
  sotto::nn::cpu_old::linear_int8_rows_wasm_f32(x, 1, k, q, 0, n, y, n);
}
