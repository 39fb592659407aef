// STFT and inverse STFT (torch.stft / torch.istft semantics, onesided, not normalised), as products with a
// windowed DFT basis: the analysis frames overlap in the signal, so they are read in place as rows `hop`
// apart (gemm_nt's ldb), never copied. n_fft is small in the vocoders that use these (Kokoro's iSTFTNet:
// 20), where a basis product beats an FFT.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "nn/cpu.h"
#include "nn/gemm.h"
#include "nn/gpu_ops.h"
#include "nn/ops.h"
#include "nn/ref.h"

namespace sotto::nn {

namespace {

constexpr double kTwoPi = 6.283185307179586476925286766559;

// The window [W <= n_fft] zero-padded to n_fft, centred (torch.stft's rule).
std::vector<double> padded_window(const Tensor& window, int n_fft) {
  const Tensor w = cpu::as_f32(window);
  const int64_t length = w.elements();
  NN_ASSERT(length <= n_fft);
  std::vector<double> out(static_cast<size_t>(n_fft), 0.0);
  const int64_t offset = (n_fft - length) / 2;
  for (int64_t i = 0; i < length; ++i) out[static_cast<size_t>(offset + i)] = w.f32()[i];
  return out;
}

Tensor padded_signal(const Tensor& signal, int n_fft, bool center) {
  const Tensor s = cpu::as_f32(signal).reshape({signal.elements()});
  return center ? pad_reflect(s, 0, n_fft / 2, n_fft / 2) : s;
}

}  // namespace

namespace ref {
Tensor stft(const Tensor& signal, const Tensor& window, int n_fft, int hop, bool center) {
  const Tensor x = padded_signal(signal, n_fft, center);
  const std::vector<double> win = padded_window(window, n_fft);
  const int64_t bins = n_fft / 2 + 1, frames = 1 + (x.elements() - n_fft) / hop;
  Tensor out = x.ctx().empty({2, bins, frames});
  for (int64_t f = 0; f < bins; ++f)
    for (int64_t t = 0; t < frames; ++t) {
      double re = 0, im = 0;
      for (int64_t n = 0; n < n_fft; ++n) {
        const double v = x.f32()[t * hop + n] * win[static_cast<size_t>(n)];
        const double angle = kTwoPi * static_cast<double>(f * n % n_fft) / n_fft;
        re += v * std::cos(angle);
        im -= v * std::sin(angle);
      }
      out.f32()[f * frames + t] = static_cast<float>(re);
      out.f32()[(bins + f) * frames + t] = static_cast<float>(im);
    }
  return out;
}

Tensor istft(const Tensor& spectrum, const Tensor& window, int n_fft, int hop, bool center) {
  const Tensor spec = cpu::as_f32(spectrum);
  const std::vector<double> win = padded_window(window, n_fft);
  const int64_t bins = n_fft / 2 + 1, frames = spec.dim(2);
  NN_ASSERT(spec.dim(1) == bins);
  const int64_t full = n_fft + hop * (frames - 1);
  std::vector<double> y(static_cast<size_t>(full), 0.0), env(static_cast<size_t>(full), 0.0);
  for (int64_t t = 0; t < frames; ++t)
    for (int64_t n = 0; n < n_fft; ++n) {
      double v = 0;
      for (int64_t f = 0; f < bins; ++f) {
        const bool edge = f == 0 || (n_fft % 2 == 0 && f == bins - 1);
        const double angle = kTwoPi * static_cast<double>(f * n % n_fft) / n_fft;
        const double re = spec.f32()[f * frames + t], im = edge ? 0.0 : spec.f32()[(bins + f) * frames + t];
        v += (edge ? 1.0 : 2.0) * (re * std::cos(angle) - im * std::sin(angle));
      }
      y[static_cast<size_t>(t * hop + n)] += v / n_fft * win[static_cast<size_t>(n)];
      env[static_cast<size_t>(t * hop + n)] += win[static_cast<size_t>(n)] * win[static_cast<size_t>(n)];
    }
  const int64_t begin = center ? n_fft / 2 : 0, end = center ? full - n_fft / 2 : full;
  Tensor out = spec.ctx().empty({end - begin});
  for (int64_t i = begin; i < end; ++i)
    out.f32()[i - begin] = static_cast<float>(env[static_cast<size_t>(i)] > 1e-11
                                                  ? y[static_cast<size_t>(i)] / env[static_cast<size_t>(i)]
                                                  : y[static_cast<size_t>(i)]);
  return out;
}
}  // namespace ref

Tensor stft(const Tensor& signal, const Tensor& window, int n_fft, int hop, bool center) {
  NN_CPU_ONLY(signal, "stft");
  const Tensor x = padded_signal(signal, n_fft, center);
  const std::vector<double> win = padded_window(window, n_fft);
  const int64_t bins = n_fft / 2 + 1, frames = 1 + (x.elements() - n_fft) / hop;
  NN_ASSERT(x.elements() >= n_fft);
  Context& ctx = x.ctx();
  // Basis rows: window * cos, then window * -sin; row r of the output is basis row r . frame t.
  Tensor basis = ctx.empty({2 * bins, n_fft});
  for (int64_t f = 0; f < bins; ++f)
    for (int64_t n = 0; n < n_fft; ++n) {
      const double angle = kTwoPi * static_cast<double>(f * n % n_fft) / n_fft;
      basis.f32()[f * n_fft + n] = static_cast<float>(win[static_cast<size_t>(n)] * std::cos(angle));
      basis.f32()[(bins + f) * n_fft + n] =
          static_cast<float>(-win[static_cast<size_t>(n)] * std::sin(angle));
    }
  Tensor out = ctx.empty({2, bins, frames});
  cpu::gemm_nt(ctx, 2 * bins, frames, n_fft, basis.f32(), n_fft, x.f32(), hop, out.f32(), frames);
  return out;
}

Tensor istft(const Tensor& spectrum, const Tensor& window, int n_fft, int hop, bool center) {
  NN_CPU_ONLY(spectrum, "istft");
  const Tensor spec = cpu::as_f32(spectrum);
  const std::vector<double> win = padded_window(window, n_fft);
  const int64_t bins = n_fft / 2 + 1, frames = spec.dim(2);
  NN_ASSERT(spec.rank() == 3 && spec.dim(0) == 2 && spec.dim(1) == bins);
  Context& ctx = spec.ctx();
  // Synthesis basis [n_fft, 2 * bins]: sample n of a frame = sum_r spec[r] * basis[n][r] (the inverse real DFT
  // with the window folded in; the imaginary parts of DC and Nyquist are ignored, as a C2R transform does).
  Tensor basis = ctx.empty({n_fft, 2 * bins});
  for (int64_t n = 0; n < n_fft; ++n)
    for (int64_t f = 0; f < bins; ++f) {
      const bool edge = f == 0 || (n_fft % 2 == 0 && f == bins - 1);
      const double angle = kTwoPi * static_cast<double>(f * n % n_fft) / n_fft;
      const double scale = (edge ? 1.0 : 2.0) / n_fft * win[static_cast<size_t>(n)];
      basis.f32()[n * 2 * bins + f] = static_cast<float>(scale * std::cos(angle));
      basis.f32()[n * 2 * bins + bins + f] = static_cast<float>(edge ? 0.0 : -scale * std::sin(angle));
    }
  const Tensor spec_t = transpose(spec.reshape({2 * bins, frames}));  // [frames, 2 * bins]
  Tensor time = ctx.empty({frames, n_fft});
  cpu::gemm_nt(ctx, frames, n_fft, 2 * bins, spec_t.f32(), 2 * bins, basis.f32(), 2 * bins, time.f32(),
               n_fft);
  const int64_t full = n_fft + hop * (frames - 1);
  std::vector<float> y(static_cast<size_t>(full), 0.0f), env(static_cast<size_t>(full), 0.0f);
  for (int64_t t = 0; t < frames; ++t)
    for (int64_t n = 0; n < n_fft; ++n) {
      y[static_cast<size_t>(t * hop + n)] += time.f32()[t * n_fft + n];
      env[static_cast<size_t>(t * hop + n)] +=
          static_cast<float>(win[static_cast<size_t>(n)] * win[static_cast<size_t>(n)]);
    }
  const int64_t begin = center ? n_fft / 2 : 0, end = center ? full - n_fft / 2 : full;
  Tensor out = ctx.empty({end - begin});
  for (int64_t i = begin; i < end; ++i) {
    const float e = env[static_cast<size_t>(i)];
    out.f32()[i - begin] = e > 1e-11f ? y[static_cast<size_t>(i)] / e : y[static_cast<size_t>(i)];
  }
  return out;
}

// ---------------------------------------------------------------- lookup and durations

Tensor embedding(const Tensor& table, const Tensor& ids) {
  if (gpu_ops::on_gpu(table)) return gpu_ops::embedding(table, ids);
  NN_ASSERT(table.rank() == 2);
  const std::vector<int64_t> idx = cpu::read_ints(ids);
  const int64_t vocab = table.dim(0), d = table.dim(1);
  Tensor out = table.ctx().empty({static_cast<int64_t>(idx.size()), d});
  for (size_t i = 0; i < idx.size(); ++i) {
    NN_ASSERT(idx[i] >= 0 && idx[i] < vocab);
    const int64_t row = std::min(std::max<int64_t>(idx[i], 0), vocab - 1);
    cpu::read_floats(table, row * d, d, out.f32() + static_cast<int64_t>(i) * d);
  }
  return out;
}

Tensor repeat_by_durations(const Tensor& x0, const Tensor& durations) {
  if (gpu_ops::on_gpu(x0)) {
    // The durations decide the output's shape, so the host needs them: read back when they live on the GPU.
    std::vector<int64_t> reps;
    if (gpu_ops::on_gpu(durations)) {
      auto bytes = durations.ctx().to_bytes(durations);
      if (!bytes.ok() || durations.dtype() != DType::I64)
        return gpu_ops::unsupported(x0, "repeat_by_durations of these durations");
      reps.resize(bytes->size() / 8);
      std::memcpy(reps.data(), bytes->data(), reps.size() * 8);
      reps.resize(std::min<size_t>(reps.size(), static_cast<size_t>(durations.elements())));
    } else {
      reps = cpu::read_ints(durations);
    }
    return gpu_ops::repeat_by_durations(x0, reps);
  }
  const Tensor x = cpu::as_f32(x0);
  const std::vector<int64_t> reps = cpu::read_ints(durations);
  NN_ASSERT(x.rank() == 2 && static_cast<int64_t>(reps.size()) == x.dim(0));
  const int64_t c = x.dim(1);
  int64_t total = 0;
  for (int64_t r : reps) total += std::max<int64_t>(r, 0);
  Tensor out = x.ctx().empty({total, c});
  int64_t row = 0;
  for (size_t t = 0; t < reps.size(); ++t)
    for (int64_t k = 0; k < reps[t]; ++k, ++row)
      std::memcpy(out.f32() + row * c, x.f32() + static_cast<int64_t>(t) * c, static_cast<size_t>(c) * 4);
  return out;
}

}  // namespace sotto::nn
