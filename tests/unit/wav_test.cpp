// WAV reader and writer: the fixture files and Python-made files of every encoding against values read by
// Python's wave/struct (tests/data/wav_reference.txt, tools/wav_reference.py), writer round trips, byte-exact
// re-encoding of the fixtures, clamped streaming files, and a malformed-file corpus.
#include "io/wav.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <iterator>
#include <map>
#include <random>
#include <sstream>
#include <string>

#include "io/describe.h"
#include "io/file.h"

namespace sotto {
namespace {

std::vector<uint8_t> read_bytes(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(f), {});
}

std::string resolve(const std::string& where_path) {
  const size_t colon = where_path.find(':');
  const std::string where = where_path.substr(0, colon), rel = where_path.substr(colon + 1);
  return where == "fixtures" ? std::string(SOTTO_FIXTURES_DIR) + "/" + rel
                             : std::string(SOTTO_SOURCE_DIR) + "/tests/data/" + rel;
}

void put_u16(std::vector<uint8_t>& b, size_t at, uint16_t v) {
  std::memcpy(&b[at], &v, 2);
}
void put_u32(std::vector<uint8_t>& b, size_t at, uint32_t v) {
  std::memcpy(&b[at], &v, 4);
}

Audio random_audio(uint32_t channels, size_t frames, uint32_t rate, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1, 1);
  Audio a;
  a.channels = channels;
  a.sample_rate_hz = rate;
  a.samples.resize(channels * frames);
  for (float& v : a.samples) v = u(rng);
  return a;
}

// Every file and sample listed by tools/wav_reference.py.
TEST(Wav, MatchesPythonWaveModule) {
  std::ifstream ref(std::string(SOTTO_SOURCE_DIR) + "/tests/data/wav_reference.txt");
  ASSERT_TRUE(ref) << "missing tests/data/wav_reference.txt";
  std::map<std::string, Audio> decoded;
  std::string line, tag;
  size_t files = 0, samples = 0;
  while (std::getline(ref, line)) {
    std::istringstream in(line);
    if (!(in >> tag) || tag[0] == '#') continue;
    std::string name;
    in >> name;
    if (tag == "wav") {
      uint32_t rate, channels, bits;
      uint64_t frames;
      std::string encoding;
      in >> rate >> channels >> bits >> encoding >> frames;
      const auto bytes = read_bytes(resolve(name));
      ASSERT_FALSE(bytes.empty()) << name;
      auto info = parse_wav(bytes);
      ASSERT_TRUE(info.ok()) << name << ": " << info.message();
      EXPECT_EQ(info->sample_rate_hz, rate) << name;
      EXPECT_EQ(info->channels, channels) << name;
      EXPECT_EQ(info->bits_per_sample, bits) << name;
      EXPECT_EQ(wav_encoding_name(info->encoding), encoding) << name;
      EXPECT_EQ(info->frames, frames) << name;
      EXPECT_FALSE(info->data_clamped) << name;
      auto audio = decode_wav(bytes);
      ASSERT_TRUE(audio.ok()) << name;
      EXPECT_EQ(audio->frames(), frames);
      decoded[name] = std::move(*audio);
      ++files;
    } else {
      uint64_t frame;
      uint32_t channel;
      double expected;
      in >> frame >> channel >> expected;
      const Audio& a = decoded.at(name);
      ASSERT_LT(frame * a.channels + channel, a.samples.size());
      // Python's value is exact (an integer over 2^k, or the file's own float); ours is that value in
      // float32.
      EXPECT_EQ(a.samples[frame * a.channels + channel], static_cast<float>(expected))
          << name << " frame " << frame << " channel " << channel;
      ++samples;
    }
  }
  EXPECT_EQ(files, 14u);
  EXPECT_GT(samples, 300u);
}

