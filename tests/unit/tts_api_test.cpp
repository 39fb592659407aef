// The C API's speech synthesis (api/sotto.h, api/sotto_tts.cpp), which the wasm build and web/tts.js use: its
// audio is exactly what models/tts/kokoro.h gives for the same phonemes and voice (the same code on the same
// pool size: bit for bit; tests/unit/kokoro_test.cpp checks that against ONNX Runtime), text goes through the
// G2P of the voice's language, and bad input through every entry point gives one-line errors, never a crash.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <span>
#include <string>
#include <vector>

#include "api/sotto.h"
#include "core/thread_pool.h"
#include "io/file.h"
#include "models/tts/kokoro.h"
#include "nn/weights.h"
#include "test_support.h"

namespace {

const std::string kDir = std::string(SOTTO_SOURCE_DIR) + "/models/";
const std::string kModel = kDir + "kokoro/kokoro-v1.0.int8.onnx";
const std::string kVoice = kDir + "kokoro/voices/af_heart.bin";
const std::string kLexicon = kDir + "g2p-en-us.bin";

struct Tts {
  SottoTts* h = sotto_tts_create(2);
  ~Tts() { sotto_tts_destroy(h); }
  std::string error() const { return sotto_tts_last_error(h); }
};

bool one_line(const std::string& s) {
  return !s.empty() && s.find('\n') == std::string::npos;
}

TEST(TtsApi, BadInputGivesOneLineErrors) {
  EXPECT_EQ(sotto_tts_load(nullptr, nullptr, 0), SOTTO_ERROR_ARGUMENT);
  EXPECT_EQ(sotto_tts_speak(nullptr, "a", 1, "a", 1, 1.0f, nullptr), nullptr);
  EXPECT_STREQ(sotto_tts_last_error(nullptr), "tts: null handle");
  Tts t;
  size_t n = 7;
  EXPECT_EQ(sotto_tts_speak(t.h, "af_heart", 8, "hˈI", 4, 1.0f, &n), nullptr);
  EXPECT_EQ(t.error(), "tts: no model loaded");
  const std::vector<uint8_t> junk(1000, 0x5a);
  EXPECT_EQ(sotto_tts_load(t.h, junk.data(), junk.size()), SOTTO_ERROR_FILE);
  EXPECT_TRUE(one_line(t.error())) << t.error();
  EXPECT_EQ(sotto_tts_add_voice(t.h, "v", 1, junk.data(), junk.size()), SOTTO_ERROR_FILE);
  EXPECT_NE(t.error().find("expected"), std::string::npos) << t.error();
  EXPECT_EQ(sotto_tts_add_voice(t.h, nullptr, 0, junk.data(), junk.size()), SOTTO_ERROR_ARGUMENT);
  EXPECT_EQ(sotto_tts_load_g2p(t.h, junk.data(), junk.size()), SOTTO_ERROR_FILE);
  EXPECT_TRUE(one_line(t.error())) << t.error();
  EXPECT_EQ(sotto_tts_phonemize_json(t.h, "bf_emma", 7, "Hi.", 3, nullptr), nullptr);
  EXPECT_NE(t.error().find("en-gb"), std::string::npos) << t.error();
  EXPECT_EQ(sotto_tts_phonemize_json(t.h, "af_heart", 8, "Hi.", 3, nullptr), nullptr);
  EXPECT_NE(t.error().find("en-us"), std::string::npos) << t.error();
  EXPECT_EQ(sotto_tts_last_pieces(t.h), 0u);
  EXPECT_EQ(sotto_tts_stream_begin(t.h, "af_heart", 8, "hˈI", 4, 1.0f, 300.0f), SOTTO_ERROR_ARGUMENT);
  EXPECT_EQ(t.error(), "tts: no model loaded");
  n = 7;
  EXPECT_EQ(sotto_tts_stream_next(t.h, &n), nullptr);  // nothing begun: the end, no error
  EXPECT_EQ(n, 0u);
  EXPECT_EQ(t.error(), "");
  EXPECT_EQ(sotto_tts_stream_more(t.h), 0);
  EXPECT_EQ(sotto_tts_stream_more(nullptr), 0);
  EXPECT_EQ(sotto_tts_stream_piece_samples(t.h), 0u);
  EXPECT_EQ(sotto_tts_stream_piece_samples(nullptr), 0u);
}

TEST(TtsApi, SpeaksWhatKokoroSpeaksAndReadsText) {
#ifdef SOTTO_TEST_UNDER_SANITIZER
  GTEST_SKIP() << "a real-model synthesis takes minutes under sanitizers";
#endif
  if (!std::filesystem::exists(kModel) || !std::filesystem::exists(kVoice))
    GTEST_SKIP() << kModel << " or its voices are absent (bash scripts/get-models.sh kokoro)";
  auto model = sotto::MappedFile::open(kModel);
  auto voice = sotto::MappedFile::open(kVoice);
  ASSERT_TRUE(model.ok() && voice.ok());
  Tts t;
  ASSERT_EQ(sotto_tts_load(t.h, model->bytes().data(), model->bytes().size()), SOTTO_OK) << t.error();
  ASSERT_EQ(sotto_tts_add_voice(t.h, "af_heart", 8, voice->bytes().data(), voice->bytes().size()), SOTTO_OK);

  const std::string phonemes = "hˈI.";
  EXPECT_EQ(sotto_tts_speak(t.h, "af_heart", 8, "h€", 4, 1.0f, nullptr), nullptr);
  EXPECT_TRUE(one_line(t.error())) << t.error();
  EXPECT_EQ(sotto_tts_speak(t.h, "zz", 2, phonemes.data(), phonemes.size(), 1.0f, nullptr), nullptr);
  EXPECT_NE(t.error().find("'zz'"), std::string::npos) << t.error();
  EXPECT_EQ(sotto_tts_speak(t.h, "af_heart", 8, phonemes.data(), phonemes.size(), 9.0f, nullptr), nullptr);

  size_t n = 0;
  const float* audio = sotto_tts_speak(t.h, "af_heart", 8, phonemes.data(), phonemes.size(), 1.0f, &n);
  ASSERT_NE(audio, nullptr) << t.error();
  EXPECT_EQ(sotto_tts_last_pieces(t.h), 1u);
  const std::vector<float> got(audio, audio + n);

  // The reference: models/tts/kokoro.h called directly on a pool of the same size.
  sotto::ThreadPool pool(2);
  auto ctx = sotto::nn::Context::cpu(&pool);
  auto source = sotto::nn::open_weights("kokoro-v1.0.int8.onnx", model->bytes());
  ASSERT_TRUE(source.ok());
  auto w = sotto::tts::load_kokoro_weights(*ctx, **source);
  ASSERT_TRUE(w.ok()) << w.message();
  auto v = sotto::tts::kokoro_voice_from_bytes("af_heart", voice->bytes());
  auto ids = sotto::tts::kokoro_phoneme_ids(phonemes);
  ASSERT_TRUE(v.ok() && ids.ok());
  auto want = sotto::tts::kokoro_speak(*ctx, *w, *ids, v->style(ids->size()), 1.0f);
  ASSERT_TRUE(want.ok()) << want.message();
  EXPECT_EQ(got, *want);
  EXPECT_GT(n, 6000u);

  // Streamed with a first chunk longer than the piece: one chunk, the same samples; then the end.
  EXPECT_EQ(sotto_tts_stream_begin(t.h, "af_heart", 8, "h€", 4, 1.0f, 300.0f), SOTTO_ERROR_ARGUMENT);
  EXPECT_TRUE(one_line(t.error())) << t.error();
  EXPECT_EQ(sotto_tts_stream_begin(t.h, "af_heart", 8, phonemes.data(), phonemes.size(), 1.0f, -1.0f),
            SOTTO_ERROR_ARGUMENT);
  ASSERT_EQ(sotto_tts_stream_begin(t.h, "af_heart", 8, phonemes.data(), phonemes.size(), 1.0f, 60000.0f),
            SOTTO_OK)
      << t.error();
  EXPECT_EQ(sotto_tts_stream_more(t.h), 1);
  EXPECT_EQ(sotto_tts_stream_piece_samples(t.h), want->size());  // known before any chunk is made
  const float* chunk = sotto_tts_stream_next(t.h, &n);
  ASSERT_NE(chunk, nullptr) << t.error();
  EXPECT_EQ(std::vector<float>(chunk, chunk + n), *want);
  EXPECT_EQ(sotto_tts_stream_piece_samples(t.h), want->size());
  EXPECT_EQ(sotto_tts_stream_more(t.h), 0);
  EXPECT_EQ(sotto_tts_stream_next(t.h, &n), nullptr);
  EXPECT_EQ(n, 0u);
  EXPECT_EQ(t.error(), "");

  if (!std::filesystem::exists(kLexicon))
    GTEST_SKIP() << kLexicon << " is absent (bash scripts/get-models.sh g2p)";
  auto lexicon = sotto::MappedFile::open(kLexicon);
  ASSERT_TRUE(lexicon.ok());
  ASSERT_EQ(sotto_tts_load_g2p(t.h, lexicon->bytes().data(), lexicon->bytes().size()), SOTTO_OK) << t.error();
  size_t bytes = 0;
  const char* json = sotto_tts_phonemize_json(t.h, "af_heart", 8, "Hi. Bye!", 8, &bytes);
  ASSERT_NE(json, nullptr) << t.error();
  EXPECT_EQ(std::string(json, bytes),
            "{\"lang\":\"en-us\",\"sentences\":[{\"text\":\"Hi.\",\"phonemes\":\"hˈI.\"},{\"text\":\"Bye!\","
            "\"phonemes\":\"bˈI!\"}]}");
}

}  // namespace

