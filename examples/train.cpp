// sparsepush-train: decentralized training of a small CNN/MLP on Fashion-MNIST with Sparse-Push,
// SCSP and the baselines, every node holding its own (optionally label-skewed) shard. The loop,
// metrics, checkpoints and MPI reductions are the library's trainer (sparsepush/train/); this file
// is its command line and the Fashion-MNIST glue. Bad options exit with code 2, a diverging run
// with code 3 and a message saying which knob to turn.
#ifdef SPARSEPUSH_SMPI  // smpicxx makes exit(x) a macro (smpi_helpers.h), which CLI11's App::exit trips
#pragma push_macro("exit")
#undef exit
#endif
#include <CLI/CLI.hpp>
#ifdef SPARSEPUSH_SMPI
#pragma pop_macro("exit")
#endif

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <limits>
#include <optional>
#include <string>
#include <vector>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <unistd.h>

#include <sparsepush/nn/optimizer.hpp>
#include <sparsepush/sparsepush.hpp>
#include <sparsepush/data/shard.hpp>
#include <sparsepush/train/defaults.hpp>
#include <sparsepush/train/trainer.hpp>
#ifdef SPARSEPUSH_HAS_MPI
#include <sparsepush/train/mpi.hpp>
#endif
#include "cli_numbers.hpp"
#include "train_outputs.hpp"
#include "train_report.hpp"

namespace sp = sparsepush;
using cli_numbers::real;
using cli_numbers::unbounded;
using cli_numbers::whole;

