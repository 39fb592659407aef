// The ids of one chat turn through the C API, grown until they fit: `sotto chat` and `sotto agent` share it.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "api/sotto.h"
#include "core/error.h"

namespace sotto::cli {

// One user turn of a chat (sotto_llm_tokenize_turn): the system prompt and the user's text stay text.
inline Result<std::vector<int32_t>> tokenize_turn(SottoLlm* llm, const std::string* system,
                                                  std::string_view user, bool first_turn, bool reply_closed) {
  std::vector<int32_t> ids(user.size() + (system ? system->size() : 0) + 64);
  for (;;) {
    const int32_t n = sotto_llm_tokenize_turn(
        llm, system ? system->data() : nullptr, system ? system->size() : 0, user.data(), user.size(),
        first_turn, reply_closed, ids.data(), static_cast<int32_t>(ids.size()));
    if (n < 0) return error(sotto_llm_last_error(llm));
    const bool fits = static_cast<size_t>(n) <= ids.size();
    ids.resize(static_cast<size_t>(n));
    if (fits) return ids;
  }
}

}  // namespace sotto::cli