TEST(Wav, FixtureHeadersAndDescribe) {
  auto file = MappedFile::open(std::string(SOTTO_FIXTURES_DIR) + "/audio/sample.wav");
  ASSERT_TRUE(file.ok()) << file.message();
  auto info = parse_wav(file->bytes());
  ASSERT_TRUE(info.ok());
  // Not the plain 44-byte header SOURCES.md says: ffmpeg put a 26-byte LIST/INFO chunk (ISFT "Lavf62.3.100")
  // between 'fmt ' and 'data' (seen with xxd), so the samples start at 12 + 24 + 34 + 8 = 78.
  EXPECT_EQ(info->data_offset, 78u);
  EXPECT_EQ(info->data.data(), file->bytes().data() + 78);
  EXPECT_EQ(info->data.size(), 288000u * 2);
  EXPECT_DOUBLE_EQ(info->duration_s(), 12.0);
  auto d = describe_wav(file->bytes());
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->format, "wav");
  EXPECT_TRUE(d->tensors.empty());
  std::map<std::string, std::string> kv;
  for (const auto& e : d->metadata) kv[e.key] = e.json;
  EXPECT_EQ(kv["sample_rate_hz"], "24000");
  EXPECT_EQ(kv["channels"], "1");
  EXPECT_EQ(kv["bits_per_sample"], "16");
  EXPECT_EQ(kv["encoding"], "\"pcm_s16le\"");
  EXPECT_EQ(kv["frames"], "288000");
  EXPECT_EQ(kv["duration_s"], "12");
  EXPECT_EQ(kv.count("note"), 0u);
}

// Decoding then re-encoding a 16-bit file must give back its sample bytes exactly, and for test.wav (the one
// fixture with nothing but 'fmt ' and 'data') the whole file. beckett.wav and two_cities_16k.wav end with
// LIST/id3 chunks after the data, which the reader skips.
TEST(Wav, FixturesReencodeByteExact) {
  for (const char* name : {"beckett.wav", "sample.wav", "test.wav", "two_cities_16k.wav"}) {
    const auto bytes = read_bytes(std::string(SOTTO_FIXTURES_DIR) + "/audio/" + name);
    auto info = parse_wav(bytes);
    auto audio = decode_wav(bytes);
    ASSERT_TRUE(info.ok() && audio.ok()) << name;
    auto again = encode_wav(*audio, WavEncoding::PcmS16);
    ASSERT_TRUE(again.ok());
    ASSERT_EQ(again->size(), 44 + info->data.size());
    EXPECT_TRUE(std::equal(info->data.begin(), info->data.end(), again->begin() + 44)) << name;
    if (std::string(name) == "test.wav") {
      EXPECT_TRUE(*again == bytes);
    }
  }
}

// Values on each encoding's grid survive encode -> decode exactly, plain and extensible, any channel count.
TEST(Wav, WriterRoundTripsEveryEncoding) {
  const WavEncoding encodings[] = {WavEncoding::PcmU8,  WavEncoding::PcmS16,  WavEncoding::PcmS24,
                                   WavEncoding::PcmS32, WavEncoding::Float32, WavEncoding::Float64};
  uint32_t seed = 10;
  for (WavEncoding e : encodings) {
    for (WavLayout layout : {WavLayout::Plain, WavLayout::Extensible}) {
      for (uint32_t channels : {1u, 2u, 5u}) {
        Audio a = random_audio(channels, 37, 22050, ++seed);
        // Snap to the grid the encoding can hold (s32 to 24 bits: float32 holds no more).
        const double grid = e == WavEncoding::PcmU8                                ? 128
                            : e == WavEncoding::PcmS16                             ? 32768
                            : e == WavEncoding::PcmS24 || e == WavEncoding::PcmS32 ? 8388608
                                                                                   : 0;
        if (grid > 0) {
          for (float& v : a.samples)
            v = static_cast<float>(std::min(__builtin_nearbyint(v * grid), grid - 1) / grid);
        }
        auto bytes = encode_wav(a, e, layout);
        ASSERT_TRUE(bytes.ok()) << bytes.message();
        auto info = parse_wav(*bytes);
        ASSERT_TRUE(info.ok()) << info.message();
        EXPECT_EQ(info->encoding, e);
        EXPECT_EQ(info->format_tag, layout == WavLayout::Extensible ? 0xFFFE : (grid > 0 ? 1 : 3));
        EXPECT_EQ(info->channels, channels);
        EXPECT_EQ(info->frames, 37u);
        auto back = decode_wav(*bytes);
        ASSERT_TRUE(back.ok());
        EXPECT_EQ(back->samples, a.samples) << wav_encoding_name(e) << " x" << channels;
      }
    }
  }
}

