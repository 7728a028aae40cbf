// sparsepush/train/process_group.hpp: the processes a training run spans, as the trainer sees
// them: this process runs nodes [first_node, first_node + local_nodes) of total_nodes, and the
// group reduces what the nodes report (every node's scalars in node order, sums, an ordered sum
// of models) so that every process computes the same bits as one process running every node.
// single_process is the group of one; train/mpi.hpp has the MPI one.
#pragma once

#include <concepts>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <string_view>
#include <vector>

#include "../config.hpp"
#include "launcher.hpp"  // launched_ranks(), which this header held

namespace sparsepush {
inline namespace v0 {

/// What the trainer needs of the processes a run spans. Every call is collective: every process
/// makes it, in the same order, from the thread that drives the run.
template <class G>
concept process_group = requires(G& g, const G& cg, std::span<const double> mine, std::uint64_t v, double x,
                                 std::uint32_t u, std::span<float> af, std::span<double> ad,
                                 const std::function<void()>& add, std::string_view s) {
  { cg.rank() } -> std::convertible_to<int>;
  { cg.ranks() } -> std::convertible_to<int>;
  { cg.first_node() } -> std::convertible_to<std::uint32_t>;
  { cg.local_nodes() } -> std::convertible_to<std::size_t>;
  { cg.total_nodes() } -> std::convertible_to<std::size_t>;
  /// every node's value, in node order, from this process's nodes' values
  { g.allgather(mine) } -> std::same_as<std::vector<double>>;
  /// the sum over processes
  { g.sum(v) } -> std::convertible_to<std::uint64_t>;
  /// rank 0's value
  { g.broadcast(x) } -> std::convertible_to<double>;
  { g.broadcast(u) } -> std::convertible_to<std::uint32_t>;
  /// acc (a float and a double part) after add() ran on every process in rank order, each one
  /// continuing the previous one's sums: the bits of one process adding every node in order
  g.ordered_sum(af, ad, add);
  /// throw unless every process passes the same text (the settings handshake, checkpoint barriers)
  g.agree(s);
  /// wait until what this process sent has been delivered (the end of a run)
  g.finish();
};

namespace detail {
/// g.allgather / sum / broadcast with `what` naming the collective in a timeout's message, for a
/// group that takes it (mpi_process_group); a group without that argument is called without it.
template <class G>
std::vector<double> allgather(G& g, std::span<const double> mine, std::string_view what) {
  if constexpr (requires { g.allgather(mine, what); }) return g.allgather(mine, what);
  else return g.allgather(mine);
}
template <class G>
std::uint64_t sum(G& g, std::uint64_t v, std::string_view what) {
  if constexpr (requires { g.sum(v, what); }) return g.sum(v, what);
  else return g.sum(v);
}
/// The element-wise sum over the processes in place, for a group that has sum_in_place (an
/// optional member: eval_reduction::allreduce needs it); false when the group has none.
template <class G>
bool sum_in_place(G& g, std::span<double> v, std::string_view what) {
  if constexpr (requires { g.sum_in_place(v, what); }) {
    g.sum_in_place(v, what);
    return true;
  } else if constexpr (requires { g.sum_in_place(v); }) {
    g.sum_in_place(v);
    return true;
  } else {
    return false;
  }
}
template <class G, class V>
V broadcast(G& g, V v, std::string_view what) {
  if constexpr (requires { g.broadcast(v, what); }) return g.broadcast(v, what);
  else return g.broadcast(v);
}
}  // namespace detail

/// The group of one process running every node.
class single_process {
 public:
  /// A process that runs all `nodes` nodes; config_error for 0.
  explicit single_process(std::size_t nodes) : n_(nodes) {
    if (nodes == 0) throw config_error("a run needs at least one node");
  }
  /// 0: the only process.
  int rank() const noexcept { return 0; }
  /// 1: the only process.
  int ranks() const noexcept { return 1; }
  /// 0: this process runs every node.
  std::uint32_t first_node() const noexcept { return 0; }
  /// Every node.
  std::size_t local_nodes() const noexcept { return n_; }
  /// The number of nodes of the run.
  std::size_t total_nodes() const noexcept { return n_; }
  /// Every node's value: mine itself (size_error unless it has one value per node).
  std::vector<double> allgather(std::span<const double> mine) const {
    if (mine.size() != n_)
      throw size_error("allgather: " + std::to_string(mine.size()) + " values for " + std::to_string(n_) + " nodes");
    return {mine.begin(), mine.end()};
  }
  /// The sum over one process: v.
  std::uint64_t sum(std::uint64_t v) const noexcept { return v; }
  /// Rank 0's value: v.
  double broadcast(double v) const noexcept { return v; }
  /// Rank 0's value: v.
  std::uint32_t broadcast(std::uint32_t v) const noexcept { return v; }
  /// Runs add(), which adds every node in order: nothing to pass on.
  void ordered_sum(std::span<float>, std::span<double>, const std::function<void()>& add) const { add(); }
  /// The sum over one process: v unchanged.
  void sum_in_place(std::span<double>) const noexcept {}
  /// Nothing to compare with: one process always agrees.
  void agree(std::string_view) const noexcept {}
  /// Nothing to wait for.
  void finish() const noexcept {}
  /// The nonblocking sum of one process: complete at once.
  void start_sum(std::uint64_t v) noexcept { pending_ = v; }
  /// The value of start_sum() into out; true (complete at once).
  bool test_sum(std::uint64_t& out) const noexcept {
    out = pending_;
    return true;
  }

 private:
  std::size_t n_;
  std::uint64_t pending_ = 0;
};

}  // namespace v0
}  // namespace sparsepush
