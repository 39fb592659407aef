// What the GPU's memory moves, measured the way the matrix x vector kernels are held against it: a buffer copy
// by compute shader (several grids and unrollings, the best taken), the copy command, and reads alone.
#pragma once

#include <cstdint>
#include <span>
#include <string>

#include "core/error.h"
#include "gpu/device.h"

namespace sotto::cli {

struct Bandwidth {
  double copy_gbs = 0;          // read + write, the best compute-shader copy
  std::string copy_how;         // which of them ("grid 1056, 4 vec4 a step")
  double copy_command_gbs = 0;  // read + write, copyBufferToBuffer
  double read_gbs = 0;          // reads alone (a vec4 sum), the best grid
  uint64_t bytes = 0;           // per buffer
};

// Each figure is bytes moved over wall-clock time for one submission of enough back-to-back runs to last
// about 40 ms (so that submission and the wait for the queue are under 1 % of it), the median of 5 such
// submissions after one to warm up (which also lifts the clocks from idle: shorter runs read 1.1-1.5 TB/s
// on the H200 where 4 TB/s is right). Buffers of 256 MiB, far past any last-level cache (4 MiB on a CPU
// adapter, SwiftShader). `verbose` prints every variant's figure.
Result<Bandwidth> measure_bandwidth(gpu::Device& device, bool verbose);

// Milliseconds one replay of `commands` takes: a submission of as many replays as last ~40 ms, wall clock,
// the median of 5 after a warm-up.
Result<double> time_replays(gpu::Device& device, std::span<const gpu::Dispatch> commands);

}  // namespace sotto::cli
