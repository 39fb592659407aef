// Shape ops: copies that move elements (transpose, permute, concat, slice, pad) and resize. Memory-bound,
// single-threaded (a copy is faster than a pool hand-off at these sizes).
#include <cmath>
#include <cstring>

#include "nn/cpu.h"
#include "nn/gpu_ops.h"
#include "nn/ops.h"
#include "nn/resize_source.h"

namespace sotto::nn {

Tensor transpose(const Tensor& x) {
  if (gpu_ops::on_gpu(x)) return gpu_ops::transpose(x);
  NN_ASSERT(x.rank() == 2);
  const int order[2] = {1, 0};
  return permute(x, order);
}

Tensor permute(const Tensor& x, std::span<const int> order) {
  if (gpu_ops::on_gpu(x)) return gpu_ops::permute(x, order);
  NN_ASSERT(static_cast<int>(order.size()) == x.rank());
  const int rank = x.rank();
  const uint32_t eb = element_bytes(x.dtype());
  Shape shape;
  shape.rank = rank;
  int64_t in_strides[Shape::kMaxRank], strides[Shape::kMaxRank];
  cpu::strides_of(x.shape(), in_strides);
  for (int i = 0; i < rank; ++i) {
    shape.dims[i] = x.dim(order[i]);
    strides[i] = in_strides[order[i]];
  }
  Tensor out = x.ctx().empty(shape, x.dtype()).with_quant(x.quant());
  const uint8_t* in = x.data<uint8_t>();
  uint8_t* o = out.data<uint8_t>();
  const int64_t n = shape.elements();
  int64_t index[Shape::kMaxRank] = {};
  int64_t offset = 0;
  for (int64_t i = 0; i < n; ++i) {
    if (eb == 4)
      std::memcpy(o + i * 4, in + offset * 4, 4);
    else
      std::memcpy(o + i * eb, in + offset * eb, eb);
    for (int d = rank - 1; d >= 0; --d) {
      offset += strides[d];
      if (++index[d] < shape.dims[d]) break;
      offset -= strides[d] * shape.dims[d];
      index[d] = 0;
    }
  }
  return out;
}

Tensor concat(std::span<const Tensor> parts, int axis) {
  if (gpu_ops::on_gpu(parts[0])) return gpu_ops::concat(parts, axis);
  NN_ASSERT(!parts.empty());
  const Tensor& first = parts[0];
  const int a = cpu::axis_of(first.shape(), axis);
  Shape shape = first.shape();
  shape.dims[a] = 0;
  for (const Tensor& p : parts) {
    NN_ASSERT(p.rank() == first.rank() && p.dtype() == first.dtype());
    shape.dims[a] += p.dim(a);
  }
  Tensor out = first.ctx().empty(shape, first.dtype()).with_quant(first.quant());
  const uint32_t eb = element_bytes(first.dtype());
  const cpu::AxisSplit s = cpu::split_at(shape, a);
  int64_t done = 0;  // elements along the axis written so far
  for (const Tensor& p : parts) {
    const int64_t block = p.dim(a) * s.inner * eb;
    for (int64_t o = 0; o < s.outer; ++o)
      std::memcpy(out.data<uint8_t>() + (o * s.n + done) * s.inner * eb, p.data<uint8_t>() + o * block,
                  static_cast<size_t>(block));
    done += p.dim(a);
  }
  return out;
}

Tensor slice(const Tensor& x, int axis, int64_t begin, int64_t end) {
  if (gpu_ops::on_gpu(x)) return gpu_ops::slice(x, axis, begin, end);
  const int a = cpu::axis_of(x.shape(), axis);
  NN_ASSERT(0 <= begin && begin <= end && end <= x.dim(a));
  Shape shape = x.shape();
  shape.dims[a] = end - begin;
  Tensor out = x.ctx().empty(shape, x.dtype()).with_quant(x.quant());
  const uint32_t eb = element_bytes(x.dtype());
  const cpu::AxisSplit s = cpu::split_at(x.shape(), a);
  const int64_t block = (end - begin) * s.inner * eb;
  for (int64_t o = 0; o < s.outer; ++o)
    std::memcpy(out.data<uint8_t>() + o * block, x.data<uint8_t>() + (o * s.n + begin) * s.inner * eb,
                static_cast<size_t>(block));
  return out;
}

namespace {

// Copies x into the middle of a tensor padded along `axis`; fill(o, out_row) then writes the pad elements of
// each [n + before + after, inner] block.
template <class Fill>
Tensor pad_with(const Tensor& x0, int axis, int64_t before, int64_t after, Fill fill) {
  const Tensor x = cpu::as_f32(x0);
  const int a = cpu::axis_of(x.shape(), axis);
  Shape shape = x.shape();
  shape.dims[a] += before + after;
  Tensor out = x.ctx().empty(shape);
  const cpu::AxisSplit s = cpu::split_at(x.shape(), a);
  const int64_t n_out = s.n + before + after;
  for (int64_t o = 0; o < s.outer; ++o) {
    const float* in = x.f32() + o * s.n * s.inner;
    float* row = out.f32() + o * n_out * s.inner;
    std::memcpy(row + before * s.inner, in, static_cast<size_t>(s.n * s.inner) * 4);
    fill(in, row, s.n, s.inner);
  }
  return out;
}

}  // namespace

Tensor pad(const Tensor& x, int axis, int64_t before, int64_t after, float value) {
  NN_CPU_ONLY(x, "pad");
  return pad_with(x, axis, before, after, [&](const float*, float* row, int64_t n, int64_t inner) {
    for (int64_t i = 0; i < before * inner; ++i) row[i] = value;
    for (int64_t i = (before + n) * inner; i < (before + n + after) * inner; ++i) row[i] = value;
  });
}

// Reflect without repeating the edge (numpy "reflect", ONNX Pad mode=reflect): x[-1 - j] = x[1 + j].
Tensor pad_reflect(const Tensor& x, int axis, int64_t before, int64_t after) {
  if (gpu_ops::on_gpu(x)) return gpu_ops::pad_reflect(x, axis, before, after);
  return pad_with(x, axis, before, after, [&](const float* in, float* row, int64_t n, int64_t inner) {
    NN_ASSERT(before < n && after < n);
    for (int64_t j = 0; j < before; ++j)
      std::memcpy(row + (before - 1 - j) * inner, in + (1 + j) * inner, static_cast<size_t>(inner) * 4);
    for (int64_t j = 0; j < after; ++j)
      std::memcpy(row + (before + n + j) * inner, in + (n - 2 - j) * inner, static_cast<size_t>(inner) * 4);
  });
}

// The positions and weights: resize_source (nn/resize_source.h).
Tensor resize(const Tensor& x0, int64_t length, ResizeMode mode) {
  if (gpu_ops::on_gpu(x0)) return gpu_ops::resize(x0, length, mode);
  const Tensor x = cpu::as_f32(x0);
  const int64_t in_len = x.dim(-1);
  const int64_t rows = x.elements() / in_len;
  Shape shape = x.shape();
  shape[-1] = length;
  Tensor out = x.ctx().empty(shape);
  for (int64_t d = 0; d < length; ++d) {
    const auto [i0, i1, w1] = resize_source(d, in_len, length, mode);
    for (int64_t r = 0; r < rows; ++r) {
      const float* in = x.f32() + r * in_len;
      out.f32()[r * length + d] = in[i0] + (in[i1] - in[i0]) * w1;
    }
  }
  return out;
}

}  // namespace sotto::nn
