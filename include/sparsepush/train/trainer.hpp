// sparsepush/train/trainer.hpp: the training driver, for one process or every rank of a run.
// Round t at every node this process runs: p_i = step(xh_i) on the algorithm's threads (the
// user's backend: a minibatch gradient and its optimizer), then alg.round(t, p, lr(t)); with H
// local steps, H such steps land on a copy of the numerator, an optional outer step follows, and
// the round pushes their sum (docs/design/algorithms.md, "Local steps and an outer step"). Every `eval_every`
// rounds each node's own model is tested (scalars travel), and every `eval_average_every` rounds
// and after the last also the averaged model and the divergence (evaluate.hpp); every
// `checkpoint_every` rounds a checkpoint that resume continues bit for bit (a resumed run's
// train_result is the uninterrupted run's in every field but resumed_at, the times and
// state_bytes_per_node, the capacity of buffers that grow with the rounds run). What a
// front end decides (when to stop a diverging run, what to print) comes in as callbacks.
// Over more than one process no collective runs inside a round: the mean loss is gathered only
// at evaluations and checkpoints, where the processes meet anyway (round_status::loss_known).
// The values a run takes and returns are in types.hpp, the local and outer steps in
// local_steps.hpp, the directories and their locks in run_directories.hpp, a rank file in
// trainer_checkpoint.hpp, the losses and the end's counters in run_statistics.hpp, the pace of
// asynchronous training in asynchronous.hpp. The algorithms are the caller's to include.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <exception>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "../algorithm/report.hpp"
#include "../checkpoint.hpp"
#include "../clock.hpp"
#include "../gossip/policy.hpp"
#include "asynchronous.hpp"
#include "evaluate.hpp"
#include "local_steps.hpp"
#include "option_checks.hpp"
#include "process_group.hpp"
#include "run_directories.hpp"
#include "run_statistics.hpp"
#include "settings.hpp"
#include "tracked_step.hpp"
#include "trainer_checkpoint.hpp"
#include "types.hpp"

