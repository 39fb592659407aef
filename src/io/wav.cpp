// WAV reading and writing; see wav.h for what is supported and how odd files are treated.
#include "io/wav.h"

#include <algorithm>
#include <cstring>
#include <optional>
#include <string>

#include "io/byte_reader.h"
#include "io/describe.h"

namespace sotto {

namespace {

constexpr uint16_t kFormatPcm = 1;
constexpr uint16_t kFormatFloat = 3;
constexpr uint16_t kFormatExtensible = 0xFFFE;

// KSDATAFORMAT_SUBTYPE_PCM / _IEEE_FLOAT are {0000000X-0000-0010-8000-00AA00389B71}: the format tag in the
// first two bytes, then this fixed tail (mmreg.h / ksmedia.h).
constexpr uint8_t kGuidTail[14] = {0x00, 0x00, 0x00, 0x00, 0x10, 0x00, 0x80,
                                   0x00, 0x00, 0xAA, 0x00, 0x38, 0x9B, 0x71};

bool is_tag(std::span<const uint8_t> four, const char* tag) {
  return std::memcmp(four.data(), tag, 4) == 0;
}

std::string printable_tag(std::span<const uint8_t> four) {
  std::string s;
  for (uint8_t c : four) s.push_back(c >= 0x20 && c < 0x7F ? static_cast<char>(c) : '?');
  return s;
}

uint16_t load_u16(const uint8_t* p) {
  return static_cast<uint16_t>(p[0] | (p[1] << 8));
}
uint32_t load_u32(const uint8_t* p) {
  return static_cast<uint32_t>(p[0]) | (static_cast<uint32_t>(p[1]) << 8) |
         (static_cast<uint32_t>(p[2]) << 16) | (static_cast<uint32_t>(p[3]) << 24);
}

struct FmtChunk {
  uint16_t format_tag = 0;
  uint16_t channels = 0;
  uint32_t sample_rate_hz = 0;
  uint16_t block_align = 0;
  uint16_t bits = 0;
  uint16_t valid_bits = 0;
  uint16_t sub_format = 0;  // the effective format: the tag, or the GUID's for extensible
};

Result<FmtChunk> read_fmt(std::span<const uint8_t> body, uint64_t chunk_offset) {
  if (body.size() < 16)
    return error("wav: 'fmt ' chunk at byte ", chunk_offset, " is ", body.size(),
                 " bytes, less than the 16 it needs");
  FmtChunk f;
  f.format_tag = load_u16(body.data());
  f.channels = load_u16(body.data() + 2);
  f.sample_rate_hz = load_u32(body.data() + 4);
  // byte_rate (offset 8) is not checked: some writers get it wrong and nothing here uses it.
  f.block_align = load_u16(body.data() + 12);
  f.bits = load_u16(body.data() + 14);
  f.valid_bits = f.bits;
  f.sub_format = f.format_tag;
  if (f.format_tag == kFormatExtensible) {
    if (body.size() < 40)
      return error("wav: extensible 'fmt ' chunk at byte ", chunk_offset, " is ", body.size(),
                   " bytes, less than the 40 it needs");
    const uint16_t cb_size = load_u16(body.data() + 16);
    if (cb_size < 22)
      return error("wav: extensible 'fmt ' chunk at byte ", chunk_offset, " has cbSize ", cb_size,
                   ", less than 22");
    f.valid_bits = load_u16(body.data() + 18);
    const uint8_t* guid = body.data() + 24;  // after cbSize, valid bits and the 4-byte channel mask
    f.sub_format = load_u16(guid);
    if (std::memcmp(guid + 2, kGuidTail, sizeof kGuidTail) != 0)
      return error("wav: extensible 'fmt ' chunk at byte ", chunk_offset,
                   " has a subformat GUID that is neither PCM nor IEEE float");
  }
  return f;
}

Result<WavEncoding> pick_encoding(const FmtChunk& f) {
  if (f.sub_format == kFormatPcm) {
    switch (f.bits) {
      case 8:
        return WavEncoding::PcmU8;
      case 16:
        return WavEncoding::PcmS16;
      case 24:
        return WavEncoding::PcmS24;
      case 32:
        return WavEncoding::PcmS32;
      default:
        return error("wav: PCM with ", f.bits, " bits per sample is not supported (8, 16, 24 or 32)");
    }
  }
  if (f.sub_format == kFormatFloat) {
    if (f.bits == 32) return WavEncoding::Float32;
    if (f.bits == 64) return WavEncoding::Float64;
    return error("wav: IEEE float with ", f.bits, " bits per sample is not supported (32 or 64)");
  }
  const char* hint = f.sub_format == 6   ? " (A-law)"
                     : f.sub_format == 7 ? " (mu-law)"
                     : f.sub_format == 2 ? " (MS ADPCM)"
                                         : "";
  return error("wav: audio format ", f.sub_format, hint, " is not supported (PCM, IEEE float or extensible)");
}

Status check_fmt(const FmtChunk& f, WavEncoding encoding) {
  if (f.channels == 0) return error("wav: 'fmt ' says 0 channels");
  if (f.sample_rate_hz == 0) return error("wav: 'fmt ' says a sample rate of 0 Hz");
  if (f.sample_rate_hz > kWavMaxSampleRateHz)
    return error("wav: sample rate ", f.sample_rate_hz, " Hz is above the ", kWavMaxSampleRateHz,
                 " Hz limit");
  const uint32_t expected_align = static_cast<uint32_t>(f.channels) * (wav_encoding_bits(encoding) / 8);
  if (f.block_align != expected_align)
    return error("wav: block_align is ", f.block_align, " bytes but ", f.channels, " channels of ", f.bits,
                 " bits need ", expected_align);
  if (f.valid_bits == 0 || f.valid_bits > f.bits)
    return error("wav: valid bits per sample is ", f.valid_bits, ", outside 1 .. ", f.bits);
  return {};
}

}  // namespace

std::string_view wav_encoding_name(WavEncoding encoding) {
  switch (encoding) {
    case WavEncoding::PcmU8:
      return "pcm_u8";
    case WavEncoding::PcmS16:
      return "pcm_s16le";
    case WavEncoding::PcmS24:
      return "pcm_s24le";
    case WavEncoding::PcmS32:
      return "pcm_s32le";
    case WavEncoding::Float32:
      return "f32le";
    case WavEncoding::Float64:
      return "f64le";
  }
  return "unknown";
}

uint32_t wav_encoding_bits(WavEncoding encoding) {
  switch (encoding) {
    case WavEncoding::PcmU8:
      return 8;
    case WavEncoding::PcmS16:
      return 16;
    case WavEncoding::PcmS24:
      return 24;
    case WavEncoding::PcmS32:
      return 32;
    case WavEncoding::Float32:
      return 32;
    case WavEncoding::Float64:
      return 64;
  }
  return 0;
}

Result<WavInfo> parse_wav(std::span<const uint8_t> bytes) {
  ByteReader r(bytes, "wav");
  SOTTO_ASSIGN(auto riff, r.view(4, "RIFF tag"));
  if (is_tag(riff, "RF64")) return error("wav: RF64 (64-bit RIFF) files are not supported");
  if (!is_tag(riff, "RIFF"))
    return error("wav: file does not start with 'RIFF' (it starts with '", printable_tag(riff), "')");
  SOTTO_TRY(r.skip(4, "RIFF size"));  // not trusted: walk to the end of the file instead
  SOTTO_ASSIGN(auto wave, r.view(4, "WAVE tag"));
  if (!is_tag(wave, "WAVE")) return error("wav: RIFF form is '", printable_tag(wave), "', not 'WAVE'");

  std::optional<FmtChunk> fmt;
  while (r.remaining() >= 8) {
    const uint64_t chunk_offset = r.pos();
    SOTTO_ASSIGN(auto id, r.view(4, "chunk id"));
    SOTTO_ASSIGN(uint32_t size, r.read<uint32_t>("chunk size"));
    if (is_tag(id, "fmt ")) {
      if (fmt) return error("wav: second 'fmt ' chunk at byte ", chunk_offset);
      if (size > r.remaining())
        return error("wav: 'fmt ' chunk at byte ", chunk_offset, " is ", size,
                     " bytes, past the end of the file (", bytes.size(), " bytes)");
      SOTTO_ASSIGN(auto body, r.view(size, "'fmt ' chunk"));
      SOTTO_ASSIGN(fmt, read_fmt(body, chunk_offset));
    } else if (is_tag(id, "data")) {
      if (!fmt) return error("wav: 'data' chunk at byte ", chunk_offset, " comes before any 'fmt ' chunk");
      SOTTO_ASSIGN(WavEncoding encoding, pick_encoding(*fmt));
      SOTTO_TRY(check_fmt(*fmt, encoding));
      WavInfo info;
      info.encoding = encoding;
      info.format_tag = fmt->format_tag;
      info.channels = fmt->channels;
      info.sample_rate_hz = fmt->sample_rate_hz;
      info.bits_per_sample = fmt->bits;
      info.valid_bits = fmt->valid_bits;
      info.block_align_bytes = fmt->block_align;
      info.data_offset = r.pos();
      info.declared_data_bytes = size;
      uint64_t data_bytes = size;
      if (size == 0xFFFFFFFFu || size > r.remaining()) {
        data_bytes = r.remaining();
        info.data_clamped = true;
      }
      info.frames = data_bytes / info.block_align_bytes;  // a partial last frame is dropped
      info.data = bytes.subspan(static_cast<size_t>(info.data_offset),
                                static_cast<size_t>(info.frames * info.block_align_bytes));
      return info;
    } else {
      // Unknown chunk (LIST, fact, cue, bext ...): skip it and its pad byte. A size past the end means the
      // file ends inside it, so there is no data chunk after it.
      const uint64_t padded = static_cast<uint64_t>(size) + (size & 1u);
      if (padded > r.remaining()) {
        if (size > r.remaining())
          return error("wav: chunk '", printable_tag(id), "' at byte ", chunk_offset, " is ", size,
                       " bytes, past the end of the file (", bytes.size(),
                       " bytes), and no 'data' chunk came before it");
        break;  // only the pad byte is missing: the file simply ends here
      }
      SOTTO_TRY(r.skip(padded, "chunk"));
      continue;
    }
    if (size & 1u) {
      if (r.remaining() == 0) break;
      SOTTO_TRY(r.skip(1, "pad byte"));
    }
  }
  if (!fmt) return error("wav: no 'fmt ' chunk in the file (", bytes.size(), " bytes)");
  return error("wav: no 'data' chunk in the file (", bytes.size(), " bytes)");
}

namespace {

// Integer PCM: scale by the container's full scale, so -32768 -> -1 and 32767 -> 0.99997.
template <class Load>
void decode_loop(const uint8_t* src, uint64_t n_samples, uint32_t bytes_per_sample, float* out, Load load) {
  for (uint64_t i = 0; i < n_samples; ++i) out[i] = load(src + i * bytes_per_sample);
}

}  // namespace

Audio decode_wav_data(const WavInfo& info) {
  Audio audio;
  audio.sample_rate_hz = info.sample_rate_hz;
  audio.channels = info.channels;
  const uint64_t n_samples = info.frames * info.channels;  // <= data bytes, so bounded by the file size
  audio.samples.resize(static_cast<size_t>(n_samples));
  const uint8_t* src = info.data.data();
  float* out = audio.samples.data();
  switch (info.encoding) {
    case WavEncoding::PcmU8:
      decode_loop(src, n_samples, 1, out,
                  [](const uint8_t* p) { return (static_cast<int>(p[0]) - 128) * (1.0f / 128); });
      break;
    case WavEncoding::PcmS16:
      decode_loop(src, n_samples, 2, out,
                  [](const uint8_t* p) { return static_cast<int16_t>(load_u16(p)) * (1.0f / 32768); });
      break;
    case WavEncoding::PcmS24:
      decode_loop(src, n_samples, 3, out, [](const uint8_t* p) {
        // Place the 24 bits at the top of an int32 so the sign comes for free, then scale by 2^31.
        const uint32_t u = (static_cast<uint32_t>(p[0]) << 8) | (static_cast<uint32_t>(p[1]) << 16) |
                           (static_cast<uint32_t>(p[2]) << 24);
        return static_cast<float>(static_cast<int32_t>(u) * (1.0 / 2147483648.0));
      });
      break;
    case WavEncoding::PcmS32:
      decode_loop(src, n_samples, 4, out, [](const uint8_t* p) {
        return static_cast<float>(static_cast<int32_t>(load_u32(p)) * (1.0 / 2147483648.0));
      });
      break;
    case WavEncoding::Float32:
      decode_loop(src, n_samples, 4, out, [](const uint8_t* p) {
        float v;
        std::memcpy(&v, p, 4);
        return v;
      });
      break;
    case WavEncoding::Float64:
      decode_loop(src, n_samples, 8, out, [](const uint8_t* p) {
        double v;
        std::memcpy(&v, p, 8);
        return static_cast<float>(v);
      });
      break;
  }
  return audio;
}

Result<Audio> decode_wav(std::span<const uint8_t> bytes) {
  SOTTO_ASSIGN(WavInfo info, parse_wav(bytes));
  return decode_wav_data(info);
}

std::vector<float> to_mono(const Audio& audio) {
  if (audio.channels <= 1) return audio.samples;
  const uint64_t frames = audio.frames();
  std::vector<float> mono(static_cast<size_t>(frames));
  const float scale = 1.0f / static_cast<float>(audio.channels);
  for (uint64_t f = 0; f < frames; ++f) {
    const float* frame = audio.samples.data() + f * audio.channels;
    float sum = 0;
    for (uint32_t c = 0; c < audio.channels; ++c) sum += frame[c];
    mono[f] = sum * scale;
  }
  return mono;
}

// ---------------------------------------------------------------- writer

namespace {

void put_u16(std::vector<uint8_t>& out, uint32_t v) {
  out.push_back(static_cast<uint8_t>(v));
  out.push_back(static_cast<uint8_t>(v >> 8));
}
void put_u32(std::vector<uint8_t>& out, uint32_t v) {
  put_u16(out, v & 0xFFFF);
  put_u16(out, v >> 16);
}
void put_tag(std::vector<uint8_t>& out, const char* tag) {
  out.insert(out.end(), tag, tag + 4);
}

int64_t quantize(float x, double full_scale, int64_t lo, int64_t hi) {
  if (x != x) return 0;  // NaN
  // A compiler builtin, not <cmath>: portable code has no libm on wasm (where this is f64.nearest).
  const double v = __builtin_nearbyint(static_cast<double>(x) * full_scale);
  if (v <= static_cast<double>(lo)) return lo;
  if (v >= static_cast<double>(hi)) return hi;
  return static_cast<int64_t>(v);
}

}  // namespace

Result<std::vector<uint8_t>> encode_wav(const Audio& audio, WavEncoding encoding, WavLayout layout) {
  if (audio.channels == 0 || audio.channels > 0xFFFF)
    return error("wav: cannot write ", audio.channels, " channels");
  if (audio.samples.size() % audio.channels != 0)
    return error("wav: ", audio.samples.size(), " samples is not a whole number of ", audio.channels,
                 "-channel frames");
  if (audio.sample_rate_hz == 0 || audio.sample_rate_hz > kWavMaxSampleRateHz)
    return error("wav: cannot write a sample rate of ", audio.sample_rate_hz, " Hz");
  const uint32_t bytes_per_sample = wav_encoding_bits(encoding) / 8;
  const uint64_t block_align = static_cast<uint64_t>(audio.channels) * bytes_per_sample;
  if (block_align > 0xFFFF)
    return error("wav: ", audio.channels, " channels make a frame too wide for block_align");
  const uint64_t data_bytes = audio.samples.size() * static_cast<uint64_t>(bytes_per_sample);
  const bool extensible = layout == WavLayout::Extensible;
  const uint32_t fmt_bytes = extensible ? 40 : 16;
  if (data_bytes + 12 + 8 + fmt_bytes + 8 > 0xFFFFFFFFu)
    return error("wav: ", data_bytes, " bytes of samples do not fit in a WAV");
  const bool is_float = encoding == WavEncoding::Float32 || encoding == WavEncoding::Float64;
  const uint16_t sub_format = is_float ? kFormatFloat : kFormatPcm;

  std::vector<uint8_t> out;
  out.reserve(static_cast<size_t>(20 + fmt_bytes + 8 + data_bytes + (data_bytes & 1)));
  put_tag(out, "RIFF");
  put_u32(out, static_cast<uint32_t>(4 + 8 + fmt_bytes + 8 + data_bytes + (data_bytes & 1)));
  put_tag(out, "WAVE");
  put_tag(out, "fmt ");
  put_u32(out, fmt_bytes);
  put_u16(out, extensible ? kFormatExtensible : sub_format);
  put_u16(out, audio.channels);
  put_u32(out, audio.sample_rate_hz);
  put_u32(out, static_cast<uint32_t>(audio.sample_rate_hz * block_align));
  put_u16(out, static_cast<uint32_t>(block_align));
  put_u16(out, bytes_per_sample * 8);
  if (extensible) {
    put_u16(out, 22);                    // cbSize
    put_u16(out, bytes_per_sample * 8);  // valid bits
    put_u32(out, 0);                     // channel mask: no speaker positions
    put_u16(out, sub_format);
    out.insert(out.end(), kGuidTail, kGuidTail + sizeof kGuidTail);
  }
  put_tag(out, "data");
  put_u32(out, static_cast<uint32_t>(data_bytes));
  for (float x : audio.samples) {
    switch (encoding) {
      case WavEncoding::PcmU8:
        out.push_back(static_cast<uint8_t>(quantize(x, 128, -128, 127) + 128));
        break;
      case WavEncoding::PcmS16:
        put_u16(out, static_cast<uint32_t>(quantize(x, 32768, -32768, 32767)));
        break;
      case WavEncoding::PcmS24: {
        const uint32_t v = static_cast<uint32_t>(quantize(x, 8388608, -8388608, 8388607));
        out.push_back(static_cast<uint8_t>(v));
        out.push_back(static_cast<uint8_t>(v >> 8));
        out.push_back(static_cast<uint8_t>(v >> 16));
        break;
      }
      case WavEncoding::PcmS32:
        put_u32(out, static_cast<uint32_t>(quantize(x, 2147483648.0, INT32_MIN, INT32_MAX)));
        break;
      case WavEncoding::Float32: {
        uint8_t b[4];
        std::memcpy(b, &x, 4);
        out.insert(out.end(), b, b + 4);
        break;
      }
      case WavEncoding::Float64: {
        const double d = x;
        uint8_t b[8];
        std::memcpy(b, &d, 8);
        out.insert(out.end(), b, b + 8);
        break;
      }
    }
  }
  if (data_bytes & 1) out.push_back(0);  // pad byte after an odd-sized chunk
  return out;
}

// ---------------------------------------------------------------- describe

// `sotto info file.wav`: the stream parameters as metadata. No tensors: the samples are not a model tensor,
// and their type (int16, 24-bit packed ...) has no DType; WavInfo::data points at them for code that wants
// them.
Result<FileDescription> describe_wav(std::span<const uint8_t> bytes) {
  SOTTO_ASSIGN(WavInfo info, parse_wav(bytes));
  FileDescription d;
  d.format = "wav";
  auto add_u = [&](const char* key, uint64_t v) { d.metadata.push_back({key, "u64", cat(v), cat(v)}); };
  auto add_s = [&](const char* key, std::string_view v) {
    // The values written here are fixed ASCII words with nothing to escape.
    d.metadata.push_back({key, "string", cat('"', v, '"'), std::string(v)});
  };
  add_u("sample_rate_hz", info.sample_rate_hz);
  add_u("channels", info.channels);
  add_u("bits_per_sample", info.bits_per_sample);
  if (info.valid_bits != info.bits_per_sample) add_u("valid_bits_per_sample", info.valid_bits);
  add_s("encoding", wav_encoding_name(info.encoding));
  add_s("layout", info.format_tag == kFormatExtensible ? "extensible" : "plain");
  add_u("frames", info.frames);
  const double duration_s = info.duration_s();
  d.metadata.push_back({"duration_s", "f64", cat(duration_s), cat(duration_s)});
  add_u("data_offset", info.data_offset);
  if (info.data_clamped) {
    add_s("note", "data_size_clamped_to_file");
    d.metadata.back().text =
        cat("the data chunk declares ", info.declared_data_bytes,
            " bytes, more than the file holds; read the ", info.data.size(), " bytes present");
    d.metadata.back().json = cat('"', d.metadata.back().text, '"');
  }
  return d;
}

}  // namespace sotto
