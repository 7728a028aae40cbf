// sparsepush/nn/layers/dense.hpp: the fully connected layer of the reference backend, y = W x + b
// over the flattened input, forward and backward templated on the scalar (float for training,
// double for gradient checks), its products gemm.hpp's (the packed weights reused by inference).
#pragma once

#include <algorithm>
#include <cmath>
#include <concepts>
#include <cstddef>
#include <string>
#include <vector>

#include "../gemm.hpp"
#include "common.hpp"

namespace sparsepush {
inline namespace v0 {
namespace nn {

/// Fully connected: y = W x + b, W is out x in (row-major), then b; the input is flattened.
struct dense {
  shape3 in{};  ///< shape of one input sample
  std::size_t out = 0;  ///< number of output features

  /// A fully connected layer from samples of shape `input` (flattened) to `out_features` outputs;
  /// config_error when either size is 0.
  dense(shape3 input, std::size_t out_features) : in(input), out(out_features) {
    detail::require(in.size() > 0 && out > 0, "dense: input size " + in.str() + " and " + std::to_string(out) +
                                                  " outputs must be positive");
  }
  /// The shape of one input sample.
  shape3 in_shape() const { return in; }
  /// The shape of one output sample: out x 1 x 1.
  shape3 out_shape() const { return {out, 1, 1}; }
  /// out in.size() weights, then out biases.
  std::size_t num_params() const { return out * in.size() + out; }
  /// One line for the model summary: the layer, its shapes and its parameter count.
  std::string describe() const {
    return "dense " + in.str() + " -> " + std::to_string(out) + ", " + std::to_string(num_params()) + " params";
  }
  /// Floating-point operations of the forward pass, per sample (the device profile's estimate).
  double flops_forward() const { return 2.0 * double(in.size()) * double(out) + double(out); }
  /// Floating-point operations of the backward pass, per sample; need_dx: the input gradient is
  /// computed too (every layer but the first).
  double flops_backward(bool need_dx) const {
    return (need_dx ? 4.0 : 2.0) * double(in.size()) * double(out) + double(out);
  }

  /// He normal weights (sd = sqrt(2 / fan_in)), zero bias.
  template <std::floating_point T>
  void init(T* p, normal_rng& rng) const {
    detail::fill_normal(p, out * in.size(), std::sqrt(2.0 / double(in.size())), rng);
    detail::fill_value(p + out * in.size(), out, T(0));
  }

  /// Y = X W^T + b: W^T is packed with its rows padded (so the product reads whole vectors); each
  /// output is b then the products in input order, whatever the batch size.
  template <std::floating_point T>
  void forward(const T* p, const T* x, T* y, std::size_t batch, layer_scratch<T>& s) const {
    forward_packed(pack(p, s.packed), x, y, batch);
  }

  /// W^T (in x out, rows padded to whole vectors) and then b, as forward_packed() takes them.
  template <std::floating_point T>
  const T* pack(const T* p, std::vector<T>& buf) const {
    const std::size_t n = in.size(), op = detail::gemm_pad<T>(out);
    T* wt = detail::grow(buf, (n + 1) * op);
    for (std::size_t o = 0; o < out; ++o) {
      const T* wr = p + o * n;
      for (std::size_t i = 0; i < n; ++i) wt[i * op + o] = wr[i];
    }
    for (std::size_t i = 0; i <= n; ++i) std::fill(wt + i * op + out, wt + (i + 1) * op, T(0));
    std::copy(p + out * n, p + out * n + out, wt + n * op);
    return wt;
  }

  /// forward() with the weights packed once by pack() (the inference path reuses them).
  template <std::floating_point T>
  void forward_packed(const T* wt, const T* x, T* y, std::size_t batch) const {
    using namespace detail;
    const std::size_t n = in.size(), op = gemm_pad<T>(out);
    gemm_args<T> g;
    g.a = x, g.a_row = n, g.a_col = 1;
    g.b = wt, g.ldb = op, g.b_padded = true;
    g.c = y, g.ldc = out;
    g.m = batch, g.n = out, g.k = n;
    g.init = gemm_init::col_bias, g.bias = wt + n * op;
    gemm(g);
  }

  /// dp (this layer's slice) is overwritten; dx is skipped when null.
  template <std::floating_point T>
  void backward(const T* p, const T* x, const T*, const T* dy, T* dx, T* dp, std::size_t batch,
                layer_scratch<T>&) const {
    using namespace detail;
    const std::size_t n = in.size();
    gemm_args<T> g;  // dW = dY^T X
    g.a = dy, g.a_row = 1, g.a_col = out;
    g.b = x, g.ldb = n;
    g.c = dp, g.ldc = n;
    g.m = out, g.n = n, g.k = batch;
    gemm(g);
    T* db = dp + out * n;
    std::fill(db, db + out, T(0));
    for (std::size_t b = 0; b < batch; ++b)
      for (std::size_t o = 0; o < out; ++o) db[o] += dy[b * out + o];
    if (dx) {
      gemm_args<T> h;  // dX = dY W
      h.a = dy, h.a_row = out, h.a_col = 1;
      h.b = p, h.ldb = n;
      h.c = dx, h.ldc = n;
      h.m = batch, h.n = n, h.k = out;
      gemm(h);
    }
  }
};

}  // namespace nn
}  // namespace v0
}  // namespace sparsepush
