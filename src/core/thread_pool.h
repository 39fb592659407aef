// A fixed team of threads that run one task together, llama.cpp style: run(task) calls task(ith, nth) on
// every thread (the caller is thread 0) and returns when all have finished; inside a task, barrier() makes
// every thread wait until all have arrived. Natively the helpers are std::threads; in WebAssembly they are
// Web Workers started by JS on the same shared memory, each calling sotto_worker_main(ith), which runs
// worker_loop(ith). Waiting spins briefly, then sleeps on a futex (Linux) or memory.atomic.wait32 (wasm).
//
// Hand-off (the bug this design rules out: helpers reading a job's parameters after the last barrier while
// the leader was already writing the next job's): the leader writes the job, then bumps a job generation;
// each helper copies the job into locals when it sees a new generation, runs it, then reports done. run()
// returns only when every helper has reported done, so the job slot is never rewritten while anyone still
// reads it.
#pragma once

#include <atomic>
#include <cstdint>
#include <type_traits>

namespace sotto {

// Platform hooks (thread_pool_native.cpp / thread_pool_wasm.cpp).
void futex_wait(std::atomic<uint32_t>* word,
                uint32_t expected);  // sleeps while *word == expected (may wake early)
void futex_wake_all(std::atomic<uint32_t>* word);
void cpu_relax();  // spin-loop hint (x86 pause); nothing on wasm

class ThreadPool;
namespace detail {
// Natively: starts std::threads running pool->worker_loop(1 .. n_threads-1) and returns a handle that
// join_helper_threads() joins. On wasm threads come from JS, so these do nothing (start returns nullptr).
void* start_helper_threads(ThreadPool* pool, int n_threads);
void join_helper_threads(void* handle);
}  // namespace detail

class ThreadPool {
 public:
  using Task = void (*)(void* ctx, int ith, int nth);

  // n_threads counts the caller. Natively starts n_threads - 1 helpers. With start_helpers = false (the web),
  // something else must run worker_loop(1 .. n_threads-1) on other threads; they may start before or after
  // the first run() (run() simply waits until every helper has taken part), but run() does not return until
  // they do.
  explicit ThreadPool(int n_threads, bool start_helpers = true);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int n_threads() const { return n_threads_; }

  // Runs task(ctx, ith, n_active) on threads 0 .. n_active-1 (n_active <= 0 or > n_threads means all) and
  // waits for them. Threads >= n_active sit this job out, so one pool can use 8 threads for a prompt and 4
  // for writing tokens. Not reentrant: call only from the thread that owns the pool, never from inside a
  // task.
  void run(Task task, void* ctx, int n_active = 0);
  template <class F>
  void run(F&& f, int n_active = 0) {
    run([](void* c, int ith, int nth) { (*static_cast<std::remove_reference_t<F>*>(c))(ith, nth); }, &f,
        n_active);
  }

  // Inside a task only; every active thread of the job must call it the same number of times.
  void barrier();

  // Body of each helper thread: waits for tasks until the pool is destroyed. Out-of-range ith returns at
  // once.
  void worker_loop(int ith);

 private:
  struct Impl;
  Impl* impl_;
  int n_threads_;
};

}  // namespace sotto
