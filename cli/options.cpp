#include "options.h"

#include <charconv>
#include <cmath>
#include <cstdlib>

namespace sotto::cli {

namespace {

bool all_digits(std::string_view s) {
  if (s.empty()) return false;
  for (char c : s)
    if (c < '0' || c > '9') return false;
  return true;
}

// A bound as written: whole numbers without an exponent (600000, not 6e+05).
std::string bound_text(double v) {
  return v == std::floor(v) && std::fabs(v) < 1e15 ? cat(static_cast<int64_t>(v)) : cat(v);
}

// The range in words: "from 0 to 1", "above 0 up to 100".
std::string range_text(double lo, double hi, bool above_lo) {
  return above_lo ? cat("above ", bound_text(lo), " up to ", bound_text(hi))
                  : cat("from ", bound_text(lo), " to ", bound_text(hi));
}

}  // namespace

Result<int64_t> parse_whole(std::string_view command, std::string_view option, std::string_view value,
                            int64_t lo, int64_t hi) {
  const std::string_view digits = value.starts_with('-') ? value.substr(1) : value;
  int64_t v = 0;
  const bool parsed = all_digits(digits) &&
                      std::from_chars(value.data(), value.data() + value.size(), v).ec == std::errc() &&
                      v >= lo && v <= hi;
  if (!parsed)
    return error(command, ": ", option, " must be a whole number from ", lo, " to ", hi, ", not '", value,
                 "'");
  return v;
}

Result<double> parse_number(std::string_view command, std::string_view option, std::string_view value,
                            double lo, double hi, bool above_lo) {
  // Plain decimals only: strtod would also take "nan", "inf", hex floats and leading spaces.
  bool plain = !value.empty();
  for (char c : value)
    plain &= (c >= '0' && c <= '9') || c == '.' || c == '-' || c == '+' || c == 'e' || c == 'E';
  const std::string copy(value);
  char* end = nullptr;
  const double v = plain ? std::strtod(copy.c_str(), &end) : 0.0;
  const bool ok = plain && end == copy.c_str() + copy.size() && std::isfinite(v) &&
                  (above_lo ? v > lo : v >= lo) && v <= hi;
  if (!ok)
    return error(command, ": ", option, " must be a number ", range_text(lo, hi, above_lo), ", not '", value,
                 "'");
  return v;
}

Result<std::string_view> ArgCursor::value(std::string_view option) {
  if (done()) return error(command_, ": ", option, " needs a value");
  return next();
}

Result<int64_t> ArgCursor::whole(std::string_view option, int64_t lo, int64_t hi) {
  if (done()) return error(command_, ": ", option, " needs a whole number from ", lo, " to ", hi);
  return parse_whole(command_, option, next(), lo, hi);
}

Result<uint64_t> ArgCursor::seed(std::string_view option) {
  if (done()) return error(command_, ": ", option, " needs a whole number from 0 to 18446744073709551615");
  const std::string_view v = next();
  uint64_t seed = 0;
  if (!all_digits(v) || std::from_chars(v.data(), v.data() + v.size(), seed).ec != std::errc())
    return error(command_, ": ", option, " must be a whole number from 0 to 18446744073709551615, not '", v,
                 "'");
  return seed;
}

Result<double> ArgCursor::number(std::string_view option, double lo, double hi, bool above_lo) {
  if (done()) return error(command_, ": ", option, " needs a number ", range_text(lo, hi, above_lo));
  return parse_number(command_, option, next(), lo, hi, above_lo);
}

}  // namespace sotto::cli
