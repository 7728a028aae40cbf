// sparsepush/gossip/group.hpp: n push-sum nodes exchanging compressed messages over a schedule
// and a transport: the communication and gossip phases of Sparse-Push (ALGORITHMS.md, steps 2-3):
//   v_i = x_i + e_i;  q_i = C(v_i);  e_i <- v_i - q_i              (error feedback, optional)
//   x_i <- x_i + eta * ( sum_{j in in(i) + {i}} W[i][j] q_j - q_i )
//   u_i <- u_i + eta * ( sum_{j in in(i) + {i}} W[i][j] u_j - u_i )
// With the identity compressor and eta = 1 this is exact push-sum averaging (SGP's gossip).
// A round either completes at every node or throws before any node changes.
#pragma once

#include <cmath>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "../compress/common.hpp"
#include "../detail/thread_pool.hpp"
#include "../error_feedback.hpp"
#include "../topology/schedule.hpp"
#include "../transport/transport.hpp"
#include "push_sum.hpp"

namespace sparsepush {
inline namespace v0 {

/// Settings of a push-sum group.
struct gossip_options {
  double eta = 1.0;             ///< consensus step in (0, 1]
  bool error_feedback = true;   ///< compress x + e and keep e = v - q (identity leaves e = 0)
  std::size_t threads = 1;      ///< worker threads for per-node work (results do not depend on it)
  std::uint64_t seed = 0;       ///< keys the compressors' random streams with (node, round)
};

/// n nodes of push-sum state over a user tensor type, with their residuals and message buffers.
template <class Tensor>
  requires mutable_flat_tensor<Tensor&>
class push_sum_group {
 public:
  using value_type = tensor_value_t<Tensor>;
  using T = value_type;

  push_sum_group(std::vector<Tensor> x0, gossip_options opt = {})
      : opt_(opt), pool_(opt.threads), msgs_(x0.size()), cols_(x0.size()), inbox_(x0.size()),
        u_next_(x0.size()) {
    if (x0.empty()) throw config_error("a push-sum group needs at least one node");
    if (!(opt.eta > 0.0 && opt.eta <= 1.0))
      throw config_error("eta must be in (0, 1], got " + std::to_string(opt.eta));
    const std::size_t d = as_const_span(x0[0]).size();
    for (std::size_t i = 0; i < x0.size(); ++i) {
      const std::size_t di = as_const_span(x0[i]).size();
      if (di != d)
        throw size_error("node " + std::to_string(i) + " has " + std::to_string(di) +
                         " parameters, node 0 has " + std::to_string(d));
      detail::check_finite(as_const_span(x0[i]), context{0, static_cast<std::uint32_t>(i), 0},
                           "initial x");
    }
    for (auto& x : x0) nodes_.push_back({std::move(x), 1.0});
    residual_.assign(nodes_.size(), std::vector<T>(opt_.error_feedback ? d : 0, T(0)));
    d_ = d;
  }

  std::size_t num_nodes() const noexcept { return nodes_.size(); }
  std::size_t dim() const noexcept { return d_; }
  const gossip_options& options() const noexcept { return opt_; }

  std::span<T> x(std::size_t i) { return as_span(nodes_.at(i).x); }
  std::span<const T> x(std::size_t i) const { return as_const_span(nodes_.at(i).x); }
  double u(std::size_t i) const { return nodes_.at(i).u; }
  std::span<const T> residual(std::size_t i) const { return residual_.at(i); }
  const message& last_message(std::size_t i) const { return msgs_.at(i); }
  const Tensor& tensor(std::size_t i) const { return nodes_.at(i).x; }

  /// xh_i = x_i / u_i.
  void debiased(std::size_t i, std::span<T> out) const { debias<T>(x(i), u(i), out); }
  std::vector<T> debiased(std::size_t i) const {
    std::vector<T> out(d_);
    debiased(i, out);
    return out;
  }

  /// Run f(i) for every node on the group's threads (f must only touch node i's data).
  void for_each_node(const std::function<void(std::size_t)>& f) { pool_.parallel_for(nodes_.size(), f); }

  /// Bytes of state one node keeps: numerator, residual, weight and its outgoing message buffer
  /// capacity (the last message's wire size).
  std::size_t state_bytes(std::size_t i) const {
    return d_ * sizeof(T) + residual_.at(i).size() * sizeof(T) + sizeof(double) +
           msgs_.at(i).wire_bytes();
  }

  /// Per-round settings: the consensus step and an optional local step x_i -= gamma * p_i.
  struct step {
    double eta = 1.0;
    std::span<const std::vector<T>> directions{};  ///< one per node; empty: no local step
    double gamma = 0.0;
    bool feedback = true;  ///< use error feedback this round (if the group keeps a residual)
  };

  /// One round t with the group's eta and no local step.
  template <schedule S, compressor_for<T> C, transport Tr>
  void round(const S& sched, const C& comp, Tr& net, std::uint32_t t) {
    round(sched, comp, net, t, step{opt_.eta, {}, 0.0});
  }

  /// One round t: local step (optional), compress, push through the transport, mix.
  /// Mixing follows the equations literally: S_i = W_ii q_i + sum_{j in in(i)} W_ij q_j (self
  /// first, then senders ascending), x_i <- x_i + eta (S_i - q_i); with eta = 1 it is evaluated
  /// as (x_i - q_i) + S_i, so identity compression gives push-sum's x_i = sum_j W_ij x_j exactly.
  template <schedule S, compressor_for<T> C, transport Tr>
  void round(const S& sched, const C& comp, Tr& net, std::uint32_t t, const step& st) {
    const std::size_t n = nodes_.size();
    if (sched.num_nodes() != n)
      throw schedule_error("schedule has " + std::to_string(sched.num_nodes()) +
                           " nodes, the group has " + std::to_string(n));
    if (!(st.eta > 0.0 && st.eta <= 1.0))
      throw config_error("eta must be in (0, 1], got " + std::to_string(st.eta) + " in round " +
                         std::to_string(t));
    const bool local = !st.directions.empty();
    if (local) {
      if (st.directions.size() != n)
        throw size_error("round " + std::to_string(t) + ": " + std::to_string(st.directions.size()) +
                         " local directions for " + std::to_string(n) + " nodes");
      if (!std::isfinite(st.gamma))
        throw config_error("learning rate is not finite in round " + std::to_string(t));
      for (std::size_t i = 0; i < n; ++i)
        if (st.directions[i].size() != d_)
          throw size_error("round " + std::to_string(t) + ", node " + std::to_string(i) +
                           ": direction has " + std::to_string(st.directions[i].size()) +
                           " elements, the model has " + std::to_string(d_));
    }
    const T gamma = static_cast<T>(st.gamma);
    const bool fb = opt_.error_feedback && st.feedback;
    // Gather W(t) and check every input before any state changes.
    pool_.parallel_for(n, [&](std::size_t i) {
      const auto node = static_cast<std::uint32_t>(i);
      sched.out_edges(t, node, cols_[i]);
      double self = -1.0;
      for (const auto& e : cols_[i]) {
        if (e.to >= n)
          throw schedule_error("round " + std::to_string(t) + ", node " + std::to_string(i) +
                               ": edge to node " + std::to_string(e.to) + " outside [0, " +
                               std::to_string(n) + ")");
        if (e.to == node) self = e.share;
      }
      if (!(self > 0.0))
        throw schedule_error("round " + std::to_string(t) + ", node " + std::to_string(i) +
                             ": missing self-loop (W[j][j] must be > 0)");
      check_inputs(i, t, local ? std::span<const T>(st.directions[i]) : std::span<const T>(), gamma, fb);
    });
    // Local update and communication: x_i -= gamma p_i; q_i = C(x_i + e_i); e_i = v_i - q_i.
    pool_.parallel_for(n, [&](std::size_t i) {
      if (local) {
        const auto xi = x(i);
        const auto& p = st.directions[i];
        for (std::size_t l = 0; l < d_; ++l) xi[l] = xi[l] - gamma * p[l];
      }
      const context ctx{opt_.seed, static_cast<std::uint32_t>(i), t};
      if (fb)
        compress_with_feedback<T>(comp, x(i), std::span<T>(residual_[i]), msgs_[i], ctx);
      else
        comp.compress(std::span<const T>(x(i)), msgs_[i], ctx);
    });
    std::vector<outbox> out(n);
    for (std::size_t i = 0; i < n; ++i) out[i] = {&msgs_[i], nodes_[i].u, cols_[i]};
    net.deliver(t, out, inbox_);
    // Gossip: S_i from own and received messages, then x_i and u_i (pre-round weights).
    const double eta = st.eta;
    pool_.parallel_for(n, [&](std::size_t i) {
      double w_self = 0.0;
      for (const auto& e : cols_[i])
        if (e.to == i) w_self = e.share;
      thread_local std::vector<weighted_message> mix;
      thread_local std::vector<T> s;
      mix.clear();
      mix.push_back({&msgs_[i], w_self});
      double u_sum = w_self * nodes_[i].u;
      for (const auto& env : inbox_[i]) {
        mix.push_back({env.msg, env.share});
        u_sum += env.share * env.u;
      }
      s.assign(d_, T(0));
      combine<T>(std::span<T>(s), mix);
      const auto xi = x(i);
      if (eta == 1.0) {
        for_each_value<T>(msgs_[i], [xi](std::uint32_t l, T q) { xi[l] = xi[l] - q; });
        for (std::size_t l = 0; l < d_; ++l) xi[l] = xi[l] + s[l];
        u_next_[i] = u_sum;
      } else {
        for_each_value<T>(msgs_[i], [](std::uint32_t l, T q) { s[l] = s[l] - q; });
        const T e = static_cast<T>(eta);
        for (std::size_t l = 0; l < d_; ++l) xi[l] = xi[l] + e * s[l];
        u_next_[i] = nodes_[i].u + eta * (u_sum - nodes_[i].u);
      }
    });
    for (std::size_t i = 0; i < n; ++i) nodes_[i].u = u_next_[i];
  }

  /// mean over nodes of the de-biased models.
  std::vector<double> average_model() const {
    std::vector<double> avg(d_, 0.0);
    for (std::size_t i = 0; i < nodes_.size(); ++i) {
      const auto xi = x(i);
      for (std::size_t l = 0; l < d_; ++l) avg[l] += static_cast<double>(xi[l]) / nodes_[i].u;
    }
    for (auto& a : avg) a /= static_cast<double>(nodes_.size());
    return avg;
  }

  /// Parameter divergence (1/n) sum_i || xh_i - mean(xh) ||_2, in double.
  double consensus_distance() const {
    const auto avg = average_model();
    double total = 0.0;
    for (std::size_t i = 0; i < nodes_.size(); ++i) {
      const auto xi = x(i);
      double s = 0.0;
      for (std::size_t l = 0; l < d_; ++l) {
        const double diff = static_cast<double>(xi[l]) / nodes_[i].u - avg[l];
        s += diff * diff;
      }
      total += std::sqrt(s);
    }
    return total / static_cast<double>(nodes_.size());
  }

  /// sum_i x_i (in double) and sum_i u_i: conserved by column-stochastic mixing.
  std::vector<double> mass() const {
    std::vector<double> m(d_, 0.0);
    for (std::size_t i = 0; i < nodes_.size(); ++i) {
      const auto xi = x(i);
      for (std::size_t l = 0; l < d_; ++l) m[l] += static_cast<double>(xi[l]);
    }
    return m;
  }
  double weight_mass() const {
    double s = 0.0;
    for (const auto& nd : nodes_) s += nd.u;
    return s;
  }

 private:
  /// Throw non_finite_error if x_i - gamma p_i (+ e_i) has a NaN/Inf, before anything changes.
  void check_inputs(std::size_t i, std::uint32_t t, std::span<const T> p, T gamma, bool fb) const {
    const auto xi = x(i);
    const context ctx{opt_.seed, static_cast<std::uint32_t>(i), t};
    auto v_at = [&](std::size_t l) {
      T v = p.empty() ? xi[l] : xi[l] - gamma * p[l];
      return fb ? v + residual_[i][l] : v;
    };
    if (!p.empty()) detail::check_finite(p, ctx, "local direction");
    bool ok = true;
    for (std::size_t l = 0; l < d_; ++l) ok &= std::isfinite(v_at(l));
    if (ok) return;
    for (std::size_t l = 0; l < d_; ++l)
      if (!std::isfinite(v_at(l)))
        detail::throw_non_finite(static_cast<double>(v_at(l)), l, ctx, fb ? "x + e" : "x");
  }

  gossip_options opt_;
  detail::thread_pool pool_;
  std::vector<push_sum_state<Tensor>> nodes_;
  std::vector<std::vector<T>> residual_;
  std::vector<message> msgs_;
  std::vector<std::vector<out_edge>> cols_;
  std::vector<std::vector<envelope>> inbox_;
  std::vector<double> u_next_;
  std::size_t d_ = 0;
};

}  // namespace v0
}  // namespace sparsepush
