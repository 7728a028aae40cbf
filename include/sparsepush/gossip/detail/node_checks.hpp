// sparsepush/gossip/detail/node_checks.hpp: push_sum_node's validation of a round, defined out of
// the class (gossip/node.hpp includes it): the configuration (eta in (0, 1], u_i >= min_weight(),
// the direction's size, the column W[.][i]: shares in [0, 1] summing to 1, the compressor) and one
// branch-free finiteness pass over v_i = x_i - gamma p_i (+ e_i) before anything changes.
#pragma once

#include <cmath>
#include <cstdio>
#include <span>
#include <string>

#include "../../topology/validate.hpp"
#include "../push_sum_node.hpp"

namespace sparsepush {
inline namespace v0 {

template <class Tensor>
  requires mutable_flat_tensor<Tensor&>
template <class C>
inline void push_sum_node<Tensor>::check_config(std::uint32_t t, const C& comp, std::span<const out_edge> out,
                                                const step& st, std::size_t nodes) const {
  const context ctx{opt_.seed, opt_.id, t};
  if (!(st.eta > 0.0 && st.eta <= 1.0))
    throw config_error("eta must be in (0, 1], got " + std::to_string(st.eta) + " in round " +
                       std::to_string(t));
  if (!(u_ >= min_weight())) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.3g fell below %.3g", u_, min_weight());
    throw weight_underflow_error(
        "round " + std::to_string(t) + ", node " + std::to_string(opt_.id) + ": push-sum weight u = " + buf +
        (opt_.recovery == loss_recovery::none ? "; messages are being lost: use loss_recovery::acknowledged"
                                              : "; the schedule starves this node"));
  }
  const bool local = !st.direction.empty();
  if (local) {
    if (!std::isfinite(st.gamma))
      throw config_error("learning rate is not finite in round " + std::to_string(t));
    detail::check_direction_size(st.direction.size(), d_, ctx);
  }
  // the one check of a round's column, whatever path the round takes (a group, a node alone):
  // a column summing to 2 would double sum_i u_i every round
  check_column(t, opt_.id, out, nodes);
  validate_compressor<T>(comp, d_, ctx);
}

template <class Tensor>
  requires mutable_flat_tensor<Tensor&>
inline void push_sum_node<Tensor>::check_finite_inputs(const context& ctx, std::span<const T> p, T gamma,
                                                       bool fb) const {
  const auto xi = x();
  auto v_at = [&](std::size_t l) {
    T v = p.empty() ? xi[l] : xi[l] - gamma * p[l];
    return fb ? v + residual_[l] : v;
  };
  // one branch-free pass over x, p and e; the slow scans below only name the first bad value
  using U = typename detail::finite_bits<T>::U;
  U acc = 0;
  const T* xp = xi.data();
  const T* ep = fb ? residual_.data() : nullptr;
  if (p.empty() && !fb) acc = detail::all_finite(xp, d_) ? 0 : ~U{0};
  else if (p.empty()) for (std::size_t l = 0; l < d_; ++l) acc |= detail::non_finite_flag<T>(xp[l] + ep[l]);
  else if (!fb)
    for (std::size_t l = 0; l < d_; ++l)
      acc |= detail::non_finite_flag<T>(p[l]) | detail::non_finite_flag<T>(xp[l] - gamma * p[l]);
  else
    for (std::size_t l = 0; l < d_; ++l)
      acc |= detail::non_finite_flag<T>(p[l]) | detail::non_finite_flag<T>((xp[l] - gamma * p[l]) + ep[l]);
  if (detail::flags_finite<T>(acc)) return;
  if (!p.empty()) detail::check_finite(p, ctx, "local direction");
  for (std::size_t l = 0; l < d_; ++l)
    if (!std::isfinite(v_at(l)))
      detail::throw_non_finite(static_cast<double>(v_at(l)), l, ctx, fb ? "x + e" : "x");
}

}  // namespace v0
}  // namespace sparsepush
