// The register-blocked NT product written once over clang's vector extension and built twice: 4 lanes in
// gemm.cpp (SSE natively, SIMD128 in wasm) and 8 lanes in gemm_avx2.cpp. A block of R rows of A times C rows
// of B keeps R x C vector accumulators: each A load serves C rows and each B load R rows, so loads per
// multiply-add fall from 2 to 1/C + 1/R (these networks fit in L1/L2; loads, not arithmetic, bound them).
// Lane sums are taken in a fixed order, so results are deterministic for a given build.
#pragma once

#include <cstdint>
#include <cstring>

namespace sotto::nn::cpu {
namespace {

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
void gemm_block(int64_t K, const float* a, int64_t lda, const float* b, int64_t ldb, float* c, int64_t ldc) {
  V acc[R][C] = {};
  int64_t k = 0;
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
      for (int64_t t = k; t < K; ++t) sum += a[i * lda + t] * b[j * ldb + t];
      c[i * ldc + j] = sum;
    }
}

// Integer: VI16 has L int16 lanes, VI32 L int32 lanes; the int16 loads widen to int32 before multiplying.
template <class VI16, class VI32, int L, int R, int C>
void igemm_block(int64_t K, const int16_t* a, int64_t lda, const int16_t* b, int64_t ldb, int32_t* c,
                 int64_t ldc) {
  VI32 acc[R][C] = {};
  int64_t k = 0;
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
      for (int64_t t = k; t < K; ++t) sum += int32_t{a[i * lda + t]} * b[j * ldb + t];
      c[i * ldc + j] = sum;
    }
}

// Tiles M x N with R x C blocks: 4 x 2 in the bulk (a 1-row product uses 1 x 4: a matrix-vector product with
// B as the weight is the decoder-step case), then the edges.
template <class T, class Acc, class Block>
void tile(int64_t M, int64_t N, int64_t K, const T* A, int64_t lda, const T* B, int64_t ldb, Acc* C,
          int64_t ldc, Block block) {
  int64_t m = 0;
  for (; m + 4 <= M; m += 4) {
    int64_t n = 0;
    for (; n + 2 <= N; n += 2)
      block.template operator()<4, 2>(K, A + m * lda, lda, B + n * ldb, ldb, C + m * ldc + n, ldc);
    for (; n < N; ++n)
      block.template operator()<4, 1>(K, A + m * lda, lda, B + n * ldb, ldb, C + m * ldc + n, ldc);
  }
  for (; m + 2 <= M; m += 2) {
    int64_t n = 0;
    for (; n + 2 <= N; n += 2)
      block.template operator()<2, 2>(K, A + m * lda, lda, B + n * ldb, ldb, C + m * ldc + n, ldc);
    for (; n < N; ++n)
      block.template operator()<2, 1>(K, A + m * lda, lda, B + n * ldb, ldb, C + m * ldc + n, ldc);
  }
  for (; m < M; ++m) {
    int64_t n = 0;
    for (; n + 4 <= N; n += 4)
      block.template operator()<1, 4>(K, A + m * lda, lda, B + n * ldb, ldb, C + m * ldc + n, ldc);
    for (; n < N; ++n)
      block.template operator()<1, 1>(K, A + m * lda, lda, B + n * ldb, ldb, C + m * ldc + n, ldc);
  }
}

template <class V, int L>
void gemm_nt_vec(int64_t M, int64_t N, int64_t K, const float* A, int64_t lda, const float* B, int64_t ldb,
                 float* C, int64_t ldc) {
  tile(M, N, K, A, lda, B, ldb, C, ldc,
       []<int R, int Cn>(int64_t k, const float* a, int64_t la, const float* b, int64_t lb, float* c,
                         int64_t lc) { gemm_block<V, L, R, Cn>(k, a, la, b, lb, c, lc); });
}

template <class VI16, class VI32, int L>
void igemm_nt_vec(int64_t M, int64_t N, int64_t K, const int16_t* A, int64_t lda, const int16_t* B,
                  int64_t ldb, int32_t* C, int64_t ldc) {
  tile(M, N, K, A, lda, B, ldb, C, ldc,
       []<int R, int Cn>(int64_t k, const int16_t* a, int64_t la, const int16_t* b, int64_t lb, int32_t* c,
                         int64_t lc) { igemm_block<VI16, VI32, L, R, Cn>(k, a, la, b, lb, c, lc); });
}

}  // namespace
}  // namespace sotto::nn::cpu
