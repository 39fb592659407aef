// Per-thread set-up for Web Workers that share one wasm memory.
//
// Every worker instantiates the same module on the same memory. Instantiation runs wasm-ld's start function
// __wasm_init_memory, which copies the data segments only the first time (an atomic flag in memory says it is
// done), so later instances see the live heap untouched. What each instance owns are its globals, and two of
// them must be set before the worker runs any C++:
//   __stack_pointer  the linker's initial value is the top of the one static stack, which the first instance
//                    (the engine worker, thread 0) uses; a helper gets a stack of its own from the heap.
//   __tls_base       thread_local storage; wasm-ld's __wasm_init_tls(block) copies the TLS template to
//   `block`
//                    and points __tls_base at it.
// Thread 0 allocates each helper's block (sotto_thread_alloc) and posts the two addresses to the helper,
// which calls sotto_set_stack_pointer(stack_top) first (a few instructions that touch no stack), then
// sotto_thread_init(tls_base).
#include <cstddef>
#include <cstdint>
#include <cstdlib>

extern "C" void __wasm_init_tls(void* tls_block);  // synthesised by wasm-ld for shared-memory modules

// clang has no builtin to write __stack_pointer, so this one function is written in wasm assembly.
__asm__(R"(
  .globaltype __stack_pointer, i32
  .globl sotto_set_stack_pointer
  .export_name sotto_set_stack_pointer, sotto_set_stack_pointer
  .type sotto_set_stack_pointer,@function
sotto_set_stack_pointer:
  .functype sotto_set_stack_pointer (i32) -> ()
  local.get 0
  global.set __stack_pointer
  end_function
)");

namespace {

constexpr size_t kStackAlign = 16;

// Where thread 0 writes a helper's addresses; JS reads the two words and posts them to the helper.
// This thread's index in the pool (0 for the engine worker): thread_local, so reading it back from every
// worker proves each one has its own TLS block.
thread_local int32_t thread_index = 0;

struct ThreadBlock {
  uint32_t stack_top;
  uint32_t tls_base;
  uint32_t stack_bytes;
  uint32_t reserved;
};

}  // namespace

extern "C" {

// One allocation per helper: [ThreadBlock | TLS block | stack ...]; the stack grows down from the end.
// Returns the ThreadBlock (free it with sotto_thread_free once the helper has left), or null.
__attribute__((export_name("sotto_thread_alloc"))) ThreadBlock* sotto_thread_alloc(uint32_t stack_bytes) {
  const size_t tls_align =
      __builtin_wasm_tls_align() > kStackAlign ? __builtin_wasm_tls_align() : kStackAlign;
  const size_t tls_bytes = (__builtin_wasm_tls_size() + tls_align - 1) & ~(tls_align - 1);
  stack_bytes = static_cast<uint32_t>((stack_bytes + kStackAlign - 1) & ~(kStackAlign - 1));
  const size_t header_bytes = (sizeof(ThreadBlock) + tls_align - 1) & ~(tls_align - 1);
  void* raw = aligned_alloc(tls_align, header_bytes + tls_bytes + stack_bytes);
  if (!raw) return nullptr;
  auto* block = static_cast<ThreadBlock*>(raw);
  const uintptr_t base = reinterpret_cast<uintptr_t>(raw);
  block->tls_base = static_cast<uint32_t>(base + header_bytes);
  block->stack_top = static_cast<uint32_t>(base + header_bytes + tls_bytes + stack_bytes);
  block->stack_bytes = stack_bytes;
  block->reserved = 0;
  return block;
}

__attribute__((export_name("sotto_thread_free"))) void sotto_thread_free(ThreadBlock* block) {
  free(block);
}

// Call in a helper right after sotto_set_stack_pointer.
__attribute__((export_name("sotto_thread_init"))) void sotto_thread_init(uint32_t tls_base, int32_t ith) {
  __wasm_init_tls(reinterpret_cast<void*>(static_cast<uintptr_t>(tls_base)));
  thread_index = ith;
}

__attribute__((export_name("sotto_thread_index"))) int32_t sotto_thread_index() {
  return thread_index;
}

// The running instance's stack pointer and TLS base, for tests that check each worker got its own.
__attribute__((export_name("sotto_thread_tls_base"))) uint32_t sotto_thread_tls_base() {
  return static_cast<uint32_t>(reinterpret_cast<uintptr_t>(__builtin_wasm_tls_base()));
}

}  // extern "C"