namespace {

bool symmetric_schedule(const std::string& s) {
  return s == "undirected-ring" || s == "complete" || s.rfind("torus", 0) == 0;
}

/// The options; a parse error or --help returns its exit code.
std::optional<int> parse(int argc, char** argv, train_config& c, CLI::App& app) {
  app.add_option("--nodes", c.nodes, "number of nodes, 2 to 4096")->check(whole(1, 4096))->capture_default_str();
  app.add_option("--schedule", c.schedule,
                 "communication schedule: directed-ring, undirected-ring, torus:RxC, complete, time-varying-ring[:hops], "
                 "alternating-ring, exponential[:K], bidirectional-exponential, erdos-renyi:P, random:K "
                 "(default: time-varying-ring; undirected-ring for dpsgd, deepsqueeze, choco)");
  app.add_option("--algorithm", c.algorithm, "sp, scsp, sgp, dpsgd, deepsqueeze, choco or centralized")
      ->check(CLI::IsMember({"sp", "scsp", "sgp", "dpsgd", "deepsqueeze", "choco", "centralized"}))->capture_default_str();
  app.add_option("--compressor", c.compressor, "compressor spec, e.g. top-k:0.01, top-k:0.001+int8, random-k:0.01, qsgd:16, sign")
      ->capture_default_str();
  app.add_option("--final-rounds", c.final_rounds,
                 "SCSP: gossip rounds at the end, a count or auto: the fewest that bring every node within "
                 "--final-tolerance of the average, computed from the schedule (the exact count where the graph "
                 "averages exactly: 4 for 16 nodes on the default time-varying ring)")
      ->check([](const std::string& v) -> std::string {
        if (v == "auto") return {};
        std::uint64_t k = 0;
        const auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), k);
        if (ec != std::errc() || end != v.data() + v.size() || k == 0 || k > 4294967295u)
          return "--final-rounds must be auto or a count in [1, 4294967295], got " + v;
        return {};
      })->capture_default_str();
  app.add_option("--final-compressor", c.final_compressor,
                 "SCSP: compressor of the final rounds, e.g. identity+bf16 or top-k:0.1+int8 (identity: exact)")->capture_default_str();
  app.add_option("--final-eta", c.final_eta, "SCSP: consensus step of the final rounds in (0, 1] (default from the final compressor)")
      ->check(real(0, 1, true));
  app.add_option("--final-tolerance", c.final_tolerance,
                 "SCSP with --final-rounds auto: every de-biased model ends within this fraction of the largest "
                 "distance to the average at the start of the final rounds")->check(real(1e-12, 0.5))->capture_default_str();
  app.add_option("--eta", c.eta, "consensus step in (0, 1] (default from the compressor: 0.02 at top-1%, 0.1 at top-10%, 1 for identity)")
      ->check(real(0, 1, true));
  app.add_option("--consensus-step", c.consensus_step, "CHOCO gamma_c in (0, 1]")->check(real(0, 1, true))->capture_default_str();
  auto* skew = app.add_option("--skew", c.skew, "label skew in [0, 1] (Hsieh et al.)")->check(real(0, 1))->capture_default_str();
  app.add_option("--dirichlet", c.dirichlet, "Dirichlet(alpha) label partition instead of --skew")->check(real(0, unbounded, true))->excludes(skew);
  app.add_option("--model", c.model, "mlp, cnn, cnn_evonorm or cnn_range_evonorm")
      ->check(CLI::IsMember(sp::nn::model::known_names()))->capture_default_str();
  auto* precision = app.add_option("--precision", c.precision, "fp32, or int8: weights, activations and gradients at 8 bits (simulated)")
                        ->check(CLI::IsMember({"fp32", "int8"}))->capture_default_str();
  auto* bits = app.add_option("--bits", c.bits, "simulated training precision, 4 to 16 bits (0 or 32: full precision)")
                   ->check(whole(0, 32));
  app.add_option("--epochs", c.epochs, "epochs over each node's shard")->check(real(0, unbounded, true))->capture_default_str();
  app.add_option("--batch", c.batch, "minibatch per node")->check(whole(1, 4096))->capture_default_str();
  app.add_option("--lr", c.lr, "learning rate (divided by 10 for the last quarter)")->check(real(0, unbounded, true))->capture_default_str();
  app.add_option("--lr-schedule", c.lr_shape, "step (x0.1 for the last quarter), cosine or constant")
      ->check(CLI::IsMember({"step", "cosine", "constant"}))->capture_default_str();
  app.add_option("--warmup", c.warmup, "rounds of linear learning-rate warm-up")->check(whole(0, 4294967295u))->capture_default_str();
  app.add_flag("--nesterov", c.nesterov, "Nesterov momentum");
  app.add_flag("--per-layer", c.per_layer, "top-K per layer (the same fraction of every layer) instead of global");
  app.add_option("--momentum", c.momentum, "SGD momentum on the numerator")->check(real(0, 0.999))->capture_default_str();
  app.add_option("--weight-decay", c.weight_decay, "L2 weight decay")->check(real(0, unbounded))->capture_default_str();
  app.add_option("--seed", c.seed, "seed of data partition, init, batches and compressors (0 to 2^64 - 1)")
      ->check(whole(0, 18446744073709551615u))->capture_default_str();
  app.add_option("--threads", c.threads, "worker threads (results do not depend on it)")->check(whole(1, 256))->capture_default_str();
  app.add_option("--eval-every", c.eval_every, "rounds between evaluations (0: about 10 a run)")->check(whole(0, 4294967295u));
  app.add_option("--final-eval-samples", c.final_eval_samples,
                 "test images used by the final evaluation (0: all of them; fewer keeps very large runs short)")
      ->check(whole(0, 10000))->capture_default_str();
  app.add_option("--eval-samples", c.eval_samples, "test images used by periodic evaluations (the final one uses all)")
      ->check(whole(1, 10000))->capture_default_str();
  app.add_option("--log", c.log, "CSV log file");
  app.add_option("--summary", c.summary, "JSON summary file");
  app.add_option("--plot", c.plot, "PNG plot (gnuplot): test accuracy and divergence vs rounds and vs megabytes");
  app.add_option("--data", c.data, "directory with the Fashion-MNIST .gz files")->capture_default_str();
  app.add_option("--transport", c.transport, "inprocess (all nodes in this process) or mpi (under mpirun -np R: each rank runs a block of "
                 "the nodes; rank 0 reports)")->check(CLI::IsMember({"inprocess", "mpi"}))->capture_default_str();
  app.add_option("--drop-probability", c.drop_probability,
                 "inject message loss: each envelope is lost with this probability in [0, 1) (in-process and MPI alike)")
      ->check(real(0, 1, false, true))->capture_default_str();
  app.add_option("--loss-recovery", c.loss_recovery, "ack: a sender keeps the shares of its lost envelopes (mass conserved); none: plain push-sum")
      ->check(CLI::IsMember({"ack", "none"}))->capture_default_str();
  app.add_option("--checkpoint", c.checkpoint, "directory for crash-safe checkpoints of every node's state (created if missing)");
  app.add_option("--checkpoint-every", c.checkpoint_every, "rounds between checkpoints (0: at every evaluation)")
      ->check(whole(0, 4294967295u))->capture_default_str();
  app.add_option("--resume", c.resume, "continue the run checkpointed in this directory (same settings; checkpoints go on there "
                 "unless --checkpoint names another; the checkpoint a run resumed from is kept)");
  app.add_option("--resume-round", c.resume_round, "with --resume: the round to resume at, one the directory keeps (the latest "
                 "checkpoint, the one before it, or the one an earlier resume started from); 0: the latest")
      ->check(whole(0, 4294967295u))->capture_default_str();
  app.add_option("--eval-reduce", c.eval_reduce,
                 "how an evaluation sums the models over the MPI ranks: ordered (in node order, the bits of one process; a "
                 "chain through the ranks) or allreduce (one allreduce of the parameters in double: a few times fewer bytes "
                 "on a slow link; the averaged model's and the divergence's last bits then depend on the rank count)")
      ->check(CLI::IsMember({"ordered", "allreduce"}))->capture_default_str();
  app.add_option("--mpi-timeout", c.mpi_timeout, "seconds a rank waits for a missing message or a collective before it stops the run "
                 "(0.001 to 2147483)")
      ->check(real(0.001, 2147483))->capture_default_str();
  app.add_option("--straggler", c.straggler_specs,
                 "NODES:FACTOR (repeatable): make nodes NODES (a node, e.g. 3, or a range, e.g. 12-15) take FACTOR (> 1, at "
                 "most 1000) times as long per local step: each sleeps (FACTOR - 1) x its measured compute time; the "
                 "results do not change");
  app.add_option("--staleness", c.staleness,
                 "how long a node waits for its in-neighbours: 0 (lockstep), N (mix what has arrived, wait only for the "
                 "envelopes of rounds <= t - N) or inf (asynchronous: never wait; over MPI training ends when the "
                 "nodes together took nodes x rounds local steps)")->capture_default_str();
  app.add_flag("--overlap", c.overlap, "mix exactly the previous round's envelopes, so that sends travel while the next "
               "gradient is computed (deterministic: the same results in process and over MPI)");
  app.add_option("--max-delay", c.max_delay,
                 "in-process runs with --staleness N or inf: the seeded delay model, each envelope arrives 0 to this many "
                 "rounds late (default: N; 4 for inf)")->check(whole(0, 65535));
  app.add_option("--jitter", c.jitter, "each local step takes U[1, F] times its compute time (seeded per node and round; "
                 "the results do not change); 1: none")->check(real(1, 1000))->capture_default_str();
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return (app.exit)(e);  // parenthesized: never SMPI's exit(x) macro
  } catch (const CLI::ParseError& e) {
    (app.exit)(e);
    return 2;
  }
  // --precision and --bits: one training precision (0: full precision)
  const unsigned from_precision = c.precision == "int8" ? 8 : 0;
  if (bits->count() && c.bits == 32) c.bits = 0;
  if (bits->count() && c.bits != 0 && (c.bits < 4 || c.bits > 16))
    throw sp::config_error("--bits " + std::to_string(c.bits) + ": simulated precision must be 4 to 16 bits (0 or 32: full precision)");
  if (bits->count() && precision->count() && c.bits != from_precision)
    throw sp::config_error("--precision " + c.precision + " and --bits " + std::to_string(c.bits) +
                           " conflict (int8 is --bits 8, fp32 is --bits 0)");
  if (!bits->count()) c.bits = from_precision;
  return std::nullopt;
}

/// An exception's text without the library's "sparsepush: " (the program names itself).
std::string message_of(const std::exception& e) {
  const std::string_view w = e.what(), lib = "sparsepush: ";
  return std::string(w.substr(0, lib.size()) == lib ? w.substr(lib.size()) : w);
}

/// Whether `program` is an executable file in a directory of $PATH.
bool on_path(const std::string& program) {
  const char* path = std::getenv("PATH");
  for (std::string_view rest = path ? path : ""; !rest.empty();) {
    const auto colon = rest.find(':');
    const std::string dir(rest.substr(0, colon));
    rest = colon == std::string_view::npos ? std::string_view() : rest.substr(colon + 1);
    if (::access(((dir.empty() ? "." : dir) + "/" + program).c_str(), X_OK) == 0) return true;
  }
  return false;
}

