// sparsepush/algorithm/final_rounds.hpp: how many uncompressed push-sum rounds SCSP's final phase
// needs, computed from the schedule alone. After k exact rounds from round t0, P = W(t0+k-1)...W(t0)
// (column stochastic) gives x_i = sum_j P_ij x_j, u_i = sum_j P_ij u_j, so the de-biased models are
// xh_i = sum_j w_ij xh_j with w_ij = P_ij u_j / sum_l P_il u_l. If every entry of row i lies within
// a factor 1 +- delta of the row's mean, then for any positive u with sum u = n,
//   max_i ||xh_i - xbar|| <= rho max_j ||xh_j(t0) - xbar||,  rho = 2 delta / (1 - delta),
// where xbar = sum_j x_j / n is the push-sum average (invariant under exact rounds). Rounds relaxed
// by eta < 1 (x_i <- x_i + eta (sum_j W_ij x_j - x_i), u likewise) multiply by I + eta (W - I).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "../config.hpp"
#include "../topology/schedule.hpp"
#include "../topology/validate.hpp"

namespace sparsepush {
inline namespace v0 {

/// What final_rounds_for found.
struct final_rounds_plan {
  std::uint32_t rounds = 0;  ///< exact rounds needed
  double bound = 0;          ///< rho after those rounds: the de-biased models' distance to the average, relative
  bool exact = false;        ///< rho is 0: every node holds the average exactly (e.g. the exponential graph at n = 2^m)
};

/// The most multiply-adds final_rounds_for spends on the product by default (seconds on one core)
/// before it gives up on a slowly mixing graph.
inline constexpr double final_rounds_work_limit = 0x1p34;

/// The most rounds final_rounds_for tries by default before it gives up on a slowly mixing graph.
inline constexpr std::uint32_t final_rounds_search_limit = 100000;

/// The fewest exact push-sum rounds, starting at round `first_round` of schedule s, after which
/// rho (above) <= tolerance, i.e. every de-biased model is within tolerance times the largest
/// distance at the start of the phase, whatever the push-sum weights u. `eta` in (0, 1] relaxes
/// each round as the final phase does (1: plain push-sum). Computes the product of the schedule's
/// matrices densely: O(n^2) memory and O(n * edges) work per round. Stops at the first round with
/// rho == 0, the exact count, which the bound reaches on graphs that average exactly in floating
/// point (dyadic shares, eta 1). Throws config_error for a tolerance outside (0, 1) or an eta
/// outside (0, 1], and when `max_rounds` rounds or `work_limit` multiply-adds are not enough (a
/// slowly mixing graph, e.g. a directed ring of thousands of nodes: give the count instead).
template <schedule S>
final_rounds_plan final_rounds_for(const S& s, std::uint64_t first_round, double tolerance = 1e-3,
                                   std::uint32_t max_rounds = final_rounds_search_limit, double eta = 1.0,
                                   double work_limit = final_rounds_work_limit) {
  if (!(tolerance > 0 && tolerance < 1))
    throw config_error("final rounds: the tolerance must be in (0, 1), got " + std::to_string(tolerance));
  if (!(eta > 0 && eta <= 1))
    throw config_error("final rounds: eta must be in (0, 1], got " + std::to_string(eta));
  const std::size_t n = s.num_nodes();
  if (n == 0) throw config_error("final rounds: the schedule has no nodes");
  if (n > 8192)
    throw config_error("final rounds: computing the count for " + std::to_string(n) +
                       " nodes needs an n x n product (more than 8192 nodes): give the count instead");
  // P = I, row-major; next = ((1 - eta) I + eta W(t)) P: row i of next = (1 - eta) row i of P + sum
  // over senders j of eta W[i][j] * row j of P
  std::vector<double> p(n * n, 0.0), next(n * n);
  for (std::size_t i = 0; i < n; ++i) p[i * n + i] = 1.0;
  std::vector<out_edge> col;
  double work = 0;  // multiply-adds so far
  double rho = 1;   // after the last round, when it is below 1
  for (std::uint32_t k = 1; k <= max_rounds; ++k) {
    if (eta == 1) std::fill(next.begin(), next.end(), 0.0);
    else
      for (std::size_t c = 0; c < n * n; ++c) next[c] = (1 - eta) * p[c];
    const std::uint64_t t = first_round + k - 1;
    for (std::uint32_t j = 0; j < n; ++j) {
      s.out_edges(t, j, col);
      check_column(t, j, col, n);  // a receiver outside [0, n) would write outside the product
      const double* from = p.data() + std::size_t{j} * n;
      for (const auto& e : col) {
        double* to = next.data() + std::size_t{e.to} * n;
        const double share = eta * e.share;
        for (std::size_t c = 0; c < n; ++c) to[c] += share * from[c];
      }
      work += static_cast<double>(col.size() + 1) * static_cast<double>(n);
    }
    p.swap(next);
    double delta = 0;
    for (std::size_t i = 0; i < n && delta < 1; ++i) {
      const double* row = p.data() + i * n;
      double sum = 0;
      for (std::size_t c = 0; c < n; ++c) sum += row[c];
      const double mean = sum / static_cast<double>(n);
      if (!(mean > 0)) {
        delta = 1;
        break;
      }
      for (std::size_t c = 0; c < n; ++c) delta = std::max(delta, std::abs(row[c] / mean - 1.0));
    }
    if (delta < 1) {
      rho = 2 * delta / (1 - delta);
      if (rho <= tolerance) return {k, rho, rho == 0};
    }
    if (work >= work_limit && k < max_rounds)
      throw config_error("final rounds: the count reached its work limit on " + std::to_string(n) + " nodes after " +
                         std::to_string(k) + " exact rounds from round " + std::to_string(first_round) +
                         ", with the bound at " + (rho < 1 ? std::to_string(rho) : std::string(">= 1")) + ", not " +
                         std::to_string(tolerance) + ": this schedule mixes slowly; give the number of final rounds explicitly");
  }
  throw config_error("final rounds: " + std::to_string(max_rounds) + " exact rounds from round " +
                     std::to_string(first_round) + " do not bring the models within " + std::to_string(tolerance) +
                     " of the average on this schedule (" + std::to_string(n) +
                     " nodes mix slowly): give the number of final rounds explicitly");
}

}  // namespace v0
}  // namespace sparsepush
