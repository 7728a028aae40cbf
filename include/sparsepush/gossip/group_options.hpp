// sparsepush/gossip/group_options.hpp: the settings of a push-sum group (gossip/group.hpp): the
// consensus step, error feedback, threads, the seed, the block of nodes it holds, loss recovery,
// the waiting policy and the step weight floor of deferred rounds; and the networks that run
// deferred rounds.
#pragma once

#include <concepts>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "../transport/endpoint.hpp"
#include "node.hpp"
#include "policy.hpp"

namespace sparsepush {
inline namespace v0 {

/// A network that runs deferred rounds: endpoints with take(), and posted_rounds() for the drain.
template <class Net>
concept deferred_network = requires(Net& net, std::span<const std::uint32_t> mine) {
  { net.endpoint(0u) } -> deferred_endpoint;
  { net.posted_rounds(mine) } -> std::same_as<std::vector<std::uint32_t>>;
};

/// Settings of a push-sum group.
struct gossip_options {
  double eta = 1.0;             ///< consensus step in (0, 1]
  bool error_feedback = true;   ///< compress x + e and keep e = v - q (identity leaves e = 0)
  std::size_t threads = 1;      ///< worker threads for per-node work (results do not depend on it)
  std::uint64_t seed = 0;       ///< keys the compressors' random streams with (node, round)
  /// The block of nodes this group holds, [first_node, first_node + models) of total_nodes
  /// (0: the models are all the nodes). Across processes each one holds its own block.
  std::uint32_t first_node = 0;
  /// The number of nodes of the whole run, over every process (0: as many as this group's models).
  std::size_t total_nodes = 0;
  /// What the nodes do about envelopes the network lost (node.hpp): plain push-sum loses their
  /// shares, acknowledged keeps them at the sender (sum x and sum u = n conserved).
  loss_recovery recovery = loss_recovery::none;
  /// How long a node waits for its in-neighbours (gossip/policy.hpp): lockstep (the default) or a
  /// deferred round (overlap, bounded staleness, asynchronous), which needs a network with take().
  wait_policy policy{};
  /// Deferred rounds only (every policy but lockstep): a node whose push-sum weight u_i is below
  /// this floor b takes its local step scaled by u_i / b, x_i <- x_i - gamma (u_i / b) p_i, so that
  /// its de-biased model moves by at most gamma p_i / b (see deferred_step_of()). In [0, 1]; 0
  /// never scales (the step exactly as docs/design/algorithms.md writes it, whatever u_i); 1 never lets the
  /// de-biased step exceed gamma p_i. Lockstep rounds never scale, whatever the value.
  double step_weight_floor = default_step_weight_floor;
  /// 1/2: the floor that trained best where a smaller one diverged (docs/design/weight-floor.md).
  static constexpr double default_step_weight_floor = 0.5;
};

}  // namespace v0
}  // namespace sparsepush
