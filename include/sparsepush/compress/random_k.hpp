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
#include "../detail/value_kernels.hpp"
#include "common.hpp"

namespace sparsepush {
inline namespace v0 {
namespace detail {

/// k distinct coordinates of [0, d), ascending, uniformly at random (Floyd's algorithm).
/// `taken` is a bitmap of at least d bits once grown here; it is all zero on entry and on return.
inline void random_indices(std::size_t d, std::size_t k, const context& ctx,
                           std::vector<std::uint32_t>& out, std::vector<std::uint64_t>& taken) {
  if (taken.size() < (d + 63) / 64) taken.resize((d + 63) / 64, 0);
  const counter_rng rng(ctx.seed, ctx.node, ctx.round, rng_stream::random_k);
  out.clear();
  out.reserve(k);
  auto test_and_set = [&](std::uint32_t i) {
    const std::uint64_t bit = std::uint64_t{1} << (i & 63);
    const bool was = taken[i >> 6] & bit;
    taken[i >> 6] |= bit;
    return was;
  };
  // draw j is rng.uniform_int(j, j); the Philox blocks of 64 draws are generated at once (vector
  // kernels, value_kernels.hpp), the same words as one block() call each
  constexpr std::size_t batch = 64;
  std::uint32_t words[4 * batch];
  for (std::size_t j0 = d - k; j0 < d; j0 += batch) {
    const std::size_t nb = std::min(batch, d - j0);
    philox_fill(rng, static_cast<std::uint32_t>(j0), nb, words);
    for (std::size_t b = 0; b < nb; ++b) {
      const auto jj = static_cast<std::uint32_t>(j0 + b);
      const std::uint64_t x = (std::uint64_t{words[4 * b]} << 32) | words[4 * b + 1];
      const std::uint32_t t = counter_rng::scale_to(x, jj);
      out.push_back(test_and_set(t) ? (test_and_set(jj), jj) : t);
    }
  }
  if (k * 64 < d) {  // sparse: sort the draws, clear only their words
    for (std::uint32_t i : out) taken[i >> 6] = 0;
    std::sort(out.begin(), out.end());
  } else {  // dense enough: read the set back in order from the bitmap, clearing it
    out.clear();
    for (std::size_t w = 0; w < (d + 63) / 64; ++w) {
      for (std::uint64_t bits = taken[w]; bits; bits &= bits - 1)
        out.push_back(static_cast<std::uint32_t>(64 * w + static_cast<std::size_t>(std::countr_zero(bits))));
      taken[w] = 0;
    }
  }
}

}  // namespace detail

/// k uniformly random coordinates; `unbiased` scales them by d/k.
struct random_k {
  k_spec k = k_spec::fraction(0.01);
  bool unbiased = false;
  value_codec values{};
  index_encoding indices = index_encoding::automatic;

  /// Throw what compress would throw for this configuration at dimension d.
  void validate(std::size_t d, const context& ctx) const { checked_k(d, ctx); }

  template <tensor_element T>
  void compress(std::span<const T> v, message& out, const context& ctx) const {
    compress_workspace<T> ws;
    compress(v, out, ctx, ws);
  }

  template <tensor_element T>
  void compress(std::span<const T> v, message& out, const context& ctx, compress_workspace<T>& ws) const {
    const std::size_t kk = checked_k(v.size(), ctx);
    detail::check_finite(v, ctx);
    detail::random_indices(v.size(), kk, ctx, out.indices, ws.taken);
    out.dim = static_cast<std::uint32_t>(v.size());
    detail::finish_indices(out, indices);
    const T factor = unbiased ? static_cast<T>(static_cast<double>(v.size()) / static_cast<double>(kk))
                              : T(1);
    detail::compress_selected<T>(v, values, factor, out, ctx);
  }

 private:
  std::size_t checked_k(std::size_t d, const context& ctx) const {
    values.validate();
    detail::check_index_setting(indices);
    detail::check_dim(d, ctx);
    return k.resolve(d, ctx);
  }
};

}  // namespace v0
}  // namespace sparsepush
