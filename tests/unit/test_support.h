// Helpers shared by the reader tests: fixture loading, a small SHA-256 (FIPS 180-4) to compare tensor bytes
// with digests computed by tools/fixture_digests.py, and fresh random bytes.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <span>
#include <string>
#include <vector>

// Defined when this build runs under AddressSanitizer or ThreadSanitizer (clang's __has_feature, GCC's
// macros): real-model tests (minutes there) and timing checks (shadow memory changes what a byte costs) skip.
// SOTTO_TEST_UNDER_TSAN: ThreadSanitizer alone.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define SOTTO_TEST_UNDER_SANITIZER 1
#endif
#if defined(__SANITIZE_THREAD__)
#define SOTTO_TEST_UNDER_TSAN 1
#endif
#if defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define SOTTO_TEST_UNDER_SANITIZER 1
#endif
#if __has_feature(thread_sanitizer)
#define SOTTO_TEST_UNDER_TSAN 1
#endif
#endif

namespace sotto::testing {

// Fresh random data per run (seeded from the clock), printed once so a failure can be replayed with
// SOTTO_TEST_SEED=<seed>.
inline uint64_t test_seed() {
  static const uint64_t seed = [] {
    const char* env = std::getenv("SOTTO_TEST_SEED");
    const uint64_t s =
        env ? std::strtoull(env, nullptr, 10)
            : static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
    std::printf("[ seed    ] SOTTO_TEST_SEED=%llu\n", static_cast<unsigned long long>(s));
    return s;
  }();
  return seed;
}

inline std::string fixture_path(const std::string& rel) {
  return std::string(SOTTO_FIXTURES_DIR) + "/" + rel;
}

inline std::vector<uint8_t> read_fixture(const std::string& rel) {
  std::vector<uint8_t> out;
  std::FILE* f = std::fopen(fixture_path(rel).c_str(), "rb");
  if (!f) return out;
  uint8_t buf[1 << 16];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) out.insert(out.end(), buf, buf + n);
  std::fclose(f);
  return out;
}

inline std::string sha256_hex(std::span<const uint8_t> data) {
  static constexpr uint32_t k[64] = {
      0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
      0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
      0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
      0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
      0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
      0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
      0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
      0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2};
  uint32_t h[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                   0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
  auto rotr = [](uint32_t x, int n) { return (x >> n) | (x << (32 - n)); };
  std::vector<uint8_t> msg(data.begin(), data.end());
  uint64_t bit_length = static_cast<uint64_t>(data.size()) * 8;
  msg.push_back(0x80);
  while (msg.size() % 64 != 56) msg.push_back(0);
  for (int i = 7; i >= 0; --i) msg.push_back(static_cast<uint8_t>(bit_length >> (8 * i)));
  for (size_t block = 0; block < msg.size(); block += 64) {
    uint32_t w[64];
    for (int i = 0; i < 16; ++i)
      w[i] = uint32_t{msg[block + 4 * i]} << 24 | uint32_t{msg[block + 4 * i + 1]} << 16 |
             uint32_t{msg[block + 4 * i + 2]} << 8 | uint32_t{msg[block + 4 * i + 3]};
    for (int i = 16; i < 64; ++i) {
      uint32_t s0 = rotr(w[i - 15], 7) ^ rotr(w[i - 15], 18) ^ (w[i - 15] >> 3);
      uint32_t s1 = rotr(w[i - 2], 17) ^ rotr(w[i - 2], 19) ^ (w[i - 2] >> 10);
      w[i] = w[i - 16] + s0 + w[i - 7] + s1;
    }
    uint32_t a = h[0], b = h[1], c = h[2], d = h[3], e = h[4], f = h[5], g = h[6], hh = h[7];
    for (int i = 0; i < 64; ++i) {
      uint32_t t1 = hh + (rotr(e, 6) ^ rotr(e, 11) ^ rotr(e, 25)) + ((e & f) ^ (~e & g)) + k[i] + w[i];
      uint32_t t2 = (rotr(a, 2) ^ rotr(a, 13) ^ rotr(a, 22)) + ((a & b) ^ (a & c) ^ (b & c));
      hh = g, g = f, f = e, e = d + t1, d = c, c = b, b = a, a = t1 + t2;
    }
    h[0] += a, h[1] += b, h[2] += c, h[3] += d, h[4] += e, h[5] += f, h[6] += g, h[7] += hh;
  }
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  for (uint32_t v : h)
    for (int i = 28; i >= 0; i -= 4) out.push_back(kHex[(v >> i) & 15]);
  return out;
}

inline std::vector<uint8_t> random_bytes(std::mt19937_64& rng, size_t n) {
  std::vector<uint8_t> out(n);
  for (auto& b : out) b = static_cast<uint8_t>(rng());
  return out;
}

// Prefix lengths to cut a file at: every length up to 4 KiB, then ~200 spread over the rest (50 for files over
// 2 MB: each cut of a 150k-token vocabulary re-parses every string before it, and Debug builds run this too).
inline std::vector<size_t> truncation_points(size_t file_size) {
  std::vector<size_t> points;
  for (size_t n = 0; n < file_size && n <= 4096; ++n) points.push_back(n);
  size_t spread = file_size > (size_t{2} << 20) ? 50 : 200;
  if (file_size > 4096)
    for (size_t i = 1; i <= spread; ++i) points.push_back(4096 + (file_size - 4096) * i / (spread + 1));
  if (file_size > 0) points.push_back(file_size - 1);
  return points;
}

// The largest |a[i] - b[i]| (the sizes must match): the error figure model tests compare with their tolerance.
inline double max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
  EXPECT_EQ(a.size(), b.size());
  double worst = 0;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i)
    worst = std::max(worst, std::fabs(static_cast<double>(a[i]) - b[i]));
  return worst;
}

}  // namespace sotto::testing
