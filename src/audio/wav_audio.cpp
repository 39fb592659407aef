#include "audio/wav_audio.h"

#include <cmath>

#include "audio/resample.h"

namespace sotto {

size_t zero_non_finite(std::span<float> samples) {
  size_t n = 0;
  for (float& s : samples) {
    if (std::isfinite(s)) continue;
    s = 0.0f;
    ++n;
  }
  return n;
}

std::string wav_clamp_note(const WavInfo& info) {
  if (!info.data_clamped) return "";
  if (info.declared_data_bytes == 0xFFFFFFFFu)
    return cat("the 'data' chunk's size is unset (0xFFFFFFFF, a stream never finalised): read the ",
               info.frames, " whole frames the file holds (", info.duration_s(), " s)");
  return cat("the 'data' chunk declares ", info.declared_data_bytes, " bytes but the file holds ",
             info.data.size(), " after its header: read the ", info.frames, " whole frames present (",
             info.duration_s(), " s), the file may be cut short");
}

Result<SpeechAudio> wav_to_speech_audio(std::span<const uint8_t> bytes, uint32_t rate_hz) {
  SOTTO_ASSIGN(const WavInfo info, parse_wav(bytes));
  Audio audio = decode_wav_data(info);
  SpeechAudio out;
  out.notes = wav_clamp_note(info);
  if (const size_t bad = zero_non_finite(audio.samples); bad > 0)
    out.notes += cat(out.notes.empty() ? "" : "; ", bad, " of ", audio.samples.size(),
                     " samples were NaN or infinite and were read as 0");
  out.samples = to_mono(audio);
  if (audio.sample_rate_hz == rate_hz) return out;
  SOTTO_ASSIGN(out.samples, resample(out.samples, 1, audio.sample_rate_hz, rate_hz));
  return out;
}

}  // namespace sotto
