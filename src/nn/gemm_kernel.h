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
#include <memory>
#include <utility>

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

typedef int32_t I32x4Sum __attribute__((vector_size(16)));
#if defined(__wasm__)
constexpr bool kShuffleLaneSums = false;
#else
constexpr bool kShuffleLaneSums = true;
#endif

// The lane sums of four int32 accumulators as one 4-lane vector (sum of v[0] in lane 0, ...): halves folded,
// then a 4 x 4 transpose-add in shuffles. Per block of four, 2 or 3 vector adds and 6 shuffles instead of 16
// (32 with 8 lanes) lane extracts and scalar adds: with the tap pairs' short leaves (K = 128-256) those
// scalar sums were a large part of each output's cost (native: 5 % of Kokoro's CPU time). Not in wasm: V8
// (Node 20) ran Kokoro's generator ~5 % slower with these shuffles than with lane extracts. Integer sums: the
// order does not change the result.
template <class VI32, int L>
I32x4Sum lane_sums4(const VI32& a, const VI32& b, const VI32& c, const VI32& d) {
  auto fold = [](const VI32& v) -> I32x4Sum {
    if constexpr (L == 4) {
      return v;
    } else {
      return __builtin_shufflevector(v, v, 0, 1, 2, 3) + __builtin_shufflevector(v, v, 4, 5, 6, 7);
    }
  };
  const I32x4Sum a4 = fold(a), b4 = fold(b), c4 = fold(c), d4 = fold(d);
  const I32x4Sum ab =
      __builtin_shufflevector(a4, b4, 0, 4, 1, 5) + __builtin_shufflevector(a4, b4, 2, 6, 3, 7);
  const I32x4Sum cd =
      __builtin_shufflevector(c4, d4, 0, 4, 1, 5) + __builtin_shufflevector(c4, d4, 2, 6, 3, 7);
  return __builtin_shufflevector(ab, cd, 0, 1, 4, 5) + __builtin_shufflevector(ab, cd, 2, 3, 6, 7);
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
  if constexpr (kShuffleLaneSums && R == 4) {  // column j's four rows summed together
    for (int j = 0; j < C; ++j) {
      I32x4Sum sum = lane_sums4<VI32, L>(acc[0][j], acc[1][j], acc[2][j], acc[3][j]);
      for (int i = 0; i < R; ++i) {
        for (Index t = k; t < K; ++t) sum[i] += int32_t{a[i * lda + t]} * b[j * ldb + t];
        c[i * ldc + j] = sum[i];
      }
    }
    return;
  } else if constexpr (kShuffleLaneSums && R == 1 && C == 4) {  // a row's four columns: one contiguous store
    I32x4Sum sum = lane_sums4<VI32, L>(acc[0][0], acc[0][1], acc[0][2], acc[0][3]);
    for (Index t = k; t < K; ++t)
      for (int j = 0; j < C; ++j) sum[j] += int32_t{a[t]} * b[j * ldb + t];
    std::memcpy(c, &sum, sizeof sum);
    return;
  }
  for (int i = 0; i < R; ++i)
    for (int j = 0; j < C; ++j) {
      int32_t sum = lane_total<VI32, L>(acc[i][j]);
      for (Index t = k; t < K; ++t) sum += int32_t{a[i * lda + t]} * b[j * ldb + t];
      c[i * ldc + j] = sum;
    }
}

