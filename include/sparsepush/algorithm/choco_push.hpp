// sparsepush/algorithm/choco_push.hpp: CHOCO-Push (docs/design/algorithms.md, "Nodes that agree"),
// CHOCO-SGD's compressed differences over push-sum on any column-stochastic schedule, directed and
// time-varying ones included: each directed link keeps a reference that both its ends hold, a node
// sends C(x_i' - h[i->r]) on each out-link, and mixes with consensus step gamma_c. One node's
// state and steps are gossip/choco_push_node.hpp's, the block of nodes a process runs and its
// checkpoint node_block.hpp's; this header holds the settings of a run and its rounds: lockstep,
// or deferred under another waiting policy (gossip/policy.hpp), whose envelopes in flight a
// deferred_ledger keeps and drain() mixes.
#pragma once

#include <algorithm>
#include <cstdint>
#include <limits>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "../compress/compose.hpp"
#include "../gossip/choco_push_node.hpp"
#include "../gossip/deferred_ledger.hpp"
#include "../gossip/group_options.hpp"
#include "../gossip/lockstep.hpp"
#include "../topology/parse.hpp"
#include "../topology/validate.hpp"
#include "../transport/loopback.hpp"
#include "node_block.hpp"
#include "oracle.hpp"

namespace sparsepush {
inline namespace v0 {

/// Settings of a CHOCO-Push run over compressor type C.
template <class C>
struct basic_choco_push_options {
  double consensus_step = 1.0;             ///< gamma_c in (0, 1]: shrink it with the share a compressor keeps
  C compressor = detail::default_compressor<C>();  ///< C applied to x_i' - h[i->r]
  std::size_t threads = 1;  ///< worker threads for per-node work (results do not depend on it)
  std::uint64_t seed = 0;  ///< keys the compressors' random streams with (node, round, receiver)
  loopback_options network{};  ///< settings of the loopback network a single-process run builds
  /// Every node of the run starts from the same model (as sparsepush-train's do): a link's
  /// reference then starts there, which both its ends know, instead of at 0, so the first messages
  /// carry the change since the start and not the model. The nodes of this process must then be
  /// given equal models (config_error otherwise); over MPI every rank must give the same one.
  bool common_start = false;
  /// Final rounds from this phase round on (none by default): no local step, final_compressor
  /// and final_consensus_step instead (identity and 1: push-sum averaging of the models, which the
  /// links' references follow, so that the nodes end at the average).
  std::uint32_t final_from = std::numeric_limits<std::uint32_t>::max();
  C final_compressor = detail::default_compressor<C>();  ///< C of the final rounds
  double final_consensus_step = 1.0;  ///< gamma_c of the final rounds, in (0, 1]
  /// How long a node waits for its in-neighbours (gossip/policy.hpp). Every policy but lockstep
  /// runs deferred rounds: its own loopback then copies messages, and an MPI network must be
  /// built with the same policy.
  wait_policy policy{};
  /// Deferred rounds: a node whose weight u_i is below this floor scales its step by u_i / floor
  /// (gossip_options::step_weight_floor), in [0, 1].
  double step_weight_floor = gossip_options::default_step_weight_floor;
};

/// Settings of a CHOCO-Push run over the runtime-chosen compressor.
using choco_push_options = basic_choco_push_options<any_compressor>;

/// Nodes running CHOCO-Push: choco_push_node's on a thread pool. By default all n nodes run in
/// this process over a loopback of their own; given a network (e.g. MPI), this process runs the
/// block of nodes the network places here (accessor indices are local: node first_node() + i).
/// Every message must arrive: a network that loses messages is refused (a lost message would
/// leave the two ends of a link with different references).
template <class X, class C = any_compressor, class S = any_schedule, class Net = loopback_network>
class choco_push : public node_block<choco_push_node<algorithm_tensor_t<X>>, S, Net> {
  static_assert(detail::require_algorithm_tensor<algorithm_tensor_t<X>>());
  static_assert(detail::require_compressor<C, tensor_value_t<algorithm_tensor_t<X>>>());
  static_assert(detail::require_schedule<S>());
  static_assert(detail::require_network<Net>());
  using block = node_block<choco_push_node<algorithm_tensor_t<X>>, S, Net>;

 public:
  /// The model's tensor type (X, or std::vector<X> for an element type X).
  using tensor_type = algorithm_tensor_t<X>;
  /// The element type, float or double.
  using T = tensor_value_t<tensor_type>;
  /// The settings type.
  using options_type = basic_choco_push_options<C>;
  /// One node.
  using node_type = choco_push_node<tensor_type>;

  /// All nodes in this process, over a loopback network of its own.
  choco_push(std::vector<tensor_type> x0, S sched, options_type opt = {})
    requires std::is_same_v<Net, loopback_network>
      : block(std::move(sched), opt.threads, x0.size(), opt.policy.lockstep() ? for_lockstep(opt.network) : opt.network),
        opt_(std::move(opt)) {
    init(std::move(x0), 0);
  }

  /// The nodes that `net` places in this process (x0: their initial models, in order).
  choco_push(std::vector<tensor_type> x0, S sched, Net& net, options_type opt = {})
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
                      "CHOCO-Push needs every message delivered (both ends of a link keep its reference, which a lost "
                      "message would set apart): run it on a network without loss");
    if constexpr (std::is_same_v<C, any_compressor>)
      for (const auto* c : {&opt_.compressor, &opt_.final_compressor})
        if (const auto why = not_contracting(*c); !why.empty())
          throw config_error("CHOCO-Push needs a compressor that shrinks what it leaves out (top-k, threshold, sign, "
                             "biased random-k, +int8): " + why);
    if (!(opt_.final_consensus_step > 0.0 && opt_.final_consensus_step <= 1.0))
      throw config_error("CHOCO-Push final consensus step must be in (0, 1], got " + std::to_string(opt_.final_consensus_step));
    if (!(opt_.step_weight_floor >= 0.0 && opt_.step_weight_floor <= 1.0))
      throw config_error("CHOCO-Push step_weight_floor must be in [0, 1], got " + std::to_string(opt_.step_weight_floor));
    std::shared_ptr<const std::vector<T>> start;
    if (opt_.common_start) {
      const auto s0 = as_const_span(x0[0]);
      for (std::size_t j = 1; j < x0.size(); ++j) {
        const auto sj = as_const_span(x0[j]);
        if (!std::equal(sj.begin(), sj.end(), s0.begin()))
          throw config_error("CHOCO-Push with common_start: node " + std::to_string(first + j) + " starts from another model "
                             "than node " + std::to_string(first) + " (the links' references start at the common model)");
      }
      start = std::make_shared<const std::vector<T>>(s0.begin(), s0.end());
    }
    nodes_.reserve(x0.size());
    for (std::size_t j = 0; j < x0.size(); ++j)
      nodes_.emplace_back(std::move(x0[j]), static_cast<std::uint32_t>(first + j), opt_.consensus_step, opt_.seed, start);
    cols_.resize(nodes_.size());
    rows_.resize(nodes_.size());
    ledger_ = deferred_ledger(nodes_.size(), first, net_->num_nodes());
  }

