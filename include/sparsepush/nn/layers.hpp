// sparsepush/nn/layers.hpp: the layers of the reference CPU training backend, each a small
// struct with forward/backward templated on the scalar (float for training, double for gradient
// checks): dense and conv2d (im2col, or shifted windows of the padded input, and the products of
// gemm.hpp), max/avg/global-average pooling, ReLU, flatten, GroupNorm (with a fused
// GroupNorm-ReLU-max-pool pass, forward and backward, for training and inference), EvoNorm-S0,
// and the numerically stable softmax cross-entropy. Activations are NCHW, sample-major; a
// layer's parameters are one contiguous slice of the model's flat buffer.
#pragma once

#include <Eigen/Core>
#include <algorithm>
#include <cmath>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <numbers>
#include <random>
#include <span>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "../config.hpp"
#include "gemm.hpp"

namespace sparsepush {
inline namespace v0 {
namespace nn {

/// Shape of one sample: channels x rows x columns (a vector of n features is n x 1 x 1).
struct shape3 {
  std::size_t c = 1, h = 1, w = 1;
  constexpr std::size_t size() const noexcept { return c * h * w; }
  std::string str() const { return std::to_string(c) + "x" + std::to_string(h) + "x" + std::to_string(w); }
  friend constexpr bool operator==(const shape3&, const shape3&) = default;
};

/// Portable Gaussian sampler: std::mt19937_64 and Box-Muller (std::normal_distribution's
/// algorithm differs between standard libraries, this one does not).
class normal_rng {
 public:
  explicit normal_rng(std::uint64_t seed) : gen_(seed) {}
  /// Uniform in (0, 1), 53 random bits.
  double uniform() { return (static_cast<double>(gen_() >> 11) + 0.5) * 0x1.0p-53; }
  double normal() {
    if (has_spare_) {
      has_spare_ = false;
      return spare_;
    }
    const double r = std::sqrt(-2.0 * std::log(uniform()));
    const double a = 2.0 * std::numbers::pi * uniform();
    spare_ = r * std::sin(a);
    has_spare_ = true;
    return r * std::cos(a);
  }

 private:
  std::mt19937_64 gen_;
  double spare_ = 0.0;
  bool has_spare_ = false;
};

/// Reusable scratch of the layers (im2col columns, per-channel sums); grows, never shrinks.
template <std::floating_point T>
struct layer_scratch {
  std::vector<T> cols, dcols;
  std::vector<double> acc;
  std::vector<T> packed, packed2;  ///< transposed or padded operands of the matrix products
  std::vector<const T*> rows;       ///< row pointers of an operand made of shifted windows
  std::vector<T> wide, flipped;     ///< conv2d: a product over padded rows; the flipped kernel
  std::vector<T> padded;            ///< conv2d: the zero-padded input the columns are copied from
};

namespace detail {

template <class T>
T* grow(std::vector<T>& v, std::size_t n) {
  if (v.size() < n) v.resize(n);
  return v.data();
}

inline Eigen::Index ix(std::size_t n) noexcept { return static_cast<Eigen::Index>(n); }

template <class T>
void fill_normal(T* p, std::size_t n, double sd, normal_rng& rng) {
  for (std::size_t i = 0; i < n; ++i) p[i] = static_cast<T>(sd * rng.normal());
}

template <class T>
void fill_value(T* p, std::size_t n, T v) {
  std::fill(p, p + n, v);
}

inline void require(bool ok, const std::string& what) {
  if (!ok) throw config_error("nn::" + what);
}

/// Output length of a window of k at stride s over n (plus pad on both sides).
inline std::size_t window_out(std::size_t n, std::size_t k, std::size_t s, std::size_t pad) {
  return (n + 2 * pad - k) / s + 1;
}

/// The gradient g of a 2x2 max-pool window (a b / c d, rows r0 and r1) routed to its first
/// maximum, with 0/1 weights computed without branches: the others get zero (as g * 0). d0 and d1
/// point at the window's two rows of the input gradient.
template <class T>
inline void route_max2x2(T a, T b, T c, T d, T g, T* d0, T* d1) noexcept {
  const T b_ab = T(b > a), d_cd = T(d > c);
  const T ab = std::max(a, b), cd = std::max(c, d);
  const T lower = T(cd > ab);
  const T gu = g * (T(1) - lower), gl = g * lower;
  d0[0] = gu * (T(1) - b_ab);
  d0[1] = gu * b_ab;
  d1[0] = gl * (T(1) - d_cd);
  d1[1] = gl * d_cd;
}

}  // namespace detail

/// Fully connected: y = W x + b, W is out x in (row-major), then b; the input is flattened.
struct dense {
  shape3 in{};
  std::size_t out = 0;

  dense(shape3 input, std::size_t out_features) : in(input), out(out_features) {
    detail::require(in.size() > 0 && out > 0, "dense: input size " + in.str() + " and " + std::to_string(out) +
                                                  " outputs must be positive");
  }
  shape3 in_shape() const { return in; }
  shape3 out_shape() const { return {out, 1, 1}; }
  std::size_t num_params() const { return out * in.size() + out; }
  std::string describe() const {
    return "dense " + in.str() + " -> " + std::to_string(out) + ", " + std::to_string(num_params()) + " params";
  }
  double flops_forward() const { return 2.0 * double(in.size()) * double(out) + double(out); }
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

/// 2-D convolution, square kernel, stride and zero padding; W is out_c x (in_c k k), then b.
/// Per sample: im2col into a (in_c k k) x (oh ow) matrix, then one GEMM W * cols.
struct conv2d {
  shape3 in{};
  std::size_t out_c = 0, k = 3, stride = 1, pad = 0;
  shape3 out{};

  conv2d(shape3 input, std::size_t out_channels, std::size_t kernel, std::size_t stride_ = 1, std::size_t pad_ = 0)
      : in(input), out_c(out_channels), k(kernel), stride(stride_), pad(pad_) {
    const std::string where = "conv2d(" + in.str() + " -> " + std::to_string(out_c) + ", k " + std::to_string(k) +
                              ", stride " + std::to_string(stride) + ", pad " + std::to_string(pad) + "): ";
    detail::require(in.size() > 0 && out_c > 0 && k > 0 && stride > 0, where + "sizes must be positive");
    detail::require(pad < k, where + "padding must be below the kernel size");
    detail::require(in.h + 2 * pad >= k && in.w + 2 * pad >= k, where + "kernel larger than the padded input");
    out = {out_c, detail::window_out(in.h, k, stride, pad), detail::window_out(in.w, k, stride, pad)};
  }
  shape3 in_shape() const { return in; }
  shape3 out_shape() const { return out; }
  std::size_t fan_in() const { return in.c * k * k; }
  std::size_t num_params() const { return out_c * fan_in() + out_c; }
  std::string describe() const {
    return "conv2d " + in.str() + " -> " + out.str() + " (k " + std::to_string(k) + ", stride " +
           std::to_string(stride) + ", pad " + std::to_string(pad) + "), " + std::to_string(num_params()) + " params";
  }
  double flops_forward() const { return (2.0 * double(fan_in()) + 1.0) * double(out.size()); }
  double flops_backward(bool need_dx) const {
    return (need_dx ? 4.0 : 2.0) * double(fan_in()) * double(out.size()) + double(out.size());
  }

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

/// Max or average pooling, square window, no padding (floor): y[c][oh][ow] over
/// x[c][oh s .. oh s + k)[ow s .. ow s + k).
template <bool Max>
struct pool2d {
  shape3 in{};
  std::size_t k = 2, stride = 2;
  shape3 out{};

  pool2d(shape3 input, std::size_t kernel = 2, std::size_t stride_ = 0)
      : in(input), k(kernel), stride(stride_ ? stride_ : kernel) {
    const std::string where = std::string(Max ? "max_pool2d(" : "avg_pool2d(") + in.str() + ", k " +
                              std::to_string(k) + ", stride " + std::to_string(stride) + "): ";
    detail::require(in.size() > 0 && k > 0, where + "sizes must be positive");
    detail::require(in.h >= k && in.w >= k, where + "window larger than the input");
    out = {in.c, detail::window_out(in.h, k, stride, 0), detail::window_out(in.w, k, stride, 0)};
  }
  shape3 in_shape() const { return in; }
  shape3 out_shape() const { return out; }
  std::size_t num_params() const { return 0; }
  std::string describe() const {
    return std::string(Max ? "max_pool2d " : "avg_pool2d ") + in.str() + " -> " + out.str() + " (k " +
           std::to_string(k) + ", stride " + std::to_string(stride) + "), 0 params";
  }
  double flops_forward() const { return double(k * k) * double(out.size()); }
  double flops_backward(bool need_dx) const { return need_dx ? double(k * k + 1) * double(out.size()) : 0.0; }
  template <std::floating_point T>
  void init(T*, normal_rng&) const {}

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
using max_pool2d = pool2d<true>;
using avg_pool2d = pool2d<false>;

/// Global average pooling: c x h x w -> c x 1 x 1.
struct global_avg_pool {
  shape3 in{};
  explicit global_avg_pool(shape3 input) : in(input) {
    detail::require(in.size() > 0, "global_avg_pool: empty input " + in.str());
  }
  shape3 in_shape() const { return in; }
  shape3 out_shape() const { return {in.c, 1, 1}; }
  std::size_t num_params() const { return 0; }
  std::string describe() const { return "global_avg_pool " + in.str() + " -> " + out_shape().str() + ", 0 params"; }
  double flops_forward() const { return double(in.size()); }
  double flops_backward(bool need_dx) const { return need_dx ? double(in.size()) : 0.0; }
  template <std::floating_point T>
  void init(T*, normal_rng&) const {}

  template <std::floating_point T>
  void forward(const T*, const T* x, T* y, std::size_t batch, layer_scratch<T>&) const {
    const std::size_t hw = in.h * in.w;
    for (std::size_t m = 0; m < batch * in.c; ++m) {
      T acc = 0;
      for (std::size_t i = 0; i < hw; ++i) acc += x[m * hw + i];
      y[m] = acc / T(hw);
    }
  }
  template <std::floating_point T>
  void backward(const T*, const T*, const T*, const T* dy, T* dx, T*, std::size_t batch, layer_scratch<T>&) const {
    if (!dx) return;
    const std::size_t hw = in.h * in.w;
    for (std::size_t m = 0; m < batch * in.c; ++m) std::fill(dx + m * hw, dx + (m + 1) * hw, dy[m] / T(hw));
  }
};

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

namespace detail {

template <class T>
using carr = Eigen::Map<const Eigen::Array<T, Eigen::Dynamic, 1>>;
template <class T>
using marr = Eigen::Map<Eigen::Array<T, Eigen::Dynamic, 1>>;

/// Mean and variance (biased) of n values, two-pass (Eigen's vectorized sums).
template <class T>
std::pair<double, double> mean_var(const T* x, std::size_t n) {
  const carr<T> X(x, ix(n));
  const double mean = double(X.sum()) / double(n);
  const double var = double((X - T(mean)).square().sum()) / double(n);
  return {mean, var};
}

inline void check_groups(const std::string& layer, shape3 in, std::size_t groups) {
  detail::require(in.size() > 0 && groups > 0 && in.c % groups == 0,
                  layer + "(" + in.str() + ", groups " + std::to_string(groups) +
                      "): the channels must split into a positive number of equal groups");
}

}  // namespace detail

namespace detail {

/// Whether a float kernel runs its AVX-512 version at this level (lowered to what the CPU runs).
template <class T>
bool runs_avx512(simd_level level) noexcept {
#ifdef SPARSEPUSH_NN_X86_DISPATCH
  return std::is_same_v<T, float> && level >= simd_level::avx512 && simd_supported() == simd_level::avx512;
#else
  (void)level;
  return false;
#endif
}

/// Whether group_norm's fused passes take their float sums in Eigen's order on AVX (below): where
/// Eigen itself adds floats in SSE packets of 4 (its build without -mavx) and the CPU has AVX2.
template <class T>
bool runs_sse_order_sums(simd_level level) noexcept {
#if defined(SPARSEPUSH_NN_X86_DISPATCH) && defined(EIGEN_VECTORIZE_SSE2) && !defined(EIGEN_VECTORIZE_AVX)
  return std::is_same_v<T, float> && Eigen::internal::packet_traits<float>::size == 4 &&
         level >= simd_level::avx2 && simd_supported() >= simd_level::avx2;
#else
  (void)level;
  return false;
#endif
}

#ifdef SPARSEPUSH_NN_X86_DISPATCH
/// Where Eigen 3.4's sum of a Map of n floats starts its SSE packets: the first 16-byte aligned
/// element (n if none is). An expression without direct access (a product, a square) starts at 0.
inline std::size_t sse_aligned_start(const float* p, std::size_t n) noexcept {
  const auto a = reinterpret_cast<std::uintptr_t>(p);
  if (a % sizeof(float)) return n;
  const std::size_t first = (4 - (a / sizeof(float)) % 4) % 4;
  return first < n ? first : n;
}

/// K float sums of n terms each, every one in the order Eigen 3.4's sum() adds on SSE
/// (redux_impl, LinearVectorizedTraversal): from its start s, packets of 4 into two accumulators
/// (lanes 0-3 and 4-7 here: 8 terms a step), the two added, then the last whole packet, then the
/// horizontal sum (l0 + l2) + (l1 + l3), then the terms before s, then those after the packets;
/// fewer than 4 terms from s: a plain chain from term 0. The K chains run side by side (Eigen runs
/// them one after another, each waiting on its adds). F gives term i of sum j: at1(j, i), and 4
/// and 8 of them from i: at4(j, i), at8(j, i), with the same roundings as Eigen's expression.
/// Compiled for AVX2 without FMA: nothing can be contracted.
template <int K, class F>
[[gnu::target("avx2"), gnu::always_inline]] inline void sse_order_sums(const F& f, const std::size_t* start,
                                                                       std::size_t n, float* out) {
  std::size_t blocks[K], end2[K], end[K];
  __m256 acc[K];
  std::size_t most = 0;
#pragma GCC unroll 8
  for (int j = 0; j < K; ++j) {
    const std::size_t s = start[j], aligned = (n - s) / 4 * 4, aligned2 = (n - s) / 8 * 8;
    blocks[j] = aligned > 4 ? aligned2 / 8 : 0;
    end2[j] = s + aligned2, end[j] = s + aligned;
    acc[j] = blocks[j] ? f.at8(j, s) : _mm256_setzero_ps();
    most = blocks[j] > most ? blocks[j] : most;
  }
  for (std::size_t t = 1; t < most; ++t)
#pragma GCC unroll 8
    for (int j = 0; j < K; ++j)
      if (t < blocks[j]) acc[j] = _mm256_add_ps(acc[j], f.at8(j, start[j] + 8 * t));
#pragma GCC unroll 8
  for (int j = 0; j < K; ++j) {
    const std::size_t s = start[j];
    float res;
    if (end[j] == s) {  // too short to vectorize
      res = f.at1(j, 0);
      for (std::size_t i = 1; i < n; ++i) res += f.at1(j, i);
      out[j] = res;
      continue;
    }
    __m128 p0;
    if (blocks[j]) {
      p0 = _mm_add_ps(_mm256_castps256_ps128(acc[j]), _mm256_extractf128_ps(acc[j], 1));
      if (end[j] > end2[j]) p0 = _mm_add_ps(p0, f.at4(j, end2[j]));
    } else {
      p0 = f.at4(j, s);
    }
    const __m128 h = _mm_add_ps(p0, _mm_movehl_ps(p0, p0));
    res = _mm_cvtss_f32(_mm_add_ss(h, _mm_shuffle_ps(h, h, 1)));
    for (std::size_t i = 0; i < s; ++i) res += f.at1(j, i);
    for (std::size_t i = end[j]; i < n; ++i) res += f.at1(j, i);
    out[j] = res;
  }
}

/// Terms of mean_var's sums for groups side by side: x, or (x - mean)^2 when Square.
template <bool Square>
struct group_terms {
  const float* x[4];
  float mean[4];
  [[gnu::target("avx2"), gnu::always_inline]] inline float at1(int j, std::size_t i) const noexcept {
    const float v = x[j][i];
    return Square ? (v - mean[j]) * (v - mean[j]) : v;
  }
  [[gnu::target("avx2"), gnu::always_inline]] inline __m128 at4(int j, std::size_t i) const noexcept {
    const __m128 v = _mm_loadu_ps(x[j] + i);
    if constexpr (!Square) {
      return v;
    } else {
      const __m128 d = _mm_sub_ps(v, _mm_set1_ps(mean[j]));
      return _mm_mul_ps(d, d);
    }
  }
  [[gnu::target("avx2"), gnu::always_inline]] inline __m256 at8(int j, std::size_t i) const noexcept {
    const __m256 v = _mm256_loadu_ps(x[j] + i);
    if constexpr (!Square) {
      return v;
    } else {
      const __m256 d = _mm256_sub_ps(v, _mm256_set1_ps(mean[j]));
      return _mm256_mul_ps(d, d);
    }
  }
};

/// mean_var of K <= 4 groups of n floats (x[j], contiguous), the bits of mean_var's two Eigen sums.
template <int K>
[[gnu::target("avx2")]] inline void mean_var_sse_order(const float* const* x, std::size_t n, double* mean,
                                                       double* var) {
  group_terms<false> f{};
  group_terms<true> g{};
  std::size_t start[K];
  float sum[K];
  for (int j = 0; j < K; ++j) f.x[j] = g.x[j] = x[j], start[j] = sse_aligned_start(x[j], n);
  sse_order_sums<K>(f, start, n, sum);
  for (int j = 0; j < K; ++j) {
    mean[j] = double(sum[j]) / double(n);
    g.mean[j] = float(mean[j]), start[j] = 0;
  }
  sse_order_sums<K>(g, start, n, sum);
  for (int j = 0; j < K; ++j) var[j] = double(sum[j]) / double(n);
}

/// backward_group's dx = dY a + (X - mean) b + c0, Eigen's expression lane by lane (the same
/// roundings, in the same order; compiled without FMA, so nothing is contracted), 8 lanes a step.
[[gnu::target("avx2")]] inline void norm_dx_avx2(const float* dy, const float* x, float mean, float a, float b,
                                                 float c0, float* dx, std::size_t n) {
  const __m256 av = _mm256_set1_ps(a), bv = _mm256_set1_ps(b), cv = _mm256_set1_ps(c0), mv = _mm256_set1_ps(mean);
  std::size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 t = _mm256_add_ps(_mm256_mul_ps(_mm256_loadu_ps(dy + i), av),
                                   _mm256_mul_ps(_mm256_sub_ps(_mm256_loadu_ps(x + i), mv), bv));
    _mm256_storeu_ps(dx + i, _mm256_add_ps(t, cv));
  }
  for (; i < n; ++i) dx[i] = (dy[i] * a + (x[i] - mean) * b) + c0;
}

/// Terms of backward_group's two sums for channels side by side: sum 2c is dY of channel c, sum
/// 2c + 1 is dY (X - mean).
struct channel_terms {
  const float* dy[2];
  const float* x[2];
  float mean;
  [[gnu::target("avx2"), gnu::always_inline]] inline float at1(int j, std::size_t i) const noexcept {
    return j % 2 ? dy[j / 2][i] * (x[j / 2][i] - mean) : dy[j / 2][i];
  }
  [[gnu::target("avx2"), gnu::always_inline]] inline __m128 at4(int j, std::size_t i) const noexcept {
    const __m128 d = _mm_loadu_ps(dy[j / 2] + i);
    return j % 2 ? _mm_mul_ps(d, _mm_sub_ps(_mm_loadu_ps(x[j / 2] + i), _mm_set1_ps(mean))) : d;
  }
  [[gnu::target("avx2"), gnu::always_inline]] inline __m256 at8(int j, std::size_t i) const noexcept {
    const __m256 d = _mm256_loadu_ps(dy[j / 2] + i);
    return j % 2 ? _mm256_mul_ps(d, _mm256_sub_ps(_mm256_loadu_ps(x[j / 2] + i), _mm256_set1_ps(mean))) : d;
  }
};

/// backward_group's sums of C <= 2 channels of hw floats: out[2c] = dY.sum(), out[2c + 1] =
/// (dY (X - mean)).sum(), the bits of its Eigen expressions.
template <int C>
[[gnu::target("avx2")]] inline void channel_sums_sse_order(const float* const* dy, const float* const* x, float mean,
                                                           std::size_t hw, float* out) {
  channel_terms f{};
  std::size_t start[2 * C];
  f.mean = mean;
  for (int c = 0; c < C; ++c) {
    f.dy[c] = dy[c], f.x[c] = x[c];
    start[2 * c] = sse_aligned_start(dy[c], hw), start[2 * c + 1] = 0;
  }
  sse_order_sums<2 * C>(f, start, hw, out);
}
#endif

#ifdef SPARSEPUSH_NN_X86_DISPATCH
/// The 2x2 windows of group_norm's fused ReLU-max-pool on AVX-512, 16 windows at a time: the
/// scalar loops' expressions lane by lane (a multiply, then an add, each rounded: the
/// multiply-add is never fused; the same comparisons and selects), so the same bits. One row
/// pair: lanes [0, cnt) of the windows from q0; the 2 cnt inputs of each row in two vectors.
struct relu_pool2_avx512 {
  __m512 x00, x01, x10, x11;  ///< the ReLU outputs: row 0 (two vectors), row 1
  __mmask16 lo, hi;           ///< the real lanes of the first and the second vector of a row

  [[gnu::target("avx512f")]] static __m512 relu_affine(__m512 x, __m512 a, __m512 b) noexcept {
    // v > 0 ? v : 0 (NaN and -0 to +0), as relu_of; mul and add with embedded rounding: the
    // compiler cannot contract them into an FMA
    const __m512 v = _mm512_add_round_ps(_mm512_mul_round_ps(x, a, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC), b,
                                         _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    return _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(v, _mm512_setzero_ps(), _CMP_GT_OQ), v);
  }
  [[gnu::target("avx512f")]] void load(const float* r0, const float* r1, std::size_t cnt, __m512 a, __m512 b) noexcept {
    const std::size_t n2 = 2 * cnt;
    lo = n2 >= 16 ? __mmask16(0xffff) : __mmask16((1u << n2) - 1);
    hi = n2 >= 32 ? __mmask16(0xffff) : n2 > 16 ? __mmask16((1u << (n2 - 16)) - 1) : __mmask16(0);
    x00 = relu_affine(_mm512_maskz_loadu_ps(lo, r0), a, b);
    x01 = relu_affine(_mm512_maskz_loadu_ps(hi, r0 + 16), a, b);
    x10 = relu_affine(_mm512_maskz_loadu_ps(lo, r1), a, b);
    x11 = relu_affine(_mm512_maskz_loadu_ps(hi, r1 + 16), a, b);
  }
  [[gnu::target("avx512f")]] static __m512 even(__m512 u, __m512 v) noexcept {
    return _mm512_permutex2var_ps(u, _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30), v);
  }
  [[gnu::target("avx512f")]] static __m512 odd(__m512 u, __m512 v) noexcept {
    return _mm512_permutex2var_ps(u, _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31), v);
  }
  /// relu::backward's select, v > 0 ? g : 0, stored at the real lanes m.
  [[gnu::target("avx512f")]] static void put(float* d, __mmask16 m, __m512 v, __m512 g) noexcept {
    _mm512_mask_storeu_ps(d, m, _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(v, _mm512_setzero_ps(), _CMP_GT_OQ), g));
  }
  [[gnu::target("avx512f")]] static __m512 interleave_lo(__m512 e, __m512 o) noexcept {
    return _mm512_permutex2var_ps(e, _mm512_setr_epi32(0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23), o);
  }
  [[gnu::target("avx512f")]] static __m512 interleave_hi(__m512 e, __m512 o) noexcept {
    return _mm512_permutex2var_ps(e, _mm512_setr_epi32(8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31), o);
  }
};

/// forward_relu_max_pool2's windows of one channel (xc: h x w, yc: h/2 x w/2).
[[gnu::target("avx512f")]] inline void relu_max_pool2_forward_avx512(const float* xc, std::size_t w, std::size_t oh,
                                                                      std::size_t ow, float a, float b, float* yc) {
  const __m512 av = _mm512_set1_ps(a), bv = _mm512_set1_ps(b);
  relu_pool2_avx512 t;
  for (std::size_t r = 0; r < oh; ++r)
    for (std::size_t q0 = 0; q0 < ow; q0 += 16) {
      const std::size_t cnt = ow - q0 < 16 ? ow - q0 : 16;
      t.load(xc + 2 * r * w + 2 * q0, xc + (2 * r + 1) * w + 2 * q0, cnt, av, bv);
      const __m512 v0 = relu_pool2_avx512::even(t.x00, t.x01), v1 = relu_pool2_avx512::odd(t.x00, t.x01);
      const __m512 v2 = relu_pool2_avx512::even(t.x10, t.x11), v3 = relu_pool2_avx512::odd(t.x10, t.x11);
      const __m512 ab = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(v1, v0, _CMP_GT_OQ), v0, v1);  // v1 > v0 ? v1 : v0
      const __m512 cd = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(v3, v2, _CMP_GT_OQ), v2, v3);
      const __m512 y = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(cd, ab, _CMP_GT_OQ), ab, cd);
      _mm512_mask_storeu_ps(yc + r * ow + q0, __mmask16((1u << cnt) - 1), y);
    }
}

