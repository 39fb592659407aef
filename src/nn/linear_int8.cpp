// linear_int8_affine: y = x . W^T + b with W held as int8 and dequantized as the ONNX exporters' weight-only
// quantization does, w = q * scale + offset (one float scale and one float offset per tensor; Moonshine's
// files). Computed as y = scale * (x . q) + offset * sum(x) + b, so the weights are read as int8: a decoder
// step's matrix-vector products are bound by the bytes of weights they read, 4x fewer than F32.
//
// x . q is an integer product: each row of x is quantized to int16 with its own scale (x ~ xs * xq, |xq| <=
// 32767, round half to even), and the kernels sum int16 x int8 products exactly (int32 lanes, int64 totals).
// That takes 3 instructions per 8 weights in wasm (load8x8, i32x4.dot_i16x8_s, add) where converting each
// weight to float took 7, and in AVX2 3 per 16 (vpmovsxbw, vpmaddwd, vpaddd). The price is x's rounding:
// |error| <= xs / 2 * sum_t |w_t| per output (x's relative precision ~1.5e-5 of the row's largest value),
// far below the int8 weights' own; every kernel gives the same integers, so native and wasm agree bit for bit.
// Threads split the output columns (rows of W); the SIMD kernels' loop is linear_int8_kernel.h (its steps in
// linear_int8_avx2.cpp and linear_int8_wasm.cpp), the portable loop below is the scalar reference and the
// native fallback.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "cpu/cpu_features.h"
#include "nn/cpu.h"
#include "nn/gpu_ops.h"
#include "nn/ops.h"
#include "nn/ref.h"

