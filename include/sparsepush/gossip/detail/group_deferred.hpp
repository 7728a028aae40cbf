// sparsepush/gossip/detail/group_deferred.hpp: push_sum_group's deferred rounds (every policy but
// lockstep; docs/design/algorithms.md, "Asynchronous and overlapped push-sum") and its drain,
// defined out of the class (gossip/group.hpp includes it): the checks, the posts, the takes the
// policy allows and the mix of what was taken. The envelopes each node expects, takes early or
// awaits past a drain are the group's deferred_ledger's (gossip/deferred_ledger.hpp).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

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
  ledger_.started(t);
  deferred_eta_ = st.eta;
  post_deferred(net, t, st);
  ledger_.take(sched, net, t, opt_.policy, st.wait_all, nodes_);
  mix_all([&](std::size_t i, std::size_t w) { nodes_[i].mix_taken(st.eta, t, blocks_[w]); });
}

template <class Tensor>
  requires mutable_flat_tensor<Tensor&>
template <class Net>
void push_sum_group<Tensor>::check_deferred(const Net& net, std::uint32_t t, const step& st) const {
  ledger_.check(net, opt_.policy, t);
  if (ledger_.in_flight() && st.eta != deferred_eta_)
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
    auto ep = net.endpoint(static_cast<std::uint32_t>(first + i));
    nodes_[i].post(ep, t, cols_[i]);
    nodes_[i].stage_own_share(st.eta, nodes_[i].self_share(cols_[i]));
    ledger_.expect(net, i, t, rows_[i]);
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
template <class S, class Net>
void push_sum_group<Tensor>::drain(const S& sched, Net& net) {
  if (opt_.policy.lockstep()) return;
  if constexpr (!deferred_network<Net>) {
    throw config_error("drain: this network runs lockstep rounds only (no take() or posted_rounds())");
  } else {
    ledger_.drain_take(sched, net, nodes_);
    const std::uint32_t next = ledger_.next_round(), t = next ? next - 1 : 0;
    mix_all([&](std::size_t i, std::size_t w) { nodes_[i].mix_taken(deferred_eta_, t, blocks_[w]); });
    ledger_.drained(net);
  }
}

}  // namespace v0
}  // namespace sparsepush
