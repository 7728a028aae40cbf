// sparsepush/train/run_spec_rules.hpp: run_spec::validate(), every rule a run's settings obey
// before any data is loaded: each field's range and choices, no empty text, the settings an
// algorithm does not use (asked of its algorithm_info), the schedule's symmetry (asked of the
// schedule), SCSP's final rounds, the waiting policy, checkpoints and the output files.
#pragma once

#include <cstdlib>
#include <string>
#include <vector>
#include <unistd.h>

#include "checkpoints.hpp"
#include "outputs.hpp"
#include "run_spec.hpp"

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

}  // namespace detail

inline std::vector<std::string> run_spec::validate(int ranks) const {
  std::vector<std::string> warnings;
  for_each_field(*this, [](const field_info& f, const auto& member) { detail::check_field(f, member); });
  const algorithm_info& a = info();
  const std::string alg = "--algorithm " + algorithm + " ";
  // --precision and --bits: one training precision
  if (bits && *bits != 32 && *bits != 0 && (*bits < 4 || *bits > 16))
    throw config_error("--bits " + std::to_string(*bits) + ": simulated precision must be 4 to 16 bits (0 or 32: full precision)");
  if (bits && precision && bits_value() != (*precision == "int8" ? 8u : 0u))
    throw config_error("--precision " + *precision + " and --bits " + std::to_string(bits_value()) +
                       " conflict (int8 is --bits 8, fp32 is --bits 0)");
  if (skew && dirichlet) throw config_error("--dirichlet excludes --skew");
  if (final_rounds && *final_rounds != "auto") {
    std::uint64_t k = 0;
    const auto [end, ec] = std::from_chars(final_rounds->data(), final_rounds->data() + final_rounds->size(), k);
    if (ec != std::errc() || end != final_rounds->data() + final_rounds->size() || k == 0 || k > 4294967295u)
      throw config_error("--final-rounds must be auto or a count in [1, 4294967295], got " + *final_rounds);
  }
  if (nodes < 2)
    throw config_error("--nodes must be at least 2: one node has no one to gossip with, and its run would be "
                       "plain SGD (the library runs a single node that way; here use --nodes 2 or more)");
  if constexpr (simulated_clock) {
    // SMPI runs every rank as a simulated process on one host thread and times its computation with
    // that thread's CPU clock: work on other threads would be missed, and only MPI runs are simulated
    if (!mpi()) throw config_error("this sparsepush-train is built for SimGrid's SMPI: run it under smpirun with --transport mpi");
    if (threads_value() != 1)
      throw config_error("--threads " + std::to_string(threads_value()) + ": under SMPI each rank computes on one thread "
                         "(SMPI times a rank by its thread's CPU clock); use --threads 1 and more ranks or nodes per rank");
  }
  if (mpi() && static_cast<std::size_t>(ranks) > nodes)
    throw config_error("--nodes " + std::to_string(nodes) + " on " + std::to_string(ranks) +
                       " MPI ranks: more ranks than nodes (every rank runs at least one node); start at most " +
                       std::to_string(nodes) + " ranks or give more --nodes");
  // a setting the algorithm does not use is refused: the summary never lists a setting the run ignored
  auto unused = [&](const char* option, bool given, const std::string& why) {
    if (given) throw config_error(std::string(option) + ": " + alg + why);
  };
  if (!a.graph) {
    const std::string why = "averages every node's step exactly each round: it has no graph, messages or consensus step";
    unused("--schedule", schedule.has_value(), why);
    unused("--eta", eta.has_value(), why);
    unused("--compressor", compressor.has_value(), why);
    unused("--drop-probability", drop_probability.has_value(), why);
    unused("--loss-recovery", loss_recovery.has_value(), why);
    unused("--eval-reduce", eval_reduce.has_value(), why);
  }
  if (!a.compresses)
    unused("--compressor", compressor.has_value(), "sends whole models (the identity compressor); to compress, use "
                                                   "--algorithm sp, scsp, deepsqueeze or choco");
  if (!a.consensus_step)
    unused("--consensus-step", consensus_step.has_value(), "has no consensus step gamma_c (it is CHOCO's: --algorithm choco)");
  if (!a.per_layer) unused("--per-layer", per_layer, "does not use it (per-layer top-K is for --algorithm sp, scsp or deepsqueeze)");
  if (a.graph) {
    const any_schedule sched = parse_schedule(schedule_spec(), nodes, seed);  // a bad schedule is a config_error now
    if (a.symmetric && !sched.symmetric())
      throw config_error(alg + "needs a symmetric doubly stochastic schedule: --schedule undirected-ring, torus:RxC or "
                         "complete (got " + schedule_spec() + ")");
  }
  if (mpi() && a.inprocess_only) throw config_error(alg + "runs in one process only (--transport inprocess)");
  if (drop_value() > 0 && a.keeps_neighbour_copies)
    throw config_error("--drop-probability: " + algorithm + " needs every message delivered (its nodes keep copies of "
                       "their neighbours' models, which a lost message would corrupt)");
  if (drop_value() == 0 && loss_recovery)
    warnings.push_back("--loss-recovery acts on lost messages only; with no --drop-probability it changes nothing (the "
                       "summary lists it as null)");
  if (eval_reduce && !mpi())
    throw config_error("--eval-reduce: how an evaluation sums the models over MPI ranks; --transport inprocess runs every "
                       "node in one process, where it changes nothing (drop --eval-reduce " + *eval_reduce + ")");
  if (eval_split && eval_samples < nodes)
    throw config_error("--eval-split gives each of the " + std::to_string(nodes) + " nodes its share of the " +
                       std::to_string(eval_samples) + " --eval-samples images: give at least one per node (--eval-samples >= " +
                       std::to_string(nodes) + ")");
  if (plot && !log) throw config_error("--plot needs --log (the plot is drawn from the CSV log)");
  const any_compressor comp = parse_compressor(compressor_spec());  // a bad spec is a config_error now
  if (per_layer && !std::holds_alternative<top_k>(comp.get()))
    throw config_error("--per-layer needs a top-k compressor, got " + compressor_spec());
  if (!a.final_rounds) {
    for (const auto& [option, given] : {std::pair{"--final-compressor", final_compressor.has_value()},
                                        std::pair{"--final-eta", final_eta.has_value()},
                                        std::pair{"--final-tolerance", final_tolerance.has_value()}})
      if (given)
        throw config_error(std::string(option) + " sets SCSP's final rounds; --algorithm " + algorithm +
                           " has none (use --algorithm scsp)");
    if (final_rounds)  // accepted and unused, as it always was; but said
      warnings.push_back("--final-rounds is SCSP's; --algorithm " + algorithm + " runs no final rounds");
  } else {
    const any_compressor final_comp = parse_compressor(final_compressor_spec());
    if (final_rounds_spec() == "auto" && !whole_model_values(final_comp))
      throw config_error("--final-rounds auto counts rounds that send whole models (identity, or identity+fp16, +bf16 or "
                         "+int8); --final-compressor " + final_compressor_spec() +
                         " mixes more slowly than the schedule shows: give --final-rounds N");
    if (final_rounds_spec() != "auto" && final_tolerance)
      throw config_error("--final-tolerance sets the target of --final-rounds auto; --final-rounds " + final_rounds_spec() +
                         " gives the count itself");
  }
  if (checkpoint_every > 0 && !checkpoint && !resume) throw config_error("--checkpoint-every needs --checkpoint DIR");
  if (resume_round > 0 && !resume) throw config_error("--resume-round needs --resume DIR");
  if (resume) checkpoint_directory(*resume).require_existing("--resume");  // resume never creates one
  stragglers();
  // the waiting policy (lockstep by default)
  const std::string policy_option = overlap ? "--overlap" : "--staleness " + staleness.value_or("0");
  if (overlap && staleness) throw config_error("--overlap and --staleness " + *staleness + " are two waiting policies: give one");
  const wait_policy p = policy();
  if (!p.lockstep() && !a.graph)
    throw config_error(alg + "sends no messages: it has no waiting policy (drop " + policy_option + ")");
  if (!p.lockstep() && a.keeps_neighbour_copies)
    throw config_error(alg + "runs lockstep rounds only: its nodes keep copies of their neighbours' models, which need "
                       "every message in order (drop " + policy_option + ")");
  const bool delays = p.kind == wait_kind::bounded || p.kind == wait_kind::asynchronous;
  if (max_delay) {
    if (mpi()) throw config_error("--max-delay is the in-process delay model; over MPI (--transport mpi) the delays are the network's own");
    if (!delays)
      throw config_error("--max-delay sets the delays of --staleness N or inf; " +
                         std::string(overlap ? "--overlap mixes exactly the previous round whatever the delays"
                                             : "lockstep rounds have none"));
    if (p.kind == wait_kind::bounded && *max_delay > p.tau)
      throw config_error("--max-delay " + std::to_string(*max_delay) + " exceeds --staleness " + *staleness +
                         ": a node must have every envelope of rounds <= t - " + *staleness + ", which a longer delay would hide");
  }
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

}  // namespace v0
}  // namespace sparsepush
