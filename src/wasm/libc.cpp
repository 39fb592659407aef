// The few libc pieces a freestanding wasm32 build needs: a heap, the mem*/str* functions the compiler and
// libc++ call, abort(), and just enough stdio for libc++'s diagnostics to reach the JS console.
//
// Heap: one boundary-tag arena on top of memory.grow, shared by every worker (one wasm memory, one heap).
// Every block has a 16-byte header (size | flags), payloads are 16-byte aligned; free blocks also keep their
// size in their last word so free() can merge with the block before it, and sit in one of 48 segregated free
// lists (by size, 4 lists per power of two). malloc takes the first fitting block from the smallest list that
// can hold the request, splits off the tail, and grows memory only when no list has room. So model weights of
// hundreds of MB and many small strings live side by side without a pathological search, and freeing the big
// block gives its memory back to the lists in one step. A spin lock (atomic exchange) guards the arena: heap
// calls are rare next to the kernels, and memory.atomic.wait would trap on a page's main thread.
#include <atomic>
#include <cstdarg>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>

#include "wasm/js_imports.h"

extern "C" unsigned char __heap_base;  // first byte after static data and the main stack (wasm-ld)

namespace {

constexpr size_t kAlign = 16;
constexpr size_t kHeaderBytes = 16;
constexpr size_t kMinBlockBytes = 48;  // header + two list links + footer, rounded to kAlign
constexpr size_t kPageBytes = 65536;
constexpr uint32_t kInUse = 1;
constexpr uint32_t kPrevInUse = 2;
constexpr uint32_t kFlagMask = 15;
constexpr int kListCount = 4 * 30;  // 4 lists per power of two, enough for any wasm32 size

// Block layout: [Header | payload ...]; a free block's payload holds next/prev links and its last 4 bytes
// hold its size again (the footer), which the next block reads when it is freed and wants to merge backwards.
struct Header {
  uint32_t size_and_flags;
  uint32_t unused[3];  // keeps the payload 16-byte aligned
};
struct FreeLinks {
  Header* next;
  Header* prev;
};

std::atomic<uint32_t> heap_lock{0};
Header* free_lists[kListCount];
uint8_t* heap_start = nullptr;  // first block
uint8_t* heap_end = nullptr;    // one past the last block: where the epilogue header sits

uint32_t block_size(const Header* b) {
  return b->size_and_flags & ~kFlagMask;
}
bool in_use(const Header* b) {
  return b->size_and_flags & kInUse;
}
bool prev_in_use(const Header* b) {
  return b->size_and_flags & kPrevInUse;
}
Header* next_block(Header* b) {
  return reinterpret_cast<Header*>(reinterpret_cast<uint8_t*>(b) + block_size(b));
}
FreeLinks* links(Header* b) {
  return reinterpret_cast<FreeLinks*>(b + 1);
}
void* payload(Header* b) {
  return b + 1;
}
Header* header_of(void* p) {
  return static_cast<Header*>(p) - 1;
}
void set_footer(Header* b) {
  reinterpret_cast<uint32_t*>(next_block(b))[-1] = block_size(b);
}

int list_index(size_t size) {
  // 4 lists per power of two: the two bits after the leading one pick the quarter.
  int log2 = 31 - __builtin_clz(static_cast<uint32_t>(size));
  int quarter = log2 >= 2 ? static_cast<int>((size >> (log2 - 2)) & 3) : 0;
  int index = (log2 - 4) * 4 + quarter;
  return index < 0 ? 0 : (index >= kListCount ? kListCount - 1 : index);
}

void list_insert(Header* b) {
  int i = list_index(block_size(b));
  links(b)->prev = nullptr;
  links(b)->next = free_lists[i];
  if (free_lists[i]) links(free_lists[i])->prev = b;
  free_lists[i] = b;
}

void list_remove(Header* b) {
  FreeLinks* l = links(b);
  if (l->prev) {
    links(l->prev)->next = l->next;
  } else {
    free_lists[list_index(block_size(b))] = l->next;
  }
  if (l->next) links(l->next)->prev = l->prev;
}

struct LockGuard {
  LockGuard() {
    while (heap_lock.exchange(1, std::memory_order_acquire)) {
      while (heap_lock.load(std::memory_order_relaxed)) {
      }
    }
  }
  ~LockGuard() { heap_lock.store(0, std::memory_order_release); }
};

// The heap ends with an epilogue: a 16-byte header marked in use at heap_end, so the last real block always
// has a next block to look at, and the epilogue's prev-in-use bit tells whether the last block is free.
Header* epilogue() {
  return reinterpret_cast<Header*>(heap_end);
}

// Marks the free block `b` (already off the lists) as used with `size` bytes, returning any tail of at least
// kMinBlockBytes to the lists.
void take_block(Header* b, size_t size) {
  uint32_t have = block_size(b);
  uint32_t prev_flag = b->size_and_flags & kPrevInUse;
  if (have - size >= kMinBlockBytes) {
    b->size_and_flags = static_cast<uint32_t>(size) | kInUse | prev_flag;
    Header* tail = next_block(b);
    tail->size_and_flags = (have - static_cast<uint32_t>(size)) | kPrevInUse;
    set_footer(tail);
    list_insert(tail);  // the block after `tail` already has prev-in-use clear: it followed a free block
  } else {
    b->size_and_flags = have | kInUse | prev_flag;
    next_block(b)->size_and_flags |= kPrevInUse;
  }
}

// Grows memory so that a free block of at least `size` bytes ends the heap; returns it off the lists, or
// null.
Header* grow_heap(size_t size) {
  uint64_t memory_end = static_cast<uint64_t>(__builtin_wasm_memory_size(0)) * kPageBytes;
  if (!heap_start) {
    // Everything from __heap_base to the end of the initial memory is ours; start with an empty heap there.
    heap_start =
        reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(&__heap_base) + kAlign - 1) & ~(kAlign - 1));
    heap_end = heap_start;
    epilogue()->size_and_flags = kInUse | kPrevInUse;
  }
  // A free block at the end of the heap is extended rather than left behind.
  bool last_is_free = !prev_in_use(epilogue());
  Header* b = last_is_free ? reinterpret_cast<Header*>(heap_end - reinterpret_cast<uint32_t*>(heap_end)[-1])
                           : epilogue();
  uint64_t wanted_end = reinterpret_cast<uintptr_t>(b) + size + kHeaderBytes;  // block + new epilogue
  if (wanted_end > 0xFFFF0000ull) return nullptr;
  if (wanted_end > memory_end) {
    // Grow by at least 1/8 of what we have, so many small growths do not each cost a memory.grow.
    uint64_t pages = (wanted_end - memory_end + kPageBytes - 1) / kPageBytes;
    uint64_t min_pages = memory_end / kPageBytes / 8;
    uint64_t max_pages = 65536 - memory_end / kPageBytes;
    if (pages < min_pages) pages = min_pages < max_pages ? min_pages : pages;
    if (__builtin_wasm_memory_grow(0, static_cast<size_t>(pages)) == static_cast<size_t>(-1)) return nullptr;
    memory_end += pages * kPageBytes;
  }
  uint8_t* new_end = reinterpret_cast<uint8_t*>(static_cast<uintptr_t>(memory_end - kHeaderBytes));
  uint32_t prev_flag;
  if (last_is_free) {
    list_remove(b);
    prev_flag = b->size_and_flags & kPrevInUse;
  } else {
    prev_flag = epilogue()->size_and_flags & kPrevInUse;
  }
  b->size_and_flags = static_cast<uint32_t>(new_end - reinterpret_cast<uint8_t*>(b)) | prev_flag;
  heap_end = new_end;
  set_footer(b);
  epilogue()->size_and_flags = kInUse;  // follows a free block
  return b;
}

