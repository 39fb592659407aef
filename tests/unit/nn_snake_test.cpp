// nn::snake's four-lane sine (nn/vec_math.h sin4) against the double reference on fresh random inputs with odd
// lengths, arguments up to ~1000 and a few past sin4's range (those take std::sin), and sin4 itself against
// std::sin over a sweep; adain_snake (AdaIN, Snake and the next conv's range in one pass) against the two ops
// and the double references.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "cpu/cpu_features.h"
#include "nn/ops.h"
#include "nn/ref.h"
#include "nn/vec_math.h"
#include "nn_test_support.h"

namespace sotto::nn {
namespace {

TEST(NnSnake, Sin4MatchesStdSin) {
  float worst = 0;
  for (float x = -8000.0f; x < 8000.0f; x += 0.7311f) {
    const vec::F4 v = vec::sin4(vec::F4{x, -x * 0.001f, x * 1e-4f, x * 0.37f});
    for (int i = 0; i < 4; ++i) {
      const float arg = i == 0 ? x : i == 1 ? -x * 0.001f : i == 2 ? x * 1e-4f : x * 0.37f;
      worst = std::max(worst, std::fabs(v[i] - static_cast<float>(std::sin(static_cast<double>(arg)))));
    }
  }
  EXPECT_LT(worst, 4e-7f);  // float sinf itself is within 6e-8 of the true value
}

TEST(NnSnake, MatchesReference) {
  testing::Backends b;
  b.each([&](Context& ctx, const std::string& where) {
    const int64_t c = testing::rand_int(1, 9), t = testing::rand_int(1, 203);
    Tensor x = testing::rand_tensor(ctx, {c, t}, -50.0f, 50.0f);
    const Tensor alpha = testing::rand_tensor(ctx, {c}, 0.1f, 20.0f);
    x.f32()[(c * t) / 2] = 9000.0f;  // past sin4's range
    testing::expect_close(snake(x, alpha), ref::snake(x, alpha), 2e-5f, 2e-6f, "snake " + where);
  });
}

// The AVX2 rows (snake_avx2.cpp, eight lanes) are sin4's operations in the same order: bitwise the portable
// four-lane loop, including rows that reach past sin4's range part way.
TEST(NnSnake, Avx2RowsAreBitwiseThePortableLoop) {
  auto ctx = Context::cpu(nullptr);
  const int64_t c = testing::rand_int(2, 9), t = testing::rand_int(40, 203);
  Tensor x = testing::rand_tensor(*ctx, {c, t}, -500.0f, 500.0f);
  const Tensor alpha = testing::rand_tensor(*ctx, {c}, 0.1f, 20.0f);
  x.f32()[t + testing::rand_int(0, t - 1)] = 9000.0f;  // row 1 goes past sin4's range
  cpu_force_portable(true);
  const std::vector<float> portable = testing::floats(snake(x, alpha));
  cpu_force_portable(false);
  EXPECT_EQ(testing::floats(snake(x, alpha)), portable);
}

// The fused pass is bitwise adain() then snake(), close to the double references, its range is the exact
// min / max with 0 of its values, and the int8 conv given that range is bitwise the conv that finds it.
// Shapes from a few steps to long rows over many channels (threaded), a row past sin4's range.
TEST(NnSnake, AdainSnakeIsBitwiseAdainThenSnake) {
  testing::Backends b;
  b.each([&](Context& ctx, const std::string& where) {
    for (int trial = 0; trial < 6; ++trial) {
      const int64_t c = 2 * testing::rand_int(1, 24), t = testing::rand_int(trial < 2 ? 1 : 200, 900);
      Tensor x = testing::rand_tensor(ctx, {c, t}, -3.0f, 5.0f);
      if (trial == 3) x.f32()[testing::rand_int(0, c * t - 1)] = 4e4f;  // normalised, still past sin4's range
      const Tensor gamma = testing::rand_tensor(ctx, {c}, -0.5f, 0.5f);
      const Tensor beta = testing::rand_tensor(ctx, {c}, -1.0f, 1.0f);
      const Tensor alpha = testing::rand_tensor(ctx, {c}, 0.1f, 20.0f);
      const std::string at = where + " c " + std::to_string(c) + " t " + std::to_string(t);
      ValueRange range;
      const Tensor got = adain_snake(x, gamma, beta, 1e-5f, alpha, &range);
      const Tensor two_ops = snake(adain(x, gamma, beta, 1e-5f), alpha);
      EXPECT_EQ(testing::floats(got), testing::floats(two_ops)) << at;
      testing::expect_close(
          got, ref::snake(ref::group_norm(x, static_cast<int>(c), scale(gamma, 1, 1), beta, 1e-5f), alpha),
          2e-4f, 2e-4f, "adain_snake " + at);

      const std::vector<float> v = testing::floats(two_ops);
      ASSERT_TRUE(range.known) << at;
      EXPECT_EQ(range.lo, std::min(0.0f, *std::min_element(v.begin(), v.end()))) << at;
      EXPECT_EQ(range.hi, std::max(0.0f, *std::max_element(v.begin(), v.end()))) << at;

      const int64_t cout = testing::rand_int(1, 20), k = 2 * testing::rand_int(0, 5) + 1;
      const Conv1dOptions o{.padding = static_cast<int>(k / 2), .dilation = static_cast<int>(trial % 3 + 1)};
      if (t + 2 * o.padding < o.dilation * (k - 1) + 1) continue;
      const Tensor w = testing::rand_int8(ctx, {cout, c, k}, DType::U8)
                           .with_quant({0.011f, static_cast<int32_t>(trial * 20)});
      const Tensor bias = testing::rand_tensor(ctx, {cout}, -0.7f, 0.7f);
      EXPECT_EQ(testing::floats(conv1d_integer_dynamic_quantized_bias(got, w, bias, o, range)),
                testing::floats(conv1d_integer_dynamic_quantized_bias(got, w, bias, o)))
          << "conv " << at;
    }
  });
}

}  // namespace
}  // namespace sotto::nn
