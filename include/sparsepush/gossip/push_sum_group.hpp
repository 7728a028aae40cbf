// sparsepush/gossip/push_sum_group.hpp: n push-sum nodes (node.hpp) exchanging compressed messages over a
// schedule and a loopback network: the communication and gossip phases of Sparse-Push (docs/design/algorithms.md, steps 2-3):
//   v_i = x_i + e_i;  q_i = C(v_i);  e_i <- v_i - q_i              (error feedback, optional)
//   x_i <- x_i + eta * ( sum_{j in in(i) + {i}} W[i][j] q_j - q_i )
//   u_i <- u_i + eta * ( sum_{j in in(i) + {i}} W[i][j] u_j - u_i )
// With the identity compressor and eta = 1 this is exact push-sum averaging (SGP's gossip).
// A round either completes at every node or throws before any node changes (every node's check():
// the schedule's columns, the directions, the inputs); only a network that can fail later (MPI: a
// missing envelope) throws after the posts, which ends the run, and a mix that overflows the
// element type completes the round at every node, then throws non_finite_error (node.hpp, mix).
// The options are in group_options.hpp; deferred rounds and the drain in detail/group_deferred.hpp,
// the checkpoint sections GRUP and DEFR in detail/group_checkpoint.hpp; the metrics in metrics.hpp.
// group.hpp gathers the class and those definitions.
#pragma once

#include <chrono>
#include <algorithm>
#include <cmath>
#include <concepts>
#include <cstdint>
#include <exception>
#include <functional>
#include <mutex>
#include <type_traits>
#include <string>
#include <vector>

#include "../checkpoint.hpp"
#include "../clock.hpp"
#include "../detail/thread_pool.hpp"
#include "../topology/schedule.hpp"
#include "../transport/loopback.hpp"
#include "deferred_ledger.hpp"
#include "group_options.hpp"
#include "lockstep.hpp"
#include "metrics.hpp"
#include "node.hpp"
#include "policy.hpp"

