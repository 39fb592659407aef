// Where output position d of a resize reads its input (nn::resize, ops.h): the two input positions and the
// weight of the second. One function for the CPU op and the GPU's table, so both interpolate from the same
// positions and weights (computed in double, as the CPU op always has).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "nn/ops.h"

namespace sotto::nn {

struct ResizeSource {
  int64_t i0 = 0, i1 = 0;
  float w1 = 0.0f;
};

// Nearest: PyTorch's interpolate(mode="nearest") / ONNX asymmetric + floor: src = floor(dst * in / out).
// LinearHalfPixel: src = (dst + 0.5) * in / out - 0.5 clamped at 0 (PyTorch align_corners=False).
// LinearAlignCorners: src = dst * (in - 1) / (out - 1).
inline ResizeSource resize_source(int64_t d, int64_t in_len, int64_t length, ResizeMode mode) {
  const double ratio = static_cast<double>(in_len) / static_cast<double>(length);
  ResizeSource s;
  if (mode == ResizeMode::Nearest) {
    s.i0 = s.i1 =
        std::min<int64_t>(static_cast<int64_t>(std::floor(static_cast<double>(d) * ratio)), in_len - 1);
    return s;
  }
  double src = mode == ResizeMode::LinearHalfPixel
                   ? (static_cast<double>(d) + 0.5) * ratio - 0.5
                   : (length > 1 ? static_cast<double>(d) * static_cast<double>(in_len - 1) /
                                       static_cast<double>(length - 1)
                                 : 0.0);
  src = std::max(0.0, src);
  s.i0 = std::min<int64_t>(static_cast<int64_t>(std::floor(src)), in_len - 1);
  s.i1 = std::min<int64_t>(s.i0 + 1, in_len - 1);
  s.w1 = static_cast<float>(src - static_cast<double>(s.i0));
  return s;
}

}  // namespace sotto::nn
