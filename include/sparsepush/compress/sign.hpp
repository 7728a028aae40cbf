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

  template <tensor_element T>
  void compress(std::span<const T> v, message& out, const context& ctx) const {
    validate(v.size(), ctx);
    detail::check_finite(v, ctx);
    detail::compress_dense(v, value_codec{value_encoding::sign, 0}, out, ctx);
  }

  /// Needs no scratch; the overload exists so that every built-in takes a workspace.
  template <tensor_element T>
  void compress(std::span<const T> v, message& out, const context& ctx, compress_workspace<T>&) const {
    compress(v, out, ctx);
  }
};

}  // namespace v0
}  // namespace sparsepush
