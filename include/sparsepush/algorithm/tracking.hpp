// sparsepush/algorithm/tracking.hpp: gradient tracking in the Push-DIGing form (docs/design/algorithms.md,
// "Gradient tracking") around a gossip algorithm A (sparse_push for SGP and SP, choco_push). Each node
// also carries a tracker y_i that follows the average gradient, which removes the drift that skewed
// data causes. A second instance of A carries y over the same schedule with the same compressor
// and consensus step (its own residuals or link references, its own messages). Round t at node i:
//   g_i(t) = grad F_i(xh_i; minibatch t)                   (the caller's, into gradient(i))
//   y_i(t) = y_i + g_i(t) - g_i(t-1)                        (tracker(i); g_i(-1) = 0, y_i = 0 at start)
//   x round of A with the direction p_i = optimizer(y_i(t))
//   y round of A: its local step is y_i - 1 * (g_i(t-1) - g_i(t)) = y_i(t), then it is sent and mixed
// so sum_i y_i == sum_i g_i(t) after every round (column-stochastic mixing conserves it). With
// identity, eta = 1 and full gradients this is Push-DIGing, which converges to the exact minimizer
// of sum_i f_i with a constant step. Lockstep rounds only; the bytes are both instances'. Over a
// network that carries other processes' nodes (MPI) the trackers' instance needs a network of its
// own (make_tracking in train/run_algorithm.hpp builds one), which the tracking object keeps.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "../checkpoint.hpp"
#include "../compress/common.hpp"
#include "../config.hpp"
#include "oracle.hpp"
#include "report.hpp"

