// The sotto command's subcommands. Each lives in its own cli/<name>.cpp and is listed once in main.cpp's
// table; a command gets the arguments after its name and returns the process exit code
// (0 ok, 1 the work failed, 2 bad usage).
#pragma once

#include <span>
#include <string_view>

namespace sotto::cli {

inline constexpr int kExitOk = 0;
inline constexpr int kExitFailure = 1;
inline constexpr int kExitUsage = 2;

struct Command {
  std::string_view name;
  std::string_view usage;    // "info FILE [--json]"
  std::string_view summary;  // one line for `sotto --help`
  int (*run)(std::span<char* const> args);
  std::string_view options = {};  // the option list `sotto COMMAND --help` prints below the usage
};

// Prints "sotto: <message>" on stderr (one line) and returns kExitFailure.
int fail(std::string_view message);
// Prints the message and the usage on stderr and returns kExitUsage.
int usage_error(std::string_view message);

int run_info(std::span<char* const> args);
int run_generate(std::span<char* const> args);   // generate.cpp
int run_chat(std::span<char* const> args);       // generate.cpp
int run_bench(std::span<char* const> args);      // generate.cpp (bench llm)
int run_bench_gpu(std::span<char* const> args);  // gpu.cpp: bench llm --backend webgpu
int run_gpu_check(std::span<char* const> args);  // gpu.cpp: the op harness on this machine's GPU
int run_tokenize(std::span<char* const> args);
int run_detokenize(std::span<char* const> args);
int run_vad(std::span<char* const> args);         // vad.cpp
int run_speak(std::span<char* const> args);       // speak.cpp
int run_phonemize(std::span<char* const> args);   // phonemize.cpp: English text -> Kokoro phonemes
int run_transcribe(std::span<char* const> args);  // transcribe.cpp
int run_agent(std::span<char* const> args);       // agent.cpp: the voice agent on files

}  // namespace sotto::cli
