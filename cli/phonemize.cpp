// sotto phonemize [--lang en-us|en-gb] [--lexicon FILE] [--json] [--sentences]   UTF-8 text on stdin ->
// Kokoro phonemes on stdout. The lexicon defaults to models/g2p-en-us.bin or models/g2p-en-gb.bin (made by
// scripts/get-models.sh from misaki's package). --sentences prints one sentence's phonemes a line (each at
// most 510, what Kokoro reads a call); --json prints {"phonemes": ..., "sentences": [...], "words": [...]}.
#include <cstdio>
#include <string>

#include "commands.h"
#include "io/describe.h"
#include "text/g2p.h"

namespace sotto::cli {

namespace {

std::string read_all_stdin() {
  std::string text;
  char buffer[1 << 16];
  size_t n;
  while ((n = std::fread(buffer, 1, sizeof buffer, stdin)) > 0) text.append(buffer, n);
  return text;
}

void print(std::string_view s) {
  std::fwrite(s.data(), 1, s.size(), stdout);
}

}  // namespace

int run_phonemize(std::span<char* const> args) {
  std::string lang = "en-us", lexicon;
  bool json = false, sentences = false;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string_view a = args[i];
    if (a == "--lang" && i + 1 < args.size())
      lang = args[++i];
    else if (a == "--lexicon" && i + 1 < args.size())
      lexicon = args[++i];
    else if (a == "--json")
      json = true;
    else if (a == "--sentences")
      sentences = true;
    else
      return usage_error(cat("unknown argument '", a, "'"));
  }
  if (lang != "en-us" && lang != "en-gb")
    return usage_error(cat("--lang must be en-us or en-gb, not '", lang, "'"));
  if (lexicon.empty()) lexicon = lang == "en-us" ? "models/g2p-en-us.bin" : "models/g2p-en-gb.bin";
  auto g2p = g2p::G2p::load_file(lexicon);
  if (!g2p) return fail(cat(g2p.message(), " (bash scripts/get-models.sh g2p makes it)"));
  if ((g2p->lang() == g2p::Lang::EnGb) != (lang == "en-gb"))
    return fail(
        cat(lexicon, " is the ", g2p->lang() == g2p::Lang::EnGb ? "en-gb" : "en-us", " lexicon, not ", lang));
  const std::string text = read_all_stdin();
  if (json) {
    std::string out = "{\"lang\":" + json_quote(lang) + ",\"phonemes\":" + json_quote(g2p->phonemize(text)) +
                      ",\"sentences\":[";
    const auto ss = g2p->phonemize_sentences(text);
    for (size_t i = 0; i < ss.size(); ++i)
      out += cat(i ? "," : "", "{\"text\":", json_quote(ss[i].text),
                 ",\"phonemes\":", json_quote(ss[i].phonemes), "}");
    out += "],\"words\":[";
    const auto ws = g2p->words(text);
    for (size_t i = 0; i < ws.size(); ++i)
      out += cat(i ? "," : "", "{\"text\":", json_quote(ws[i].text),
                 ",\"phonemes\":", json_quote(ws[i].phonemes), ",\"source\":\"",
                 g2p::source_name(ws[i].source), "\"}");
    print(out + "]}\n");
  } else if (sentences) {
    for (const auto& s : g2p->phonemize_sentences(text)) print(s.phonemes + "\n");
  } else {
    print(g2p->phonemize(text) + "\n");
  }
  return kExitOk;
}

}  // namespace sotto::cli
