// sparsepush/tensor.hpp: the one door through which a user's tensor reaches the algorithms.
// A tensor is anything tensor_traits<T> describes as a contiguous run of float or double; the
// algorithms only ever see std::span<value_type>. Contiguous sized ranges (std::vector,
// std::array, std::span, C arrays) need no code; other types specialize tensor_traits.
#pragma once

#include <concepts>
#include <cstddef>
#include <ranges>
#include <span>
#include <string>
#include <type_traits>

#include "config.hpp"

namespace sparsepush {
inline namespace v0 {

/// Customization point. A specialization provides:
///   using value_type = float or double;
///   static value_type* data(T&);            static const value_type* data(const T&);
///   static std::size_t size(const T&);
/// and optionally
///   static T zeros_like(const T&);          // a zero tensor of the same shape
///   static void resize(T&, std::size_t);    // make it hold n elements
/// The primary template is empty: an unsupported type fails the flat_tensor concept.
template <class T>
struct tensor_traits {};

/// Element types the kernels are instantiated for.
template <class V>
concept tensor_element = std::same_as<V, float> || std::same_as<V, double>;

namespace detail {
/// Adapter headers set this for types that are contiguous ranges but get dedicated traits.
template <class T>
inline constexpr bool has_dedicated_traits = false;

template <class R>
concept contiguous_element_range =
    std::ranges::contiguous_range<R> && std::ranges::sized_range<R> &&
    tensor_element<std::remove_cv_t<std::ranges::range_value_t<R>>> && !has_dedicated_traits<R>;
}  // namespace detail

/// Every contiguous sized range of float/double: std::vector, std::array, std::span, C arrays.
template <detail::contiguous_element_range R>
struct tensor_traits<R> {
  /// The element type: the range's value type without const (float or double).
  using value_type = std::remove_cv_t<std::ranges::range_value_t<R>>;
  /// Pointer to the first element (std::ranges::data).
  static auto data(R& r) noexcept { return std::ranges::data(r); }
  /// Read-only pointer to the first element.
  static auto data(const R& r) noexcept { return std::ranges::data(r); }
  /// Number of elements (std::ranges::size).
  static std::size_t size(const R& r) noexcept { return std::ranges::size(r); }
  /// A default-constructed R resized to r's size (zeros for std::vector); only for resizable ranges.
  static R zeros_like(const R& r)
    requires std::default_initializable<R> && requires(R& x, std::size_t n) { x.resize(n); }
  {
    R z;
    z.resize(std::ranges::size(r));
    return z;
  }
  /// Makes r hold n elements; only for ranges with resize().
  static void resize(R& r, std::size_t n)
    requires requires { r.resize(n); }
  {
    r.resize(n);
  }
};

/// A type the library can read as a flat tensor.
template <class T>
concept flat_tensor = requires(const std::remove_cvref_t<T>& t) {
  typename tensor_traits<std::remove_cvref_t<T>>::value_type;
  requires tensor_element<typename tensor_traits<std::remove_cvref_t<T>>::value_type>;
  { tensor_traits<std::remove_cvref_t<T>>::size(t) } -> std::convertible_to<std::size_t>;
  {
    tensor_traits<std::remove_cvref_t<T>>::data(t)
  } -> std::convertible_to<const typename tensor_traits<std::remove_cvref_t<T>>::value_type*>;
};

/// A flat tensor whose elements can be written through (not a span of const, not a const object).
template <class T>
concept mutable_flat_tensor =
    flat_tensor<T> && !std::is_const_v<std::remove_reference_t<T>> &&
    requires(std::remove_cvref_t<T>& t) {
      {
        tensor_traits<std::remove_cvref_t<T>>::data(t)
      } -> std::same_as<typename tensor_traits<std::remove_cvref_t<T>>::value_type*>;
    };

/// The element type (float or double) of flat tensor T, cv and reference removed.
template <flat_tensor T>
using tensor_value_t = typename tensor_traits<std::remove_cvref_t<T>>::value_type;

namespace detail {
template <class T>
inline constexpr bool always_false = false;

template <class T>
constexpr void require_flat_tensor() {
  static_assert(flat_tensor<T>,
                "sparsepush: this type is not a flat tensor. Specialize "
                "sparsepush::tensor_traits<T> with value_type (float or double), data() and "
                "size(), or include the adapter header for its library "
                "(sparsepush/adapters/eigen.hpp, sparsepush/adapters/xtensor.hpp).");
}
}  // namespace detail

/// The only door in: a mutable span over the tensor's elements.
template <class T>
auto as_span(T& t) {
  detail::require_flat_tensor<T>();
  if constexpr (flat_tensor<T>) {
    using traits = tensor_traits<std::remove_cv_t<T>>;
    using V = typename traits::value_type;
    if constexpr (mutable_flat_tensor<T&>) {
      return std::span<V>(traits::data(t), traits::size(t));
    } else {
      return std::span<const V>(traits::data(t), traits::size(t));
    }
  } else {
    return std::span<float>{};  // unreachable: keeps the static_assert the only diagnostic
  }
}

/// A read-only span over the tensor's elements.
template <class T>
auto as_const_span(const T& t) {
  detail::require_flat_tensor<T>();
  if constexpr (flat_tensor<T>) {
    using traits = tensor_traits<std::remove_cv_t<T>>;
    using V = typename traits::value_type;
    return std::span<const V>(traits::data(t), traits::size(t));
  } else {
    return std::span<const float>{};  // unreachable: keeps the static_assert the only diagnostic
  }
}

/// A zero tensor shaped like t (needs tensor_traits<T>::zeros_like).
template <class T>
T zeros_like(const T& t) {
  detail::require_flat_tensor<T>();
  static_assert(requires { tensor_traits<T>::zeros_like(t); },
                "sparsepush: tensor_traits<T> has no zeros_like(const T&); add one to create "
                "state tensors of this type");
  return tensor_traits<T>::zeros_like(t);
}

/// Make t hold n elements: resized where the traits can resize, otherwise checked.
template <class T>
void resize_or_check(T& t, std::size_t n, const char* what = "tensor") {
  detail::require_flat_tensor<T>();
  if constexpr (requires { tensor_traits<T>::resize(t, n); }) {
    tensor_traits<T>::resize(t, n);
  } else if (tensor_traits<T>::size(t) != n) {
    throw size_error(std::string(what) + " has " + std::to_string(tensor_traits<T>::size(t)) +
                     " elements and cannot be resized to " + std::to_string(n));
  }
}

}  // namespace v0
}  // namespace sparsepush
