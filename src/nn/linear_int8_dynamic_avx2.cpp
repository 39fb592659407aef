// matmul_integer_dynamic's AVX-512 VNNI path (called from linear.cpp when conv_integer_use_vnni()): x quantized
// to uint8 as DynamicQuantizeLinear does, w kept as int8 [N, K] (its raw values; a U8 weight only when every
// value is <= 127), and the zero points applied after the product, exactly in int32:
//   sum_k (x_k - zx)(w_kj - zj) = sum_k x_k w_kj - zx sum_k w_kj - zj sum_k x_k + K zx zj.
// Kokoro's ALBERT, its LSTMs' input projections and the style projections go through here.
#include <algorithm>
#include <cmath>
#include <vector>

#include "nn/cpu.h"
#include "nn/ops.h"

namespace sotto::nn::cpu {

void igemm_u8s8_nt_vnni(int64_t M, int64_t N, int64_t K, const int8_t* A, int64_t lda, const uint8_t* B,
                        int64_t ldb, int32_t* C, int64_t ldc);  // conv_integer_avx2.cpp
void min_max(const float* x, int64_t n, float& lo, float& hi);  // conv_integer_bias.cpp
void quantize_i16(const float* x, int64_t n, const QuantParams& q, int16_t* out);

namespace {
constexpr uint32_t kDerivedInt8Transposed = 8;  // an int8 [K, N] weight as int8 [N, K] (raw values)
constexpr uint32_t kDerivedColumnSums = 9;      // int32 [N]: sum over K of each column of the raw weight
}  // namespace

Tensor matmul_integer_dynamic_vnni(const Tensor& x0, const Tensor& w, const Tensor& w_scales,
                                   const Tensor& w_zero_points) {
  const Tensor x = as_f32(x0);
  const int64_t k = x.dim(-1), n = w.dim(1), m = x.elements() / k;
  const Tensor wt = w.derived(kDerivedInt8Transposed, [&] {
    Tensor t = w.ctx().empty({n, k}, DType::I8);
    for (int64_t r = 0; r < k; ++r)
      for (int64_t j = 0; j < n; ++j) {
        const uint8_t raw = w.data<uint8_t>()[r * n + j];
        if (w.dtype() == DType::U8 && raw > 127) return w.ctx().empty({1}, DType::I8);
        t.data<int8_t>()[j * k + r] = static_cast<int8_t>(raw);
      }
    return t;
  });
  if (wt.elements() != n * k) return {};  // does not fit int8: the int16 path
  const Tensor sums = w.derived(kDerivedColumnSums, [&] {
    Tensor t = w.ctx().empty({n}, DType::I32);
    for (int64_t j = 0; j < n; ++j) {
      int32_t s = 0;
      for (int64_t r = 0; r < k; ++r) s += wt.data<int8_t>()[j * k + r];
      t.data<int32_t>()[j] = s;
    }
    return t;
  });

  float lo = 0, hi = 0;
  min_max(x.f32(), m * k, lo, hi);
  QuantParams q;
  q.scale = hi == lo ? 1.0f : (hi - lo) / 255.0f;
  q.zero_point = static_cast<int32_t>(std::nearbyint(std::clamp(0.0f - lo / q.scale, 0.0f, 255.0f)));
  std::vector<int16_t> centred(static_cast<size_t>(m * k));
  quantize_i16(x.f32(), m * k, q, centred.data());
  std::vector<uint8_t> xq(static_cast<size_t>(m * k));
  std::vector<int32_t> x_sums(static_cast<size_t>(m), 0);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t r = 0; r < k; ++r) {
      const int32_t v = centred[static_cast<size_t>(i * k + r)] + q.zero_point;
      xq[static_cast<size_t>(i * k + r)] = static_cast<uint8_t>(v);
      x_sums[static_cast<size_t>(i)] += v;
    }

  std::vector<int32_t> zp(static_cast<size_t>(n), w.quant().zero_point);
  std::vector<float> scales(static_cast<size_t>(n), w.quant().scale);
  if (w_zero_points.defined()) {
    const std::vector<int64_t> z = read_ints(w_zero_points);
    for (int64_t j = 0; j < n; ++j)
      zp[static_cast<size_t>(j)] = static_cast<int32_t>(z.size() == 1 ? z[0] : z[j]);
  }
  if (w_scales.defined()) {
    const Tensor s = as_f32(w_scales);
    for (int64_t j = 0; j < n; ++j) scales[static_cast<size_t>(j)] = s.f32()[s.elements() == 1 ? 0 : j];
  }

  std::vector<int32_t> acc(static_cast<size_t>(n * m));  // [N, M]
  parallel_for(x.ctx(), n, m * k, [&](int64_t begin, int64_t end) {
    igemm_u8s8_nt_vnni(end - begin, m, k, wt.data<int8_t>() + begin * k, k, xq.data(), k,
                       acc.data() + begin * m, m);
  });
  Shape shape = x.shape();
  shape[-1] = n;
  Tensor out = x.ctx().empty(shape);
  const int32_t zx = q.zero_point;
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      const int32_t zj = zp[static_cast<size_t>(j)];
      const int32_t dot = acc[static_cast<size_t>(j * m + i)] - zx * sums.data<int32_t>()[j] -
                          zj * x_sums[static_cast<size_t>(i)] + static_cast<int32_t>(k) * zx * zj;
      out.f32()[i * n + j] = static_cast<float>(dot) * (q.scale * scales[static_cast<size_t>(j)]);
    }
  return out;
}

}  // namespace sotto::nn::cpu
