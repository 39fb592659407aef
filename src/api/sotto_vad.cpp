// The C API's voice activity detection (api/sotto.h): a handle owns the Silero weights (copied out of the
// caller's ONNX bytes), one stream (SileroVad's LSTM state and sample context), and a buffer for the audio and
// JSON it hands out. The segmenter handle wraps models/vad/segmenter.h, so the page, the CLI and the tests use
// one implementation of the speech start / end rules.
#include <algorithm>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "api/sotto.h"
#include "audio/resample.h"
#include "audio/wav_audio.h"
#include "gpu/device.h"
#include "io/onnx.h"
#include "io/wav.h"
#include "models/vad/segmenter.h"
#include "models/vad/silero.h"

struct SottoVad {
  std::string last_error;
  std::unique_ptr<sotto::vad::SileroWeights> weights;  // stable address: the stream keeps a pointer
  std::unique_ptr<sotto::gpu::Device> device;          // the GPU stream's (destroyed after it)
  std::optional<sotto::vad::SileroVad> stream;
  std::vector<float> audio;  // what decode_wav / resample hand out
  std::string notes;         // what the last decode_wav could not read at face value
  std::string json;          // what clip_json hands out
};

struct SottoVadSegmenter {
  sotto::vad::SegmenterOptions options;
  sotto::vad::SpeechSegmenter segmenter;
};

namespace {

using sotto::cat;

// Starts a call on a handle that needs a model; sets the error otherwise.
bool ready(SottoVad* vad) {
  if (!vad) return false;
  vad->last_error.clear();
  if (!vad->stream) {
    vad->last_error = "vad: no model loaded";
    return false;
  }
  return true;
}

// A GPU stream's first failure (a lost device, a read that could not wait) as the handle's error.
bool gpu_failed(SottoVad* vad) {
  if (vad->stream->status().ok()) return false;
  vad->last_error = vad->stream->status().message();
  return true;
}

sotto::vad::SegmenterOptions to_options(const SottoVadOptions* o) {
  sotto::vad::SegmenterOptions out;
  if (!o) return out;
  out.positive_threshold = o->positive_threshold;
  out.negative_threshold = o->negative_threshold;
  out.redemption_ms = o->redemption_ms;
  out.pre_speech_pad_ms = o->pre_speech_pad_ms;
  out.min_speech_ms = o->min_speech_ms;
  out.frame_ms = o->frame_ms;
  return out;
}

int32_t event_code(sotto::vad::SegmentEvent event) {
  switch (event) {
    case sotto::vad::SegmentEvent::SpeechStart:
      return SOTTO_VAD_SPEECH_START;
    case sotto::vad::SegmentEvent::SpeechEnd:
      return SOTTO_VAD_SPEECH_END;
    case sotto::vad::SegmentEvent::Misfire:
      return SOTTO_VAD_MISFIRE;
    case sotto::vad::SegmentEvent::None:
      break;
  }
  return SOTTO_VAD_NONE;
}

const float* give_audio(SottoVad* vad, std::vector<float> samples, size_t* out_samples) {
  vad->audio = std::move(samples);
  vad->audio.reserve(1);  // so that an empty result is still a non-null pointer (null means failure)
  if (out_samples) *out_samples = vad->audio.size();
  return vad->audio.data();
}

}  // namespace

