// `sotto agent` as a user runs it: bad input gives one line and exit 1 (2 for usage); with the real models
// (scripts/get-models.sh) a spoken question gets a spoken answer — the answer's audio, heard by our own
// recogniser, says the reply's words — and the timeline's stages come in the order the page reports them.
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <filesystem>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "cli_support.h"
#include "io/json.h"
#include "io/wav.h"
#include "test_support.h"

namespace sotto {
namespace {

using testing::run_sotto;

const std::string kSource = SOTTO_SOURCE_DIR;

bool models_present() {
  for (const char* rel :
       {"/models/qwen2.5-coder-0.5b-instruct-q4_k_m.gguf", "/models/moonshine-base-en/encoder_model.ort",
        "/models/kokoro/kokoro-v1.0.int8.onnx", "/models/g2p-en-us.bin"})
    if (!std::filesystem::exists(kSource + rel)) return false;
  return true;
}

std::string model_args() {
  return " -m '" + kSource + "/models/qwen2.5-coder-0.5b-instruct-q4_k_m.gguf' --asr '" + kSource +
         "/models/moonshine-base-en' --tts '" + kSource + "/models/kokoro/kokoro-v1.0.int8.onnx' --vad '" +
         testing::fixture_path("vad/silero_vad_v5.1.onnx") + "' --threads 2";
}

// Lower-case words of letters and digits.
std::set<std::string> words(const std::string& text) {
  std::set<std::string> out;
  std::string w;
  for (char c : text + " ") {
    if (std::isalnum(static_cast<unsigned char>(c)) || c == '\'') {
      w += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    } else if (!w.empty()) {
      out.insert(w);
      w.clear();
    }
  }
  return out;
}

TEST(CliAgent, BadInputIsOneLine) {
  auto missing = run_sotto("agent --out /tmp/x.wav");
  EXPECT_EQ(missing.exit_code, 2);
  EXPECT_NE(missing.err.find("missing --in"), std::string::npos) << missing.err;
  auto bad_n = run_sotto("agent --in a.wav --out b.wav -n 0");
  EXPECT_EQ(bad_n.exit_code, 2);
  EXPECT_NE(bad_n.err.find("-n must be"), std::string::npos) << bad_n.err;
  auto bad_prefill = run_sotto("agent --in a.wav --out b.wav --speculative-prefill 2");
  EXPECT_EQ(bad_prefill.exit_code, 2);
  EXPECT_NE(bad_prefill.err.find("--speculative-prefill"), std::string::npos) << bad_prefill.err;
  auto no_file = run_sotto("agent --in /nonexistent.wav --out /tmp/sotto_agent_x.wav");
  EXPECT_EQ(no_file.exit_code, 1);
  EXPECT_EQ(std::count(no_file.err.begin(), no_file.err.end(), '\n'), 1) << no_file.err;
  EXPECT_NE(no_file.err.find("/nonexistent.wav"), std::string::npos) << no_file.err;
}

TEST(CliAgent, ASpokenQuestionGetsASpokenAnswer) {
#ifdef SOTTO_TEST_UNDER_SANITIZER
  GTEST_SKIP() << "four real models: minutes under the sanitizers (the native stage runs it)";
#endif
  if (!models_present()) GTEST_SKIP() << "needs the default models: bash scripts/get-models.sh";
  const std::string answer = ::testing::TempDir() + "sotto_agent_answer.wav";
  auto run = run_sotto("agent --in '" + testing::fixture_path("audio/sample.wav") + "' --out '" + answer +
                       "' --json" + model_args());
  ASSERT_EQ(run.exit_code, 0) << run.err;
  auto doc = parse_json(run.out);
  ASSERT_TRUE(doc.ok()) << doc.message() << "\n" << run.out;
  const JsonValue* turns = doc->find("turns");
  ASSERT_TRUE(turns && turns->is_array());
  ASSERT_EQ(turns->items.size(), 1u) << run.out;  // one question, spoken without a pause
  const JsonValue& turn = turns->items[0];
  EXPECT_NE(turn.find("transcript")->text.find("reinforcement learning"), std::string::npos) << run.out;
  const std::string reply = turn.find("reply")->text;
  ASSERT_FALSE(reply.empty());
  // The pieces spoken are the reply, in order, with nothing left out.
  std::string joined;
  for (const JsonValue& p : turn.find("pieces")->items) joined += (joined.empty() ? "" : " ") + p.text;
  EXPECT_EQ(words(joined), words(reply));
  // The page's stages, each after the one before.
  const JsonValue* stages = turn.find("stages");
  double last = -1;
  for (const char* name : {"endpoint_ms", "transcript_ms", "first_token_ms", "first_sentence_ms",
                           "first_sound_ms", "reply_done_ms"}) {
    const JsonValue* v = stages->find(name);
    ASSERT_TRUE(v) << name << " missing: " << run.out;
    const double ms = std::stod(v->text);
    EXPECT_GE(ms, last) << name;
    last = ms;
  }
  EXPECT_EQ(turn.find("voice_to_voice_ms")->text, stages->find("first_sound_ms")->text);
  // Recognised during the endpoint's pause (--speculate-ms) or at the endpoint; said either way.
  EXPECT_TRUE(turn.find("speculative_asr")) << run.out;
  // The answer is speech that says the reply: our recogniser hears most of its words.
  auto heard = run_sotto("transcribe -m '" + kSource + "/models/moonshine-base-en' '" + answer + "' --json");
  ASSERT_EQ(heard.exit_code, 0) << heard.err;
  auto heard_doc = parse_json(heard.out);
  ASSERT_TRUE(heard_doc.ok());
  const std::set<std::string> said = words(reply), got = words(heard_doc->find("text")->text);
  size_t common = 0;
  for (const std::string& w : said) common += got.count(w);
  EXPECT_GE(common * 10, said.size() * 7)
      << "reply: " << reply << "\nheard: " << heard_doc->find("text")->text;
  std::remove(answer.c_str());
}

TEST(CliAgent, SilenceIsNoTurn) {
#ifdef SOTTO_TEST_UNDER_SANITIZER
  GTEST_SKIP() << "four real models: minutes under the sanitizers (the native stage runs it)";
#endif
  if (!models_present()) GTEST_SKIP() << "needs the default models: bash scripts/get-models.sh";
  // Two seconds of 16 kHz silence (16-bit PCM).
  const std::string silence = ::testing::TempDir() + "sotto_agent_silence.wav";
  {
    auto wav = encode_wav(Audio{16000, 1, std::vector<float>(32000, 0.0f)}, WavEncoding::PcmS16);
    ASSERT_TRUE(wav.ok()) << wav.message();
    std::FILE* f = std::fopen(silence.c_str(), "wb");
    ASSERT_TRUE(f);
    std::fwrite(wav->data(), 1, wav->size(), f);
    std::fclose(f);
  }
  auto run = run_sotto("agent --in '" + silence + "' --out /tmp/sotto_agent_silence_out.wav" + model_args());
  EXPECT_EQ(run.exit_code, 1);
  EXPECT_NE(run.err.find("no speech found"), std::string::npos) << run.err;
  EXPECT_EQ(std::count(run.err.begin(), run.err.end(), '\n'), 1) << run.err;
  std::remove(silence.c_str());
  std::remove("/tmp/sotto_agent_silence_out.wav");
}

}  // namespace
}  // namespace sotto
