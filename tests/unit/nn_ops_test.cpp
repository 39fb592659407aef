// Op checks, elementwise / shape / reductions / normalisation: the CPU path against nn::ref on fresh random
// inputs of odd sizes (seeded per run: SOTTO_TEST_SEED replays a failure), plus hand-computed cases.
#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstring>

#include "nn_test_support.h"

namespace sotto::nn {
namespace {

using testing::Backends;
using testing::expect_close;
using testing::floats;
using testing::rand_int;
using testing::rand_tensor;

// Small shapes run inline; large ones (over 64K elements) split over the threads in chunks of rows that do not
// start at a multiple of the column operand's rows.
TEST(NnOps, BroadcastArithmeticMatchesReference) {
  Backends b;
  for (const bool large : {false, true})
    b.each([&](Context& ctx, const std::string& where0) {
      const std::string where = where0 + (large ? " large" : "");
      const int64_t r = large ? rand_int(40, 91) : rand_int(1, 9),
                    c = large ? rand_int(600, 901) : rand_int(1, 37);
      const int64_t n = large ? 2 : 3;  // 2 r rows over 3 threads: chunks start inside a column's period
      const Tensor x = rand_tensor(ctx, {n, r, c});
      const Tensor same = rand_tensor(ctx, {n, r, c}), row = rand_tensor(ctx, {c}),
                   col = rand_tensor(ctx, {r, 1});
      const Tensor mid = rand_tensor(ctx, {n, 1, c}, 0.5f, 2.0f);
      expect_close(add(x, same), ref::binary(x, same, '+'), 0, 0, "add same " + where);
      expect_close(sub(x, row), ref::binary(x, row, '-'), 0, 0, "sub row " + where);
      expect_close(mul(x, col), ref::binary(x, col, '*'), 0, 0, "mul col " + where);
      expect_close(div(x, mid), ref::binary(x, mid, '/'), 0, 0, "div mid " + where);
      expect_close(mul(col, x), ref::binary(col, x, '*'), 0, 0, "mul col first " + where);
    });
}

TEST(NnOps, BroadcastByHand) {
  auto ctx = Context::cpu();
  const float av[] = {1, 2, 3, 4, 5, 6};
  const float bv[] = {10, 20};
  const Tensor a = ctx->from_floats({3, 2}, av), b = ctx->from_floats({2}, bv),
               c = ctx->from_floats({3, 1}, {av, 3});
  EXPECT_EQ(floats(add(a, b)), (std::vector<float>{11, 22, 13, 24, 15, 26}));
  EXPECT_EQ(floats(mul(a, c)), (std::vector<float>{1, 2, 6, 8, 15, 18}));
  EXPECT_EQ(floats(scale(b, 0.5f, 1.0f)), (std::vector<float>{6, 11}));
}

TEST(NnOps, ActivationsMatchReference) {
  Backends b;
  const Act acts[] = {Act::Identity, Act::Relu,    Act::LeakyRelu, Act::Sigmoid, Act::Tanh,
                      Act::Silu,     Act::GeluErf, Act::GeluTanh,  Act::Exp,     Act::Sin,
                      Act::Cos,      Act::Atan,    Act::Abs,       Act::Square};
  b.each([&](Context& ctx, const std::string& where) {
    const Tensor x = rand_tensor(ctx, {rand_int(1, 7), rand_int(1, 2000)}, -6.0f, 6.0f);
    for (Act a : acts)
      expect_close(activation(x, a, 0.2f), ref::activation(x, a, 0.2f), 2e-6f, 2e-6f,
                   "activation " + std::to_string(static_cast<int>(a)) + " " + where);
    const Tensor pos = rand_tensor(ctx, {rand_int(1, 99)}, 0.0f, 9.0f);
    expect_close(activation(pos, Act::Sqrt), ref::activation(pos, Act::Sqrt), 1e-6f, 1e-6f, "sqrt " + where);
  });
}

TEST(NnOps, GeluByHand) {
  // gelu(1) = 0.5 (1 + erf(1/sqrt 2)) = 0.841344746; FastGelu(1) = 0.841191990.
  auto ctx = Context::cpu();
  const float one[] = {1.0f};
  EXPECT_NEAR(floats(gelu(ctx->from_floats({1}, one)))[0], 0.841344746f, 1e-6f);
  EXPECT_NEAR(floats(activation(ctx->from_floats({1}, one), Act::GeluTanh))[0], 0.841191990f, 1e-6f);
}

TEST(NnOps, GluAndSnakeMatchReference) {
  Backends b;
  b.each([&](Context& ctx, const std::string& where) {
    const int64_t c = rand_int(1, 13), t = rand_int(1, 301);
    const Tensor x = rand_tensor(ctx, {2 * c, t}, -3.0f, 3.0f);
    expect_close(glu(x, 0), ref::glu(x, 0), 1e-6f, 1e-6f, "glu axis 0 " + where);
    const Tensor y = rand_tensor(ctx, {t, 2 * c}, -3.0f, 3.0f);
    expect_close(glu(y, -1), ref::glu(y, -1), 1e-6f, 1e-6f, "glu last " + where);
    const Tensor alpha = rand_tensor(ctx, {2 * c}, 0.2f, 3.0f);
    expect_close(snake(x, alpha), ref::snake(x, alpha), 1e-5f, 1e-5f, "snake " + where);
  });
}

TEST(NnOps, ShapeOpsByHand) {
  auto ctx = Context::cpu();
  const float v[] = {1, 2, 3, 4, 5, 6};
  const Tensor x = ctx->from_floats({2, 3}, v);
  EXPECT_EQ(transpose(x).shape(), (Shape{3, 2}));
  EXPECT_EQ(floats(transpose(x)), (std::vector<float>{1, 4, 2, 5, 3, 6}));
  const Tensor parts[] = {x, x};
  EXPECT_EQ(floats(concat(parts, 1)), (std::vector<float>{1, 2, 3, 1, 2, 3, 4, 5, 6, 4, 5, 6}));
  EXPECT_EQ(floats(concat(parts, 0)), (std::vector<float>{1, 2, 3, 4, 5, 6, 1, 2, 3, 4, 5, 6}));
  EXPECT_EQ(floats(slice(x, 1, 1, 3)), (std::vector<float>{2, 3, 5, 6}));
  EXPECT_EQ(floats(pad(x, 1, 1, 2, 9.0f)), (std::vector<float>{9, 1, 2, 3, 9, 9, 9, 4, 5, 6, 9, 9}));
  // numpy.pad(mode="reflect"): [1 2 3] -> [3 2 | 1 2 3 | 2 1].
  EXPECT_EQ(floats(pad_reflect(x, 1, 2, 2)), (std::vector<float>{3, 2, 1, 2, 3, 2, 1, 6, 5, 4, 5, 6, 5, 4}));
  const int order[] = {1, 0};
  EXPECT_EQ(floats(permute(x, order)), floats(transpose(x)));
  // A 3-D permute against index arithmetic.
  const Tensor y = rand_tensor(*ctx, {3, 4, 5});
  const int order3[] = {2, 0, 1};
  const std::vector<float> p = floats(permute(y, order3)), src = floats(y);
  for (int a = 0; a < 5; ++a)
    for (int b = 0; b < 3; ++b)
      for (int c = 0; c < 4; ++c) EXPECT_EQ(p[(a * 3 + b) * 4 + c], src[(b * 4 + c) * 5 + a]);
}

TEST(NnOps, ResizeByHand) {
  auto ctx = Context::cpu();
  const float v[] = {0, 10, 20};
  const Tensor x = ctx->from_floats({1, 3}, v);
  // torch.nn.functional.interpolate([0, 10, 20], size=6, mode="nearest") = [0, 0, 10, 10, 20, 20]
  EXPECT_EQ(floats(resize(x, 6, ResizeMode::Nearest)), (std::vector<float>{0, 0, 10, 10, 20, 20}));
  // mode="linear", align_corners=False: src = (d + 0.5) / 2 - 0.5 -> [0, 2.5, 7.5, 12.5, 17.5, 20]
  EXPECT_EQ(floats(resize(x, 6, ResizeMode::LinearHalfPixel)),
            (std::vector<float>{0, 2.5, 7.5, 12.5, 17.5, 20}));
  // align_corners=True, size 5: [0, 5, 10, 15, 20]
  EXPECT_EQ(floats(resize(x, 5, ResizeMode::LinearAlignCorners)), (std::vector<float>{0, 5, 10, 15, 20}));
}

TEST(NnOps, ReductionsMatchReference) {
  Backends b;
  b.each([&](Context& ctx, const std::string& where) {
    const Tensor x = rand_tensor(ctx, {rand_int(1, 9), rand_int(1, 515)}, -8.0f, 8.0f);
    expect_close(softmax(x, -1), ref::softmax(x, -1), 1e-6f, 1e-5f, "softmax last " + where);
    expect_close(softmax(x, 0), ref::softmax(x, 0), 1e-6f, 1e-5f, "softmax first " + where);
  });
  auto ctx = Context::cpu();
  const float v[] = {1, 5, 5, 2, -1, 0};
  const Tensor x = ctx->from_floats({2, 3}, v);
  EXPECT_EQ(floats(argmax(x, -1)), (std::vector<float>{1, 0}));  // the first of equal maxima
  EXPECT_EQ(floats(argmax(x, 0)), (std::vector<float>{1, 0, 0}));
  EXPECT_EQ(floats(cumsum(x, 1)), (std::vector<float>{1, 6, 11, 2, 1, 1}));
  EXPECT_EQ(floats(reduce_mean(x, 1)), (std::vector<float>{11.0f / 3, 1.0f / 3}));
  const int32_t d[] = {2, 0, 3};
  const Tensor durations = ctx->from_bytes({3}, DType::I32, {reinterpret_cast<const uint8_t*>(d), sizeof d});
  EXPECT_EQ(floats(cumsum(durations, 0)), (std::vector<float>{2, 2, 5}));
}

// A float normalisation's error grows as the row's spread shrinks against its values: the mean carries about
// n * FLT_EPSILON * max|x| of rounding, and x - mean is divided by the standard deviation. The reference sums in
// double, so the bound for a whole tensor of rows is that worst case (never below 2e-5).
float norm_tolerance(const Tensor& rows) {
  const std::vector<float> v = floats(rows);
  const int64_t c = rows.dim(-1);
  double worst = 0;
  for (size_t r = 0; r < v.size(); r += static_cast<size_t>(c)) {
    double mean = 0, var = 0, peak = 0;
    for (int64_t i = 0; i < c; ++i) mean += v[r + static_cast<size_t>(i)];
    mean /= static_cast<double>(c);
    for (int64_t i = 0; i < c; ++i) {
      const double x = v[r + static_cast<size_t>(i)];
      var += (x - mean) * (x - mean);
      peak = std::max(peak, std::abs(x));
    }
    const double sd = std::sqrt(var / static_cast<double>(c) + 1e-5);
    worst = std::max(worst, 4.0 * static_cast<double>(c) * FLT_EPSILON * peak / sd);
  }
  return static_cast<float>(std::max(2e-5, worst));
}

TEST(NnOps, NormsMatchReference) {
  Backends b;
  b.each([&](Context& ctx, const std::string& where) {
    const int64_t groups = rand_int(1, 4), c = groups * rand_int(1, 5), t = rand_int(2, 333);
    const Tensor x = rand_tensor(ctx, {c, t}, -4.0f, 6.0f);
    const Tensor g = rand_tensor(ctx, {c}), be = rand_tensor(ctx, {c});
    const Tensor rows = rand_tensor(ctx, {t, c}, -4.0f, 6.0f);
    const float tol = norm_tolerance(rows);
    expect_close(layer_norm(rows, g, be, 1e-5f), ref::layer_norm(rows, g, be, 1e-5f), tol, 2e-5f,
                 "layer_norm " + where);
    expect_close(layer_norm(rows, {}, {}, 1e-5f), ref::layer_norm(rows, {}, {}, 1e-5f), tol, 2e-5f,
                 "layer_norm plain " + where);
    expect_close(rms_norm(rows, g, 1e-6f), ref::rms_norm(rows, g, 1e-6f), 2e-5f, 2e-5f, "rms_norm " + where);
    expect_close(group_norm(x, static_cast<int>(groups), g, be, 1e-5f),
                 ref::group_norm(x, static_cast<int>(groups), g, be, 1e-5f), 2e-5f, 2e-5f,
                 "group_norm " + where);
    expect_close(instance_norm(x, g, be, 1e-5f), ref::group_norm(x, static_cast<int>(c), g, be, 1e-5f), 2e-5f,
                 2e-5f, "instance_norm " + where);
    // AdaIN = instance norm with gamma + 1.
    expect_close(adain(x, g, be, 1e-5f), ref::group_norm(x, static_cast<int>(c), scale(g, 1, 1), be, 1e-5f),
                 2e-5f, 2e-5f, "adain " + where);
  });
  // By hand: [1, 2, 3, 4] normalised (eps 0): mean 2.5, var 1.25.
  auto ctx = Context::cpu();
  const float v[] = {1, 2, 3, 4};
  const std::vector<float> y = floats(layer_norm(ctx->from_floats({1, 4}, v), {}, {}, 0.0f));
  const float s = 1.0f / std::sqrt(1.25f);
  EXPECT_NEAR(y[0], -1.5f * s, 1e-6f);
  EXPECT_NEAR(y[3], 1.5f * s, 1e-6f);
}

}  // namespace
}  // namespace sotto::nn
