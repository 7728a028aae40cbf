// sparsepush/train/run_choices.hpp: the choices a run description names, each an enum with one
// name table that parsing, --help's choices, Python and the summary share: the algorithm (with
// what the rules ask of it), the transport, the training precision, the loss recovery, the
// evaluation's reduction and --final-rounds' "auto"; and the most rounds a run counts.
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "../config.hpp"
#include "../gossip/node.hpp"
#include "evaluate.hpp"

namespace sparsepush {
inline namespace v0 {

/// The most rounds, and local steps, a run counts: round numbers are 32 bits.
inline constexpr std::uint32_t max_run_rounds = std::numeric_limits<std::uint32_t>::max();

/// One entry of a name table: a value of enum E and its name on the command line.
template <class E>
struct choice_name {
  E value;                ///< the value
  std::string_view name;  ///< its name (--help, Python, the summary)
};

/// The algorithms a run can use.
enum class algorithm_kind { sp, scsp, sgp, dpsgd, deepsqueeze, choco, choco_push, centralized };

/// What an algorithm of a run is, as the rules ask it (never by comparing names elsewhere).
struct algorithm_info {
  algorithm_kind kind = algorithm_kind::sp;  ///< which algorithm
  std::string_view name;  ///< the --algorithm value: sp, scsp, sgp, dpsgd, deepsqueeze, choco, choco-push or centralized
  bool graph = true;         ///< it sends messages over a schedule (false: centralized, no waiting policy)
  bool symmetric = false;    ///< it needs a symmetric, doubly stochastic schedule
  bool compresses = true;    ///< it takes a compressor (false: whole models, identity)
  /// its nodes keep state their neighbours hold too (CHOCO's copies of their models, CHOCO-Push's
  /// link references): every message must arrive, in order, so no loss, and lockstep rounds only
  /// unless it applies each link's messages in order itself (links_in_order)
  bool keeps_neighbour_copies = false;
  bool links_in_order = false;  ///< it applies a link's messages in the order they were sent: every waiting policy runs
  bool consensus_step = false;  ///< it has CHOCO's gamma_c
  bool eta = true;              ///< it takes SP's consensus step --eta (CHOCO-Push mixes with gamma_c only)
  bool per_layer = true;        ///< it takes per-layer top-K
  bool final_rounds = false;    ///< it ends with SCSP's uncompressed gossip rounds
  bool final_rounds_on_request = false;  ///< it ends with them when --final-rounds is given (choco-push)
  bool inprocess_only = false;  ///< it runs in one process only
  bool tracking = false;        ///< it can track gradients (--tracking: a second instance carries y)
  bool contracting = false;     ///< its compressor must shrink what it leaves out (no QSGD: not_contracting)
};

/// The algorithms a run can use, in the order --help lists them: the algorithm's name table.
inline constexpr algorithm_info run_algorithms[] = {
    {.kind = algorithm_kind::sp, .name = "sp", .tracking = true},
    {.kind = algorithm_kind::scsp, .name = "scsp", .final_rounds = true},
    {.kind = algorithm_kind::sgp, .name = "sgp", .compresses = false, .per_layer = false, .tracking = true},
    {.kind = algorithm_kind::dpsgd, .name = "dpsgd", .symmetric = true, .compresses = false, .per_layer = false},
    {.kind = algorithm_kind::deepsqueeze, .name = "deepsqueeze", .symmetric = true},
    {.kind = algorithm_kind::choco, .name = "choco", .symmetric = true, .keeps_neighbour_copies = true,
     .consensus_step = true, .per_layer = false},
    {.kind = algorithm_kind::choco_push, .name = "choco-push", .keeps_neighbour_copies = true, .links_in_order = true,
     .consensus_step = true, .eta = false, .final_rounds_on_request = true, .tracking = true, .contracting = true},
    {.kind = algorithm_kind::centralized, .name = "centralized", .graph = false, .compresses = false, .per_layer = false,
     .inprocess_only = true},
};

/// Where a run's nodes run: all in this process, or in blocks over MPI ranks.
enum class run_transport { inprocess, mpi };
/// --transport's names.
inline constexpr choice_name<run_transport> run_transports[] = {{run_transport::inprocess, "inprocess"},
                                                                {run_transport::mpi, "mpi"}};

/// The training precision --precision names (--bits gives others).
enum class run_precision { fp32, int8 };
/// --precision's names.
inline constexpr choice_name<run_precision> run_precisions[] = {{run_precision::fp32, "fp32"},
                                                                {run_precision::int8, "int8"}};
/// The simulated bits of a precision (0: full precision).
constexpr unsigned bits_of(run_precision p) noexcept { return p == run_precision::int8 ? 8 : 0; }

/// --loss-recovery's names.
inline constexpr choice_name<loss_recovery> loss_recoveries[] = {{loss_recovery::acknowledged, "ack"},
                                                                 {loss_recovery::none, "none"}};

/// How a node's momentum buffer is built (--momentum-kind): from its own gradients (local), or
/// from its de-biased model's change over a round, the mixing included (quasi-global).
enum class momentum_form { local, quasi_global };
/// --momentum-kind's names.
inline constexpr choice_name<momentum_form> momentum_forms[] = {{momentum_form::local, "local"},
                                                                {momentum_form::quasi_global, "quasi-global"}};

/// --eval-reduce's names.
inline constexpr choice_name<eval_reduction> eval_reductions[] = {{eval_reduction::ordered, "ordered"},
                                                                  {eval_reduction::allreduce, "allreduce"}};

/// --final-rounds' value that computes the count from the schedule (else it is the count).
inline constexpr std::string_view final_rounds_auto_name = "auto";

/// The name of `value` in `table`.
template <class T, std::size_t N, class V>
constexpr std::string_view name_of(const T (&table)[N], V value) {
  for (const T& e : table)
    if (e.value == value) return e.name;
  return {};
}

/// The entry of `table` named `name`, or null.
template <class T, std::size_t N>
constexpr const T* entry_named(const T (&table)[N], std::string_view name) {
  for (const T& e : table)
    if (e.name == name) return &e;
  return nullptr;
}

/// The names of `table` in its order, "a,b,c" (--help's and Python's choices).
template <class T, std::size_t N>
std::string names_of(const T (&table)[N]) {
  std::string out;
  for (const T& e : table) {
    if (!out.empty()) out += ',';
    out += e.name;
  }
  return out;
}

/// The names of the algorithms whose property `has` is `value` (every algorithm for a null `has`),
/// in run_algorithms' order, as a message lists them: "sp, scsp, deepsqueeze or choco".
inline std::string algorithms_where(bool algorithm_info::*has = nullptr, bool value = true) {
  std::vector<std::string_view> names;
  for (const algorithm_info& a : run_algorithms)
    if (!has || a.*has == value) names.push_back(a.name);
  std::string out;
  for (std::size_t k = 0; k < names.size(); ++k)
    out += std::string(k == 0 ? "" : k + 1 == names.size() ? " or " : ", ") + std::string(names[k]);
  return out;
}

/// The value of `table` named `name`; config_error "--option: name not in {a,b}" (`option`: the
/// option without dashes) otherwise.
template <class E, std::size_t N>
E choice_of(const choice_name<E> (&table)[N], std::string_view name, std::string_view option) {
  if (const auto* e = entry_named(table, name)) return e->value;
  throw config_error("--" + std::string(option) + ": " + std::string(name) + " not in {" + names_of(table) + "}");
}

}  // namespace v0
}  // namespace sparsepush