// sotto_tts_set_stream_lead: the piece's leading pause cut before the vocoder. The stream is the whole piece less
// the samples cut, whole decoded frames of the pause only (the speech is all there: the cut audio's first sound
// is within the frames kept), and the audio after the cut is the whole piece's shifted by them, up to the
// generator's context at the new edge and its per-window normalisation: SNR over the speech well above what a
// misaligned spectrum or decoded frame gives (a shift of one frame: below 0 dB). -1 is the whole pause again,
// bit for bit.
TEST(TtsApi, StreamLeadIsCutBeforeTheVocoder) {
#ifdef SOTTO_TEST_UNDER_SANITIZER
  GTEST_SKIP() << "a real-model synthesis takes minutes under sanitizers";
#endif
  EXPECT_EQ(sotto_tts_set_stream_lead(nullptr, 100.0f), SOTTO_ERROR_ARGUMENT);
  Tts bad;
  EXPECT_EQ(sotto_tts_set_stream_lead(bad.h, std::nanf("")), SOTTO_ERROR_ARGUMENT);
  EXPECT_TRUE(one_line(bad.error())) << bad.error();
  EXPECT_EQ(sotto_tts_set_stream_lead(bad.h, 1e9f), SOTTO_ERROR_ARGUMENT);
  EXPECT_EQ(sotto_tts_set_stream_lead(bad.h, -1.0f), SOTTO_OK);
  if (!std::filesystem::exists(kModel) || !std::filesystem::exists(kVoice))
    GTEST_SKIP() << kModel << " or its voices are absent (bash scripts/get-models.sh kokoro)";
  auto model = sotto::MappedFile::open(kModel);
  auto voice = sotto::MappedFile::open(kVoice);
  ASSERT_TRUE(model.ok() && voice.ok());
  Tts t;
  ASSERT_EQ(sotto_tts_load(t.h, model->bytes().data(), model->bytes().size()), SOTTO_OK) << t.error();
  ASSERT_EQ(sotto_tts_add_voice(t.h, "af_heart", 8, voice->bytes().data(), voice->bytes().size()), SOTTO_OK);
  const std::string phonemes = "ðə kˈæpᵻtᵊl ʌv fɹˈæns.";
  size_t n = 0;
  const float* audio = sotto_tts_speak(t.h, "af_heart", 8, phonemes.data(), phonemes.size(), 1.0f, &n);
  ASSERT_NE(audio, nullptr) << t.error();
  const std::vector<float> whole(audio, audio + n);

  auto stream = [&](float first_chunk_ms, std::vector<size_t>* sizes = nullptr) {
    std::vector<float> out;
    EXPECT_EQ(
        sotto_tts_stream_begin(t.h, "af_heart", 8, phonemes.data(), phonemes.size(), 1.0f, first_chunk_ms),
        SOTTO_OK)
        << t.error();
    const size_t total = sotto_tts_stream_piece_samples(t.h);
    size_t m = 0;
    while (const float* c = sotto_tts_stream_next(t.h, &m)) {
      out.insert(out.end(), c, c + m);
      if (sizes) sizes->push_back(m);
    }
    EXPECT_EQ(t.error(), "");
    EXPECT_EQ(out.size(), total);
    return out;
  };
  constexpr float kKeepMs = 100.0f;  // 8 decoded frames
  ASSERT_EQ(sotto_tts_set_stream_lead(t.h, kKeepMs), SOTTO_OK);
  const std::vector<float> cut = stream(60000.0f);  // one window
  ASSERT_LT(cut.size(), whole.size());
  const size_t dropped = whole.size() - cut.size();
  EXPECT_EQ(dropped % 300, 0u);
  auto onset = [](std::span<const float> a) {
    size_t i = 0;
    while (i < a.size() && std::fabs(a[i]) <= 0.01f) ++i;
    return i;
  };
  const size_t whole_onset = onset(whole), cut_onset = onset(cut);
  std::printf("[ tts ] lead cut: %zu of %zu samples; speech at %zu (whole: %zu)\n", dropped, whole.size(),
              cut_onset, whole_onset);
  EXPECT_LE(dropped, whole_onset) << "speech was cut";
  // The first sound where the whole piece has it: not a click at the cut (the generator's edge there rings
  // for a few ms: faded out) and no speech lost.
  const size_t want_onset = whole_onset - dropped;
  EXPECT_GE(cut_onset + 150, want_onset) << "a sound before the speech";
  EXPECT_LE(cut_onset, want_onset + 150) << "speech lost";
  EXPECT_LE(want_onset, 2400u) << "more than the 100 ms kept before the speech";
  auto snr_db = [&](size_t shift, size_t from) {
    double signal = 0, noise = 0;
    for (size_t i = from; i < cut.size(); ++i) {
      const double w = whole[i + shift], d = cut[i] - w;
      signal += w * w;
      noise += d * d;
    }
    return 10.0 * std::log10(signal / std::max(noise, 1e-30));
  };
  const double snr = snr_db(dropped, cut_onset), shifted = snr_db(dropped - 300, cut_onset);
  std::printf(
      "[ tts ] the speech after the cut: SNR %.1f dB against the whole piece (a frame off: %.1f dB)\n", snr,
      shifted);
  EXPECT_GE(snr, 6.0);
  EXPECT_LT(shifted, snr - 6.0);

  // Chunked: the same length, the first chunk 300 ms after the kept pause.
  std::vector<size_t> sizes;
  const std::vector<float> chunked = stream(300.0f, &sizes);
  EXPECT_EQ(chunked.size(), cut.size());
  ASSERT_GE(sizes.size(), 2u);
  EXPECT_EQ(sizes[0], (24u + 8u) * 300u);

  ASSERT_EQ(sotto_tts_set_stream_lead(t.h, -1.0f), SOTTO_OK);
  EXPECT_EQ(stream(60000.0f), whole);
}
