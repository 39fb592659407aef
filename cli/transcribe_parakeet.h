// `sotto transcribe -m PARAKEET_DIR AUDIO` for Parakeet TDT directories (config.json with model_type
// "parakeet_tdt" + model.safetensors, optionally NeMo's tokenizer.model for text). The command's option
// parsing and WAV loading live in transcribe.cpp; it hands a Parakeet directory here.
#pragma once

#include <span>
#include <string>

namespace sotto::cli {

struct ParakeetRunOptions {
  bool json = false;
  bool webgpu = false;       // the encoder and the TDT loop on WebGPU (Dawn); the mel on the CPU (threads)
  bool gpu_profile = false;  // each kernel's GPU time on stderr at the end
  bool bf16x3 = false;       // CPU: ParakeetModel::use_bf16x3_products (an error without AMX-BF16)
  int repeats = 1;           // timings are the median run's (the first run also compiles GPU pipelines)
  int threads = 2;
};

// Prints the text (or, without tokenizer.model, the token ids) and with `json` one object:
// {"text": ..., "tokens": [...], "start_s": [...], "duration_s": [...], "audio_s", "encode_ms", "decode_ms",
// "backend"} (80 ms encoder frames; encode_ms: mel + encoder + its output read, decode_ms: the TDT loop).
int run_transcribe_parakeet(const std::string& model_dir, std::span<const float> audio_16k,
                            const ParakeetRunOptions& o);

}  // namespace sotto::cli
