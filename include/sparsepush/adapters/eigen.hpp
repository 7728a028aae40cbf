// sparsepush/adapters/eigen.hpp: tensor_traits for Eigen dense objects. Any Eigen::Matrix or
// Eigen::Array of float/double (storage is always contiguous) and any Eigen::Map over one with
// packed strides is a flat tensor: the algorithms see its coefficients in storage order.
// Include this header only where Eigen is available; the core never includes Eigen.
#pragma once

#include <Eigen/Core>
#include <concepts>
#include <string>
#include <type_traits>

#include "../tensor.hpp"

namespace sparsepush {
inline namespace v0 {
namespace detail {
template <class T>
concept eigen_plain_object =
    std::derived_from<T, Eigen::PlainObjectBase<T>> && tensor_element<typename T::Scalar>;

template <class S>
concept eigen_packed_stride = (S::InnerStrideAtCompileTime == 0 || S::InnerStrideAtCompileTime == 1) &&
                              S::OuterStrideAtCompileTime == 0;
}  // namespace detail

/// Eigen::Matrix / Eigen::Array of float or double.
template <detail::eigen_plain_object T>
struct tensor_traits<T> {
  /// The Scalar type, float or double.
  using value_type = typename T::Scalar;
  /// Pointer to the first coefficient (storage order).
  static value_type* data(T& t) noexcept { return t.data(); }
  /// Read-only pointer to the first coefficient.
  static const value_type* data(const T& t) noexcept { return t.data(); }
  /// The number of coefficients, rows times columns.
  static std::size_t size(const T& t) noexcept { return static_cast<std::size_t>(t.size()); }
  /// A zero object of t's rows and columns.
  static T zeros_like(const T& t) { return T::Zero(t.rows(), t.cols()); }
  /// Makes t hold n coefficients: a vector is resized; a matrix of another size is a size_error
  /// (nothing to do when the size is already n).
  static void resize(T& t, std::size_t n) {
    if (static_cast<std::size_t>(t.size()) == n) return;
    if constexpr (T::IsVectorAtCompileTime) {
      t.resize(static_cast<Eigen::Index>(n));
    } else {
      throw size_error("Eigen matrix of " + std::to_string(t.rows()) + "x" +
                       std::to_string(t.cols()) + " cannot be resized to " + std::to_string(n) +
                       " elements");
    }
  }
};

/// Eigen::Map over a plain object with packed (contiguous) strides; Map<const ...> is read-only.
template <class P, int Options, class S>
  requires detail::eigen_plain_object<std::remove_const_t<P>> && detail::eigen_packed_stride<S>
struct tensor_traits<Eigen::Map<P, Options, S>> {
  /// The Map type.
  using map_type = Eigen::Map<P, Options, S>;
  /// The Scalar type, float or double.
  using value_type = typename std::remove_const_t<P>::Scalar;
  /// Pointer to the first coefficient (read-only for a Map over const).
  static auto data(map_type& t) noexcept { return t.data(); }
  /// Read-only pointer to the first coefficient.
  static const value_type* data(const map_type& t) noexcept { return t.data(); }
  /// The number of coefficients.
  static std::size_t size(const map_type& t) noexcept { return static_cast<std::size_t>(t.size()); }
};

}  // namespace v0
}  // namespace sparsepush
