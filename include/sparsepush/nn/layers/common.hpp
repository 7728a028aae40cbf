// sparsepush/nn/layers/common.hpp: what every layer of the reference CPU training backend shares:
// the sample shape (NCHW activations, sample-major), the portable Gaussian sampler of the inits,
// the layers' reusable scratch, and the small helpers of sizes, checks, 2x2 max-pool routing and
// the group statistics of the norm layers. A layer's parameters are one slice of the flat buffer.
#pragma once

#include <Eigen/Core>
#include <algorithm>
#include <cmath>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <numbers>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "../../config.hpp"

namespace sparsepush {
inline namespace v0 {
/// The reference CPU training backend: layers, sequential models over a flat parameter buffer,
/// momentum SGD with its learning-rate schedule, and simulated low-precision training.
namespace nn {

/// Shape of one sample: channels x rows x columns (a vector of n features is n x 1 x 1).
struct shape3 {
  ///@{
  /// Channels c, rows h and columns w.
  std::size_t c = 1, h = 1, w = 1;
  ///@}
  /// Elements of one sample: c h w.
  constexpr std::size_t size() const noexcept { return c * h * w; }
  /// "CxHxW", e.g. "1x28x28", for messages and model summaries.
  std::string str() const { return std::to_string(c) + "x" + std::to_string(h) + "x" + std::to_string(w); }
  /// Equal when c, h and w are.
  friend constexpr bool operator==(const shape3&, const shape3&) = default;
};

/// Portable Gaussian sampler: std::mt19937_64 and Box-Muller (std::normal_distribution's
/// algorithm differs between standard libraries, this one does not).
class normal_rng {
 public:
  /// A sampler seeded with `seed`: the same seed gives the same numbers on every platform.
  explicit normal_rng(std::uint64_t seed) : gen_(seed) {}
  /// Uniform in (0, 1), 53 random bits.
  double uniform() { return (static_cast<double>(gen_() >> 11) + 0.5) * 0x1.0p-53; }
  /// A standard normal number (mean 0, sd 1); Box-Muller, which makes two at a time and returns the
  /// second on the next call.
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
  ///@{
  /// im2col columns and their gradient (conv2d); other layers' per-group temporaries.
  std::vector<T> cols, dcols;
  ///@}
  std::vector<double> acc;  ///< per-channel sums in double (the norm layers' parameter gradients)
  ///@{
  /// Transposed or padded operands of the matrix products.
  std::vector<T> packed, packed2;
  ///@}
  std::vector<const T*> rows;       ///< row pointers of an operand made of shifted windows
  ///@{
  /// conv2d: a product over padded rows; the flipped kernel.
  std::vector<T> wide, flipped;
  ///@}
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

}  // namespace nn
}  // namespace v0
}  // namespace sparsepush