void* malloc_locked(size_t n) {
  if (n > 0xFFFF0000u - kHeaderBytes) return nullptr;
  size_t size = (n + kHeaderBytes + kAlign - 1) & ~(kAlign - 1);
  if (size < kMinBlockBytes) size = kMinBlockBytes;
  for (int i = list_index(size); i < kListCount; ++i) {
    for (Header* b = free_lists[i]; b; b = links(b)->next) {
      if (block_size(b) >= size) {
        list_remove(b);
        take_block(b, size);
        return payload(b);
      }
    }
  }
  Header* b = grow_heap(size);
  if (!b) return nullptr;
  take_block(b, size);
  return payload(b);
}

void free_locked(void* p) {
  Header* b = header_of(p);
  uint32_t size = block_size(b);
  uint32_t flags = b->size_and_flags & kPrevInUse;
  // Merge with the free block after this one.
  Header* next = next_block(b);
  if (!in_use(next)) {
    list_remove(next);
    size += block_size(next);
  }
  // Merge with the free block before this one (its size is in the footer just below our header).
  if (!(flags & kPrevInUse)) {
    uint32_t prev_size = reinterpret_cast<uint32_t*>(b)[-1];
    Header* prev = reinterpret_cast<Header*>(reinterpret_cast<uint8_t*>(b) - prev_size);
    list_remove(prev);
    size += prev_size;
    flags = prev->size_and_flags & kPrevInUse;
    b = prev;
  }
  b->size_and_flags = size | flags;
  set_footer(b);
  next_block(b)->size_and_flags &= ~kPrevInUse;
  list_insert(b);
}

