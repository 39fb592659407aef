// Rational-ratio windowed-sinc resampler; the design and its conventions are in resample.h.
#include "audio/resample.h"

#include <algorithm>
#include <numeric>

namespace sotto {

namespace {

// Portable code has no libm on wasm, so the two transcendental pieces the kernel needs are written here.
// Both run only while building the table (or per output for untabulated ratios), never per tap of a hot loop.

// sin(pi * x) to ~1e-15: reduce to r in [-0.5, 0.5] (sin(pi (n + r)) = (-1)^n sin(pi r)), then Taylor to
// r^19 (the first dropped term is (pi/2)^21 / 21! < 2e-15).
double sin_pi(double x) {
  const double n = __builtin_nearbyint(x);
  const double r = x - n;
  const double t = 3.14159265358979323846 * r;
  const double t2 = t * t;
  double term = t, sum = t;
  for (int k = 1; k <= 9; ++k) {
    term *= -t2 / ((2.0 * k) * (2.0 * k + 1));
    sum += term;
  }
  const int64_t n_int = static_cast<int64_t>(n);
  return (n_int & 1) ? -sum : sum;
}

// Modified Bessel function of the first kind, order 0: sum_k ((x/2)^k / k!)^2. For x <= 12 (beta is 7.86)
// the terms fall below 1e-17 of the sum within ~30 steps.
double bessel_i0(double x) {
  const double q = x * x / 4;
  double term = 1, sum = 1;
  for (int k = 1; k < 200; ++k) {
    term *= q / (static_cast<double>(k) * k);
    sum += term;
    if (term < 1e-17 * sum) break;
  }
  return sum;
}

// 512 KB: 44.1k and 22.05k -> 16k (50k floats each) fit; building it costs one kernel evaluation per entry.
constexpr uint64_t kMaxTableFloats = 1u << 17;
// Fine kernel grid for untabulated ratios. Linear interpolation errs by h'' * step^2 / 8; the kernel's
// curvature is about (pi * 0.95)^2 per lower-rate sample squared, so 1024 steps give ~1e-6 of the peak
// (-120 dB, far under the 80 dB stopband) for 57k kernel evaluations at creation.
constexpr uint32_t kFineStepsPerLowerSample = 1024;

// Eight independent partial sums let the compiler use 4- or 8-wide vectors without -ffast-math; the order of
// the additions is fixed, so streamed and one-shot output stay bit-identical.
float dot(const float* __restrict taps, const float* __restrict x, uint32_t n, uint32_t stride) {
  float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  uint32_t m = 0;
  if (stride == 1) {
    for (; m + 8 <= n; m += 8)
      for (uint32_t l = 0; l < 8; ++l) acc[l] += taps[m + l] * x[m + l];
  }
  for (; m < n; ++m) acc[m % 8] += taps[m] * x[static_cast<size_t>(m) * stride];
  return ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]));
}

}  // namespace

uint64_t resampled_frames(uint64_t in_frames, uint32_t in_rate_hz, uint32_t out_rate_hz) {
  const uint64_t g = std::gcd(in_rate_hz, out_rate_hz);
  const uint64_t up = out_rate_hz / g, down = in_rate_hz / g;
  // in_frames * up / down split so that nothing overflows: (q * down + r) * up / down = q * up + r * up /
  // down.
  const uint64_t q = in_frames / down, r = in_frames % down;
  return q * up + (r * up + down / 2) / down;
}

