// sparsepush/train/option_checks.hpp: the trainer's options checked once, at construction, and
// their defaults filled in: train_rounds (every round), eval_every (about 10 evaluations a run),
// checkpoint_every (every evaluation) and checkpoint_dir (the resume directory).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>

#include "../config.hpp"
#include "../tensor.hpp"
#include "types.hpp"

namespace sparsepush {
inline namespace v0 {
namespace detail {

/// `opt` with its defaults filled in. Throws config_error for settings out of range: no rounds,
/// local_steps 0, outer_lr not finite and positive, outer_momentum outside [0, 1),
/// target_accuracy outside (0, 1], no lr schedule, a backend `be` without step, direction or
/// accuracy, eval_split without share_accuracy, a resume round without a resume directory.
template <tensor_element T>
trainer_options completed_options(trainer_options opt, const local_training<T>& be) {
  if (opt.rounds == 0) throw config_error("a run needs at least one round");
  if (opt.local_steps == 0) throw config_error("trainer: local_steps must be at least 1");
  if (!(opt.outer_lr > 0) || !std::isfinite(opt.outer_lr))
    throw config_error("trainer: outer_lr must be a finite number > 0, got " + std::to_string(opt.outer_lr));
  if (!(opt.outer_momentum >= 0 && opt.outer_momentum < 1))
    throw config_error("trainer: outer_momentum must be in [0, 1), got " + std::to_string(opt.outer_momentum));
  if (opt.target_accuracy && !(*opt.target_accuracy > 0 && *opt.target_accuracy <= 1))
    throw config_error("trainer: target_accuracy must be in (0, 1], got " + std::to_string(*opt.target_accuracy));
  if (opt.train_rounds == 0 || opt.train_rounds > opt.rounds) opt.train_rounds = opt.rounds;
  if (!opt.lr) throw config_error("trainer: no learning-rate schedule (trainer_options::lr)");
  if (!be.step || !be.direction || !be.accuracy)
    throw config_error("trainer: local_training needs step, direction and accuracy");
  if (opt.eval_split && !be.share_accuracy)
    throw config_error("trainer: eval_split needs local_training::share_accuracy (each node's test on its share)");
  if (opt.eval_every == 0) opt.eval_every = std::max<std::uint32_t>(1, opt.rounds / 10);
  if (opt.checkpoint_every == 0) opt.checkpoint_every = opt.eval_every;
  if (opt.resume_round > 0 && opt.resume_dir.empty())
    throw config_error("trainer: resume_round " + std::to_string(opt.resume_round) + " needs a resume_dir");
  if (opt.checkpoint_dir.empty()) opt.checkpoint_dir = opt.resume_dir;
  return opt;
}

}  // namespace detail
}  // namespace v0
}  // namespace sparsepush
