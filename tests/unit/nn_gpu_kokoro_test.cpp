// Kokoro's GPU kernels (nn/gpu_kokoro.cpp) against the scalar references on fresh random inputs of odd sizes
// (SwiftShader in CI; skipped with the reason where this machine has no WebGPU). Tolerances: gathers and the
// integer products are exact (the int8 path: the quantized bytes equal the reference's, and each output is
// the reference's integer sum times the same float scale: at most one rounding apart where the adapter fuses the
// multiply and the bias add); float sums are in a different order than the reference's double sums, so
// 1e-5 per term; WGSL's sin holds 2^-11 absolute on [-pi, pi] and its atan 4096 ulp (both near a few float ulps
// on SwiftShader).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "gpu/device.h"
#include "gpu_test_support.h"
#include "nn/gpu_ops.h"
#include "nn/gpu_recorder.h"
#include "nn/ref.h"
#include "nn_test_support.h"

namespace sotto::nn {
namespace {

using testing::download;
using testing::expect_close;
using testing::floats;
using testing::rand_int;
using testing::rand_int8;
using testing::rand_tensor;
using testing::upload;

// An int8 / uint8 CPU tensor's bytes on the GPU, with its quantization.
Tensor upload_bytes(Context& gpu, const Tensor& t) {
  std::vector<uint8_t> bytes(static_cast<size_t>(t.elements()));
  std::memcpy(bytes.data(), t.data<uint8_t>(), bytes.size());
  Tensor g = gpu.from_bytes(t.shape(), t.dtype(), bytes);
  return t.dtype() == DType::I8 || t.dtype() == DType::U8 ? g.with_quant(t.quant()) : g;
}

TEST(NnGpuKokoro, SnakeAdainAtan2ResizeRepeatMatchTheReference) {
  gpu::Device* device = sotto::testing::open_test_device();
  if (!device) GTEST_SKIP() << sotto::testing::gpu_skip_reason();
  auto cpu = Context::cpu();
  auto gpu = Context::webgpu(*device);
  const int64_t c = rand_int(1, 13), t = rand_int(1, 301);
  const Tensor x = rand_tensor(*cpu, {c, t}, -3.0f, 3.0f), alpha = rand_tensor(*cpu, {c}, 0.5f, 1.5f);
  const Tensor gx = upload(*gpu, x);
  // |alpha x| <= 4.5: sin within ~2^-11 there, sin^2 / alpha within 2 * 2^-11 / 0.5.
  expect_close(download(*cpu, *gpu, snake(gx, upload(*gpu, alpha))), ref::snake(x, alpha), 4e-3f, 0,
               "gpu snake");

  const Tensor gamma = rand_tensor(*cpu, {c}), beta = rand_tensor(*cpu, {c});
  const Tensor one_plus = ref::binary(gamma, cpu->from_floats({1}, std::vector<float>{1.0f}), '+');
  // AdaIN's one-dispatch kernel (rows < 8,192) against the reference, and against group_norm with 1 + gamma
  // (the same sums in the same order): bit for bit on SwiftShader; within a few ulps where the driver's compiler
  // fuses a multiply-add in one kernel and not the other (NVIDIA's: 1 ulp on some elements, H100). A row past
  // 64 x 64 values too.
  for (const int64_t len : {t, rand_int(4097, 8191)}) {
    const Tensor xa = len == t ? x : rand_tensor(*cpu, {c, len}, -3.0f, 3.0f);
    const Tensor ga = upload(*gpu, gamma), ba = upload(*gpu, beta), gxa = upload(*gpu, xa);
    const Tensor got = download(*cpu, *gpu, adain(gxa, ga, ba, 1e-5f));
    expect_close(got, ref::group_norm(xa, static_cast<int>(c), one_plus, beta, 1e-5f), 2e-5f, 2e-5f,
                 "gpu adain");
    expect_close(
        got,
        download(*cpu, *gpu,
                 gpu_ops::group_norm(gxa, static_cast<int>(c), gpu_ops::scale(ga, 1.0f, 1.0f), ba, 1e-5f)),
        1e-7f, 3e-7f, "gpu adain against group_norm");
  }
  expect_close(download(*cpu, *gpu, instance_norm(gx, upload(*gpu, gamma), upload(*gpu, beta), 1e-5f)),
               ref::group_norm(x, static_cast<int>(c), gamma, beta, 1e-5f), 2e-5f, 2e-5f,
               "gpu instance_norm");

  // atan2 with both signs of x and y, and exact zeros in y.
  Tensor yv = rand_tensor(*cpu, {c, t}, -2.0f, 2.0f);
  std::vector<float> ys = floats(yv);
  for (size_t i = 0; i < ys.size(); i += 7) ys[i] = 0.0f;
  yv = cpu->from_floats({c, t}, ys);
  expect_close(download(*cpu, *gpu, atan2(upload(*gpu, yv), gx)), atan2(yv, x), 2e-6f, 2e-6f, "gpu atan2");

  for (ResizeMode mode : {ResizeMode::Nearest, ResizeMode::LinearHalfPixel, ResizeMode::LinearAlignCorners}) {
    const int64_t out_len = rand_int(1, 3 * t);
    // The same source positions and weights as the CPU op: one float lerp apart at most.
    expect_close(download(*cpu, *gpu, resize(gx, out_len, mode)), resize(x, out_len, mode), 1e-6f, 1e-6f,
                 "gpu resize " + std::to_string(static_cast<int>(mode)));
  }

  std::vector<int64_t> reps(static_cast<size_t>(c));
  for (int64_t& r : reps) r = rand_int(0, 5);
  reps[0] = 1;
  const Tensor durations =
      cpu->from_bytes({c}, DType::I64, {reinterpret_cast<const uint8_t*>(reps.data()), reps.size() * 8});
  expect_close(download(*cpu, *gpu, gpu_ops::repeat_by_durations(gx, reps)),
               repeat_by_durations(x, durations), 0, 0, "gpu repeat_by_durations");
}

TEST(NnGpuKokoro, ConvTransposeAndMatmulMatchTheReference) {
  gpu::Device* device = sotto::testing::open_test_device();
  if (!device) GTEST_SKIP() << sotto::testing::gpu_skip_reason();
  auto cpu = Context::cpu();
  auto gpu = Context::webgpu(*device);
  for (int rep = 0; rep < 6; ++rep) {
    // Kokoro's shapes in small: depthwise stride 2 (groups = channels), stride 10 / 6 upsampling, the inverse
    // STFT's stride 5 with one output channel; reps 4 and 5 (groups 1) across the tiled kernel's tiles of 64
    // positions, 16 output channels and 4 input channels.
    const int groups = rep == 0   ? static_cast<int>(rand_int(2, 9))
                       : rep >= 4 ? 1
                                  : static_cast<int>(rand_int(1, 2));
    const int64_t in_g = rep == 0 ? 1 : rep >= 4 ? rand_int(5, 30) : rand_int(1, 9);
    const int64_t out_g = rep == 0 ? 1 : rep >= 4 ? rand_int(17, 40) : rand_int(1, 7);
    const int64_t k = rand_int(1, 21), t = rep >= 4 ? rand_int(10, 60) : rand_int(1, 40);
    ConvTranspose1dOptions o;
    o.stride = static_cast<int>(rand_int(1, 10));
    o.padding = static_cast<int>(rand_int(0, std::min<int64_t>(5, (k - 1) / 2)));  // a positive length
    o.output_padding = rep == 1 ? static_cast<int>(rand_int(0, o.stride - 1)) : 0;
    o.dilation = rep == 2 ? 2 : 1;
    o.groups = groups;
    const Tensor x = rand_tensor(*cpu, {groups * in_g, t}), w = rand_tensor(*cpu, {groups * in_g, out_g, k});
    const Tensor bias = rand_tensor(*cpu, {groups * out_g});
    const Tensor b = rep == 3 ? Tensor{} : bias;
    expect_close(
        download(*cpu, *gpu,
                 conv_transpose1d(upload(*gpu, x), upload(*gpu, w), b.defined() ? upload(*gpu, b) : b, o)),
        ref::conv_transpose1d(x, w, b, o), 1e-5f * static_cast<float>(in_g * k), 1e-5f,
        "gpu conv_transpose1d");
  }
  const int64_t batches = rand_int(1, 5), m = rand_int(1, 70), k = rand_int(1, 30), n = rand_int(1, 9);
  const Tensor a = rand_tensor(*cpu, {batches, m, k}), shared = rand_tensor(*cpu, {k, n}),
               per = rand_tensor(*cpu, {batches, k, n});
  expect_close(download(*cpu, *gpu, matmul(upload(*gpu, a), upload(*gpu, shared))), ref::matmul(a, shared),
               1e-5f * static_cast<float>(k), 1e-5f, "gpu matmul shared");
  expect_close(download(*cpu, *gpu, matmul(upload(*gpu, a), upload(*gpu, per))), ref::matmul(a, per),
               1e-5f * static_cast<float>(k), 1e-5f, "gpu matmul batched");
}

// The phase kernel against the 16-channel tiled one (the same float sums in the same order: bit for bit) and
// the reference, over Kokoro's upsamplings in short (512 -> 256 channels, kernel 20, stride 10; 256 -> 128,
// kernel 12, stride 6), the inverse STFT's 22 -> 1 (kernel 20, stride 5), a stride past the kernel (phases
// without taps), and odd shapes (channels off the 64 / 4 channel and 64 / 512 position tiles, kernel up to 32,
// stride 1 .. 10, padding, output padding, bias or none) on both tile shapes (Cout > 16 and <= 16). A second
// input through the same weight takes the layout made for the first.
TEST(NnGpuKokoro, PhaseConvTransposeIsTheTiledKernelsSums) {
  gpu::Device* device = sotto::testing::open_test_device();
  if (!device) GTEST_SKIP() << sotto::testing::gpu_skip_reason();
  auto cpu = Context::cpu();
  auto gpu = Context::webgpu(*device);
  for (int rep = 0; rep < 14; ++rep) {
    int64_t cin = rand_int(1, 40), cout = rep % 2 ? rand_int(1, 16) : rand_int(17, 90), k = rand_int(1, 32),
            t = rand_int(1, 90);
    ConvTranspose1dOptions o;
    o.stride = static_cast<int>(rand_int(1, 10));
    o.padding = static_cast<int>(rand_int(0, (k - 1) / 2));
    o.output_padding = static_cast<int>(rand_int(0, o.stride - 1));
    bool with_bias = rand_int(0, 1) == 1;
    if (rep == 0) cin = 512, cout = 256, k = 20, t = rand_int(60, 75), o = {.stride = 10, .padding = 5};
    if (rep == 1) cin = 256, cout = 128, k = 12, t = rand_int(130, 200), o = {.stride = 6, .padding = 3};
    if (rep == 2) cin = 22, cout = 1, k = 20, t = rand_int(1030, 1300), o = {.stride = 5}, with_bias = false;
    if (rep == 3)
      k = rand_int(1, 9), o = {.stride = 10, .padding = static_cast<int>(rand_int(0, (k - 1) / 2))};
    if (rep <= 1) with_bias = true;
    const Tensor x = rand_tensor(*cpu, {cin, t}), x2 = rand_tensor(*cpu, {cin, t}),
                 w = rand_tensor(*cpu, {cin, cout, k});
    const Tensor b = with_bias ? rand_tensor(*cpu, {cout}) : Tensor{};
    const Tensor gw = upload(*gpu, w), gb = with_bias ? upload(*gpu, b) : Tensor{};
    const std::string shape =
        std::to_string(cin) + " -> " + std::to_string(cout) + " x " + std::to_string(t) + ", kernel " +
        std::to_string(k) + " stride " + std::to_string(o.stride) + " padding " + std::to_string(o.padding) +
        " output padding " + std::to_string(o.output_padding) + (with_bias ? "" : ", no bias");
    const int64_t terms = cin * ((k + o.stride - 1) / o.stride);
    for (const Tensor* in : {&x, &x2}) {
      const Tensor gx = upload(*gpu, *in);
      gpu_ops::set_conv_transpose_kernel(gpu_ops::ConvTransposeKernel::Tiled16);
      const std::vector<float> tiled = floats(download(*cpu, *gpu, conv_transpose1d(gx, gw, gb, o)));
      gpu_ops::set_conv_transpose_kernel(gpu_ops::ConvTransposeKernel::Phases);
      const Tensor got = download(*cpu, *gpu, conv_transpose1d(gx, gw, gb, o));
      gpu_ops::set_conv_transpose_kernel(gpu_ops::ConvTransposeKernel::Auto);
      const Tensor want = ref::conv_transpose1d(*in, w, b, o);
      ASSERT_EQ(got.shape(), want.shape()) << shape;
      expect_close(got, want, 2e-6f * static_cast<float>(terms), 1e-5f, "phase conv_transpose1d " + shape);
      const std::vector<float> v = floats(got);
      ASSERT_EQ(v.size(), tiled.size()) << shape;
      int64_t differ = 0;
      for (size_t i = 0; i < v.size(); ++i) differ += std::memcmp(&v[i], &tiled[i], sizeof(float)) != 0;
      EXPECT_EQ(differ, 0) << "of " << v.size() << " outputs differ from the tiled kernel's, " << shape;
    }
  }
}

TEST(NnGpuKokoro, DynamicInt8IsTheReferencesArithmetic) {
  gpu::Device* device = sotto::testing::open_test_device();
  if (!device) GTEST_SKIP() << sotto::testing::gpu_skip_reason();
  auto cpu = Context::cpu();
  auto gpu = Context::webgpu(*device);
  // DynamicQuantizeLinear: the same bytes, scale and zero point (ranges all positive, all negative, mixed; sizes
  // up to 1,024, reduced by the quantizing workgroups alone, and past one chunk of the range reduction).
  const std::pair<float, float> ranges[] = {{-2.0f, 3.0f}, {0.5f, 4.0f}, {-5.0f, -0.25f}};
  for (int rep = 0; rep < 6; ++rep) {
    const auto [lo, hi] = ranges[rep % 3];
    const int64_t n = rep < 3 ? rand_int(1025, 20000) : rand_int(1, 1024);
    const Tensor x = rand_tensor(*cpu, {n}, lo, hi);
    Tensor qp;
    const Tensor q = gpu_ops::dynamic_quantize_linear(upload(*gpu, x), &qp);
    auto bytes = gpu->to_bytes(q);
    auto params = gpu->to_floats(qp);
    ASSERT_TRUE(bytes.ok() && params.ok()) << bytes.message() << params.message();
    const Tensor want = dynamic_quantize_linear(x);
    EXPECT_EQ((*params)[0], want.quant().scale);
    EXPECT_EQ(static_cast<int32_t>((*params)[1]), want.quant().zero_point);
    ASSERT_GE(bytes->size(), static_cast<size_t>(n));
    int64_t differ = 0;
    for (int64_t i = 0; i < n; ++i) differ += (*bytes)[i] != want.data<uint8_t>()[i];
    EXPECT_EQ(differ, 0) << "of " << n << " quantized values";
  }

  // Values whose quotient by the scale lies within a few ulps of a half (k + 0.5): where the GPU's quick
  // reciprocal product could round the other way, the quantization must still be the correctly rounded
  // quotient's (the reference's). The range [-2, 3] is in x, so the scale is 5 / 255.
  {
    const int64_t n = 20000;
    std::vector<float> v(static_cast<size_t>(n));
    v[0] = -2.0f, v[1] = 3.0f;
    const float scale = 5.0f / 255.0f;
    for (int64_t i = 2; i < n; ++i) {
      float x = (static_cast<float>(rand_int(-102, 152)) + 0.5f) * scale;
      for (int64_t u = rand_int(-3, 3); u != 0; u += u > 0 ? -1 : 1)
        x = std::nextafter(x, u > 0 ? 4.0f : -4.0f);
      v[static_cast<size_t>(i)] = std::clamp(x, -2.0f, 3.0f);
    }
    const Tensor x = cpu->from_floats({n}, v);
    Tensor qp;
    auto bytes = gpu->to_bytes(gpu_ops::dynamic_quantize_linear(upload(*gpu, x), &qp));
    ASSERT_TRUE(bytes.ok()) << bytes.message();
    const Tensor want = dynamic_quantize_linear(x);
    ASSERT_EQ(want.quant().scale, scale);
    int64_t differ = 0;
    for (int64_t i = 0; i < n; ++i) differ += (*bytes)[i] != want.data<uint8_t>()[i];
    EXPECT_EQ(differ, 0) << "of " << n << " values next to a rounding tie";
  }

  // ConvInteger biases within a few ulps of a whole number of output steps: the bias is floored to the step (the
  // reference's floor of the correctly rounded quotient), every kernel, with the channels split (300 inputs over
  // one tile of positions: the dot4 kernel's split sums).
  {
    const int64_t cin = 300, cout = 40, t = 100;
    std::vector<float> xv(static_cast<size_t>(cin * t));
    for (float& v : xv) v = static_cast<float>(rand_int(-200, 300)) / 100.0f;
    xv[0] = -2.0f, xv[1] = 3.0f;
    const Tensor xc = cpu->from_floats({cin, t}, xv);
    const Tensor w =
        rand_int8(*cpu, {cout, cin, 3}, DType::I8).with_quant({.scale = 0.007f, .zero_point = 0});
    const float step = dynamic_quantize_linear(xc).quant().scale * 0.007f;
    std::vector<float> bv(static_cast<size_t>(cout));
    for (float& b : bv) {  // not 0: its neighbours are subnormal, which GPUs flush to zero
      b = static_cast<float>(rand_int(1, 200) * (rand_int(0, 1) ? 1 : -1)) * step;
      for (int64_t u = rand_int(-3, 3); u != 0; u += u > 0 ? -1 : 1)
        b = std::nextafter(b, u > 0 ? 1.0f : -1.0f);
    }
    const Tensor b = cpu->from_floats({cout}, bv);
    const Conv1dOptions o{.padding = 1};
    const Tensor want = ref::conv1d_integer_dynamic_quantized_bias(xc, w, b, o);
    const Tensor gx = upload(*gpu, xc), gw = upload_bytes(*gpu, w), gb = upload(*gpu, b);
    for (auto kernel : {gpu_ops::ConvIntegerKernel::Plain, gpu_ops::ConvIntegerKernel::TiledI32,
                        gpu_ops::ConvIntegerKernel::TiledPacked}) {
      gpu_ops::set_conv_integer_kernel(kernel);
      expect_close(download(*cpu, *gpu, conv1d_integer_dynamic_quantized_bias(gx, gw, gb, o)), want, 1e-6f,
                   4e-7f,
                   "gpu conv_integer, biases next to a whole step, kernel " +
                       std::to_string(static_cast<int>(kernel)));
    }
    gpu_ops::set_conv_integer_kernel(gpu_ops::ConvIntegerKernel::Auto);
  }

  // MatMulInteger with per-column scales and zero points (Kokoro's linears) and per-tensor ones, both kernels;
  // sizes across the 16-row kernel's tiles of 16 rows, 64 columns and 64 k and the packed kernel's 4 rows, 16
  // columns and 16 splits of K / 4 words: rep 0 with K and N at random (odd: the byte-wise loads), rep 1 with
  // multiples of 4 (the word loads), rep 2 uint8 zero points.
  for (int rep = 0; rep < 3; ++rep) {
    int64_t m = rand_int(1, 40), k = rand_int(1, 300), n = rand_int(1, 150);
    if (rep == 1) k = 4 * rand_int(1, 90), n = 4 * rand_int(1, 40);
    const Tensor x = rand_tensor(*cpu, {m, k}, -3.0f, 2.0f);
    for (DType wt : {DType::I8, DType::U8}) {
      const Tensor w =
          rand_int8(*cpu, {k, n}, wt).with_quant({.scale = 0.013f, .zero_point = wt == DType::U8 ? 128 : -5});
      const Tensor scales = rand_tensor(*cpu, {n}, 0.001f, 0.02f),
                   zps = rand_int8(*cpu, {n}, rep == 2 ? DType::U8 : DType::I8);
      const Tensor gw = upload_bytes(*gpu, w), gx = upload(*gpu, x);
      const Tensor gs = upload(*gpu, scales), gz = upload_bytes(*gpu, zps);
      std::vector<float> first[2];
      for (auto kernel : {gpu_ops::MatmulIntegerKernel::Tiled16, gpu_ops::MatmulIntegerKernel::Packed}) {
        gpu_ops::set_matmul_integer_kernel(kernel);
        const std::string name = kernel == gpu_ops::MatmulIntegerKernel::Packed ? " (packed)" : " (16 rows)";
        // One rounding of the product's float scale apart at most (the integer sums are equal).
        const Tensor per_col = download(*cpu, *gpu, matmul_integer_dynamic(gx, gw, gs, gz));
        const Tensor per_tensor = download(*cpu, *gpu, matmul_integer_dynamic(gx, gw));
        expect_close(per_col, ref::matmul_integer_dynamic(x, w, scales, zps), 0, 2.4e-7f,
                     "gpu matmul_integer per column" + name);
        expect_close(per_tensor, ref::matmul_integer_dynamic(x, w), 0, 2.4e-7f,
                     "gpu matmul_integer per tensor" + name);
        // The same integer sums and float expression in both kernels: equal bit for bit.
        const std::vector<float> v[2] = {floats(per_col), floats(per_tensor)};
        for (int i = 0; i < 2; ++i) {
          if (kernel == gpu_ops::MatmulIntegerKernel::Tiled16) {
            first[i] = v[i];
            continue;
          }
          ASSERT_EQ(v[i].size(), first[i].size());
          int64_t differ = 0;
          for (size_t j = 0; j < v[i].size(); ++j) differ += std::memcmp(&v[i][j], &first[i][j], 4) != 0;
          EXPECT_EQ(differ, 0) << "of " << v[i].size() << " outputs, " << m << " x " << k << " x " << n;
        }
      }
      gpu_ops::set_matmul_integer_kernel(gpu_ops::MatmulIntegerKernel::Auto);
    }
  }

  // ConvInteger with the bias rounded down to the output step (Kokoro's convs): stride, dilation, padding.
  for (int rep = 0; rep < 3; ++rep) {
    const int64_t cin = rand_int(1, 40), cout = rand_int(1, 30), kk = rand_int(1, 7),
                  t = rand_int(kk * 2, 90);
    const Conv1dOptions o{.stride = rep == 1 ? 2 : 1,
                          .padding = static_cast<int>(rand_int(0, kk / 2 + 1)),
                          .dilation = rep == 2 ? static_cast<int>(rand_int(2, 5)) : 1};
    if (o.dilation * (kk - 1) + 1 > t + 2 * o.padding) continue;
    const Tensor xc = rand_tensor(*cpu, {cin, t}, -1.5f, 2.5f);
    const Tensor w =
        rand_int8(*cpu, {cout, cin, kk}, DType::I8).with_quant({.scale = 0.007f, .zero_point = 0});
    const Tensor b = rand_tensor(*cpu, {cout}, -0.5f, 0.5f);
    const Tensor want = ref::conv1d_integer_dynamic_quantized_bias(xc, w, b, o);
    // The integer sum times the step, plus the floored bias: two roundings, one of them maybe fused.
    expect_close(download(*cpu, *gpu,
                          conv1d_integer_dynamic_quantized_bias(upload(*gpu, xc), upload_bytes(*gpu, w),
                                                                upload(*gpu, b), o)),
                 want, 1e-6f, 4e-7f, "gpu conv_integer");
  }
}

// The tiled ConvIntegers, i32 and dot4U8Packed (stride 1, kernel <= 11, reach (kernel - 1) dilation <= 64), against
// the reference and bit for bit against the plain kernel: sizes past one tile of 128 positions, 16 output
// channels and 8 or 16 input channels, none a multiple of them; the generator's kernels and
// dilations; int8 and uint8 weights; symmetric and asymmetric padding.
TEST(NnGpuKokoro, TiledConvIntegerIsTheReferencesArithmetic) {
  gpu::Device* device = sotto::testing::open_test_device();
  if (!device) GTEST_SKIP() << sotto::testing::gpu_skip_reason();
  auto cpu = Context::cpu();
  auto gpu = Context::webgpu(*device);
  const int kernels[] = {1, 3, 7, 11, 3};
  const int dilations[] = {1, 3, 5, 5, 1};
  for (int rep = 0; rep < 5; ++rep) {
    const int64_t cin = rand_int(17, 75), cout = rand_int(17, 45), kk = kernels[rep];
    const Conv1dOptions o{.padding = static_cast<int>(rand_int(0, (kk - 1) * dilations[rep] / 2 + 1)),
                          .dilation = dilations[rep],
                          .padding_end = rep == 4 ? static_cast<int>(rand_int(0, 2)) : -1};
    const int64_t t = rand_int((kk - 1) * o.dilation + 1, 300);
    const DType wt = rep % 2 ? DType::U8 : DType::I8;
    const Tensor xc = rand_tensor(*cpu, {cin, t}, -1.5f, 2.5f);
    const Tensor w = rand_int8(*cpu, {cout, cin, kk}, wt)
                         .with_quant({.scale = 0.007f, .zero_point = wt == DType::U8 ? 131 : -3});
    const Tensor b = rand_tensor(*cpu, {cout}, -0.5f, 0.5f);
    const Tensor want = ref::conv1d_integer_dynamic_quantized_bias(xc, w, b, o);
    const Tensor no_bias = ref::conv1d_integer_dynamic_quantized_bias(xc, w, {}, o);
    const Tensor gx = upload(*gpu, xc), gw = upload_bytes(*gpu, w), gb = upload(*gpu, b);
    std::vector<float> plain;
    for (auto kernel : {gpu_ops::ConvIntegerKernel::Plain, gpu_ops::ConvIntegerKernel::TiledI32,
                        gpu_ops::ConvIntegerKernel::TiledPacked}) {
      gpu_ops::set_conv_integer_kernel(kernel);
      const Tensor got = download(*cpu, *gpu, conv1d_integer_dynamic_quantized_bias(gx, gw, gb, o));
      const Tensor got_nb = download(*cpu, *gpu, conv1d_integer_dynamic_quantized_bias(gx, gw, {}, o));
      ASSERT_EQ(got.shape(), want.shape()) << "kernel " << kk << " dilation " << o.dilation;
      expect_close(got, want, 1e-6f, 4e-7f, "gpu conv_integer");
      expect_close(got_nb, no_bias, 0, 2.4e-7f, "gpu conv_integer, no bias");
      // The same integer sums and float steps as the plain kernel: equal bit for bit.
      const std::vector<float> v = floats(got);
      if (kernel == gpu_ops::ConvIntegerKernel::Plain) plain = v;
      int64_t differ = 0;
      for (size_t i = 0; i < v.size(); ++i) differ += std::memcmp(&v[i], &plain[i], sizeof(float)) != 0;
      EXPECT_EQ(differ, 0) << "of " << v.size() << " outputs, kernel " << static_cast<int>(kernel);
    }
    gpu_ops::set_conv_integer_kernel(gpu_ops::ConvIntegerKernel::Auto);
  }
}

// The dot4 ConvInteger (packed weights, 128 positions x 64 output channels a workgroup, the input channels split
// over workgroups where the tiles are few) bit for bit against the plain kernel on Kokoro's shapes cut down to
// SwiftShader's pace: the decoder's 1,090 input channels (8 splits), the generator's kernels 3 / 7 / 11 and
// dilations 1 / 3 / 5, Cin and Cout off every tile size, positions past 256 tiles (one split, several stages),
// int8 and uint8 weights with their zero points, with and without the bias; and the packed weights reused on a
// second call.
TEST(NnGpuKokoro, Dot4ConvIntegerEqualsThePlainKernel) {
  gpu::Device* device = sotto::testing::open_test_device();
  if (!device) GTEST_SKIP() << sotto::testing::gpu_skip_reason();
  auto cpu = Context::cpu();
  auto gpu = Context::webgpu(*device);
  struct Case {
    int64_t cin, cout, kernel, dilation, t;
    int padding, padding_end;
    DType w_type;
    int32_t w_zp;
  };
  const Case cases[] = {
      {1090, 70, 3, 1, 150, 1, -1, DType::I8, 0},   // the decoder's convs
      {128, 72, 11, 5, 300, 25, -1, DType::I8, 0},  // the generator's resblocks
      {256, 40, 7, 3, 260, 9, -1, DType::U8, 128},
      {rand_int(33, 63), rand_int(65, 90), 7, 1, rand_int(129, 200), 2, 4, DType::U8, 131},
      {rand_int(5, 7), rand_int(1, 9), 11, 5, rand_int(130, 260), 25, 0, DType::I8, -3},
      {rand_int(9, 15), rand_int(1, 5), 1, 1, rand_int(129, 200), 0, -1, DType::U8, 7},
      {rand_int(17, 31), rand_int(2, 5), 3, 1, rand_int(32770, 33000), 1, -1, DType::I8, 5},
  };
  for (const Case& c : cases) {
    const Conv1dOptions o{
        .padding = c.padding, .dilation = static_cast<int>(c.dilation), .padding_end = c.padding_end};
    const Tensor xc = rand_tensor(*cpu, {c.cin, c.t}, -1.5f, 2.5f);
    const Tensor w = rand_int8(*cpu, {c.cout, c.cin, c.kernel}, c.w_type)
                         .with_quant({.scale = 0.007f, .zero_point = c.w_zp});
    const Tensor b = rand_tensor(*cpu, {c.cout}, -0.5f, 0.5f);
    const Tensor gx = upload(*gpu, xc), gw = upload_bytes(*gpu, w), gb = upload(*gpu, b);
    std::vector<float> want[2];
    for (auto kernel : {gpu_ops::ConvIntegerKernel::Plain, gpu_ops::ConvIntegerKernel::TiledPacked}) {
      gpu_ops::set_conv_integer_kernel(kernel);
      for (int with_bias = 0; with_bias < 2; ++with_bias) {
        const std::vector<float> v = floats(download(
            *cpu, *gpu, conv1d_integer_dynamic_quantized_bias(gx, gw, with_bias ? gb : Tensor{}, o)));
        if (kernel == gpu_ops::ConvIntegerKernel::Plain) {
          want[with_bias] = v;
          continue;
        }
        ASSERT_EQ(v.size(), want[with_bias].size());
        int64_t differ = 0;
        for (size_t i = 0; i < v.size(); ++i)
          differ += std::memcmp(&v[i], &want[with_bias][i], sizeof(float)) != 0;
        EXPECT_EQ(differ, 0) << "of " << v.size() << " outputs: Cin " << c.cin << " Cout " << c.cout
                             << " kernel " << c.kernel << " dilation " << c.dilation << " T " << c.t
                             << " bias " << with_bias;
      }
    }
    gpu_ops::set_conv_integer_kernel(gpu_ops::ConvIntegerKernel::Auto);
  }
}

TEST(NnGpuKokoro, SnakeWithItsRangeFeedsTheInt8ConvAsItsOwnRangeWould) {
  gpu::Device* device = sotto::testing::open_test_device();
  if (!device) GTEST_SKIP() << sotto::testing::gpu_skip_reason();
  auto cpu = Context::cpu();
  auto gpu = Context::webgpu(*device);
  // Sizes past the 1,024 values below which quantization reads x itself: one chunk, several, and the 1,024
  // chunks' cap (the generator's last stage: 128 x 46,080 at 4.8 s).
  for (const auto& [c, t] : {std::pair<int64_t, int64_t>{rand_int(3, 9), rand_int(400, 900)},
                             {rand_int(17, 40), rand_int(2000, 3000)},
                             {rand_int(60, 70), rand_int(70000, 80000)}}) {
    const Tensor x = rand_tensor(*cpu, {c, t}, -3.0f, 2.0f), alpha = rand_tensor(*cpu, {c}, 0.5f, 1.5f);
    const Tensor gx = upload(*gpu, x), ga = upload(*gpu, alpha);
    Tensor partial;
    const std::vector<float> fused = floats(download(*cpu, *gpu, gpu_ops::snake(gx, ga, &partial)));
    const std::vector<float> plain = floats(download(*cpu, *gpu, gpu_ops::snake(gx, ga)));
    // The same expression in both kernels: equal where the compiler contracts it alike (SwiftShader: bit for
    // bit), within an ulp of the value where it does not.
    expect_close(cpu->from_floats({c, t}, fused), cpu->from_floats({c, t}, plain), 0, 2e-7f,
                 "snake with range");
    ASSERT_TRUE(partial.defined());
    const std::vector<float> pairs = floats(download(*cpu, *gpu, partial));
    float lo = 0.0f, hi = 0.0f, want_lo = 0.0f, want_hi = 0.0f;
    for (size_t i = 0; i < pairs.size(); i += 2) lo = std::min(lo, pairs[i]), hi = std::max(hi, pairs[i + 1]);
    for (float v : fused) want_lo = std::min(want_lo, v), want_hi = std::max(want_hi, v);
    EXPECT_EQ(lo, want_lo);
    EXPECT_EQ(hi, want_hi);
    // The conv after it: the same bytes with the range handed over as with its own range pass.
    const Tensor w = rand_int8(*cpu, {7, c, 3}, DType::I8).with_quant({.scale = 0.01f, .zero_point = 0});
    const Tensor b = rand_tensor(*cpu, {7}, -0.5f, 0.5f);
    const Tensor gw = upload_bytes(*gpu, w), gb = upload(*gpu, b),
                 gy = upload(*gpu, cpu->from_floats({c, t}, fused));
    const Conv1dOptions o{.padding = 1};
    const std::vector<float> own =
        floats(download(*cpu, *gpu, gpu_ops::conv1d_integer_dynamic_quantized_bias(gy, gw, gb, o)));
    const std::vector<float> given =
        floats(download(*cpu, *gpu, gpu_ops::conv1d_integer_dynamic_quantized_bias(gy, gw, gb, o, &partial)));
    ASSERT_EQ(own.size(), given.size());
    EXPECT_EQ(std::memcmp(own.data(), given.data(), own.size() * sizeof(float)), 0) << c << " x " << t;
  }
}

TEST(NnGpuKokoro, Int8LstmFollowsTheReference) {
  gpu::Device* device = sotto::testing::open_test_device();
  if (!device) GTEST_SKIP() << sotto::testing::gpu_skip_reason();
  auto cpu = Context::cpu();
  auto gpu = Context::webgpu(*device);
  for (int rep = 0; rep < 2; ++rep) {
    const int64_t in = rand_int(1, 20), h = rand_int(1, 40), steps = rand_int(1, 7);
    LstmWeights w;
    w.w_ih = rand_int8(*cpu, {in, 4 * h}, DType::I8).with_quant({.scale = 0.01f, .zero_point = 3});
    w.w_hh = rand_int8(*cpu, {h, 4 * h}, DType::I8).with_quant({.scale = 0.008f, .zero_point = -2});
    w.b = rand_tensor(*cpu, {4 * h});
    if (rep == 1) {  // per-column recurrent scales and zero points
      w.w_hh_scales = rand_tensor(*cpu, {4 * h}, 0.002f, 0.01f);
      w.w_hh_zero_points = rand_int8(*cpu, {4 * h}, DType::I8);
    }
    LstmWeights gw = w;
    gw.w_ih = upload_bytes(*gpu, w.w_ih);
    gw.w_hh = upload_bytes(*gpu, w.w_hh);
    gw.b = upload(*gpu, w.b);
    if (rep == 1) {
      gw.w_hh_scales = upload(*gpu, w.w_hh_scales);
      gw.w_hh_zero_points = upload_bytes(*gpu, w.w_hh_zero_points);
    }
    const Tensor x = rand_tensor(*cpu, {steps, in}, -2.0f, 2.0f);
    const bool reverse = rand_int(0, 1) == 1;
    Tensor h_last, c_last;
    const Tensor got = download(*cpu, *gpu, lstm(upload(*gpu, x), gw, reverse, {}, {}, &h_last, &c_last));
    Tensor want_h, want_c;
    const Tensor want = ref::lstm(x, w, reverse, {}, {}, &want_h, &want_c);
    // The integer products are exact, but the cell runs in float here and in double in the reference: h can
    // differ by float rounding and, where that crosses a rounding boundary of the next step's quantization, by
    // one step of h's scale (range / 255) times a weight: 2e-3 bounds it over 7 steps.
    expect_close(got, want, 2e-3f, 0, "gpu int8 lstm");
    expect_close(download(*cpu, *gpu, h_last), want_h, 2e-3f, 0, "gpu int8 lstm h");
    expect_close(download(*cpu, *gpu, c_last), want_c, 2e-3f, 0, "gpu int8 lstm c");
  }
}

// Both directions in one dispatch per step (gpu_ops::bilstm_int8, nn::bilstm's GPU path): the reference's two
// directions within the LSTM's tolerance above, and the one-direction GPU kernel's outputs bit for bit (the same
// integer sums and float expressions). Different per-tensor zero points per direction; per-column ones.
TEST(NnGpuKokoro, Int8BiLstmIsBothDirections) {
  gpu::Device* device = sotto::testing::open_test_device();
  if (!device) GTEST_SKIP() << sotto::testing::gpu_skip_reason();
  auto cpu = Context::cpu();
  auto gpu = Context::webgpu(*device);
  for (int rep = 0; rep < 4; ++rep) {
    // reps 2 and 3: H past the persistent kernel's 64 column groups of 16 and 4 k splits (Kokoro's H is 256).
    const int64_t in = rand_int(1, 20), h = rep >= 2 ? rand_int(65, 256) : rand_int(1, 40),
                  steps = rand_int(1, 9);
    LstmWeights w[2], gw[2];
    for (int d = 0; d < 2; ++d) {
      w[d].w_ih = rand_int8(*cpu, {in, 4 * h}, DType::I8).with_quant({.scale = 0.01f, .zero_point = 3 - d});
      w[d].w_hh =
          rand_int8(*cpu, {h, 4 * h}, DType::I8).with_quant({.scale = 0.008f, .zero_point = 2 * d - 2});
      w[d].b = rand_tensor(*cpu, {4 * h});
      if (rep % 2 == 1) {
        w[d].w_hh_scales = rand_tensor(*cpu, {4 * h}, 0.002f, 0.01f);
        w[d].w_hh_zero_points = rand_int8(*cpu, {4 * h}, DType::I8);
      }
      if (rep == 2)
        w[d].w_hh =
            rand_int8(*cpu, {h, 4 * h}, DType::U8).with_quant({.scale = 0.006f, .zero_point = 120 + d});
      gw[d] = w[d];
      gw[d].w_ih = upload_bytes(*gpu, w[d].w_ih);
      gw[d].w_hh = upload_bytes(*gpu, w[d].w_hh);
      gw[d].b = upload(*gpu, w[d].b);
      if (rep % 2 == 1) {
        gw[d].w_hh_scales = upload(*gpu, w[d].w_hh_scales);
        gw[d].w_hh_zero_points = upload_bytes(*gpu, w[d].w_hh_zero_points);
      }
    }
    const Tensor x = rand_tensor(*cpu, {steps, in}, -2.0f, 2.0f);
    const Tensor gx = upload(*gpu, x);
    const Tensor want_parts[2] = {ref::lstm(x, w[0], false), ref::lstm(x, w[1], true)};
    const Tensor one_parts[2] = {download(*cpu, *gpu, lstm(gx, gw[0], false)),
                                 download(*cpu, *gpu, lstm(gx, gw[1], true))};
    for (auto kernel : {gpu_ops::LstmKernel::PerStep, gpu_ops::LstmKernel::Persistent256,
                        gpu_ops::LstmKernel::Persistent}) {
      gpu_ops::set_lstm_kernel(kernel);
      const std::string name = kernel == gpu_ops::LstmKernel::PerStep         ? " (per step)"
                               : kernel == gpu_ops::LstmKernel::Persistent256 ? " (one dispatch, 256 threads)"
                                                                              : " (one dispatch, widest)";
      const Tensor got = download(*cpu, *gpu, bilstm(gx, gw[0], gw[1]));
      // The one-direction LSTM's tolerance against the reference (held at H up to 256 over 5 seeds here).
      expect_close(got, concat(want_parts, 1), 2e-3f, 0, "gpu int8 bilstm" + name);
      expect_close(got, concat(one_parts, 1), 0, 0,
                   "gpu int8 bilstm against the one-direction kernel" + name);
    }
    gpu_ops::set_lstm_kernel(gpu_ops::LstmKernel::Auto);
  }
  std::printf("the widest one-dispatch LSTM here: %u threads a workgroup\n",
              device->info().limits.max_compute_invocations_per_workgroup >= 512 ? 512u : 256u);
}

// The grid kernel (Auto natively: each direction over G workgroups, the weights in registers) against the
// one-workgroup kernel, bit for bit: the same quantization of h, integer sums and float expressions. H up to 256
// and odd, per-tensor and per-column (int8 and uint8) zero points, int8 and uint8 weights, several G. Each G runs
// alone (no fallback) where its grid is resident: always at G = 1 (a barrier of one); at G > 1 only on a GPU (a
// CPU adapter runs a few workgroups at a time, and a barrier's waiting ones may hold every thread). Then with a
// spin limit of 0, which gives up at the first barrier that waits: the fallback's output must be the same.
TEST(NnGpuKokoro, Int8BiLstmGridKernelIsTheOneWorkgroupKernel) {
  gpu::Device* device = sotto::testing::open_test_device();
  if (!device) GTEST_SKIP() << sotto::testing::gpu_skip_reason();
  if (device->info().limits.max_storage_buffers_per_shader_stage < 8)
    GTEST_SKIP() << "8 storage buffers needed";
  auto cpu = Context::cpu();
  auto gpu = Context::webgpu(*device);
  const bool gpu_adapter = !device->info().cpu();
  for (int rep = 0; rep < 6; ++rep) {
    const int64_t in = rand_int(1, 20), steps = rep == 0 ? 1 : rand_int(2, 12);
    const int64_t h = rep == 5 ? 256 : rep >= 2 ? rand_int(65, 255) | 1 : rand_int(1, 40);
    const DType wt = rep % 3 == 1 ? DType::U8 : DType::I8;
    LstmWeights w[2], gw[2];
    for (int d = 0; d < 2; ++d) {
      w[d].w_ih = rand_int8(*cpu, {in, 4 * h}, DType::I8).with_quant({.scale = 0.01f, .zero_point = 3 - d});
      w[d].w_hh = rand_int8(*cpu, {h, 4 * h}, wt)
                      .with_quant({.scale = 0.008f, .zero_point = wt == DType::U8 ? 120 + d : 2 * d - 2});
      w[d].b = rand_tensor(*cpu, {4 * h});
      if (rep % 2 == 1) {
        w[d].w_hh_scales = rand_tensor(*cpu, {4 * h}, 0.002f, 0.01f);
        w[d].w_hh_zero_points = rand_int8(*cpu, {4 * h}, rep == 3 ? DType::U8 : DType::I8);
      }
      gw[d] = w[d];
      gw[d].w_ih = upload_bytes(*gpu, w[d].w_ih);
      gw[d].w_hh = upload_bytes(*gpu, w[d].w_hh);
      gw[d].b = upload(*gpu, w[d].b);
      if (rep % 2 == 1) {
        gw[d].w_hh_scales = upload(*gpu, w[d].w_hh_scales);
        gw[d].w_hh_zero_points = upload_bytes(*gpu, w[d].w_hh_zero_points);
      }
    }
    const Tensor gx = upload(*gpu, rand_tensor(*cpu, {steps, in}, -2.0f, 2.0f));
    gpu_ops::set_lstm_kernel(gpu_ops::LstmKernel::Persistent);
    const std::vector<float> want = floats(download(*cpu, *gpu, bilstm(gx, gw[0], gw[1])));
    gpu_ops::set_lstm_kernel(gpu_ops::LstmKernel::Auto);
    auto differ = [&](const gpu_ops::LstmGrid& g) {
      gpu_ops::set_lstm_grid(g);
      const std::vector<float> got = floats(download(*cpu, *gpu, bilstm(gx, gw[0], gw[1])));
      gpu_ops::set_lstm_grid({});
      int64_t n = 0;
      for (size_t i = 0; i < want.size(); ++i) n += std::memcmp(&got[i], &want[i], sizeof(float)) != 0;
      return n;
    };
    for (const int32_t g : {1, 2, 3, 8, 16, 64}) {
      const std::string at = "H " + std::to_string(h) + ", " + std::to_string(steps) + " steps, G " +
                             std::to_string(g) + ", rep " + std::to_string(rep) +
                             ": outputs that differ of " + std::to_string(want.size());
      if (g == 1 || gpu_adapter) EXPECT_EQ(differ({.workgroups = g, .fallback = false}), 0) << at;
      EXPECT_EQ(differ({.workgroups = g}), 0) << at;
      EXPECT_EQ(differ({.workgroups = g, .spin_limit = 0}), 0) << at << " (spin limit 0)";
    }
  }
  gpu_ops::set_lstm_grid({});
}

TEST(NnGpuKokoro, SineSourceAndStftFollowTheCpuOps) {
  gpu::Device* device = sotto::testing::open_test_device();
  if (!device) GTEST_SKIP() << sotto::testing::gpu_skip_reason();
  auto cpu = Context::cpu();
  auto gpu = Context::webgpu(*device);
  // Kokoro's harmonic source: 9 harmonics, 300 samples per frame, some frames unvoiced (<= 10 Hz).
  const int64_t n = rand_int(1, 23);
  std::vector<float> f(static_cast<size_t>(n));
  for (float& v : f) v = rand_int(0, 3) == 0 ? 5.0f : static_cast<float>(rand_int(60, 400)) + 0.37f;
  const Tensor f0 = cpu->from_floats({n}, f);
  // The phase is the same float CumSum here and there; the upsampling's two products may be fused into one
  // rounding on the GPU (an ulp of a phase of ~10^4 rad is ~2e-3 rad) and WGSL's sin holds 2^-11 after the
  // reduction: amplitude 0.1 x 3e-3 bounds both.
  expect_close(download(*cpu, *gpu, sine_source(upload(*gpu, f0), 9, 300, 24000.0f, 0.1f, 10.0f)),
               sine_source(f0, 9, 300, 24000.0f, 0.1f, 10.0f), 3e-4f, 0, "gpu sine_source");

  // Kokoro's STFT: n_fft 20 (Bluestein, m = 64), hop 5, a Hann window, odd lengths.
  const int64_t length = rand_int(20, 400);
  const Tensor signal = rand_tensor(*cpu, {length});
  std::vector<float> hann(20);
  for (size_t i = 0; i < hann.size(); ++i)
    hann[i] = 0.5f - 0.5f * std::cos(2.0f * 3.14159265f * static_cast<float>(i) / 20.0f);
  const Tensor window = cpu->from_floats({20}, hann);
  // The same float operations in the same order: equal where the adapter fuses nothing (SwiftShader), else an
  // ulp per complex product; 1e-5 on values of ~1.
  expect_close(download(*cpu, *gpu, stft_onnxruntime(upload(*gpu, signal), upload(*gpu, window), 20, 5)),
               stft_onnxruntime(signal, window, 20, 5), 1e-5f, 1e-5f, "gpu stft_onnxruntime");
  // A streamed window's spectrum is the STFT of a slice of the padded source (a view at an offset).
  const int64_t begin = 5 * rand_int(0, (length - 20) / 5);
  expect_close(
      download(*cpu, *gpu,
               stft_onnxruntime(slice(upload(*gpu, signal), 0, begin, length), upload(*gpu, window), 20, 5)),
      stft_onnxruntime(slice(signal, 0, begin, length), window, 20, 5), 1e-5f, 1e-5f,
      "gpu stft_onnxruntime of a slice");
}

}  // namespace
}  // namespace sotto::nn
