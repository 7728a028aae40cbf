// sparsepush/train/trainer.hpp: the training driver, for one process or every rank of a run.
// Round t at every node this process runs: p_i = step(xh_i) on the algorithm's threads (the
// user's backend: a minibatch gradient and its optimizer), then alg.round(t, p, lr(t)); every
// `eval_every` rounds and after the last, the metrics of evaluate.hpp over every node; every
// `checkpoint_every` rounds a checkpoint that resume continues bit for bit. What a front end
// decides (when to stop a diverging run, what to print) comes in as callbacks.
#pragma once

#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "../algorithm/trainer.hpp"
#include "checkpoints.hpp"
#include "evaluate.hpp"
#include "process_group.hpp"
#include "settings.hpp"

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
struct trainer_options {
  std::uint32_t rounds = 0;          ///< rounds of the run
  std::uint32_t train_rounds = 0;    ///< rounds that may take a local step (0: all of them)
  std::function<double(std::uint32_t)> lr;  ///< learning rate of round t
  std::uint32_t eval_every = 0;      ///< rounds between evaluations (0: about 10 a run)
  std::size_t eval_threads = 1;      ///< threads that test models
  std::string checkpoint_dir;        ///< checkpoints go there (empty: none)
  std::uint32_t checkpoint_every = 0;  ///< rounds between checkpoints (0: at every evaluation)
  std::string resume_dir;            ///< continue the run checkpointed there (empty: start at round 0)
  std::chrono::steady_clock::time_point start = std::chrono::steady_clock::now();  ///< for wall_seconds
};

/// Where a run stands after a round; the metrics are those of the last evaluation.
struct round_status {
  std::uint32_t round = 0;      ///< rounds done (t + 1)
  std::uint32_t rounds = 0;
  double loss = 0.0;            ///< mean minibatch loss over every node this round
  double first_loss = 0.0;      ///< the run's first mean loss
  bool evaluated = false;       ///< the metrics below are from this round
  evaluation eval;
  round_report report;          ///< bytes over every process (at the last evaluation)
  std::size_t bytes_now = 0;    ///< bytes sent so far (this process's, between evaluations under MPI)
  double wall_seconds = 0.0;    ///< since trainer_options::start
};

/// What the front end hooks into the loop.
struct trainer_callbacks {
  /// After every round: a reason to stop (the run ends as diverged), or nothing. Under MPI every
  /// process sees the same status, so every process decides alike.
  std::function<std::optional<std::string>(const round_status&)> guard;
  /// After every round (and the guard): progress, logs.
  std::function<void(const round_status&)> progress;
  /// After a resumed run has restored its checkpoint, before its first round.
  std::function<void(std::uint32_t round)> resumed;
  /// Before a checkpoint is written (e.g. flush a log that resume keeps up to that round).
  std::function<void(std::uint32_t round)> before_checkpoint;
};

/// The result of a run, the same on every process.
struct train_result {
  bool diverged = false;
  std::string reason;                 ///< the guard's reason when diverged
  std::uint32_t resumed_at = 0;       ///< the round the run started at
  std::uint32_t rounds_done = 0;
  double first_loss = 0.0, loss = 0.0;
  evaluation eval;                    ///< the last evaluation
  round_report report;                ///< bytes of every process at the last evaluation
  std::optional<std::size_t> bytes_after_training;  ///< bytes sent in the rounds without local step
  std::size_t messages_sent = 0, messages_dropped = 0;  ///< every process's
  std::optional<double> weight_mass;  ///< sum_i u_i over every node, in node order (push-sum only)
  std::size_t state_bytes_per_node = 0;
  double train_seconds = 0.0;         ///< inside rounds (carried over a resume)
  double eval_seconds = 0.0;
};

