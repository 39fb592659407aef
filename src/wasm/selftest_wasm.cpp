// A threaded int8 matrix-vector product, SIMD128 (and relaxed SIMD's i8 dot in the relaxed build) against a
// scalar single-threaded reference on fresh random data. Integer dot products are exact, so the checksums
// must match bit for bit whatever the summation order; the float outputs (dot * row scale) must match to
// rounding.
#include "wasm/selftest_wasm.h"

#include "cpu/selftest.h"

#include <wasm_simd128.h>

#include <atomic>
#include <vector>

namespace sotto {

namespace {

uint32_t next_random(uint32_t& state) {  // xorshift32
  state ^= state << 13;
  state ^= state >> 17;
  state ^= state << 5;
  return state;
}

int32_t dot_i8_ref(const int8_t* w, const int8_t* x, int n) {
  int32_t sum = 0;
  for (int i = 0; i < n; ++i) sum += static_cast<int32_t>(w[i]) * x[i];
  return sum;
}

// n is a multiple of 16. x holds values in [0, 127] so relaxed SIMD's i7 operand is exact on every engine.
int32_t dot_i8_simd(const int8_t* w, const int8_t* x, int n) {
  v128_t acc = wasm_i32x4_splat(0);
  for (int i = 0; i < n; i += 16) {
    v128_t wv = wasm_v128_load(w + i);
    v128_t xv = wasm_v128_load(x + i);
#if defined(__wasm_relaxed_simd__)
    acc = wasm_i32x4_relaxed_dot_i8x16_i7x16_add(wv, xv, acc);
#else
    acc = wasm_i32x4_add(
        acc, wasm_i32x4_dot_i16x8(wasm_i16x8_extend_low_i8x16(wv), wasm_i16x8_extend_low_i8x16(xv)));
    acc = wasm_i32x4_add(
        acc, wasm_i32x4_dot_i16x8(wasm_i16x8_extend_high_i8x16(wv), wasm_i16x8_extend_high_i8x16(xv)));
#endif
  }
  return wasm_i32x4_extract_lane(acc, 0) + wasm_i32x4_extract_lane(acc, 1) + wasm_i32x4_extract_lane(acc, 2) +
         wasm_i32x4_extract_lane(acc, 3);
}

uint32_t hash_dots(const std::vector<int32_t>& dots) {
  uint32_t h = 2166136261u;  // FNV-1a over the 32-bit values
  for (int32_t d : dots) h = (h ^ static_cast<uint32_t>(d)) * 16777619u;
  return h;
}

}  // namespace

SelftestResult run_wasm_selftest(ThreadPool& pool, int n_rows, int n_cols, uint32_t seed) {
  SelftestResult r{};
  n_cols = (n_cols + 15) / 16 * 16;
  r.n_rows = n_rows;
  r.n_cols = n_cols;
  r.n_threads = pool.n_threads();
  r.tolerance = 1e-6f;
  uint32_t state = seed ? seed : 0x9e3779b9u;
  std::vector<int8_t> w(static_cast<size_t>(n_rows) * n_cols), x(n_cols);
  std::vector<float> row_scale(n_rows);
  for (int8_t& v : w) v = static_cast<int8_t>(next_random(state));
  for (int8_t& v : x) v = static_cast<int8_t>(next_random(state) & 127);
  for (float& s : row_scale) s = static_cast<float>(next_random(state) % 1000 + 1) * 1e-4f;

  std::vector<int32_t> dots(n_rows), dots_ref(n_rows);
  std::vector<float> y(n_rows), y_ref(n_rows);
  std::vector<std::atomic<uint32_t>> rows_done(pool.n_threads());
  pool.run([&](int ith, int nth) {
    const int per_thread = (n_rows + nth - 1) / nth;
    const int begin = ith * per_thread;
    const int end = begin + per_thread < n_rows ? begin + per_thread : n_rows;
    for (int row = begin; row < end; ++row) {
      dots[row] = dot_i8_simd(&w[static_cast<size_t>(row) * n_cols], x.data(), n_cols);
      y[row] = static_cast<float>(dots[row]) * row_scale[row];
    }
    rows_done[ith].store(end > begin ? static_cast<uint32_t>(end - begin) : 0, std::memory_order_relaxed);
  });
  for (int row = 0; row < n_rows; ++row) {
    dots_ref[row] = dot_i8_ref(&w[static_cast<size_t>(row) * n_cols], x.data(), n_cols);
    y_ref[row] = static_cast<float>(dots_ref[row]) * row_scale[row];
  }
  for (int row = 0; row < n_rows; ++row) {
    float e = y[row] > y_ref[row] ? y[row] - y_ref[row] : y_ref[row] - y[row];
    if (e > r.max_abs_error) r.max_abs_error = e;
  }
  r.rows_per_thread_min = 0xffffffffu;
  for (auto& n : rows_done) {
    uint32_t v = n.load(std::memory_order_relaxed);
    if (v < r.rows_per_thread_min) r.rows_per_thread_min = v;
  }
  r.checksum = hash_dots(dots);
  r.checksum_ref = hash_dots(dots_ref);

  const int q8_cols = (n_cols + 31) / 32 * 32;
  r.q8_checksum = cpu_selftest_matvec_q8_0(pool, n_rows, q8_cols, seed, &r.q8_max_abs_error);
  ThreadPool one_thread(1, /*start_helpers=*/false);
  float one_thread_error = 0;
  r.q8_checksum_1thread = cpu_selftest_matvec_q8_0(one_thread, n_rows, q8_cols, seed, &one_thread_error);
  // Outputs are ~sqrt(cols)/4 in size; allow float rounding of a few ulps on top of the reference's own.
  r.q8_tolerance = 1e-5f * static_cast<float>(q8_cols > 0 ? q8_cols : 1);
  const bool q8_ok = r.q8_max_abs_error >= 0 && r.q8_max_abs_error <= r.q8_tolerance &&
                     r.q8_checksum == r.q8_checksum_1thread;
  r.passed =
      r.checksum == r.checksum_ref && r.max_abs_error <= r.tolerance && r.rows_per_thread_min > 0 && q8_ok;
  return r;
}

}  // namespace sotto