namespace sotto::nn {

namespace cpu {
// y[i * n + j] = float(sum_t xq[i * k + t] * q[j * k + t]) for j in [n_begin, n_end), the sum exact.
void linear_int8_rows_wasm(const int16_t* xq, int64_t m, int64_t k, const int8_t* q, int64_t n_begin,
                           int64_t n_end, float* y, int64_t n);  // linear_int8_wasm.cpp
void linear_int8_rows_avx2(const int16_t* xq, int64_t m, int64_t k, const int8_t* q, int64_t n_begin,
                           int64_t n_end, float* y, int64_t n);
// linear_int8_affine_prepacked's tile (below): c[i * 8 + j] = sum_p a[p][i] . b[p][j], exactly, for the tile's
// 5 rows i and the panel's 8 columns j; a's int32 holds a pair of x's int16, b's two int16 a column's pair.
void linear_int8_tile_wasm(int64_t pairs, const int32_t* a, const int16_t* b, int64_t* c);
}  // namespace cpu

namespace {

// The plain scalar reference of the kernels: the same exact integer sums, in int64.
[[maybe_unused]] void rows_portable(const int16_t* xq, int64_t m, int64_t k, const int8_t* q, int64_t n_begin,
                                    int64_t n_end, float* y, int64_t n) {
  for (int64_t j = n_begin; j < n_end; ++j) {
    const int8_t* qj = q + j * k;
    for (int64_t i = 0; i < m; ++i) {
      const int16_t* xi = xq + i * k;
      int64_t s = 0;
      for (int64_t t = 0; t < k; ++t) s += int32_t{xi[t]} * int32_t{qj[t]};
      y[i * n + j] = static_cast<float>(s);
    }
  }
}

// The rows of x quantized for the integer products: xq[i, t] = round_half_even(x[i, t] * 32767 / max_t |x[i, t]|),
// xs[i] = max / 32767, sum_x[i] = sum_t x[i, t] (for the offset's term). A row holding NaN or infinity gets
// xs = NaN and xq = 0, so its outputs are NaN as a float product's would be.
struct QuantizedRows {
  std::vector<int16_t> xq;
  std::vector<float> xs, sum_x;
};

// Row i of x [m, k] into r (sized for m rows).
void quantize_row(const float* x, int64_t k, int64_t i, QuantizedRows& r) {
  const float* xi = x + i * k;
  float amax = 0, sum = 0;
  bool finite = true;
  for (int64_t t = 0; t < k; ++t) {
    finite = finite && std::isfinite(xi[t]);
    amax = std::max(amax, std::fabs(xi[t]));
    sum += xi[t];
  }
  r.sum_x[static_cast<size_t>(i)] = sum;
  int16_t* qi = r.xq.data() + i * k;
  if (!finite) {
    r.xs[static_cast<size_t>(i)] = std::numeric_limits<float>::quiet_NaN();
    std::fill(qi, qi + k, int16_t{0});
    return;
  }
  r.xs[static_cast<size_t>(i)] = amax / 32767.0f;
  if (amax == 0) {  // xq and xs 0
    std::fill(qi, qi + k, int16_t{0});
    return;
  }
  const float inv = 32767.0f / amax;
  for (int64_t t = 0; t < k; ++t)
    qi[t] = static_cast<int16_t>(std::clamp(std::nearbyint(xi[t] * inv), -32767.0f, 32767.0f));
}

QuantizedRows sized_for(int64_t m, int64_t k) {
  return {std::vector<int16_t>(static_cast<size_t>(m * k)), std::vector<float>(static_cast<size_t>(m)),
          std::vector<float>(static_cast<size_t>(m))};
}

QuantizedRows quantize_rows(const float* x, int64_t m, int64_t k) {
  QuantizedRows r = sized_for(m, k);
  for (int64_t i = 0; i < m; ++i) quantize_row(x, k, i, r);
  return r;
}

// y[i, j] <- scale * xs[i] * y[i, j] + offset * sum_x[i] + b[j] over the rows [row0, row1) and the columns
// [begin, end).
void finish(float* y, int64_t row0, int64_t row1, int64_t n, int64_t begin, int64_t end,
            const QuantizedRows& r, float scale, float offset, const float* bias) {
  for (int64_t i = row0; i < row1; ++i) {
    const float sx = scale * r.xs[static_cast<size_t>(i)], shift = offset * r.sum_x[static_cast<size_t>(i)];
    for (int64_t j = begin; j < end; ++j) y[i * n + j] = sx * y[i * n + j] + shift + (bias ? bias[j] : 0.0f);
  }
}

Shape with_last_dim(const Shape& s, int64_t last) {
  Shape out = s;
  out[-1] = last;
  return out;
}

}  // namespace

namespace ref {
Tensor linear_int8_affine(const Tensor& x0, const Tensor& w, float scale, float offset, const Tensor& b) {
  const Tensor x = cpu::as_f32(x0);
  const int64_t k = x.dim(-1), n = w.dim(0), m = x.elements() / k;
  Tensor out = x.ctx().empty(with_last_dim(x.shape(), n));
  const std::vector<float> bias =
      b.defined() ? *b.ctx().to_floats(b) : std::vector<float>(static_cast<size_t>(n));
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double sum = 0;
      for (int64_t t = 0; t < k; ++t) {
        // The weight exactly as the graph dequantizes it: float(q) * scale, then + offset, in float.
        const float wv = static_cast<float>(w.data<int8_t>()[j * k + t]) * scale + offset;
        sum += static_cast<double>(x.f32()[i * k + t]) * wv;
      }
      out.f32()[i * n + j] = static_cast<float>(sum + bias[static_cast<size_t>(j)]);
    }
  return out;
}
Tensor linear_int8_affine_quantized_x(const Tensor& x0, const Tensor& w, float scale, float offset,
                                      const Tensor& b) {
  const Tensor x = cpu::as_f32(x0);
  const int64_t k = x.dim(-1), n = w.dim(0), m = x.elements() / k;
  Tensor out = x.ctx().empty(with_last_dim(x.shape(), n));
  const QuantizedRows r = quantize_rows(x.f32(), m, k);
  rows_portable(r.xq.data(), m, k, w.data<int8_t>(), 0, n, out.f32(), n);
  finish(out.f32(), 0, m, n, 0, n, r, scale, offset, b.defined() ? b.f32() : nullptr);
  return out;
}
}  // namespace ref

