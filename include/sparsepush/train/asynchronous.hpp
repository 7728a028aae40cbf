// sparsepush/train/asynchronous.hpp: the pace of asynchronous training over several processes.
// Each process runs its own rounds, never waiting for the others, until the nodes together have
// taken their budget of n x train_rounds rounds (never more, and less by under one round of every
// node); a nonblocking sum of the round count tells every process alike where the run evaluates,
// checkpoints and ends. The trainer supplies the rounds. Here too: what the trainer asks of an
// algorithm's waiting policy (deferred, asynchronous, the drain, the round to continue at).
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <optional>
#include <thread>

#include "../gossip/policy.hpp"

#include "process_group.hpp"
#include "types.hpp"

namespace sparsepush {
inline namespace v0 {
namespace detail {

/// Whether algorithm alg runs deferred rounds (a waiting policy other than lockstep).
template <class A>
bool deferred_policy(const A& alg) {
  if constexpr (requires { alg.policy().lockstep(); }) return !alg.policy().lockstep();
  else return false;
}

/// Whether algorithm alg runs the asynchronous policy.
template <class A>
bool asynchronous_policy(const A& alg) {
  if constexpr (requires { alg.policy().kind; }) return alg.policy().kind == wait_kind::asynchronous;
  else return false;
}

/// Mix every envelope in flight (a no-op in lockstep): before an evaluation, a checkpoint and the
/// end. Collective.
template <class A>
void drain_all(A& alg) {
  if constexpr (requires { alg.drain(); }) alg.drain();
}

/// After asynchronous training, drained: every node continues at the first round none has posted
/// (alg.common_round()), and that round is returned; nothing where the algorithm has no
/// continue_at (its nodes ran the same rounds).
template <class A>
std::optional<std::uint32_t> continue_together(A& alg) {
  if constexpr (requires { alg.continue_at(0u); }) {
    const std::uint32_t at = alg.common_round();
    alg.continue_at(at);
    return at;
  } else {
    return std::nullopt;
  }
}

/// The asynchronous policy over several processes (unbounded staleness): each process runs its
/// own rounds, never waiting for the others, until the nodes together have taken their budget
/// B = n x opt.train_rounds node-rounds (each of opt.local_steps local steps). The count travels
/// in a nonblocking sum (start_sum/test_sum) that a process starts after its round when none is
/// pending and tests after every round: no collective inside a round. Every process sees the
/// same sequence of sums, so all decide alike where the run evaluates (every eval_every x n
/// node-rounds), checkpoints (every checkpoint_every x n) and ends; there they meet. The status's
/// round is then the global count / n. A fast node takes more steps over its shard, a slow one
/// fewer; the learning rate follows each process's own round.
///
/// The budget is never overrun: when the k-th sum completes with the count g_k, each process may
/// run A_k = floor((B - g_k) / n) rounds beyond the count it posted in that sum, and waits for
/// the next sum when it gets there. Summed over the processes (n_p nodes each) that is at most
/// g_k + n A_k <= B whatever each one ran while the sum was in flight. The run ends at the first
/// sum that leaves no round (A_k = 0): the nodes together took more than B - n and at most B
/// node-rounds. Far from the end A_k is large and no process waits.
///
/// `t`: the process's round to start at, and on return its next round. `steps_done`: the local
/// steps this process's nodes took before (a resumed run's). step(t, phase) runs the process's
/// round t at phase round `phase`; meet(next, t, evaluates, checkpoints, last) is where the
/// processes meet (`next`: this process's next round; t: the phase round the status reports)
/// and returns false when the run stops there (the guard). Returns false when meet stopped the
/// run, true when the step budget is spent.
template <process_group G, class Step, class Meet>
bool run_asynchronous(G& group, const trainer_options& opt, std::uint32_t resumed_at, std::uint64_t steps_done,
                      std::uint32_t& t, Step&& step, Meet&& meet) {
  const std::uint64_t n = group.total_nodes(), ln = group.local_nodes();
  const std::uint64_t budget = n * opt.train_rounds;
  const std::uint64_t eval_steps = n * opt.eval_every, ckpt_steps = n * opt.checkpoint_every;
  std::uint64_t mine = steps_done;  // this process's node-rounds
  std::uint64_t next_eval = (resumed_at / opt.eval_every + 1) * eval_steps;
  std::uint64_t next_ckpt = (resumed_at / opt.checkpoint_every + 1) * ckpt_steps;
  const bool final_rounds = opt.rounds > opt.train_rounds;
  bool pending = false;
  // the rounds this process may have run before the next sum completes: from a blocking sum at
  // the start (a resumed run may start close to the end of its budget)
  std::uint64_t posted = t;        // its round count when it posted the pending sum
  const std::uint64_t g0 = detail::sum(group, mine, "the count of local steps at the start");
  std::uint64_t cap = posted + (budget > g0 ? budget - g0 : 0) / n;
  for (;;) {
    if (t < cap) {
      const std::uint32_t pr = std::min(t, opt.train_rounds - 1);
      step(t, pr);
      ++t;
      mine += ln;
    }
    std::uint64_t g = 0;
    if constexpr (requires(std::uint64_t& o) { group.start_sum(mine); group.test_sum(o); }) {
      if (!pending) {
        group.start_sum(mine);
        pending = true;
        posted = t;
      }
      if (t < cap) {
        if (!group.test_sum(g)) continue;
      } else {  // at its share of the budget: wait for the others' counts
        while (!group.test_sum(g)) std::this_thread::sleep_for(std::chrono::microseconds(100));
      }
      pending = false;
    } else {  // a group without a nonblocking sum: a blocking one every round
      g = detail::sum(group, mine, "the count of local steps");
      posted = t;
    }
    const std::uint64_t rounds_left = (budget > g ? budget - g : 0) / n;
    cap = posted + rounds_left;
    const bool done = rounds_left == 0;
    const bool evaluates = done || g >= next_eval;
    const bool checkpoints = !done && !opt.checkpoint_dir.empty() && g >= next_ckpt;
    if (!evaluates && !checkpoints) continue;
    const auto mark = static_cast<std::uint32_t>(done ? opt.train_rounds : std::min<std::uint64_t>(g / n, opt.train_rounds - 1));
    if (!meet(t, mark - 1, evaluates, checkpoints, done && !final_rounds)) return false;
    next_eval = (g / eval_steps + 1) * eval_steps;
    next_ckpt = (g / ckpt_steps + 1) * ckpt_steps;
    if (done) return true;
  }
}

}  // namespace detail
}  // namespace v0
}  // namespace sparsepush
