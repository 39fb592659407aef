// The op layer's CPU kernels as this wasm build compiles them (SIMD128 or relaxed SIMD) against their scalar
// references (nn/ref.h) on fresh random inputs of odd sizes: the products (f32 dot tiles, int8 pairwise
// multiply-add, weight-only int8 linear, its packed many-row form), convs (unrolled and in-place; the int8 conv bitwise), the LSTM, vector activations, Snake,
// softmax, layer, instance and group norm, attention.
// web/worker.js's nnCheck op runs it; tests/web/nn_ops.test.mjs checks the result for both builds.
#include <cmath>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "models/llm/sampler.h"  // Rng
#include "nn/cpu.h"
#include "nn/ops.h"
#include "nn/ref.h"

namespace sotto {
namespace {

struct NnCheck {
  Rng rng;
  std::unique_ptr<nn::Context> ctx = nn::Context::cpu();
  int failed = 0, checks = 0, worst_check = -1;
  double worst_excess = -1e30;

  explicit NnCheck(uint32_t seed) : rng(seed) {}

  int64_t size(int64_t lo, int64_t hi) {
    return lo + static_cast<int64_t>(rng.next_unit() * static_cast<float>(hi - lo + 1)) % (hi - lo + 1);
  }

  nn::Tensor random(const nn::Shape& shape, float lo = -1.0f, float hi = 1.0f) {
    std::vector<float> v(static_cast<size_t>(shape.elements()));
    for (float& x : v) x = lo + (hi - lo) * rng.next_unit();
    return ctx->from_floats(shape, v);
  }

  nn::Tensor random_int8(const nn::Shape& shape) {
    std::vector<uint8_t> v(static_cast<size_t>(shape.elements()));
    for (uint8_t& x : v) x = static_cast<uint8_t>(rng.next_unit() * 256.0f);
    return ctx->from_bytes(shape, DType::I8, v).with_quant({0.02f, 0});
  }

  // |got - want| <= atol + rtol |want| everywhere (and equal shapes).
  void expect(const nn::Tensor& got, const nn::Tensor& want, double atol, double rtol) {
    const int id = checks++;
    double worst = got.shape() == want.shape() ? -1e30 : 1e30;
    if (got.shape() == want.shape())
      for (int64_t i = 0; i < got.elements(); ++i) {
        const double g = got.f32()[i], w = want.f32()[i];
        const double excess = std::fabs(g - w) - (atol + rtol * std::fabs(w));
        if (!(excess <= worst)) worst = excess;
      }
    if (worst > 0) ++failed;
    if (worst > worst_excess) {
      worst_excess = worst;
      worst_check = id;
    }
  }