void* aligned_malloc(size_t alignment, size_t n) {
  if (alignment <= kAlign) return malloc(n);
  if ((alignment & (alignment - 1)) != 0 || n > 0xF0000000u || alignment > 0x10000000u) return nullptr;
  LockGuard lock;
  // Over-allocate, then hand the unaligned front back to the free lists as a block of its own.
  void* raw = malloc_locked(n + alignment + kMinBlockBytes);
  if (!raw) return nullptr;
  uintptr_t p = reinterpret_cast<uintptr_t>(raw);
  if ((p & (alignment - 1)) == 0) return raw;
  uintptr_t aligned = (p + kMinBlockBytes + alignment - 1) & ~(alignment - 1);
  Header* front = header_of(raw);
  Header* back = header_of(reinterpret_cast<void*>(aligned));
  uint32_t front_size =
      static_cast<uint32_t>(reinterpret_cast<uint8_t*>(back) - reinterpret_cast<uint8_t*>(front));
  uint32_t back_size = block_size(front) - front_size;
  back->size_and_flags = back_size | kInUse | kPrevInUse;
  front->size_and_flags = front_size | kInUse | (front->size_and_flags & kPrevInUse);
  free_locked(payload(front));
  return reinterpret_cast<void*>(aligned);
}

}  // namespace

