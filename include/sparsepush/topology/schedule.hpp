// sparsepush/topology/schedule.hpp: the schedule concept and the periodic schedule.
// A schedule answers, for round t and sender j, the column j of W(t): out-edges (i, W[i][j])
// including the self-edge (j, W[j][j]). Senders never need their in-neighbours: every message
// carries its share (sender-side weighting). Receivers ask for row i of W(t), in-edges
// (j, W[i][j]) by ascending j, to know whom to wait for: built-in schedules answer in_edges()
// directly, in_edges_of() derives it from out_edges() for any schedule. period() is P when
// W(t) = W(t mod P) for all t, and 0 for an aperiodic schedule (validated over a window instead).
#pragma once

#include <algorithm>

#include <concepts>
#include <cstdint>
#include <string>
#include <vector>

#include "graph.hpp"

namespace sparsepush {
inline namespace v0 {

/// A time-varying column-stochastic mixing schedule.
template <class S>
concept schedule = requires(const S& s, std::uint64_t round, std::uint32_t node,
                            std::vector<out_edge>& out) {
  { s.num_nodes() } -> std::convertible_to<std::size_t>;
  { s.period() } -> std::convertible_to<std::size_t>;
  s.out_edges(round, node, out);  // replaces out with column `node` of W(round)
};

/// A schedule that also answers a receiver's row of W directly.
template <class S>
concept schedule_with_in_edges =
    schedule<S> && requires(const S& s, std::uint64_t round, std::uint32_t node,
                            std::vector<in_edge>& out) {
      s.in_edges(round, node, out);  // replaces out with row `node` of W(round), ascending from
    };

namespace detail {
inline void require_node(std::size_t node, std::size_t n) {
  if (node >= n)
    throw schedule_error("node " + std::to_string(node) + " is outside [0, " + std::to_string(n) + ")");
}
}  // namespace detail

/// Replace out with row `node` of W(round): every sender j whose column names node, with the
/// share it gives (W[node][j]), self-edge included, by ascending j. Calls s.in_edges when the
/// schedule has it; otherwise scans every sender's out_edges, O(n deg) per call: fine for a
/// simulation, not for one node per process (give such a schedule its own in_edges).
template <schedule S>
void in_edges_of(const S& s, std::uint64_t round, std::uint32_t node, std::vector<in_edge>& out) {
  if constexpr (schedule_with_in_edges<S>) {
    s.in_edges(round, node, out);
  } else {
    const std::size_t n = s.num_nodes();
    detail::require_node(node, n);
    out.clear();
    std::vector<out_edge> col;
    for (std::size_t j = 0; j < n; ++j) {
      const auto from = static_cast<std::uint32_t>(j);
      s.out_edges(round, from, col);
      for (const auto& e : col)
        if (e.to == node) {
          if (!out.empty() && out.back().from == from) out.back().share += e.share;
          else out.push_back(in_edge{from, e.share});
        }
    }
  }
}

/// A schedule that repeats a fixed list of mixing rounds: round t uses rounds[t mod P].
class periodic_schedule {
 public:
  periodic_schedule() = default;
  /// Repeats `rounds` in order; `name` is what reports call it. Throws schedule_error when rounds is
  /// empty or the rounds differ in their node counts.
  periodic_schedule(std::vector<mixing_round> rounds, std::string name = "custom")
      : rounds_(std::move(rounds)), name_(std::move(name)) {
    if (rounds_.empty()) throw schedule_error("a periodic schedule needs at least one round");
    for (std::size_t t = 0; t < rounds_.size(); ++t)
      if (rounds_[t].num_nodes() != rounds_[0].num_nodes())
        throw schedule_error("round " + std::to_string(t) + " has " +
                             std::to_string(rounds_[t].num_nodes()) + " nodes, round 0 has " +
                             std::to_string(rounds_[0].num_nodes()));
  }

  /// The number of nodes n.
  std::size_t num_nodes() const noexcept { return rounds_.empty() ? 0 : rounds_[0].num_nodes(); }
  /// The number of rounds P before the schedule repeats.
  std::size_t period() const noexcept { return rounds_.size(); }
  /// The schedule's name, as given (e.g. "time-varying-ring").
  const std::string& name() const noexcept { return name_; }

  /// Replaces out with column `node` of W(round): its out-edges, self-edge included.
  void out_edges(std::uint64_t round, std::uint32_t node, std::vector<out_edge>& out) const {
    const auto col = rounds_[round % rounds_.size()].column(node);
    out.assign(col.begin(), col.end());
  }
  /// Replace out with row `node` of W(round) (precomputed: one copy).
  void in_edges(std::uint64_t round, std::uint32_t node, std::vector<in_edge>& out) const {
    detail::require_node(node, num_nodes());
    const auto row = rounds_[round % rounds_.size()].row(node);
    out.assign(row.begin(), row.end());
  }
  /// The mixing round used in round `round` (rounds[round mod P]).
  const mixing_round& at(std::uint64_t round) const { return rounds_[round % rounds_.size()]; }
  /// Every round's matrix is symmetric (W = W^T, so doubly stochastic): what D-PSGD, DeepSqueeze
  /// and CHOCO need. A node's shares to its out-neighbours equal its shares from them, exactly.
  bool symmetric() const {
    for (const auto& w : rounds_)
      for (std::uint32_t i = 0; i < w.num_nodes(); ++i) {
        const auto col = w.column(i);
        const auto row = w.row(i);
        std::vector<in_edge> sent;
        for (const auto& e : col)
          if (e.to != i) sent.push_back(in_edge{e.to, e.share});
        std::vector<in_edge> got;
        for (const auto& e : row)
          if (e.from != i) got.push_back(e);
        auto by_node = [](const in_edge& a, const in_edge& b) { return a.from < b.from; };
        std::sort(sent.begin(), sent.end(), by_node);
        std::sort(got.begin(), got.end(), by_node);
        if (sent != got) return false;
      }
    return true;
  }

 private:
  std::vector<mixing_round> rounds_;
  std::string name_;
};

/// A static schedule: the same uniform-push weights on a user graph every round.
inline periodic_schedule static_schedule(const digraph& g, std::string name = "static") {
  return periodic_schedule({uniform_push(g)}, std::move(name));
}

/// A time-varying schedule from a list of user graphs (round t uses graphs[t mod P]), uniform push.
inline periodic_schedule time_varying_schedule(const std::vector<digraph>& graphs,
                                               std::string name = "time-varying") {
  std::vector<mixing_round> rounds;
  for (const auto& g : graphs) rounds.push_back(uniform_push(g));
  return periodic_schedule(std::move(rounds), std::move(name));
}

}  // namespace v0
}  // namespace sparsepush
