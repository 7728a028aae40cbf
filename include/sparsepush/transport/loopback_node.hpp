// sparsepush/transport/loopback_node.hpp: one node of a loopback network that threads share, as a
// network of its own (first_node() is that node, local_nodes() 1). An algorithm per thread, each
// over its own node's view, runs lockstep rounds on free-running threads: a node waits only for
// its in-neighbours, as over MPI, with the same bits (sparsepush.torch's Loopback runs this way).
// The loopback must be in copied or encoded mode (by_reference hands out the sender's message,
// which its next round overwrites). The view's byte ledger is its node's: save() and
// restore_ledger() keep and restore that node's counts alone, whatever the other threads do.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "loopback.hpp"

namespace sparsepush {
inline namespace v0 {

/// Node `node` of a shared loopback_network (which must outlive the view).
class loopback_node {
 public:
  /// The view of node `node` of net. Throws config_error when node >= net.num_nodes() or net is in
  /// by_reference mode.
  loopback_node(loopback_network& net, std::uint32_t node) : net_(&net), node_(node) {
    if (node >= net.num_nodes())
      throw config_error("loopback node " + std::to_string(node) + " of a network of " + std::to_string(net.num_nodes()) +
                         " nodes");
    if (net.options().mode == loopback_mode::by_reference)
      throw config_error("a loopback shared by threads needs copied or encoded mode (by_reference hands out the "
                         "sender's message, which its next round overwrites)");
  }

  /// The number of nodes of the shared network.
  std::size_t num_nodes() const noexcept { return net_->num_nodes(); }
  /// This view's node (the only one it hosts).
  std::uint32_t first_node() const noexcept { return node_; }
  /// 1: the view hosts one node.
  std::size_t local_nodes() const noexcept { return 1; }
  /// The shared network's options.
  const loopback_options& options() const noexcept { return net_->options(); }
  /// The shared network.
  loopback_network& network() const noexcept { return *net_; }
  /// The same node's view of the shared network's companion(): every thread's twin shares one
  /// second network (gradient tracking's trackers, make_tracking in train/run_algorithm.hpp).
  std::shared_ptr<loopback_node> twin() const { return std::make_shared<loopback_node>(net_->companion(), node_); }

  /// The node's endpoint (config_error for any other node).
  loopback_endpoint endpoint(std::uint32_t node) {
    if (node != node_)
      throw config_error("this loopback view is node " + std::to_string(node_) + "'s, not node " + std::to_string(node) +
                         "'s");
    return net_->endpoint(node);
  }
  /// Was the envelope on route r lost? (The shared network's loss model.)
  bool lost(const route& r) const noexcept { return net_->lost(r); }
  /// The shared network's loss model.
  const loss_model& loss() const noexcept { return net_->loss(); }

  /// The node's counts (since a restore: the restored counts plus what it sent since).
  std::size_t bytes_sent(std::size_t node) const { return count(node, 0); }
  /// Envelopes the node has sent (`node` must be this view's node).
  std::size_t messages_sent(std::size_t node) const { return count(node, 1); }
  /// Envelopes of the node that were lost (`node` must be this view's node).
  std::size_t messages_dropped(std::size_t node) const { return count(node, 2); }
  /// Bytes this view's node has sent, headers included.
  std::size_t total_bytes() const { return bytes_sent(node_); }
  /// Envelopes this view's node has sent.
  std::size_t total_messages() const { return messages_sent(node_); }
  /// Envelopes of this view's node that were lost.
  std::size_t messages_dropped() const { return messages_dropped(node_); }

  /// The node's ledger, in the format of a one-node network's (section "LDGR").
  void save(checkpoint_writer& w) const {
    w.section("LDGR");
    w.u64(node_);
    w.u64(1);
    for (int k = 0; k < 3; ++k) w.values(std::vector<std::uint64_t>{count(node_, k)});
  }
  /// Reads a ledger saved by save() for this node (checkpoint_error when it is another node's),
  /// without changing the counts.
  byte_ledger read_ledger(checkpoint_reader& r) const { return byte_ledger(1, node_).read(r); }
  /// Sets the node's counts to those of l (a read_ledger() result).
  void restore_ledger(const byte_ledger& l) noexcept {
    base_[0] = l.bytes_sent(node_);
    base_[1] = l.messages_sent(node_);
    base_[2] = l.messages_dropped(node_);
    for (int k = 0; k < 3; ++k) mark_[k] = shared(k);
  }

 private:
  std::size_t shared(int k) const {
    return k == 0 ? net_->bytes_sent(node_) : k == 1 ? net_->messages_sent(node_) : net_->messages_dropped(node_);
  }
  std::size_t count(std::size_t node, int k) const {
    if (node != node_)
      throw config_error("this loopback view counts node " + std::to_string(node_) + ", not node " + std::to_string(node));
    return base_[k] + shared(k) - mark_[k];
  }

  loopback_network* net_;
  std::uint32_t node_;
  std::size_t base_[3] = {0, 0, 0};  ///< the counts restored
  std::size_t mark_[3] = {0, 0, 0};  ///< the shared ledger's counts at the restore
};

}  // namespace v0
}  // namespace sparsepush
