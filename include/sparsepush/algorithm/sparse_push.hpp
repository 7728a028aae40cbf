// sparsepush/algorithm/sparse_push.hpp: Sparse-Push and everything that is a configuration of it
// (docs/design/algorithms.md): one round at every node i, with the phase active in round t,
//   1. local update:  p_i = oracle(xh_i),  x_i' = x_i - gamma p_i          (if the phase trains)
//   2. communication: v_i = x_i' + e_i,  q_i = C(v_i),  e_i <- v_i - q_i,  push q_i, u_i, W[r][i]
//   3. gossip:        x_i <- x_i' + eta (sum_j W_ij q_j - q_i),  u_i <- u_i + eta (sum_j W_ij u_j - u_i)
// SGP = identity C, eta = 1; D-PSGD = SGP on a symmetric doubly stochastic schedule;
// DeepSqueeze = SP on a symmetric doubly stochastic schedule (u stays 1); SCSP = phases. In exact
// phases (identity in full precision) the residual is left alone: x_i <- sum_j W_ij x_j.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <type_traits>
#include <string>
#include <vector>

#include "../gossip/group.hpp"
#include "../topology/parse.hpp"
#include "../topology/validate.hpp"
#include "../transport/loopback.hpp"
#include "oracle.hpp"
#include "phases.hpp"