namespace sparsepush {
inline namespace v0 {

/// The driver of one run over process group G (single_process, or mpi_process_group).
template <tensor_element T, process_group G>
class trainer {
 public:
  /// A run over `group` with `settings` (compared across processes and stored in checkpoints), the
  /// options `opt`, the local training `backend` and callbacks `cb`. Throws config_error for
  /// settings out of range (detail::completed_options).
  trainer(G& group, run_settings settings, trainer_options opt, local_training<T> backend, trainer_callbacks cb = {})
      : group_(&group), settings_(std::move(settings)), opt_(detail::completed_options(std::move(opt), backend)),
        be_(std::move(backend)), cb_(std::move(cb)) {
    losses_.last.assign(group.local_nodes(), 0.0);
  }

  /// The run's settings.
  const run_settings& settings() const noexcept { return settings_; }
  /// The options, with the defaults filled in (eval_every, checkpoint_every, train_rounds...).
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
    start_ = dirs_.open(*group_, settings_, opt_);
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
      ~unlock_at_end() { t->dirs_.release(); }
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
    end_ = opt_.rounds;
    if (opt_.eval_average_every) avg_mark_ = res.resumed_at / opt_.eval_average_every;
    run_start_ = clock::now();
    res.startup_seconds = std::chrono::duration<double>(run_start_ - opt_.start).count();
    // the asynchronous policy over several processes: training runs on the global step budget,
    // each process at its own pace; the rounds after it (SCSP's final gossip) continue below
    if (detail::asynchronous_policy(alg) && group_->ranks() > 1 && res.resumed_at < opt_.train_rounds) {
      run_asynchronous(alg, res, st, ckpt_prev);
      first_round = opt_.train_rounds;
    }
    rounds(alg, first_round, st, res, ckpt_prev);
    if (!res.diverged) drain(alg);  // the end: nothing in flight
    group_->finish();
    res.first_loss = losses_.first;
    res.loss = st.loss;
    if (!res.diverged) finish(alg, st, res);
    return res;
  }

 private:
  /// The rounds from phase round `first` to the end (or until the guard stops the run), each
  /// followed by after_round(); a target's stop jumps to the rounds without local step.
  template <class A>
  void rounds(A& alg, std::uint32_t first, round_status& st, train_result& res, std::uint32_t& ckpt_prev) {
    using clock = run_clock;
    for (std::uint32_t t = first; t < end_ && !res.diverged; ++t) {
      if (t == opt_.train_rounds) {  // the first round without local step
        if (be_.training_ended) be_.training_ended();
        bytes_at_training_end_ = detail::sum(*group_, alg.bytes_sent(), "the sum of the bytes sent before the final rounds");
      }
      const auto r0 = clock::now();
      step(alg, t + round_offset_, t, std::min(t, opt_.train_rounds - 1));
      train_seconds_ += std::chrono::duration<double>(clock::now() - r0).count();
      const bool last = t + 1 == end_;
      const bool evaluates = (t + 1) % opt_.eval_every == 0 || last ||
                             (opt_.eval_average_every && (t + 1) % opt_.eval_average_every == 0);
      // after a target stopped training, the final rounds take no checkpoint (a resume would not
      // know where they started)
      const bool checkpoints = !opt_.checkpoint_dir.empty() && (t + 1) % opt_.checkpoint_every == 0 && t + 1 < end_ &&
                               !target_stopped_;
      if (!after_round(alg, t, evaluates, checkpoints, last, st, res, ckpt_prev)) break;
      if (target_stop_pending_) {  // the target is reached: what the algorithm owes at the end follows
        stop_training(alg, t + 1 + round_offset_, st, res);
        t = opt_.train_rounds - 1;
      }
    }
  }

  /// The end of a run the guard did not stop: the last evaluation's metrics, the bytes of the
  /// rounds without local step, and what is gathered over the processes (run_statistics.hpp).
  template <class A>
  void finish(const A& alg, const round_status& st, train_result& res) {
    res.eval = st.eval;
    res.report = st.report;
    if (bytes_at_training_end_) res.bytes_after_training = st.report.bytes_sent - *bytes_at_training_end_;
    detail::gather_counters(*group_, alg, res);
    res.state_bytes_per_node = alg.state_bytes(0);
    res.train_seconds = train_seconds_;
    res.eval_seconds = eval_seconds_;
    res.final_eval_seconds = final_eval_seconds_;
    res.eval_bytes = eval_bytes_;
    res.final_eval_bytes = final_eval_bytes_;
    detail::gather_pace(*group_, alg, std::span<const std::uint64_t>(steps_), res);
  }

  template <class A>
  static bool deferred(const A& alg) { return detail::deferred_policy(alg); }
  template <class A>
  static void drain(A& alg) { detail::drain_all(alg); }

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
    if (!st.loss_known) losses_.keep_if_first();
    if (st.loss_known) st.loss = losses_.gather(*group_);
    // after a target stopped training the phase rounds run ahead of the rounds run
    res.rounds_done = target_stopped_ ? t + 1 + round_offset_ : t + 1;
    st.round = res.rounds_done;
    st.training = t < opt_.train_rounds;
    st.first_loss = losses_.first;  // 0 until known
    st.evaluated = false;
    st.wall_seconds = std::chrono::duration<double>(clock::now() - opt_.start).count();
    if (stopped(st, res)) return false;  // a diverged loss stops the run before its evaluation
    if (evaluates) {
      // each node's own model every time; the averaged model and the divergence (the sum of the
      // models, after a drain under a waiting policy) at the last evaluation and when asked
      const bool averaged = last || (opt_.eval_average_every && (t + 1) / opt_.eval_average_every > avg_mark_);
      if (averaged && opt_.eval_average_every) avg_mark_ = (t + 1) / opt_.eval_average_every;
      evaluate_now(alg, t, last, averaged, st);
    } else if (group_->ranks() == 1) {
      st.bytes_now = alg.bytes_sent();
    }
    if (st.evaluated && stopped(st, res)) return false;
    if (st.evaluated) check_target(t, st, res);
    st.wall_seconds = std::chrono::duration<double>(clock::now() - opt_.start).count();
    if (cb_.progress) cb_.progress(st);
    if (checkpoints) {
      if (cb_.before_checkpoint) cb_.before_checkpoint(t + 1);
      save(alg, t + 1, ckpt_prev);
      ckpt_prev = t + 1;
    }
    return true;
  }

