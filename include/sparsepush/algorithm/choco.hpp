// sparsepush/algorithm/choco.hpp: CHOCO-SGD (Koloskova et al. 2019) on a static, symmetric,
// doubly stochastic W with consensus step gamma_c. Node i keeps x_i, its public copy xp_i and
// s_i = sum_j W_ij xp_j (the O(d) "weighted sum" form; xp and s start at 0):
//   x_i' = x_i - gamma g_i(x_i);  q_i = C(x_i' - xp_i);  xp_i += q_i;
//   s_i += sum_{j in N(i) + {i}} W_ij q_j;  x_i = x_i' + gamma_c (s_i - xp_i).
// The "per_neighbour" form keeps a copy xh_j of every neighbour's public model instead of s_i
// (x_i = x_i' + gamma_c (W_ii xp_i + sum_j W_ij xh_j - xp_i)); same iterates, (deg + 2) d memory.
// One node's state and steps are choco_node.hpp's, the block of nodes a process runs and its
// checkpoint node_block.hpp's; this header holds the settings of a run and the round.
#pragma once

#include <cmath>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "../compress/compose.hpp"
#include "../gossip/lockstep.hpp"
#include "../topology/parse.hpp"
#include "../topology/validate.hpp"
#include "../transport/loopback.hpp"
#include "choco_node.hpp"
#include "node_block.hpp"
#include "oracle.hpp"