extern "C" {

void* malloc(size_t n) {
  LockGuard lock;
  return malloc_locked(n);
}

void free(void* p) {
  if (!p) return;
  LockGuard lock;
  free_locked(p);
}

void* calloc(size_t count, size_t size) {
  if (size && count > static_cast<size_t>(-1) / size) return nullptr;
  void* p = malloc(count * size);
  if (p) memset(p, 0, count * size);
  return p;
}

void* realloc(void* p, size_t n) {
  if (!p) return malloc(n);
  if (n == 0) {
    free(p);
    return nullptr;
  }
  size_t have = block_size(header_of(p)) - kHeaderBytes;
  if (n <= have) return p;
  void* q = malloc(n);
  if (!q) return nullptr;
  memcpy(q, p, have);
  free(p);
  return q;
}

void* aligned_alloc(size_t alignment, size_t n) {
  return aligned_malloc(alignment, n);
}

int posix_memalign(void** out, size_t alignment, size_t n) {
  if (alignment < sizeof(void*) || (alignment & (alignment - 1))) return 22;  // EINVAL
  void* p = aligned_malloc(alignment, n);
  if (!p) return 12;  // ENOMEM
  *out = p;
  return 0;
}

// Bytes currently between the heap's start and end (what memory.grow has given the allocator), for tests.
size_t sotto_heap_bytes() {
  return heap_end ? static_cast<size_t>(heap_end - heap_start) : 0;
}

// ------------------------------------------------------------------ mem* / str*
// Bulk-memory instructions (memory.copy / memory.fill) do the work; clang lowers these builtins to them.
void* memcpy(void* __restrict dst, const void* __restrict src, size_t n) {
  return __builtin_memmove(dst, src, n);
}
void* memmove(void* dst, const void* src, size_t n) {
  return __builtin_memmove(dst, src, n);
}
void* memset(void* dst, int c, size_t n) {
  return __builtin_memset(dst, c, n);
}

int memcmp(const void* a, const void* b, size_t n) {
  const unsigned char* x = static_cast<const unsigned char*>(a);
  const unsigned char* y = static_cast<const unsigned char*>(b);
  for (size_t i = 0; i < n; ++i) {
    if (x[i] != y[i]) return x[i] < y[i] ? -1 : 1;
  }
  return 0;
}

size_t strlen(const char* s) {
  const char* e = s;
  while (*e) ++e;
  return static_cast<size_t>(e - s);
}

int strcmp(const char* a, const char* b) {
  while (*a && *a == *b) ++a, ++b;
  return static_cast<unsigned char>(*a) - static_cast<unsigned char>(*b);
}

void* memchr(const void* s, int c, size_t n) {
  const unsigned char* p = static_cast<const unsigned char*>(s);
  for (size_t i = 0; i < n; ++i) {
    if (p[i] == static_cast<unsigned char>(c)) return const_cast<unsigned char*>(p + i);
  }
  return nullptr;
}

void abort() {
  static const char kMessage[] = "abort() called";
  sotto_js_abort(kMessage, sizeof kMessage - 1);
  __builtin_trap();
}

// ------------------------------------------------------------------ stdio, just enough for libc++
// libc++'s verbose abort and assertion messages call these with stderr; the text goes to the JS console.
FILE* const stderr = nullptr;
FILE* const stdout = nullptr;

size_t fwrite(const void* data, size_t size, size_t count, FILE*) {
  sotto_js_log(static_cast<const char*>(data), size * count);
  return count;
}

int fputc(int c, FILE*) {
  char ch = static_cast<char>(c);
  sotto_js_log(&ch, 1);
  return c;
}

int fputs(const char* s, FILE*) {
  sotto_js_log(s, strlen(s));
  return 0;
}

// Formats %s %c %d %i %u %x %p %% (with l/z/ll length prefixes); anything else is written as is.
int vfprintf(FILE*, const char* format, va_list args) {
  char out[512];
  size_t n = 0;
  auto put = [&](char c) {
    if (n < sizeof out) out[n++] = c;
  };
  auto put_unsigned = [&](unsigned long long v, unsigned base) {
    char digits[24];
    int k = 0;
    do {
      digits[k++] = "0123456789abcdef"[v % base];
      v /= base;
    } while (v);
    while (k) put(digits[--k]);
  };
  for (const char* f = format; *f; ++f) {
    if (*f != '%') {
      put(*f);
      continue;
    }
    ++f;
    int longs = 0;
    while (*f == 'l' || *f == 'z') longs += (*f++ == 'l') ? 1 : 2;
    switch (*f) {
      case 's': {
        const char* s = va_arg(args, const char*);
        for (s = s ? s : "(null)"; *s; ++s) put(*s);
        break;
      }
      case 'c':
        put(static_cast<char>(va_arg(args, int)));
        break;
      case 'd':
      case 'i': {
        long long v =
            longs >= 2 ? va_arg(args, long long) : (longs == 1 ? va_arg(args, long) : va_arg(args, int));
        if (v < 0) put('-');
        put_unsigned(v < 0 ? 0ull - static_cast<unsigned long long>(v) : static_cast<unsigned long long>(v),
                     10);
        break;
      }
      case 'u':
      case 'x': {
        unsigned long long v = longs >= 2
                                   ? va_arg(args, unsigned long long)
                                   : (longs == 1 ? va_arg(args, unsigned long) : va_arg(args, unsigned));
        put_unsigned(v, *f == 'u' ? 10 : 16);
        break;
      }
      case 'p':
        put('0'), put('x');
        put_unsigned(reinterpret_cast<uintptr_t>(va_arg(args, void*)), 16);
        break;
      case '%':
        put('%');
        break;
      case '\0':
        --f;
        break;
      default:
        put('%'), put(*f);
        break;
    }
  }
  sotto_js_log(out, n);
  return static_cast<int>(n);
}

int fprintf(FILE* stream, const char* format, ...) {
  va_list args;
  va_start(args, format);
  int n = vfprintf(stream, format, args);
  va_end(args);
  return n;
}

}  // extern "C"

