// Cutting long audio into windows at pauses (the rules are in moonshine_windows.h).
#include "models/asr/moonshine_windows.h"

#include <algorithm>
#include <cmath>

#include "io/describe.h"
#include "models/vad/segmenter.h"

namespace sotto::asr {

namespace {

// Per-frame "speech-ness" used to pick a cut: the VAD probability, or the frame's mean square.
float frame_score(std::span<const float> audio, std::span<const float> probs, int64_t frame,
                  int frame_samples) {
  if (!probs.empty())
    return frame < static_cast<int64_t>(probs.size()) ? probs[static_cast<size_t>(frame)] : 0.0f;
  const int64_t begin = frame * frame_samples;
  const int64_t end = std::min<int64_t>(begin + frame_samples, static_cast<int64_t>(audio.size()));
  double sum = 0;
  for (int64_t i = begin; i < end; ++i)
    sum += static_cast<double>(audio[static_cast<size_t>(i)]) * audio[static_cast<size_t>(i)];
  return end > begin ? static_cast<float>(sum / static_cast<double>(end - begin)) : 0.0f;
}

void split_long(std::span<const float> audio, std::span<const float> probs, AudioWindow w,
                const WindowOptions& o, std::vector<AudioWindow>& out) {
  const auto max_samples = static_cast<int64_t>(o.max_window_s * 16000);
  while (w.end - w.start > max_samples) {
    // The quietest frame whose start lies between half and all of the longest window.
    const int64_t first = (w.start + max_samples / 2) / o.frame_samples + 1;
    const int64_t last = (w.start + max_samples) / o.frame_samples - 1;
    int64_t best = last;
    float best_score = INFINITY;
    for (int64_t f = first; f <= last; ++f) {
      const float s = frame_score(audio, probs, f, o.frame_samples);
      if (s < best_score) {
        best_score = s;
        best = f;
      }
    }
    const int64_t cut = std::clamp(best * o.frame_samples + o.frame_samples / 2, w.start + 1, w.end - 1);
    out.push_back({w.start, cut});
    w.start = cut;
  }
  out.push_back(w);
}

}  // namespace

std::vector<AudioWindow> speech_windows(std::span<const float> audio, std::span<const float> probs,
                                        const WindowOptions& o) {
  std::vector<AudioWindow> out;
  const auto n = static_cast<int64_t>(audio.size());
  if (n == 0) return out;
  if (static_cast<double>(n) <= o.max_window_s * 16000) {
    out.push_back({0, n});
    return out;
  }
  if (probs.empty()) {
    split_long(audio, probs, {0, n}, o, out);
    return out;
  }
  vad::SegmenterOptions so;
  so.frame_ms = 1000.0 * o.frame_samples / 16000;
  for (const vad::Segment& s : vad::find_segments(probs, so)) {
    const int64_t start = std::min(s.start_frame * o.frame_samples, n);
    const int64_t end = std::min(s.end_frame * o.frame_samples, n);
    if (end > start) split_long(audio, probs, {start, end}, o, out);
  }
  return out;
}

Result<Transcript> transcribe_windows(const MoonshineWeights& w, const MoonshineTokenizer& tokenizer,
                                      std::span<const float> audio, std::span<const AudioWindow> windows) {
  Transcript t;
  for (const AudioWindow& win : windows) {
    if (win.start < 0 || win.end > static_cast<int64_t>(audio.size()) || win.end <= win.start)
      return error("moonshine: window [", win.start, ", ", win.end, ") outside the audio (", audio.size(),
                   " samples)");
    SOTTO_ASSIGN(MoonshineResult r,
                 moonshine_transcribe(w, audio.subspan(static_cast<size_t>(win.start),
                                                       static_cast<size_t>(win.end - win.start))));
    WindowText wt{win, r.tokens, tokenizer.decode(r.tokens)};
    if (!wt.text.empty()) t.text += (t.text.empty() ? "" : " ") + wt.text;
    t.tokens.insert(t.tokens.end(), r.tokens.begin(), r.tokens.end());
    t.encode_ms += r.encode_ms;
    t.decode_ms += r.decode_ms;
    t.windows.push_back(std::move(wt));
  }
  return t;
}

namespace {
std::string ids_json(const std::vector<int32_t>& ids) {
  std::string out = "[";
  for (size_t i = 0; i < ids.size(); ++i) out += cat(i ? "," : "", ids[i]);
  return out + "]";
}
}  // namespace

std::string transcript_json(const Transcript& t, double audio_s, int threads, bool vad) {
  std::string segments;
  for (const WindowText& w : t.windows)
    segments += cat(segments.empty() ? "" : ",", "{\"start_sample\":", w.window.start,
                    ",\"end_sample\":", w.window.end, ",\"text\":", json_quote(w.text),
                    ",\"tokens\":", ids_json(w.tokens), "}");
  return cat("{\"text\":", json_quote(t.text), ",\"tokens\":", ids_json(t.tokens), ",\"audio_s\":", audio_s,
             ",\"encode_ms\":", t.encode_ms, ",\"decode_ms\":", t.decode_ms, ",\"threads\":", threads,
             ",\"vad\":", vad, ",\"segments\":[", segments, "]}");
}

}  // namespace sotto::asr
