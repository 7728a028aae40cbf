// sparsepush/topology/exponential.hpp: SGP's directed exponential graphs (Assran et al. 2019).
// One-peer: in round t node r pushes to (r + 2^(t mod (floor(log2(n-1)) + 1))) mod n, keeping 1/2.
// k-peer: the offset list j (k+1)^i for i = 0 .. floor(log_{k+1}(n-1)), j = 1 .. k (taken mod n,
// self and repeated offsets dropped); round t uses k consecutive entries of it, rotating by k.
// Bidirectional: the list +1, -1, +2, -2, +4, ... (mod n, repeats dropped; n = 8 gives
// [1, 7, 2, 6, 4]), one entry per round. Logarithms are computed with integers.
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
/// Schedule in which round t uses offsets list[(t * per) mod L .. + per) (each node the same).
inline periodic_schedule rotating_offsets(std::size_t n, const std::vector<std::size_t>& list,
                                          std::size_t per, std::string name) {
  const std::size_t len = list.size();
  // one period: the rotation returns to the start after lcm(L, per) / per rounds
  std::size_t period = 1;
  while ((period * per) % len != 0) ++period;
  std::vector<mixing_round> rounds;
  for (std::size_t t = 0; t < period; ++t) {
    digraph g(n);
    for (std::size_t i = 0; i < n; ++i)
      for (std::size_t p = 0; p < std::min(per, len); ++p)
        g.add_edge(i, (i + list[(t * per + p) % len]) % n);
    rounds.push_back(uniform_push(g));
  }
  return periodic_schedule(std::move(rounds), std::move(name));
}
inline void add_offset(std::vector<std::size_t>& list, std::size_t n, std::size_t off) {
  off %= n;
  if (off != 0 && std::find(list.begin(), list.end(), off) == list.end()) list.push_back(off);
}
}  // namespace detail

/// The peer offsets of SGP's one-peer exponential graph: 1, 2, 4, ..., 2^floor(log2(n-1)).
inline std::vector<std::size_t> exponential_offsets(std::size_t n) {
  std::vector<std::size_t> out;
  for (std::size_t i = 0; i <= floor_log(n - 1, 2); ++i) out.push_back(std::size_t{1} << i);
  return out;
}

/// SGP's one-peer directed exponential graph.
inline periodic_schedule one_peer_exponential(std::size_t n) {
  detail::require_nodes(n, 2, "exponential graph");
  return detail::rotating_offsets(n, exponential_offsets(n), 1, "exponential");
}

/// SGP's k-peer directed exponential graph (k out-peers per round).
inline periodic_schedule k_peer_exponential(std::size_t n, std::size_t k) {
  detail::require_nodes(n, 2, "k-peer exponential graph");
  if (k < 1 || k >= n)
    throw schedule_error("k-peer exponential graph needs 1 <= k < n, got k = " + std::to_string(k) +
                         " with n = " + std::to_string(n));
  std::vector<std::size_t> list;
  std::size_t pw = 1;
  for (std::size_t i = 0; i <= floor_log(n - 1, k + 1); ++i, pw *= (k + 1))
    for (std::size_t j = 1; j <= k; ++j) detail::add_offset(list, n, j * pw);
  return detail::rotating_offsets(n, list, k, "exponential-" + std::to_string(k) + "-peer");
}

/// The offsets of SGP's bidirectional exponential graph: +1, -1, +2, -2, ... mod n, no repeats.
inline std::vector<std::size_t> bidirectional_exponential_offsets(std::size_t n) {
  std::vector<std::size_t> list;
  for (std::size_t i = 0; i <= floor_log(n - 1, 2); ++i) {
    detail::add_offset(list, n, std::size_t{1} << i);
    detail::add_offset(list, n, n - ((std::size_t{1} << i) % n));
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