/// backward_relu_max_pool2's output gradient of one channel (dc: h x w, written at the 2 oh rows
/// and 2 ow columns the windows cover) from the pooled gradient gc.
[[gnu::target("avx512f")]] inline void relu_max_pool2_backward_avx512(const float* xc, std::size_t w, std::size_t oh,
                                                                       std::size_t ow, float a, float b,
                                                                       const float* gc, float* dc) {
  const __m512 av = _mm512_set1_ps(a), bv = _mm512_set1_ps(b), one = _mm512_set1_ps(1.f);
  relu_pool2_avx512 t;
  for (std::size_t r = 0; r < oh; ++r)
    for (std::size_t q0 = 0; q0 < ow; q0 += 16) {
      const std::size_t cnt = ow - q0 < 16 ? ow - q0 : 16;
      t.load(xc + 2 * r * w + 2 * q0, xc + (2 * r + 1) * w + 2 * q0, cnt, av, bv);
      const __m512 e0 = relu_pool2_avx512::even(t.x00, t.x01), e1 = relu_pool2_avx512::odd(t.x00, t.x01);
      const __m512 e2 = relu_pool2_avx512::even(t.x10, t.x11), e3 = relu_pool2_avx512::odd(t.x10, t.x11);
      // route_max2x2's 0/1 weights: b_ab = T(e1 > e0), ab = std::max(e0, e1), ...
      const __mmask16 m_ab = _mm512_cmp_ps_mask(e1, e0, _CMP_GT_OQ), m_cd = _mm512_cmp_ps_mask(e3, e2, _CMP_GT_OQ);
      const __m512 b_ab = _mm512_maskz_mov_ps(m_ab, one), d_cd = _mm512_maskz_mov_ps(m_cd, one);
      const __m512 ab = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(e0, e1, _CMP_LT_OQ), e0, e1);
      const __m512 cd = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(e2, e3, _CMP_LT_OQ), e2, e3);
      const __m512 lower = _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(cd, ab, _CMP_GT_OQ), one);
      const __m512 gv = _mm512_maskz_loadu_ps(__mmask16((1u << cnt) - 1), gc + r * ow + q0);
      const __m512 gu = _mm512_mul_ps(gv, _mm512_sub_ps(one, lower)), gl = _mm512_mul_ps(gv, lower);
      const __m512 g0 = _mm512_mul_ps(gu, _mm512_sub_ps(one, b_ab)), g1 = _mm512_mul_ps(gu, b_ab);
      const __m512 g2 = _mm512_mul_ps(gl, _mm512_sub_ps(one, d_cd)), g3 = _mm512_mul_ps(gl, d_cd);
      // relu::backward's select: v > 0 ? g : 0
      float* d0 = dc + 2 * r * w + 2 * q0;
      float* d1 = d0 + w;
      relu_pool2_avx512::put(d0, t.lo, t.x00, relu_pool2_avx512::interleave_lo(g0, g1));
      relu_pool2_avx512::put(d0 + 16, t.hi, t.x01, relu_pool2_avx512::interleave_hi(g0, g1));
      relu_pool2_avx512::put(d1, t.lo, t.x10, relu_pool2_avx512::interleave_lo(g2, g3));
      relu_pool2_avx512::put(d1 + 16, t.hi, t.x11, relu_pool2_avx512::interleave_hi(g2, g3));
    }
}
#endif

}  // namespace detail