extern "C" {

SottoVad* sotto_vad_create(void) {
  return new SottoVad();
}

void sotto_vad_destroy(SottoVad* vad) {
  delete vad;
}

const char* sotto_vad_last_error(const SottoVad* vad) {
  return vad ? vad->last_error.c_str() : "vad: null handle";
}

int32_t sotto_vad_load(SottoVad* vad, const uint8_t* bytes, size_t size, int32_t sample_rate_hz) {
  if (!vad) return SOTTO_ERROR_ARGUMENT;
  vad->last_error.clear();
  if (!bytes || size == 0) {
    vad->last_error = "vad: empty model file";
    return SOTTO_ERROR_ARGUMENT;
  }
  if (sample_rate_hz != 16000 && sample_rate_hz != 8000) {
    vad->last_error = cat("vad: sample rate ", sample_rate_hz, " Hz is not supported (16000 or 8000)");
    return SOTTO_ERROR_ARGUMENT;
  }
  auto model = sotto::parse_onnx({bytes, size});
  if (!model) {
    vad->last_error = model.message();
    return SOTTO_ERROR_FILE;
  }
  auto weights = sotto::vad::load_silero_weights(*model, static_cast<uint32_t>(sample_rate_hz));
  if (!weights) {
    vad->last_error = weights.message();
    return SOTTO_ERROR_FILE;
  }
  vad->stream.reset();
  vad->device.reset();  // a new model starts on the CPU
  vad->weights = std::make_unique<sotto::vad::SileroWeights>(std::move(weights).value());
  vad->stream.emplace(*vad->weights);
  return SOTTO_OK;
}

int32_t sotto_vad_set_backend(SottoVad* vad, int32_t backend) {
  if (!ready(vad)) return SOTTO_ERROR_ARGUMENT;
  if (backend != SOTTO_BACKEND_CPU && backend != SOTTO_BACKEND_WEBGPU) {
    vad->last_error = cat("vad: unknown backend ", backend, " (0 cpu, 1 webgpu)");
    return SOTTO_ERROR_ARGUMENT;
  }
  if (backend == SOTTO_BACKEND_WEBGPU && !vad->device) {
    auto opened = sotto::gpu::open_device({});
    if (!opened) {
      vad->last_error = cat("vad: ", opened.message());
      return SOTTO_ERROR_RUN;
    }
    vad->device = std::move(opened).value();
  }
  vad->stream.reset();
  vad->stream.emplace(*vad->weights, backend == SOTTO_BACKEND_WEBGPU ? vad->device.get() : nullptr);
  if (backend == SOTTO_BACKEND_CPU) vad->device.reset();
  if (gpu_failed(vad)) {
    vad->stream.reset();
    vad->stream.emplace(*vad->weights);
    vad->device.reset();
    return SOTTO_ERROR_RUN;
  }
  return SOTTO_OK;
}

int32_t sotto_vad_backend(const SottoVad* vad) {
  return vad && vad->device ? SOTTO_BACKEND_WEBGPU : SOTTO_BACKEND_CPU;
}

int32_t sotto_vad_frame_samples(const SottoVad* vad) {
  return vad && vad->stream ? vad->stream->frame_samples() : 0;
}

int32_t sotto_vad_sample_rate(const SottoVad* vad) {
  return vad && vad->stream ? static_cast<int32_t>(vad->stream->sample_rate_hz()) : 0;
}

void sotto_vad_reset(SottoVad* vad) {
  if (vad && vad->stream) vad->stream->reset();
}

float sotto_vad_process(SottoVad* vad, const float* frame, size_t n_samples) {
  if (!ready(vad)) return -1.0f;
  if (!frame && n_samples > 0) {
    vad->last_error = "vad: null frame";
    return -1.0f;
  }
  const float p = vad->stream->forward({frame, n_samples});
  return gpu_failed(vad) ? -1.0f : p;
}

int64_t sotto_vad_frame_count(const SottoVad* vad, size_t n_samples) {
  const size_t frame = static_cast<size_t>(sotto_vad_frame_samples(vad));
  return frame ? static_cast<int64_t>((n_samples + frame - 1) / frame) : 0;
}

int64_t sotto_vad_process_clip(SottoVad* vad, const float* samples, size_t n_samples, float* probs,
                               size_t capacity) {
  if (!ready(vad)) return -1;
  if ((!samples && n_samples > 0) || (!probs && capacity > 0)) {
    vad->last_error = "vad: null buffer";
    return -1;
  }
  const size_t frame = static_cast<size_t>(vad->stream->frame_samples());
  int64_t frames = 0;
  for (size_t start = 0; start < n_samples; start += frame, ++frames) {
    const float p = vad->stream->forward({samples + start, std::min(frame, n_samples - start)});
    if (gpu_failed(vad)) return -1;
    if (static_cast<size_t>(frames) < capacity) probs[frames] = p;
  }
  return frames;
}

const char* sotto_vad_notes(const SottoVad* vad) {
  return vad ? vad->notes.c_str() : "";
}

const float* sotto_vad_decode_wav(SottoVad* vad, const uint8_t* bytes, size_t size, size_t* out_samples) {
  if (!ready(vad)) return nullptr;
  vad->notes.clear();
  if (!bytes && size > 0) {
    vad->last_error = "vad: null buffer";
    return nullptr;
  }
  auto audio = sotto::wav_to_speech_audio({bytes, size}, vad->stream->sample_rate_hz());
  if (!audio) {
    vad->last_error = audio.message();
    return nullptr;
  }
  vad->notes = std::move(audio->notes);
  return give_audio(vad, std::move(audio->samples), out_samples);
}

const float* sotto_vad_resample(SottoVad* vad, const float* samples, size_t n_samples, int32_t in_rate_hz,
                                size_t* out_samples) {
  if (!ready(vad)) return nullptr;
  if (!samples && n_samples > 0) {
    vad->last_error = "vad: null buffer";
    return nullptr;
  }
  if (in_rate_hz <= 0) {
    vad->last_error = cat("vad: bad input sample rate ", in_rate_hz, " Hz");
    return nullptr;
  }
  const uint32_t rate_hz = vad->stream->sample_rate_hz();
  if (static_cast<uint32_t>(in_rate_hz) == rate_hz)
    return give_audio(vad, std::vector<float>(samples, samples + n_samples), out_samples);
  auto resampled = sotto::resample({samples, n_samples}, 1, static_cast<uint32_t>(in_rate_hz), rate_hz);
  if (!resampled) {
    vad->last_error = resampled.message();
    return nullptr;
  }
  return give_audio(vad, std::move(resampled).value(), out_samples);
}

// The same text as cli/vad.cpp's --json output (numbers through cat(): shortest round-trip of the double).
const char* sotto_vad_clip_json(SottoVad* vad, const float* samples, size_t n_samples,
                                const SottoVadOptions* options, size_t* out_bytes) {
  if (!ready(vad)) return nullptr;
  if (!samples && n_samples > 0) {
    vad->last_error = "vad: null buffer";
    return nullptr;
  }
  sotto::vad::SegmenterOptions segmenter = to_options(options);
  segmenter.frame_ms = 1000.0 * vad->stream->frame_samples() / vad->stream->sample_rate_hz();
  vad->stream->reset();
  const std::vector<float> probs = sotto::vad::speech_probabilities(*vad->stream, {samples, n_samples});
  vad->stream->reset();
  if (gpu_failed(vad)) return nullptr;
  const std::vector<sotto::vad::Segment> segments = sotto::vad::find_segments(probs, segmenter);
  const double frame_s = segmenter.frame_ms / 1000.0;
  std::string out = cat("{\"frame_ms\":", segmenter.frame_ms, ",\"probs\":[");
  for (size_t i = 0; i < probs.size(); ++i) out += cat(i ? "," : "", probs[i]);
  out += "],\"segments\":[";
  for (size_t i = 0; i < segments.size(); ++i)
    out += cat(i ? "," : "", "{\"start_s\":", segments[i].start_frame * frame_s,
               ",\"end_s\":", segments[i].end_frame * frame_s, "}");
  out += "]}";
  vad->json = std::move(out);
  if (out_bytes) *out_bytes = vad->json.size();
  return vad->json.c_str();
}

void sotto_vad_segmenter_defaults(SottoVadOptions* out) {
  if (!out) return;
  const sotto::vad::SegmenterOptions d;
  *out = {d.positive_threshold, d.negative_threshold, d.redemption_ms,
          d.pre_speech_pad_ms,  d.min_speech_ms,      d.frame_ms};
}

SottoVadSegmenter* sotto_vad_segmenter_create(const SottoVadOptions* options) {
  const sotto::vad::SegmenterOptions o = to_options(options);
  return new SottoVadSegmenter{o, sotto::vad::SpeechSegmenter(o)};
}

void sotto_vad_segmenter_destroy(SottoVadSegmenter* segmenter) {
  delete segmenter;
}

int32_t sotto_vad_segmenter_push(SottoVadSegmenter* segmenter, float probability, SottoVadSegment* segment) {
  if (!segmenter) return SOTTO_VAD_NONE;
  sotto::vad::Segment s;
  const int32_t event = event_code(segmenter->segmenter.push(probability, &s));
  if (event == SOTTO_VAD_SPEECH_END && segment) *segment = {s.start_frame, s.end_frame};
  return event;
}

int32_t sotto_vad_segmenter_finish(SottoVadSegmenter* segmenter, SottoVadSegment* segment) {
  if (!segmenter) return SOTTO_VAD_NONE;
  sotto::vad::Segment s;
  const int32_t event = event_code(segmenter->segmenter.finish(&s));
  if (event == SOTTO_VAD_SPEECH_END && segment) *segment = {s.start_frame, s.end_frame};
  segmenter->segmenter = sotto::vad::SpeechSegmenter(segmenter->options);
  return event;
}

void sotto_vad_segmenter_reset(SottoVadSegmenter* segmenter) {
  if (segmenter) segmenter->segmenter = sotto::vad::SpeechSegmenter(segmenter->options);
}

int32_t sotto_vad_segmenter_speaking(const SottoVadSegmenter* segmenter) {
  return segmenter && segmenter->segmenter.speaking() ? 1 : 0;
}

}  // extern "C"
