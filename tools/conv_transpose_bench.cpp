// sotto_conv_transpose_bench [REPEATS]: the op layer's transposed conv1d on WebGPU (Dawn) at Kokoro's generator
// shapes for the 77-phoneme bench sentence: ups.0 (512 -> 256 channels, kernel 20, stride 10, 390 -> 3,900
// positions), ups.1 (256 -> 128, kernel 12, stride 6, 3,900 -> 23,400) and the inverse STFT (22 -> 1, kernel 20,
// stride 5, 23,401 -> 117,020). Each shape and kernel (the 16-channel tiled one, the phase one) in turn within
// every repeat: 20 ops recorded back to back and one read; prints the median microseconds an op (dispatch
// included), the GFLOP/s that makes, and how many outputs of the phase kernel differ from the tiled one's (bit
// for bit: 0 where the driver compiles both sums alike).
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <vector>

#include "api/clock.h"
#include "gpu/device.h"
#include "nn/gpu_ops.h"
#include "nn/ops.h"
#include "nn/tensor.h"

using namespace sotto;

int main(int argc, char** argv) {
  const int repeats = argc > 1 ? std::max(1, std::atoi(argv[1])) : 7;
  auto device = gpu::open_device();
  if (!device) {
    std::fprintf(stderr, "sotto_conv_transpose_bench: %s\n", device.message().c_str());
    return 1;
  }
  auto cpu = nn::Context::cpu();
  auto gpu = nn::Context::webgpu(**device);
  struct Case {
    const char* what;
    int64_t cin, cout, kernel, length;
    int stride, padding;
    bool bias;
  };
  const Case cases[] = {{"ups.0", 512, 256, 20, 390, 10, 5, true},
                        {"ups.1", 256, 128, 12, 3900, 6, 3, true},
                        {"istft", 22, 1, 20, 23401, 5, 0, false}};
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  auto random = [&](nn::Shape shape) {
    std::vector<float> v(static_cast<size_t>(shape.elements()));
    for (float& f : v) f = u(rng);
    return gpu->copy_of(cpu->from_floats(shape, v)).value();
  };
  constexpr int kChain = 20;
  const nn::gpu_ops::ConvTransposeKernel kernels[] = {nn::gpu_ops::ConvTransposeKernel::Tiled16,
                                                      nn::gpu_ops::ConvTransposeKernel::Phases};
  std::printf("%-6s %-8s %10s %9s %s\n", "shape", "kernel", "us/op", "GFLOP/s", "outputs differing");
  for (const Case& c : cases) {
    const nn::Tensor x = random({c.cin, c.length}), w = random({c.cin, c.cout, c.kernel});
    const nn::Tensor b = c.bias ? random({c.cout}) : nn::Tensor{};
    const nn::ConvTranspose1dOptions o{.stride = c.stride, .padding = c.padding};
    std::vector<double> us[2];
    std::vector<float> out[2];
    for (int r = 0; r <= repeats; ++r)
      for (int k = 0; k < 2; ++k) {
        nn::gpu_ops::set_conv_transpose_kernel(kernels[k]);
        const double t0 = now_ms();
        nn::Tensor y;
        for (int i = 0; i < kChain; ++i) y = nn::conv_transpose1d(x, w, b, o);
        auto read = gpu->to_floats(y);
        if (!read) {
          std::fprintf(stderr, "sotto_conv_transpose_bench: %s\n", read.message().c_str());
          return 1;
        }
        if (r > 0)
          us[k].push_back((now_ms() - t0) * 1000.0 / kChain);  // the first compiles the pipelines
        else
          out[k] = *read;
      }
    nn::gpu_ops::set_conv_transpose_kernel(nn::gpu_ops::ConvTransposeKernel::Auto);
    int64_t differ = 0;
    for (size_t i = 0; i < out[0].size() && i < out[1].size(); ++i)
      differ += std::memcmp(&out[0][i], &out[1][i], sizeof(float)) != 0;
    const double macs = static_cast<double>(c.cout) * static_cast<double>(out[0].size() / c.cout) *
                        static_cast<double>(c.cin) * static_cast<double>(c.kernel) / c.stride;
    for (int k = 0; k < 2; ++k) {
      std::sort(us[k].begin(), us[k].end());
      const double med = us[k][us[k].size() / 2];
      std::printf("%-6s %-8s %10.1f %9.1f %lld of %zu\n", c.what, k ? "phases" : "tiled16", med,
                  2.0 * macs / (med * 1e3), static_cast<long long>(differ), out[0].size());
    }
  }
  return 0;
}
