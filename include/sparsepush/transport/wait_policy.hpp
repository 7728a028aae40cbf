// sparsepush/transport/wait_policy.hpp: how long a receiver waits for its in-neighbours' envelopes
// before it mixes (docs/design/algorithms.md, "Asynchronous and overlapped push-sum"): lockstep,
// overlap, bounded staleness tau or asynchronous, and how many rounds of envelopes it holds per
// in-neighbour. The transports size their inboxes and windows from it; gossip/policy.hpp tells what
// each rule means for a node's round.
#pragma once

#include <cstdint>
#include <limits>
#include <string>
#include <string_view>

#include "../config.hpp"

namespace sparsepush {
inline namespace v0 {

/// The four waiting rules (gossip/policy.hpp tells what each one waits for in a node's round).
enum class wait_kind { lockstep, overlap, bounded, asynchronous };

/// A waiting rule and its bound; build one with staleness(), overlap() or asynchronous().
struct wait_policy {
  wait_kind kind = wait_kind::lockstep;  ///< which waiting rule
  std::uint32_t tau = 0;     ///< bounded: the staleness bound (>= 1)
  std::uint32_t window = 0;  ///< asynchronous: rounds of envelopes a receiver holds per in-neighbour

  /// The default window of the asynchronous rule.
  static constexpr std::uint32_t default_window = 16;
  /// The largest staleness bound or window a policy takes (a transport may allow fewer: MPI's tag
  /// range, mpi_network).
  static constexpr std::uint32_t max_window = 1u << 16;

  /// staleness(0) is lockstep; staleness(tau) waits only for rounds <= t - tau.
  static wait_policy staleness(std::uint32_t tau) {
    if (tau >= max_window)
      throw config_error("staleness bound " + std::to_string(tau) + " is too large (at most " +
                         std::to_string(max_window - 1) + "; use the asynchronous policy for no bound)");
    return tau == 0 ? wait_policy{} : wait_policy{wait_kind::bounded, tau, 0};
  }
  /// Wait for exactly round t - 1's envelopes, none of round t's (sends overlap the next local step).
  static constexpr wait_policy overlap() noexcept { return {wait_kind::overlap, 1, 0}; }
  /// Never wait; a receiver holds at most `window` rounds of envelopes per in-neighbour.
  static wait_policy asynchronous(std::uint32_t window = default_window) {
    if (window < 2 || window > max_window)
      throw config_error("asynchronous window " + std::to_string(window) + " outside [2, " +
                         std::to_string(max_window) + "]");
    return {wait_kind::asynchronous, 0, window};
  }

  /// True for the lockstep rule (staleness 0).
  bool lockstep() const noexcept { return kind == wait_kind::lockstep; }
  /// Rounds of envelopes a receiver holds per in-neighbour: 1, 2 (overlap), tau + 1, window.
  std::uint32_t inbox_rounds() const noexcept {
    switch (kind) {
      case wait_kind::lockstep: return 1;
      case wait_kind::overlap: return 2;
      case wait_kind::bounded: return tau + 1;
      case wait_kind::asynchronous: return window;
    }
    return 1;
  }
  /// The last round whose envelopes node must have mixed by the end of its round t, or nothing
  /// (returns false) when it need not wait for any: t (lockstep), t - 1 (overlap), t - tau.
  bool waits_through(std::uint32_t t, std::uint32_t& through) const noexcept {
    switch (kind) {
      case wait_kind::lockstep: through = t; return true;
      case wait_kind::overlap: if (t < 1) return false; through = t - 1; return true;
      case wait_kind::bounded: if (t < tau) return false; through = t - tau; return true;
      case wait_kind::asynchronous: return false;
    }
    return false;
  }
  /// The last round whose envelopes node may mix in its round t: t - 1 for overlap (none of round
  /// t), t otherwise. Returns false when there is none (overlap's round 0).
  bool mixes_through(std::uint32_t t, std::uint32_t& through) const noexcept {
    if (kind == wait_kind::overlap) {
      if (t < 1) return false;
      through = t - 1;
      return true;
    }
    through = t;
    return true;
  }

  /// Equal when kind, tau and window are.
  friend bool operator==(const wait_policy&, const wait_policy&) = default;
};

/// "lockstep", "overlap", "staleness:4", "asynchronous" or "asynchronous:32" (a window other
/// than the default).
inline std::string to_string(const wait_policy& p) {
  switch (p.kind) {
    case wait_kind::lockstep: return "lockstep";
    case wait_kind::overlap: return "overlap";
    case wait_kind::bounded: return "staleness:" + std::to_string(p.tau);
    case wait_kind::asynchronous:
      return p.window == wait_policy::default_window ? "asynchronous" : "asynchronous:" + std::to_string(p.window);
  }
  return "lockstep";
}

/// The policy of a --staleness value: "0" (lockstep), a bound "N", or "inf" (asynchronous).
inline wait_policy parse_staleness(std::string_view s) {
  if (s == "inf") return wait_policy::asynchronous();
  std::uint64_t v = 0;
  bool ok = !s.empty() && s.size() <= 10;
  for (const char c : s) ok = ok && c >= '0' && c <= '9', v = v * 10 + static_cast<std::uint64_t>(c - '0');
  if (!ok || v > std::numeric_limits<std::uint32_t>::max())
    throw config_error("staleness '" + std::string(s) + "' is not 0, a round count or inf");
  return wait_policy::staleness(static_cast<std::uint32_t>(v));
}

}  // namespace v0
}  // namespace sparsepush
