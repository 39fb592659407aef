// Matrix x vector kernels against their scalar references, on fresh random data and many shapes (odd rows,
// rows not a multiple of 4, cols not a multiple of the SIMD width), with every instruction set this machine
// has (AVX2 and the forced portable path) and 1..4 threads.
#include "cpu/matvec.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "core/half.h"
#include "core/quantize_ref.h"
#include "cpu/cpu_features.h"
#include "cpu/selftest.h"
#include "test_support.h"

namespace sotto {
namespace {

// The xorshift generator below needs a nonzero state.
uint64_t test_seed() {
  return testing::test_seed() | 1;
}

struct Rng {
  uint64_t s;
  uint64_t next() {
    s ^= s << 13;
    s ^= s >> 7;
    s ^= s << 17;
    return s;
  }
  float uniform(float lo, float hi) { return lo + (hi - lo) * static_cast<float>(next() >> 40) * 0x1p-24f; }
};

std::vector<float> random_floats(Rng& rng, size_t n, float scale) {
  std::vector<float> v(n);
  for (float& f : v) f = rng.uniform(-scale, scale);
  return v;
}

// The instruction sets to test: AVX2 when the CPU has it, and always the portable path.
std::vector<bool> portable_modes() {
  std::vector<bool> modes = {true};
  if (cpu_features().avx2_fma) modes.push_back(false);
  return modes;
}

struct ForcePortable {
  explicit ForcePortable(bool force) { cpu_force_portable(force); }
  ~ForcePortable() { cpu_force_portable(false); }
};

const int kRowCounts[] = {1, 3, 4, 5, 7, 8, 13, 31, 64, 67, 130};

TEST(CpuFeatures, DispatchFollowsDetectionAndOverride) {
  EXPECT_EQ(std::string(matvec_kernels().name), cpu_features().avx2_fma ? "avx2" : "portable");
  {
    ForcePortable force(true);
    EXPECT_STREQ(matvec_kernels().name, "portable");
    EXPECT_EQ(cpu_kernel_variant(), "portable");
  }
  // SOTTO_CPU=portable masks the raw detection (cpu_features() caches its first answer, so ask directly).
  const char* old = std::getenv("SOTTO_CPU");
  const std::string saved = old ? old : "";
  setenv("SOTTO_CPU", "portable", 1);
  EXPECT_FALSE(detect_cpu_features().avx2_fma);
  if (old)
    setenv("SOTTO_CPU", saved.c_str(), 1);
  else
    unsetenv("SOTTO_CPU");
}

TEST(Matvec, SplitRowsCoversEveryRowOnceInWholePasses) {
  for (int rows : {1, 4, 5, 67, 1000})
    for (int nth = 1; nth <= 8; ++nth)
      for (int per_pass : {1, 4, 16}) {
        int next = 0;
        for (int ith = 0; ith < nth; ++ith) {
          const RowRange r = split_rows(rows, ith, nth, per_pass);
          EXPECT_EQ(r.begin, next);
          EXPECT_TRUE(r.begin % per_pass == 0 || r.begin == rows);
          next = r.end;
        }
        EXPECT_EQ(next, rows);
      }
}

// f32: the reference sums in double, the kernels in float in another order. A float sum of n terms in any
// order is off by at most about n * eps * sum|terms| (eps = 2^-24 ~ 6e-8); rounding errors of random sign
// grow like sqrt(n) instead, so 1e-5 * sqrt(n) * sum|terms| is ~100x the typical error yet far below any bug
// (a wrong or missing term changes the result by ~sum|terms| / n).
TEST(Matvec, F32MatchesReference) {
  Rng rng{test_seed()};
  for (bool portable : portable_modes()) {
    ForcePortable force(portable);
    for (int nth = 1; nth <= 4; ++nth) {
      ThreadPool pool(nth);
      for (int rows : kRowCounts)
        for (int cols : {1, 7, 8, 31, 32, 33, 100, 256, 1000}) {
          const std::vector<float> w = random_floats(rng, static_cast<size_t>(rows) * cols, 1.0f);
          const std::vector<float> x = random_floats(rng, cols, 2.0f);
          std::vector<float> y(rows, NAN), y_ref(rows);
          matvec_f32(pool, w.data(), x.data(), y.data(), rows, cols);
          matvec_f32_ref(w.data(), x.data(), y_ref.data(), rows, cols);
          for (int r = 0; r < rows; ++r) {
            double magnitude = 0;
            for (int c = 0; c < cols; ++c)
              magnitude += std::fabs(w[static_cast<size_t>(r) * cols + c] * x[c]);
            const double tolerance = 1e-5 * std::sqrt(static_cast<double>(cols)) * magnitude;
            ASSERT_LE(std::fabs(y[r] - y_ref[r]), tolerance)
                << (portable ? "portable" : "avx2") << ' ' << nth << " threads, " << rows << 'x' << cols
                << " row " << r;
          }
        }
    }
  }
}

TEST(QuantizeQ8_0, EachValueWithinHalfAStepAndScaleFromTheBlockMaximum) {
  Rng rng{test_seed() + 1};
  for (int n : {32, 64, 320}) {
    std::vector<float> x = random_floats(rng, n, 3.0f);
    x[5] = 0;  // an exact zero stays zero
    std::vector<BlockQ8_0> q(n / 32);
    quantize_row_q8_0(x.data(), q.data(), n);
    for (int b = 0; b < n / 32; ++b) {
      float amax = 0;
      for (int i = 0; i < 32; ++i) amax = std::fmax(amax, std::fabs(x[b * 32 + i]));
      const float d = f16_to_f32(q[b].d);
      EXPECT_NEAR(d, amax / 127, amax / 127 * 1e-3) << "block " << b;  // f16 keeps 11 significant bits
      bool hit_127 = false;
      for (int i = 0; i < 32; ++i) {
        const int v = q[b].qs[i];
        EXPECT_LE(std::abs(v), 127);
        hit_127 |= std::abs(v) == 127;
        // q = round(x / d_unrounded); against the stored f16 d allow the f16 rounding of d (127 * 2^-11
        // steps).
        EXPECT_LE(std::fabs(v - x[b * 32 + i] / d), 0.5f + 127 * 0x1p-11f) << "block " << b << " elem " << i;
      }
      EXPECT_TRUE(hit_127) << "the block maximum maps to +-127";
    }
    EXPECT_EQ(q[0].qs[5], 0);
  }
  // All-zero block: d = 0 and all q = 0 (no division by zero).
  std::vector<float> zeros(32, 0.0f);
  BlockQ8_0 qz;
  quantize_row_q8_0(zeros.data(), &qz, 32);
  EXPECT_EQ(qz.d, 0);
  for (int8_t v : qz.qs) EXPECT_EQ(v, 0);
}

// The activation quantizer must write exactly what the independent reference quantizer (core/quantize_ref,
// byte-identical to ggml's quantize_row_q8_0_ref) writes, so weights and activations share one format.
TEST(QuantizeQ8_0, ByteIdenticalToReferenceQuantizer) {
  Rng rng{test_seed() + 5};
  for (int n : {32, 96, 4864}) {
    std::vector<float> x = random_floats(rng, n, 5.0f);
    x[1] = 0;
    for (int i = 32; i < 64 && i < n; ++i) x[i] = static_cast<float>(i - 48) * 0.5f;  // many exact ties
    std::vector<BlockQ8_0> mine(n / 32), theirs(n / 32);
    quantize_row_q8_0(x.data(), mine.data(), n);
    quantize_row_ref(DType::Q8_0, x.data(), theirs.data(), n);
    EXPECT_EQ(std::memcmp(mine.data(), theirs.data(), mine.size() * sizeof(BlockQ8_0)), 0) << n;
  }
}

std::vector<BlockQ8_0> random_q8_0(Rng& rng, size_t n_blocks) {
  std::vector<BlockQ8_0> blocks(n_blocks);
  for (BlockQ8_0& b : blocks) {
    b.d = f32_to_f16(rng.uniform(0.001f, 0.05f));
    for (int8_t& q : b.qs) q = static_cast<int8_t>(static_cast<int>(rng.next() % 255) - 127);  // [-127, 127]
  }
  return blocks;
}

// Double-precision value of the q8_0 dot product, and the sum of the magnitudes of its products. The integer
// arithmetic is exact in every kernel; what differs is float work after it: the reference multiplies each
// block's integer sum by (d_a*d_b) and adds the blocks in order; AVX2/SIMD convert partial integer sums (per
// lane) to float and accumulate each lane with FMA, then add the lanes. Every partial sum is bounded by
// scale * sum|q_a*q_b| of its block, and there are at most n_blocks + 4 rounding steps on any path, so the
// error is within (n_blocks + 4) * 2^-23 * sum over blocks of scale * sum|q_a*q_b|.
struct DotExpectation {
  double value = 0, magnitude = 0;
};
DotExpectation expected_dot(int cols, const BlockQ8_0* a, const BlockQ8_0* b) {
  DotExpectation e;
  for (int blk = 0; blk < cols / 32; ++blk) {
    int64_t isum = 0, abs_sum = 0;
    for (int i = 0; i < 32; ++i) {
      isum += a[blk].qs[i] * b[blk].qs[i];
      abs_sum += std::abs(a[blk].qs[i] * b[blk].qs[i]);
    }
    const double scale = static_cast<double>(f16_to_f32(a[blk].d) * f16_to_f32(b[blk].d));
    e.value += scale * isum;
    e.magnitude += std::fabs(scale) * abs_sum;
  }
  return e;
}
double dot_tolerance(int cols, const DotExpectation& e) {
  return (cols / 32 + 4) * 0x1p-23 * e.magnitude;
}

TEST(DotQ8_0, MatchesReference) {
  Rng rng{test_seed() + 2};
  for (bool portable : portable_modes()) {
    ForcePortable force(portable);
    for (int cols : {32, 64, 96, 320, 1024, 4864}) {
      for (int rep = 0; rep < 20; ++rep) {
        const std::vector<BlockQ8_0> a = random_q8_0(rng, cols / 32), b = random_q8_0(rng, cols / 32);
        const DotExpectation e = expected_dot(cols, a.data(), b.data());
        EXPECT_LE(std::fabs(dot_q8_0_q8_0(cols, a.data(), b.data()) - e.value), dot_tolerance(cols, e));
        EXPECT_LE(std::fabs(dot_q8_0_q8_0_ref(cols, a.data(), b.data()) - e.value), dot_tolerance(cols, e));
      }
    }
  }
}

// With every scale 1.0 the result is the integer sum itself, exact in float (|sum| < 2^24 here): this pins
// the integer arithmetic (signs, extremes +-127, the sign trick) bit for bit.
TEST(DotQ8_0, IntegerPartIsExact) {
  Rng rng{test_seed() + 3};
  for (bool portable : portable_modes()) {
    ForcePortable force(portable);
    for (int cols : {32, 64, 256}) {
      for (int rep = 0; rep < 50; ++rep) {
        std::vector<BlockQ8_0> a = random_q8_0(rng, cols / 32), b = random_q8_0(rng, cols / 32);
        if (rep == 0)  // extremes: every product is +-127*127
          for (size_t k = 0; k < a.size(); ++k)
            for (int i = 0; i < 32; ++i) {
              a[k].qs[i] = (i & 1) ? 127 : -127;
              b[k].qs[i] = (i & 2) ? -127 : 127;
            }
        int64_t isum = 0;
        for (size_t k = 0; k < a.size(); ++k) {
          a[k].d = b[k].d = 0x3c00;  // 1.0 in f16
          for (int i = 0; i < 32; ++i) isum += a[k].qs[i] * b[k].qs[i];
        }
        EXPECT_EQ(dot_q8_0_q8_0(cols, a.data(), b.data()), static_cast<float>(isum));
        EXPECT_EQ(dot_q8_0_q8_0_ref(cols, a.data(), b.data()), static_cast<float>(isum));
      }
    }
  }
}

TEST(MatvecQ8_0, MatchesReferenceAllShapesThreadsAndInstructionSets) {
  Rng rng{test_seed() + 4};
  for (bool portable : portable_modes()) {
    ForcePortable force(portable);
    for (int nth = 1; nth <= 4; ++nth) {
      ThreadPool pool(nth);
      for (int rows : kRowCounts)
        for (int cols : {32, 64, 96, 320, 896}) {
          const int n_blocks = cols / 32;
          // Activations as the engine makes them: quantized from floats.
          const std::vector<float> x_f32 = random_floats(rng, cols, 4.0f);
          std::vector<BlockQ8_0> x(n_blocks);
          quantize_row_q8_0(x_f32.data(), x.data(), cols);
          const std::vector<BlockQ8_0> w = random_q8_0(rng, static_cast<size_t>(rows) * n_blocks);
          std::vector<float> y(rows, NAN), y_ref(rows);
          matvec_q8_0(pool, w.data(), x.data(), y.data(), rows, cols);
          matvec_q8_0_ref(w.data(), x.data(), y_ref.data(), rows, cols);
          for (int r = 0; r < rows; ++r) {
            const DotExpectation e =
                expected_dot(cols, w.data() + static_cast<size_t>(r) * n_blocks, x.data());
            ASSERT_LE(std::fabs(y[r] - e.value), dot_tolerance(cols, e))
                << (portable ? "portable" : "avx2") << ' ' << nth << " threads, " << rows << 'x' << cols
                << " row " << r;
            // The native portable path accumulates in the reference's order: bit-identical.
            if (portable) {
              ASSERT_EQ(y[r], y_ref[r]) << rows << 'x' << cols << " row " << r;
            }
          }
        }
    }
  }
}

TEST(Selftest, MatvecQ8_0ReportsSmallError) {
  ThreadPool pool(3);
  float max_abs_err = -2;
  const double checksum = cpu_selftest_matvec_q8_0(pool, 67, 320, 12345, &max_abs_err);
  EXPECT_GE(max_abs_err, 0.0f);
  EXPECT_LT(max_abs_err, 1e-4f);
  EXPECT_NE(checksum, 0.0);
  // Same seed, same data: a deterministic checksum on any thread count.
  ThreadPool pool1(1);
  float err1 = -2;
  EXPECT_EQ(cpu_selftest_matvec_q8_0(pool1, 67, 320, 12345, &err1), checksum);
  EXPECT_EQ(cpu_selftest_matvec_q8_0(pool, 3, 33, 1, &err1), 0.0);
  EXPECT_EQ(err1, -1.0f);
}

}  // namespace
}  // namespace sotto
