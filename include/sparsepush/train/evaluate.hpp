// sparsepush/train/evaluate.hpp: the metrics of a run, over every node of the processes it spans
// (docs/design/algorithms.md, "Data and metrics"): the average test accuracy of the nodes' models, the
// accuracy of the averaged model mean_i xh_i, and the parameter divergence
// (1/n) sum_i || xh_i - mean(xh) ||_2 (in double). Each process evaluates its own nodes and
// sends scalars; the models are summed once across the processes: in node order (ordered, the
// default: the bits of one process, a chain through the ranks and a broadcast) or with one
// allreduce of d doubles (eval_reduction::allreduce: a few times fewer bytes on the slowest
// link, and last bits that depend on the number of processes).
#pragma once

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <optional>
#include <span>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

#include "../algorithm/report.hpp"
#include "../detail/bytes.hpp"
#include "../tensor.hpp"
#include "process_group.hpp"

namespace sparsepush {
inline namespace v0 {

/// How an evaluation sums the models across the processes.
/// - ordered (the default): sum_i xh_i / n in T and sum_i xh_i in double, each in node order:
///   a chain through the ranks (each passes 12 bytes per float parameter to the next) and a
///   broadcast of both; every process count gives the bits of one process.
/// - allreduce: every process sums its nodes in double, then one allreduce of d doubles; the
///   averaged model is T(sum / n), the divergence's mean sum / n. Over a slow link a few times
///   faster; the last bits of the averaged model and of the divergence depend on the number of
///   processes (and differ from ordered's), the node accuracies do not.
enum class eval_reduction { ordered, allreduce };

/// The metrics of the models at one evaluation.
struct evaluation {
  double avg_node_accuracy = 0.0;        ///< mean over nodes of each de-biased model's accuracy
  double averaged_model_accuracy = 0.0;  ///< accuracy of mean_i xh_i (float, summed in node order)
  double parameter_divergence = 0.0;     ///< (1/n) sum_i || xh_i - mean ||_2, in double
  /// The averaged model and the divergence were measured (a scalar evaluation, which tests each
  /// node's own model only, leaves both NaN).
  bool averaged = true;
};

/// What an evaluation's reductions carry between the processes, in bytes: each rank's values to
/// every other rank for a gather, the d sums once from rank to rank and then to every rank for
/// the ordered sum, twice d doubles per rank for the allreduce (as a ring sends them). Counted
/// from the sizes of the collectives (MPI's own algorithms may move a little more or less); 0 for
/// one process.
inline std::uint64_t evaluation_payload(std::size_t ranks, std::size_t nodes, std::size_t dim, std::size_t element_bytes,
                                        bool averaged, eval_reduction how) {
  if (ranks <= 1) return 0;
  const std::uint64_t others = ranks - 1;
  std::uint64_t bytes = 2 * 8 * nodes * others;  // the accuracies and the losses, one double per node each way
  if (!averaged) return bytes;
  bytes += 8 * nodes * others + 8 * others;      // the divergence's norms, the averaged model's accuracy
  const std::uint64_t sums = element_bytes == 4 ? 12 * dim : 16 * dim;  // sum / n in T and sum in double
  bytes += how == eval_reduction::ordered ? 2 * sums * others : 2 * 8 * dim * others;
  return bytes;
}

/// accuracy(worker, model): the user's test of one model; worker in [0, threads) names the
/// thread that calls it (one scratch per worker).
template <tensor_element T>
using accuracy_function = std::function<double(std::size_t worker, std::span<const T> model)>;

/// share_accuracy(worker, node, model): the accuracy of node `node`'s model (the run's index) on
/// that node's share of the test images (see evaluate's `shares`).
template <tensor_element T>
using share_accuracy_function = std::function<double(std::size_t worker, std::uint32_t node, std::span<const T> model)>;

namespace detail {
/// Throw unless `alg` runs the nodes `group` places in this process (`where`: who asks).
template <class A, process_group G>
void check_layout(const A& alg, const G& group, const char* where) {
  if (alg.num_nodes() != group.local_nodes())
    throw config_error(std::string(where) + ": the algorithm runs " + std::to_string(alg.num_nodes()) +
                       " nodes here, the process group places " + std::to_string(group.local_nodes()));
}

/// The divergence (1/n) sum_i || xh_i - mean ||_2 of this process's nodes against `mean`, summed
/// over every node (a gather of one norm per node).
template <tensor_element T, class A, process_group G>
double divergence_from(const A& alg, G& group, std::span<const double> mean) {
  const std::size_t ln = alg.num_nodes(), d = alg.dim(), n = group.total_nodes();
  std::vector<double> norms(ln);
  {
    std::vector<T> m(d);
    for (std::size_t i = 0; i < ln; ++i) {
      alg.model(i, std::span<T>(m));
      double s = 0.0;
      for (std::size_t l = 0; l < d; ++l) {
        const double diff = static_cast<double>(m[l]) - mean[l];
        s += diff * diff;
      }
      norms[i] = std::sqrt(s);
    }
  }
  double total = 0.0;
  for (const double v : detail::allgather(group, norms, "the divergence's gather of node distances")) total += v;
  return total / static_cast<double>(n);
}

/// eval_reduction::allreduce: sum_i xh_i in double (this process's nodes in order, then one
/// allreduce); avg = T(sum / n); returns the divergence against sum / n.
template <tensor_element T, class A, process_group G>
double averaged_model_allreduce(const A& alg, G& group, std::vector<T>& avg) {
  const std::size_t ln = alg.num_nodes(), d = alg.dim(), n = group.total_nodes();
  std::vector<double> sum(d, 0.0);
  {
    std::vector<T> m(d);
    for (std::size_t i = 0; i < ln; ++i) {
      alg.model(i, std::span<T>(m));
      for (std::size_t l = 0; l < d; ++l) sum[l] += static_cast<double>(m[l]);
    }
  }
  if (!detail::sum_in_place(group, std::span<double>(sum), "the allreduce of the averaged model"))
    throw config_error("eval_reduction::allreduce needs a process group with sum_in_place(std::span<double>) "
                       "(the element-wise sum over the processes); this group has none: use eval_reduction::ordered");
  avg.resize(d);
  for (std::size_t l = 0; l < d; ++l) {
    sum[l] /= static_cast<double>(n);
    avg[l] = static_cast<T>(sum[l]);
  }
  return divergence_from<T>(alg, group, sum);
}

/// The averaged model sum_i xh_i / n (in T, summed in node order across the processes) into
/// avg, and the parameter divergence (1/n) sum_i || xh_i - mean ||_2 (mean in double) of every
/// node. The layout is the caller's to check.
template <tensor_element T, class A, process_group G>
double averaged_model(const A& alg, G& group, std::vector<T>& avg, eval_reduction how = eval_reduction::ordered) {
  const std::size_t ln = alg.num_nodes(), d = alg.dim(), n = group.total_nodes();
  if (how == eval_reduction::allreduce) return averaged_model_allreduce<T>(alg, group, avg);
  // sum_i xh_i / n in T (the averaged model) and sum_i xh_i in double (the divergence's mean),
  // both in node order across the processes; a double model's two sums travel as one buffer
  std::vector<float> avg_f(std::is_same_v<T, float> ? d : 0);
  std::vector<double> sums(std::is_same_v<T, float> ? d : 2 * d, 0.0);
  std::span<T> acc;
  if constexpr (std::is_same_v<T, float>) acc = avg_f;
  else acc = std::span<double>(sums).subspan(d);
  const std::span<double> sum = std::span<double>(sums).first(d);
  {
    std::vector<T> m(d);
    group.ordered_sum(avg_f, sums, [&] {
      for (std::size_t i = 0; i < ln; ++i) {
        alg.model(i, std::span<T>(m));
        for (std::size_t l = 0; l < d; ++l) {
          acc[l] += m[l] / static_cast<T>(n);
          sum[l] += static_cast<double>(m[l]);
        }
      }
    });
  }
  avg.assign(acc.begin(), acc.end());
  for (auto& a : sum) a /= static_cast<double>(n);
  return divergence_from<T>(alg, group, sum);
}

/// The report of round `round` with this divergence and the bytes sent by every process.
template <class A, process_group G>
round_report report_over(const A& alg, std::uint32_t round, double divergence, G& group) {
  return round_report::of(round, divergence, detail::sum(group, alg.bytes_sent(), "the sum of the bytes sent"),
                          detail::sum(group, alg.full_precision_bytes(), "the sum of the full-precision bytes"));
}
}  // namespace detail

/// Evaluate the nodes of `alg` this process runs (alg.model(i, out), alg.num_nodes(), alg.dim())
/// and reduce over `group`: every process returns the same bits, equal to those of one process
/// running every node (with eval_reduction::ordered; see eval_reduction for allreduce). Models
/// that are the same bits are tested once; `threads` test in parallel.
///
/// With averaged = false only the nodes' own models are tested and only scalars travel: the
/// averaged model and the divergence, which need the sum of the models, are left NaN.
///
/// With `shares` (not empty), node i's model is tested by shares(worker, i, model), on node i's
/// own share of the test images, instead of by `accuracy`: every node is tested (equal bits test
/// different images), and the node mean is then the accuracy over the union of the shares at
/// 1/n of the work. The averaged model is still tested by `accuracy`.
template <tensor_element T, class A, process_group G>
evaluation evaluate(const A& alg, G& group, std::size_t threads, const accuracy_function<T>& accuracy,
                    eval_reduction how = eval_reduction::ordered, bool averaged = true,
                    const share_accuracy_function<T>& shares = {}) {
  detail::check_layout(alg, group, "evaluate");
  const std::size_t ln = alg.num_nodes(), d = alg.dim(), n = group.total_nodes();
  const std::uint32_t first = group.first_node();
  auto hash = [](std::span<const T> m) { return detail::fnv1a(std::as_bytes(m)); };
  // each distinct model once: same_as[i] is the first local node with node i's bits (with
  // shares, every node is its own: the same bits meet different images)
  std::vector<std::size_t> same_as(ln), distinct;
  std::vector<std::uint64_t> hashes(ln);
  if (shares) {
    for (std::size_t i = 0; i < ln; ++i) same_as[i] = i, distinct.push_back(i);
  } else {
    std::vector<T> m(d), other(d);
    for (std::size_t i = 0; i < ln; ++i) {
      alg.model(i, std::span<T>(m));
      hashes[i] = hash(m);
      same_as[i] = i;
      for (const std::size_t j : distinct) {
        if (hashes[j] != hashes[i]) continue;
        alg.model(j, std::span<T>(other));
        if (std::memcmp(m.data(), other.data(), d * sizeof(T)) == 0) {
          same_as[i] = j;
          break;
        }
      }
      if (same_as[i] == i) distinct.push_back(i);
    }
  }
  std::vector<double> local_acc(ln);
  {
    const std::size_t workers = std::max<std::size_t>(1, threads);
    std::vector<std::jthread> pool;  // distinct model k on worker k mod workers
    for (std::size_t w = 0; w < std::min(workers, distinct.size()); ++w)
      pool.emplace_back([&, w] {
        std::vector<T> m(d);
        for (std::size_t k = w; k < distinct.size(); k += workers) {
          alg.model(distinct[k], std::span<T>(m));
          local_acc[distinct[k]] = shares ? shares(w, first + static_cast<std::uint32_t>(distinct[k]), m) : accuracy(w, m);
        }
      });
  }
  for (std::size_t i = 0; i < ln; ++i) local_acc[i] = local_acc[same_as[i]];
  evaluation ev;
  for (const double a : detail::allgather(group, local_acc, "the evaluation's gather of node accuracies"))
    ev.avg_node_accuracy += a / static_cast<double>(n);
  if (!averaged) {
    ev.averaged = false;
    ev.averaged_model_accuracy = ev.parameter_divergence = std::numeric_limits<double>::quiet_NaN();
    return ev;
  }

  std::vector<T> avg;
  ev.parameter_divergence = detail::averaged_model<T>(alg, group, avg, how);

  // the averaged model, on rank 0, unless it is the bits of a node model tested here
  double avg_acc = 0.0;
  if (group.rank() == 0) {
    std::optional<double> known;
    const std::uint64_t h = hash(avg);
    std::vector<T> m(d);
    for (const std::size_t j : distinct) {
      if (shares) break;  // a node's accuracy is on its share, not on the averaged model's images
      if (hashes[j] != h) continue;
      alg.model(j, std::span<T>(m));
      if (std::memcmp(m.data(), avg.data(), d * sizeof(T)) == 0) {
        known = local_acc[j];
        break;
      }
    }
    avg_acc = known ? *known : accuracy(0, avg);
  }
  ev.averaged_model_accuracy = detail::broadcast(group, avg_acc, "the broadcast of the averaged model's accuracy");
  return ev;
}

/// The report of round `round` over every node of the processes `group` spans: the divergence
/// of evaluate(), and the bytes sent by every process.
template <tensor_element T, class A, process_group G>
round_report report(const A& alg, std::uint32_t round, G& group, eval_reduction how = eval_reduction::ordered) {
  detail::check_layout(alg, group, "report");
  std::vector<T> avg;
  const double divergence = detail::averaged_model<T>(alg, group, avg, how);
  return detail::report_over(alg, round, divergence, group);
}

}  // namespace v0
}  // namespace sparsepush
