// Reductions along an axis (softmax, argmax, cumsum, mean) and the normalisations (layer, RMS, group,
// instance, AdaIN). Each row is independent: threads take rows. Sums run in double in the references and in
// float with a separate mean pass (two-pass variance) on the CPU path.
#include <algorithm>
#include <cmath>
#include <vector>

#include "nn/cpu.h"
#include "nn/gpu_ops.h"
#include "nn/ops.h"
#include "nn/ref.h"
#include "nn/vec_math.h"

namespace sotto::nn {

// ---------------------------------------------------------------- softmax, argmax, cumsum, mean

namespace ref {
Tensor softmax(const Tensor& x0, int axis) {
  const Tensor x = cpu::as_f32(x0);
  const cpu::AxisSplit s = cpu::split_at(x.shape(), axis);
  Tensor out = x.ctx().empty(x.shape());
  for (int64_t o = 0; o < s.outer; ++o)
    for (int64_t j = 0; j < s.inner; ++j) {
      const float* in = x.f32() + o * s.n * s.inner + j;
      float* y = out.f32() + o * s.n * s.inner + j;
      double mx = -INFINITY, sum = 0;
      for (int64_t i = 0; i < s.n; ++i) mx = std::max<double>(mx, in[i * s.inner]);
      for (int64_t i = 0; i < s.n; ++i) sum += std::exp(in[i * s.inner] - mx);
      for (int64_t i = 0; i < s.n; ++i)
        y[i * s.inner] = static_cast<float>(std::exp(in[i * s.inner] - mx) / sum);
    }
  return out;
}
}  // namespace ref

Tensor softmax(const Tensor& x0, int axis) {
  if (gpu_ops::on_gpu(x0)) {
    if (cpu::axis_of(x0.shape(), axis) != x0.rank() - 1)
      return gpu_ops::unsupported(x0, "softmax over a non-last axis");
    return gpu_ops::rows_op(x0, 0, {}, {}, 0.0f);
  }
  const Tensor x = cpu::as_f32(x0);
  const cpu::AxisSplit s = cpu::split_at(x.shape(), axis);
  if (s.inner != 1) return ref::softmax(x, axis);
  Tensor out = x.ctx().empty(x.shape());
  cpu::parallel_for(x.ctx(), s.outer, s.n * 20, [&](int64_t begin, int64_t end) {
    for (int64_t o = begin; o < end; ++o) {
      const float* in = x.f32() + o * s.n;
      float* y = out.f32() + o * s.n;
      float mx = -INFINITY;
      for (int64_t i = 0; i < s.n; ++i) mx = std::max(mx, in[i]);
      float sum = 0.0f;
      for (int64_t i = 0; i < s.n; ++i) sum += (y[i] = std::exp(in[i] - mx));
      const float inv = 1.0f / sum;
      for (int64_t i = 0; i < s.n; ++i) y[i] *= inv;
    }
  });
  return out;
}

// The first index of the largest value (ONNX ArgMax, select_last_index = 0).
Tensor argmax(const Tensor& x0, int axis) {
  if (gpu_ops::on_gpu(x0)) {
    if (cpu::axis_of(x0.shape(), axis) != x0.rank() - 1)
      return gpu_ops::unsupported(x0, "argmax over a non-last axis");
    return gpu_ops::argmax(x0);
  }
  const Tensor x = cpu::as_f32(x0);
  const cpu::AxisSplit s = cpu::split_at(x.shape(), axis);
  Shape shape;
  for (int i = 0; i < x.rank(); ++i)
    if (i != cpu::axis_of(x.shape(), axis)) shape.dims[shape.rank++] = x.dim(i);
  Tensor out = x.ctx().empty(shape, DType::I32);
  for (int64_t o = 0; o < s.outer; ++o)
    for (int64_t j = 0; j < s.inner; ++j) {
      const float* in = x.f32() + o * s.n * s.inner + j;
      int64_t best = 0;
      for (int64_t i = 1; i < s.n; ++i)
        if (in[i * s.inner] > in[best * s.inner]) best = i;
      out.data<int32_t>()[o * s.inner + j] = static_cast<int32_t>(best);
    }
  return out;
}

Tensor cumsum(const Tensor& x, int axis) {
  NN_CPU_ONLY(x, "cumsum");
  const cpu::AxisSplit s = cpu::split_at(x.shape(), axis);
  if (x.dtype() == DType::I32 || x.dtype() == DType::I64) {
    const std::vector<int64_t> v = cpu::read_ints(x);
    Tensor out = x.ctx().empty(x.shape(), DType::I64);
    int64_t* y = out.data<int64_t>();
    for (int64_t o = 0; o < s.outer; ++o)
      for (int64_t j = 0; j < s.inner; ++j) {
        int64_t sum = 0;
        for (int64_t i = 0; i < s.n; ++i) {
          const int64_t at = (o * s.n + i) * s.inner + j;
          y[at] = (sum += v[static_cast<size_t>(at)]);
        }
      }
    return out;
  }
  const Tensor xf = cpu::as_f32(x);
  Tensor out = x.ctx().empty(x.shape());
  for (int64_t o = 0; o < s.outer; ++o)
    for (int64_t j = 0; j < s.inner; ++j) {
      double sum = 0;
      for (int64_t i = 0; i < s.n; ++i) {
        const int64_t at = (o * s.n + i) * s.inner + j;
        out.f32()[at] = static_cast<float>(sum += xf.f32()[at]);
      }
    }
  return out;
}

Tensor reduce_mean(const Tensor& x0, int axis) {
  NN_CPU_ONLY(x0, "reduce_mean");
  const Tensor x = cpu::as_f32(x0);
  const cpu::AxisSplit s = cpu::split_at(x.shape(), axis);
  Shape shape;
  for (int i = 0; i < x.rank(); ++i)
    if (i != cpu::axis_of(x.shape(), axis)) shape.dims[shape.rank++] = x.dim(i);
  Tensor out = x.ctx().empty(shape);
  for (int64_t o = 0; o < s.outer; ++o)
    for (int64_t j = 0; j < s.inner; ++j) {
      double sum = 0;
      for (int64_t i = 0; i < s.n; ++i) sum += x.f32()[(o * s.n + i) * s.inner + j];
      out.f32()[o * s.inner + j] = static_cast<float>(sum / static_cast<double>(s.n));
    }
  return out;
}

// ---------------------------------------------------------------- normalisations

namespace {

// Normalises `n` elements (stride 1) to zero mean, unit variance; returns nothing, writes y.
void normalise(const float* x, float* y, int64_t n, float eps) {
  float mean = 0.0f;
  for (int64_t i = 0; i < n; ++i) mean += x[i];
  mean /= static_cast<float>(n);
  float var = 0.0f;
  for (int64_t i = 0; i < n; ++i) var += (x[i] - mean) * (x[i] - mean);
  var /= static_cast<float>(n);
  const float inv = 1.0f / std::sqrt(var + eps);
  for (int64_t i = 0; i < n; ++i) y[i] = (x[i] - mean) * inv;
}

// normalise then y * gm + bt, for group / instance norm (Kokoro's AdaIN: a few hundred channels of thousands
// of steps each). The two sums run in 8 lanes (two F4 accumulators, combined in a fixed order): a serial float
// sum waits out an add's latency per element, which made these norms ~4 % of Kokoro's generator in wasm.
// Within float rounding of the double reference (lane sums round no worse than a serial one).
void normalise_affine(const float* x, float* y, int64_t n, float eps, float gm, float bt) {
  vec::F4 s0 = vec::splat(0.0f), s1 = s0;
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    s0 += vec::load(x + i);
    s1 += vec::load(x + i + 4);
  }
  const vec::F4 s = s0 + s1;
  float sum = (s[0] + s[1]) + (s[2] + s[3]);
  for (; i < n; ++i) sum += x[i];
  const float mean = sum / static_cast<float>(n);
  const vec::F4 vm = vec::splat(mean);
  s0 = vec::splat(0.0f), s1 = s0;
  for (i = 0; i + 8 <= n; i += 8) {
    const vec::F4 d0 = vec::load(x + i) - vm, d1 = vec::load(x + i + 4) - vm;
    s0 += d0 * d0;
    s1 += d1 * d1;
  }
  const vec::F4 v = s0 + s1;
  float var = (v[0] + v[1]) + (v[2] + v[3]);
  for (; i < n; ++i) var += (x[i] - mean) * (x[i] - mean);
  var /= static_cast<float>(n);
  const float inv = 1.0f / std::sqrt(var + eps);
  const vec::F4 vi = vec::splat(inv), vg = vec::splat(gm), vb = vec::splat(bt);
  for (i = 0; i + 4 <= n; i += 4) vec::store(y + i, (vec::load(x + i) - vm) * vi * vg + vb);
  for (; i < n; ++i) y[i] = (x[i] - mean) * inv * gm + bt;
}

void normalise_ref(const float* x, float* y, int64_t n, float eps) {
  double mean = 0, var = 0;
  for (int64_t i = 0; i < n; ++i) mean += x[i];
  mean /= static_cast<double>(n);
  for (int64_t i = 0; i < n; ++i) var += (x[i] - mean) * (x[i] - mean);
  var /= static_cast<double>(n);
  for (int64_t i = 0; i < n; ++i) y[i] = static_cast<float>((x[i] - mean) / std::sqrt(var + eps));
}

const float* opt(const Tensor& t, Tensor& keep) {
  if (!t.defined()) return nullptr;
  keep = cpu::as_f32(t);
  return keep.f32();
}

}  // namespace

