// Convolutions over [C, T] and [C, H, W]: conv1d (stride, padding, dilation, groups; depthwise has its own
// loop), its ONNX Runtime dynamic int8 form (DynamicQuantizeLinear + ConvInteger), transposed conv1d, conv2d.
// The input is unrolled ("im2col") into rows of Cin/groups * K values per output position, so each group is
// one gemm_nt of the weight rows with those rows: that product is where the time goes.
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstring>

#include "nn/cpu.h"
#include "nn/gemm.h"
#include "nn/gpu_ops.h"
#include "nn/ops.h"
#include "nn/ref.h"

namespace sotto::nn {

namespace {

int64_t conv_out_length(int64_t length, int64_t pad_total, int64_t kernel, int64_t stride, int64_t dilation) {
  return (length + pad_total - dilation * (kernel - 1) - 1) / stride + 1;
}

int pad_end_of(const Conv1dOptions& o) {
  return o.padding_end < 0 ? o.padding : o.padding_end;
}

void add_channel_bias(Tensor& out, const Tensor& b) {
  if (!b.defined()) return;
  const Tensor bf = cpu::as_f32(b);
  const int64_t channels = out.dim(0), length = out.elements() / channels;
  const float* bias = bf.f32();
  float* y = out.f32();
  for (int64_t c = 0; c < channels; ++c)
    for (int64_t t = 0; t < length; ++t) y[c * length + t] += bias[c];
}

// Unrolls group g of x [Cin, T] into cols [T', Cin_g * K]: cols[t][i * K + k] = x[g * Cin_g + i][t * stride
// + k * dilation - pad] (`zero` outside). Split over the context's threads by output rows: a conv stem's
// unrolling (Moonshine's conv2: 2.4 M values) otherwise runs on one thread while the other waits.
template <class T>
void im2col_1d(const Context& ctx, const T* x, std::ptrdiff_t length, std::ptrdiff_t in_g, std::ptrdiff_t g,
               std::ptrdiff_t kernel, const Conv1dOptions& o, std::ptrdiff_t out_len, T zero, T* cols) {
  const std::ptrdiff_t row = in_g * kernel;
  cpu::parallel_for(ctx, out_len, row, [&](int64_t begin, int64_t end) {
    for (std::ptrdiff_t t = begin; t < end; ++t) {
      const std::ptrdiff_t p0 = t * o.stride - o.padding;
      const bool inside = p0 >= 0 && p0 + (kernel - 1) * o.dilation < length;
      for (std::ptrdiff_t i = 0; i < in_g; ++i) {
        const T* xi = x + (g * in_g + i) * length;
        T* c = cols + t * row + i * kernel;
        if (inside) {
          for (std::ptrdiff_t k = 0; k < kernel; ++k) c[k] = xi[p0 + k * o.dilation];
        } else {
          for (std::ptrdiff_t k = 0; k < kernel; ++k) {
            const std::ptrdiff_t p = p0 + k * o.dilation;
            c[k] = (p >= 0 && p < length) ? xi[p] : zero;
          }
        }
      }
    }
  });
}

}  // namespace

// ---------------------------------------------------------------- conv1d

namespace ref {
Tensor conv1d(const Tensor& x0, const Tensor& w0, const Tensor& b, const Conv1dOptions& o) {
  const Tensor x = cpu::as_f32(x0), w = cpu::as_f32(w0);
  const int64_t cin = x.dim(0), length = x.dim(1), cout = w.dim(0), in_g = w.dim(1), kernel = w.dim(2);
  const int64_t out_g = cout / o.groups;
  const int64_t out_len = conv_out_length(length, o.padding + pad_end_of(o), kernel, o.stride, o.dilation);
  NN_ASSERT(in_g * o.groups == cin);
  Tensor out = x.ctx().empty({cout, out_len});
  for (int64_t oc = 0; oc < cout; ++oc) {
    const int64_t g = oc / out_g;
    for (int64_t t = 0; t < out_len; ++t) {
      double sum = 0;
      for (int64_t i = 0; i < in_g; ++i)
        for (int64_t k = 0; k < kernel; ++k) {
          const int64_t p = t * o.stride + k * o.dilation - o.padding;
          if (p >= 0 && p < length)
            sum += static_cast<double>(w.f32()[(oc * in_g + i) * kernel + k]) *
                   x.f32()[(g * in_g + i) * length + p];
        }
      out.f32()[oc * out_len + t] = static_cast<float>(sum);
    }
  }
  add_channel_bias(out, b);
  return out;
}
}  // namespace ref

Tensor conv1d(const Tensor& x0, const Tensor& w0, const Tensor& b, const Conv1dOptions& o) {
  if (gpu_ops::on_gpu(x0))
    return gpu_ops::conv1d(x0, w0, b, o.stride, o.padding, pad_end_of(o), o.dilation, o.groups);
  const Tensor x = cpu::as_f32(x0), w = cpu::weight_f32(w0);
  NN_ASSERT(x.rank() == 2 && w.rank() == 3);
  const int64_t cin = x.dim(0), length = x.dim(1), cout = w.dim(0), in_g = w.dim(1), kernel = w.dim(2);
  const int64_t out_g = cout / o.groups;
  const int64_t out_len = conv_out_length(length, o.padding + pad_end_of(o), kernel, o.stride, o.dilation);
  NN_ASSERT(in_g * o.groups == cin && out_g * o.groups == cout && out_len > 0);
  Context& ctx = x.ctx();
  Tensor out = ctx.empty({cout, out_len});
  if (in_g == 1 && o.dilation == 1 && o.padding == 0 && (out_len - 1) * o.stride + kernel <= length) {
    // One input channel per group, no padding: the unrolled rows are windows of x itself, `stride` apart, so
    // the product reads them in place (an STFT as a conv: Silero's front end).
    for (int64_t g = 0; g < o.groups; ++g)
      cpu::gemm_nt(ctx, out_g, out_len, kernel, w.f32() + g * out_g * kernel, kernel, x.f32() + g * length,
                   o.stride, out.f32() + g * out_g * out_len, out_len);
  } else if (in_g == 1 && o.groups > 1) {
    // Depthwise: each output channel reads one input row; K multiply-adds per output, no unrolling.
    cpu::parallel_for(ctx, cout, out_len * kernel, [&](int64_t begin, int64_t end) {
      for (int64_t oc = begin; oc < end; ++oc) {
        const float* xi = x.f32() + (oc / out_g) * length;
        const float* wk = w.f32() + oc * kernel;
        float* y = out.f32() + oc * out_len;
        for (int64_t t = 0; t < out_len; ++t) {
          float sum = 0.0f;
          for (int64_t k = 0; k < kernel; ++k) {
            const int64_t p = t * o.stride + k * o.dilation - o.padding;
            if (p >= 0 && p < length) sum += wk[k] * xi[p];
          }
          y[t] = sum;
        }
      }
    });
  } else {
    const int64_t row = in_g * kernel;
    Tensor cols = ctx.empty({out_len, row});
    for (int64_t g = 0; g < o.groups; ++g) {
      im2col_1d(ctx, x.f32(), length, in_g, g, kernel, o, out_len, 0.0f, cols.f32());
      cpu::gemm_nt(ctx, out_g, out_len, row, w.f32() + g * out_g * row, row, cols.f32(), row,
                   out.f32() + g * out_g * out_len, out_len);
    }
  }
  add_channel_bias(out, b);
  return out;
}

// ---------------------------------------------------------------- conv1d, dynamic int8

namespace ref {
Tensor conv1d_integer_dynamic(const Tensor& x, const Tensor& w, const Tensor& b, const Conv1dOptions& o,
                              const Tensor& w_scales) {
  const Tensor xq = dynamic_quantize_linear(x);
  const int64_t cin = x.dim(0), length = x.dim(1), cout = w.dim(0), in_g = w.dim(1), kernel = w.dim(2);
  const int64_t out_g = cout / o.groups;
  const int64_t out_len = conv_out_length(length, o.padding + pad_end_of(o), kernel, o.stride, o.dilation);
  NN_ASSERT(in_g * o.groups == cin);
  const Tensor scales = w_scales.defined() ? cpu::as_f32(w_scales) : Tensor{};
  Tensor out = x.ctx().empty({cout, out_len});
  const int32_t xzp = xq.quant().zero_point, wzp = w.quant().zero_point;
  for (int64_t oc = 0; oc < cout; ++oc) {
    const int64_t g = oc / out_g;
    const float ws = scales.defined() ? scales.f32()[scales.elements() == 1 ? 0 : oc] : w.quant().scale;
    for (int64_t t = 0; t < out_len; ++t) {
      int64_t acc = 0;
      for (int64_t i = 0; i < in_g; ++i)
        for (int64_t k = 0; k < kernel; ++k) {
          const int64_t p = t * o.stride + k * o.dilation - o.padding;
          if (p < 0 || p >= length) continue;  // padded with the zero point: contributes 0
          const uint8_t raw = w.data<uint8_t>()[(oc * in_g + i) * kernel + k];
          const int32_t wv = w.dtype() == DType::I8 ? static_cast<int8_t>(raw) : static_cast<int32_t>(raw);
          acc += static_cast<int64_t>(int32_t{xq.data<uint8_t>()[(g * in_g + i) * length + p]} - xzp) *
                 (wv - wzp);
        }
      out.f32()[oc * out_len + t] = static_cast<float>(acc) * (xq.quant().scale * ws);
    }
  }
  add_channel_bias(out, b);
  return out;
}
}  // namespace ref

Tensor conv1d_integer_dynamic(const Tensor& x, const Tensor& w, const Tensor& b, const Conv1dOptions& o,
                              const Tensor& w_scales) {
  NN_CPU_ONLY(x, "conv1d_integer_dynamic");
  NN_ASSERT(x.rank() == 2 && w.rank() == 3 && (w.dtype() == DType::I8 || w.dtype() == DType::U8));
  Context& ctx = x.ctx();
  const Tensor xq = dynamic_quantize_linear(x);
  const int64_t cin = x.dim(0), length = x.dim(1), cout = w.dim(0), in_g = w.dim(1), kernel = w.dim(2);
  const int64_t out_g = cout / o.groups, row = in_g * kernel;
  const int64_t out_len = conv_out_length(length, o.padding + pad_end_of(o), kernel, o.stride, o.dilation);
  NN_ASSERT(in_g * o.groups == cin && out_len > 0);
  // x and w as int16 with zero points subtracted (padding is the zero point: 0 after the subtraction).
  Tensor xs = ctx.empty({cin, length}, DType::I16);
  const int32_t xzp = xq.quant().zero_point, wzp = w.quant().zero_point;
  for (int64_t i = 0; i < cin * length; ++i)
    xs.data<int16_t>()[i] = static_cast<int16_t>(int32_t{xq.data<uint8_t>()[i]} - xzp);
  const Tensor ws = w.derived(cpu::kDerivedInt16, [&] {
    Tensor t16 = w.ctx().empty(w.shape(), DType::I16);
    for (int64_t i = 0; i < w.elements(); ++i) {
      const uint8_t raw = w.data<uint8_t>()[i];
      const int32_t wv = w.dtype() == DType::I8 ? static_cast<int8_t>(raw) : static_cast<int32_t>(raw);
      t16.data<int16_t>()[i] = static_cast<int16_t>(wv - wzp);
    }
    return t16;
  });
  Tensor cols = ctx.empty({out_len, row}, DType::I16);
  Tensor acc = ctx.empty({cout, out_len}, DType::I32);
  for (int64_t g = 0; g < o.groups; ++g) {
    im2col_1d(ctx, xs.data<int16_t>(), length, in_g, g, kernel, o, out_len, int16_t{0}, cols.data<int16_t>());
    cpu::igemm_nt(ctx, out_g, out_len, row, ws.data<int16_t>() + g * out_g * row, row, cols.data<int16_t>(),
                  row, acc.data<int32_t>() + g * out_g * out_len, out_len);
  }
  const Tensor scales = w_scales.defined() ? cpu::as_f32(w_scales) : Tensor{};
  Tensor out = ctx.empty({cout, out_len});
  for (int64_t oc = 0; oc < cout; ++oc) {
    const float s = xq.quant().scale *
                    (scales.defined() ? scales.f32()[scales.elements() == 1 ? 0 : oc] : w.quant().scale);
    for (int64_t t = 0; t < out_len; ++t)
      out.f32()[oc * out_len + t] = static_cast<float>(acc.data<int32_t>()[oc * out_len + t]) * s;
  }
  add_channel_bias(out, b);
  return out;
}

// ---------------------------------------------------------------- transposed conv1d

namespace {
constexpr uint32_t kDerivedConvTransposeWeights = 14;  // conv_transpose1d's w^T per group [G out_g K, in_g]

int64_t transposed_length(int64_t length, int64_t kernel, const ConvTranspose1dOptions& o) {
  return (length - 1) * o.stride - 2 * o.padding + o.dilation * (kernel - 1) + o.output_padding + 1;
}
}  // namespace

namespace ref {
Tensor conv_transpose1d(const Tensor& x0, const Tensor& w0, const Tensor& b,
                        const ConvTranspose1dOptions& o) {
  const Tensor x = cpu::as_f32(x0), w = cpu::as_f32(w0);
  const int64_t cin = x.dim(0), length = x.dim(1), out_g = w.dim(1), kernel = w.dim(2);
  const int64_t in_g = cin / o.groups, cout = out_g * o.groups;
  const int64_t out_len = transposed_length(length, kernel, o);
  std::vector<double> acc(static_cast<size_t>(cout * out_len), 0.0);
  for (int64_t i = 0; i < cin; ++i) {
    const int64_t g = i / in_g;
    for (int64_t oc = 0; oc < out_g; ++oc)
      for (int64_t k = 0; k < kernel; ++k)
        for (int64_t t = 0; t < length; ++t) {
          const int64_t p = t * o.stride + k * o.dilation - o.padding;
          if (p >= 0 && p < out_len)
            acc[static_cast<size_t>((g * out_g + oc) * out_len + p)] +=
                static_cast<double>(w.f32()[(i * out_g + oc) * kernel + k]) * x.f32()[i * length + t];
        }
  }
  Tensor out = x.ctx().empty({cout, out_len});
  for (size_t i = 0; i < acc.size(); ++i) out.f32()[i] = static_cast<float>(acc[i]);
  add_channel_bias(out, b);
  return out;
}
}  // namespace ref

Tensor conv_transpose1d(const Tensor& x0, const Tensor& w0, const Tensor& b,
                        const ConvTranspose1dOptions& o) {
  if (gpu_ops::on_gpu(x0))
    return gpu_ops::conv_transpose1d(x0, w0, b, o, transposed_length(x0.dim(1), w0.dim(2), o));
  const Tensor x = cpu::as_f32(x0), w = cpu::as_f32(w0);
  NN_ASSERT(x.rank() == 2 && w.rank() == 3 && x.dim(0) == w.dim(0));
  Context& ctx = x.ctx();
  const int64_t cin = x.dim(0), length = x.dim(1), out_g = w.dim(1), kernel = w.dim(2);
  const int64_t in_g = cin / o.groups, cout = out_g * o.groups;
  const int64_t out_len = transposed_length(length, kernel, o);
  NN_ASSERT(in_g * o.groups == cin && out_len > 0);
  Tensor out = ctx.zeros({cout, out_len});
  // Each output position sums its taps in the order (k, t) ascending, as the scatter below does, whichever
  // path computes the products (so both paths give the same bits).
  auto scatter = [&](const float* c, float* y) {  // c: one output channel's columns [K, T]
    for (int64_t k = 0; k < kernel; ++k)
      for (int64_t t = 0; t < length; ++t) {
        const int64_t p = t * o.stride + k * o.dilation - o.padding;
        if (p >= 0 && p < out_len) y[p] += c[k * length + t];
      }
  };
  if (in_g == 1 && out_g == 1) {
    // Depthwise (StyleTTS 2's upsampling pool, one channel per group): each product directly, channels over
    // the threads; a gemm per channel cost more in hand-offs than in arithmetic.
    cpu::parallel_for(ctx, cout, kernel * length, [&](int64_t begin, int64_t end) {
      std::vector<float> c(static_cast<size_t>(kernel * length));
      for (int64_t ch = begin; ch < end; ++ch) {
        const float* wk = w.f32() + ch * kernel;
        const float* xc = x.f32() + ch * length;
        for (int64_t k = 0; k < kernel; ++k)
          for (int64_t t = 0; t < length; ++t) c[k * length + t] = wk[k] * xc[t];
        scatter(c.data(), out.f32() + ch * out_len);
      }
    });
    add_channel_bias(out, b);
    return out;
  }
  // Per group: cols[(oc, k)][t] = sum_i w[i][oc][k] x[i][t] as one gemm_nt of w^T [out_g * K, in_g] with
  // x^T [T, in_g], then each column scattered (added) to output position t * stride + k * dilation - pad.
  // w^T of every group is made once and kept with the weight: a strided copy of the whole weight per call
  // costs as much as the product for Kokoro's ups.0.
  const Tensor wt = w0.derived(kDerivedConvTransposeWeights, [&] {
    Tensor t = ctx.empty({o.groups * out_g * kernel, in_g});
    for (int64_t g = 0; g < o.groups; ++g)
      for (int64_t i = 0; i < in_g; ++i)
        for (int64_t r = 0; r < out_g * kernel; ++r)
          t.f32()[(g * out_g * kernel + r) * in_g + i] = w.f32()[(g * in_g + i) * out_g * kernel + r];
    return t;
  });
  const Tensor xt = transpose(x);  // [T, Cin]
  Tensor cols = ctx.empty({out_g * kernel, length});
  Tensor xg = o.groups == 1 ? xt : ctx.empty({length, in_g});
  for (int64_t g = 0; g < o.groups; ++g) {
    if (o.groups > 1)
      for (int64_t t = 0; t < length; ++t)
        std::memcpy(xg.f32() + t * in_g, xt.f32() + t * cin + g * in_g, static_cast<size_t>(in_g) * 4);
    cpu::gemm_nt(ctx, out_g * kernel, length, in_g, wt.f32() + g * out_g * kernel * in_g, in_g, xg.f32(),
                 in_g, cols.f32(), length);
    cpu::parallel_for(ctx, out_g, kernel * length, [&](int64_t begin, int64_t end) {
      for (int64_t oc = begin; oc < end; ++oc)
        scatter(cols.f32() + oc * kernel * length, out.f32() + (g * out_g + oc) * out_len);
    });
  }
  add_channel_bias(out, b);
  return out;
}

// ---------------------------------------------------------------- conv2d

namespace ref {
Tensor conv2d(const Tensor& x0, const Tensor& w0, const Tensor& b, const Conv2dOptions& o) {
  const Tensor x = cpu::as_f32(x0), w = cpu::as_f32(w0);
  const int64_t h = x.dim(1), wd = x.dim(2), cout = w.dim(0), in_g = w.dim(1), kh = w.dim(2), kw = w.dim(3);
  const int64_t out_g = cout / o.groups;
  const int64_t oh = conv_out_length(h, 2 * o.pad_h, kh, o.stride_h, o.dilation_h);
  const int64_t ow = conv_out_length(wd, 2 * o.pad_w, kw, o.stride_w, o.dilation_w);
  Tensor out = x.ctx().empty({cout, oh, ow});
  for (int64_t oc = 0; oc < cout; ++oc) {
    const int64_t g = oc / out_g;
    for (int64_t y = 0; y < oh; ++y)
      for (int64_t xx = 0; xx < ow; ++xx) {
        double sum = 0;
        for (int64_t i = 0; i < in_g; ++i)
          for (int64_t a = 0; a < kh; ++a)
            for (int64_t c = 0; c < kw; ++c) {
              const int64_t py = y * o.stride_h + a * o.dilation_h - o.pad_h;
              const int64_t px = xx * o.stride_w + c * o.dilation_w - o.pad_w;
              if (py < 0 || py >= h || px < 0 || px >= wd) continue;
              sum += static_cast<double>(w.f32()[((oc * in_g + i) * kh + a) * kw + c]) *
                     x.f32()[((g * in_g + i) * h + py) * wd + px];
            }
        out.f32()[(oc * oh + y) * ow + xx] = static_cast<float>(sum);
      }
  }
  add_channel_bias(out, b);
  return out;
}
}  // namespace ref

namespace {

// One input channel per group (depthwise convs, and a first conv over a single channel; Parakeet's subsampling:
// 1 -> 256 channels, then twice 256 depthwise, 3 x 3 stride 2): the im2col path would copy every input value
// kh * kw times to feed a product with a 9-long inner dimension (depthwise: one single-row product per
// channel), the unrolling on one thread (~8 % of the 110M encoder on 2 threads). Here each output row gathers
// its taps directly, the output channels split over the pool. Per output: the bias, then the taps in (row,
// column) order.
void conv2d_one_input_channel(const Tensor& x, const Tensor& w, const Tensor& b, Tensor& out,
                              const Conv2dOptions& o) {
  const int64_t h = x.dim(1), wd = x.dim(2), kh = w.dim(2), kw = w.dim(3);
  const int64_t cout = out.dim(0), oh = out.dim(1), ow = out.dim(2), out_g = cout / o.groups;
  const Tensor bias = b.defined() ? cpu::as_f32(b) : Tensor{};
  cpu::parallel_for(x.ctx(), cout, oh * ow * kh * kw, [&](int64_t begin, int64_t end) {
    for (int64_t c = begin; c < end; ++c) {
      const float* xc = x.f32() + (c / out_g) * h * wd;
      const float* wc = w.f32() + c * kh * kw;
      const float b0 = bias.defined() ? bias.f32()[c] : 0.0f;
      for (int64_t y = 0; y < oh; ++y) {
        float* row = out.f32() + (c * oh + y) * ow;
        for (int64_t xx = 0; xx < ow; ++xx) row[xx] = b0;
        for (int64_t a = 0; a < kh; ++a) {
          const int64_t py = y * o.stride_h + a * o.dilation_h - o.pad_h;
          if (py < 0 || py >= h) continue;
          const float* xr = xc + py * wd;
          for (int64_t e = 0; e < kw; ++e) {
            // Output columns whose tap lands inside the row: 0 <= xx * stride + shift < wd.
            const int64_t shift = e * o.dilation_w - o.pad_w;
            const int64_t lo = shift >= 0 ? 0 : (-shift + o.stride_w - 1) / o.stride_w;
            const int64_t hi = wd - 1 - shift < 0 ? 0 : std::min(ow, (wd - 1 - shift) / o.stride_w + 1);
            const float tap = wc[a * kw + e];
            for (int64_t xx = lo; xx < hi; ++xx) row[xx] += tap * xr[xx * o.stride_w + shift];
          }
        }
      }
    }
  });
}

}  // namespace

Tensor conv2d(const Tensor& x0, const Tensor& w0, const Tensor& b, const Conv2dOptions& o) {
  if (gpu_ops::on_gpu(x0)) return gpu_ops::conv2d(x0, w0, b, o);
  const Tensor x = cpu::as_f32(x0), w = cpu::weight_f32(w0);
  NN_ASSERT(x.rank() == 3 && w.rank() == 4);
  Context& ctx = x.ctx();
  const int64_t cin = x.dim(0), h = x.dim(1), wd = x.dim(2);
  const int64_t cout = w.dim(0), in_g = w.dim(1), kh = w.dim(2), kw = w.dim(3);
  const int64_t out_g = cout / o.groups;
  const int64_t oh = conv_out_length(h, 2 * o.pad_h, kh, o.stride_h, o.dilation_h);
  const int64_t ow = conv_out_length(wd, 2 * o.pad_w, kw, o.stride_w, o.dilation_w);
  NN_ASSERT(in_g * o.groups == cin && oh > 0 && ow > 0);
  const int64_t row = in_g * kh * kw, positions = oh * ow;
  Tensor out = ctx.empty({cout, oh, ow});
  if (in_g == 1) {
    conv2d_one_input_channel(x, w, b, out, o);
    return out;
  }
  Tensor cols = ctx.empty({positions, row});
  for (int64_t g = 0; g < o.groups; ++g) {
    float* c = cols.f32();
    for (int64_t y = 0; y < oh; ++y)
      for (int64_t xx = 0; xx < ow; ++xx)
        for (int64_t i = 0; i < in_g; ++i)
          for (int64_t a = 0; a < kh; ++a)
            for (int64_t e = 0; e < kw; ++e) {
              const int64_t py = y * o.stride_h + a * o.dilation_h - o.pad_h;
              const int64_t px = xx * o.stride_w + e * o.dilation_w - o.pad_w;
              *c++ = (py < 0 || py >= h || px < 0 || px >= wd) ? 0.0f
                                                               : x.f32()[((g * in_g + i) * h + py) * wd + px];
            }
    cpu::gemm_nt(ctx, out_g, positions, row, w.f32() + g * out_g * row, row, cols.f32(), row,
                 out.f32() + g * out_g * positions, positions);
  }
  add_channel_bias(out, b);
  return out;
}

}  // namespace sotto::nn