namespace sparsepush {
inline namespace v0 {

/// Settings of a CHOCO-SGD run over compressor type C.
template <class C>
struct basic_choco_options {
  double consensus_step = 0.5;             ///< gamma_c in (0, 1]
  C compressor = detail::default_compressor<C>();  ///< C applied to x_i' - xp_i
  /// Keep s_i (weighted_sum, less memory) or one copy per in-neighbour; same results.
  choco_form form = choco_form::weighted_sum;
  std::size_t threads = 1;  ///< worker threads for per-node work (results do not depend on it)
  std::uint64_t seed = 0;  ///< keys the compressors' random streams with (node, round)
  loopback_options network{};  ///< settings of the loopback network a single-process run builds
};

/// Settings of a CHOCO-SGD run over the runtime-chosen compressor.
using choco_options = basic_choco_options<any_compressor>;

/// Nodes running CHOCO-SGD: choco_node's on a thread pool. By default all n nodes run in this
/// process over a loopback of their own; given a network (e.g. MPI), this process runs the block
/// of nodes the network places here (accessor indices are local: node first_node() + i).
template <class X, class C = any_compressor, class S = any_schedule, class Net = loopback_network>
class choco : public node_block<choco_node<algorithm_tensor_t<X>>, S, Net> {
  // first, so that a type that misses a member fails here, with one line naming it
  static_assert(detail::require_algorithm_tensor<algorithm_tensor_t<X>>());
  static_assert(detail::require_compressor<C, tensor_value_t<algorithm_tensor_t<X>>>());
  static_assert(detail::require_schedule<S>());
  static_assert(detail::require_network<Net>());
  using block = node_block<choco_node<algorithm_tensor_t<X>>, S, Net>;

 public:
  /// The model's tensor type (X, or std::vector<X> for an element type X).
  using tensor_type = algorithm_tensor_t<X>;
  /// The element type, float or double.
  using T = tensor_value_t<tensor_type>;
  /// The settings type.
  using options_type = basic_choco_options<C>;

  /// All nodes in this process, over a loopback network of its own.
  choco(std::vector<tensor_type> x0, S sched, options_type opt = {})
    requires std::is_same_v<Net, loopback_network>
      : block(std::move(sched), opt.threads, x0.size(), for_lockstep(opt.network)), opt_(std::move(opt)) {
    init(std::move(x0), 0);
  }

  /// The nodes that `net` places in this process (x0: their initial models, in order).
  choco(std::vector<tensor_type> x0, S sched, Net& net, options_type opt = {})
      : block(std::move(sched), opt.threads, net, x0.size()), opt_(std::move(opt)) {
    init(std::move(x0), net.first_node());
  }

 private:
  using block::d_;
  using block::first_;
  using block::net_;
  using block::nodes_;
  using block::pool_;
  using block::sched_;
  using block::ws_;

  void init(std::vector<tensor_type> x0, std::uint32_t first) {
    this->check_block(x0, first,
                      "CHOCO-SGD needs every message delivered (each node keeps copies of its neighbours' public models, "
                      "which a lost message would corrupt): run it on a network without loss");
    if (sched_.period() != 1) throw schedule_error("CHOCO-SGD needs a static schedule (period 1)");
    const std::size_t n = net_->num_nodes();
    std::vector<std::vector<out_edge>> cols(n);
    for (std::uint32_t j = 0; j < n; ++j) sched_.out_edges(0, j, cols[j]);
    // symmetric: W_ij == W_ji for every edge, so a sender's column is its receivers' row
    for (std::uint32_t j = 0; j < n; ++j)
      for (const auto& e : cols[j]) {
        double back = -1.0;
        for (const auto& f : cols[e.to])
          if (f.to == j) back = f.share;
        if (std::abs(back - e.share) > column_sum_tolerance)
          throw schedule_error("CHOCO-SGD needs a symmetric W: W[" + std::to_string(e.to) + "][" +
                               std::to_string(j) + "] != W[" + std::to_string(j) + "][" +
                               std::to_string(e.to) + "]");
      }
    nodes_.reserve(x0.size());
    for (std::size_t j = 0; j < x0.size(); ++j)
      nodes_.emplace_back(std::move(x0[j]), static_cast<std::uint32_t>(first + j), std::move(cols[first + j]),
                          opt_.form, opt_.consensus_step, opt_.seed);
  }

 public:
  /// One round t with learning rate gamma: the oracle gets x_i (worker w's call: its own
  /// scratch) and writes g_i into a buffer of node i.
  void round(std::uint32_t t, const gradient_oracle<T>& oracle, double gamma) {
    const std::size_t n = nodes_.size();
    if (g_.size() != n) g_.assign(n, std::vector<T>(d_));
    pool_.parallel_for(n, [&](std::size_t i) {
      oracle(first_ + static_cast<std::uint32_t>(i), t, nodes_[i].x(), g_[i]);
    });
    views_.assign(g_.begin(), g_.end());
    round(t, std::span<const std::span<const T>>(views_), gamma);
  }

  /// One round t with the local directions g_i computed by the caller (one per node this process
  /// runs; e.g. views of its optimizer's buffers, computed with for_each_node and model()).
  void round(std::uint32_t t, std::span<const std::span<const T>> directions, double gamma) {
    const std::size_t n = nodes_.size();
    if (directions.size() != n)
      throw size_error("round " + std::to_string(t) + ": " + std::to_string(directions.size()) +
                       " local directions for " + std::to_string(n) + " nodes");
    detail::lockstep_round(
        pool_, n, [&](std::size_t i) { return net_->endpoint(first_ + static_cast<std::uint32_t>(i)); },
        [&](std::size_t i, std::size_t) { nodes_[i].check(t, opt_.compressor, directions[i], gamma); },
        [&](std::size_t i, std::size_t w) {
          nodes_[i].local_step_and_compress(opt_.compressor, t, directions[i], gamma, ws_[w]);
        },
        [&](std::size_t i, auto& ep) { nodes_[i].post(ep, t); }, [&](std::size_t i, auto& ep) { nodes_[i].collect(ep, t); },
        [&](std::size_t i, std::size_t) { nodes_[i].mix(); });
  }

  /// Checkpoint this process's nodes and its network's byte ledger (section "CHCO").
  void save(checkpoint_writer& w) const { this->save_block(w, "CHCO"); }
  /// Restore what save() wrote: every node and the ledger, or nothing (checkpoint_error).
  void restore(checkpoint_reader& r) { this->restore_block(r, "CHCO", "CHOCO"); }

  /// Every CHOCO round trains.
  bool trains(std::uint32_t) const noexcept { return true; }
  /// Node i's model x_i, as the tensor type.
  tensor_type model(std::size_t i) const { return nodes_.at(i).tensor(); }
  /// Node i's model x_i into out.
  void model(std::size_t i, std::span<T> out) const {
    detail::copy_model<T>(nodes_.at(i).x(), out);
  }

 private:
  options_type opt_;
  std::vector<std::vector<T>> g_;  ///< g_i per node (oracle rounds only)
  std::vector<std::span<const T>> views_;
};

}  // namespace v0
}  // namespace sparsepush
