// LlmGpu::build_fused in the browser: the separate dispatches, always. The fused plan and the layer kernels
// (llm_gpu_fusion_native.cpp) are checked at load by reading back synchronously, which the browser cannot, so
// their code is not compiled into the wasm module.
#include "models/llm/gpu/llm_gpu.h"

namespace sotto::gpu {

Status LlmGpu::build_fused(const FusionOptions& options) {
  fusion_status_ = options.mode == FusionOptions::Mode::Off
                       ? "off"
                       : "off: the fused plan and the layer kernels are checked and used natively only";
  return {};
}

}  // namespace sotto::gpu
