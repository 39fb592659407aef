// The G2P's C ABI for web/engine.js: load a lexicon image held in wasm memory (copied; the caller may free
// it), then text in, JSON out: {"phonemes": "...", "sentences": [{"text", "phonemes"}, ...], "words": [{"text",
// "phonemes", "source"}, ...]} (as `sotto phonemize --json`), each sentence at most 510 phonemes (a Kokoro call). Strings go out as NUL-terminated UTF-8 from malloc for sotto_free.
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>

#include "io/describe.h"
#include "text/g2p.h"

#define SOTTO_EXPORT(name) __attribute__((export_name(#name)))

namespace {

char* to_c_string(const std::string& s) {
  char* out = static_cast<char*>(malloc(s.size() + 1));
  if (!out) return nullptr;
  memcpy(out, s.data(), s.size());
  out[s.size()] = '\0';
  return out;
}

// The last load's error, for sotto_g2p_error(): a plain buffer (a global std::string would need the
// exit-time destructor registration this module has no runtime for).
char last_error[512];

}  // namespace

extern "C" {

// Returns a handle, or null with the reason in sotto_g2p_error().
SOTTO_EXPORT(sotto_g2p_load) sotto::g2p::G2p* sotto_g2p_load(const uint8_t* bytes, uint32_t size) {
  auto g = sotto::g2p::G2p::load({bytes, size}, "g2p lexicon");
  if (!g.ok()) {
    const size_t n = g.message().size() < sizeof last_error - 1 ? g.message().size() : sizeof last_error - 1;
    memcpy(last_error, g.message().data(), n);
    last_error[n] = '\0';
    return nullptr;
  }
  return new sotto::g2p::G2p(std::move(g).value());
}

SOTTO_EXPORT(sotto_g2p_error) char* sotto_g2p_error() {
  return to_c_string(last_error);
}

// 0: en-us, 1: en-gb (from the lexicon image).
SOTTO_EXPORT(sotto_g2p_lang) int sotto_g2p_lang(const sotto::g2p::G2p* g) {
  return g && g->lang() == sotto::g2p::Lang::EnGb ? 1 : 0;
}

// `parts`: 1 the whole text's phonemes, 2 its sentences, 4 its words; the JSON has the members asked for.
SOTTO_EXPORT(sotto_g2p_phonemize)
char* sotto_g2p_phonemize(const sotto::g2p::G2p* g, const char* text, uint32_t size, int parts) {
  if (!g) return to_c_string("{\"error\":\"no G2P loaded\"}");
  const std::string_view t(text, size);
  std::string out = "{";
  if (parts & 1) out += "\"phonemes\":" + sotto::json_quote(g->phonemize(t));
  if (parts & 2) {
    out += out.size() > 1 ? ",\"sentences\":[" : "\"sentences\":[";
    const auto sentences = g->phonemize_sentences(t);
    for (size_t i = 0; i < sentences.size(); ++i)
      out += sotto::cat(i ? "," : "", "{\"text\":", sotto::json_quote(sentences[i].text),
                        ",\"phonemes\":", sotto::json_quote(sentences[i].phonemes), "}");
    out += "]";
  }
  if (parts & 4) {
    out += out.size() > 1 ? ",\"words\":[" : "\"words\":[";
    const auto words = g->words(t);
    for (size_t i = 0; i < words.size(); ++i)
      out += sotto::cat(i ? "," : "", "{\"text\":", sotto::json_quote(words[i].text),
                        ",\"phonemes\":", sotto::json_quote(words[i].phonemes), ",\"source\":\"",
                        sotto::g2p::source_name(words[i].source), "\"}");
    out += "]";
  }
  return to_c_string(out + "}");
}

SOTTO_EXPORT(sotto_g2p_free) void sotto_g2p_free(sotto::g2p::G2p* g) {
  delete g;
}

}  // extern "C"
