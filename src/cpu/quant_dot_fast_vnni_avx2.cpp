// The register-resident kernels (cpu/quant_dot_fast_x86.h) compiled again for CPUs with AVX-512 VNNI + VL
// (Ice Lake and later, Zen 4 and later): the same vector width and the same float order as the AVX2 build,
// so the results are bit for bit the same, but each sum of four u8 x s8 products is one vpdpbusd, and the
// compiler may use all 32 vector registers. The file is compiled with -mavx2 like every *_avx2.cpp; the
// target attribute below adds the AVX-512 features to these functions only, and quant_dot_avx2() calls them
// only when cpu_features().avx512_vnni says the CPU and OS support them.
#include <immintrin.h>

#include <cstddef>
#include <cstring>
#include <vector>

// Every header from outside is included before the attribute region: their inline functions must stay
// compiled for the baseline (the linker keeps one copy of each for the whole program).
#include "core/half.h"
#include "cpu/quant_dot.h"

#define SOTTO_QUANT_DOT_VNNI 1
#pragma clang attribute push(__attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni"))), \
                             apply_to = function)
#include "cpu/quant_dot_fast_x86.h"

namespace sotto {

QuantDotRowsFn quant_dot_avx2_vnni(DType w) {
  return fast_kernel(w);
}

}  // namespace sotto
#pragma clang attribute pop