/// How many processes a launcher (mpirun, mpiexec) started this one among: 1 when none did.
int launched_ranks() {
  for (const char* var : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_SIZE", "MPI_LOCALNRANKS"})
    if (const char* v = std::getenv(var)) {
      int n = 0;
      const auto [end, ec] = std::from_chars(v, v + std::strlen(v), n);
      if (ec == std::errc() && n > 0) return n;
    }
  return 1;
}

/// --straggler's specs against the run's `nodes`: each NODES:FACTOR, NODES a node or an inclusive
/// range a-b within [0, nodes), FACTOR a number in (1, 1000]; no node named twice. A config_error
/// names the spec and what is wrong with it.
std::vector<straggler> parse_stragglers(const std::vector<std::string>& specs, std::size_t nodes) {
  std::vector<straggler> out;
  for (const std::string& spec : specs) {
    const std::string at = "--straggler " + cli_numbers::shown_text(spec) + ": ";
    const auto colon = spec.find(':');
    if (colon == std::string::npos || spec.find(':', colon + 1) != std::string::npos)
      throw sp::config_error(at + "expected NODES:FACTOR, a node or a range of nodes and a factor > 1 (e.g. 3:3 or 12-15:3)");
    const std::string nodes_text = spec.substr(0, colon), factor_text = spec.substr(colon + 1);
    auto node = [&](std::string text) {  // a whole number, read as the other counts are
      if (text.empty()) throw sp::config_error(at + "a node is missing (NODES is a node, e.g. 3, or a range, e.g. 12-15)");
      if (const std::string why = whole(0, 4294967295u)(text); !why.empty()) throw sp::config_error(at + "node " + why);
      return static_cast<std::uint32_t>(std::stoul(text));
    };
    const auto dash = nodes_text.find('-');
    straggler s;
    s.first = node(nodes_text.substr(0, dash));
    s.last = dash == std::string::npos ? s.first : node(nodes_text.substr(dash + 1));
    if (s.first > s.last)
      throw sp::config_error(at + "the range " + nodes_text + " is empty (its first node is after its last: write " +
                             std::to_string(s.last) + "-" + std::to_string(s.first) + ")");
    if (s.last >= nodes) {
      const std::uint32_t outside = s.first >= nodes ? s.first : s.last;
      throw sp::config_error(at + "node " + std::to_string(outside) + " is outside the run's " + std::to_string(nodes) +
                             " nodes (0 to " + std::to_string(nodes - 1) + ")");
    }
    std::string f = factor_text;
    if (const std::string why = real(1, 1000, true)(f); !why.empty())
      throw sp::config_error(at + "the factor " + why);
    s.factor = std::stod(factor_text);
    for (std::size_t k = 0; k < out.size(); ++k)
      if (s.first <= out[k].last && out[k].first <= s.last)
        throw sp::config_error("--straggler " + cli_numbers::shown_text(specs[k]) + " and " + cli_numbers::shown_text(spec) +
                               " both name node " + std::to_string(std::max(s.first, out[k].first)) +
                               " (give each node one factor)");
    out.push_back(s);
  }
  return out;
}

/// Every check that needs no data, before any work (a config_error exits with 2). Nothing is
/// created or opened but the --checkpoint directory; outputs are opened only once the run starts.
void check(train_config& c, const CLI::App& app, bool mpi, int rank, int ranks) {
  const bool root = rank == 0;
  if (c.nodes < 2)
    throw sp::config_error("--nodes must be at least 2: one node has no one to gossip with, and its run would be "
                           "plain SGD (the library runs a single node that way; here use --nodes 2 or more)");
#ifdef SPARSEPUSH_SMPI
  // SMPI runs every rank as a simulated process on one host thread and times its computation with
  // that thread's CPU clock: work on other threads would be missed, and only MPI runs are simulated
  if (!mpi)
    throw sp::config_error("this sparsepush-train is built for SimGrid's SMPI: run it under smpirun with --transport mpi");
  if (app.count("--threads") == 0) c.threads = 1;  // the default here
  if (c.threads != 1)
    throw sp::config_error("--threads " + std::to_string(c.threads) + ": under SMPI each rank computes on one thread "
                           "(SMPI times a rank by its thread's CPU clock); use --threads 1 and more ranks or nodes per rank");
#endif
  if (mpi && static_cast<std::size_t>(ranks) > c.nodes)
    throw sp::config_error("--nodes " + std::to_string(c.nodes) + " on " + std::to_string(ranks) +
                           " MPI ranks: more ranks than nodes (every rank runs at least one node); start at most " +
                           std::to_string(c.nodes) + " ranks or give more --nodes");
  const bool symmetric_alg = c.algorithm == "dpsgd" || c.algorithm == "deepsqueeze" || c.algorithm == "choco";
  const bool centralized = c.algorithm == "centralized";
  // an option the algorithm does not use is refused: the summary never lists a setting the run ignored
  auto unused = [&](const char* option, const std::string& why) {
    if (app.count(option) > 0) throw sp::config_error(std::string(option) + ": --algorithm " + c.algorithm + " " + why);
  };
  if (centralized) {
    const std::string why = "averages every node's step exactly each round: it has no graph, messages or consensus step";
    for (const char* option : {"--schedule", "--eta", "--compressor", "--drop-probability", "--loss-recovery"}) unused(option, why);
  }
  if (c.algorithm == "sgp" || c.algorithm == "dpsgd")
    unused("--compressor", "sends whole models (the identity compressor); to compress, use --algorithm sp, scsp, "
                           "deepsqueeze or choco");
  if (c.algorithm != "choco") unused("--consensus-step", "has no consensus step gamma_c (it is CHOCO's: --algorithm choco)");
  if (centralized || c.algorithm == "choco" || c.algorithm == "sgp" || c.algorithm == "dpsgd")
    unused("--per-layer", "does not use it (per-layer top-K is for --algorithm sp, scsp or deepsqueeze)");
  if (c.schedule.empty()) c.schedule = symmetric_alg ? "undirected-ring" : "time-varying-ring";
  if (symmetric_alg && !symmetric_schedule(c.schedule))
    throw sp::config_error("--algorithm " + c.algorithm + " needs a symmetric doubly stochastic schedule: --schedule "
                           "undirected-ring, torus:RxC or complete (got " + c.schedule + ")");
  if (!centralized) sp::parse_schedule(c.schedule, c.nodes, c.seed);  // a bad schedule is a config_error now
  if (mpi && centralized) throw sp::config_error("--algorithm centralized runs in one process only (--transport inprocess)");
  if (c.drop_probability > 0 && (c.algorithm == "centralized" || c.algorithm == "choco"))
    throw sp::config_error("--drop-probability: " + c.algorithm + (c.algorithm == "choco"
        ? " needs every message delivered (its nodes keep copies of their neighbours' models, which a lost message would corrupt)"
        : " sends no messages"));
  if (c.drop_probability == 0 && app.count("--loss-recovery") > 0 && root)
    std::fprintf(stderr, "sparsepush-train: warning: --loss-recovery acts on lost messages only; with no "
                         "--drop-probability it changes nothing (the summary lists it as null)\n");
  if (!c.plot.empty() && c.log.empty()) throw sp::config_error("--plot needs --log (the plot is drawn from the CSV log)");
  if (!c.plot.empty() && root && !on_path("gnuplot"))
    throw sp::config_error("--plot needs gnuplot, which is not on PATH (Debian: gnuplot-nox); install it or drop --plot");
  if (c.algorithm == "sgp" || c.algorithm == "dpsgd" || c.algorithm == "centralized") c.compressor = "identity";
  const auto comp = sp::parse_compressor(c.compressor);  // a bad spec is a config_error now
  if (c.per_layer && !std::holds_alternative<sp::top_k>(comp.get()))
    throw sp::config_error("--per-layer needs a top-k compressor, got " + c.compressor);
  if (c.eta < 0) c.eta = c.algorithm == "sgp" || c.algorithm == "dpsgd" ? 1.0 : sp::default_eta(comp);
  for (const char* option : {"--final-compressor", "--final-eta", "--final-tolerance"})
    if (c.algorithm != "scsp" && app.count(option) > 0)
      throw sp::config_error(std::string(option) + " sets SCSP's final rounds; --algorithm " + c.algorithm + " has none (use --algorithm scsp)");
  if (c.algorithm == "scsp") {
    const auto final_comp = sp::parse_compressor(c.final_compressor);
    if (c.final_eta < 0) c.final_eta = sp::default_eta(final_comp);
    if (!(c.final_eta > 0 && c.final_eta <= 1)) throw sp::config_error("--final-eta must be in (0, 1]");
    if (c.final_rounds == "auto" && !sp::whole_model_values(final_comp))
      throw sp::config_error("--final-rounds auto counts rounds that send whole models (identity, or identity+fp16, +bf16 or +int8); "
                             "--final-compressor " + c.final_compressor + " mixes more slowly than the schedule shows: give --final-rounds N");
    if (c.final_rounds != "auto" && app.count("--final-tolerance") > 0)
      throw sp::config_error("--final-tolerance sets the target of --final-rounds auto; --final-rounds " + c.final_rounds +
                             " gives the count itself");
  } else if (app.count("--final-rounds") > 0 && root) {  // accepted and unused, as it always was; but say so
    std::fprintf(stderr, "sparsepush-train: warning: --final-rounds is SCSP's; --algorithm %s runs no final rounds\n", c.algorithm.c_str());
  }
  if (!(c.eta > 0 && c.eta <= 1)) throw sp::config_error("--eta must be in (0, 1]");
  if (root) {  // outputs: each a regular file or a new one in a writable directory, none named twice; nothing created yet
    const std::vector<std::pair<std::string, std::string>> outputs = {
        {"--log", c.log}, {"--summary", c.summary}, {"--plot", c.plot}, {"--plot's script", c.plot.empty() ? "" : c.plot + ".gp"}};
    for (const auto& [option, path] : outputs)
      if (!path.empty()) train_outputs::check_output(option, path);
    train_outputs::check_distinct(outputs);
    std::vector<std::pair<std::string, std::string>> inputs = {{"--checkpoint", c.checkpoint}, {"--resume", c.resume}};
    for (const char* f : {"train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz", "t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz"})
      inputs.emplace_back("--data's", c.data + "/" + f);
    for (const auto& out : outputs)
      for (const auto& in : inputs) train_outputs::check_distinct({out, in});
  }
  if (c.checkpoint_every > 0 && c.checkpoint.empty() && c.resume.empty())
    throw sp::config_error("--checkpoint-every needs --checkpoint DIR");
  if (c.resume_round > 0 && c.resume.empty()) throw sp::config_error("--resume-round needs --resume DIR");
  if (!c.resume.empty()) {  // an existing directory: resume never creates one
    sp::checkpoint_directory(c.resume).require_existing("--resume");
    if (root && !sp::checkpoint_directory(c.resume).has_manifest())
      throw sp::config_error("--resume " + c.resume + ": no checkpoint there (" + c.resume + "/manifest is missing)");
  }
  if (c.checkpoint.empty()) c.checkpoint = c.resume;  // --resume DIR continues there (the trainer creates --checkpoint)
  c.stragglers = parse_stragglers(c.straggler_specs, c.nodes);
  // the waiting policy (sp, scsp, sgp and their configurations; lockstep by default)
  if (c.overlap && app.count("--staleness") > 0)
    throw sp::config_error("--overlap and --staleness " + c.staleness + " are two waiting policies: give one");
  c.policy = c.overlap ? sp::wait_policy::overlap() : sp::parse_staleness(c.staleness);
  if (!c.policy.lockstep() && c.algorithm == "choco")
    throw sp::config_error("--algorithm choco runs lockstep rounds only: its nodes keep copies of their neighbours' models, "
                           "which need every message in order (drop " + std::string(c.overlap ? "--overlap" : "--staleness " + c.staleness) + ")");
  if (!c.policy.lockstep() && centralized)
    throw sp::config_error("--algorithm centralized sends no messages: it has no waiting policy (drop " +
                           std::string(c.overlap ? "--overlap" : "--staleness " + c.staleness) + ")");
  const bool delays = c.policy.kind == sp::wait_kind::bounded || c.policy.kind == sp::wait_kind::asynchronous;
  if (app.count("--max-delay") > 0) {
    if (mpi) throw sp::config_error("--max-delay is the in-process delay model; over MPI (--transport mpi) the delays are the network's own");
    if (!delays)
      throw sp::config_error("--max-delay sets the delays of --staleness N or inf; " +
                             std::string(c.overlap ? "--overlap mixes exactly the previous round whatever the delays"
                                                   : "lockstep rounds have none"));
    if (c.policy.kind == sp::wait_kind::bounded && c.max_delay > c.policy.tau)
      throw sp::config_error("--max-delay " + std::to_string(c.max_delay) + " exceeds --staleness " + c.staleness +
                             ": a node must have every envelope of rounds <= t - " + c.staleness + ", which a longer delay would hide");
  } else {
    c.max_delay = mpi || !delays ? 0 : c.policy.kind == sp::wait_kind::bounded ? c.policy.tau : 4;
  }
}

/// What the run is made of, worked out from the options and the data before any collective (a
/// config_error exits 2 on every rank): the shards, the round counts and SCSP's final-rounds plan.
struct run_plan {
  sp::partition parts;
  std::size_t per_node = 0;  ///< training images per node (for epochs)
  std::uint32_t train_rounds = 0, final_rounds = 0;
  sp::final_rounds_plan plan;  ///< SCSP auto: the count and its bound
};

run_plan plan_run(const train_config& c, const sp::fashion_mnist& fm) {
  const std::size_t n = c.nodes;
  const bool scsp = c.algorithm == "scsp";
  run_plan p;
  p.parts = c.dirichlet > 0 ? sp::partition_dirichlet(fm.train.labels, n, c.dirichlet, c.seed)
                            : sp::partition_skewed(fm.train.labels, n, c.skew, c.seed);
  for (std::size_t i = 0; i < n; ++i)
    if (p.parts[i].empty())
      throw sp::config_error("node " + std::to_string(i) + " received no training samples; raise --dirichlet alpha or use fewer nodes");
  p.per_node = fm.train.count / n;
  // rounds are 32-bit: check the arithmetic before converting
  constexpr double max_rounds = std::numeric_limits<std::uint32_t>::max();
  const double want = std::max(1.0, std::round(c.epochs * static_cast<double>(p.per_node) / static_cast<double>(c.batch)));
  if (want > max_rounds)
    throw sp::config_error("--epochs " + std::to_string(c.epochs) + " gives " + std::to_string(want) + " rounds, more than the 4294967295 a run can count");
  p.train_rounds = static_cast<std::uint32_t>(want);
  if (scsp && c.final_rounds == "auto") {  // SCSP: the fewest exact rounds within --final-tolerance
    p.plan = sp::final_rounds_for(sp::parse_schedule(c.schedule, n, c.seed), p.train_rounds, c.final_tolerance, 100000, c.final_eta);
    p.final_rounds = p.plan.rounds;
  } else if (scsp) {  // the count given
    p.final_rounds = static_cast<std::uint32_t>(std::stoull(c.final_rounds));
  }
  if (scsp && static_cast<double>(p.train_rounds) + p.final_rounds > max_rounds)
    throw sp::config_error("--final-rounds " + std::to_string(p.final_rounds) + " after " + std::to_string(p.train_rounds) +
                           " training rounds exceeds the 4294967295 rounds a run can count");
  if (c.warmup > p.train_rounds)
    throw sp::config_error("--warmup " + std::to_string(c.warmup) + " is longer than the " + std::to_string(p.train_rounds) + " training rounds");
  return p;
}

/// --jitter's draw for node i's step of round t: uniform in [0, 1), a pure function of (seed, i,
/// t) (splitmix64), so that every run, transport and thread count slows the same steps alike.
double jitter_draw(std::uint64_t seed, std::uint32_t i, std::uint32_t t) {
  std::uint64_t z = seed ^ (std::uint64_t{i} << 32 | t) ^ 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  z ^= z >> 31;
  return static_cast<double>(z >> 11) * 0x1p-53;
}

/// The header line's note of the waiting policy ("" in lockstep).
std::string policy_text(const train_config& c) {
  if (c.policy.lockstep()) return "";
  std::string out = "; policy " + sp::to_string(c.policy);
  if (c.max_delay > 0) out += " (in-process delays of 0 to " + std::to_string(c.max_delay) + " rounds)";
  return out;
}

/// The header line's note of --straggler ("", or "; stragglers: node 3 x3, nodes 12-15 x2.5").
std::string stragglers_text(const std::vector<straggler>& slow) {
  std::string out;
  for (const straggler& s : slow) {
    char f[32];
    std::snprintf(f, sizeof f, "%g", s.factor);
    out += (out.empty() ? "; stragglers: " : ", ") +
           (s.first == s.last ? "node " + std::to_string(s.first) : "nodes " + std::to_string(s.first) + "-" + std::to_string(s.last)) +
           " x" + f;
  }
  return out;
}

/// Load the data, build the nodes this process runs, train them, report. Returns the exit code.
template <class Group, class Net>
int run(train_config& c, const run_plan& p, const sp::fashion_mnist& fm, const sp::nn::model& net, Group& group,
        Net* mpi_net, sp::run_clock::time_point t_start, std::chrono::steady_clock::time_point host_start) {
  const std::size_t in = net.input_size(), d = net.num_params(), n = c.nodes, first = group.first_node(),
                    local = group.local_nodes();
  const bool root = group.rank() == 0, scsp = c.algorithm == "scsp";
  const auto& [parts, per_node, train_rounds, final_rounds, plan] = p;
  std::vector<sp::shard_sampler> shards;
  for (std::size_t i = 0; i < n; ++i) shards.emplace_back(parts[i], c.seed * 1000003u + i);
  const auto sched = sp::parse_schedule(c.schedule, n, c.seed);
  auto comp = sp::parse_compressor(c.compressor);
  const auto final_comp = sp::parse_compressor(c.final_compressor);
  const std::uint32_t rounds = train_rounds + final_rounds;
  const double epochs = static_cast<double>(train_rounds) * c.batch / per_node;

  // The backend of this process's nodes: momentum (also the direction p_i for heavy-ball;
  // Nesterov needs a buffer of its own), last losses, and scratch per worker thread.
  const sp::nn::sgd opt{c.momentum, c.nesterov, c.weight_decay};
  std::vector<std::vector<float>> velocity(local, std::vector<float>(d, 0.0f));
  std::vector<std::vector<float>> nesterov_dirs(c.nesterov ? local : 0, std::vector<float>(d));
  struct scratch { std::vector<float> grad, images; std::vector<std::uint8_t> labels; std::vector<std::uint32_t> batch; sp::nn::workspace ws; };
  std::vector<scratch> work(std::max<std::size_t>(1, c.threads));
  std::vector<sp::nn::workspace> eval_ws(std::max<std::size_t>(1, c.threads));
  using lr_kind = sp::nn::lr_schedule::kind;
  const sp::nn::lr_schedule lr{c.lr, c.lr_shape == "cosine" ? lr_kind::cosine : c.lr_shape == "constant" ? lr_kind::constant : lr_kind::step, c.warmup};
  std::uint32_t resume_round = 0;
  sp::local_training<float> backend;
  std::vector<double> slowdown(n, 1.0);  // --straggler: each node's factor
  for (const straggler& st : c.stragglers) std::fill(slowdown.begin() + st.first, slowdown.begin() + st.last + 1, st.factor);
  backend.step = [&](std::size_t w, std::uint32_t i, std::uint32_t t, std::span<const float> model, std::span<float> dir) {
    const auto t0 = sp::run_clock::now();
    scratch& s = work.at(w);  // this worker's buffers, sized at first use
    s.grad.resize(d), s.images.resize(c.batch * in), s.labels.resize(c.batch);
    shards[i].next_batch(c.batch, s.batch);
    for (std::size_t b = 0; b < c.batch; ++b) {
      std::copy_n(fm.train.pixels.data() + std::size_t{s.batch[b]} * in, in, s.images.data() + b * in);
      s.labels[b] = fm.train.labels[s.batch[b]];
    }
    const double loss = net.loss_and_grad(model, s.images.data(), s.labels.data(), c.batch, s.grad, s.ws,
                                          sp::nn::quantization{c.bits, c.seed, i, t});  // bits 0: full precision
    opt.direction(s.grad, model, velocity[i - first], dir);
    // a straggler (and --jitter): the step takes factor x its compute time, on the calling thread
    const double factor = slowdown[i] * (c.jitter > 1 ? 1 + (c.jitter - 1) * jitter_draw(c.seed, i, t) : 1.0);
    if (factor > 1) {
      const std::chrono::duration<double> took = sp::run_clock::now() - t0;  // simulated under SMPI
      sp::detail::pause_for(std::chrono::duration_cast<std::chrono::nanoseconds>(took * (factor - 1)));
    }
    return loss;
  };
  backend.direction = [&](std::uint32_t i) {
    return c.nesterov ? std::span<float>(nesterov_dirs[i - first]) : std::span<float>(velocity[i - first]);
  };
  backend.accuracy = [&](std::size_t w, std::span<const float> m, bool final) {
    const std::size_t samples = final ? (c.final_eval_samples ? std::min<std::size_t>(c.final_eval_samples, fm.test.count) : fm.test.count)
                                      : std::min<std::size_t>(c.eval_samples, fm.test.count);
    return static_cast<double>(net.count_correct(m, fm.test.pixels.data(), fm.test.labels.data(), samples, eval_ws.at(w))) /
           static_cast<double>(samples);
  };
  backend.save = [&](sp::checkpoint_writer& w) {
    for (std::size_t li = 0; li < local; ++li) {
      shards[first + li].save(w);
      w.values(velocity[li]);
    }
  };
  backend.restore = [&](sp::checkpoint_reader& r) -> std::function<void()> {
    std::vector<sp::shard_sampler> sh;
    std::vector<std::vector<float>> vel(local);
    for (std::size_t li = 0; li < local; ++li) {
      sh.push_back(shards[first + li].read(r));
      vel[li] = r.values<float>("momentum", d);  // empty once training has ended
      if (vel[li].size() != d && !(vel[li].empty() && resume_round >= train_rounds))
        r.fail("holds a momentum of " + std::to_string(vel[li].size()) + " elements for a model of " + std::to_string(d));
    }
    return [&, sh = std::move(sh), vel = std::move(vel)]() mutable {
      for (std::size_t li = 0; li < local; ++li) {
        shards[first + li] = std::move(sh[li]);
        velocity[li] = std::move(vel[li]);
      }
    };
  };
  backend.training_ended = [&] {  // SCSP's final rounds take no local step: free the momentum
    for (auto* bufs : {&velocity, &nesterov_dirs})
      for (auto& v : *bufs) std::vector<float>().swap(v);
  };

  train_log log;
  const bool tty = isatty(fileno(stdout)) && !mpi_net;  // mpirun forwards a pty: plain lines there
  sp::trainer_callbacks cb;
  cb.guard = [&](const sp::round_status& s) -> std::optional<std::string> {
    auto why = sp::default_divergence_guard(s);
    if (why) *why += ": lower --eta (now " + sp::run_settings::exact(c.eta) + ") or --lr (now " + sp::run_settings::exact(c.lr) + ")";
    return why;
  };
  cb.progress = [&](const sp::round_status& s) {
    const double epoch = static_cast<double>(std::min(s.round, train_rounds)) * c.batch / per_node;
    if (s.evaluated && log.is_open()) log.row(s, epoch, scsp && s.round > train_rounds ? "final-gossip" : "train");
    if (root && (tty || s.evaluated)) {  // a terminal gets one live line, a pipe a line per evaluation
      char loss[32] = "-";  // under MPI the mean loss is gathered at evaluations and checkpoints only
      if (s.loss_known) std::snprintf(loss, sizeof loss, "%.4f", s.loss);
      std::printf("%sround %u/%u  epoch %.2f  loss %s  acc %.2f%% (avg model %.2f%%)  div %.3g  %.1f MB  ETA %.0fs%s",
                  tty ? "\r" : "", s.round, rounds, epoch, loss, 100 * s.eval.avg_node_accuracy, 100 * s.eval.averaged_model_accuracy,
                  s.report.parameter_divergence, static_cast<double>(s.bytes_now) / 1e6,
                  s.wall_seconds / s.round * (rounds - s.round), tty ? "   " : "\n");
      std::fflush(stdout);
    }
  };
  cb.before_checkpoint = [&](std::uint32_t) {
    if (!log.is_open()) return;
    log.flush();
    if (!log.is_open()) std::fprintf(stderr, "sparsepush-train: %s; the run goes on without it\n", log.error().c_str());
  };
  cb.resumed = [&](std::uint32_t t) { if (root) std::printf("resumed from %s at round %u\n", c.resume.c_str(), t); };
  std::vector<std::string> failed_outputs;  // reported (exit 2) once the results are printed
  cb.started = [&](std::uint32_t t) {  // a resume's checkpoint is read and checked: only now is the log touched
    if (!c.log.empty() && root && !log.open(c.log, t))  // reported again with the others when the log is closed
      std::fprintf(stderr, "sparsepush-train: %s; the run goes on without it\n", log.error().c_str());
  };
  sp::trainer<float, Group> tr(group, settings_of(c, n, d),
                               {.rounds = rounds, .train_rounds = train_rounds,
                                .lr = [&](std::uint32_t t) { return lr.at(t, train_rounds); },
                                .eval_every = c.eval_every, .eval_threads = c.threads, .checkpoint_dir = c.checkpoint,
                                .checkpoint_every = c.checkpoint_every, .resume_dir = c.resume,
                                .resume_round = c.resume_round, .start = t_start,
                                .eval_reduction = c.eval_reduce == "allreduce" ? sp::eval_reduction::allreduce
                                                                               : sp::eval_reduction::ordered},
                               backend, cb);
  resume_round = tr.start_round();
  if (root) {
    std::printf("sparsepush-train: %s on %zu nodes, schedule %s, compressor %s, eta %g, model %s (%zu parameters), "
                "%s %g, %u rounds (%.2f epochs) of batch %zu%s%s\n", c.algorithm.c_str(), n, c.schedule.c_str(), c.compressor.c_str(),
                c.eta, c.model.c_str(), d, c.dirichlet > 0 ? "dirichlet" : "skew", c.dirichlet > 0 ? c.dirichlet : c.skew, rounds, epochs, c.batch,
                policy_text(c).c_str(), stragglers_text(c.stragglers).c_str());
    if (scsp) {
      std::printf("sparsepush-train: SCSP's last %u rounds gossip with %s, eta %g", final_rounds, c.final_compressor.c_str(), c.final_eta);
      const auto v = sp::whole_model_values(final_comp).value_or(sp::value_encoding::native);
      const char* rounding = v == sp::value_encoding::native || v == sp::value_encoding::f32 || v == sp::value_encoding::f64
                                 ? "" : ", before the values' rounding";  // a value encoding below the model's precision
      if (c.final_rounds != "auto") std::printf("\n");
      else if (c.drop_probability > 0)  // a lost message breaks the count: no bound holds
        std::printf(" (auto: the count for a lossless schedule; with --drop-probability %g lost messages leave the "
                    "models apart by more: the final param_divergence is measured, not bounded)\n", c.drop_probability);
      else if (plan.exact) std::printf(" (auto: the schedule averages exactly after %u rounds%s)\n", final_rounds, rounding);
      else std::printf(" (auto: every model ends within %.3g of its distance to the average%s)\n", plan.bound, rounding);
    }
  }

  std::vector<std::vector<float>> x0(local, std::vector<float>(d));
  net.init(x0[0], c.seed);
  std::fill(x0.begin() + 1, x0.end(), x0[0]);
  using net_t = std::conditional_t<std::is_void_v<Net>, sp::loopback_network, Net>;
  using alg_args = sp::any_compressor;
  sp::train_result res;
  // the algorithm over this process's network: its own loopback, or the MPI network
  const auto nets = [&] { if constexpr (std::is_void_v<Net>) return std::tuple<>(); else return std::tuple<Net&>(*mpi_net); }();
  if (c.algorithm == "centralized") {
    sp::centralized<float> alg(x0[0], n, c.threads);
    res = tr.run(alg);
  } else if (c.algorithm == "choco") {
    const sp::choco_options co{.consensus_step = c.consensus_step, .compressor = comp,
                               .threads = c.threads, .seed = c.seed};
    std::apply([&](auto&... on) {
      sp::choco<float, alg_args, sp::any_schedule, net_t> alg(std::move(x0), sched, on..., co);
      res = tr.run(alg);
    }, nets);
  } else {
    if (c.per_layer) {  // top-K over each layer's parameters
      sp::top_k per = std::get<sp::top_k>(comp.get());  // check() refused anything else
      for (std::size_t l = 0; l < net.layers().size(); ++l)
        if (const std::size_t off = net.param_offset(l); off < d && (per.segments.empty() || off > per.segments.back()))
          per.segments.push_back(off);
      if (per.segments.empty() || per.segments.front() != 0) per.segments.insert(per.segments.begin(), 0);
      comp = per;
    }
    const auto phases = scsp ? sp::scsp_phases(comp, c.eta, train_rounds, final_comp, c.final_eta, final_rounds)
                             : sp::sparse_push_phases(comp, c.eta);
    const sp::sparse_push_options so{.threads = c.threads, .seed = c.seed,
                                     .network = {.drop_probability = c.drop_probability, .seed = c.seed,
                                                 .max_delay = static_cast<std::uint32_t>(c.max_delay)},
                                     .recovery = c.loss_recovery == "ack" ? sp::loss_recovery::acknowledged : sp::loss_recovery::none,
                                     .policy = c.policy};
    std::apply([&](auto&... on) {
      sp::sparse_push<float, alg_args, sp::any_schedule, net_t> alg(std::move(x0), sched, phases, on..., so);
      res = tr.run(alg);
    }, nets);
  }
  if (res.diverged) {
    if (root) std::fprintf(stderr, "\nsparsepush-train: %s\n", res.reason.c_str());
    if (!log.close()) failed_outputs.push_back(log.error());
    for (const auto& why : failed_outputs) std::fprintf(stderr, "sparsepush-train: %s\n", why.c_str());
    return 3;
  }
  if (tty) std::printf("\n");
  if (!root) return 0;
  const double wall = std::chrono::duration<double>(sp::run_clock::now() - t_start).count();
  auto summary = summary_json(c, res, net, n, rounds, train_rounds, final_rounds,
                              scsp && c.final_rounds == "auto" && c.drop_probability == 0 ? std::optional<double>(plan.bound)
                                                                                         : std::nullopt,
                              epochs, group.ranks(), wall);
  if constexpr (sp::simulated_clock) {  // the times above are SimGrid's simulated seconds; this is what simulating took
    summary["clock"] = "simulated (SMPI)";
    summary["host_seconds"] = std::chrono::duration<double>(std::chrono::steady_clock::now() - host_start).count();
  }
  std::printf("%s\n", summary.dump(2).c_str());
  // every output checked: a failure is exit 2 naming the file, after the results above
  if (!c.summary.empty())
    if (auto why = train_outputs::write_whole(c.summary, "the summary file", summary.dump(2) + '\n'); !why.empty())
      failed_outputs.push_back(why);
  const bool log_ok = log.close();
  if (!log_ok) failed_outputs.push_back(log.error());
  if (!c.plot.empty() && log_ok) {
    if (auto why = write_plot(c, n); !why.empty()) failed_outputs.push_back(why);
    else std::printf("plot written to %s\n", c.plot.c_str());
  } else if (!c.plot.empty()) {
    failed_outputs.push_back("the plot " + c.plot + " was not drawn: its log " + c.log + " is incomplete");
  }
  for (const auto& why : failed_outputs) std::fprintf(stderr, "sparsepush-train: %s\n", why.c_str());
  return failed_outputs.empty() ? 0 : 2;
}

#ifdef SPARSEPUSH_SMPI
/// The data set of `dir`, loaded once per host process: SMPI runs every rank in one process, and a
/// copy per rank (220 MB of floats) would not fit beyond a few hundred ranks. The first rank to ask
/// loads it; the others find it in SMPI's registry of shared calls, which lives in libsimgrid and so
/// is not privatized (smpi/privatization:dlopen gives every rank its own copy of this program's
/// statics, so a static here would be loaded once per rank). Read-only; kept to the end of the
/// simulation. Ranks run one at a time between MPI calls, so no two load it at once.
const sp::fashion_mnist& shared_fashion_mnist(const std::string& dir) {
  const std::string key = std::filesystem::absolute(dir).lexically_normal().string();
  if (smpi_shared_known_call("sparsepush_fashion_mnist", key.c_str()))
    return *static_cast<const sp::fashion_mnist*>(smpi_shared_get_call("sparsepush_fashion_mnist", key.c_str()));
  auto* fm = new sp::fashion_mnist(sp::load_fashion_mnist(dir));  // a throw registers nothing: each rank reports it
  smpi_shared_set_call("sparsepush_fashion_mnist", key.c_str(), fm);
  return *fm;
}
#endif

#ifdef SPARSEPUSH_HAS_MPI
/// Every rank says whether its checks passed, before any other collective: the ranks that failed,
/// the same list on every rank. A rank that never answers within `timeout` ends the job.
std::vector<int> failed_ranks(bool ok, int ranks, double timeout) {
  const int mine = ok ? 1 : 0;
  std::vector<int> all(static_cast<std::size_t>(ranks));
  MPI_Request req = MPI_REQUEST_NULL;
  sp::detail::mpi_iallgather(&mine, 1, MPI_INT, all.data(), 1, MPI_INT, MPI_COMM_WORLD, &req, true);  // SMPI: blocks
  const double deadline = MPI_Wtime() + timeout;
  // done at once where the gather blocked (SMPI's MPI_Test leaves the flag of a null request unset)
  for (int done = req == MPI_REQUEST_NULL; !done;) {
    MPI_Test(&req, &done, MPI_STATUS_IGNORE);
    if (done) break;
    if (MPI_Wtime() > deadline) {
      int rank = 0;
      MPI_Comm_rank(MPI_COMM_WORLD, &rank);
      std::fprintf(stderr, "sparsepush-train: rank %d: a rank did not finish its checks within --mpi-timeout %g s; "
                   "stopping every rank\n", rank, timeout);
      std::fflush(stderr);
      MPI_Abort(MPI_COMM_WORLD, 2);
    }
    sp::detail::pause_for(std::chrono::milliseconds(1));  // simulated time under SMPI
  }
  std::vector<int> failed;
  for (int r = 0; r < ranks; ++r)
    if (!all[static_cast<std::size_t>(r)]) failed.push_back(r);
  return failed;
}
#endif

}  // namespace

