// sparsepush/compress/random_k.hpp: random-K, k coordinates chosen uniformly without
// replacement (Floyd's algorithm, O(k) draws) from the stream keyed by (seed, node, round), so
// every node and round draws its own set, reproducibly. The unbiased variant scales the kept
// values by d/k (E[q] = v); the biased one sends them as they are (E[q] = (k/d) v).
#pragma once

#include <algorithm>
#include <bit>
#include <cstdint>
#include <vector>

#include "../detail/philox.hpp"
#include "../detail/random_indices.hpp"
#include "../detail/value_kernels.hpp"
#include "common.hpp"

namespace sparsepush {
inline namespace v0 {
namespace detail {

/// k distinct coordinates of [0, d), ascending, uniformly at random (random_indices.hpp).
/// `taken` is a bitmap of at least d bits once grown here; it is all zero on entry and on return.
inline void random_indices(std::size_t d, std::size_t k, const context& ctx,
                           std::vector<std::uint32_t>& out, std::vector<std::uint64_t>& taken) {
  random_indices(d, k, ctx.seed, ctx.node, ctx.round, out, taken);
}

}  // namespace detail

/// k uniformly random coordinates; `unbiased` scales them by d/k.
struct random_k {
  k_spec k = k_spec::fraction(0.01);  ///< how many coordinates to draw: a count, or a fraction of d (default 1%)
  bool unbiased = false;  ///< scale the values by d / k, so that the message is an unbiased estimate of v
  value_codec values{};  ///< how the values travel
  /// How the indices travel; seeded sends only the key (seed, node, round) and receivers draw them again.
  index_encoding indices = index_encoding::automatic;

  /// Throw what compress would throw for this configuration at dimension d.
  void validate(std::size_t d, const context& ctx) const { checked_k(d, ctx); }

  /// k distinct coordinates drawn from (ctx.seed, ctx.node, ctx.round), with their values (times d / k
  /// when unbiased), into out. Throws config_error for k > d or a bad setting, size_error for an empty
  /// v or d >= 2^32, non_finite_error for NaN or infinity in v.
  template <tensor_element T>
  void compress(std::span<const T> v, message& out, const context& ctx, compress_workspace<T>& ws) const {
    const std::size_t kk = checked_k(v.size(), ctx);
    detail::check_finite(v, ctx);
    detail::random_indices(v.size(), kk, ctx, out.indices, ws.taken);
    out.dim = static_cast<std::uint32_t>(v.size());
    if (indices == index_encoding::seeded) {  // only the key travels: receivers draw the indices again
      out.index_enc = index_encoding::seeded;
      out.index_key = {ctx.seed, ctx.node, ctx.round};
      out.count = static_cast<std::uint32_t>(out.indices.size());
    } else {
      detail::finish_indices(out, indices);
    }
    const T factor = unbiased ? static_cast<T>(static_cast<double>(v.size()) / static_cast<double>(kk))
                              : T(1);
    detail::compress_selected<T>(v, values, factor, out, ctx);
  }

 private:
  std::size_t checked_k(std::size_t d, const context& ctx) const {
    values.validate();
    detail::check_index_setting(indices, true);
    detail::check_dim(d, ctx);
    return k.resolve(d, ctx);
  }
};

}  // namespace v0
}  // namespace sparsepush
