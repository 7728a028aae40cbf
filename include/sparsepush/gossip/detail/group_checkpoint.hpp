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
  if (undrained_)
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
  if (undrained_) throw config_error("a push-sum group with envelopes in flight cannot be checkpointed: drain() it first");
  w.section("DEFR");
  w.u32(next_round_);
  w.u32(common_round_);
  auto put = [&w](const std::vector<awaited>& list) {
    std::vector<std::uint32_t> flat;
    for (const auto& a : list) flat.insert(flat.end(), {a.round, a.from});
    w.values(std::span<const std::uint32_t>(flat));
  };
  for (std::size_t i = 0; i < nodes_.size(); ++i) {
    put(expected_[i]);
    put(early_[i]);
  }
}

template <class Tensor>
  requires mutable_flat_tensor<Tensor&>
inline auto push_sum_group<Tensor>::read_deferred(checkpoint_reader& r) const -> deferred_state {
  r.section("DEFR");
  deferred_state d;
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
  for (std::size_t i = 0; i < nodes_.size(); ++i) {
    d.expected.push_back(get("expected envelopes"));
    d.early.push_back(get("early envelopes"));
  }
  return d;
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
