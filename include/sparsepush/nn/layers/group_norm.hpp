// sparsepush/nn/layers/group_norm.hpp: group normalization of the reference backend,
// y = gamma_c (x - mean) / sqrt(var + eps) + beta_c per sample and group, with a fused
// GroupNorm-ReLU-2x2-max-pool pass, forward and backward, for training and inference (the bits of
// the three layers one after the other; its x86 kernels in detail/norm_simd.hpp).
#pragma once

#include <Eigen/Core>
#include <algorithm>
#include <cmath>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>

#include "../detail/norm_simd.hpp"
#include "../gemm.hpp"
#include "common.hpp"

namespace sparsepush {
inline namespace v0 {
namespace nn {

/// Group normalization (Wu and He 2018): per sample and group of c/groups channels,
/// y = gamma_c (x - mean) / sqrt(var + eps) + beta_c. Parameters: gamma[c], then beta[c].
struct group_norm {
  shape3 in{};  ///< shape of one input sample
  std::size_t groups = 1;  ///< number of channel groups (divides c)
  double eps = 1e-5;  ///< added to the variance before the square root (> 0)

  /// Group normalization of samples of shape `input` in `groups_` groups of channels. Throws
  /// config_error unless the channels split into groups_ equal groups and eps_ > 0.
  group_norm(shape3 input, std::size_t groups_, double eps_ = 1e-5) : in(input), groups(groups_), eps(eps_) {
    detail::check_groups("group_norm", in, groups);
    detail::require(eps > 0, "group_norm: eps must be positive");
  }
  /// The shape of one input sample.
  shape3 in_shape() const { return in; }
  /// The shape of one output sample: the input's.
  shape3 out_shape() const { return in; }
  /// 2 c: gamma[c], then beta[c].
  std::size_t num_params() const { return 2 * in.c; }
  /// One line for the model summary: the layer, its shapes and its parameter count.
  std::string describe() const {
    return "group_norm " + in.str() + " (groups " + std::to_string(groups) + "), " + std::to_string(num_params()) +
           " params";
  }
  /// Floating-point operations of the forward pass, per sample (the device profile's estimate).
  double flops_forward() const { return 7.0 * double(in.size()); }
  /// Floating-point operations of the backward pass, per sample; need_dx: the input gradient is
  /// computed too (every layer but the first).
  double flops_backward(bool need_dx) const { return (need_dx ? 12.0 : 6.0) * double(in.size()); }
  /// gamma = 1 and beta = 0 into p.
  template <std::floating_point T>
  void init(T* p, normal_rng&) const {
    detail::fill_value(p, in.c, T(1));
    detail::fill_value(p + in.c, in.c, T(0));
  }

  /// y = the layer applied to x, for `batch` samples (NCHW, sample-major); p is this layer's
  /// parameter slice, unused by a layer without parameters.
  template <std::floating_point T>
  void forward(const T* p, const T* x, T* y, std::size_t batch, layer_scratch<T>&) const {
    const std::size_t cpg = in.c / groups, hw = in.h * in.w, n = cpg * hw;
    for (std::size_t m = 0; m < batch * groups; ++m) {
      const auto [mean, var] = detail::mean_var(x + m * n, n);
      const double rstd = 1.0 / std::sqrt(var + eps);
      for (std::size_t cc = 0; cc < cpg; ++cc) {
        const std::size_t off = m * n + cc * hw;
        const auto [a, b] = channel_affine(p, (m % groups) * cpg + cc, mean, rstd);
        for (std::size_t i = 0; i < hw; ++i) y[off + i] = affine(x[off + i], a, b);
      }
    }
  }

  /// This layer, then ReLU, then a 2x2 max pool of stride 2 (floor), in one pass: the values
  /// forward(), relu and max_pool2d give one after the other, bit for bit (the same products, the
  /// same comparisons), without writing the two full-size activations between them. Training
  /// passes stats (2 doubles per sample and group): each group's mean and 1 / sqrt(var + eps),
  /// which backward_relu_max_pool2 reads instead of computing them again.
  /// The windows run on AVX-512 where `level` and the CPU allow (the same bits).
  template <std::floating_point T>
  void forward_relu_max_pool2(const T* p, const T* x, T* y, std::size_t batch, double* stats = nullptr,
                              detail::simd_level level = detail::simd_supported()) const {
    const std::size_t cpg = in.c / groups, hw = in.h * in.w, n = cpg * hw;
    const std::size_t oh = in.h / 2, ow = in.w / 2;
    const bool avx512 = detail::runs_avx512<T>(level);
    const bool sse_sums = detail::runs_sse_order_sums<T>(level);  // Eigen's sums, their chains side by side
    double means[4], vars[4];  // sse_sums: four groups' mean_var at a time
    for (std::size_t m = 0; m < batch * groups; ++m) {
      double mean = 0, var = 0;
#ifdef SPARSEPUSH_NN_X86_DISPATCH
      if constexpr (std::is_same_v<T, float>)
        if (sse_sums) {
          const std::size_t j = m % 4;
          if (j == 0) {
            const std::size_t k = std::min<std::size_t>(4, batch * groups - m);
            const float* xs[4];
            for (std::size_t i = 0; i < 4; ++i) xs[i] = x + (m + (i < k ? i : 0)) * n;
            switch (k) {
              case 4: detail::mean_var_sse_order<4>(xs, n, means, vars); break;
              case 3: detail::mean_var_sse_order<3>(xs, n, means, vars); break;
              case 2: detail::mean_var_sse_order<2>(xs, n, means, vars); break;
              default: detail::mean_var_sse_order<1>(xs, n, means, vars); break;
            }
          }
          mean = means[j], var = vars[j];
        }
#endif
      if (!sse_sums) std::tie(mean, var) = detail::mean_var(x + m * n, n);
      const double rstd = 1.0 / std::sqrt(var + eps);
      if (stats) stats[2 * m] = mean, stats[2 * m + 1] = rstd;
      for (std::size_t cc = 0; cc < cpg; ++cc) {
        const auto [a, b] = channel_affine(p, (m % groups) * cpg + cc, mean, rstd);
        const T* xc = x + m * n + cc * hw;
        T* yc = y + (m * cpg + cc) * oh * ow;
#ifdef SPARSEPUSH_NN_X86_DISPATCH
        if constexpr (std::is_same_v<T, float>)
          if (avx512) {
            detail::relu_max_pool2_forward_avx512(xc, in.w, oh, ow, a, b, yc);
            continue;
          }
#endif
        for (std::size_t r = 0; r < oh; ++r) {
          const T* r0 = xc + 2 * r * in.w;
          const T* r1 = r0 + in.w;
          T* yr = yc + r * ow;
          for (std::size_t q = 0; q < ow; ++q) {
            const T v0 = relu_of(affine(r0[2 * q], a, b)), v1 = relu_of(affine(r0[2 * q + 1], a, b));
            const T v2 = relu_of(affine(r1[2 * q], a, b)), v3 = relu_of(affine(r1[2 * q + 1], a, b));
            const T ab = v1 > v0 ? v1 : v0, cd = v3 > v2 ? v3 : v2;  // max_pool2d's comparisons
            yr[q] = cd > ab ? cd : ab;
          }
        }
      }
    }
  }

  /// The backward pass for `batch` samples, from dy (the loss gradient at the output y = forward(x)):
  /// the parameter gradient into dp (overwritten; none for a layer without parameters) and, unless dx
  /// is null, the input gradient into dx.
  template <std::floating_point T>
  void backward(const T* p, const T* x, const T*, const T* dy, T* dx, T* dp, std::size_t batch,
                layer_scratch<T>& s) const {
    const std::size_t n = in.size() / groups;
    double* acc = detail::grow(s.acc, 2 * in.c);  // dgamma, dbeta
    std::fill(acc, acc + 2 * in.c, 0.0);
    for (std::size_t m = 0; m < batch * groups; ++m) {
      const auto [mean, var] = detail::mean_var(x + m * n, n);
      backward_group(p, x, dy + m * n, dx, m, mean, 1.0 / std::sqrt(var + eps), acc);
    }
    for (std::size_t i = 0; i < 2 * in.c; ++i) dp[i] = T(acc[i]);
  }

  /// The backward pass of forward_relu_max_pool2 (with its stats): dy is the gradient of the
  /// pooled output. Per group, the gradient of this layer's output is rebuilt in a buffer that
  /// stays in cache (the pool's and the ReLU's backward passes, the same expressions), then the
  /// group's backward() runs on it: the bits of backward(relu.backward(max_pool2d.backward(dy))).
  /// The buffer lines up with dx modulo 64 bytes, where the unfused pass would have kept that
  /// gradient, so Eigen's sums, which start at the first aligned element, add in the same order.
  /// The windows run on AVX-512 where `level` and the CPU allow (the same bits).
  template <std::floating_point T>
  void backward_relu_max_pool2(const T* p, const T* x, const double* stats, const T* dy, T* dx, T* dp,
                               std::size_t batch, layer_scratch<T>& s,
                               detail::simd_level level = detail::simd_supported()) const {
    const std::size_t cpg = in.c / groups, hw = in.h * in.w, n = cpg * hw;
    const std::size_t oh = in.h / 2, ow = in.w / 2;
    const bool avx512 = detail::runs_avx512<T>(level);
    const bool sse_sums = detail::runs_sse_order_sums<T>(level);  // Eigen's sums, their chains side by side
    constexpr std::size_t line = 64 / sizeof(T);
    double* acc = detail::grow(s.acc, 2 * in.c);  // dgamma, dbeta
    std::fill(acc, acc + 2 * in.c, 0.0);
    T* buf = detail::grow(s.cols, n + line);
    T* v = detail::grow(s.packed, 2 * in.w);  // a window row pair's ReLU outputs
    const bool odd = in.h % 2 || in.w % 2;  // the last row or column lies in no window
    for (std::size_t m = 0; m < batch * groups; ++m) {
      const double mean = stats[2 * m], rstd = stats[2 * m + 1];
      const std::uintptr_t want = reinterpret_cast<std::uintptr_t>(dx ? dx + m * n : dy) % 64;
      const std::uintptr_t have = reinterpret_cast<std::uintptr_t>(buf) % 64;
      T* dg = buf + (want + 64 - have) % 64 / sizeof(T);  // the group's output gradient
      if (odd) std::fill(dg, dg + n, T(0));
      for (std::size_t cc = 0; cc < cpg; ++cc) {
        const auto [a, b] = channel_affine(p, (m % groups) * cpg + cc, mean, rstd);
        const T* xc = x + m * n + cc * hw;
        const T* gc = dy + (m * cpg + cc) * oh * ow;
        T* dc = dg + cc * hw;
#ifdef SPARSEPUSH_NN_X86_DISPATCH
        if constexpr (std::is_same_v<T, float>)
          if (avx512) {
            detail::relu_max_pool2_backward_avx512(xc, in.w, oh, ow, a, b, gc, dc);
            continue;
          }
#endif
        for (std::size_t r = 0; r < oh; ++r) {
          // three branch-free loops the compiler vectorizes: the ReLU outputs of the window's two
          // rows; max_pool2d::backward's 0/1 weights; relu::backward's select
          const T* r0 = xc + 2 * r * in.w;
          for (std::size_t j = 0; j < 2 * in.w; ++j) v[j] = relu_of(affine(r0[j], a, b));
          const T* v0 = v;
          const T* v1 = v + in.w;
          T* d0 = dc + 2 * r * in.w;
          T* d1 = d0 + in.w;
          const T* g = gc + r * ow;
          for (std::size_t q = 0; q < ow; ++q) {
            detail::route_max2x2(v0[2 * q], v0[2 * q + 1], v1[2 * q], v1[2 * q + 1], g[q], d0 + 2 * q, d1 + 2 * q);
          }
          for (std::size_t j = 0; j < 2 * ow; ++j) {
            const T g0 = d0[j], g1 = d1[j];  // read unconditionally: a select, not a branch
            d0[j] = v0[j] > T(0) ? g0 : T(0);
            d1[j] = v1[j] > T(0) ? g1 : T(0);
          }
        }
      }
      backward_group(p, x, dg, dx, m, mean, rstd, acc, sse_sums);
    }
    for (std::size_t i = 0; i < 2 * in.c; ++i) dp[i] = T(acc[i]);
  }

 private:
  /// Group m of backward(): dgamma, dbeta into acc; dx (when not null) from dy, the gradient of
  /// the group's n outputs (contiguous), and its mean and rstd.
  template <std::floating_point T>
  void backward_group(const T* p, const T* x, const T* dyg, T* dx, std::size_t m, double mean, double rstd,
                      double* acc, bool sse_order = false) const {
    using namespace detail;
    const std::size_t cpg = in.c / groups, hw = in.h * in.w, n = cpg * hw;
    double sum_g = 0, sum_gx = 0;  // g = dy gamma: sums of g and of g xhat over the group
    float pair[4];                 // sse_order: two channels' sums of dY and of dY (X - mean)
    for (std::size_t cc = 0; cc < cpg; ++cc) {
      const std::size_t c = (m % groups) * cpg + cc, off = m * n + cc * hw;
      const carr<T> X(x + off, ix(hw)), dY(dyg + cc * hw, ix(hw));
      double sdy = 0, sdyx = 0;
#ifdef SPARSEPUSH_NN_X86_DISPATCH
      if constexpr (std::is_same_v<T, float>)
        if (sse_order) {
          if (cc % 2 == 0) {
            const float* d2[2] = {dyg + cc * hw, dyg + (cc + 1) * hw};
            const float* x2[2] = {x + off, x + off + hw};
            if (cc + 1 < cpg) channel_sums_sse_order<2>(d2, x2, float(mean), hw, pair);
            else channel_sums_sse_order<1>(d2, x2, float(mean), hw, pair);
          }
          sdy = double(pair[2 * (cc % 2)]);
          sdyx = double(pair[2 * (cc % 2) + 1]) * rstd;
        }
#endif
      if (!sse_order) {
        sdy = double(dY.sum());
        sdyx = double((dY * (X - T(mean))).sum()) * rstd;
      }
      acc[c] += sdyx;
      acc[in.c + c] += sdy;
      sum_g += double(p[c]) * sdy;
      sum_gx += double(p[c]) * sdyx;
    }
    if (!dx) return;
    // dx = rstd (g - mean(g) - xhat mean(g xhat))
    const double mg = sum_g / double(n), mgx = sum_gx / double(n);
    const T b = T(-rstd * rstd * mgx), c0 = T(-rstd * mg);
    for (std::size_t cc = 0; cc < cpg; ++cc) {
      const std::size_t c = (m % groups) * cpg + cc, off = m * n + cc * hw;
      const T a = T(rstd * double(p[c]));
#ifdef SPARSEPUSH_NN_X86_DISPATCH
      if constexpr (std::is_same_v<T, float>)
        if (sse_order) {
          norm_dx_avx2(dyg + cc * hw, x + off, float(mean), a, b, c0, dx + off, hw);
          continue;
        }
#endif
      marr<T>(dx + off, ix(hw)) = carr<T>(dyg + cc * hw, ix(hw)) * a + (carr<T>(x + off, ix(hw)) - T(mean)) * b + c0;
    }
  }

  /// y = x a + b: the one expression both forward passes use.
  template <class T>
  static T affine(T x, T a, T b) noexcept {
    return x * a + b;
  }
  template <class T>
  static T relu_of(T v) noexcept {
    return v > T(0) ? v : T(0);
  }
  /// Channel c's a = gamma_c rstd and b = beta_c - gamma_c rstd mean.
  template <class T>
  std::pair<T, T> channel_affine(const T* p, std::size_t c, double mean, double rstd) const {
    return {T(double(p[c]) * rstd), T(double(p[in.c + c]) - double(p[c]) * rstd * mean)};
  }
};

}  // namespace nn
}  // namespace v0
}  // namespace sparsepush
