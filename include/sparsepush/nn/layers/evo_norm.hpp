// sparsepush/nn/layers/evo_norm.hpp: the batch-independent norm-activations of the reference
// backend: EvoNorm-S0, y = x sigmoid(v_c x) / sqrt(var_group(x) + eps) gamma_c + beta_c, and
// Range-EvoNorm, its group standard deviation replaced by a range estimate over chunks.
#pragma once

#include <Eigen/Core>
#include <algorithm>
#include <cmath>
#include <concepts>
#include <cstddef>
#include <numbers>
#include <string>
#include <utility>

#include "common.hpp"

namespace sparsepush {
inline namespace v0 {
namespace nn {

/// EvoNorm-S0 (Liu et al. 2020), batch-independent: per sample and group,
/// y = x sigmoid(v_c x) / sqrt(var_group(x) + eps) gamma_c + beta_c. It replaces norm + activation.
/// Parameters: gamma[c], beta[c], v[c] (initialised 1, 0, 1).
struct evo_norm_s0 {
  shape3 in{};  ///< shape of one input sample
  std::size_t groups = 1;  ///< number of channel groups (divides c)
  double eps = 1e-5;  ///< added to the variance before the square root (> 0)

  /// EvoNorm-S0 on samples of shape `input` in `groups_` groups of channels. Throws config_error
  /// unless the channels split into groups_ equal groups and eps_ > 0.
  evo_norm_s0(shape3 input, std::size_t groups_, double eps_ = 1e-5) : in(input), groups(groups_), eps(eps_) {
    detail::check_groups("evo_norm_s0", in, groups);
    detail::require(eps > 0, "evo_norm_s0: eps must be positive");
  }
  /// The shape of one input sample.
  shape3 in_shape() const { return in; }
  /// The shape of one output sample: the input's.
  shape3 out_shape() const { return in; }
  /// 3 c: gamma[c], beta[c], v[c].
  std::size_t num_params() const { return 3 * in.c; }
  /// One line for the model summary: the layer, its shapes and its parameter count.
  std::string describe() const {
    return "evo_norm_s0 " + in.str() + " (groups " + std::to_string(groups) + "), " +
           std::to_string(num_params()) + " params";
  }
  /// Floating-point operations of the forward pass, per sample (the device profile's estimate).
  double flops_forward() const { return 12.0 * double(in.size()); }
  /// Floating-point operations of the backward pass, per sample; need_dx: the input gradient is
  /// computed too (every layer but the first).
  double flops_backward(bool need_dx) const { return (need_dx ? 20.0 : 12.0) * double(in.size()); }
  /// gamma = 1, beta = 0, v = 1 into p.
  template <std::floating_point T>
  void init(T* p, normal_rng&) const {
    detail::fill_value(p, in.c, T(1));
    detail::fill_value(p + in.c, in.c, T(0));
    detail::fill_value(p + 2 * in.c, in.c, T(1));
  }

  /// y = the layer applied to x, for `batch` samples (NCHW, sample-major); p is this layer's
  /// parameter slice, unused by a layer without parameters.
  template <std::floating_point T>
  void forward(const T* p, const T* x, T* y, std::size_t batch, layer_scratch<T>&) const {
    using namespace detail;
    const std::size_t cpg = in.c / groups, hw = in.h * in.w, n = cpg * hw;
    for (std::size_t m = 0; m < batch * groups; ++m) {
      const double rstd = 1.0 / std::sqrt(mean_var(x + m * n, n).second + eps);
      for (std::size_t cc = 0; cc < cpg; ++cc) {
        const std::size_t c = (m % groups) * cpg + cc, off = m * n + cc * hw;
        const T a = T(double(p[c]) * rstd), b = p[in.c + c], v = p[2 * in.c + c];
        const carr<T> X(x + off, ix(hw));
        marr<T>(y + off, ix(hw)) = X * a / (T(1) + (X * (-v)).exp()) + b;
      }
    }
  }

  /// The backward pass for `batch` samples, from dy (the loss gradient at the output y = forward(x)):
  /// the parameter gradient into dp (overwritten; none for a layer without parameters) and, unless dx
  /// is null, the input gradient into dx.
  template <std::floating_point T>
  void backward(const T* p, const T* x, const T*, const T* dy, T* dx, T* dp, std::size_t batch,
                layer_scratch<T>& scratch) const {
    using namespace detail;
    const std::size_t cpg = in.c / groups, hw = in.h * in.w, n = cpg * hw;
    double* acc = grow(scratch.acc, 3 * in.c);  // dgamma, dbeta, dv
    std::fill(acc, acc + 3 * in.c, 0.0);
    T* sig = grow(scratch.cols, n);  // sigmoid(v x) of the group
    for (std::size_t m = 0; m < batch * groups; ++m) {
      const auto [mean, var] = mean_var(x + m * n, n);
      const double rstd = 1.0 / std::sqrt(var + eps);
      double sum_gn = 0;  // sum of g n over the group, g = dy gamma, n = x sigmoid(v x)
      for (std::size_t cc = 0; cc < cpg; ++cc) {
        const std::size_t c = (m % groups) * cpg + cc, off = m * n + cc * hw;
        const T v = p[2 * in.c + c];
        const carr<T> X(x + off, ix(hw)), dY(dy + off, ix(hw));
        marr<T> S(sig + cc * hw, ix(hw));
        S = (T(1) + (X * (-v)).exp()).inverse();
        const double sdyn = double((dY * X * S).sum());
        const double sdv = double((dY * X.square() * S * (T(1) - S)).sum());
        acc[c] += sdyn * rstd;
        acc[in.c + c] += double(dY.sum());
        acc[2 * in.c + c] += double(p[c]) * sdv * rstd;
        sum_gn += double(p[c]) * sdyn;
      }
      if (!dx) continue;
      // d loss / d var = -sum(g n) / sd^2 / (2 sd); d var / d x_i = 2 (x_i - mean) / n
      const T dvar_coef = T(-sum_gn * rstd * rstd * rstd / double(n));
      for (std::size_t cc = 0; cc < cpg; ++cc) {
        const std::size_t c = (m % groups) * cpg + cc, off = m * n + cc * hw;
        const T gr = T(double(p[c]) * rstd), v = p[2 * in.c + c];
        const carr<T> X(x + off, ix(hw)), dY(dy + off, ix(hw)), S(sig + cc * hw, ix(hw));
        marr<T>(dx + off, ix(hw)) = dY * gr * S * (T(1) + v * X * (T(1) - S)) + (X - T(mean)) * dvar_coef;
      }
    }
    for (std::size_t i = 0; i < 3 * in.c; ++i) dp[i] = T(acc[i]);
  }
};

/// Range-EvoNorm (Aketi, Kodge, Roy, arXiv 2111.09389): EvoNorm-S0 with the group standard
/// deviation replaced by Banner et al.'s range estimate (Range BN, NeurIPS 2018), robust to
/// low-precision arithmetic. Each group of n = channels/groups * H * W elements (contiguous in
/// NCHW) is cut into K contiguous chunks of m = n / K elements:
///   y = gamma * x * sigmoid(v x) / s_g + beta,
///   s_g = C(m) * (mean_k max_{chunk k} x - mean_k min_{chunk k} x) + eps,
///   C(m) = 0.5 * 0.35 * (1 + sqrt(pi ln 4)) / sqrt(2 ln m),
/// so that s_g estimates the standard deviation of Gaussian data (E[max - min] of m draws is
/// about 2 sigma sqrt(2 ln m)). K is the largest divisor of n up to `chunks` (16, as the authors'
/// code) that leaves m >= 2. max and min are piecewise linear: the gradient of s_g goes to each
/// chunk's (first) argmax and argmin, C(m) / K each with their signs.
struct range_evo_norm {
  shape3 in{};  ///< shape of one input sample
  std::size_t groups = 1;  ///< number of channel groups (divides c)
  double eps = 1e-5;  ///< added to the variance before the square root (> 0)
  std::size_t chunks = 16;  ///< K: chunks per group, after construction a divisor of the group size

  /// Range-EvoNorm on samples of shape `input` in `groups_` groups of channels, the range taken over
  /// `chunks_` chunks per group (at most; the largest divisor of the group size up to it). Throws
  /// config_error unless the channels split into groups_ equal groups of at least 2 elements, eps_ > 0
  /// and chunks_ >= 1.
  range_evo_norm(shape3 input, std::size_t groups_, double eps_ = 1e-5, std::size_t chunks_ = 16)
      : in(input), groups(groups_), eps(eps_) {
    detail::check_groups("range_evo_norm", in, groups);
    detail::require(eps > 0, "range_evo_norm: eps must be positive");
    const std::size_t n = in.size() / groups;
    detail::require(n >= 2, "range_evo_norm: a group needs at least 2 elements (C(m) = c / sqrt(2 ln m))");
    detail::require(chunks_ >= 1, "range_evo_norm: chunks must be at least 1");
    chunks = 1;
    for (std::size_t k = std::min(chunks_, n / 2); k > 1; --k)
      if (n % k == 0) {
        chunks = k;
        break;
      }
  }
  /// The shape of one input sample.
  shape3 in_shape() const { return in; }
  /// The shape of one output sample: the input's.
  shape3 out_shape() const { return in; }
  /// 3 c: gamma[c], beta[c], v[c].
  std::size_t num_params() const { return 3 * in.c; }
  /// One line for the model summary: the layer, its shapes and its parameter count.
  std::string describe() const {
    return "range_evo_norm " + in.str() + " (groups " + std::to_string(groups) + ", chunks " +
           std::to_string(chunks) + "), " + std::to_string(num_params()) + " params";
  }
  /// Floating-point operations of the forward pass, per sample (the device profile's estimate).
  double flops_forward() const { return 10.0 * double(in.size()); }
  /// Floating-point operations of the backward pass, per sample; need_dx: the input gradient is
  /// computed too (every layer but the first).
  double flops_backward(bool need_dx) const { return (need_dx ? 16.0 : 12.0) * double(in.size()); }
  /// gamma = 1, beta = 0, v = 1 into p.
  template <std::floating_point T>
  void init(T* p, normal_rng&) const {
    detail::fill_value(p, in.c, T(1));
    detail::fill_value(p + in.c, in.c, T(0));
    detail::fill_value(p + 2 * in.c, in.c, T(1));
  }
  /// C(m) of a chunk.
  double range_scale() const {
    const double m = double(in.size() / groups / chunks);
    return 0.5 * 0.35 * (1.0 + std::sqrt(std::numbers::pi * std::log(4.0))) / std::sqrt(2.0 * std::log(m));
  }
  /// First positions of the minimum and maximum of x[0 .. n).
  template <std::floating_point T>
  static std::pair<std::size_t, std::size_t> arg_min_max(const T* x, std::size_t n) {
    std::size_t lo = 0, hi = 0;
    for (std::size_t i = 1; i < n; ++i) {
      if (x[i] < x[lo]) lo = i;
      if (x[i] > x[hi]) hi = i;
    }
    return {lo, hi};
  }
  /// mean_k max - mean_k min of the group at xg (n elements).
  template <std::floating_point T>
  double group_range(const T* xg, std::size_t n) const {
    const std::size_t m = n / chunks;
    double sum = 0;
    for (std::size_t k = 0; k < chunks; ++k) {
      const auto [lo, hi] = arg_min_max(xg + k * m, m);
      sum += double(xg[k * m + hi]) - double(xg[k * m + lo]);
    }
    return sum / double(chunks);
  }

  /// y = the layer applied to x, for `batch` samples (NCHW, sample-major); p is this layer's
  /// parameter slice, unused by a layer without parameters.
  template <std::floating_point T>
  void forward(const T* p, const T* x, T* y, std::size_t batch, layer_scratch<T>&) const {
    const std::size_t cpg = in.c / groups, hw = in.h * in.w, n = cpg * hw;
    const double cn = range_scale();
    for (std::size_t m = 0; m < batch * groups; ++m) {
      const double rs = 1.0 / (cn * group_range(x + m * n, n) + eps);
      for (std::size_t cc = 0; cc < cpg; ++cc) {
        const std::size_t c = (m % groups) * cpg + cc, off = m * n + cc * hw;
        const T a = T(double(p[c]) * rs), b = p[in.c + c], v = p[2 * in.c + c];
        const detail::carr<T> X(x + off, detail::ix(hw));
        detail::marr<T>(y + off, detail::ix(hw)) = X * a / (T(1) + (X * (-v)).exp()) + b;
      }
    }
  }

  /// The backward pass for `batch` samples, from dy (the loss gradient at the output y = forward(x)):
  /// the parameter gradient into dp (overwritten; none for a layer without parameters) and, unless dx
  /// is null, the input gradient into dx.
  template <std::floating_point T>
  void backward(const T* p, const T* x, const T*, const T* dy, T* dx, T* dp, std::size_t batch,
                layer_scratch<T>& scratch) const {
    const std::size_t cpg = in.c / groups, hw = in.h * in.w, n = cpg * hw;
    const double cn = range_scale();
    double* acc = detail::grow(scratch.acc, 3 * in.c);  // dgamma, dbeta, dv
    std::fill(acc, acc + 3 * in.c, 0.0);
    T* sig = detail::grow(scratch.cols, n);  // sigmoid(v x) of the group
    for (std::size_t m = 0; m < batch * groups; ++m) {
      const T* xg = x + m * n;
      const double rs = 1.0 / (cn * group_range(xg, n) + eps);
      double sum_gn = 0;  // sum of dy gamma x sigmoid(v x) over the group
      for (std::size_t cc = 0; cc < cpg; ++cc) {
        const std::size_t c = (m % groups) * cpg + cc, off = m * n + cc * hw;
        const T v = p[2 * in.c + c];
        const detail::carr<T> X(x + off, detail::ix(hw)), dY(dy + off, detail::ix(hw));
        detail::marr<T> S(sig + cc * hw, detail::ix(hw));
        S = (T(1) + (X * (-v)).exp()).inverse();
        const double sdyn = double((dY * X * S).sum());
        const double sdv = double((dY * X.square() * S * (T(1) - S)).sum());
        const double sdy = double(dY.sum());
        acc[c] += sdyn * rs;
        acc[in.c + c] += sdy;
        acc[2 * in.c + c] += double(p[c]) * sdv * rs;
        sum_gn += double(p[c]) * sdyn;
      }
      if (!dx) continue;
      for (std::size_t cc = 0; cc < cpg; ++cc) {
        const std::size_t c = (m % groups) * cpg + cc, off = m * n + cc * hw;
        const T gr = T(double(p[c]) * rs), v = p[2 * in.c + c];
        const detail::carr<T> X(x + off, detail::ix(hw)), dY(dy + off, detail::ix(hw)), S(sig + cc * hw, detail::ix(hw));
        detail::marr<T>(dx + off, detail::ix(hw)) = dY * gr * S * (T(1) + v * X * (T(1) - S));
      }
      // d loss / d s = -sum(g n) / s^2; d s / d x = C(m) / K at each chunk's argmax, -C(m) / K at
      // its argmin
      const double ds = -sum_gn * rs * rs * cn / double(chunks);
      const std::size_t len = n / chunks;
      for (std::size_t k = 0; k < chunks; ++k) {
        const auto [lo, hi] = arg_min_max(xg + k * len, len);
        dx[m * n + k * len + hi] += T(ds);
        dx[m * n + k * len + lo] -= T(ds);
      }
    }
    for (std::size_t i = 0; i < 3 * in.c; ++i) dp[i] = T(acc[i]);
  }
};

}  // namespace nn
}  // namespace v0
}  // namespace sparsepush
