// sparsepush/train/local_steps.hpp: one node's H local steps and optional outer step of a round
// (docs/design/algorithms.md, "Local steps and an outer step"), as free functions over spans, on
// a copy w of the push-sum numerator x (u does not change before the mix):
//   for h < H:  p = step(w / u);  w <- w - gamma_h p
//   outer step: p_o = zs - w / u (zs = x / u, the round's start);  m <- beta m + p_o;
//               w <- u (zs - gamma_o (p_o + beta m))
// and the round then pushes the direction x - w with gamma 1 (x' = w).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>

#include "../algorithm/report.hpp"
#include "../gossip/push_sum.hpp"
#include "../tensor.hpp"

namespace sparsepush {
inline namespace v0 {
namespace detail {

/// The outer step's learning rate gamma_o and momentum beta; the defaults, 1 and 0, are no outer
/// step (the defaults of trainer_options and of --outer-lr and --outer-momentum).
struct outer_step_settings {
  double lr = 1.0;        ///< gamma_o
  double momentum = 0.0;  ///< beta in [0, 1)
  /// Whether a round takes an outer step at all.
  bool active() const noexcept { return lr != 1.0 || momentum != 0.0; }
};

/// Node li's push-sum numerator x_i into out (the model itself where the algorithm keeps no
/// weight), and its weight u_i (1 there).
template <tensor_element T, class A>
double numerator(const A& alg, std::size_t li, std::span<T> out) {
  if constexpr (keeps_push_sum_weights<A>) {
    const auto& node = push_sum_node_of(alg, li);
    const auto x = std::span<const T>(node.x());
    std::copy(x.begin(), x.end(), out.begin());
    return node.u();
  } else {
    alg.model(li, out);
    return 1.0;
  }
}

/// H local steps on w (weight u): for h < H, cur = w / u, loss_h = step(h, cur) writes p into dir,
/// w -= T(lr(h)) p. Returns the mean of the H losses.
template <tensor_element T, class Step, class Rate>
double local_steps(std::span<T> w, double u, std::span<T> cur, std::span<const T> dir, std::uint32_t H, Step&& step,
                   Rate&& lr) {
  double loss = 0;
  for (std::uint32_t h = 0; h < H; ++h) {
    if (u == 1.0) std::copy(w.begin(), w.end(), cur.begin());
    else debias<T>(std::span<const T>(w), u, cur);
    loss += step(h, cur);
    const T g = static_cast<T>(lr(h));
    for (std::size_t j = 0; j < w.size(); ++j) w[j] -= g * dir[j];
  }
  return loss / H;
}

/// The outer step on w (weight u) from the round's start zs (de-biased): p_o = zs - w / u,
/// m <- beta m + p_o (m empty: no momentum), w <- u (zs - gamma_o (p_o + beta m)).
template <tensor_element T>
void outer_step(std::span<T> w, double u, std::span<const T> zs, std::span<T> m, const outer_step_settings& s) {
  const double beta = s.momentum, go = s.lr;
  for (std::size_t j = 0; j < w.size(); ++j) {
    const double z = static_cast<double>(zs[j]);
    const double po = z - static_cast<double>(w[j]) / u;
    double mj = 0;
    if (!m.empty()) {
      mj = beta * static_cast<double>(m[j]) + po;
      m[j] = static_cast<T>(mj);
    }
    w[j] = static_cast<T>(u * (z - go * (po + beta * mj)));
  }
}

/// The round's direction x - w, into w.
template <tensor_element T>
void direction_from(std::span<T> w, std::span<const T> x) {
  for (std::size_t j = 0; j < w.size(); ++j) w[j] = x[j] - w[j];
}

}  // namespace detail
}  // namespace v0
}  // namespace sparsepush
