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
  using value_type = typename T::Scalar;
  static value_type* data(T& t) noexcept { return t.data(); }
  static const value_type* data(const T& t) noexcept { return t.data(); }
  static std::size_t size(const T& t) noexcept { return static_cast<std::size_t>(t.size()); }
  static T zeros_like(const T& t) { return T::Zero(t.rows(), t.cols()); }
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
  using map_type = Eigen::Map<P, Options, S>;
  using value_type = typename std::remove_const_t<P>::Scalar;
  static auto data(map_type& t) noexcept { return t.data(); }
  static const value_type* data(const map_type& t) noexcept { return t.data(); }
  static std::size_t size(const map_type& t) noexcept { return static_cast<std::size_t>(t.size()); }
};

}  // namespace v0
}  // namespace sparsepush
