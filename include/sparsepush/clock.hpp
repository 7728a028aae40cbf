// sparsepush/clock.hpp: the clock every time the library reports or waits on is read from.
// A real run reads std::chrono::steady_clock. A build for SimGrid's SMPI (compiled by smpicxx with
// SPARSEPUSH_SMPI defined) runs every rank as a simulated process of one host process, where host
// time means nothing: run_clock then reads MPI_Wtime (the simulated clock), and pause_for() sleeps
// in simulated time (smpi_nanosleep), so that waiting costs no simulated compute.
#pragma once

#include <chrono>

#ifdef SPARSEPUSH_SMPI
#include <mpi.h>  // SimGrid's: MPI_Wtime and smpi_nanosleep
#include <time.h>
#else
#include <thread>
#endif

namespace sparsepush {
inline namespace v0 {

#ifdef SPARSEPUSH_SMPI
/// The simulated clock of an SMPI run (MPI_Wtime, seconds), as a std::chrono clock.
struct run_clock {
  using rep = double;
  using period = std::ratio<1>;
  using duration = std::chrono::duration<rep, period>;
  using time_point = std::chrono::time_point<run_clock, duration>;
  static constexpr bool is_steady = true;
  static time_point now() noexcept { return time_point(duration(MPI_Wtime())); }
};
/// True where run_clock is SMPI's simulated clock.
inline constexpr bool simulated_clock = true;
#else
/// The clock of a real run.
using run_clock = std::chrono::steady_clock;
/// False: run_clock is the steady clock of a real run.
inline constexpr bool simulated_clock = false;
#endif

namespace detail {
/// Sleep `ns` on run_clock's time line (a real sleep, or a simulated one under SMPI).
inline void pause_for(std::chrono::nanoseconds ns) {
#ifdef SPARSEPUSH_SMPI
  if (ns.count() <= 0) return;
  const timespec ts{static_cast<time_t>(ns.count() / 1000000000), static_cast<long>(ns.count() % 1000000000)};
  smpi_nanosleep(&ts, nullptr);
#else
  std::this_thread::sleep_for(ns);
#endif
}
}  // namespace detail

}  // namespace v0
}  // namespace sparsepush
