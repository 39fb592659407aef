// ThreadPool: barrier correctness under stress, job hand-off across back-to-back runs with changing
// parameters (the bug the seed log describes), changing thread counts, helpers that start late (the web's
// Web Workers), and a parallel reduction that must equal the serial one exactly. Run under TSan too.
#include "core/thread_pool.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <memory>
#include <thread>
#include <vector>

namespace sotto {
namespace {

uint64_t xorshift64(uint64_t& s) {
  s ^= s << 13;
  s ^= s >> 7;
  s ^= s << 17;
  return s;
}

// Each round every thread writes its slot (plain ints: only the barrier orders them, so TSan checks it),
// passes a barrier, reads every slot, passes a second barrier before the next round overwrites them.
int barrier_stress_errors(ThreadPool& pool, int rounds) {
  const int nth = pool.n_threads();
  std::vector<int> slots(nth, -1);
  std::vector<int> errors(nth, 0);
  pool.run([&](int ith, int n) {
    for (int r = 0; r < rounds; ++r) {
      slots[ith] = r * n + ith;
      pool.barrier();
      for (int j = 0; j < n; ++j) errors[ith] += slots[j] != r * n + j;
      pool.barrier();
    }
  });
  int total = 0;
  for (int e : errors) total += e;
  return total;
}

TEST(ThreadPool, BarrierStress) {
  // 20,000 rounds as in the seed's self-test; fewer when threads outnumber this machine's cores, where
  // every barrier costs a context switch.
  const int n_cores = static_cast<int>(std::thread::hardware_concurrency());
  for (int nth : {1, 2, 3, 4, 5, 8}) {
    ThreadPool pool(nth);
    const int rounds = nth <= n_cores ? 20000 : 2000;
    EXPECT_EQ(barrier_stress_errors(pool, rounds), 0) << nth << " threads";
  }
}

// The seed's bug: a task reads its parameters after its last barrier. If run() returned (and the next job
// was written) before every helper finished, helpers would mix two jobs' parameters.
TEST(ThreadPool, BackToBackRunsWithChangingParameters) {
  for (int nth : {2, 3, 4}) {
    ThreadPool pool(nth);
    struct Job {
      int value;
      int* out;
    };
    std::vector<int> out(nth);
    int wrong = 0;
    for (int i = 0; i < 2000; ++i) {
      Job job{i * 7 + 1, out.data()};
      pool.run(
          [](void* ctx, int ith, int n) {
            auto* j = static_cast<Job*>(ctx);
            j->out[ith] = j->value + ith * n;
          },
          &job);
      for (int t = 0; t < nth; ++t) wrong += out[t] != job.value + t * nth;
      // Same with barriers and the parameter read after the last one.
      pool.run([&](int ith, int n) {
        pool.barrier();
        pool.barrier();
        out[ith] = job.value * 3 + ith * n;
      });
      for (int t = 0; t < nth; ++t) wrong += out[t] != job.value * 3 + t * nth;
    }
    EXPECT_EQ(wrong, 0) << nth << " threads";
  }
}

TEST(ThreadPool, ChangingActiveThreadCounts) {
  ThreadPool pool(6);
  std::vector<int> hits(6, 0);
  int wrong = 0;
  for (int i = 0; i < 3000; ++i) {
    const int n_active = 1 + (i * 5) % 6;  // 1, 6, 5, 4, 3, 2, 1, ...
    std::fill(hits.begin(), hits.end(), 0);
    std::vector<int> seen_nth(6, 0);
    pool.run(
        [&](int ith, int n) {
          hits[ith] += 1;
          seen_nth[ith] = n;
          pool.barrier();
          if (ith == 0)
            for (int t = 0; t < n; ++t) wrong += hits[t] != 1;
          pool.barrier();
        },
        n_active);
    for (int t = 0; t < 6; ++t) {
      wrong += hits[t] != (t < n_active ? 1 : 0);
      if (t < n_active) wrong += seen_nth[t] != n_active;
    }
  }
  EXPECT_EQ(wrong, 0);
}

TEST(ThreadPool, PoolsOfDifferentSizesOneAfterAnother) {
  for (int round = 0; round < 3; ++round) {
    for (int nth = 1; nth <= 8; ++nth) {
      ThreadPool pool(nth);
      EXPECT_EQ(pool.n_threads(), nth);
      EXPECT_EQ(barrier_stress_errors(pool, 200), 0) << nth << " threads";
    }
  }
}

TEST(ThreadPool, ParallelSumEqualsSerialSum) {
  uint64_t state = 0x9e3779b97f4a7c15ull;
  std::vector<uint32_t> data(1'000'003);
  for (uint32_t& v : data) v = static_cast<uint32_t>(xorshift64(state));
  uint64_t serial = 0;
  for (uint32_t v : data) serial += v;  // integers: exact in any order
  for (int nth : {1, 2, 3, 4, 7}) {
    ThreadPool pool(nth);
    std::vector<uint64_t> partial(nth, 0);
    uint64_t total = 0;
    pool.run([&](int ith, int n) {
      const size_t begin = data.size() * ith / n, end = data.size() * (ith + 1) / n;
      uint64_t s = 0;
      for (size_t i = begin; i < end; ++i) s += data[i];
      partial[ith] = s;
      pool.barrier();
      if (ith == 0)
        for (uint64_t p : partial) total += p;
    });
    EXPECT_EQ(total, serial) << nth << " threads";
  }
}

// The web: helpers are Web Workers that call worker_loop(ith) whenever they get around to it.
TEST(ThreadPool, HelpersStartingLateOrEarly) {
  for (bool helpers_first : {false, true}) {
    auto pool = std::make_unique<ThreadPool>(4, /*start_helpers=*/false);
    std::vector<std::thread> workers;
    auto start_workers = [&] {
      for (int ith = 1; ith < 4; ++ith) workers.emplace_back([p = pool.get(), ith] { p->worker_loop(ith); });
    };
    if (helpers_first) start_workers();
    std::thread late_starter([&] {
      if (helpers_first) return;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      start_workers();
    });
    std::vector<int> ran(4, 0);
    pool->run([&](int ith, int) { ran[ith] = 1; });  // waits for the late helpers to arrive
    late_starter.join();
    EXPECT_EQ(ran, std::vector<int>(4, 1));
    EXPECT_EQ(barrier_stress_errors(*pool, 1000), 0);
    pool->worker_loop(0);  // out of range: returns at once
    pool->worker_loop(4);
    pool.reset();  // stops the helpers and waits until they have left worker_loop
    for (std::thread& w : workers) w.join();
  }
}

// Not a pass/fail test: prints what one barrier costs, to compare with the seed's 0.3-0.7 us.
TEST(ThreadPool, BarrierCost) {
  for (int nth : {2, 4}) {
    if (nth > static_cast<int>(std::thread::hardware_concurrency())) continue;
    ThreadPool pool(nth);
    const int rounds = 20000;
    const auto t0 = std::chrono::steady_clock::now();
    pool.run([&](int, int) {
      for (int r = 0; r < rounds; ++r) pool.barrier();
    });
    const double ns = std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0).count();
    std::printf("[ barrier ] %d threads: %.0f ns per barrier\n", nth, ns / rounds);
    const auto t1 = std::chrono::steady_clock::now();
    for (int r = 0; r < rounds; ++r) pool.run([](int, int) {});
    const double ns_run =
        std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t1).count();
    std::printf("[ run     ] %d threads: %.0f ns per empty run()\n", nth, ns_run / rounds);
  }
}

}  // namespace
}  // namespace sotto
