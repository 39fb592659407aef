#include "cpu/selftest.h"

#include <vector>

#include "cpu/matvec.h"

namespace sotto {

namespace {
// xorshift32: fixed, tiny, identical on every platform; uniform in [-1, 1).
float next_uniform(uint32_t& s) {
  s ^= s << 13;
  s ^= s >> 17;
  s ^= s << 5;
  return static_cast<float>(s >> 8) * (2.0f / 16777216.0f) - 1.0f;
}
}  // namespace

double cpu_selftest_matvec_q8_0(ThreadPool& pool, int rows, int cols, uint32_t seed, float* max_abs_err_out) {
  if (rows < 1 || cols < kQK8_0 || cols % kQK8_0 != 0 || rows > (1 << 20) || cols > (1 << 20)) {
    if (max_abs_err_out) *max_abs_err_out = -1;
    return 0;
  }
  uint32_t state = seed ? seed : 0x2545f491u;  // xorshift must not start at 0
  const int n_blocks = cols / kQK8_0;
  std::vector<float> row(cols);
  std::vector<BlockQ8_0> w(static_cast<size_t>(rows) * n_blocks), x(n_blocks);
  for (int r = 0; r < rows; ++r) {
    for (float& v : row) v = next_uniform(state);
    quantize_row_q8_0(row.data(), w.data() + static_cast<size_t>(r) * n_blocks, cols);
  }
  for (float& v : row) v = next_uniform(state);
  quantize_row_q8_0(row.data(), x.data(), cols);

  std::vector<float> y(rows), y_ref(rows);
  matvec_q8_0(pool, w.data(), x.data(), y.data(), rows, cols);
  matvec_q8_0_ref(w.data(), x.data(), y_ref.data(), rows, cols);

  float max_abs_err = 0;
  double checksum = 0;
  for (int r = 0; r < rows; ++r) {
    const float diff = y[r] - y_ref[r];
    const float abs_diff = diff < 0 ? -diff : diff;
    if (!(abs_diff <= max_abs_err)) max_abs_err = abs_diff;  // also catches NaN
    checksum += y[r];
  }
  if (max_abs_err_out) *max_abs_err_out = max_abs_err;
  return checksum;
}

}  // namespace sotto
