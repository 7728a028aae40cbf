// tests/dense_push_sum.hpp: one round of plain push-sum in double, written from the equations
// (x_i <- sum_j W_ij x_j, u_i <- sum_j W_ij u_j with the sender-side shares of the schedule), for
// the tests that compare the library's rounds with a dense reference.
#pragma once

#include <cstdint>
#include <vector>

#include <sparsepush/topology/schedule.hpp>

namespace dense_push_sum {

/// Round t of schedule `sched` on numerators x and weights u (node j keeps 1 - its shares sent).
template <class S>
void mix(const S& sched, std::uint32_t t, std::vector<std::vector<double>>& x, std::vector<double>& u) {
  const std::size_t n = x.size(), d = n ? x[0].size() : 0;
  std::vector<std::vector<double>> nx(n, std::vector<double>(d, 0.0));
  std::vector<double> nu(n, 0.0);
  std::vector<sparsepush::out_edge> col;
  for (std::uint32_t j = 0; j < n; ++j) {
    sched.out_edges(t, j, col);
    double own = 1.0;
    for (const auto& e : col) {
      if (e.to == j) continue;
      own -= e.share;
      for (std::size_t l = 0; l < d; ++l) nx[e.to][l] += e.share * x[j][l];
      nu[e.to] += e.share * u[j];
    }
    for (std::size_t l = 0; l < d; ++l) nx[j][l] += own * x[j][l];
    nu[j] += own * u[j];
  }
  x = std::move(nx);
  u = std::move(nu);
}

}  // namespace dense_push_sum
