// sparsepush/nn/layers/conv2d.hpp: 2-D convolution of the reference backend (square kernel,
// stride, zero padding): im2col, or shifted windows of the padded input, and the products of
// gemm.hpp; backward at stride 1 as the full convolution of dY with the flipped kernel.
#pragma once

#include <algorithm>
#include <cmath>
#include <concepts>
#include <cstddef>
#include <string>
#include <utility>
#include <vector>

#include "../gemm.hpp"
#include "common.hpp"

namespace sparsepush {
inline namespace v0 {
namespace nn {

/// 2-D convolution, square kernel, stride and zero padding; W is out_c x (in_c k k), then b.
/// Per sample: im2col into a (in_c k k) x (oh ow) matrix, then one GEMM W * cols.
struct conv2d {
  shape3 in{};  ///< shape of one input sample
  ///@{
  /// Output channels, kernel size k (k x k), stride and zero padding.
  std::size_t out_c = 0, k = 3, stride = 1, pad = 0;
  ///@}
  shape3 out{};  ///< shape of one output sample

  /// A convolution of samples of shape `input` into `out_channels` channels with a kernel x kernel
  /// window, stride `stride_` and zero padding `pad_`. Throws config_error for a zero size, a padding
  /// not below the kernel, or a kernel larger than the padded input.
  conv2d(shape3 input, std::size_t out_channels, std::size_t kernel, std::size_t stride_ = 1, std::size_t pad_ = 0)
      : in(input), out_c(out_channels), k(kernel), stride(stride_), pad(pad_) {
    const std::string where = "conv2d(" + in.str() + " -> " + std::to_string(out_c) + ", k " + std::to_string(k) +
                              ", stride " + std::to_string(stride) + ", pad " + std::to_string(pad) + "): ";
    detail::require(in.size() > 0 && out_c > 0 && k > 0 && stride > 0, where + "sizes must be positive");
    detail::require(pad < k, where + "padding must be below the kernel size");
    detail::require(in.h + 2 * pad >= k && in.w + 2 * pad >= k, where + "kernel larger than the padded input");
    out = {out_c, detail::window_out(in.h, k, stride, pad), detail::window_out(in.w, k, stride, pad)};
  }
  /// The shape of one input sample.
  shape3 in_shape() const { return in; }
  /// The shape of one output sample: out_c x oh x ow, oh = (h + 2 pad - k) / stride + 1 (likewise ow).
  shape3 out_shape() const { return out; }
  /// Inputs of one output value: in_c k k.
  std::size_t fan_in() const { return in.c * k * k; }
  /// out_c fan_in() weights, then out_c biases.
  std::size_t num_params() const { return out_c * fan_in() + out_c; }
  /// One line for the model summary: the layer, its shapes and its parameter count.
  std::string describe() const {
    return "conv2d " + in.str() + " -> " + out.str() + " (k " + std::to_string(k) + ", stride " +
           std::to_string(stride) + ", pad " + std::to_string(pad) + "), " + std::to_string(num_params()) + " params";
  }
  /// Floating-point operations of the forward pass, per sample (the device profile's estimate).
  double flops_forward() const { return (2.0 * double(fan_in()) + 1.0) * double(out.size()); }
  /// Floating-point operations of the backward pass, per sample; need_dx: the input gradient is
  /// computed too (every layer but the first).
  double flops_backward(bool need_dx) const {
    return (need_dx ? 4.0 : 2.0) * double(fan_in()) * double(out.size()) + double(out.size());
  }

  /// He normal weights (sd = sqrt(2 / fan_in())) and zero biases into p, drawn from rng.
  template <std::floating_point T>
  void init(T* p, normal_rng& rng) const {
    detail::fill_normal(p, out_c * fan_in(), std::sqrt(2.0 / double(fan_in())), rng);
    detail::fill_value(p + out_c * fan_in(), out_c, T(0));
  }

  /// cols[(c k + i) k + j][oh ow + ow] = x[c][oh s - pad + i][ow s - pad + j] (0 outside).
  template <std::floating_point T>
  void im2col(const T* x, T* cols) const {
    im2col(x, cols, out.h * out.w);
  }
  /// The same with rows `ld` >= oh ow apart (the columns past oh ow are left as they are).
  template <std::floating_point T>
  void im2col(const T* x, T* cols, std::size_t ld) const {
    const std::size_t P = ld;
    for (std::size_t c = 0; c < in.c; ++c)
      for (std::size_t i = 0; i < k; ++i)
        for (std::size_t j = 0; j < k; ++j) {
          T* row = cols + ((c * k + i) * k + j) * P;
          const auto [lo, hi] = valid_range(j, in.w, out.w);
          for (std::size_t oh = 0; oh < out.h; ++oh) {
            T* r = row + oh * out.w;
            const std::size_t ihp = oh * stride + i;  // input row + pad
            if (ihp < pad || ihp - pad >= in.h) {
              std::fill(r, r + out.w, T(0));
              continue;
            }
            const T* xr = x + (c * in.h + (ihp - pad)) * in.w;
            std::fill(r, r + lo, T(0));
            if (stride == 1) {
              const T* src = xr + (lo + j - pad);
              for (std::size_t ow = lo; ow < hi; ++ow) r[ow] = src[ow - lo];
            } else {
              for (std::size_t ow = lo; ow < hi; ++ow) r[ow] = xr[ow * stride + j - pad];
            }
            std::fill(r + hi, r + out.w, T(0));
          }
        }
  }

  /// The adjoint of im2col: dx[...] += cols[...] (dx is not cleared).
  template <std::floating_point T>
  void col2im(const T* cols, T* dx) const {
    col2im(cols, dx, out.h * out.w);
  }
  /// The same with rows `ld` >= oh ow apart.
  template <std::floating_point T>
  void col2im(const T* cols, T* dx, std::size_t ld) const {
    const std::size_t P = ld;
    for (std::size_t c = 0; c < in.c; ++c)
      for (std::size_t i = 0; i < k; ++i)
        for (std::size_t j = 0; j < k; ++j) {
          const T* row = cols + ((c * k + i) * k + j) * P;
          const auto [lo, hi] = valid_range(j, in.w, out.w);
          for (std::size_t oh = 0; oh < out.h; ++oh) {
            const std::size_t ihp = oh * stride + i;
            if (ihp < pad || ihp - pad >= in.h) continue;
            const T* r = row + oh * out.w;
            T* xr = dx + (c * in.h + (ihp - pad)) * in.w;
            if (stride == 1) {
              T* dst = xr + (lo + j - pad);
              for (std::size_t ow = lo; ow < hi; ++ow) dst[ow - lo] += r[ow];
            } else {
              for (std::size_t ow = lo; ow < hi; ++ow) xr[ow * stride + j - pad] += r[ow];
            }
          }
        }
  }

  /// Per sample: Y = W cols + b with cols = im2col(x) (R x P, rows padded to whole vectors). At
  /// stride 1, when the columns would outnumber the outputs (R > out_c), the columns are not
  /// built: row (c, i, j) of cols is a shifted window of the zero-padded input, and the product
  /// runs over rows of the padded width (its extra columns are dropped). Both give the same bits:
  /// the same products, zeros included, in the same order.
  template <std::floating_point T>
  void forward(const T* p, const T* x, T* y, std::size_t batch, layer_scratch<T>& s) const {
    using namespace detail;
    const std::size_t R = fan_in(), P = out.h * out.w;
    gemm_args<T> g;
    g.a = p, g.a_row = R, g.a_col = 1;
    g.b_padded = true;
    g.m = out_c, g.k = R;
    g.init = gemm_init::row_bias, g.bias = p + out_c * R;
    if (stride == 1 && R > out_c) {
      const std::size_t Hp = in.h + 2 * pad, Wp = in.w + 2 * pad, plane = Hp * Wp, N = out.h * Wp;
      T* xp = grow(s.cols, in.c * plane + Wp + 64);  // slack: the last windows read past the plane
      T* wide = grow(s.dcols, out_c * N);
      std::vector<const T*>& rows = s.rows;
      rows.resize(R);
      for (std::size_t c = 0; c < in.c; ++c)
        for (std::size_t i = 0; i < k; ++i)
          for (std::size_t j = 0; j < k; ++j) rows[(c * k + i) * k + j] = xp + c * plane + i * Wp + j;
      std::fill(xp, xp + in.c * plane + Wp + 64, T(0));
      g.b_rows = rows.data();
      g.c = wide, g.ldc = N, g.n = N;
      for (std::size_t n = 0; n < batch; ++n) {
        pad_input(x + n * in.size(), xp);
        gemm(g);
        T* yn = y + n * out.size();
        for (std::size_t o = 0; o < out_c; ++o) copy_rows(wide + o * N, Wp, yn + o * P, out.w, out.h, out.w);
      }
      return;
    }
    const std::size_t Pp = gemm_pad<T>(P);
    T* cols = padded_cols(s.cols, R, P);
    T* xp = stride == 1 ? zero_padded(s.padded) : nullptr;
    g.b = cols, g.ldb = Pp;
    g.ldc = P, g.n = P;
    for (std::size_t n = 0; n < batch; ++n) {
      columns(x + n * in.size(), cols, Pp, xp);
      g.c = y + n * out.size();
      gemm(g);
    }
  }

  /// Per sample: dW^T (R x out_c) += cols dY^T (dY^T packed, rows padded), db += row sums of dY,
  /// dcols = W^T dY, dx = col2im(dcols). dW^T goes into dp transposed at the end.
  template <std::floating_point T>
  void backward(const T* p, const T* x, const T*, const T* dy, T* dx, T* dp, std::size_t batch,
                layer_scratch<T>& s) const {
    using namespace detail;
    const std::size_t R = fan_in(), P = out.h * out.w, Pp = gemm_pad<T>(P), Op = gemm_pad<T>(out_c);
    T* cols = padded_cols(s.cols, R, P);
    // At stride 1, dx is the full convolution of dY with the flipped kernel: the forward's
    // shifted-window product (no dcols, no col2im). Otherwise dcols = W^T dY, dx = col2im(dcols).
    const T* full = dx && stride == 1 ? flip_kernel(p, s.flipped) : nullptr;
    T* dcols = dx && !full ? grow(s.dcols, R * Pp) : nullptr;
    T* dyt = grow(s.packed, P * Op);
    T* dwt = grow(s.packed2, R * Op);
    T* db = dp + out_c * R;
    std::fill(db, db + out_c, T(0));
    for (std::size_t q = 0; q < P; ++q) std::fill(dyt + q * Op + out_c, dyt + (q + 1) * Op, T(0));
    T* xp = stride == 1 ? zero_padded(s.padded) : nullptr;
    if (full) prepare_full_conv_dx(s);
    gemm_args<T> gw;  // dW^T (+)= cols dY^T
    gw.a = cols, gw.a_row = Pp, gw.a_col = 1;
    gw.b = dyt, gw.ldb = Op, gw.b_padded = true;
    gw.c = dwt, gw.ldc = Op;
    gw.m = R, gw.n = out_c, gw.k = P;
    gemm_args<T> gx;  // dcols = W^T dY
    gx.a = p, gx.a_row = 1, gx.a_col = R;
    gx.ldb = P;
    gx.c = dcols, gx.ldc = Pp;
    gx.m = R, gx.n = P, gx.k = out_c;
    for (std::size_t n = 0; n < batch; ++n) {
      const T* dyn = dy + n * out.size();
      columns(x + n * in.size(), cols, Pp, xp);
      transpose(dyn, P, out_c, P, dyt, Op);
      // db[o] += dY[o][q] in q order, as one chain per o, but the out_c chains side by side
      // (a row of dY^T at a time): the same sums, without waiting on one add after another
      for (std::size_t q = 0; q < P; ++q) {
        const T* row = dyt + q * Op;
        for (std::size_t o = 0; o < out_c; ++o) db[o] += row[o];
      }
      gw.init = n ? gemm_init::accumulate : gemm_init::zero;
      gemm(gw);
      if (dx && full) {
        full_conv_dx(full, dyn, dx + n * in.size(), s);
      } else if (dx) {
        gx.b = dyn;
        gemm(gx);
        T* dxn = dx + n * in.size();
        std::fill(dxn, dxn + in.size(), T(0));
        col2im(dcols, dxn, Pp);
      }
    }
    transpose(dwt, Op, R, out_c, dp, R);
  }

 private:
  /// Wf[c][(o k + i) k + j] = W[o][c][k - 1 - i][k - 1 - j]: the kernel of dx = conv(dY, Wf).
  template <class T>
  const T* flip_kernel(const T* p, std::vector<T>& buf) const {
    const std::size_t kk = k * k, K = out_c * kk;
    T* wf = detail::grow(buf, in.c * K);
    for (std::size_t o = 0; o < out_c; ++o)
      for (std::size_t c = 0; c < in.c; ++c)
        for (std::size_t t = 0; t < kk; ++t) wf[c * K + o * kk + (kk - 1 - t)] = p[(o * in.c + c) * kk + t];
    return wf;
  }

  /// full_conv_dx's buffers for a batch: dYp zeroed (each sample writes only its interior), and
  /// the row pointers of its windows.
  template <class T>
  void prepare_full_conv_dx(layer_scratch<T>& s) const {
    using namespace detail;
    const std::size_t q = k - 1 - pad, Hq = out.h + 2 * q, Wq = out.w + 2 * q, plane = Hq * Wq;
    T* dyp = grow(s.dcols, out_c * plane + Wq + 64);  // slack: the last windows read past the plane
    std::fill(dyp, dyp + out_c * plane + Wq + 64, T(0));
    std::vector<const T*>& rows = s.rows;
    rows.resize(out_c * k * k);
    for (std::size_t o = 0; o < out_c; ++o)
      for (std::size_t i = 0; i < k; ++i)
        for (std::size_t j = 0; j < k; ++j) rows[(o * k + i) * k + j] = dyp + o * plane + i * Wq + j;
  }

  /// Stride 1: dx[c][h][w] = sum over o, i, j of Wf[c][o, i, j] dYp[o][h + i][w + j], dYp being
  /// dY zero-padded by k - 1 - pad: one product over rows of the padded width, as forward().
  /// The buffers are prepare_full_conv_dx's.
  template <class T>
  void full_conv_dx(const T* wf, const T* dyn, T* dxn, layer_scratch<T>& s) const {
    using namespace detail;
    const std::size_t q = k - 1 - pad, Hq = out.h + 2 * q, Wq = out.w + 2 * q, plane = Hq * Wq;
    const std::size_t K = out_c * k * k, N = in.h * Wq;
    T* dyp = s.dcols.data();
    T* wide = grow(s.wide, in.c * N);
    for (std::size_t o = 0; o < out_c; ++o)
      copy_rows(dyn + o * out.h * out.w, out.w, dyp + o * plane + q * Wq + q, Wq, out.h, out.w);
    const std::vector<const T*>& rows = s.rows;
    gemm_args<T> g;
    g.a = wf, g.a_row = K, g.a_col = 1;
    g.b_rows = rows.data(), g.b_padded = true;
    g.c = wide, g.ldc = N;
    g.m = in.c, g.n = N, g.k = K;
    gemm(g);
    for (std::size_t c = 0; c < in.c; ++c) copy_rows(wide + c * N, Wq, dxn + c * in.h * in.w, in.w, in.h, in.w);
  }

  /// Stride 1: the zero-padded input planes ((h + 2 pad) x (w + 2 pad) each, then the slack the
  /// last windows read past them), zeroed: pad_input() writes only their interior.
  template <class T>
  T* zero_padded(std::vector<T>& buf) const {
    const std::size_t Wp = in.w + 2 * pad, n = in.c * (in.h + 2 * pad) * Wp + Wp + 64;
    T* xp = detail::grow(buf, n);
    std::fill(xp, xp + n, T(0));
    return xp;
  }

  /// Stride 1: one sample's input into the interior of zero_padded()'s planes.
  template <class T>
  void pad_input(const T* xn, T* xp) const {
    const std::size_t Wp = in.w + 2 * pad, plane = (in.h + 2 * pad) * Wp;
    for (std::size_t c = 0; c < in.c; ++c)
      detail::copy_rows(xn + c * in.h * in.w, in.w, xp + c * plane + pad * Wp + pad, Wp, in.h, in.w);
  }

  /// im2col(xn, cols, ld); at stride 1 (xp: zero_padded()'s planes) row (c, i, j) of the columns
  /// is copied from the window at (i, j) of the padded plane c: the same values, without the
  /// bounds of each row.
  template <class T>
  void columns(const T* xn, T* cols, std::size_t ld, T* xp) const {
    if (!xp) return im2col(xn, cols, ld);
    pad_input(xn, xp);
    const std::size_t Wp = in.w + 2 * pad, plane = (in.h + 2 * pad) * Wp;
    for (std::size_t c = 0; c < in.c; ++c)
      for (std::size_t i = 0; i < k; ++i)
        for (std::size_t j = 0; j < k; ++j)
          detail::copy_rows(xp + c * plane + i * Wp + j, Wp, cols + ((c * k + i) * k + j) * ld, out.w, out.h, out.w);
  }

  /// The im2col buffer: R rows of P values, rows padded to whole vectors (the padding is read
  /// by the products but only lands in columns they do not store).
  template <class T>
  static T* padded_cols(std::vector<T>& buf, std::size_t R, std::size_t P) {
    return detail::grow(buf, R * detail::gemm_pad<T>(P));
  }

  /// Output columns [lo, hi) whose input column ow s - pad + j lies inside [0, width).
  std::pair<std::size_t, std::size_t> valid_range(std::size_t j, std::size_t width, std::size_t out_w) const {
    const std::size_t lo = j >= pad ? 0 : std::min(out_w, (pad - j + stride - 1) / stride);
    // ow s + j - pad <= width - 1  <=>  ow <= (width - 1 + pad - j) / s   (width + pad > j since pad < k <= width + 2 pad)
    const std::size_t top = width - 1 + pad;
    const std::size_t hi = top < j ? 0 : std::min(out_w, (top - j) / stride + 1);
    return {lo, std::max(lo, hi)};
  }
};

}  // namespace nn
}  // namespace v0
}  // namespace sparsepush
