// A WAV file as a speech model takes it: decoded, averaged to mono, resampled to the model's rate, and told
// plainly what could not be taken at face value. Shared by `sotto vad`, the C API (sotto_vad_decode_wav) and
// whatever else reads audio files for a model.
//
//  - A `data` chunk that declares more bytes than the file holds (a cut download, a stream never finalised)
//    is read up to the whole frames present, and the note says how much that is.
//  - NaN and infinite samples (float WAVs only) are read as 0 before resampling, which would otherwise spread
//    each one over ~112 neighbouring outputs; the note counts them.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "core/error.h"
#include "io/wav.h"

namespace sotto {

struct SpeechAudio {
  std::vector<float> samples;  // mono, at the rate asked for
  std::string notes;           // one line, "" when the file was read as it says
};

Result<SpeechAudio> wav_to_speech_audio(std::span<const uint8_t> bytes, uint32_t rate_hz);

// NaN and +-Inf set to 0; returns how many there were.
size_t zero_non_finite(std::span<float> samples);

// The note for a data chunk clamped to the file ("" when it was not).
std::string wav_clamp_note(const WavInfo& info);

}  // namespace sotto
