// sparsepush/topology/schedule.hpp: the schedule concept and the periodic schedule.
// A schedule answers, for round t and sender j, the column j of W(t): out-edges (i, W[i][j])
// including the self-edge (j, W[j][j]). Senders never need their in-neighbours: every message
// carries its share (sender-side weighting). period() is P when W(t) = W(t mod P) for all t, and
// 0 for an aperiodic schedule (validated over a window of rounds instead).
#pragma once

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

/// A schedule that repeats a fixed list of mixing rounds: round t uses rounds[t mod P].
class periodic_schedule {
 public:
  periodic_schedule() = default;
  periodic_schedule(std::vector<mixing_round> rounds, std::string name = "custom")
      : rounds_(std::move(rounds)), name_(std::move(name)) {
    if (rounds_.empty()) throw schedule_error("a periodic schedule needs at least one round");
    for (std::size_t t = 0; t < rounds_.size(); ++t)
      if (rounds_[t].num_nodes() != rounds_[0].num_nodes())
        throw schedule_error("round " + std::to_string(t) + " has " +
                             std::to_string(rounds_[t].num_nodes()) + " nodes, round 0 has " +
                             std::to_string(rounds_[0].num_nodes()));
  }

  std::size_t num_nodes() const noexcept { return rounds_.empty() ? 0 : rounds_[0].num_nodes(); }
  std::size_t period() const noexcept { return rounds_.size(); }
  const std::string& name() const noexcept { return name_; }

  void out_edges(std::uint64_t round, std::uint32_t node, std::vector<out_edge>& out) const {
    const auto col = rounds_[round % rounds_.size()].column(node);
    out.assign(col.begin(), col.end());
  }
  const mixing_round& at(std::uint64_t round) const { return rounds_[round % rounds_.size()]; }

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
