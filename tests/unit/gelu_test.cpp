// cpu/gelu.h against the C library: ggml builds its GELU table with tanhf (glibc here, as in the llama.cpp
// that node-llama-cpp ships); ours uses tanh in double so the wasm build (no libc) makes the same table.
// Every one of the 65536 f16 inputs must give the same f16 entry, and the lookup must follow ggml's clamps.
#include <gtest/gtest.h>

#include <cmath>

#include "core/half.h"
#include "cpu/gelu.h"

namespace sotto {
namespace {

float tanh_libc(float x) {
  return std::tanh(x);  // tanhf
}

TEST(Gelu, TableEqualsTheOneBuiltWithLibcTanhf) {
  const std::vector<uint16_t> table = make_gelu_f16_table();
  ASSERT_EQ(table.size(), 65536u);
  int differences = 0;
  for (uint32_t h = 0; h < 65536; ++h) {
    const float x = f16_to_f32(static_cast<uint16_t>(h));
    if (std::isnan(x)) continue;
    differences += table[h] != f32_to_f16(gelu_tanh_formula(x, tanh_libc));
  }
  EXPECT_EQ(differences, 0);
}

TEST(Gelu, LookupClampsAndRoundsLikeGgml) {
  const std::vector<uint16_t> table = make_gelu_f16_table();
  EXPECT_EQ(gelu_f16_lookup(table, -10.0f), 0.0f);
  EXPECT_EQ(gelu_f16_lookup(table, 12.5f), 12.5f);
  // Inside (-10, 10): the table entry of x rounded to f16, within an f16 step of the exact tanh formula
  // 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) evaluated here in double.
  for (float x : {-3.3f, -0.7f, 0.001f, 0.5f, 1.2345f, 4.0f, 9.99f}) {
    const double xd = f16_to_f32(f32_to_f16(x));
    const double exact = 0.5 * xd * (1.0 + std::tanh(0.7978845608028654 * (xd + 0.044715 * xd * xd * xd)));
    EXPECT_NEAR(gelu_f16_lookup(table, x), exact, std::abs(exact) * 1e-3 + 1e-6) << x;
  }
}

}  // namespace
}  // namespace sotto