  void run() {
    using namespace nn;
    for (int rep = 0; rep < 3; ++rep) {
      const int64_t m = size(1, 37), k = size(1, 300), n = size(1, 70);
      const Tensor x = random({m, k}), w = random({n, k}), b = random({n});
      expect(linear(x, w, b), ref::linear(x, w, b), 4e-6 * std::sqrt(static_cast<double>(k)) + 2e-6, 1e-5);
      const Tensor wkn = random({k, n});
      expect(matmul(x, wkn), ref::matmul(x, wkn), 4e-6 * std::sqrt(static_cast<double>(k)) + 2e-6, 1e-5);
      const Tensor w8 = random_int8({k, n});
      expect(matmul_integer_dynamic(x, w8), ref::matmul_integer_dynamic(x, w8), 0, 1e-6);
      const Tensor w8t = random_int8({n, k});  // weight-only int8 [out, in], per-tensor scale and offset
      // Bit for bit its own algorithm with a scalar product (x quantized per row to int16, exact integer
      // sums), and within x's rounding of the float reference: |x error| <= 1 / 65534, |w| <= 2.66, K terms.
      expect(linear_int8_affine(x, w8t, 0.02f, 0.1f, b),
             ref::linear_int8_affine_quantized_x(x, w8t, 0.02f, 0.1f, b), 0, 0);
      expect(linear_int8_affine(x, w8t, 0.02f, 0.1f, b), ref::linear_int8_affine(x, w8t, 0.02f, 0.1f, b),
             2.66 * static_cast<double>(k) / 65534.0 + 1e-5, 1e-5);
      // The packed form for many rows (5-row tiles, 256-pair int32 blocks): bit for bit the same.
      const int64_t m_many = size(1, 130), k_many = size(1, 700), n8 = 8 * size(1, 6);
      const Tensor x_many = random({m_many, k_many}, -2.0f, 2.0f), w_many = random_int8({n8, k_many}),
                   b8 = random({n8});
      expect(cpu::linear_int8_affine_prepacked(x_many, cpu::pack_weight_int8(*ctx, w_many), 0.02f, 0.1f, b8),
             ref::linear_int8_affine_quantized_x(x_many, w_many, 0.02f, 0.1f, b8), 0, 0);
      // K past the kernel's 1024-column int32 chunks.
      const int64_t k_long = size(1025, 2600);
      const Tensor x_long = random({2, k_long}, -3.0f, 3.0f), w_long = random_int8({size(1, 13), k_long});
      expect(linear_int8_affine(x_long, w_long, 0.02f, 0.1f),
             ref::linear_int8_affine_quantized_x(x_long, w_long, 0.02f, 0.1f), 0, 0);
      const int64_t cin = size(1, 9), cout = size(1, 9), kernel = size(1, 5), t = size(kernel * 3, 120);
      const Conv1dOptions o{.stride = static_cast<int>(size(1, 3)), .padding = static_cast<int>(size(0, 2))};
      const Tensor cx = random({cin, t}), cw = random({cout, cin, kernel}), cb = random({cout});
      expect(conv1d(cx, cw, cb, o), ref::conv1d(cx, cw, cb, o), 1e-5, 1e-5);
      const Tensor sx = random({1, 640}), sw = random({258, 1, 256});
      expect(conv1d(sx, sw, {}, {.stride = 128}), ref::conv1d(sx, sw, {}, {.stride = 128}), 1e-4, 1e-5);
      // The int8 conv with ONNX Runtime's floored bias (conv_integer_wasm.cpp's range and quantization, then
      // the int16 product: over pair-major rows with time in the lanes for stride 1 and an even Cin, tap
      // pairs from k=2, over rows of time otherwise): bitwise the reference. Channels and steps past 8 reach
      // the SIMD tiles and their edges; odd dilations and strides split the outputs.
      for (int c = 0; c < 3; ++c) {
        const int64_t qin = size(1, 45), qout = size(1, 21), qk = size(1, 9), qt = size(3, 150);
        Conv1dOptions qo{.padding = static_cast<int>(size(0, 5))};
        if (c == 1) qo.dilation = static_cast<int>(size(2, 5));
        if (c == 2) qo.stride = static_cast<int>(size(2, 5));
        if (qt + 2 * qo.padding < qo.dilation * (qk - 1) + 1) continue;
        const Tensor qx = random({qin, qt}, -1.5f, 3.0f), qw = random_int8({qout, qin, qk}),
                     qb = random({qout});
        expect(conv1d_integer_dynamic_quantized_bias(qx, qw, qb, qo),
               ref::conv1d_integer_dynamic_quantized_bias(qx, qw, qb, qo), 0, 0);
      }
      // Instance norm (Kokoro's AdaIN; nn/norm.cpp's 8-lane sums) and group norm, as tests/unit/nn_ops_test.cpp.
      const int64_t gc = size(1, 7), gl = size(1, 300);
      const Tensor gx = random({gc, gl}, -2.0f, 3.0f), gg = random({gc}), gb = random({gc});
      expect(instance_norm(gx, gg, gb, 1e-5f), ref::group_norm(gx, static_cast<int>(gc), gg, gb, 1e-5f), 2e-5,
             2e-5);
      const Tensor gx2 = random({2 * gc, gl}, -2.0f, 3.0f), gg2 = random({2 * gc}), gb2 = random({2 * gc});
      expect(group_norm(gx2, static_cast<int>(gc), gg2, gb2, 1e-5f),
             ref::group_norm(gx2, static_cast<int>(gc), gg2, gb2, 1e-5f), 2e-5, 2e-5);
      // Per-row broadcasts (a channel's scale or shift), on either side of the operator: exact.
      const Tensor bx = random({3, size(1, 9), size(2, 37)}), bc = random({bx.dim(1), 1}, 0.5f, 2.0f);
      expect(sub(bc, bx), ref::binary(bc, bx, '-'), 0, 0);
      expect(div(bx, bc), ref::binary(bx, bc, '/'), 0, 0);
      // Snake's four-lane sine (tolerance as tests/unit/nn_snake_test.cpp).
      const Tensor snx = random({size(1, 9), size(1, 203)}, -50.0f, 50.0f),
                   sna = random({snx.dim(0)}, 0.1f, 20.0f);
      expect(snake(snx, sna), ref::snake(snx, sna), 2e-5, 2e-6);
      const int64_t h = size(1, 33), in = size(1, 40), steps = size(1, 9);
      LstmWeights lw;
      lw.w_ih = random({4 * h, in}, -0.5f, 0.5f);
      lw.w_hh = random({4 * h, h}, -0.5f, 0.5f);
      lw.b = random({4 * h});
      const Tensor lx = random({steps, in});
      expect(lstm(lx, lw), ref::lstm(lx, lw), 2e-5, 1e-5);
      const Tensor ax = random({size(1, 5), size(1, 700)}, -8.0f, 8.0f);
      for (Act act : {Act::Sigmoid, Act::Tanh, Act::Silu, Act::Relu, Act::Square, Act::GeluErf})
        expect(activation(ax, act), ref::activation(ax, act), 2e-6, 2e-6);
      expect(softmax(ax, -1), ref::softmax(ax, -1), 1e-6, 1e-5);
      expect(layer_norm(ax, {}, {}, 1e-5f), ref::layer_norm(ax, {}, {}, 1e-5f), 2e-5, 2e-5);
      const int heads = static_cast<int>(size(1, 4));
      const int64_t d = size(1, 24), tq = size(1, 12);
      const Tensor q = random({tq, heads * d}), kk = random({tq + 3, heads * d}),
                   v = random({tq + 3, heads * d});
      expect(attention(q, kk, v, {.n_heads = heads, .causal = true}),
             ref::attention(q, kk, v, {.n_heads = heads, .causal = true}), 1e-5, 1e-5);
    }
  }
};

}  // namespace
}  // namespace sotto

// out (4 f64): [failed checks, checks run, worst (|difference| - tolerance) over all checks (<= 0 passes), the
// worst check's index]. Returns 0.
__attribute__((export_name("sotto_nn_check"))) int32_t sotto_nn_check(uint32_t seed, double* out) {
  sotto::NnCheck check(seed);
  check.run();
  out[0] = check.failed;
  out[1] = check.checks;
  out[2] = check.worst_excess;
  out[3] = check.worst_check;
  return 0;
}
