// The op layer's GPU backend against the CPU references on fresh random inputs of odd sizes (SwiftShader in CI,
// skipped with the reason where this machine has no WebGPU): element-wise arithmetic, activations, linear, conv1d,
// LSTM, Moonshine's ops; a repeated forward pass makes no new GPU objects; ops without a GPU kernel fail the read
// in one line.
#include <array>

#include "gpu/device.h"
#include "gpu_test_support.h"
#include "nn/fused.h"
#include "nn/gpu_ops.h"
#include "nn/gpu_recorder.h"
#include "nn_test_support.h"

namespace sotto::nn {
namespace {

using testing::expect_close;
using testing::floats;
using testing::rand_int;
using testing::rand_int8;
using testing::rand_tensor;

using testing::download;
using testing::upload;

TEST(NnGpu, ElementwiseActivationsAndLinearMatchTheReference) {
  gpu::Device* device = sotto::testing::open_test_device();
  if (!device) GTEST_SKIP() << sotto::testing::gpu_skip_reason();
  auto cpu = Context::cpu();
  auto gpu = Context::webgpu(*device);
  const int64_t rows = rand_int(1, 9), cols = rand_int(1, 300), k = rand_int(1, 200), n = rand_int(1, 70);
  const Tensor a = rand_tensor(*cpu, {rows, cols}, -3.0f, 3.0f),
               b = rand_tensor(*cpu, {rows, cols}, 0.5f, 2.0f);
  const Tensor row = rand_tensor(*cpu, {cols}, 0.5f, 2.0f);
  const Tensor ga = upload(*gpu, a), gb = upload(*gpu, b), grow = upload(*gpu, row);
  expect_close(download(*cpu, *gpu, add(ga, gb)), ref::binary(a, b, '+'), 0, 0, "gpu add");
  expect_close(download(*cpu, *gpu, sub(ga, grow)), ref::binary(a, row, '-'), 0, 0, "gpu sub row");
  expect_close(download(*cpu, *gpu, mul(ga, gb)), ref::binary(a, b, '*'), 0, 0, "gpu mul");
  expect_close(download(*cpu, *gpu, div(ga, grow)), ref::binary(a, row, '/'), 0, 2e-7f, "gpu div row");
  expect_close(download(*cpu, *gpu, scale(ga, 0.5f, -1.0f)), scale(a, 0.5f, -1.0f), 0, 0, "gpu scale");
  for (Act act : {Act::Identity, Act::Relu, Act::LeakyRelu, Act::Sigmoid, Act::Tanh, Act::Silu, Act::GeluErf,
                  Act::GeluTanh, Act::Exp, Act::Sin, Act::Cos, Act::Atan, Act::Abs, Act::Square})
    // WGSL promises sin and cos to 2^-11 absolute on [-pi, pi] (SwiftShader is near that); the rest hold 2e-6.
    expect_close(download(*cpu, *gpu, activation(ga, act, 0.1f)), ref::activation(a, act, 0.1f),
                 act == Act::Sin || act == Act::Cos ? 4.9e-4f : 2e-6f, 1e-5f,
                 "gpu activation " + std::to_string(static_cast<int>(act)));
  const Tensor x = rand_tensor(*cpu, {rows, k}), w = rand_tensor(*cpu, {n, k}), bias = rand_tensor(*cpu, {n});
  expect_close(download(*cpu, *gpu, linear(upload(*gpu, x), upload(*gpu, w), upload(*gpu, bias))),
               ref::linear(x, w, bias), 1e-5f * static_cast<float>(k), 1e-5f, "gpu linear");
  expect_close(download(*cpu, *gpu, linear(upload(*gpu, x), upload(*gpu, w))), ref::linear(x, w), 1e-5f * k,
               1e-5f, "gpu linear without bias");
  // Several output blocks each way, partial ones at the edges.
  const int64_t m2 = rand_int(33, 100), n2 = rand_int(33, 100);
  const Tensor x2 = rand_tensor(*cpu, {m2, k}), w2 = rand_tensor(*cpu, {n2, k}),
               bias2 = rand_tensor(*cpu, {n2});
  expect_close(download(*cpu, *gpu, linear(upload(*gpu, x2), upload(*gpu, w2), upload(*gpu, bias2))),
               ref::linear(x2, w2, bias2), 1e-5f * static_cast<float>(k), 1e-5f, "gpu linear blocks");
  // Few blocks and a long K: split into K ranges (up to 8 here, the last one short) summed by a second kernel.
  const int64_t m4 = rand_int(60, 100), n4 = rand_int(65, 200), k4 = rand_int(600, 1100);
  const Tensor x4 = rand_tensor(*cpu, {m4, k4}), w4 = rand_tensor(*cpu, {n4, k4}),
               bias4 = rand_tensor(*cpu, {n4});
  expect_close(download(*cpu, *gpu, linear(upload(*gpu, x4), upload(*gpu, w4), upload(*gpu, bias4))),
               ref::linear(x4, w4, bias4), 1e-5f * static_cast<float>(k4), 1e-5f, "gpu linear split K");
  expect_close(download(*cpu, *gpu, linear(upload(*gpu, x4), upload(*gpu, w4))), ref::linear(x4, w4),
               1e-5f * static_cast<float>(k4), 1e-5f, "gpu linear split K without bias");
  // Many blocks (no split), a short K.
  const int64_t m3 = rand_int(700, 760), n3 = rand_int(730, 790), k3 = rand_int(1, 40);
  const Tensor x3 = rand_tensor(*cpu, {m3, k3}), w3 = rand_tensor(*cpu, {n3, k3}),
               bias3 = rand_tensor(*cpu, {n3});
  expect_close(download(*cpu, *gpu, linear(upload(*gpu, x3), upload(*gpu, w3), upload(*gpu, bias3))),
               ref::linear(x3, w3, bias3), 1e-5f * static_cast<float>(k3), 1e-5f, "gpu linear large blocks");
  const Tensor gamma = rand_tensor(*cpu, {cols}), beta = rand_tensor(*cpu, {cols});
  expect_close(download(*cpu, *gpu, softmax(ga, -1)), ref::softmax(a, -1), 1e-6f, 1e-5f, "gpu softmax");
  expect_close(download(*cpu, *gpu, layer_norm(ga, upload(*gpu, gamma), upload(*gpu, beta), 1e-5f)),
               ref::layer_norm(a, gamma, beta, 1e-5f), 2e-5f, 2e-5f, "gpu layer_norm");
  expect_close(download(*cpu, *gpu, layer_norm(ga, {}, {}, 1e-5f)), ref::layer_norm(a, {}, {}, 1e-5f), 2e-5f,
               2e-5f, "gpu layer_norm plain");
  // A small network, chained without reading in between: sigmoid(linear(relu(x), w) + bias) * 2.
  const Tensor chain =
      scale(sigmoid(add(linear(relu(upload(*gpu, x)), upload(*gpu, w)), upload(*gpu, bias))), 2.0f);
  const Tensor want = scale(
      ref::activation(ref::binary(ref::linear(ref::activation(x, Act::Relu), w), bias, '+'), Act::Sigmoid),
      2.0f);
  expect_close(download(*cpu, *gpu, chain), want, 1e-5f, 1e-5f, "gpu chain");
}

// Every f32 product kernel (gpu_linear.cpp: the 64 x 64 blocks with split-K, the 32 x 32 and 16 x 32 blocks
// with K sliced in the workgroup, each pinned in turn, then the rule's own choice) with every epilogue of
// linear_fused_f32 (norm, bias, rope on all or the leading columns, tanh, SiLU, GELU, scale, residual, stacked
// output)
// against the scalar reference (ref::linear, rope, activation, add), on odd sizes: a
// few rows (the row kernel), fewer rows than a block, K below one chunk of 32 and not a multiple of 4 (scalar
// loads), K a multiple of 4 (vec4 loads) with partial blocks each way, and a long K (split 4-8 ways under the
// 64 x 64 kernel). Tolerance as plain linear's: 1e-5 * K absolute (inputs in [-1, 1]: each of K products is
// rounded at ~6e-8 of a sum up to ~sqrt(K)), 1e-5 relative; the kernels' GELU (erf to 1.5e-7) adds < 1e-6.
TEST(NnGpu, EveryLinearKernelAndEpilogueMatchesTheReference) {
  gpu::Device* device = sotto::testing::open_test_device();
  if (!device) GTEST_SKIP() << sotto::testing::gpu_skip_reason();
  auto cpu = Context::cpu();
  auto gpu = Context::webgpu(*device);
  struct Size {
    int64_t m, n, k;
  };
  const Size sizes[] = {
      {rand_int(1, 15), rand_int(1, 70), rand_int(1, 90)},
      {rand_int(16, 31), rand_int(5, 31), rand_int(1, 31)},
      {rand_int(33, 100), rand_int(33, 100), 4 * rand_int(20, 70) + (rand_int(0, 1) ? 0 : 1)},
      {rand_int(60, 100), rand_int(65, 150), rand_int(600, 900)},
      {rand_int(65, 128), rand_int(33, 200), 4 * rand_int(64, 300)},
  };
  struct Plan {
    gpu_ops::LinearKernel kernel;
    int slice_rows;
    std::array<int, 4> tall = {8, 3, 8, 264};  // columns / 4, slices, ks a slice, split target
  };
  for (const Plan plan :
       {Plan{gpu_ops::LinearKernel::Tiled64, 32}, Plan{gpu_ops::LinearKernel::SliceK, 32},
        Plan{gpu_ops::LinearKernel::SliceK, 16}, Plan{gpu_ops::LinearKernel::SliceK, 0},
        Plan{gpu_ops::LinearKernel::Tall, 0}, Plan{gpu_ops::LinearKernel::Tall, 0, {16, 1, 16, 1}},
        Plan{gpu_ops::LinearKernel::Tall, 0, {4, 4, 8, 528}},
        Plan{gpu_ops::LinearKernel::Tall, 0, {8, 2, 16, 132}}, Plan{gpu_ops::LinearKernel::Auto, 0}}) {
    const gpu_ops::LinearKernel kernel = plan.kernel;
    gpu_ops::set_linear_kernel(kernel);
    gpu_ops::set_linear_slice_rows(plan.slice_rows);
    gpu_ops::set_linear_tall_shape(plan.tall[0], plan.tall[1], plan.tall[2], plan.tall[3]);
    for (const Size& s : sizes) {
      const Tensor x = rand_tensor(*cpu, {s.m, s.k}), w = rand_tensor(*cpu, {s.n, s.k}),
                   b = rand_tensor(*cpu, {s.n}), res = rand_tensor(*cpu, {s.m, s.n});
      const Tensor gx = upload(*gpu, x), gw = upload(*gpu, w), gb = upload(*gpu, b), gres = upload(*gpu, res);
      const float atol = 1e-5f * static_cast<float>(s.k);
      const std::string what = "gpu linear kernel " + std::to_string(static_cast<int>(kernel)) + "/" +
                               std::to_string(plan.slice_rows) + "/tall " + std::to_string(plan.tall[0]) +
                               "," + std::to_string(plan.tall[1]) + "," + std::to_string(plan.tall[2]) + "," +
                               std::to_string(plan.tall[3]) + " " + std::to_string(s.m) + "x" +
                               std::to_string(s.n) + "x" + std::to_string(s.k);
      expect_close(download(*cpu, *gpu, linear(gx, gw)), ref::linear(x, w), atol, 1e-5f, what);
      expect_close(download(*cpu, *gpu, linear_fused_f32(gx, gw, gb, {.act = Act::GeluErf})),
                   ref::linear_fused_f32(x, w, b, {.act = Act::GeluErf}), atol, 1e-5f, what + " bias gelu");
      expect_close(download(*cpu, *gpu, linear_fused_f32(gx, gw, gb, {.act = Act::Tanh})),
                   ref::linear_fused_f32(x, w, b, {.act = Act::Tanh}), atol, 1e-5f, what + " bias tanh");
      expect_close(download(*cpu, *gpu, linear_fused_f32(gx, gw, {}, {.residual = gres})),
                   ref::linear_fused_f32(x, w, {}, {.residual = res}), atol, 1e-5f, what + " residual");
      expect_close(
          download(*cpu, *gpu, linear_fused_f32(gx, gw, gb, {.act = Act::GeluErf, .residual = gres})),
          ref::linear_fused_f32(x, w, b, {.act = Act::GeluErf, .residual = res}), atol, 1e-5f,
          what + " bias gelu residual");
      // SiLU, then half the output before the residual (Parakeet's half-step feed-forward's second product
      // takes only the scale; its first the SiLU).
      expect_close(
          download(*cpu, *gpu,
                   linear_fused_f32(gx, gw, gb, {.act = Act::Silu, .scale = 0.5f, .residual = gres})),
          ref::linear_fused_f32(x, w, b, {.act = Act::Silu, .scale = 0.5f, .residual = res}), atol, 1e-5f,
          what + " bias silu scale residual");
      // The layer norm of x's rows first (Moonshine's norms before q / k / v and fc1): normalised x is within
      // sqrt(3) of 0 here (uniform inputs), so 2 x atol.
      const Tensor gamma = rand_tensor(*cpu, {s.k});
      const LinearFusedF32 normed = {
          .norm_gamma = gamma, .norm_eps = 1e-5f, .act = Act::GeluErf, .residual = res};
      LinearFusedF32 gnormed = normed;
      gnormed.norm_gamma = upload(*gpu, gamma);
      gnormed.residual = gres;
      expect_close(download(*cpu, *gpu, linear_fused_f32(gx, gw, gb, gnormed)),
                   ref::linear_fused_f32(x, w, b, normed), 2.0f * atol, 1e-5f,
                   what + " norm bias gelu residual");
      // The rotary embedding (Moonshine's q and k, after the norm) on N = heads x an even head width, its first
      // rotary_dim dims rotating: each output mixes two within 2 x atol, so 3 x atol.
      const int heads = static_cast<int>(rand_int(1, 4)), head_dim = 2 * static_cast<int>(rand_int(2, 12));
      const int rotary_dim = 2 * static_cast<int>(rand_int(1, head_dim / 2));
      const Tensor wr = rand_tensor(*cpu, {heads * head_dim, s.k}),
                   br = rand_tensor(*cpu, {heads * head_dim});
      const LinearFusedF32 rope = {.rope_heads = heads, .rotary_dim = rotary_dim, .rope_base = 10000.0f};
      LinearFusedF32 grope = rope;
      grope.norm_gamma = upload(*gpu, gamma);
      LinearFusedF32 rope_normed = rope;
      rope_normed.norm_gamma = gamma;
      expect_close(download(*cpu, *gpu, linear_fused_f32(gx, upload(*gpu, wr), upload(*gpu, br), grope)),
                   ref::linear_fused_f32(x, wr, br, rope_normed), 3.0f * atol, 1e-5f,
                   what + " rope " + std::to_string(heads) + "x" + std::to_string(head_dim) + " rotating " +
                       std::to_string(rotary_dim));
      // The rotary embedding on the leading columns only (a stacked q / k / v product rotating q and k), the
      // rest (1-30 columns, even) as they come.
      const int64_t plain = 2 * rand_int(1, 15);
      const Tensor wp = rand_tensor(*cpu, {heads * head_dim + plain, s.k});
      LinearFusedF32 leading = rope_normed;
      leading.rope_columns = heads * head_dim;
      LinearFusedF32 gleading = grope;
      gleading.rope_columns = heads * head_dim;
      expect_close(download(*cpu, *gpu, linear_fused_f32(gx, upload(*gpu, wp), {}, gleading)),
                   ref::linear_fused_f32(x, wp, {}, leading), 3.0f * atol, 1e-5f,
                   what + " rope on " + std::to_string(heads * head_dim) + " of " +
                       std::to_string(heads * head_dim + plain) + " columns");
      // A stacked output (blocks of `cols` columns each padded to a 256-byte multiple of rows): each block's
      // first m rows, read through Tensor::rows views at the blocks' offsets, with bias, GELU and a residual.
      const int64_t cols = rand_int(1, 40), blocks = rand_int(2, 5);
      const Tensor ws = rand_tensor(*cpu, {blocks * cols, s.k}), bs = rand_tensor(*cpu, {blocks * cols}),
                   rs = rand_tensor(*cpu, {s.m, blocks * cols});
      const Tensor gs =
          linear_fused_f32(gx, upload(*gpu, ws), upload(*gpu, bs),
                           {.act = Act::GeluErf, .residual = upload(*gpu, rs), .stack_columns = cols});
      const Tensor cs =
          ref::linear_fused_f32(x, ws, bs, {.act = Act::GeluErf, .residual = rs, .stack_columns = cols});
      const int64_t rows = stacked_rows(s.m, cols);
      ASSERT_EQ(gs.shape(), (Shape{blocks, rows, cols}));
      ASSERT_EQ(cs.shape(), gs.shape());
      EXPECT_EQ(rows * cols * 4 % 256, 0);
      EXPECT_LT(rows - s.m, 64);
      for (int64_t j = 0; j < blocks; ++j)
        expect_close(download(*cpu, *gpu, gs.reshape({blocks * rows, cols}).rows(j * rows, j * rows + s.m)),
                     cs.reshape({blocks * rows, cols}).rows(j * rows, j * rows + s.m), atol, 1e-5f,
                     what + " stacked in blocks of " + std::to_string(cols) + ", block " + std::to_string(j));
    }
  }
  gpu_ops::set_linear_kernel(gpu_ops::LinearKernel::Auto);
  gpu_ops::set_linear_slice_rows(0);
  gpu_ops::set_linear_tall_shape(8, 3, 8, 264);
  // The CPU op is the reference's arithmetic (nn::linear, then activation and add).
  const Tensor x = rand_tensor(*cpu, {7, 19}), w = rand_tensor(*cpu, {11, 19}), b = rand_tensor(*cpu, {11}),
               res = rand_tensor(*cpu, {7, 11});
  expect_close(linear_fused_f32(x, w, b, {.act = Act::GeluErf, .residual = res}),
               ref::linear_fused_f32(x, w, b, {.act = Act::GeluErf, .residual = res}), 1e-6f, 1e-6f,
               "cpu linear_fused_f32");
}

// conv1d_fused_f32 (the activation in the product's store, the output [T', Cout] or [Cout, T']) against the
// reference (ref::conv1d, activation, transpose): a convolution large enough for the unrolled product (Moonshine's
// stem, smaller) and a small one (the direct kernel, then the activation and transpose kernels). Tolerance as
// linear's over Cin x K products.
TEST(NnGpu, FusedConv1dMatchesTheReference) {
  gpu::Device* device = sotto::testing::open_test_device();
  if (!device) GTEST_SKIP() << sotto::testing::gpu_skip_reason();
  auto cpu = Context::cpu();
  auto gpu = Context::webgpu(*device);
  for (const bool large : {true, false}) {
    // Large: at least 100 x 650 x 40 x 3 = 7.8 M multiply-adds (the product takes >= 4 M).
    const int64_t cin = large ? rand_int(40, 60) : rand_int(1, 5), kernel = rand_int(3, 7);
    const int64_t cout = large ? rand_int(100, 130) : rand_int(1, 9),
                  length = large ? rand_int(1300, 1800) : 50;
    const int stride = static_cast<int>(rand_int(1, large ? 2 : 3)),
              padding = static_cast<int>(rand_int(0, 2));
    const Tensor x = rand_tensor(*cpu, {cin, length}), w = rand_tensor(*cpu, {cout, cin, kernel}),
                 b = rand_tensor(*cpu, {cout});
    const Conv1dOptions o = {.stride = stride, .padding = padding};
    for (const Act act : {Act::Identity, Act::Tanh, Act::GeluErf})
      for (const bool time_major : {false, true}) {
        const Conv1dFusedF32 f = {.act = act, .time_major = time_major};
        expect_close(
            download(*cpu, *gpu, conv1d_fused_f32(upload(*gpu, x), upload(*gpu, w), upload(*gpu, b), o, f)),
            ref::conv1d_fused_f32(x, w, b, o, f), 1e-5f * static_cast<float>(cin * kernel), 1e-5f,
            "gpu conv1d_fused_f32 " + std::string(large ? "large" : "small") + " act " +
                std::to_string(static_cast<int>(act)) + (time_major ? " time-major" : ""));
      }
  }
}

// The rule's plans in dispatches, for the shapes they were made for: Moonshine's encoder at 10 s (415 rows,
// d 416, FFN 1664) one dispatch a product (32 x 32 blocks, K sliced in the workgroup); Parakeet's 75-row
// product with K 4096 keeps split-K (two); a product with enough 64 x 64 blocks takes one.
TEST(NnGpu, LinearRuleTakesOneDispatchForMoonshinesEncoderProducts) {
  gpu::Device* device = sotto::testing::open_test_device();
  if (!device) GTEST_SKIP() << sotto::testing::gpu_skip_reason();
  auto gpu = Context::webgpu(*device);
  gpu_ops::set_linear_kernel(gpu_ops::LinearKernel::Auto);
  auto dispatches = [&](int64_t m, int64_t n, int64_t k) {
    const Tensor x = gpu->empty({m, k}), w = gpu->empty({n, k});
    const uint64_t before = gpu->gpu()->dispatches_run();
    EXPECT_TRUE(
        gpu->to_floats(gpu_ops::slice(linear_fused_f32(x, w, {}, {.act = Act::GeluErf}), 0, 0, 1)).ok());
    return gpu->gpu()->dispatches_run() - before - 1;  // less the slice
  };
  EXPECT_EQ(dispatches(415, 416, 416), 1u);
  EXPECT_EQ(dispatches(415, 1664, 416), 1u);
  EXPECT_EQ(dispatches(415, 416, 1664), 1u);
  EXPECT_EQ(dispatches(75, 1024, 4096), 2u);
  EXPECT_EQ(dispatches(700, 800, 32), 1u);
}

TEST(NnGpu, ConvLstmPadSliceMatchTheReference) {
  gpu::Device* device = sotto::testing::open_test_device();
  if (!device) GTEST_SKIP() << sotto::testing::gpu_skip_reason();
  auto cpu = Context::cpu();
  auto gpu = Context::webgpu(*device);
  for (int rep = 0; rep < 3; ++rep) {
    const int groups = static_cast<int>(rand_int(1, 2));
    const int64_t in_g = rand_int(1, 9), out_g = rand_int(1, 7), k = rand_int(1, 5), t = rand_int(k * 3, 90);
    const Conv1dOptions o{.stride = static_cast<int>(rand_int(1, 3)),
                          .padding = static_cast<int>(rand_int(0, 2)),
                          .dilation = static_cast<int>(rand_int(1, 2)),
                          .groups = groups,
                          .padding_end = rep == 2 ? 0 : -1};
    const Tensor x = rand_tensor(*cpu, {groups * in_g, t}), w = rand_tensor(*cpu, {groups * out_g, in_g, k});
    const Tensor bias = rand_tensor(*cpu, {groups * out_g});
    expect_close(download(*cpu, *gpu, conv1d(upload(*gpu, x), upload(*gpu, w), upload(*gpu, bias), o)),
                 ref::conv1d(x, w, bias, o), 1e-5f * static_cast<float>(in_g * k), 1e-5f, "gpu conv1d");
    const int64_t before = rand_int(0, t - 1), after = rand_int(0, t - 1);
    expect_close(download(*cpu, *gpu, pad_reflect(upload(*gpu, x), 1, before, after)),
                 pad_reflect(x, 1, before, after), 0, 0, "gpu pad_reflect");
    const int64_t b0 = rand_int(0, groups * in_g - 1), b1 = rand_int(b0, groups * in_g);
    expect_close(download(*cpu, *gpu, slice(upload(*gpu, x), 0, b0, b1)), slice(x, 0, b0, b1), 0, 0,
                 "gpu slice");
  }
  {
    // A convolution large enough (over 2^22 multiply-adds, groups 1) for the unrolled input times the tiled
    // product, with several 32 x 32 blocks each way and a K that is no multiple of the 16-wide chunks.
    const int64_t cin = rand_int(40, 61), cout = rand_int(60, 75), k = rand_int(5, 7), t = rand_int(500, 600);
    const Conv1dOptions o{.stride = static_cast<int>(rand_int(1, 3)),
                          .padding = static_cast<int>(rand_int(0, 3))};
    const Tensor x = rand_tensor(*cpu, {cin, t}), w = rand_tensor(*cpu, {cout, cin, k}),
                 bias = rand_tensor(*cpu, {cout});
    expect_close(download(*cpu, *gpu, conv1d(upload(*gpu, x), upload(*gpu, w), upload(*gpu, bias), o)),
                 ref::conv1d(x, w, bias, o), 1e-5f * static_cast<float>(cin * k), 1e-5f,
                 "gpu conv1d unrolled");
  }
  const int64_t in = rand_int(1, 30), h = rand_int(1, 40), steps = rand_int(1, 9);
  LstmWeights w;
  w.w_ih = rand_tensor(*cpu, {4 * h, in}, -0.5f, 0.5f);
  w.w_hh = rand_tensor(*cpu, {4 * h, h}, -0.5f, 0.5f);
  w.b = rand_tensor(*cpu, {4 * h});
  LstmWeights gw;
  gw.w_ih = upload(*gpu, w.w_ih);
  gw.w_hh = upload(*gpu, w.w_hh);
  gw.b = upload(*gpu, w.b);
  const Tensor x = rand_tensor(*cpu, {steps, in}), h0 = rand_tensor(*cpu, {h}), c0 = rand_tensor(*cpu, {h});
  for (bool reverse : {false, true}) {
    Tensor hn, cn, hr, cr;
    const Tensor y = lstm(upload(*gpu, x), gw, reverse, upload(*gpu, h0), upload(*gpu, c0), &hn, &cn);
    expect_close(download(*cpu, *gpu, y), ref::lstm(x, w, reverse, h0, c0, &hr, &cr), 1e-5f, 1e-5f,
                 "gpu lstm");
    expect_close(download(*cpu, *gpu, hn), hr, 1e-5f, 1e-5f, "gpu lstm h");
    expect_close(download(*cpu, *gpu, cn), cr, 1e-5f, 1e-5f, "gpu lstm c");
  }
}

// The same int8 / int32 tensor on the GPU context (its bytes, its quantization parameters).
Tensor upload_raw(Context& gpu, const Tensor& cpu) {
  const auto* p = cpu.data<uint8_t>();
  return gpu.from_bytes(cpu.shape(), cpu.dtype(), {p, static_cast<size_t>(cpu.bytes())})
      .with_quant(cpu.quant());
}

// Moonshine's ops: group norm, transpose, concat, partial rotary, attention (full, causal with a cache ahead of
// the queries, cross, grouped KV heads), weight-only int8 linear, embedding (f32 and int8 tables), argmax.
TEST(NnGpu, MoonshineOpsMatchTheReference) {
  gpu::Device* device = sotto::testing::open_test_device();
  if (!device) GTEST_SKIP() << sotto::testing::gpu_skip_reason();
  auto cpu = Context::cpu();
  auto gpu = Context::webgpu(*device);
  for (int rep = 0; rep < 2; ++rep) {
    // Group norm over [C, T] with 1..3 groups: two reductions of up to ~9,000 values in f32 (64 partial sums,
    // then a tree) against the reference's double: relative error of the statistics ~1e-6.
    const int groups = static_cast<int>(rand_int(1, 3));
    const int64_t channels = groups * rand_int(1, 11), length = rand_int(1, 300);
    const Tensor x = rand_tensor(*cpu, {channels, length}, -2.0f, 3.0f);
    const Tensor gamma = rand_tensor(*cpu, {channels}), beta = rand_tensor(*cpu, {channels});
    expect_close(
        download(*cpu, *gpu,
                 group_norm(upload(*gpu, x), groups, upload(*gpu, gamma), upload(*gpu, beta), 1e-5f)),
        ref::group_norm(x, groups, gamma, beta, 1e-5f), 2e-5f, 2e-5f, "gpu group_norm");
    expect_close(download(*cpu, *gpu, group_norm(upload(*gpu, x), groups, {}, {}, 1e-5f)),
                 ref::group_norm(x, groups, {}, {}, 1e-5f), 2e-5f, 2e-5f, "gpu group_norm plain");
    // One group of ~20,000 values: several chunks per group, reduced in three dispatches.
    const Tensor big = rand_tensor(*cpu, {rand_int(40, 60), rand_int(300, 500)}, -2.0f, 3.0f);
    const Tensor big_gamma = rand_tensor(*cpu, {big.dim(0)}), big_beta = rand_tensor(*cpu, {big.dim(0)});
    expect_close(
        download(*cpu, *gpu,
                 group_norm(upload(*gpu, big), 1, upload(*gpu, big_gamma), upload(*gpu, big_beta), 1e-5f)),
        ref::group_norm(big, 1, big_gamma, big_beta, 1e-5f), 2e-5f, 2e-5f, "gpu group_norm chunks");
    // Copies: exact.
    expect_close(download(*cpu, *gpu, transpose(upload(*gpu, x))), transpose(x), 0, 0, "gpu transpose");
    const Tensor x2 = rand_tensor(*cpu, {rand_int(1, 7), length}),
                 x3 = rand_tensor(*cpu, {channels, rand_int(1, 9)});
    const Tensor rows[] = {x, x2}, cols[] = {x, x3, x};
    const Tensor grows[] = {upload(*gpu, x), upload(*gpu, x2)},
                 gcols[] = {upload(*gpu, x), upload(*gpu, x3), upload(*gpu, x)};
    expect_close(download(*cpu, *gpu, concat(grows, 0)), concat(rows, 0), 0, 0, "gpu concat rows");
    expect_close(download(*cpu, *gpu, concat(gcols, -1)), concat(cols, -1), 0, 0, "gpu concat columns");

    // Rotary embedding on part of each head (odd head sizes, both pair layouts, positions past a cache). The
    // angle is exact to ~position * 2^-31 rad; what remains is the device's sin and cos on [-pi, pi] (WGSL
    // allows 2^-11 absolute, SwiftShader and real GPUs hold ~1e-6) times |x_a| + |x_b| <= 2.
    const int heads = static_cast<int>(rand_int(1, 4));
    const int64_t head_dim = 2 * rand_int(1, 13) + rand_int(0, 1), rotary = 2 * rand_int(1, head_dim / 2);
    const int64_t steps = rand_int(1, 30), position0 = rand_int(0, 400);
    const Tensor r = rand_tensor(*cpu, {steps, heads * head_dim});
    for (bool interleaved : {false, true})
      expect_close(
          download(*cpu, *gpu,
                   rope(upload(*gpu, r), heads, static_cast<int>(rotary), 10000.0f, position0, interleaved)),
          ref::rope(r, heads, static_cast<int>(rotary), 10000.0f, position0, interleaved), 4e-6f, 1e-5f,
          interleaved ? "gpu rope interleaved" : "gpu rope halves");

    // Attention: f32 dot products of up to 40 terms and a softmax over up to 60 keys against double: 1e-5.
    const int kv_heads = static_cast<int>(rand_int(1, 3)),
              q_heads = kv_heads * static_cast<int>(rand_int(1, 3));
    const int64_t d = rand_int(1, 40), tq = rand_int(1, 30), tk = tq + rand_int(0, 30);
    const Tensor q = rand_tensor(*cpu, {tq, q_heads * d}), k = rand_tensor(*cpu, {tk, kv_heads * d}),
                 v = rand_tensor(*cpu, {tk, kv_heads * d});
    for (bool causal : {false, true}) {
      const AttentionOptions o{.n_heads = q_heads, .n_kv_heads = kv_heads, .causal = causal};
      expect_close(download(*cpu, *gpu, attention(upload(*gpu, q), upload(*gpu, k), upload(*gpu, v), o)),
                   ref::attention(q, k, v, o), 1e-5f, 1e-5f,
                   causal ? "gpu attention causal" : "gpu attention");
    }
    const Tensor q1 = slice(q, 0, tq - 1, tq);  // one decoder step over a cache (and over cross keys)
    const AttentionOptions step{.n_heads = q_heads, .n_kv_heads = kv_heads, .causal = true};
    expect_close(download(*cpu, *gpu, attention(upload(*gpu, q1), upload(*gpu, k), upload(*gpu, v), step)),
                 ref::attention(q1, k, v, step), 1e-5f, 1e-5f, "gpu attention one step");
    // Long key ranges, split into blocks of 16..64 keys whose partial softmaxes are combined: one query over up
    // to ~700 keys (a decoder step's cross-attention), and many causal queries over a longer cache.
    const int64_t long_d = rand_int(1, 70), long_tq = rand_int(1, 80), long_tk = long_tq + rand_int(50, 700);
    const Tensor lq = rand_tensor(*cpu, {long_tq, q_heads * long_d}),
                 lk = rand_tensor(*cpu, {long_tk, kv_heads * long_d}),
                 lv = rand_tensor(*cpu, {long_tk, kv_heads * long_d});
    for (bool causal : {false, true}) {
      const AttentionOptions o{.n_heads = q_heads, .n_kv_heads = kv_heads, .causal = causal};
      const Tensor lq1 = slice(lq, 0, long_tq - 1, long_tq);
      expect_close(download(*cpu, *gpu, attention(upload(*gpu, lq1), upload(*gpu, lk), upload(*gpu, lv), o)),
                   ref::attention(lq1, lk, lv, o), 1e-5f, 1e-5f, "gpu attention blocks, one query");
      expect_close(download(*cpu, *gpu, attention(upload(*gpu, lq), upload(*gpu, lk), upload(*gpu, lv), o)),
                   ref::attention(lq, lk, lv, o), 1e-5f, 1e-5f, "gpu attention blocks");
    }
    // Heads of a multiple of 4 dims up to 64 take the vec4 kernel: one query over a cache of up to 64 keys (one
    // block), over ~700 keys (blocks combined), and several causal queries.
    const int64_t d4 = 4 * rand_int(1, 16), tk4 = rand_int(1, 64), long_tk4 = rand_int(65, 700);
    for (int64_t keys : {tk4, long_tk4}) {
      const int64_t queries = rand_int(1, 5);
      const Tensor q4 = rand_tensor(*cpu, {queries, q_heads * d4}),
                   k4 = rand_tensor(*cpu, {keys, kv_heads * d4}),
                   v4 = rand_tensor(*cpu, {keys, kv_heads * d4});
      const AttentionOptions o{.n_heads = q_heads, .n_kv_heads = kv_heads, .causal = queries <= keys};
      expect_close(download(*cpu, *gpu, attention(upload(*gpu, q4), upload(*gpu, k4), upload(*gpu, v4), o)),
                   ref::attention(q4, k4, v4, o), 1e-5f, 1e-5f, "gpu attention vec4");
      const Tensor q41 = slice(q4, 0, 0, 1);
      expect_close(download(*cpu, *gpu, attention(upload(*gpu, q41), upload(*gpu, k4), upload(*gpu, v4), o)),
                   ref::attention(q41, k4, v4, o), 1e-5f, 1e-5f, "gpu attention vec4, one query");
    }

    // Weight-only int8 linear (Moonshine's scale and offset ranges; the CPU op's tolerance, the same
    // algebra: scale * (x . q) + offset * sum(x) in f32, the reference in double on q * scale + offset).
    const int64_t m = rand_int(1, 9), kk = rand_int(1, 300), n = rand_int(1, 71);
    const Tensor xi = rand_tensor(*cpu, {m, kk}), w = rand_int8(*cpu, {n, kk}, DType::I8),
                 bias = rand_tensor(*cpu, {n});
    const float sc = 0.003f + 0.02f * static_cast<float>(rand_int(0, 100)) / 100.0f;
    const float offset = 0.3f * static_cast<float>(rand_int(-100, 100)) / 100.0f;
    const float tol = 4e-6f * static_cast<float>(std::sqrt(static_cast<double>(kk)) + 1.0) * 3.0f;
    const Tensor gw = upload_raw(*gpu, w);
    expect_close(
        download(*cpu, *gpu, linear_int8_affine(upload(*gpu, xi), gw, sc, offset, upload(*gpu, bias))),
        ref::linear_int8_affine(xi, w, sc, offset, bias), tol, 1e-5f, "gpu linear_int8_affine");
    expect_close(download(*cpu, *gpu, linear_int8_affine(upload(*gpu, xi), gw, sc, offset)),
                 ref::linear_int8_affine(xi, w, sc, offset), tol, 1e-5f, "gpu linear_int8_affine no bias");

    // Embedding: rows gathered exactly (f32), int8 rows dequantized (q - zero point) * scale exactly as the CPU.
    const int64_t vocab = rand_int(1, 50), dim = rand_int(1, 37), n_ids = rand_int(1, 9);
    std::vector<int32_t> id_values(static_cast<size_t>(n_ids));
    for (int32_t& id : id_values) id = static_cast<int32_t>(rand_int(0, vocab - 1));
    const Tensor ids = cpu->from_bytes(
        {n_ids}, DType::I32, {reinterpret_cast<const uint8_t*>(id_values.data()), id_values.size() * 4});
    const Tensor table = rand_tensor(*cpu, {vocab, dim});
    const Tensor qtable =
        rand_int8(*cpu, {vocab, dim}, DType::I8).with_quant({0.0173f, static_cast<int32_t>(rand_int(-3, 3))});
    expect_close(download(*cpu, *gpu, embedding(upload(*gpu, table), upload_raw(*gpu, ids))),
                 embedding(table, ids), 0, 0, "gpu embedding");
    expect_close(download(*cpu, *gpu, embedding(upload_raw(*gpu, qtable), upload_raw(*gpu, ids))),
                 embedding(qtable, ids), 0, 0, "gpu embedding int8");

    // Argmax over rows (ties: the first index, as ONNX; a repeated maximum planted in one row).
    const int64_t arows = rand_int(1, 5), an = rand_int(1, 3000);
    std::vector<float> av = floats(rand_tensor(*cpu, {arows, an}));
    if (an > 2) av[static_cast<size_t>(an - 1)] = av[1] = 2.0f;
    const Tensor a = cpu->from_floats({arows, an}, av);
    expect_close(download(*cpu, *gpu, argmax(upload(*gpu, a))), argmax(a), 0, 0, "gpu argmax");
    // Long rows (a decoder step's logits): chunks of 1,024 reduced in a second pass; the maximum planted twice
    // in different chunks, so the first must win across chunks too.
    const int64_t lrows = rand_int(1, 3), ln = rand_int(4097, 40000);
    std::vector<float> lvals = floats(rand_tensor(*cpu, {lrows, ln}));
    const auto first = static_cast<size_t>(rand_int(0, ln / 2)),
               second = static_cast<size_t>(rand_int(ln / 2 + 1, ln - 1));
    lvals[first] = lvals[second] = 3.0f;
    const Tensor la = cpu->from_floats({lrows, ln}, lvals);
    expect_close(download(*cpu, *gpu, argmax(upload(*gpu, la))), argmax(la), 0, 0, "gpu argmax chunks");
  }
}

TEST(NnGpu, RepeatedPassesMakeNoNewGpuObjects) {
  gpu::Device* device = sotto::testing::open_test_device();
  if (!device) GTEST_SKIP() << sotto::testing::gpu_skip_reason();
  auto cpu = Context::cpu();
  auto gpu = Context::webgpu(*device);
  const Tensor w = upload(*gpu, rand_tensor(*cpu, {17, 33})), bias = upload(*gpu, rand_tensor(*cpu, {17}));
  const std::vector<float> input = floats(rand_tensor(*cpu, {5, 33}));
  auto pass = [&] {
    const Tensor x = gpu->from_floats({5, 33}, input);
    auto y = gpu->to_floats(tanh(linear(x, w, bias)));
    EXPECT_TRUE(y.ok()) << y.message();
    return y.ok() ? *y : std::vector<float>{};
  };
  // The first pass makes the pipelines and buffers; the second may bind differently pooled buffers once; from
  // then on every pass binds the same buffers and replays what exists.
  const std::vector<float> first = pass();
  EXPECT_EQ(pass(), first);
  const uint64_t objects = gpu->gpu()->objects_made();
  for (int i = 0; i < 3; ++i) EXPECT_EQ(pass(), first);
  EXPECT_EQ(gpu->gpu()->objects_made(), objects);
  EXPECT_GE(gpu->gpu()->dispatches_run(), 8u);
}

TEST(NnGpu, PassesWithOtherLengthsMakeNoNewGpuObjects) {
  gpu::Device* device = sotto::testing::open_test_device();
  if (!device) GTEST_SKIP() << sotto::testing::gpu_skip_reason();
  auto cpu = Context::cpu();
  auto gpu = Context::webgpu(*device);
  const Tensor w = rand_tensor(*cpu, {17, 33}), bias = rand_tensor(*cpu, {17});
  const Tensor gw = upload(*gpu, w), gbias = upload(*gpu, bias);
  auto pass = [&](int64_t rows) {
    const Tensor x = rand_tensor(*cpu, {rows, 33});
    const Tensor y = scale(tanh(linear(upload(*gpu, x), gw, gbias)), 0.5f, static_cast<float>(rows));
    expect_close(download(*cpu, *gpu, y), scale(tanh(linear(x, w, bias)), 0.5f, static_cast<float>(rows)),
                 1e-5, 1e-5, "gpu pass of " + std::to_string(rows) + " rows");
  };
  // 40 .. 46 rows of 33 floats (5,280 .. 6,072 bytes) share one pooled size class: after two passes at the
  // longest, passes at the other lengths bind the same buffers and the same uniform slots, with other blocks.
  pass(46);
  pass(46);
  const uint64_t objects = gpu->gpu()->objects_made();
  for (int64_t rows : {40, 43, 45, 41, 46, 44, 42}) pass(rows);
  EXPECT_EQ(gpu->gpu()->objects_made(), objects);
}

TEST(NnGpu, UniformBlocksOfOneSubmissionStayApart) {
  gpu::Device* device = sotto::testing::open_test_device();
  if (!device) GTEST_SKIP() << sotto::testing::gpu_skip_reason();
  auto cpu = Context::cpu();
  auto gpu = Context::webgpu(*device);
  // 600 dispatches in one submission, each with its own block: more slots than one 64 KB chunk of the arena
  // holds (256), so a block written over another, or a chunk boundary off by one, changes the sum.
  gpu->gpu()->set_submit_every(0);
  const Tensor x = rand_tensor(*cpu, {3, 70});
  Tensor g = upload(*gpu, x), c = x;
  for (int i = 0; i < 600; ++i) {
    const float s = 1.0f + static_cast<float>(i % 7) * 0.001f, b = static_cast<float>(i) * 1e-4f;
    g = scale(g, s, b);
    c = scale(c, s, b);
  }
  expect_close(download(*cpu, *gpu, g), c, 0, 0, "600 scales in one submission");
  EXPECT_EQ(gpu->gpu()->dispatches_run(), 600u);
}

TEST(NnGpu, ReadStartedBeforeLaterWorkGivesItsValuesAndRunsThatWork) {
  gpu::Device* device = sotto::testing::open_test_device();
  if (!device) GTEST_SKIP() << sotto::testing::gpu_skip_reason();
  auto cpu = Context::cpu();
  auto gpu = Context::webgpu(*device);
  gpu->gpu()->set_submit_every(0);  // nothing runs until start_read / finish_floats submit it
  const Tensor x = rand_tensor(*cpu, {9, 31}), w = rand_tensor(*cpu, {13, 31}), b = rand_tensor(*cpu, {13});
  const Tensor y = tanh(linear(upload(*gpu, x), upload(*gpu, w), upload(*gpu, b)));
  auto started = gpu->start_read(y);
  ASSERT_TRUE(started.ok()) << started.status().message();
  const uint64_t before = gpu->gpu()->dispatches_run();
  // Recorded after the read started, on y's values: submitted by finish_floats, not waited for by the read.
  Tensor later = y;
  for (int i = 0; i < 5; ++i) later = scale(later, 0.5f, 1.0f);
  auto got = gpu->finish_floats(*started);
  ASSERT_TRUE(got.ok()) << got.status().message();
  EXPECT_EQ(gpu->gpu()->dispatches_run(), before + 5) << "finish_floats submits what was recorded since";
  const Tensor want = tanh(linear(x, w, b));
  expect_close(cpu->from_floats(want.shape(), *got), want, 1e-5, 1e-5, "the read's values");
  Tensor later_cpu = want;
  for (int i = 0; i < 5; ++i) later_cpu = scale(later_cpu, 0.5f, 1.0f);
  expect_close(download(*cpu, *gpu, later), later_cpu, 1e-5, 1e-5, "the work after the read");
  // The CPU context takes the same calls.
  auto on_cpu = cpu->start_read(want);
  ASSERT_TRUE(on_cpu.ok());
  auto cpu_values = cpu->finish_floats(*on_cpu);
  ASSERT_TRUE(cpu_values.ok());
  EXPECT_EQ(*cpu_values, floats(want));
}

TEST(NnGpu, OpsWithoutAKernelFailTheReadInOneLine) {
  gpu::Device* device = sotto::testing::open_test_device();
  if (!device) GTEST_SKIP() << sotto::testing::gpu_skip_reason();
  auto cpu = Context::cpu();
  auto gpu = Context::webgpu(*device);
  const Tensor x = upload(*gpu, rand_tensor(*cpu, {4, 6}));
  const Tensor y = relu(cumsum(add(x, x), 1));  // cumsum has no GPU kernel yet; relu after it returns at once
  auto read = gpu->to_floats(y);
  ASSERT_FALSE(read.ok());
  EXPECT_EQ(read.message(), "nn/webgpu: cumsum has no GPU kernel yet");
}

}  // namespace
}  // namespace sotto::nn
