// The C API's speech recognition (api/sotto.h): a handle owns a Moonshine or a Parakeet TDT model (weights
// copied onto its CPU context), an optional Silero VAD that cuts long audio at pauses, and the buffers it hands out.
#include <cmath>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "api/sotto.h"
#include "audio/resample.h"
#include "core/thread_pool.h"
#include "gpu/device.h"
#include "io/describe.h"
#include "io/onnx.h"
#include "io/wav.h"
#include "models/asr/moonshine.h"
#include "models/asr/moonshine_windows.h"
#include "models/asr/parakeet.h"
#include "models/asr/parakeet_vocab.h"
#include "models/vad/silero.h"
#include "nn/tensor.h"
#include "text/tokenizer_json.h"

struct SottoAsr {
  std::string last_error;
  std::unique_ptr<sotto::ThreadPool> own_pool;
  sotto::ThreadPool* pool = nullptr;           // own_pool, or the web engine's (sotto_asr_create_on_pool)
  std::unique_ptr<sotto::gpu::Device> device;  // Moonshine's GPU (sotto_asr_set_backend); outlives the model
  std::optional<sotto::asr::MoonshineModel> model;
  std::unique_ptr<sotto::asr::ParakeetModel> parakeet;  // or this (sotto_asr_load_parakeet)
  sotto::asr::ParakeetVocab parakeet_vocab;
  std::unique_ptr<sotto::vad::SileroWeights> vad;
  std::vector<float> audio;
  std::string json;
};

SottoAsr* sotto_asr_create_on_pool(sotto::ThreadPool* pool) {
  auto* asr = new SottoAsr();
  asr->pool = pool;
  return asr;
}

