// What a user sees when a file is not what it claims (issue #33): a WAV cut short is read with a warning that
// says how much was there, NaN / infinite samples are read as 0 and counted, a corrupted GGUF key prints
// escaped, on one line and in full, and inconsistent model dimensions are named for what they are.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "audio/wav_audio.h"
#include "cli_support.h"
#include "core/error.h"
#include "io/gguf.h"
#include "io/wav.h"
#include "models/llm/llama.h"
#include "test_support.h"

namespace sotto {
namespace {

std::string write_temp(const std::vector<uint8_t>& bytes, const char* suffix) {
  const std::string path = std::string("/tmp/sotto_input_checks_") + std::to_string(::getpid()) + suffix;
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (f) {
    std::fwrite(bytes.data(), 1, bytes.size(), f);
    std::fclose(f);
  }
  return path;
}

std::vector<uint8_t> tone_wav(uint32_t rate_hz, size_t frames, WavEncoding encoding) {
  Audio audio;
  audio.sample_rate_hz = rate_hz;
  audio.channels = 1;
  for (size_t i = 0; i < frames; ++i)
    audio.samples.push_back(0.25f * std::sin(0.05f * static_cast<float>(i)));
  auto bytes = encode_wav(audio, encoding);
  EXPECT_TRUE(bytes.ok()) << bytes.message();
  return bytes.ok() ? *bytes : std::vector<uint8_t>{};
}

// The file: a header promising 1,920,000 data bytes (60 s of 16 kHz s16) over 1,000 bytes of data.
TEST(InputChecks, WavCutShortIsReadWithAWarning) {
  std::vector<uint8_t> bytes = tone_wav(16000, 500, WavEncoding::PcmS16);  // 1,000 data bytes
  ASSERT_EQ(bytes.size(), 44u + 1000u);
  const uint32_t promised = 1920000;
  std::memcpy(bytes.data() + 40, &promised, 4);  // the data chunk's size field (little-endian)
  auto audio = wav_to_speech_audio(bytes, 16000);
  ASSERT_TRUE(audio.ok()) << audio.message();
  EXPECT_EQ(audio->samples.size(), 500u);
  EXPECT_NE(audio->notes.find("declares 1920000 bytes but the file holds 1000"), std::string::npos)
      << audio->notes;
  EXPECT_NE(audio->notes.find("500 whole frames"), std::string::npos) << audio->notes;
  // An intact file has no notes.
  auto intact = wav_to_speech_audio(tone_wav(16000, 500, WavEncoding::PcmS16), 16000);
  ASSERT_TRUE(intact.ok());
  EXPECT_EQ(intact->notes, "");

  // `sotto vad` goes on, and says so on stderr.
  const std::string path = write_temp(bytes, ".wav");
  const auto r = testing::run_sotto("vad -m '" + testing::fixture_path("vad/silero_vad_v5.1.onnx") + "' '" +
                                    path + "' --json");
  std::remove(path.c_str());
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("warning"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("declares 1920000 bytes but the file holds 1000"), std::string::npos) << r.err;
}

// NaN and infinite float samples: read as 0 before resampling (which would spread each over ~112 outputs),
// counted in the note; everything the model gets is finite.
TEST(InputChecks, NonFiniteSamplesAreZeroedAndCounted) {
  Audio audio;
  audio.sample_rate_hz = 48000;
  audio.channels = 1;
  for (int i = 0; i < 4800; ++i) audio.samples.push_back(0.1f * std::sin(0.01f * static_cast<float>(i)));
  audio.samples[100] = std::nanf("");
  audio.samples[2000] = INFINITY;
  audio.samples[3000] = -INFINITY;
  auto bytes = encode_wav(audio, WavEncoding::Float32);
  ASSERT_TRUE(bytes.ok()) << bytes.message();
  auto speech = wav_to_speech_audio(*bytes, 16000);
  ASSERT_TRUE(speech.ok()) << speech.message();
  EXPECT_EQ(speech->samples.size(), 1600u);
  for (float s : speech->samples) ASSERT_TRUE(std::isfinite(s));
  EXPECT_NE(speech->notes.find("3 of 4800 samples were NaN or infinite and were read as 0"),
            std::string::npos)
      << speech->notes;
}

TEST(InputChecks, QuotedEscapesWhatATerminalWouldHideOrObey) {
  EXPECT_EQ(quoted("llama.embedding_length"), "'llama.embedding_length'");
  EXPECT_EQ(quoted(std::string_view("lla\0a.\x1b"
                                    "mbed",
                                    11)),
            "'lla\\x00a.\\x1bmbed'");
  EXPECT_EQ(quoted("it's a\\b\n\t"), "'it\\'s a\\\\b\\n\\t'");
  EXPECT_EQ(quoted("über 😀"), "'über 😀'");  // valid UTF-8 stays
  EXPECT_EQ(quoted("\xc3\x28 \xed\xa0\x80 \xff"),
            "'\\xc3( \\xed\\xa0\\x80 \\xff'");  // invalid, surrogate, 0xff
}

// Bytes of the stories260K fixture with one metadata key's name corrupted (a NUL and an ESC in it).
std::vector<uint8_t> corrupted_key_file(size_t* key_at) {
  std::vector<uint8_t> bytes = testing::read_fixture("llm/stories260K.gguf");
  const std::string key = "llama.embedding_length";
  const auto it = std::search(bytes.begin(), bytes.end(), key.begin(), key.end());
  *key_at = it == bytes.end() ? 0 : static_cast<size_t>(it - bytes.begin());
  if (it != bytes.end()) {
    it[3] = 0x00;
    it[6] = 0x1b;
  }
  return bytes;
}

TEST(InputChecks, CorruptedGgufKeysPrintEscapedInFull) {
  size_t at = 0;
  std::vector<uint8_t> bytes = corrupted_key_file(&at);
  ASSERT_GT(at, 0u) << "missing fixture llm/stories260K.gguf";
  // `sotto info` lists it escaped, on its own line.
  const std::string path = write_temp(bytes, ".gguf");
  const auto info = testing::run_sotto("info '" + path + "'");
  EXPECT_EQ(info.exit_code, 0) << info.err;
  EXPECT_NE(info.out.find("'lla\\x00a.\\x1bmbedding_length'"), std::string::npos) << info.out;
  EXPECT_EQ(info.out.find('\x1b'), std::string::npos);
  EXPECT_EQ(info.out.find('\0'), std::string::npos);
  // An error about the key names it escaped: give it an unknown value type.
  const uint32_t bad_type = 99;
  std::memcpy(bytes.data() + at + std::strlen("llama.embedding_length"), &bad_type, 4);
  auto gguf = parse_gguf(bytes);
  ASSERT_FALSE(gguf.ok());
  EXPECT_NE(gguf.message().find("key 'lla\\x00a.\\x1bmbedding_length' has unknown value type 99"),
            std::string::npos)
      << gguf.message();
  std::remove(path.c_str());
}

TEST(InputChecks, EmbeddingThatDoesNotSplitIntoHeadsIsNamed) {
  std::vector<uint8_t> bytes = testing::read_fixture("llm/stories260K.gguf");
  const std::string key = "llama.embedding_length";
  const auto it = std::search(bytes.begin(), bytes.end(), key.begin(), key.end());
  ASSERT_NE(it, bytes.end());
  const uint32_t n_embd = 65;  // stories260K: 64 over 8 heads
  std::memcpy(&*it + key.size() + 4, &n_embd, 4);
  auto gguf = parse_gguf(bytes);
  ASSERT_TRUE(gguf.ok()) << gguf.message();
  auto weights = load_llama(*gguf);
  ASSERT_FALSE(weights.ok());
  EXPECT_NE(weights.message().find("llama.embedding_length = 65 does not split into 8 heads"),
            std::string::npos)
      << weights.message();
}

}  // namespace
}  // namespace sotto
