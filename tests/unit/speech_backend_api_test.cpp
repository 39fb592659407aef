// The C API's backend choice for the speech models (sotto_asr_set_backend, sotto_tts_set_backend; the VAD's is
// in vad_api_test.cpp): an unknown backend refused in one line, the GPU opened where there is one (SwiftShader
// here), a model loaded before the switch dropped (its tensors live on the old context), Parakeet refused on
// the GPU. The models' GPU numbers are checked by moonshine_gpu_test / kokoro_gpu_test natively and by
// tests/web/*_gpu_browser.test.mjs in Chromium.
#include <gtest/gtest.h>

#include <string>

#include "api/sotto.h"
#include "gpu_test_support.h"

namespace {

TEST(SpeechBackendApi, AsrUnknownBackendAndParakeetOnTheGpuRefused) {
  SottoAsr* asr = sotto_asr_create(1);
  EXPECT_EQ(sotto_asr_set_backend(asr, 7), SOTTO_ERROR_ARGUMENT);
  EXPECT_STREQ(sotto_asr_last_error(asr), "asr: unknown backend 7 (0 cpu, 1 webgpu)");
  EXPECT_EQ(sotto_asr_set_backend(nullptr, SOTTO_BACKEND_CPU), SOTTO_ERROR_ARGUMENT);
  EXPECT_EQ(sotto_asr_set_backend(asr, SOTTO_BACKEND_CPU), SOTTO_OK);
  if (sotto::testing::open_test_device()) {
    ASSERT_EQ(sotto_asr_set_backend(asr, SOTTO_BACKEND_WEBGPU), SOTTO_OK) << sotto_asr_last_error(asr);
    const uint8_t byte = 0;
    EXPECT_EQ(sotto_asr_load_parakeet(asr, &byte, 1, &byte, 1, nullptr, 0), SOTTO_ERROR_ARGUMENT);
    EXPECT_STREQ(sotto_asr_last_error(asr),
                 "asr: Parakeet runs on the CPU only (sotto_asr_set_backend(asr, SOTTO_BACKEND_CPU))");
    EXPECT_EQ(sotto_asr_set_backend(asr, SOTTO_BACKEND_CPU), SOTTO_OK);
  }
  sotto_asr_destroy(asr);
}

TEST(SpeechBackendApi, TtsUnknownBackendRefusedAndTheGpuOpens) {
  SottoTts* tts = sotto_tts_create(1);
  EXPECT_EQ(sotto_tts_set_backend(tts, -1), SOTTO_ERROR_ARGUMENT);
  EXPECT_STREQ(sotto_tts_last_error(tts), "tts: unknown backend -1 (0 cpu, 1 webgpu)");
  EXPECT_EQ(sotto_tts_set_backend(nullptr, SOTTO_BACKEND_CPU), SOTTO_ERROR_ARGUMENT);
  if (sotto::testing::open_test_device()) {
    ASSERT_EQ(sotto_tts_set_backend(tts, SOTTO_BACKEND_WEBGPU), SOTTO_OK) << sotto_tts_last_error(tts);
    const uint8_t junk[4] = {1, 2, 3, 4};
    EXPECT_NE(sotto_tts_load(tts, junk, sizeof junk), SOTTO_OK);  // a bad file is refused on either backend
    EXPECT_NE(std::string(sotto_tts_last_error(tts)), "");
  }
  sotto_tts_destroy(tts);
}

}  // namespace
