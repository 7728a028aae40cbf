// sparsepush/gossip/node.hpp: one push-sum node, the unit of the library (ALGORITHMS.md,
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
// x_i = sum_j W_ij x_j bit for bit. check() validates a round before anything changes.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "../compress/common.hpp"
#include "../error_feedback.hpp"
#include "../topology/schedule.hpp"
#include "../transport/endpoint.hpp"
#include "push_sum.hpp"

namespace sparsepush {
inline namespace v0 {

/// Settings of one node.
struct node_options {
  std::uint32_t id = 0;         ///< this node's index in the schedule
  std::uint64_t seed = 0;       ///< keys the compressors' random streams with (node, round)
  bool error_feedback = true;   ///< keep a residual e (compress x + e, keep e = v - q)
};

/// One round's settings at a node.
template <tensor_element T>
struct node_step {
  double eta = 1.0;                  ///< consensus step in (0, 1]
  std::span<const T> direction{};    ///< p_i; empty: no local step
  double gamma = 0.0;                ///< learning rate of the local step
  bool feedback = true;              ///< use the residual this round (false: exact phase)
};

/// One node's push-sum state and round; see the header comment.
template <class Tensor>
  requires mutable_flat_tensor<Tensor&>
class push_sum_node {
 public:
  using value_type = tensor_value_t<Tensor>;
  using T = value_type;
  using step = node_step<T>;
  /// Coordinates mixed per block: S_i is accumulated for a block in scratch (256 KiB of floats,
  /// L2 resident), then applied to x while the block is warm.
  static constexpr std::size_t mix_block = 65536;

  explicit push_sum_node(Tensor x0, node_options opt = {}) : opt_(opt), x_(std::move(x0)) {
    d_ = as_const_span(x_).size();
    detail::check_finite(as_const_span(x_), context{opt_.seed, opt_.id, 0}, "initial x");
    if (opt_.error_feedback) residual_.assign(d_, T(0));
    if (d_ <= std::numeric_limits<std::uint32_t>::max()) inbox_.dim = static_cast<std::uint32_t>(d_);
  }

  std::uint32_t id() const noexcept { return opt_.id; }
  std::size_t dim() const noexcept { return d_; }
  const node_options& options() const noexcept { return opt_; }
  /// The push-sum numerator x_i.
  std::span<T> x() noexcept { return as_span(x_); }
  std::span<const T> x() const noexcept { return as_const_span(x_); }
  const Tensor& tensor() const noexcept { return x_; }
  /// The push-sum weight u_i.
  double u() const noexcept { return u_; }
  /// The residual e_i (empty when the node keeps none).
  std::span<const T> residual() const noexcept { return residual_; }
  /// The message of the last compress().
  const message& outgoing() const noexcept { return msg_; }
  /// The envelopes of the last collect().
  const inbox& received() const noexcept { return inbox_; }

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
           out_.capacity() * sizeof(out_edge) + in_.capacity() * sizeof(in_edge);
  }

  /// Throw, before anything changes, if round t cannot run: eta, the local direction (size,
  /// NaN/Inf), the learning rate, the compressor at this dimension, the out-edges (receivers in
  /// [0, nodes) when nodes > 0, a positive self-share) and x - gamma p (+ e) finite.
  template <class C>
  void check(std::uint32_t t, const C& comp, std::span<const out_edge> out, const step& st,
             std::size_t nodes = 0) const {
    const context ctx{opt_.seed, opt_.id, t};
    if (!(st.eta > 0.0 && st.eta <= 1.0))
      throw config_error("eta must be in (0, 1], got " + std::to_string(st.eta) + " in round " +
                         std::to_string(t));
    const bool local = !st.direction.empty();
    if (local) {
      if (!std::isfinite(st.gamma))
        throw config_error("learning rate is not finite in round " + std::to_string(t));
      if (st.direction.size() != d_)
        throw size_error("round " + std::to_string(t) + ", node " + std::to_string(opt_.id) +
                         ": direction has " + std::to_string(st.direction.size()) +
                         " elements, the model has " + std::to_string(d_));
    }
    double self = -1.0;
    for (const auto& e : out) {
      if (nodes > 0 && e.to >= nodes)
        throw schedule_error("round " + std::to_string(t) + ", node " + std::to_string(opt_.id) +
                             ": edge to node " + std::to_string(e.to) + " outside [0, " +
                             std::to_string(nodes) + ")");
      if (e.to == opt_.id) self = e.share;
    }
    if (!(self > 0.0))
      throw schedule_error("round " + std::to_string(t) + ", node " + std::to_string(opt_.id) +
                           ": missing self-loop (W[j][j] must be > 0)");
    validate_compressor<T>(comp, d_, ctx);
    check_finite_inputs(ctx, st.direction, static_cast<T>(st.gamma), use_feedback(st));
  }

  /// Step 1: x_i -= gamma p_i (p checked by check()).
  void local_step(std::span<const T> p, double gamma) {
    const auto xi = x();
    const T g = static_cast<T>(gamma);
    for (std::size_t l = 0; l < d_; ++l) xi[l] = xi[l] - g * p[l];
  }

  /// Step 2: q_i = C(x_i + e_i), e_i = v_i - q_i; without feedback q_i = C(x_i), e_i untouched.
  /// Uses the node's own compressor workspace.
  template <class C>
  void compress(const C& comp, std::uint32_t t, bool feedback = true) {
    compress(comp, t, feedback, ws_);
  }
  /// The same with a workspace lent by the caller (a group lends one per thread, so that n nodes
  /// on one thread share one warm histogram instead of n cold ones).
  template <class C>
  void compress(const C& comp, std::uint32_t t, bool feedback, compress_workspace<T>& ws) {
    const context ctx{opt_.seed, opt_.id, t};
    if (feedback && opt_.error_feedback)
      compress_with_feedback<T>(comp, std::span<const T>(x()), std::span<T>(residual_), msg_, ctx, ws);
    else
      compress_with<T>(comp, std::span<const T>(x()), msg_, ctx, ws);
  }

  /// Step 3: push (i, W[r][i], u_i, q_i) to every out-neighbour r.
  template <endpoint E>
  void post(E& ep, std::uint32_t t, std::span<const out_edge> out) const {
    ep.post(t, out, u_, msg_);
  }

  /// Step 4: receive round t's envelopes from the senders of `in` (the self entry is skipped).
  template <endpoint E>
  void collect(E& ep, std::uint32_t t, std::span<const in_edge> in) {
    ep.collect(t, in, inbox_);
  }

  /// Step 5: mix the own message (share self_share = W_ii) and the collected envelopes.
  /// S_i = W_ii q_i + sum_j W_ij q_j (self first, then senders ascending), accumulated block by
  /// block; x_i <- (x_i - q_i) + S_i at eta = 1, x_i <- x_i + eta (S_i - q_i) otherwise.
  void mix(double eta, double self_share) {
    mix_.clear();
    mix_.push_back({&msg_, self_share});
    double u_sum = self_share * u_;
    for (const auto& env : inbox_.envelopes) {
      mix_.push_back({env.msg, env.share});
      u_sum += env.share * env.u;
    }
    scratch_.prepare(mix_, d_);
    block_.resize(std::min(d_, mix_block));
    const auto xi = x();
    T* s = block_.data();
    std::size_t own = 0;
    const T e = static_cast<T>(eta);
    for (std::size_t b = 0; b < d_; b += mix_block) {
      const std::size_t end = std::min(d_, b + mix_block);
      std::fill(s, s + (end - b), T(0));
      scratch_.add_block<T>(s, b, end);
      if (eta == 1.0) {
        detail::for_each_value_below<T>(msg_, b, end, own, [xi](std::size_t l, T q) { xi[l] = xi[l] - q; });
        for (std::size_t l = b; l < end; ++l) xi[l] = xi[l] + s[l - b];
      } else {
        detail::for_each_value_below<T>(msg_, b, end, own, [s, b](std::size_t l, T q) { s[l - b] = s[l - b] - q; });
        for (std::size_t l = b; l < end; ++l) xi[l] = xi[l] + e * s[l - b];
      }
    }
    u_ = eta == 1.0 ? u_sum : u_ + eta * (u_sum - u_);
  }

  /// The whole round t against a schedule and an endpoint: out- and in-edges from the schedule,
  /// check, local step (when st.direction is not empty), compress, post, collect, mix.
  template <schedule S, class C, endpoint E>
  void round(std::uint32_t t, const S& sched, const C& comp, E& ep, const step& st) {
    sched.out_edges(t, opt_.id, out_);
    in_edges_of(sched, t, opt_.id, in_);
    check(t, comp, out_, st, sched.num_nodes());
    if (!st.direction.empty()) local_step(st.direction, st.gamma);
    compress(comp, t, st.feedback);
    post(ep, t, out_);
    collect(ep, t, in_);
    mix(st.eta, self_share(out_));
  }

  /// W_ii from a column (0 when absent).
  double self_share(std::span<const out_edge> out) const noexcept {
    for (const auto& e : out)
      if (e.to == opt_.id) return e.share;
    return 0.0;
  }

 private:
  bool use_feedback(const step& st) const noexcept { return opt_.error_feedback && st.feedback; }

  static std::size_t message_capacity_bytes(const message& m) noexcept {
    return m.indices.capacity() * sizeof(std::uint32_t) + m.payload.capacity();
  }

  /// Throw non_finite_error if x - gamma p (+ e) has a NaN/Inf, naming the first index.
  void check_finite_inputs(const context& ctx, std::span<const T> p, T gamma, bool fb) const {
    const auto xi = x();
    auto v_at = [&](std::size_t l) {
      T v = p.empty() ? xi[l] : xi[l] - gamma * p[l];
      return fb ? v + residual_[l] : v;
    };
    if (!p.empty()) detail::check_finite(p, ctx, "local direction");
    bool ok = true;
    for (std::size_t l = 0; l < d_; ++l) ok &= std::isfinite(v_at(l));
    if (ok) return;
    for (std::size_t l = 0; l < d_; ++l)
      if (!std::isfinite(v_at(l)))
        detail::throw_non_finite(static_cast<double>(v_at(l)), l, ctx, fb ? "x + e" : "x");
  }

  node_options opt_;
  Tensor x_;
  double u_ = 1.0;
  std::size_t d_ = 0;
  std::vector<T> residual_;
  message msg_;
  compress_workspace<T> ws_;
  inbox inbox_;
  std::vector<weighted_message> mix_;
  combine_scratch scratch_;
  std::vector<T> block_;
  std::vector<out_edge> out_;
  std::vector<in_edge> in_;
};

}  // namespace v0
}  // namespace sparsepush
