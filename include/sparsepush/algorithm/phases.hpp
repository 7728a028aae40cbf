// sparsepush/algorithm/phases.hpp: a phase schedule maps rounds to (compressor, eta, local step
// on/off), so SP, SCSP, SGP, warm-up and "compress only after round R" are one policy with
// different data. SCSP (docs/design/algorithms.md): SP with a heavy compressor for rounds 0..T-1, then k
// rounds of uncompressed push-sum averaging (identity, eta = 1, no local step by default).
// Phases are generic over the compressor type C (any_compressor by default). An `exact` phase
// sends x itself in full precision whatever C is: push-sum of x, the residual left alone.
#pragma once

#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

#include "../compress/compose.hpp"

namespace sparsepush {
inline namespace v0 {

/// One stretch of rounds with fixed settings.
template <class C>
struct basic_phase {
  std::uint32_t rounds = 0;  ///< how many rounds; 0 = until the end (last phase only)
  C compressor{};            ///< C for these rounds (unused when exact)
  double eta = 1.0;          ///< consensus step in (0, 1]
  bool local_step = true;    ///< take the local (SGD) step before communicating
  std::string name = "sp";  ///< the phase's name in reports and the CSV log (e.g. "sp", "final")
  bool exact = false;        ///< send x uncompressed in the tensor's precision (identity)
  bool fresh_residual = false;  ///< the phase's first round drops the residual e (the phase starts its own)
};

/// The phase over the runtime-chosen compressor.
using phase = basic_phase<any_compressor>;

/// True when phase ph sends every value exactly in element type T: an exact phase, or the
/// identity compressor in the tensor's own precision (then e would stay 0 and is left alone).
template <tensor_element T, class C>
bool exact_phase(const basic_phase<C>& ph) {
  if (ph.exact) return true;
  auto native = [](const identity& id) {
    return id.values.encoding == value_encoding::native || id.values.encoding == detail::native_encoding<T>;
  };
  if constexpr (std::is_same_v<C, any_compressor>) {
    const auto* id = std::get_if<identity>(&ph.compressor.get());
    return id && native(*id);
  } else if constexpr (std::is_same_v<C, identity>) {
    return native(ph.compressor);
  } else {
    return false;
  }
}

/// Rounds -> phase. The last phase continues past its length.
template <class C>
class basic_phase_schedule {
 public:
  /// The compressor type of the phases.
  using compressor_type = C;

  /// The phases in order. Throws config_error when there are none or a phase's settings are out of
  /// range (eta, a zero length before the last phase).
  explicit basic_phase_schedule(std::vector<basic_phase<C>> phases) : phases_(std::move(phases)) {
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

  /// A schedule over another compressor type whose compressors convert to C (e.g. top_k phases
  /// into any_compressor phases).
  template <class D>
    requires(!std::is_same_v<C, D> && std::is_constructible_v<C, const D&>)
  basic_phase_schedule(const basic_phase_schedule<D>& other)  // NOLINT: implicit by design
      : basic_phase_schedule(convert(other)) {}

  /// The phase active in round t.
  const basic_phase<C>& at(std::uint64_t t) const {
    std::uint64_t start = 0;
    for (const auto& ph : phases_) {
      if (ph.rounds == 0 || t < start + ph.rounds) return ph;
      start += ph.rounds;
    }
    return phases_.back();
  }
  /// The first round of the phase active in round t.
  std::uint64_t start_of(std::uint64_t t) const {
    std::uint64_t start = 0;
    for (const auto& ph : phases_) {
      if (ph.rounds == 0 || t < start + ph.rounds) return start;
      start += ph.rounds;
    }
    return start - phases_.back().rounds;
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
  /// The phases, in order.
  const std::vector<basic_phase<C>>& phases() const noexcept { return phases_; }

 private:
  template <class D>
  static std::vector<basic_phase<C>> convert(const basic_phase_schedule<D>& other) {
    std::vector<basic_phase<C>> out;
    for (const auto& ph : other.phases())
      out.push_back({ph.rounds, C(ph.compressor), ph.eta, ph.local_step, ph.name, ph.exact, ph.fresh_residual});
    return out;
  }
  std::vector<basic_phase<C>> phases_;
};

/// The phase schedule over the runtime-chosen compressor.
using phase_schedule = basic_phase_schedule<any_compressor>;

/// Sparse-Push: one phase of compressed, eta-relaxed push-sum with local steps.
template <class C = any_compressor>
basic_phase_schedule<C> sparse_push_phases(std::type_identity_t<C> c, double eta, std::uint32_t rounds = 0) {
  return basic_phase_schedule<C>({basic_phase<C>{rounds, std::move(c), eta, true, "sp"}});
}

/// SGP (and D-PSGD on a symmetric doubly stochastic schedule): identity, eta = 1. For a
/// compressor type that cannot hold identity, the phase is exact (needs a default C).
template <class C = any_compressor>
basic_phase_schedule<C> sgp_phases(std::uint32_t rounds = 0) {
  if constexpr (std::is_constructible_v<C, identity>)
    return basic_phase_schedule<C>({basic_phase<C>{rounds, C(identity{}), 1.0, true, "sgp"}});
  else
    return basic_phase_schedule<C>({basic_phase<C>{rounds, C{}, 1.0, true, "sgp", true}});
}

namespace detail {
/// An uncompressed phase: identity when C can hold it, else an exact phase (C's value unused).
template <class C>
basic_phase<C> exact_phase_of(std::uint32_t rounds, bool local_step, std::string name, const C& like) {
  if constexpr (std::is_constructible_v<C, identity>)
    return basic_phase<C>{rounds, C(identity{}), 1.0, local_step, std::move(name)};
  else
    return basic_phase<C>{rounds, like, 1.0, local_step, std::move(name), true};
}
}  // namespace detail

/// SCSP: `compressed_rounds` of SP, then `final_rounds` of uncompressed push-sum averaging
/// (no local step unless train_final, which makes them plain SGP rounds).
template <class C = any_compressor>
basic_phase_schedule<C> scsp_phases(std::type_identity_t<C> c, double eta, std::uint32_t compressed_rounds,
                                    std::uint32_t final_rounds, bool train_final = false) {
  if (compressed_rounds == 0 || final_rounds == 0)
    throw config_error("SCSP needs compressed rounds > 0 and final rounds > 0");
  auto final_phase = detail::exact_phase_of<C>(final_rounds, train_final, "final-gossip", c);
  return basic_phase_schedule<C>({basic_phase<C>{compressed_rounds, std::move(c), eta, true, "sp"},
                                  std::move(final_phase)});
}

/// SCSP with a compressed final phase: `compressed_rounds` of SP with c, then `final_rounds` of
/// gossip that sends final_compressor's messages (e.g. identity+bf16, top-k:0.1+int8) with
/// consensus step final_eta (no local step unless train_final) and error feedback from a fresh
/// residual: its first round drops the training residual e, as the exact phase leaves it unused
/// (sending x + e would dump the whole untransmitted residual into one round). With a
/// full-precision identity the final phase is the exact one of the overload above.
template <class C = any_compressor>
basic_phase_schedule<C> scsp_phases(std::type_identity_t<C> c, double eta, std::uint32_t compressed_rounds,
                                    std::type_identity_t<C> final_compressor, double final_eta,
                                    std::uint32_t final_rounds, bool train_final = false) {
  if (compressed_rounds == 0 || final_rounds == 0)
    throw config_error("SCSP needs compressed rounds > 0 and final rounds > 0");
  return basic_phase_schedule<C>(
      {basic_phase<C>{compressed_rounds, std::move(c), eta, true, "sp"},
       basic_phase<C>{final_rounds, std::move(final_compressor), final_eta, train_final, "final-gossip", false, true}});
}

/// Warm-up: `warm_rounds` uncompressed (SGP), then compressed SP.
template <class C = any_compressor>
basic_phase_schedule<C> warm_up_phases(std::uint32_t warm_rounds, std::type_identity_t<C> c, double eta,
                                       std::uint32_t rounds = 0) {
  if (warm_rounds == 0) throw config_error("warm-up needs at least one uncompressed round");
  auto warm = detail::exact_phase_of<C>(warm_rounds, true, "warm-up", c);
  return basic_phase_schedule<C>({std::move(warm), basic_phase<C>{rounds, std::move(c), eta, true, "sp"}});
}

}  // namespace v0
}  // namespace sparsepush
