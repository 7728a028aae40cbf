// sparsepush/train/tracked_step.hpp: the trainer's local step under gradient tracking
// (algorithm/tracking.hpp, docs/design/algorithms.md "Gradient tracking"): at every node this process
// runs, the backend's minibatch gradient at xh_i goes into the algorithm's gradient buffer, the
// node's tracker y_i + g_i(t) - g_i(t-1) is formed, and the backend's optimizer turns the tracker
// (not the gradient) into the direction p_i. The number of gradient evaluations is unchanged.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "../config.hpp"
#include "types.hpp"

namespace sparsepush {
inline namespace v0 {
namespace detail {

/// Whether A tracks gradients (tracking<...>): it has a gradient buffer and a tracker per node.
template <class A, class T>
concept tracks_gradients = requires(A& a, std::size_t i, std::span<T> out) {
  a.gradient(i);
  a.tracker(i, out);
};

/// Round t's directions at every node of alg (on its threads) into be.direction(node): the
/// gradient at xh_i, the tracker, the optimizer on the tracker; the losses into `losses`.
/// `scratch`: two buffers of d per worker (kept between rounds).
template <tensor_element T, class A>
void tracked_directions(A& alg, const local_training<T>& be, std::uint32_t t, std::uint32_t first,
                        std::vector<std::vector<T>>& scratch, std::span<double> losses) {
  if (!be.gradient || !be.direction_from)
    throw config_error("gradient tracking needs the backend's gradient and direction_from hooks (local_training)");
  const std::size_t d = alg.dim();
  if (scratch.size() < 2 * alg.workers()) scratch.resize(2 * alg.workers());
  alg.for_each_node([&](std::size_t li, std::size_t w) {
    auto& xh = scratch[2 * w];
    auto& y = scratch[2 * w + 1];
    xh.resize(d), y.resize(d);
    alg.model(li, std::span<T>(xh));
    const auto node = static_cast<std::uint32_t>(first + li);
    losses[li] = be.gradient(w, node, t, xh, alg.gradient(li));
    alg.tracker(li, std::span<T>(y));
    be.direction_from(w, node, y, xh, be.direction(node));
  });
}

}  // namespace detail
}  // namespace v0
}  // namespace sparsepush
