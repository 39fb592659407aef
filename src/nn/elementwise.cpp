// Elementwise and broadcast arithmetic, activations, GLU, Snake. Memory-bound: one pass, threaded only when
// large; same-shape, suffix-broadcast (bias rows) and per-row (channel scale / shift) fast paths, the general
// broadcast walks an index.
#include <cmath>
#include <cstring>

#include "cpu/cpu_features.h"
#include "nn/cpu.h"
#include "nn/gpu_ops.h"
#include "nn/ops.h"
#include "nn/ref.h"
#include "nn/vec_math.h"

namespace sotto::nn {

#if defined(__x86_64__)
namespace cpu {
int64_t snake_row_avx2(const float* in, float* o, int64_t length, float a, float inv);  // snake_avx2.cpp
}  // namespace cpu
#endif

namespace {

Shape broadcast_shape(const Shape& a, const Shape& b) {
  Shape out;
  out.rank = std::max(a.rank, b.rank);
  for (int i = 0; i < out.rank; ++i) {
    const int ia = i - (out.rank - a.rank), ib = i - (out.rank - b.rank);
    const int64_t da = ia >= 0 ? a.dims[ia] : 1, db = ib >= 0 ? b.dims[ib] : 1;
    NN_ASSERT(da == db || da == 1 || db == 1);
    out.dims[i] = da == 1 ? db : da;
  }
  return out;
}

// Strides of `s` seen as `out`'s rank, zero along broadcast dimensions.
void broadcast_strides(const Shape& s, const Shape& out, int64_t* strides) {
  int64_t own[Shape::kMaxRank];
  cpu::strides_of(s, own);
  for (int i = 0; i < out.rank; ++i) {
    const int is = i - (out.rank - s.rank);
    strides[i] = (is < 0 || s.dims[is] == 1) ? 0 : own[is];
  }
}

inline float apply(char op, float x, float y) {
  switch (op) {
    case '+':
      return x + y;
    case '-':
      return x - y;
    case '*':
      return x * y;
    default:
      return x / y;
  }
}

template <char Op>
void run_same(const float* a, const float* b, float* o, int64_t n) {
  for (int64_t i = 0; i < n; ++i) o[i] = apply(Op, a[i], b[i]);
}

// b repeats every `period` elements of a (b's shape is a suffix of a's, e.g. a bias row).
template <char Op>
void run_suffix(const float* a, const float* b, float* o, int64_t n, int64_t period) {
  for (int64_t i = 0; i < n; i += period)
    for (int64_t j = 0; j < period; ++j) o[i + j] = apply(Op, a[i + j], b[j]);
}

bool is_suffix(const Shape& small, const Shape& big) {
  if (small.rank > big.rank) return false;
  for (int i = 1; i <= small.rank; ++i)
    if (small[-i] != big[-i]) return false;
  return true;
}

// One operand `col` holds one value per row of the other, `full` (its shape is full's with the last dimension 1,
// leading dimensions possibly dropped: a per-channel scale or shift of [C, T], AdaIN's); col_first says which
// side of the operator it is on. Row r of full uses col[r % n_col].
template <char Op, bool ColFirst>
void run_rows(const float* full, const float* col, float* o, int64_t n, int64_t length, int64_t n_col,
              int64_t first_row = 0) {
  for (int64_t i = 0, r = first_row % n_col; i < n; i += length, r = r + 1 == n_col ? 0 : r + 1) {
    const float c = col[r];
    for (int64_t j = 0; j < length; ++j)
      o[i + j] = ColFirst ? apply(Op, c, full[i + j]) : apply(Op, full[i + j], c);
  }
}

bool is_row_column(const Shape& col, const Shape& full) {
  if (col.rank < 1 || col.rank > full.rank || col[-1] != 1 || full[-1] == 1) return false;
  for (int i = 2; i <= col.rank; ++i)
    if (col[-i] != full[-i]) return false;
  return true;
}

// Each path runs over the context's threads in chunks of whole rows (a generator stage's residual adds are
// millions of elements: on one thread they leave the others idle); elementwise, so any split gives the same
// values.
template <char Op>
Tensor binary_fast(const Tensor& a0, const Tensor& b0) {
  const Tensor a = cpu::as_f32(a0), b = cpu::as_f32(b0);
  Context& ctx = a.ctx();
  if (a.shape() == b.shape()) {
    Tensor out = ctx.empty(a.shape());
    const float *pa = a.f32(), *pb = b.f32();
    float* po = out.f32();
    cpu::parallel_for(ctx, a.elements(), 1, [&](int64_t begin, int64_t end) {
      run_same<Op>(pa + begin, pb + begin, po + begin, end - begin);
    });
    return out;
  }
  if (is_suffix(b.shape(), a.shape())) {
    Tensor out = ctx.empty(a.shape());
    const int64_t period = b.elements();
    cpu::parallel_for(ctx, a.elements() / period, period, [&](int64_t begin, int64_t end) {
      run_suffix<Op>(a.f32() + begin * period, b.f32(), out.f32() + begin * period, (end - begin) * period,
                     period);
    });
    return out;
  }
  // The general walk below costs an index update per element (slow in wasm): per-row columns go here.
  const bool col_b = is_row_column(b.shape(), a.shape());
  if (col_b || is_row_column(a.shape(), b.shape())) {
    const Tensor& full = col_b ? a : b;
    const Tensor& col = col_b ? b : a;
    Tensor out = ctx.empty(full.shape());
    const int64_t length = full.dim(-1);
    cpu::parallel_for(ctx, full.elements() / length, length, [&](int64_t begin, int64_t end) {
      const float* f = full.f32() + begin * length;
      float* o = out.f32() + begin * length;
      if (col_b)
        run_rows<Op, false>(f, col.f32(), o, (end - begin) * length, length, col.elements(), begin);
      else
        run_rows<Op, true>(f, col.f32(), o, (end - begin) * length, length, col.elements(), begin);
    });
    return out;
  }
  return ref::binary(a, b, Op);
}

}  // namespace

namespace ref {

Tensor binary(const Tensor& a0, const Tensor& b0, char op) {
  const Tensor a = cpu::as_f32(a0), b = cpu::as_f32(b0);
  const Shape shape = broadcast_shape(a.shape(), b.shape());
  Tensor out = a.ctx().empty(shape);
  int64_t sa[Shape::kMaxRank], sb[Shape::kMaxRank];
  broadcast_strides(a.shape(), shape, sa);
  broadcast_strides(b.shape(), shape, sb);
  int64_t index[Shape::kMaxRank] = {};
  const int64_t n = shape.elements();
  const float *pa = a.f32(), *pb = b.f32();
  float* po = out.f32();
  for (int64_t i = 0; i < n; ++i) {
    int64_t oa = 0, ob = 0;
    for (int d = 0; d < shape.rank; ++d) {
      oa += index[d] * sa[d];
      ob += index[d] * sb[d];
    }
    po[i] = apply(op, pa[oa], pb[ob]);
    for (int d = shape.rank - 1; d >= 0; --d) {
      if (++index[d] < shape.dims[d]) break;
      index[d] = 0;
    }
  }
  return out;
}

}  // namespace ref

Tensor add(const Tensor& a, const Tensor& b) {
  if (gpu_ops::on_gpu(a)) return gpu_ops::binary(a, b, '+');
  return binary_fast<'+'>(a, b);
}
Tensor sub(const Tensor& a, const Tensor& b) {
  if (gpu_ops::on_gpu(a)) return gpu_ops::binary(a, b, '-');
  return binary_fast<'-'>(a, b);
}
Tensor mul(const Tensor& a, const Tensor& b) {
  if (gpu_ops::on_gpu(a)) return gpu_ops::binary(a, b, '*');
  return binary_fast<'*'>(a, b);
}
Tensor div(const Tensor& a, const Tensor& b) {
  if (gpu_ops::on_gpu(a)) return gpu_ops::binary(a, b, '/');
  return binary_fast<'/'>(a, b);
}

Tensor scale(const Tensor& x0, float s, float bias) {
  if (gpu_ops::on_gpu(x0)) return gpu_ops::scale(x0, s, bias);
  const Tensor x = cpu::as_f32(x0);
  Tensor out = x.ctx().empty(x.shape());
  const float* in = x.f32();
  float* o = out.f32();
  for (int64_t i = 0; i < x.elements(); ++i) o[i] = in[i] * s + bias;
  return out;
}

// ---------------------------------------------------------------- activations

namespace {

float act_one(Act act, float x, float alpha) {
  switch (act) {
    case Act::Identity:
      return x;
    case Act::Relu:
      return x > 0.0f ? x : 0.0f;
    case Act::LeakyRelu:
      return x >= 0.0f ? x : alpha * x;
    case Act::Sigmoid:
      return 1.0f / (1.0f + std::exp(-x));
    case Act::Tanh:
      return std::tanh(x);
    case Act::Silu:
      return x / (1.0f + std::exp(-x));
    case Act::GeluErf:
      return 0.5f * x * (1.0f + std::erf(x * 0.70710678118654752f));
    case Act::GeluTanh:
      return 0.5f * x * (1.0f + std::tanh(0.79788456080286536f * (x + 0.044715f * x * x * x)));
    case Act::Exp:
      return std::exp(x);
    case Act::Sin:
      return std::sin(x);
    case Act::Cos:
      return std::cos(x);
    case Act::Atan:
      return std::atan(x);
    case Act::Abs:
      return std::fabs(x);
    case Act::Sqrt:
      return std::sqrt(x);
    case Act::Square:
      return x * x;
  }
  return x;
}

double act_ref(Act act, double x, double alpha) {
  switch (act) {
    case Act::Identity:
      return x;
    case Act::Relu:
      return x > 0 ? x : 0;
    case Act::LeakyRelu:
      return x >= 0 ? x : alpha * x;
    case Act::Sigmoid:
      return 1 / (1 + std::exp(-x));
    case Act::Tanh:
      return std::tanh(x);
    case Act::Silu:
      return x / (1 + std::exp(-x));
    case Act::GeluErf:
      return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0)));
    case Act::GeluTanh:
      return 0.5 * x * (1 + std::tanh(std::sqrt(2 / 3.14159265358979323846) * (x + 0.044715 * x * x * x)));
    case Act::Exp:
      return std::exp(x);
    case Act::Sin:
      return std::sin(x);
    case Act::Cos:
      return std::cos(x);
    case Act::Atan:
      return std::atan(x);
    case Act::Abs:
      return std::fabs(x);
    case Act::Sqrt:
      return std::sqrt(x);
    case Act::Square:
      return x * x;
  }
  return x;
}

}  // namespace

