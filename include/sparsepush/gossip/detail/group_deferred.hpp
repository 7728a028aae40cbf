// sparsepush/gossip/detail/group_deferred.hpp: push_sum_group's deferred rounds (every policy but
// lockstep; docs/design/algorithms.md, "Asynchronous and overlapped push-sum") and its drain,
// defined out of the class (gossip/group.hpp includes it): the checks, the posts and the
// envelopes each node expects, the takes the policy allows, the mix of what was taken, and the
// bookkeeping of envelopes that come early or are awaited past a drain.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "../../clock.hpp"
#include "../../config.hpp"
#include "../push_sum_group.hpp"

namespace sparsepush {
inline namespace v0 {

template <class Tensor>
  requires mutable_flat_tensor<Tensor&>
template <class S, class C, class Net, class StepOf>
void push_sum_group<Tensor>::deferred_round(const S& sched, const C& comp, Net& net, std::uint32_t t, const step& st, bool local,
                    StepOf&& step_of) {
  const std::size_t n = nodes_.size(), first = opt_.first_node;
  const auto node_step_of = [&](std::size_t i) { return deferred_step_of(step_of(i), nodes_[i].u()); };
  check_deferred(net, t, st);
  pool_.parallel_for_worker(n, [&](std::size_t i, std::size_t w) {
    const auto ns = node_step_of(i);
    if (local && ns.direction.empty())
      throw size_error("round " + std::to_string(t) + ", node " + std::to_string(first + i) +
                       ": direction has 0 elements, the model has " + std::to_string(d_));
    nodes_[i].prepare(t, comp, cols_[i], ns, total_, ws_[w]);
  });
  pool_.parallel_for_worker(n, [&](std::size_t i, std::size_t w) {
    nodes_[i].step_and_compress(comp, t, node_step_of(i), ws_[w]);
  });
  undrained_ = true;
  deferred_eta_ = st.eta;
  next_round_ = t + 1;
  post_deferred(net, t, st);
  take_deferred(sched, net, t, st);
  mix_all([&](std::size_t i, std::size_t w) { nodes_[i].mix_taken(st.eta, t, blocks_[w]); });
}

template <class Tensor>
  requires mutable_flat_tensor<Tensor&>
template <class Net>
void push_sum_group<Tensor>::check_deferred(const Net& net, std::uint32_t t, const step& st) const {
  if constexpr (requires { net.options().mode; })
    if (net.options().mode == loopback_mode::by_reference)
      throw config_error("policy " + to_string(opt_.policy) +
                         " needs a loopback in copied or encoded mode (by_reference hands out the sender's "
                         "message, which its next round overwrites)");
  if constexpr (requires { net.options().policy; })
    if (!(net.options().policy == opt_.policy))
      throw config_error("the network runs policy " + to_string(net.options().policy) + ", the nodes " +
                         to_string(opt_.policy) + ": give both the same");
  if (t < next_round_ || (undrained_ && t != next_round_))
    throw config_error("deferred round " + std::to_string(t) + " after round " + std::to_string(next_round_) +
                       " - 1: rounds with envelopes in flight run in order (drain() first to jump)");
  if (undrained_ && st.eta != deferred_eta_)
    throw config_error("round " + std::to_string(t) + ": the consensus step changes from " +
                       std::to_string(deferred_eta_) + " to " + std::to_string(st.eta) +
                       " with envelopes in flight: drain() first");
}

template <class Tensor>
  requires mutable_flat_tensor<Tensor&>
template <class Net>
void push_sum_group<Tensor>::post_deferred(Net& net, std::uint32_t t, const step& st) {
  const std::size_t n = nodes_.size(), first = opt_.first_node;
  for (std::size_t i = 0; i < n; ++i) {
    const auto me = static_cast<std::uint32_t>(first + i);
    auto ep = net.endpoint(me);
    nodes_[i].post(ep, t, cols_[i]);
    nodes_[i].stage_own_share(st.eta, nodes_[i].self_share(cols_[i]));
    for (const auto& e : rows_[i])
      if (e.from != me && !lost_on(net, {.round = t, .from = e.from, .to = me})) expect(i, {t, e.from});
  }
}

template <class Tensor>
  requires mutable_flat_tensor<Tensor&>
template <class S, class Net>
void push_sum_group<Tensor>::take_deferred(const S& sched, Net& net, std::uint32_t t, const step& st) {
  const std::size_t n = nodes_.size(), first = opt_.first_node;
  const auto t0 = run_clock::now();
  std::uint32_t upto = 0, through = 0;
  const wait_policy rule = st.wait_all ? wait_policy{} : opt_.policy;
  bool takes = rule.mixes_through(t, upto);
  // asynchronous: whatever has arrived, also of rounds this node has not run yet (a sender
  // ahead of it), so that what waits at a slow receiver is bounded by its senders' windows
  if (rule.kind == wait_kind::asynchronous) upto = all_rounds;
  const bool waits = rule.waits_through(t, through);
  // overlap (and wait_all) take their rounds whatever a delay model says: deterministic on every network
  const std::uint32_t now = rule.kind == wait_kind::overlap || st.wait_all ? all_rounds : t;
  for (std::size_t i = 0; i < n; ++i) {
    if (!takes) break;
    must_.clear();
    if (waits)
      for (const auto& a : expected_[i])
        if (a.round <= through) must_.push_back(a);
    auto ep = net.endpoint(static_cast<std::uint32_t>(first + i));
    nodes_[i].take(ep, now, upto, must_, expected_[i]);
    settle(sched, i, t, ("round " + std::to_string(t)).c_str());
  }
  wait_seconds_ += std::chrono::duration<double>(run_clock::now() - t0).count();
  if (!takes)
    for (std::size_t i = 0; i < n; ++i) nodes_[i].clear_received();
}

template <class Tensor>
  requires mutable_flat_tensor<Tensor&>
inline void push_sum_group<Tensor>::expect(std::size_t i, const awaited& a) {
  auto& early = early_[i];
  const auto it = std::find(early.begin(), early.end(), a);
  if (it != early.end()) early.erase(it);
  else expected_[i].push_back(a);
}

template <class Tensor>
  requires mutable_flat_tensor<Tensor&>
template <class S>
void push_sum_group<Tensor>::settle(const S& sched, std::size_t i, std::uint32_t t, const char* where) {
  auto& ex = expected_[i];
  const auto me = static_cast<std::uint32_t>(opt_.first_node + i);
  for (const auto& env : nodes_[i].received().envelopes) {
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

template <class Tensor>
  requires mutable_flat_tensor<Tensor&>
inline auto push_sum_group<Tensor>::deferred_step_of(typename node_type::step ns, double u) const noexcept ->
  typename node_type::step {
  const double b = opt_.step_weight_floor;
  if (u < b && !ns.direction.empty()) ns.gamma *= u / b;
  return ns;
}

template <class Tensor>
  requires mutable_flat_tensor<Tensor&>
inline void push_sum_group<Tensor>::continue_at(std::uint32_t round) {
  if (undrained_) throw config_error("continue_at(" + std::to_string(round) + "): envelopes are in flight: drain() first");
  if (round < common_round_)
    throw config_error("continue_at(" + std::to_string(round) + "): a node of the run posted round " +
                       std::to_string(common_round_ - 1) + " already");
  for (std::size_t i = 0; i < nodes_.size(); ++i) {
    std::erase_if(expected_[i], [round](const awaited& a) { return a.round < round; });
    std::erase_if(early_[i], [round](const awaited& a) { return a.round < round; });
  }
  next_round_ = round;
}

template <class Tensor>
  requires mutable_flat_tensor<Tensor&>
template <class S, class Net>
void push_sum_group<Tensor>::drain(const S& sched, Net& net) {
  if (opt_.policy.lockstep()) return;
  if constexpr (!deferred_network<Net>) {
    throw config_error("drain: this network runs lockstep rounds only (no take() or posted_rounds())");
  } else {
    const std::size_t n = nodes_.size(), first = opt_.first_node;
    mine_.assign(n, next_round_);
    const std::vector<std::uint32_t> posted = net.posted_rounds(std::span<const std::uint32_t>(mine_));
    if (posted.size() != total_)
      throw size_error("drain: the network counts " + std::to_string(posted.size()) + " nodes, the group " +
                       std::to_string(total_));
    std::uint32_t last = 0;
    for (const auto p : posted) last = std::max(last, p);
    // the envelopes sent in rounds this process has not run (its peers ran ahead) are expected too;
    // once mixed they go on the early list, so that the node does not expect them again when it
    // runs those rounds itself
    ahead_.assign(n, {});
    for (std::size_t i = 0; i < n; ++i) {
      const auto me = static_cast<std::uint32_t>(first + i);
      for (std::uint32_t s = next_round_; s < last; ++s) {
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
      auto ep = net.endpoint(static_cast<std::uint32_t>(first + i));
      // what was posted (a node behind may not have sent what this one expects from it yet: that
      // stays expected, and is mixed when it comes)
      must_.clear();
      for (const auto& a : expected_[i])
        if (a.round < posted[a.from]) must_.push_back(a);
      nodes_[i].take(ep, all_rounds, all_rounds, must_, expected_[i]);
      settle(sched, i, all_rounds, "the drain");
      for (const auto& a : expected_[i])
        if (a.round < posted[a.from])
          throw transport_error("drain: node " + std::to_string(first + i) + " still misses node " +
                                std::to_string(a.from) + "'s envelope of round " + std::to_string(a.round) +
                                " after its take");
      early_[i].insert(early_[i].end(), ahead_[i].begin(), ahead_[i].end());
    }
    wait_seconds_ += std::chrono::duration<double>(run_clock::now() - t0).count();
    const std::uint32_t t = next_round_ ? next_round_ - 1 : 0;
    mix_all([&](std::size_t i, std::size_t w) { nodes_[i].mix_taken(deferred_eta_, t, blocks_[w]); });
    if constexpr (requires { net.finish_sends(); }) net.finish_sends();
    // a closing exchange, as a barrier: no process posts its next round before every process
    // has taken what was posted before the drain (else a fast drainer's next envelopes would
    // reach a node still inside its take, unexpected)
    net.posted_rounds(std::span<const std::uint32_t>(mine_));
    undrained_ = false;
    common_round_ = std::max(last, next_round_);
  }
}

}  // namespace v0
}  // namespace sparsepush
