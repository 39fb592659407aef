// The two int dot instructions of wasm SIMD in the browser, alone: i32x4.relaxed_dot_i8x16_i7x16_add_s (16
// multiply-adds and the add in one instruction) against i32x4.dot_i16x8_s + i32x4.add (8 and an add), with 8
// independent chains (dot8, dot16) and in a 4 x 3 register tile with loads (dot8t, dot16t), from L1. `probe`
// tells how the engine lowers the relaxed dot: 129540 (= 4 x 127 x 255) when the "i7" operand's bytes count as
// unsigned without saturation (x86 VNNI vpdpbusd: the exact u8 x s8 product our int8 convs need), 131068 when
// pairs saturate at int16 (pmaddubsw), -508 when they count as signed. Run by dot_rate.mjs; build:
//   clang-19 --target=wasm32 -O2 -msimd128 -mrelaxed-simd -nostdlib -Wl,--no-entry \
//     -o /tmp/dot_rate.wasm bench/wasm_kernels/dot_rate.c
#include <stdint.h>
#include <wasm_simd128.h>
__attribute__((export_name("probe"))) int probe(void) {
  v128_t a = wasm_i8x16_splat(127), b = wasm_i8x16_splat((int8_t)255);
  v128_t r = wasm_i32x4_relaxed_dot_i8x16_i7x16_add(a, b, wasm_i32x4_splat(0));
  return wasm_i32x4_extract_lane(
      r, 0);  // exact u8: 4*127*255 = 129540; sat i16 pairs: 2*32767=65534; signed -1: -508
}
static int8_t A[8192] __attribute__((aligned(16)));
static uint8_t B[8192] __attribute__((aligned(16)));
static int16_t A16[8192] __attribute__((aligned(16)));
static int16_t B16[8192] __attribute__((aligned(16)));
// Filled at run time: arrays that are never written are constant zeros to the compiler, which then folds the
// dots away and times an empty loop.
__attribute__((export_name("fill"))) void fill(int seed) {
  uint32_t s = (uint32_t)seed * 2654435761u + 1u;
  for (int i = 0; i < 8192; ++i) {
    s = s * 1664525u + 1013904223u;
    A[i] = (int8_t)(s >> 24);
    B[i] = (uint8_t)((s >> 16) & 127);
    A16[i] = (int16_t)(s >> 16);
    B16[i] = (int16_t)((s >> 8) & 255);
  }
}
__attribute__((export_name("dot8"))) int dot8(int reps) {
  v128_t acc[8];
  for (int j = 0; j < 8; ++j) acc[j] = wasm_i32x4_splat(0);
  for (int r = 0; r < reps; ++r)
    for (int k = 0; k < 1024; k += 16) {
      v128_t b = wasm_v128_load(B + k);
      for (int j = 0; j < 8; ++j)
        acc[j] = wasm_i32x4_relaxed_dot_i8x16_i7x16_add(wasm_v128_load(A + 512 * j / 8 + k), b, acc[j]);
    }
  v128_t s = acc[0];
  for (int j = 1; j < 8; ++j) s = wasm_i32x4_add(s, acc[j]);
  return wasm_i32x4_extract_lane(s, 0);
}
__attribute__((export_name("dot16"))) int dot16(int reps) {
  v128_t acc[8];
  for (int j = 0; j < 8; ++j) acc[j] = wasm_i32x4_splat(0);
  for (int r = 0; r < reps; ++r)
    for (int k = 0; k < 1024; k += 8) {
      v128_t b = wasm_v128_load(B16 + k);
      for (int j = 0; j < 8; ++j)
        acc[j] = wasm_i32x4_add(acc[j], wasm_i32x4_dot_i16x8(wasm_v128_load(A16 + 256 * j / 8 + k), b));
    }
  v128_t s = acc[0];
  for (int j = 1; j < 8; ++j) s = wasm_i32x4_add(s, acc[j]);
  return wasm_i32x4_extract_lane(s, 0);
}
__attribute__((export_name("dot8t"))) int dot8t(int reps) {
  v128_t acc[4][3];
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 3; ++j) acc[i][j] = wasm_i32x4_splat(0);
  for (int r = 0; r < reps; ++r)
    for (int k = 0; k < 1024; k += 16) {
      v128_t b[3];
      for (int j = 0; j < 3; ++j) b[j] = wasm_v128_load(B + 1024 * j + k);
      for (int i = 0; i < 4; ++i) {
        v128_t a = wasm_v128_load(A + 64 * i + k);
        for (int j = 0; j < 3; ++j) acc[i][j] = wasm_i32x4_relaxed_dot_i8x16_i7x16_add(a, b[j], acc[i][j]);
      }
    }
  v128_t s = acc[0][0];
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 3; ++j) s = wasm_i32x4_add(s, acc[i][j]);
  return wasm_i32x4_extract_lane(s, 0);
}
__attribute__((export_name("dot16t"))) int dot16t(int reps) {
  v128_t acc[4][3];
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 3; ++j) acc[i][j] = wasm_i32x4_splat(0);
  for (int r = 0; r < reps; ++r)
    for (int k = 0; k < 1024; k += 8) {
      v128_t b[3];
      for (int j = 0; j < 3; ++j) b[j] = wasm_v128_load(B16 + 1024 * j + k);
      for (int i = 0; i < 4; ++i) {
        v128_t a = wasm_v128_load(A16 + 64 * i + k);
        for (int j = 0; j < 3; ++j) acc[i][j] = wasm_i32x4_add(acc[i][j], wasm_i32x4_dot_i16x8(a, b[j]));
      }
    }
  v128_t s = acc[0][0];
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 3; ++j) s = wasm_i32x4_add(s, acc[i][j]);
  return wasm_i32x4_extract_lane(s, 0);
}
