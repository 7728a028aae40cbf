// sparsepush/train/summary.hpp: summary_value, a JSON-shaped value (null, bool, integers, double,
// text, arrays, objects with keys in insertion order) that a run's summary is built as, with no
// JSON library: a front end turns it into its own (nlohmann::json in sparsepush-train, a dict in
// Python). Numbers keep their C++ type: an unsigned count stays unsigned, a double a double.
#pragma once

#include <cstdint>
#include <cstddef>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include "../config.hpp"

namespace sparsepush {
inline namespace v0 {

/// A JSON-shaped value; see the header comment.
class summary_value {
 public:
  /// A JSON array.
  using array = std::vector<summary_value>;
  /// A JSON object: its members in insertion order.
  using object = std::vector<std::pair<std::string, summary_value>>;
  /// What a value holds: null, a bool, a signed or unsigned integer, a double, text, array or object.
  using variant = std::variant<std::nullptr_t, bool, std::int64_t, std::uint64_t, double, std::string, array, object>;

  /// null (the default).
  summary_value(std::nullptr_t = nullptr) : v_(nullptr) {}  // NOLINT: implicit by design, as JSON values are
  /// true or false.
  summary_value(bool b) : v_(b) {}                          // NOLINT
  /// An integer: signed types are held as std::int64_t, unsigned ones as std::uint64_t.
  template <class I>
    requires std::is_integral_v<I> && (!std::is_same_v<I, bool>)
  summary_value(I i) {  // NOLINT
    if constexpr (std::is_signed_v<I>) v_ = static_cast<std::int64_t>(i);
    else v_ = static_cast<std::uint64_t>(i);
  }
  /// A floating-point number, held as a double.
  template <class F>
    requires std::is_floating_point_v<F>
  summary_value(F f) : v_(static_cast<double>(f)) {}  // NOLINT
  /// Text.
  summary_value(std::string s) : v_(std::move(s)) {}  // NOLINT
  /// Text (copied).
  summary_value(const char* s) : v_(std::string(s)) {}  // NOLINT
  /// An array.
  summary_value(array a) : v_(std::move(a)) {}  // NOLINT
  /// An object (keys in the given order).
  summary_value(object o) : v_(std::move(o)) {}  // NOLINT
  /// An array of numbers or texts.
  template <class T>
  static summary_value list(const std::vector<T>& xs) {
    array a;
    for (const auto& x : xs) a.emplace_back(x);
    return a;
  }

  /// The held value (std::visit it to convert the summary into another JSON type).
  const variant& get() const noexcept { return v_; }
  /// True for null.
  bool is_null() const noexcept { return std::holds_alternative<std::nullptr_t>(v_); }
  /// The member `key` of an object; config_error when this is not an object or has none.
  const summary_value& at(std::string_view key) const {
    if (const auto* o = std::get_if<object>(&v_))
      for (const auto& [k, v] : *o)
        if (k == key) return v;
    throw config_error("summary: no member '" + std::string(key) + "'");
  }
  /// Add (or replace) the member `key` of an object.
  summary_value& set(std::string_view key, summary_value value) {
    auto* o = std::get_if<object>(&v_);
    if (!o) throw config_error("summary: set '" + std::string(key) + "' on a value that is not an object");
    for (auto& [k, v] : *o)
      if (k == key) return v = std::move(value);
    o->emplace_back(std::string(key), std::move(value));
    return o->back().second;
  }

 private:
  variant v_;
};

}  // namespace v0
}  // namespace sparsepush
