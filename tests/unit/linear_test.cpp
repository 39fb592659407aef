// linear() against linear_ref() for every supported weight type: several shapes (rows not a multiple of the
// 4-row pass, token counts not a multiple of the tile), 1..4 threads, AVX2 and the forced portable path, on
// fresh random weights (from the reference quantizers where they exist, and raw random bytes with sane scales
// for every quantized type, which reach bit patterns the quantizers never make, e.g. negative q6_K scales).
// LinearBench.* measures GB/s of weights, only with SOTTO_BENCH=1.
#include "cpu/linear.h"

#include <gtest/gtest.h>

#include <cctype>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "core/half.h"
#include "core/quant_blocks.h"
#include "core/quantize_ref.h"
#include "cpu/cpu_features.h"
#include "test_support.h"

namespace sotto {
namespace {

using testing::test_seed;  // tests/unit/test_support.h

const DType kTypes[] = {DType::F32,  DType::F16,  DType::BF16, DType::Q8_0, DType::Q4_0,
                        DType::Q4_1, DType::Q5_0, DType::Q5_1, DType::Q2_K, DType::Q3_K,
                        DType::Q4_K, DType::Q5_K, DType::Q6_K};

// Byte offsets of each quantized block's f16 scale fields (quant_blocks.h), so random bytes get sane scales.
std::vector<size_t> f16_fields(DType t) {
  switch (t) {
    case DType::Q4_0:
    case DType::Q5_0:
    case DType::Q8_0:
      return {0};
    case DType::Q4_1:
    case DType::Q5_1:
    case DType::Q4_K:
    case DType::Q5_K:
      return {0, 2};
    case DType::Q2_K:
      return {offsetof(BlockQ2_K, d), offsetof(BlockQ2_K, dmin)};
    case DType::Q3_K:
      return {offsetof(BlockQ3_K, d)};
    case DType::Q6_K:
      return {offsetof(BlockQ6_K, d)};
    default:
      return {};
  }
}

std::vector<uint8_t> random_weights(std::mt19937_64& rng, DType t, int64_t rows, int64_t cols,
                                    bool raw_bytes) {
  const DTypeInfo& info = dtype_info(t);
  const size_t bytes = static_cast<size_t>(rows * cols / info.block_elems) * info.block_bytes;
  std::vector<uint8_t> w(bytes);
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  if (!raw_bytes || !info.quantized) {
    std::vector<float> values(static_cast<size_t>(rows * cols));
    for (float& v : values) v = uniform(rng);
    quantize_row_ref(t, values.data(), w.data(), rows * cols);
    return w;
  }
  for (uint8_t& b : w) b = static_cast<uint8_t>(rng());
  std::uniform_real_distribution<float> scale(0.001f, 0.02f);
  for (size_t block = 0; block < bytes; block += info.block_bytes) {
    for (size_t field : f16_fields(t)) {
      const uint16_t h = f32_to_f16(scale(rng));
      std::memcpy(&w[block + field], &h, 2);
    }
    if (t == DType::Q8_0)  // ggml's quantizers never emit -128 and the sign trick relies on it (matvec.h)
      for (size_t i = 2; i < info.block_bytes; ++i)
        if (w[block + i] == 0x80) w[block + i] = 0x81;
  }
  return w;
}

// Tolerance. The integer part of every block's dot product is exact in every variant, so kernel and
// reference differ only by float rounding: the kernel rounds each block's scale product (d_w * d_x, <= 3
// roundings), its float conversion, and the running f32 sum; the reference rounds each dequantized weight
// (d * sc * q - dmin * m: the two terms can each be about twice the weight's magnitude) and x (d_x * q).
// Each rounding is <= 2^-24 relative to a term bounded by ~3 * max|w| * |x_i|, and with <= 32 blocks per
// row here the f32 sum adds at most 32 more, so |error| <= (8 + 32) * 6e-8 * 3 * max|w| * sum|x| ~= 7e-6 *
// max|w| * sum|x|; 1e-5 leaves a margin and is still ~4x below the effect of one weight off by one step.
float tolerance(const std::vector<float>& w_row, const std::vector<float>& x_seen) {
  float w_max = 0.0f;
  for (float v : w_row) w_max = std::max(w_max, std::fabs(v));
  double x_abs = 0;
  for (float v : x_seen) x_abs += std::fabs(v);
  return 1e-5f * w_max * static_cast<float>(x_abs) + 1e-30f;
}

struct Pools {
  std::unique_ptr<ThreadPool> pools[4];
  Pools() {
    for (int i = 0; i < 4; ++i) pools[i] = std::make_unique<ThreadPool>(i + 1);
  }
};

std::vector<bool> portable_modes() {
  std::vector<bool> modes = {true};
  if (cpu_features().avx2_fma) modes.push_back(false);
  return modes;
}

TEST(Linear, SupportsEveryWeightTypeOfTheModels) {
  for (DType t : kTypes) EXPECT_TRUE(linear_supported(t)) << dtype_name(t);
  EXPECT_FALSE(linear_supported(DType::I32));
  EXPECT_FALSE(linear_supported(DType::Q8_K));
}

TEST(Linear, MatchesReferenceForEveryTypeShapeThreadCountAndInstructionSet) {
  std::mt19937_64 rng(test_seed() + 10);
  Pools pools;
  LinearScratch scratch;
  int checks = 0;
  for (DType t : kTypes) {
    const int64_t block = dtype_info(t).block_elems;
    std::vector<int64_t> col_options;
    if (block == 256)
      col_options = {256, 512, 768};
    else if (dtype_info(t).quantized)
      col_options = {32, 96, 256, 896};
    else
      col_options = {32, 40, 100, 256};  // float weights: any width, including SIMD tails
    for (bool raw : {false, true}) {
      if (raw && !dtype_info(t).quantized) continue;
      for (int64_t rows : {1, 3, 4, 5, 17, 65}) {
        for (int64_t cols : col_options) {
          const int64_t n_max = 33;  // 9 and up: a 16-token prompt tile, padded; 33: two full and one of 1
          const std::vector<uint8_t> w = random_weights(rng, t, rows, cols, raw);
          std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
          std::vector<float> x(static_cast<size_t>(n_max * cols));
          for (float& v : x) v = uniform(rng);
          std::vector<float> want(static_cast<size_t>(n_max * rows));
          linear_ref(t, w.data(), rows, cols, x.data(), n_max, want.data());
          // Tolerances per (token, row), from the dequantized weights and activations.
          std::vector<float> tol(want.size());
          {
            const size_t row_bytes = static_cast<size_t>(cols / block) * dtype_info(t).block_bytes;
            std::vector<uint8_t> xq(activation_bytes(t, cols));
            std::vector<float> x_seen(static_cast<size_t>(cols)), w_row(static_cast<size_t>(cols));
            for (int64_t tk = 0; tk < n_max; ++tk) {
              quantize_activations(t, x.data() + tk * cols, cols, xq.data());
              dequantize_row_ref(activation_type(t), xq.data(), x_seen.data(), cols);
              for (int64_t r = 0; r < rows; ++r) {
                dequantize_row_ref(t, w.data() + r * row_bytes, w_row.data(), cols);
                tol[tk * rows + r] = tolerance(w_row, x_seen);
              }
            }
          }
          for (int64_t n : {1, 2, 3, 4, 5, 9, 33}) {
            for (bool portable : portable_modes()) {
              cpu_force_portable(portable);
              for (int threads = 1; threads <= 4; ++threads) {
                std::vector<float> got(static_cast<size_t>(n * rows), -12345.0f);
                linear(*pools.pools[threads - 1], t, w.data(), rows, cols, x.data(), n, got.data(), scratch);
                for (int64_t tk = 0; tk < n; ++tk)
                  for (int64_t r = 0; r < rows; ++r) {
                    const size_t i = static_cast<size_t>(tk * rows + r);
                    ASSERT_NEAR(got[i], want[i], tol[i])
                        << dtype_name(t) << (raw ? " raw bytes" : " quantized") << " rows=" << rows
                        << " cols=" << cols << " n=" << n << " token=" << tk << " row=" << r
                        << " threads=" << threads << (portable ? " portable" : " avx2");
                  }
                ++checks;
              }
            }
          }
        }
      }
    }
  }
  cpu_force_portable(false);
  std::printf("[ info    ] %d linear() calls checked\n", checks);
}

// linear_shared_x(): several matrices against one x (as q/k/v and gate/up are run), on the shared-format path
// (one quantization of x) and the fallback (formats differ): every y must be linear()'s bit for bit, and
// within the tolerance above of linear_ref(), for 1..4 threads and token counts around the tile widths.
TEST(Linear, SharedXMatchesLinearBitForBitAndTheReference) {
  std::mt19937_64 rng(test_seed() + 12);
  Pools pools;
  LinearScratch scratch, scratch_single;
  const std::vector<std::vector<DType>> groups = {{DType::Q4_0, DType::Q4_0, DType::Q4_0},
                                                  {DType::Q5_0, DType::Q8_0},
                                                  {DType::Q4_K, DType::Q6_K},
                                                  {DType::Q4_K, DType::Q8_0, DType::F16}};
  const int64_t cols = 512, n_max = 17;
  const int64_t rows_of[4] = {33, 16, 7, 20};
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  for (const std::vector<DType>& types : groups) {
    const int n_jobs = static_cast<int>(types.size());
    std::vector<std::vector<uint8_t>> w(types.size());
    for (int j = 0; j < n_jobs; ++j) w[j] = random_weights(rng, types[j], rows_of[j], cols, false);
    std::vector<float> x(static_cast<size_t>(n_max * cols));
    for (float& v : x) v = uniform(rng);
    for (int64_t n : {1, 3, 4, 9, 17}) {
      for (int threads = 1; threads <= 4; ++threads) {
        ThreadPool& pool = *pools.pools[threads - 1];
        std::vector<std::vector<float>> got(types.size());
        std::vector<LinearJob> jobs;
        for (int j = 0; j < n_jobs; ++j) {
          got[j].assign(static_cast<size_t>(n * rows_of[j]), -12345.0f);
          jobs.push_back({types[j], w[j].data(), rows_of[j], got[j].data()});
        }
        linear_shared_x(pool, jobs.data(), n_jobs, cols, x.data(), n, scratch);
        for (int j = 0; j < n_jobs; ++j) {
          std::vector<float> single(got[j].size()), want(got[j].size());
          linear(pool, types[j], w[j].data(), rows_of[j], cols, x.data(), n, single.data(), scratch_single);
          ASSERT_EQ(0, std::memcmp(single.data(), got[j].data(), single.size() * sizeof(float)))
              << dtype_name(types[j]) << " job " << j << " n=" << n << " threads=" << threads;
          linear_ref(types[j], w[j].data(), rows_of[j], cols, x.data(), n, want.data());
          const size_t row_bytes =
              static_cast<size_t>(cols / dtype_info(types[j]).block_elems) * dtype_info(types[j]).block_bytes;
          std::vector<uint8_t> xq(activation_bytes(types[j], cols));
          std::vector<float> x_seen(static_cast<size_t>(cols)), w_row(static_cast<size_t>(cols));
          for (int64_t tk = 0; tk < n; ++tk) {
            quantize_activations(types[j], x.data() + tk * cols, cols, xq.data());
            dequantize_row_ref(activation_type(types[j]), xq.data(), x_seen.data(), cols);
            for (int64_t r = 0; r < rows_of[j]; ++r) {
              dequantize_row_ref(types[j], w[j].data() + r * row_bytes, w_row.data(), cols);
              const size_t i = static_cast<size_t>(tk * rows_of[j] + r);
              ASSERT_NEAR(got[j][i], want[i], tolerance(w_row, x_seen))
                  << dtype_name(types[j]) << " job " << j << " n=" << n << " token=" << tk << " row=" << r;
            }
          }
        }
      }
    }
  }
}

// linear_filled_x(): x computed by the threads of the same pass (decode's SwiGLU), in shares of whole activation
// blocks (q4_K: 3 blocks of 256 for up to 4 threads, so some threads get none): x must come out exactly as
// the fill defines it, and y bit for bit linear()'s on that x, and within the tolerance above of linear_ref().
TEST(Linear, FilledXMatchesLinearBitForBitAndTheReference) {
  std::mt19937_64 rng(test_seed() + 13);
  Pools pools;
  LinearScratch scratch, scratch_single;
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  for (DType t : {DType::Q4_0, DType::Q8_0, DType::Q4_K, DType::Q6_K, DType::F16, DType::F32}) {
    const int64_t rows = 37, cols = 768;
    const std::vector<uint8_t> w = random_weights(rng, t, rows, cols, false);
    std::vector<float> a(static_cast<size_t>(cols)), b(static_cast<size_t>(cols)), want_x(a.size());
    for (float& v : a) v = uniform(rng);
    for (float& v : b) v = uniform(rng);
    for (int64_t i = 0; i < cols; ++i) want_x[i] = a[i] * b[i] + 0.25f;
    for (int threads = 1; threads <= 4; ++threads) {
      ThreadPool& pool = *pools.pools[threads - 1];
      std::vector<float> x(a.size(), -7.0f), got(static_cast<size_t>(rows), -12345.0f);
      linear_filled_x(
          pool, t, w.data(), rows, cols, x.data(),
          [&](int64_t begin, int64_t end) {
            for (int64_t i = begin; i < end; ++i) x[i] = a[i] * b[i] + 0.25f;
          },
          got.data(), scratch);
      ASSERT_EQ(0, std::memcmp(x.data(), want_x.data(), x.size() * sizeof(float)))
          << dtype_name(t) << " threads=" << threads << ": x not filled exactly once everywhere";
      std::vector<float> single(got.size()), want(got.size());
      linear(pool, t, w.data(), rows, cols, want_x.data(), 1, single.data(), scratch_single);
      ASSERT_EQ(0, std::memcmp(single.data(), got.data(), got.size() * sizeof(float)))
          << dtype_name(t) << " threads=" << threads;
      linear_ref(t, w.data(), rows, cols, want_x.data(), 1, want.data());
      const size_t row_bytes =
          static_cast<size_t>(cols / dtype_info(t).block_elems) * dtype_info(t).block_bytes;
      std::vector<uint8_t> xq(activation_bytes(t, cols));
      std::vector<float> x_seen(static_cast<size_t>(cols)), w_row(static_cast<size_t>(cols));
      quantize_activations(t, want_x.data(), cols, xq.data());
      dequantize_row_ref(activation_type(t), xq.data(), x_seen.data(), cols);
      for (int64_t r = 0; r < rows; ++r) {
        dequantize_row_ref(t, w.data() + r * row_bytes, w_row.data(), cols);
        ASSERT_NEAR(got[r], want[r], tolerance(w_row, x_seen)) << dtype_name(t) << " row=" << r;
      }
    }
  }
}

// linear_rows() on a row sub-range with strided y, as a model fusing steps calls it.
TEST(Linear, RowsWritesOnlyItsRangeWithStrides) {
  std::mt19937_64 rng(test_seed() + 11);
  for (DType t : {DType::Q4_0, DType::Q4_K, DType::Q6_K, DType::F16}) {
    const int64_t rows = 21, cols = 512, n = 6, y_stride = 40;
    const std::vector<uint8_t> w = random_weights(rng, t, rows, cols, false);
    std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
    std::vector<float> x(static_cast<size_t>(n * cols));
    for (float& v : x) v = uniform(rng);
    std::vector<float> want(static_cast<size_t>(n * rows));
    linear_ref(t, w.data(), rows, cols, x.data(), n, want.data());
    const size_t stride = activation_bytes(t, cols) + 64;  // padded rows of xq
    std::vector<uint8_t> xq(stride * n);
    for (int64_t tk = 0; tk < n; ++tk)
      quantize_activations(t, x.data() + tk * cols, cols, xq.data() + tk * stride);
    for (bool portable : portable_modes()) {
      cpu_force_portable(portable);
      std::vector<float> y(static_cast<size_t>(n * y_stride), 7.0f);
      linear_rows(t, w.data(), cols, xq.data(), n, stride, y.data(), y_stride, 3, 18);
      for (int64_t tk = 0; tk < n; ++tk)
        for (int64_t r = 0; r < y_stride; ++r) {
          const float v = y[tk * y_stride + r];
          if (r < 3 || r >= 18)
            ASSERT_EQ(v, 7.0f) << dtype_name(t) << " wrote outside its range at row " << r;
          else
            ASSERT_NEAR(v, want[tk * rows + r], 1e-3f * (1.0f + std::fabs(want[tk * rows + r])));
        }
    }
  }
  cpu_force_portable(false);
}

// Benchmarks, only with SOTTO_BENCH=1. SOTTO_BENCH_TYPES=Q4_0,Q8_0 limits the types; SOTTO_BENCH_PORTABLE=1
// also times the portable path.
bool bench_enabled() {
  const char* bench = std::getenv("SOTTO_BENCH");
  return bench && std::strcmp(bench, "1") == 0;
}

bool bench_type_selected(DType t) {
  const char* types = std::getenv("SOTTO_BENCH_TYPES");
  if (!types || !*types) return true;
  std::string list = std::string(",") + types + ",";
  for (char& c : list) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  std::string name(dtype_name(t));
  for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return list.find("," + name + ",") != std::string::npos;
}

std::vector<bool> bench_modes() {
  const char* portable = std::getenv("SOTTO_BENCH_PORTABLE");
  if (portable && std::strcmp(portable, "1") == 0) return portable_modes();
  return {!cpu_features().avx2_fma};
}

double thread_cpu_seconds() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

// Seconds per linear() call, timed over at least 0.3 s after one warm-up call: wall-clock, and the calling
// thread's CPU time (with 1 thread, the time the kernel really ran, even on a machine busy with other work).
struct CallTime {
  double wall_s;
  double cpu_s;
};
CallTime seconds_per_call(ThreadPool& pool, DType t, const std::vector<uint8_t>& w, int64_t rows,
                          int64_t cols, const std::vector<float>& x, int64_t n, std::vector<float>& y,
                          LinearScratch& scratch) {
  linear(pool, t, w.data(), rows, cols, x.data(), n, y.data(), scratch);
  const auto start = std::chrono::steady_clock::now();
  const double cpu_start = thread_cpu_seconds();
  int iterations = 0;
  double seconds = 0;
  do {
    linear(pool, t, w.data(), rows, cols, x.data(), n, y.data(), scratch);
    ++iterations;
    seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  } while (seconds < 0.3);
  return {seconds / iterations, (thread_cpu_seconds() - cpu_start) / iterations};
}

// GB/s of weights read by decode (n = 1), 1 and 2 threads, at the FFN shapes of Qwen2.5 0.5B (which fit in
// the L3 cache) and at its output/embedding table (151936 x 896: larger than any cache, so this is the number
// that says how close a kernel gets to DRAM bandwidth). Quantized types only for the table.
TEST(LinearBench, WeightBandwidth) {
  if (!bench_enabled()) GTEST_SKIP() << "set SOTTO_BENCH=1 to measure";
  std::mt19937_64 rng(test_seed() + 12);
  Pools pools;
  LinearScratch scratch;
  struct Shape {
    int64_t rows, cols;
  };
  std::printf(
      "%-6s %-12s %-8s %8s %8s %8s  (GB/s of weights, n = 1; cpu: per second of the thread's CPU time)\n",
      "type", "shape", "variant", "1 thr", "1t cpu", "2 thr");
  for (DType t : kTypes) {
    if (!bench_type_selected(t)) continue;
    for (Shape s : {Shape{4864, 896}, Shape{896, 4864}, Shape{151936, 896}}) {
      if (s.rows > 100000 && !dtype_info(t).quantized) continue;
      const int64_t cols = s.cols % dtype_info(t).block_elems == 0 ? s.cols : s.cols / 256 * 256;
      const std::vector<uint8_t> w = random_weights(rng, t, s.rows, cols, true);
      std::vector<float> x(static_cast<size_t>(cols));
      std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
      for (float& v : x) v = uniform(rng);
      std::vector<float> y(static_cast<size_t>(s.rows));
      for (bool portable : bench_modes()) {
        cpu_force_portable(portable);
        const double gb = static_cast<double>(w.size()) / 1e9;
        const CallTime one = seconds_per_call(*pools.pools[0], t, w, s.rows, cols, x, 1, y, scratch);
        const CallTime two = seconds_per_call(*pools.pools[1], t, w, s.rows, cols, x, 1, y, scratch);
        std::printf("%-6s %6lldx%-5lld %-8s %8.2f %8.2f %8.2f\n", std::string(dtype_name(t)).c_str(),
                    static_cast<long long>(s.rows), static_cast<long long>(cols),
                    portable ? "portable" : "avx2", gb / one.wall_s, gb / one.cpu_s, gb / two.wall_s);
      }
    }
  }
  cpu_force_portable(false);
}

// Prefill: tokens/s through one 4864 x 896 matrix (Qwen2.5 0.5B's gate / up) at n = 64 and 256: 1 thread
// (wall clock, and per second of the thread's CPU time) and 2 threads; GFLOP/s = 2 * rows * cols per token.
TEST(LinearBench, Prefill) {
  if (!bench_enabled()) GTEST_SKIP() << "set SOTTO_BENCH=1 to measure";
  std::mt19937_64 rng(test_seed() + 13);
  Pools pools;
  LinearScratch scratch;
  const int64_t rows = 4864;
  std::printf("%-6s %-10s %-8s %-5s %9s %9s %9s %9s  (tokens/s)\n", "type", "shape", "variant", "n", "1 thr",
              "1t cpu", "2 thr", "GFLOP/s");
  for (DType t : kTypes) {
    if (!bench_type_selected(t)) continue;
    const int64_t cols = 896 % dtype_info(t).block_elems == 0 ? 896 : 768;
    const std::vector<uint8_t> w = random_weights(rng, t, rows, cols, true);
    std::vector<float> x(static_cast<size_t>(256 * cols));
    std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
    for (float& v : x) v = uniform(rng);
    std::vector<float> y(static_cast<size_t>(256 * rows));
    for (bool portable : bench_modes()) {
      cpu_force_portable(portable);
      for (int64_t n : {64, 256}) {
        const CallTime one = seconds_per_call(*pools.pools[0], t, w, rows, cols, x, n, y, scratch);
        const CallTime two = seconds_per_call(*pools.pools[1], t, w, rows, cols, x, n, y, scratch);
        const double tokens = static_cast<double>(n);
        std::printf("%-6s %5lldx%-4lld %-8s %-5lld %9.0f %9.0f %9.0f %9.1f\n",
                    std::string(dtype_name(t)).c_str(), static_cast<long long>(rows),
                    static_cast<long long>(cols), portable ? "portable" : "avx2", static_cast<long long>(n),
                    tokens / one.wall_s, tokens / one.cpu_s, tokens / two.wall_s,
                    tokens / one.cpu_s * 2.0 * static_cast<double>(rows * cols) / 1e9);
      }
    }
  }
  cpu_force_portable(false);
}

}  // namespace
}  // namespace sotto
