#include "audio/mel.h"

#include "core/thread_pool.h"

#include <algorithm>
#include <cmath>
#include <complex>
#include <numbers>

namespace sotto::audio {

namespace {

// Slaney's mel scale (librosa htk=False): linear below 1 kHz, logarithmic above.
double hz_to_mel(double hz) {
  constexpr double f_sp = 200.0 / 3.0, min_log_hz = 1000.0, min_log_mel = min_log_hz / f_sp;
  const double logstep = std::log(6.4) / 27.0;
  return hz < min_log_hz ? hz / f_sp : min_log_mel + std::log(hz / min_log_hz) / logstep;
}

double mel_to_hz(double mel) {
  constexpr double f_sp = 200.0 / 3.0, min_log_hz = 1000.0, min_log_mel = min_log_hz / f_sp;
  const double logstep = std::log(6.4) / 27.0;
  return mel < min_log_mel ? mel * f_sp : min_log_hz * std::exp(logstep * (mel - min_log_mel));
}

// In-place radix-2 FFT of a power-of-two length (bit reversal, then butterflies with exact twiddles).
template <class Real>
void fft(std::vector<std::complex<Real>>& a, const std::vector<std::complex<Real>>& twiddles) {
  const size_t n = a.size();
  for (size_t i = 1, j = 0; i < n; ++i) {
    size_t bit = n >> 1;
    for (; j & bit; bit >>= 1) j ^= bit;
    j ^= bit;
    if (i < j) std::swap(a[i], a[j]);
  }
  for (size_t len = 2; len <= n; len <<= 1) {
    const size_t step = n / len;
    for (size_t i = 0; i < n; i += len)
      for (size_t k = 0; k < len / 2; ++k) {
        // The product written out: std::complex's operator* also checks for NaN (C's Annex G), ~1/3 of the
        // FFT's time here; for the finite values an STFT sees both give the same bits.
        const std::complex<Real> b = a[i + k + len / 2], w = twiddles[k * step];
        const std::complex<Real> u = a[i + k], v = {b.real() * w.real() - b.imag() * w.imag(),
                                                    b.real() * w.imag() + b.imag() * w.real()};
        a[i + k] = u + v;
        a[i + k + len / 2] = u - v;
      }
  }
}

template <class Real>
MelFeatures log_mel(std::span<const float> samples, const MelOptions& o, ThreadPool* pool) {
  MelFeatures out;
  out.n_mels = o.n_mels;
  const int64_t n = static_cast<int64_t>(samples.size());
  out.n_frames = n / o.hop_length;
  if (out.n_frames <= 0) {
    out.n_frames = 0;
    return out;
  }
  const int64_t frames = out.n_frames, bins = o.n_fft / 2 + 1;
  const bool pow2 = (o.n_fft & (o.n_fft - 1)) == 0;

  // Pre-emphasis, then centre padding of n_fft / 2 zeros each side.
  const int64_t pad = o.n_fft / 2;
  std::vector<Real> y(static_cast<size_t>(n + 2 * pad), Real(0));
  auto sample = [&](int64_t i) -> Real {
    const float s = samples[static_cast<size_t>(i)];
    return std::isfinite(s) ? static_cast<Real>(s) : Real(0);
  };
  for (int64_t i = 0; i < n; ++i)
    y[static_cast<size_t>(pad + i)] =
        i == 0 ? sample(0) : sample(i) - static_cast<Real>(o.preemphasis) * sample(i - 1);

  // Symmetric Hann of win_length, centred in n_fft (torch.stft pads the window (n_fft - win) / 2 each side).
  std::vector<Real> window(static_cast<size_t>(o.n_fft), Real(0));
  const int64_t win_offset = (o.n_fft - o.win_length) / 2;
  for (int i = 0; i < o.win_length; ++i)
    window[static_cast<size_t>(win_offset + i)] = static_cast<Real>(
        0.5 - 0.5 * std::cos(2.0 * std::numbers::pi * i / static_cast<double>(o.win_length - 1)));

  std::vector<std::complex<Real>> twiddles(static_cast<size_t>(o.n_fft));
  for (int k = 0; k < o.n_fft; ++k)
    twiddles[static_cast<size_t>(k)] =
        std::polar(Real(1), static_cast<Real>(-2.0 * std::numbers::pi * k / o.n_fft));

  // Each filter is a triangle over a few bins (~2 bins per mel on average; ~1 % of the 257 x 128 matrix is not
  // zero): its nonzero span is kept as a row of its own, so the product skips the zeros. Adding a zero product
  // leaves a float sum unchanged, so this gives the dense product's sums bit for bit, in the same order.
  const std::vector<float> bank = slaney_mel_filterbank(o.sample_rate_hz, o.n_fft, o.n_mels);
  std::vector<int64_t> first(static_cast<size_t>(o.n_mels), 0), last(static_cast<size_t>(o.n_mels), 0);
  std::vector<Real> weights;  // filter m's bins first[m] .. last[m] - 1, filter after filter
  std::vector<size_t> offset(static_cast<size_t>(o.n_mels), 0);
  for (int m = 0; m < o.n_mels; ++m) {
    const auto w = [&](int64_t k) { return bank[static_cast<size_t>(k * o.n_mels + m)]; };
    int64_t lo = 0, hi = bins;
    while (lo < hi && w(lo) == 0.0f) ++lo;
    while (hi > lo && w(hi - 1) == 0.0f) --hi;
    first[static_cast<size_t>(m)] = lo, last[static_cast<size_t>(m)] = hi;
    offset[static_cast<size_t>(m)] = weights.size();
    for (int64_t k = lo; k < hi; ++k) weights.push_back(static_cast<Real>(w(k)));
  }
  std::vector<double> logmel(static_cast<size_t>(frames * o.n_mels));
  // Frames are independent: with a pool each thread takes a contiguous range (the same values as one thread).
  auto frames_from = [&](int64_t begin, int64_t end) {
    std::vector<std::complex<Real>> buf(static_cast<size_t>(o.n_fft));
    std::vector<Real> power(static_cast<size_t>(bins));
    for (int64_t t = begin; t < end; ++t) {
      const Real* frame = y.data() + t * o.hop_length;
      for (int i = 0; i < o.n_fft; ++i)
        buf[static_cast<size_t>(i)] = {frame[i] * window[static_cast<size_t>(i)], 0};
      if (pow2) {
        fft(buf, twiddles);
      } else {
        std::vector<std::complex<Real>> in = buf;
        for (int64_t k = 0; k < bins; ++k) {
          std::complex<Real> acc = 0;
          for (int i = 0; i < o.n_fft; ++i)
            acc += in[static_cast<size_t>(i)] * twiddles[static_cast<size_t>((k * i) % o.n_fft)];
          buf[static_cast<size_t>(k)] = acc;
        }
      }
      for (int64_t k = 0; k < bins; ++k)
        power[static_cast<size_t>(k)] = std::norm(buf[static_cast<size_t>(k)]);
      for (int m = 0; m < o.n_mels; ++m) {
        Real acc = 0;
        const Real* w = weights.data() + offset[static_cast<size_t>(m)];
        for (int64_t k = first[static_cast<size_t>(m)]; k < last[static_cast<size_t>(m)]; ++k)
          acc += power[static_cast<size_t>(k)] * *w++;
        logmel[static_cast<size_t>(m * frames + t)] = std::log(static_cast<double>(acc) + o.log_guard);
      }
    }
  };
  if (pool && pool->n_threads() > 1 && frames >= 64) {
    pool->run([&](int ith, int nth) { frames_from(frames * ith / nth, frames * (ith + 1) / nth); });
  } else {
    frames_from(0, frames);
  }

  // Per-bin normalisation over the valid frames (NeMo "per_feature": unbiased std, eps added to the std).
  out.data.resize(static_cast<size_t>(frames * o.n_mels));
  for (int m = 0; m < o.n_mels; ++m) {
    const double* row = logmel.data() + m * frames;
    double mean = 0;
    for (int64_t t = 0; t < frames; ++t) mean += row[t];
    mean /= static_cast<double>(frames);
    double var = 0;
    for (int64_t t = 0; t < frames; ++t) var += (row[t] - mean) * (row[t] - mean);
    var /= static_cast<double>(std::max<int64_t>(frames - 1, 1));
    const double inv = 1.0 / (std::sqrt(var) + o.norm_eps);
    for (int64_t t = 0; t < frames; ++t)
      out.data[static_cast<size_t>(m * frames + t)] = static_cast<float>((row[t] - mean) * inv);
  }
  return out;
}

}  // namespace

std::vector<float> slaney_mel_filterbank(int sample_rate_hz, int n_fft, int n_mels) {
  const int bins = n_fft / 2 + 1;
  std::vector<double> mel_f(static_cast<size_t>(n_mels + 2));
  const double mel_min = hz_to_mel(0.0), mel_max = hz_to_mel(sample_rate_hz / 2.0);
  for (int i = 0; i < n_mels + 2; ++i)
    mel_f[static_cast<size_t>(i)] = mel_to_hz(mel_min + (mel_max - mel_min) * i / (n_mels + 1));
  std::vector<float> bank(static_cast<size_t>(bins * n_mels), 0.0f);
  for (int m = 0; m < n_mels; ++m) {
    const double lo = mel_f[static_cast<size_t>(m)], mid = mel_f[static_cast<size_t>(m + 1)],
                 hi = mel_f[static_cast<size_t>(m + 2)];
    const double enorm = 2.0 / (hi - lo);
    for (int k = 0; k < bins; ++k) {
      const double f = static_cast<double>(k) * sample_rate_hz / n_fft;
      const double lower = (f - lo) / (mid - lo), upper = (hi - f) / (hi - mid);
      bank[static_cast<size_t>(k * n_mels + m)] =
          static_cast<float>(std::max(0.0, std::min(lower, upper)) * enorm);
    }
  }
  return bank;
}

MelFeatures nemo_log_mel(std::span<const float> samples, const MelOptions& options, ThreadPool* pool) {
  return log_mel<double>(samples, options, pool);
}

MelFeatures nemo_log_mel_f32(std::span<const float> samples, const MelOptions& options) {
  return log_mel<float>(samples, options, nullptr);
}

}  // namespace sotto::audio
