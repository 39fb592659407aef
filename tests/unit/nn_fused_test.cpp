// linear_int8_fused (nn/fused.h): its scalar reference against the separate CPU ops it fuses (layer_norm,
// linear_int8_affine per segment, rope, silu, mul, add), then the GPU kernel (SwiftShader in CI, skipped with
// the reason where this machine has no WebGPU) against the reference, on fresh random inputs of odd sizes:
// K a multiple of 4 (the kernel's word loop) and not (its byte loop), every option alone and together.
#include "gpu/device.h"
#include "gpu_test_support.h"
#include "nn/fused.h"
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

Tensor upload_raw(Context& gpu, const Tensor& cpu) {
  return gpu.from_bytes(cpu.shape(), cpu.dtype(), {cpu.data<uint8_t>(), static_cast<size_t>(cpu.bytes())});
}

float rand_scale() {
  return 0.003f + 0.02f * static_cast<float>(rand_int(0, 100)) / 100.0f;
}
float rand_offset() {
  return 0.3f * static_cast<float>(rand_int(-100, 100)) / 100.0f;
}

// One random case: sizes and which options are on.
struct Case {
  int64_t m, k, n;
  Int8LinearFused f;
  Tensor x;
};

Case make_case(Context& cpu, bool word_k, int kind) {
  Case c;
  c.m = rand_int(1, 3);
  c.k = word_k ? 4 * rand_int(1, 60) : 4 * rand_int(0, 60) + rand_int(1, 3);
  c.x = rand_tensor(cpu, {c.m, c.k}, -2.0f, 2.0f);
  Int8LinearFused& f = c.f;
  if (kind == 0) {  // norm, bias, residual, 2 segments
    c.n = rand_int(2, 90);
    f.segment = (c.n + 1) / 2;
    f.norm_gamma = rand_tensor(cpu, {c.k}, 0.5f, 1.5f);
    f.bias = rand_tensor(cpu, {c.n});
    f.residual = rand_tensor(cpu, {c.m, c.n});
  } else if (kind == 1) {  // gated SiLU with norm and bias (the up projection)
    c.n = 2 * rand_int(1, 45);
    f.norm_gamma = rand_tensor(cpu, {c.k}, 0.5f, 1.5f);
    f.bias = rand_tensor(cpu, {c.n});
    f.gated_silu = true;
    f.residual = rand_tensor(cpu, {c.m, c.n / 2});
  } else {  // stacked q/k/v: norm, rope on q and k, k and v appended to a cache
    f.head_dim = 2 * static_cast<int>(rand_int(2, 9));
    f.rotary_dim = 2 * static_cast<int>(rand_int(1, f.head_dim / 2));
    const int64_t heads = rand_int(1, 3), d = heads * f.head_dim;
    c.n = 3 * d;
    f.segment = d;
    f.norm_gamma = rand_tensor(cpu, {c.k}, 0.5f, 1.5f);
    f.rope_columns = 2 * d;
    f.position0 = rand_int(0, 3000);
    const int64_t rows = c.m + rand_int(0, 4);
    f.cache_row = rows - c.m - rand_int(0, rows - c.m);
    f.cache_k = rand_tensor(cpu, {rows, d});
    f.cache_v = rand_tensor(cpu, {rows, d});
  }
  f.w = rand_int8(cpu, {c.n, c.k}, DType::I8);
  for (size_t s = 0; s < 4; ++s) {
    f.scale[s] = rand_scale();
    f.offset[s] = rand_offset();
  }
  return c;
}

// The fused op by the separate CPU ops, in the same order.
Tensor composed(const Tensor& x, const Int8LinearFused& f) {
  const int64_t n = f.w.dim(0), k = f.w.dim(1), segment = f.segment > 0 ? f.segment : n;
  Tensor h = f.norm_gamma.defined() ? ref::layer_norm(x, f.norm_gamma, {}, f.norm_eps) : x;
  std::vector<Tensor> parts;
  for (int64_t s = 0; s * segment < n; ++s) {
    const int64_t rows = std::min(segment, n - s * segment);
    const Tensor ws = x.ctx().from_bytes(
        {rows, k}, DType::I8, {f.w.data<uint8_t>() + s * segment * k, static_cast<size_t>(rows * k)});
    parts.push_back(
        ref::linear_int8_affine(h, ws, f.scale[static_cast<size_t>(s)], f.offset[static_cast<size_t>(s)]));
  }
  Tensor y = parts.size() == 1 ? parts[0] : concat(parts, -1);
  if (f.bias.defined()) y = ref::binary(y, f.bias, '+');
  if (f.rope_columns > 0) {
    const Tensor roped =
        ref::rope(slice(y, -1, 0, f.rope_columns), static_cast<int>(f.rope_columns / f.head_dim),
                  f.rotary_dim, f.rope_base, f.position0, true);
    const Tensor rest[] = {roped, slice(y, -1, f.rope_columns, n)};
    y = f.rope_columns < n ? concat(rest, -1) : roped;
  }
  if (f.gated_silu)
    y = ref::binary(slice(y, -1, 0, n / 2), ref::activation(slice(y, -1, n / 2, n), Act::Silu), '*');
  if (f.cache_k.defined()) {
    // The rows the op writes into the caches, returned after the output for the caller to compare.
    const Tensor all[] = {slice(y, -1, 0, segment), slice(y, -1, segment, 2 * segment),
                          slice(y, -1, 2 * segment, 3 * segment)};
    return concat(all, 0);
  }
  if (f.residual.defined()) y = ref::binary(y, f.residual, '+');
  return y;
}

