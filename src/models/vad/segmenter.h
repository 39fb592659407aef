// Speech segments from per-frame speech probabilities, streaming, with the decision rules and options of
// @ricky0123/vad-web's FrameProcessor (the VAD most web voice agents use), so a page that switches to sotto
// keeps its tuning:
//  - a frame with p >= positive_threshold is a speech frame; the first one while silent starts speech;
//  - while speaking, a speech frame resets the redemption count; each frame with p < negative_threshold
//    adds one, and reaching redemption_frames ends the segment (frames in between leave the count alone);
//  - the segment covers up to pre_speech_pad_frames frames before its first speech frame, through the frame
//    that ended it; it is reported only if it holds >= min_speech_frames speech frames (else a misfire);
//  - finish() ends a segment still open at the end of the stream under the same minimum.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

namespace sotto::vad {

struct SegmenterOptions {
  float positive_threshold = 0.5f;   // positiveSpeechThreshold
  float negative_threshold = 0.35f;  // negativeSpeechThreshold
  double redemption_ms = 1400;       // redemptionMs: silence that ends a segment
  double pre_speech_pad_ms = 800;    // preSpeechPadMs: audio kept before the start
  double min_speech_ms = 400;        // minSpeechMs: shorter segments are misfires
  double frame_ms = 32;              // 512 samples at 16 kHz

  // Durations in whole frames (rounded to nearest; redemption and min speech at least 1).
  int redemption_frames() const;
  int pre_speech_pad_frames() const;
  int min_speech_frames() const;
};

struct Segment {
  int64_t start_frame = 0;  // first frame of the segment (pre-speech padding included)
  int64_t end_frame = 0;    // one past the last frame
  bool operator==(const Segment&) const = default;
};

enum class SegmentEvent : uint8_t { None, SpeechStart, SpeechEnd, Misfire };

class SpeechSegmenter {
 public:
  explicit SpeechSegmenter(const SegmenterOptions& options = {});

  // Feeds the next frame's probability. On SpeechEnd, `segment` holds the finished segment. NaN counts as
  // neither speech nor silence.
  SegmentEvent push(float probability, Segment* segment = nullptr);
  // End of stream: SpeechEnd (with `segment`) or Misfire when a segment was open, else None.
  SegmentEvent finish(Segment* segment = nullptr);
  bool speaking() const { return speaking_; }

 private:
  SegmentEvent close(Segment* segment);

  SegmenterOptions options_;
  int redemption_frames_, pre_pad_frames_, min_speech_frames_;
  int64_t next_frame_ = 0;     // index of the next pushed frame
  int64_t buffer_start_ = 0;   // first frame of the buffered (candidate) segment
  int64_t speech_frames_ = 0;  // speech frames in the buffer
  int redemption_count_ = 0;
  bool speaking_ = false;
};

// The whole stream at once: every reported segment, in order.
std::vector<Segment> find_segments(std::span<const float> probabilities,
                                   const SegmenterOptions& options = {});

}  // namespace sotto::vad