extern "C" {

SottoAsr* sotto_asr_create(int32_t n_threads) {
#if defined(__wasm__)
  n_threads = 1;  // helpers would be Web Workers nobody starts for this handle
#endif
  auto* asr = new SottoAsr();
  asr->own_pool = std::make_unique<sotto::ThreadPool>(n_threads < 1 ? 1 : n_threads);
  asr->pool = asr->own_pool.get();
  return asr;
}

void sotto_asr_destroy(SottoAsr* asr) {
  delete asr;
}

const char* sotto_asr_last_error(const SottoAsr* asr) {
  return asr ? asr->last_error.c_str() : "asr: null handle";
}

int32_t sotto_asr_load(SottoAsr* asr, const uint8_t* encoder, size_t encoder_size, const uint8_t* decoder,
                       size_t decoder_size, const uint8_t* tokenizer, size_t tokenizer_size) {
  if (!asr) return SOTTO_ERROR_ARGUMENT;
  asr->last_error.clear();
  if ((!encoder && encoder_size) || (!decoder && decoder_size) || (!tokenizer && tokenizer_size)) {
    asr->last_error = "asr: null buffer";
    return SOTTO_ERROR_ARGUMENT;
  }
  asr->model.reset();
  asr->parakeet.reset();
  auto m = sotto::asr::load_moonshine(
      {encoder, encoder_size}, {decoder, decoder_size}, {tokenizer, tokenizer_size},
      asr->device ? sotto::nn::Context::webgpu(*asr->device) : sotto::nn::Context::cpu(asr->pool));
  if (!m) {
    asr->last_error = m.message();
    return SOTTO_ERROR_FILE;
  }
  asr->model.emplace(std::move(m).value());
  return SOTTO_OK;
}

int32_t sotto_asr_load_parakeet(SottoAsr* asr, const uint8_t* config_json, size_t config_size,
                                const uint8_t* safetensors, size_t safetensors_size, const uint8_t* tokenizer,
                                size_t tokenizer_size) {
  if (!asr) return SOTTO_ERROR_ARGUMENT;
  asr->last_error.clear();
  if (!config_json || !safetensors || (!tokenizer && tokenizer_size)) {
    asr->last_error = "asr: null buffer";
    return SOTTO_ERROR_ARGUMENT;
  }
  if (asr->device) {
    asr->last_error = "asr: Parakeet runs on the CPU only (sotto_asr_set_backend(asr, SOTTO_BACKEND_CPU))";
    return SOTTO_ERROR_ARGUMENT;
  }
  asr->model.reset();
  asr->parakeet.reset();
  asr->parakeet_vocab = {};
  auto m = sotto::asr::ParakeetModel::load(
      std::string_view(reinterpret_cast<const char*>(config_json), config_size),
      {safetensors, safetensors_size}, "model.safetensors", *asr->pool);
  if (!m) {
    asr->last_error = m.message();
    return SOTTO_ERROR_FILE;
  }
  if (tokenizer_size) {
    const std::span<const uint8_t> bytes(tokenizer, tokenizer_size);
    const char* name = sotto::is_tokenizer_json(bytes) ? "tokenizer.json" : "tokenizer.model";
    auto v = sotto::asr::parse_parakeet_vocab(bytes, name);
    if (!v) {
      asr->last_error = v.message();
      return SOTTO_ERROR_FILE;
    }
    if (sotto::Status s = sotto::asr::check_vocab_size(*v, (*m)->config().vocab_size, name); !s) {
      asr->last_error = s.message();
      return SOTTO_ERROR_FILE;
    }
    asr->parakeet_vocab = std::move(v).value();
  }
  (*m)->use_packed_matrices();
  asr->parakeet = std::move(m).value();
  return SOTTO_OK;
}

int32_t sotto_asr_set_backend(SottoAsr* asr, int32_t backend) {
  if (!asr) return SOTTO_ERROR_ARGUMENT;
  asr->last_error.clear();
  if (backend != SOTTO_BACKEND_CPU && backend != SOTTO_BACKEND_WEBGPU) {
    asr->last_error = sotto::cat("asr: unknown backend ", backend, " (0 cpu, 1 webgpu)");
    return SOTTO_ERROR_ARGUMENT;
  }
  asr->model.reset();  // it lives on the device it was loaded onto: load again after this
  asr->parakeet.reset();
  if (backend == SOTTO_BACKEND_CPU) {
    asr->device.reset();
    return SOTTO_OK;
  }
  if (asr->device) return SOTTO_OK;
  auto opened = sotto::gpu::open_device({});
  if (!opened) {
    asr->last_error = sotto::cat("asr: ", opened.message());
    return SOTTO_ERROR_RUN;
  }
  asr->device = std::move(opened).value();
  return SOTTO_OK;
}

int32_t sotto_asr_load_vad(SottoAsr* asr, const uint8_t* onnx, size_t size) {
  if (!asr) return SOTTO_ERROR_ARGUMENT;
  asr->last_error.clear();
  auto model = sotto::parse_onnx({onnx, size});
  if (!model) {
    asr->last_error = sotto::cat("vad: ", model.message());
    return SOTTO_ERROR_FILE;
  }
  auto weights = sotto::vad::load_silero_weights(*model, 16000);
  if (!weights) {
    asr->last_error = weights.message();
    return SOTTO_ERROR_FILE;
  }
  asr->vad = std::make_unique<sotto::vad::SileroWeights>(std::move(weights).value());
  return SOTTO_OK;
}

const float* sotto_asr_decode_wav(SottoAsr* asr, const uint8_t* bytes, size_t size, size_t* out_samples) {
  if (!asr) return nullptr;
  asr->last_error.clear();
  auto audio = sotto::decode_wav({bytes, bytes ? size : 0});
  if (!audio) {
    asr->last_error = audio.message();
    return nullptr;
  }
  std::vector<float> mono = sotto::to_mono(*audio);
  if (audio->sample_rate_hz != 16000) {
    auto resampled = sotto::resample(mono, 1, audio->sample_rate_hz, 16000);
    if (!resampled) {
      asr->last_error = resampled.message();
      return nullptr;
    }
    mono = std::move(resampled).value();
  }
  asr->audio = std::move(mono);
  asr->audio.reserve(1);  // an empty result is still a non-null pointer
  if (out_samples) *out_samples = asr->audio.size();
  return asr->audio.data();
}

const char* sotto_asr_transcribe_json(SottoAsr* asr, const float* samples, size_t n_samples,
                                      size_t* out_bytes) {
  if (!asr) return nullptr;
  asr->last_error.clear();
  if (!asr->model && !asr->parakeet) {
    asr->last_error = "asr: no model loaded";
    return nullptr;
  }
  if (!samples || n_samples == 0) {
    asr->last_error = "asr: no audio";
    return nullptr;
  }
  const std::span<const float> audio(samples, n_samples);
  for (float v : audio)
    if (!std::isfinite(v)) {
      asr->last_error = "asr: the audio holds NaN or infinite samples";
      return nullptr;
    }
  if (asr->parakeet) {
    auto r = asr->parakeet->transcribe(audio);
    if (!r) {
      asr->last_error = r.message();
      return nullptr;
    }
    std::string text;
    if (!asr->parakeet_vocab.pieces.empty()) {
      text = sotto::asr::detokenize(asr->parakeet_vocab, r->tokens);
    } else {
      for (size_t i = 0; i < r->tokens.size(); ++i) text += sotto::cat(i ? " " : "", r->tokens[i]);
    }
    asr->json = sotto::cat("{\"text\": ", sotto::json_quote(text), ", \"tokens\": [");
    for (size_t i = 0; i < r->tokens.size(); ++i) asr->json += sotto::cat(i ? ", " : "", r->tokens[i]);
    asr->json += "]}";
    if (out_bytes) *out_bytes = asr->json.size();
    return asr->json.c_str();
  }
  std::vector<float> probs;
  if (asr->vad && static_cast<double>(n_samples) > sotto::asr::WindowOptions{}.max_window_s * 16000) {
    sotto::vad::SileroVad v(*asr->vad);
    probs = sotto::vad::speech_probabilities(v, audio);
  }
  const auto windows = sotto::asr::speech_windows(audio, probs);
  auto t = sotto::asr::transcribe_windows(asr->model->weights, asr->model->tokenizer, audio, windows);
  if (!t) {
    asr->last_error = t.message();
    return nullptr;
  }
  asr->json = sotto::asr::transcript_json(*t, static_cast<double>(n_samples) / 16000, asr->pool->n_threads(),
                                          !probs.empty());
  if (out_bytes) *out_bytes = asr->json.size();
  return asr->json.c_str();
}

}  // extern "C"