namespace ref {
Tensor activation(const Tensor& x0, Act act, float alpha) {
  const Tensor x = cpu::as_f32(x0);
  Tensor out = x.ctx().empty(x.shape());
  for (int64_t i = 0; i < x.elements(); ++i)
    out.f32()[i] = static_cast<float>(act_ref(act, x.f32()[i], alpha));
  return out;
}
}  // namespace ref

Tensor activation(const Tensor& x0, Act act, float alpha) {
  if (gpu_ops::on_gpu(x0)) return gpu_ops::activation(x0, act, alpha);
  const Tensor x = cpu::as_f32(x0);
  Tensor out = x.ctx().empty(x.shape());
  const float* in = x.f32();
  float* o = out.f32();
  const int64_t n = x.elements();
  // Transcendental activations cost ~20-50 cycles an element: worth threads on long sequences. The common
  // ones run four lanes at a time (nn/vec_math.h).
  cpu::parallel_for(x.ctx(), n, 16, [&](int64_t begin, int64_t end) {
    const float* src = in + begin;
    float* dst = o + begin;
    const int64_t count = end - begin;
    switch (act) {
      case Act::Sigmoid:
        return vec::map4(src, dst, count, vec::sigmoid4);
      case Act::Tanh:
        return vec::map4(src, dst, count, vec::tanh4);
      case Act::Silu:
        return vec::map4(src, dst, count, [](vec::F4 v) { return v * vec::sigmoid4(v); });
      case Act::GeluErf:
#if defined(__x86_64__) && !defined(__wasm__)
        if (cpu_use_avx2()) return cpu::gelu_erf_avx2(src, dst, count);
#endif
        return vec::map4(src, dst, count, vec::gelu_erf4);
      case Act::Relu:
        return vec::map4(src, dst, count,
                         [](vec::F4 v) { return v > vec::splat(0.0f) ? v : vec::splat(0.0f); });
      case Act::Square:
        return vec::map4(src, dst, count, [](vec::F4 v) { return v * v; });
      case Act::Abs:
        return vec::map4(src, dst, count, [](vec::F4 v) { return v < vec::splat(0.0f) ? -v : v; });
      case Act::Sqrt:
        for (int64_t i = 0; i < count; ++i) dst[i] = std::sqrt(src[i]);
        return;
      case Act::Identity:
        std::memcpy(dst, src, static_cast<size_t>(count) * 4);
        return;
      default:
        for (int64_t i = 0; i < count; ++i) dst[i] = act_one(act, src[i], alpha);
    }
  });
  return out;
}

