// sparsepush/transport/transport.hpp: the whole-round view of a network, kept for code written
// against it: each round every node hands over one outbox (its message q_j, weight u_j and column
// of W(t), self-edge included) and receives the envelopes (j, W[i][j], u_j, q_j) addressed to it,
// ascending by sender. New code uses one endpoint per node (endpoint.hpp).
#pragma once

#include <concepts>
#include <cstdint>
#include <span>
#include <vector>

#include "../message.hpp"
#include "../topology/graph.hpp"
#include "endpoint.hpp"

namespace sparsepush {
inline namespace v0 {

/// What one node pushes in a round: its message, weight and column of W (self-edge included).
struct outbox {
  const message* msg = nullptr;
  double u = 1.0;
  std::span<const out_edge> edges;
};

/// A transport delivers a round's outboxes (one per node) into inboxes (one per node), excluding
/// self-edges, which never leave the node. Inbox order is by ascending sender.
template <class Tr>
concept transport = requires(Tr& t, std::uint32_t round, std::span<const outbox> out,
                             std::vector<std::vector<envelope>>& in) {
  t.deliver(round, out, in);
};

}  // namespace v0
}  // namespace sparsepush
