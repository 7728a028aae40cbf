// sparsepush/adapters/xtensor.hpp: tensor_traits for xtensor containers and adaptors
// (xt::xarray, xt::xtensor, and what xt::adapt returns over a buffer) of float/double. Their
// storage is one contiguous buffer; the algorithms see it in storage order.
// Include this header only where xtensor is available; the core never includes xtensor.
#pragma once

#include <string>
#include <type_traits>
#include <xtensor/xadapt.hpp>
#include <xtensor/xarray.hpp>
#include <xtensor/xtensor.hpp>

#include "../tensor.hpp"

namespace sparsepush {
inline namespace v0 {
namespace detail {
template <class T>
struct is_xtensor_storage : std::false_type {};
template <class EC, xt::layout_type L, class SC, class Tag>
struct is_xtensor_storage<xt::xarray_container<EC, L, SC, Tag>> : std::true_type {};
template <class EC, std::size_t N, xt::layout_type L, class Tag>
struct is_xtensor_storage<xt::xtensor_container<EC, N, L, Tag>> : std::true_type {};
template <class EC, xt::layout_type L, class SC, class Tag>
struct is_xtensor_storage<xt::xarray_adaptor<EC, L, SC, Tag>> : std::true_type {};
template <class EC, std::size_t N, xt::layout_type L, class Tag>
struct is_xtensor_storage<xt::xtensor_adaptor<EC, N, L, Tag>> : std::true_type {};

template <class T>
concept xtensor_flat = is_xtensor_storage<T>::value &&
                       tensor_element<std::remove_const_t<typename T::value_type>>;

// xtensor containers are also contiguous ranges; the shape-aware traits below take precedence.
template <class T>
  requires is_xtensor_storage<T>::value
inline constexpr bool has_dedicated_traits<T> = true;
}  // namespace detail

/// xt::xarray / xt::xtensor / xt::adapt(...) of float or double.
template <detail::xtensor_flat T>
struct tensor_traits<T> {
  /// The element type without const, float or double.
  using value_type = std::remove_const_t<typename T::value_type>;
  /// Pointer to the first element (read-only for a const expression).
  static auto data(T& t) noexcept { return t.data(); }
  /// Read-only pointer to the first element.
  static const value_type* data(const T& t) noexcept { return t.data(); }
  /// The number of elements.
  static std::size_t size(const T& t) noexcept { return t.size(); }
  /// A zero container of t's shape (only for types constructible from a shape).
  static T zeros_like(const T& t)
    requires std::is_default_constructible_v<T> && requires { T(t.shape()); }
  {
    T z(t.shape());
    z.fill(value_type(0));
    return z;
  }
  /// Makes t hold n elements: a one-dimensional container is resized; another of a different size is
  /// a size_error (nothing to do when the size is already n).
  static void resize(T& t, std::size_t n) {
    if (t.size() == n) return;
    if (t.dimension() == 1) {
      t.resize({n});
    } else {
      throw size_error("xtensor of dimension " + std::to_string(t.dimension()) + " and " +
                       std::to_string(t.size()) + " elements cannot be resized to " +
                       std::to_string(n) + " elements");
    }
  }
};

}  // namespace v0
}  // namespace sparsepush
