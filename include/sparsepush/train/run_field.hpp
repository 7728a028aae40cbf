// sparsepush/train/run_field.hpp: the vocabulary of run_spec's field table: what the table says
// of one field (its option, help, role in the fingerprint, range, choices, and how its used value
// and its default are written), and the readers of a number's text that set() and the rules use.
#pragma once

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <string>
#include <string_view>

#include "../config.hpp"

namespace sparsepush {
inline namespace v0 {

struct run_spec;

/// Which processes must agree on a field: every number a checkpoint resumes with (`numbers`, in
/// the fingerprint), every MPI rank of one run (`ranks`), or none (`local`: threads, outputs).
enum class field_role { numbers, ranks, local };

/// One field of run_spec as the table describes it.
struct field_info {
  std::string_view option;     ///< the command line's long option without dashes ("eval-samples")
  /// It configures the gossip, not the local training: a training loop of its own takes it
  /// (sparsepush.torch.GossipOptimizer), where learning rates, batches and data are its own.
  bool gossip = false;
  std::string help;  ///< the option's help text (--help, Python's docstrings)
  field_role role = field_role::numbers;  ///< which processes must agree on the field
  std::string_view key = {};   ///< its key in the fingerprint (role numbers; empty: the option with '_')
  ///@{
  /// The bounds of a numeric field (infinite: none).
  double lo = -std::numeric_limits<double>::infinity(), hi = std::numeric_limits<double>::infinity();
  ///@}
  ///@{
  /// Whether lo and hi themselves are excluded.
  bool lo_open = false, hi_open = false;
  ///@}
  std::string choices = {};  ///< "a,b,c": the values it takes (text fields; from the choice's name table)
  /// A text of a spec: how the value a run uses is written, or how --help shows a default.
  using text_of = std::string (*)(const run_spec&);
  /// The value the run uses, as the fingerprint writes it (null: the member's own text).
  text_of used = nullptr;
  /// The default --help shows for an optional field: this text of a spec left at its defaults,
  /// from the accessor the run reads (null: none).
  text_of shown = nullptr;
  /// The fingerprint leaves the key out while its used value is the one of a spec left at its
  /// defaults (the keys added after the first fingerprint: their runs keep its text).
  bool omitted_at_default = false;
  std::string shown_default = {};  ///< shown's text (the table fills it): the default as --help prints it
  /// The range as messages write it: "in (0, 1]", "> 0", or "" for none.
  std::string range_text() const {
    if (lo == -std::numeric_limits<double>::infinity() && hi == std::numeric_limits<double>::infinity()) return {};
    auto b = [](double v) {
      char buf[32];
      std::snprintf(buf, sizeof buf, "%.10g", v);
      return std::string(buf);
    };
    if (hi == std::numeric_limits<double>::infinity()) return (lo_open ? "> " : ">= ") + b(lo);
    return std::string("in ") + (lo_open ? "(" : "[") + b(lo) + ", " + b(hi) + (hi_open ? ")" : "]");
  }
  /// The keyword Python takes: the option with '-' written as '_'.
  std::string keyword() const {
    std::string k(option);
    std::replace(k.begin(), k.end(), '-', '_');
    return k;
  }
};

namespace detail {
/// A double as --help and the messages show it: the shortest text that reads back to the same
/// bits, in %g's style ("0.0004", "2", "1e+20").
inline std::string shown_value(double v) {
  char buf[64];
  const auto r = std::to_chars(buf, buf + sizeof buf, v, std::chars_format::general);
  return std::string(buf, r.ptr);
}
/// The text of a value, quoted, with control bytes escaped.
inline std::string quoted(std::string_view s) {
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
}  // namespace detail

/// A finite decimal number (a leading '+' allowed); config_error "'0.02abc' is not a number" or
/// "must be a finite number in (0, 1], got 'inf'" (with `range`), after `what`.
inline double parse_real(std::string_view text, std::string_view what, std::string_view range = {}) {
  double v = 0;
  const char* b = text.data();
  const char* e = b + text.size();
  if (b != e && *b == '+') ++b;  // from_chars takes no plus sign
  const auto [end, ec] = std::from_chars(b, e, v);
  if (text.empty() || end != e || (ec != std::errc() && ec != std::errc::result_out_of_range))
    throw config_error(std::string(what) + detail::quoted(text) + " is not a number");
  if (ec == std::errc::result_out_of_range || !std::isfinite(v))
    throw config_error(std::string(what) + "must be a finite number " + (range.empty() ? "" : std::string(range) + ", ") +
                       "got " + detail::quoted(text));
  return v;
}

/// A whole number (decimal digits only) at most `hi`; config_error naming the text after `what`.
inline std::uint64_t parse_whole(std::string_view text, std::string_view what,
                                 std::uint64_t hi = std::numeric_limits<std::uint64_t>::max()) {
  std::uint64_t v = 0;
  const char* b = text.data();
  const char* e = b + text.size();
  if (b == e || *b < '0' || *b > '9') throw config_error(std::string(what) + detail::quoted(text) + " is not a whole number");
  const auto [end, ec] = std::from_chars(b, e, v);
  if (end != e) throw config_error(std::string(what) + detail::quoted(text) + " is not a whole number");
  if (ec == std::errc::result_out_of_range || v > hi)
    throw config_error(std::string(what) + detail::quoted(text) + " is too large (at most " + std::to_string(hi) + ")");
  return v;
}

}  // namespace v0
}  // namespace sparsepush
