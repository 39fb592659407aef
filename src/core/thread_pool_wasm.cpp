// WebAssembly hooks for the thread pool: memory.atomic.wait32 / notify on the shared memory. Helpers are Web
// Workers that JS starts; each calls the exported sotto_worker_main(ith) -> ThreadPool::worker_loop(ith).
// memory.atomic.wait32 traps on the browser's main thread, so the pool's leader must itself run in a worker.
#include "core/thread_pool.h"

namespace sotto {

static_assert(sizeof(std::atomic<uint32_t>) == sizeof(int32_t), "atomic.wait32 needs a plain 32-bit word");

void futex_wait(std::atomic<uint32_t>* word, uint32_t expected) {
  // -1: no timeout. Returns 0 (woken), 1 (value differed) or 2 (timed out); callers re-check either way.
  __builtin_wasm_memory_atomic_wait32(reinterpret_cast<int32_t*>(word), static_cast<int32_t>(expected), -1);
}

void futex_wake_all(std::atomic<uint32_t>* word) {
  __builtin_wasm_memory_atomic_notify(reinterpret_cast<int32_t*>(word), 0xffffffffu);
}

void cpu_relax() {}

namespace detail {
void* start_helper_threads(ThreadPool*, int) {
  return nullptr;
}  // JS starts the workers
void join_helper_threads(void*) {}
}  // namespace detail

}  // namespace sotto
