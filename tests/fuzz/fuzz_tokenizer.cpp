// libFuzzer target: any bytes through the speech recognisers' tokenizer readers: Moonshine's (tokenizer.bin, or
// a Hugging Face tokenizer.json when the bytes open with '{') and Parakeet's SentencePiece model. Whatever
// parses must decode any ids, in range or not, without reading past its pieces. Seeds: tests/fuzz/corpus/tokenizer.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "fuzz_support.h"
#include "models/asr/moonshine.h"
#include "models/asr/parakeet_vocab.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::span<const uint8_t> bytes(data, size);
  const std::vector<int32_t> ids = {-1, 0, 1, 2, 3, 4, 5, 6, 7, 8, 100, 258, 259, 1 << 20};
  auto moonshine = sotto::asr::MoonshineTokenizer::parse(bytes);
  require_one_line_error(moonshine);
  if (moonshine.ok()) {
    std::vector<int32_t> all(ids);
    for (int32_t i = 0; i < static_cast<int32_t>(moonshine->size()) && i < 4096; ++i) all.push_back(i);
    (void)moonshine->decode(all);
  }
  auto vocab = sotto::asr::parse_sentencepiece_vocab(bytes);
  require_one_line_error(vocab);
  if (vocab.ok()) (void)sotto::asr::detokenize(*vocab, ids);
  return 0;
}
