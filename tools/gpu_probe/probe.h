// sotto_gpu_probe: measurements of this machine's GPU that no model needs at run time, kept out of the product
// (`sotto`) because they only inform its design: what a grid barrier costs (gpu/fusion.h), how fast a whole
// decode step could run as one persistent dispatch, and each weight type's matrix x vector kernel alone
// against the memory bandwidth.
#pragma once

#include "core/error.h"
#include "gpu/device.h"

namespace sotto::probe {

// The grid barrier's time for several grid sizes, and plain loads against the atomic loads a fused kernel
// uses for what its own workgroups wrote (probe.cpp).
Status probe_barrier(gpu::Device& device);

// A synthetic Qwen2.5-0.5B-shaped Q4_0 token as one persistent dispatch: its time (probe_token.cpp).
Status probe_token(gpu::Device& device);

// The memory bandwidth's variants, then the matrix x vector kernels alone on each weight type at Qwen2.5-0.5B's
// shapes and at larger ones: GB/s and shares of the best copy and of reads (bandwidth.cpp).
Status probe_bandwidth(gpu::Device& device);

}  // namespace sotto::probe