namespace ref {
Tensor layer_norm(const Tensor& x0, const Tensor& gamma0, const Tensor& beta0, float eps) {
  const Tensor x = cpu::as_f32(x0);
  Tensor gk, bk;
  const float *gamma = opt(gamma0, gk), *beta = opt(beta0, bk);
  const int64_t c = x.dim(-1), rows = x.elements() / c;
  Tensor out = x.ctx().empty(x.shape());
  for (int64_t r = 0; r < rows; ++r) {
    float* y = out.f32() + r * c;
    normalise_ref(x.f32() + r * c, y, c, eps);
    for (int64_t i = 0; i < c; ++i) y[i] = y[i] * (gamma ? gamma[i] : 1.0f) + (beta ? beta[i] : 0.0f);
  }
  return out;
}

Tensor rms_norm(const Tensor& x0, const Tensor& gamma0, float eps) {
  const Tensor x = cpu::as_f32(x0);
  Tensor gk;
  const float* gamma = opt(gamma0, gk);
  const int64_t c = x.dim(-1), rows = x.elements() / c;
  Tensor out = x.ctx().empty(x.shape());
  for (int64_t r = 0; r < rows; ++r) {
    const float* in = x.f32() + r * c;
    double ss = 0;
    for (int64_t i = 0; i < c; ++i) ss += static_cast<double>(in[i]) * in[i];
    const double inv = 1 / std::sqrt(ss / static_cast<double>(c) + eps);
    for (int64_t i = 0; i < c; ++i)
      out.f32()[r * c + i] = static_cast<float>(in[i] * inv * (gamma ? gamma[i] : 1.0f));
  }
  return out;
}

Tensor group_norm(const Tensor& x0, int groups, const Tensor& gamma0, const Tensor& beta0, float eps) {
  const Tensor x = cpu::as_f32(x0);
  Tensor gk, bk;
  const float *gamma = opt(gamma0, gk), *beta = opt(beta0, bk);
  const int64_t channels = x.dim(0), length = x.elements() / channels, per = channels / groups;
  Tensor out = x.ctx().empty(x.shape());
  for (int g = 0; g < groups; ++g)
    normalise_ref(x.f32() + g * per * length, out.f32() + g * per * length, per * length, eps);
  for (int64_t c = 0; c < channels; ++c)
    for (int64_t t = 0; t < length; ++t) {
      float& y = out.f32()[c * length + t];
      y = y * (gamma ? gamma[c] : 1.0f) + (beta ? beta[c] : 0.0f);
    }
  return out;
}
}  // namespace ref

