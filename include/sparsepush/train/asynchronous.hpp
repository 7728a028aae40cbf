// sparsepush/train/asynchronous.hpp: the pace of asynchronous training over several processes.
// Each process runs its own rounds, never waiting for the others, until the nodes together have
// taken n x train_rounds local steps; a nonblocking sum of the step count tells every process
// alike where the run evaluates, checkpoints and ends. The trainer supplies the rounds.
#pragma once

#include <algorithm>
#include <cstdint>

#include "process_group.hpp"
#include "types.hpp"

namespace sparsepush {
inline namespace v0 {
namespace detail {

/// The asynchronous policy over several processes (unbounded staleness): each process runs its
/// own rounds, never waiting for the others, until the nodes together have taken
/// n x opt.train_rounds local steps. The count travels in a nonblocking sum (start_sum/test_sum)
/// that a process starts after its round when none is pending and tests after every round: no
/// collective inside a round. Every process sees the same sequence of sums, so all decide alike
/// where the run evaluates (every eval_every x n steps), checkpoints (every checkpoint_every x n)
/// and ends; there they meet. The status's round is then the global count / n. A fast node
/// takes more steps over its shard, a slow one fewer; the learning rate follows each process's
/// own round.
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
  std::uint64_t mine = steps_done;
  std::uint64_t next_eval = (resumed_at / opt.eval_every + 1) * eval_steps;
  std::uint64_t next_ckpt = (resumed_at / opt.checkpoint_every + 1) * ckpt_steps;
  const bool final_rounds = opt.rounds > opt.train_rounds;
  bool pending = false;
  for (;;) {
    const std::uint32_t pr = std::min(t, opt.train_rounds - 1);
    step(t, pr);
    ++t;
    mine += ln;
    std::uint64_t g = 0;
    if constexpr (requires(std::uint64_t& o) { group.start_sum(mine); group.test_sum(o); }) {
      if (!pending) {
        group.start_sum(mine);
        pending = true;
      }
      if (!group.test_sum(g)) continue;
      pending = false;
    } else {  // a group without a nonblocking sum: a blocking one every round
      g = detail::sum(group, mine, "the count of local steps");
    }
    const bool done = g >= budget;
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
