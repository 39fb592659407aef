// NeMo's "nemo128" log-mel front end (AudioToMelSpectrogramPreprocessor as Parakeet TDT ships it), the input
// of every Parakeet / FastConformer recogniser:
//   16 kHz mono -> pre-emphasis y[t] = x[t] - 0.97 x[t-1] (y[0] = x[0])
//   -> STFT: 400-sample symmetric Hann window centred in n_fft = 512, hop 160, 256 zeros padded each side
//   -> power |X|^2 -> 128 Slaney mel bins (0-8 kHz, Slaney area norm, librosa's filters) -> ln(m + 2^-24)
//   -> per bin over the valid frames: (x - mean) / (std + 1e-5), std with n - 1.
// A clip of N samples has N / 160 valid frames (NeMo's export also returns one more, zeroed, frame past them;
// it never reaches a valid encoder frame, so it is left out here).
//
// The STFT runs in double as NeMo's exported preprocessor does; the float32 path exists to measure how far
// single precision drifts (tests/unit/parakeet_mel_test.cpp). Cost: one 512-point FFT and 128 short filter sums
// per 10 ms frame, on one thread: ~0.5 ms per second of audio on a Zen 5 core (2.8 ms for 6 s; the FFT ~2/3).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace sotto {
class ThreadPool;
}

namespace sotto::audio {

struct MelOptions {
  int sample_rate_hz = 16000;
  int n_fft = 512;
  int win_length = 400;
  int hop_length = 160;
  int n_mels = 128;
  float preemphasis = 0.97f;
  double log_guard = 5.9604644775390625e-08;  // 2^-24
  double norm_eps = 1e-5;
};

struct MelFeatures {
  int64_t n_frames = 0;  // valid frames: samples / hop_length
  int n_mels = 0;
  std::vector<float> data;  // [n_mels, n_frames], channels-major (the encoder's conv layout)
};

// librosa.filters.mel(sr, n_fft, n_mels, fmin 0, fmax sr / 2, htk False, norm "slaney") as float32:
// [n_fft / 2 + 1, n_mels] (the layout NeMo's export stores).
std::vector<float> slaney_mel_filterbank(int sample_rate_hz, int n_fft, int n_mels);

// The normalised log-mel of `samples` (16 kHz, any length; fewer than hop_length samples give 0 frames).
// Non-finite samples are read as 0 (the caller reports them; see models/asr/parakeet.h).
// With a pool of several threads, the frames are split among them (the same values).
MelFeatures nemo_log_mel(std::span<const float> samples, const MelOptions& options = {},
                         ThreadPool* pool = nullptr);
// The same with the STFT, power and mel product in float32 (for measuring precision only).
MelFeatures nemo_log_mel_f32(std::span<const float> samples, const MelOptions& options = {});

}  // namespace sotto::audio
