// sparsepush/algorithm/node_block.hpp: what CHOCO-SGD (choco.hpp) and CHOCO-Push (choco_push.hpp)
// share: the block of nodes this process runs, all n over a loopback of their own or the block a
// network places here, on a thread pool with one compressor workspace per thread; the checks of
// their models and schedule; the checkpoint of the block and its network's byte ledger; and the
// accessors the trainer calls. The nodes' round is the algorithm's own.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "../checkpoint.hpp"
#include "../compress/compose.hpp"
#include "../detail/thread_pool.hpp"
#include "../topology/validate.hpp"
#include "../transport/loopback.hpp"

namespace sparsepush {
inline namespace v0 {
namespace detail {

/// The compressor an algorithm's options start with: identity where C can hold it, else C{}.
template <class C>
C default_compressor() {
  if constexpr (std::is_constructible_v<C, identity>) return C(identity{});
  else return C{};
}

}  // namespace detail

/// The nodes of type Node that this process runs over schedule S and network Net (see the
/// header comment); Node has T, state_bytes(), save(w), read_state(r) and restore(state).
template <class Node, class S, class Net>
class node_block {
 public:
  /// The element type.
  using T = typename Node::T;

  /// Run f(i, w) for every node this process runs on the algorithm's threads (w in [0, workers())
  /// names the thread: one scratch buffer per thread is enough).
  template <class F>
    requires std::invocable<F&, std::size_t, std::size_t>
  void for_each_node(F&& f) {
    pool_.parallel_for_worker(nodes_.size(), f);
  }
  /// The number of threads for_each_node() runs on.
  std::size_t workers() const noexcept { return pool_.size(); }
  /// Nodes run by this process; accessor indices are local (node first_node() + i).
  std::size_t num_nodes() const noexcept { return nodes_.size(); }
  /// The schedule's index of local node 0.
  std::uint32_t first_node() const noexcept { return first_; }
  /// The number of nodes of the whole run (every process).
  std::size_t total_nodes() const noexcept { return net_->num_nodes(); }
  /// The number of elements d of the model.
  std::size_t dim() const noexcept { return d_; }
  /// Local node i (std::out_of_range for i >= num_nodes()).
  const Node& node(std::size_t i) const { return nodes_.at(i); }
  /// The mixing schedule.
  const S& mixing_schedule() const noexcept { return sched_; }
  /// The network the nodes send over.
  const Net& network() const noexcept { return *net_; }
  /// Bytes sent by the nodes of this process.
  std::size_t bytes_sent() const noexcept { return net_->total_bytes(); }
  /// Envelopes sent by the nodes of this process.
  std::size_t messages_sent() const noexcept { return net_->total_messages(); }
  /// What the messages sent would cost as fp32 vectors: 4 d bytes each.
  std::size_t full_precision_bytes() const noexcept { return 4 * dim() * net_->total_messages(); }
  /// Bytes of state of local node i (the node's own, see its state_bytes()), plus its share of the
  /// compressor workspaces lent to the nodes (one per thread).
  std::size_t state_bytes(std::size_t i) const {
    std::size_t lent = 0;
    for (const auto& w : ws_) lent += w.capacity_bytes();
    return nodes_.at(i).state_bytes() + lent / nodes_.size();
  }

 protected:
  /// All `n` nodes in this process, over a loopback network of their own with options `own`.
  node_block(S sched, std::size_t threads, std::size_t n, loopback_options own)
    requires std::is_same_v<Net, loopback_network>
      : sched_(std::move(sched)), pool_(threads), ws_(pool_.size()),
        own_net_(std::make_unique<loopback_network>(n, own)), net_(own_net_.get()) {}
  /// The nodes that `net` places in this process (`given`: the models given for them).
  node_block(S sched, std::size_t threads, Net& net, std::size_t given)
      : sched_(std::move(sched)), pool_(threads), ws_(pool_.size()), net_(&net) {
    if (given != net.local_nodes())
      throw config_error("the network places " + std::to_string(net.local_nodes()) + " nodes here but " +
                         std::to_string(given) + " models were given");
  }

  /// The checks every block makes before it builds its nodes: the schedule's node count and
  /// validity, a network that loses messages refused (`loss_why`: the algorithm's reason), and
  /// every model of the block of one size, which becomes dim(). Sets first_node() to `first`.
  template <class X>
  void check_block(const std::vector<X>& x0, std::uint32_t first, const std::string& loss_why) {
    first_ = first;
    const std::size_t n = net_->num_nodes();
    if (sched_.num_nodes() != n)
      throw schedule_error("schedule has " + std::to_string(sched_.num_nodes()) + " nodes but " +
                           std::to_string(n) + " models were given");
    validate_schedule(sched_);
    if constexpr (requires { net_->loss().active(); })
      if (net_->loss().active()) throw config_error(loss_why);
    if (x0.empty()) throw config_error("an algorithm needs at least one node's model");
    d_ = as_const_span(x0[0]).size();
    for (std::size_t j = 0; j < x0.size(); ++j) {
      const std::size_t dj = as_const_span(x0[j]).size();
      if (dj != d_)
        throw size_error("node " + std::to_string(first + j) + " has " + std::to_string(dj) +
                         " parameters, node " + std::to_string(first) + " has " + std::to_string(d_));
    }
  }

  /// Checkpoint section `tag`: the block (first node, count), every node's save(), the ledger.
  void save_block(checkpoint_writer& w, const char* tag) const {
    w.section(tag);
    w.u32(first_);
    w.u64(nodes_.size());
    for (const auto& nd : nodes_) nd.save(w);
    net_->save(w);
  }
  /// Restore what save_block() wrote: every node and the ledger, or nothing (checkpoint_error;
  /// `what` names the nodes in its message).
  void restore_block(checkpoint_reader& r, const char* tag, const char* what) {
    r.section(tag);
    const auto first = r.u32("first node");
    const auto count = r.u64("node count");
    if (first != first_ || count != nodes_.size())
      r.fail("holds " + std::string(what) + " nodes [" + std::to_string(first) + ", " + std::to_string(first + count) +
             "), this process runs [" + std::to_string(first_) + ", " + std::to_string(first_ + nodes_.size()) + ")");
    std::vector<typename Node::saved_state> st;
    for (const auto& nd : nodes_) st.push_back(nd.read_state(r));
    auto ledger = net_->read_ledger(r);
    for (std::size_t i = 0; i < nodes_.size(); ++i) nodes_[i].restore(std::move(st[i]));
    net_->restore_ledger(std::move(ledger));
  }

  S sched_;                                ///< the mixing schedule
  detail::thread_pool pool_;               ///< the threads the nodes' work runs on
  std::vector<compress_workspace<T>> ws_;  ///< one per pool thread, lent to the nodes it runs
  std::unique_ptr<loopback_network> own_net_;  ///< the loopback of a run that built its own
  Net* net_ = nullptr;                     ///< the network the nodes send over
  std::uint32_t first_ = 0;                ///< the schedule's index of local node 0
  std::vector<Node> nodes_;                ///< this process's nodes
  std::size_t d_ = 0;                      ///< the model's size
};

}  // namespace v0
}  // namespace sparsepush