namespace sparsepush {
inline namespace v0 {

/// Gradient tracking around algorithm A: x_alg trains the models, y_alg (built like it, from zero
/// models) carries the trackers.
template <class A>
class tracking {
 public:
  /// The model's tensor type.
  using tensor_type = typename A::tensor_type;
  /// The element type.
  using T = typename A::T;
  /// The algorithm tracked.
  using algorithm_type = A;

  /// Track x_alg's gradients with y_alg, an instance of the same algorithm and settings over the
  /// same nodes whose models are zero (config_error otherwise). `keep`: what the instances use and
  /// must outlive them (y_alg's own network), destroyed after them.
  tracking(std::unique_ptr<A> x_alg, std::unique_ptr<A> y_alg, std::shared_ptr<void> keep = nullptr)
      : keep_(std::move(keep)), x_(std::move(x_alg)), y_(std::move(y_alg)) {
    if (!x_ || !y_) throw config_error("gradient tracking needs the algorithm and its tracker's instance");
    if (x_->num_nodes() != y_->num_nodes() || x_->dim() != y_->dim())
      throw config_error("gradient tracking: the tracker's instance runs " + std::to_string(y_->num_nodes()) + " nodes of " +
                         std::to_string(y_->dim()) + " values, the algorithm " + std::to_string(x_->num_nodes()) +
                         " of " + std::to_string(x_->dim()));
    const std::size_t n = x_->num_nodes(), d = x_->dim();
    g_.assign(n, std::vector<T>(d, T(0)));
    prev_.assign(n, std::vector<T>(d, T(0)));
    step_.assign(n, std::vector<T>(d, T(0)));
    for (std::size_t i = 0; i < n; ++i)
      for (const T v : numerator(*y_, i))
        if (v != T(0)) throw config_error("gradient tracking: the tracker's instance must start from zero models");
  }

  /// Node i's buffer for this round's gradient g_i(t): the caller writes it before tracker(i).
  std::span<T> gradient(std::size_t i) { return g_.at(i); }
  /// Node i's tracker for this round, y_i + g_i(t) - g_i(t-1), into out (the direction's input).
  void tracker(std::size_t i, std::span<T> out) const {
    const auto y = numerator(*y_, i);
    const auto& g = g_.at(i);
    const auto& gp = prev_[i];
    for (std::size_t l = 0; l < y.size(); ++l) out[l] = y[l] - (gp[l] - g[l]);
  }
  /// Node i's tracker y_i as mixed by the last round (numerator), and the gradient it tracks.
  std::span<const T> tracked(std::size_t i) const { return numerator(*y_, i); }
  /// The gradient of node i that the last round's tracker correction used (g_i(t)).
  std::span<const T> last_gradient(std::size_t i) const { return prev_.at(i); }

  /// Round t with learning rate gamma: g_i(t) from the oracle at xh_i, p_i = y_i(t) (plain SGD).
  void round(std::uint32_t t, const gradient_oracle<T>& oracle, double gamma) {
    const std::size_t n = num_nodes();
    if (xh_.size() != x_->workers()) xh_.assign(x_->workers(), std::vector<T>(dim()));
    x_->for_each_node([&](std::size_t i, std::size_t w) {
      x_->model(i, std::span<T>(xh_[w]));
      oracle(first_node() + static_cast<std::uint32_t>(i), t, xh_[w], g_[i]);
      tracker(i, std::span<T>(step_[i]));
    });
    views_.assign(step_.begin(), step_.begin() + static_cast<std::ptrdiff_t>(n));
    round(t, std::span<const std::span<const T>>(views_), gamma);
  }

  /// Round t with the directions p_i the caller computed from tracker(i) (none: a round without a
  /// local step, the tracker then only mixes). The gradients are checked first (a NaN or Inf is a
  /// non_finite_error naming the node and the index), then the x round runs: when either refuses
  /// the round nothing changed. The y round runs after the x round; it refuses only a tracker
  /// that overflowed, and then the x round stands.
  void round(std::uint32_t t, std::span<const std::span<const T>> directions, double gamma) {
    const std::size_t n = num_nodes();
    if (!directions.empty())
      for (std::size_t i = 0; i < n; ++i)
        detail::check_finite(std::span<const T>(g_[i]), context{0, first_node() + static_cast<std::uint32_t>(i), t},
                             "gradient of the tracker");
    x_->round(t, directions, gamma);
    if (directions.empty()) {
      y_->round(t, std::span<const std::span<const T>>(), 0.0);
      return;
    }
    for (std::size_t i = 0; i < n; ++i) {  // the y round's direction: g(t-1) - g(t)
      auto& c = step_[i];
      for (std::size_t l = 0; l < c.size(); ++l) c[l] = prev_[i][l] - g_[i][l];
    }
    views_.assign(step_.begin(), step_.end());
    y_->round(t, std::span<const std::span<const T>>(views_), 1.0);
    std::swap(prev_, g_);
  }

  /// Checkpoint (section "TRAK"): the algorithm, the trackers' instance and every g_i(t-1).
  void save(checkpoint_writer& w) const {
    w.section("TRAK");
    x_->save(w);
    y_->save(w);
    w.u64(prev_.size());
    for (const auto& g : prev_) w.values(std::span<const T>(g));
  }
  /// Restore what save() wrote; a bad file is a checkpoint_error. The two instances restore in turn:
  /// a file that fails in the second leaves the first restored, so a failed restore needs a new
  /// object (the trainer builds one per attempt).
  void restore(checkpoint_reader& r) {
    r.section("TRAK");
    x_->restore(r);
    y_->restore(r);
    if (r.u64("tracked nodes") != prev_.size()) r.fail("holds the gradients of another node count");
    std::vector<std::vector<T>> prev(prev_.size(), std::vector<T>(dim()));
    for (auto& g : prev) r.values(std::span<T>(g), "last gradient");
    prev_ = std::move(prev);
  }

  /// Whether round t trains (the algorithm's answer).
  bool trains(std::uint32_t t) const { return x_->trains(t); }
  /// Run f(i, w) for every node this process runs on the algorithm's threads.
  template <class F>
  void for_each_node(F&& f) {
    x_->for_each_node(std::forward<F>(f));
  }
  /// The algorithm's worker threads.
  std::size_t workers() const noexcept { return x_->workers(); }
  /// Nodes run by this process.
  std::size_t num_nodes() const noexcept { return x_->num_nodes(); }
  /// The schedule's index of local node 0.
  std::uint32_t first_node() const noexcept {
    if constexpr (requires { x_->first_node(); }) return x_->first_node();
    else return 0;
  }
  /// The number of elements d of the model.
  std::size_t dim() const noexcept { return x_->dim(); }
  /// Node i's de-biased model.
  tensor_type model(std::size_t i) const { return x_->model(i); }
  /// Node i's de-biased model into out.
  void model(std::size_t i, std::span<T> out) const { x_->model(i, out); }
  /// The algorithm that trains the models.
  const A& algorithm() const noexcept { return *x_; }
  /// The instance that carries the trackers.
  const A& trackers() const noexcept { return *y_; }
  /// Local node i of the algorithm (CHOCO-Push: its numerator and weight).
  decltype(auto) node(std::size_t i) const
    requires requires(const A& a) { a.node(i); }
  {
    return x_->node(i);
  }
  /// The algorithm's group of push-sum nodes (SGP, SP).
  decltype(auto) group() const
    requires requires(const A& a) { a.group(); }
  {
    return x_->group();
  }
  /// Bytes sent by both instances: the models' messages and the trackers'.
  std::size_t bytes_sent() const noexcept { return x_->bytes_sent() + y_->bytes_sent(); }
  /// Envelopes sent by both instances.
  std::size_t messages_sent() const noexcept { return x_->messages_sent() + y_->messages_sent(); }
  /// What the messages sent would cost as fp32 vectors.
  std::size_t full_precision_bytes() const noexcept { return x_->full_precision_bytes() + y_->full_precision_bytes(); }
  /// Bytes of state of node i: both instances' and the two gradients kept.
  std::size_t state_bytes(std::size_t i) const {
    return x_->state_bytes(i) + y_->state_bytes(i) + 3 * dim() * sizeof(T);
  }

 private:
  /// Node i's numerator in instance a.
  static std::span<const T> numerator(const A& a, std::size_t i) { return std::span<const T>(push_sum_node_of(a, i).x()); }

  std::shared_ptr<void> keep_;  ///< what the instances use (declared first: destroyed last)
  std::unique_ptr<A> x_, y_;
  std::vector<std::vector<T>> g_, prev_, step_;  ///< g_i(t), g_i(t-1), the directions' scratch
  std::vector<std::vector<T>> xh_;               ///< oracle rounds: the model per thread
  std::vector<std::span<const T>> views_;
};

}  // namespace v0
}  // namespace sparsepush
