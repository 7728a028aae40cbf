// sparsepush/transport/accounting.hpp: what every network keeps about its nodes' envelopes, so
// that the loopback and MPI count and lose alike: a byte ledger (per sender: bytes of every frame,
// 24-byte header + wire_bytes(q_j), messages and lost envelopes) with its checkpoint, and the loss
// model (round t's envelope from j to i != j is lost iff Philox(seed, t, j * n + i) < p).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "../checkpoint.hpp"
#include "../detail/philox.hpp"
#include "../topology/graph.hpp"
#include "../topology/validate.hpp"

namespace sparsepush {
inline namespace v0 {

/// One envelope's way through the network: round t, sender j, receiver i. Loss queries take it
/// whole (lost({.round = t, .from = j, .to = i})), so that a call names which number is which.
struct route {
  std::uint32_t round = 0;  ///< the sender's round t
  std::uint32_t from = 0;  ///< the sender j
  std::uint32_t to = 0;  ///< the receiver i
};

/// Injected message loss: the envelope of round t from node j to node i != j is lost with
/// probability p, decided by one Philox draw keyed by (seed, round t, counter j * n + i). Every
/// party evaluates the same rule, so a sender knows which of its envelopes were lost (as an
/// acknowledgement would tell it) and a receiver does not wait for them; the loopback and MPI
/// networks lose the same envelopes.
struct loss_model {
  double probability = 0.0;  ///< in [0, 1)
  std::uint64_t seed = 0;  ///< keys the loss decisions (the run's seed)
  std::size_t nodes = 0;     ///< n of the run

  /// True when any envelope can be lost (probability > 0).
  bool active() const noexcept { return probability > 0.0; }
  /// Is the envelope on route r lost? (Never for r.from == r.to.)
  bool lost(const route& r) const noexcept {
    if (probability <= 0.0 || r.from == r.to) return false;
    const detail::counter_rng rng(seed, 0, r.round, detail::rng_stream::message_loss);
    return detail::unit_interval(rng.block(static_cast<std::uint32_t>(r.from * nodes + r.to))[0]) < probability;
  }
  /// Throw config_error unless probability is in [0, 1).
  void validate() const {
    if (!(probability >= 0.0 && probability < 1.0))
      throw config_error("drop probability must be in [0, 1), got " + std::to_string(probability));
  }
};

/// Bytes and messages each of a network's nodes has sent (envelope headers included); node i is
/// counted at i - first. A node's counters are written only by the thread that posts for it.
class byte_ledger {
 public:
  /// Zero counters for `nodes` nodes, the first of them node `first` of the run.
  byte_ledger(std::size_t nodes, std::size_t first = 0)
      : first_(first), sent_(nodes, 0), messages_(nodes, 0), dropped_(nodes, 0) {}
  /// Counts one envelope of `bytes` bytes (header included) sent by node `node`.
  void add(std::size_t node, std::size_t bytes) noexcept {
    sent_[node - first_] += bytes;
    ++messages_[node - first_];
  }
  /// One of node's sent envelopes was lost on the way (it still counts as sent).
  void drop(std::size_t node) noexcept { ++dropped_[node - first_]; }
  /// Envelopes of node `node` that were lost (std::out_of_range outside the ledger's nodes).
  std::size_t messages_dropped(std::size_t node) const { return dropped_.at(node - first_); }
  /// Lost envelopes of all the ledger's nodes.
  std::size_t total_dropped() const noexcept {
    std::size_t s = 0;
    for (auto m : dropped_) s += m;
    return s;
  }

  /// Checkpoint section "LDGR": first node, node count, then bytes, messages and drops per node.
  void save(checkpoint_writer& w) const {
    w.section("LDGR");
    w.u64(first_);
    w.u64(sent_.size());
    w.values(as_u64(sent_));
    w.values(as_u64(messages_));
    w.values(as_u64(dropped_));
  }
  /// Read a saved ledger of the same nodes (checked) without changing this one; assign it to
  /// restore.
  byte_ledger read(checkpoint_reader& r) const {
    r.section("LDGR");
    const auto first = r.u64("ledger first node");
    const auto count = r.u64("ledger node count");
    if (first != first_ || count != sent_.size())
      r.fail("holds the byte ledger of nodes [" + std::to_string(first) + ", " + std::to_string(first + count) +
             "), this network's are [" + std::to_string(first_) + ", " + std::to_string(first_ + sent_.size()) + ")");
    byte_ledger out(sent_.size(), first_);
    auto load = [&](std::vector<std::size_t>& v, const char* what) {
      std::vector<std::uint64_t> tmp(v.size());
      r.values(std::span<std::uint64_t>(tmp), what);
      for (std::size_t i = 0; i < v.size(); ++i) v[i] = static_cast<std::size_t>(tmp[i]);
    };
    load(out.sent_, "bytes sent");
    load(out.messages_, "messages sent");
    load(out.dropped_, "messages dropped");
    return out;
  }
  /// Bytes node `node` has sent, headers included (std::out_of_range outside the ledger's nodes).
  std::size_t bytes_sent(std::size_t node) const { return sent_.at(node - first_); }
  /// Envelopes node `node` has sent, lost ones included.
  std::size_t messages_sent(std::size_t node) const { return messages_.at(node - first_); }
  /// Bytes sent by all the ledger's nodes.
  std::size_t total_bytes() const noexcept {
    std::size_t s = 0;
    for (auto b : sent_) s += b;
    return s;
  }
  /// Envelopes sent by all the ledger's nodes.
  std::size_t total_messages() const noexcept {
    std::size_t s = 0;
    for (auto m : messages_) s += m;
    return s;
  }

 private:
  static std::vector<std::uint64_t> as_u64(const std::vector<std::size_t>& v) {
    return std::vector<std::uint64_t>(v.begin(), v.end());
  }
  std::size_t first_;
  std::vector<std::size_t> sent_, messages_, dropped_;
};

/// The ledger and loss model of a network of n nodes, kept for the nodes it hosts, and their
/// queries and checkpoint; loopback_network and mpi_network derive from it. The settings are
/// checked once, here (n >= 1, drop probability in [0, 1)); a derived network checks node ids
/// once, when it hands out an endpoint, and each post's receivers (check_receivers).
class network_accounting {
 public:
  /// Nodes of the whole run.
  std::size_t num_nodes() const noexcept { return loss_.nodes; }

  /// Bytes hosted node i (a schedule index) has sent, envelope headers included.
  std::size_t bytes_sent(std::size_t node) const { return ledger_.bytes_sent(node); }
  /// Envelopes hosted node i has sent, lost ones included.
  std::size_t messages_sent(std::size_t node) const { return ledger_.messages_sent(node); }
  /// Envelopes of hosted node i that were lost (they count as sent).
  std::size_t messages_dropped(std::size_t node) const { return ledger_.messages_dropped(node); }
  /// Bytes, messages and lost envelopes of all hosted nodes.
  std::size_t total_bytes() const noexcept { return ledger_.total_bytes(); }
  /// Envelopes sent by all hosted nodes.
  std::size_t total_messages() const noexcept { return ledger_.total_messages(); }
  /// Envelopes of all hosted nodes that were lost.
  std::size_t messages_dropped() const noexcept { return ledger_.total_dropped(); }

  /// Was the envelope on route r lost? (The sender's acknowledgement; see loss_model.)
  bool lost(const route& r) const noexcept { return loss_.lost(r); }
  /// The injected loss model.
  const loss_model& loss() const noexcept { return loss_; }

  /// Checkpoint the byte ledger of the hosted nodes (bytes, messages, drops).
  void save(checkpoint_writer& w) const { ledger_.save(w); }
  /// Read a saved ledger (checked against the hosted nodes) without changing anything.
  byte_ledger read_ledger(checkpoint_reader& r) const { return ledger_.read(r); }
  /// Restore a ledger read by read_ledger().
  void restore_ledger(byte_ledger l) noexcept { ledger_ = std::move(l); }

 protected:
  /// A network of `nodes` nodes hosting all of them (host() narrows that to a block).
  network_accounting(std::size_t nodes, double drop_probability, std::uint64_t seed)
      : ledger_(validated(nodes, drop_probability, seed).nodes), loss_{drop_probability, seed, nodes} {}
  ~network_accounting() = default;
  network_accounting(const network_accounting&) = delete;
  network_accounting& operator=(const network_accounting&) = delete;

  /// The network hosts nodes [first, first + count) (a rank's block): the ledger counts those.
  void host(std::size_t first, std::size_t count) { ledger_ = byte_ledger(count, first); }

  /// Node `from` posts round `round` to the receivers of `out`: `out` must be a valid column of
  /// W(round) (check_column: receivers nodes of the run, named once, shares in [0, 1] summing to 1),
  /// checked for all edges first, so that a bad one sends and counts nothing.
  void check_receivers(std::uint32_t from, std::uint32_t round, std::span<const out_edge> out) const {
    check_column(round, from, out, loss_.nodes);  // the loopback's check: range, shares, sum 1
  }
  /// Count a hosted sender's envelope of `bytes` on route r; true when the loss model loses it.
  bool count_envelope(const route& r, std::size_t bytes) noexcept {
    ledger_.add(r.from, bytes);
    const bool dropped = loss_.lost(r);
    if (dropped) ledger_.drop(r.from);
    return dropped;
  }

 private:
  static loss_model validated(std::size_t nodes, double drop_probability, std::uint64_t seed) {
    if (nodes == 0) throw config_error("a network needs at least one node");
    const loss_model m{drop_probability, seed, nodes};
    m.validate();
    return m;
  }

  byte_ledger ledger_;
  loss_model loss_;
};

}  // namespace v0
}  // namespace sparsepush
