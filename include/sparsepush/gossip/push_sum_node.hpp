// sparsepush/gossip/push_sum_node.hpp: one push-sum node, the unit of the library (docs/design/algorithms.md,
// Sparse-Push steps 1-3). A node holds x_i (the user's tensor), u_i, the residual e_i (only when
// error feedback is on), its outgoing message, its inbox and its scratch, and does one round in
// steps against an endpoint:
//   1. local step   x_i' = x_i - gamma p_i
//   2. compress     v_i = x_i' + e_i;  q_i = C(v_i);  e_i <- v_i - q_i   (exact phases: q_i = x_i', e_i kept)
//   3. post         (i, W[r][i], u_i, q_i) to every out-neighbour r
//   4. collect      round t's envelopes from exactly the in-neighbours, ascending by sender
//   5. mix          x_i <- x_i' + eta (sum_{j in in(i) + {i}} W_ij q_j - q_i),
//                   u_i <- u_i + eta (sum_{j in in(i) + {i}} W_ij u_j - u_i)
// At eta = 1 the update is evaluated as (x_i' - q_i) + S_i, so an exact message gives push-sum's
// x_i = sum_j W_ij x_j bit for bit. check() validates a round before anything changes. The long
// member functions are defined out of the class in detail/node_{checks,mix,checkpoint}.hpp, and
// node.hpp gathers them all.
//
// Message loss. Plain push-sum loses the x- and u-shares of a lost envelope: sum_i x_i and
// sum_i u_i shrink, and the nodes agree on a biased value (or u underflows). With
// loss_recovery::acknowledged the sender learns which of its envelopes of round t were lost
// (L_i(t), from the endpoint's lost(t, r): an acknowledgement) and keeps their shares:
//   R_i = sum_{r in L_i(t)} W_ri
//   x_i <- x_i' + eta (sum_{j in in(i), delivered} W_ij q_j + (W_ii + R_i) q_i - q_i)
//   u_i <- u_i  + eta (sum_{j in in(i), delivered} W_ij u_j + (W_ii + R_i) u_i - u_i)
// This is push-sum over the matrix W~(t) whose lost entries moved to the diagonal; W~ is column
// stochastic, so sum_i x_i (up to compression, which error feedback keeps) and sum_i u_i = n are
// conserved exactly, for sparse or dense messages and any time-varying out-neighbours. It costs
// one double per node and, on a real lossy link, one acknowledgement per envelope (injected loss
// is a rule every party evaluates, so none travels here). With no loss R_i = 0 and the round is
// bit-identical to plain push-sum. check() refuses a round whose u_i fell below min_weight() (a
// clear error instead of estimates that silently become 0).
#pragma once

#include <cmath>
#include <cstdio>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "../checkpoint.hpp"
#include "../compress/common.hpp"
#include "../detail/finite.hpp"
#include "../error_feedback.hpp"
#include "../topology/schedule.hpp"
#include "../topology/validate.hpp"
#include "../transport/endpoint.hpp"
#include "lockstep.hpp"
#include "push_sum.hpp"

