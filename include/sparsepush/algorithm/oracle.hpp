// sparsepush/algorithm/oracle.hpp: the local-update hook every algorithm calls.
// A gradient oracle is the user's backend: given node i, round t and the model to evaluate at
// (de-biased xh_i = x_i / u_i for push-sum methods), it writes the direction p_i (a gradient,
// or what the backend's optimizer makes of it); the algorithm then moves x_i' = x_i - gamma p_i.
// The metrics (mean model, parameter divergence) live in metrics.hpp.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include "../tensor.hpp"
#include "metrics.hpp"

namespace sparsepush {
inline namespace v0 {

/// direction = p_i(model) for node `node` in round `round`. The oracle writes every element of
/// direction: the buffer is not cleared between rounds (it holds the oracle's previous direction for
/// that node, zeros before its first), since a pass that zeroes what is about to be overwritten
/// costs as much as the local step itself.
template <tensor_element T>
using gradient_oracle =
    std::function<void(std::uint32_t node, std::uint32_t round, std::span<const T> model, std::span<T> direction)>;

/// The tensor type an algorithm template argument names: an element type (float, double) means
/// std::vector of it, anything else is the tensor type itself.
template <class X>
using algorithm_tensor_t = std::conditional_t<tensor_element<X>, std::vector<X>, X>;

namespace detail {
/// out = x, sizes checked (an algorithm's model(i, out)).
template <tensor_element T>
void copy_model(std::span<const T> x, std::span<T> out) {
  if (out.size() != x.size())
    throw size_error("model: output has " + std::to_string(out.size()) + " elements, the model has " +
                     std::to_string(x.size()));
  std::copy(x.begin(), x.end(), out.begin());
}

/// true; fails to compile, saying what to do, unless Tensor can be an algorithm's tensor type.
template <class Tensor>
consteval bool require_algorithm_tensor() {
  static_assert(mutable_flat_tensor<Tensor&>,
                "sparsepush: an algorithm's tensor type must be a mutable flat tensor (specialize "
                "sparsepush::tensor_traits<T>) or an element type (float, double)");
  static_assert(std::is_copy_constructible_v<Tensor>,
                "sparsepush: an algorithm's tensor type must be copyable (model() returns a copy)");
  return true;
}
}  // namespace detail

}  // namespace v0
}  // namespace sparsepush
