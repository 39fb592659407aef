// The int8 conv with ONNX Runtime's quantized bias (nn/conv_integer_bias.cpp) against its scalar reference on
// fresh random inputs with odd sizes: the stride-1 and dilated paths (rows of time read in place), strided
// convs, and the fallback (groups), on the VNNI, AVX2 and portable kernels, one and three threads. Integer sums are
// exact and the scaling is the same float arithmetic, so the results must be bitwise equal.
#include <gtest/gtest.h>

#include <string>

#include "nn/gemm.h"
#include "nn/ref.h"
#include "nn_test_support.h"

namespace sotto::nn::cpu {
void conv_integer_allow_vnni(bool allow);  // nn/conv_integer_bias.cpp
void conv_integer_allow_amx(bool allow);
bool conv_integer_use_amx();
}  // namespace sotto::nn::cpu

namespace sotto::nn {
namespace {

using testing::rand_int;
using testing::rand_int8;
using testing::rand_tensor;

void expect_bitwise(const Tensor& got, const Tensor& want, const std::string& where) {
  ASSERT_EQ(got.shape(), want.shape()) << where;
  for (int64_t i = 0; i < got.elements(); ++i)
    ASSERT_EQ(got.f32()[i], want.f32()[i]) << where << " at " << i << " of " << got.elements();
}

TEST(NnConvInteger, QuantizedBiasConvMatchesReference) {
  testing::Backends b;
  for (bool vnni : {true, false}) {  // the AVX-512 VNNI product where the CPU has it, and the int16 one
    cpu::conv_integer_allow_vnni(vnni);
    b.each([&](Context& ctx, const std::string& backend) {
      const std::string where = backend + (vnni ? "" : " no vnni");
      for (int trial = 0; trial < 12; ++trial) {
        const int64_t cin = rand_int(1, 37), cout = rand_int(1, 29), k = rand_int(1, 11),
                      t = rand_int(3, 157);
        Conv1dOptions o{.stride = 1, .padding = static_cast<int>(rand_int(0, 6)), .dilation = 1};
        if (trial % 3 == 1) o.dilation = static_cast<int>(rand_int(2, 5));
        if (trial % 3 == 2) o.stride = static_cast<int>(rand_int(2, 6));
        if (trial == 11) o.groups = 1, o.padding_end = static_cast<int>(rand_int(0, 3));
        if (t + o.padding + (o.padding_end < 0 ? o.padding : o.padding_end) < o.dilation * (k - 1) + 1)
          continue;
        const Tensor x = rand_tensor(ctx, {cin, t}, -1.5f, 3.0f);
        const DType dt = trial % 2 ? DType::I8 : DType::U8;
        const Tensor w = rand_int8(ctx, {cout, cin, k}, dt).with_quant({0.011f, dt == DType::U8 ? 121 : 0});
        const Tensor bias = rand_tensor(ctx, {cout}, -0.7f, 0.7f);
        const std::string at = where + " cin " + std::to_string(cin) + " cout " + std::to_string(cout) +
                               " k " + std::to_string(k) + " t " + std::to_string(t) + " stride " +
                               std::to_string(o.stride) + " dilation " + std::to_string(o.dilation);
        expect_bitwise(conv1d_integer_dynamic_quantized_bias(x, w, bias, o),
                       ref::conv1d_integer_dynamic_quantized_bias(x, w, bias, o), at);
        expect_bitwise(conv1d_integer_dynamic_quantized_bias(x, w, {}, o),
                       ref::conv1d_integer_dynamic_quantized_bias(x, w, {}, o), at + " no bias");
      }
    });
  }
  cpu::conv_integer_allow_vnni(true);
}

// The int16 product (gemm_kernel.h's pairwise multiply-add blocks, their lane sums and the K tails) against a
// plain triple loop: every block shape (4 x 2, 4 x 1, 2 x 2, 2 x 1, 1 x 4, 1 x 1 edges) with strides wider than
// the rows, K around the vector width and the tap pairs' leaves, values at the int16 path's extremes.
TEST(NnConvInteger, Int16ProductMatchesPlainLoops) {
  testing::Backends b;
  b.each([&](Context& ctx, const std::string& backend) {
    for (int trial = 0; trial < 24; ++trial) {
      const int64_t m = rand_int(1, 13), n = rand_int(1, 13);
      const int64_t k = trial % 3 == 0 ? 128 * rand_int(1, 3) : rand_int(1, 77);
      const int64_t lda = k + rand_int(0, 5), ldb = k + rand_int(0, 5), ldc = n + rand_int(0, 3);
      std::vector<int16_t> a(static_cast<size_t>(m * lda)), bt(static_cast<size_t>(n * ldb));
      const int16_t bound = trial % 2 ? 2040 : 255;
      for (int16_t& v : a) v = static_cast<int16_t>(rand_int(-bound, bound));
      for (int16_t& v : bt) v = static_cast<int16_t>(rand_int(-bound, bound));
      std::vector<int32_t> got(static_cast<size_t>(m * ldc), -7), want = got;
      for (int64_t i = 0; i < m; ++i)
        for (int64_t j = 0; j < n; ++j) {
          int64_t sum = 0;
          for (int64_t t = 0; t < k; ++t) sum += int64_t{a[i * lda + t]} * bt[j * ldb + t];
          want[i * ldc + j] = static_cast<int32_t>(sum);
        }
      cpu::igemm_nt(ctx, m, n, k, a.data(), lda, bt.data(), ldb, got.data(), ldc);
      ASSERT_EQ(got, want) << backend << " m " << m << " n " << n << " k " << k;
    }
  });
}

// The int16 conv product with time in the lanes (gemm_kernel.h's iconv_block on pair-major rows) against a plain
// loop over the same rows: weight rows around the block heights (R x C blocks, R x 1, single rows), outputs
// around the lane width (the plain tail), 1-11 taps, row strides wider than needed, extreme values.
TEST(NnConvInteger, PairMajorProductMatchesPlainLoops) {
  testing::Backends b;
  b.each([&](Context& ctx, const std::string& backend) {
    for (int trial = 0; trial < 24; ++trial) {
      const int64_t m = rand_int(1, 13), n = trial % 4 == 0 ? rand_int(40, 90) : rand_int(1, 27);
      const int64_t taps = rand_int(1, 11), pairs = trial % 3 == 0 ? 64 : rand_int(1, 9);
      const int64_t cin = 2 * pairs, lda = taps * cin + rand_int(0, 5), ldc = n + rand_int(0, 3);
      const int64_t rows = n + taps - 1, ldg = rows + rand_int(0, 4);
      std::vector<int16_t> a(static_cast<size_t>(m * lda)), g(static_cast<size_t>(rows * cin)),
          g2(static_cast<size_t>(pairs * ldg * 2), 999);
      const int16_t bound = trial % 2 ? 2040 : 255;
      for (int16_t& v : a) v = static_cast<int16_t>(rand_int(-bound, bound));
      for (int16_t& v : g) v = static_cast<int16_t>(rand_int(-bound, bound));
      for (int64_t p = 0; p < pairs; ++p)
        for (int64_t r = 0; r < rows; ++r)
          for (int64_t h = 0; h < 2; ++h)
            g2[static_cast<size_t>((p * ldg + r) * 2 + h)] = g[r * cin + 2 * p + h];
      std::vector<int32_t> got(static_cast<size_t>(m * ldc), -7), want = got;
      for (int64_t i = 0; i < m; ++i)
        for (int64_t t = 0; t < n; ++t) {
          int64_t sum = 0;
          for (int64_t j = 0; j < taps; ++j)
            for (int64_t c = 0; c < cin; ++c) sum += int64_t{a[i * lda + j * cin + c]} * g[(t + j) * cin + c];
          want[i * ldc + t] = static_cast<int32_t>(sum);
        }
      cpu::iconv_pairs(ctx, m, n, taps, pairs, a.data(), lda, g2.data(), ldg, got.data(), ldc);
      ASSERT_EQ(got, want) << backend << " m " << m << " n " << n << " taps " << taps << " pairs " << pairs;
    }
  });
}

// Kokoro's generator shapes at the tap pairs' deepest split (pair-major rows: down to one tap, depth 4 for
// k=11, with int32 sums that wrap on the way), on random inputs and on inputs that make the split's values as
// large as they get: a Thue-Morse sign pattern along time makes every difference of differences an extreme,
// and constant extreme weights make every sum of taps one. Any slip in the split's rows, leaves, recombination
// or wrapped sums shows as a mismatch.
TEST(NnConvInteger, QuantizedBiasConvAtTheTapPairBound) {
  testing::Backends b;
  cpu::conv_integer_allow_vnni(false);
  b.each([&](Context& ctx, const std::string& backend) {
    struct Case {
      int64_t cin, k, dilation;
    };
    for (const Case c : {Case{128, 11, 1}, Case{128, 7, 3}, Case{256, 7, 1}, Case{256, 11, 1}}) {
      // mode 0 random, 1 extreme int8 weights (-128), 2 extreme uint8 weights (255 with zero point 0: the
      // largest |w - zp|, so the largest sums of taps).
      for (int mode : {1, 2, 0}) {
        const bool extreme = mode > 0;
        const DType wt = mode == 2 ? DType::U8 : DType::I8;
        const int64_t t = 45, cout = 9;
        const Conv1dOptions o{.padding = static_cast<int>(c.dilation * (c.k / 2)),
                              .dilation = static_cast<int>(c.dilation)};
        Tensor x = rand_tensor(ctx, {c.cin, t}, -1.5f, 3.0f);
        Tensor w = rand_int8(ctx, {cout, c.cin, c.k}, wt).with_quant({0.011f, 0});
        if (extreme) {
          for (int64_t i = 0; i < c.cin; ++i)
            for (int64_t j = 0; j < t; ++j) x.f32()[i * t + j] = __builtin_popcountll(j) % 2 ? 3.0f : -1.5f;
          for (int64_t i = 0; i < w.elements(); ++i) w.data<uint8_t>()[i] = mode == 2 ? 255 : 0x80;
        }
        const std::string at = backend + " cin " + std::to_string(c.cin) + " k " + std::to_string(c.k) +
                               " dilation " + std::to_string(c.dilation) + " mode " + std::to_string(mode);
        expect_bitwise(conv1d_integer_dynamic_quantized_bias(x, w, {}, o),
                       ref::conv1d_integer_dynamic_quantized_bias(x, w, {}, o), at);
      }
    }
  });
  cpu::conv_integer_allow_vnni(true);
}

// The pair-major convs run the tap-pair split as a plan in two passes (every node's difference rows over channel
// pairs, then every leaf's product and recombination over blocks of output channels), in tiles of each dilation
// residue's outputs, batched under a memory bound. Against the scalar reference on fresh random inputs: output
// channels around the 4-row blocks, residues shorter than the split's 4 outputs (the direct product), and one
// conv long enough for several tiles and batches (256 channels: 2,048 outputs a tile, one tile a batch).
TEST(NnConvInteger, PairMajorSplitPlanMatchesReference) {
  testing::Backends b;
  cpu::conv_integer_allow_vnni(false);
  b.each([&](Context& ctx, const std::string& backend) {
    struct Case {
      int64_t cin, k, dilation, t, cout = 0;
    };
    const Case cases[] = {{128, 11, 1, rand_int(1, 40)},
                          {2 * rand_int(1, 40), 7, 5, rand_int(7, 60)},
                          {64, 3, 3, rand_int(1, 9)},
                          {2 * rand_int(1, 9), 11, 1, rand_int(30, 300)},
                          {256, 11, 1, 4500},
                          {128, 5, 2, rand_int(2, 5)},
                          {256, 3, 5, rand_int(60, 120), 256},
                          {128, 11, 1, rand_int(60, 120), 128}};
    for (const Case& c : cases) {
      if (c.t >= 4500 && backend.find("portable/1") == std::string::npos)
        continue;  // once: the reference is slow
      const int64_t cout = c.cout ? c.cout : rand_int(1, 37);
      const Conv1dOptions o{.padding = static_cast<int>(c.dilation * (c.k / 2)),
                            .dilation = static_cast<int>(c.dilation)};
      const Tensor x = rand_tensor(ctx, {c.cin, c.t}, -1.5f, 3.0f);
      const DType wt = rand_int(0, 1) ? DType::U8 : DType::I8;
      const Tensor w = rand_int8(ctx, {cout, c.cin, c.k}, wt).with_quant({0.011f, wt == DType::U8 ? 119 : 0});
      const Tensor bias = rand_tensor(ctx, {cout}, -0.7f, 0.7f);
      const std::string at = backend + " cin " + std::to_string(c.cin) + " cout " + std::to_string(cout) +
                             " k " + std::to_string(c.k) + " dilation " + std::to_string(c.dilation) + " t " +
                             std::to_string(c.t);
      expect_bitwise(conv1d_integer_dynamic_quantized_bias(x, w, bias, o),
                     ref::conv1d_integer_dynamic_quantized_bias(x, w, bias, o), at);
    }
  });
  cpu::conv_integer_allow_vnni(true);
}

// The AMX product (nn/conv_integer_amx_avx2.cpp: stride 1, Cout a multiple of 16; Cin rounded up to 64 with zero
// weights, so any Cin, here multiples of 64 and odd counts) against the scalar
// reference and against the VNNI product with AMX off, bit for bit: Cout around the pairs of 16-row tiles,
// lengths around the 16-step tiles (a partial last tile, shorter than one tile, split over threads), taps
// 1-11 with dilations up to 5 read in place, int8 and uint8 weights, and extreme values (weights -128 and an
// input alternating between its extremes, so every sum is as large as it gets). Skipped without AMX.
TEST(NnConvInteger, AmxProductMatchesReference) {
  if (!cpu::conv_integer_use_amx()) GTEST_SKIP() << "this CPU (or OS) has no AMX-INT8";
  testing::Backends b;
  b.each([&](Context& ctx, const std::string& backend) {
    for (int trial = 0; trial < 14; ++trial) {
      // Cin a multiple of 64, or any count (rounded up to 64 with zero weights, the last quad partial).
      const int64_t cin = trial % 3 == 2 ? rand_int(1, 150) : 64 * rand_int(1, 3), cout = 16 * rand_int(1, 5),
                    k = trial < 2 ? 11 : rand_int(1, 11);
      const int64_t t = trial % 4 == 0   ? rand_int(1, 17)
                        : trial % 4 == 1 ? rand_int(28, 36)
                                         : rand_int(40, 301);
      const int dilation = trial % 3 == 0 ? 1 : static_cast<int>(rand_int(2, 5));
      const Conv1dOptions o{.padding = static_cast<int>(dilation * (k / 2) + rand_int(0, 2)),
                            .dilation = dilation};
      const bool extreme = trial < 2;
      const DType wt = trial % 5 == 3 ? DType::U8 : DType::I8;
      Tensor x = rand_tensor(ctx, {cin, t}, -1.5f, 3.0f);
      Tensor w = rand_int8(ctx, {cout, cin, k}, wt).with_quant({0.011f, wt == DType::U8 ? 128 : 0});
      if (extreme) {
        for (int64_t i = 0; i < cin; ++i)
          for (int64_t j = 0; j < t; ++j) x.f32()[i * t + j] = __builtin_popcountll(j) % 2 ? 3.0f : -1.5f;
        for (int64_t i = 0; i < w.elements(); ++i) w.data<uint8_t>()[i] = 0x80;
      }
      const Tensor bias = rand_tensor(ctx, {cout}, -0.7f, 0.7f);
      const std::string at = backend + " cin " + std::to_string(cin) + " cout " + std::to_string(cout) +
                             " k " + std::to_string(k) + " t " + std::to_string(t) + " dilation " +
                             std::to_string(dilation) + (wt == DType::U8 ? " u8" : " i8");
      const Tensor amx = conv1d_integer_dynamic_quantized_bias(x, w, bias, o);
      expect_bitwise(amx, ref::conv1d_integer_dynamic_quantized_bias(x, w, bias, o), at);
      cpu::conv_integer_allow_amx(false);
      expect_bitwise(amx, conv1d_integer_dynamic_quantized_bias(x, w, bias, o), at + " against VNNI");
      cpu::conv_integer_allow_amx(true);
    }
  });
}

// Grouped convs go through the unrolled-input fallback: the same values.
TEST(NnConvInteger, QuantizedBiasGroupedFallbackMatchesReference) {
  testing::Backends b;
  b.each([&](Context& ctx, const std::string& where) {
    const int64_t in_g = rand_int(1, 7), out_g = rand_int(1, 5), t = rand_int(5, 61);
    const Conv1dOptions o{.padding = 1, .groups = 3};
    const Tensor x = rand_tensor(ctx, {3 * in_g, t}, -2.0f, 1.0f);
    const Tensor w = rand_int8(ctx, {3 * out_g, in_g, 3}, DType::I8).with_quant({0.02f, 0});
    const Tensor bias = rand_tensor(ctx, {3 * out_g});
    expect_bitwise(conv1d_integer_dynamic_quantized_bias(x, w, bias, o),
                   ref::conv1d_integer_dynamic_quantized_bias(x, w, bias, o), where + " grouped");
  });
}

}  // namespace
}  // namespace sotto::nn

