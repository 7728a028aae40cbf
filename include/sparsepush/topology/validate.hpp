// sparsepush/topology/validate.hpp: checks a schedule before round 0, so that a bad schedule is a
// clear error instead of a silent divergence: every W(t) column stochastic (|sum - 1| <= 1e-6),
// entries finite and in [0, 1], a positive self-weight, receivers in range and distinct, and the
// union graph over one period (or a window, for aperiodic schedules) strongly connected, which
// push-sum needs to reach the average.
#pragma once

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "schedule.hpp"

namespace sparsepush {
inline namespace v0 {

inline constexpr double column_sum_tolerance = 1e-6;

/// True when every node reaches every other along the edges of g.
inline bool strongly_connected(const digraph& g) {
  const std::size_t n = g.num_nodes();
  if (n <= 1) return true;
  auto reaches_all = [n](const std::vector<std::vector<std::uint32_t>>& adj) {
    std::vector<char> seen(n, 0);
    std::vector<std::uint32_t> stack{0};
    seen[0] = 1;
    std::size_t count = 1;
    while (!stack.empty()) {
      const auto v = stack.back();
      stack.pop_back();
      for (auto w : adj[v])
        if (!seen[w]) {
          seen[w] = 1;
          ++count;
          stack.push_back(w);
        }
    }
    return count == n;
  };
  std::vector<std::vector<std::uint32_t>> fwd(n), rev(n);
  for (std::size_t i = 0; i < n; ++i)
    for (auto j : g.out_neighbours(i)) {
      fwd[i].push_back(j);
      rev[j].push_back(static_cast<std::uint32_t>(i));
    }
  return reaches_all(fwd) && reaches_all(rev);
}

/// Rounds a validation covers: one period, or `window` rounds for an aperiodic schedule.
template <schedule S>
std::size_t validation_rounds(const S& s, std::size_t window) {
  return s.period() > 0 ? s.period() : window;
}

/// Throw schedule_error naming the round and node of the first violation.
template <schedule S>
void validate_schedule(const S& s, std::size_t window = 64) {
  const std::size_t n = s.num_nodes();
  if (n < 1) throw schedule_error("schedule has no nodes");
  const std::size_t rounds = validation_rounds(s, window);
  if (rounds == 0) throw schedule_error("an aperiodic schedule needs a validation window > 0");
  digraph uni(n);
  std::vector<out_edge> col;
  std::vector<std::uint32_t> seen(n, 0xFFFFFFFFu);
  for (std::size_t t = 0; t < rounds; ++t) {
    for (std::uint32_t j = 0; j < n; ++j) {
      s.out_edges(t, j, col);
      const std::string where = "round " + std::to_string(t) + ", node " + std::to_string(j);
      double sum = 0.0, self = -1.0;
      for (const auto& e : col) {
        if (e.to >= n)
          throw schedule_error(where + ": edge to node " + std::to_string(e.to) + " outside [0, " +
                               std::to_string(n) + ")");
        if (!std::isfinite(e.share) || e.share < 0.0 || e.share > 1.0 + column_sum_tolerance)
          throw schedule_error(where + ": share " + std::to_string(e.share) + " to node " +
                               std::to_string(e.to) + " is not in [0, 1]");
        if (seen[e.to] == t * n + j)
          throw schedule_error(where + ": node " + std::to_string(e.to) + " appears twice");
        seen[e.to] = static_cast<std::uint32_t>(t * n + j);
        if (e.to == j) self = e.share;
        else if (e.share > 0.0) uni.add_edge(j, e.to);
        sum += e.share;
      }
      if (!(self > 0.0))
        throw schedule_error(where + ": missing self-loop (W[j][j] must be > 0)");
      if (std::abs(sum - 1.0) > column_sum_tolerance)
        throw schedule_error(where + ": shares sum to " + std::to_string(sum) +
                             ", not 1 (W must be column stochastic)");
    }
  }
  if (!strongly_connected(uni))
    throw schedule_error("the union graph over rounds 0.." + std::to_string(rounds - 1) +
                         " is not strongly connected: push-sum cannot reach the average");
}

}  // namespace v0
}  // namespace sparsepush
