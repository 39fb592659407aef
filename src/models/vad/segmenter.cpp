#include "models/vad/segmenter.h"

#include <algorithm>
#include <cmath>

namespace sotto::vad {

namespace {

int frames_for(double ms, double frame_ms, int minimum) {
  if (!(frame_ms > 0) || !(ms >= 0)) return minimum;
  const double frames = std::round(ms / frame_ms);
  return frames > 1e9 ? 1'000'000'000 : std::max(minimum, static_cast<int>(frames));
}

}  // namespace

int SegmenterOptions::redemption_frames() const {
  return frames_for(redemption_ms, frame_ms, 1);
}
int SegmenterOptions::pre_speech_pad_frames() const {
  return frames_for(pre_speech_pad_ms, frame_ms, 0);
}
int SegmenterOptions::min_speech_frames() const {
  return frames_for(min_speech_ms, frame_ms, 1);
}

SpeechSegmenter::SpeechSegmenter(const SegmenterOptions& options)
    : options_(options),
      redemption_frames_(options.redemption_frames()),
      pre_pad_frames_(options.pre_speech_pad_frames()),
      min_speech_frames_(options.min_speech_frames()) {}

SegmentEvent SpeechSegmenter::close(Segment* segment) {
  const Segment finished{buffer_start_, next_frame_};
  const bool long_enough = speech_frames_ >= min_speech_frames_;
  speaking_ = false;
  redemption_count_ = 0;
  speech_frames_ = 0;
  buffer_start_ = next_frame_;
  if (!long_enough) return SegmentEvent::Misfire;
  if (segment) *segment = finished;
  return SegmentEvent::SpeechEnd;
}

SegmentEvent SpeechSegmenter::push(float probability, Segment* segment) {
  const bool is_speech = probability >= options_.positive_threshold;  // false for NaN
  const bool is_silence = probability < options_.negative_threshold;  // false for NaN
  ++next_frame_;
  if (is_speech) {
    ++speech_frames_;
    redemption_count_ = 0;
    if (!speaking_) {
      speaking_ = true;
      return SegmentEvent::SpeechStart;
    }
  }
  if (speaking_ && is_silence && ++redemption_count_ >= redemption_frames_) return close(segment);
  if (!speaking_) {
    // Silent: keep only the pre-speech padding (which can hold no speech frames).
    buffer_start_ = std::max(buffer_start_, next_frame_ - pre_pad_frames_);
    speech_frames_ = 0;
  }
  return SegmentEvent::None;
}

SegmentEvent SpeechSegmenter::finish(Segment* segment) {
  if (!speaking_) return SegmentEvent::None;
  return close(segment);
}

std::vector<Segment> find_segments(std::span<const float> probabilities, const SegmenterOptions& options) {
  SpeechSegmenter segmenter(options);
  std::vector<Segment> segments;
  Segment segment;
  for (const float p : probabilities)
    if (segmenter.push(p, &segment) == SegmentEvent::SpeechEnd) segments.push_back(segment);
  if (segmenter.finish(&segment) == SegmentEvent::SpeechEnd) segments.push_back(segment);
  return segments;
}

}  // namespace sotto::vad
