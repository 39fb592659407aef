#include "cpu/cpu_features.h"

namespace sotto {
// The SIMD level is a property of the .wasm file (see cpu_kernel_variant()); nothing to detect at run time.
CpuFeatures detect_cpu_features() {
  return {};
}
}  // namespace sotto
