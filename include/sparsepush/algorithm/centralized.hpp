// sparsepush/algorithm/centralized.hpp: the centralized reference for accuracy comparisons: one
// shared model x, every node's gradient at x averaged (an all-reduce), x <- x - gamma mean_i g_i.
// Its byte count is that of a ring all-reduce of fp32 values: 2 (n - 1) / n * 4 d per node a round.
#pragma once

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "../compress/common.hpp"
#include "../detail/thread_pool.hpp"
#include "../checkpoint.hpp"
#include "oracle.hpp"

namespace sparsepush {
inline namespace v0 {

/// All-reduce SGD over n nodes sharing one model, over any tensor type (or an element type,
/// meaning std::vector of it).
template <class X>
class centralized {
  static_assert(detail::require_algorithm_tensor<algorithm_tensor_t<X>>());

 public:
  /// The model's tensor type (X, or std::vector<X> for an element type X).
  using tensor_type = algorithm_tensor_t<X>;
  /// The element type, float or double.
  using T = tensor_value_t<tensor_type>;

  /// `nodes` nodes sharing the model x0, their gradients computed on `threads` threads. Throws
  /// config_error for nodes = 0 and size_error for an empty x0.
  centralized(tensor_type x0, std::size_t nodes, std::size_t threads = 1)
      : x_(std::move(x0)), pool_(threads) {
    if (nodes < 1) throw config_error("centralized training needs at least one node");
    if (as_const_span(x_).empty()) throw size_error("centralized training needs a non-empty model");
    g_.assign(nodes, std::vector<T>(as_const_span(x_).size()));
  }

  /// One round t: every node's g_i at the shared x (the oracle writes it into a buffer of node i).
  void round(std::uint32_t t, const gradient_oracle<T>& oracle, double gamma) {
    const std::size_t n = g_.size();
    const auto x = as_span(x_);
    pool_.parallel_for(n, [&](std::size_t i) {
      oracle(static_cast<std::uint32_t>(i), t, std::span<const T>(x), g_[i]);
    });
    views_.assign(g_.begin(), g_.end());
    round(t, std::span<const std::span<const T>>(views_), gamma);
  }

  /// One round t with the nodes' directions g_i computed by the caller (for_each_node, model()).
  void round(std::uint32_t t, std::span<const std::span<const T>> directions, double gamma) {
    const std::size_t n = g_.size();
    const auto x = as_span(x_);
    const std::size_t d = x.size();
    if (directions.size() != n)
      throw size_error("round " + std::to_string(t) + ": " + std::to_string(directions.size()) +
                       " local directions for " + std::to_string(n) + " nodes");
    pool_.parallel_for(n, [&](std::size_t i) {
      const context ctx{0, static_cast<std::uint32_t>(i), t};
      detail::check_direction_size(directions[i].size(), d, ctx);
      detail::check_finite(directions[i], ctx, "local direction");
    });
    const T scale = static_cast<T>(gamma / static_cast<double>(n));
    for (std::size_t l = 0; l < d; ++l) {
      T sum = 0;
      for (std::size_t i = 0; i < n; ++i) sum += directions[i][l];
      x[l] -= scale * sum;
    }
    bytes_ += 2 * (n - 1) * 4 * d;  // n nodes x 2 (n - 1) / n x 4 d
  }

  /// Every round trains.
  bool trains(std::uint32_t) const noexcept { return true; }
  /// Run f(i, w) for every node on the algorithm's threads (w names the thread).
  template <class F>
    requires std::invocable<F&, std::size_t, std::size_t>
  void for_each_node(F&& f) {
    pool_.parallel_for_worker(g_.size(), f);
  }
  /// The number of threads for_each_node() runs on.
  std::size_t workers() const noexcept { return pool_.size(); }

  /// The number of nodes n.
  std::size_t num_nodes() const noexcept { return g_.size(); }
  /// The number of elements d of the model.
  std::size_t dim() const noexcept { return as_const_span(x_).size(); }
  /// A copy of the shared model (the same for every node).
  tensor_type model(std::size_t) const { return x_; }
  /// The shared model into out (out.size() must be dim()).
  void model(std::size_t, std::span<T> out) const {
    detail::copy_model<T>(as_const_span(x_), out);
  }
  /// Bytes of state per node: the shared model and one gradient buffer.
  std::size_t state_bytes(std::size_t) const { return 2 * dim() * sizeof(T); }
  /// Bytes a ring all-reduce of fp32 gradients would have sent so far: 2 (n - 1) 4 d a round, all
  /// nodes together.
  std::size_t bytes_sent() const noexcept { return bytes_; }
  /// Checkpoint the model and the byte count (section "CNTR").
  void save(checkpoint_writer& w) const {
    w.section("CNTR");
    w.u64(g_.size());
    w.values(as_const_span(x_));
    w.u64(bytes_);
  }
  /// Restore what save() wrote, or nothing (checkpoint_error).
  void restore(checkpoint_reader& r) {
    r.section("CNTR");
    if (r.u64("node count") != g_.size()) r.fail("holds a centralized run of another node count");
    std::vector<T> x(dim());
    r.values(std::span<T>(x), "model");
    for (const T a : x)
      if (!std::isfinite(a)) r.fail("holds a model with a NaN or Inf (corrupted)");
    const auto bytes = r.u64("bytes sent");
    std::copy(x.begin(), x.end(), as_span(x_).begin());
    bytes_ = static_cast<std::size_t>(bytes);
  }
  /// What the same traffic costs in fp32 (all-reduce sends fp32 already: equal to bytes_sent).
  std::size_t full_precision_bytes() const noexcept { return bytes_; }

 private:
  tensor_type x_;
  std::vector<std::vector<T>> g_;
  std::vector<std::span<const T>> views_;
  detail::thread_pool pool_;
  std::size_t bytes_ = 0;
};

}  // namespace v0
}  // namespace sparsepush
