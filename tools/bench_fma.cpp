// sotto_bench_fma: the f32 multiply-add peak of this machine at a given thread count, the ceiling for a float32
// product (Parakeet's encoder: ~94 GFLOP for 6 s of audio). Each thread runs 12 independent chains of fused
// multiply-adds on the widest vectors the CPU has (AVX-512, else AVX2 with FMA; 12 chains cover the FMA
// latency of 4 cycles on 2 ports with room to spare), so the FMA units, not the dependency, set the pace.
// Prints the median of the repeats in GFLOP/s (2 flops a lane a multiply-add).
//
//   sotto_bench_fma [--threads T] [--repeats R]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string_view>
#include <thread>
#include <vector>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace {

constexpr long kIterations = 100'000'000;
constexpr int kChains = 12;

#if defined(__x86_64__)
__attribute__((target("avx512f"))) float chains_avx512(long iterations) {
  __m512 a[kChains];
  for (int i = 0; i < kChains; ++i) a[i] = _mm512_set1_ps(1.0f + static_cast<float>(i) * 1e-3f);
  const __m512 b = _mm512_set1_ps(0.999999f), c = _mm512_set1_ps(1e-7f);
  for (long it = 0; it < iterations; ++it)
    for (int i = 0; i < kChains; ++i) a[i] = _mm512_fmadd_ps(a[i], b, c);
  __m512 s = a[0];
  for (int i = 1; i < kChains; ++i) s = _mm512_add_ps(s, a[i]);
  return _mm512_reduce_add_ps(s);
}

__attribute__((target("avx2,fma"))) float chains_avx2(long iterations) {
  __m256 a[kChains];
  for (int i = 0; i < kChains; ++i) a[i] = _mm256_set1_ps(1.0f + static_cast<float>(i) * 1e-3f);
  const __m256 b = _mm256_set1_ps(0.999999f), c = _mm256_set1_ps(1e-7f);
  for (long it = 0; it < iterations; ++it)
    for (int i = 0; i < kChains; ++i) a[i] = _mm256_fmadd_ps(a[i], b, c);
  __m256 s = a[0];
  for (int i = 1; i < kChains; ++i) s = _mm256_add_ps(s, a[i]);
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, s);
  return lanes[0] + lanes[7];
}
#endif

}  // namespace

int main(int argc, char** argv) {
  int threads = 2, repeats = 5;
  for (int i = 1; i < argc; ++i) {
    const std::string_view a = argv[i];
    if (a == "--threads" && i + 1 < argc) {
      threads = std::clamp(std::atoi(argv[++i]), 1, 256);
    } else if (a == "--repeats" && i + 1 < argc) {
      repeats = std::clamp(std::atoi(argv[++i]), 1, 1000);
    } else {
      std::fprintf(stderr, "usage: sotto_bench_fma [--threads T] [--repeats R]\n");
      return 2;
    }
  }
#if defined(__x86_64__)
  const bool avx512 = __builtin_cpu_supports("avx512f");
  if (!avx512 && !(__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))) {
    std::fprintf(stderr, "sotto_bench_fma: this CPU has neither AVX-512 nor AVX2 with FMA\n");
    return 1;
  }
  const int lanes = avx512 ? 16 : 8;
  std::vector<double> gflops;
  std::vector<float> sums(static_cast<size_t>(threads));
  float checksum = 0.0f;
  for (int r = 0; r < repeats; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    std::vector<std::thread> pool;
    for (int t = 0; t < threads; ++t)
      pool.emplace_back([&, t] {
        sums[static_cast<size_t>(t)] = avx512 ? chains_avx512(kIterations) : chains_avx2(kIterations);
      });
    for (auto& th : pool) th.join();
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    gflops.push_back(2.0 * lanes * kChains * static_cast<double>(kIterations) * threads / seconds / 1e9);
    for (float s : sums) checksum += s;  // keeps the chains live
  }
  std::sort(gflops.begin(), gflops.end());
  std::printf("f32 multiply-add peak, %d threads, %s: %.0f GFLOP/s median of %d (best %.0f)%s\n", threads,
              avx512 ? "AVX-512" : "AVX2", gflops[gflops.size() / 2], repeats, gflops.back(),
              checksum == 0.5f ? " " : "");
  return 0;
#else
  (void)threads;
  (void)repeats;
  std::fprintf(stderr, "sotto_bench_fma: x86-64 only\n");
  return 1;
#endif
}