 public:
  /// One round t with learning rate gamma: the oracle gets xh_i (x_i itself where u_i is exactly 1,
  /// else worker w's buffer) and writes p_i into a buffer of node i; a final round asks no oracle.
  void round(std::uint32_t t, const gradient_oracle<T>& oracle, double gamma) {
    if (!trains(t)) return round(t, std::span<const std::span<const T>>(), gamma);  // a final round: no gradient
    const std::size_t n = nodes_.size();
    if (g_.size() != n) {
      g_.assign(n, std::vector<T>(d_));
      xh_.assign(pool_.size(), std::vector<T>(d_));
    }
    pool_.parallel_for_worker(n, [&](std::size_t i, std::size_t w) {
      const auto id = first_ + static_cast<std::uint32_t>(i);
      if (nodes_[i].u() == 1.0) {  // x / u is x itself (a regular schedule keeps u at 1): no copy
        oracle(id, t, nodes_[i].x(), g_[i]);
      } else {
        nodes_[i].debiased(std::span<T>(xh_[w]));
        oracle(id, t, xh_[w], g_[i]);
      }
    });
    views_.assign(g_.begin(), g_.end());
    round(t, std::span<const std::span<const T>>(views_), gamma);
  }

  /// One round t with the local directions p_i computed by the caller, one per node this process
  /// runs (none: a round without local step). Everything is checked before any node changes.
  void round(std::uint32_t t, std::span<const std::span<const T>> directions, double gamma) {
    round(t, directions, gamma, t, false);
  }
  /// The same as phase round `phase` (the trainer's count, which differs from t after a target
  /// stopped training early): from options().final_from on, a final round (no local step, the
  /// final compressor and consensus step). Under a deferred policy, `wait_all` makes the round
  /// wait for every envelope of rounds <= t, as lockstep does (lockstep rounds always do), and
  /// the first final round drains first (collective).
  void round(std::uint32_t t, std::span<const std::span<const T>> directions, double gamma, std::uint32_t phase,
             bool wait_all) {
    const bool last = !trains(phase);
    // the final rounds start with nothing in flight, as sparse_push's phases do: their exact count
    // then holds (a collective drain, at the same round in every process)
    if (last && !final_ && ledger_.in_flight()) drain();
    final_ = last;
    if (last) directions = {};
    const C& comp = last ? opt_.final_compressor : opt_.compressor;
    const double gc = last ? opt_.final_consensus_step : opt_.consensus_step;
    const std::size_t n = nodes_.size();
    if (!directions.empty() && directions.size() != n)
      throw size_error("round " + std::to_string(t) + ": " + std::to_string(directions.size()) +
                       " local directions for " + std::to_string(n) + " nodes");
    auto dir = [&](std::size_t i) { return directions.empty() ? std::span<const T>() : directions[i]; };
    const std::size_t total = net_->num_nodes();
    if (!opt_.policy.lockstep()) {
      if constexpr (deferred_network<Net>) return deferred_round(t, dir, gamma, comp, gc, wait_all);
      else throw config_error("policy " + to_string(opt_.policy) + " needs a network whose endpoints have take() and which "
                              "counts posted rounds (loopback, MPI); this network runs lockstep rounds only");
    }
    detail::lockstep_round(
        pool_, n, [&](std::size_t i) { return net_->endpoint(first_ + static_cast<std::uint32_t>(i)); },
        [&](std::size_t i, std::size_t) {
          const auto id = first_ + static_cast<std::uint32_t>(i);
          sched_.out_edges(t, id, cols_[i]);
          in_edges_of(sched_, t, id, rows_[i]);
          nodes_[i].check(t, comp, dir(i), gamma, cols_[i], total);
        },
        [&](std::size_t i, std::size_t w) { nodes_[i].step_and_compress(comp, t, dir(i), gamma, cols_[i], ws_[w]); },
        [&](std::size_t i, auto& ep) { nodes_[i].post(ep, t); },
        [&](std::size_t i, auto& ep) { nodes_[i].collect(ep, t, rows_[i]); },
        [&](std::size_t i, std::size_t) { nodes_[i].mix(gc); });
  }

