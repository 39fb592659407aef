#include <algorithm>

#include "cpu/cpu_features.h"
#include "nn/cpu.h"
#include "nn/gemm.h"
#include "nn/gemm_prepacked_kernel.h"

namespace sotto::nn::cpu {

namespace {
typedef float F4 __attribute__((vector_size(16)));

void prepacked_slice(int64_t M, int64_t N, int64_t K, const float* A, int64_t lda, const float* panels,
                     float* C, int64_t ldc) {
#if defined(__x86_64__) && !defined(__wasm__)
  if (cpu_use_avx512_f32()) return gemm_nt_prepacked_avx512(M, N, K, A, lda, panels, C, ldc);
  if (cpu_use_avx2()) return gemm_nt_prepacked_avx2(M, N, K, A, lda, panels, C, ldc);
#endif
  gemm_nt_prepacked_slice<F4, 4>(static_cast<Index>(M), static_cast<Index>(N), static_cast<Index>(K), A,
                                 static_cast<Index>(lda), panels, C, static_cast<Index>(ldc));
}
}  // namespace

int64_t gemm_panel_width() {
#if defined(__x86_64__) && !defined(__wasm__)
  if (cpu_use_avx512_f32()) return 32;
  if (cpu_use_avx2()) return 16;
#endif
  return 8;
}

void gemm_pack_b(int64_t N, int64_t K, const float* B, int64_t ldb, float* panels) {
  const int64_t w = gemm_panel_width();
  for (int64_t p = 0; p < N; p += w, panels += w * K)
    for (int64_t k = 0; k < K; ++k)
      for (int64_t j = 0; j < w; ++j) panels[k * w + j] = B[(p + j) * ldb + k];
}

// Threads take whole panels along N, or row blocks of 6 when M is the larger side (as gemm_nt splits).
void gemm_nt_prepacked(const Context& ctx, int64_t M, int64_t N, int64_t K, const float* A, int64_t lda,
                       const float* panels, float* C, int64_t ldc) {
  const int64_t w = gemm_panel_width();
  if (M >= N) {
    parallel_for(ctx, (M + kMr - 1) / kMr, kMr * N * K, [&](int64_t b, int64_t e) {
      const int64_t m0 = b * kMr, m1 = std::min(M, e * kMr);
      prepacked_slice(m1 - m0, N, K, A + m0 * lda, lda, panels, C + m0 * ldc, ldc);
    });
  } else {
    parallel_for(ctx, N / w, w * M * K, [&](int64_t b, int64_t e) {
      prepacked_slice(M, (e - b) * w, K, A, lda, panels + b * w * K, C + b * w, ldc);
    });
  }
}

Tensor pack_weight(Context& ctx, const Tensor& w) {
  Tensor panels = ctx.empty(w.shape());
  gemm_pack_b(w.dim(0), w.dim(1), w.f32(), w.dim(1), panels.f32());
  return panels;
}

namespace {
// x . w^T + b with the product `gemm(m, n, k, x, y)` of a packed weight of n rows; the bias over the threads.
template <class Gemm>
Tensor linear_packed(const Tensor& x, int64_t n, const Tensor& b, Gemm gemm) {
  const int64_t k = x.dim(-1), m = x.elements() / k;
  Shape shape = x.shape();
  shape[-1] = n;
  Tensor out = x.ctx().empty(shape);
  float* y = out.f32();
  gemm(m, n, k, x.f32(), y);
  if (b.defined()) {
    const float* bias = b.f32();
    parallel_for(x.ctx(), m, n, [&](int64_t begin, int64_t end) {
      for (int64_t r = begin; r < end; ++r)
        for (int64_t j = 0; j < n; ++j) y[r * n + j] += bias[j];
    });
  }
  return out;
}
}  // namespace

Tensor linear_prepacked(const Tensor& x, const Tensor& panels, const Tensor& b) {
  return linear_packed(x, panels.dim(0), b, [&](int64_t m, int64_t n, int64_t k, const float* a, float* y) {
    gemm_nt_prepacked(x.ctx(), m, n, k, a, k, panels.f32(), y, n);
  });
}

Tensor linear_bf16x3(const Tensor& x, const Tensor& panels, const Tensor& b) {
  return linear_packed(x, panels.dim(0), b, [&](int64_t m, int64_t n, int64_t k, const float* a, float* y) {
    gemm_nt_bf16x3(x.ctx(), m, n, k, a, k, panels.data<uint16_t>(), y, n);
  });
}

}  // namespace sotto::nn::cpu