int main(int argc, char** argv) {
  const auto t_start = sp::run_clock::now();  // under SMPI: the simulated clock
  const auto host_start = std::chrono::steady_clock::now();
  train_config c;
  CLI::App app{"sparsepush-train: decentralized training on Fashion-MNIST with Sparse-Push, SCSP and baselines"};
  try {
    if (const auto code = parse(argc, argv, c, app)) return *code;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "sparsepush-train: %s\n", message_of(e).c_str());
    return 2;
  }
  const bool mpi = c.transport == "mpi";
  if (const int launched = launched_ranks(); !mpi && launched > 1) {  // every copy would run the whole job
    std::fprintf(stderr, "sparsepush-train: started as %d MPI processes, but --transport is inprocess: each would run "
                 "the whole job and write the same files; add --transport mpi (or start one process)\n", launched);
    return 2;
  }
#ifdef SPARSEPUSH_HAS_MPI
  int rank = 0, ranks = 1, provided = 0;
  struct mpi_session {  // MPI_Finalize on every way out
    bool on;
    ~mpi_session() { if (on) MPI_Finalize(); }
  } session{mpi && MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided) == MPI_SUCCESS};
  if (session.on) { MPI_Comm_rank(MPI_COMM_WORLD, &rank); MPI_Comm_size(MPI_COMM_WORLD, &ranks); }
  // SMPI gives MPI_THREAD_SINGLE: its ranks compute on their one thread (--threads 1, checked)
  if (session.on && provided < (sp::simulated_clock ? MPI_THREAD_SINGLE : MPI_THREAD_FUNNELED)) {
    if (rank == 0) std::fprintf(stderr, "sparsepush-train: --transport mpi needs MPI_THREAD_FUNNELED; this MPI gives less\n");
    return 2;
  }
  if (mpi && !session.on) {
    std::fprintf(stderr, "sparsepush-train: --transport mpi: MPI_Init_thread failed\n");
    return 2;
  }
  auto fail = [&](int code) {  // under MPI a failure stops every rank (the others could wait in a collective)
    if (session.on && ranks > 1) { std::fflush(stderr); MPI_Abort(MPI_COMM_WORLD, code); }
    return code;
  };
