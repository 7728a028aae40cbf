// sparsepush/train/run_spec.hpp: a training run as one value. Every setting is a typed field with
// its default; one table (run_spec::for_each_field) names each field once with its option name,
// its help and its role, and everything else is derived from it: the command line's flags, the
// Python keywords, the text parser, the fingerprint a checkpoint and the MPI ranks must agree on.
// validate() holds the rules (asking the parts: a schedule's symmetry, an algorithm's properties).
#pragma once

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <limits>
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
#include "settings.hpp"

namespace sparsepush {
inline namespace v0 {

/// What an algorithm of a run is, as the rules ask it (never by comparing names elsewhere).
struct algorithm_info {
  std::string_view name;  ///< the --algorithm value: sp, scsp, sgp, dpsgd, deepsqueeze, choco or centralized
  bool graph = true;         ///< it sends messages over a schedule (false: centralized, no waiting policy)
  bool symmetric = false;    ///< it needs a symmetric, doubly stochastic schedule
  bool compresses = true;    ///< it takes a compressor (false: whole models, identity)
  /// its nodes keep copies of their neighbours' models (CHOCO): every message must arrive, in
  /// order, so lockstep rounds only and no message loss
  bool keeps_neighbour_copies = false;
  bool consensus_step = false;  ///< it has CHOCO's gamma_c
  bool per_layer = true;        ///< it takes per-layer top-K
  bool final_rounds = false;    ///< it ends with SCSP's uncompressed gossip rounds
  bool inprocess_only = false;  ///< it runs in one process only
};

/// The algorithms a run can use, in the order --help lists them.
inline constexpr algorithm_info run_algorithms[] = {
    {.name = "sp"},
    {.name = "scsp", .final_rounds = true},
    {.name = "sgp", .compresses = false, .per_layer = false},
    {.name = "dpsgd", .symmetric = true, .compresses = false, .per_layer = false},
    {.name = "deepsqueeze", .symmetric = true},
    {.name = "choco", .symmetric = true, .keeps_neighbour_copies = true, .consensus_step = true, .per_layer = false},
    {.name = "centralized", .graph = false, .compresses = false, .per_layer = false, .inprocess_only = true},
};

/// --straggler NODES:FACTOR checked: nodes first..last (inclusive) take FACTOR times as long per
/// local step (they sleep (FACTOR - 1) x the measured compute time of each step).
struct straggler {
  ///@{
  /// The slowed nodes: first..last, inclusive.
  std::uint32_t first = 0, last = 0;
  ///@}
  double factor = 1;  ///< how many times as long each of their local steps takes, in (1, 1000]
};

/// Which processes must agree on a field: every number a checkpoint resumes with (`numbers`, in
/// the fingerprint), every MPI rank of one run (`ranks`), or none (`local`: threads, outputs).
enum class field_role { numbers, ranks, local };

/// One field of run_spec as the table describes it.
struct field_info {
  std::string_view option;     ///< the command line's long option without dashes ("eval-samples")
  /// It configures the gossip, not the local training: a training loop of its own takes it
  /// (sparsepush.torch.GossipOptimizer), where learning rates, batches and data are its own.
  bool gossip = false;
  std::string_view help;  ///< the option's help text (--help, Python's docstrings)
  field_role role = field_role::numbers;  ///< which processes must agree on the field
  std::string_view key = {};   ///< its key in the fingerprint (role numbers; empty: the option with '_')
  ///@{
  /// The bounds of a numeric field (infinite: none).
  double lo = -std::numeric_limits<double>::infinity(), hi = std::numeric_limits<double>::infinity();
  ///@}
  ///@{
  /// Whether lo and hi themselves are excluded.
  bool lo_open = false, hi_open = false;
  ///@}
  std::string_view choices = {};  ///< "a,b,c": the values it takes (text fields)
  std::string_view omit_if = {};  ///< the fingerprint leaves the key out at this value (earlier versions had none)
  std::string_view shown_default = {};  ///< the default as --help prints it, where a field is optional
  /// The range as messages write it: "in (0, 1]", "> 0", or "" for none.
  std::string range_text() const {
    if (lo == -std::numeric_limits<double>::infinity() && hi == std::numeric_limits<double>::infinity()) return {};
    auto b = [](double v) {
      char buf[32];
      std::snprintf(buf, sizeof buf, "%.10g", v);
      return std::string(buf);
    };
    if (hi == std::numeric_limits<double>::infinity()) return (lo_open ? "> " : ">= ") + b(lo);
    return std::string("in ") + (lo_open ? "(" : "[") + b(lo) + ", " + b(hi) + (hi_open ? ")" : "]");
  }
  /// The keyword Python takes: the option with '-' written as '_'.
  std::string keyword() const {
    std::string k(option);
    std::replace(k.begin(), k.end(), '-', '_');
    return k;
  }
};

namespace detail {
/// A double as --help and the messages show it: the shortest text that reads back to the same
/// bits, in %g's style ("0.0004", "2", "1e+20").
inline std::string shown_value(double v) {
  char buf[64];
  const auto r = std::to_chars(buf, buf + sizeof buf, v, std::chars_format::general);
  return std::string(buf, r.ptr);
}
/// The text of a value, quoted, with control bytes escaped.
inline std::string quoted(std::string_view s) {
  std::string out = "'";
  for (const unsigned char ch : s) {
    if (ch < 0x20 || ch == 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", ch);
      out += buf;
    } else {
      out += static_cast<char>(ch);
    }
  }
  return out + "'";
}
}  // namespace detail

/// A finite decimal number (a leading '+' allowed); config_error "'0.02abc' is not a number" or
/// "must be a finite number in (0, 1], got 'inf'" (with `range`), after `what`.
inline double parse_real(std::string_view text, std::string_view what, std::string_view range = {}) {
  double v = 0;
  const char* b = text.data();
  const char* e = b + text.size();
  if (b != e && *b == '+') ++b;  // from_chars takes no plus sign
  const auto [end, ec] = std::from_chars(b, e, v);
  if (text.empty() || end != e || (ec != std::errc() && ec != std::errc::result_out_of_range))
    throw config_error(std::string(what) + detail::quoted(text) + " is not a number");
  if (ec == std::errc::result_out_of_range || !std::isfinite(v))
    throw config_error(std::string(what) + "must be a finite number " + (range.empty() ? "" : std::string(range) + ", ") +
                       "got " + detail::quoted(text));
  return v;
}

/// A whole number (decimal digits only) at most `hi`; config_error naming the text after `what`.
inline std::uint64_t parse_whole(std::string_view text, std::string_view what,
                                 std::uint64_t hi = std::numeric_limits<std::uint64_t>::max()) {
  std::uint64_t v = 0;
  const char* b = text.data();
  const char* e = b + text.size();
  if (b == e || *b < '0' || *b > '9') throw config_error(std::string(what) + detail::quoted(text) + " is not a whole number");
  const auto [end, ec] = std::from_chars(b, e, v);
  if (end != e) throw config_error(std::string(what) + detail::quoted(text) + " is not a whole number");
  if (ec == std::errc::result_out_of_range || v > hi)
    throw config_error(std::string(what) + detail::quoted(text) + " is too large (at most " + std::to_string(hi) + ")");
  return v;
}

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
  double weight_decay = 1e-4;              ///< --weight-decay
  std::uint32_t local_steps = 1;           ///< --local-steps: H optimizer steps per communication round
  std::optional<double> outer_lr;          ///< --outer-lr: the outer step's rate gamma_o, 1 (off)
  std::optional<double> outer_momentum;    ///< --outer-momentum: the outer step's Nesterov beta, 0 (off)
  bool per_layer = false;                  ///< --per-layer: top-K per layer
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
  std::string transport = "inprocess";     ///< --transport: inprocess or mpi
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

  /// f(field_info, member) for every field, in the fingerprint's order: the one list of fields.
  template <class Self, class F>
    requires std::is_same_v<std::remove_const_t<Self>, run_spec>
  static void for_each_field(Self& s, F&& f) {
    using r = field_role;
    constexpr double inf = std::numeric_limits<double>::infinity();
    f(field_info{.option = "nodes", .help = "number of nodes, 2 to 4096", .lo = 1, .hi = 4096}, s.nodes);
    f(field_info{.option = "schedule", .gossip = true, .help = "communication schedule: directed-ring, undirected-ring, torus:RxC, complete, "
                 "time-varying-ring[:hops], alternating-ring, exponential[:K], bidirectional-exponential, erdos-renyi:P, "
                 "random:K (default: time-varying-ring; undirected-ring for dpsgd, deepsqueeze, choco)"}, s.schedule);
    f(field_info{.option = "algorithm", .gossip = true, .help = "sp, scsp, sgp, dpsgd, deepsqueeze, choco or centralized",
                 .choices = "sp,scsp,sgp,dpsgd,deepsqueeze,choco,centralized"}, s.algorithm);
    f(field_info{.option = "compressor", .gossip = true, .help = "compressor spec, e.g. top-k:0.01, top-k:0.001+int8, random-k:0.01, qsgd:16, sign",
                 .shown_default = "top-k:0.01"}, s.compressor);
    f(field_info{.option = "eta", .gossip = true, .help = "consensus step in (0, 1] (default from the compressor: 0.02 at top-1%, 0.1 at "
                 "top-10%, 1 for identity)", .lo = 0, .hi = 1, .lo_open = true}, s.eta);
    f(field_info{.option = "final-rounds", .gossip = true, .help = "SCSP: gossip rounds at the end, a count or auto: the fewest that bring "
                 "every node within --final-tolerance of the average, computed from the schedule (the exact count where the "
                 "graph averages exactly: 4 for 16 nodes on the default time-varying ring)", .key = "final",
                 .shown_default = "auto"}, s.final_rounds);
    f(field_info{.option = "final-compressor", .gossip = true, .help = "SCSP: compressor of the final rounds, e.g. identity+bf16 or "
                 "top-k:0.1+int8 (identity: exact)", .shown_default = "identity"}, s.final_compressor);
    f(field_info{.option = "final-eta", .gossip = true, .help = "SCSP: consensus step of the final rounds in (0, 1] (default from the "
                 "final compressor)", .lo = 0, .hi = 1, .lo_open = true}, s.final_eta);
    f(field_info{.option = "final-tolerance", .gossip = true, .help = "SCSP with --final-rounds auto: every de-biased model ends within this "
                 "fraction of the largest distance to the average at the start of the final rounds", .lo = 1e-12, .hi = 0.5,
                 .shown_default = "0.001"}, s.final_tolerance);
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
    f(field_info{.option = "skew", .help = "label skew in [0, 1] (Hsieh et al.)", .lo = 0, .hi = 1, .shown_default = "0.8"},
      s.skew);
    f(field_info{.option = "dirichlet", .help = "Dirichlet(alpha) label partition instead of --skew", .lo = 0, .hi = inf,
                 .lo_open = true, .shown_default = "0"}, s.dirichlet);
    f(field_info{.option = "momentum", .help = "SGD momentum on the numerator", .lo = 0, .hi = 0.999}, s.momentum);
    f(field_info{.option = "nesterov", .help = "Nesterov momentum"}, s.nesterov);
    f(field_info{.option = "weight-decay", .help = "L2 weight decay", .lo = 0, .hi = inf}, s.weight_decay);
    f(field_info{.option = "local-steps", .help = "H: optimizer steps each node takes between two communications (a "
                 "round uses H minibatches; --epochs, the learning-rate schedule and --warmup count local steps)",
                 .lo = 1, .hi = 10000, .omit_if = "1"}, s.local_steps);
    f(field_info{.option = "outer-lr", .help = "the outer step's rate gamma_o > 0 on each round's de-biased change before it "
                 "is pushed (1 with --outer-momentum 0: no outer step)", .lo = 0, .hi = 10, .lo_open = true,
                 .omit_if = "1", .shown_default = "1"}, s.outer_lr);
    f(field_info{.option = "outer-momentum", .help = "the outer step's Nesterov momentum beta in [0, 1) on each round's "
                 "de-biased change (DiLoCo's outer step, applied before the push)", .lo = 0, .hi = 1, .hi_open = true,
                 .omit_if = "0", .shown_default = "0"}, s.outer_momentum);
    f(field_info{.option = "per-layer", .gossip = true, .help = "top-K per layer (the same fraction of every layer) instead of global"},
      s.per_layer);
    f(field_info{.option = "consensus-step", .gossip = true, .help = "CHOCO gamma_c in (0, 1]", .lo = 0, .hi = 1, .lo_open = true,
                 .shown_default = "0.5"}, s.consensus_step);
    f(field_info{.option = "data", .help = "directory with the Fashion-MNIST .gz files"}, s.data);
    f(field_info{.option = "drop-probability", .gossip = true, .help = "inject message loss: each envelope is lost with this probability in "
                 "[0, 1) (in-process and MPI alike)", .key = "drop", .lo = 0, .hi = 1, .hi_open = true, .shown_default = "0"},
      s.drop_probability);
    f(field_info{.option = "loss-recovery", .gossip = true, .help = "ack: a sender keeps the shares of its lost envelopes (mass conserved); "
                 "none: plain push-sum", .key = "recovery", .choices = "ack,none", .shown_default = "ack"}, s.loss_recovery);
    f(field_info{.option = "eval-every", .help = "rounds between evaluations (0: about 10 a run)"}, s.eval_every);
    f(field_info{.option = "eval-samples", .help = "test images used by periodic evaluations (the final one uses all)",
                 .lo = 1, .hi = 10000}, s.eval_samples);
    f(field_info{.option = "eval-reduce", .help = "how an evaluation sums the models over the MPI ranks: ordered (in node "
                 "order, the bits of one process; a chain through the ranks) or allreduce (one allreduce of the parameters in "
                 "double: a few times fewer bytes on a slow link; the averaged model's and the divergence's last bits then "
                 "depend on the rank count); --transport mpi only", .choices = "ordered,allreduce", .omit_if = "ordered",
                 .shown_default = "ordered"}, s.eval_reduce);
    f(field_info{.option = "eval-average-every", .help = "rounds between evaluations of the averaged model and the "
                 "divergence, which sum the models over the nodes (0: only at the end); the other evaluations test each "
                 "node's own model and move scalars only", .omit_if = "0"}, s.eval_average_every);
    f(field_info{.option = "eval-split", .help = "evaluations before the last test node i's model on its own 1/n share of the "
                 "--eval-samples images, not on all of them: the node-mean accuracy (and --target-accuracy) is then over all "
                 "the images at 1/n of the work; the last evaluation tests every model on all", .omit_if = "0"}, s.eval_split);
    f(field_info{.option = "target-accuracy", .help = "stop training at the first evaluation whose node-mean accuracy "
                 "reaches this fraction in (0, 1], then run what the algorithm owes (SCSP's final rounds); the summary "
                 "reports the time, rounds, bytes and samples to it", .role = r::ranks, .lo = 0, .hi = 1, .lo_open = true,
                 .omit_if = "none"}, s.target_accuracy);
    f(field_info{.option = "precision", .help = "fp32, or int8: weights, activations and gradients at 8 bits (simulated)",
                 .key = "-", .choices = "fp32,int8", .shown_default = "fp32"}, s.precision);
    f(field_info{.option = "bits", .help = "simulated training precision, 4 to 16 bits (0 or 32: full precision)",
                 .lo = 0, .hi = 32, .omit_if = "0"}, s.bits);
    f(field_info{.option = "staleness", .gossip = true, .help = "how long a node waits for its in-neighbours: 0 (lockstep), N (mix what has "
                 "arrived, wait only for the envelopes of rounds <= t - N) or inf (asynchronous: never wait; over MPI "
                 "training ends when the nodes together took nodes x rounds local steps)", .key = "policy",
                 .omit_if = "lockstep", .shown_default = "0"}, s.staleness);
    f(field_info{.option = "overlap", .gossip = true, .help = "mix exactly the previous round's envelopes, so that sends travel while the "
                 "next gradient is computed (deterministic: the same results in process and over MPI)", .key = "-"},
      s.overlap);
    f(field_info{.option = "max-delay", .gossip = true, .help = "in-process runs with --staleness N or inf: the seeded delay model, each "
                 "envelope arrives 0 to this many rounds late (default: N; 4 for inf)", .lo = 0, .hi = 65535, .omit_if = "0"},
      s.max_delay);
    f(field_info{.option = "straggler", .help = "NODES:FACTOR (repeatable): make nodes NODES (a node, e.g. 3, or a range, "
                 "e.g. 12-15) take FACTOR (> 1, at most 1000) times as long per local step: each sleeps (FACTOR - 1) x its "
                 "measured compute time; the results do not change", .role = r::ranks}, s.straggler);
    f(field_info{.option = "jitter", .help = "each local step takes U[1, F] times its compute time (seeded per node and "
                 "round; the results do not change); 1: none", .role = r::ranks, .lo = 1, .hi = 1000}, s.jitter);
    f(field_info{.option = "final-eval-samples", .help = "test images used by the final evaluation (0: all of them; fewer "
                 "keeps very large runs short)", .role = r::ranks, .lo = 0, .hi = 10000}, s.final_eval_samples);
    f(field_info{.option = "transport", .help = "inprocess (all nodes in this process) or mpi (under mpirun -np R: each rank "
                 "runs a block of the nodes; rank 0 reports)", .role = r::ranks, .choices = "inprocess,mpi"}, s.transport);
    f(field_info{.option = "checkpoint-every", .help = "rounds between checkpoints (0: at every evaluation)",
                 .role = r::ranks}, s.checkpoint_every);
    f(field_info{.option = "resume-round", .help = "with --resume: the round to resume at, one the directory keeps (the "
                 "latest checkpoint, the one before it, or the one an earlier resume started from); 0: the latest",
                 .role = r::ranks}, s.resume_round);
    f(field_info{.option = "threads", .gossip = true, .help = "worker threads (results do not depend on it)", .role = r::local, .lo = 1,
                 .hi = 256, .shown_default = simulated_clock ? "1" : "2"}, s.threads);
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

  /// The algorithm's properties; config_error for an unknown algorithm.
  const algorithm_info& info() const {
    for (const auto& a : run_algorithms)
      if (a.name == algorithm) return a;
    throw config_error("--algorithm: " + algorithm + " not in {sp,scsp,sgp,dpsgd,deepsqueeze,choco,centralized}");
  }

  // ---- the values a run uses: given, or the default (which may depend on other fields)
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
  std::string final_rounds_spec() const { return final_rounds.value_or("auto"); }
  /// --final-compressor, or identity.
  std::string final_compressor_spec() const { return final_compressor.value_or("identity"); }
  /// SCSP's final eta; other algorithms have none (the fingerprint writes -1 for it).
  std::optional<double> final_eta_value() const {
    if (!info().final_rounds) return std::nullopt;
    return final_eta ? *final_eta : default_eta(parse_compressor(final_compressor_spec()));
  }
  /// --final-tolerance, or 1e-3.
  double final_tolerance_value() const { return final_tolerance.value_or(1e-3); }
  /// --skew, or 0.8.
  double skew_value() const { return skew.value_or(0.8); }
  /// --dirichlet, or 0 (no Dirichlet partition).
  double dirichlet_value() const { return dirichlet.value_or(0); }
  /// --consensus-step, or 0.5.
  double consensus_step_value() const { return consensus_step.value_or(0.5); }
  /// --drop-probability, or 0.
  double drop_value() const { return drop_probability.value_or(0); }
  /// --loss-recovery, or ack.
  std::string loss_recovery_value() const { return loss_recovery.value_or("ack"); }
  /// --eval-reduce, or ordered.
  std::string eval_reduce_value() const { return eval_reduce.value_or("ordered"); }
  /// --outer-lr, or 1 (no outer step).
  double outer_lr_value() const { return outer_lr.value_or(1.0); }
  /// --outer-momentum, or 0.
  double outer_momentum_value() const { return outer_momentum.value_or(0.0); }
  /// Whether rounds take an outer step (--outer-lr other than 1, or --outer-momentum above 0).
  bool outer_step() const { return outer_lr_value() != 1.0 || outer_momentum_value() != 0.0; }
  /// The training precision in bits: 0 is full precision (--bits 32 too; --precision int8 is 8).
  unsigned bits_value() const {
    if (bits) return *bits == 32 ? 0 : *bits;
    return precision.value_or("fp32") == "int8" ? 8 : 0;
  }
  /// The waiting policy: overlap with --overlap, else that of --staleness (lockstep by default).
  /// Throws config_error for a malformed --staleness.
  wait_policy policy() const { return overlap ? wait_policy::overlap() : parse_staleness(staleness.value_or("0")); }
  /// The in-process delay model's largest delay (0: none; over MPI the network's own).
  std::uint32_t max_delay_value() const {
    if (max_delay) return *max_delay;
    const wait_policy p = policy();
    if (transport == "mpi" || !(p.kind == wait_kind::bounded || p.kind == wait_kind::asynchronous)) return 0;
    return p.kind == wait_kind::bounded ? p.tau : 4;
  }
  /// --threads, or 2 (1 with the simulated clock).
  std::size_t threads_value() const { return threads.value_or(simulated_clock ? 1 : 2); }
  /// Where checkpoints go: --checkpoint, or the --resume directory (empty: none).
  std::string checkpoint_dir() const { return checkpoint ? *checkpoint : resume.value_or(""); }
  /// True when the run is over MPI (--transport mpi).
  bool mpi() const { return transport == "mpi"; }

  /// --straggler's specs checked against the nodes: each NODES:FACTOR, NODES a node or an
  /// inclusive range within [0, nodes), FACTOR in (1, 1000], no node named twice.
  std::vector<sparsepush::straggler> stragglers() const {
    std::vector<sparsepush::straggler> out;
    for (const std::string& spec : straggler) {
      const std::string at = "--straggler " + detail::quoted(spec) + ": ";
      const auto colon = spec.find(':');
      if (colon == std::string::npos || spec.find(':', colon + 1) != std::string::npos)
        throw config_error(at + "expected NODES:FACTOR, a node or a range of nodes and a factor > 1 (e.g. 3:3 or 12-15:3)");
      const std::string nodes_text = spec.substr(0, colon), factor_text = spec.substr(colon + 1);
      auto node = [&](const std::string& text) {
        if (text.empty()) throw config_error(at + "a node is missing (NODES is a node, e.g. 3, or a range, e.g. 12-15)");
        return static_cast<std::uint32_t>(parse_whole(text, at + "node ", 4294967295u));
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

  /// The numbers a checkpoint must have been written with to be resumed, and every MPI rank must
  /// share: the fields of role `numbers` (their values as the run uses them), with the model's
  /// dimension `dim` after the node count. With `every_rank`, the fields of role `ranks` follow.
  run_settings fingerprint(std::size_t dim, bool every_rank = false) const {
    run_settings s;
    for_each_field(*this, [&](const field_info& f, const auto& member) {
      if (f.role == field_role::local || (f.role == field_role::ranks && !every_rank) || f.key == "-") return;
      const std::string v = used_text(f, member), key = f.key.empty() ? f.keyword() : std::string(f.key);
      if (!f.omit_if.empty()) s.absent_means(key, f.omit_if);
      if (!f.omit_if.empty() && v == f.omit_if) return;
      s.add(key, v);
      if (f.option == "nodes") s.add("dim", dim);
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

  /// A field's value as the run uses it, as the fingerprint writes it.
  template <class M>
  std::string used_text(const field_info& f, const M& member) const {
    const std::string_view o = f.option;
    if (o == "schedule") return schedule_spec();
    if (o == "compressor") return settings_spec(compressor_spec());  // a qsgd stream is part of the numbers
    if (o == "eta") return run_settings::exact(eta_value());
    if (o == "final-rounds") return final_rounds_spec();
    if (o == "final-compressor") return settings_spec(final_compressor_spec());
    if (o == "final-eta") return run_settings::exact(final_eta_value().value_or(-1));
    if (o == "bits") return std::to_string(bits_value());
    if (o == "staleness") return to_string(policy());
    if (o == "max-delay") return std::to_string(max_delay_value());
    if (o == "target-accuracy") return target_accuracy ? run_settings::exact(*target_accuracy) : "none";
    if constexpr (std::is_same_v<M, std::vector<std::string>>) {
      std::string out;
      for (const auto& x : member) out += (out.empty() ? "" : ",") + x;
      return out;
    } else if constexpr (std::is_same_v<M, std::optional<double>>) {
      return run_settings::exact(member ? *member : parse_real(f.shown_default, ""));
    } else if constexpr (std::is_same_v<M, std::optional<std::string>>) {
      return member.value_or(std::string(f.shown_default));
    } else if constexpr (std::is_same_v<M, double>) {
      return run_settings::exact(member);
    } else if constexpr (std::is_same_v<M, bool>) {
      return member ? "1" : "0";
    } else if constexpr (std::is_same_v<M, std::string>) {
      return member;
    } else if constexpr (requires { member.value_or(0); }) {
      return member ? std::to_string(*member) : std::string(f.shown_default);
    } else {
      return std::to_string(member);
    }
  }
};

}  // namespace v0
}  // namespace sparsepush

#include "run_spec_rules.hpp"
