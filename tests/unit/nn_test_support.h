// Shared by the op checks (nn_*_test.cpp): random tensors from the run's seed, contexts with and without a
// thread pool, and a closeness check that names the op, the worst element and the tolerance.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "core/thread_pool.h"
#include "cpu/cpu_features.h"
#include "nn/ops.h"
#include "nn/ref.h"
#include "test_support.h"

namespace sotto::nn::testing {

inline std::mt19937_64& rng() {
  static std::mt19937_64 g(sotto::testing::test_seed());
  return g;
}

inline int64_t rand_int(int64_t lo, int64_t hi) {  // [lo, hi]
  return std::uniform_int_distribution<int64_t>(lo, hi)(rng());
}

inline Tensor rand_tensor(Context& ctx, const Shape& shape, float lo = -1.0f, float hi = 1.0f) {
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<float> v(static_cast<size_t>(shape.elements()));
  for (float& x : v) x = d(rng());
  return ctx.from_floats(shape, v);
}

inline Tensor rand_int8(Context& ctx, const Shape& shape, DType dtype) {
  std::vector<uint8_t> v(static_cast<size_t>(shape.elements()));
  for (uint8_t& x : v) x = static_cast<uint8_t>(rand_int(0, 255));
  return ctx.from_bytes(shape, dtype, v);
}

inline std::vector<float> floats(const Tensor& t) {
  auto r = t.ctx().to_floats(t);
  EXPECT_TRUE(r.ok());
  return r.ok() ? *r : std::vector<float>{};
}

// |got - want| <= atol + rtol * |want| for every element; shapes equal.
inline void expect_close(const Tensor& got, const Tensor& want, float atol, float rtol,
                         const std::string& what) {
  ASSERT_EQ(got.shape(), want.shape())
      << what << ": shape " << got.shape().str() << " vs " << want.shape().str();
  const std::vector<float> g = floats(got), w = floats(want);
  size_t worst = 0;
  double worst_excess = -1;
  for (size_t i = 0; i < g.size(); ++i) {
    const double excess = std::fabs(static_cast<double>(g[i]) - w[i]) - (atol + rtol * std::fabs(w[i]));
    if (!(excess <= worst_excess)) {
      worst_excess = excess;
      worst = i;
    }
  }
  if (!g.empty())
    EXPECT_LE(worst_excess, 0.0) << what << ": element " << worst << " is " << g[worst] << ", reference "
                                 << w[worst] << " (atol " << atol << ", rtol " << rtol << ", seed "
                                 << sotto::testing::test_seed() << ")";
}

// Every check runs single-threaded and on a 3-thread pool (odd, so splits are uneven), and natively on both
// kernel variants (AVX2 where the CPU has it, and the portable vectors).
struct Backends {
  ThreadPool pool{3};
  std::unique_ptr<Context> single = Context::cpu(nullptr);
  std::unique_ptr<Context> threaded = Context::cpu(&pool);

  template <class F>
  void each(F&& f) {
    for (bool portable : {false, true}) {
      cpu_force_portable(portable);
      f(*single, std::string(portable ? "portable/1 thread" : "default/1 thread"));
      f(*threaded, std::string(portable ? "portable/3 threads" : "default/3 threads"));
    }
    cpu_force_portable(false);
  }
};

// The same tensor on another context (the GPU's, in the GPU tests).
inline Tensor upload(Context& gpu, const Tensor& cpu) {
  return gpu.from_floats(cpu.shape(), floats(cpu));
}

// A GPU tensor's values as a CPU tensor (reading runs what was recorded); a failed read is a test failure.
inline Tensor download(Context& cpu, Context& gpu, const Tensor& t) {
  auto v = gpu.to_floats(t);
  EXPECT_TRUE(v.ok()) << v.message();
  return cpu.from_floats(t.shape(), v.ok() ? *v : std::vector<float>(static_cast<size_t>(t.elements())));
}

}  // namespace sotto::nn::testing