// ---------------------------------------------------------------- GLU, Snake

namespace ref {
Tensor glu(const Tensor& x0, int axis) {
  const Tensor x = cpu::as_f32(x0);
  const cpu::AxisSplit s = cpu::split_at(x.shape(), axis);
  NN_ASSERT(s.n % 2 == 0);
  Shape shape = x.shape();
  shape[cpu::axis_of(shape, axis)] = s.n / 2;
  Tensor out = x.ctx().empty(shape);
  const int64_t half = s.n / 2;
  for (int64_t o = 0; o < s.outer; ++o)
    for (int64_t i = 0; i < half; ++i)
      for (int64_t j = 0; j < s.inner; ++j) {
        const double a = x.f32()[(o * s.n + i) * s.inner + j];
        const double g = x.f32()[(o * s.n + half + i) * s.inner + j];
        out.f32()[(o * half + i) * s.inner + j] = static_cast<float>(a / (1 + std::exp(-g)));
      }
  return out;
}

Tensor snake(const Tensor& x0, const Tensor& alpha0) {
  const Tensor x = cpu::as_f32(x0), alpha = cpu::as_f32(alpha0);
  const int64_t channels = x.dim(0), length = x.dim(1);
  Tensor out = x.ctx().empty(x.shape());
  for (int64_t c = 0; c < channels; ++c) {
    const double a = alpha.f32()[c];
    for (int64_t t = 0; t < length; ++t) {
      const double v = x.f32()[c * length + t];
      const double s = std::sin(a * v);
      out.f32()[c * length + t] = static_cast<float>(v + s * s / a);
    }
  }
  return out;
}
}  // namespace ref