// ---------------------------------------------------------------- int16 conv product, time in the lanes
// A stride-1 conv's product without lane sums: y[m][t] = sum_{j < taps} sum_{i < 2P} A[m][j * 2P + i] *
// G[t + j][i], with G stored pair-major: G2[(p * ldg + r) * 2 + h] = G[r][2p + h] (P channel pairs, ldg rows
// each). One VI16W load holds L consecutive rows' pair p; the pairwise multiply-add against the weight pair
// (A[m][.. 2p], A[m][.. 2p + 1]) broadcast gives L outputs' partial sums at once, so an R x C block (R weight
// rows, C vectors of L times) keeps R x C accumulators that are the outputs themselves: no lane sums and one
// vector store per L outputs (the dot-product blocks above spent a sixth of a tap-pair leaf's time, K =
// 128-256, folding lanes), and C + R loads (R of them 32-bit broadcasts) per R x C multiply-adds.
template <class VI16W, class VI32, int L, int R, int C, class Madd>
void iconv_block(Index taps, Index pairs, const int16_t* a, Index lda, const int16_t* g, Index ldg,
                 int32_t* c, Index ldc, Madd madd) {
  VI32 acc[R][C] = {};
  for (Index j = 0; j < taps; ++j) {
    const int16_t* aj = a + j * 2 * pairs;
    const int16_t* gj = g + j * 2;
    for (Index p = 0; p < pairs; ++p) {
      VI16W x[C];
      for (int k = 0; k < C; ++k) x[k] = load_vec<VI16W>(gj + (p * ldg + k * L) * 2);
      for (int i = 0; i < R; ++i) {
        int32_t w;
        std::memcpy(&w, aj + i * lda + 2 * p, sizeof w);
        VI32 wv;
        for (int l = 0; l < L; ++l) wv[l] = w;
        const VI16W w16 = reinterpret_cast<const VI16W&>(wv);
        for (int k = 0; k < C; ++k) acc[i][k] += madd(w16, x[k]);
      }
    }
  }
  for (int i = 0; i < R; ++i)
    for (int k = 0; k < C; ++k) std::memcpy(c + i * ldc + k * L, &acc[i][k], sizeof(VI32));
}

// The plain loops, for a product of fewer than L outputs. Sums modulo 2^32 as the vector adds make them (the
// tap pairs rely on it: conv_integer_bias.cpp).
inline void iconv_tail(Index M, Index t0, Index t1, Index taps, Index pairs, const int16_t* A, Index lda,
                       const int16_t* g, Index ldg, int32_t* C, Index ldc) {
  for (Index m = 0; m < M; ++m)
    for (Index t = t0; t < t1; ++t) {
      uint32_t sum = 0;
      for (Index j = 0; j < taps; ++j)
        for (Index p = 0; p < pairs; ++p)
          for (Index h = 0; h < 2; ++h)
            sum += static_cast<uint32_t>(int32_t{A[m * lda + j * 2 * pairs + 2 * p + h]} *
                                         g[(p * ldg + t + j) * 2 + h]);
      C[m * ldc + t] = static_cast<int32_t>(sum);
    }
}

