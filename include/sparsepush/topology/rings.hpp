// sparsepush/topology/rings.hpp: rings, torus and complete graphs.
// Directed rings use uniform push (keep 1/2, send 1/2: column stochastic, not doubly stochastic
// unless regular); the undirected ones use Metropolis-Hastings weights (symmetric, doubly
// stochastic). Time-varying directed rings (Sparse-Push paper): node i pushes to i + h_t with
// h_t cycling through a hop list (default 1, 2, 4, ... below n), or to i + 1 and i - 1 in
// alternating rounds.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "schedule.hpp"

namespace sparsepush {
inline namespace v0 {
namespace detail {
inline void require_nodes(std::size_t n, std::size_t min, const char* what) {
  if (n < min)
    throw schedule_error(std::string(what) + " needs at least " + std::to_string(min) +
                         " nodes, got " + std::to_string(n));
}
/// The graph in which node i pushes to (i + hop) mod n.
inline digraph shift_graph(std::size_t n, std::size_t hop) {
  digraph g(n);
  for (std::size_t i = 0; i < n; ++i) g.add_edge(i, (i + hop) % n);
  return g;
}
}  // namespace detail

/// Static directed ring: i -> i + 1.
inline periodic_schedule directed_ring(std::size_t n) {
  detail::require_nodes(n, 2, "directed ring");
  return periodic_schedule({uniform_push(detail::shift_graph(n, 1))}, "directed-ring");
}

/// Static undirected ring, Metropolis-Hastings weights (1/3 each for n >= 3).
inline periodic_schedule undirected_ring(std::size_t n) {
  detail::require_nodes(n, 2, "undirected ring");
  digraph g(n);
  for (std::size_t i = 0; i < n; ++i) g.add_undirected_edge(i, (i + 1) % n);
  return periodic_schedule({metropolis_hastings(g)}, "undirected-ring");
}

/// Static 2-D torus of rows x cols nodes (4-neighbour, wrap-around), Metropolis-Hastings weights.
inline periodic_schedule torus(std::size_t rows, std::size_t cols) {
  detail::require_nodes(rows * cols, 2, "torus");
  if (rows == 0 || cols == 0) throw schedule_error("torus needs rows and cols >= 1");
  digraph g(rows * cols);
  for (std::size_t r = 0; r < rows; ++r)
    for (std::size_t c = 0; c < cols; ++c) {
      const std::size_t i = r * cols + c;
      g.add_undirected_edge(i, r * cols + (c + 1) % cols);
      g.add_undirected_edge(i, ((r + 1) % rows) * cols + c);
    }
  return periodic_schedule({metropolis_hastings(g)}, "torus");
}

/// Static complete graph: every W entry 1/n.
inline periodic_schedule complete(std::size_t n) {
  detail::require_nodes(n, 2, "complete graph");
  digraph g(n);
  for (std::size_t i = 0; i < n; ++i)
    for (std::size_t j = i + 1; j < n; ++j) g.add_undirected_edge(i, j);
  return periodic_schedule({metropolis_hastings(g)}, "complete");
}

/// Time-varying directed ring: in round t node i pushes to i + hops[t mod P] (keep 1/2, send 1/2).
inline periodic_schedule time_varying_ring(std::size_t n, std::vector<std::size_t> hops = {}) {
  detail::require_nodes(n, 2, "time-varying ring");
  if (hops.empty())
    for (std::size_t h = 1; h < n; h *= 2) hops.push_back(h);
  std::vector<mixing_round> rounds;
  for (std::size_t h : hops) {
    if (h % n == 0)
      throw schedule_error("time-varying ring: hop " + std::to_string(h) + " is a multiple of n = " +
                           std::to_string(n) + " (a node would push to itself)");
    rounds.push_back(uniform_push(detail::shift_graph(n, h % n)));
  }
  return periodic_schedule(std::move(rounds), "time-varying-ring");
}

/// Directed ring whose direction alternates: even rounds i -> i + 1, odd rounds i -> i - 1.
inline periodic_schedule alternating_ring(std::size_t n) {
  detail::require_nodes(n, 2, "alternating ring");
  return periodic_schedule({uniform_push(detail::shift_graph(n, 1)),
                            uniform_push(detail::shift_graph(n, n - 1))},
                           "alternating-ring");
}

}  // namespace v0
}  // namespace sparsepush
