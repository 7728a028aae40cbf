// sparsepush/transport/transport.hpp: what a transport carries. Each round, every node hands the
// transport one compressed message q_j, its push-sum weight u_j and its column of W(t) (sender-side
// shares); the transport delivers to each receiver i the envelopes (j, W[i][j], u_j, q_j). The
// receiver needs no knowledge of its in-neighbours: it sums what arrives. An envelope's header
// (sender u32, round u32, share f64, weight f64) travels beside the message's own wire bytes.
#pragma once

#include <concepts>
#include <cstdint>
#include <span>
#include <vector>

#include "../message.hpp"
#include "../topology/graph.hpp"

namespace sparsepush {
inline namespace v0 {

/// Bytes of an envelope's header: sender, round, share W[i][j], push-sum weight u_j.
inline constexpr std::size_t envelope_header_bytes = 4 + 4 + 8 + 8;

/// What one node pushes in a round: its message, weight and column of W (self-edge included).
struct outbox {
  const message* msg = nullptr;
  double u = 1.0;
  std::span<const out_edge> edges;
};

/// What arrives at a node: the sender, the share it assigned, its weight and its message.
struct envelope {
  std::uint32_t from = 0;
  double share = 0.0;
  double u = 1.0;
  const message* msg = nullptr;
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