  /// Mix every envelope in flight (push_sum_group::drain does the same for push-sum): afterwards
  /// sum_i x_i and sum_i u_i are exact and both ends of every link hold the same reference.
  /// Collective over the processes of the run; a no-op in lockstep.
  void drain() {
    if (opt_.policy.lockstep()) return;
    if constexpr (!deferred_network<Net>) {
      throw config_error("drain: this network runs lockstep rounds only (no take() or posted_rounds())");
    } else {
      ledger_.drain_take(sched_, *net_, nodes_);
      const std::uint32_t next = ledger_.next_round(), t = next ? next - 1 : 0;
      detail::mix_every_node(pool_, nodes_.size(),
                             [&](std::size_t i, std::size_t) { nodes_[i].mix_taken(t, ledger_.expected(i), true); });
      ledger_.drained(*net_);
    }
  }
  /// Whether envelopes may be in flight (a deferred round ran since the last drain).
  bool in_flight() const noexcept { return ledger_.in_flight(); }
  /// The waiting policy of the rounds.
  const wait_policy& policy() const noexcept { return opt_.policy; }
  /// After a drain, the round every node can continue at (push_sum_group::common_round).
  std::uint32_t common_round() const noexcept { return ledger_.common_round(); }
  /// After a drain, every node continues at `round` (push_sum_group::continue_at; every process).
  void continue_at(std::uint32_t round) { ledger_.continue_at(round); }
  /// The envelopes local node i still expects (sent to it in rounds it has run, not yet taken).
  std::span<const awaited> expected(std::size_t i) const { return ledger_.expected(i); }
  /// The largest staleness mixed by this process's nodes (receiver's round - sender's round).
  std::uint32_t max_staleness() const noexcept {
    std::uint32_t m = 0;
    for (const auto& nd : nodes_) m = std::max(m, nd.max_staleness());
    return m;
  }

