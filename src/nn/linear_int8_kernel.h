// The row loop of linear_int8_affine's SIMD kernels (linear_int8_avx2.cpp, linear_int8_wasm.cpp), written once:
// the exact integer product of x quantized to int16 (each row) with four rows of int8 weights at a time, so each
// load of x serves four rows. An ISA gives one step, which multiplies kStep weights (widened to int16) by kStep
// of x and adds the products pairwise into int32 lanes of an accumulator:
//   struct Isa { using Vec; static constexpr int64_t kStep; static Vec zero(); static Vec load(const int16_t*);
//                static Vec step(Vec acc, Vec x, const int8_t* q); static int64_t lanes_sum(Vec); };
// The scalar reference is rows_portable (linear_int8.cpp); every path gives the same integers.
#pragma once

#include <algorithm>
#include <cstdint>

namespace sotto::nn::cpu {
namespace {

// Columns summed in int32 lanes before they are moved into the int64 total: a lane takes 2 products a step,
// each |q x xq| <= 128 x 32767 < 2^22, and a chunk of 1024 columns gives a lane 2 x 1024 / kStep of them.
constexpr int64_t kInt8Chunk = 1024;

template <class Isa>
void linear_int8_rows(const int16_t* xq, int64_t m, int64_t k, const int8_t* q, int64_t n_begin,
                      int64_t n_end, float* y, int64_t n) {
  static_assert(2 * kInt8Chunk / Isa::kStep * (int64_t{1} << 22) < (int64_t{1} << 31),
                "int32 lanes overflow");
  constexpr int64_t kStep = Isa::kStep;
  const int64_t k_vec = k / kStep * kStep;
  for (int64_t i = 0; i < m; ++i) {
    const int16_t* xi = xq + i * k;
    int64_t j = n_begin;
    for (; j + 4 <= n_end; j += 4) {
      const int8_t* q0 = q + j * k;
      const int8_t* q1 = q0 + k;
      const int8_t* q2 = q1 + k;
      const int8_t* q3 = q2 + k;
      int64_t s0 = 0, s1 = 0, s2 = 0, s3 = 0;
      for (int64_t c = 0; c < k_vec; c += kInt8Chunk) {
        const int64_t c_end = std::min(k_vec, c + kInt8Chunk);
        auto a0 = Isa::zero(), a1 = a0, a2 = a0, a3 = a0;
        for (int64_t t = c; t < c_end; t += kStep) {
          const auto x = Isa::load(xi + t);
          a0 = Isa::step(a0, x, q0 + t);
          a1 = Isa::step(a1, x, q1 + t);
          a2 = Isa::step(a2, x, q2 + t);
          a3 = Isa::step(a3, x, q3 + t);
        }
        s0 += Isa::lanes_sum(a0);
        s1 += Isa::lanes_sum(a1);
        s2 += Isa::lanes_sum(a2);
        s3 += Isa::lanes_sum(a3);
      }
      for (int64_t t = k_vec; t < k; ++t) {
        s0 += int32_t{xi[t]} * q0[t];
        s1 += int32_t{xi[t]} * q1[t];
        s2 += int32_t{xi[t]} * q2[t];
        s3 += int32_t{xi[t]} * q3[t];
      }
      y[i * n + j] = static_cast<float>(s0);
      y[i * n + j + 1] = static_cast<float>(s1);
      y[i * n + j + 2] = static_cast<float>(s2);
      y[i * n + j + 3] = static_cast<float>(s3);
    }
    for (; j < n_end; ++j) {
      const int8_t* qj = q + j * k;
      int64_t s = 0;
      for (int64_t c = 0; c < k_vec; c += kInt8Chunk) {
        const int64_t c_end = std::min(k_vec, c + kInt8Chunk);
        auto a = Isa::zero();
        for (int64_t t = c; t < c_end; t += kStep) a = Isa::step(a, Isa::load(xi + t), qj + t);
        s += Isa::lanes_sum(a);
      }
      for (int64_t t = k_vec; t < k; ++t) s += int32_t{xi[t]} * qj[t];
      y[i * n + j] = static_cast<float>(s);
    }
  }
}

}  // namespace
}  // namespace sotto::nn::cpu