#else
  const int rank = 0, ranks = 1;
  auto fail = [](int code) { return code; };
  if (mpi) {
    std::fprintf(stderr, "sparsepush-train: --transport mpi: this build has no MPI (install libopenmpi-dev and rebuild)\n");
    return 2;
  }
#endif
  // Every rank checks everything it can before any collective: the options, its outputs (rank
  // 0), the data and the model. Under MPI the ranks then agree: one rank's failure stops them all
  // with exit code 2, the error printed once (rank 0's, or the failing ranks' own).
  std::string why;
  const sp::fashion_mnist* fm = nullptr;  // this process's copy, or under SMPI the copy every rank shares
  std::optional<sp::fashion_mnist> own_data;
  std::optional<sp::nn::model> net;
  run_plan plan;
  try {
    check(c, app, mpi, rank, ranks);
#ifdef SPARSEPUSH_SMPI
    fm = &shared_fashion_mnist(c.data);
#else
    fm = &own_data.emplace(sp::load_fashion_mnist(c.data));
#endif
    net = sp::nn::model::make(c.model, 1, fm->train.rows, fm->train.cols, 10);
    plan = plan_run(c, *fm);
  } catch (const std::bad_alloc&) {
    why = "out of memory while loading the data (fewer --nodes, a smaller --model)";
  } catch (const std::exception& e) {  // the library's errors, and any other (a filesystem_error names its path)
    why = message_of(e);
  }
  const std::string prefix = std::string("sparsepush-train: ") + (ranks > 1 ? "rank " + std::to_string(rank) + ": " : "");
