// GELU (tanh approximation) the way llama.cpp's CPU backend computes it, for Gemma's GeGLU feed-forward
// (gelu(gate) * up). ggml does not evaluate the formula per element: it builds a table of the formula for
// every f16 value once (ggml_table_gelu_f16, GGML_GELU_FP16) and looks x up after rounding it to f16:
//
//   x <= -10: 0      x >= 10: x      else  f32(table[f16(x)])
//   table[h] = f16(0.5 x (1 + tanh(sqrt(2/pi) x (1 + 0.044715 x²))))   x = f32(h), every step in f32
//
// tanh is evaluated in double and rounded to f32 (the wasm build has no tanhf); over all 65536 f16 inputs
// this gives the same table as glibc's tanhf, checked by gelu_test.cpp.
#pragma once

#include <cstdint>
#include <vector>

namespace sotto {

// The 65536-entry table of f16 bits, indexed by the f16 bits of x.
std::vector<uint16_t> make_gelu_f16_table();

// One element of ggml_vec_gelu_f32 with that table.
float gelu_f16_lookup(const std::vector<uint16_t>& table, float x);

// The formula itself in f32 (the table's entries before rounding to f16), with tanh from `tanh_f32`.
float gelu_tanh_formula(float x, float (*tanh_f32)(float));

}  // namespace sotto
