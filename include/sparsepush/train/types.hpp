// sparsepush/train/types.hpp: the values a training run is made of: the user's side of it
// (local_training), how long and how it goes (trainer_options), where it stands after a round
// (round_status), what a front end hooks into the loop (trainer_callbacks), its result
// (train_result) and the usual guard against divergence (default_divergence_guard).
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "../algorithm/report.hpp"
#include "../checkpoint.hpp"
#include "../clock.hpp"
#include "evaluate.hpp"
#include "local_steps.hpp"

namespace sparsepush {
inline namespace v0 {

/// The user's side of training, for the nodes this process runs (node indices are the run's).
template <tensor_element T>
struct local_training {
  /// Write node `node`'s direction p_i for local step `round` at `model` into `direction` and
  /// return the minibatch loss (`round` is the round when each round takes one local step; with H
  /// local steps a round's steps are t H to t H + H - 1). `worker` in [0, alg.workers()) names the calling thread: scratch kept
  /// per worker needs no lock. Called concurrently for different nodes.
  std::function<double(std::size_t worker, std::uint32_t node, std::uint32_t round, std::span<const T> model,
                       std::span<T> direction)>
      step;
  /// Node `node`'s direction buffer (d elements; e.g. its momentum buffer): step writes it, the
  /// round reads it.
  std::function<std::span<T>(std::uint32_t node)> direction;
  /// Gradient tracking (--tracking) only: step split in two. `gradient` writes node `node`'s
  /// minibatch gradient of local step `round` at `model` into `grad` and returns the loss;
  /// `direction_from` turns a vector g (the node's tracker) into the direction p as step's
  /// optimizer turns a gradient (momentum, weight decay). step must equal the two in turn.
  std::function<double(std::size_t worker, std::uint32_t node, std::uint32_t round, std::span<const T> model,
                       std::span<T> grad)>
      gradient;
  /// Gradient tracking only: node `node`'s direction from g (its tracker) at `model` (see gradient).
  std::function<void(std::size_t worker, std::uint32_t node, std::span<const T> g, std::span<const T> model,
                     std::span<T> direction)>
      direction_from;
  /// The test accuracy of a model; `final` marks the last evaluation of the run.
  std::function<double(std::size_t worker, std::span<const T> model, bool final)> accuracy;
  /// The test accuracy of node `node`'s model on its share of the periodic evaluations' images
  /// (share `node` of `nodes` nearly equal parts): needed only by trainer_options::eval_split.
  std::function<double(std::size_t worker, std::uint32_t node, std::size_t nodes, std::span<const T> model)>
      share_accuracy;
  /// Checkpoint the backend's state of this process's nodes (data order, optimizer).
  std::function<void(checkpoint_writer&)> save;
  /// Read what save wrote and check it, changing nothing; return what applies it.
  std::function<std::function<void()>(checkpoint_reader&)> restore;
  /// Called once after the last round with a local step when rounds without one follow (SCSP's
  /// final gossip): optimizer state may be freed.
  std::function<void()> training_ended;
};

/// How long and how a run goes.
///
/// Checkpoints kept in a directory: the manifest's round (the latest complete checkpoint) and the
/// one before it; older ones are removed once a newer one is complete. One more is kept: a run
/// that resumed from round R of its own checkpoint directory never removes round R's files, so
/// the same resume can be repeated with resume_round = R even after the manifest moved on. The
/// directory is locked (DIR/lock, see checkpoint_directory::lock) from start_round() to the end
/// of run(): a second run on it is refused while the first is alive.
struct trainer_options {
  std::uint32_t rounds = 0;          ///< rounds of the run
  std::uint32_t train_rounds = 0;    ///< rounds that may take a local step (0: all of them)
  /// learning rate of local step s (round t's steps are t H ... t H + H - 1; with H = 1, round t's)
  std::function<double(std::uint32_t)> lr;
  /// H >= 1: local steps each node takes in a training round before it communicates (docs/design/algorithms.md,
  /// "Local steps and an outer step"); 1 is the plain round, bit for bit
  std::uint32_t local_steps = 1;
  /// The outer step on each round's de-biased change before the push: rate gamma_o > 0 and
  /// Nesterov momentum beta in [0, 1); gamma_o = 1 with beta = 0 is no outer step
  double outer_lr = detail::outer_step_settings{}.lr;              ///< gamma_o
  double outer_momentum = detail::outer_step_settings{}.momentum;  ///< beta in [0, 1)
  std::uint32_t eval_every = 0;      ///< rounds between evaluations (0: about 10 a run)
  /// rounds between evaluations that also measure the averaged model and the divergence (which
  /// sum the models over the nodes, and under a waiting policy first mix what is in flight); 0:
  /// only the last evaluation. The others test each node's own model and move scalars only.
  std::uint32_t eval_average_every = 0;
  /// Evaluations before the last test node i's model on its own share (1/n) of the images, by
  /// local_training::share_accuracy: the node mean is the accuracy over all of them, at 1/n of
  /// the work. The last evaluation tests every model on all of them (false: every evaluation).
  bool eval_split = false;
  /// Stop training at the first evaluation whose node-mean accuracy reaches this, then run the
  /// rounds the algorithm owes at the end (final_rounds_from) and a last evaluation.
  std::optional<double> target_accuracy;
  /// After a target stopped training: how many rounds without local step follow when they start
  /// at schedule round `round` (empty: rounds - train_rounds, as planned).
  std::function<std::uint32_t(std::uint32_t round)> final_rounds_from;
  std::size_t eval_threads = 1;      ///< threads that test models
  std::string checkpoint_dir;        ///< checkpoints go there (empty: none)
  std::uint32_t checkpoint_every = 0;  ///< rounds between checkpoints (0: at every evaluation)
  std::string resume_dir;            ///< continue the run checkpointed there (empty: start at round 0)
  /// The round to resume from: 0 is the manifest's (the latest); R is exactly round R, a round
  /// the directory still holds (the one before the latest, or one a run resumed from), not newer
  /// than the manifest's.
  std::uint32_t resume_round = 0;
  run_clock::time_point start = run_clock::now();  ///< for wall_seconds (simulated seconds under SMPI)
  /// How evaluations sum the models over the processes (evaluate.hpp): ordered (the bits of one
  /// process) or allreduce (fewer bytes on a slow link).
  sparsepush::eval_reduction eval_reduction = sparsepush::eval_reduction::ordered;
};

/// Where a run stands after a round; the metrics are those of the last evaluation.
///
/// The mean loss needs every node's loss. One process has them after every round; a group of
/// several processes would need a collective per round for them, a barrier that sets every rank
/// to the slowest one's pace, so it gathers them only at the rounds where the processes meet
/// anyway: evaluations (the last round is one) and checkpoints. `loss_known` says which.
struct round_status {
  std::uint32_t round = 0;      ///< rounds done (t + 1)
  std::uint32_t rounds = 0;  ///< the run's total rounds
  /// mean minibatch loss over every node in this round when loss_known; otherwise the last mean
  /// known (0 before the first), the same on every process
  double loss = 0.0;
  /// the run's first mean loss (of its first round, gathered with the first known loss); valid
  /// whenever loss_known is, 0 before
  double first_loss = 0.0;
  /// `loss` is this round's mean over every node: every round in one process; over more than one
  /// process, at evaluations and checkpoints only
  bool loss_known = false;
  bool training = true;         ///< this round was one of training (false: a round without local step after it)
  bool evaluated = false;       ///< the metrics below are from this round
  /// this round's evaluation measured the averaged model and the divergence (eval.averaged); when
  /// it did not, eval's node accuracy is this round's and the two others are NaN
  evaluation eval;
  round_report report;          ///< bytes over every process (at the last evaluation)
  std::size_t bytes_now = 0;    ///< bytes sent so far (this process's, between evaluations under MPI)
  double wall_seconds = 0.0;    ///< since trainer_options::start
};

/// What the front end hooks into the loop.
struct trainer_callbacks {
  /// After every round: a reason to stop (the run ends as diverged), or nothing. Under MPI every
  /// process sees the same status, so every process decides alike; its loss is this round's only
  /// where loss_known (over several processes: at evaluations and checkpoints).
  std::function<std::optional<std::string>(const round_status&)> guard;
  /// After every round (and the guard): progress, logs.
  std::function<void(const round_status&)> progress;
  /// After a resumed run has restored its checkpoint, before its first round.
  std::function<void(std::uint32_t round)> resumed;
  /// Once per run(), before its first round `round` (0, or the round resumed at): after a
  /// resume's checkpoint was read, checked and applied (and after `resumed`). A failed resume
  /// never gets here, so a front end that opens its outputs here leaves them untouched.
  std::function<void(std::uint32_t round)> started;
  /// Before a checkpoint is written (e.g. flush a log that resume keeps up to that round).
  std::function<void(std::uint32_t round)> before_checkpoint;
};

/// The result of a run, the same on every process.
struct train_result {
  bool diverged = false;  ///< the divergence guard stopped the run
  std::string reason;                 ///< the guard's reason when diverged
  std::uint32_t resumed_at = 0;       ///< the round the run started at
  std::uint32_t rounds_done = 0;  ///< the rounds run (resumed ones included)
  /// the run's first and last mean loss (the last known: a run the guard stopped between the
  /// gathers of several processes reports the one before; first_loss is 0 if none was gathered)
  double first_loss = 0.0, loss = 0.0;  ///< the last mean loss known
  evaluation eval;                    ///< the last evaluation
  round_report report;                ///< bytes of every process at the last evaluation
  std::optional<std::size_t> bytes_after_training;  ///< bytes sent in the rounds without local step (carried over a resume)
  /// Envelopes sent by every process's nodes (messages_sent) and those lost (messages_dropped).
  std::size_t messages_sent = 0, messages_dropped = 0;  ///< every process's
  std::optional<double> weight_mass;  ///< sum_i u_i over every node, in node order (push-sum only)
  /// The bytes of state this process's first node holds at the end: its buffers' capacity, which
  /// depends on the rounds this process ran (not carried over a resume, as the times)
  std::size_t state_bytes_per_node = 0;
  double train_seconds = 0.0;         ///< inside rounds (carried over a resume)
  double eval_seconds = 0.0;          ///< inside evaluations but the last (carried over a resume)
  double final_eval_seconds = 0.0;    ///< inside the last evaluation
  /// from trainer_options::start to the first round (setting up, a resume's checkpoint)
  double startup_seconds = 0.0;
  /// what the evaluations but the last moved between the processes (evaluation_payload; carried
  /// over a resume); 0 in one process
  std::uint64_t eval_bytes = 0;
  std::uint64_t final_eval_bytes = 0;  ///< what the last evaluation moved
  /// The first evaluation that reached trainer_options::target_accuracy (none: not asked, or not
  /// reached; a resumed run reports it only when it reached it after the resume)
  struct target_reached {
    double accuracy = 0.0;            ///< its node-mean accuracy
    std::uint32_t rounds = 0;         ///< rounds run until it
    std::uint64_t bytes = 0;          ///< bytes sent by every node until it
    std::uint64_t local_steps = 0;    ///< local steps of every node together until it
    double seconds = 0.0;             ///< wall seconds from the first round to its end (training and evaluations)
    /// Of seconds: the part inside rounds (train_seconds) and inside evaluations (eval_seconds).
    double train_seconds = 0.0, eval_seconds = 0.0;  ///< of which inside rounds, inside evaluations
  };
  std::optional<target_reached> target;  ///< the first evaluation that reached the target accuracy, if any
  /// Every node's count of local steps, in node order (carried over a resume). Lockstep: the
  /// training rounds; the asynchronous policy over several processes: each node's own count,
  /// which together make at most n x the training rounds x H (the global step budget) and less by
  /// under one round of every node.
  std::vector<std::uint64_t> steps_per_node;
  /// The largest staleness mixed by any node (receiver's round - sender's round; 0 in lockstep).
  std::uint32_t max_staleness = 0;
  /// Seconds each process's rounds spent receiving (waiting for envelopes and decoding them), by
  /// rank (not carried over a resume, as the times).
  std::vector<double> wait_seconds_per_rank;
};

/// The stop a guard can give for the usual failure: a mean loss that is not finite or grew past
/// 10 x its first value + 10 (on rounds whose loss is known: every round in one process, the
/// evaluations and checkpoints over several), or (at an evaluation) a divergence not finite or
/// past 1e6. The guard is asked after the round's loss and again after an evaluation.
inline std::optional<std::string> default_divergence_guard(const round_status& s) {
  auto g = [](double v) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%g", v);
    return std::string(buf);
  };
  if (s.loss_known && (!std::isfinite(s.loss) || s.loss > 10 * s.first_loss + 10))
    return "training diverged at round " + std::to_string(s.round - 1) + " (mean loss " + g(s.loss) +
           ", started at " + g(s.first_loss) + ")";
  if (s.evaluated && s.eval.averaged &&
      (!std::isfinite(s.report.parameter_divergence) || s.report.parameter_divergence > 1e6))
    return "node models drifted apart at round " + std::to_string(s.round - 1) + " (divergence " +
           g(s.report.parameter_divergence) + ")";
  return std::nullopt;
}

}  // namespace v0
}  // namespace sparsepush