// C [M, N] (row stride ldc) = the product above over outputs 0..N-1 (G2 holds at least N + taps - 1 rows of
// each pair): R x C blocks, then R x 1, then the rows left one at a time. The last N mod L outputs are one more
// L-wide block ending at N (recomputing a few outputs: the plain loops over a whole K cost as much as the rest
// of a short product); fewer than L outputs in all run the plain loops.
template <class VI16W, class VI32, int L, int R, int C, class Madd>
void iconv_pairs_tiled(Index M, Index N, Index taps, Index pairs, const int16_t* A, Index lda,
                       const int16_t* G2, Index ldg, int32_t* Cm, Index ldc, Madd madd) {
  if (N < L) return iconv_tail(M, 0, N, taps, pairs, A, lda, G2, ldg, Cm, ldc);
  const Index nl = N / L * L;
  auto rows = [&]<int RR>(Index m) {
    auto block = [&]<int CC>(Index t) {
      iconv_block<VI16W, VI32, L, RR, CC>(taps, pairs, A + m * lda, lda, G2 + t * 2, ldg, Cm + m * ldc + t,
                                          ldc, madd);
    };
    Index t = 0;
    for (; t + C * L <= nl; t += C * L) block.template operator()<C>(t);
    for (; t < nl; t += L) block.template operator()<1>(t);
    if (nl < N) block.template operator()<1>(N - L);
  };
  Index m = 0;
  for (; m + R <= M; m += R) rows.template operator()<R>(m);
  for (; m < M; ++m) rows.template operator()<1>(m);
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

// ---------------------------------------------------------------- packed float product
// The compute-bound shapes (a Linear over hundreds of frames, a conv's unrolled columns, attention over a
// whole utterance) run a packed, register-blocked product, BLIS's loop order: B in blocks of kPackKc x
// kPackNc and A in blocks of kPackMc x kPackKc are copied into panels (kMr rows of A, 2L columns of B,
// k-major), so the micro-kernel streams both with unit stride and keeps a kMr x 2L tile of C in 12 vector
// registers: per k, 2 vector loads and 6 broadcasts feed 12 fused multiply-adds (the 1/C + 1/R loads per
// multiply-add of the dot-product blocks above fall to 2/12 vector loads). The B micro-panel (16 KB for
// AVX2) stays in L1 while the A block (L2) passes over it. Each C element is summed over the same k blocks
// in the same order whatever the thread split, so results do not depend on the thread count.
constexpr Index kMr = 6;
constexpr Index kPackMc = 72;   // rows of A per block (12 panels; 72 KB at kPackKc = 256)
constexpr Index kPackNc = 256;  // columns of B per block (256 KB at kPackKc = 256: a quarter of L2)
constexpr Index kPackKc = 256;  // the most k per block; K is cut into equal blocks no longer than this

// Copies rows [0, rows) x columns [k0, k0 + kc) of X (row stride ldx) into panels of R rows, each k-major
// (panel[k * R + r]); a last short panel is padded with zero rows.
template <Index R>
void pack_panels(const float* X, Index ldx, Index rows, Index k0, Index kc, float* out) {
  for (Index p = 0; p < rows; p += R, out += R * kc) {
    const Index r = std::min(R, rows - p);
    const float* x = X + p * ldx + k0;
    if (r == R) {
      for (Index k = 0; k < kc; ++k)
        for (Index i = 0; i < R; ++i) out[k * R + i] = x[i * ldx + k];
    } else {
      for (Index k = 0; k < kc; ++k) {
        for (Index i = 0; i < r; ++i) out[k * R + i] = x[i * ldx + k];
        for (Index i = r; i < R; ++i) out[k * R + i] = 0.0f;
      }
    }
  }
}

template <class V, int L>
V splat(float a) {
  V v;
  for (int i = 0; i < L; ++i) v[i] = a;
  return v;
}

// acc + a * b. Natively clang contracts this into one FMA where the build has it (AVX2+FMA). Wasm SIMD128 has
// no fused multiply-add, so the relaxed build asks for f32x4.relaxed_madd, which V8 lowers to one vfmadd231ps
// on a CPU with FMA (else a multiply and an add): half the arithmetic instructions of the micro-kernel, whose
// 12 accumulators leave no spare registers to hide a separate multiply's latency. Fused or not per CPU, so
// results may differ in the last bits between machines (tests compare against references with tolerances).
template <class V, int L>
V fma_vec(V acc, V a, V b) {
#if defined(__wasm_relaxed_simd__)
  if constexpr (L == 4) return reinterpret_cast<V>(__builtin_wasm_relaxed_madd_f32x4(a, b, acc));
#endif
  return acc + a * b;
}

// C[0..mr) x [0..nr) (+)= the kMr x 2L tile of the panels' product over kc.
template <class V, int L>
void micro_kernel(Index kc, const float* ap, const float* bp, float* c, Index ldc, Index mr, Index nr,
                  bool accumulate) {
  V acc[kMr][2] = {};
  for (Index k = 0; k < kc; ++k, ap += kMr, bp += 2 * L) {
    const V b0 = load_vec<V>(bp), b1 = load_vec<V>(bp + L);
    for (int i = 0; i < kMr; ++i) {
      const V a = splat<V, L>(ap[i]);
      acc[i][0] = fma_vec<V, L>(acc[i][0], a, b0);
      acc[i][1] = fma_vec<V, L>(acc[i][1], a, b1);
    }
  }
  if (mr == kMr && nr == 2 * L) {
    for (int i = 0; i < kMr; ++i) {
      float* ci = c + i * ldc;
      V c0 = acc[i][0], c1 = acc[i][1];
      if (accumulate) {
        c0 += load_vec<V>(ci);
        c1 += load_vec<V>(ci + L);
      }
      std::memcpy(ci, &c0, sizeof c0);
      std::memcpy(ci + L, &c1, sizeof c1);
    }
    return;
  }
  float t[kMr][2 * L];
  std::memcpy(t, acc, sizeof t);
  for (Index i = 0; i < mr; ++i)
    for (Index j = 0; j < nr; ++j) c[i * ldc + j] = (accumulate ? c[i * ldc + j] : 0.0f) + t[i][j];
}

// Shapes too thin for a tile (fewer than kMr rows or 2L columns) stay on the dot-product blocks.
template <int L>
bool packed_fits(Index M, Index N, Index K) {
  return M >= kMr && N >= 2 * L && K >= 4;
}

// The blocked product gemm_nt_packed and gemm_nt_prepacked share: k blocks of at most kPackKc, A packed by row
// blocks, and B's panels for columns n0.. and depths k0.. from b_panels(n0, nc, k0, kc), which returns the
// first NR-wide panel and the floats from column j's panel to column j + NR's divided by NR (so column j's
// panel is at first + j * that). Each element of C is summed in the same order whoever supplies the panels.
template <class V, int L, class BPanels>
void gemm_nt_blocked(Index M, Index N, Index K, const float* A, Index lda, float* C, Index ldc,
                     BPanels b_panels) {
  constexpr Index NR = 2 * L;
  const Index k_blocks = (K + kPackKc - 1) / kPackKc;
  const Index kc_max = (K + k_blocks - 1) / k_blocks;
  const Index mc_max = std::min(kPackMc, (M + kMr - 1) / kMr * kMr);
  const Index nc_max = std::min(kPackNc, (N + NR - 1) / NR * NR);
  // Uninitialised scratch (every element read is written by a pack first).
  std::unique_ptr<float[]> a_pack(new float[static_cast<size_t>(mc_max * kc_max)]);
  for (Index n0 = 0; n0 < N; n0 += nc_max) {
    const Index nc = std::min(nc_max, N - n0);
    for (Index k0 = 0; k0 < K; k0 += kc_max) {
      const Index kc = std::min(kc_max, K - k0);
      const auto [b, b_per_column] = b_panels(n0, nc, k0, kc);
      for (Index m0 = 0; m0 < M; m0 += mc_max) {
        const Index mc = std::min(mc_max, M - m0);
        pack_panels<kMr>(A + m0 * lda, lda, mc, k0, kc, a_pack.get());
        for (Index j = 0; j < nc; j += NR)
          for (Index i = 0; i < mc; i += kMr)
            micro_kernel<V, L>(kc, a_pack.get() + i * kc, b + j * b_per_column, C + (m0 + i) * ldc + n0 + j,
                               ldc, std::min(kMr, mc - i), std::min(NR, nc - j), k0 > 0);
      }
    }
  }
}

template <class V, int L>
void gemm_nt_packed(Index M, Index N, Index K, const float* A, Index lda, const float* B, Index ldb, float* C,
                    Index ldc) {
  constexpr Index NR = 2 * L;
  const Index k_blocks = (K + kPackKc - 1) / kPackKc;
  const Index kc_max = (K + k_blocks - 1) / k_blocks;
  const Index nc_max = std::min(kPackNc, (N + NR - 1) / NR * NR);
  std::unique_ptr<float[]> b_pack(new float[static_cast<size_t>(nc_max * kc_max)]);
  // B packed per (column block, k block) into scratch: panel j at j * kc.
  gemm_nt_blocked<V, L>(M, N, K, A, lda, C, ldc, [&](Index n0, Index nc, Index k0, Index kc) {
    pack_panels<NR>(B + n0 * ldb, ldb, nc, k0, kc, b_pack.get());
    return std::pair<const float*, Index>(b_pack.get(), kc);
  });
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
