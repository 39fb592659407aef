// Matrix x vector kernels for x86-64 with AVX2 + FMA + F16C (compiled with -mavx2 -mfma -mf16c; used only
// after cpu_use_avx2() says so). Same structure as the portable versions in matvec.cpp, whose references they
// match.
#include <immintrin.h>

#include <cstddef>

#include "cpu/matvec.h"

namespace sotto {

namespace {

float hsum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

float f16(uint16_t h) {
  return _cvtsh_ss(h);
}

void matvec_f32_rows_avx2(const float* w, const float* x, float* y, int row_begin, int row_end, int cols) {
  for (int r = row_begin; r < row_end; ++r) {
    const float* wr = w + static_cast<size_t>(r) * cols;
    __m256 acc0 = _mm256_setzero_ps(), acc1 = acc0, acc2 = acc0, acc3 = acc0;  // 4 chains hide FMA latency
    int i = 0;
    for (; i + 32 <= cols; i += 32) {
      acc0 = _mm256_fmadd_ps(_mm256_loadu_ps(wr + i), _mm256_loadu_ps(x + i), acc0);
      acc1 = _mm256_fmadd_ps(_mm256_loadu_ps(wr + i + 8), _mm256_loadu_ps(x + i + 8), acc1);
      acc2 = _mm256_fmadd_ps(_mm256_loadu_ps(wr + i + 16), _mm256_loadu_ps(x + i + 16), acc2);
      acc3 = _mm256_fmadd_ps(_mm256_loadu_ps(wr + i + 24), _mm256_loadu_ps(x + i + 24), acc3);
    }
    for (; i + 8 <= cols; i += 8)
      acc0 = _mm256_fmadd_ps(_mm256_loadu_ps(wr + i), _mm256_loadu_ps(x + i), acc0);
    float sum = hsum(_mm256_add_ps(_mm256_add_ps(acc0, acc1), _mm256_add_ps(acc2, acc3)));
    for (; i < cols; ++i) sum += wr[i] * x[i];
    y[r] = sum;
  }
}

// One activation block, prepared once per pass: |x| as maddubs' unsigned operand, x itself for its signs.
struct XBlock {
  __m256i abs;
  __m256i qs;
};
XBlock prepare_x(const int8_t* qs) {
  const __m256i x = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(qs));
  return {_mm256_abs_epi8(x), x};
}

// Eight int32 lanes whose sum is the block's integer dot product, as floats (exact: |sum| < 2^24).
__m256 block_dot(const XBlock& xb, const int8_t* w_qs) {
  const __m256i w = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w_qs));
  const __m256i w_signed = _mm256_sign_epi8(w, xb.qs);                   // w * sign(x), so |x| * that = w * x
  const __m256i pairs = _mm256_maddubs_epi16(xb.abs, w_signed);          // i16; |x| <= 127: never saturates
  const __m256i quads = _mm256_madd_epi16(pairs, _mm256_set1_epi16(1));  // i32
  return _mm256_cvtepi32_ps(quads);
}

float dot_q8_0_q8_0_avx2(int n, const BlockQ8_0* a, const BlockQ8_0* b) {
  __m256 acc = _mm256_setzero_ps();
  for (int blk = 0; blk < n / kQK8_0; ++blk) {
    const __m256 scale = _mm256_set1_ps(f16(a[blk].d) * f16(b[blk].d));
    acc = _mm256_fmadd_ps(block_dot(prepare_x(b[blk].qs), a[blk].qs), scale, acc);
  }
  return hsum(acc);
}

void matvec_q8_0_rows_avx2(const BlockQ8_0* w, const BlockQ8_0* x, float* y, int row_begin, int row_end,
                           int cols) {
  const int n_blocks = cols / kQK8_0;
  int r = row_begin;
  for (; r + 4 <= row_end; r += 4) {  // four rows per pass share each prepared x block
    const BlockQ8_0* w0 = w + static_cast<size_t>(r) * n_blocks;
    const BlockQ8_0* rows[4] = {w0, w0 + n_blocks, w0 + 2 * n_blocks, w0 + 3 * n_blocks};
    __m256 acc[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};
    for (int blk = 0; blk < n_blocks; ++blk) {
      const XBlock xb = prepare_x(x[blk].qs);
      const float dx = f16(x[blk].d);
      for (int k = 0; k < 4; ++k) {
        const __m256 scale = _mm256_set1_ps(f16(rows[k][blk].d) * dx);
        acc[k] = _mm256_fmadd_ps(block_dot(xb, rows[k][blk].qs), scale, acc[k]);
      }
    }
    for (int k = 0; k < 4; ++k) y[r + k] = hsum(acc[k]);
  }
  for (; r < row_end; ++r) y[r] = dot_q8_0_q8_0_avx2(cols, w + static_cast<size_t>(r) * n_blocks, x);
}

}  // namespace

const MatvecKernels kMatvecAvx2 = {"avx2", matvec_f32_rows_avx2, dot_q8_0_q8_0_avx2, matvec_q8_0_rows_avx2};

}  // namespace sotto
