// sparsepush/transport/exchange.hpp: one node of a run in this process, its frames moved by a
// function the caller supplies (torch.distributed point-to-point, a user's message layer). In
// round t node j sends the frame (j, t, W[i][j], u_j, q_j) (endpoint.hpp) to each out-neighbour
// i != j, and receives round t's frames from exactly its in-neighbours (docs/design/algorithms.md, sender-side
// weighting); ledger as every network (accounting.hpp), so the same run counts the same bytes.
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "../detail/bytes.hpp"
#include "endpoint.hpp"

namespace sparsepush {
inline namespace v0 {

/// One frame a node sends in a round: to node `to`, the envelope's bytes (valid during the call).
struct outgoing_frame {
  std::uint32_t to = 0;  ///< the receiving node
  std::span<const std::byte> bytes;  ///< the encoded envelope
};

/// Moves one round's frames: send each of `sends` to its node, and fill `received` with exactly one
/// frame from each of `sources`, in that order (received.size() == sources.size()). `received`
/// arrives holding sources.size() empty buffers that keep their capacity from earlier rounds:
/// assign or resize received[k] (or clear() and push_back). The function waits as long as its
/// message layer does; what it throws reaches the caller of the round unchanged.
using frame_exchange = std::function<void(std::uint32_t round, std::span<const outgoing_frame> sends,
                                          std::span<const std::uint32_t> sources,
                                          std::vector<std::vector<std::byte>>& received)>;

class exchange_network;

/// The endpoint of an exchange network's node (a handle; the network must outlive it).
using exchange_endpoint = network_endpoint<exchange_network>;

/// Node `node` of a run of n nodes, whose frames a frame_exchange moves: post() encodes and keeps
/// this round's frames, collect() hands them to the exchange once together with the in-neighbours
/// to hear from, then decodes what came back. Lockstep rounds only (no take(): a deferred policy is
/// a config_error at the group's first round) and no injected loss. The ledger and checkpoint
/// queries (bytes_sent, total_bytes, save, ...) are network_accounting's, for this node.
class exchange_network : public network_accounting {
 public:
  /// Node `node` of a run of `nodes` nodes, whose frames `exchange` moves. Throws config_error when
  /// node >= nodes or exchange is empty.
  exchange_network(std::size_t nodes, std::uint32_t node, frame_exchange exchange)
      : network_accounting(nodes, 0.0, 0), node_(node), exchange_(std::move(exchange)) {
    if (node >= nodes)
      throw config_error("exchange network: node " + std::to_string(node) + " outside [0, " + std::to_string(nodes) +
                         ")");
    if (!exchange_)
      throw config_error("exchange network of node " + std::to_string(node) + ": the frame exchange is empty");
    host(node, 1);
  }

  /// The one node this network hosts.
  std::uint32_t node() const noexcept { return node_; }
  /// The hosted node (the network hosts one).
  std::uint32_t first_node() const noexcept { return node_; }
  /// 1: the network hosts one node.
  std::size_t local_nodes() const noexcept { return 1; }
  /// A second network of the same node whose frames the same function moves, in calls of their
  /// own (gradient tracking's trackers, make_tracking in train/run_algorithm.hpp): the function is
  /// called for this network's round and then for the twin's, in that order on every node.
  std::shared_ptr<exchange_network> twin() const {
    return std::make_shared<exchange_network>(num_nodes(), node_, exchange_);
  }
  /// The hosted node's endpoint; any other node is a config_error.
  exchange_endpoint endpoint(std::uint32_t node) {
    if (node != node_)
      throw config_error("exchange network hosts node " + std::to_string(node_) + " only, not node " +
                         std::to_string(node));
    return exchange_endpoint(*this, node);
  }

 private:
  friend exchange_endpoint;

  std::string where(std::uint32_t round) const {
    return "round " + std::to_string(round) + ": node " + std::to_string(node_);
  }

  /// Encode one frame per non-self out-edge (once, then copies with the edge's share) and keep
  /// them for collect(); the whole column is checked first, so a bad one keeps and counts nothing.
  void post(std::uint32_t from, std::uint32_t round, std::span<const out_edge> out, double u, const message& m) {
    if (posted_)
      throw transport_error(where(round) + " posts again, but its frames of round " + std::to_string(posted_round_) +
                            " were never exchanged (post and collect alternate)");
    check_receivers(from, round, out);
    const std::size_t bytes = envelope_header_bytes + m.wire_bytes();
    std::size_t k = 0;
    for (const auto& e : out) {
      if (e.to == from) continue;
      count_envelope({.round = round, .from = from, .to = e.to}, bytes);  // never lost: no loss model
      if (frames_.size() <= k) frames_.emplace_back();
      auto& f = frames_[k];
      f.clear();
      f.reserve(std::max(bytes, frame_bound(m)));  // a reused frame of a message with as many values never grows
      if (k == 0) {
        encode_envelope({from, round, e.share, u}, m, f);
      } else {
        f.assign(frames_[0].begin(), frames_[0].end());
        detail::put_f64(f.data() + 8, e.share);
      }
      if (sends_.size() <= k) sends_.emplace_back();
      sends_[k].to = e.to;
      ++k;
    }
    sends_.resize(k);
    for (std::size_t s = 0; s < k; ++s) sends_[s].bytes = frames_[s];
    posted_ = true;
    posted_round_ = round;
  }

  /// Exchange this round's frames (one call of the function), then decode frame k as the envelope
  /// of sources[k], the in-neighbours != node in ascending order: wrong count, sender or round and
  /// malformed frames are transport_errors naming round, sender and receiver.
  void collect(std::uint32_t to, std::uint32_t round, std::span<const in_edge> in, inbox& box) {
    if (!posted_ || posted_round_ != round)
      throw transport_error(where(round) + " collects without having posted that round" +
                            (posted_ ? " (it posted round " + std::to_string(posted_round_) + ")" : std::string()));
    sources_.clear();
    for (const auto& e : in)
      if (e.from != to) sources_.push_back(e.from);
    std::sort(sources_.begin(), sources_.end());
    for (std::size_t k = 0; k < sources_.size(); ++k)
      if (sources_[k] >= num_nodes() || (k && sources_[k] == sources_[k - 1]))
        throw transport_error(where(round) + " is to hear from node " + std::to_string(sources_[k]) +
                              (sources_[k] >= num_nodes() ? ", outside the run" : " twice"));
    posted_ = false;  // the frames are handed over, whatever the exchange does
    box.envelopes.clear();
    received_.resize(sources_.size());
    for (auto& f : received_) f.clear();
    exchange_(round, std::span<const outgoing_frame>(sends_), std::span<const std::uint32_t>(sources_), received_);
    if (received_.size() != sources_.size())
      throw transport_error(where(round) + " got " + std::to_string(received_.size()) +
                            " frames from the exchange for " + std::to_string(sources_.size()) + " senders");
    if (box.decoded.size() < sources_.size()) box.decoded.resize(sources_.size());
    for (std::size_t k = 0; k < sources_.size(); ++k) {
      const std::uint32_t from = sources_[k];
      message& m = box.decoded[k];
      envelope_header h;
      try {
        h = decode_envelope(received_[k], m, box.dim, box.dim ? &box.spare : nullptr);
      } catch (const decode_error& e) {
        throw transport_error(where(round) + " received a malformed frame as node " + std::to_string(from) +
                              "'s: " + e.what());
      }
      if (h.from != from || h.round != round)
        throw transport_error(where(round) + " received node " + std::to_string(h.from) + "'s frame of round " +
                              std::to_string(h.round) + " where node " + std::to_string(from) + "'s of round " +
                              std::to_string(round) + " was due");
      box.envelopes.push_back({h.from, h.share, h.u, &m, h.round});
    }
  }

  std::uint32_t node_;
  frame_exchange exchange_;
  bool posted_ = false;  ///< frames of posted_round_ are kept, not exchanged yet
  std::uint32_t posted_round_ = 0;
  std::vector<std::vector<std::byte>> frames_;  ///< this round's frames, buffers kept between rounds
  std::vector<outgoing_frame> sends_;
  std::vector<std::uint32_t> sources_;
  std::vector<std::vector<std::byte>> received_;
};

static_assert(endpoint<exchange_endpoint>);

}  // namespace v0
}  // namespace sparsepush
