// Self-tests the browser page can run (exported by the wasm build) to prove threaded SIMD kernels work in the
// browser at hand: random inputs from a fixed PRNG, the kernel on all of the pool's threads, the scalar
// reference on one, and the largest difference.
#pragma once

#include <cstdint>

#include "core/thread_pool.h"

namespace sotto {

// q8_0 matrix x vector, rows x cols (cols a multiple of 32, both >= 1). Returns a checksum of the kernel's
// output (sum of y, in double) and stores the largest |y - y_ref| in *max_abs_err_out; the reference value's
// scale is about sqrt(cols) * 0.25, so expect errors of float rounding (~1e-6 of that). Bad shapes return 0
// and store -1.
double cpu_selftest_matvec_q8_0(ThreadPool& pool, int rows, int cols, uint32_t seed, float* max_abs_err_out);

}  // namespace sotto
