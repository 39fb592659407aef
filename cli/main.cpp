// sotto: the command-line front end. Subcommands are looked up in kCommands; add a new one by writing
// cli/<name>.cpp and adding a row here.
#include <cstdio>
#include <cstring>
#include <span>
#include <string>

#include "commands.h"

namespace sotto::cli {

namespace {

constexpr std::string_view kVersion = "0.1.0";

constexpr Command kCommands[] = {
    {"info", "info FILE [--json]",
     "show a model or audio file's format, metadata and tensors (GGUF, safetensors, ONNX, WAV)", run_info},
    {"generate", "generate -m FILE -p TEXT [-n N] [--json]",
     "write text with a llama/qwen2/qwen3 GGUF model on the CPU (see cli/generate.cpp for all options)",
     run_generate},
    {"chat", "chat -m FILE [--ctx N]", "talk with a chat model; the KV cache is kept across turns", run_chat},
    {"bench", "bench llm -m FILE [--threads T]", "measure prefill (64 and 256 tokens) and decode speed",
     run_bench},
    {"tokenize", "tokenize -m FILE [--special] [--no-bos]",
     "UTF-8 text on stdin -> JSON array of token ids, with the GGUF file's own tokenizer", run_tokenize},
    {"detokenize", "detokenize -m FILE [--hide-special]", "JSON array of token ids on stdin -> the text",
     run_detokenize},
};

void print_usage(std::FILE* out) {
  std::fprintf(out, "usage: sotto COMMAND [ARGS]\n       sotto --help | --version\n\ncommands:\n");
  for (const Command& c : kCommands)
    std::fprintf(out, "  %-28.*s %.*s\n", static_cast<int>(c.usage.size()), c.usage.data(),
                 static_cast<int>(c.summary.size()), c.summary.data());
}

}  // namespace

int fail(std::string_view message) {
  std::fprintf(stderr, "sotto: %.*s\n", static_cast<int>(message.size()), message.data());
  return kExitFailure;
}

int usage_error(std::string_view message) {
  std::fprintf(stderr, "sotto: %.*s\n\n", static_cast<int>(message.size()), message.data());
  print_usage(stderr);
  return kExitUsage;
}

int main(int argc, char** argv) {
  if (argc < 2) return usage_error("no command given");
  std::string_view first = argv[1];
  if (first == "--help" || first == "-h" || first == "help") {
    print_usage(stdout);
    return kExitOk;
  }
  if (first == "--version") {
    std::printf("sotto %.*s\n", static_cast<int>(kVersion.size()), kVersion.data());
    return kExitOk;
  }
  for (const Command& c : kCommands)
    if (c.name == first) return c.run(std::span<char* const>(argv + 2, static_cast<size_t>(argc - 2)));
  if (first.starts_with("-")) return usage_error(std::string("unknown option '").append(first).append("'"));
  return usage_error(std::string("unknown command '").append(first).append("'"));
}

}  // namespace sotto::cli

int main(int argc, char** argv) {
  return sotto::cli::main(argc, argv);
}
