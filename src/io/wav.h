// WAV (RIFF/WAVE) reading and writing. parse_wav() walks the chunks and checks the `fmt ` chunk against
// itself and the file without touching the samples; decode_wav() turns the `data` chunk into float32 in
// [-1, 1), interleaved. encode_wav() is the inverse, for tests and tools.
//
// Supported: PCM (format 1) 8-bit unsigned, 16/24/32-bit signed; IEEE float (format 3) 32/64-bit; and
// WAVE_FORMAT_EXTENSIBLE (0xFFFE) whose subformat GUID is PCM or IEEE float (valid bits below the container
// size are fine: samples are left-justified, so they scale like the container). Any channel count that
// fits a 16-bit block_align; sample rates 1 .. 1,000,000 Hz. RF64, A-law/mu-law and ADPCM are rejected.
//
// Chunks: the RIFF size is not trusted (streaming writers leave it 0 or 0xFFFFFFFF), chunks are walked up
// to the end of the file, odd-sized chunks are followed by one pad byte, unknown chunks are skipped. A
// `data` chunk whose size is 0xFFFFFFFF or runs past the end of the file (a stream that was never
// finalised, or a cut download) is CLAMPED to the whole frames present; WavInfo::data_clamped records it
// and describe_wav() shows a note. A `data` chunk before `fmt ` is an error.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "core/error.h"

namespace sotto {

enum class WavEncoding : uint8_t { PcmU8, PcmS16, PcmS24, PcmS32, Float32, Float64 };

// "pcm_u8", "pcm_s16le", "pcm_s24le", "pcm_s32le", "f32le", "f64le" (ffmpeg's names).
std::string_view wav_encoding_name(WavEncoding encoding);
uint32_t wav_encoding_bits(WavEncoding encoding);

inline constexpr uint32_t kWavMaxSampleRateHz = 1'000'000;

struct WavInfo {
  WavEncoding encoding = WavEncoding::PcmS16;
  uint16_t format_tag = 1;  // as written in the file: 1, 3 or 0xFFFE
  uint32_t channels = 0;
  uint32_t sample_rate_hz = 0;
  uint32_t bits_per_sample = 0;    // container bits (8, 16, 24, 32, 64)
  uint32_t valid_bits = 0;         // extensible's wValidBitsPerSample; = bits_per_sample otherwise
  uint32_t block_align_bytes = 0;  // bytes of one frame (all channels)
  uint64_t frames = 0;
  uint64_t data_offset = 0;          // byte offset of the first sample in the file
  uint64_t declared_data_bytes = 0;  // the data chunk's own size field
  bool data_clamped = false;         // declared size ran past the file (or was 0xFFFFFFFF): clamped to it
  std::span<const uint8_t> data;     // frames * block_align_bytes bytes, inside the caller's buffer

  double duration_s() const { return sample_rate_hz ? static_cast<double>(frames) / sample_rate_hz : 0.0; }
};

// Decoded audio: float32 samples, interleaved frame by frame (channel 0 of frame 0, channel 1 of frame 0...).
struct Audio {
  uint32_t sample_rate_hz = 0;
  uint32_t channels = 0;
  std::vector<float> samples;

  uint64_t frames() const { return channels ? samples.size() / channels : 0; }
};

Result<WavInfo> parse_wav(std::span<const uint8_t> bytes);

// Integer PCM scales by the container's full scale (s16: v / 32768, u8: (v - 128) / 128), so integers map
// to [-1, 1). Float data is passed through unchanged (NaN and values outside [-1, 1] included).
Result<Audio> decode_wav(std::span<const uint8_t> bytes);
Audio decode_wav_data(const WavInfo& info);

// One channel: the average of all channels per frame (the input itself for mono).
std::vector<float> to_mono(const Audio& audio);

// Writes a canonical WAV (44-byte header; 68 with extensible). Integer encodings round to nearest and clip
// to the representable range; NaN becomes 0. Fails on a channel count of 0, a sample count that is not a
// whole number of frames, or a rate outside 1 .. kWavMaxSampleRateHz.
enum class WavLayout : uint8_t { Plain, Extensible };
Result<std::vector<uint8_t>> encode_wav(const Audio& audio, WavEncoding encoding,
                                        WavLayout layout = WavLayout::Plain);

}  // namespace sotto
