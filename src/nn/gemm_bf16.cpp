// Split-bf16 products ("bf16x3") for weights packed once (a model's matrices at load): on AMX tiles where the
// CPU has them (gemm_bf16_amx_avx2.cpp), else a scalar loop of the reference's arithmetic.
//
// Each operand x is split into hi = bf16(x) and lo = bf16(x - hi): hi + lo holds 16 of float's 24 bits of
// mantissa. The product a . b is taken as a_hi b_hi + a_hi b_lo + a_lo b_hi (the a_lo b_lo term is below 2^-16 of
// it), each a product of two bf16 and so exact in float, summed in float. So each term of a sum is within
// ~2^-16 of a b, against 2^-9 for plain bf16: plain bf16 changed one of 38 tokens of Parakeet v2's random-weight
// benchmark model, which three products keep (bench/results). AMX's bf16 tiles do ~16 times the multiply-adds
// per cycle of AVX-512 float FMAs, so three products still cost less than one in float, and the packed weight
// is float's 4 bytes (highs and lows).
//
// The scalar reference beside it defines the function: for each output, over k in order, the three products
// added with one rounding each (a product of two bf16 is exact in float, so acc += a * b rounds once, as fmaf
// would, whether or not the compiler contracts it). The scalar path gives its floats bit for bit. AMX's
// TDPBF16PS adds the same exact products in float, but in an order and with internal rounding of its own
// (measured on a Sapphire Rapids: a quarter of sums over 32-128 products differ from every plain order tried
// in the last bit or two), so the tile kernel is within a few float roundings of the reference, not equal to it.
#include <algorithm>
#include <atomic>
#include <vector>

#include "core/half.h"
#include "cpu/cpu_features.h"
#include "nn/cpu.h"
#include "nn/gemm.h"