Tensor linear_int8_affine(const Tensor& x0, const Tensor& w, float scale, float offset, const Tensor& b) {
  if (gpu_ops::on_gpu(x0)) return gpu_ops::linear_int8_affine(x0, w, scale, offset, b);
  const Tensor x = cpu::as_f32(x0);
  const int64_t k = x.dim(-1), n = w.dim(0), m = x.elements() / k;
  NN_ASSERT(w.rank() == 2 && w.dim(1) == k && w.dtype() == DType::I8);
  NN_ASSERT(!b.defined() || (b.dtype() == DType::F32 && b.elements() == n));
  Tensor out = x.ctx().empty(with_last_dim(x.shape(), n));
  const QuantizedRows r = quantize_rows(x.f32(), m, k);
  const int16_t* xq = r.xq.data();
  const int8_t* qp = w.data<int8_t>();
  const float* bias = b.defined() ? b.f32() : nullptr;
  float* y = out.f32();
  cpu::parallel_for(x.ctx(), n, m * k, [&](int64_t begin, int64_t end) {
#if defined(__wasm_simd128__)
    cpu::linear_int8_rows_wasm(xq, m, k, qp, begin, end, y, n);
#else
#if defined(__x86_64__)
    if (cpu_use_avx2())
      cpu::linear_int8_rows_avx2(xq, m, k, qp, begin, end, y, n);
    else
#endif
      rows_portable(xq, m, k, qp, begin, end, y, n);
#endif
    finish(y, 0, m, n, begin, end, r, scale, offset, bias);
  });
  return out;
}

// ---------------------------------------------------------------- packed weights, many rows of x
//
// linear_int8_affine_prepacked: linear_int8_affine's function, bit for bit, for products with many rows of x
// (an encoder's frames), which are bound by multiply-adds rather than by the weight's bytes. The weight is
// packed once (pack_weight_int8) in panels of 8 columns of int16 pairs, panel[(p * 8 + j) * 2 + h] = q[j][2p + h];
// x's rows, quantized as above, are packed per block in tiles of 5 rows of pairs, and a tile times a panel is
// 5 x 8 outputs: per pair of k, 2 loads of the panel, 5 splats of x's pairs and 10 i32x4.dot_i16x8_s + adds
// for 80 multiply-adds (f32x4.relaxed_madd gives 4 an instruction). The int32 lanes are moved into int64
// totals every 256 pairs (each lane takes 2 * 32767 * 128 a pair: 256 of them stay under 2^31), so the
// sums are exact and every path gives the scalar reference's; a tile's 40 totals go straight to the output.
// On the encoder's shapes in Chromium this runs at 1.5-1.75x the f32 product on a Zen 5 and 1.0-1.1x on a Zen
// 2, whose pmaddwd issues once a cycle (bench/wasm_kernels/gemm_i16.mjs).

namespace {

constexpr int64_t kPanel = 8, kTileRows = 5, kBlockTiles = 12;

// The tile's plain scalar reference (and the native path: natively the f32 products are used).
[[maybe_unused]] void tile_portable(int64_t pairs, const int32_t* a, const int16_t* b, int64_t* c) {
  std::fill(c, c + kTileRows * kPanel, int64_t{0});
  for (int64_t p = 0; p < pairs; ++p, a += kTileRows, b += 2 * kPanel)
    for (int64_t i = 0; i < kTileRows; ++i) {
      const auto lo = static_cast<int16_t>(static_cast<uint32_t>(a[i]) & 0xffff);
      const auto hi = static_cast<int16_t>(static_cast<uint32_t>(a[i]) >> 16);
      for (int64_t j = 0; j < kPanel; ++j)
        c[i * kPanel + j] += int32_t{lo} * b[2 * j] + int32_t{hi} * b[2 * j + 1];
    }
}

void tile(int64_t pairs, const int32_t* a, const int16_t* b, int64_t* c) {
#if defined(__wasm_simd128__)
  cpu::linear_int8_tile_wasm(pairs, a, b, c);
#else
  tile_portable(pairs, a, b, c);
#endif
}

}  // namespace

Tensor cpu::pack_weight_int8(Context& ctx, const Tensor& w) {
  NN_ASSERT(w.rank() == 2 && w.dtype() == DType::I8 && w.dim(0) % kPanel == 0);
  const int64_t n = w.dim(0), k = w.dim(1), kp = (k + 1) / 2;
  Tensor panels = ctx.empty({n, 2 * kp}, DType::I16);
  int16_t* out = panels.data<int16_t>();
  const int8_t* q = w.data<int8_t>();
  for (int64_t p = 0; p < n; p += kPanel)
    for (int64_t pair = 0; pair < kp; ++pair)
      for (int64_t j = 0; j < kPanel; ++j)
        for (int64_t h = 0; h < 2; ++h)
          out[p * 2 * kp + (pair * kPanel + j) * 2 + h] =
              2 * pair + h < k ? q[(p + j) * k + 2 * pair + h] : int16_t{0};
  return panels;
}

