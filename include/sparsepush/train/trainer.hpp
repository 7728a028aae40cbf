// sparsepush/train/trainer.hpp: the training driver, for one process or every rank of a run.
// Round t at every node this process runs: p_i = step(xh_i) on the algorithm's threads (the
// user's backend: a minibatch gradient and its optimizer), then alg.round(t, p, lr(t)); every
// `eval_every` rounds and after the last, the metrics of evaluate.hpp over every node; every
// `checkpoint_every` rounds a checkpoint that resume continues bit for bit (a resumed run's
// train_result is the uninterrupted run's in every field but resumed_at, the times and
// state_bytes_per_node, the capacity of buffers that grow with the rounds run). What a
// front end decides (when to stop a diverging run, what to print) comes in as callbacks.
// Over more than one process no collective runs inside a round: the mean loss is gathered only
// at evaluations and checkpoints, where the processes meet anyway (round_status::loss_known).
#pragma once

#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include "../algorithm/trainer.hpp"
#include "../clock.hpp"
#include "checkpoints.hpp"
#include "evaluate.hpp"
#include "process_group.hpp"
#include "settings.hpp"
#include "../gossip/policy.hpp"

namespace sparsepush {
inline namespace v0 {

/// The user's side of training, for the nodes this process runs (node indices are the run's).
template <tensor_element T>
struct local_training {
  /// Write node `node`'s direction p_i for round `round` at `model` into `direction` and return
  /// the minibatch loss. `worker` in [0, alg.workers()) names the calling thread: scratch kept
  /// per worker needs no lock. Called concurrently for different nodes.
  std::function<double(std::size_t worker, std::uint32_t node, std::uint32_t round, std::span<const T> model,
                       std::span<T> direction)>
      step;
  /// Node `node`'s direction buffer (d elements; e.g. its momentum buffer): step writes it, the
  /// round reads it.
  std::function<std::span<T>(std::uint32_t node)> direction;
  /// The test accuracy of a model; `final` marks the last evaluation of the run.
  std::function<double(std::size_t worker, std::span<const T> model, bool final)> accuracy;
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
  std::function<double(std::uint32_t)> lr;  ///< learning rate of round t
  std::uint32_t eval_every = 0;      ///< rounds between evaluations (0: about 10 a run)
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
  std::uint32_t rounds = 0;
  /// mean minibatch loss over every node in this round when loss_known; otherwise the last mean
  /// known (0 before the first), the same on every process
  double loss = 0.0;
  /// the run's first mean loss (of its first round, gathered with the first known loss); valid
  /// whenever loss_known is, 0 before
  double first_loss = 0.0;
  /// `loss` is this round's mean over every node: every round in one process; over more than one
  /// process, at evaluations and checkpoints only
  bool loss_known = false;
  bool evaluated = false;       ///< the metrics below are from this round
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
  bool diverged = false;
  std::string reason;                 ///< the guard's reason when diverged
  std::uint32_t resumed_at = 0;       ///< the round the run started at
  std::uint32_t rounds_done = 0;
  /// the run's first and last mean loss (the last known: a run the guard stopped between the
  /// gathers of several processes reports the one before; first_loss is 0 if none was gathered)
  double first_loss = 0.0, loss = 0.0;
  evaluation eval;                    ///< the last evaluation
  round_report report;                ///< bytes of every process at the last evaluation
  std::optional<std::size_t> bytes_after_training;  ///< bytes sent in the rounds without local step (carried over a resume)
  std::size_t messages_sent = 0, messages_dropped = 0;  ///< every process's
  std::optional<double> weight_mass;  ///< sum_i u_i over every node, in node order (push-sum only)
  /// The bytes of state this process's first node holds at the end: its buffers' capacity, which
  /// depends on the rounds this process ran (not carried over a resume, as the times)
  std::size_t state_bytes_per_node = 0;
  double train_seconds = 0.0;         ///< inside rounds (carried over a resume)
  double eval_seconds = 0.0;          ///< inside evaluations (carried over a resume)
  /// Every node's count of local steps, in node order (carried over a resume). Lockstep: the
  /// training rounds; the asynchronous policy over several processes: each node's own count,
  /// which together make n x the training rounds (the global step budget) or a little more.
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
  if (s.evaluated && (!std::isfinite(s.report.parameter_divergence) || s.report.parameter_divergence > 1e6))
    return "node models drifted apart at round " + std::to_string(s.round - 1) + " (divergence " +
           g(s.report.parameter_divergence) + ")";
  return std::nullopt;
}

/// The driver of one run over process group G (single_process, or mpi_process_group).
template <tensor_element T, process_group G>
class trainer {
 public:
  trainer(G& group, run_settings settings, trainer_options opt, local_training<T> backend, trainer_callbacks cb = {})
      : group_(&group), settings_(std::move(settings)), opt_(std::move(opt)), be_(std::move(backend)),
        cb_(std::move(cb)) {
    if (opt_.rounds == 0) throw config_error("a run needs at least one round");
    if (opt_.train_rounds == 0 || opt_.train_rounds > opt_.rounds) opt_.train_rounds = opt_.rounds;
    if (!opt_.lr) throw config_error("trainer: no learning-rate schedule (trainer_options::lr)");
    if (!be_.step || !be_.direction || !be_.accuracy)
      throw config_error("trainer: local_training needs step, direction and accuracy");
    if (opt_.eval_every == 0) opt_.eval_every = std::max<std::uint32_t>(1, opt_.rounds / 10);
    if (opt_.checkpoint_every == 0) opt_.checkpoint_every = opt_.eval_every;
    if (opt_.resume_round > 0 && opt_.resume_dir.empty())
      throw config_error("trainer: resume_round " + std::to_string(opt_.resume_round) + " needs a resume_dir");
    if (opt_.checkpoint_dir.empty()) opt_.checkpoint_dir = opt_.resume_dir;
    last_loss_.assign(group.local_nodes(), 0.0);
  }

  const run_settings& settings() const noexcept { return settings_; }
  const trainer_options& options() const noexcept { return opt_; }

  /// The round the run starts at. Collective; run() calls it if the caller did not. Every
  /// process checks that all run the same settings, that the resume directory exists (resume
  /// never creates one) and that it can write checkpoints; rank 0 locks the directories (every
  /// rank shares them) and, with resume_dir, reads the manifest and checks it against this run:
  /// settings first, then the rank count, then the round and its files. A failure on any process
  /// is an error on every process (its own message where it failed).
  std::uint32_t start_round() {
    if (started_) return start_;
    group_->agree(settings_.text());
    std::uint32_t round = 0;
    std::exception_ptr failed;
    try {
      if (!opt_.resume_dir.empty()) checkpoint_directory(opt_.resume_dir).require_existing("resume");
      if (!opt_.checkpoint_dir.empty()) checkpoint_directory(opt_.checkpoint_dir).prepare();
      same_dir_ = !opt_.resume_dir.empty() && same_directory(opt_.resume_dir, opt_.checkpoint_dir);
      if (group_->rank() == 0) {
        if (!opt_.checkpoint_dir.empty()) ckpt_lock_ = checkpoint_directory(opt_.checkpoint_dir).lock();
        if (!opt_.resume_dir.empty() && !same_dir_) resume_lock_ = checkpoint_directory(opt_.resume_dir).lock();
        if (!opt_.resume_dir.empty()) round = check_manifest(checkpoint_directory(opt_.resume_dir).read_manifest());
      }
    } catch (...) {
      failed = std::current_exception();
    }
    if (any_failed(failed)) fail_everywhere(failed, "cannot start the run");
    start_ = detail::broadcast(*group_, round, "the broadcast of the round to resume at");
    started_ = true;
    return start_;
  }

  /// Run the rounds from start_round() to the end. A is a decentralized algorithm (sparse_push,
  /// choco, centralized) over this process's nodes. The directory locks are released when it
  /// returns or throws.
  template <class A>
  train_result run(A& alg) {
    using clock = run_clock;
    struct unlock_at_end {
      trainer* t;
      ~unlock_at_end() { t->release_locks(); }
    } unlock{this};
    train_result res;
    res.resumed_at = start_round();
    detail::check_layout(alg, *group_, "trainer");
    const std::size_t ln = group_->local_nodes();
    if (res.resumed_at > 0) {
      resume(alg, res.resumed_at);
      if (cb_.resumed) cb_.resumed(res.resumed_at);
    }
    if (cb_.started) cb_.started(res.resumed_at);
    std::uint32_t ckpt_prev = res.resumed_at;
    round_status st;
    st.rounds = opt_.rounds;
    if (steps_.size() != ln) steps_.assign(ln, 0);
    std::uint32_t first_round = res.resumed_at;
    // the asynchronous policy over several processes: training runs on the global step budget,
    // each process at its own pace; the rounds after it (SCSP's final gossip) continue below
    if (asynchronous(alg) && group_->ranks() > 1 && res.resumed_at < opt_.train_rounds) {
      run_asynchronous(alg, res, st, ckpt_prev);
      first_round = opt_.train_rounds;
    }
    for (std::uint32_t t = first_round; t < opt_.rounds && !res.diverged; ++t) {
      if (t == opt_.train_rounds) {  // the first round without local step
        if (be_.training_ended) be_.training_ended();
        bytes_at_training_end_ = detail::sum(*group_, alg.bytes_sent(), "the sum of the bytes sent before the final rounds");
      }
      const auto r0 = clock::now();
      step(alg, t + round_offset_, t, opt_.lr(std::min(t, opt_.train_rounds - 1)));
      train_seconds_ += std::chrono::duration<double>(clock::now() - r0).count();
      const bool last = t + 1 == opt_.rounds;
      const bool evaluates = (t + 1) % opt_.eval_every == 0 || last;
      const bool checkpoints = !opt_.checkpoint_dir.empty() && (t + 1) % opt_.checkpoint_every == 0 && t + 1 < opt_.rounds;
      if (!after_round(alg, t, evaluates, checkpoints, last, st, res, ckpt_prev)) break;
    }
    if (!res.diverged) drain(alg);  // the end: nothing in flight
    group_->finish();
    res.first_loss = first_loss_;
    res.loss = st.loss;
    if (res.diverged) return res;
    res.eval = st.eval;
    res.report = st.report;
    if (bytes_at_training_end_) res.bytes_after_training = st.report.bytes_sent - *bytes_at_training_end_;
    if constexpr (requires { alg.group().u(std::size_t{0}); }) {
      std::vector<double> us(ln);
      for (std::size_t i = 0; i < ln; ++i) us[i] = alg.group().u(i);
      double mass = 0;
      for (const double u : detail::allgather(*group_, us, "the gather of the push-sum weights")) mass += u;
      res.weight_mass = mass;
    }
    std::size_t dropped = 0, sent = 0;
    if constexpr (requires { alg.messages_dropped(); }) dropped = alg.messages_dropped();
    if constexpr (requires { alg.messages_sent(); }) sent = alg.messages_sent();
    res.messages_dropped = detail::sum(*group_, dropped, "the sum of the messages dropped");
    res.messages_sent = detail::sum(*group_, sent, "the sum of the messages sent");
    res.state_bytes_per_node = alg.state_bytes(0);
    res.train_seconds = train_seconds_;
    res.eval_seconds = eval_seconds_;
    gather_pace(alg, res);
    return res;
  }

 private:
  /// The trainer's section of a rank file. TRN2 carries what train_result reports beyond the
  /// algorithm's state: the bytes sent before the rounds without local step (a resume inside
  /// SCSP's final rounds reports the final phase's bytes) and the evaluation time. TRNR, its
  /// predecessor, is named in the refusal, never misread.
  static constexpr const char* section_tag = "TRN2";
  static constexpr const char* old_section_tag = "TRNR";
  /// The section a deferred policy adds to a rank file: this process's next round, the offset of
  /// the rounds after training, and its nodes' step counts.
  static constexpr const char* async_section_tag = "ASYN";

  template <class A>
  static bool deferred(const A& alg) {
    if constexpr (requires { alg.policy().lockstep(); }) return !alg.policy().lockstep();
    else return false;
  }
  template <class A>
  static bool asynchronous(const A& alg) {
    if constexpr (requires { alg.policy().kind; }) return alg.policy().kind == wait_kind::asynchronous;
    else return false;
  }
  /// Mix every envelope in flight (a no-op in lockstep): before an evaluation, a checkpoint and
  /// the end. Collective.
  template <class A>
  static void drain(A& alg) {
    if constexpr (requires { alg.drain(); }) alg.drain();
  }

  /// What follows round `t`'s step (t: the phase round): the losses (gathered where the processes
  /// meet anyway), the guard, an evaluation, the progress callback and a checkpoint. Returns false
  /// when the guard stopped the run.
  template <class A>
  bool after_round(A& alg, std::uint32_t t, bool evaluates, bool checkpoints, bool last, round_status& st,
                   train_result& res, std::uint32_t& ckpt_prev) {
    using clock = run_clock;
    // one process knows every loss; several gather them only where they meet anyway (no
    // collective inside a round), keeping the first round's until then
    st.loss_known = group_->ranks() == 1 || evaluates || checkpoints;
    if (!st.loss_known && !have_first_ && first_losses_.empty()) first_losses_ = last_loss_;
    if (st.loss_known) st.loss = gathered_loss();
    st.round = t + 1;
    st.first_loss = first_loss_;  // 0 until known
    st.evaluated = false;
    st.wall_seconds = std::chrono::duration<double>(clock::now() - opt_.start).count();
    res.rounds_done = t + 1;
    if (stopped(st, res)) return false;  // a diverged loss stops the run before its evaluation
    if (evaluates) {
      st.evaluated = true;
      const auto e0 = clock::now();
      drain(alg);  // the averaged model and the divergence of exact sums
      st.eval = evaluate<T>(alg, *group_, opt_.eval_threads,
                            [&](std::size_t w, std::span<const T> m) { return be_.accuracy(w, m, last); },
                            opt_.eval_reduction);
      eval_seconds_ += std::chrono::duration<double>(clock::now() - e0).count();
      st.report = detail::report_over(alg, t, st.eval.parameter_divergence, *group_);
      st.bytes_now = st.report.bytes_sent;
    } else if (group_->ranks() == 1) {
      st.bytes_now = alg.bytes_sent();
    }
    if (st.evaluated && stopped(st, res)) return false;
    st.wall_seconds = std::chrono::duration<double>(clock::now() - opt_.start).count();
    if (cb_.progress) cb_.progress(st);
    if (checkpoints) {
      if (cb_.before_checkpoint) cb_.before_checkpoint(t + 1);
      save(alg, t + 1, ckpt_prev);
      ckpt_prev = t + 1;
    }
    return true;
  }

  /// The asynchronous policy over several processes (ALGORITHMS.md, "unbounded"): each process
  /// runs its own rounds, never waiting for the others, until the nodes together have taken
  /// n x train_rounds local steps. The count travels in a nonblocking sum (start_sum/test_sum)
  /// that a process starts after its round when none is pending and tests after every round: no
  /// collective inside a round. Every process sees the same sequence of sums, so all decide alike
  /// where the run evaluates (every eval_every x n steps), checkpoints (every checkpoint_every x n)
  /// and ends; there they drain. The status's round is then the global count / n. A fast node
  /// takes more steps over its shard, a slow one fewer; the learning rate follows each process's
  /// own round. Afterwards every node continues at the same round (common_round) for the rounds
  /// after training.
  template <class A>
  void run_asynchronous(A& alg, train_result& res, round_status& st, std::uint32_t& ckpt_prev) {
    using clock = run_clock;
    const std::uint64_t n = group_->total_nodes(), ln = group_->local_nodes();
    const std::uint64_t budget = n * opt_.train_rounds;
    const std::uint64_t eval_steps = n * opt_.eval_every, ckpt_steps = n * opt_.checkpoint_every;
    std::uint64_t mine = 0;
    for (const auto s : steps_) mine += s;
    std::uint32_t t = res.resumed_at > 0 ? async_round_ : 0;
    std::uint64_t next_eval = (res.resumed_at / opt_.eval_every + 1) * eval_steps;
    std::uint64_t next_ckpt = (res.resumed_at / opt_.checkpoint_every + 1) * ckpt_steps;
    const bool final_rounds = opt_.rounds > opt_.train_rounds;
    bool pending = false;
    for (;;) {
      const std::uint32_t pr = std::min(t, opt_.train_rounds - 1);
      const auto r0 = clock::now();
      step(alg, t, pr, opt_.lr(pr));
      train_seconds_ += std::chrono::duration<double>(clock::now() - r0).count();
      ++t;
      mine += ln;
      std::uint64_t g = 0;
      if constexpr (requires(std::uint64_t& o) { group_->start_sum(mine); group_->test_sum(o); }) {
        if (!pending) {
          group_->start_sum(mine);
          pending = true;
        }
        if (!group_->test_sum(g)) continue;
        pending = false;
      } else {  // a group without a nonblocking sum: a blocking one every round
        g = detail::sum(*group_, mine, "the count of local steps");
      }
      const bool done = g >= budget;
      const bool evaluates = done || g >= next_eval;
      const bool checkpoints = !done && !opt_.checkpoint_dir.empty() && g >= next_ckpt;
      if (!evaluates && !checkpoints) continue;
      const auto mark = static_cast<std::uint32_t>(done ? opt_.train_rounds : std::min<std::uint64_t>(g / n, opt_.train_rounds - 1));
      async_round_ = t;
      drain(alg);  // also for a checkpoint alone: the status is the same on every process
      if (!after_round(alg, mark - 1, evaluates, checkpoints, done && !final_rounds, st, res, ckpt_prev)) return;
      next_eval = (g / eval_steps + 1) * eval_steps;
      next_ckpt = (g / ckpt_steps + 1) * ckpt_steps;
      if (done) break;
    }
    async_round_ = t;
    // the rounds after training continue where every node can: the first round none has posted
    if constexpr (requires { alg.continue_at(0u); }) {
      const std::uint32_t at = alg.common_round();
      alg.continue_at(at);
      round_offset_ = at - opt_.train_rounds;
    }
  }

  /// Every node's step count, the largest staleness and each process's receive time, gathered.
  template <class A>
  void gather_pace(const A& alg, train_result& res) {
    const std::size_t ln = group_->local_nodes();
    std::vector<double> v(ln);
    for (std::size_t i = 0; i < ln; ++i) v[i] = static_cast<double>(steps_[i]);
    res.steps_per_node.clear();
    for (const double s : detail::allgather(*group_, v, "the gather of every node's step count"))
      res.steps_per_node.push_back(static_cast<std::uint64_t>(s));
    double stale = 0, wait = 0;
    if constexpr (requires { alg.max_staleness(); }) stale = alg.max_staleness();
    if constexpr (requires { alg.wait_seconds(); }) wait = alg.wait_seconds();
    std::fill(v.begin(), v.end(), stale);
    for (const double s : detail::allgather(*group_, v, "the gather of the largest staleness"))
      res.max_staleness = std::max(res.max_staleness, static_cast<std::uint32_t>(s));
    // the receive time by rank: each node reports its process's, and its rank
    std::fill(v.begin(), v.end(), wait);
    const auto waits = detail::allgather(*group_, v, "the gather of the receive times");
    std::fill(v.begin(), v.end(), static_cast<double>(group_->rank()));
    const auto ranks = detail::allgather(*group_, v, "the gather of the ranks of the nodes");
    res.wait_seconds_per_rank.assign(static_cast<std::size_t>(group_->ranks()), 0.0);
    for (std::size_t i = 0; i < ranks.size(); ++i) res.wait_seconds_per_rank.at(static_cast<std::size_t>(ranks[i])) = waits[i];
  }

  /// Collective: the mean of this round's losses over every node (summed in node order, the bits
  /// of one process); the run's first mean loss too, from the first round's losses kept since
  /// that round when this is a later one.
  double gathered_loss() {
    auto mean = [this](std::span<const double> mine, std::string_view what) {
      double loss = 0;
      for (const double l : detail::allgather(*group_, mine, what)) loss += l / static_cast<double>(group_->total_nodes());
      return loss;
    };
    if (!first_losses_.empty()) {
      first_loss_ = mean(first_losses_, "the gather of the first round's losses");
      have_first_ = true;
      first_losses_ = {};
    }
    const double loss = mean(last_loss_, "the gather of the losses (at an evaluation or a checkpoint)");
    if (!have_first_) {
      first_loss_ = loss;
      have_first_ = true;
    }
    return loss;
  }

  /// Ask the guard; a reason ends the run as diverged.
  bool stopped(const round_status& st, train_result& res) const {
    if (!cb_.guard) return false;
    auto why = cb_.guard(st);
    if (!why) return false;
    res.diverged = true;
    res.reason = std::move(*why);
    return true;
  }

  /// Collective: whether any process failed (`failed` holds this process's error, if any).
  bool any_failed(const std::exception_ptr& failed) {
    return detail::sum(*group_, std::uint64_t{failed ? 1u : 0u}, "the check that every rank can start") > 0;
  }

  /// After any_failed(): throw on every process, its own error where it has one, so that no
  /// process waits in a collective call for one that gave up.
  [[noreturn]] void fail_everywhere(const std::exception_ptr& failed, const std::string& what) {
    release_locks();
    if (failed) std::rethrow_exception(failed);
    throw checkpoint_error(what + ": another rank failed (see its error); nothing was changed");
  }

  void release_locks() noexcept {
    ckpt_lock_.release();
    resume_lock_.release();
  }

  static bool same_directory(const std::string& a, const std::string& b) {
    if (a == b) return true;
    std::error_code ec;
    const bool same = std::filesystem::equivalent(a, b, ec);
    return !ec && same;
  }

  /// The round to resume at, from rank 0's reading of the manifest. The settings come first: a
  /// changed setting (which may change the round count) is reported as such, not as a round
  /// outside the run.
  std::uint32_t check_manifest(const checkpoint_manifest& m) const {
    const std::string& dir = opt_.resume_dir;
    if (m.settings != settings_.text())
      throw checkpoint_error("resume " + dir + " was written with other settings: " +
                             settings_.diff_from(run_settings::parse(m.settings)));
    if (m.ranks != static_cast<std::uint32_t>(group_->ranks()))
      throw checkpoint_error("resume " + dir + " was written by " + std::to_string(m.ranks) +
                             " rank(s), this run has " + std::to_string(group_->ranks()));
    const std::uint32_t want = opt_.resume_round;
    if (want > m.round)
      throw checkpoint_error("resume " + dir + ": round " + std::to_string(want) +
                             " was asked for, but the directory's last complete checkpoint is round " +
                             std::to_string(m.round));
    const std::uint32_t round = want ? want : m.round;
    if (round == 0 || round >= opt_.rounds)
      throw checkpoint_error("resume " + dir + " holds round " + std::to_string(round) + ", outside this run's 1.." +
                             std::to_string(opt_.rounds - 1));
    const std::string missing = checkpoint_directory(dir).missing_rank_file(round, m.ranks);
    if (!missing.empty())
      throw checkpoint_error("resume " + dir + ": cannot open " + missing + ": no such file (the checkpoint of round " +
                             std::to_string(round) + " is not there" +
                             (want ? std::string("; a directory keeps its manifest's round, the one before it and "
                                                 "the round a run resumed from)")
                                   : std::string(")")));
    return round;
  }

  /// Round t (the schedule's round) of phase round `phase` (they differ only after asynchronous
  /// training): p_i at every node this process runs (on the algorithm's threads), then the round.
  /// Deferred rounds after training wait for every envelope (wait_all): a node must not run the
  /// final gossip ahead of its peers.
  template <class A>
  void step(A& alg, std::uint32_t t, std::uint32_t phase, double gamma) {
    auto round = [&](std::span<const std::span<const T>> dirs) {
      if constexpr (requires { alg.round(t, dirs, gamma, phase, true); })
        alg.round(t, dirs, gamma, phase, deferred(alg) && phase >= opt_.train_rounds);
      else
        alg.round(t, dirs, gamma);
    };
    if (!alg.trains(phase)) {
      round(std::span<const std::span<const T>>());
      return;
    }
    for (auto& s : steps_) ++s;
    const std::size_t d = alg.dim();
    if (xh_.size() < alg.workers()) xh_.resize(alg.workers());
    const std::uint32_t first = group_->first_node();
    alg.for_each_node([&](std::size_t li, std::size_t w) {
      if (xh_[w].size() != d) xh_[w].resize(d);
      alg.model(li, std::span<T>(xh_[w]));
      const auto node = static_cast<std::uint32_t>(first + li);
      last_loss_[li] = be_.step(w, node, t, xh_[w], be_.direction(node));
    });
    views_.clear();
    for (std::size_t li = 0; li < alg.num_nodes(); ++li)
      views_.emplace_back(be_.direction(static_cast<std::uint32_t>(first + li)));
    round(std::span<const std::span<const T>>(views_));
  }

  /// This process's nodes after round next - 1: the trainer's own state, the backend's, the
  /// algorithm's; then (every rank's file written) rank 0 moves the manifest on, and each rank
  /// removes its files older than the previous checkpoint, except the round this run resumed
  /// from when it checkpoints into the directory it resumed from.
  template <class A>
  void save(A& alg, std::uint32_t next, std::uint32_t prev) {
    drain(alg);  // a checkpoint holds no envelope in flight
    const checkpoint_directory dir(opt_.checkpoint_dir);
    checkpoint_writer w;
    w.section(section_tag);
    w.str(settings_.text());
    w.u32(next);
    w.u32(static_cast<std::uint32_t>(group_->rank()));
    w.u32(static_cast<std::uint32_t>(group_->ranks()));
    w.u64(group_->first_node());
    w.u64(group_->local_nodes());
    w.f64(first_loss_);  // known: a checkpoint's round gathers the losses
    w.f64(train_seconds_);
    w.f64(eval_seconds_);
    w.u32(bytes_at_training_end_ ? 1u : 0u);
    w.u64(bytes_at_training_end_.value_or(0));
    w.values(std::span<const double>(last_loss_));
    if (be_.save) be_.save(w);
    alg.save(w);
    if (deferred(alg)) {
      w.section(async_section_tag);
      w.u32(async_round_);
      w.u32(round_offset_);
      w.values(std::span<const std::uint64_t>(steps_));
    }
    write_file_atomic(dir.rank_file(next, group_->rank()), w.finish());
    group_->agree("checkpoint round " + std::to_string(next));  // every rank's file is written
    if (group_->rank() == 0)
      dir.write_manifest({next, static_cast<std::uint32_t>(group_->ranks()), settings_.text()});
    dir.remove_older(prev, group_->rank(), same_dir_ ? start_ : 0);
  }

  /// Restore this rank's file of round `round`, on every process or (an error on every process)
  /// on none: the algorithm's state before is kept in memory until every process has read and
  /// checked its file, and put back when one of them refused its own.
  template <class A>
  void resume(A& alg, std::uint32_t round) {
    std::vector<std::byte> before;
    bool alg_changed = false;
    std::function<void()> apply;
    std::exception_ptr failed;
    try {
      checkpoint_writer w;
      alg.save(w);
      before = w.finish();
      apply = load(alg, round, alg_changed);
    } catch (...) {
      failed = std::current_exception();
    }
    if (!any_failed(failed)) {
      apply();
      return;
    }
    if (alg_changed) {  // this process's file was good (or refused after the algorithm's part)
      checkpoint_reader r(before, "the state before the resume");
      alg.restore(r);
    }
    fail_everywhere(failed, "resume " + opt_.resume_dir);
  }

  /// Read and check this rank's file of round `round`; restore the algorithm from it (all of it
  /// or nothing; `alg_changed` tells) and return what applies the rest (the trainer's state, the
  /// backend's).
  template <class A>
  std::function<void()> load(A& alg, std::uint32_t round, bool& alg_changed) {
    const std::string path = checkpoint_directory(opt_.resume_dir).rank_file(round, group_->rank());
    const auto bytes = read_file_bytes(path);
    checkpoint_reader r(bytes, path);
    if (r.next_tag() == old_section_tag)
      r.fail(std::string("was written by an older sparsepush (trainer section '") + old_section_tag + "', this build reads '" +
             section_tag + "'): it cannot be resumed by this build; start the run again");
    r.section(section_tag);
    const std::string was = r.str("settings", std::size_t{1} << 16);
    if (was != settings_.text())
      r.fail("was written with other settings: " + settings_.diff_from(run_settings::parse(was)));
    if (r.u32("round") != round) r.fail("holds another round than its manifest");
    if (r.u32("rank") != static_cast<std::uint32_t>(group_->rank()) ||
        r.u32("ranks") != static_cast<std::uint32_t>(group_->ranks()) || r.u64("first node") != group_->first_node() ||
        r.u64("local nodes") != group_->local_nodes())
      r.fail("was written by another rank layout");
    const double fl = r.f64("first loss");
    const double ts = r.f64("train seconds");
    const double es = r.f64("eval seconds");
    const std::uint32_t has_bytes = r.u32("final-phase flag");
    const std::uint64_t bytes_then = r.u64("bytes before the final phase");
    if (has_bytes > 1) r.fail("holds a final-phase flag of " + std::to_string(has_bytes) + " (0 or 1)");
    std::vector<double> ll(group_->local_nodes());
    r.values(std::span<double>(ll), "last losses");
    std::function<void()> apply_backend;
    if (be_.restore) apply_backend = be_.restore(r);
    alg.restore(r);  // checks everything before it changes anything
    alg_changed = true;
    // the step counts: a deferred policy's own section; in lockstep every node took every
    // training round
    std::vector<std::uint64_t> steps(group_->local_nodes(), std::min(round, opt_.train_rounds));
    std::uint32_t async_round = round, offset = 0;
    if (deferred(alg)) {
      r.section(async_section_tag);
      async_round = r.u32("the process's next round");
      offset = r.u32("the offset of the rounds after training");
      r.values(std::span<std::uint64_t>(steps), "the nodes' step counts");
    }
    r.done();
    return [this, round, fl, ts, es, has_bytes, bytes_then, ll = std::move(ll), apply_backend = std::move(apply_backend),
            steps = std::move(steps), async_round, offset] {
      steps_ = steps;
      async_round_ = async_round;
      round_offset_ = offset;
      first_loss_ = fl;
      have_first_ = true;
      train_seconds_ = ts;
      eval_seconds_ = es;
      // the bytes before this run's first round without local step, when the checkpoint is past it
      // (a run with more training rounds counts them itself when it gets there)
      if (has_bytes && round > opt_.train_rounds) bytes_at_training_end_ = bytes_then;
      last_loss_ = ll;
      if (apply_backend) apply_backend();
    };
  }

  G* group_;
  run_settings settings_;
  trainer_options opt_;
  local_training<T> be_;
  trainer_callbacks cb_;
  bool started_ = false;
  std::uint32_t start_ = 0;
  bool same_dir_ = false;                  ///< checkpoints go to the directory resumed from
  checkpoint_lock ckpt_lock_, resume_lock_;  ///< rank 0's, from start_round() to the end of run()
  std::vector<double> last_loss_;          ///< this process's nodes' losses of their last local step
  std::vector<double> first_losses_;       ///< the first round's, until they are gathered (several processes)
  double first_loss_ = 0.0;
  bool have_first_ = false;                ///< first_loss_ is the run's (gathered, or from the checkpoint)
  double train_seconds_ = 0.0, eval_seconds_ = 0.0;
  std::optional<std::uint64_t> bytes_at_training_end_;  ///< over every process, at round train_rounds
  std::vector<std::uint64_t> steps_;      ///< local steps of this process's nodes
  std::uint32_t async_round_ = 0;         ///< asynchronous training: this process's next round
  std::uint32_t round_offset_ = 0;        ///< the schedule's round - the phase round (after asynchronous training)
  std::vector<std::vector<T>> xh_;        ///< xh_i, one per worker thread
  std::vector<std::span<const T>> views_;  ///< the directions handed to the round
};

}  // namespace v0
}  // namespace sparsepush
