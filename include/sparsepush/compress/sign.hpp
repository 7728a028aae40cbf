// sparsepush/compress/sign.hpp: scaled sign, C(v) = (||v||_1 / d) * sign(v) (as EF-SignSGD,
// Karimireddy et al. 2019), one bit per coordinate plus a 4-byte scale. sign(0) is taken as +.
#pragma once

#include "common.hpp"

namespace sparsepush {
inline namespace v0 {

/// Dense scaled sign.
struct scaled_sign {
  /// Throw what compress would throw at dimension d.
  void validate(std::size_t d, const context& ctx) const { detail::check_dim(d, ctx); }

  /// One pass over v computes ||v||_1 (finite exactly when every v is, for float) and packs the
  /// sign bits into ws.bytes, which becomes the payload (swapped, so no copy and, once both
  /// buffers have grown, no allocation) only once v is known finite.
  template <tensor_element T>
  void compress(std::span<const T> v, message& out, const context& ctx, compress_workspace<T>& ws) const {
    validate(v.size(), ctx);
    const std::size_t n = v.size();
    ws.bytes.assign(payload_bytes(value_encoding::sign, 0, n), std::byte{0});
    const double l1 = detail::abs_sum_and_sign_bits<T>(v.data(), n, ws.bytes.data());
    if (!std::isfinite(l1)) detail::check_finite(v, ctx);  // names the first NaN/Inf
    out.dim = static_cast<std::uint32_t>(n);
    out.count = out.dim;
    out.index_enc = index_encoding::dense;
    out.indices.clear();
    out.value_enc = value_encoding::sign;
    out.levels = 0;
    out.scale = detail::to_float_saturating(l1 / static_cast<double>(n));
    out.payload.swap(ws.bytes);
  }
};

}  // namespace v0
}  // namespace sparsepush