  /// Evaluate after phase round t (collective): every node's model, and with `averaged` the
  /// averaged model and the divergence, whose sums need every envelope mixed first. The time and
  /// the bytes go to the last evaluation's counters or to the others'.
  template <class A>
  void evaluate_now(A& alg, std::uint32_t t, bool last, bool averaged, round_status& st) {
    using clock = run_clock;
    st.evaluated = true;
    const auto e0 = clock::now();
    if (averaged) drain(alg);  // the averaged model and the divergence of exact sums
    share_accuracy_function<T> shares;  // before the last evaluation, each node on its share
    if (opt_.eval_split && !last)
      shares = [&](std::size_t w, std::uint32_t i, std::span<const T> m) {
        return be_.share_accuracy(w, i, group_->total_nodes(), m);
      };
    st.eval = evaluate<T>(alg, *group_, opt_.eval_threads,
                          [&](std::size_t w, std::span<const T> m) { return be_.accuracy(w, m, last); },
                          opt_.eval_reduction, averaged, shares);
    st.report = detail::report_over(alg, t, st.eval.parameter_divergence, *group_);
    st.bytes_now = st.report.bytes_sent;
    const double took = std::chrono::duration<double>(clock::now() - e0).count();
    const std::uint64_t moved = evaluation_payload(static_cast<std::size_t>(group_->ranks()), group_->total_nodes(),
                                                   alg.dim(), sizeof(T), averaged, opt_.eval_reduction);
    (last ? final_eval_seconds_ : eval_seconds_) += took;
    (last ? final_eval_bytes_ : eval_bytes_) += moved;
  }

  /// After an evaluation of phase round t: the first one whose node-mean accuracy reaches the
  /// target is recorded, and during training (before its last round) stops it.
  void check_target(std::uint32_t t, const round_status& st, train_result& res) {
    if (!opt_.target_accuracy || res.target || !(st.eval.avg_node_accuracy >= *opt_.target_accuracy)) return;
    std::uint64_t mine = 0;
    for (const auto v : steps_) mine += v;
    train_result::target_reached hit;
    hit.accuracy = st.eval.avg_node_accuracy;
    hit.rounds = res.rounds_done;
    hit.bytes = st.report.bytes_sent;
    hit.local_steps = detail::sum(*group_, mine, "the sum of the local steps (the target is reached)");
    hit.seconds = std::chrono::duration<double>(run_clock::now() - run_start_).count();
    hit.train_seconds = train_seconds_;
    hit.eval_seconds = eval_seconds_;
    res.target = hit;
    if (t + 1 < opt_.train_rounds) target_stop_pending_ = true;
  }

  /// Training stops before its planned end (the target is reached); the rounds without local
  /// step start at schedule round `next`: as many as final_rounds_from says there (the plan's
  /// count without it). With none, the last evaluation runs now.
  template <class A>
  void stop_training(A& alg, std::uint32_t next, round_status& st, train_result& res) {
    target_stop_pending_ = false;
    target_stopped_ = true;
    const std::uint32_t k = opt_.final_rounds_from ? opt_.final_rounds_from(next) : opt_.rounds - opt_.train_rounds;
    round_offset_ = next - opt_.train_rounds;  // modulo 2^32: the schedule's round of phase round train_rounds
    end_ = opt_.train_rounds + k;
    if (k > 0) return;
    drain(alg);
    if (be_.training_ended) be_.training_ended();
    evaluate_now(alg, opt_.train_rounds - 1, true, true, st);
    st.wall_seconds = std::chrono::duration<double>(run_clock::now() - opt_.start).count();
    stopped(st, res);
    if (cb_.progress) cb_.progress(st);
  }