namespace sparsepush {
inline namespace v0 {

/// Settings of a Sparse-Push run that are not the phases.
struct sparse_push_options {
  std::size_t threads = 1;  ///< worker threads for per-node work (results do not depend on it)
  std::uint64_t seed = 0;               ///< keys random compressors (with node and round)
  /// Message loss, tracing and mode of its own loopback (the lockstep round passes messages by
  /// reference unless `encoded` is asked for: for_lockstep()).
  loopback_options network{};
  /// What the nodes do about lost envelopes (gossip/push_sum_node.hpp); only matters when the network
  /// loses some (loopback_options::drop_probability, mpi_options::drop_probability).
  loss_recovery recovery = loss_recovery::none;
  /// How long a node waits for its in-neighbours (gossip/policy.hpp). Every policy but lockstep
  /// runs deferred rounds: its own loopback then copies messages (the network's mode, unless
  /// `encoded` is asked for), and an MPI network must be built with the same policy.
  wait_policy policy{};
  /// Deferred rounds: a node whose push-sum weight is below this floor scales its local step by
  /// u_i / floor (gossip_options::step_weight_floor: why, and 0 to turn it off).
  double step_weight_floor = gossip_options::default_step_weight_floor;
};

/// Nodes running Sparse-Push (or SGP, D-PSGD, DeepSqueeze, SCSP), over any tensor type (or an
/// element type, meaning std::vector of it), any compressor type C (the phases' compressor), any
/// schedule type S and any network type Net. By default all n nodes run in this process over
/// their own loopback network; given a network (e.g. MPI), this process runs the nodes the
/// network places here, [net.first_node(), net.first_node() + net.local_nodes()).
template <class X, class C = any_compressor, class S = any_schedule, class Net = loopback_network>
class sparse_push {
  // first, so that a type that misses a member fails here, with one line naming it
  static_assert(detail::require_algorithm_tensor<algorithm_tensor_t<X>>());
  static_assert(detail::require_compressor<C, tensor_value_t<algorithm_tensor_t<X>>>());
  static_assert(detail::require_schedule<S>());
  static_assert(detail::require_network<Net>());

 public:
  /// The model's tensor type (X, or std::vector<X> for an element type X).
  using tensor_type = algorithm_tensor_t<X>;
  /// The element type, float or double.
  using T = tensor_value_t<tensor_type>;
  /// The element type (same as T).
  using value_type = T;
  /// The compressor type of the phases.
  using compressor_type = C;
  /// The mixing schedule type.
  using schedule_type = S;
  /// The phase schedule type.
  using phases_type = basic_phase_schedule<C>;

  /// All nodes in this process, over a loopback network of its own.
  sparse_push(std::vector<tensor_type> x0, S sched, phases_type phases, sparse_push_options opt = {})
    requires std::is_same_v<Net, loopback_network>
      : sched_(std::move(sched)), phases_(std::move(phases)),
        group_(check_nodes(std::move(x0), sched_),
               gossip_options{1.0, needs_feedback(phases_), opt.threads, opt.seed, 0, 0, opt.recovery, opt.policy,
                              opt.step_weight_floor}),
        own_net_(std::make_unique<loopback_network>(group_.num_nodes(),
                                                    opt.policy.lockstep() ? for_lockstep(opt.network) : opt.network)),
        net_(own_net_.get()) {
    validate_schedule(sched_);
  }

  /// The nodes that `net` places in this process (x0 holds their initial models, in order);
  /// the network must outlive the algorithm. opt.network is not used.
  sparse_push(std::vector<tensor_type> x0, S sched, phases_type phases, Net& net, sparse_push_options opt = {})
      : sched_(std::move(sched)), phases_(std::move(phases)),
        group_(check_block(std::move(x0), sched_, net),
               gossip_options{1.0, needs_feedback(phases_), opt.threads, opt.seed, net.first_node(), net.num_nodes(),
                              opt.recovery, opt.policy, opt.step_weight_floor}),
        net_(&net) {
    validate_schedule(sched_);
  }

  /// One round t with learning rate gamma. The oracle gets xh_i (x_i itself where u_i is exactly
  /// 1, else a copy in a buffer of the thread that runs node i; either is valid during the call
  /// only) and writes every element of p_i into a buffer of node i (the group needs every p_i
  /// before any node steps); the buffers are allocated at the first round that trains.
  void round(std::uint32_t t, const gradient_oracle<T>& oracle, double gamma) {
    if (!phases_.at(t).local_step) {
      round(t, std::span<const std::span<const T>>(), gamma);
      return;
    }
    if (dirs_.size() != group_.num_nodes()) {
      dirs_.assign(group_.num_nodes(), std::vector<T>(group_.dim()));
      xh_.assign(group_.workers(), std::vector<T>(group_.dim()));
    }
    group_.for_each_node([&](std::size_t i, std::size_t w) {
      // x / u is x itself where u is exactly 1 (as a doubly stochastic schedule keeps it): then the
      // oracle reads x in place (nothing writes x while the oracles run) and no pass copies it
      const auto& node = group_.node(i);
      std::span<const T> model = node.x();
      if (node.u() != 1.0) {
        group_.debiased(i, xh_[w]);
        model = xh_[w];
      }
      oracle(static_cast<std::uint32_t>(group_.first_node() + i), t, model, dirs_[i]);
    });
    views_.assign(dirs_.begin(), dirs_.end());
    round(t, std::span<const std::span<const T>>(views_), gamma);
  }

  /// One round t with the local directions p_i computed by the caller (one per node this process
  /// runs, e.g. views of its optimizer's buffers: no copy is kept); ignored in phases without a
  /// local step. Use for_each_node and model() to compute them on the algorithm's threads.
  void round(std::uint32_t t, std::span<const std::span<const T>> directions, double gamma) {
    round(t, directions, gamma, t);
  }
  /// The same with the phase of round `phase_round` (the asynchronous trainer: a node that runs
  /// ahead of the others takes more rounds of the training phase than the phase schedule counts),
  /// and, with wait_all, a deferred round that waits for every envelope of round t (lockstep's
  /// rule: the trainer's rounds after training, SCSP's final gossip, which a node must not run
  /// ahead of its peers). Under a deferred policy, a round that starts a phase first drains the
  /// envelopes of the previous one (collective: every process reaches the same phase start), so
  /// that every envelope is mixed with the consensus step it was sent with.
  void round(std::uint32_t t, std::span<const std::span<const T>> directions, double gamma, std::uint32_t phase_round,
             bool wait_all = false) {
    const auto& ph = phases_.at(phase_round);
    if (group_.in_flight() && &phases_.at(last_phase_round_) != &ph) drain();
    last_phase_round_ = phase_round;
    // Exact phases (identity in full precision, e.g. SCSP's final gossip) are plain push-sum of x:
    // x_i <- sum_j W_ij x_j; the residual is neither sent nor changed.
    const bool exact = exact_phase<T>(ph);
    typename push_sum_group<tensor_type>::step st{ph.eta, {}, gamma, !exact};
    st.fresh_residual = ph.fresh_residual && phases_.start_of(phase_round) == phase_round;
    st.wait_all = wait_all;
    if (ph.local_step) {
      // the group checks the directions (count, sizes, values); it takes none at all as a round
      // without a local step, which this phase is not
      if (directions.empty())
        throw size_error("round " + std::to_string(t) + ": 0 local directions for " +
                         std::to_string(group_.num_nodes()) + " nodes");
      st.direction_views = directions;
    }
    if (exact && ph.exact) group_.round(sched_, identity{}, *net_, t, st);
    else group_.round(sched_, ph.compressor, *net_, t, st);
  }

  /// Mix every envelope in flight (push_sum_group::drain): afterwards the models are those of
  /// lockstep rounds' bookkeeping (sum_i x_i and sum_i u_i exact). Collective over the processes;
  /// a no-op under lockstep. Call it before checkpoints and evaluations (the trainer does).
  void drain() { group_.drain(sched_, *net_); }
  /// Whether envelopes may be in flight (a deferred round ran since the last drain).
  bool in_flight() const noexcept { return group_.in_flight(); }
  /// The waiting policy of the rounds (lockstep unless the options asked for another).
  const wait_policy& policy() const noexcept { return group_.policy(); }
  /// After a drain, the round every node can continue at (push_sum_group::common_round).
  std::uint32_t common_round() const noexcept { return group_.common_round(); }
  /// After a drain, every node continues at `round` (push_sum_group::continue_at; every process).
  void continue_at(std::uint32_t round) { group_.continue_at(round); }
  /// Seconds this process's rounds spent receiving (push_sum_group::wait_seconds).
  double wait_seconds() const noexcept { return group_.wait_seconds(); }
  /// The largest staleness mixed by this process's nodes (receiver's round - sender's round).
  std::uint32_t max_staleness() const noexcept { return group_.max_staleness(); }

  /// Does round t take a local step (its phase trains)?
  bool trains(std::uint32_t t) const { return phases_.at(t).local_step; }
  /// Run f(i, w) for every node this process runs on the algorithm's threads (w in
  /// [0, workers()) names the thread: one scratch buffer per thread is enough).
  template <class F>
    requires std::invocable<F&, std::size_t, std::size_t>
  void for_each_node(F&& f) {
    group_.for_each_node(f);
  }
  /// The number of threads for_each_node() runs on.
  std::size_t workers() const noexcept { return group_.workers(); }

  /// Nodes run by this process (all of them unless a network placed a block here); the
  /// accessors below take local indices, node first_node() + i of the schedule.
  std::size_t num_nodes() const noexcept { return group_.num_nodes(); }
  /// The schedule's index of local node 0.
  std::uint32_t first_node() const noexcept { return group_.first_node(); }
  /// The number of nodes of the whole run (every process).
  std::size_t total_nodes() const noexcept { return group_.total_nodes(); }
  /// The number of elements d of the model.
  std::size_t dim() const noexcept { return group_.dim(); }
  /// The de-biased model xh_i = x_i / u_i, as the tensor type.
  tensor_type model(std::size_t i) const { return group_.node(i).model(); }
  /// The de-biased model xh_i = x_i / u_i into out.
  void model(std::size_t i, std::span<T> out) const { group_.debiased(i, out); }
  /// The push-sum state of this process's nodes (x_i, u_i, e_i).
  const push_sum_group<tensor_type>& group() const noexcept { return group_; }
  /// The network the nodes send over.
  const Net& network() const noexcept { return *net_; }
  /// The phase schedule.
  const phases_type& phases() const noexcept { return phases_; }
  /// The mixing schedule (who sends to whom, with which shares, in each round).
  const S& mixing_schedule() const noexcept { return sched_; }
  /// Bytes of state per node: x, e (when kept), u, the message, inbox and scratch.
  std::size_t state_bytes(std::size_t i) const { return group_.state_bytes(i); }
  /// Bytes sent by the nodes of this process (all nodes over a loopback).
  std::size_t bytes_sent() const noexcept { return net_->total_bytes(); }
  /// Envelopes sent by the nodes of this process.
  std::size_t messages_sent() const noexcept { return net_->total_messages(); }
  /// Envelopes the network lost, of those sent by this process's nodes (0 for a network that
  /// loses none).
  std::size_t messages_dropped() const noexcept {
    if constexpr (requires { net_->messages_dropped(); }) return net_->messages_dropped();
    else return 0;
  }
  /// sum_i u_i over this process's nodes (n, for all nodes, while no mass is lost).
  double weight_mass() const noexcept { return group_.weight_mass(); }
  /// Checkpoint this process's nodes (x, u, e), its network's byte ledger and, under a deferred
  /// policy, what its nodes still expect (push_sum_group::save_deferred) (section "SPSH").
  /// Call between rounds; the caller keeps the round number and its own state (data order,
  /// optimizer) beside it.
  void save(checkpoint_writer& w) const {
    w.section("SPSH");
    group_.save(w);
    net_->save(w);
    if (!group_.policy().lockstep()) group_.save_deferred(w);  // what a deferred policy still expects
  }
  /// Restore what save() wrote: every node and the ledger, or (on a truncated, corrupted or
  /// mismatched checkpoint: checkpoint_error) nothing.
  void restore(checkpoint_reader& r) {
    r.section("SPSH");
    auto nodes = group_.read_state(r);
    auto ledger = net_->read_ledger(r);
    std::optional<typename push_sum_group<tensor_type>::deferred_state> deferred;
    if (!group_.policy().lockstep()) deferred = group_.read_deferred(r);
    group_.restore(nodes);
    net_->restore_ledger(std::move(ledger));
    if (deferred) group_.restore_deferred(std::move(*deferred));
  }

  /// What the messages sent would cost as fp32 vectors: 4 d bytes each.
  std::size_t full_precision_bytes() const noexcept { return 4 * dim() * net_->total_messages(); }

 private:
  /// Error feedback is kept unless every phase sends values exactly (identity in the tensor's
  /// own precision), where e would stay 0: SGP and D-PSGD then keep no residual.
  static bool needs_feedback(const phases_type& ps) {
    for (const auto& ph : ps.phases())
      if (!exact_phase<T>(ph)) return true;
    return false;
  }

  static std::vector<tensor_type> check_block(std::vector<tensor_type> x0, const S& s, const Net& net) {
    if (s.num_nodes() != net.num_nodes())
      throw schedule_error("schedule has " + std::to_string(s.num_nodes()) + " nodes, the network " +
                           std::to_string(net.num_nodes()));
    if (x0.size() != net.local_nodes())
      throw config_error("the network places " + std::to_string(net.local_nodes()) + " nodes here (from node " +
                         std::to_string(net.first_node()) + ") but " + std::to_string(x0.size()) +
                         " models were given");
    return x0;
  }
  static std::vector<tensor_type> check_nodes(std::vector<tensor_type> x0, const S& s) {
    if (s.num_nodes() != x0.size())
      throw schedule_error("schedule has " + std::to_string(s.num_nodes()) + " nodes but " +
                           std::to_string(x0.size()) + " models were given");
    return x0;
  }

  S sched_;
  phases_type phases_;
  push_sum_group<tensor_type> group_;
  std::unique_ptr<loopback_network> own_net_;
  Net* net_ = nullptr;
  std::vector<std::vector<T>> dirs_;  ///< p_i per node (oracle rounds only)
  std::vector<std::vector<T>> xh_;    ///< xh_i per thread (oracle rounds only)
  std::vector<std::span<const T>> views_;
  std::uint32_t last_phase_round_ = 0;  ///< the phase round of the last round (deferred drains)
};

}  // namespace v0
}  // namespace sparsepush
