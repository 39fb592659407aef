// Option values, checked as a user would expect: a whole number is decimal digits only (so "3.7", "0x10",
// "1e3" and "-5" are refused where a count is meant, not read as 3, 16 or 1000), a number is a finite decimal,
// and a value out of range is refused with the option's name and its range:
//   generate: -n must be a whole number from 0 to 1000000, not '3.7'
// The wasm CLI (web/cli.mjs) checks the same ranges with the same words.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "core/error.h"

namespace sotto::cli {

// An argument list walked one option at a time; value() takes the option's value (an error naming the
// option when there is none).
class ArgCursor {
 public:
  ArgCursor(std::string_view command, std::span<char* const> args) : command_(command), args_(args) {}
  bool done() const { return at_ >= args_.size(); }
  std::string_view next() { return args_[at_++]; }
  Result<std::string_view> value(std::string_view option);
  Result<int64_t> whole(std::string_view option, int64_t lo, int64_t hi);
  Result<uint64_t> seed(std::string_view option);  // 0 to 2^64 - 1
  // A finite number in [lo, hi]; above_lo: lo itself is excluded.
  Result<double> number(std::string_view option, double lo, double hi, bool above_lo = false);
  std::string_view command() const { return command_; }

 private:
  std::string_view command_;
  std::span<char* const> args_;
  size_t at_ = 0;
};

// The checks on their own, for a value in hand. Errors: "<command>: <option> must be ..., not '<value>'".
Result<int64_t> parse_whole(std::string_view command, std::string_view option, std::string_view value,
                            int64_t lo, int64_t hi);
Result<double> parse_number(std::string_view command, std::string_view option, std::string_view value,
                            double lo, double hi, bool above_lo = false);

}  // namespace sotto::cli
