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
// The values a run takes and returns are in types.hpp, the trainer's part of a checkpoint in
// trainer_checkpoint.hpp, the pace of asynchronous training in asynchronous.hpp.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <exception>
#include <filesystem>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include "../algorithm/report.hpp"
#include "../clock.hpp"
#include "../gossip/policy.hpp"
#include "asynchronous.hpp"
#include "checkpoints.hpp"
#include "evaluate.hpp"
#include "process_group.hpp"
#include "settings.hpp"
#include "trainer_checkpoint.hpp"
#include "types.hpp"
// the algorithms the trainer drives, for the code that includes it
#include "../algorithm/centralized.hpp"
#include "../algorithm/choco.hpp"
#include "../algorithm/sparse_push.hpp"

namespace sparsepush {
inline namespace v0 {

/// The driver of one run over process group G (single_process, or mpi_process_group).
template <tensor_element T, process_group G>
class trainer {
 public:
  /// A run over `group` with `settings` (compared across processes and stored in checkpoints), the
  /// options `opt`, the local training `backend` and callbacks `cb`. Throws config_error for
  /// settings out of range: no rounds, local_steps 0, outer_lr not finite and positive,
  /// outer_momentum outside [0, 1), target_accuracy outside (0, 1], no lr schedule, a backend without
  /// step, direction or accuracy, eval_split without share_accuracy, a resume round without a
  /// resume directory.
  trainer(G& group, run_settings settings, trainer_options opt, local_training<T> backend, trainer_callbacks cb = {})
      : group_(&group), settings_(std::move(settings)), opt_(std::move(opt)), be_(std::move(backend)),
        cb_(std::move(cb)) {
    if (opt_.rounds == 0) throw config_error("a run needs at least one round");
    if (opt_.local_steps == 0) throw config_error("trainer: local_steps must be at least 1");
    if (!(opt_.outer_lr > 0) || !std::isfinite(opt_.outer_lr))
      throw config_error("trainer: outer_lr must be a finite number > 0, got " + std::to_string(opt_.outer_lr));
    if (!(opt_.outer_momentum >= 0 && opt_.outer_momentum < 1))
      throw config_error("trainer: outer_momentum must be in [0, 1), got " + std::to_string(opt_.outer_momentum));
    if (opt_.target_accuracy && !(*opt_.target_accuracy > 0 && *opt_.target_accuracy <= 1))
      throw config_error("trainer: target_accuracy must be in (0, 1], got " + std::to_string(*opt_.target_accuracy));
    if (opt_.train_rounds == 0 || opt_.train_rounds > opt_.rounds) opt_.train_rounds = opt_.rounds;
    if (!opt_.lr) throw config_error("trainer: no learning-rate schedule (trainer_options::lr)");
    if (!be_.step || !be_.direction || !be_.accuracy)
      throw config_error("trainer: local_training needs step, direction and accuracy");
    if (opt_.eval_split && !be_.share_accuracy)
      throw config_error("trainer: eval_split needs local_training::share_accuracy (each node's test on its share)");
    if (opt_.eval_every == 0) opt_.eval_every = std::max<std::uint32_t>(1, opt_.rounds / 10);
    if (opt_.checkpoint_every == 0) opt_.checkpoint_every = opt_.eval_every;
    if (opt_.resume_round > 0 && opt_.resume_dir.empty())
      throw config_error("trainer: resume_round " + std::to_string(opt_.resume_round) + " needs a resume_dir");
    if (opt_.checkpoint_dir.empty()) opt_.checkpoint_dir = opt_.resume_dir;
    last_loss_.assign(group.local_nodes(), 0.0);
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
    std::uint32_t round = 0;
    std::exception_ptr failed;
    try {
      if (!opt_.resume_dir.empty()) checkpoint_directory(opt_.resume_dir).require_existing("resume");
      if (!opt_.checkpoint_dir.empty()) checkpoint_directory(opt_.checkpoint_dir).prepare();
      same_dir_ = !opt_.resume_dir.empty() && same_directory(opt_.resume_dir, opt_.checkpoint_dir);
      if (group_->rank() == 0) {
        if (!opt_.checkpoint_dir.empty()) ckpt_lock_ = checkpoint_directory(opt_.checkpoint_dir).lock();
        if (!opt_.resume_dir.empty() && !same_dir_) resume_lock_ = checkpoint_directory(opt_.resume_dir).lock();
        if (!opt_.resume_dir.empty())
          round = detail::check_manifest(checkpoint_directory(opt_.resume_dir).read_manifest(), settings_,
                                         group_->ranks(), opt_);
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
    end_ = opt_.rounds;
    if (opt_.eval_average_every) avg_mark_ = res.resumed_at / opt_.eval_average_every;
    run_start_ = clock::now();
    res.startup_seconds = std::chrono::duration<double>(run_start_ - opt_.start).count();
    // the asynchronous policy over several processes: training runs on the global step budget,
    // each process at its own pace; the rounds after it (SCSP's final gossip) continue below
    if (asynchronous(alg) && group_->ranks() > 1 && res.resumed_at < opt_.train_rounds) {
      run_asynchronous(alg, res, st, ckpt_prev);
      first_round = opt_.train_rounds;
    }
    for (std::uint32_t t = first_round; t < end_ && !res.diverged; ++t) {
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
    res.final_eval_seconds = final_eval_seconds_;
    res.eval_bytes = eval_bytes_;
    res.final_eval_bytes = final_eval_bytes_;
    gather_pace(alg, res);
    return res;
  }

 private:
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
    // after a target stopped training the phase rounds run ahead of the rounds run
    res.rounds_done = target_stopped_ ? t + 1 + round_offset_ : t + 1;
    st.round = res.rounds_done;
    st.training = t < opt_.train_rounds;
    st.first_loss = first_loss_;  // 0 until known
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
    std::uint32_t at = t;
    if constexpr (requires { alg.continue_at(0u); }) {
      at = alg.common_round();
      alg.continue_at(at);
      round_offset_ = at - opt_.train_rounds;
    }
    if (target_stop_pending_) stop_training(alg, at, st, res);
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
    if (opt_.local_steps > 1 || outer_step()) {
      local_steps(alg, t, lr_round);
      round(std::span<const std::span<const T>>(views_), 1.0);
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
    round(std::span<const std::span<const T>>(views_), opt_.lr(lr_round));
  }

  bool outer_step() const noexcept { return opt_.outer_lr != 1.0 || opt_.outer_momentum != 0.0; }

  /// Node i's push-sum numerator x_i into out (the model itself where the algorithm keeps no
  /// weight), and its weight u_i (1 there).
  template <class A>
  static double numerator(const A& alg, std::size_t li, std::span<T> out) {
    if constexpr (requires { alg.group().node(li).x(); alg.group().node(li).u(); }) {
      const auto& node = alg.group().node(li);
      const auto x = std::span<const T>(node.x());
      std::copy(x.begin(), x.end(), out.begin());
      return node.u();
    } else {
      alg.model(li, out);
      return 1.0;
    }
  }

  /// Round t's H local steps and outer step at every node this process runs (docs/design/algorithms.md,
  /// "Local steps and an outer step"), on a copy w_i of the numerator x_i (u_i does not change
  /// before the mix): for h < H, p = step(w_i / u_i), w_i -= gamma_h p with gamma_h the rate of
  /// local step lr_round H + h; then, with an outer step, p_o = zs_i - w_i / u_i (zs_i = x_i / u_i,
  /// the round's start), m_i <- beta m_i + p_o, w_i <- u_i (zs_i - gamma_o (p_o + beta m_i)).
  /// The round then takes x_i - w_i as its direction with gamma 1 (x_i' = w_i): views_ holds them.
  template <class A>
  void local_steps(A& alg, std::uint32_t t, std::uint32_t lr_round) {
    const std::size_t d = alg.dim(), ln = alg.num_nodes();
    const std::uint32_t H = opt_.local_steps, first = group_->first_node();
    if (work_.size() != ln) work_.assign(ln, std::vector<T>(d));
    if (opt_.outer_momentum > 0 && outer_m_.size() != ln) outer_m_.assign(ln, std::vector<T>(d, T(0)));
    if (xh_.size() < alg.workers()) xh_.resize(alg.workers());
    const double beta = opt_.outer_momentum, go = opt_.outer_lr;
    alg.for_each_node([&](std::size_t li, std::size_t w) {
      auto& cur = xh_[w];
      if (cur.size() != d) cur.resize(d);
      std::vector<T>& xw = work_[li];
      const double u = numerator(alg, li, std::span<T>(xw));
      const auto node = static_cast<std::uint32_t>(first + li);
      const std::span<T> dir = be_.direction(node);
      double loss = 0;
      for (std::uint32_t h = 0; h < H; ++h) {
        if (u == 1.0) std::copy(xw.begin(), xw.end(), cur.begin());
        else debias<T>(std::span<const T>(xw), u, std::span<T>(cur));
        loss += be_.step(w, node, t * H + h, cur, dir);
        const T g = static_cast<T>(opt_.lr(lr_round * H + h));
        for (std::size_t j = 0; j < d; ++j) xw[j] -= g * dir[j];
      }
      last_loss_[li] = loss / H;
      if (outer_step()) {
        alg.model(li, std::span<T>(cur));  // zs_i: the round's start, de-biased (x_i is unchanged)
        T* m = outer_m_.empty() ? nullptr : outer_m_[li].data();
        for (std::size_t j = 0; j < d; ++j) {
          const double zs = static_cast<double>(cur[j]);
          const double po = zs - static_cast<double>(xw[j]) / u;
          double mj = 0;
          if (m) {
            mj = beta * static_cast<double>(m[j]) + po;
            m[j] = static_cast<T>(mj);
          }
          xw[j] = static_cast<T>(u * (zs - go * (po + beta * mj)));
        }
      }
      numerator(alg, li, std::span<T>(cur));  // the direction x_i - w_i
      for (std::size_t j = 0; j < d; ++j) xw[j] = cur[j] - xw[j];
    });
    views_.assign(work_.begin(), work_.end());
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
    detail::write_trainer_section(w, settings_, *group_, next,
                                  {first_loss_, train_seconds_, eval_seconds_, bytes_at_training_end_, last_loss_});
    if (be_.save) be_.save(w);
    alg.save(w);
    if (deferred(alg)) detail::write_async_section(w, {async_round_, round_offset_, steps_});
    w.section("LOCL");  // the evaluations' bytes so far, and the outer step's momentum
    w.u64(eval_bytes_);
    w.u32(static_cast<std::uint32_t>(outer_m_.size()));
    for (const auto& m : outer_m_) w.values(std::span<const T>(m));
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
    detail::trainer_section saved = detail::read_trainer_section(r, settings_, *group_, round);
    std::function<void()> apply_backend;
    if (be_.restore) apply_backend = be_.restore(r);
    alg.restore(r);  // checks everything before it changes anything
    alg_changed = true;
    // the step counts: a deferred policy's own section; in lockstep every node took every
    // training round
    detail::async_section pace{round, 0,
                               std::vector<std::uint64_t>(group_->local_nodes(), std::min(round, opt_.train_rounds))};
    if (deferred(alg)) detail::read_async_section(r, pace);
    std::uint64_t eval_bytes = 0;
    std::vector<std::vector<T>> outer_m;
    if (r.next_tag() == "LOCL") {  // absent from the checkpoints of 0.5 and before
      r.section("LOCL");
      eval_bytes = r.u64("the evaluations' bytes");
      const std::uint32_t kept = r.u32("the outer momentum's node count");
      if (kept != 0 && kept != group_->local_nodes())
        r.fail("holds the outer momentum of " + std::to_string(kept) + " nodes; this process runs " +
               std::to_string(group_->local_nodes()));
      for (std::uint32_t k = 0; k < kept; ++k) outer_m.push_back(r.values<T>("outer momentum", alg.dim()));
      for (const auto& m : outer_m)
        if (m.size() != alg.dim())
          r.fail("holds an outer momentum of " + std::to_string(m.size()) + " elements for a model of " +
                 std::to_string(alg.dim()));
    }
    r.done();
    return [this, round, saved = std::move(saved), apply_backend = std::move(apply_backend), pace = std::move(pace),
            eval_bytes, outer_m = std::move(outer_m)]() mutable {
      eval_bytes_ = eval_bytes;
      outer_m_ = std::move(outer_m);
      steps_ = pace.steps;
      async_round_ = pace.next_round;
      round_offset_ = pace.round_offset;
      first_loss_ = saved.first_loss;
      have_first_ = true;
      train_seconds_ = saved.train_seconds;
      eval_seconds_ = saved.eval_seconds;
      // the bytes before this run's first round without local step, when the checkpoint is past it
      // (a run with more training rounds counts them itself when it gets there)
      if (saved.bytes_at_training_end && round > opt_.train_rounds) bytes_at_training_end_ = saved.bytes_at_training_end;
      last_loss_ = saved.last_loss;
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
