// sparsepush/detail/random_indices.hpp: random-K's index set, k distinct coordinates of [0, d)
// uniformly at random, ascending, by Floyd's algorithm (for j = d - k .. d - 1: t = uniform in
// [0, j] from draw j of the stream keyed by (seed, node, round); keep t, or j when t is already
// kept). A pure function of (d, k, seed, node, round): the compressor draws it, and a receiver of
// a message whose indices travel as that key (index_encoding::seeded) draws it again.
#pragma once

#include <algorithm>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "philox.hpp"
#include "value_kernels.hpp"

namespace sparsepush {
inline namespace v0 {
namespace detail {

/// Floyd's draws into out (unsorted); test_and_set(i) marks i kept and says whether it was.
template <class TestAndSet>
void floyd_draws(std::size_t d, std::size_t k, const counter_rng& rng, std::vector<std::uint32_t>& out,
                 TestAndSet&& test_and_set) {
  out.clear();
  out.reserve(k);
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
}

/// The index set into out, with `taken`, a bitmap of at least d bits once grown here, all zero on
/// entry and on return (the compressor's path: the bitmap lives in its workspace).
inline void random_indices(std::size_t d, std::size_t k, std::uint64_t seed, std::uint32_t node, std::uint32_t round,
                           std::vector<std::uint32_t>& out, std::vector<std::uint64_t>& taken) {
  if (taken.size() < (d + 63) / 64) taken.resize((d + 63) / 64, 0);
  const counter_rng rng(seed, node, round, rng_stream::random_k);
  floyd_draws(d, k, rng, out, [&](std::uint32_t i) {
    const std::uint64_t bit = std::uint64_t{1} << (i & 63);
    const bool was = taken[i >> 6] & bit;
    taken[i >> 6] |= bit;
    return was;
  });
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

/// The same set with O(k) memory whatever d (an open-addressing set of the kept indices): what a
/// decoder uses, where d comes from an untrusted header.
inline void random_indices_compact(std::size_t d, std::size_t k, std::uint64_t seed, std::uint32_t node,
                                   std::uint32_t round, std::vector<std::uint32_t>& out) {
  constexpr std::uint32_t empty = 0xFFFFFFFFu;  // never an index: d <= 2^32 - 1
  const std::size_t cap = std::bit_ceil(std::max<std::size_t>(16, 2 * k));
  std::vector<std::uint32_t> table(cap, empty);
  const counter_rng rng(seed, node, round, rng_stream::random_k);
  floyd_draws(d, k, rng, out, [&](std::uint32_t i) {
    std::size_t h = (std::uint64_t{i} * 0x9E3779B97F4A7C15ull) >> 32 & (cap - 1);
    for (;; h = (h + 1) & (cap - 1)) {
      if (table[h] == i) return true;
      if (table[h] == empty) {
        table[h] = i;
        return false;
      }
    }
  });
  std::sort(out.begin(), out.end());
}

}  // namespace detail
}  // namespace v0
}  // namespace sparsepush
