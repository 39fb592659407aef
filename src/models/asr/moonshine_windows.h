// Where to cut audio longer than Moonshine's window: the model transcribes one window per call and, past about
// 20 s, starts to repeat or drop words (ONNX Runtime's own output on the 60 s test.wav loops), so long audio is
// cut into windows at pauses and the windows' texts are joined.
//   - audio up to max_window_s is one window (exactly what a caller of the model on the whole clip gets);
//   - otherwise the speech segments of a VAD (Silero's per-frame probabilities through vad::find_segments)
//     are the windows, and silence between them is never transcribed;
//   - a window still longer than max_window_s is cut at its quietest point (lowest VAD probability, or lowest
//     energy over 32 ms frames when there is no VAD) between half and all of max_window_s, until none is.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "core/error.h"
#include "models/asr/moonshine.h"

namespace sotto::asr {

struct AudioWindow {
  int64_t start = 0, end = 0;  // samples at 16 kHz, [start, end)
};

struct WindowOptions {
  double max_window_s = 20.0;
  int frame_samples = 512;  // one VAD probability per this many samples (Silero at 16 kHz: 32 ms)
};

// `vad_probs`: one speech probability per frame_samples samples from the start (empty: no VAD, energy only).
std::vector<AudioWindow> speech_windows(std::span<const float> audio_16k, std::span<const float> vad_probs,
                                        const WindowOptions& options = {});

// One window's and the whole audio's text (windows joined with a space, empty ones skipped).
struct WindowText {
  AudioWindow window;
  std::vector<int32_t> tokens;
  std::string text;
};
struct Transcript {
  std::string text;
  std::vector<int32_t> tokens;
  double encode_ms = 0, decode_ms = 0;
  std::vector<WindowText> windows;
};
Result<Transcript> transcribe_windows(const MoonshineWeights& w, const MoonshineTokenizer& tokenizer,
                                      std::span<const float> audio_16k, std::span<const AudioWindow> windows);

// `sotto transcribe --json`: {"text", "tokens", "audio_s", "encode_ms", "decode_ms", "threads", "vad",
// "segments": [{"start_sample", "end_sample", "text", "tokens"}]} on one line (no newline).
std::string transcript_json(const Transcript& t, double audio_s, int threads, bool vad);

}  // namespace sotto::asr
