// sparsepush/algorithm/final_rounds.hpp: how many uncompressed push-sum rounds SCSP's final phase
// needs, computed from the schedule alone. After k exact rounds from round t0, P = W(t0+k-1)...W(t0)
// (column stochastic) gives x_i = sum_j P_ij x_j, u_i = sum_j P_ij u_j, so the de-biased models are
// xh_i = sum_j w_ij xh_j with w_ij = P_ij u_j / sum_l P_il u_l. If every entry of row i lies within
// a factor 1 +- delta of the row's mean, then for any positive u with sum u = n,
//   max_i ||xh_i - xbar|| <= rho max_j ||xh_j(t0) - xbar||,  rho = 2 delta / (1 - delta),
// where xbar = sum_j x_j / n is the push-sum average (invariant under exact rounds).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "../config.hpp"
#include "../topology/schedule.hpp"

namespace sparsepush {
inline namespace v0 {

/// What final_rounds_for found.
struct final_rounds_plan {
  std::uint32_t rounds = 0;  ///< exact rounds needed
  double bound = 0;          ///< rho after those rounds: the de-biased models' distance to the average, relative
  bool exact = false;        ///< rho is 0: every node holds the average exactly (e.g. the exponential graph at n = 2^m)
};

/// The fewest exact push-sum rounds, starting at round `first_round` of schedule s, after which
/// rho (above) <= tolerance, i.e. every de-biased model is within tolerance times the largest
/// distance at the start of the phase, whatever the push-sum weights u. Computes the product of
/// the schedule's matrices densely: O(n^2) memory and O(n * edges) work per round. Stops at the
/// first round with rho == 0, the exact count, which the bound reaches on graphs that average
/// exactly in floating point (dyadic shares). Throws config_error for a tolerance outside (0, 1)
/// and when `max_rounds` rounds are not enough (a slowly mixing graph: give the count instead).
template <schedule S>
final_rounds_plan final_rounds_for(const S& s, std::uint64_t first_round, double tolerance = 1e-3,
                                   std::uint32_t max_rounds = 100000) {
  if (!(tolerance > 0 && tolerance < 1))
    throw config_error("final rounds: the tolerance must be in (0, 1), got " + std::to_string(tolerance));
  const std::size_t n = s.num_nodes();
  if (n == 0) throw config_error("final rounds: the schedule has no nodes");
  if (n > 8192)
    throw config_error("final rounds: computing the count for " + std::to_string(n) +
                       " nodes needs an n x n product (more than 8192 nodes): give the count instead");
  // P = I, row-major; next = W(t) P: row i of next = sum over senders j of W[i][j] * row j of P
  std::vector<double> p(n * n, 0.0), next(n * n);
  for (std::size_t i = 0; i < n; ++i) p[i * n + i] = 1.0;
  std::vector<out_edge> col;
  for (std::uint32_t k = 1; k <= max_rounds; ++k) {
    std::fill(next.begin(), next.end(), 0.0);
    const std::uint64_t t = first_round + k - 1;
    for (std::uint32_t j = 0; j < n; ++j) {
      s.out_edges(t, j, col);
      const double* from = p.data() + std::size_t{j} * n;
      for (const auto& e : col) {
        double* to = next.data() + std::size_t{e.to} * n;
        for (std::size_t c = 0; c < n; ++c) to[c] += e.share * from[c];
      }
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
      const double rho = 2 * delta / (1 - delta);
      if (rho <= tolerance) return {k, rho, rho == 0};
    }
  }
  throw config_error("final rounds: " + std::to_string(max_rounds) + " exact rounds from round " +
                     std::to_string(first_round) + " do not bring the models within " + std::to_string(tolerance) +
                     " of the average on this schedule (" + std::to_string(n) +
                     " nodes mix slowly): give the number of final rounds explicitly");
}

}  // namespace v0
}  // namespace sparsepush