Result<Resampler> Resampler::create(uint32_t in_rate_hz, uint32_t out_rate_hz, uint32_t channels) {
  using D = ResamplerDesign;
  if (in_rate_hz == 0 || in_rate_hz > D::kMaxRateHz || out_rate_hz == 0 || out_rate_hz > D::kMaxRateHz)
    return error("resample: rates must be 1 .. ", D::kMaxRateHz, " Hz, got ", in_rate_hz, " -> ",
                 out_rate_hz);
  if (channels == 0 || channels > 65535) return error("resample: ", channels, " channels is not supported");
  if (in_rate_hz > static_cast<uint64_t>(out_rate_hz) * D::kMaxRatio ||
      out_rate_hz > static_cast<uint64_t>(in_rate_hz) * D::kMaxRatio)
    return error("resample: ", in_rate_hz, " -> ", out_rate_hz, " Hz is a ratio above ", D::kMaxRatio);
  Resampler r;
  r.in_rate_hz_ = in_rate_hz;
  r.out_rate_hz_ = out_rate_hz;
  r.channels_ = channels;
  const uint32_t g = std::gcd(in_rate_hz, out_rate_hz);
  r.up_ = out_rate_hz / g;
  r.down_ = in_rate_hz / g;
  if (r.up_ == 1 && r.down_ == 1) return r;  // identity: a plain copy, no filter

  const double lower_rate_hz = std::min(in_rate_hz, out_rate_hz);
  const double cutoff_hz = 0.5 * (D::kPassbandEdge + D::kStopbandEdge) * lower_rate_hz;  // the -6 dB point
  r.cutoff_per_in_sample_ = 2 * cutoff_hz / in_rate_hz;
  r.half_width_in_samples_ = D::kHalfWidthAtLowerRate * in_rate_hz / lower_rate_hz;
  r.inv_i0_beta_ = 1 / bessel_i0(D::kKaiserBeta);
  r.half_taps_ = static_cast<uint32_t>(r.half_width_in_samples_) + 1;  // taps cover |tau| < half width

  const uint64_t taps = 2ull * r.half_taps_;
  if (static_cast<uint64_t>(r.up_) * taps <= kMaxTableFloats) {
    r.table_.resize(static_cast<size_t>(r.up_ * taps));
    std::vector<float> row;
    for (uint32_t p = 0; p < r.up_; ++p) {
      r.phase_coefficients(p, row);
      std::copy(row.begin(), row.end(), r.table_.begin() + static_cast<ptrdiff_t>(p * taps));
    }
  } else {
    r.scratch_.resize(static_cast<size_t>(taps));
    r.fine_steps_per_in_sample_ = kFineStepsPerLowerSample * lower_rate_hz / in_rate_hz;
    const uint32_t n_fine = static_cast<uint32_t>(D::kHalfWidthAtLowerRate * kFineStepsPerLowerSample) + 2;
    r.fine_kernel_.resize(n_fine);
    for (uint32_t s = 0; s < n_fine; ++s)
      r.fine_kernel_[s] = static_cast<float>(r.kernel(s / r.fine_steps_per_in_sample_));
  }
  // Zero lead-in: frames -(half_taps - 1) .. -1, so the first outputs read zeros before the signal.
  r.buffer_start_ = -static_cast<int64_t>(r.half_taps_ - 1);
  r.buffer_.assign(static_cast<size_t>(r.half_taps_ - 1) * channels, 0.0f);
  return r;
}

double Resampler::kernel(double tau) const {
  const double u = tau / half_width_in_samples_;
  if (u <= -1 || u >= 1) return 0;
  const double window = bessel_i0(ResamplerDesign::kKaiserBeta * __builtin_sqrt(1 - u * u)) * inv_i0_beta_;
  const double x = cutoff_per_in_sample_ * tau;  // sinc argument in half-cycles of the cutoff
  const double sinc = x == 0 ? 1.0 : sin_pi(x) / (3.14159265358979323846 * x);
  return cutoff_per_in_sample_ * sinc * window;
}

void Resampler::phase_coefficients(uint32_t phase, std::vector<float>& coefficients) const {
  const uint32_t taps = 2 * half_taps_;
  coefficients.resize(taps);
  if (up_ == 1 && down_ == 1) {  // identity: a single unit tap
    coefficients.assign(1, 1.0f);
    return;
  }
  const double frac = static_cast<double>(phase) / up_;
  for (uint32_t m = 0; m < taps; ++m) {
    const double offset = static_cast<double>(m) - (static_cast<double>(half_taps_) - 1);  // j - i
    const double tau = frac - offset;
    if (fine_kernel_.empty()) {
      coefficients[m] = static_cast<float>(kernel(tau));
      continue;
    }
    const double pos = (tau < 0 ? -tau : tau) * fine_steps_per_in_sample_;  // the kernel is even
    const size_t s = static_cast<size_t>(pos);
    if (s + 1 >= fine_kernel_.size()) {
      coefficients[m] = 0;
      continue;
    }
    const double t = pos - static_cast<double>(s);
    coefficients[m] = static_cast<float>(fine_kernel_[s] + t * (fine_kernel_[s + 1] - fine_kernel_[s]));
  }
}