/// Group normalization (Wu and He 2018): per sample and group of c/groups channels,
/// y = gamma_c (x - mean) / sqrt(var + eps) + beta_c. Parameters: gamma[c], then beta[c].
struct group_norm {
  shape3 in{};
  std::size_t groups = 1;
  double eps = 1e-5;

  group_norm(shape3 input, std::size_t groups_, double eps_ = 1e-5) : in(input), groups(groups_), eps(eps_) {
    detail::check_groups("group_norm", in, groups);
    detail::require(eps > 0, "group_norm: eps must be positive");
  }
  shape3 in_shape() const { return in; }
  shape3 out_shape() const { return in; }
  std::size_t num_params() const { return 2 * in.c; }
  std::string describe() const {
    return "group_norm " + in.str() + " (groups " + std::to_string(groups) + "), " + std::to_string(num_params()) +
           " params";
  }
  double flops_forward() const { return 7.0 * double(in.size()); }
  double flops_backward(bool need_dx) const { return (need_dx ? 12.0 : 6.0) * double(in.size()); }
  template <std::floating_point T>
  void init(T* p, normal_rng&) const {
    detail::fill_value(p, in.c, T(1));
    detail::fill_value(p + in.c, in.c, T(0));
  }

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

/// EvoNorm-S0 (Liu et al. 2020), batch-independent: per sample and group,
/// y = x sigmoid(v_c x) / sqrt(var_group(x) + eps) gamma_c + beta_c. It replaces norm + activation.
/// Parameters: gamma[c], beta[c], v[c] (initialised 1, 0, 1).
struct evo_norm_s0 {
  shape3 in{};
  std::size_t groups = 1;
  double eps = 1e-5;