float tolerance(int64_t k) {
  return 4e-6f * static_cast<float>(std::sqrt(static_cast<double>(k)) + 1.0) * 6.0f;
}

TEST(NnFused, ReferenceMatchesTheSeparateOps) {
  auto cpu = Context::cpu();
  for (int kind = 0; kind < 3; ++kind)
    for (bool word_k : {true, false}) {
      Case c = make_case(*cpu, word_k, kind);
      const std::vector<float> k_before = c.f.cache_k.defined() ? floats(c.f.cache_k) : std::vector<float>();
      const Tensor want = composed(c.x, c.f);
      const Tensor got = linear_int8_fused(c.x, c.f);
      const std::string what = "fused reference, kind " + std::to_string(kind);
      if (!c.f.cache_k.defined()) {
        expect_close(got, want, tolerance(c.k), 1e-5f, what);
        continue;
      }
      const int64_t d = c.f.segment;
      expect_close(got, slice(want, 0, 0, c.m), tolerance(c.k), 1e-5f, what + " q");
      expect_close(slice(c.f.cache_k, 0, c.f.cache_row, c.f.cache_row + c.m), slice(want, 0, c.m, 2 * c.m),
                   tolerance(c.k), 1e-5f, what + " k cache");
      expect_close(slice(c.f.cache_v, 0, c.f.cache_row, c.f.cache_row + c.m),
                   slice(want, 0, 2 * c.m, 3 * c.m), tolerance(c.k), 1e-5f, what + " v cache");
      // Rows outside the appended ones are untouched.
      const std::vector<float> k_after = floats(c.f.cache_k);
      for (int64_t r = 0; r < c.f.cache_k.dim(0); ++r)
        if (r < c.f.cache_row || r >= c.f.cache_row + c.m)
          for (int64_t j = 0; j < d; ++j) EXPECT_EQ(k_after[r * d + j], k_before[r * d + j]) << "row " << r;
    }
}

TEST(NnFused, GpuMatchesTheReference) {
  gpu::Device* device = sotto::testing::open_test_device();
  if (!device) GTEST_SKIP() << sotto::testing::gpu_skip_reason();
  auto cpu = Context::cpu();
  auto gpu = Context::webgpu(*device);
  for (int kind = 0; kind < 4; ++kind)
    for (bool word_k : {true, false}) {
      Case c = make_case(*cpu, word_k, kind % 3);
      if (kind == 3) {  // the plain product: no option at all
        // Long rows (64 threads a row in the kernel), bytes or words.
        c.k = word_k ? 4 * rand_int(256, 300) : 4 * rand_int(256, 300) + rand_int(1, 3);
        c.x = rand_tensor(*cpu, {c.m, c.k}, -2.0f, 2.0f);
        Int8LinearFused plain;
        plain.w = rand_int8(*cpu, {c.n, c.k}, DType::I8);
        plain.scale = c.f.scale;
        plain.offset = c.f.offset;
        c.f = plain;
      }
      const Int8LinearFused& f = c.f;
      Int8LinearFused g = f;
      auto up = [&](const Tensor& t) { return t.defined() ? upload(*gpu, t) : Tensor(); };
      g.w = upload_raw(*gpu, f.w);
      g.norm_gamma = up(f.norm_gamma);
      g.bias = up(f.bias);
      g.residual = up(f.residual);
      g.cache_k = up(f.cache_k);
      g.cache_v = up(f.cache_v);
      const Tensor got = download(*cpu, *gpu, linear_int8_fused(upload(*gpu, c.x), g));
      const Tensor want = ref::linear_int8_fused(c.x, f);  // writes the CPU caches' rows
      const std::string what = "gpu fused, kind " + std::to_string(kind);
      expect_close(got, want, tolerance(c.k), 1e-5f, what);
      if (f.cache_k.defined()) {
        expect_close(download(*cpu, *gpu, g.cache_k), f.cache_k, tolerance(c.k), 1e-5f, what + " k cache");
        expect_close(download(*cpu, *gpu, g.cache_v), f.cache_v, tolerance(c.k), 1e-5f, what + " v cache");
      }
    }
}

}  // namespace
}  // namespace sotto::nn
