// A fixed team of threads that run one task together, llama.cpp style: run(task) calls task(ith, nth) on every
// thread (the caller is thread 0) and returns when all have finished; inside a task, barrier() makes every
// thread wait until all have arrived. Natively the helpers are std::threads; in WebAssembly they are Web
// Workers started by JS on the same shared memory, each calling sotto_worker_main(ith), which runs
// worker_loop(ith). Waiting spins briefly, then sleeps on a futex (Linux) or memory.atomic.wait32 (wasm).
#pragma once

#include <atomic>
#include <cstdint>
#include <type_traits>

namespace sotto {

// Platform hooks (thread_pool_native.cpp / thread_pool_wasm.cpp).
void futex_wait(std::atomic<uint32_t>* word, uint32_t expected);  // sleeps while *word == expected
void futex_wake_all(std::atomic<uint32_t>* word);

class ThreadPool {
 public:
  using Task = void (*)(void* ctx, int ith, int nth);

  // n_threads counts the caller. Natively starts n_threads - 1 helpers. With start_helpers = false (the web),
  // the caller must arrange for worker_loop(1 .. n_threads-1) to run on other threads before the first run().
  explicit ThreadPool(int n_threads, bool start_helpers = true);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int n_threads() const { return n_threads_; }

  void run(Task task, void* ctx);
  template <class F>
  void run(F&& f) {
    run([](void* c, int ith, int nth) { (*static_cast<std::remove_reference_t<F>*>(c))(ith, nth); }, &f);
  }

  // Inside a task only; every thread of the pool must call it the same number of times.
  void barrier();

  // Body of each helper thread: waits for tasks until the pool is destroyed.
  void worker_loop(int ith);

 private:
  struct Impl;
  Impl* impl_;
  int n_threads_;
};

}  // namespace sotto
