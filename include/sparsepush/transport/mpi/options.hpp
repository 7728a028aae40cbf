// sparsepush/transport/mpi/options.hpp: the settings of the MPI network (its timeout, injected
// loss and waiting policy), where its time went on this rank, the error an MPI call throws, and
// the settings hash that mpi_network::agree() compares across ranks.
#pragma once

#include <chrono>
#include <cstdint>
#include <string_view>

#include "../../detail/bytes.hpp"
#include "../endpoint.hpp"
#include "../wait_policy.hpp"

namespace sparsepush {
inline namespace v0 {

/// An MPI call failed; the text names the call, this rank, the round and the peer.
class mpi_error : public transport_error {
 public:
  using transport_error::transport_error;
};

/// How long a rank waits for a missing message or a collective by default (mpi_options::timeout,
/// the run description's --mpi-timeout, Python's MpiNetwork and GossipOptimizer).
inline constexpr std::chrono::duration<double> default_mpi_timeout{60.0};

/// Settings of the MPI network.
struct mpi_options {
  /// How long collect() (and every other wait on other ranks: the set-up, agree(), finish(),
  /// wait(), so the collectives of train/mpi.hpp too) waits before it throws transport_error.
  std::chrono::milliseconds timeout{std::chrono::duration_cast<std::chrono::milliseconds>(default_mpi_timeout)};
  /// Injected loss (accounting.hpp, loss_model): each non-self envelope is lost with this
  /// probability, keyed by (seed, round, sender, receiver) exactly as on the loopback, so an MPI
  /// run loses the same envelopes as the same run in one process. A lost envelope counts as
  /// sent but never leaves the sender; its receiver does not wait for it.
  double drop_probability = 0.0;
  std::uint64_t seed = 0;  ///< keys the loss decisions
  /// How long receivers wait (transport/wait_policy.hpp). lockstep: collect() per round, as above; any
  /// other policy: the deferred mode (post() copies or sends with MPI_Issend, take() hands over
  /// what has arrived), each sender keeping at most policy.inbox_rounds() unmatched envelopes per
  /// receiver.
  wait_policy policy{};
};

/// Where the time of the network went, summed over rounds (seconds), for this rank.
struct mpi_timing {
  double encode = 0;   ///< building frames (envelope header + encode(q)) and posting MPI_Isend
  double wait = 0;     ///< waiting for envelopes that had not arrived (collect, take) and for room in a
                       ///< receiver's window (deferred post)
  double receive = 0;  ///< MPI_Mrecv of arrived frames (copying them out of MPI)
  double decode = 0;   ///< decode_envelope (validation, CRC) of received frames
};

/// FNV-1a 64 of a settings string (detail/bytes.hpp): what agree() compares across ranks.
inline std::uint64_t settings_hash(std::string_view s) noexcept { return detail::fnv1a(s); }

}  // namespace v0
}  // namespace sparsepush
