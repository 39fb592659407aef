// Plan fusion (gpu/fusion.h) op by op: the matrix x vector kernels of every weight type (a norm_quant, a matvec
// of the q8 rows it staged with a residual add, and one that norms and quantizes x itself, or for f32 / f16
// weights the normed f32 rows) fused into one dispatch give what the same kernels give as separate dispatches,
// bit for bit, on fresh random inputs. The model test (GpuLlm.FusedLayers...) covers the layer's other kernels
// with F32 / Q8_0 / Q4_0 files; this one adds Q5_0 and the K-quants the Q4_K_M downloads use. It also checks
// the rewriting's errors: a kernel of another workgroup size is refused, not miscompiled.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "core/quantize_ref.h"
#include "gpu/device.h"
#include "gpu/fusion.h"
#include "gpu/ops.h"
#include "gpu_test_support.h"
#include "models/llm/sampler.h"
#include "test_support.h"

namespace sotto::gpu {
namespace {

std::vector<float> random_vector(Rng& rng, size_t n) {
  std::vector<float> v(n);
  for (float& x : v) x = 2.0f * rng.next_unit() - 1.0f;
  return v;
}

std::vector<uint8_t> random_matrix(Rng& rng, DType w, int64_t rows, int64_t cols) {
  const std::vector<float> values = random_vector(rng, static_cast<size_t>(rows * cols));
  if (w == DType::F32) {
    std::vector<uint8_t> bytes(values.size() * 4);
    std::memcpy(bytes.data(), values.data(), bytes.size());
    return bytes;
  }
  const uint64_t row_bytes = *dtype_bytes(w, static_cast<uint64_t>(cols));
  std::vector<uint8_t> bytes(static_cast<size_t>(row_bytes * static_cast<uint64_t>(rows)));
  for (int64_t r = 0; r < rows; ++r)
    quantize_row_ref(w, values.data() + r * cols, bytes.data() + static_cast<uint64_t>(r) * row_bytes, cols);
  return bytes;
}

TEST(GpuFusion, MatrixKernelsOfEveryTypeGiveTheirSeparateOutputs) {
  Device* device = testing::open_test_device();
  if (!device) GTEST_SKIP() << testing::gpu_skip_reason();
  Rng rng(testing::test_seed());
  constexpr int64_t kRows = 48, kCols = 256;
  for (DType w : {DType::F32, DType::F16, DType::Q8_0, DType::Q4_0, DType::Q5_0, DType::Q4_K, DType::Q6_K}) {
    Ops ops(*device);
    const bool q8 = gpu_needs_q8(w);
    const std::vector<uint8_t> w1 = random_matrix(rng, w, kRows, kCols),
                               w2 = random_matrix(rng, w, kRows, kCols);
    const std::vector<float> x = random_vector(rng, kCols), norm = random_vector(rng, kCols);
    const std::vector<float> y1 = random_vector(rng, kRows), y2 = random_vector(rng, kRows);
    // The same three ops twice: on buffers of their own (run as they are), and on views of one pool (fused).
    struct Recorded {
      std::vector<Dispatch> plan;
      BufferHandle y1 = 0, y2 = 0;
    };
    auto record = [&](bool pooled) -> Result<Recorded> {
      Recorded r;
      if (pooled) SOTTO_TRY(ops.begin_pool(64 * 1024, "pool"));
      SOTTO_ASSIGN(GpuMatrix m1, ops.upload_matrix(w, w1.data(), kRows, kCols, "w1"));
      SOTTO_ASSIGN(GpuMatrix m2, ops.upload_matrix(w, w2.data(), kRows, kCols, "w2"));
      SOTTO_ASSIGN(BufferHandle xb, ops.upload(x.data(), x.size() * 4, "x"));
      SOTTO_ASSIGN(BufferHandle nb, ops.upload(norm.data(), norm.size() * 4, "norm"));
      SOTTO_ASSIGN(r.y1, ops.upload(y1.data(), y1.size() * 4, "y1"));
      SOTTO_ASSIGN(r.y2, ops.upload(y2.data(), y2.size() * 4, "y2"));
      SOTTO_ASSIGN(BufferHandle h, ops.buffer(kCols * 4, "h"));
      SOTTO_ASSIGN(BufferHandle xq, ops.buffer(kCols, "xq"));
      SOTTO_ASSIGN(BufferHandle xd, ops.buffer(kCols / 8, "xd"));
      ops.end_pool();
      SOTTO_TRY(ops.norm_quant(r.plan, xb, 0, nb, kCols, 1e-5f, h, q8 ? xq : 0, q8 ? xd : 0, q8, false, 1,
                               gpu_needs_q8_k(w)));
      const MatvecInput staged = q8 ? MatvecInput{0, 0, 0, 0.0f, xq, xd} : MatvecInput{h, 0, 0, 0.0f};
      SOTTO_TRY(ops.matvec(r.plan, m1, staged, r.y1, 0, 0, 0, true));
      const MatvecInput own = q8 ? MatvecInput{xb, 0, nb, 1e-5f} : MatvecInput{h, 0, 0, 0.0f};
      SOTTO_TRY(ops.matvec(r.plan, m2, own, r.y2, 0, 0, 0, false));
      return r;
    };
    auto separate = record(false);
    ASSERT_TRUE(separate.ok()) << separate.message();
    ASSERT_TRUE(device->run(separate->plan).ok());
    std::vector<float> want1(kRows), want2(kRows);
    ASSERT_TRUE(ops.read(separate->y1, 0, want1.data(), kRows * 4).ok());
    ASSERT_TRUE(ops.read(separate->y2, 0, want2.data(), kRows * 4).ok());
    auto step = ops.step_buffer();
    auto sync = ops.buffer(16, "sync");
    ASSERT_TRUE(step.ok() && sync.ok());
    for (uint32_t grid : {1u, 2u}) {
      auto pooled = record(true);
      ASSERT_TRUE(pooled.ok()) << pooled.message();
      uint32_t widest = 0;
      auto fused = ops.fuse(pooled->plan, *step, *sync, 1, grid, &widest);
      ASSERT_TRUE(fused.ok()) << dtype_name(w) << ": " << fused.message();
      const uint32_t zeros[4] = {0, 0, 0, 0};
      ASSERT_TRUE(device->write_buffer(*sync, 0, zeros, 16).ok());
      ASSERT_TRUE(device->run(std::span<const Dispatch>(&*fused, 1)).ok());
      uint32_t flag = 0;
      ASSERT_TRUE(ops.read(*sync, 0, &flag, 4).ok());
      if (flag != 0) {  // SwiftShader need not keep two workgroups resident: then the dispatch gave up
        EXPECT_GT(grid, 1u) << dtype_name(w) << ": one workgroup cannot wait for another";
        continue;
      }
      std::vector<float> got1(kRows), got2(kRows);
      ASSERT_TRUE(ops.read(pooled->y1, 0, got1.data(), kRows * 4).ok());
      ASSERT_TRUE(ops.read(pooled->y2, 0, got2.data(), kRows * 4).ok());
      EXPECT_EQ(std::memcmp(got1.data(), want1.data(), kRows * 4), 0) << dtype_name(w) << ", grid " << grid;
      EXPECT_EQ(std::memcmp(got2.data(), want2.data(), kRows * 4), 0) << dtype_name(w) << ", grid " << grid;
    }
  }
  EXPECT_EQ(device->last_error(), "");
}

TEST(GpuFusion, RefusesWhatItCannotRewrite) {
  FusionPhase other_size;
  other_size.wgsl = "@compute @workgroup_size(64)\nfn main(@builtin(local_invocation_id) lid: vec3u) {}\n";
  auto fused = fuse_phases(std::span<const FusionPhase>(&other_size, 1), 0, 32768);
  ASSERT_FALSE(fused.ok());
  EXPECT_NE(fused.message().find("workgroups of 64"), std::string::npos) << fused.message();

  FusionPhase unbound;
  unbound.wgsl =
      "@group(0) @binding(1) var<storage, read> x: array<f32>;\n"
      "@compute @workgroup_size(128)\nfn main(@builtin(local_invocation_id) lid: vec3u) { let v = x[lid.x]; "
      "}\n";
  fused = fuse_phases(std::span<const FusionPhase>(&unbound, 1), 0, 32768);
  ASSERT_FALSE(fused.ok());
  EXPECT_NE(fused.message().find("not bound"), std::string::npos) << fused.message();

  FusionPhase component;
  component.wgsl =
      "@group(0) @binding(1) var<storage, read_write> y: array<vec4f>;\n"
      "@compute @workgroup_size(128)\nfn main(@builtin(local_invocation_id) lid: vec3u) { y[lid.x].x = 1.0; "
      "}\n";
  component.bindings = {{1, FusionPhase::Bind::Kind::Storage, 0, 0, 0, {}}};
  fused = fuse_phases(std::span<const FusionPhase>(&component, 1), 1, 32768);
  ASSERT_FALSE(fused.ok());
  EXPECT_NE(fused.message().find("component store"), std::string::npos) << fused.message();
}

// A local name that hides a module-scope one keeps its meaning after the renaming (Q6_K's `let p` under the
// kernels' uniform `p`), and the accessors turn loads, stores and compound stores into root accesses.
TEST(GpuFusion, RenamingKeepsLocalNames) {
  FusionPhase ph;
  ph.wgsl = R"(
struct P { n: u32, pad0: u32, pad1: u32, pad2: u32 }
@group(0) @binding(0) var<uniform> p: P;
@group(0) @binding(1) var<storage, read_write> y: array<f32>;
fn twice(p: f32) -> f32 { return 2.0 * p; }
@compute @workgroup_size(128)
fn main(@builtin(local_invocation_id) lid: vec3u) {
  if (lid.x < p.n) {
    let p = twice(y[lid.x]);
    y[lid.x] += p;
  }
}
)";
  ph.bindings = {{0, FusionPhase::Bind::Kind::Params, 0, 0, 0, {7, 0, 0, 0}},
                 {1, FusionPhase::Bind::Kind::Storage, 0, 0, 0, {}}};
  auto fused = fuse_phases(std::span<const FusionPhase>(&ph, 1), 1, 32768);
  ASSERT_TRUE(fused.ok()) << fused.message();
  const std::string& s = fused->wgsl;
  EXPECT_NE(s.find("fn f0_twice(p: f32) -> f32 { return 2.0 * p; }"), std::string::npos) << s;
  EXPECT_NE(s.find("if (lid.x < fused_u.p4.n)"), std::string::npos) << s;
  EXPECT_NE(s.find("let p = f0_twice(f0_y_ld(lid.x));"), std::string::npos) << s;
  EXPECT_NE(s.find("f0_y_st(lid.x, f0_y_ld(lid.x) + ( p));"), std::string::npos) << s;
  EXPECT_EQ(fused->uniform.size(), 12u);  // slot and padding, the parameters, one vec4u of offsets
  EXPECT_EQ(fused->uniform[4], 7u);
}

}  // namespace
}  // namespace sotto::gpu