Tensor layer_norm(const Tensor& x0, const Tensor& gamma0, const Tensor& beta0, float eps) {
  if (gpu_ops::on_gpu(x0)) return gpu_ops::rows_op(x0, 1, gamma0, beta0, eps);
  const Tensor x = cpu::as_f32(x0);
  Tensor gk, bk;
  const float *gamma = opt(gamma0, gk), *beta = opt(beta0, bk);
  const int64_t c = x.dim(-1), rows = x.elements() / c;
  Tensor out = x.ctx().empty(x.shape());
  cpu::parallel_for(x.ctx(), rows, c * 4, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      float* y = out.f32() + r * c;
      normalise(x.f32() + r * c, y, c, eps);
      if (gamma)
        for (int64_t i = 0; i < c; ++i) y[i] *= gamma[i];
      if (beta)
        for (int64_t i = 0; i < c; ++i) y[i] += beta[i];
    }
  });
  return out;
}

Tensor rms_norm(const Tensor& x0, const Tensor& gamma0, float eps) {
  NN_CPU_ONLY(x0, "rms_norm");
  const Tensor x = cpu::as_f32(x0);
  Tensor gk;
  const float* gamma = opt(gamma0, gk);
  const int64_t c = x.dim(-1), rows = x.elements() / c;
  Tensor out = x.ctx().empty(x.shape());
  cpu::parallel_for(x.ctx(), rows, c * 3, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const float* in = x.f32() + r * c;
      float ss = 0.0f;
      for (int64_t i = 0; i < c; ++i) ss += in[i] * in[i];
      const float inv = 1.0f / std::sqrt(ss / static_cast<float>(c) + eps);
      float* y = out.f32() + r * c;
      for (int64_t i = 0; i < c; ++i) y[i] = in[i] * inv * (gamma ? gamma[i] : 1.0f);
    }
  });
  return out;
}