  /// The asynchronous policy over several processes (asynchronous.hpp): training on the global
  /// step budget, each process at its own pace, meeting the others at evaluations and
  /// checkpoints. Afterwards every node continues at the same round (common_round) for the
  /// rounds after training.
  template <class A>
  void run_asynchronous(A& alg, train_result& res, round_status& st, std::uint32_t& ckpt_prev) {
    using clock = run_clock;
    std::uint64_t mine = 0;
    for (const auto s : steps_) mine += s / opt_.local_steps;  // node-rounds
    std::uint32_t t = res.resumed_at > 0 ? async_round_ : 0;
    const bool spent = detail::run_asynchronous(
        *group_, opt_, res.resumed_at, mine, t,
        [&](std::uint32_t round, std::uint32_t phase) {
          const auto r0 = clock::now();
          step(alg, round, phase, phase);
          train_seconds_ += std::chrono::duration<double>(clock::now() - r0).count();
        },
        [&](std::uint32_t next, std::uint32_t mark, bool evaluates, bool checkpoints, bool last) {
          async_round_ = next;
          // no drain here: an evaluation of each node's own model needs none (the nodes stay
          // asynchronous through it); the averaged model's and a checkpoint's drain their own
          return after_round(alg, mark, evaluates, checkpoints, last, st, res, ckpt_prev) && !target_stop_pending_;
        });
    if (!spent && !target_stop_pending_) return;
    async_round_ = t;
    // the rounds after training continue where every node can: the first round none has posted
    drain(alg);
    const auto common = detail::continue_together(alg);
    if (common) round_offset_ = *common - opt_.train_rounds;
    if (target_stop_pending_) stop_training(alg, common.value_or(t), st, res);
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

  /// Round t (the schedule's round) of phase round `phase` (they differ only after asynchronous
  /// training or a target's stop), whose local steps follow the learning rate of round
  /// `lr_round`'s: p_i at every node this process runs (on the algorithm's threads), then the
  /// round. Deferred rounds after training wait for every envelope (wait_all): a node must not
  /// run the final gossip ahead of its peers.
  template <class A>
  void step(A& alg, std::uint32_t t, std::uint32_t phase, std::uint32_t lr_round) {
    auto round = [&](std::span<const std::span<const T>> dirs, double gamma) {
      if constexpr (requires { alg.round(t, dirs, gamma, phase, true); })
        alg.round(t, dirs, gamma, phase, deferred(alg) && phase >= opt_.train_rounds);
      else
        alg.round(t, dirs, gamma);
    };
    if (!alg.trains(phase)) {
      round(std::span<const std::span<const T>>(), 0.0);
      return;
    }
    for (auto& s : steps_) s += opt_.local_steps;
    if (opt_.local_steps > 1 || outer().active()) {
      local_steps(alg, t, lr_round);
      round(std::span<const std::span<const T>>(views_), 1.0);
      return;
    }
    const std::size_t d = alg.dim();
    if (xh_.size() < alg.workers()) xh_.resize(alg.workers());
    const std::uint32_t first = group_->first_node();
    if constexpr (detail::tracks_gradients<A, T>)
      detail::tracked_directions<T>(alg, be_, t, first, xh_, losses_.last);
    else
      alg.for_each_node([&](std::size_t li, std::size_t w) {
        if (xh_[w].size() != d) xh_[w].resize(d);
        alg.model(li, std::span<T>(xh_[w]));
        const auto node = static_cast<std::uint32_t>(first + li);
        losses_.last[li] = be_.step(w, node, t, xh_[w], be_.direction(node));
      });
    views_.clear();
    for (std::size_t li = 0; li < alg.num_nodes(); ++li)
      views_.emplace_back(be_.direction(static_cast<std::uint32_t>(first + li)));
    round(std::span<const std::span<const T>>(views_), opt_.lr(lr_round));
  }

  detail::outer_step_settings outer() const noexcept { return {opt_.outer_lr, opt_.outer_momentum}; }

  /// Round t's H local steps and outer step at every node this process runs (local_steps.hpp),
  /// on a copy w_i of the numerator x_i, local step h at the rate of local step lr_round H + h.
  /// The round then takes x_i - w_i as its direction with gamma 1 (x_i' = w_i): views_ holds them.
  template <class A>
  void local_steps(A& alg, std::uint32_t t, std::uint32_t lr_round) {
    const std::size_t d = alg.dim(), ln = alg.num_nodes();
    const std::uint32_t H = opt_.local_steps, first = group_->first_node();
    if (work_.size() != ln) work_.assign(ln, std::vector<T>(d));
    if (opt_.outer_momentum > 0 && outer_m_.size() != ln) outer_m_.assign(ln, std::vector<T>(d, T(0)));
    if (xh_.size() < alg.workers()) xh_.resize(alg.workers());
    alg.for_each_node([&](std::size_t li, std::size_t w) {
      auto& cur = xh_[w];
      if (cur.size() != d) cur.resize(d);
      const std::span<T> xw(work_[li]);
      const double u = detail::numerator<T>(alg, li, xw);
      const auto node = static_cast<std::uint32_t>(first + li);
      const std::span<T> dir = be_.direction(node);
      losses_.last[li] = detail::local_steps<T>(
          xw, u, std::span<T>(cur), dir, H,
          [&](std::uint32_t h, std::span<const T> model) { return be_.step(w, node, t * H + h, model, dir); },
          [&](std::uint32_t h) { return opt_.lr(lr_round * H + h); });
      if (outer().active()) {
        alg.model(li, std::span<T>(cur));  // zs_i: the round's start, de-biased (x_i is unchanged)
        detail::outer_step<T>(xw, u, std::span<const T>(cur), outer_m_.empty() ? std::span<T>() : std::span<T>(outer_m_[li]),
                              outer());
      }
      detail::numerator<T>(alg, li, std::span<T>(cur));
      detail::direction_from<T>(xw, std::span<const T>(cur));
    });
    views_.assign(work_.begin(), work_.end());
  }

  /// Checkpoint this process's nodes after round next - 1 (trainer_checkpoint.hpp), and commit it
  /// (run_directories.hpp); `prev`: the previous checkpoint's round.
  template <class A>
  void save(A& alg, std::uint32_t next, std::uint32_t prev) {
    drain(alg);  // a checkpoint holds no envelope in flight
    const detail::async_section pace{async_round_, round_offset_, steps_};
    const auto bytes = detail::rank_file_bytes<T>(
        settings_, *group_, next, {losses_.first, train_seconds_, eval_seconds_, bytes_at_training_end_, losses_.last},
        be_, alg, deferred(alg) ? &pace : nullptr, eval_bytes_, std::span<const std::vector<T>>(outer_m_));
    dirs_.commit(*group_, settings_, opt_.checkpoint_dir, next, prev, bytes);
  }

  /// Restore this rank's file of round `round`, on every process or (an error on every process)
  /// on none: the algorithm's state before is kept in memory until every process has read and
  /// checked its file, and put back when one of them refused its own.
  template <class A>
  void resume(A& alg, std::uint32_t round) {
    std::vector<std::byte> before;
    bool alg_changed = false;
    std::optional<detail::rank_file_state<T>> loaded;
    std::exception_ptr failed;
    try {
      checkpoint_writer w;
      alg.save(w);
      before = w.finish();
      const std::string path = checkpoint_directory(opt_.resume_dir).rank_file(round, group_->rank());
      const auto bytes = read_file_bytes(path);
      checkpoint_reader r(bytes, path);
      loaded = detail::read_rank_file<T>(r, settings_, *group_, round, be_, alg, deferred(alg), opt_.train_rounds,
                                         alg_changed);
    } catch (...) {
      failed = std::current_exception();
    }
    if (!detail::any_failed(*group_, failed)) {
      apply(std::move(*loaded), round);
      return;
    }
    if (alg_changed) {  // this process's file was good (or refused after the algorithm's part)
      checkpoint_reader r(before, "the state before the resume");
      alg.restore(r);
    }
    dirs_.fail_everywhere(failed, "resume " + opt_.resume_dir);
  }

  /// Apply what the rank file of round `round` holds besides the algorithm's state.
  void apply(detail::rank_file_state<T>&& f, std::uint32_t round) {
    eval_bytes_ = f.local.eval_bytes;
    outer_m_ = std::move(f.local.outer_m);
    steps_ = std::move(f.pace.steps);
    async_round_ = f.pace.next_round;
    round_offset_ = f.pace.round_offset;
    losses_.first = f.trainer.first_loss;
    losses_.have_first = true;
    train_seconds_ = f.trainer.train_seconds;
    eval_seconds_ = f.trainer.eval_seconds;
    // the bytes before this run's first round without local step, when the checkpoint is past it
    // (a run with more training rounds counts them itself when it gets there)
    if (f.trainer.bytes_at_training_end && round > opt_.train_rounds)
      bytes_at_training_end_ = f.trainer.bytes_at_training_end;
    losses_.last = std::move(f.trainer.last_loss);
    if (f.apply_backend) f.apply_backend();
  }

  G* group_;
  run_settings settings_;
  trainer_options opt_;
  local_training<T> be_;
  trainer_callbacks cb_;
  bool started_ = false;
  std::uint32_t start_ = 0;
  detail::run_directories dirs_;           ///< rank 0's locks, from start_round() to the end of run()
  detail::run_losses losses_;              ///< this process's nodes' losses and the run's first mean loss
  double train_seconds_ = 0.0, eval_seconds_ = 0.0;
  std::optional<std::uint64_t> bytes_at_training_end_;  ///< over every process, at round train_rounds
  std::vector<std::uint64_t> steps_;      ///< local steps of this process's nodes
  std::uint32_t async_round_ = 0;         ///< asynchronous training: this process's next round
  std::uint32_t round_offset_ = 0;        ///< the schedule's round - the phase round (after asynchronous training)
  std::vector<std::vector<T>> xh_;        ///< xh_i, one per worker thread
  std::vector<std::vector<T>> work_;      ///< local steps: each node's stepped numerator, then its direction
  std::vector<std::vector<T>> outer_m_;   ///< the outer step's momentum m_i per node (outer_momentum > 0)
  double final_eval_seconds_ = 0.0;
  std::uint64_t eval_bytes_ = 0, final_eval_bytes_ = 0;
  std::uint32_t end_ = 0;                 ///< the phase round the run ends at (earlier after a target's stop)
  std::uint32_t avg_mark_ = 0;            ///< rounds / eval_average_every at the last averaged evaluation
  run_clock::time_point run_start_{};     ///< the first round's start
  bool target_stop_pending_ = false;      ///< the target was reached: training stops after this round
  bool target_stopped_ = false;           ///< training stopped early: the phase rounds run ahead
  std::vector<std::span<const T>> views_;  ///< the directions handed to the round
};

}  // namespace v0
}  // namespace sparsepush