/// The stop a guard can give for the usual failure: a mean loss that is not finite or grew past
/// 10 x its first value + 10, or (at an evaluation) a divergence not finite or past 1e6.
/// The guard is asked after the round's loss and again after an evaluation.
inline std::optional<std::string> default_divergence_guard(const round_status& s) {
  auto g = [](double v) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%g", v);
    return std::string(buf);
  };
  if (!std::isfinite(s.loss) || s.loss > 10 * s.first_loss + 10)
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
    if (opt_.checkpoint_dir.empty()) opt_.checkpoint_dir = opt_.resume_dir;
    last_loss_.assign(group.local_nodes(), 0.0);
  }

  const run_settings& settings() const noexcept { return settings_; }
  const trainer_options& options() const noexcept { return opt_; }

  /// The round the run starts at: every process checks that all run the same settings and that
  /// it can write checkpoints, then (with resume_dir) rank 0 reads the manifest and checks it
  /// against this run. Collective; run() calls it if the caller did not.
  std::uint32_t start_round() {
    if (started_) return start_;
    group_->agree(settings_.text());
    if (!opt_.checkpoint_dir.empty()) checkpoint_directory(opt_.checkpoint_dir).prepare();
    if (!opt_.resume_dir.empty()) {
      std::string why;
      std::uint32_t round = 0;
      if (group_->rank() == 0) {
        try {
          round = check_manifest(checkpoint_directory(opt_.resume_dir).read_manifest());
        } catch (const error& e) {
          why = e.what();
        }
      }
      round = group_->broadcast(why.empty() ? round : std::uint32_t{0});
      if (round == 0) {
        if (!why.empty()) throw checkpoint_error(why.substr(std::string_view("sparsepush: ").size()));
        throw checkpoint_error("resume " + opt_.resume_dir + ": rank 0 could not resume (see its error)");
      }
      start_ = round;
    }
    started_ = true;
    return start_;
  }

  /// Run the rounds from start_round() to the end. A is a decentralized algorithm (sparse_push,
  /// choco, centralized) over this process's nodes.
  template <class A>
  train_result run(A& alg) {
    using clock = std::chrono::steady_clock;
    train_result res;
    res.resumed_at = start_round();
    detail::check_layout(alg, *group_, "trainer");
    const std::size_t ln = group_->local_nodes();
    if (res.resumed_at > 0) {
      load(alg, res.resumed_at);
      if (cb_.resumed) cb_.resumed(res.resumed_at);
    }
    std::uint32_t ckpt_prev = res.resumed_at;
    round_status st;
    st.rounds = opt_.rounds;
    for (std::uint32_t t = res.resumed_at; t < opt_.rounds; ++t) {
      if (t == opt_.train_rounds) {  // the first round without local step
        if (be_.training_ended) be_.training_ended();
        res.bytes_after_training = group_->sum(alg.bytes_sent());
      }
      const auto r0 = clock::now();
      step(alg, t, opt_.lr(std::min(t, opt_.train_rounds - 1)));
      train_seconds_ += std::chrono::duration<double>(clock::now() - r0).count();
      double loss = 0;
      for (const double l : group_->allgather(last_loss_)) loss += l / static_cast<double>(group_->total_nodes());
      if (first_loss_ < 0) first_loss_ = loss;
      const bool last = t + 1 == opt_.rounds;
      st.round = t + 1;
      st.loss = loss;
      st.first_loss = first_loss_;
      st.evaluated = false;
      st.wall_seconds = std::chrono::duration<double>(clock::now() - opt_.start).count();
      res.rounds_done = t + 1;
      if (stopped(st, res)) break;  // a diverged loss stops the run before its evaluation
      if ((t + 1) % opt_.eval_every == 0 || last) {
        st.evaluated = true;
        const auto e0 = clock::now();
        st.eval = evaluate<T>(alg, *group_, opt_.eval_threads,
                              [&](std::size_t w, std::span<const T> m) { return be_.accuracy(w, m, last); });
        eval_seconds_ += std::chrono::duration<double>(clock::now() - e0).count();
        st.report = detail::report_over(alg, t, st.eval.parameter_divergence, *group_);
        st.bytes_now = st.report.bytes_sent;
      } else if (group_->ranks() == 1) {
        st.bytes_now = alg.bytes_sent();
      }
      if (st.evaluated && stopped(st, res)) break;
      st.wall_seconds = std::chrono::duration<double>(clock::now() - opt_.start).count();
      if (cb_.progress) cb_.progress(st);
      if (!opt_.checkpoint_dir.empty() && (t + 1) % opt_.checkpoint_every == 0 && t + 1 < opt_.rounds) {
        if (cb_.before_checkpoint) cb_.before_checkpoint(t + 1);
        save(alg, t + 1, ckpt_prev);
        ckpt_prev = t + 1;
      }
    }
    group_->finish();
    res.first_loss = first_loss_;
    res.loss = st.loss;
    if (res.diverged) return res;
    res.eval = st.eval;
    res.report = st.report;
    if (res.bytes_after_training) *res.bytes_after_training = st.report.bytes_sent - *res.bytes_after_training;
    if constexpr (requires { alg.group().u(std::size_t{0}); }) {
      std::vector<double> us(ln);
      for (std::size_t i = 0; i < ln; ++i) us[i] = alg.group().u(i);
      double mass = 0;
      for (const double u : group_->allgather(us)) mass += u;
      res.weight_mass = mass;
    }
    std::size_t dropped = 0, sent = 0;
    if constexpr (requires { alg.messages_dropped(); }) dropped = alg.messages_dropped();
    if constexpr (requires { alg.messages_sent(); }) sent = alg.messages_sent();
    res.messages_dropped = group_->sum(dropped);
    res.messages_sent = group_->sum(sent);
    res.state_bytes_per_node = alg.state_bytes(0);
    res.train_seconds = train_seconds_;
    res.eval_seconds = eval_seconds_;
    return res;
  }

 private:
  /// Ask the guard; a reason ends the run as diverged.
  bool stopped(const round_status& st, train_result& res) const {
    if (!cb_.guard) return false;
    auto why = cb_.guard(st);
    if (!why) return false;
    res.diverged = true;
    res.reason = std::move(*why);
    return true;
  }

  std::uint32_t check_manifest(const checkpoint_manifest& m) const {
    const std::string& dir = opt_.resume_dir;
    if (m.settings != settings_.text())
      throw checkpoint_error("resume " + dir + " was written with other settings: " +
                             settings_.diff_from(run_settings::parse(m.settings)));
    if (m.ranks != static_cast<std::uint32_t>(group_->ranks()))
      throw checkpoint_error("resume " + dir + " was written by " + std::to_string(m.ranks) +
                             " rank(s), this run has " + std::to_string(group_->ranks()));
    if (m.round == 0 || m.round >= opt_.rounds)
      throw checkpoint_error("resume " + dir + " holds round " + std::to_string(m.round) + ", outside this run's 1.." +
                             std::to_string(opt_.rounds - 1));
    return m.round;
  }

  /// p_i at every node this process runs (on the algorithm's threads), then the round.
  template <class A>
  void step(A& alg, std::uint32_t t, double gamma) {
    if (!alg.trains(t)) {
      alg.round(t, std::span<const std::span<const T>>(), gamma);
      return;
    }
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
    alg.round(t, std::span<const std::span<const T>>(views_), gamma);
  }

  /// This process's nodes after round next - 1: the trainer's own state, the backend's, the
  /// algorithm's; then (every rank's file written) rank 0 moves the manifest on.
  template <class A>
  void save(const A& alg, std::uint32_t next, std::uint32_t prev) {
    const checkpoint_directory dir(opt_.checkpoint_dir);
    checkpoint_writer w;
    w.section("TRNR");
    w.str(settings_.text());
    w.u32(next);
    w.u32(static_cast<std::uint32_t>(group_->rank()));
    w.u32(static_cast<std::uint32_t>(group_->ranks()));
    w.u64(group_->first_node());
    w.u64(group_->local_nodes());
    w.f64(first_loss_);
    w.f64(train_seconds_);
    w.values(std::span<const double>(last_loss_));
    if (be_.save) be_.save(w);
    alg.save(w);
    write_file_atomic(dir.rank_file(next, group_->rank()), w.finish());
    group_->agree("checkpoint round " + std::to_string(next));  // every rank's file is written
    if (group_->rank() == 0)
      dir.write_manifest({next, static_cast<std::uint32_t>(group_->ranks()), settings_.text()});
    dir.remove_older(prev, group_->rank());
  }

  /// Restore this rank's file of round `round`: all of it, or (checkpoint_error) nothing.
  template <class A>
  void load(A& alg, std::uint32_t round) {
    const std::string path = checkpoint_directory(opt_.resume_dir).rank_file(round, group_->rank());
    const auto bytes = read_file_bytes(path);
    checkpoint_reader r(bytes, path);
    r.section("TRNR");
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
    std::vector<double> ll(group_->local_nodes());
    r.values(std::span<double>(ll), "last losses");
    std::function<void()> apply;
    if (be_.restore) apply = be_.restore(r);
    alg.restore(r);  // checks everything before it changes anything
    r.done();
    first_loss_ = fl;
    train_seconds_ = ts;
    last_loss_ = std::move(ll);
    if (apply) apply();
  }

  G* group_;
  run_settings settings_;
  trainer_options opt_;
  local_training<T> be_;
  trainer_callbacks cb_;
  bool started_ = false;
  std::uint32_t start_ = 0;
  std::vector<double> last_loss_;
  double first_loss_ = -1.0;
  double train_seconds_ = 0.0, eval_seconds_ = 0.0;
  std::vector<std::vector<T>> xh_;        ///< xh_i, one per worker thread
  std::vector<std::span<const T>> views_;  ///< the directions handed to the round
};

}  // namespace v0
}  // namespace sparsepush