Tensor group_norm(const Tensor& x0, int groups, const Tensor& gamma0, const Tensor& beta0, float eps) {
  if (gpu_ops::on_gpu(x0)) return gpu_ops::group_norm(x0, groups, gamma0, beta0, eps);
  const Tensor x = cpu::as_f32(x0);
  NN_ASSERT(x.dim(0) % groups == 0);
  Tensor gk, bk;
  const float *gamma = opt(gamma0, gk), *beta = opt(beta0, bk);
  const int64_t channels = x.dim(0), length = x.elements() / channels, per = channels / groups;
  Tensor out = x.ctx().empty(x.shape());
  cpu::parallel_for(x.ctx(), groups, per * length * 4, [&](int64_t begin, int64_t end) {
    for (int64_t g = begin; g < end; ++g) {
      if (per == 1) {  // instance norm (AdaIN): the affine pass rides along with the normalisation
        normalise_affine(x.f32() + g * length, out.f32() + g * length, length, eps, gamma ? gamma[g] : 1.0f,
                         beta ? beta[g] : 0.0f);
        continue;
      }
      normalise(x.f32() + g * per * length, out.f32() + g * per * length, per * length, eps);
      for (int64_t c = g * per; c < (g + 1) * per; ++c) {
        const float gm = gamma ? gamma[c] : 1.0f, bt = beta ? beta[c] : 0.0f;
        float* y = out.f32() + c * length;
        for (int64_t t = 0; t < length; ++t) y[t] = y[t] * gm + bt;
      }
    }
  });
  return out;
}

Tensor instance_norm(const Tensor& x, const Tensor& gamma, const Tensor& beta, float eps) {
  return group_norm(x, static_cast<int>(x.dim(0)), gamma, beta, eps);
}

// AdaIN: the style's gamma enters as (1 + gamma), as StyleTTS2's AdaIN1d writes it.
Tensor adain(const Tensor& x, const Tensor& gamma0, const Tensor& beta0, float eps) {
  if (gpu_ops::on_gpu(x)) return gpu_ops::adain(x, gamma0, beta0, eps);
  const Tensor gamma = cpu::as_f32(gamma0), beta = cpu::as_f32(beta0);
  Tensor one_plus = scale(gamma, 1.0f, 1.0f);
  return instance_norm(x, one_plus, beta, eps);
}

// One channel row at a time: the norm's output row is still in cache when Snake rewrites it in place and the
// range reads it (three passes over memory and two pool jobs become one job, and the conv's serial range pass
// goes). Each value is computed by the same functions as adain() then snake() compute it.
Tensor adain_snake(const Tensor& x0, const Tensor& gamma0, const Tensor& beta0, float eps,
                   const Tensor& alpha0, ValueRange* range) {
  if (gpu_ops::on_gpu(x0)) {
    if (!range) return snake(adain(x0, gamma0, beta0, eps), alpha0);
    *range = {};
    return gpu_ops::snake(adain(x0, gamma0, beta0, eps), alpha0, &range->gpu_partial);
  }
  const Tensor x = cpu::as_f32(x0), beta = cpu::as_f32(beta0), alpha = cpu::as_f32(alpha0);
  const Tensor one_plus = scale(cpu::as_f32(gamma0), 1.0f, 1.0f);
  NN_ASSERT(x.rank() == 2 && one_plus.elements() == x.dim(0) && beta.elements() == x.dim(0) &&
            alpha.elements() == x.dim(0));
  const int64_t channels = x.dim(0), length = x.dim(1);
  Tensor out = x.ctx().empty(x.shape());
  std::vector<float> lo(static_cast<size_t>(channels)), hi(lo.size());
  cpu::parallel_for(x.ctx(), channels, length * 24, [&](int64_t begin, int64_t end) {
    for (int64_t c = begin; c < end; ++c) {
      float* y = out.f32() + c * length;
      normalise_affine(x.f32() + c * length, y, length, eps, one_plus.f32()[c], beta.f32()[c]);
      cpu::snake_row(y, y, length, alpha.f32()[c]);
      if (range) cpu::min_max(y, length, lo[static_cast<size_t>(c)], hi[static_cast<size_t>(c)]);
    }
  });
  if (range) {
    // min / max are exact in any order: the channels' ranges combine to the whole tensor's.
    *range = {};
    for (int64_t c = 0; c < channels; ++c) {
      range->lo = std::min(range->lo, lo[static_cast<size_t>(c)]);
      range->hi = std::max(range->hi, hi[static_cast<size_t>(c)]);
    }
    range->known = true;
  }
  return out;
}

}  // namespace sotto::nn
