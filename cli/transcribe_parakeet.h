// `sotto transcribe -m PARAKEET_DIR AUDIO` for Parakeet TDT directories (config.json with model_type
// "parakeet_tdt" + model.safetensors, optionally NeMo's tokenizer.model for text). The command's option
// parsing and WAV loading live in transcribe.cpp; it hands a Parakeet directory here:
//   if (asr::is_parakeet_dir(o.model_dir))
//     return run_transcribe_parakeet(o.model_dir, *audio, o.json, o.threads);
#pragma once

#include <span>
#include <string>

namespace sotto::cli {

// Prints the text (or, without tokenizer.model, the token ids) and with `json` one object:
// {"text": ..., "tokens": [...], "start_s": [...], "duration_s": [...]} (80 ms encoder frames).
int run_transcribe_parakeet(const std::string& model_dir, std::span<const float> audio_16k, bool json,
                            int threads);

}  // namespace sotto::cli
