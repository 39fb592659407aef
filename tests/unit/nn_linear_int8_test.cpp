// Op check of linear_int8_affine (src/nn/linear_int8.cpp): the CPU path (AVX2 and portable, 1 and 3 threads)
// on fresh random inputs of odd sizes (rows not a multiple of the kernel's 4, K not of its 8 or 16), with the
// scale and offset Moonshine's files use: bit for bit its own algorithm with a scalar product
// (ref::linear_int8_affine_quantized_x: x quantized per row to int16, exact integer sums), and within x's
// rounding bound of the float reference and of linear() on the dequantized weight.
#include <cmath>
#include <vector>

#include "nn/cpu.h"
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
      const Tensor x3 = rand_tensor(ctx, {2, m, k});
      const Tensor bias = rand_tensor(ctx, {n});
      const float scale = 0.003f + 0.02f * static_cast<float>(rand_int(0, 100)) / 100.0f;
      const float offset = 0.3f * static_cast<float>(rand_int(-100, 100)) / 100.0f;
      // x is rounded to int16 per row: |x error| <= max|x| / 65534 <= 1 / 65534 an element, times |w| <=
      // 128 * 0.023 + 0.3 < 3.3, K of them (the bound; the float rounding, ~sqrt(K) ulp, is far below).
      const float tol = 3.3f * static_cast<float>(k) / 65534.0f + 1e-5f;
      expect_close(linear_int8_affine(x, w, scale, offset, bias),
                   ref::linear_int8_affine_quantized_x(x, w, scale, offset, bias), 0, 0,
                   "linear_int8_affine vs its scalar product " + where);
      expect_close(linear_int8_affine(x3, w, scale, offset),
                   ref::linear_int8_affine_quantized_x(x3, w, scale, offset), 0, 0,
                   "linear_int8_affine 3-D vs its scalar product " + where);
      expect_close(linear_int8_affine(x, w, scale, offset, bias),
                   ref::linear_int8_affine(x, w, scale, offset, bias), tol, 1e-5f,
                   "linear_int8_affine " + where);
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

// The integer sums at their extremes: K past the kernels' 1024-column int32 chunks, every weight -128 and x
// at +-max (each product 128 x 32767), so a lane or a total kept in int32 too long would wrap; a row of zeros
// (scale 0) and a row holding NaN (its outputs NaN, as a float product's, the other rows untouched).
TEST(NnLinearInt8, AffineInt8IntegerSumsDoNotOverflow) {
  Backends b;
  b.each([&](Context& ctx, const std::string& where) {
    const int64_t m = 4, k = 4100, n = 9;
    std::vector<float> xv(static_cast<size_t>(m * k));
    for (int64_t t = 0; t < k; ++t) {
      xv[static_cast<size_t>(t)] = -2.5f;                                  // all at -max
      xv[static_cast<size_t>(k + t)] = t % 2 ? 1.0f : -1.0f;               // alternating
      xv[static_cast<size_t>(3 * k + t)] = t == 7 ? std::nanf("") : 1.0f;  // NaN
    }
    std::vector<uint8_t> wv(static_cast<size_t>(n * k), 0x80);  // -128
    for (int64_t t = 0; t < k; ++t) wv[static_cast<size_t>(k + t)] = static_cast<uint8_t>(t % 2 ? 127 : 0x80);
    const Tensor x = ctx.from_floats({m, k}, xv), w = ctx.from_bytes({n, k}, DType::I8, wv);
    const Tensor got = linear_int8_affine(x, w, 0.01f, 0.0f);
    const Tensor want = ref::linear_int8_affine(x, w, 0.01f, 0.0f);
    for (int64_t j = 0; j < n; ++j) {
      for (int64_t i = 0; i < 3; ++i)
        EXPECT_NEAR(got.f32()[i * n + j], want.f32()[i * n + j],
                    1e-4 * std::fabs(want.f32()[i * n + j]) + 1e-6)
            << where << " row " << i << " column " << j;
      EXPECT_TRUE(std::isnan(got.f32()[3 * n + j])) << where << " column " << j;
    }
    EXPECT_FLOAT_EQ(got.f32()[0], 2.5f * 128.0f * 0.01f * static_cast<float>(k)) << where;
    EXPECT_EQ(got.f32()[2 * n], 0.0f) << where;
  });
}

// The packed form for many rows (cpu::linear_int8_affine_prepacked): bit for bit the same algorithm's scalar
// product on odd sizes (rows not a multiple of the 5-row tile or the 60-row block, K odd, K past the 256-pair
// int32 blocks), and at the integer extremes (every weight -128, x at +-max over 4100 columns, a NaN row).
TEST(NnLinearInt8, PrepackedMatchesReference) {
  Backends b;
  b.each([&](Context& ctx, const std::string& where) {
    if (ctx.backend() != Backend::Cpu) return;
    for (int rep = 0; rep < 4; ++rep) {
      const int64_t m = rand_int(1, 140), k = rep == 0 ? rand_int(513, 1400) : rand_int(1, 300),
                    n = 8 * rand_int(1, 9);
      const Tensor x = rand_tensor(ctx, {m, k}), w = rand_int8(ctx, {n, k}, DType::I8);
      const Tensor bias = rand_tensor(ctx, {n});
      const Tensor panels = cpu::pack_weight_int8(ctx, w);
      expect_close(cpu::linear_int8_affine_prepacked(x, panels, 0.01f, -0.2f, bias),
                   ref::linear_int8_affine_quantized_x(x, w, 0.01f, -0.2f, bias), 0, 0,
                   "linear_int8_affine_prepacked vs its scalar product " + where);
      const Tensor x3 = rand_tensor(ctx, {2, m, k});
      expect_close(cpu::linear_int8_affine_prepacked(x3, panels, 0.02f, 0.1f),
                   ref::linear_int8_affine_quantized_x(x3, w, 0.02f, 0.1f), 0, 0,
                   "linear_int8_affine_prepacked 3-D " + where);
    }
    const int64_t m = 7, k = 4101, n = 16;
    std::vector<float> xv(static_cast<size_t>(m * k), 1.0f);
    for (int64_t t = 0; t < k; ++t) {
      xv[static_cast<size_t>(t)] = -2.5f;
      xv[static_cast<size_t>(3 * k + t)] = t == 7 ? std::nanf("") : 1.0f;
    }
    const Tensor x = ctx.from_floats({m, k}, xv);
    const Tensor w =
        ctx.from_bytes({n, k}, DType::I8, std::vector<uint8_t>(static_cast<size_t>(n * k), 0x80));
    const Tensor got = cpu::linear_int8_affine_prepacked(x, cpu::pack_weight_int8(ctx, w), 0.01f, 0.0f);
    const Tensor want = ref::linear_int8_affine_quantized_x(x, w, 0.01f, 0.0f);
    for (int64_t i = 0; i < m * n; ++i)
      if (i / n != 3) EXPECT_EQ(got.f32()[i], want.f32()[i]) << where << " output " << i;
    for (int64_t j = 0; j < n; ++j) EXPECT_TRUE(std::isnan(got.f32()[3 * n + j])) << where;
    EXPECT_FLOAT_EQ(got.f32()[0], 2.5f * 128.0f * 0.01f * static_cast<float>(k)) << where;
  });
}

}  // namespace
}  // namespace sotto::nn