// ------------------------------------------------------------------ operator new / delete
// No exceptions: a failed allocation aborts with a message instead of throwing std::bad_alloc.
namespace {
[[noreturn]] void out_of_memory(size_t n) {
  static const char kMessage[] = "out of memory: the wasm heap could not grow";
  (void)n;
  sotto_js_abort(kMessage, sizeof kMessage - 1);
  __builtin_trap();
}
void* checked_new(size_t n) {
  void* p = malloc(n ? n : 1);
  if (!p) out_of_memory(n);
  return p;
}
void* checked_new_aligned(size_t n, std::align_val_t a) {
  void* p = aligned_malloc(static_cast<size_t>(a), n ? n : 1);
  if (!p) out_of_memory(n);
  return p;
}
}  // namespace

void* operator new(size_t n) {
  return checked_new(n);
}
void* operator new[](size_t n) {
  return checked_new(n);
}
void* operator new(size_t n, const std::nothrow_t&) noexcept {
  return malloc(n ? n : 1);
}
void* operator new[](size_t n, const std::nothrow_t&) noexcept {
  return malloc(n ? n : 1);
}
void* operator new(size_t n, std::align_val_t a) {
  return checked_new_aligned(n, a);
}
void* operator new[](size_t n, std::align_val_t a) {
  return checked_new_aligned(n, a);
}
void operator delete(void* p) noexcept {
  free(p);
}
void operator delete[](void* p) noexcept {
  free(p);
}
void operator delete(void* p, size_t) noexcept {
  free(p);
}
void operator delete[](void* p, size_t) noexcept {
  free(p);
}
void operator delete(void* p, std::align_val_t) noexcept {
  free(p);
}
void operator delete[](void* p, std::align_val_t) noexcept {
  free(p);
}
void operator delete(void* p, size_t, std::align_val_t) noexcept {
  free(p);
}
void operator delete[](void* p, size_t, std::align_val_t) noexcept {
  free(p);
}

// ------------------------------------------------------------------ compiler runtime
// 128-bit multiply, which clang calls for 64-bit overflow checks (__builtin_mul_overflow) and std::to_chars;
// compiler-rt's builtins library is not installed for wasm32, so it lives here, built from 32-bit halves.
extern "C" __int128 __multi3(__int128 a, __int128 b) {
  using u64 = unsigned long long;
  const auto ua = static_cast<unsigned __int128>(a);
  const auto ub = static_cast<unsigned __int128>(b);
  const u64 a_lo = static_cast<u64>(ua), a_hi = static_cast<u64>(ua >> 64);
  const u64 b_lo = static_cast<u64>(ub), b_hi = static_cast<u64>(ub >> 64);
  // a_lo * b_lo as a full 128-bit product from four 32x32 -> 64 products.
  const u64 a0 = a_lo & 0xffffffffu, a1 = a_lo >> 32, b0 = b_lo & 0xffffffffu, b1 = b_lo >> 32;
  const u64 p00 = a0 * b0, p01 = a0 * b1, p10 = a1 * b0, p11 = a1 * b1;
  const u64 middle = (p00 >> 32) + (p01 & 0xffffffffu) + (p10 & 0xffffffffu);
  const u64 lo = (middle << 32) | (p00 & 0xffffffffu);
  const u64 hi = p11 + (p01 >> 32) + (p10 >> 32) + (middle >> 32) + a_lo * b_hi + a_hi * b_lo;
  return static_cast<__int128>((static_cast<unsigned __int128>(hi) << 64) | lo);
}
