#include "transcribe_parakeet.h"

#include <cstdio>

#include "commands.h"
#include "io/describe.h"
#include "io/file.h"
#include "models/asr/parakeet.h"
#include "models/asr/parakeet_vocab.h"

namespace sotto::cli {

int run_transcribe_parakeet(const std::string& model_dir, std::span<const float> audio_16k, bool json,
                            int threads) {
  auto model = asr::ParakeetModel::open(model_dir, threads);
  if (!model) return fail(cat(model_dir, ": ", model.message()));
  (*model)->use_packed_matrices();  // CPU: each weight packed once for the product kernel, not per product
  asr::ParakeetVocab vocab;
  if (auto tok = MappedFile::open(model_dir + "/tokenizer.model"); tok.ok()) {
    auto v = asr::parse_sentencepiece_vocab(tok->bytes(), model_dir + "/tokenizer.model");
    if (!v) return fail(v.message());
    if (Status s = asr::check_vocab_size(*v, (*model)->config().vocab_size, model_dir + "/tokenizer.model");
        !s)
      return fail(s.message());
    vocab = std::move(v).value();
  }
  auto r = (*model)->transcribe(audio_16k);
  if (!r) return fail(r.message());
  std::string text;
  if (!vocab.pieces.empty()) {
    text = asr::detokenize(vocab, r->tokens);
  } else {
    for (size_t i = 0; i < r->tokens.size(); ++i) text += cat(i ? " " : "", r->tokens[i]);
  }
  if (!json) {
    std::printf("%s\n", text.c_str());
    return 0;
  }
  constexpr double frame_s = 0.08;
  std::string out = cat("{\"text\": ", json_quote(text), ", \"tokens\": [");
  for (size_t i = 0; i < r->tokens.size(); ++i) out += cat(i ? ", " : "", r->tokens[i]);
  out += "], \"start_s\": [";
  for (size_t i = 0; i < r->frames.size(); ++i) out += cat(i ? ", " : "", r->frames[i] * frame_s);
  out += "], \"duration_s\": [";
  for (size_t i = 0; i < r->durations.size(); ++i) out += cat(i ? ", " : "", r->durations[i] * frame_s);
  out += "]}";
  std::printf("%s\n", out.c_str());
  return 0;
}

}  // namespace sotto::cli