Tensor cpu::linear_int8_affine_prepacked(const Tensor& x0, const Tensor& panels, float scale, float offset,
                                         const Tensor& b) {
  const Tensor x = as_f32(x0);
  const int64_t k = x.dim(-1), m = x.elements() / k, n = panels.dim(0), kp = panels.dim(1) / 2;
  NN_ASSERT(panels.dtype() == DType::I16 && kp == (k + 1) / 2 && n % kPanel == 0);
  NN_ASSERT(!b.defined() || (b.dtype() == DType::F32 && b.elements() == n));
  QuantizedRows r = sized_for(m, k);
  Tensor out = x.ctx().empty(with_last_dim(x.shape(), n));
  float* y = out.f32();
  const int16_t* w = panels.data<int16_t>();
  const float* bias = b.defined() ? b.f32() : nullptr;
  // Threads take runs of 5-row tiles, each in blocks of kBlockTiles tiles (60 rows: their packed pairs, a
  // block of them, stay in L2 while the panels stream past), quantizing their own rows.
  const int64_t tiles = (m + kTileRows - 1) / kTileRows;
  // x's rows as pairs, tile by tile (allocated here: the tasks allocate nothing).
  std::vector<int32_t> pairs(static_cast<size_t>(tiles * kTileRows * kp));
  parallel_for(x.ctx(), tiles, kTileRows * n * k, [&](int64_t t_begin, int64_t t_end) {
    int64_t c[kTileRows * kPanel];
    for (int64_t t0 = t_begin; t0 < t_end; t0 += kBlockTiles) {
      const int64_t row0 = t0 * kTileRows, row1 = std::min(m, std::min(t_end, t0 + kBlockTiles) * kTileRows);
      const int64_t block_tiles = (row1 - row0 + kTileRows - 1) / kTileRows;
      for (int64_t i = row0; i < row1; ++i) quantize_row(x.f32(), k, i, r);
      // x's int16 pairs (an odd k's last padded with 0), tile by tile, pair-major within a tile.
      for (int64_t t = 0; t < block_tiles; ++t)
        for (int64_t i = 0; i < kTileRows; ++i) {
          const int64_t row = row0 + t * kTileRows + i;
          int32_t* at = pairs.data() + (t0 + t) * kp * kTileRows + i;
          if (row >= row1) {  // the last tile's rows past x: zeros
            for (int64_t p = 0; p < kp; ++p) at[p * kTileRows] = 0;
            continue;
          }
          const int16_t* xi = r.xq.data() + row * k;
          for (int64_t p = 0; p < kp; ++p) {
            const auto lo = static_cast<uint16_t>(xi[2 * p]);
            const auto hi = static_cast<uint16_t>(2 * p + 1 < k ? xi[2 * p + 1] : int16_t{0});
            at[p * kTileRows] = static_cast<int32_t>(lo | (static_cast<uint32_t>(hi) << 16));
          }
        }
      for (int64_t j = 0; j < n; j += kPanel)
        for (int64_t t = 0; t < block_tiles; ++t) {
          tile(kp, pairs.data() + (t0 + t) * kp * kTileRows, w + j * 2 * kp, c);
          // finish()'s arithmetic on the tile's totals.
          for (int64_t i = 0; i < std::min(kTileRows, row1 - row0 - t * kTileRows); ++i) {
            const int64_t row = row0 + t * kTileRows + i;
            const float sx = scale * r.xs[static_cast<size_t>(row)],
                        shift = offset * r.sum_x[static_cast<size_t>(row)];
            for (int64_t jj = 0; jj < kPanel; ++jj)
              y[row * n + j + jj] =
                  sx * static_cast<float>(c[i * kPanel + jj]) + shift + (bias ? bias[j + jj] : 0.0f);
          }
        }
    }
  });
  return out;
}

}  // namespace sotto::nn