void Resampler::process(std::span<const float> in, std::vector<float>& out) {
  if (finished_) return;
  const uint64_t frames = in.size() / channels_;
  if (up_ == 1 && down_ == 1) {
    out.insert(out.end(), in.begin(), in.begin() + static_cast<ptrdiff_t>(frames * channels_));
    frames_in_ += frames;
    out_emitted_ += frames;
    return;
  }
  buffer_.insert(buffer_.end(), in.begin(), in.begin() + static_cast<ptrdiff_t>(frames * channels_));
  frames_in_ += frames;
  emit(frames_in_, out);
}

void Resampler::finish(std::vector<float>& out) {
  if (finished_) return;
  finished_ = true;
  if (up_ == 1 && down_ == 1) return;
  // Zero tail: the last output reads at most half_taps frames past the last input frame.
  buffer_.resize(buffer_.size() + static_cast<size_t>(half_taps_) * channels_, 0.0f);
  emit(frames_in_ + half_taps_, out);
}

// Emits outputs while their last tap (frame next_in_frame_ + half_taps_) is below `limit_frame`, and after
// finish() stops at resampled_frames() in total.
void Resampler::emit(uint64_t limit_frame, std::vector<float>& out) {
  const uint64_t total_out = finished_ ? resampled_frames(frames_in_, in_rate_hz_, out_rate_hz_) : UINT64_MAX;
  const uint32_t taps = 2 * half_taps_;
  while (out_emitted_ < total_out && next_in_frame_ + half_taps_ < limit_frame) {
    const float* coefficients;
    if (!table_.empty()) {
      coefficients = table_.data() + static_cast<size_t>(next_phase_) * taps;
    } else {
      phase_coefficients(next_phase_, scratch_);  // const member filling a scratch buffer we own
      coefficients = scratch_.data();
    }
    const int64_t first_frame = static_cast<int64_t>(next_in_frame_) - (half_taps_ - 1);
    const float* x = buffer_.data() + static_cast<size_t>(first_frame - buffer_start_) * channels_;
    // The one hot loop: a dot product of the phase's taps with the input window, per channel.
    for (uint32_t c = 0; c < channels_; ++c) out.push_back(dot(coefficients, x + c, taps, channels_));
    ++out_emitted_;
    next_phase_ += down_;
    next_in_frame_ += next_phase_ / up_;
    next_phase_ %= up_;
  }
  // Drop input no output needs any more, in large steps so the copy is amortised.
  const int64_t first_needed = static_cast<int64_t>(next_in_frame_) - (half_taps_ - 1);
  const int64_t droppable = first_needed - buffer_start_;
  const int64_t buffered = static_cast<int64_t>(buffer_.size() / channels_);
  if (droppable > 4096 && droppable * 2 > buffered) {
    const int64_t drop = std::min(droppable, buffered);
    buffer_.erase(buffer_.begin(), buffer_.begin() + static_cast<ptrdiff_t>(drop * channels_));
    buffer_start_ += drop;
  }
}

Result<std::vector<float>> resample(std::span<const float> in, uint32_t channels, uint32_t in_rate_hz,
                                    uint32_t out_rate_hz) {
  SOTTO_ASSIGN(Resampler r, Resampler::create(in_rate_hz, out_rate_hz, channels));
  std::vector<float> out;
  out.reserve(
      static_cast<size_t>(resampled_frames(in.size() / channels, in_rate_hz, out_rate_hz) * channels));
  r.process(in, out);
  r.finish(out);
  return out;
}

}  // namespace sotto
