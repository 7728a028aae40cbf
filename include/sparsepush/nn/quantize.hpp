// sparsepush/nn/quantize.hpp: simulated B-bit training (Aketi, Kodge, Roy, arXiv 2111.09389, after
// Banner et al. 2018): range-based linear quantization of one tensor x with lo = min(x), hi = max(x),
// step D = (hi - lo) / (2^B - 1):  Q(x) = lo + D * r((x - lo) / D), r = round-to-nearest for weights
// and activations, r = stochastic rounding (floor(z + u), u ~ U[0,1) from counter_rng) for gradients.
//
// Simulated arithmetic: every value is quantized and dequantized back to float; the matrix products
// stay float. The model quantizes each layer's parameter block (nearest), each layer's output except
// the logits (nearest), and each back-propagated error d(loss)/d(output) before the layer's backward
// (stochastic, seeded by (seed, node, round), so a step is bit-reproducible whatever the thread
// count). Weight gradients are not rounded again: Banner et al.'s "gradient bifurcation" keeps the
// weight-gradient path at higher precision. The optimizer keeps full-precision (fp32) master weights,
// as the paper's authors' public code does (its layers quantize a copy of each weight tensor in the
// forward pass and leave the stored weights in full precision): an SGD step gamma * g is far below
// one 8-bit grid step of a weight tensor, so rounding the stored weights would lose the update (and
// the gossip steps of eta ~ 0.01); only the copies the forward and backward passes read are B-bit.
// Inference (logits, predict) uses the master weights unquantized.
#pragma once

#include <cmath>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <utility>

#include "../config.hpp"
#include "../detail/philox.hpp"

namespace sparsepush {
inline namespace v0 {
namespace nn {

/// The settings of one quantized local step; bits == 0 turns quantization off.
struct quantization {
  unsigned bits = 0;        ///< 0 (off) or 4..16
  std::uint64_t seed = 0;   ///< stochastic rounding of gradients: key (seed, node, round)
  std::uint32_t node = 0;  ///< the node taking the step (keys the stochastic rounding)
  std::uint32_t round = 0;  ///< the round of the step (keys the stochastic rounding)

  /// True when the step is quantized (bits != 0).
  bool on() const noexcept { return bits != 0; }
  /// Throws config_error naming the value unless bits is 0 or in [4, 16].
  void validate(const char* where) const {
    if (bits != 0 && (bits < 4 || bits > 16))
      throw config_error(std::string(where) + ": quantization bits " + std::to_string(bits) +
                         " is not 0 (off) or in [4, 16]");
  }
};

/// The fewest bits quantized training takes (quantization::bits, when not 0).
inline constexpr unsigned min_quantization_bits = 4;
/// The most bits quantized training takes.
inline constexpr unsigned max_quantization_bits = 16;

/// Min and max of x; throws non_finite_error at the first NaN or infinity.
template <std::floating_point T>
std::pair<T, T> quantization_range(std::span<const T> x, const char* where) {
  T lo = x.empty() ? T(0) : x[0], hi = lo;
  bool bad = false;  // v - v is 0 for every finite v, NaN for NaN and infinities
  for (const T v : x) {
    lo = v < lo ? v : lo;
    hi = v > hi ? v : hi;
    bad |= !(v - v == T(0));
  }
  if (bad)
    for (std::size_t i = 0; i < x.size(); ++i)
      if (!std::isfinite(x[i]))
        throw non_finite_error(std::string(where) + ": cannot quantize a non-finite value at index " +
                                   std::to_string(i),
                               i);
  return {lo, hi};
}

/// In place: x <- lo + D * floor((x - lo) / D + 1/2) with the tensor's own range (nearest rounding).
/// A constant (zero-range) tensor is left unchanged. Error per element <= D / 2.
template <std::floating_point T>
void quantize_nearest(std::span<T> x, unsigned bits, const char* where = "nn::quantize_nearest") {
  quantization{bits}.validate(where);
  const auto [lo, hi] = quantization_range<T>(x, where);
  if (!(hi > lo)) return;
  const double levels = double((std::uint32_t{1} << bits) - 1);
  const double step = (double(hi) - double(lo)) / levels, inv = levels / (double(hi) - double(lo));
  for (T& v : x) {
    const double k = std::floor((double(v) - double(lo)) * inv + 0.5);  // ties round up
    v = T(double(lo) + step * (k < levels ? k : levels));
  }
}

/// Blocks of 4 random words one stochastic rounding takes from its own stream before it moves on
/// to the next substream: a lane. Tensors of one step that share a stream take lanes
/// first_block = lane << 22 (lanes 0 .. 1023), and never share a word whatever their sizes.
inline constexpr std::uint32_t quantization_lane_blocks = std::uint32_t{1} << 22;

/// In place: x <- lo + D * floor((x - lo) / D + u_i), u_i uniform in [0, 1) (unbiased: E[Q(x)] = x
/// up to the 2^-24 resolution of u). Error per element < D. Element i uses word i mod 4 of block
/// b = i / 4: block first_block + b of rng while b < quantization_lane_blocks (2^24 elements), and
/// beyond, block first_block + b mod 2^22 of rng.substream(b / 2^22).
template <std::floating_point T>
void quantize_stochastic(std::span<T> x, unsigned bits, const ::sparsepush::detail::counter_rng& rng,
                         const char* where = "nn::quantize_stochastic", std::uint32_t first_block = 0) {
  quantization{bits}.validate(where);
  const auto [lo, hi] = quantization_range<T>(x, where);
  if (!(hi > lo)) return;
  const double levels = double((std::uint32_t{1} << bits) - 1);
  const double step = (double(hi) - double(lo)) / levels, inv = levels / (double(hi) - double(lo));
  auto lane_rng = rng;
  for (std::size_t b = 0; 4 * b < x.size(); ++b) {
    const auto in_lane = static_cast<std::uint32_t>(b % quantization_lane_blocks);
    if (b >= quantization_lane_blocks && in_lane == 0)
      lane_rng = rng.substream(static_cast<std::uint32_t>(b / quantization_lane_blocks));
    const auto w = lane_rng.block(first_block + in_lane);
    for (std::size_t j = 0; j < 4 && 4 * b + j < x.size(); ++j) {
      T& v = x[4 * b + j];
      const double z = (double(v) - double(lo)) * inv;
      double k = std::floor(z + ::sparsepush::detail::unit_interval(w[j]));
      k = k < 0 ? 0 : (k > levels ? levels : k);
      v = T(double(lo) + step * k);
    }
  }
}

}  // namespace nn
}  // namespace v0
}  // namespace sparsepush
