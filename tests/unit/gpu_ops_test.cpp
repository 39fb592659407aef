// The GPU kernels against the CPU, op by op (models/llm/gpu/op_check.h: references and tolerances), on fresh random
// inputs, natively through Dawn on Vulkan (SwiftShader on CI machines: the shapes are small), with the packed
// integer dot product and with its fallback, with the subgroup reductions and without, and with f16 casts
// where the device's round to nearest even.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdio>
#include <cstdlib>

#include "gpu/device.h"
#include "gpu/ops.h"
#include "gpu_test_support.h"
#include "models/llm/gpu/op_check.h"
#include "test_support.h"

namespace sotto::gpu {
namespace {

TEST(GpuOps, EveryKernelMatchesTheCpu) {
  auto device = testing::open_test_device();
  if (!device) GTEST_SKIP() << testing::gpu_skip_reason();
  // Each kernel path the device can take, with every feature on and off: the device's best (SwiftShader:
  // subgroups of 4, no shader-f16, so its f16 casts are never tried) and every fallback at once. The features
  // switch separate code (the integer dot, the reduction trees, the f16 rounding), so the two runs cover each
  // path; `sotto gpu-check` runs every combination of packed dot and subgroups (four on SwiftShader, ~45 s each).
  const KernelFeatures best = Ops(*device).features();
  for (bool fallbacks : {false, true}) {
    OpCheckOptions options;
    options.seed = sotto::testing::test_seed();
    options.packed_dot = !fallbacks;
    options.subgroups = !fallbacks && best.subgroups;
    options.f16 = !fallbacks && best.f16;
    auto checks = run_op_checks(*device, options);
    ASSERT_TRUE(checks.ok()) << checks.message();
    EXPECT_GT(checks->size(), options.subgroups ? 40u : 30u);
    if (std::getenv("SOTTO_PRINT_OP_CHECKS")) std::printf("%s", format_op_checks(*checks).c_str());
    for (const OpCheck& c : *checks)
      EXPECT_TRUE(c.passed) << c.op << " " << c.shape << ": error " << c.error << " > " << c.tolerance
                            << (options.packed_dot ? " (dot4I8Packed" : " (fallback dot")
                            << (options.subgroups ? ", subgroups" : ", workgroup trees")
                            << (options.f16 ? ", f16 casts)" : ", integer f16)");
  }
  EXPECT_EQ(device->last_error(), "");
}

// Without the subgroups feature on the device, the kernels build with the workgroup-memory trees alone (no
// `enable subgroups;`, which would not compile there) and still match the CPU.
TEST(GpuOps, KernelsBuildWithoutSubgroupsOrF16) {
  if (!testing::open_test_device()) GTEST_SKIP() << testing::gpu_skip_reason();
  DeviceOptions o;
  o.disable_subgroups = true;
  o.disable_f16 = true;
  auto opened = open_device(o);  // a device of its own, closed at the end of the test
  ASSERT_TRUE(opened.ok()) << opened.message();
  Device* device = opened->get();
  EXPECT_FALSE(device->info().subgroups);
  EXPECT_FALSE(device->info().shader_f16);
  Ops ops(*device);
  EXPECT_FALSE(ops.features().subgroups);
  EXPECT_FALSE(ops.features().f16);
  OpCheckOptions options;
  options.seed = sotto::testing::test_seed();
  auto checks = run_op_checks(*device, options);
  ASSERT_TRUE(checks.ok()) << checks.message();
  for (const OpCheck& c : *checks) EXPECT_TRUE(c.passed) << c.op << " " << c.shape << ": error " << c.error;
  EXPECT_EQ(device->last_error(), "");
}

TEST(GpuOps, DeviceErrorsAreClearLines) {
  auto device = testing::open_test_device();
  if (!device) GTEST_SKIP() << testing::gpu_skip_reason();
  auto bad = device->create_pipeline("fn broken( {", "main", "broken");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.message().find("webgpu: compiling pipeline 'broken'"), std::string::npos) << bad.message();
  EXPECT_EQ(bad.message().find('\n'), std::string::npos) << bad.message();
  auto huge = device->create_buffer(device->info().limits.max_buffer_size + 4, kUsageStorage, "huge");
  ASSERT_FALSE(huge.ok());
  EXPECT_NE(huge.message().find("exceeds the adapter's maximum"), std::string::npos) << huge.message();
  auto b = device->create_buffer(64, kUsageStorage | kUsageCopySrc | kUsageCopyDst, "small");
  ASSERT_TRUE(b.ok());
  const uint32_t data[4] = {1, 2, 3, 4};
  EXPECT_FALSE(device->write_buffer(*b, 60, data, 16).ok());  // past the end
  EXPECT_FALSE(device->start_read(*b, 2, 4).ok());            // misaligned
  EXPECT_FALSE(repack_rows(DType::Q4_0, data, 1, 48).ok());   // not whole blocks
  EXPECT_FALSE(repack_rows(DType::Q2_K, data, 1, 256).ok());  // no kernel
  EXPECT_FALSE(device->lost());
}

}  // namespace
}  // namespace sotto::gpu
