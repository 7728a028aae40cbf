// sparsepush/train/run_final_rounds.hpp: the final-round count of a run (SCSP's, or choco-push's
// given --final-rounds), the one function the reference run, its plan and gossip_run (Python's
// GossipRun, the torch wrapper) call: the count given with --final-rounds N, or with auto the
// fewest exact rounds from the round the final phase starts at that bring every de-biased model
// within --final-tolerance of the average (final_rounds_for, algorithm/final_rounds.hpp), at the
// final eta.
#pragma once

#include <cstdint>

#include "../algorithm/final_rounds.hpp"
#include "../topology/parse.hpp"
#include "run_description.hpp"

namespace sparsepush {
inline namespace v0 {

/// The final rounds of validated spec `s` when they start at round `at` of schedule `sched`:
/// with --final-rounds auto, final_rounds_for's plan (the count and its bound); with a count, that
/// count (bound 0, not exact); for an algorithm without final rounds, 0 rounds. config_error when
/// auto finds no count within final_rounds_search_limit rounds.
template <schedule S>
final_rounds_plan final_rounds_of(const run_spec& s, const S& sched, std::uint64_t at) {
  if (!s.final_phase()) return {};
  if (const auto count = s.final_rounds_count()) return {.rounds = *count};
  return final_rounds_for(sched, at, s.final_tolerance_value(), final_rounds_search_limit, *s.final_eta_value());
}

/// The same on the spec's own schedule (--schedule, built for its nodes and seed).
inline final_rounds_plan final_rounds_of(const run_spec& s, std::uint64_t at) {
  if (!s.final_phase()) return {};
  return final_rounds_of(s, parse_schedule(s.schedule_spec(), s.nodes, s.seed), at);
}

}  // namespace v0
}  // namespace sparsepush
