// libFuzzer target for the WAV reader and the resampler: parse, describe, decode, mix to mono and resample a
// bounded prefix to 16 kHz both in one shot and streamed in input-derived chunks, which must agree bit for
// bit. Seeds: tests/fuzz/corpus/wav/.
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <span>
#include <vector>

#include "audio/resample.h"
#include "fuzz_support.h"
#include "io/describe.h"
#include "io/wav.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::span<const uint8_t> bytes(data, size);
  auto described = sotto::describe_wav(bytes);
  auto info = sotto::parse_wav(bytes);
  require_one_line_error(info);
  if (info.ok() != described.ok()) std::abort();
  if (!info.ok()) return 0;
  if (info->data.data() + info->data.size() > data + size) std::abort();
  auto audio = sotto::decode_wav(bytes);
  if (!audio.ok() || audio->samples.size() != info->frames * info->channels) std::abort();
  std::vector<float> mono = sotto::to_mono(*audio);

  // At most ~4096 output frames, so slow ratios stay fast.
  const uint64_t max_in_frames = 4096ull * info->sample_rate_hz / 16000 + 1;
  if (mono.size() > max_in_frames) mono.resize(static_cast<size_t>(max_in_frames));
  auto streaming = sotto::Resampler::create(info->sample_rate_hz, 16000);
  if (!streaming.ok()) return 0;        // a rate outside the resampler's ratio limit
  sotto::Resampler whole = *streaming;  // a copy, so the filter table is built once per input
  std::vector<float> one_shot;
  whole.process(mono, one_shot);
  whole.finish(one_shot);
  if (one_shot.size() != sotto::resampled_frames(mono.size(), info->sample_rate_hz, 16000)) std::abort();

  std::vector<float> streamed;
  const size_t chunk = 1 + (size > 0 ? data[size - 1] : 0) * 7;
  for (size_t pos = 0; pos < mono.size(); pos += chunk) {
    const size_t n = mono.size() - pos < chunk ? mono.size() - pos : chunk;
    streaming->process(std::span<const float>(mono).subspan(pos, n), streamed);
  }
  streaming->finish(streamed);
  // Bitwise, so NaN outputs compare equal to themselves.
  if (streamed.size() != one_shot.size() ||
      (!streamed.empty() &&
       std::memcmp(streamed.data(), one_shot.data(), streamed.size() * sizeof(float)) != 0))
    std::abort();
  return 0;
}
