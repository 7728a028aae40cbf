// sparsepush/train/run_spec_rules.hpp: run_spec::validate(), every rule a run's settings obey
// before any data is loaded: each field's range and choices, no empty text, the settings an
// algorithm does not use (asked of its algorithm_info), the schedule's symmetry (asked of the
// schedule), SCSP's final rounds, the waiting policy, checkpoints and the output files; and
// run_spec::stragglers(), --straggler's specs checked against the nodes.
#pragma once

#include <cstdlib>
#include <string>
#include <vector>
#include <unistd.h>

#include "checkpoints.hpp"
#include "outputs.hpp"
#include "run_description.hpp"

namespace sparsepush {
inline namespace v0 {

namespace detail {

/// Whether `program` is an executable file in a directory of $PATH.
inline bool on_path(const std::string& program) {
  const char* path = std::getenv("PATH");
  for (std::string_view rest = path ? path : ""; !rest.empty();) {
    const auto colon = rest.find(':');
    const std::string dir(rest.substr(0, colon));
    rest = colon == std::string_view::npos ? std::string_view() : rest.substr(colon + 1);
    if (::access(((dir.empty() ? "." : dir) + "/" + program).c_str(), X_OK) == 0) return true;
  }
  return false;
}

/// A field's range and choices, and no empty text (config_error "--eta: must be in (0, 1], got 2").
template <class M>
void check_field(const field_info& f, const M& member) {
  const std::string at = "--" + std::string(f.option) + ": ";
  auto range = [&](double v) {
    const std::string r = f.range_text();
    if (r.empty()) return;
    const bool low = f.lo_open ? !(v > f.lo) : !(v >= f.lo);
    const bool high = f.hi_open ? !(v < f.hi) : !(v <= f.hi);
    if (low || high) throw config_error(at + "must be " + r + ", got " + shown_value(v));
  };
  auto text = [&](const std::string& v) {
    if (v.empty())
      throw config_error(at + "the value is empty: give one, or leave --" + std::string(f.option) + " out");
    if (f.choices.empty()) return;
    for (std::string_view rest = f.choices; !rest.empty();) {
      const auto comma = rest.find(',');
      if (rest.substr(0, comma) == v) return;
      rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 1);
    }
    throw config_error(at + v + " not in {" + std::string(f.choices) + "}");
  };
  if constexpr (std::is_same_v<M, std::string>) text(member);
  else if constexpr (std::is_same_v<M, std::optional<std::string>>) { if (member) text(*member); }
  else if constexpr (std::is_same_v<M, std::vector<std::string>>) { for (const auto& v : member) text(v); }
  else if constexpr (std::is_same_v<M, bool>) {}
  else if constexpr (requires { member.has_value(); }) { if (member) range(static_cast<double>(*member)); }
  else range(static_cast<double>(member));
}

/// validate()'s rules on single settings: each field's range and choices, the precision, the
/// partition, the final-round count, the nodes and the ranks.
inline void check_settings(const run_spec& s, int ranks) {
  run_spec::for_each_field(s, [](const field_info& f, const auto& member) { check_field(f, member); });
  // --precision and --bits: one training precision
  if (s.bits && *s.bits != 32 && *s.bits != 0 && (*s.bits < 4 || *s.bits > 16))
    throw config_error("--bits " + std::to_string(*s.bits) + ": simulated precision must be 4 to 16 bits (0 or 32: full precision)");
  if (s.bits && s.precision && s.bits_value() != bits_of(s.precision_mode()))
    throw config_error("--precision " + *s.precision + " and --bits " + std::to_string(s.bits_value()) +
                       " conflict (int8 is --bits 8, fp32 is --bits 0)");
  if (s.skew && s.dirichlet) throw config_error("--dirichlet excludes --skew");
  (void)s.final_rounds_count();  // auto or a count in [1, max_run_rounds]
  if (s.nodes < 2)
    throw config_error("--nodes must be at least 2: one node has no one to gossip with, and its run would be "
                       "plain SGD (the library runs a single node that way; here use --nodes 2 or more)");
  if constexpr (simulated_clock) {
    // SMPI runs every rank as a simulated process on one host thread and times its computation with
    // that thread's CPU clock: work on other threads would be missed, and only MPI runs are simulated
    if (!s.mpi()) throw config_error("this sparsepush-train is built for SimGrid's SMPI: run it under smpirun with --transport mpi");
    if (s.threads_value() != 1)
      throw config_error("--threads " + std::to_string(s.threads_value()) + ": under SMPI each rank computes on one thread "
                         "(SMPI times a rank by its thread's CPU clock); use --threads 1 and more ranks or nodes per rank");
  }
  if (s.mpi() && static_cast<std::size_t>(ranks) > s.nodes)
    throw config_error("--nodes " + std::to_string(s.nodes) + " on " + std::to_string(ranks) +
                       " MPI ranks: more ranks than nodes (every rank runs at least one node); start at most " +
                       std::to_string(s.nodes) + " ranks or give more --nodes");
}

/// validate()'s rules asked of the algorithm: the settings it does not use are refused (the
/// summary never lists a setting the run ignored), its schedule, its transport, message loss.
inline void check_algorithm(const run_spec& s, std::vector<std::string>& warnings) {
  const algorithm_info& a = s.info();
  const std::string alg = "--algorithm " + s.algorithm + " ";
  auto unused = [&](const char* option, bool given, const std::string& why) {
    if (given) throw config_error(std::string(option) + ": " + alg + why);
  };
  if (!a.graph) {
    const std::string why = "averages every node's step exactly each round: it has no graph, messages or consensus step";
    unused("--schedule", s.schedule.has_value(), why);
    unused("--eta", s.eta.has_value(), why);
    unused("--compressor", s.compressor.has_value(), why);
    unused("--drop-probability", s.drop_probability.has_value(), why);
    unused("--loss-recovery", s.loss_recovery.has_value(), why);
    unused("--eval-reduce", s.eval_reduce.has_value(), why);
  }
  if (!a.compresses)
    unused("--compressor", s.compressor.has_value(), "sends whole models (the identity compressor); to compress, use "
                                                     "--algorithm " + algorithms_where(&algorithm_info::compresses));
  if (a.contracting)
    if (const auto why = not_contracting(parse_compressor(s.compressor_spec())); !why.empty())
      throw config_error("--compressor " + s.compressor_spec() + ": " + alg + "needs a compressor that shrinks what it "
                         "leaves out (top-k, threshold, sign, random-k, +int8): " + why);
  if (a.graph && !a.eta)
    unused("--eta", s.eta.has_value(), "mixes with its consensus step gamma_c (--consensus-step), not eta");
  if (!a.consensus_step)
    unused("--consensus-step", s.consensus_step.has_value(), "has no consensus step gamma_c (it is CHOCO's: --algorithm " +
                                                               algorithms_where(&algorithm_info::consensus_step) + ")");
  if (!a.per_layer) unused("--per-layer", s.per_layer, "does not use it (per-layer top-K is for --algorithm " +
                                                         algorithms_where(&algorithm_info::per_layer) + ")");
  if (a.graph) {
    const any_schedule sched = parse_schedule(s.schedule_spec(), s.nodes, s.seed);  // a bad schedule is a config_error now
    if (a.symmetric && !sched.symmetric())
      throw config_error(alg + "needs a symmetric doubly stochastic schedule: --schedule undirected-ring, torus:RxC or "
                         "complete (got " + s.schedule_spec() + ")");
  }
  if (s.mpi() && a.inprocess_only) throw config_error(alg + "runs in one process only (--transport inprocess)");
  if (s.drop_value() > 0 && a.keeps_neighbour_copies)
    throw config_error("--drop-probability: " + s.algorithm + " needs every message delivered (its nodes keep state "
                       "their neighbours hold too, which a lost message would set apart)");
  if (s.drop_value() == 0 && s.loss_recovery)
    warnings.push_back("--loss-recovery acts on lost messages only; with no --drop-probability it changes nothing (the "
                       "summary lists it as null)");
}

/// validate()'s rules on gradient tracking (--tracking): an algorithm that tracks, one local step a
/// round, lockstep rounds, every message delivered (in one process or over MPI, where the trackers
/// get a network of their own).
inline void check_tracking(const run_spec& s) {
  if (!s.tracking) return;
  const std::string why = "--tracking: ";
  if (!s.info().tracking)
    throw config_error(why + "--algorithm " + s.algorithm + " does not track gradients (--algorithm " +
                       algorithms_where(&algorithm_info::tracking) + " do)");
  if (s.local_steps > 1 || s.outer_step())
    throw config_error(why + "takes one local step a round, without an outer step (drop --local-steps, --outer-lr and "
                       "--outer-momentum)");
  if (!s.policy().lockstep()) throw config_error(why + "runs lockstep rounds only (drop --overlap or --staleness)");
  if (s.drop_value() > 0)
    throw config_error(why + "needs every message delivered: a lost tracker message would take its share of the "
                       "gradients' sum with it (drop --drop-probability)");
}

/// validate()'s rules on --momentum-kind quasi-global: one lockstep-paced step a round, no tracker.
inline void check_quasi_global(const run_spec& s) {
  if (!s.quasi_global()) return;
  const std::string why = "--momentum-kind quasi-global: ";
  if (s.info().compresses)
    throw config_error(why + "--algorithm " + s.algorithm + " compresses its messages, and the buffer, a round's change "
                       "divided by the learning rate, amplifies their error: it diverged for sp and choco-push top-1% "
                       "(docs/results/consensus.md); --algorithm " + algorithms_where(&algorithm_info::compresses, false) +
                       " take it");
  if (s.local_steps > 1 || s.outer_step())
    throw config_error(why + "the buffer follows a node's change over a round of one local step, without an outer step "
                       "(drop --local-steps, --outer-lr and --outer-momentum)");
  if (s.tracking)
    throw config_error(why + "the tracker replaces the gradient it would be built against; the two together are not "
                       "implemented (drop --tracking or the quasi-global momentum)");
  if (s.policy().kind == wait_kind::asynchronous)
    throw config_error(why + "divides a round's change by that round's learning rate, which an asynchronous node does not "
                       "follow (drop --staleness inf)");
}

/// validate()'s rules on evaluation, outputs, compressors and the final rounds (SCSP's, and
/// choco-push's given --final-rounds; given to another algorithm, a final setting is refused as
/// any unused setting is).
inline void check_outputs_and_final_rounds(const run_spec& s) {
  if (s.eval_reduce && !s.mpi())
    throw config_error("--eval-reduce: how an evaluation sums the models over MPI ranks; --transport inprocess runs every "
                       "node in one process, where it changes nothing (drop --eval-reduce " + *s.eval_reduce + ")");
  if (s.eval_split && s.eval_samples < s.nodes)
    throw config_error("--eval-split gives each of the " + std::to_string(s.nodes) + " nodes its share of the " +
                       std::to_string(s.eval_samples) + " --eval-samples images: give at least one per node (--eval-samples >= " +
                       std::to_string(s.nodes) + ")");
  if (s.plot && !s.log) throw config_error("--plot needs --log (the plot is drawn from the CSV log)");
  const any_compressor comp = parse_compressor(s.compressor_spec());  // a bad spec is a config_error now
  if (s.per_layer && !std::holds_alternative<top_k>(comp.get()))
    throw config_error("--per-layer needs a top-k compressor, got " + s.compressor_spec());
  if (!s.final_phase()) {
    for (const auto& [option, given] : {std::pair{"--final-rounds", s.final_rounds.has_value()},
                                        std::pair{"--final-compressor", s.final_compressor.has_value()},
                                        std::pair{"--final-eta", s.final_eta.has_value()},
                                        std::pair{"--final-tolerance", s.final_tolerance.has_value()}})
      if (given)
        throw config_error(std::string(option) + " sets the final rounds; --algorithm " + s.algorithm +
                           (s.info().final_rounds_on_request ? " runs them only when --final-rounds gives their count (N or auto)"
                                                             : " has none (use --algorithm scsp or choco-push)"));
    return;
  }
  if (s.tracking)
    throw config_error("--final-rounds: a run with --tracking ends without final rounds in this version (drop one)");
  const any_compressor final_comp = parse_compressor(s.final_compressor_spec());
  if (s.info().contracting)
    if (const auto why = not_contracting(final_comp); !why.empty())
      throw config_error("--final-compressor " + s.final_compressor_spec() + ": --algorithm " + s.algorithm +
                         " needs a compressor that shrinks what it leaves out: " + why);
  if (s.final_rounds_auto() && !whole_model_values(final_comp))
    throw config_error("--final-rounds auto counts rounds that send whole models (identity, or identity+fp16, +bf16 or "
                       "+int8); --final-compressor " + s.final_compressor_spec() +
                       " mixes more slowly than the schedule shows: give --final-rounds N");
  if (!s.final_rounds_auto() && s.final_tolerance)
    throw config_error("--final-tolerance sets the target of --final-rounds auto; --final-rounds " + s.final_rounds_spec() +
                       " gives the count itself");
}

/// validate()'s rules on the waiting policy (lockstep by default) and the in-process delays.
inline void check_policy(const run_spec& s) {
  const algorithm_info& a = s.info();
  const std::string alg = "--algorithm " + s.algorithm + " ";
  const std::string policy_option = s.overlap ? "--overlap" : "--staleness " + s.staleness_spec();
  if (s.overlap && s.staleness) throw config_error("--overlap and --staleness " + *s.staleness + " are two waiting policies: give one");
  const wait_policy p = s.policy();
  if (!p.lockstep() && !a.graph)
    throw config_error(alg + "sends no messages: it has no waiting policy (drop " + policy_option + ")");
  if (!p.lockstep() && a.keeps_neighbour_copies && !a.links_in_order)
    throw config_error(alg + "runs lockstep rounds only: its nodes keep state their neighbours hold too, which needs "
                       "every message in order (drop " + policy_option + ")");
  const bool delays = p.kind == wait_kind::bounded || p.kind == wait_kind::asynchronous;
  if (!s.max_delay) return;
  if (s.mpi()) throw config_error("--max-delay is the in-process delay model; over MPI (--transport mpi) the delays are the network's own");
  if (!delays)
    throw config_error("--max-delay sets the delays of --staleness N or inf; " +
                       std::string(s.overlap ? "--overlap mixes exactly the previous round whatever the delays"
                                             : "lockstep rounds have none"));
  if (p.kind == wait_kind::bounded && *s.max_delay > p.tau)
    throw config_error("--max-delay " + std::to_string(*s.max_delay) + " exceeds --staleness " + *s.staleness +
                       ": a node must have every envelope of rounds <= t - " + *s.staleness + ", which a longer delay would hide");
}

}  // namespace detail

inline std::vector<std::string> run_spec::validate(int ranks) const {
  std::vector<std::string> warnings;
  detail::check_settings(*this, ranks);
  detail::check_algorithm(*this, warnings);
  detail::check_tracking(*this);
  detail::check_quasi_global(*this);
  detail::check_outputs_and_final_rounds(*this);
  if (checkpoint_every > 0 && !checkpoint && !resume) throw config_error("--checkpoint-every needs --checkpoint DIR");
  if (resume_round > 0 && !resume) throw config_error("--resume-round needs --resume DIR");
  if (resume) checkpoint_directory(*resume).require_existing("--resume");  // resume never creates one
  stragglers();
  detail::check_policy(*this);
  return warnings;
}

inline void run_spec::check_files(int rank, const std::vector<std::string>& data_files) const {
  if (rank != 0) return;
  if (plot && !detail::on_path("gnuplot"))
    throw config_error("--plot needs gnuplot, which is not on PATH (Debian: gnuplot-nox); install it or drop --plot");
  // outputs: each a regular file or a new one in a writable directory, none named twice; nothing created
  const std::vector<std::pair<std::string, std::string>> outputs = {
      {"--log", log.value_or("")}, {"--summary", summary.value_or("")}, {"--plot", plot.value_or("")},
      {"--plot's script", plot ? *plot + ".gp" : ""}};
  for (const auto& [option, path] : outputs)
    if (!path.empty()) check_output(option, path);
  check_distinct(outputs);
  std::vector<std::pair<std::string, std::string>> inputs = {{"--checkpoint", checkpoint.value_or("")},
                                                             {"--resume", resume.value_or("")}};
  for (const auto& f : data_files) inputs.emplace_back("--data's", data + "/" + f);
  for (const auto& out : outputs)
    for (const auto& in : inputs) check_distinct({out, in});
  if (resume && !checkpoint_directory(*resume).has_manifest())
    throw config_error("--resume " + *resume + ": no checkpoint there (" + *resume + "/manifest is missing)");
}

inline std::vector<straggler> run_spec::stragglers() const {
  std::vector<sparsepush::straggler> out;
  for (const std::string& spec : straggler) {
    const std::string at = "--straggler " + detail::quoted(spec) + ": ";
    const auto colon = spec.find(':');
    if (colon == std::string::npos || spec.find(':', colon + 1) != std::string::npos)
      throw config_error(at + "expected NODES:FACTOR, a node or a range of nodes and a factor > 1 (e.g. 3:3 or 12-15:3)");
    const std::string nodes_text = spec.substr(0, colon), factor_text = spec.substr(colon + 1);
    auto node = [&](const std::string& text) {
      if (text.empty()) throw config_error(at + "a node is missing (NODES is a node, e.g. 3, or a range, e.g. 12-15)");
      return static_cast<std::uint32_t>(parse_whole(text, at + "node ", std::numeric_limits<std::uint32_t>::max()));
    };
    const auto dash = nodes_text.find('-');
    sparsepush::straggler s;
    s.first = node(nodes_text.substr(0, dash));
    s.last = dash == std::string::npos ? s.first : node(nodes_text.substr(dash + 1));
    if (s.first > s.last)
      throw config_error(at + "the range " + nodes_text + " is empty (its first node is after its last: write " +
                         std::to_string(s.last) + "-" + std::to_string(s.first) + ")");
    if (s.last >= nodes) {
      const std::uint32_t outside = s.first >= nodes ? s.first : s.last;
      throw config_error(at + "node " + std::to_string(outside) + " is outside the run's " + std::to_string(nodes) +
                         " nodes (0 to " + std::to_string(nodes - 1) + ")");
    }
    s.factor = parse_real(factor_text, at + "the factor ", "in (1, 1000]");
    if (!(s.factor > 1 && s.factor <= 1000))
      throw config_error(at + "the factor must be in (1, 1000], got " + detail::shown_value(s.factor));
    for (std::size_t k = 0; k < out.size(); ++k)
      if (s.first <= out[k].last && out[k].first <= s.last)
        throw config_error("--straggler " + detail::quoted(straggler[k]) + " and " + detail::quoted(spec) +
                           " both name node " + std::to_string(std::max(s.first, out[k].first)) +
                           " (give each node one factor)");
    out.push_back(s);
  }
  return out;
}

}  // namespace v0
}  // namespace sparsepush
