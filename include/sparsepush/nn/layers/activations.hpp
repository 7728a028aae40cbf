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
  shape3 in{};  ///< shape of one input sample
  /// ReLU on samples of shape `input`; config_error when it is empty.
  explicit relu(shape3 input) : in(input) { detail::require(in.size() > 0, "relu: empty input " + in.str()); }
  /// The shape of one input sample.
  shape3 in_shape() const { return in; }
  /// The shape of one output sample: the input's.
  shape3 out_shape() const { return in; }
  /// 0: no parameters.
  std::size_t num_params() const { return 0; }
  /// One line for the model summary: the layer, its shapes and its parameter count.
  std::string describe() const { return "relu " + in.str() + ", 0 params"; }
  /// Floating-point operations of the forward pass, per sample (the device profile's estimate).
  double flops_forward() const { return double(in.size()); }
  /// Floating-point operations of the backward pass, per sample; need_dx: the input gradient is
  /// computed too (every layer but the first).
  double flops_backward(bool need_dx) const { return need_dx ? double(in.size()) : 0.0; }
  /// Nothing to initialize: the layer has no parameters.
  template <std::floating_point T>
  void init(T*, normal_rng&) const {}

  /// y = the layer applied to x, for `batch` samples (NCHW, sample-major); p is this layer's
  /// parameter slice, unused by a layer without parameters.
  template <std::floating_point T>
  void forward(const T*, const T* x, T* y, std::size_t batch, layer_scratch<T>&) const {
    const std::size_t n = batch * in.size();
    for (std::size_t i = 0; i < n; ++i) y[i] = x[i] > T(0) ? x[i] : T(0);
  }
  /// The backward pass for `batch` samples, from dy (the loss gradient at the output y = forward(x)):
  /// the parameter gradient into dp (overwritten; none for a layer without parameters) and, unless dx
  /// is null, the input gradient into dx.
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
  shape3 in{};  ///< shape of one input sample
  /// Flattens samples of shape `input`; config_error when it is empty.
  explicit flatten(shape3 input) : in(input) { detail::require(in.size() > 0, "flatten: empty input " + in.str()); }
  /// The shape of one input sample.
  shape3 in_shape() const { return in; }
  /// The shape of one output sample: (c h w) x 1 x 1.
  shape3 out_shape() const { return {in.size(), 1, 1}; }
  /// 0: no parameters.
  std::size_t num_params() const { return 0; }
  /// One line for the model summary: the layer, its shapes and its parameter count.
  std::string describe() const { return "flatten " + in.str() + " -> " + out_shape().str() + ", 0 params"; }
  /// Floating-point operations of the forward pass, per sample (the device profile's estimate).
  double flops_forward() const { return 0.0; }
  /// Floating-point operations of the backward pass, per sample; need_dx: the input gradient is
  /// computed too (every layer but the first).
  double flops_backward(bool) const { return 0.0; }
  /// Nothing to initialize: the layer has no parameters.
  template <std::floating_point T>
  void init(T*, normal_rng&) const {}

  /// y = the layer applied to x, for `batch` samples (NCHW, sample-major); p is this layer's
  /// parameter slice, unused by a layer without parameters.
  template <std::floating_point T>
  void forward(const T*, const T* x, T* y, std::size_t batch, layer_scratch<T>&) const {
    std::copy(x, x + batch * in.size(), y);
  }
  /// The backward pass for `batch` samples, from dy (the loss gradient at the output y = forward(x)):
  /// the parameter gradient into dp (overwritten; none for a layer without parameters) and, unless dx
  /// is null, the input gradient into dx.
  template <std::floating_point T>
  void backward(const T*, const T*, const T*, const T* dy, T* dx, T*, std::size_t batch, layer_scratch<T>&) const {
    if (dx) std::copy(dy, dy + batch * in.size(), dx);
  }
};

}  // namespace nn
}  // namespace v0
}  // namespace sparsepush
