// examples/cli_numbers.hpp: strict number options for the command-line programs. CLI11's own
// range checks accept "0.02abc" up to the first bad character and then print the whole range
// of a double (309 digits), and an unsigned option wraps "-1" to 2^64 - 1. These validators read
// the option's whole text first: it must be a finite decimal number (or a whole number, for a
// count) and lie in the range, and each failure says which of these it was.
#pragma once

#include <CLI/CLI.hpp>

#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <string>

namespace cli_numbers {

/// %g of a bound, for messages.
inline std::string shown(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.10g", v);
  return buf;
}

/// The option's text, quoted, with control bytes escaped (a message never carries them raw).
inline std::string shown_text(const std::string& s) {
  std::string out = "'";
  for (const unsigned char ch : s) {
    if (ch < 0x20 || ch == 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", ch);
      out += buf;
    } else {
      out += static_cast<char>(ch);
    }
  }
  return out + "'";
}

/// A finite decimal number in the range [lo, hi], an end open where asked (hi = infinity: no
/// upper bound). Messages: "'0.02abc' is not a number", "must be > 0, got -1".
inline CLI::Validator real(double lo, double hi, bool lo_open = false, bool hi_open = false) {
  std::string range;
  if (std::isinf(hi)) range = (lo_open ? "> " : ">= ") + shown(lo);
  else range = std::string("in ") + (lo_open ? "(" : "[") + shown(lo) + ", " + shown(hi) + (hi_open ? ")" : "]");
  return CLI::Validator(
      [=](std::string& text) -> std::string {
        double v = 0;
        const char* b = text.data();
        const char* e = b + text.size();
        if (b != e && *b == '+') ++b;  // from_chars takes no plus sign
        const auto [end, ec] = std::from_chars(b, e, v);
        if (text.empty() || end != e || (ec != std::errc() && ec != std::errc::result_out_of_range))
          return shown_text(text) + " is not a number";
        if (ec == std::errc::result_out_of_range || !std::isfinite(v))
          return "must be a finite number " + range + ", got " + shown_text(text);
        const bool low = lo_open ? !(v > lo) : !(v >= lo);
        const bool high = hi_open ? !(v < hi) : !(v <= hi);
        if (low || high) return "must be " + range + ", got " + text;
        return {};
      },
      "NUMBER " + range);
}

/// A whole number (decimal digits only: no sign, exponent or fraction) in [lo, hi].
/// Messages: "'-1' is not a whole number", "'1e23' is not a whole number",
/// "must be in [1, 4096], got 4097", "'18446744073709551616' is too large (at most ...)".
inline CLI::Validator whole(std::uint64_t lo, std::uint64_t hi) {
  const std::string range = "in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]";
  return CLI::Validator(
      [=](std::string& text) -> std::string {
        std::uint64_t v = 0;
        const char* b = text.data();
        const char* e = b + text.size();
        if (b == e || *b < '0' || *b > '9') return shown_text(text) + " is not a whole number";
        const auto [end, ec] = std::from_chars(b, e, v);
        if (end != e) return shown_text(text) + " is not a whole number";
        if (ec == std::errc::result_out_of_range || v > hi)
          return (v > hi && ec == std::errc() ? "must be " + range + ", got " + text
                                                : shown_text(text) + " is too large (at most " + std::to_string(hi) + ")");
        if (v < lo) return "must be " + range + ", got " + text;
        return {};
      },
      "COUNT " + range);
}

inline constexpr double unbounded = std::numeric_limits<double>::infinity();

}  // namespace cli_numbers
