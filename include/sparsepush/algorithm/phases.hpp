// sparsepush/algorithm/phases.hpp: a phase schedule maps rounds to (compressor, eta, local step
// on/off), so SP, SCSP, SGP, warm-up and "compress only after round R" are one policy with
// different data. SCSP (ALGORITHMS.md): SP with a heavy compressor for rounds 0..T-1, then k
// rounds of uncompressed push-sum averaging (identity, eta = 1, no local step by default).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "../compress/compose.hpp"

namespace sparsepush {
inline namespace v0 {

/// One stretch of rounds with fixed settings.
struct phase {
  std::uint32_t rounds = 0;                ///< how many rounds; 0 = until the end (last phase only)
  any_compressor compressor = identity{};  ///< C for these rounds
  double eta = 1.0;                        ///< consensus step in (0, 1]
  bool local_step = true;                  ///< take the local (SGD) step before communicating
  std::string name = "sp";
};

/// Rounds -> phase. The last phase continues past its length.
class phase_schedule {
 public:
  explicit phase_schedule(std::vector<phase> phases) : phases_(std::move(phases)) {
    if (phases_.empty()) throw config_error("a phase schedule needs at least one phase");
    for (std::size_t p = 0; p < phases_.size(); ++p) {
      const auto& ph = phases_[p];
      if (!(ph.eta > 0.0 && ph.eta <= 1.0))
        throw config_error("phase " + std::to_string(p) + " (" + ph.name + "): eta must be in (0, 1], got " +
                           std::to_string(ph.eta));
      if (ph.rounds == 0 && p + 1 != phases_.size())
        throw config_error("phase " + std::to_string(p) + " (" + ph.name +
                           ") has no length but is not the last phase");
    }
  }

  /// The phase active in round t.
  const phase& at(std::uint64_t t) const {
    std::uint64_t start = 0;
    for (const auto& ph : phases_) {
      if (ph.rounds == 0 || t < start + ph.rounds) return ph;
      start += ph.rounds;
    }
    return phases_.back();
  }
  /// Sum of the phase lengths (0 when the last phase is open-ended).
  std::uint64_t total_rounds() const {
    std::uint64_t s = 0;
    for (const auto& ph : phases_) {
      if (ph.rounds == 0) return 0;
      s += ph.rounds;
    }
    return s;
  }
  const std::vector<phase>& phases() const noexcept { return phases_; }

 private:
  std::vector<phase> phases_;
};

/// Sparse-Push: one phase of compressed, eta-relaxed push-sum with local steps.
inline phase_schedule sparse_push_phases(any_compressor c, double eta, std::uint32_t rounds = 0) {
  return phase_schedule({phase{rounds, std::move(c), eta, true, "sp"}});
}

/// SGP (and D-PSGD on a symmetric doubly stochastic schedule): identity, eta = 1.
inline phase_schedule sgp_phases(std::uint32_t rounds = 0) {
  return phase_schedule({phase{rounds, identity{}, 1.0, true, "sgp"}});
}

/// SCSP: `compressed_rounds` of SP, then `final_rounds` of uncompressed push-sum averaging
/// (no local step unless train_final, which makes them plain SGP rounds).
inline phase_schedule scsp_phases(any_compressor c, double eta, std::uint32_t compressed_rounds,
                                  std::uint32_t final_rounds, bool train_final = false) {
  if (compressed_rounds == 0 || final_rounds == 0)
    throw config_error("SCSP needs compressed rounds > 0 and final rounds > 0");
  return phase_schedule({phase{compressed_rounds, std::move(c), eta, true, "sp"},
                         phase{final_rounds, identity{}, 1.0, train_final, "final-gossip"}});
}

/// Warm-up: `warm_rounds` uncompressed (SGP), then compressed SP.
inline phase_schedule warm_up_phases(std::uint32_t warm_rounds, any_compressor c, double eta,
                                     std::uint32_t rounds = 0) {
  if (warm_rounds == 0) throw config_error("warm-up needs at least one uncompressed round");
  return phase_schedule({phase{warm_rounds, identity{}, 1.0, true, "warm-up"},
                         phase{rounds, std::move(c), eta, true, "sp"}});
}

}  // namespace v0
}  // namespace sparsepush