namespace sotto::nn {
namespace {

// matmul_integer_dynamic's VNNI path (nn/linear_int8_dynamic_avx2.cpp, zero points applied after the product)
// and the int16 one against the reference: per-column zero points and scales, I8 and U8 weights, odd sizes.
TEST(NnConvInteger, MatmulIntegerDynamicMatchesReferenceWithAndWithoutVnni) {
  testing::Backends b;
  for (bool vnni : {true, false}) {
    cpu::conv_integer_allow_vnni(vnni);
    b.each([&](Context& ctx, const std::string& backend) {
      for (int trial = 0; trial < 6; ++trial) {
        // Trials 4-5: ALBERT-like rows, over the threads' threshold (the quantization and scaling split by rows).
        const int64_t m = trial < 4 ? rand_int(1, 23) : rand_int(40, 90),
                      k = trial < 4 ? rand_int(1, 150) : rand_int(700, 800), n = rand_int(1, 41);
        const Tensor x = rand_tensor(ctx, {m, k}, -2.0f, 1.0f);
        const bool u8 = trial % 2 == 1;
        Tensor w = rand_int8(ctx, {k, n}, u8 ? DType::U8 : DType::I8);
        if (u8 && trial == 3)  // every value <= 127: the VNNI path takes a U8 weight too
          for (int64_t i = 0; i < w.elements(); ++i) w.data<uint8_t>()[i] &= 0x7F;
        std::vector<int64_t> zi(static_cast<size_t>(n));
        for (int64_t& z : zi) z = rand_int(u8 ? 0 : -20, u8 ? 255 : 20);
        const Tensor zpi =
            ctx.from_bytes({n}, DType::I64, {reinterpret_cast<const uint8_t*>(zi.data()), zi.size() * 8});
        const Tensor scales = rand_tensor(ctx, {n}, 0.001f, 0.05f);
        const std::string where = backend + (vnni ? "" : " no vnni") + " m " + std::to_string(m) + " k " +
                                  std::to_string(k) + " n " + std::to_string(n) + (u8 ? " u8" : " i8");
        expect_bitwise(matmul_integer_dynamic(x, w, scales, zpi),
                       ref::matmul_integer_dynamic(x, w, scales, zpi), where);
        expect_bitwise(matmul_integer_dynamic(x, w.with_quant({0.02f, u8 ? 131 : 0})),
                       ref::matmul_integer_dynamic(x, w.with_quant({0.02f, u8 ? 131 : 0})),
                       where + " per tensor");
      }
    });
  }
  cpu::conv_integer_allow_vnni(true);
}

}  // namespace
}  // namespace sotto::nn
