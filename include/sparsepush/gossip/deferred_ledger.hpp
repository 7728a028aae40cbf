// sparsepush/gossip/deferred_ledger.hpp: the envelopes of deferred rounds (every waiting policy but
// lockstep; docs/design/algorithms.md, "Asynchronous and overlapped push-sum"), kept for the nodes a
// process runs, whatever they mix: the envelopes each node expects (sent to it in rounds it has
// run and not yet taken), those it took before its own round came (a sender ahead of it), the
// takes a policy allows and waits for, the drain's takes, the round the nodes continue at, and
// the checkpoint section "DEFR". push_sum_group and CHOCO-Push keep one each; the nodes provide
// take(ep, now, upto, must, expected), received() and clear_received().
#pragma once

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include "../checkpoint.hpp"
#include "../clock.hpp"
#include "../config.hpp"
#include "../topology/schedule.hpp"
#include "group_options.hpp"
#include "policy.hpp"

namespace sparsepush {
inline namespace v0 {

/// The envelopes in flight to the nodes [first, first + n) of a run of `total` nodes (see the
/// header comment). A driver calls check(), then per round expect() after each node's post and
/// take() for every node, and drain_take() then drained() to mix everything in flight.
class deferred_ledger {
 public:
  /// What the ledger keeps between rounds of a drained run: the round the nodes continue at, the
  /// common round of the last drain and, per local node, the envelopes it still expects (sent by
  /// peers behind it, not posted yet at the drain) and those it mixed before their round came.
  struct state {
    ///@{
    /// The round the nodes continue at (next_round) and the common round at the drain.
    std::uint32_t next_round = 0, common_round = 0;
    ///@}
    ///@{
    /// Per local node: the envelopes still expected, and those mixed before their round.
    std::vector<std::vector<awaited>> expected, early;
    ///@}
  };

  /// A ledger for nodes [first, first + n) of `total`.
  deferred_ledger(std::size_t n = 0, std::uint32_t first = 0, std::size_t total = 0)
      : first_(first), total_(total), expected_(n), early_(n) {}

  /// Whether envelopes may be in flight (a deferred round ran since the last drain).
  bool in_flight() const noexcept { return undrained_; }
  /// The round after the last deferred round.
  std::uint32_t next_round() const noexcept { return next_round_; }
  /// After a drain: the first round no node of the run has posted (see push_sum_group::common_round).
  std::uint32_t common_round() const noexcept { return common_round_; }
  /// Seconds spent in take() (rounds and drains).
  double wait_seconds() const noexcept { return wait_seconds_; }
  /// The envelopes local node i still expects.
  std::span<const awaited> expected(std::size_t i) const { return expected_.at(i); }

  /// A deferred round t's checks before anything changes: a loopback that hands out the sender's
  /// message (by reference) is refused, a network of another policy too, and rounds with envelopes
  /// in flight must run in order.
  template <class Net>
  void check(const Net& net, const wait_policy& policy, std::uint32_t t) const {
    if constexpr (requires { net.options().mode; }) {
      using mode = std::remove_cvref_t<decltype(net.options().mode)>;  // loopback_mode
      if (net.options().mode == mode::by_reference)
        throw config_error("policy " + to_string(policy) +
                           " needs a loopback in copied or encoded mode (by_reference hands out the sender's "
                           "message, which its next round overwrites)");
    }
    if constexpr (requires { net.options().policy; })
      if (!(net.options().policy == policy))
        throw config_error("the network runs policy " + to_string(net.options().policy) + ", the nodes " +
                           to_string(policy) + ": give both the same");
    if (t < next_round_ || (undrained_ && t != next_round_))
      throw config_error("deferred round " + std::to_string(t) + " after round " + std::to_string(next_round_) +
                         " - 1: rounds with envelopes in flight run in order (drain() first to jump)");
  }

  /// Round t runs: envelopes may be in flight from now on.
  void started(std::uint32_t t) noexcept {
    undrained_ = true;
    next_round_ = t + 1;
  }

  /// After local node i posted round t: it expects the envelopes of round t from the senders of
  /// `row` (its row of W(t)) that the network does not lose, unless one came early.
  template <class Net>
  void expect(const Net& net, std::size_t i, std::uint32_t t, std::span<const in_edge> row) {
    const auto me = static_cast<std::uint32_t>(first_ + i);
    for (const auto& e : row)
      if (e.from != me && !lost_on(net, {.round = t, .from = e.from, .to = me})) expect(i, {t, e.from});
  }

  /// Round t's takes: what `rule` (the policy, or lockstep's with wait_all) lets each of `nodes`
  /// mix, waiting for what it requires, settled against the node's expected envelopes. Without a
  /// take (overlap's round 0) each node's received envelopes are cleared.
  template <class S, class Net, class Nodes>
  void take(const S& sched, Net& net, std::uint32_t t, const wait_policy& policy, bool wait_all, Nodes& nodes) {
    const std::size_t n = nodes.size();
    const auto t0 = run_clock::now();
    std::uint32_t upto = 0, through = 0;
    const wait_policy rule = wait_all ? wait_policy{} : policy;
    const bool takes = rule.mixes_through(t, upto);
    // asynchronous: whatever has arrived, also of rounds this node has not run yet (a sender
    // ahead of it), so that what waits at a slow receiver is bounded by its senders' windows
    if (rule.kind == wait_kind::asynchronous) upto = all_rounds;
    const bool waits = rule.waits_through(t, through);
    // overlap (and wait_all) take their rounds whatever a delay model says: deterministic on every network
    const std::uint32_t now = rule.kind == wait_kind::overlap || wait_all ? all_rounds : t;
    for (std::size_t i = 0; i < n; ++i) {
      if (!takes) break;
      must_.clear();
      if (waits)
        for (const auto& a : expected_[i])
          if (a.round <= through) must_.push_back(a);
      auto ep = net.endpoint(static_cast<std::uint32_t>(first_ + i));
      nodes[i].take(ep, now, upto, must_, expected_[i]);
      settle(sched, i, t, nodes[i].received(), ("round " + std::to_string(t)).c_str());
    }
    wait_seconds_ += std::chrono::duration<double>(run_clock::now() - t0).count();
    if (!takes)
      for (auto& nd : nodes) nd.clear_received();
  }

  /// The takes of a drain (collective over the processes; see push_sum_group::drain): every node
  /// takes every envelope posted to it, the ones of rounds it has not run included. The caller
  /// then mixes what each node took and calls drained().
  template <class S, class Net, class Nodes>
  void drain_take(const S& sched, Net& net, Nodes& nodes) {
    const std::size_t n = nodes.size();
    mine_.assign(n, next_round_);
    const std::vector<std::uint32_t> posted = net.posted_rounds(std::span<const std::uint32_t>(mine_));
    if (posted.size() != total_)
      throw size_error("drain: the network counts " + std::to_string(posted.size()) + " nodes, the group " +
                       std::to_string(total_));
    last_ = 0;
    for (const auto p : posted) last_ = std::max(last_, p);
    // the envelopes sent in rounds this process has not run (its peers ran ahead) are expected too;
    // once mixed they go on the early list, so that the node does not expect them again when it
    // runs those rounds itself
    ahead_.assign(n, {});
    for (std::size_t i = 0; i < n; ++i) {
      const auto me = static_cast<std::uint32_t>(first_ + i);
      for (std::uint32_t s = next_round_; s < last_; ++s) {
        in_edges_of(sched, s, me, drain_rows_);
        for (const auto& e : drain_rows_)
          if (e.from != me && s < posted[e.from] && !lost_on(net, {.round = s, .from = e.from, .to = me})) {
            const awaited a{s, e.from};
            if (std::find(early_[i].begin(), early_[i].end(), a) != early_[i].end()) continue;  // mixed already
            expected_[i].push_back(a);
            ahead_[i].push_back(a);
          }
      }
    }
    const auto t0 = run_clock::now();
    for (std::size_t i = 0; i < n; ++i) {
      auto ep = net.endpoint(static_cast<std::uint32_t>(first_ + i));
      // what was posted (a node behind may not have sent what this one expects from it yet: that
      // stays expected, and is mixed when it comes)
      must_.clear();
      for (const auto& a : expected_[i])
        if (a.round < posted[a.from]) must_.push_back(a);
      nodes[i].take(ep, all_rounds, all_rounds, must_, expected_[i]);
      settle(sched, i, all_rounds, nodes[i].received(), "the drain");
      for (const auto& a : expected_[i])
        if (a.round < posted[a.from])
          throw transport_error("drain: node " + std::to_string(first_ + i) + " still misses node " +
                                std::to_string(a.from) + "'s envelope of round " + std::to_string(a.round) +
                                " after its take");
      early_[i].insert(early_[i].end(), ahead_[i].begin(), ahead_[i].end());
    }
    wait_seconds_ += std::chrono::duration<double>(run_clock::now() - t0).count();
  }

  /// The end of a drain, once every node mixed what drain_take() gave it: the network completes
  /// its sends, and a closing exchange keeps every process from posting its next round before
  /// every process has taken what was posted before the drain (else a fast drainer's next
  /// envelopes would reach a node still inside its take, unexpected).
  template <class Net>
  void drained(Net& net) {
    if constexpr (requires { net.finish_sends(); }) net.finish_sends();
    net.posted_rounds(std::span<const std::uint32_t>(mine_));
    undrained_ = false;
    common_round_ = std::max(last_, next_round_);
  }

  /// After a drain, the nodes continue at `round` (>= common_round()): nothing of an earlier
  /// round is awaited any more (see push_sum_group::continue_at).
  void continue_at(std::uint32_t round) {
    if (undrained_) throw config_error("continue_at(" + std::to_string(round) + "): envelopes are in flight: drain() first");
    if (round < common_round_)
      throw config_error("continue_at(" + std::to_string(round) + "): a node of the run posted round " +
                         std::to_string(common_round_ - 1) + " already");
    for (std::size_t i = 0; i < expected_.size(); ++i) {
      std::erase_if(expected_[i], [round](const awaited& a) { return a.round < round; });
      std::erase_if(early_[i], [round](const awaited& a) { return a.round < round; });
    }
    next_round_ = round;
  }

  /// Writes checkpoint section "DEFR" (the state). Throws config_error unless drained (`what`
  /// names the nodes in the message).
  void save(checkpoint_writer& w, const char* what) const {
    if (undrained_)
      throw config_error(std::string(what) + " with envelopes in flight cannot be checkpointed: drain() it first");
    w.section("DEFR");
    w.u32(next_round_);
    w.u32(common_round_);
    auto put = [&w](const std::vector<awaited>& list) {
      std::vector<std::uint32_t> flat;
      for (const auto& a : list) flat.insert(flat.end(), {a.round, a.from});
      w.values(std::span<const std::uint32_t>(flat));
    };
    for (std::size_t i = 0; i < expected_.size(); ++i) {
      put(expected_[i]);
      put(early_[i]);
    }
  }
  /// Read a "DEFR" section (checked: senders in range) without changing anything.
  state read(checkpoint_reader& r) const {
    r.section("DEFR");
    state d;
    d.next_round = r.u32("the group's next round");
    d.common_round = r.u32("the common round");
    auto get = [&](const char* what) {
      const auto flat = r.values<std::uint32_t>(what, std::size_t{1} << 26);
      if (flat.size() % 2) r.fail(std::string("holds an odd-length list of ") + what);
      std::vector<awaited> list;
      for (std::size_t k = 0; k < flat.size(); k += 2) {
        if (flat[k + 1] >= total_)
          r.fail(std::string("holds ") + what + " from node " + std::to_string(flat[k + 1]) + " of a run of " +
                 std::to_string(total_) + " nodes");
        list.push_back({flat[k], flat[k + 1]});
      }
      return list;
    };
    for (std::size_t i = 0; i < expected_.size(); ++i) {
      d.expected.push_back(get("expected envelopes"));
      d.early.push_back(get("early envelopes"));
    }
    return d;
  }
  /// Applies a state from read().
  void restore(state d) noexcept {
    next_round_ = d.next_round;
    common_round_ = d.common_round;
    expected_ = std::move(d.expected);
    early_ = std::move(d.early);
    undrained_ = false;
  }

  /// Is the envelope on route r lost (injected loss: a rule every party evaluates)?
  template <class Net>
  static bool lost_on(const Net& net, const route& r) {
    if constexpr (requires { net.lost(r); }) return net.lost(r);
    else return false;
  }

 private:
  /// Node i expects envelope a, unless it came early (then it is crossed off the early list).
  void expect(std::size_t i, const awaited& a) {
    auto& early = early_[i];
    const auto it = std::find(early.begin(), early.end(), a);
    if (it != early.end()) early.erase(it);
    else expected_[i].push_back(a);
  }

  /// Cross node i's taken envelopes off its expected list. One of a round after `t` (node i's
  /// round; a sender ahead of it) goes on its early list if the schedule lists the sender for
  /// that round; any other it did not expect (a sender the schedule does not list, or an envelope
  /// taken twice) is a transport_error.
  template <class S>
  void settle(const S& sched, std::size_t i, std::uint32_t t, const inbox& got, const char* where) {
    auto& ex = expected_[i];
    const auto me = static_cast<std::uint32_t>(first_ + i);
    for (const auto& env : got.envelopes) {
      const awaited a{env.round, env.from};
      const auto it = std::find(ex.begin(), ex.end(), a);
      if (it != ex.end()) {
        ex.erase(it);
        continue;
      }
      bool listed = false;
      if (env.round > t && t != all_rounds && std::find(early_[i].begin(), early_[i].end(), a) == early_[i].end()) {
        in_edges_of(sched, env.round, me, drain_rows_);
        for (const auto& e : drain_rows_) listed |= e.from == env.from && e.from != me;
      }
      if (!listed)
        throw transport_error(std::string(where) + ": node " + std::to_string(me) + " received node " +
                              std::to_string(env.from) + "'s envelope of round " + std::to_string(env.round) +
                              ", which its schedule does not list for that round (or it came twice)");
      early_[i].push_back(a);
    }
  }

  std::uint32_t first_ = 0;
  std::size_t total_ = 0;
  std::vector<std::vector<awaited>> expected_;  ///< per node: envelopes sent to it, not yet mixed
  std::vector<std::vector<awaited>> early_;     ///< per node: mixed before its round came (asynchronous)
  std::vector<std::vector<awaited>> ahead_;     ///< drain: the envelopes of rounds the node has not run
  std::vector<awaited> must_;                   ///< take()'s must list (scratch)
  std::vector<in_edge> drain_rows_;
  std::vector<std::uint32_t> mine_;
  std::uint32_t next_round_ = 0;                ///< the round after the last deferred round
  std::uint32_t common_round_ = 0;              ///< common_round()
  std::uint32_t last_ = 0;                      ///< drain: the largest count of rounds posted
  bool undrained_ = false;
  double wait_seconds_ = 0.0;
};

}  // namespace v0
}  // namespace sparsepush
