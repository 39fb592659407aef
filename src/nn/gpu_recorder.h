// The op layer's GPU backend: a context on a gpu::Device whose ops record dispatches into a plan instead of
// running them; reading a tensor back submits the plan and waits for the read. Buffers are pooled by size, and
// a forward pass that records the same ops on the same shapes as the last one replays the last plan.
#pragma once

namespace sotto::nn {

class GpuRecorder {
 public:
  virtual ~GpuRecorder() = default;
};

}  // namespace sotto::nn
