// sparsepush/nn/layers/activations.hpp: the parameter-free element-wise layers of the reference
// backend: ReLU (gradient 0 at exactly 0, a select rather than a branch) and flatten (a copy).
#pragma once

#include <algorithm>
#include <concepts>
#include <cstddef>
#include <string>

#include "common.hpp"

namespace sparsepush {
inline namespace v0 {
namespace nn {

/// y = max(x, 0); the gradient at exactly 0 is 0.
struct relu {
  shape3 in{};
  explicit relu(shape3 input) : in(input) { detail::require(in.size() > 0, "relu: empty input " + in.str()); }
  shape3 in_shape() const { return in; }
  shape3 out_shape() const { return in; }
  std::size_t num_params() const { return 0; }
  std::string describe() const { return "relu " + in.str() + ", 0 params"; }
  double flops_forward() const { return double(in.size()); }
  double flops_backward(bool need_dx) const { return need_dx ? double(in.size()) : 0.0; }
  template <std::floating_point T>
  void init(T*, normal_rng&) const {}

  template <std::floating_point T>
  void forward(const T*, const T* x, T* y, std::size_t batch, layer_scratch<T>&) const {
    const std::size_t n = batch * in.size();
    for (std::size_t i = 0; i < n; ++i) y[i] = x[i] > T(0) ? x[i] : T(0);
  }
  template <std::floating_point T>
  void backward(const T*, const T*, const T* y, const T* dy, T* dx, T*, std::size_t batch, layer_scratch<T>&) const {
    if (!dx) return;
    const std::size_t n = batch * in.size();
    for (std::size_t i = 0; i < n; ++i) {
      const T g = dy[i];  // read unconditionally: a select, not a branch
      dx[i] = y[i] > T(0) ? g : T(0);
    }
  }
};

/// c x h x w -> (c h w) x 1 x 1; the memory layout is unchanged (a copy).
struct flatten {
  shape3 in{};
  explicit flatten(shape3 input) : in(input) { detail::require(in.size() > 0, "flatten: empty input " + in.str()); }
  shape3 in_shape() const { return in; }
  shape3 out_shape() const { return {in.size(), 1, 1}; }
  std::size_t num_params() const { return 0; }
  std::string describe() const { return "flatten " + in.str() + " -> " + out_shape().str() + ", 0 params"; }
  double flops_forward() const { return 0.0; }
  double flops_backward(bool) const { return 0.0; }
  template <std::floating_point T>
  void init(T*, normal_rng&) const {}

  template <std::floating_point T>
  void forward(const T*, const T* x, T* y, std::size_t batch, layer_scratch<T>&) const {
    std::copy(x, x + batch * in.size(), y);
  }
  template <std::floating_point T>
  void backward(const T*, const T*, const T*, const T* dy, T* dx, T*, std::size_t batch, layer_scratch<T>&) const {
    if (dx) std::copy(dy, dy + batch * in.size(), dx);
  }
};

}  // namespace nn
}  // namespace v0
}  // namespace sparsepush
