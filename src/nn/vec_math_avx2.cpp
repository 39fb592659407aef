// nn/vec_math.h's GELU and attention's softmax at 8 lanes with FMA, for CPUs with AVX2 (cpu_use_avx2()): the
// 4-lane builds of the same functions were a tenth of Moonshine's encoder natively (~11 M exps in its
// softmaxes, ~6 M erfs in its GELUs for 10 s of audio).
#include <cmath>
#include <cstdint>

#include "nn/cpu.h"
#include "nn/vec_math.h"

namespace sotto::nn::cpu {

namespace {
typedef float F8 __attribute__((vector_size(32)));

F8 load8(const float* p) {
  F8 v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

void store8(float* p, F8 v) {
  std::memcpy(p, &v, sizeof v);
}

float lane_max(F8 v) {
  float m = v[0];
  for (int i = 1; i < 8; ++i) m = std::max(m, v[i]);
  return m;
}

float lane_sum(F8 v) {
  return ((v[0] + v[1]) + (v[2] + v[3])) + ((v[4] + v[5]) + (v[6] + v[7]));
}
}  // namespace

void gelu_erf_avx2(const float* in, float* out, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) store8(out + i, vec::gelu_erf_v(load8(in + i)));
  if (i < n) {
    float tail[8] = {};
    for (int64_t j = i; j < n; ++j) tail[j - i] = in[j];
    const F8 r = vec::gelu_erf_v(load8(tail));
    for (int64_t j = i; j < n; ++j) out[j] = r[j - i];
  }
}

void softmax_rows_avx2(float* s, int64_t rows, int64_t cols) {
  for (int64_t i = 0; i < rows; ++i) {
    float* r = s + i * cols;
    int64_t j = 0;
    F8 mx8 = vec::fill<F8>(-INFINITY);
    for (; j + 8 <= cols; j += 8) {
      const F8 v = load8(r + j);
      mx8 = v > mx8 ? v : mx8;
    }
    float mx = lane_max(mx8);
    for (; j < cols; ++j) mx = std::max(mx, r[j]);
    const F8 m8 = vec::fill<F8>(mx);
    F8 sum8 = vec::fill<F8>(0.0f);
    for (j = 0; j + 8 <= cols; j += 8) {
      const F8 e = vec::exp_v(load8(r + j) - m8);
      store8(r + j, e);
      sum8 += e;
    }
    float sum = lane_sum(sum8);
    if (j < cols) {
      float tail[8] = {-INFINITY, -INFINITY, -INFINITY, -INFINITY,
                       -INFINITY, -INFINITY, -INFINITY, -INFINITY};
      for (int64_t t = j; t < cols; ++t) tail[t - j] = r[t] - mx;
      const F8 e = vec::exp_v(load8(tail));
      for (int64_t t = j; t < cols; ++t) sum += (r[t] = e[t - j]);
    }
    const F8 inv = vec::fill<F8>(1.0f / sum);
    for (j = 0; j + 8 <= cols; j += 8) store8(r + j, load8(r + j) * inv);
    for (; j < cols; ++j) r[j] *= inv[0];
  }
}

}  // namespace sotto::nn::cpu
