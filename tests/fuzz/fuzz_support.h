// What every reader's fuzz target checks of a failure: the message is one line (a name from the file is quoted
// with its control bytes escaped, never pasted raw), so the CLI's and the page's one-line errors hold.
#pragma once
#include <cstdlib>
#include <string>

template <class Result>
void require_one_line_error(const Result& result) {
  if (!result.ok() && result.status().message().find('\n') != std::string::npos) std::abort();
}
