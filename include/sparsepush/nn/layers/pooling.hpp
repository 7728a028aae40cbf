// sparsepush/nn/layers/pooling.hpp: the pooling layers of the reference backend: max and average
// pooling over square windows without padding (2x2 of stride 2 on its own path), and global
// average pooling; the max's gradient goes to each window's first maximum.
#pragma once

#include <algorithm>
#include <concepts>
#include <cstddef>
#include <string>

#include "common.hpp"

namespace sparsepush {
inline namespace v0 {
namespace nn {

/// Max or average pooling, square window, no padding (floor): y[c][oh][ow] over
/// x[c][oh s .. oh s + k)[ow s .. ow s + k).
template <bool Max>
struct pool2d {
  shape3 in{};  ///< shape of one input sample
  ///@{
  /// Window size k (k x k) and stride.
  std::size_t k = 2, stride = 2;
  ///@}
  shape3 out{};  ///< shape of one output sample

  /// Pooling of samples of shape `input` with a kernel x kernel window at stride `stride_` (0: the
  /// kernel size). Throws config_error for an empty input, a zero kernel or a window larger than the
  /// input.
  pool2d(shape3 input, std::size_t kernel = 2, std::size_t stride_ = 0)
      : in(input), k(kernel), stride(stride_ ? stride_ : kernel) {
    const std::string where = std::string(Max ? "max_pool2d(" : "avg_pool2d(") + in.str() + ", k " +
                              std::to_string(k) + ", stride " + std::to_string(stride) + "): ";
    detail::require(in.size() > 0 && k > 0, where + "sizes must be positive");
    detail::require(in.h >= k && in.w >= k, where + "window larger than the input");
    out = {in.c, detail::window_out(in.h, k, stride, 0), detail::window_out(in.w, k, stride, 0)};
  }
  /// The shape of one input sample.
  shape3 in_shape() const { return in; }
  /// The shape of one output sample: c x floor((h - k) / stride + 1) x floor((w - k) / stride + 1).
  shape3 out_shape() const { return out; }
  /// 0: no parameters.
  std::size_t num_params() const { return 0; }
  /// One line for the model summary: the layer, its shapes and its parameter count.
  std::string describe() const {
    return std::string(Max ? "max_pool2d " : "avg_pool2d ") + in.str() + " -> " + out.str() + " (k " +
           std::to_string(k) + ", stride " + std::to_string(stride) + "), 0 params";
  }
  /// Floating-point operations of the forward pass, per sample (the device profile's estimate).
  double flops_forward() const { return double(k * k) * double(out.size()); }
  /// Floating-point operations of the backward pass, per sample; need_dx: the input gradient is
  /// computed too (every layer but the first).
  double flops_backward(bool need_dx) const { return need_dx ? double(k * k + 1) * double(out.size()) : 0.0; }
  /// Nothing to initialize: the layer has no parameters.
  template <std::floating_point T>
  void init(T*, normal_rng&) const {}

  /// y = the layer applied to x, for `batch` samples (NCHW, sample-major); p is this layer's
  /// parameter slice, unused by a layer without parameters.
  template <std::floating_point T>
  void forward(const T*, const T* x, T* y, std::size_t batch, layer_scratch<T>&) const {
    const T scale = T(1) / T(k * k);
    for (std::size_t m = 0; m < batch * in.c; ++m) {
      const T* xc = x + m * in.h * in.w;
      T* yc = y + m * out.h * out.w;
      if (k == 2 && stride == 2) {
        for (std::size_t oh = 0; oh < out.h; ++oh) {
          const T* r0 = xc + 2 * oh * in.w;
          const T* r1 = r0 + in.w;
          T* yr = yc + oh * out.w;
          for (std::size_t ow = 0; ow < out.w; ++ow) {
            const T a = r0[2 * ow], b = r0[2 * ow + 1], c = r1[2 * ow], d = r1[2 * ow + 1];
            if constexpr (Max) {
              const T ab = b > a ? b : a, cd = d > c ? d : c;
              yr[ow] = cd > ab ? cd : ab;
            } else {
              yr[ow] = (a + b + c + d) * scale;
            }
          }
        }
        continue;
      }
      for (std::size_t oh = 0; oh < out.h; ++oh)
        for (std::size_t ow = 0; ow < out.w; ++ow) {
          const T* w0 = xc + oh * stride * in.w + ow * stride;
          T acc = Max ? w0[0] : T(0);
          for (std::size_t i = 0; i < k; ++i)
            for (std::size_t j = 0; j < k; ++j) {
              const T v = w0[i * in.w + j];
              if constexpr (Max) acc = v > acc ? v : acc;
              else acc += v;
            }
          yc[oh * out.w + ow] = Max ? acc : acc * scale;
        }
    }
  }

  /// Max: the gradient goes to the first maximum of each window. Average: spread evenly.
  template <std::floating_point T>
  void backward(const T*, const T* x, const T*, const T* dy, T* dx, T*, std::size_t batch,
                layer_scratch<T>&) const {
    if (!dx) return;
    const bool tiled = k == 2 && stride == 2;  // windows tile the input but for an odd last row/column
    if (!tiled || in.h % 2 || in.w % 2) std::fill(dx, dx + batch * in.size(), T(0));
    const T scale = T(1) / T(k * k);
    for (std::size_t m = 0; m < batch * in.c; ++m) {
      const T* xc = x + m * in.h * in.w;
      T* dxc = dx + m * in.h * in.w;
      const T* dyc = dy + m * out.h * out.w;
      if (tiled) {
        for (std::size_t oh = 0; oh < out.h; ++oh) {
          const T* r0 = xc + 2 * oh * in.w;
          const T* r1 = r0 + in.w;
          T* d0 = dxc + 2 * oh * in.w;
          T* d1 = d0 + in.w;
          const T* g = dyc + oh * out.w;
          for (std::size_t ow = 0; ow < out.w; ++ow) {
            if constexpr (Max) {
              detail::route_max2x2(r0[2 * ow], r0[2 * ow + 1], r1[2 * ow], r1[2 * ow + 1], g[ow], d0 + 2 * ow,
                                   d1 + 2 * ow);
            } else {
              const T gv = g[ow] * scale;
              d0[2 * ow] = gv;
              d0[2 * ow + 1] = gv;
              d1[2 * ow] = gv;
              d1[2 * ow + 1] = gv;
            }
          }
        }
        continue;
      }
      for (std::size_t oh = 0; oh < out.h; ++oh)
        for (std::size_t ow = 0; ow < out.w; ++ow) {
          const std::size_t base = oh * stride * in.w + ow * stride;
          const T g = dyc[oh * out.w + ow];
          if constexpr (Max) {
            std::size_t best = base;
            T best_v = xc[base];
            for (std::size_t i = 0; i < k; ++i)
              for (std::size_t j = 0; j < k; ++j) {
                const std::size_t at = base + i * in.w + j;
                const T v = xc[at];
                const bool gt = v > best_v;
                best_v = gt ? v : best_v;
                best = gt ? at : best;
              }
            dxc[best] += g;
          } else {
            for (std::size_t i = 0; i < k; ++i)
              for (std::size_t j = 0; j < k; ++j) dxc[base + i * in.w + j] += g * scale;
          }
        }
    }
  }
};
/// Max pooling (the gradient goes to the first maximum of each window).
using max_pool2d = pool2d<true>;
/// Average pooling.
using avg_pool2d = pool2d<false>;

/// Global average pooling: c x h x w -> c x 1 x 1.
struct global_avg_pool {
  shape3 in{};  ///< shape of one input sample
  /// Global average pooling of samples of shape `input`; config_error when it is empty.
  explicit global_avg_pool(shape3 input) : in(input) {
    detail::require(in.size() > 0, "global_avg_pool: empty input " + in.str());
  }
  /// The shape of one input sample.
  shape3 in_shape() const { return in; }
  /// The shape of one output sample: c x 1 x 1.
  shape3 out_shape() const { return {in.c, 1, 1}; }
  /// 0: no parameters.
  std::size_t num_params() const { return 0; }
  /// One line for the model summary: the layer, its shapes and its parameter count.
  std::string describe() const { return "global_avg_pool " + in.str() + " -> " + out_shape().str() + ", 0 params"; }
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
    const std::size_t hw = in.h * in.w;
    for (std::size_t m = 0; m < batch * in.c; ++m) {
      T acc = 0;
      for (std::size_t i = 0; i < hw; ++i) acc += x[m * hw + i];
      y[m] = acc / T(hw);
    }
  }
  /// The backward pass for `batch` samples, from dy (the loss gradient at the output y = forward(x)):
  /// the parameter gradient into dp (overwritten; none for a layer without parameters) and, unless dx
  /// is null, the input gradient into dx.
  template <std::floating_point T>
  void backward(const T*, const T*, const T*, const T* dy, T* dx, T*, std::size_t batch, layer_scratch<T>&) const {
    if (!dx) return;
    const std::size_t hw = in.h * in.w;
    for (std::size_t m = 0; m < batch * in.c; ++m) std::fill(dx + m * hw, dx + (m + 1) * hw, dy[m] / T(hw));
  }
};

}  // namespace nn
}  // namespace v0
}  // namespace sparsepush
