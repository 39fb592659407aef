// The pool's synchronisation, shared by native and wasm; only sleeping/waking and thread creation differ
// (thread_pool_native.cpp, thread_pool_wasm.cpp). See thread_pool.h for the hand-off protocol.
#include "core/thread_pool.h"

namespace sotto {

namespace {

// How long a waiter spins before sleeping. A decode step has a barrier every ~10-50 us, so spinning a few
// microseconds saves most futex round trips (~5 us each natively); much longer only burns cores other threads
// could use. In a browser a helper asleep in memory.atomic.wait32 wakes ~70 us after the notify: with a 4 us
// spin, Moonshine's decoder in Chromium (2 threads) spent 60 % of its time waking helpers between its ~60
// parallel ops a token, and ~65 us of spin made it 2.5x faster, the LLM's decode 1.13x and Kokoro's 2-thread
// pieces ~1.05x (bench/results/2026-12-07-wasm-spin.md). An idle pool still sleeps ~65 us after its last job.
#if defined(__wasm__)
constexpr int kSpinRounds = 65536;  // no pause instruction: each round is one load, ~1 ns
#else
constexpr int kSpinRounds = 1024;  // each round includes a pause, ~10-40 ns
#endif

}  // namespace

// Each hot word sits on its own cache line so spinning on one does not slow writers of another.
struct ThreadPool::Impl {
  // The job slot: written by the leader only while no helper is running a job (before bumping
  // job_generation, after all helpers reported done); helpers copy it right after seeing a new generation.
  Task task = nullptr;
  void* ctx = nullptr;
  int n_active = 1;

  alignas(64) std::atomic<uint32_t> job_generation{0};  // +1 per job, +1 at shutdown
  alignas(64) std::atomic<uint32_t> n_done{0};          // helpers finished with the current job
  alignas(64) std::atomic<uint32_t> barrier_arrived{0};
  alignas(64) std::atomic<uint32_t> barrier_generation{0};  // +1 each time a barrier opens
  alignas(64) std::atomic<uint32_t> n_sleepers{0};          // threads inside futex_wait (any word)
  std::atomic<uint32_t> n_helpers_live{0};                  // helpers inside worker_loop
  std::atomic<bool> stopping{false};
  void* native_threads = nullptr;

  // Spins, then sleeps, until `word` no longer holds `value`; returns with acquire ordering.
  void wait_while_equal(std::atomic<uint32_t>& word, uint32_t value) {
    for (int i = 0; i < kSpinRounds; ++i) {
      if (word.load(std::memory_order_acquire) != value) return;
      cpu_relax();
    }
    // Announce the sleep before the final check; wake_sleepers() changes the word before reading
    // n_sleepers, so (all seq_cst) either it sees us or we see its change: no lost wake-up.
    n_sleepers.fetch_add(1, std::memory_order_seq_cst);
    while (word.load(std::memory_order_seq_cst) == value) futex_wait(&word, value);
    n_sleepers.fetch_sub(1, std::memory_order_release);
  }

  // Call after changing `word` with a seq_cst operation. Skips the syscall when nobody sleeps.
  void wake_sleepers(std::atomic<uint32_t>& word) {
    if (n_sleepers.load(std::memory_order_seq_cst) != 0) futex_wake_all(&word);
  }
};

ThreadPool::ThreadPool(int n_threads, bool start_helpers)
    : impl_(new Impl), n_threads_(n_threads < 1 ? 1 : n_threads) {
  if (start_helpers && n_threads_ > 1) {
    impl_->native_threads = detail::start_helper_threads(this, n_threads_);
    // In wasm only JS can start helpers (it passes start_helpers = false and runs worker_loop itself): a pool
    // that asked for helpers there gets none, and runs on the caller alone rather than waiting in run()
    // forever for helpers nobody started.
    if (!impl_->native_threads) n_threads_ = 1;
  }
}

ThreadPool::~ThreadPool() {
  Impl& p = *impl_;
  p.stopping.store(true, std::memory_order_relaxed);
  p.job_generation.fetch_add(1, std::memory_order_seq_cst);  // releases `stopping`
  p.wake_sleepers(p.job_generation);
  if (p.native_threads) {
    detail::join_helper_threads(p.native_threads);
  } else {
    // Web Workers cannot be joined: wait until every helper that checked in has left worker_loop. Spin
    // rather than sleep: a helper's very last touch of Impl is its decrement, so it cannot also wake us
    // without reading freed memory. Woken helpers leave within microseconds.
    while (p.n_helpers_live.load(std::memory_order_acquire) != 0) cpu_relax();
  }
  delete impl_;
}

void ThreadPool::run(Task task, void* ctx, int n_active) {
  Impl& p = *impl_;
  const int nth = (n_active <= 0 || n_active > n_threads_) ? n_threads_ : n_active;
  p.n_active = nth;
  if (nth == 1) {  // nothing to hand off; helpers keep sleeping
    task(ctx, 0, 1);
    return;
  }
  p.task = task;
  p.ctx = ctx;
  p.n_done.store(0, std::memory_order_relaxed);
  p.job_generation.fetch_add(1, std::memory_order_seq_cst);  // publishes the job slot (release)
  p.wake_sleepers(p.job_generation);

  task(ctx, 0, nth);

  // Every helper, active or not, reports done: only then may the job slot be rewritten.
  const uint32_t n_helpers = static_cast<uint32_t>(n_threads_ - 1);
  for (uint32_t done; (done = p.n_done.load(std::memory_order_acquire)) != n_helpers;) {
    p.wait_while_equal(p.n_done, done);
  }
}

void ThreadPool::barrier() {
  Impl& p = *impl_;
  const uint32_t nth = static_cast<uint32_t>(p.n_active);  // stable for the whole job
  if (nth == 1) return;
  const uint32_t generation = p.barrier_generation.load(std::memory_order_acquire);
  if (p.barrier_arrived.fetch_add(1, std::memory_order_acq_rel) == nth - 1) {
    // Last to arrive: reset the count before opening, since nobody can arrive at the next barrier until
    // they see the new generation.
    p.barrier_arrived.store(0, std::memory_order_relaxed);
    p.barrier_generation.fetch_add(1, std::memory_order_seq_cst);
    p.wake_sleepers(p.barrier_generation);
  } else {
    p.wait_while_equal(p.barrier_generation, generation);
  }
}

void ThreadPool::worker_loop(int ith) {
  if (ith < 1 || ith >= n_threads_) return;
  Impl& p = *impl_;
  p.n_helpers_live.fetch_add(1, std::memory_order_seq_cst);
  // Jobs need every helper to finish before the next one starts, so a helper that starts late sees at most
  // job 1 pending: counting from 0 is right whether it starts before or after the first run().
  uint32_t seen_generation = 0;
  for (;;) {
    p.wait_while_equal(p.job_generation, seen_generation);
    seen_generation = p.job_generation.load(std::memory_order_acquire);
    if (p.stopping.load(std::memory_order_relaxed)) break;

    // Copy the job before running it; after reporting done, never touch the slot again.
    const Task task = p.task;
    void* const ctx = p.ctx;
    const int nth = p.n_active;
    if (ith < nth) task(ctx, ith, nth);

    if (p.n_done.fetch_add(1, std::memory_order_seq_cst) + 1 == static_cast<uint32_t>(n_threads_ - 1)) {
      p.wake_sleepers(p.n_done);
    }
  }
  p.n_helpers_live.fetch_sub(1, std::memory_order_release);  // last touch: the pool may be freed right after
}

}  // namespace sotto
