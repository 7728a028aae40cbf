// sparsepush/topology/exponential.hpp: SGP's directed exponential graphs (Assran et al. 2019),
// built as SGP's own graph manager builds them. Logarithms are computed with integers.
// One-peer: in round t node r pushes to (r + 2^(t mod (floor(log2(n-1)) + 1))) mod n, keeping 1/2.
// k-peer: the flat offset list j (k+1)^i mod n for i = 0 .. floor(log_{k+1}(n-1)), j = 1 .. k, in
// that order, duplicates kept (n = 16, k = 2: 1, 2, 3, 6, 9, 2); round t uses the k entries from
// (t k) mod L on, wrapping ([1, 2], [3, 6], [9, 2], ...), period lcm(L, k) / k.
// Bidirectional: +1, -1, +2, -2, ..., +-2^floor(log2(n-1)) mod n, duplicates kept, one per round
// (n = 8: 1, 7, 2, 6, 4, 4, period 6).
// Weights (SGP's uniform mixing over the round's peer list): keep 1/(k+1), send 1/(k+1) per
// entry. An entry repeated within a round sends its receiver the summed share, and an offset
// 0 mod n (k-peer only, e.g. n = 6, k = 2 gives 6) adds its share to the self-weight, so each
// column has distinct receivers and sums to 1.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "rings.hpp"

namespace sparsepush {
inline namespace v0 {

/// floor(log_base(x)) for x >= 1, base >= 2, in integer arithmetic.
constexpr std::size_t floor_log(std::size_t x, std::size_t base) noexcept {
  std::size_t e = 0;
  for (std::size_t p = base; p <= x; p *= base) {
    ++e;
    if (p > x / base) break;  // next multiplication would overflow or exceed x
  }
  return e;
}

namespace detail {
/// Schedule in which round t uses offsets list[(t * per + p) mod L], p = 0 .. per-1 (all nodes
/// alike): keep 1/(per+1), send 1/(per+1) per entry, repeats and offset 0 merged (see above).
inline periodic_schedule rotating_offsets(std::size_t n, const std::vector<std::size_t>& list,
                                          std::size_t per, std::string name) {
  const std::size_t len = list.size();
  // one period: the rotation returns to the start after lcm(L, per) / per rounds
  std::size_t period = 1;
  while ((period * per) % len != 0) ++period;
  const double w = 1.0 / static_cast<double>(per + 1);
  std::vector<mixing_round> rounds;
  std::vector<std::vector<out_edge>> cols(n);
  std::vector<std::size_t> chunk(per);
  for (std::size_t t = 0; t < period; ++t) {
    for (std::size_t p = 0; p < per; ++p) chunk[p] = list[(t * per + p) % len] % n;
    std::sort(chunk.begin(), chunk.end());  // offset 0 first, repeats adjacent
    for (std::size_t i = 0; i < n; ++i) {
      auto& col = cols[i];
      col.assign(1, out_edge{static_cast<std::uint32_t>(i), w});
      for (std::size_t p = 0; p < per; ++p) {
        if (chunk[p] == 0)
          col[0].share += w;
        else if (p > 0 && chunk[p] == chunk[p - 1])
          col.back().share += w;
        else
          col.push_back({static_cast<std::uint32_t>((i + chunk[p]) % n), w});
      }
      // receivers ascending after the self-edge, as uniform_push lists them
      std::sort(col.begin() + 1, col.end(),
                [](const out_edge& a, const out_edge& b) { return a.to < b.to; });
    }
    rounds.push_back(mixing_round::from_columns(cols));
  }
  return periodic_schedule(std::move(rounds), std::move(name));
}
}  // namespace detail

/// The peer offsets of SGP's one-peer exponential graph: 1, 2, 4, ..., 2^floor(log2(n-1)).
inline std::vector<std::size_t> exponential_offsets(std::size_t n) {
  std::vector<std::size_t> out;
  if (n < 2) return out;
  for (std::size_t i = 0; i <= floor_log(n - 1, 2); ++i) out.push_back(std::size_t{1} << i);
  return out;
}

/// SGP's one-peer directed exponential graph.
inline periodic_schedule one_peer_exponential(std::size_t n) {
  detail::require_nodes(n, 2, "exponential graph");
  return detail::rotating_offsets(n, exponential_offsets(n), 1, "exponential");
}

/// The offsets of SGP's k-peer exponential graph: j (k+1)^i mod n for i from 0 to
/// floor(log_{k+1}(n-1)) and j from 1 to k, in that order, duplicates (and 0) kept. Empty if n < 2
/// or k < 1.
inline std::vector<std::size_t> k_peer_exponential_offsets(std::size_t n, std::size_t k) {
  std::vector<std::size_t> list;
  if (n < 2 || k < 1) return list;
  std::size_t pw = 1;  // (k+1)^i <= n - 1, so j * pw <= k (n - 1) does not overflow for k < n
  for (std::size_t i = 0; i <= floor_log(n - 1, k + 1); ++i, pw *= (k + 1))
    for (std::size_t j = 1; j <= k; ++j) list.push_back((j * pw) % n);
  return list;
}

/// SGP's k-peer directed exponential graph (k out-peers per round).
inline periodic_schedule k_peer_exponential(std::size_t n, std::size_t k) {
  detail::require_nodes(n, 2, "k-peer exponential graph");
  if (k < 1 || k >= n)
    throw schedule_error("k-peer exponential graph needs 1 <= k < n, got k = " + std::to_string(k) +
                         " with n = " + std::to_string(n));
  return detail::rotating_offsets(n, k_peer_exponential_offsets(n, k), k,
                                  "exponential-" + std::to_string(k) + "-peer");
}

/// The offsets of SGP's bidirectional exponential graph: +1, -1, +2, -2, ..., +-2^floor(log2(n-1))
/// mod n, duplicates kept (n = 8: 1, 7, 2, 6, 4, 4).
inline std::vector<std::size_t> bidirectional_exponential_offsets(std::size_t n) {
  std::vector<std::size_t> list;
  if (n < 2) return list;
  for (std::size_t i = 0; i <= floor_log(n - 1, 2); ++i) {
    const std::size_t pw = std::size_t{1} << i;  // <= n - 1
    list.push_back(pw);
    list.push_back(n - pw);
  }
  return list;
}

/// SGP's bidirectional exponential graph (one peer per round, rotating through the offsets).
inline periodic_schedule bidirectional_exponential(std::size_t n) {
  detail::require_nodes(n, 2, "bidirectional exponential graph");
  return detail::rotating_offsets(n, bidirectional_exponential_offsets(n), 1,
                                  "bidirectional-exponential");
}

}  // namespace v0
}  // namespace sparsepush
