// The int8 conv's product in SIMD128, block shapes and operand widths side by side (bench/wasm_kernels/run.mjs
// times them in Node on one thread): C[m, n] = sum_k A[m, k] B[n, k], A the weights, B the activations.
//   blk16: int16 operands (as gemm_kernel.h's igemm_block_madd, what Kokoro's convs use in wasm), i32x4.dot_i16x8_s
//   blk16u: the same, K unrolled by 2
//   blk8: int8 weights x uint8 activations, each load widened to two int16x8 halves before the same dot
// Build: clang++-19 --target=wasm32 -msimd128 -O3 -nostdlib -fno-exceptions -Wl,--no-entry -Wl,--export-dynamic
//        -o /tmp/wasm_kernels.wasm bench/wasm_kernels/kernels.cpp
#include <stdint.h>
#include <wasm_simd128.h>
typedef long Index;
static unsigned char heap[64 << 20];
extern "C" __attribute__((export_name("buf"))) void* buf() {
  return heap;
}

template <int R, int C>
static inline void blk16(Index K, const int16_t* a, Index lda, const int16_t* b, Index ldb, int32_t* c,
                         Index ldc) {
  v128_t acc[R][C];
  for (int i = 0; i < R; ++i)
    for (int j = 0; j < C; ++j) acc[i][j] = wasm_i32x4_splat(0);
  Index k = 0;
  for (; k + 8 <= K; k += 8) {
    v128_t bv[C];
    for (int j = 0; j < C; ++j) bv[j] = wasm_v128_load(b + j * ldb + k);
    for (int i = 0; i < R; ++i) {
      const v128_t av = wasm_v128_load(a + i * lda + k);
      for (int j = 0; j < C; ++j) acc[i][j] = wasm_i32x4_add(acc[i][j], wasm_i32x4_dot_i16x8(av, bv[j]));
    }
  }
  for (int i = 0; i < R; ++i)
    for (int j = 0; j < C; ++j) {
      v128_t v = acc[i][j];
      int32_t s = wasm_i32x4_extract_lane(v, 0) + wasm_i32x4_extract_lane(v, 1) +
                  wasm_i32x4_extract_lane(v, 2) + wasm_i32x4_extract_lane(v, 3);
      for (Index t = k; t < K; ++t) s += int32_t{a[i * lda + t]} * b[j * ldb + t];
      c[i * ldc + j] = s;
    }
}
template <int R, int C>
static inline void blk16u(Index K, const int16_t* a, Index lda, const int16_t* b, Index ldb, int32_t* c,
                          Index ldc) {
  v128_t acc[R][C];
  for (int i = 0; i < R; ++i)
    for (int j = 0; j < C; ++j) acc[i][j] = wasm_i32x4_splat(0);
  Index k = 0;
  for (; k + 16 <= K; k += 16) {
    v128_t bv[C], bw[C];
    for (int j = 0; j < C; ++j) {
      bv[j] = wasm_v128_load(b + j * ldb + k);
      bw[j] = wasm_v128_load(b + j * ldb + k + 8);
    }
    for (int i = 0; i < R; ++i) {
      const v128_t av = wasm_v128_load(a + i * lda + k), aw = wasm_v128_load(a + i * lda + k + 8);
      for (int j = 0; j < C; ++j)
        acc[i][j] = wasm_i32x4_add(
            acc[i][j], wasm_i32x4_add(wasm_i32x4_dot_i16x8(av, bv[j]), wasm_i32x4_dot_i16x8(aw, bw[j])));
    }
  }
  for (int i = 0; i < R; ++i)
    for (int j = 0; j < C; ++j) {
      v128_t v = acc[i][j];
      int32_t s = wasm_i32x4_extract_lane(v, 0) + wasm_i32x4_extract_lane(v, 1) +
                  wasm_i32x4_extract_lane(v, 2) + wasm_i32x4_extract_lane(v, 3);
      for (Index t = k; t < K; ++t) s += int32_t{a[i * lda + t]} * b[j * ldb + t];
      c[i * ldc + j] = s;
    }
}
// u8 x s8 with widening
template <int R, int C>
static inline void blk8(Index K, const int8_t* a, Index lda, const uint8_t* b, Index ldb, int32_t* c,
                        Index ldc) {
  v128_t acc[R][C];
  for (int i = 0; i < R; ++i)
    for (int j = 0; j < C; ++j) acc[i][j] = wasm_i32x4_splat(0);
  Index k = 0;
  for (; k + 16 <= K; k += 16) {
    v128_t bl[C], bh[C];
    for (int j = 0; j < C; ++j) {
      v128_t v = wasm_v128_load(b + j * ldb + k);
      bl[j] = wasm_u16x8_extend_low_u8x16(v);
      bh[j] = wasm_u16x8_extend_high_u8x16(v);
    }
    for (int i = 0; i < R; ++i) {
      const v128_t v = wasm_v128_load(a + i * lda + k);
      const v128_t al = wasm_i16x8_extend_low_i8x16(v), ah = wasm_i16x8_extend_high_i8x16(v);
      for (int j = 0; j < C; ++j)
        acc[i][j] = wasm_i32x4_add(
            acc[i][j], wasm_i32x4_add(wasm_i32x4_dot_i16x8(al, bl[j]), wasm_i32x4_dot_i16x8(ah, bh[j])));
    }
  }
  for (int i = 0; i < R; ++i)
    for (int j = 0; j < C; ++j) {
      v128_t v = acc[i][j];
      int32_t s = wasm_i32x4_extract_lane(v, 0) + wasm_i32x4_extract_lane(v, 1) +
                  wasm_i32x4_extract_lane(v, 2) + wasm_i32x4_extract_lane(v, 3);
      for (Index t = k; t < K; ++t) s += int32_t{a[i * lda + t]} * b[j * ldb + t];
      c[i * ldc + j] = s;
    }
}
template <int R, int C, class T, class U, class F>
static void tile(Index M, Index N, Index K, const T* A, const U* B, int32_t* Cc, F f) {
  Index chunk = (96 * 1024 / (Index)sizeof(U) / K) / 12 * 12;
  if (chunk < 12) chunk = 12;
  for (Index n0 = 0; n0 < N; n0 += chunk) {
    Index n1 = n0 + chunk < N ? n0 + chunk : N;
    for (Index m = 0; m + R <= M; m += R)
      for (Index n = n0; n + C <= n1; n += C) f(K, A + m * K, K, B + n * K, K, Cc + m * N + n, N);
  }
}
extern "C" __attribute__((export_name("run16_42"))) void run16_42(Index M, Index N, Index K, int16_t* A,
                                                                  int16_t* B, int32_t* C) {
  tile<4, 2>(M, N, K, A, B, C, blk16<4, 2>);
}
extern "C" __attribute__((export_name("run16_43"))) void run16_43(Index M, Index N, Index K, int16_t* A,
                                                                  int16_t* B, int32_t* C) {
  tile<4, 3>(M, N, K, A, B, C, blk16<4, 3>);
}
extern "C" __attribute__((export_name("run16_34"))) void run16_34(Index M, Index N, Index K, int16_t* A,
                                                                  int16_t* B, int32_t* C) {
  tile<3, 4>(M, N, K, A, B, C, blk16<3, 4>);
}
extern "C" __attribute__((export_name("run16_33"))) void run16_33(Index M, Index N, Index K, int16_t* A,
                                                                  int16_t* B, int32_t* C) {
  tile<3, 3>(M, N, K, A, B, C, blk16<3, 3>);
}
extern "C" __attribute__((export_name("run8_42"))) void run8_42(Index M, Index N, Index K, int8_t* A,
                                                                uint8_t* B, int32_t* C) {
  tile<4, 2>(M, N, K, A, B, C, blk8<4, 2>);
}
extern "C" __attribute__((export_name("run8_24"))) void run8_24(Index M, Index N, Index K, int8_t* A,
                                                                uint8_t* B, int32_t* C) {
  tile<2, 4>(M, N, K, A, B, C, blk8<2, 4>);
}
extern "C" __attribute__((export_name("run8_33"))) void run8_33(Index M, Index N, Index K, int8_t* A,
                                                                uint8_t* B, int32_t* C) {
  tile<3, 3>(M, N, K, A, B, C, blk8<3, 3>);
}
extern "C" __attribute__((export_name("run16_42u"))) void run16_42u(Index M, Index N, Index K, int16_t* A,
                                                                    int16_t* B, int32_t* C) {
  tile<4, 2>(M, N, K, A, B, C, blk16u<4, 2>);
}
extern "C" __attribute__((export_name("run16_24"))) void run16_24(Index M, Index N, Index K, int16_t* A,
                                                                  int16_t* B, int32_t* C) {
  tile<2, 4>(M, N, K, A, B, C, blk16<2, 4>);
}
extern "C" __attribute__((export_name("run16_22"))) void run16_22(Index M, Index N, Index K, int16_t* A,
                                                                  int16_t* B, int32_t* C) {
  tile<2, 2>(M, N, K, A, B, C, blk16<2, 2>);
}
