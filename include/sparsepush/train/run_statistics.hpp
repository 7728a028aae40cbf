// sparsepush/train/run_statistics.hpp: what a run reports beyond its evaluations, gathered over
// the processes where they meet: the mean loss over every node (and the run's first one), and at
// the end the pace (each node's step count, the largest staleness, each process's receive time)
// and the counters (the push-sum weight mass, the messages sent and dropped).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "process_group.hpp"
#include "types.hpp"

namespace sparsepush {
inline namespace v0 {
namespace detail {

/// The losses of this process's nodes, and the run's first mean loss.
///
/// One process knows every loss after every round; several gather them only where they meet
/// anyway (no collective inside a round), keeping the first round's until then.
struct run_losses {
  std::vector<double> last;         ///< this process's nodes' losses of their last local step
  std::vector<double> first_round;  ///< the first round's, until they are gathered (several processes)
  double first = 0.0;               ///< the run's first mean loss (0 until known)
  bool have_first = false;          ///< `first` is the run's (gathered, or from the checkpoint)

  /// After a round whose losses are not gathered: keep them if they are the run's first.
  void keep_if_first() {
    if (!have_first && first_round.empty()) first_round = last;
  }

  /// Collective: the mean of this round's losses over every node (summed in node order, the bits
  /// of one process); the run's first mean loss too, from the first round's losses kept since
  /// that round when this is a later one.
  template <process_group G>
  double gather(G& group) {
    auto mean = [&group](std::span<const double> mine, std::string_view what) {
      double loss = 0;
      for (const double l : detail::allgather(group, mine, what)) loss += l / static_cast<double>(group.total_nodes());
      return loss;
    };
    if (!first_round.empty()) {
      first = mean(first_round, "the gather of the first round's losses");
      have_first = true;
      first_round = {};
    }
    const double loss = mean(last, "the gather of the losses (at an evaluation or a checkpoint)");
    if (!have_first) {
      first = loss;
      have_first = true;
    }
    return loss;
  }
};

/// Collective: every node's step count (`steps`: this process's nodes'), the largest staleness
/// and each process's receive time, into res.
template <process_group G, class A>
void gather_pace(G& group, const A& alg, std::span<const std::uint64_t> steps, train_result& res) {
  const std::size_t ln = group.local_nodes();
  std::vector<double> v(ln);
  for (std::size_t i = 0; i < ln; ++i) v[i] = static_cast<double>(steps[i]);
  res.steps_per_node.clear();
  for (const double s : detail::allgather(group, v, "the gather of every node's step count"))
    res.steps_per_node.push_back(static_cast<std::uint64_t>(s));
  double stale = 0, wait = 0;
  if constexpr (requires { alg.max_staleness(); }) stale = alg.max_staleness();
  if constexpr (requires { alg.wait_seconds(); }) wait = alg.wait_seconds();
  std::fill(v.begin(), v.end(), stale);
  for (const double s : detail::allgather(group, v, "the gather of the largest staleness"))
    res.max_staleness = std::max(res.max_staleness, static_cast<std::uint32_t>(s));
  // the receive time by rank: each node reports its process's, and its rank
  std::fill(v.begin(), v.end(), wait);
  const auto waits = detail::allgather(group, v, "the gather of the receive times");
  std::fill(v.begin(), v.end(), static_cast<double>(group.rank()));
  const auto ranks = detail::allgather(group, v, "the gather of the ranks of the nodes");
  res.wait_seconds_per_rank.assign(static_cast<std::size_t>(group.ranks()), 0.0);
  for (std::size_t i = 0; i < ranks.size(); ++i) res.wait_seconds_per_rank.at(static_cast<std::size_t>(ranks[i])) = waits[i];
}

/// Collective: the push-sum weight mass sum_i u_i over every node in node order (push-sum
/// algorithms only), the messages dropped and sent over every process, into res.
template <process_group G, class A>
void gather_counters(G& group, const A& alg, train_result& res) {
  if constexpr (keeps_push_sum_weights<A>) {
    const std::size_t ln = group.local_nodes();
    std::vector<double> us(ln);
    for (std::size_t i = 0; i < ln; ++i) us[i] = push_sum_node_of(alg, i).u();
    double mass = 0;
    for (const double u : detail::allgather(group, us, "the gather of the push-sum weights")) mass += u;
    res.weight_mass = mass;
  }
  std::size_t dropped = 0, sent = 0;
  if constexpr (requires { alg.messages_dropped(); }) dropped = alg.messages_dropped();
  if constexpr (requires { alg.messages_sent(); }) sent = alg.messages_sent();
  res.messages_dropped = detail::sum(group, dropped, "the sum of the messages dropped");
  res.messages_sent = detail::sum(group, sent, "the sum of the messages sent");
}

}  // namespace detail
}  // namespace v0
}  // namespace sparsepush
