// sparsepush/compress/common.hpp: what every compressor shares: the compressor concept
// (compress(span<const T> v, message& q, const context&), with or without a caller-owned
// compress_workspace<T>& last), the calls that pass the caller's scratch (compress_with) or their
// own (compress) or validate a configuration when the compressor offers it, k given as a count or
// a fraction of d, input validation (finite values, sizes that fit the wire format) and
// index-section finishing.
#pragma once

#include <cmath>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <span>
#include <string>
#include <type_traits>

#include "../config.hpp"
#include "../detail/finite.hpp"
#include "../message.hpp"
#include "../tensor.hpp"
#include "values.hpp"
#include "workspace.hpp"

namespace sparsepush {
inline namespace v0 {

/// A compressor policy for element type T: q = C(v) written into a message, by
/// c.compress(v, q, ctx, ws) with the caller's scratch (the built-ins that need scratch) or by
/// c.compress(v, q, ctx) (those that need none, and most compressors of users).
template <class C, class T>
concept compressor_for =
    tensor_element<T> &&
    (requires(const C& c, std::span<const T> v, message& m, const context& ctx, compress_workspace<T>& ws) {
       { c.compress(v, m, ctx, ws) } -> std::same_as<void>;
     } ||
     requires(const C& c, std::span<const T> v, message& m, const context& ctx) {
       { c.compress(v, m, ctx) } -> std::same_as<void>;
     });

/// A compressor usable on both float and double tensors.
template <class C>
concept compressor = compressor_for<C, float> && compressor_for<C, double>;

struct identity;
struct top_k;
struct random_k;
struct threshold_k;
struct qsgd;
struct scaled_sign;
class any_compressor;

namespace detail {

/// The library's own compressors (and any_compressor, which holds only them): their messages are
/// well-formed by construction, so compress_with does not check them again.
template <class C>
inline constexpr bool is_builtin_compressor =
    std::is_same_v<C, identity> || std::is_same_v<C, top_k> || std::is_same_v<C, random_k> ||
    std::is_same_v<C, threshold_k> || std::is_same_v<C, qsgd> || std::is_same_v<C, scaled_sign> ||
    std::is_same_v<C, any_compressor>;

/// validate(q, d) for a compressor's output at ctx: a malformed q is a message_error naming the
/// node, the round and what is wrong, before anything reads q.
inline void check_compressed(const message& q, std::size_t d, const context& ctx) {
  check_message(q, d, [&ctx](const std::string& what, std::size_t) {
    throw message_error("the compressor at " + ctx.where() + " wrote an invalid message: " + what);
  });
}

}  // namespace detail

/// q = C(v) with the caller's scratch: c.compress(v, q, ctx, ws) where C offers it, else
/// c.compress(v, q, ctx). The message of a compressor that is not one of the library's is
/// checked (validate(q, v.size())) before it returns: a malformed one throws message_error.
template <tensor_element T, class C>
void compress_with(const C& c, std::span<const T> v, message& q, const context& ctx,
                   compress_workspace<T>& ws) {
  static_assert(compressor_for<C, T>, "sparsepush: C is not a compressor for this element type (it needs "
                                      "compress(std::span<const T>, message&, const context&[, compress_workspace<T>&]))");
  if constexpr (requires { c.compress(v, q, ctx, ws); }) c.compress(v, q, ctx, ws);
  else c.compress(v, q, ctx);
  if constexpr (!detail::is_builtin_compressor<C>) detail::check_compressed(q, v.size(), ctx);
}

/// q = C(v) for a one-off call (a test, a tool), with scratch of its own allocated per call; a
/// loop keeps one compress_workspace and calls compress_with.
template <class C, class X>
  requires flat_tensor<X>
void compress(const C& c, const X& v, message& q, const context& ctx) {
  using T = tensor_value_t<X>;
  compress_workspace<T> ws;
  compress_with<T>(c, as_const_span(v), q, ctx, ws);
}

/// Throw what c.compress would throw for its configuration at dimension d (k > d, bad levels,
/// d = 0 or d >= 2^32...), touching no message; nothing for a C without validate(d, ctx).
template <tensor_element T, class C>
void validate_compressor(const C& c, std::size_t d, const context& ctx) {
  if constexpr (requires { c.validate(d, ctx); }) c.validate(d, ctx);
}

/// How many values a sparsifier keeps: an absolute count, or a fraction of d in (0, 1]
/// (rounded to nearest, at least 1).
class k_spec {
 public:
  constexpr k_spec() = default;
  /// Keep exactly k values; throws config_error when k is 0 (resolve() rejects k > d).
  static k_spec count(std::size_t k) {
    if (k == 0) throw config_error("k must be at least 1, got 0");
    k_spec s;
    s.count_ = k;
    return s;
  }
  /// Keep round(f * d) values, at least 1; throws config_error unless 0 < f <= 1.
  static k_spec fraction(double f) {
    if (!(f > 0.0 && f <= 1.0))
      throw config_error("k fraction must be in (0, 1], got " + std::to_string(f));
    k_spec s;
    s.fraction_ = f;
    return s;
  }
  /// True for a fraction of d, false for an absolute count.
  bool is_fraction() const noexcept { return count_ == 0; }
  /// The fraction of d (meaningful when is_fraction()).
  double fraction_value() const noexcept { return fraction_; }
  /// The absolute count k, or 0 for a fraction.
  std::size_t count_value() const noexcept { return count_; }

  /// k for a vector of d elements; a count above d is an error naming both.
  std::size_t resolve(std::size_t d, const context& ctx) const {
    if (count_ == 0) {
      const double k = std::round(fraction_ * static_cast<double>(d));
      return std::max<std::size_t>(1, std::min(d, static_cast<std::size_t>(k)));
    }
    if (count_ > d)
      throw config_error("k = " + std::to_string(count_) + " exceeds the tensor size d = " +
                         std::to_string(d) + " at " + ctx.where());
    return count_;
  }

  /// The count, or the fraction in std::to_string's fixed notation (e.g. "0.010000").
  std::string to_string() const {
    return count_ ? std::to_string(count_) : std::to_string(fraction_);
  }

 private:
  std::size_t count_ = 0;
  double fraction_ = 0.01;
};

namespace detail {

/// Reject a vector the wire format cannot describe, and empty vectors.
inline void check_dim(std::size_t d, const context& ctx) {
  if (d == 0) throw size_error("cannot compress an empty tensor at " + ctx.where());
  if (d > std::numeric_limits<std::uint32_t>::max())
    throw size_error("tensor of " + std::to_string(d) + " elements exceeds the 2^32-1 limit of "
                     "a message at " + ctx.where());
}

[[noreturn]] inline void throw_non_finite(double value, std::size_t index, const context& ctx,
                                          const char* what) {
  throw non_finite_error(std::string(what) + " holds " + (std::isnan(value) ? "NaN" : "Inf") +
                             " at index " + std::to_string(index) + " (" + ctx.where() + ")",
                         index);
}

/// Throw non_finite_error naming the first NaN/Inf of v.
template <tensor_element T>
void check_finite(std::span<const T> v, const context& ctx, const char* what = "input") {
  if (all_finite(v.data(), v.size())) return;  // branch-free scan; locate only on failure
  for (std::size_t i = 0; i < v.size(); ++i)
    if (!std::isfinite(v[i])) throw_non_finite(static_cast<double>(v[i]), i, ctx, what);
}

/// Throw size_error "round R, node N: direction has G elements, the model has D" unless a local
/// direction of `given` elements fits a model of d.
inline void check_direction_size(std::size_t given, std::size_t d, const context& ctx) {
  if (given != d)
    throw size_error("round " + std::to_string(ctx.round) + ", node " + std::to_string(ctx.node) + ": direction has " +
                     std::to_string(given) + " elements, the model has " + std::to_string(d));
}

/// Throw, before a local step x - gamma p runs, for a direction p of another size than x, a
/// NaN/Inf in p, or one in x - gamma p (named as such, with its index, the node and the round).
template <tensor_element T>
void check_local_step(std::span<const T> x, std::span<const T> p, double gamma, const context& ctx) {
  check_direction_size(p.size(), x.size(), ctx);
  const T gm = static_cast<T>(gamma);
  // one branch-free pass: a NaN or Inf in p makes x - gamma p non-finite too; the slow scans
  // below only name the first bad value
  typename finite_bits<T>::U acc = 0;
  for (std::size_t l = 0; l < x.size(); ++l) acc |= non_finite_flag<T>(x[l] - gm * p[l]);
  if (flags_finite<T>(acc)) return;
  check_finite(p, ctx, "local direction");
  for (std::size_t l = 0; l < x.size(); ++l)
    if (!std::isfinite(x[l] - gm * p[l])) throw_non_finite(double(x[l] - gm * p[l]), l, ctx, "x - gamma p");
}

/// After a mix wrote a NaN or Inf into x: throw non_finite_error "<who>x after mixing holds NaN at
/// index l (<where>): <why>", naming the first non-finite value.
template <tensor_element T>
[[noreturn]] void throw_mixed_non_finite(std::span<const T> x, const std::string& who, const std::string& where,
                                         const std::string& why) {
  std::size_t l = 0;
  while (l + 1 < x.size() && std::isfinite(x[l])) ++l;
  throw non_finite_error(who + "x after mixing holds " + (std::isnan(x[l]) ? "NaN" : "Inf") + " at index " +
                             std::to_string(l) + " (" + where + "): " + why,
                         l);
}

/// Reject an index setting that names no wire encoding and is not automatic.
inline void check_index_setting(index_encoding e, bool seeded_allowed = false) {
  if (e != index_encoding::automatic && !is_wire(e))
    throw config_error("unknown index encoding " + std::to_string(static_cast<unsigned>(e)));
  if (e == index_encoding::seeded && !seeded_allowed)
    throw config_error("index encoding seeded is random-K's only: other sparsifiers' indices depend on the "
                       "values, not on a random stream a receiver can draw again");
}

/// Choose the wire encoding of a sparse message's ascending indices: the setting, or for
/// automatic (and dense, which a sparse message cannot use) the smaller section.
inline void finish_indices(message& m, index_encoding want) {
  if (want == index_encoding::raw_u32 || want == index_encoding::delta_varint)
    m.index_enc = want;
  else
    m.index_enc = delta_varint_bytes(m.indices) <= 4 * m.indices.size() ? index_encoding::delta_varint
                                                                        : index_encoding::raw_u32;
  m.count = static_cast<std::uint32_t>(m.indices.size());
}

/// Fill m as a dense message over all of v.
template <tensor_element T>
void compress_dense(std::span<const T> v, const value_codec& codec, message& m,
                    const context& ctx) {
  m.dim = static_cast<std::uint32_t>(v.size());
  m.count = m.dim;
  m.index_enc = index_encoding::dense;
  m.indices.clear();
  encode_values<T>(codec, [v](std::size_t j) { return v[j]; }, m, ctx);
}

/// Fill m as a dense message of sign (Square = false) or QSGD (Square = true) values over the
/// finite v, given sum = lane_sum_dense<T, Square>(v): the vector kernels of value_kernels.hpp.
template <tensor_element T, bool Square>
void compress_dense_sum(std::span<const T> v, double sum, std::uint16_t levels, message& m, const context& ctx,
                        qsgd_stream stream = qsgd_stream::philox7) {
  m.dim = static_cast<std::uint32_t>(v.size());
  m.count = m.dim;
  m.index_enc = index_encoding::dense;
  m.indices.clear();
  m.value_enc = Square ? value_encoding::qsgd : value_encoding::sign;
  m.levels = Square ? levels : 0;
  if constexpr (Square) {
    // write_qsgd_dense writes every byte: a payload of the right size is not zeroed again (a pass
    // over 1/5 of the input's size at 6-bit codes); another size is allocated as before
    const std::size_t bytes = payload_bytes(m.value_enc, m.levels, m.count);
    if (m.payload.size() != bytes) m.payload.assign(bytes, std::byte{0});
    m.scale = write_qsgd_dense<T>(m.payload.data(), m.payload.size(), v.size(), levels, stream, v.data(), sum, ctx);
  } else {
    m.payload.assign(payload_bytes(m.value_enc, m.levels, m.count), std::byte{0});
    m.scale = write_sign_dense<T>(m.payload.data(), v.size(), v.data(), sum);
  }
}

/// lane_sum_dense<T, Square>(v), which is finite exactly when every v is (for float; for double
/// a sum of finite values can overflow): a NaN/Inf is reported as check_finite does.
template <tensor_element T, bool Square>
double checked_sum(std::span<const T> v, const context& ctx) {
  const double sum = lane_sum_dense<T, Square>(v.data(), v.size());
  if (!std::isfinite(sum)) check_finite(v, ctx);
  return sum;
}

/// Fill m's values from v at m.indices, each times `factor`.
template <tensor_element T>
void compress_selected(std::span<const T> v, const value_codec& codec, T factor, message& m,
                       const context& ctx) {
  const std::uint32_t* idx = m.indices.data();
  if (factor == T(1))
    encode_values<T>(codec, [v, idx](std::size_t j) { return v[idx[j]]; }, m, ctx);
  else
    encode_values<T>(codec, [v, idx, factor](std::size_t j) { return v[idx[j]] * factor; }, m,
                     ctx);
}

}  // namespace detail
}  // namespace v0
}  // namespace sparsepush
