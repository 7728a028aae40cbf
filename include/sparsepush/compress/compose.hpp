// sparsepush/compress/compose.hpp: a runtime-chosen compressor (a variant of the policies) and
// the spec strings that name one, for command lines and configs:
//   identity | top-k:F | random-k:F | random-k-unbiased:F | threshold:F | qsgd:S[:R] | sign
// where F is a fraction in (0, 1] ("0.01") or a count ("1000"), optionally followed by
// "+fp32" "+fp16" "+bf16" "+int8" "+sign" "+qsgd:S[:R]" (the value encoding of the kept values)
// and "+u32" / "+varint" (the index encoding); R is QSGD's random stream, philox7 (the default)
// or philox10 (the bits of 0.3.3). Example: "top-k:0.001+int8", "qsgd:16:philox10".
#pragma once

#include <charconv>
#include <cmath>
#include <limits>
#include <optional>
#include <utility>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "feedback.hpp"
#include "identity.hpp"
#include "qsgd.hpp"
#include "random_k.hpp"
#include "sign.hpp"
#include "threshold.hpp"
#include "top_k.hpp"

namespace sparsepush {
inline namespace v0 {

/// Any of the built-in compressors, chosen at run time.
class any_compressor {
 public:
  /// The compressors it can hold.
  using variant_type = std::variant<identity, top_k, random_k, threshold_k, qsgd, scaled_sign>;

  any_compressor() = default;
  /// Holds c, one of variant_type's compressors (implicit, so a top_k converts where an
  /// any_compressor is expected).
  template <class C>
    requires std::is_constructible_v<variant_type, C>
  any_compressor(C c) : impl_(std::move(c)) {}  // NOLINT: implicit by design

  /// Throw what compress would throw for this configuration at dimension d.
  void validate(std::size_t d, const context& ctx) const {
    std::visit([&](const auto& c) { c.validate(d, ctx); }, impl_);
  }

  /// The held compressor's compress (with ws where that compressor takes scratch).
  template <tensor_element T>
  void compress(std::span<const T> v, message& out, const context& ctx, compress_workspace<T>& ws) const {
    std::visit([&](const auto& c) { compress_with<T>(c, v, out, ctx, ws); }, impl_);
  }

  /// Fused error feedback with the held compressor: v = x + e; out = C(v); e = v - out.
  template <tensor_element T>
  void compress_feedback(std::span<const T> x, std::span<T> e, message& out, const context& ctx,
                         compress_workspace<T>& ws) const {
    std::visit([&](const auto& c) { compress_with_feedback<T>(c, x, e, out, ctx, ws); }, impl_);
  }

  /// Whether plan_step and apply_step serve the held compressor (a global top-K: top_k::fuses_step).
  bool fuses_step() const noexcept {
    const auto* t = std::get_if<top_k>(&impl_);
    return t && t->fuses_step();
  }
  /// top_k::plan_step of the held top-K (config_error for any other compressor).
  template <tensor_element T>
  void plan_step(std::span<const T> x, std::span<const T> p, T gamma, std::span<const T> e,
                 std::vector<std::uint32_t>& plan, const context& ctx, compress_workspace<T>& ws) const {
    fused().plan_step(x, p, gamma, e, plan, ctx, ws);
  }
  /// top_k::apply_step of the held top-K (config_error for any other compressor).
  template <tensor_element T>
  void apply_step(std::span<T> x, std::span<const T> p, T gamma, std::span<T> e, std::span<const std::uint32_t> plan,
                  message& out, const context& ctx) const {
    fused().apply_step(x, p, gamma, e, plan, out, ctx);
  }

  /// The held compressor (std::get or std::visit on it).
  const variant_type& get() const noexcept { return impl_; }

 private:
  const top_k& fused() const {
    const auto* t = std::get_if<top_k>(&impl_);
    if (!t) throw config_error("only top-K has a fused step (plan_step, apply_step)");
    return *t;
  }
  variant_type impl_{identity{}};
};

namespace detail {

/// The spec as a message quotes it: printable ASCII as is, every other byte as \xNN, so that a
/// control byte or a stray UTF-8 sequence shows up instead of vanishing on the terminal.
inline std::string quoted_spec(std::string_view spec) {
  static constexpr char hex[] = "0123456789abcdef";
  std::string out = "compressor spec '";
  for (const char c : spec) {
    const auto b = static_cast<unsigned char>(c);
    if (b >= 0x20 && b < 0x7f) out += c;
    else out += {'\\', 'x', hex[b >> 4], hex[b & 15]};
  }
  return out + "'";
}

/// Reject a byte no spec uses (a control byte, a space, DEL, anything outside ASCII), naming the
/// first one and its position: otherwise it surfaces later as a misleading complaint about the
/// number or name it happens to follow.
inline void check_spec_bytes(std::string_view spec) {
  static constexpr char hex[] = "0123456789abcdef";
  for (std::size_t i = 0; i < spec.size(); ++i) {
    const auto b = static_cast<unsigned char>(spec[i]);
    if (b > 0x20 && b < 0x7f) continue;
    throw config_error(quoted_spec(spec) + ": unexpected " +
                       (b == 0x20 ? std::string("space") : std::string("byte 0x") + hex[b >> 4] + hex[b & 15]) +
                       " at position " + std::to_string(i));
  }
}

/// A finite number (from_chars also reads "nan" and "inf", which no setting takes). s is a view
/// into spec; `what` names the setting ("k", "qsgd levels") for an empty s.
inline double parse_number(std::string_view s, std::string_view spec, const char* what) {
  if (s.empty()) throw config_error(quoted_spec(spec) + ": missing " + what);
  double v = 0;
  const auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  const std::string head = quoted_spec(spec) + ": '" + std::string(s) + "'";
  if (ec == std::errc::invalid_argument) throw config_error(head + " is not a number");
  if (ec == std::errc::result_out_of_range) throw config_error(head + " is out of range (not a finite number)");
  if (p != s.data() + s.size()) {
    // s lies inside spec (a substring view), so the offending character's place in it is known
    const std::size_t at = static_cast<std::size_t>(p - spec.data());
    throw config_error(head + " is not a number: unexpected '" + std::string(1, *p) + "' at position " +
                       std::to_string(at));
  }
  if (!std::isfinite(v)) throw config_error(head + " is not a finite number");
  return v;
}

inline k_spec parse_k(std::string_view s, std::string_view spec) {
  const double v = parse_number(s, spec, "k (a fraction such as 0.01 or a count such as 1000)");
  if (s.find_first_of(".eE") == std::string_view::npos) {
    if (v < 1) throw config_error(detail::quoted_spec(spec) + ": k must be >= 1");
    // a count above what a message holds (2^32 - 1 values) could never fit; checked before the
    // conversion, which would be undefined for values beyond size_t
    if (v > static_cast<double>(std::numeric_limits<std::uint32_t>::max()))
      throw config_error(detail::quoted_spec(spec) + ": k = " + std::string(s) +
                         " exceeds " + std::to_string(std::numeric_limits<std::uint32_t>::max()) +
                         ", the most values a message holds");
    return k_spec::count(static_cast<std::size_t>(v));
  }
  if (!(v > 0.0 && v <= 1.0))
    throw config_error(detail::quoted_spec(spec) + ": fraction " + std::string(s) +
                       " is outside (0, 1]");
  return k_spec::fraction(v);
}

inline std::uint16_t parse_levels(std::string_view s, std::string_view spec) {
  s = s.substr(0, s.find(':'));  // "S" of "S:R"
  const double v = parse_number(s, spec, "qsgd levels (an integer such as 16)");  // finite, so the range check below comes first
  if (v < 1 || v > max_qsgd_levels || v != std::floor(v))
    throw config_error(detail::quoted_spec(spec) + ": qsgd levels must be an "
                       "integer in [1, " + std::to_string(max_qsgd_levels) + "], got " +
                       std::string(s));
  return static_cast<std::uint16_t>(v);
}

/// The stream R of a qsgd argument "S[:R]" (philox7 when absent).
inline qsgd_stream parse_qsgd_stream(std::string_view arg, std::string_view spec) {
  const std::size_t colon = arg.find(':');
  if (colon == std::string_view::npos) return qsgd_stream::philox7;
  const std::string_view r = arg.substr(colon + 1);
  if (r == "philox7") return qsgd_stream::philox7;
  if (r == "philox10") return qsgd_stream::philox10;
  throw config_error(quoted_spec(spec) + ": " +
                     (r.empty() ? std::string("missing qsgd stream after ':'")
                                : "unknown qsgd stream '" + std::string(r) + "'") +
                     " (choices: philox7, the default, or philox10, the bits of 0.3.3)");
}

}  // namespace detail

namespace detail {

/// The parts of a spec between its '+' signs: the compressor, then its suffixes.
inline std::vector<std::string_view> spec_parts(std::string_view spec) {
  std::vector<std::string_view> parts;
  for (std::size_t at = 0;;) {
    const std::size_t plus = spec.find('+', at);
    parts.push_back(spec.substr(at, plus == std::string_view::npos ? plus : plus - at));
    if (plus == std::string_view::npos) break;
    at = plus + 1;
  }
  return parts;
}

/// "name:arg" as (name, arg); arg is empty without a ':'.
inline std::pair<std::string_view, std::string_view> split_spec_part(std::string_view p) {
  const std::size_t colon = p.find(':');
  return std::pair{p.substr(0, colon), colon == std::string_view::npos ? std::string_view{} : p.substr(colon + 1)};
}

/// The encodings a spec's suffixes name: the value encoding and the index encoding, each at most once.
struct spec_encodings {
  value_codec codec{};  ///< the value encoding (+fp32, +int8, +qsgd:S, ...)
  index_encoding idx = index_encoding::automatic;  ///< the index encoding (+u32, +varint, +seeded)
};

/// The encodings of parts[1..] (the suffixes of spec); config_error names a bad, empty or second one.
inline spec_encodings parse_spec_suffixes(const std::vector<std::string_view>& parts, std::string_view spec) {
  spec_encodings enc;
  std::size_t codecs = 0, indices = 0;
  for (std::size_t i = 1; i < parts.size(); ++i) {
    const auto [name, arg] = split_spec_part(parts[i]);
    const std::size_t plus = static_cast<std::size_t>(parts[i].data() - spec.data()) - 1;  // its '+'
    if (parts[i].empty())
      throw config_error(detail::quoted_spec(spec) + ": empty suffix after the '+' at position " +
                         std::to_string(plus));
    auto set_codec = [&](value_codec c) {
      enc.codec = c;
      ++codecs;
    };
    auto set_index = [&](index_encoding e) {
      enc.idx = e;
      ++indices;
    };
    if (name == "fp32") set_codec({value_encoding::f32, 0});
    else if (name == "fp64") set_codec({value_encoding::f64, 0});
    else if (name == "fp16") set_codec({value_encoding::f16, 0});
    else if (name == "bf16") set_codec({value_encoding::bf16, 0});
    else if (name == "int8") set_codec({value_encoding::i8, 0});
    else if (name == "sign") set_codec({value_encoding::sign, 0});
    else if (name == "qsgd")
      set_codec({value_encoding::qsgd, detail::parse_levels(arg, spec), detail::parse_qsgd_stream(arg, spec)});
    else if (name == "u32") set_index(index_encoding::raw_u32);
    else if (name == "varint") set_index(index_encoding::delta_varint);
    else if (name == "seeded") set_index(index_encoding::seeded);
    else
      throw config_error(detail::quoted_spec(spec) + ": unknown suffix '+" +
                         std::string(parts[i]) +
                         "' (value encodings: fp32 fp64 fp16 bf16 int8 sign qsgd:S[:philox7|:philox10]; index "
                         "encodings: u32 varint seeded)");
    // only qsgd:S takes an argument ("+int8:7" used to drop its ":7" silently)
    if (name != "qsgd" && parts[i].size() != name.size())
      throw config_error(detail::quoted_spec(spec) + ": suffix '+" + std::string(name) +
                         "' takes no argument, got '+" + std::string(parts[i]) + "'");
    // one of each at most: a second one used to win silently
    if (codecs > 1 || indices > 1)
      throw config_error(detail::quoted_spec(spec) + ": a second " + (indices > 1 ? "index" : "value") +
                         " encoding '+" + std::string(parts[i]) + "' at position " + std::to_string(plus));
  }
  return enc;
}

/// The compressor a spec's first part "name[:arg]" names, with the encodings of its suffixes
/// (`suffixes` of them).
inline any_compressor named_compressor(std::string_view spec, std::string_view name, std::string_view arg,
                                       const spec_encodings& enc, std::size_t suffixes) {
  const value_codec codec = enc.codec;
  const index_encoding idx = enc.idx;
  auto no_arg = [&]() {
    if (!arg.empty())
      throw config_error(detail::quoted_spec(spec) + ": '" + std::string(name) +
                         "' takes no argument");
  };
  auto dense_only = [&]() {
    if (idx != index_encoding::automatic)
      throw config_error(detail::quoted_spec(spec) + ": '" + std::string(name) +
                         "' is dense and has no index encoding");
  };
  if (name == "identity") {
    no_arg();
    dense_only();
    return identity{codec};
  }
  if (idx == index_encoding::seeded && name != "random-k" && name != "random-k-unbiased")
    throw config_error(detail::quoted_spec(spec) + ": '+seeded' sends the key of random-K's index "
                       "stream; '" + std::string(name) + "' does not draw its indices from one");
  if (name == "top-k") return top_k{detail::parse_k(arg, spec), codec, idx};
  if (name == "random-k") return random_k{detail::parse_k(arg, spec), false, codec, idx};
  if (name == "random-k-unbiased") return random_k{detail::parse_k(arg, spec), true, codec, idx};
  if (name == "threshold") return threshold_k{detail::parse_k(arg, spec), 256, codec, idx};
  if (name == "qsgd" || name == "sign") {
    if (suffixes > 0)
      throw config_error(detail::quoted_spec(spec) + ": '" + std::string(name) +
                         "' fixes its own value encoding; use identity+" + std::string(name) +
                         " or a sparsifier+" + std::string(name));
    if (name == "sign") {
      no_arg();
      return scaled_sign{};
    }
    return qsgd{detail::parse_levels(arg, spec), detail::parse_qsgd_stream(arg, spec)};
  }
  throw config_error(detail::quoted_spec(spec) + ": unknown compressor '" +
                     std::string(name) +
                     "' (known: identity, top-k, random-k, random-k-unbiased, threshold, qsgd, sign)");
}

}  // namespace detail

/// Parse a compressor spec string (see the header comment); errors name the bad part.
inline any_compressor parse_compressor(std::string_view spec) {
  detail::check_spec_bytes(spec);
  if (spec.empty())
    throw config_error("compressor spec '' is empty (known: identity, top-k, random-k, random-k-unbiased, threshold, "
                       "qsgd, sign)");
  const std::vector<std::string_view> parts = detail::spec_parts(spec);
  const detail::spec_encodings enc = detail::parse_spec_suffixes(parts, spec);
  const auto [name, arg] = detail::split_spec_part(parts[0]);
  return detail::named_compressor(spec, name, arg, enc, parts.size() - 1);
}

/// The QSGD stream a compressor draws from (as the compressor or its value encoding), if any.
inline std::optional<qsgd_stream> qsgd_stream_of(const any_compressor& c) {
  return std::visit(
      [](const auto& x) -> std::optional<qsgd_stream> {
        using C = std::decay_t<decltype(x)>;
        if constexpr (std::is_same_v<C, qsgd>) return x.stream;
        else if constexpr (requires { x.values; }) {
          if (x.values.encoding == value_encoding::qsgd) return x.values.stream;
          return std::nullopt;
        } else return std::nullopt;
      },
      c.get());
}

/// A valid spec as a run's settings record it (train/settings.hpp), so that a checkpoint resumes
/// only with the same random stream: the spec as given with a qsgd stream spelt out when it is
/// philox7 ("qsgd:16" -> "qsgd:16:philox7") and dropped when it is philox10 ("qsgd:16:philox10"
/// -> "qsgd:16", the text 0.3.3 recorded for those bits). A checkpoint of 0.3.3 therefore
/// resumes under "qsgd:16:philox10" and is refused under "qsgd:16", the difference named.
inline std::string settings_spec(std::string_view spec) {
  (void)parse_compressor(spec);  // a bad spec is the parser's config_error
  std::string out;
  for (std::size_t at = 0;;) {
    const std::size_t plus = spec.find('+', at);
    const std::string_view part = spec.substr(at, plus == std::string_view::npos ? plus : plus - at);
    if (at > 0) out += '+';
    if (part.substr(0, part.find(':')) == "qsgd") {
      const std::string_view arg = part.substr(part.find(':') + 1);  // qsgd always has "S"
      out += "qsgd:";
      out += arg.substr(0, arg.find(':'));
      if (detail::parse_qsgd_stream(arg, spec) == qsgd_stream::philox7) out += ":philox7";
    } else {
      out += part;
    }
    if (plus == std::string_view::npos) break;
    at = plus + 1;
  }
  return out;
}

/// Why compressor c does not shrink what it leaves out, or an empty text when it does: QSGD and
/// unbiased random-k scale their values up to stay unbiased, so the error of a message can exceed
/// the vector it compresses (QSGD's variance is about min(d / s^2, sqrt(d) / s) times the vector's
/// squared norm). CHOCO-Push's references take such errors in whole and diverge.
inline std::string not_contracting(const any_compressor& c) {
  std::string why;
  std::visit(
      [&](const auto& x) {
        using X = std::decay_t<decltype(x)>;
        if constexpr (std::is_same_v<X, qsgd>) why = "QSGD is unbiased, not a contraction: its error exceeds the vector";
        else {
          if constexpr (requires { x.unbiased; })
            if (x.unbiased) why = "unbiased random-k scales its values by d / k: its error exceeds the vector";
          if constexpr (requires { x.values.encoding; })
            if (x.values.encoding == value_encoding::qsgd) why = "+qsgd values are unbiased, not a contraction";
        }
      },
      c.get());
  return why;
}

}  // namespace v0
}  // namespace sparsepush
