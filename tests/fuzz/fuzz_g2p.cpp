// libFuzzer target for the G2P. An input whose first byte is even is text: phonemized whole and sentence by
// sentence with models/g2p-en-us.bin (or $SOTTO_G2P_LEXICON) when the file is there; every answer must use
// only phoneme bytes and fit Kokoro's 510-symbol calls. An odd first byte makes the rest a lexicon image for
// the loader, which must reject it or give a lexicon that answers safely. Seeds: tests/fuzz/corpus/g2p/.
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>
#include <string_view>

#include "text/g2p.h"
#include "text/unicode.h"

namespace {

const sotto::g2p::G2p* real_g2p() {
  static const std::unique_ptr<sotto::g2p::G2p> g = [] {
    const char* env = std::getenv("SOTTO_G2P_LEXICON");
    auto r = sotto::g2p::G2p::load_file(env ? env : "models/g2p-en-us.bin");
    return r.ok() ? std::make_unique<sotto::g2p::G2p>(std::move(r).value()) : nullptr;
  }();
  return g.get();
}

void check(std::string_view ps) {
  // Valid UTF-8 made of symbols only (no control bytes), and never U+FFFD.
  for (uint32_t cp : sotto::decode_utf8_lenient(ps))
    if (cp == sotto::kReplacementChar || cp < 0x20) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string_view rest(reinterpret_cast<const char*>(data + 1), size - 1);
  if (data[0] % 2 == 1) {
    auto g = sotto::g2p::G2p::load(std::span<const uint8_t>(data + 1, size - 1), "fuzz.bin");
    if (g.ok()) check(g->phonemize("The quick brown fox, 42 times."));
    return 0;
  }
  const sotto::g2p::G2p* g = real_g2p();
  if (!g) return 0;
  check(g->phonemize(rest));
  for (const auto& s : g->phonemize_sentences(rest, 64 + data[0])) {
    check(s.phonemes);
    if (sotto::decode_utf8_lenient(s.phonemes).size() > 64u + data[0]) std::abort();
  }
  for (const auto& w : g->words(rest)) check(w.phonemes);
  return 0;
}
