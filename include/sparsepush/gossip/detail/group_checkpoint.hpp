// sparsepush/gossip/detail/group_checkpoint.hpp: push_sum_group's checkpoint sections, defined out
// of the class (gossip/group.hpp includes it): "GRUP" (first node, total nodes, node count, then
// every node's "NODE") and a deferred group's "DEFR" (its next and common rounds, and per node
// the envelopes it still expects and those it mixed early), each written and read back checked.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "../../checkpoint.hpp"
#include "../../config.hpp"
#include "../push_sum_group.hpp"

namespace sparsepush {
inline namespace v0 {

template <class Tensor>
  requires mutable_flat_tensor<Tensor&>
inline void push_sum_group<Tensor>::save(checkpoint_writer& w) const {
  if (ledger_.in_flight())
    throw config_error("a push-sum group with envelopes in flight cannot be checkpointed: drain() it first");
  w.section("GRUP");
  w.u32(opt_.first_node);
  w.u64(total_);
  w.u64(nodes_.size());
  for (const auto& nd : nodes_) nd.save(w);
}

template <class Tensor>
  requires mutable_flat_tensor<Tensor&>
inline void push_sum_group<Tensor>::save_deferred(checkpoint_writer& w) const {
  ledger_.save(w, "a push-sum group");
}

template <class Tensor>
  requires mutable_flat_tensor<Tensor&>
inline auto push_sum_group<Tensor>::read_deferred(checkpoint_reader& r) const -> deferred_state {
  return ledger_.read(r);
}

template <class Tensor>
  requires mutable_flat_tensor<Tensor&>
inline auto push_sum_group<Tensor>::read_state(checkpoint_reader& r) const
  -> std::vector<typename node_type::saved_state> {
  r.section("GRUP");
  const auto first = r.u32("first node");
  const auto total = r.u64("total nodes");
  const auto count = r.u64("node count");
  if (first != opt_.first_node || total != total_ || count != nodes_.size())
    r.fail("holds nodes [" + std::to_string(first) + ", " + std::to_string(first + count) + ") of " +
           std::to_string(total) + ", this group has [" + std::to_string(opt_.first_node) + ", " +
           std::to_string(opt_.first_node + nodes_.size()) + ") of " + std::to_string(total_));
  std::vector<typename node_type::saved_state> out;
  out.reserve(nodes_.size());
  for (const auto& nd : nodes_) out.push_back(nd.read_state(r));
  return out;
}

}  // namespace v0
}  // namespace sparsepush