TEST(Wav, WriterClipsAndZeroesNan) {
  Audio a{8000, 1, {2.0f, -2.0f, NAN, 1.0f, -1.0f}};
  auto bytes = encode_wav(a, WavEncoding::PcmS16);
  ASSERT_TRUE(bytes.ok());
  auto back = decode_wav(*bytes);
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->samples, (std::vector<float>{32767 / 32768.0f, -1.0f, 0.0f, 32767 / 32768.0f, -1.0f}));
  EXPECT_EQ(bytes->size(), 44u + 10u);
  Audio odd{8000, 1, {0.5f, -0.5f, 0.25f}};  // 3 bytes of u8: the writer adds a pad byte
  auto odd_bytes = encode_wav(odd, WavEncoding::PcmU8);
  ASSERT_TRUE(odd_bytes.ok());
  EXPECT_EQ(odd_bytes->size(), 44u + 4u);
  auto odd_back = decode_wav(*odd_bytes);
  ASSERT_TRUE(odd_back.ok());
  EXPECT_EQ(odd_back->samples, odd.samples);
  EXPECT_FALSE(encode_wav(Audio{8000, 2, {0.1f, 0.2f, 0.3f}}, WavEncoding::PcmS16).ok());
  EXPECT_FALSE(encode_wav(Audio{0, 1, {0.1f}}, WavEncoding::PcmS16).ok());
}

TEST(Wav, ToMonoAverages) {
  Audio a{16000, 3, {0.3f, 0.6f, 0.9f, -1.0f, 0.5f, 0.2f}};
  const auto mono = to_mono(a);
  ASSERT_EQ(mono.size(), 2u);
  EXPECT_FLOAT_EQ(mono[0], 0.6f);
  EXPECT_FLOAT_EQ(mono[1], -0.1f);
  Audio m{16000, 1, {0.25f, -0.5f}};
  EXPECT_EQ(to_mono(m), m.samples);
}

// A never-finalised stream (size 0xFFFFFFFF) or a cut file: read the whole frames that are there.
TEST(Wav, DataSizePastEndIsClamped) {
  auto bytes = read_bytes(std::string(SOTTO_FIXTURES_DIR) + "/audio/beckett.wav");
  ASSERT_GT(bytes.size(), 44u + 159414u * 2);
  bytes.resize(44 + 159414 * 2);  // drop the trailing LIST/id3 chunks: a stream has nothing after its data
  auto streaming = bytes;
  put_u32(streaming, 4, 0xFFFFFFFF);
  put_u32(streaming, 40, 0xFFFFFFFF);
  auto info = parse_wav(streaming);
  ASSERT_TRUE(info.ok()) << info.message();
  EXPECT_TRUE(info->data_clamped);
  EXPECT_EQ(info->frames, 159414u);
  auto d = describe_wav(streaming);
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->metadata.back().key, "note");
  EXPECT_NE(d->metadata.back().text.find("4294967295"), std::string::npos) << d->metadata.back().text;

  auto cut = bytes;
  cut.resize(bytes.size() - 1001);  // ends inside a sample
  auto cut_info = parse_wav(cut);
  ASSERT_TRUE(cut_info.ok());
  EXPECT_TRUE(cut_info->data_clamped);
  EXPECT_EQ(cut_info->frames, (159414u * 2 - 1001) / 2);
  auto full = decode_wav(bytes), part = decode_wav(cut);
  ASSERT_TRUE(full.ok() && part.ok());
  EXPECT_TRUE(std::equal(part->samples.begin(), part->samples.end(), full->samples.begin()));
}

struct Malformed {
  const char* what;
  std::vector<uint8_t> bytes;
  const char* message_part;
};

