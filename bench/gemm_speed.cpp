// GMAC/s of the op layer's f32 product (nn::cpu::gemm_nt, one thread) on Moonshine encoder shapes: the layers'
// linears, the conv stem's unrolled columns, attention's scores and values. Best of 15 runs each (on a shared
// machine the best run is the one least disturbed). Not part of the CMake build:
//   cmake --build --preset release --target sotto
//   clang++-19 -O2 -std=c++20 -Isrc bench/gemm_speed.cpp build/lib/libsotto.a -lpthread -o build/gemm_speed
//   build/gemm_speed            # the kernel the CPU selects (AVX2+FMA here)
//   build/gemm_speed portable   # the 4-lane build (SSE natively; the same code as wasm SIMD128)
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <random>
#include <vector>

#include "cpu/cpu_features.h"
#include "nn/gemm.h"

int main(int argc, char**) {
  const bool portable = argc > 1;
  sotto::cpu_force_portable(portable);
  struct Shape {
    const char* name;
    int64_t m, n, k;
  };
  const Shape shapes[] = {
      {"linear q/k/v/o 415x416x416", 415, 416, 416}, {"fc1 415x1664x416", 415, 1664, 416},
      {"fc2 415x416x1664", 415, 416, 1664},          {"conv2 832x830x2912", 832, 830, 2912},
      {"conv3 416x415x2496", 416, 415, 2496},        {"attn scores 415x415x52", 415, 415, 52},
      {"attn values 415x52x415", 415, 52, 415},
  };
  std::mt19937 gen(1);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  for (const Shape& s : shapes) {
    std::vector<float> a(static_cast<size_t>(s.m * s.k)), b(static_cast<size_t>(s.n * s.k)),
        c(static_cast<size_t>(s.m * s.n));
    for (float& x : a) x = dist(gen);
    for (float& x : b) x = dist(gen);
    double best = 1e9;
    for (int r = 0; r < 15; ++r) {
      const auto t0 = std::chrono::steady_clock::now();
      sotto::nn::cpu::gemm_nt(s.m, s.n, s.k, a.data(), s.k, b.data(), s.k, c.data(), s.n);
      best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    }
    std::printf("%-28s %7.2f GMAC/s (%s)\n", s.name, static_cast<double>(s.m * s.n * s.k) / best / 1e9,
                portable ? "portable" : "default");
  }
}