  /// Checkpoint this process's nodes, every link reference, and its network's byte ledger
  /// (section "CHPU"), after what a deferred policy still expects ("DEFR"). Call between rounds,
  /// after drain() under a deferred policy (config_error otherwise).
  void save(checkpoint_writer& w) const {
    if (!opt_.policy.lockstep()) ledger_.save(w, "CHOCO-Push");
    this->save_block(w, "CHPU");
  }
  /// Restore what save() wrote: every node, the ledger and what the nodes expect, or nothing
  /// (checkpoint_error).
  void restore(checkpoint_reader& r) {
    std::optional<deferred_ledger::state> deferred;
    if (!opt_.policy.lockstep()) deferred = ledger_.read(r);
    this->restore_block(r, "CHPU", "CHOCO-Push");
    if (deferred) ledger_.restore(std::move(*deferred));
  }

  /// Does phase round `phase` take a local step (it comes before the final rounds)?
  bool trains(std::uint32_t phase) const noexcept { return phase < opt_.final_from; }
  /// The settings the run was built with.
  const options_type& options() const noexcept { return opt_; }
  /// Node i's de-biased model x_i / u_i, as the tensor type.
  tensor_type model(std::size_t i) const {
    tensor_type out = nodes_.at(i).tensor();
    nodes_[i].debiased(as_span(out));
    return out;
  }
  /// Node i's de-biased model x_i / u_i into out.
  void model(std::size_t i, std::span<T> out) const { nodes_.at(i).debiased(out); }

 private:
  /// One deferred round t (see the header comment): every node checked first (a refused round
  /// changes nothing), then local step (scaled at a node below the weight floor) and compress,
  /// post and expect, take what the policy allows, and mix it link by link in order.
  template <class Dir>
  void deferred_round(std::uint32_t t, Dir&& dir, double gamma, const C& comp, double gc, bool wait_all) {
    const std::size_t n = nodes_.size(), total = net_->num_nodes();
    ledger_.check(*net_, opt_.policy, t);
    const double b = opt_.step_weight_floor;
    auto gamma_of = [&](std::size_t i) { return nodes_[i].u() < b ? gamma * (nodes_[i].u() / b) : gamma; };
    pool_.parallel_for_worker(n, [&](std::size_t i, std::size_t) {
      const auto id = first_ + static_cast<std::uint32_t>(i);
      sched_.out_edges(t, id, cols_[i]);
      in_edges_of(sched_, t, id, rows_[i]);
      nodes_[i].check(t, comp, dir(i), gamma_of(i), cols_[i], total);
    });
    pool_.parallel_for_worker(n, [&](std::size_t i, std::size_t w) {
      nodes_[i].step_and_compress(comp, t, dir(i), gamma_of(i), cols_[i], ws_[w]);
    });
    ledger_.started(t);
    for (std::size_t i = 0; i < n; ++i) {
      auto ep = net_->endpoint(first_ + static_cast<std::uint32_t>(i));
      nodes_[i].post_deferred(ep, t, gc);
      ledger_.expect(*net_, i, t, rows_[i]);
    }
    ledger_.take(sched_, *net_, t, opt_.policy, wait_all, nodes_);
    detail::mix_every_node(pool_, n, [&](std::size_t i, std::size_t) { nodes_[i].mix_taken(t, ledger_.expected(i)); });
  }

  options_type opt_;
  std::vector<std::vector<out_edge>> cols_;  ///< this round's column of each node
  std::vector<std::vector<in_edge>> rows_;   ///< this round's row of each node
  std::vector<std::vector<T>> g_, xh_;       ///< oracle rounds: p_i per node, xh per thread
  std::vector<std::span<const T>> views_;
  deferred_ledger ledger_;                   ///< deferred rounds: the envelopes in flight
  bool final_ = false;                       ///< the last round was a final round
};

}  // namespace v0
}  // namespace sparsepush
