// sotto tokenize -m FILE [--special] [--no-bos]   UTF-8 text on stdin -> one JSON array of token ids
// sotto detokenize -m FILE [--hide-special]       JSON array of ids on stdin -> the text
// The tokenizer comes from the GGUF file's own metadata. `tokenize` adds BOS/EOS as the file says (what the
// model sees at the start of a prompt) unless --no-bos; --special turns text such as "<|im_start|>" into that
// control token. The hidden --jsonl flag takes one JSON value per line and answers one line each (the
// randomized comparison with llama.cpp runs thousands of strings through one process this way).
#include <cstdio>
#include <string>

#include "commands.h"
#include "io/describe.h"
#include "io/file.h"
#include "io/gguf.h"
#include "io/json.h"
#include "text/tokenizer.h"

namespace sotto::cli {

namespace {

void print(std::string_view s) {
  std::fwrite(s.data(), 1, s.size(), stdout);
}

std::string read_stdin() {
  std::string text;
  char buffer[1 << 16];
  size_t n;
  while ((n = std::fread(buffer, 1, sizeof buffer, stdin)) > 0) text.append(buffer, n);
  return text;
}

std::string ids_json(const std::vector<TokenId>& ids) {
  std::string out = "[";
  for (size_t i = 0; i < ids.size(); ++i) out += cat(i ? "," : "", ids[i]);
  return out + "]";
}

struct Options {
  std::string model_path;
  bool special = false;
  bool no_bos = false;
  bool hide_special = false;
  bool jsonl = false;
};

// Returns an error message, or "" when the arguments are fine.
std::string parse_options(std::span<char* const> args, bool detokenize, Options& o) {
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string_view a = args[i];
    if ((a == "-m" || a == "--model") && i + 1 < args.size())
      o.model_path = args[++i];
    else if (a == "--jsonl")
      o.jsonl = true;
    else if (!detokenize && a == "--special")
      o.special = true;
    else if (!detokenize && a == "--no-bos")
      o.no_bos = true;
    else if (detokenize && a == "--hide-special")
      o.hide_special = true;
    else
      return cat("unknown argument '", a, "'");
  }
  if (o.model_path.empty()) return "missing -m FILE";
  return {};
}

struct Loaded {
  MappedFile file;
  Tokenizer tokenizer;
};

Result<Loaded> load(const std::string& path) {
  SOTTO_ASSIGN(MappedFile file, MappedFile::open(path));  // its errors name the path already
  auto gguf = parse_gguf(file.bytes());
  if (!gguf) return error(path, ": ", gguf.message());
  auto tokenizer = Tokenizer::from_gguf(*gguf);
  if (!tokenizer) return error(path, ": ", tokenizer.message());
  return Loaded{std::move(file), std::move(tokenizer).value()};
}

Result<std::vector<TokenId>> parse_ids(const JsonValue& value, const Tokenizer& tokenizer) {
  if (!value.is_array()) return error("expected a JSON array of token ids");
  std::vector<TokenId> ids;
  for (size_t i = 0; i < value.items.size(); ++i) {
    const auto id = value.items[i].as_u64();
    if (!id || *id >= tokenizer.n_tokens())
      return error("item ", i, " is not a token id below ", tokenizer.n_tokens());
    ids.push_back(static_cast<TokenId>(*id));
  }
  return ids;
}

// Calls `each` for every non-empty line of stdin; stops at the first error.
template <class Each>
Status for_each_line(const std::string& input, Each each) {
  size_t line_number = 0;
  for (size_t at = 0; at < input.size();) {
    size_t end = input.find('\n', at);
    if (end == std::string::npos) end = input.size();
    ++line_number;
    const std::string_view line = std::string_view(input).substr(at, end - at);
    at = end + 1;
    if (line.empty()) continue;
    auto json = parse_json(line, "stdin");
    if (!json) return error("line ", line_number, ": ", json.message());
    SOTTO_TRY(each(*json).context(cat("line ", line_number)));
  }
  return {};
}

}  // namespace

int run_tokenize(std::span<char* const> args) {
  Options o;
  if (std::string problem = parse_options(args, false, o); !problem.empty()) return usage_error(problem);
  auto loaded = load(o.model_path);
  if (!loaded) return fail(loaded.message());
  const Tokenizer& tokenizer = loaded->tokenizer;
  const std::string input = read_stdin();
  if (!o.jsonl) {
    print(ids_json(tokenizer.tokenize(input, !o.no_bos, o.special)) + "\n");
    return kExitOk;
  }
  Status status = for_each_line(input, [&](const JsonValue& value) -> Status {
    if (!value.is_string()) return error("expected a JSON string");
    print(ids_json(tokenizer.tokenize(value.text, !o.no_bos, o.special)) + "\n");
    return {};
  });
  return status ? kExitOk : fail(status.message());
}

int run_detokenize(std::span<char* const> args) {
  Options o;
  if (std::string problem = parse_options(args, true, o); !problem.empty()) return usage_error(problem);
  auto loaded = load(o.model_path);
  if (!loaded) return fail(loaded.message());
  const Tokenizer& tokenizer = loaded->tokenizer;
  const std::string input = read_stdin();
  Status status = for_each_line(o.jsonl ? input : std::string(), [&](const JsonValue& value) -> Status {
    SOTTO_ASSIGN(const std::vector<TokenId> ids, parse_ids(value, tokenizer));
    print(json_quote(tokenizer.detokenize(ids, false, !o.hide_special)) + "\n");
    return {};
  });
  if (!o.jsonl) {
    auto json = parse_json(input, "stdin");
    if (!json) return fail(json.message());
    auto ids = parse_ids(*json, tokenizer);
    if (!ids) return fail(cat("stdin: ", ids.message()));
    print(tokenizer.detokenize(*ids, false, !o.hide_special));
  }
  return status ? kExitOk : fail(status.message());
}

}  // namespace sotto::cli