namespace sparsepush {
inline namespace v0 {

/// What a node does about envelopes the network lost (see the header comment).
enum class loss_recovery {
  none,          ///< plain push-sum: a lost envelope's shares are gone
  acknowledged,  ///< the sender keeps the shares of its lost envelopes (mass conserved)
};

/// "none" or "ack".
inline const char* to_string(loss_recovery r) noexcept { return r == loss_recovery::none ? "none" : "ack"; }

/// Settings of one node.
struct node_options {
  std::uint32_t id = 0;         ///< this node's index in the schedule
  std::uint64_t seed = 0;       ///< keys the compressors' random streams with (node, round)
  bool error_feedback = true;   ///< keep a residual e (compress x + e, keep e = v - q)
  loss_recovery recovery = loss_recovery::none;  ///< what to do about lost envelopes
};

/// A node's push-sum weight u_i fell below push_sum_node::min_weight(): messages are being lost
/// (or the schedule starves the node) and x_i / u_i is about to become 0 or Inf.
class weight_underflow_error : public error {
 public:
  using error::error;
};

/// One round's settings at a node.
template <tensor_element T>
struct node_step {
  double eta = 1.0;                  ///< consensus step in (0, 1]
  std::span<const T> direction{};    ///< p_i; empty: no local step
  double gamma = 0.0;                ///< learning rate of the local step
  bool feedback = true;              ///< use the residual this round (false: exact phase)
  bool fresh_residual = false;       ///< with feedback: take e_i = 0 first (a phase that starts its own residual)
};

/// One node's push-sum state and round; see the header comment.
template <class Tensor>
  requires mutable_flat_tensor<Tensor&>
class push_sum_node {
 public:
  /// The tensor's element type, float or double.
  using value_type = tensor_value_t<Tensor>;
  /// Short name of value_type.
  using T = value_type;
  /// The settings of one round (node_step).
  using step = node_step<T>;
  /// Coordinates mixed per block: S_i is accumulated for a block in scratch (256 KiB of floats,
  /// L2 resident), then applied to x while the block is warm.
  static constexpr std::size_t mix_block = 65536;

  /// A node whose numerator x_i starts as x0 (u_i = 1, residual zero). Throws non_finite_error when
  /// x0 holds NaN or infinity.
  explicit push_sum_node(Tensor x0, node_options opt = {}) : opt_(opt), x_(std::move(x0)) {
    d_ = as_const_span(x_).size();
    detail::check_finite(as_const_span(x_), context{opt_.seed, opt_.id, 0}, "initial x");
    if (opt_.error_feedback) residual_.assign(d_, T(0));
    if (d_ <= std::numeric_limits<std::uint32_t>::max()) inbox_.dim = static_cast<std::uint32_t>(d_);
  }

  /// This node's index in the schedule (node_options::id).
  std::uint32_t id() const noexcept { return opt_.id; }
  /// The number of elements d of the model.
  std::size_t dim() const noexcept { return d_; }
  /// The options it was built with.
  const node_options& options() const noexcept { return opt_; }
  /// The push-sum numerator x_i.
  std::span<T> x() noexcept { return as_span(x_); }
  /// The push-sum numerator x_i, read-only.
  std::span<const T> x() const noexcept { return as_const_span(x_); }
  /// The tensor holding x_i, in the caller's type.
  const Tensor& tensor() const noexcept { return x_; }
  /// The push-sum weight u_i.
  double u() const noexcept { return u_; }
  /// The residual e_i (empty when the node keeps none).
  std::span<const T> residual() const noexcept { return residual_; }
  /// The message of the last compress().
  const message& outgoing() const noexcept { return msg_; }
  /// The envelopes of the last collect().
  const inbox& received() const noexcept { return inbox_; }
  /// R_i: the shares of the envelopes of the last post() that were lost and are kept (0 unless
  /// loss_recovery::acknowledged); the next mix() adds them to the self share.
  double returned_share() const noexcept { return returned_; }
  /// The smallest u_i a round accepts: sqrt of the smallest normal value of the element type
  /// (1.1e-19 for float), so that x_i = u_i xh_i stays a normal number.
  static double min_weight() noexcept { return std::sqrt(static_cast<double>(std::numeric_limits<T>::min())); }

  /// xh_i = x_i / u_i into out.
  void debiased(std::span<T> out) const { debias<T>(x(), u_, out); }
  /// xh_i = x_i / u_i as the node's tensor type (a copy of x, divided).
  Tensor model() const {
    Tensor m = x_;
    debias<T>(x(), u_, as_span(m));
    return m;
  }

  /// Bytes this node keeps: model_bytes() + buffer_bytes(). Nothing is hidden in thread-local
  /// storage.
  std::size_t state_bytes() const noexcept { return model_bytes() + buffer_bytes(); }
  /// Bytes of the algorithm's state: x, e (when kept) and u.
  std::size_t model_bytes() const noexcept { return (d_ + residual_.size()) * sizeof(T) + sizeof(double); }
  /// Bytes of the buffers reused every round (capacities): the outgoing message, the inbox,
  /// the edge lists and the scratch (its own compressor workspace, mixing block and lists).
  std::size_t buffer_bytes() const noexcept {
    return block_.capacity() * sizeof(T) + message_capacity_bytes(msg_) + inbox_.capacity_bytes() +
           ws_.capacity_bytes() + mix_.capacity() * sizeof(weighted_message) + scratch_.capacity_bytes() +
           cursors_.capacity() * sizeof(sparse_cursor) + plan_.capacity() * sizeof(std::uint32_t) +
           out_.capacity() * sizeof(out_edge) + in_.capacity() * sizeof(in_edge);
  }

  /// Throw, before anything changes, if round t cannot run: eta, the local direction (size,
  /// NaN/Inf), the learning rate, the compressor at this dimension, the out-edges (check_column:
  /// receivers distinct and in [0, nodes) when nodes > 0, shares in [0, 1] summing to 1, a positive
  /// self-share) and x - gamma p (+ e) finite.
  template <class C>
  void check(std::uint32_t t, const C& comp, std::span<const out_edge> out, const step& st,
             std::size_t nodes = 0) const {
    check_config(t, comp, out, st, nodes);
    check_finite_inputs(context{opt_.seed, opt_.id, t}, st.direction, static_cast<T>(st.gamma), use_feedback(st));
  }

  /// check() for a round whose steps come next (a group checks every node first, then steps
  /// them): where the round has a local step and error feedback and the compressor fuses them
  /// (top_k::fuses_step: a global top-K), the check of x - gamma p (+ e) is the fused step's
  /// planning pass (top_k::plan_step: the selection on v = (x - gamma p) + e, which reads x, p
  /// and e once and writes only the node's plan), and step_and_compress applies it in one pass
  /// over x, p and e, with the bits of local_step then compress. Otherwise the same as check().
  /// A throw leaves the node as it was (a plan made here is dropped by the next prepare).
  template <class C>
  void prepare(std::uint32_t t, const C& comp, std::span<const out_edge> out, const step& st, std::size_t nodes,
               compress_workspace<T>& ws) {
    planned_ = false;
    check_config(t, comp, out, st, nodes);
    const context ctx{opt_.seed, opt_.id, t};
    if constexpr (detail::fused_step_compressor<C, T>) {
      if (!st.direction.empty() && use_feedback(st) && detail::fuses_step(comp)) {
        comp.plan_step(std::span<const T>(x()), st.direction, static_cast<T>(st.gamma),
                       std::span<const T>(residual_), plan_, ctx, ws);
        planned_ = true;
        return;
      }
    }
    check_finite_inputs(ctx, st.direction, static_cast<T>(st.gamma), use_feedback(st));
  }

  /// Steps 1 and 2 after prepare(): the planned fused step, or local_step (when st.direction is
  /// not empty) then compress.
  template <class C>
  void step_and_compress(const C& comp, std::uint32_t t, const step& st, compress_workspace<T>& ws) {
    if constexpr (detail::fused_step_compressor<C, T>) {
      if (planned_) {
        planned_ = false;
        comp.apply_step(x(), st.direction, static_cast<T>(st.gamma), std::span<T>(residual_), plan_, msg_,
                        context{opt_.seed, opt_.id, t});
        return;
      }
    }
    if (!st.direction.empty()) local_step(st.direction, st.gamma);
    compress(comp, t, st.feedback, ws, st.fresh_residual);
  }

 private:
  /// check() without the NaN/Inf check of x - gamma p (+ e).
  template <class C>
  void check_config(std::uint32_t t, const C& comp, std::span<const out_edge> out, const step& st,
                    std::size_t nodes) const;

 public:

  /// Step 1: x_i -= gamma p_i (p checked by check()).
  void local_step(std::span<const T> p, double gamma) {
    const auto xi = x();
    const T g = static_cast<T>(gamma);
    for (std::size_t l = 0; l < d_; ++l) xi[l] = xi[l] - g * p[l];
  }

  /// Step 2: q_i = C(x_i + e_i), e_i = v_i - q_i; without feedback q_i = C(x_i), e_i untouched.
  /// With fresh_residual (and feedback) e_i is set to 0 first: q_i = C(x_i), e_i = x_i - q_i.
  /// Uses the node's own compressor workspace.
  template <class C>
  void compress(const C& comp, std::uint32_t t, bool feedback = true, bool fresh_residual = false) {
    compress(comp, t, feedback, ws_, fresh_residual);
  }
  /// The same with a workspace lent by the caller (a group lends one per thread, so that n nodes
  /// on one thread share one warm histogram instead of n cold ones).
  template <class C>
  void compress(const C& comp, std::uint32_t t, bool feedback, compress_workspace<T>& ws,
                bool fresh_residual = false) {
    const context ctx{opt_.seed, opt_.id, t};
    if (feedback && opt_.error_feedback && fresh_residual) std::fill(residual_.begin(), residual_.end(), T(0));
    if (feedback && opt_.error_feedback)
      compress_with_feedback<T>(comp, std::span<const T>(x()), std::span<T>(residual_), msg_, ctx, ws);
    else
      compress_with<T>(comp, std::span<const T>(x()), msg_, ctx, ws);
  }

  /// Step 3: push (i, W[r][i], u_i, q_i) to every out-neighbour r. With
  /// loss_recovery::acknowledged and an endpoint that reports losses (lost(t, r)), the shares of
  /// the lost envelopes are kept for the next mix (R_i, in the order of `out`).
  template <endpoint E>
  void post(E& ep, std::uint32_t t, std::span<const out_edge> out) {
    ep.post(t, out, u_, msg_);
    round_ = t;
    returned_ = 0.0;
    if constexpr (requires { { ep.lost(t, std::uint32_t{}) } -> std::convertible_to<bool>; })
      if (opt_.recovery == loss_recovery::acknowledged)
        for (const auto& e : out)
          if (e.to != opt_.id && ep.lost(t, e.to)) returned_ += e.share;
  }

  /// Step 4: receive round t's envelopes from the senders of `in` (the self entry is skipped).
  template <endpoint E>
  void collect(E& ep, std::uint32_t t, std::span<const in_edge> in) {
    ep.collect(t, in, inbox_);
    round_ = t;
  }

  /// Step 5: mix the own message (share self_share = W_ii, plus the returned share R_i of the
  /// last post) and the collected envelopes. S_i = (W_ii + R_i) q_i + sum_j W_ij q_j (self first,
  /// then senders ascending), accumulated block by block; x_i <- (x_i - q_i) + S_i at eta = 1,
  /// x_i <- x_i + eta (S_i - q_i) otherwise. R_i is used once.
  ///
  /// A mix can overflow where the inputs did not (models near the largest float, in-shares summing
  /// above 1): the values written are checked as they are written, and a NaN or Inf throws
  /// non_finite_error naming the node, the round (of the last post or collect) and the first bad
  /// index, in the round that produced it. The mix is complete when it throws: x_i and u_i hold
  /// the mixed values (the non-finite ones included, for inspection) and R_i is used; the node's
  /// next check() refuses to run another round on them.
  void mix(double eta, double self_share) { mix(eta, self_share, block_); }
  /// The same with the block buffer lent by the caller (a group lends one per thread, so that n
  /// nodes on one thread share one L2-sized block instead of n).
  void mix(double eta, double self_share, std::vector<T>& block);

  /// Whether the last mix() took the O(nnz) path (every message sparse).
  bool last_mix_sparse() const noexcept { return last_sparse_; }

  // Deferred rounds (every policy but lockstep; docs/design/algorithms.md, "Asynchronous and overlapped
  // push-sum"): check, local step and compress as in lockstep, post(), stage_own_share(), take()
  // what the policy lets the node mix, mix_taken(). A driver (push_sum_group) keeps the list of
  // envelopes the node still expects and says what take() must wait for.

  /// Step 3's own share, after post(): x_i += c q_i, u_i += c u_i with c = eta (W_ii + R_i - 1),
  /// applied by the next mix_taken() (in the same round: q_i is kept until the next compress).
  /// R_i (lost envelopes' shares, acknowledged recovery) is used here.
  void stage_own_share(double eta, double self_share) noexcept {
    own_coef_ = eta * (self_share + returned_ - 1.0);
    own_staged_ = true;
    returned_ = 0.0;
  }
  /// Step 4's receive: the envelopes of rounds <= upto that have arrived (visible at round `now`
  /// under a delay model), waiting for those of `must` (deferred_endpoint::take).
  template <deferred_endpoint E>
  void take(E& ep, std::uint32_t now, std::uint32_t upto, std::span<const awaited> must,
            std::span<const awaited> expected) {
    ep.take(now, upto, must, inbox_, expected);
  }
  /// Step 4's mix: x_i += c q_i + sum_e eta w_e q_e and u_i += c u_i + sum_e eta w_e u_e, over the
  /// staged own share (if any) and the envelopes of the last take() in inbox order (ascending
  /// round, then sender). The sum S is accumulated per block as in mix(), then x_i += S; `eta` is
  /// the consensus step of the rounds the envelopes were sent in (a driver drains before it
  /// changes: sparse_push does at every phase start). The largest t - s over the envelopes mixed
  /// is kept (max_staleness()). Overflow is reported as by mix().
  void mix_taken(double eta, std::uint32_t t, std::vector<T>& block);
  /// Forget the last take()'s envelopes (a deferred round that takes none: overlap's round 0).
  void clear_received() noexcept { inbox_.envelopes.clear(); }
  /// The largest staleness mixed so far by mix_taken(): receiver's round - sender's round.
  std::uint32_t max_staleness() const noexcept { return max_staleness_; }

 private:
  /// The dense path: S_i accumulated per L2-sized block, then one pass over x, which also ORs
  /// together the finiteness flags of the values written (detail/finite.hpp: integer ops in the
  /// same vectorised loop). Returns whether they were all finite.
  bool mix_dense(double eta, std::vector<T>& block);

  /// The O(nnz) path, when every message is sparse: a merge of the ascending index lists (own
  /// message first, then the senders in inbox order) visits only the kept coordinates, with the
  /// dense path's arithmetic at each: S_l = sum in list order of c_m q_m[l] from 0, then
  /// x_l = (x_l - q_il) + S_l at eta = 1, x_l = x_l + eta (S_l - q_il) otherwise. Coordinates no
  /// message carries are not touched (the dense path adds +0 there, which only turns -0 into +0).
  /// How many kept entries ahead mix_sparse() prefetches x (its accesses are scattered).
  static constexpr std::ptrdiff_t prefetch_ahead = 16;
  /// Returns whether every value written is finite (the others were finite before: check()).
  bool mix_sparse(double eta);

  /// mix_taken()'s O(nnz) path: x_l += S_l, S_l the sum in list order of c_m q_m[l] from 0, at
  /// every coordinate some message keeps (the dense path adds +0 elsewhere). Returns whether
  /// every value written is finite.
  bool add_sparse_sum();

  /// The merge of the sparse paths: the ascending index lists of mix_'s messages are walked
  /// together, and at every kept coordinate l, x_l = value(x_l, S_l, own_l), S_l the sum in list
  /// order of c_m q_m[l] from 0 and own_l the first message's value there (0 if it keeps none).
  /// Returns whether every value written is finite.
  template <class Value>
  bool merge_sparse(Value&& value);

  /// After a mix that wrote a NaN or Inf (or left u so): name the node, the round and the first
  /// bad index. Off the hot path: the scan runs only on failure.
  [[noreturn]] void throw_mixed_non_finite() const;

 public:

  /// The whole round t against a schedule and an endpoint: out- and in-edges from the schedule,
  /// then the lockstep round of one node (lockstep.hpp): check, local step (when st.direction is
  /// not empty) and compress, post, collect, mix.
  template <class S, class C, class E>
  void round(std::uint32_t t, const S& sched, const C& comp, E& ep, const step& st) {
    static_assert(detail::require_schedule<S>());
    static_assert(detail::require_compressor<C, T>());
    static_assert(endpoint<E>, "sparsepush: E must be an endpoint: node(), post(round, out_edges, u, message), "
                               "collect(round, in_edges, inbox) (see transport/endpoint.hpp)");
    sched.out_edges(t, opt_.id, out_);
    in_edges_of(sched, t, opt_.id, in_);
    detail::serial_runner alone;
    detail::lockstep_round(
        alone, 1, [&](std::size_t) -> E& { return ep; },
        [&](std::size_t, std::size_t) { prepare(t, comp, out_, st, sched.num_nodes(), ws_); },
        [&](std::size_t, std::size_t) { step_and_compress(comp, t, st, ws_); },
        [&](std::size_t, E& e) { post(e, t, out_); }, [&](std::size_t, E& e) { collect(e, t, in_); },
        [&](std::size_t, std::size_t) { mix(st.eta, self_share(out_), block_); });
  }

  /// A node's state as read from a checkpoint (checked against this node), not yet applied.
  struct saved_state {
    double u = 1.0;  ///< the push-sum weight u_i
    ///@{
    /// The numerator x_i and the residual e_i (empty when the node keeps none).
    std::vector<T> x, e;
    ///@}
  };

  /// Checkpoint section "NODE": id, dim, u, whether e is kept, x, e. Call between rounds.
  void save(checkpoint_writer& w) const;
  /// Read this node's saved state and check it (id, dim, residual kept or not, u positive and
  /// finite, x and e finite) without changing anything.
  saved_state read_state(checkpoint_reader& r) const;
  /// Apply a state from read_state() (cannot fail).
  void restore(const saved_state& s) noexcept {
    std::copy(s.x.begin(), s.x.end(), x().begin());
    if (!residual_.empty()) std::copy(s.e.begin(), s.e.end(), residual_.begin());
    u_ = s.u;
    returned_ = 0.0;
    own_staged_ = false;
  }
  /// read_state() then restore(): all of it or, on a bad checkpoint, nothing.
  void restore(checkpoint_reader& r) { restore(read_state(r)); }

  /// W_ii from a column (0 when absent).
  double self_share(std::span<const out_edge> out) const noexcept {
    for (const auto& e : out)
      if (e.to == opt_.id) return e.share;
    return 0.0;
  }

 private:
  /// Does this round read e_i (and so check it)?
  bool use_feedback(const step& st) const noexcept { return opt_.error_feedback && st.feedback && !st.fresh_residual; }

  static std::size_t message_capacity_bytes(const message& m) noexcept {
    return m.indices.capacity() * sizeof(std::uint32_t) + m.payload.capacity();
  }

  /// Throw non_finite_error if x - gamma p (+ e) has a NaN/Inf, naming the first index.
  void check_finite_inputs(const context& ctx, std::span<const T> p, T gamma, bool fb) const;

  node_options opt_;
  Tensor x_;
  double u_ = 1.0;
  double returned_ = 0.0;
  std::size_t d_ = 0;
  std::vector<T> residual_;
  message msg_;
  compress_workspace<T> ws_;
  inbox inbox_;
  std::vector<weighted_message> mix_;
  combine_scratch scratch_;
  std::vector<T> block_;
  struct sparse_cursor {
    const std::uint32_t* at;
    const std::uint32_t* end;
    const message* msg;
    T coef;
    bool f32;
  };
  std::vector<sparse_cursor> cursors_;
  std::vector<std::uint32_t> plan_;  ///< prepare()'s fused step: the selected indices
  bool planned_ = false;
  bool last_sparse_ = false;
  double own_coef_ = 0.0;          ///< the staged own share c of a deferred round
  bool own_staged_ = false;
  std::uint32_t max_staleness_ = 0;
  std::uint32_t round_ = 0;  ///< the round of the last post() or collect(), for mix()'s errors
  std::vector<out_edge> out_;
  std::vector<in_edge> in_;
};

}  // namespace v0
}  // namespace sparsepush
