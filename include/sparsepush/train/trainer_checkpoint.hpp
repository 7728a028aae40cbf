// sparsepush/train/trainer_checkpoint.hpp: a rank file of the trainer's checkpoints, written and
// read back: the trainer's own section (the run it belongs to, the rank layout, and what
// train_result carries over a resume), the backend's and the algorithm's state, a deferred
// policy's pace, and section LOCL (the evaluations' bytes, the outer step's momentum); and the
// check of a directory's manifest against the run that resumes from it.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include <functional>

#include "../checkpoint.hpp"
#include "../tensor.hpp"
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
/// The section every rank file ends with: the evaluations' bytes so far and the outer step's
/// momentum (one vector per node of this process, none without momentum).
inline constexpr const char* local_section_tag = "LOCL";

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

/// What section LOCL holds.
template <tensor_element T>
struct local_section {
  std::uint64_t eval_bytes = 0;             ///< the evaluations' bytes so far
  std::vector<std::vector<T>> outer_m;      ///< the outer step's momentum m_i per node (empty: none)
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

/// Write section LOCL.
template <tensor_element T>
void write_local_section(checkpoint_writer& w, std::uint64_t eval_bytes, std::span<const std::vector<T>> outer_m) {
  w.section(local_section_tag);
  w.u64(eval_bytes);
  w.u32(static_cast<std::uint32_t>(outer_m.size()));
  for (const auto& m : outer_m) w.values(std::span<const T>(m));
}

/// Read section LOCL, checked against this process's `local_nodes` nodes of `dim` elements.
template <tensor_element T>
local_section<T> read_local_section(checkpoint_reader& r, std::size_t local_nodes, std::size_t dim) {
  local_section<T> s;
  r.section(local_section_tag);
  s.eval_bytes = r.u64("the evaluations' bytes");
  const std::uint32_t kept = r.u32("the outer momentum's node count");
  if (kept != 0 && kept != local_nodes)
    r.fail("holds the outer momentum of " + std::to_string(kept) + " nodes; this process runs " +
           std::to_string(local_nodes));
  for (std::uint32_t k = 0; k < kept; ++k) s.outer_m.push_back(r.values<T>("outer momentum", dim));
  for (const auto& m : s.outer_m)
    if (m.size() != dim)
      r.fail("holds an outer momentum of " + std::to_string(m.size()) + " elements for a model of " +
             std::to_string(dim));
  return s;
}

/// This process's rank file of round `next`, in order: the trainer's section `s`, the backend's
/// state, the algorithm's, `pace` (a deferred policy's, else null) and section LOCL.
template <tensor_element T, process_group G, class A>
std::vector<std::byte> rank_file_bytes(const run_settings& settings, const G& group, std::uint32_t next,
                                       const trainer_section& s, const local_training<T>& be, const A& alg,
                                       const async_section* pace, std::uint64_t eval_bytes,
                                       std::span<const std::vector<T>> outer_m) {
  checkpoint_writer w;
  write_trainer_section(w, settings, group, next, s);
  if (be.save) be.save(w);
  alg.save(w);
  if (pace) write_async_section(w, *pace);
  write_local_section<T>(w, eval_bytes, outer_m);
  return w.finish();
}

/// What a rank file holds besides the algorithm's state, read and checked.
template <tensor_element T>
struct rank_file_state {
  trainer_section trainer;             ///< the trainer's section
  std::function<void()> apply_backend;  ///< applies the backend's state (none without restore)
  async_section pace;                   ///< a deferred policy's, or lockstep's implied one
  local_section<T> local;               ///< section LOCL
};

/// Read and check this rank's file of round `round` (r) written by rank_file_bytes; restore the
/// algorithm from it (all of it or nothing; `alg_changed` tells) and return the rest, unapplied.
/// Without a deferred policy the step counts are lockstep's: every node took every training round.
template <tensor_element T, process_group G, class A>
rank_file_state<T> read_rank_file(checkpoint_reader& r, const run_settings& settings, const G& group,
                                  std::uint32_t round, const local_training<T>& be, A& alg, bool deferred,
                                  std::uint32_t train_rounds, bool& alg_changed) {
  rank_file_state<T> f;
  f.trainer = read_trainer_section(r, settings, group, round);
  if (be.restore) f.apply_backend = be.restore(r);
  alg.restore(r);  // checks everything before it changes anything
  alg_changed = true;
  f.pace = {round, 0, std::vector<std::uint64_t>(group.local_nodes(), std::min(round, train_rounds))};
  if (deferred) read_async_section(r, f.pace);
  f.local = read_local_section<T>(r, group.local_nodes(), alg.dim());
  r.done();
  return f;
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
