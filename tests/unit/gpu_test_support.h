// Opening the GPU device in tests. Machines set up by scripts/setup.sh have Dawn (npm bun-webgpu-linux-x64)
// and SwiftShader's Vulkan driver (Debian's chromium package): there a failure to open is a test failure.
// Elsewhere, and in the sanitizer builds, the GPU tests skip and say why. Also the decode loop the plan
// comparisons share (prompt_then_greedy).
#pragma once

#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "gpu/device.h"
#include "models/llm/gpu/llm_gpu.h"
#include "test_support.h"

namespace sotto::testing {

inline std::string& gpu_skip_reason() {
  static std::string reason;
  return reason;
}

inline std::unique_ptr<gpu::Device>& shared_test_device() {
  static std::unique_ptr<gpu::Device> device;
  return device;
}

// Closes the shared device when the tests end, before static destructors run: left to those, SwiftShader's
// worker threads outlive the library state they use and the process dies with SIGSEGV after every test
// passed.
class GpuDeviceTeardown : public ::testing::Environment {
 public:
  void TearDown() override { shared_test_device().reset(); }
};
inline ::testing::Environment* const gpu_device_teardown =
    ::testing::AddGlobalTestEnvironment(new GpuDeviceTeardown);

// The device, shared by all tests of the binary (opening costs ~1 s on SwiftShader); nullptr (with
// gpu_skip_reason() set) when this machine lacks the pieces; an open failure on a machine that has them
// fails the calling test.
inline gpu::Device* open_test_device() {
  std::unique_ptr<gpu::Device>& device = shared_test_device();
  static bool tried = false;
  if (tried) return device.get();
  tried = true;
#ifdef SOTTO_TEST_UNDER_SANITIZER
  // Dawn and SwiftShader are not instrumented: their worker threads and allocations would be reported (TSan,
  // LeakSanitizer) or run for many minutes. The plain build runs these tests.
  gpu_skip_reason() = "GPU tests are skipped under ASan/TSan (Dawn and SwiftShader are not instrumented)";
  return nullptr;
#endif
  const std::string library =
      std::string(SOTTO_SOURCE_DIR) + "/node_modules/bun-webgpu-linux-x64/libwebgpu_wrapper.so";
  if (!std::getenv("SOTTO_DAWN_LIBRARY") && access(library.c_str(), R_OK) == 0)
    setenv("SOTTO_DAWN_LIBRARY", library.c_str(), 0);
  const bool have_library = std::getenv("SOTTO_DAWN_LIBRARY") != nullptr;
  const bool have_vulkan = access("/usr/lib/chromium/vk_swiftshader_icd.json", R_OK) == 0 ||
                           std::getenv("VK_ICD_FILENAMES") != nullptr;
  auto opened = gpu::open_device({});
  if (opened.ok()) {
    device = std::move(opened).value();
    return device.get();
  }
  if (!have_library || !have_vulkan) {
    gpu_skip_reason() =
        std::string("no WebGPU here (") + (have_library ? "" : "npm bun-webgpu-linux-x64 not installed; ") +
        (have_vulkan ? "" : "no Vulkan driver: /usr/lib/chromium/vk_swiftshader_icd.json absent; ") +
        opened.message() + ")";
    return nullptr;
  }
  ADD_FAILURE() << "the GPU device should open on this machine: " << opened.message();
  gpu_skip_reason() = opened.message();
  return nullptr;
}

// `prompt` token by token through `g` (fused plan or separate dispatches), then greedy tokens until `n` are
// chosen, each step's logits appended to *logits; the chosen ids.
inline std::vector<int32_t> prompt_then_greedy(gpu::LlmGpu& g, bool fused, const std::vector<int32_t>& prompt,
                                               size_t n, std::vector<std::vector<float>>* logits) {
  g.set_fused(fused);
  g.reset();
  std::vector<int32_t> ids;
  for (size_t i = 0; i + 1 < prompt.size(); ++i) EXPECT_TRUE(g.submit(prompt[i]).ok());
  auto next = g.step(prompt.back());
  while (next.ok() && ids.size() < n) {
    ids.push_back(*next);
    auto l = g.logits();
    EXPECT_TRUE(l.ok());
    if (l.ok()) logits->push_back(*l);
    next = g.step(-1);
  }
  EXPECT_TRUE(next.ok()) << next.message();
  return ids;
}

}  // namespace sotto::testing
