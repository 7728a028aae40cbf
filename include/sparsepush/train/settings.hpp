// sparsepush/train/settings.hpp: the settings fingerprint of a training run: every value the nodes
// compute with, typed, in a fixed order. Numbers are compared exactly (a double is written as the
// shortest text that reads back to the same bits, std::to_chars), so a checkpoint resumes, and
// MPI ranks agree, only when every setting is the same bits.
#pragma once

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "../config.hpp"

namespace sparsepush {
inline namespace v0 {

/// An ordered list of key=value settings; text() is the canonical form ("k=v;k=v;...").
class run_settings {
 public:
  run_settings() = default;

  /// Add a setting (a key appears once and has no '=', ';' or '%'; a value's ';' and '%' are
  /// written as %3B and %25).
  run_settings& add(std::string_view key, std::string_view value) {
    check_key(key);
    std::string v;
    for (const char c : value) v += c == ';' ? std::string("%3B") : c == '%' ? std::string("%25") : std::string(1, c);
    items_.emplace_back(std::string(key), std::move(v));
    return *this;
  }
  /// Add a setting that text() leaves out while `value` is `at_default`, the value of a run that
  /// does not use it (whose text then stays as it was before the setting existed); diff_from and
  /// value_in read its absence as that default.
  run_settings& add_unless_default(std::string_view key, std::string_view value, std::string_view at_default) {
    defaults_.emplace_back(std::string(key), std::string(at_default));
    if (value != at_default) add(key, value);
    return *this;
  }
  /// A text setting (as add(key, std::string_view)).
  run_settings& add(std::string_view key, const char* value) { return add(key, std::string_view(value)); }
  /// A text setting (as add(key, std::string_view)).
  run_settings& add(std::string_view key, const std::string& value) { return add(key, std::string_view(value)); }
  /// A double, written so that it reads back to the same bits (-0 and 0 differ).
  run_settings& add(std::string_view key, double value) { return add(key, std::string_view(exact(value))); }
  /// A flag, written "1" or "0".
  run_settings& add(std::string_view key, bool value) { return add(key, std::string_view(value ? "1" : "0")); }
  /// An integer, in decimal.
  template <class I>
    requires std::is_integral_v<I> && (!std::is_same_v<I, bool>)
  run_settings& add(std::string_view key, I value) {
    return add(key, std::string_view(std::to_string(value)));
  }

  /// The canonical text: what a checkpoint stores and what MPI ranks compare.
  std::string text() const {
    std::string s;
    for (const auto& [k, v] : items_) s += k + "=" + v + ";";
    return s;
  }
  /// Settings from their canonical text (a manifest's); malformed text is a config_error.
  static run_settings parse(std::string_view text) {
    run_settings r;
    std::size_t at = 0;
    while (at < text.size()) {
      const std::size_t end = std::min(text.find(';', at), text.size());
      const std::string_view item = text.substr(at, end - at);
      const std::size_t eq = item.find('=');
      if (eq == std::string_view::npos || eq == 0)
        throw config_error("settings: '" + std::string(item) + "' at byte " + std::to_string(at) + " is not key=value");
      r.items_.emplace_back(std::string(item.substr(0, eq)), std::string(item.substr(eq + 1)));
      at = end + 1;
    }
    return r;
  }

  /// The (key, value) pairs in the order they were added, values as written (';' and '%' escaped).
  const std::vector<std::pair<std::string, std::string>>& items() const noexcept { return items_; }
  /// The same settings in the same order (the defaults of add_unless_default are not compared).
  friend bool operator==(const run_settings& a, const run_settings& b) { return a.items_ == b.items_; }

  /// The value of `key` in `in` (settings parsed from another process or a manifest), read with
  /// this one's defaults: the value, the default of a key add_unless_default left out, or "(absent)".
  std::string value_in(const run_settings& in, std::string_view key) const {
    if (const auto* v = in.find(std::string(key))) return *v;
    return absent(key);
  }

  /// The keys whose values differ from `was`, as "key=old (now new)", or "" when equal.
  std::string diff_from(const run_settings& was) const {
    std::string out;
    auto note = [&out](const std::string& k, const std::string& a, const std::string& b) {
      out += (out.empty() ? "" : ", ") + k + "=" + a + " (now " + b + ")";
    };
    for (const auto& [k, v] : was.items_) {
      const auto* now = find(k);
      if (!now) note(k, v, absent(k));
      else if (*now != v) note(k, v, *now);
    }
    for (const auto& [k, v] : items_)
      if (!was.find(k)) note(k, absent(k), v);
    if (out.empty() && !(*this == was)) out = "the same settings in another order";
    return out;
  }

  /// A double as the shortest text that reads back to the same bits ("0.02", "1e-07", "-0").
  static std::string exact(double v) {
    char buf[64];
    const auto r = std::to_chars(buf, buf + sizeof buf, v);
    return std::string(buf, r.ptr);
  }

 private:
  std::string absent(std::string_view key) const {
    for (const auto& [k, v] : defaults_)
      if (k == key) return v;
    return "(absent)";
  }
  const std::string* find(const std::string& key) const {
    for (const auto& [k, v] : items_)
      if (k == key) return &v;
    return nullptr;
  }
  void check_key(std::string_view key) const {
    if (key.empty() || key.find_first_of("=;%") != std::string_view::npos)
      throw config_error("settings: bad key '" + std::string(key) + "'");
    for (const auto& [k, v] : items_)
      if (k == key) throw config_error("settings: key " + std::string(key) + " given twice");
  }
  std::vector<std::pair<std::string, std::string>> items_;
  std::vector<std::pair<std::string, std::string>> defaults_;  ///< add_unless_default's (key, default)
};

}  // namespace v0
}  // namespace sparsepush
