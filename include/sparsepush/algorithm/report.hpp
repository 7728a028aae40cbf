// sparsepush/algorithm/report.hpp: what every decentralized algorithm (sparse_push, choco,
// centralized) offers its caller, and the metrics of one after a round: the parameter divergence
// (1/n) sum_i ||xh_i - mean(xh)||_2, the bytes sent, and the communication ratio
// (4 d messages) / (bytes actually sent).
#pragma once

#include <concepts>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "../config.hpp"
#include "../tensor.hpp"
#include "metrics.hpp"
#include "oracle.hpp"

namespace sparsepush {
inline namespace v0 {

/// What every algorithm offers: rounds, sizes, node i's model (as a flat tensor of element type
/// T, and written into a span), state and byte counts.
template <class A, class T>
concept decentralized_algorithm = requires(A& a, const A& ca, std::uint32_t t, const gradient_oracle<T>& f,
                                           double gamma, std::span<T> out) {
  a.round(t, f, gamma);
  { ca.num_nodes() } -> std::convertible_to<std::size_t>;
  { ca.dim() } -> std::convertible_to<std::size_t>;
  { ca.model(std::size_t{0}) } -> flat_tensor;
  ca.model(std::size_t{0}, out);
  { ca.state_bytes(std::size_t{0}) } -> std::convertible_to<std::size_t>;
  { ca.bytes_sent() } -> std::convertible_to<std::size_t>;
  { ca.full_precision_bytes() } -> std::convertible_to<std::size_t>;
};

/// Local node i of an algorithm that keeps push-sum weights, with its numerator x() and weight
/// u(): sparse_push's group().node(i), choco_push's node(i) (tracking<> forwards both).
template <class A>
  requires(requires(const A& a, std::size_t i) { a.group().node(i).u(); } ||
           requires(const A& a, std::size_t i) { a.node(i).u(); })
decltype(auto) push_sum_node_of(const A& a, std::size_t i) {
  if constexpr (requires { a.group().node(i).u(); }) return a.group().node(i);
  else return a.node(i);
}

/// An algorithm whose nodes keep push-sum weights (push_sum_node_of): SP and its configurations,
/// CHOCO-Push; not CHOCO-SGD or the all-reduce, whose models are their numerators.
template <class A>
concept keeps_push_sum_weights = requires(const A& a, std::size_t i) { push_sum_node_of(a, i).u(); };

/// Metrics after a round.
struct round_report {
  std::uint32_t round = 0;  ///< the round just run (0-based)
  double parameter_divergence = 0.0;  ///< (1/n) sum_i || xh_i - mean(xh) ||_2 over the nodes' de-biased models
  std::size_t bytes_sent = 0;             ///< all nodes, envelopes included
  std::size_t full_precision_bytes = 0;   ///< 4 d per message sent
  double comm_ratio = 0.0;                ///< full_precision_bytes / bytes_sent (0 before any byte)

  /// The report of round t from its measurements: the ratio is derived here, once.
  static round_report of(std::uint32_t t, double divergence, std::size_t bytes, std::size_t fp_bytes) {
    return {t, divergence, bytes, fp_bytes,
            bytes ? static_cast<double>(fp_bytes) / static_cast<double>(bytes) : 0.0};
  }
};

/// Metrics of an algorithm now, over every node; the algorithm must run every node in this
/// process (across processes, train/evaluate.hpp's report(a, round, group) reduces over them).
template <tensor_element T, class A>
  requires decentralized_algorithm<A, T>
round_report report(const A& a, std::uint32_t round) {
  if constexpr (requires { a.total_nodes(); })
    if (a.num_nodes() != a.total_nodes())
      throw config_error("report: this process runs " + std::to_string(a.num_nodes()) + " of the " +
                         std::to_string(a.total_nodes()) + " nodes; reduce over the ranks with "
                         "report(alg, round, mpi_process_group) (sparsepush/train/) instead");
  std::vector<std::vector<T>> models(a.num_nodes(), std::vector<T>(a.dim()));
  for (std::size_t i = 0; i < a.num_nodes(); ++i) a.model(i, std::span<T>(models[i]));
  return round_report::of(round, parameter_divergence(models), a.bytes_sent(), a.full_precision_bytes());
}

}  // namespace v0
}  // namespace sparsepush
