// sparsepush/compress/detail/top_k_keys.hpp: what exact top-K (top_k.hpp) selects on: the
// magnitude key of v (the bit pattern of |v|, monotone in |v| for IEEE floats; keys >= inf_key are
// NaN or Inf), the selection order (larger key first, ties to the lower index) and the source v = x,
// x + e or (x - gamma p) + e, read without being written.
#pragma once

#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <span>
#include <utility>

#include "../../detail/step_kernels.hpp"
#include "../common.hpp"

namespace sparsepush {
inline namespace v0 {
namespace detail {

template <class T>
inline constexpr magnitude_key<T> abs_mask = static_cast<magnitude_key<T>>(~magnitude_key<T>{0} >> 1);

template <class T>
inline constexpr magnitude_key<T> inf_key = sizeof(T) == 8 ? magnitude_key<T>(0x7FF0000000000000ull)
                                                           : magnitude_key<T>(0x7F800000u);

/// Histogram bits for d elements: about d / 16 bins, between 2^10 and 2^16.
constexpr unsigned top_k_hist_bits_for(std::size_t d) noexcept {
  const unsigned lg = static_cast<unsigned>(std::bit_width(d)) - 1;
  return lg < 14 ? 10u : lg > 20 ? 16u : lg - 4;
}

/// Below this size a plain nth_element over (key, index) beats the histogram's fixed cost.
inline constexpr std::size_t top_k_small_d = 8192;

template <class T>
constexpr magnitude_key<T> key_of(T v) noexcept {
  return std::bit_cast<magnitude_key<T>>(v) & abs_mask<T>;
}

/// Order of selection: larger magnitude first, then lower index.
template <class K>
constexpr bool select_before(const std::pair<K, std::uint32_t>& a,
                             const std::pair<K, std::uint32_t>& b) noexcept {
  return a.first > b.first || (a.first == b.first && a.second < b.second);
}

/// What top_k_indices selects among: v = x, v = x + e (Feedback) or v = (x - g p) + e (Feedback
/// and Step, the fused local step). e_out, when not null, receives v (Feedback without Step only).
template <class T, bool Feedback, bool Step>
struct selection_source {
  const T* x;
  const T* e = nullptr;
  const T* p = nullptr;
  T g = T(0);
  T* e_out = nullptr;
  std::size_t d = 0;

  T at(std::size_t i) const noexcept {
    T v = x[i];
    if constexpr (Step) v = x[i] - rounded_product(g, p[i]);
    if constexpr (Feedback) v = v + e[i];
    return v;
  }
  /// Throw the non_finite_error of the first bad element (after a fast check saw one): a bad
  /// local direction is named as such, as the node's own check names it.
  [[noreturn]] void fail(const context& ctx) const {
    if constexpr (Step) check_finite(std::span<const T>(p, d), ctx, "local direction");
    for (std::size_t i = 0; i < d; ++i)
      if (!std::isfinite(at(i))) throw_non_finite(static_cast<double>(at(i)), i, ctx, Feedback ? "x + e" : "input");
    throw_non_finite(0.0, 0, ctx, "input");  // unreachable: the caller saw a bad key
  }
};
}  // namespace detail
}  // namespace v0
}  // namespace sparsepush
