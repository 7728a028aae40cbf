// sparsepush/train/transport_options.hpp: a run_spec's settings of the MPI network, made in one
// place for every front end (sparsepush-train, Python's MpiNetwork.from_spec and
// sparsepush.torch): the timeout (--mpi-timeout), the injected loss (--drop-probability, keyed by
// --seed) and the waiting policy (--staleness, --overlap). Needs no MPI.
#pragma once

#include <algorithm>
#include <chrono>

#include "../transport/mpi/options.hpp"
#include "run_spec.hpp"

namespace sparsepush {
inline namespace v0 {

/// A timeout of `seconds` as mpi_options holds it: whole milliseconds, at least one.
inline std::chrono::milliseconds mpi_timeout_of(double seconds) {
  return std::chrono::milliseconds(std::max<long long>(1, static_cast<long long>(seconds * 1000.0)));
}

/// The MPI network's settings of a validated spec: its timeout, injected loss, seed and policy.
inline mpi_options mpi_options_for(const run_spec& s) {
  mpi_options o;
  o.timeout = mpi_timeout_of(s.mpi_timeout);
  o.drop_probability = s.drop_value();
  o.seed = s.seed;
  o.policy = s.policy();
  return o;
}

}  // namespace v0
}  // namespace sparsepush