std::vector<Malformed> malformed_corpus() {
  Audio a = random_audio(2, 10, 16000, 99);
  const auto good = *encode_wav(a, WavEncoding::PcmS16);  // 44-byte header: fmt at 12, data at 36
  const auto ext = *encode_wav(a, WavEncoding::Float32, WavLayout::Extensible);  // fmt body at 20
  std::vector<Malformed> c;
  auto with = [&](const char* what, const char* part, auto edit, const std::vector<uint8_t>& base) {
    auto b = base;
    edit(b);
    c.push_back({what, b, part});
  };
  c.push_back({"empty", {}, "RIFF tag"});
  with("RIFX", "does not start with 'RIFF'", [](auto& b) { std::memcpy(&b[0], "RIFX", 4); }, good);
  with("RF64", "RF64", [](auto& b) { std::memcpy(&b[0], "RF64", 4); }, good);
  with("AVI form", "not 'WAVE'", [](auto& b) { std::memcpy(&b[8], "AVI ", 4); }, good);
  with("header only", "no 'fmt '", [](auto& b) { b.resize(12); }, good);
  with("no data", "no 'data'", [](auto& b) { b.resize(36); }, good);
  with(
      "data before fmt", "before any 'fmt '",
      [](auto& b) {
        std::memcpy(&b[12], "LIST", 4);
        std::memcpy(&b[36], "data", 4);
      },
      good);
  with("fmt 14 bytes", "less than the 16", [](auto& b) { put_u32(b, 16, 14); }, good);
  with("fmt past end", "past the end", [](auto& b) { put_u32(b, 16, 1000); }, good);
  with("zero channels", "0 channels", [](auto& b) { put_u16(b, 22, 0); }, good);
  with("rate 0", "sample rate of 0", [](auto& b) { put_u32(b, 24, 0); }, good);
  with("rate 2 MHz", "above the 1000000 Hz", [](auto& b) { put_u32(b, 24, 2'000'000); }, good);
  with("huge block_align", "block_align is 65535", [](auto& b) { put_u16(b, 32, 0xFFFF); }, good);
  with("zero block_align", "block_align is 0", [](auto& b) { put_u16(b, 32, 0); }, good);
  with("12-bit PCM", "12 bits", [](auto& b) { put_u16(b, 34, 12); }, good);
  with("0-bit PCM", "0 bits", [](auto& b) { put_u16(b, 34, 0); }, good);
  with("ADPCM", "MS ADPCM", [](auto& b) { put_u16(b, 20, 2); }, good);
  with("mu-law", "mu-law", [](auto& b) { put_u16(b, 20, 7); }, good);
  with("float 16-bit", "IEEE float with 16 bits", [](auto& b) { put_u16(b, 20, 3); }, good);
  with(
      "unknown chunk past end", "past the end of the file",
      [](auto& b) {
        std::memcpy(&b[36], "junk", 4);
        put_u32(b, 40, 1u << 30);
      },
      good);
  with(
      "second fmt", "second 'fmt '",
      [](auto& b) {
        std::memcpy(&b[36], "fmt ", 4);
        put_u32(b, 40, 16);
        b.resize(60);
      },
      good);
  with("extensible short", "less than the 40", [](auto& b) { put_u32(b, 16, 16); }, ext);
  with("extensible cbSize", "cbSize 10", [](auto& b) { put_u16(b, 36, 10); }, ext);
  with("extensible GUID", "GUID", [](auto& b) { b[50] ^= 0xFF; }, ext);
  with("extensible valid bits", "valid bits per sample is 40", [](auto& b) { put_u16(b, 38, 40); }, ext);
  with("extensible subformat", "audio format 6", [](auto& b) { put_u16(b, 44, 6); }, ext);
  return c;
}

TEST(Wav, MalformedFilesGiveOneLineErrors) {
  for (const Malformed& m : malformed_corpus()) {
    auto info = parse_wav(m.bytes);
    ASSERT_FALSE(info.ok()) << m.what;
    EXPECT_NE(info.message().find(m.message_part), std::string::npos) << m.what << ": " << info.message();
    EXPECT_EQ(info.message().rfind("wav: ", 0), 0u) << info.message();
    EXPECT_EQ(info.message().find('\n'), std::string::npos);
    EXPECT_FALSE(decode_wav(m.bytes).ok());
    EXPECT_FALSE(describe_wav(m.bytes).ok());
  }
}

// Every prefix of a small file, and random byte flips: an error or a consistent result, never a crash.
TEST(Wav, TruncationsAndFlipsAreSafe) {
  const auto base = read_bytes(std::string(SOTTO_SOURCE_DIR) + "/tests/data/wav/py_f32_stereo_chunks.wav");
  ASSERT_FALSE(base.empty());
  for (size_t n = 0; n <= base.size(); ++n) {
    std::vector<uint8_t> prefix(base.begin(), base.begin() + n);
    auto info = parse_wav(prefix);
    if (!info.ok()) continue;
    EXPECT_LE(info->data_offset + info->data.size(), n);
    EXPECT_EQ(info->data.size(), info->frames * info->block_align_bytes);
    auto audio = decode_wav(prefix);
    ASSERT_TRUE(audio.ok());
    EXPECT_EQ(audio->samples.size(), info->frames * info->channels);
  }
  std::mt19937 rng(5);
  for (int trial = 0; trial < 3000; ++trial) {
    auto b = base;
    for (int k = 0; k < 3; ++k) b[rng() % 96] = static_cast<uint8_t>(rng());  // the headers and chunks
    auto info = parse_wav(b);
    if (info.ok()) {
      EXPECT_LE(info->data_offset + info->data.size(), b.size());
    }
  }
}

}  // namespace
}  // namespace sotto
