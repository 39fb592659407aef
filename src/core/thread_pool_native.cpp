// Linux hooks for the thread pool: futex sleep/wake, the x86 pause hint, std::thread helpers.
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <thread>
#include <vector>

#include "core/thread_pool.h"

namespace sotto {

static_assert(sizeof(std::atomic<uint32_t>) == sizeof(uint32_t), "futex needs a plain 32-bit word");

void futex_wait(std::atomic<uint32_t>* word, uint32_t expected) {
  // Returns at once if *word != expected (EAGAIN); spurious returns are fine, callers re-check.
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAIT_PRIVATE, expected, nullptr, nullptr, 0);
}

void futex_wake_all(std::atomic<uint32_t>* word) {
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAKE_PRIVATE, INT32_MAX, nullptr, nullptr, 0);
}

void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

namespace detail {

void* start_helper_threads(ThreadPool* pool, int n_threads) {
  auto* threads = new std::vector<std::thread>;
  threads->reserve(n_threads - 1);
  for (int ith = 1; ith < n_threads; ++ith) threads->emplace_back([pool, ith] { pool->worker_loop(ith); });
  return threads;
}

void join_helper_threads(void* handle) {
  auto* threads = static_cast<std::vector<std::thread>*>(handle);
  for (std::thread& t : *threads) t.join();
  delete threads;
}

}  // namespace detail
}  // namespace sotto
