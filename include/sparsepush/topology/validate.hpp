// sparsepush/topology/validate.hpp: checks of a schedule, so that a bad one is a clear error
// instead of a silent divergence. check_column() is the check of one column j of W(t) that every
// round runs before any state changes (the group's, a node's, the loopback's post): receivers in
// range and distinct, shares finite and in [0, 1], a positive self-weight W[j][j], and
// sum_i W[i][j] = 1 (|sum - 1| <= 1e-6: column stochastic, so that sum_i x_i and sum_i u_i = n are
// conserved). validate_schedule() runs it over one period (or a window, for aperiodic schedules)
// before round 0 and adds what push-sum needs to reach the average: the union graph strongly
// connected.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <span>
#include <string>
#include <vector>

#include "schedule.hpp"

namespace sparsepush {
inline namespace v0 {

/// How far from 1 a column's shares may sum (check_column), and how far above 1 one share may be.
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

namespace detail {
/// A share or a sum as a message shows it: enough digits to tell 1.0000001 from 1.
inline std::string share_text(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.9g", v);
  return buf;
}
}  // namespace detail

/// Throw schedule_error, naming the round, the sender and what is wrong, unless `out` is a valid
/// column `node` of W(round): every receiver in [0, nodes) (not checked when nodes is 0) and named
/// once, every share finite and in [0, 1], the self-share W[node][node] > 0, and the shares summing
/// to 1 within column_sum_tolerance. O(deg) for a column whose other receivers ascend (every built-in
/// schedule's), O(deg^2) otherwise; allocates nothing (it runs every round, at every node).
inline void check_column(std::uint64_t round, std::uint32_t node, std::span<const out_edge> out,
                         std::size_t nodes) {
  auto where = [&] { return "round " + std::to_string(round) + ", node " + std::to_string(node) + ": "; };
  double sum = 0.0, self = -1.0;
  bool ascending = true;  // the receivers other than node, in the order given
  std::uint32_t last = 0;
  bool any = false, self_seen = false;
  for (const auto& e : out) {
    if (nodes > 0 && e.to >= nodes)
      throw schedule_error(where() + "edge to node " + std::to_string(e.to) + " outside [0, " +
                           std::to_string(nodes) + ")");
    if (!(std::isfinite(e.share) && e.share >= 0.0 && e.share <= 1.0 + column_sum_tolerance))
      throw schedule_error(where() + "share " + detail::share_text(e.share) + " to node " + std::to_string(e.to) +
                           " is not in [0, 1]");
    if (e.to == node) {
      if (self_seen) throw schedule_error(where() + "node " + std::to_string(e.to) + " appears twice");
      self_seen = true;
      self = e.share;
    } else {
      if (any && e.to <= last) ascending = false;
      last = e.to;
      any = true;
    }
    sum += e.share;
  }
  if (!ascending)
    for (std::size_t a = 0; a < out.size(); ++a)
      for (std::size_t b = a + 1; b < out.size(); ++b)
        if (out[a].to == out[b].to)
          throw schedule_error(where() + "node " + std::to_string(out[a].to) + " appears twice");
  if (!(self > 0.0)) throw schedule_error(where() + "missing self-loop (W[j][j] must be > 0)");
  if (!(std::abs(sum - 1.0) <= column_sum_tolerance))
    throw schedule_error(where() + "shares sum to " + detail::share_text(sum) +
                         ", not 1 (W must be column stochastic)");
}

/// Throw schedule_error naming the round and node of the first violation (check_column over one
/// period or `window` rounds, then the union graph strongly connected).
template <schedule S>
void validate_schedule(const S& s, std::size_t window = 64) {
  const std::size_t n = s.num_nodes();
  if (n < 1) throw schedule_error("schedule has no nodes");
  const std::size_t rounds = validation_rounds(s, window);
  if (rounds == 0) throw schedule_error("an aperiodic schedule needs a validation window > 0");
  digraph uni(n);
  std::vector<out_edge> col;
  for (std::size_t t = 0; t < rounds; ++t) {
    for (std::uint32_t j = 0; j < n; ++j) {
      s.out_edges(t, j, col);
      check_column(t, j, col, n);
      for (const auto& e : col)
        if (e.to != j && e.share > 0.0) uni.add_edge(j, e.to);
    }
  }
  if (!strongly_connected(uni))
    throw schedule_error("the union graph over rounds 0.." + std::to_string(rounds - 1) +
                         " is not strongly connected: push-sum cannot reach the average");
}

}  // namespace v0
}  // namespace sparsepush