namespace sparsepush {
inline namespace v0 {

/// Push-sum nodes in one process: push_sum_node's run on a thread pool, exchanging through a
/// network in lockstep (every node posts before any node collects). By default the group holds
/// all n nodes and the network is a loopback; a group may hold one block of the nodes, its
/// network (MPI) carrying the envelopes to and from the other blocks. Node indices of the
/// accessors (x(i), u(i), ...) are local: node first_node() + i of the schedule.
template <class Tensor>
  requires mutable_flat_tensor<Tensor&>
class push_sum_group {
 public:
  /// The tensor's element type, float or double.
  using value_type = tensor_value_t<Tensor>;
  /// Short name of value_type.
  using T = value_type;
  /// The type of each node.
  using node_type = push_sum_node<Tensor>;

  /// One node per tensor of x0 (node i starts at x0[i], u_i = 1), the nodes first_node,
  /// first_node + 1, ... of the run. Throws config_error for an empty x0, a block that does not fit
  /// in total_nodes, eta outside (0, 1] or step_weight_floor outside [0, 1]; size_error when the
  /// tensors differ in size; non_finite_error when one holds NaN or infinity.
  push_sum_group(std::vector<Tensor> x0, gossip_options opt = {})
      : opt_(opt), pool_(opt.threads), ws_(pool_.size()), blocks_(pool_.size()), cols_(x0.size()), rows_(x0.size()) {
    if (x0.empty()) throw config_error("a push-sum group needs at least one node");
    total_ = opt.total_nodes ? opt.total_nodes : x0.size();
    if (std::size_t{opt.first_node} + x0.size() > total_)
      throw config_error("a group of " + std::to_string(x0.size()) + " nodes from node " +
                         std::to_string(opt.first_node) + " does not fit in " + std::to_string(total_) + " nodes");
    if (!(opt.eta > 0.0 && opt.eta <= 1.0))
      throw config_error("eta must be in (0, 1], got " + std::to_string(opt.eta));
    if (!(opt.step_weight_floor >= 0.0 && opt.step_weight_floor <= 1.0))
      throw config_error("step_weight_floor must be in [0, 1], got " + std::to_string(opt.step_weight_floor));
    const std::size_t d = as_const_span(x0[0]).size();
    for (std::size_t i = 0; i < x0.size(); ++i) {
      const std::size_t di = as_const_span(x0[i]).size();
      if (di != d)
        throw size_error("node " + std::to_string(i) + " has " + std::to_string(di) +
                         " parameters, node 0 has " + std::to_string(d));
    }
    nodes_.reserve(x0.size());
    for (std::size_t i = 0; i < x0.size(); ++i)
      nodes_.emplace_back(std::move(x0[i]),
                          node_options{static_cast<std::uint32_t>(opt.first_node + i), opt.seed, opt.error_feedback, opt.recovery});
    d_ = d;
    ledger_ = deferred_ledger(nodes_.size(), opt.first_node, total_);
  }

  /// Nodes this group holds.
  std::size_t num_nodes() const noexcept { return nodes_.size(); }
  /// The schedule's index of local node 0.
  std::uint32_t first_node() const noexcept { return opt_.first_node; }
  /// Nodes of the whole run (all groups).
  std::size_t total_nodes() const noexcept { return total_; }
  /// The number of elements d of every node's model.
  std::size_t dim() const noexcept { return d_; }
  /// The options the group was built with.
  const gossip_options& options() const noexcept { return opt_; }

  /// Node i (its state and steps).
  const node_type& node(std::size_t i) const { return nodes_.at(i); }
  /// Local node i's push-sum numerator x_i (std::out_of_range for i >= num_nodes()).
  std::span<T> x(std::size_t i) { return nodes_.at(i).x(); }
  /// Local node i's push-sum numerator x_i, read-only.
  std::span<const T> x(std::size_t i) const { return nodes_.at(i).x(); }
  /// Local node i's push-sum weight u_i.
  double u(std::size_t i) const { return nodes_.at(i).u(); }
  /// Local node i's error-feedback residual e_i (empty without error feedback).
  std::span<const T> residual(std::size_t i) const { return nodes_.at(i).residual(); }
  /// The message local node i sent in the last round.
  const message& last_message(std::size_t i) const { return nodes_.at(i).outgoing(); }
  /// The tensor holding local node i's x_i, in the caller's type.
  const Tensor& tensor(std::size_t i) const { return nodes_.at(i).tensor(); }

  /// xh_i = x_i / u_i.
  void debiased(std::size_t i, std::span<T> out) const { nodes_.at(i).debiased(out); }
  /// xh_i = x_i / u_i, in a new vector.
  std::vector<T> debiased(std::size_t i) const {
    std::vector<T> out(d_);
    debiased(i, out);
    return out;
  }

  /// Run f(i) for every node on the group's threads (f must only touch node i's data), or f(i, w)
  /// with w in [0, workers()) naming the thread, so that f can use one scratch buffer per thread
  /// instead of one per node. f is called in place: nothing is copied or allocated.
  template <class F>
    requires std::invocable<F&, std::size_t> || std::invocable<F&, std::size_t, std::size_t>
  void for_each_node(F&& f) {
    if constexpr (std::invocable<F&, std::size_t, std::size_t>) pool_.parallel_for_worker(nodes_.size(), f);
    else pool_.parallel_for(nodes_.size(), f);
  }
  /// Threads of the group (the calling thread included).
  std::size_t workers() const noexcept { return pool_.size(); }

  /// Bytes of state node i keeps (push_sum_node::state_bytes: x, e, u, message, inbox, scratch)
  /// plus its share of the compressor workspaces and mixing blocks the group lends, one per thread.
  std::size_t state_bytes(std::size_t i) const {
    std::size_t lent = 0;
    for (const auto& w : ws_) lent += w.capacity_bytes();
    for (const auto& b : blocks_) lent += b.capacity() * sizeof(T);
    return nodes_.at(i).state_bytes() + lent / nodes_.size();
  }

  /// Per-round settings: the consensus step and an optional local step x_i -= gamma * p_i.
  struct step {
    double eta = 1.0;  ///< the consensus step in (0, 1]
    std::span<const std::vector<T>> directions{};  ///< one per node; empty: no local step
    double gamma = 0.0;  ///< the learning rate of the local step
    bool feedback = true;  ///< use error feedback this round (if the group keeps a residual)
    /// The same as views into the caller's storage (used when directions is empty).
    std::span<const std::span<const T>> direction_views{};
    bool fresh_residual = false;  ///< with feedback: every node takes e_i = 0 first (node_step::fresh_residual)
    /// Deferred rounds only: wait for every envelope of round t before mixing (lockstep's rule,
    /// through take(); e.g. gossip-only rounds, which an asynchronous node must not run alone).
    bool wait_all = false;
  };

  /// One round t with the group's eta and no local step.
  template <class S, class C, class Net>
  void round(const S& sched, const C& comp, Net& net, std::uint32_t t) {
    round(sched, comp, net, t, step{opt_.eta, {}, 0.0});
  }

  /// One lockstep round t at every node (lockstep.hpp): check all, then local step and compress,
  /// post, collect and mix. The group checks what concerns the group (the schedule's and the
  /// network's node counts, one direction per node); every node checks its own step
  /// (push_sum_node::check, its column of W(t) included). A round either completes at every node
  /// or throws before any node (or the ledger) changes; the exception is a mix whose result is not
  /// finite: every node is mixed, then the lowest such node's non_finite_error is thrown.
  template <class S, class C, class Net>
  void round(const S& sched, const C& comp, Net& net, std::uint32_t t, const step& st) {
    static_assert(detail::require_schedule<S>());
    static_assert(detail::require_compressor<C, T>());
    static_assert(detail::require_network<Net>());
    const std::size_t n = nodes_.size(), first = opt_.first_node;
    if (sched.num_nodes() != total_)
      throw schedule_error("schedule has " + std::to_string(sched.num_nodes()) + " nodes, the group has " +
                           std::to_string(total_));
    if (net.num_nodes() != total_)
      throw config_error("network has " + std::to_string(net.num_nodes()) + " nodes, the group has " +
                         std::to_string(total_));
    const bool views = st.directions.empty() && !st.direction_views.empty();
    const bool local = !st.directions.empty() || views;
    const std::size_t given = views ? st.direction_views.size() : st.directions.size();
    if (local && given != n)
      throw size_error("round " + std::to_string(t) + ": " + std::to_string(given) + " local directions for " +
                       std::to_string(n) + " nodes");
    auto node_step_of = [&](std::size_t i) {
      const std::span<const T> p =
          !local ? std::span<const T>() : views ? st.direction_views[i] : std::span<const T>(st.directions[i]);
      return typename node_type::step{st.eta, p, st.gamma, st.feedback, st.fresh_residual};
    };
    // W(t): the columns of the held nodes from the schedule; their rows by transposing the
    // columns when the group holds every node, from the schedule's in-edges otherwise.
    pool_.parallel_for(n, [&](std::size_t i) {
      sched.out_edges(t, static_cast<std::uint32_t>(first + i), cols_[i]);
      if (n != total_) in_edges_of(sched, t, static_cast<std::uint32_t>(first + i), rows_[i]);
    });
    if (n == total_) {
      for (auto& r : rows_) r.clear();
      for (std::uint32_t j = 0; j < n; ++j)
        for (const auto& e : cols_[j])
          if (e.to < n) rows_[e.to].push_back({j, e.share});
    }
    // every thread's block at its working size, whichever nodes it happens to take
    for (auto& b : blocks_) b.resize(std::min(d_, node_type::mix_block));
    if (!opt_.policy.lockstep()) {
      if constexpr (deferred_network<Net>) {
        deferred_round(sched, comp, net, t, st, local, node_step_of);
        return;
      } else {
        throw config_error("policy " + to_string(opt_.policy) +
                           " needs a network whose endpoints have take() and which counts posted rounds (loopback, "
                           "MPI); this network runs lockstep rounds only");
      }
    }
    detail::lockstep_round(
        pool_, n, [&](std::size_t i) { return net.endpoint(static_cast<std::uint32_t>(first + i)); },
        [&](std::size_t i, std::size_t w) {
          const auto ns = node_step_of(i);
          if (local && ns.direction.empty())  // a node takes an empty one as no step: every node steps or none
            throw size_error("round " + std::to_string(t) + ", node " + std::to_string(first + i) +
                             ": direction has 0 elements, the model has " + std::to_string(d_));
          nodes_[i].prepare(t, comp, cols_[i], ns, total_, ws_[w]);
        },
        [&](std::size_t i, std::size_t w) { nodes_[i].step_and_compress(comp, t, node_step_of(i), ws_[w]); },
        [&](std::size_t i, auto& ep) { nodes_[i].post(ep, t, cols_[i]); },
        [&](std::size_t i, auto& ep) {
          const auto c0 = run_clock::now();
          nodes_[i].collect(ep, t, rows_[i]);
          wait_seconds_ += std::chrono::duration<double>(run_clock::now() - c0).count();
        },
        [&](std::size_t i, std::size_t w) { nodes_[i].mix(st.eta, nodes_[i].self_share(cols_[i]), blocks_[w]); });
  }

  /// The waiting rule of the rounds.
  const wait_policy& policy() const noexcept { return opt_.policy; }
  /// Whether envelopes may be in flight (a deferred round ran since the last drain()).
  bool in_flight() const noexcept { return ledger_.in_flight(); }
  /// Seconds the rounds and drains spent receiving: in collect() (lockstep) or take() (deferred
  /// rounds), waiting for envelopes and decoding them.
  double wait_seconds() const noexcept { return wait_seconds_ + ledger_.wait_seconds(); }
  /// The largest staleness mixed (receiver's round - sender's round) over the nodes.
  std::uint32_t max_staleness() const noexcept {
    std::uint32_t m = 0;
    for (const auto& nd : nodes_) m = std::max(m, nd.max_staleness());
    return m;
  }
  /// After a drain: the first round no node of the run has posted (the largest count of rounds
  /// posted): where rounds that every node must run alike (SCSP's final gossip after
  /// asynchronous training, whose nodes ran different round counts) continue.
  std::uint32_t common_round() const noexcept { return ledger_.common_round(); }
  /// After a drain, every node of the run continues at round `round` (>= common_round(); the
  /// caller makes every process do the same): the rounds a slower node skips are never sent, so
  /// nothing of rounds before `round` is awaited any more. Not needed where every node ran the
  /// same rounds (one process).
  void continue_at(std::uint32_t round) { ledger_.continue_at(round); }
  /// The envelopes local node i still expects (sent to it in rounds it has run, not yet mixed).
  std::span<const awaited> expected(std::size_t i) const { return ledger_.expected(i); }

  /// Mix every envelope in flight (docs/design/algorithms.md, "Drain"): afterwards sum_i x_i and sum_i u_i
  /// are exact, as after a lockstep round. Collective over the processes of the run (every
  /// process calls it at the same point): net.posted_rounds() tells every node's count of rounds
  /// posted, each node takes every envelope addressed to it (waiting at most the network's
  /// timeout), mixes them with the consensus step of the rounds they were sent in, the network
  /// completes its sends, and a second posted_rounds() keeps every process from posting again
  /// before all have taken. Lockstep rounds leave nothing in flight: a no-op.
  template <class S, class Net>
  void drain(const S& sched, Net& net);

  /// Checkpoint section "GRUP": first node, total nodes, node count, then every node's "NODE".
  /// Envelopes in flight are not part of it: drain() first (refused otherwise).
  void save(checkpoint_writer& w) const;
  /// What a deferred group keeps about envelopes beyond its nodes' state: the round it continues
  /// at and, per node, the envelopes it still expects and those it mixed before their round came
  /// (deferred_ledger::state). Checkpoint section "DEFR"; a drained group only.
  using deferred_state = deferred_ledger::state;
  /// Writes checkpoint section "DEFR" (the deferred_state). Throws config_error unless the group
  /// was drained (no envelope in flight).
  void save_deferred(checkpoint_writer& w) const;
  /// Read a "DEFR" section (checked: senders in range) without changing anything.
  deferred_state read_deferred(checkpoint_reader& r) const;
  /// Applies a deferred_state read by read_deferred().
  void restore_deferred(deferred_state d) noexcept { ledger_.restore(std::move(d)); }

  /// Read every node's saved state (checked) without changing anything.
  std::vector<typename node_type::saved_state> read_state(checkpoint_reader& r) const;
  /// Apply states from read_state().
  void restore(const std::vector<typename node_type::saved_state>& s) noexcept {
    for (std::size_t i = 0; i < nodes_.size(); ++i) nodes_[i].restore(s[i]);
  }
  /// read_state() then restore(): every node or none.
  void restore(checkpoint_reader& r) { restore(read_state(r)); }

  /// mean over nodes of the de-biased models, in double.
  std::vector<double> average_model() const { return debiased_mean<T>(xs(), us()); }
  /// Parameter divergence (1/n) sum_i || xh_i - mean(xh) ||_2, in double.
  double consensus_distance() const { return debiased_divergence<T>(xs(), us()); }
  /// sum_i x_i (in double) and sum_i u_i: conserved by column-stochastic mixing.
  std::vector<double> mass() const { return sparsepush::mass<T>(xs()); }
  /// sum_i u_i over this group's nodes: n for the whole run unless envelopes were lost.
  double weight_mass() const {
    double s = 0.0;
    for (const auto& nd : nodes_) s += nd.u();
    return s;
  }

 private:
  /// Run mix(i, w) at every node; the lowest node's error is rethrown once every node mixed.
  template <class F>
  void mix_all(F&& mix) {
    detail::mix_every_node(pool_, nodes_.size(), mix);
  }

  /// One deferred round t (policy not lockstep; docs/design/algorithms.md, "Asynchronous and overlapped
  /// push-sum"): check every node, local step and compress, post and stage the own share, take
  /// what the policy allows (waiting for what it requires), mix. The checks come first, so a
  /// refused round changes nothing.
  template <class S, class C, class Net, class StepOf>
  void deferred_round(const S& sched, const C& comp, Net& net, std::uint32_t t, const step& st, bool local,
                      StepOf&& step_of);
  /// A deferred round's checks of the network (its mode and policy), the round's order and the
  /// consensus step, before anything changes.
  template <class Net>
  void check_deferred(const Net& net, std::uint32_t t, const step& st) const;
  /// A deferred round's posts: each node posts round t, stages its own share and expects the
  /// envelopes of its in-neighbours that the network does not lose.
  template <class Net>
  void post_deferred(Net& net, std::uint32_t t, const step& st);

  /// The local step of a deferred round at a node whose weight is u: gamma scaled by u / b when
  /// u < b = opt_.step_weight_floor, unchanged otherwise (the same bits as lockstep's step).
  ///
  /// The step lands on the numerator (x_i' = x_i - gamma p_i), so the de-biased model
  /// xh_i = x_i / u_i moves by gamma p_i / u_i. Under delays u_i is not the schedule's: a node
  /// keeps sending away its share of u_i every round while what its in-neighbours sent it is
  /// still in flight, so u_i shrinks geometrically and the step is amplified by 1/u_i; the cap
  /// bounds the de-biased step by gamma p_i / b (docs/design/weight-floor.md: the run that chose
  /// b = 1/2). Only the local step changes: what is posted and
  /// mixed is the same column-stochastic push-sum of whatever x_i is, so sum_i x_i (plus the
  /// envelopes in flight) and sum_i u_i = n are conserved. Lockstep rounds keep the step as
  /// docs/design/algorithms.md writes it; a deferred round at a node with u_i >= b has their bits.
  typename node_type::step deferred_step_of(typename node_type::step ns, double u) const noexcept;

  std::vector<std::span<const T>> xs() const {
    std::vector<std::span<const T>> v;
    for (const auto& nd : nodes_) v.push_back(nd.x());
    return v;
  }
  std::vector<double> us() const {
    std::vector<double> v;
    for (const auto& nd : nodes_) v.push_back(nd.u());
    return v;
  }

  gossip_options opt_;
  detail::thread_pool pool_;
  std::vector<compress_workspace<T>> ws_;  ///< one per pool thread, lent to the nodes it runs
  std::vector<std::vector<T>> blocks_;     ///< mixing blocks, one per pool thread, lent likewise
  std::vector<node_type> nodes_;
  std::vector<std::vector<out_edge>> cols_;
  std::vector<std::vector<in_edge>> rows_;
  std::size_t d_ = 0;
  std::size_t total_ = 0;
  // deferred rounds
  deferred_ledger ledger_;                      ///< the envelopes in flight and expected
  double deferred_eta_ = 1.0;                   ///< the consensus step of the rounds in flight
  double wait_seconds_ = 0.0;
};

}  // namespace v0
}  // namespace sparsepush
