// The threaded SIMD self-test behind the exported sotto_selftest: proves in a browser or Node that the
// module's SIMD kernels, its thread pool and every worker on the shared memory compute what the scalar
// reference computes. The JS side reads SelftestResult straight out of wasm memory, so its layout is fixed.
#pragma once

#include <cstdint>

#include "core/thread_pool.h"

namespace sotto {

struct SelftestResult {
  int32_t passed;     // 1 when every check below holds
  int32_t n_threads;  // threads that took part
  int32_t n_rows;
  int32_t n_cols;
  float max_abs_error;  // largest |SIMD output - scalar reference output|
  float tolerance;
  uint32_t checksum;             // hash of the SIMD/threaded integer dot products, in row order
  uint32_t checksum_ref;         // the same hash from the scalar single-threaded reference
  uint32_t rows_per_thread_min;  // every thread did work: the fewest rows any thread produced
  uint32_t reserved;
  // The engine's own q8_0 matvec kernel (cpu/selftest.h) on the same pool against its scalar reference.
  double q8_checksum;          // sum of the kernel's outputs on all threads
  double q8_checksum_1thread;  // the same on one thread: rows never straddle threads, so it must be equal
  float q8_max_abs_error;      // largest |kernel - scalar reference|
  float q8_tolerance;
};

SelftestResult run_wasm_selftest(ThreadPool& pool, int n_rows, int n_cols, uint32_t seed);

}  // namespace sotto
