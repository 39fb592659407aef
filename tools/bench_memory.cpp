// sotto_bench_memory: the read bandwidth of this machine at a given thread count, the ceiling for decoding
// a language model (each new token reads every weight once). Each thread sums its own contiguous share of a
// buffer much larger than the caches, with 256-bit loads when the CPU has AVX2; the buffer is written first so
// every page is mapped before timing. Prints the median of the repeats.
//
//   sotto_bench_memory [--threads T] [--mib N] [--repeats R] [--json]
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string_view>
#include <thread>
#include <vector>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace {

#if defined(__x86_64__)
__attribute__((target("avx2"))) uint64_t sum_avx2(const uint64_t* p, size_t n_words) {
  // Four independent accumulators so the loads, not the adds, set the pace.
  __m256i a = _mm256_setzero_si256(), b = a, c = a, d = a;
  const auto* v = reinterpret_cast<const __m256i*>(p);
  const size_t n_vec = n_words / 4;
  size_t i = 0;
  for (; i + 4 <= n_vec; i += 4) {
    a = _mm256_add_epi64(a, _mm256_load_si256(v + i));
    b = _mm256_add_epi64(b, _mm256_load_si256(v + i + 1));
    c = _mm256_add_epi64(c, _mm256_load_si256(v + i + 2));
    d = _mm256_add_epi64(d, _mm256_load_si256(v + i + 3));
  }
  alignas(32) uint64_t lanes[4];
  _mm256_store_si256(reinterpret_cast<__m256i*>(lanes),
                     _mm256_add_epi64(_mm256_add_epi64(a, b), _mm256_add_epi64(c, d)));
  uint64_t s = lanes[0] + lanes[1] + lanes[2] + lanes[3];
  for (size_t w = i * 4; w < n_words; ++w) s += p[w];
  return s;
}
#endif

uint64_t sum_portable(const uint64_t* p, size_t n_words) {
  uint64_t s0 = 0, s1 = 0, s2 = 0, s3 = 0;
  size_t i = 0;
  for (; i + 4 <= n_words; i += 4) {
    s0 += p[i];
    s1 += p[i + 1];
    s2 += p[i + 2];
    s3 += p[i + 3];
  }
  for (; i < n_words; ++i) s0 += p[i];
  return s0 + s1 + s2 + s3;
}

}  // namespace

int main(int argc, char** argv) {
  int threads = 2, repeats = 11;
  size_t mib = 1024;
  bool json = false;
  for (int i = 1; i < argc; ++i) {
    const std::string_view a = argv[i];
    if (a == "--json") {
      json = true;
    } else if (a == "--threads" && i + 1 < argc) {
      threads = std::clamp(std::atoi(argv[++i]), 1, 256);
    } else if (a == "--mib" && i + 1 < argc) {
      mib = static_cast<size_t>(std::clamp(std::atoi(argv[++i]), 64, 65536));
    } else if (a == "--repeats" && i + 1 < argc) {
      repeats = std::clamp(std::atoi(argv[++i]), 1, 1000);
    } else {
      std::fprintf(stderr, "usage: sotto_bench_memory [--threads T] [--mib N] [--repeats R] [--json]\n");
      return 2;
    }
  }
  bool avx2 = false;
#if defined(__x86_64__)
  avx2 = __builtin_cpu_supports("avx2");
#endif
  const size_t n_words = mib * 1024 * 1024 / sizeof(uint64_t);
  auto* buffer = static_cast<uint64_t*>(std::aligned_alloc(4096, n_words * sizeof(uint64_t)));
  if (!buffer) return std::fprintf(stderr, "sotto_bench_memory: cannot allocate %zu MiB\n", mib), 1;
  for (size_t i = 0; i < n_words; ++i) buffer[i] = i * 0x9e3779b97f4a7c15ull;

  std::vector<double> gb_per_s;
  std::vector<uint64_t> sums(static_cast<size_t>(threads));
  uint64_t checksum = 0;
  for (int r = 0; r < repeats; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    std::vector<std::thread> pool;
    for (int t = 0; t < threads; ++t) {
      // Shares are multiples of 16 words (128 bytes) so every thread's loads stay 32-byte aligned.
      const size_t begin = n_words / 16 * static_cast<size_t>(t) / static_cast<size_t>(threads) * 16;
      const size_t end = t + 1 == threads
                             ? n_words
                             : n_words / 16 * static_cast<size_t>(t + 1) / static_cast<size_t>(threads) * 16;
      pool.emplace_back([&, t, begin, end] {
#if defined(__x86_64__)
        if (avx2) {
          sums[static_cast<size_t>(t)] = sum_avx2(buffer + begin, end - begin);
          return;
        }
#endif
        sums[static_cast<size_t>(t)] = sum_portable(buffer + begin, end - begin);
      });
    }
    for (auto& th : pool) th.join();
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    gb_per_s.push_back(static_cast<double>(n_words * sizeof(uint64_t)) / seconds / 1e9);
    for (uint64_t s : sums) checksum += s;  // keeps the sums live
  }
  std::sort(gb_per_s.begin(), gb_per_s.end());
  const double median = gb_per_s[gb_per_s.size() / 2];
  if (json) {
    std::printf(
        "{\"threads\":%d,\"mib\":%zu,\"repeats\":%d,\"avx2\":%s,\"read_gb_per_s\":%.2f,\"best_gb_per_s\":%."
        "2f,"
        "\"checksum\":%llu}\n",
        threads, mib, repeats, avx2 ? "true" : "false", median, gb_per_s.back(),
        static_cast<unsigned long long>(checksum & 0xffff));
  } else {
    std::printf("read bandwidth, %d threads, %zu MiB buffer: %.2f GB/s median of %d (best %.2f)\n", threads,
                mib, median, repeats, gb_per_s.back());
  }
  std::free(buffer);
  return 0;
}
