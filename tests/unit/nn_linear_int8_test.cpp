// Op check of linear_int8_affine (src/nn/linear_int8.cpp): the CPU path (AVX2 and portable, 1 and 3 threads)
// against nn::ref on fresh random inputs of odd sizes (rows not a multiple of the kernel's 4, K not of its 8),
// with the scale and offset Moonshine's files use, and against linear() on the dequantized weight.
#include <cmath>
#include <vector>

#include "nn_test_support.h"

namespace sotto::nn {
namespace {

using testing::Backends;
using testing::expect_close;
using testing::floats;
using testing::rand_int;
using testing::rand_int8;
using testing::rand_tensor;

TEST(NnLinearInt8, AffineInt8MatchesReference) {
  Backends b;
  b.each([&](Context& ctx, const std::string& where) {
    for (int rep = 0; rep < 4; ++rep) {
      const int64_t m = rand_int(1, 9), k = rand_int(1, 300), n = rand_int(1, 71);
      const Tensor x = rand_tensor(ctx, {m, k}), w = rand_int8(ctx, {n, k}, DType::I8);
      const Tensor bias = rand_tensor(ctx, {n});
      const float scale = 0.003f + 0.02f * static_cast<float>(rand_int(0, 100)) / 100.0f;
      const float offset = 0.3f * static_cast<float>(rand_int(-100, 100)) / 100.0f;
      // Terms up to |x| 1 * |w| ~ 3, K of them: float rounding ~ sqrt(K) ulp of the sum's scale.
      const float tol = 4e-6f * static_cast<float>(std::sqrt(static_cast<double>(k)) + 1.0) * 3.0f;
      expect_close(linear_int8_affine(x, w, scale, offset, bias),
                   ref::linear_int8_affine(x, w, scale, offset, bias), tol, 1e-5f,
                   "linear_int8_affine " + where);
      const Tensor x3 = rand_tensor(ctx, {2, m, k});
      expect_close(linear_int8_affine(x3, w, scale, offset), ref::linear_int8_affine(x3, w, scale, offset),
                   tol, 1e-5f, "linear_int8_affine 3-D " + where);
      // The same as linear() on the weight dequantized the graph's way.
      std::vector<float> deq(static_cast<size_t>(n * k));
      for (size_t i = 0; i < deq.size(); ++i)
        deq[i] = static_cast<float>(w.data<int8_t>()[i]) * scale + offset;
      const Tensor wf = ctx.from_floats({n, k}, deq);
      expect_close(linear_int8_affine(x, w, scale, offset, bias), linear(x, wf, bias), tol, 1e-5f,
                   "linear_int8_affine vs linear " + where);
    }
  });
}

}  // namespace
}  // namespace sotto::nn
