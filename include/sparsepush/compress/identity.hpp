// sparsepush/compress/identity.hpp: C(v) = v, every coordinate sent (dense), by default in the
// tensor's own precision so that SGP / D-PSGD reductions hold bit for bit. A value encoding
// other than native gives plain low-precision gossip (e.g. identity + fp16).
#pragma once

#include "common.hpp"

namespace sparsepush {
inline namespace v0 {

/// Send every coordinate.
struct identity {
  value_codec values{};  ///< how the values travel (native: exact, the tensor's own type)

  /// Throw what compress would throw for this configuration at dimension d.
  void validate(std::size_t d, const context& ctx) const {
    values.validate();
    detail::check_dim(d, ctx);
  }

  /// Writes every element of v into out in the configured value encoding. Throws size_error for an
  /// empty v or d >= 2^32, non_finite_error for NaN or infinity, config_error for a bad encoding.
  template <tensor_element T>
  void compress(std::span<const T> v, message& out, const context& ctx) const {
    validate(v.size(), ctx);
    detail::check_finite(v, ctx);
    detail::compress_dense(v, values, out, ctx);
  }
};

}  // namespace v0
}  // namespace sparsepush
