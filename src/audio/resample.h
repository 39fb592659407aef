// Sample-rate conversion by an exact rational ratio (e.g. 24 kHz -> 16 kHz is 2/3, 44.1 kHz -> 16 kHz is
// 160/441), for feeding ASR and VAD models that want 16 kHz mono.
//
// Filter: a Kaiser-windowed sinc evaluated at the exact fractional position of each output sample: a
// polyphase bank of `up` phases, tabulated exactly when it fits in 512 KB. Ratios with more phases (coprime
// rates such as 44099 -> 16000, or 11025 -> 16000) interpolate linearly in a 1024-steps-per-lower-rate-sample
// table of the kernel instead (tap error ~1e-6 of the peak: -120 dB, far below the 80 dB stopband). It is one
// low-pass at the lower of the two rates, designed for
//   passband  0 .. 0.45 * min(in, out)   ripple <= 0.001 dB  (Kaiser delta 1e-4)
//   stopband  0.50 * min(in, out) ..     attenuation >= 80 dB (beta 7.857)
// so nothing above the output Nyquist aliases back (the transition band ends AT Nyquist). At 16 kHz the
// passband is 7.2 kHz: more than any speech model's mel filterbank uses. resample_test measures both figures.
// The kernel is symmetric and centred on each output sample's exact input time k * in / out, so there is
// no delay: output sample k corresponds to input time k / out_rate_hz seconds.
//
// Conventions:
//  - out_frames = round(in_frames * out / in), halves rounded up (resampled_frames()).
//  - Samples before the start and after the end are zero, so the first and last ~56 output samples see
//    a partial kernel.
//  - in == out is an exact copy.
//  - NaN / Inf input propagate into the outputs whose kernel covers them (about +-56 samples at the lower
//    rate); nothing crashes and no later output is affected.
//  - Rates 1 .. 1,000,000 Hz, ratio at most 256 either way (the kernel spans +-56 samples at the lower rate).
//
// Streaming: process() takes any chunk sizes and emits every output whose kernel it has seen all of;
// finish() flushes the tail. The concatenated output is bit-identical to resample() of the whole signal.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "core/error.h"

namespace sotto {

struct ResamplerDesign {
  static constexpr double kPassbandEdge = 0.45;           // of min(in, out) Hz
  static constexpr double kStopbandEdge = 0.50;           // of min(in, out) Hz
  static constexpr double kPassbandRippleDb = 0.001;      // design target, peak deviation from 0 dB
  static constexpr double kStopbandAttenuationDb = 80.0;  // design target
  static constexpr double kKaiserBeta = 0.1102 * (kStopbandAttenuationDb - 8.7);
  // Kaiser's length estimate (A - 7.95) / (2.285 * 2 pi * 0.05) = 100.4 taps at the lower rate, i.e. a
  // half-width of 50.2; 56 gives the stopband edge margin for the float32 taps (measured in resample_test).
  static constexpr double kHalfWidthAtLowerRate = 56.0;
  static constexpr uint32_t kMaxRatio = 256;
  static constexpr uint32_t kMaxRateHz = 1'000'000;
};

// round(in_frames * out_rate_hz / in_rate_hz), without overflow. Rates must be > 0.
uint64_t resampled_frames(uint64_t in_frames, uint32_t in_rate_hz, uint32_t out_rate_hz);

class Resampler {
 public:
  static Result<Resampler> create(uint32_t in_rate_hz, uint32_t out_rate_hz, uint32_t channels = 1);

  // Appends interleaved frames (in.size() a multiple of channels(); a partial frame is ignored) and appends
  // to `out` every output frame that no longer depends on future input.
  void process(std::span<const float> in, std::vector<float>& out);
  // End of input: appends the remaining output frames. Afterwards process() and finish() do nothing.
  void finish(std::vector<float>& out);

  uint32_t in_rate_hz() const { return in_rate_hz_; }
  uint32_t out_rate_hz() const { return out_rate_hz_; }
  uint32_t channels() const { return channels_; }
  uint32_t up() const { return up_; }      // out / gcd
  uint32_t down() const { return down_; }  // in / gcd
  uint32_t taps_per_phase() const { return 2 * half_taps_; }
  bool tabulated() const { return !table_.empty(); }
  // The filter as used: coefficient of tap m (0 .. taps_per_phase()-1) in phase p (0 .. up()-1), which
  // weighs input frame i - half_taps + 1 + m for an output at input time i + p / up.
  void phase_coefficients(uint32_t phase, std::vector<float>& coefficients) const;
  // The continuous kernel at an offset of tau input samples (what the table samples).
  double kernel(double tau_in_samples) const;

 private:
  Resampler() = default;
  void emit(uint64_t limit_frame, std::vector<float>& out);

  uint32_t in_rate_hz_ = 0, out_rate_hz_ = 0, channels_ = 1;
  uint32_t up_ = 1, down_ = 1;
  uint32_t half_taps_ = 0;
  double cutoff_per_in_sample_ = 0;  // 2 * cutoff / in_rate: the sinc's argument scale
  double half_width_in_samples_ = 0;
  double inv_i0_beta_ = 1;          // 1 / I0(beta), the window's normalisation
  std::vector<float> table_;        // up_ rows of 2 * half_taps_, or empty when computed on the fly
  std::vector<float> scratch_;      // one phase's coefficients when not tabulated
  std::vector<float> fine_kernel_;  // kernel(tau >= 0) on a fine grid when not tabulated
  double fine_steps_per_in_sample_ = 0;

  // Input frames from absolute index buffer_start_ on (negative indices are the zero lead-in).
  std::vector<float> buffer_;
  int64_t buffer_start_ = 0;
  uint64_t frames_in_ = 0;
  // Next output: its input time is next_in_frame_ + next_phase_ / up_.
  uint64_t out_emitted_ = 0;
  uint64_t next_in_frame_ = 0;
  uint32_t next_phase_ = 0;
  bool finished_ = false;
};

// One-shot: interleaved in, interleaved out, resampled_frames() frames.
Result<std::vector<float>> resample(std::span<const float> in, uint32_t channels, uint32_t in_rate_hz,
                                    uint32_t out_rate_hz);

}  // namespace sotto
