// sparsepush/train/run_description.hpp: a training run as one value, run_spec. Every setting is a
// typed field with its default; one table (run_spec::for_each_field) names each field once with
// its option name, its help, its role and the accessor of the value the run uses, and everything
// else is derived from it: the command line's flags and their shown defaults, the Python
// keywords, the text parser, the fingerprint a checkpoint and the MPI ranks must agree on. The
// rules (validate) are in run_spec_rules.hpp; run_spec.hpp includes both.
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "../clock.hpp"
#include "../compress/compose.hpp"
#include "../config.hpp"
#include "../data/files.hpp"
#include "../gossip/policy.hpp"
#include "../topology/parse.hpp"
#include "../transport/mpi/options.hpp"
#include "defaults.hpp"
#include "local_steps.hpp"
#include "run_choices.hpp"
#include "run_field.hpp"
#include "settings.hpp"

namespace sparsepush {
inline namespace v0 {

/// --straggler NODES:FACTOR checked: nodes first..last (inclusive) take FACTOR times as long per
/// local step (they sleep (FACTOR - 1) x the measured compute time of each step).
struct straggler {
  ///@{
  /// The slowed nodes: first..last, inclusive.
  std::uint32_t first = 0, last = 0;
  ///@}
  double factor = 1;  ///< how many times as long each of their local steps takes, in (1, 1000]
};

/// Every setting of a training run with the reference backend (sparsepush-train,
/// sparsepush.train() in Python, or a program that fills the struct). An empty optional is the
/// default, which may depend on other fields (the schedule on the algorithm, eta on the
/// compressor); set means given, and a setting the run would not use is refused.
struct run_spec {
  std::size_t nodes = 16;                  ///< --nodes: 2 to 4096
  std::optional<std::string> schedule;     ///< --schedule: time-varying-ring (undirected-ring for symmetric algorithms)
  std::string algorithm = "scsp";          ///< --algorithm: a name of run_algorithms
  std::optional<std::string> compressor;   ///< --compressor: top-k:0.01 (identity for sgp, dpsgd, centralized)
  std::optional<double> eta;               ///< --eta: the consensus step (default_eta of the compressor)
  std::optional<std::string> final_rounds;      ///< --final-rounds: auto or a count (SCSP)
  std::optional<std::string> final_compressor;  ///< --final-compressor: identity (SCSP)
  std::optional<double> final_eta;              ///< --final-eta (SCSP; default_eta of the final compressor)
  std::optional<double> final_tolerance;        ///< --final-tolerance: 1e-3 (SCSP with --final-rounds auto)
  std::uint64_t seed = 1;                  ///< --seed: data partition, init, batches and compressors
  std::string model = "cnn";               ///< --model: mlp, cnn, cnn_evonorm, cnn_range_evonorm
  double epochs = 5;                       ///< --epochs over each node's shard
  std::size_t batch = 32;                  ///< --batch: minibatch per node
  double lr = 0.02;                        ///< --lr: learning rate
  std::string lr_schedule = "step";        ///< --lr-schedule: step, cosine or constant
  std::uint32_t warmup = 0;                ///< --warmup: rounds of linear warm-up
  std::optional<double> skew;              ///< --skew: label skew in [0, 1], 0.8
  std::optional<double> dirichlet;         ///< --dirichlet: Dirichlet(alpha) partition instead of --skew
  double momentum = 0.9;                   ///< --momentum
  bool nesterov = false;                   ///< --nesterov
  std::optional<std::string> momentum_kind;  ///< --momentum-kind: local or quasi-global, local
  double weight_decay = 1e-4;              ///< --weight-decay
  std::uint32_t local_steps = 1;           ///< --local-steps: H optimizer steps per communication round
  std::optional<double> outer_lr;          ///< --outer-lr: the outer step's rate gamma_o, 1 (off)
  std::optional<double> outer_momentum;    ///< --outer-momentum: the outer step's Nesterov beta, 0 (off)
  bool per_layer = false;                  ///< --per-layer: top-K per layer
  bool tracking = false;                   ///< --tracking: gradient tracking (Push-DIGing)
  std::optional<double> consensus_step;    ///< --consensus-step: CHOCO's gamma_c, 0.5
  std::string data = default_fashion_mnist_path;  ///< --data: the Fashion-MNIST directory
  std::optional<double> drop_probability;  ///< --drop-probability: injected loss, 0
  std::optional<std::string> loss_recovery;  ///< --loss-recovery: ack or none, ack
  std::uint32_t eval_every = 0;            ///< --eval-every: rounds between evaluations (0: about 10 a run)
  std::size_t eval_samples = 2000;         ///< --eval-samples: test images of periodic evaluations
  std::optional<std::string> eval_reduce;  ///< --eval-reduce: ordered or allreduce (MPI only), ordered
  std::uint32_t eval_average_every = 0;    ///< --eval-average-every: rounds between averaged-model evaluations (0: at the end)
  bool eval_split = false;                 ///< --eval-split: before the last evaluation, node i tests its 1/n share
  std::optional<double> target_accuracy;   ///< --target-accuracy: stop once the node-mean accuracy reaches it
  std::optional<std::string> precision;    ///< --precision: fp32 or int8, fp32
  std::optional<unsigned> bits;            ///< --bits: 4 to 16 (0 or 32: full precision)
  std::optional<std::string> staleness;    ///< --staleness: 0, N or inf, 0
  bool overlap = false;                    ///< --overlap
  std::optional<std::uint32_t> max_delay;  ///< --max-delay: in-process delays (default: N; 4 for inf)
  std::vector<std::string> straggler;      ///< --straggler NODES:FACTOR, repeatable
  double jitter = 1;                       ///< --jitter: each local step x U[1, F]
  std::size_t final_eval_samples = 0;      ///< --final-eval-samples (0: the whole test set)
  std::string transport{name_of(run_transports, run_transport::inprocess)};  ///< --transport: inprocess or mpi
  std::uint32_t checkpoint_every = 0;      ///< --checkpoint-every (0: at every evaluation)
  std::uint32_t resume_round = 0;          ///< --resume-round (0: the latest)
  std::optional<std::size_t> threads;      ///< --threads: 2 (1 under SMPI)
  double mpi_timeout = default_mpi_timeout.count();  ///< --mpi-timeout: seconds
  std::optional<std::string> checkpoint;   ///< --checkpoint DIR
  std::optional<std::string> resume;       ///< --resume DIR
  std::optional<std::string> log;          ///< --log: CSV file
  std::optional<std::string> summary;      ///< --summary: JSON file
  std::optional<std::string> plot;         ///< --plot: PNG file (gnuplot)

  /// The Fashion-MNIST directory of Debian's dataset-fashion-mnist.
  static constexpr const char* default_fashion_mnist_path = fashion_mnist_default_dir.data();

  /// visit(field_info, member) for every field, in the fingerprint's order: the one list of
  /// fields. Each entry names the accessor of the value the run uses (`used`, `shown`): the
  /// fingerprint and --help's shown default are derived from it. A table: long, not split.
  template <class Self, class F>
    requires std::is_same_v<std::remove_const_t<Self>, run_spec>
  static void for_each_field(Self& s, F&& visit) {
    auto f = [&visit](field_info i, auto& member) {
      if (i.shown) i.shown_default = i.shown(defaults());
      visit(std::as_const(i), member);
    };
    using r = field_role;
    constexpr double inf = std::numeric_limits<double>::infinity();
    f(field_info{.option = "nodes", .help = "number of nodes, 2 to 4096", .lo = 1, .hi = 4096}, s.nodes);
    f(field_info{.option = "schedule", .gossip = true, .help = "communication schedule: directed-ring, undirected-ring, torus:RxC, complete, "
                 "time-varying-ring[:hops], alternating-ring, exponential[:K], bidirectional-exponential, erdos-renyi:P, "
                 "random:K (default: time-varying-ring; undirected-ring for " + algorithms_where(&algorithm_info::symmetric) + ")",
                 .used = written<&run_spec::schedule_spec>}, s.schedule);
    f(field_info{.option = "algorithm", .gossip = true, .help = algorithms_where(),
                 .choices = names_of(run_algorithms)}, s.algorithm);
    f(field_info{.option = "compressor", .gossip = true, .help = "compressor spec, e.g. top-k:0.01, top-k:0.001+int8, random-k:0.01, qsgd:16, sign",
                 .used = [](const run_spec& r) { return settings_spec(r.compressor_spec()); },  // a qsgd stream is a number
                 .shown = written<&run_spec::compressor_spec>}, s.compressor);
    f(field_info{.option = "eta", .gossip = true, .help = "consensus step in (0, 1] (default from the compressor: 0.02 at top-1%, 0.1 at "
                 "top-10%, 1 for identity)", .lo = 0, .hi = 1, .lo_open = true, .used = written<&run_spec::eta_value>}, s.eta);
    f(field_info{.option = "final-rounds", .gossip = true, .help = "SCSP (choco-push: only if given): gossip rounds at the end, a count or auto: the fewest that bring "
                 "every node within --final-tolerance of the average, computed from the schedule (the exact count where the "
                 "graph averages exactly: 4 for 16 nodes on the default time-varying ring)", .key = "final",
                 .used = written<&run_spec::final_rounds_spec>, .shown = written<&run_spec::final_rounds_spec>}, s.final_rounds);
    f(field_info{.option = "final-compressor", .gossip = true, .help = "SCSP: compressor of the final rounds, e.g. identity+bf16 or "
                 "top-k:0.1+int8 (identity: exact)",
                 .used = [](const run_spec& r) { return settings_spec(r.final_compressor_spec()); },
                 .shown = written<&run_spec::final_compressor_spec>}, s.final_compressor);
    f(field_info{.option = "final-eta", .gossip = true, .help = "SCSP: consensus step of the final rounds in (0, 1] (choco-push: their "
                 "gamma_c; default from the final compressor)", .lo = 0, .hi = 1, .lo_open = true,  // -1: an algorithm without final rounds
                 .used = [](const run_spec& r) { return run_settings::exact(r.final_eta_value().value_or(-1)); }}, s.final_eta);
    f(field_info{.option = "final-tolerance", .gossip = true, .help = "SCSP with --final-rounds auto: every de-biased model ends within this "
                 "fraction of the largest distance to the average at the start of the final rounds", .lo = 1e-12, .hi = 0.5,
                 .used = written<&run_spec::final_tolerance_value>, .shown = written<&run_spec::final_tolerance_value>},
      s.final_tolerance);
    f(field_info{.option = "seed", .gossip = true, .help = "seed of data partition, init, batches and compressors (0 to 2^64 - 1)"}, s.seed);
    f(field_info{.option = "model", .help = "mlp, cnn, cnn_evonorm or cnn_range_evonorm",
                 .choices = "mlp,cnn,cnn_evonorm,cnn_range_evonorm"}, s.model);
    f(field_info{.option = "epochs", .help = "epochs over each node's shard", .lo = 0, .hi = inf, .lo_open = true}, s.epochs);
    f(field_info{.option = "batch", .help = "minibatch per node", .lo = 1, .hi = 4096}, s.batch);
    f(field_info{.option = "lr", .help = "learning rate (divided by 10 for the last quarter)", .lo = 0, .hi = inf,
                 .lo_open = true}, s.lr);
    f(field_info{.option = "lr-schedule", .help = "step (x0.1 for the last quarter), cosine or constant",
                 .choices = "step,cosine,constant"}, s.lr_schedule);
    f(field_info{.option = "warmup", .help = "local steps of linear learning-rate warm-up (rounds when --local-steps is 1)"},
      s.warmup);
    f(field_info{.option = "skew", .help = "label skew in [0, 1] (Hsieh et al.)", .lo = 0, .hi = 1,
                 .used = written<&run_spec::skew_value>, .shown = written<&run_spec::skew_value>}, s.skew);
    f(field_info{.option = "dirichlet", .help = "Dirichlet(alpha) label partition instead of --skew", .lo = 0, .hi = inf,
                 .lo_open = true, .used = written<&run_spec::dirichlet_value>, .shown = written<&run_spec::dirichlet_value>}, s.dirichlet);
    f(field_info{.option = "momentum", .help = "SGD momentum on the numerator", .lo = 0, .hi = 0.999}, s.momentum);
    f(field_info{.option = "nesterov", .help = "Nesterov momentum"}, s.nesterov);
    f(field_info{.option = "momentum-kind", .help = "local (each node's gradients) or quasi-global (each node's de-biased "
                 "change over a round, the mixing included: Lin et al. 2021); for the algorithms that send whole models", .choices = names_of(momentum_forms),
                 .used = written<&run_spec::momentum_kind_value>, .shown = written<&run_spec::momentum_kind_value>,
                 .omitted_at_default = true}, s.momentum_kind);
    f(field_info{.option = "weight-decay", .help = "L2 weight decay", .lo = 0, .hi = inf}, s.weight_decay);
    f(field_info{.option = "local-steps", .help = "H: optimizer steps each node takes between two communications (a "
                 "round uses H minibatches; --epochs, the learning-rate schedule and --warmup count local steps)",
                 .lo = 1, .hi = 10000, .omitted_at_default = true}, s.local_steps);
    f(field_info{.option = "outer-lr", .help = "the outer step's rate gamma_o > 0 on each round's de-biased change before it "
                 "is pushed (1 with --outer-momentum 0: no outer step)", .lo = 0, .hi = 10, .lo_open = true,
                 .used = written<&run_spec::outer_lr_value>, .shown = written<&run_spec::outer_lr_value>, .omitted_at_default = true},
      s.outer_lr);
    f(field_info{.option = "outer-momentum", .help = "the outer step's Nesterov momentum beta in [0, 1) on each round's "
                 "de-biased change (DiLoCo's outer step, applied before the push)", .lo = 0, .hi = 1, .hi_open = true,
                 .used = written<&run_spec::outer_momentum_value>, .shown = written<&run_spec::outer_momentum_value>,
                 .omitted_at_default = true}, s.outer_momentum);
    f(field_info{.option = "per-layer", .gossip = true, .help = "top-K per layer (the same fraction of every layer) instead of global"},
      s.per_layer);
    f(field_info{.option = "consensus-step", .gossip = true, .help = "gamma_c in (0, 1] of choco (default 0.5) and "
                 "choco-push (default from the compressor: 0.3 at top-1%, 1 at top-10% and for identity; half that under "
                 "--staleness)", .lo = 0, .hi = 1, .lo_open = true,
                 .used = written<&run_spec::consensus_step_value>}, s.consensus_step);
    f(field_info{.option = "tracking", .gossip = true, .help = "gradient tracking (Push-DIGing): each node steps along a tracker "
                 "of the average gradient, sent and mixed as the model is (a second message per link)",
                 .omitted_at_default = true}, s.tracking);
    f(field_info{.option = "data", .help = "directory with the Fashion-MNIST .gz files"}, s.data);
    f(field_info{.option = "drop-probability", .gossip = true, .help = "inject message loss: each envelope is lost with this probability in "
                 "[0, 1) (in-process and MPI alike)", .key = "drop", .lo = 0, .hi = 1, .hi_open = true,
                 .used = written<&run_spec::drop_value>, .shown = written<&run_spec::drop_value>}, s.drop_probability);
    f(field_info{.option = "loss-recovery", .gossip = true, .help = "ack: a sender keeps the shares of its lost envelopes (mass conserved); "
                 "none: plain push-sum", .key = "recovery", .choices = names_of(loss_recoveries),
                 .used = written<&run_spec::loss_recovery_value>, .shown = written<&run_spec::loss_recovery_value>},
      s.loss_recovery);
    f(field_info{.option = "eval-every", .help = "rounds between evaluations (0: about 10 a run)"}, s.eval_every);
    f(field_info{.option = "eval-samples", .help = "test images used by periodic evaluations (the final one uses all)",
                 .lo = 1, .hi = 10000}, s.eval_samples);
    f(field_info{.option = "eval-reduce", .help = "how an evaluation sums the models over the MPI ranks: ordered (in node "
                 "order, the bits of one process; a chain through the ranks) or allreduce (one allreduce of the parameters in "
                 "double: a few times fewer bytes on a slow link; the averaged model's and the divergence's last bits then "
                 "depend on the rank count); --transport mpi only", .choices = names_of(eval_reductions),
                 .used = written<&run_spec::eval_reduce_value>, .shown = written<&run_spec::eval_reduce_value>,
                 .omitted_at_default = true}, s.eval_reduce);
    f(field_info{.option = "eval-average-every", .help = "rounds between evaluations of the averaged model and the "
                 "divergence, which sum the models over the nodes (0: only at the end); the other evaluations test each "
                 "node's own model and move scalars only", .omitted_at_default = true}, s.eval_average_every);
    f(field_info{.option = "eval-split", .help = "evaluations before the last test node i's model on its own 1/n share of the "
                 "--eval-samples images, not on all of them: the node-mean accuracy (and --target-accuracy) is then over all "
                 "the images at 1/n of the work; the last evaluation tests every model on all", .omitted_at_default = true},
      s.eval_split);
    f(field_info{.option = "target-accuracy", .help = "stop training at the first evaluation whose node-mean accuracy "
                 "reaches this fraction in (0, 1], then run what the algorithm owes (SCSP's final rounds); the summary "
                 "reports the time, rounds, bytes and samples to it", .role = r::ranks, .lo = 0, .hi = 1, .lo_open = true,
                 .used = [](const run_spec& r) { return r.target_accuracy ? run_settings::exact(*r.target_accuracy) : "none"; },
                 .omitted_at_default = true}, s.target_accuracy);
    f(field_info{.option = "precision", .help = "fp32, or int8: weights, activations and gradients at 8 bits (simulated)",
                 .key = "-", .choices = names_of(run_precisions),
                 .shown = [](const run_spec& r) { return std::string(name_of(run_precisions, r.precision_mode())); }},
      s.precision);
    f(field_info{.option = "bits", .help = "simulated training precision, 4 to 16 bits (0 or 32: full precision)",
                 .lo = 0, .hi = 32, .used = written<&run_spec::bits_value>,
                 .omitted_at_default = true}, s.bits);
    f(field_info{.option = "staleness", .gossip = true, .help = "how long a node waits for its in-neighbours: 0 (lockstep), N (mix what has "
                 "arrived, wait only for the envelopes of rounds <= t - N) or inf (asynchronous: never wait; over MPI "
                 "training ends when the nodes together took nodes x rounds local steps)", .key = "policy",
                 .used = [](const run_spec& r) { return to_string(r.policy()); }, .shown = written<&run_spec::staleness_spec>,
                 .omitted_at_default = true}, s.staleness);
    f(field_info{.option = "overlap", .gossip = true, .help = "mix exactly the previous round's envelopes, so that sends travel while the "
                 "next gradient is computed (deterministic: the same results in process and over MPI)", .key = "-"},
      s.overlap);
    f(field_info{.option = "max-delay", .gossip = true, .help = "in-process runs with --staleness N or inf: the seeded delay model, each "
                 "envelope arrives 0 to this many rounds late (default: N; 4 for inf)", .lo = 0, .hi = 65535,
                 .used = written<&run_spec::max_delay_value>, .omitted_at_default = true}, s.max_delay);
    f(field_info{.option = "straggler", .help = "NODES:FACTOR (repeatable): make nodes NODES (a node, e.g. 3, or a range, "
                 "e.g. 12-15) take FACTOR (> 1, at most 1000) times as long per local step: each sleeps (FACTOR - 1) x its "
                 "measured compute time; the results do not change", .role = r::ranks}, s.straggler);
    f(field_info{.option = "jitter", .help = "each local step takes U[1, F] times its compute time (seeded per node and "
                 "round; the results do not change); 1: none", .role = r::ranks, .lo = 1, .hi = 1000}, s.jitter);
    f(field_info{.option = "final-eval-samples", .help = "test images used by the final evaluation (0: all of them; fewer "
                 "keeps very large runs short)", .role = r::ranks, .lo = 0, .hi = 10000}, s.final_eval_samples);
    f(field_info{.option = "transport", .help = "inprocess (all nodes in this process) or mpi (under mpirun -np R: each rank "
                 "runs a block of the nodes; rank 0 reports)", .role = r::ranks, .choices = names_of(run_transports)}, s.transport);
    f(field_info{.option = "checkpoint-every", .help = "rounds between checkpoints (0: at every evaluation)",
                 .role = r::ranks}, s.checkpoint_every);
    f(field_info{.option = "resume-round", .help = "with --resume: the round to resume at, one the directory keeps (the "
                 "latest checkpoint, the one before it, or the one an earlier resume started from); 0: the latest",
                 .role = r::ranks}, s.resume_round);
    f(field_info{.option = "threads", .gossip = true, .help = "worker threads (results do not depend on it)", .role = r::local, .lo = 1,
                 .hi = 256, .shown = written<&run_spec::threads_value>}, s.threads);
    f(field_info{.option = "mpi-timeout", .gossip = true, .help = "seconds a rank waits for a missing message or a collective before it "
                 "stops the run (0.001 to 2147483)", .role = r::local, .lo = 0.001, .hi = 2147483}, s.mpi_timeout);
    f(field_info{.option = "checkpoint", .help = "directory for crash-safe checkpoints of every node's state (created if "
                 "missing)", .role = r::local}, s.checkpoint);
    f(field_info{.option = "resume", .help = "continue the run checkpointed in this directory (same settings; checkpoints "
                 "go on there unless --checkpoint names another; the checkpoint a run resumed from is kept)",
                 .role = r::local}, s.resume);
    f(field_info{.option = "log", .help = "CSV log file", .role = r::local}, s.log);
    f(field_info{.option = "summary", .help = "JSON summary file", .role = r::local}, s.summary);
    f(field_info{.option = "plot", .help = "PNG plot (gnuplot): test accuracy and divergence vs rounds and vs megabytes",
                 .role = r::local}, s.plot);
  }

  /// Set the field whose option is `option` (dashes or underscores) from its text, as the command
  /// line gives it: a number is read whole ("0.02abc" is refused), a flag takes "true"/"false"
  /// ("1"/"0"), a repeatable field appends. config_error naming the option for a bad text or an
  /// unknown option. The value's range is validate()'s.
  void set(std::string_view option, std::string_view text) {
    std::string want(option);
    std::replace(want.begin(), want.end(), '_', '-');
    bool found = false;
    for_each_field(*this, [&](const field_info& f, auto& member) {
      if (found || f.option != want) return;
      found = true;
      const std::string what = "--" + std::string(f.option) + ": ";
      if constexpr (std::is_same_v<std::decay_t<decltype(member)>, double>) member = parse_real(text, what, f.range_text());
      else if constexpr (std::is_same_v<std::decay_t<decltype(member)>, std::optional<double>>)
        member = parse_real(text, what, f.range_text());
      else assign(member, text, what);
    });
    if (!found) throw config_error("unknown run setting '" + std::string(option) + "'");
  }

  /// The algorithm's properties (its entry in run_algorithms); config_error for an unknown algorithm.
  const algorithm_info& info() const {
    if (const algorithm_info* a = entry_named(run_algorithms, algorithm)) return *a;
    throw config_error("--algorithm: " + algorithm + " not in {" + names_of(run_algorithms) + "}");
  }

  // ---- the values a run uses: given, or the default (which may depend on other fields). Each
  // default is written here once: --help's shown default and the fingerprint read these.
  /// --schedule, or its default: undirected-ring for an algorithm that needs a symmetric schedule,
  /// time-varying-ring otherwise.
  std::string schedule_spec() const {
    return schedule.value_or(info().symmetric ? "undirected-ring" : "time-varying-ring");
  }
  /// --compressor, or top-k:0.01; identity for an algorithm that sends whole models.
  std::string compressor_spec() const { return info().compresses ? compressor.value_or("top-k:0.01") : "identity"; }
  /// --eta, or its default: the compressor's default eta (1 for an uncompressed graph algorithm).
  double eta_value() const {
    if (eta) return *eta;
    return info().compresses || !info().graph ? default_eta(parse_compressor(compressor_spec())) : 1.0;
  }
  /// --final-rounds, or auto.
  std::string final_rounds_spec() const { return final_rounds.value_or(std::string(final_rounds_auto_name)); }
  /// Whether SCSP's final-round count is computed from the schedule (--final-rounds auto, the default).
  bool final_rounds_auto() const { return final_rounds_spec() == final_rounds_auto_name; }
  /// --final-rounds' count, or nothing for auto; config_error for a text that is neither auto nor a
  /// count in [1, max_run_rounds].
  std::optional<std::uint32_t> final_rounds_count() const {
    if (final_rounds_auto()) return std::nullopt;
    const std::string t = final_rounds_spec();
    std::uint64_t k = 0;
    const auto [end, ec] = std::from_chars(t.data(), t.data() + t.size(), k);
    if (ec != std::errc() || end != t.data() + t.size() || k == 0 || k > max_run_rounds)
      throw config_error("--final-rounds must be " + std::string(final_rounds_auto_name) + " or a count in [1, " +
                         std::to_string(max_run_rounds) + "], got " + t);
    return static_cast<std::uint32_t>(k);
  }
  /// --final-compressor, or identity.
  std::string final_compressor_spec() const { return final_compressor.value_or("identity"); }
  /// Whether the run ends with final rounds: SCSP's, or choco-push's when --final-rounds is given.
  bool final_phase() const { return info().final_rounds || (info().final_rounds_on_request && final_rounds); }
  /// The final rounds' eta (choco-push: their consensus step); none without them (the fingerprint writes -1).
  std::optional<double> final_eta_value() const {
    if (!final_phase()) return std::nullopt;
    return final_eta ? *final_eta : default_eta(parse_compressor(final_compressor_spec()));
  }
  /// --final-tolerance, or 1e-3.
  double final_tolerance_value() const { return final_tolerance.value_or(1e-3); }
  /// --skew, or 0.8.
  double skew_value() const { return skew.value_or(0.8); }
  /// --dirichlet, or 0 (no Dirichlet partition).
  double dirichlet_value() const { return dirichlet.value_or(0); }
  /// --consensus-step, or its default: the compressor's for choco-push, 0.5 for choco.
  double consensus_step_value() const {
    if (consensus_step) return *consensus_step;
    return info().kind == algorithm_kind::choco_push ? default_consensus_step(parse_compressor(compressor_spec()), policy()) : 0.5;
  }
  /// --drop-probability, or 0.
  double drop_value() const { return drop_probability.value_or(0); }
  /// --loss-recovery, or acknowledged (ack); config_error for a name not in loss_recoveries.
  sparsepush::loss_recovery loss_recovery_mode() const {
    return loss_recovery ? choice_of(loss_recoveries, *loss_recovery, "loss-recovery") : sparsepush::loss_recovery::acknowledged;
  }
  /// --loss-recovery's name as the run uses it: ack or none.
  std::string loss_recovery_value() const { return std::string(name_of(loss_recoveries, loss_recovery_mode())); }
  /// --momentum-kind, or local; config_error for a name not in momentum_forms.
  momentum_form momentum_kind_mode() const {
    return momentum_kind ? choice_of(momentum_forms, *momentum_kind, "momentum-kind") : momentum_form::local;
  }
  /// --momentum-kind's name as the run uses it: local or quasi-global.
  std::string momentum_kind_value() const { return std::string(name_of(momentum_forms, momentum_kind_mode())); }
  /// Whether the nodes' momentum is quasi-global (--momentum-kind quasi-global).
  bool quasi_global() const { return momentum_kind_mode() == momentum_form::quasi_global; }
  /// --eval-reduce, or ordered; config_error for a name not in eval_reductions.
  eval_reduction eval_reduce_mode() const {
    return eval_reduce ? choice_of(eval_reductions, *eval_reduce, "eval-reduce") : eval_reduction::ordered;
  }
  /// --eval-reduce's name as the run uses it: ordered or allreduce.
  std::string eval_reduce_value() const { return std::string(name_of(eval_reductions, eval_reduce_mode())); }
  /// --outer-lr, or 1 (no outer step).
  double outer_lr_value() const { return outer_lr.value_or(detail::outer_step_settings{}.lr); }
  /// --outer-momentum, or 0.
  double outer_momentum_value() const { return outer_momentum.value_or(detail::outer_step_settings{}.momentum); }
  /// Whether rounds take an outer step (--outer-lr other than 1, or --outer-momentum above 0).
  bool outer_step() const { return detail::outer_step_settings{outer_lr_value(), outer_momentum_value()}.active(); }
  /// --precision, or fp32; config_error for a name not in run_precisions.
  run_precision precision_mode() const {
    return precision ? choice_of(run_precisions, *precision, "precision") : run_precision::fp32;
  }
  /// The training precision in bits: 0 is full precision (--bits 32 too; --precision int8 is 8).
  unsigned bits_value() const {
    if (bits) return *bits == 32 ? 0 : *bits;
    return bits_of(precision_mode());
  }
  /// --staleness, or 0 (lockstep).
  std::string staleness_spec() const { return staleness.value_or("0"); }
  /// The waiting policy: overlap with --overlap, else that of --staleness (lockstep by default).
  /// Throws config_error for a malformed --staleness.
  wait_policy policy() const { return overlap ? wait_policy::overlap() : parse_staleness(staleness_spec()); }
  /// The in-process delay model's largest delay (0: none; over MPI the network's own).
  std::uint32_t max_delay_value() const {
    if (max_delay) return *max_delay;
    const wait_policy p = policy();
    if (mpi() || !(p.kind == wait_kind::bounded || p.kind == wait_kind::asynchronous)) return 0;
    return p.kind == wait_kind::bounded ? p.tau : 4;
  }
  /// --threads, or 2 (1 with the simulated clock).
  std::size_t threads_value() const { return threads.value_or(simulated_clock ? 1 : 2); }
  /// Where checkpoints go: --checkpoint, or the --resume directory (empty: none).
  std::string checkpoint_dir() const { return checkpoint ? *checkpoint : resume.value_or(""); }
  /// --transport; config_error for a name not in run_transports.
  run_transport transport_mode() const { return choice_of(run_transports, transport, "transport"); }
  /// True when the run is over MPI (--transport mpi).
  bool mpi() const { return transport_mode() == run_transport::mpi; }

  /// --straggler's specs checked against the nodes: each NODES:FACTOR, NODES a node or an
  /// inclusive range within [0, nodes), FACTOR in (1, 1000], no node named twice.
  std::vector<sparsepush::straggler> stragglers() const;

  /// The numbers a checkpoint must have been written with to be resumed, and every MPI rank must
  /// share: the fields of role `numbers` (their values as the run uses them), with the model's
  /// dimension `dim` after the node count. With `every_rank`, the fields of role `ranks` follow.
  /// A field omitted_at_default is left out while its value is that of a spec at its defaults.
  run_settings fingerprint(std::size_t dim, bool every_rank = false) const {
    std::vector<std::string> at_default;  // each field's used text in a spec left at its defaults
    for_each_field(defaults(), [&](const field_info& f, const auto& member) {
      at_default.push_back(f.omitted_at_default ? defaults().used_text(f, member) : std::string());
    });
    run_settings s;
    std::size_t k = 0;
    for_each_field(*this, [&](const field_info& f, const auto& member) {
      const std::string& default_text = at_default[k++];
      if (f.role == field_role::local || (f.role == field_role::ranks && !every_rank) || f.key == "-") return;
      const std::string v = used_text(f, member), key = f.key.empty() ? f.keyword() : std::string(f.key);
      if (f.omitted_at_default) s.add_unless_default(key, v, default_text);
      else s.add(key, v);
      if (static_cast<const void*>(&member) == &nodes) s.add("dim", dim);
    });
    return s;
  }

  /// Every rule, with what a run knows before it loads its data: `ranks` MPI processes run it
  /// (1: one process). config_error naming the option and what is wrong; nothing is changed.
  /// Returns the warnings (settings given that change nothing).
  std::vector<std::string> validate(int ranks = 1) const;
  /// The checks of the files a run touches, on `rank` (rank 0 checks them; others return): the
  /// outputs can be written, none named twice nor as an input (`data_files` under --data, the
  /// checkpoint directories), gnuplot for --plot, --resume's manifest. Nothing is created.
  void check_files(int rank, const std::vector<std::string>& data_files = {}) const;

  /// A spec left at every default (what --help's shown defaults and the fingerprint's omissions read).
  static const run_spec& defaults() {
    static const run_spec d;
    return d;
  }

 private:
  // text -> member, per member type
  static void assign(std::string& m, std::string_view text, const std::string&) { m = std::string(text); }
  static void assign(std::optional<std::string>& m, std::string_view text, const std::string&) { m = std::string(text); }
  static void assign(std::vector<std::string>& m, std::string_view text, const std::string&) { m.emplace_back(text); }
  static void assign(bool& m, std::string_view text, const std::string& what) {
    if (text == "true" || text == "1") m = true;
    else if (text == "false" || text == "0") m = false;
    else throw config_error(what + detail::quoted(text) + " is not true or false");
  }
  template <class I>
    requires std::is_integral_v<I> && (!std::is_same_v<I, bool>)
  static void assign(I& m, std::string_view text, const std::string& what) {
    m = static_cast<I>(parse_whole(text, what, std::numeric_limits<I>::max()));
  }
  template <class I>
    requires std::is_integral_v<I>
  static void assign(std::optional<I>& m, std::string_view text, const std::string& what) {
    I v{};
    assign(v, text, what);
    m = v;
  }

  /// A member's own text, as the fingerprint writes a field without a `used` accessor: a double
  /// exactly, a flag 1 or 0, a list joined with ',', an empty optional as "".
  template <class M>
  static std::string member_text(const M& m) {
    if constexpr (std::is_same_v<M, std::vector<std::string>>) {
      std::string out;
      for (const auto& x : m) out += (out.empty() ? "" : ",") + x;
      return out;
    } else if constexpr (std::is_same_v<M, std::string>) {
      return m;
    } else if constexpr (std::is_same_v<M, double>) {
      return run_settings::exact(m);
    } else if constexpr (std::is_same_v<M, bool>) {
      return m ? "1" : "0";
    } else if constexpr (requires { m.has_value(); }) {
      return m ? member_text(*m) : std::string();
    } else {
      return std::to_string(m);
    }
  }
  /// The text of what accessor Get returns (field_info::used and shown).
  template <auto Get>
  static std::string written(const run_spec& s) {
    return member_text(std::invoke(Get, s));
  }
  /// A field's value as the run uses it, as the fingerprint writes it.
  template <class M>
  std::string used_text(const field_info& f, const M& member) const {
    return f.used ? f.used(*this) : member_text(member);
  }
};

}  // namespace v0
}  // namespace sparsepush
