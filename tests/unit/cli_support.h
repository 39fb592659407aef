// Running the `sotto` binary as a user does, for the CLI tests: arguments through the shell, optional text on
// stdin, stdout and stderr captured, the exit code (-1 when it did not exit normally, e.g. killed).
#pragma once

#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <string>

namespace sotto::testing {

struct CliRun {
  int exit_code = -1;
  std::string out;
  std::string err;
};

inline std::string read_whole_file(const std::string& path) {
  std::string text;
  if (std::FILE* f = std::fopen(path.c_str(), "rb")) {
    char buf[65536];
    size_t n;
    while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) text.append(buf, n);
    std::fclose(f);
  }
  return text;
}

// `args` is shell text (quote paths yourself); `input` goes to stdin (empty: /dev/null).
inline CliRun run_sotto(const std::string& args, const std::string& input = "") {
  CliRun run;
  char err_path[] = "/tmp/sotto_cli_err_XXXXXX";
  char in_path[] = "/tmp/sotto_cli_in_XXXXXX";
  const int err_fd = mkstemp(err_path);
  const int in_fd = mkstemp(in_path);
  if (err_fd < 0 || in_fd < 0) return run;
  if (!input.empty() && write(in_fd, input.data(), input.size()) != static_cast<ssize_t>(input.size()))
    return run;
  close(err_fd);
  close(in_fd);
  const std::string command =
      std::string("'") + SOTTO_CLI_PATH + "' " + args + " <'" + in_path + "' 2>'" + err_path + "'";
  if (std::FILE* p = popen(command.c_str(), "r")) {
    char buf[65536];
    size_t n;
    while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) run.out.append(buf, n);
    const int status = pclose(p);
    run.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }
  run.err = read_whole_file(err_path);
  std::remove(err_path);
  std::remove(in_path);
  return run;
}

}  // namespace sotto::testing