namespace sotto::nn::cpu {

#if defined(__x86_64__) && !defined(__wasm__)
void split_rows_bf16_amx(const float* A, int64_t lda, int64_t K, int64_t kp, int64_t m0, int64_t m1,
                         uint16_t* hi, uint16_t* lo);
void gemm_nt_bf16x3_amx(int64_t M, int64_t p0, int64_t p1, int64_t kp, const uint16_t* a_hi,
                        const uint16_t* a_lo, const uint16_t* panels, float* C, int64_t ldc);
#endif

namespace {
std::atomic<bool> g_allow_amx{true};

struct Split {
  float hi, lo;
};
Split split(float x) {
  const uint16_t h = f32_to_bf16(x);
  const float hi = bf16_to_f32(h);
  return {hi, bf16_to_f32(f32_to_bf16(x - hi))};
}
}  // namespace

void gemm_bf16_allow_amx(bool allow) {
  g_allow_amx.store(allow, std::memory_order_relaxed);
}

bool gemm_bf16_use_amx() {
#if defined(__x86_64__) && !defined(__wasm__)
  return g_allow_amx.load(std::memory_order_relaxed) && cpu_use_avx512_f32() && cpu_features().amx_bf16;
#else
  return false;
#endif
}

int64_t gemm_bf16_kp(int64_t K) {
  return (K + 31) / 32 * 32;
}

namespace {
// Panels [p0, p1): each column's row of B read once, in order.
void pack_panels(int64_t p0, int64_t p1, int64_t K, const float* B, int64_t ldb, uint16_t* panels) {
  const int64_t kp = gemm_bf16_kp(K), half = kp * 16;
  for (int64_t p = p0; p < p1; ++p)
    for (int64_t j = 0; j < 16; ++j) {
      const float* row = B + (16 * p + j) * ldb;
      uint16_t* hi = panels + p * 2 * half + 2 * j;
      for (int64_t k = 0; k < kp; ++k) {
        const Split s = k < K ? split(row[k]) : Split{0.0f, 0.0f};
        const int64_t at = (k / 2) * 32 + k % 2;
        hi[at] = f32_to_bf16(s.hi);
        hi[half + at] = f32_to_bf16(s.lo);
      }
    }
}
}  // namespace

void gemm_pack_b_bf16x3(int64_t N, int64_t K, const float* B, int64_t ldb, uint16_t* panels) {
  pack_panels(0, N / 16, K, B, ldb, panels);
}

void gemm_nt_bf16x3_ref(int64_t M, int64_t N, int64_t K, const float* A, int64_t lda, const float* B,
                        int64_t ldb, float* C, int64_t ldc) {
  for (int64_t m = 0; m < M; ++m)
    for (int64_t n = 0; n < N; ++n) {
      float acc = 0.0f;
      for (int64_t k = 0; k < K; ++k) {
        const Split a = split(A[m * lda + k]), b = split(B[n * ldb + k]);
        acc += a.hi * b.hi;
        acc += a.hi * b.lo;
        acc += a.lo * b.hi;
      }
      C[m * ldc + n] = acc;
    }
}

void gemm_nt_bf16x3(const Context& ctx, int64_t M, int64_t N, int64_t K, const float* A, int64_t lda,
                    const uint16_t* panels, float* C, int64_t ldc) {
  const int64_t kp = gemm_bf16_kp(K), half = kp * 16;
#if defined(__x86_64__) && !defined(__wasm__)
  if (gemm_bf16_use_amx()) {
    // The split rows, in buffers this thread keeps (a model's products reuse them: no fresh pages a call). The
    // workers get their addresses: a thread_local named in a lambda would be each worker's own.
    const int64_t mp = (M + 15) / 16 * 16;
    thread_local std::vector<uint16_t> hi_rows, lo_rows;
    hi_rows.resize(std::max(hi_rows.size(), static_cast<size_t>(mp * kp)));
    lo_rows.resize(hi_rows.size());
    uint16_t *hi = hi_rows.data(), *lo = lo_rows.data();
    parallel_for(ctx, M, K, [&](int64_t b, int64_t e) { split_rows_bf16_amx(A, lda, K, kp, b, e, hi, lo); });
    std::fill(hi + M * kp, hi + mp * kp, uint16_t{0});  // the last row tile's padding
    std::fill(lo + M * kp, lo + mp * kp, uint16_t{0});
    // Threads take pairs of panels (32 columns): each pair's K x 256 bytes of weight is read once.
    parallel_for(ctx, (N / 16 + 1) / 2, 96 * M * K, [&](int64_t b, int64_t e) {
      gemm_nt_bf16x3_amx(M, 2 * b, std::min(N / 16, 2 * e), kp, hi, lo, panels, C, ldc);
    });
    return;
  }
#endif
  // Without AMX: the reference's arithmetic read from the panels (slow; a model asks for these products only
  // where gemm_bf16_use_amx()).
  parallel_for(ctx, N / 16, 48 * M * K, [&](int64_t b, int64_t e) {
    std::vector<Split> a(static_cast<size_t>(K));
    for (int64_t m = 0; m < M; ++m) {
      for (int64_t k = 0; k < K; ++k) a[static_cast<size_t>(k)] = split(A[m * lda + k]);
      for (int64_t p = b; p < e; ++p)
        for (int64_t j = 0; j < 16; ++j) {
          const uint16_t* col = panels + p * 2 * half + 2 * j;
          float acc = 0.0f;
          for (int64_t k = 0; k < K; ++k) {
            const Split& x = a[static_cast<size_t>(k)];
            const int64_t at = (k / 2) * 32 + k % 2;
            const float w_hi = bf16_to_f32(col[at]), w_lo = bf16_to_f32(col[half + at]);
            acc += x.hi * w_hi;
            acc += x.hi * w_lo;
            acc += x.lo * w_hi;
          }
          C[m * ldc + 16 * p + j] = acc;
        }
    }
  });
}

Tensor pack_weight_bf16x3(Context& ctx, const Tensor& w) {
  const int64_t n = w.dim(0), k = w.dim(1);
  Tensor panels = ctx.empty({n, 2 * gemm_bf16_kp(k)}, DType::BF16);
  // Over the context's threads: Parakeet v2 packs 6 x 10^8 weights at load.
  parallel_for(ctx, n / 16, 16 * k,
               [&](int64_t b, int64_t e) { pack_panels(b, e, k, w.f32(), k, panels.data<uint16_t>()); });
  return panels;
}

}  // namespace sotto::nn::cpu