Tensor glu(const Tensor& x, int axis) {
  if (gpu_ops::on_gpu(x)) return gpu_ops::glu(x, axis);
  return ref::glu(x, axis);  // one pass of exp per output: the reference is already the whole cost
}

namespace cpu {
void snake_row(const float* in, float* o, int64_t length, float a) {
  const float inv = 1.0f / a;
  // Four lanes through vec::sin4 (a scalar sinf call per element was a sixth of Kokoro's generator), eight
  // with AVX2 first (the same values); arguments past its range go to std::sin.
  int64_t t = 0;
#if defined(__x86_64__)
  if (cpu_use_avx2()) t = snake_row_avx2(in, o, length, a, inv);
#endif
  for (; t + 4 <= length; t += 4) {
    const vec::F4 v = vec::load(in + t), ax = v * vec::splat(a);
    // A lane compare, not __builtin_reduce_max: that lowers to scalar fmaxf calls in wasm (3 % of Kokoro).
    const vec::I4 big = __builtin_elementwise_abs(ax) >= vec::splat(8192.0f);
    if ((big[0] | big[1] | big[2] | big[3]) != 0) break;
    const vec::F4 s = vec::sin4(ax);
    vec::store(o + t, v + s * s * vec::splat(inv));
  }
  for (; t < length; ++t) {
    const float s = std::sin(a * in[t]);
    o[t] = in[t] + s * s * inv;
  }
}
}  // namespace cpu

Tensor snake(const Tensor& x0, const Tensor& alpha0) {
  if (gpu_ops::on_gpu(x0)) return gpu_ops::snake(x0, alpha0);
  const Tensor x = cpu::as_f32(x0), alpha = cpu::as_f32(alpha0);
  NN_ASSERT(x.rank() == 2 && alpha.elements() == x.dim(0));
  const int64_t channels = x.dim(0), length = x.dim(1);
  Tensor out = x.ctx().empty(x.shape());
  cpu::parallel_for(x.ctx(), channels, length * 20, [&](int64_t begin, int64_t end) {
    for (int64_t c = begin; c < end; ++c)
      cpu::snake_row(x.f32() + c * length, out.f32() + c * length, length, alpha.f32()[c]);
  });
  return out;
}

}  // namespace sotto::nn
