// sotto_gpu_linear_bench [REPEATS]: the op layer's f32 linear on WebGPU (Dawn) at the speech models' product
// shapes: Moonshine's encoder (415 frames of a 10 s clip: 416 -> 416 / 1664, 1664 -> 416), Parakeet's at 6 s of
// audio (75 frames: 1024 -> 1024 / 2048 / 4096, 4096 -> 1024) and a large square one. Each shape: 50 products
// recorded back to back and one read, REPEATS times (default 7); prints the median microseconds a product
// (dispatch included) and the TFLOP/s that makes; square shapes also as a dependent chain (each product reads
// the last one's output, as in a model). For comparing kernels across builds on one GPU. Then a decoder step's
// shapes (one row: Moonshine's 416 -> 416, Parakeet's 1024 -> 1024) and a 416-float add, each as a dependent
// chain: the time one small dependent dispatch costs, whatever it computes (the floor of a step of ~70).
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <random>
#include <vector>

#include "api/clock.h"
#include "gpu/device.h"
#include "nn/ops.h"
#include "nn/tensor.h"

using namespace sotto;

int main(int argc, char** argv) {
  const int repeats = argc > 1 ? std::max(1, std::atoi(argv[1])) : 7;
  auto device = gpu::open_device();
  if (!device) {
    std::fprintf(stderr, "sotto_gpu_linear_bench: %s\n", device.message().c_str());
    return 1;
  }
  auto cpu = nn::Context::cpu();
  auto gpu = nn::Context::webgpu(**device);
  struct Shape3 {
    const char* what;
    int64_t m, n, k;
  };
  const Shape3 shapes[] = {{"moonshine qkv/out", 415, 416, 416}, {"moonshine fc1", 415, 1664, 416},
                           {"moonshine fc2", 415, 416, 1664},    {"parakeet attn", 75, 1024, 1024},
                           {"parakeet pw1", 75, 2048, 1024},     {"parakeet ff1", 75, 4096, 1024},
                           {"parakeet ff2", 75, 1024, 4096},     {"square 2048", 2048, 2048, 2048}};
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  auto random = [&](int64_t rows, int64_t cols) {
    std::vector<float> v(static_cast<size_t>(rows * cols));
    for (float& f : v) f = u(rng);
    auto t = gpu->copy_of(cpu->from_floats({rows, cols}, v));
    return std::move(t).value();
  };
  constexpr int kChain = 50;
  std::printf("%-20s %6s %6s %6s %12s %10s\n", "product", "m", "n", "k", "us/product", "TFLOP/s");
  for (const Shape3& s : shapes) {
    const nn::Tensor x = random(s.m, s.k), w = random(s.n, s.k), b = random(1, s.n).reshape({s.n});
    // Independent products may overlap on the GPU (no hazard between them); a model's products wait for
    // each other, so where n == k the chain is also timed with each product reading the last one's output.
    for (const bool dependent : {false, true}) {
      if (dependent && s.n != s.k) continue;
      std::vector<double> us;
      for (int r = 0; r <= repeats; ++r) {
        const double t0 = now_ms();
        nn::Tensor y = x;
        for (int i = 0; i < kChain; ++i) y = nn::linear(dependent ? y : x, w, b);
        if (auto read = gpu->to_floats(y); !read) {
          std::fprintf(stderr, "sotto_gpu_linear_bench: %s\n", read.message().c_str());
          return 1;
        }
        if (r > 0) us.push_back((now_ms() - t0) * 1000.0 / kChain);  // the first compiles the pipelines
      }
      std::sort(us.begin(), us.end());
      const double med = us[us.size() / 2];
      std::printf("%-20s %6lld %6lld %6lld %12.1f %10.2f%s\n", s.what, static_cast<long long>(s.m),
                  static_cast<long long>(s.n), static_cast<long long>(s.k), med,
                  2.0 * static_cast<double>(s.m * s.n * s.k) / (med * 1e6), dependent ? "  (dependent)" : "");
    }
  }
  // One row at a time, each op reading the last one's output: what a decoder step's chain of dispatches costs.
  std::printf("\n%-36s %12s\n", "dependent chain of one-row ops", "us/dispatch");
  auto chain = [&](const char* what, auto op, const nn::Tensor& x0) -> bool {
    std::vector<double> us;
    for (int r = 0; r <= repeats; ++r) {
      const double t0 = now_ms();
      nn::Tensor y = x0;
      for (int i = 0; i < kChain; ++i) y = op(y);
      if (auto read = gpu->to_floats(y); !read) {
        std::fprintf(stderr, "sotto_gpu_linear_bench: %s\n", read.message().c_str());
        return false;
      }
      if (r > 0) us.push_back((now_ms() - t0) * 1000.0 / kChain);
    }
    std::sort(us.begin(), us.end());
    std::printf("%-36s %12.1f\n", what, us[us.size() / 2]);
    return true;
  };
  for (const int64_t d : {int64_t{416}, int64_t{1024}}) {
    const nn::Tensor x = random(1, d), w = random(d, d), b = random(1, d).reshape({d});
    char what[64];
    std::snprintf(what, sizeof what, "linear 1 x %lld -> %lld", static_cast<long long>(d),
                  static_cast<long long>(d));
    if (!chain(what, [&](const nn::Tensor& y) { return nn::linear(y, w, b); }, x)) return 1;
    std::snprintf(what, sizeof what, "add of %lld floats", static_cast<long long>(d));
    if (!chain(what, [&](const nn::Tensor& y) { return nn::add(y, x); }, x)) return 1;
  }
  return 0;
}
