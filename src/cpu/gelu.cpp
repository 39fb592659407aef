#include "cpu/gelu.h"

#include <cmath>

#include "core/half.h"

namespace sotto {

namespace {

float tanh_via_double(float x) {
  return static_cast<float>(std::tanh(static_cast<double>(x)));
}

}  // namespace

// One operation per statement: a compiler allowed to contract a * b + c into an FMA would round differently
// from ggml (whose table differs from the fused form at one f16 input).
float gelu_tanh_formula(float x, float (*tanh_f32)(float)) {
  constexpr float kCoefA = 0.044715f;
  constexpr float kSqrt2OverPi = 0.79788456080286535587989211986876f;
  const float ax = kCoefA * x;
  const float ax2 = ax * x;
  const float poly = 1.0f + ax2;
  const float sx = kSqrt2OverPi * x;
  const float arg = sx * poly;
  const float t = tanh_f32(arg);
  const float half_x = 0.5f * x;
  const float one_plus_t = 1.0f + t;
  return half_x * one_plus_t;
}

std::vector<uint16_t> make_gelu_f16_table() {
  std::vector<uint16_t> table(65536);
  for (uint32_t h = 0; h < 65536; ++h)
    table[h] = f32_to_f16(gelu_tanh_formula(f16_to_f32(static_cast<uint16_t>(h)), tanh_via_double));
  return table;
}

float gelu_f16_lookup(const std::vector<uint16_t>& table, float x) {
  if (x <= -10.0f) return 0.0f;
  if (x >= 10.0f) return x;
  return f16_to_f32(table[f32_to_f16(x)]);
}

}  // namespace sotto