#ifdef SPARSEPUSH_HAS_MPI
  if (session.on && ranks > 1) {
    const auto failed = failed_ranks(why.empty(), ranks, c.mpi_timeout);
    if (!failed.empty()) {
      const bool rank0_failed = failed.front() == 0;
      if (!why.empty() && (rank == 0 || !rank0_failed)) std::fprintf(stderr, "%s%s\n", prefix.c_str(), why.c_str());
      if (rank == 0 && !rank0_failed) {
        std::string list;
        for (const int r : failed) list += (list.empty() ? "" : ", ") + std::to_string(r);
        std::fprintf(stderr, "sparsepush-train: rank(s) %s failed their checks (see above); every rank stops\n", list.c_str());
      }
      return 2;
    }
  }
#endif
  if (!why.empty()) {
    std::fprintf(stderr, "sparsepush-train: %s\n", why.c_str());
    return 2;
  }
  try {
#ifdef SPARSEPUSH_HAS_MPI
    if (mpi) {
      sp::mpi_network mpi_net(MPI_COMM_WORLD, c.nodes,
                              sp::mpi_options{std::chrono::milliseconds(static_cast<long>(c.mpi_timeout * 1000)), c.drop_probability, c.seed,
                                              c.policy});
      sp::mpi_process_group group(mpi_net);
      return run(c, plan, *fm, *net, group, &mpi_net, t_start, host_start);
    }
#endif
    sp::single_process group(c.nodes);
    return run<sp::single_process, void>(c, plan, *fm, *net, group, nullptr, t_start, host_start);
  } catch (const std::bad_alloc&) {  // a message and exit code 2, never an abort
    std::fprintf(stderr, "%sout of memory (fewer --nodes, a smaller --model or --batch)\n", prefix.c_str());
    return fail(2);
  } catch (const std::exception& e) {
    const std::string why = message_of(e);  // the MPI layer's messages name their rank already
    std::fprintf(stderr, "%s%s\n", why.rfind("rank " + std::to_string(rank) + ":", 0) == 0 ? "sparsepush-train: " : prefix.c_str(),
                 why.c_str());
    return fail(2);
  }
}
