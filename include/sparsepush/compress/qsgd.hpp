// sparsepush/compress/qsgd.hpp: QSGD with s levels over the whole vector (Alistarh et al. 2017):
// q_l = ||v||_2 * sign(v_l) * xi_l / s, xi_l the stochastic rounding of |v_l| s / ||v||_2 to an
// integer level, so E[q] = v up to the draw's resolution. Randomness is keyed by (seed, node,
// round, coordinate); `stream` picks the generator and draw width (qsgd_stream, value_codecs.hpp):
// philox7 (default) draws 16 bits a coordinate for levels <= 256, so |E[q] - v| < 2^-16 of a
// level step nrm / s there (2^-24 otherwise); philox10 gives the bits of 0.3.3 (24-bit draws).
#pragma once

#include "common.hpp"

namespace sparsepush {
inline namespace v0 {

/// Dense QSGD quantization with `levels` levels (wire: 1 + bit_width(levels) bits a value).
struct qsgd {
  std::uint16_t levels = 16;  ///< the number of quantization levels s, 1 .. 32767
  qsgd_stream stream = qsgd_stream::philox7;  ///< the rounding's random stream (philox10: 0.3.3's bits)

  /// Throw what compress would throw for this configuration at dimension d.
  void validate(std::size_t d, const context& ctx) const {
    codec().validate();
    detail::check_dim(d, ctx);
  }

  /// Quantizes every element of v to ||v|| sign(v_i) l / s with stochastic rounding of l, into out.
  /// Throws config_error for bad levels, size_error for an empty v or d >= 2^32, non_finite_error for
  /// NaN or infinity in v.
  template <tensor_element T>
  void compress(std::span<const T> v, message& out, const context& ctx) const {
    validate(v.size(), ctx);
    const double sq = detail::checked_sum<T, true>(v, ctx);  // the NaN/Inf check and ||v||^2 in one pass
    detail::compress_dense_sum<T, true>(v, sq, levels, out, ctx, stream);
  }

 private:
  value_codec codec() const noexcept { return {value_encoding::qsgd, levels, stream}; }
};

}  // namespace v0
}  // namespace sparsepush
