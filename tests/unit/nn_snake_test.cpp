// nn::snake's four-lane sine (nn/vec_math.h sin4) against the double reference on fresh random inputs with odd
// lengths, arguments up to ~1000 and a few past sin4's range (those take std::sin), and sin4 itself against
// std::sin over a sweep.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "cpu/cpu_features.h"
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

}  // namespace
}  // namespace sotto::nn
