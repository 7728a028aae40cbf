// sparsepush/train/trainer_checkpoint.hpp: the trainer's own part of a rank file (the run it
// belongs to, the rank layout, and what train_result carries over a resume; a deferred policy's
// pace in a section of its own) written and read back, and the check of a directory's manifest
// against the run that resumes from it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "../checkpoint.hpp"
#include "checkpoints.hpp"
#include "process_group.hpp"
#include "settings.hpp"
#include "types.hpp"

namespace sparsepush {
inline namespace v0 {
namespace detail {

/// The trainer's section of a rank file. TRN2 carries what train_result reports beyond the
/// algorithm's state: the bytes sent before the rounds without local step (a resume inside
/// SCSP's final rounds reports the final phase's bytes) and the evaluation time. TRNR, its
/// predecessor, is named in the refusal, never misread.
inline constexpr const char* trainer_section_tag = "TRN2";
inline constexpr const char* old_trainer_section_tag = "TRNR";
/// The section a deferred policy adds to a rank file: this process's next round, the offset of
/// the rounds after training, and its nodes' step counts.
inline constexpr const char* async_section_tag = "ASYN";

/// What the trainer's section holds besides the run's settings, its round and the rank layout.
struct trainer_section {
  double first_loss = 0.0;                  ///< the run's first mean loss
  double train_seconds = 0.0, eval_seconds = 0.0;
  std::optional<std::uint64_t> bytes_at_training_end;  ///< over every process, at round train_rounds
  std::vector<double> last_loss;            ///< this process's nodes' losses of their last local step
};

/// What the section of a deferred policy holds.
struct async_section {
  std::uint32_t next_round = 0;             ///< this process's next round
  std::uint32_t round_offset = 0;           ///< the schedule's round - the phase round (after asynchronous training)
  std::vector<std::uint64_t> steps;         ///< local steps of this process's nodes
};

/// Write the trainer's section of this process's rank file of round `round` (the next round).
template <process_group G>
void write_trainer_section(checkpoint_writer& w, const run_settings& settings, const G& group, std::uint32_t round,
                           const trainer_section& s) {
  w.section(trainer_section_tag);
  w.str(settings.text());
  w.u32(round);
  w.u32(static_cast<std::uint32_t>(group.rank()));
  w.u32(static_cast<std::uint32_t>(group.ranks()));
  w.u64(group.first_node());
  w.u64(group.local_nodes());
  w.f64(s.first_loss);  // known: a checkpoint's round gathers the losses
  w.f64(s.train_seconds);
  w.f64(s.eval_seconds);
  w.u32(s.bytes_at_training_end ? 1u : 0u);
  w.u64(s.bytes_at_training_end.value_or(0));
  w.values(std::span<const double>(s.last_loss));
}

/// Read the trainer's section of this process's rank file of round `round` and check that it
/// belongs to this run (settings, round, rank layout); changes nothing.
template <process_group G>
trainer_section read_trainer_section(checkpoint_reader& r, const run_settings& settings, const G& group,
                                     std::uint32_t round) {
  if (r.next_tag() == old_trainer_section_tag)
    r.fail(std::string("was written by an older sparsepush (trainer section '") + old_trainer_section_tag +
           "', this build reads '" + trainer_section_tag + "'): it cannot be resumed by this build; start the run again");
  r.section(trainer_section_tag);
  const std::string was = r.str("settings", std::size_t{1} << 16);
  if (was != settings.text())
    r.fail("was written with other settings: " + settings.diff_from(run_settings::parse(was)));
  if (r.u32("round") != round) r.fail("holds another round than its manifest");
  if (r.u32("rank") != static_cast<std::uint32_t>(group.rank()) ||
      r.u32("ranks") != static_cast<std::uint32_t>(group.ranks()) || r.u64("first node") != group.first_node() ||
      r.u64("local nodes") != group.local_nodes())
    r.fail("was written by another rank layout");
  trainer_section s;
  s.first_loss = r.f64("first loss");
  s.train_seconds = r.f64("train seconds");
  s.eval_seconds = r.f64("eval seconds");
  const std::uint32_t has_bytes = r.u32("final-phase flag");
  const std::uint64_t bytes_then = r.u64("bytes before the final phase");
  if (has_bytes > 1) r.fail("holds a final-phase flag of " + std::to_string(has_bytes) + " (0 or 1)");
  if (has_bytes) s.bytes_at_training_end = bytes_then;
  s.last_loss.resize(group.local_nodes());
  r.values(std::span<double>(s.last_loss), "last losses");
  return s;
}

/// Write the section of a deferred policy.
inline void write_async_section(checkpoint_writer& w, const async_section& s) {
  w.section(async_section_tag);
  w.u32(s.next_round);
  w.u32(s.round_offset);
  w.values(std::span<const std::uint64_t>(s.steps));
}

/// Read the section of a deferred policy into `s`, whose steps hold one count per node of this
/// process.
inline void read_async_section(checkpoint_reader& r, async_section& s) {
  r.section(async_section_tag);
  s.next_round = r.u32("the process's next round");
  s.round_offset = r.u32("the offset of the rounds after training");
  r.values(std::span<std::uint64_t>(s.steps), "the nodes' step counts");
}

/// The round to resume at, from rank 0's reading of the manifest of opt.resume_dir, written by
/// `ranks` processes. The settings come first: a changed setting (which may change the round
/// count) is reported as such, not as a round outside the run.
inline std::uint32_t check_manifest(const checkpoint_manifest& m, const run_settings& settings, int ranks,
                                    const trainer_options& opt) {
  const std::string& dir = opt.resume_dir;
  if (m.settings != settings.text())
    throw checkpoint_error("resume " + dir + " was written with other settings: " +
                           settings.diff_from(run_settings::parse(m.settings)));
  if (m.ranks != static_cast<std::uint32_t>(ranks))
    throw checkpoint_error("resume " + dir + " was written by " + std::to_string(m.ranks) +
                           " rank(s), this run has " + std::to_string(ranks));
  const std::uint32_t want = opt.resume_round;
  if (want > m.round)
    throw checkpoint_error("resume " + dir + ": round " + std::to_string(want) +
                           " was asked for, but the directory's last complete checkpoint is round " +
                           std::to_string(m.round));
  const std::uint32_t round = want ? want : m.round;
  if (round == 0 || round >= opt.rounds)
    throw checkpoint_error("resume " + dir + " holds round " + std::to_string(round) + ", outside this run's 1.." +
                           std::to_string(opt.rounds - 1));
  const std::string missing = checkpoint_directory(dir).missing_rank_file(round, m.ranks);
  if (!missing.empty())
    throw checkpoint_error("resume " + dir + ": cannot open " + missing + ": no such file (the checkpoint of round " +
                           std::to_string(round) + " is not there" +
                           (want ? std::string("; a directory keeps its manifest's round, the one before it and "
                                               "the round a run resumed from)")
                                 : std::string(")")));
  return round;
}

}  // namespace detail
}  // namespace v0
}  // namespace sparsepush