  evo_norm_s0(shape3 input, std::size_t groups_, double eps_ = 1e-5) : in(input), groups(groups_), eps(eps_) {
    detail::check_groups("evo_norm_s0", in, groups);
    detail::require(eps > 0, "evo_norm_s0: eps must be positive");
  }
  shape3 in_shape() const { return in; }
  shape3 out_shape() const { return in; }
  std::size_t num_params() const { return 3 * in.c; }
  std::string describe() const {
    return "evo_norm_s0 " + in.str() + " (groups " + std::to_string(groups) + "), " +
           std::to_string(num_params()) + " params";
  }
  double flops_forward() const { return 12.0 * double(in.size()); }
  double flops_backward(bool need_dx) const { return (need_dx ? 20.0 : 12.0) * double(in.size()); }
  template <std::floating_point T>
  void init(T* p, normal_rng&) const {
    detail::fill_value(p, in.c, T(1));
    detail::fill_value(p + in.c, in.c, T(0));
    detail::fill_value(p + 2 * in.c, in.c, T(1));
  }

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
  shape3 in{};
  std::size_t groups = 1;
  double eps = 1e-5;
  std::size_t chunks = 16;  ///< K: chunks per group, after construction a divisor of the group size

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
  shape3 in_shape() const { return in; }
  shape3 out_shape() const { return in; }
  std::size_t num_params() const { return 3 * in.c; }
  std::string describe() const {
    return "range_evo_norm " + in.str() + " (groups " + std::to_string(groups) + ", chunks " +
           std::to_string(chunks) + "), " + std::to_string(num_params()) + " params";
  }
  double flops_forward() const { return 10.0 * double(in.size()); }
  double flops_backward(bool need_dx) const { return (need_dx ? 16.0 : 12.0) * double(in.size()); }
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

/// Mean softmax cross-entropy of `batch` rows of `classes` logits (log-sum-exp shifted by the
/// row maximum). When dlogits is not null it receives d(mean loss)/d(logits) = (softmax - onehot) / batch.
/// Labels must be below `classes` (the model checks them).
template <std::floating_point T>
double softmax_cross_entropy(const T* logits, const std::uint8_t* labels, std::size_t batch, std::size_t classes,
                             T* dlogits) {
  double total = 0;
  const double inv_b = 1.0 / double(batch);
  for (std::size_t b = 0; b < batch; ++b) {
    const T* z = logits + b * classes;
    const double zmax = double(*std::max_element(z, z + classes));
    double sum = 0;
    for (std::size_t c = 0; c < classes; ++c) sum += std::exp(double(z[c]) - zmax);
    const double lse = zmax + std::log(sum);
    total += lse - double(z[labels[b]]);
    if (dlogits) {
      T* d = dlogits + b * classes;
      for (std::size_t c = 0; c < classes; ++c)
        d[c] = T((std::exp(double(z[c]) - lse) - (c == labels[b] ? 1.0 : 0.0)) * inv_b);
    }
  }
  return total * inv_b;
}

}  // namespace nn
}  // namespace v0
}  // namespace sparsepush
