// `sotto speak` as a user runs it: bad input (unknown phonemes, empty, 20,000 characters, --text without the G2P's
// lexicon or with nothing to say, a voice file of the wrong size, a model that is not Kokoro) gives one line on stderr and exit 1 (or 2
// for usage); with the real model a short phrase becomes a valid 24 kHz WAV and --json reports it.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include "io/file.h"
#include "io/json.h"
#include "io/wav.h"
#include "test_support.h"

namespace sotto {
namespace {

struct SpeakRun {
  int exit_code = -1;
  std::string out, err;
};

SpeakRun speak(const std::string& args) {
  SpeakRun run;
  char err_path[] = "/tmp/sotto_speak_test_XXXXXX";
  const int fd = mkstemp(err_path);
  if (fd < 0) return run;
  close(fd);
  const std::string command = std::string("'") + SOTTO_CLI_PATH + "' speak " + args + " 2>'" + err_path + "'";
  std::FILE* p = popen(command.c_str(), "r");
  if (!p) return run;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) run.out.append(buf, n);
  const int status = pclose(p);
  run.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  if (std::FILE* e = std::fopen(err_path, "rb")) {
    while ((n = std::fread(buf, 1, sizeof buf, e)) > 0) run.err.append(buf, n);
    std::fclose(e);
  }
  std::remove(err_path);
  return run;
}

const std::string kModel = std::string(SOTTO_SOURCE_DIR) + "/models/kokoro/kokoro-v1.0.int8.onnx";

std::string temp_file(const std::string& name, size_t bytes) {
  const std::string path = std::filesystem::temp_directory_path() / name;
  std::ofstream(path, std::ios::binary) << std::string(bytes, '\0');
  return path;
}

void expect_one_line_error(const SpeakRun& r, int exit_code, const std::string& needle) {
  EXPECT_EQ(r.exit_code, exit_code) << r.err;
  EXPECT_NE(r.err.find(needle), std::string::npos) << r.err;
  if (exit_code == 1) {
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  }
  EXPECT_TRUE(r.out.empty()) << r.out;
}

TEST(CliSpeak, BadInputIsOneLine) {
  const std::string voice = temp_file("sotto_voice_ok.bin", 510 * 256 * 4);
  const std::string base = "-m '" + kModel + "' --voice '" + voice + "' -o /tmp/sotto_speak_bad.wav ";
  expect_one_line_error(speak(base + "--phonemes 'h#llo'"), 1, "unknown phoneme '#'");
  expect_one_line_error(speak(base + "--phonemes ''"), 2, "missing --phonemes");
  expect_one_line_error(speak(base + "--phonemes '" + std::string(20000, 'a') + "'"), 1,
                        "more than one call speaks");
  expect_one_line_error(speak(base + "--text 'hello' --lexicon /no/such/g2p-en-us.bin"), 1, "speak: --text:");
  expect_one_line_error(speak(base + "--text 'hello' --phonemes 'a'"), 2, "not both");
  expect_one_line_error(speak(base + "--phonemes 'a' --speed 9"), 2, "--speed");
  expect_one_line_error(speak(base + "--phonemes 'a' --backend cuda"), 2, "--backend takes cpu or webgpu");
  const std::string small = temp_file("sotto_voice_small.bin", 1000);
  expect_one_line_error(speak("-m '" + kModel + "' --voice '" + small + "' -o /tmp/x.wav --phonemes 'a'"), 1,
                        "has 1000 bytes, expected 522240");
  expect_one_line_error(speak("-m '" + kModel + "' --voice no_such_voice -o /tmp/x.wav --phonemes 'a'"), 1,
                        "voice 'no_such_voice'");
  const std::string not_kokoro = testing::fixture_path("vad/silero_vad_v5.1.onnx");
  expect_one_line_error(speak("-m '" + not_kokoro + "' --voice '" + voice + "' -o /tmp/x.wav --phonemes 'a'"),
                        1, "not a Kokoro v1.0 int8 model");
  std::remove(voice.c_str());
  std::remove(small.c_str());
}

TEST(CliSpeak, AShortPhraseBecomesA24kHzWav) {
#ifdef SOTTO_TEST_UNDER_SANITIZER
  GTEST_SKIP() << "the real model takes minutes under sanitizers";
#endif
  if (!std::filesystem::exists(kModel))
    GTEST_SKIP() << kModel << " is absent (bash scripts/get-models.sh kokoro)";
  const std::string out = "/tmp/sotto_speak_test.wav";
  const SpeakRun r =
      speak("-m '" + kModel + "' --voice af_heart --phonemes 'h\xCB\x88\x61\xC9\xAA.' -o " + out + " --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto json = parse_json(r.out);
  ASSERT_TRUE(json.ok()) << r.out;
  auto file = MappedFile::open(out);
  ASSERT_TRUE(file.ok());
  auto audio = decode_wav(file->bytes());
  ASSERT_TRUE(audio.ok()) << audio.message();
  EXPECT_EQ(audio->sample_rate_hz, 24000u);
  EXPECT_EQ(audio->channels, 1u);
  EXPECT_GT(audio->frames(), 6000u);  // "hi." is several 25 ms frames
  EXPECT_EQ(audio->frames() % 600, 0u);
  EXPECT_NE(r.out.find("\"samples\":" + std::to_string(audio->frames())), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("\"sample_rate\":24000"), std::string::npos);
  EXPECT_NE(r.out.find("\"phonemes\":5"), std::string::npos) << r.out;
  std::remove(out.c_str());
}

// Text in, speech out, and back to text: our G2P -> our Kokoro -> our Moonshine gives the words that went in
// (the voice loop's two ends checked against each other; each is checked against its own reference elsewhere).
TEST(CliSpeak, TextComesBackThroughSpeechRecognition) {
#ifdef SOTTO_TEST_UNDER_SANITIZER
  GTEST_SKIP() << "the real models take minutes under sanitizers";
#endif
  const std::string root = SOTTO_SOURCE_DIR;
  const std::string asr = root + "/models/moonshine-base-en";
  for (const std::string& f : {kModel, root + "/models/g2p-en-us.bin", asr + "/encoder_model.ort"})
    if (!std::filesystem::exists(f)) GTEST_SKIP() << f << " is absent (bash scripts/get-models.sh)";
  const std::string out = "/tmp/sotto_speak_text_test.wav";
  const SpeakRun r =
      speak("-m '" + kModel + "' --voice af_heart --text 'The weather is nice today.' -o " + out);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::string heard;
  const std::string command =
      std::string("'") + SOTTO_CLI_PATH + "' transcribe -m '" + asr + "' " + out + " 2>/dev/null";
  if (std::FILE* p = popen(command.c_str(), "r")) {
    char buf[1024];
    size_t n;
    while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) heard.append(buf, n);
    pclose(p);
  }
  std::string words;
  for (char c : heard)
    if (std::isalpha(static_cast<unsigned char>(c)) || c == ' ') words += static_cast<char>(std::tolower(c));
  EXPECT_EQ(words, "the weather is nice today") << heard;
  std::remove(out.c_str());
}

}  // namespace
}  // namespace sotto
