// sparsepush/topology/random.hpp: seeded random topologies.
// Erdos-Renyi directed: each edge i -> j (i != j) present with probability p, redrawn (next
// attempt of the counter stream) until strongly connected. Random out-peers: in round t each node
// pushes to k distinct peers drawn uniformly from the others, keyed by (seed, node, round), keep
// and send 1/(k+1); aperiodic, so it is validated over a window of rounds. Its in-edges are not
// stored: in_edges() redraws every sender's peers for the round, O(n k) per call.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "../detail/philox.hpp"
#include "validate.hpp"

namespace sparsepush {
inline namespace v0 {

/// A static directed Erdos-Renyi graph with uniform push weights, strongly connected.
inline periodic_schedule erdos_renyi_directed(std::size_t n, double p, std::uint64_t seed,
                                              std::size_t max_attempts = 1000) {
  if (n < 2) throw schedule_error("Erdos-Renyi graph needs at least 2 nodes");
  if (!(p > 0.0 && p <= 1.0))
    throw schedule_error("Erdos-Renyi edge probability must be in (0, 1], got " + std::to_string(p));
  for (std::size_t attempt = 0; attempt < max_attempts; ++attempt) {
    const detail::counter_rng rng(seed, static_cast<std::uint32_t>(attempt), 0xE5D05u,
                                  detail::rng_stream::topology);
    digraph g(n);
    for (std::size_t i = 0; i < n; ++i)
      for (std::size_t j = 0; j < n; ++j)
        if (i != j && detail::unit_interval(rng.block(static_cast<std::uint32_t>(i * n + j))[0]) < p)
          g.add_edge(i, j);
    if (strongly_connected(g)) return static_schedule(g, "erdos-renyi");
  }
  throw schedule_error("no strongly connected Erdos-Renyi graph with n = " + std::to_string(n) +
                       ", p = " + std::to_string(p) + " in " + std::to_string(max_attempts) +
                       " attempts; raise p");
}

/// Each round, each node pushes to k distinct uniformly random other nodes.
class random_out_peers {
 public:
  /// n nodes each pushing to k others, drawn from `seed` and the round. Throws schedule_error unless
  /// n >= 2 and 1 <= k < n.
  random_out_peers(std::size_t n, std::size_t k, std::uint64_t seed) : n_(n), k_(k), seed_(seed) {
    if (n < 2) throw schedule_error("random out-peers needs at least 2 nodes");
    if (k < 1 || k >= n)
      throw schedule_error("random out-peers needs 1 <= k < n, got k = " + std::to_string(k) +
                           " with n = " + std::to_string(n));
  }
  /// The number of nodes n.
  std::size_t num_nodes() const noexcept { return n_; }
  /// 0: the schedule does not repeat (every round draws new peers).
  std::size_t period() const noexcept { return 0; }

  /// Replaces out with node's self-edge and its k drawn out-edges in round `round`, each with share
  /// 1 / (k + 1).
  void out_edges(std::uint64_t round, std::uint32_t node, std::vector<out_edge>& out) const {
    std::vector<std::uint32_t> picked;
    draw(round, node, picked);
    const double w = share();
    out.assign(1, out_edge{node, w});
    for (auto to : picked) out.push_back({to, w});
  }
  /// Replace out with row `node` of W(round). Nothing is stored per round, so this redraws the
  /// peers of all n senders: O(n k) per call (a receiver that needs it every round in a
  /// deployment pays n draws; use a periodic schedule if that matters).
  void in_edges(std::uint64_t round, std::uint32_t node, std::vector<in_edge>& out) const {
    detail::require_node(node, n_);
    const double w = share();
    out.clear();
    std::vector<std::uint32_t> picked;
    for (std::size_t j = 0; j < n_; ++j) {
      const auto from = static_cast<std::uint32_t>(j);
      if (from == node) {
        out.push_back({from, w});
        continue;
      }
      draw(round, from, picked);
      if (std::find(picked.begin(), picked.end(), node) != picked.end()) out.push_back({from, w});
    }
  }

 private:
  double share() const noexcept { return 1.0 / static_cast<double>(k_ + 1); }
  /// The k distinct receivers (not node itself) of node in round, by ascending offset from node.
  void draw(std::uint64_t round, std::uint32_t node, std::vector<std::uint32_t>& picked) const {
    const detail::counter_rng rng(seed_, node, static_cast<std::uint32_t>(round),
                                  detail::rng_stream::topology);
    // Floyd's algorithm over the n - 1 other nodes (offsets 1 .. n-1 from node)
    picked.clear();
    for (std::size_t j = n_ - 1 - k_; j < n_ - 1; ++j) {
      const auto jj = static_cast<std::uint32_t>(j);
      const std::uint32_t t = rng.uniform_int(jj, jj);
      picked.push_back(std::find(picked.begin(), picked.end(), t) == picked.end() ? t : jj);
    }
    std::sort(picked.begin(), picked.end());
    for (auto& off : picked) off = static_cast<std::uint32_t>((node + 1 + off) % n_);
  }

  std::size_t n_, k_;
  std::uint64_t seed_;
};

}  // namespace v0
}  // namespace sparsepush
