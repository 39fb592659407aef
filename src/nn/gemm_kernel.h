// The register-blocked NT product written once over clang's vector extension and built twice: 4 lanes in
// gemm.cpp (SSE natively, SIMD128 in wasm) and 8 lanes in gemm_avx2.cpp. A block of R rows of A times C rows
// of B keeps R x C vector accumulators: each A load serves C rows and each B load R rows, so loads per
// multiply-add fall from 2 to 1/C + 1/R (these networks fit in L1/L2; loads, not arithmetic, bound them).
// Lane sums are taken in a fixed order, so results are deterministic for a given build.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>

namespace sotto::nn::cpu {
namespace {

// Indexes in the native pointer width: 64-bit indexes on wasm32 cost a wrap per address and block the
// loops' strength reduction (a tenth of Silero's time there).
using Index = std::ptrdiff_t;

template <class V>
V load_vec(const void* p) {
  V v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

template <class V, int L>
auto lane_total(V v) {
  if constexpr (L == 4) {
    return (v[0] + v[1]) + (v[2] + v[3]);
  } else {
    return ((v[0] + v[1]) + (v[2] + v[3])) + ((v[4] + v[5]) + (v[6] + v[7]));
  }
}

// Float: V has L float lanes.
template <class V, int L, int R, int C>
void gemm_block(Index K, const float* a, Index lda, const float* b, Index ldb, float* c, Index ldc) {
  V acc[R][C] = {};
  Index k = 0;
  for (; k + L <= K; k += L) {
    V bv[C];
    for (int j = 0; j < C; ++j) bv[j] = load_vec<V>(b + j * ldb + k);
    for (int i = 0; i < R; ++i) {
      const V av = load_vec<V>(a + i * lda + k);
      for (int j = 0; j < C; ++j) acc[i][j] += av * bv[j];
    }
  }
  for (int i = 0; i < R; ++i)
    for (int j = 0; j < C; ++j) {
      float sum = lane_total<V, L>(acc[i][j]);
      for (Index t = k; t < K; ++t) sum += a[i * lda + t] * b[j * ldb + t];
      c[i * ldc + j] = sum;
    }
}

// Integer: VI16 has L int16 lanes, VI32 L int32 lanes; the int16 loads widen to int32 before multiplying.
template <class VI16, class VI32, int L, int R, int C>
void igemm_block(Index K, const int16_t* a, Index lda, const int16_t* b, Index ldb, int32_t* c, Index ldc) {
  VI32 acc[R][C] = {};
  Index k = 0;
  for (; k + L <= K; k += L) {
    VI32 bv[C];
    for (int j = 0; j < C; ++j) bv[j] = __builtin_convertvector(load_vec<VI16>(b + j * ldb + k), VI32);
    for (int i = 0; i < R; ++i) {
      const VI32 av = __builtin_convertvector(load_vec<VI16>(a + i * lda + k), VI32);
      for (int j = 0; j < C; ++j) acc[i][j] += av * bv[j];
    }
  }
  for (int i = 0; i < R; ++i)
    for (int j = 0; j < C; ++j) {
      int32_t sum = lane_total<VI32, L>(acc[i][j]);
      for (Index t = k; t < K; ++t) sum += int32_t{a[i * lda + t]} * b[j * ldb + t];
      c[i * ldc + j] = sum;
    }
}

// Integer with a pairwise multiply-add (x86 pmaddwd, wasm i32x4.dot_i16x8_s): VI16W holds 2L int16 lanes and
// madd(a, b) returns L int32 lanes, each the sum of two adjacent products (|sum| <= 2 * 255 * 255: no
// overflow). Twice the multiply-adds per instruction of widening to int32 first.
template <class VI16W, class VI32, int L, int R, int C, class Madd>
void igemm_block_madd(Index K, const int16_t* a, Index lda, const int16_t* b, Index ldb, int32_t* c,
                      Index ldc, Madd madd) {
  VI32 acc[R][C] = {};
  Index k = 0;
  for (; k + 2 * L <= K; k += 2 * L) {
    VI16W bv[C];
    for (int j = 0; j < C; ++j) bv[j] = load_vec<VI16W>(b + j * ldb + k);
    for (int i = 0; i < R; ++i) {
      const VI16W av = load_vec<VI16W>(a + i * lda + k);
      for (int j = 0; j < C; ++j) acc[i][j] += madd(av, bv[j]);
    }
  }
  for (int i = 0; i < R; ++i)
    for (int j = 0; j < C; ++j) {
      int32_t sum = lane_total<VI32, L>(acc[i][j]);
      for (Index t = k; t < K; ++t) sum += int32_t{a[i * lda + t]} * b[j * ldb + t];
      c[i * ldc + j] = sum;
    }
}

// Tiles M x N with R x C blocks: 4 x 2 in the bulk (a 1-row product uses 1 x 4: a matrix-vector product with
// B as the weight is the decoder-step case), then the edges.
template <class T, class Acc, class Block>
void tile_block(Index M, Index N, Index K, const T* A, Index lda, const T* B, Index ldb, Acc* C, Index ldc,
                Block block) {
  Index m = 0;
  for (; m + 4 <= M; m += 4) {
    Index n = 0;
    for (; n + 2 <= N; n += 2)
      block.template operator()<4, 2>(K, A + m * lda, lda, B + n * ldb, ldb, C + m * ldc + n, ldc);
    for (; n < N; ++n)
      block.template operator()<4, 1>(K, A + m * lda, lda, B + n * ldb, ldb, C + m * ldc + n, ldc);
  }
  for (; m + 2 <= M; m += 2) {
    Index n = 0;
    for (; n + 2 <= N; n += 2)
      block.template operator()<2, 2>(K, A + m * lda, lda, B + n * ldb, ldb, C + m * ldc + n, ldc);
    for (; n < N; ++n)
      block.template operator()<2, 1>(K, A + m * lda, lda, B + n * ldb, ldb, C + m * ldc + n, ldc);
  }
  for (; m < M; ++m) {
    Index n = 0;
    for (; n + 4 <= N; n += 4)
      block.template operator()<1, 4>(K, A + m * lda, lda, B + n * ldb, ldb, C + m * ldc + n, ldc);
    for (; n < N; ++n)
      block.template operator()<1, 1>(K, A + m * lda, lda, B + n * ldb, ldb, C + m * ldc + n, ldc);
  }
}

// B in column chunks of ~96 KB (they stay in L2 while every row block of A passes over them), so a weight
// larger than the cache is read from memory once per product rather than once per 4 rows of A.
template <class T, class Acc, class Block>
void tile(Index M, Index N, Index K, const T* A, Index lda, const T* B, Index ldb, Acc* C, Index ldc,
          Block block) {
  const Index chunk =
      M <= 4 ? N
             : std::max<Index>(8, (96 * 1024 / static_cast<Index>(sizeof(T)) / (K > 0 ? K : 1)) & ~Index{1});
  for (Index n0 = 0; n0 < N; n0 += chunk)
    tile_block(M, std::min(chunk, N - n0), K, A, lda, B + n0 * ldb, ldb, C + n0, ldc, block);
}

template <class V, int L>
void gemm_nt_vec(Index M, Index N, Index K, const float* A, Index lda, const float* B, Index ldb, float* C,
                 Index ldc) {
  tile(M, N, K, A, lda, B, ldb, C, ldc,
       []<int R, int Cn>(Index k, const float* a, Index la, const float* b, Index lb, float* c, Index lc) {
         gemm_block<V, L, R, Cn>(k, a, la, b, lb, c, lc);
       });
}

template <class VI16, class VI32, int L>
void igemm_nt_vec(Index M, Index N, Index K, const int16_t* A, Index lda, const int16_t* B, Index ldb,
                  int32_t* C, Index ldc) {
  tile(M, N, K, A, lda, B, ldb, C, ldc,
       []<int R, int Cn>(Index k, const int16_t* a, Index la, const int16_t* b, Index lb, int32_t* c,
                         Index lc) { igemm_block<VI16, VI32, L, R, Cn>(k, a, la, b, lb, c, lc); });
}

template <class VI16W, class VI32, int L, class Madd>
void igemm_nt_madd(Index M, Index N, Index K, const int16_t* A, Index lda, const int16_t* B, Index ldb,
                   int32_t* C, Index ldc, Madd madd) {
  tile(M, N, K, A, lda, B, ldb, C, ldc,
       [madd]<int R, int Cn>(Index k, const int16_t* a, Index la, const int16_t* b, Index lb, int32_t* c,
                             Index lc) {
         igemm_block_madd<VI16W, VI32, L, R, Cn>(k, a, la, b, lb, c, lc, madd);
       });
}

}  // namespace
}  // namespace sotto::nn::cpu
