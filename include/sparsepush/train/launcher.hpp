// sparsepush/train/launcher.hpp: which launcher started this process, read from its environment
// before MPI or torch.distributed starts: the one list of the variables that mpirun, mpiexec and
// torchrun set (launcher_variables), for sparsepush-train (launched_ranks) and Python
// (sparsepush.launched(), sparsepush.torch.launch_info()).
#pragma once

#include <array>
#include <charconv>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>

namespace sparsepush {
inline namespace v0 {

/// The kinds of launcher: an MPI one (mpirun, mpiexec, srun) or torch.distributed's (torchrun).
enum class launcher_kind {
  mpi,   ///< mpirun, mpiexec, srun: the ranks of an MPI job
  torch  ///< torchrun (or torch.distributed.launch): the processes of a torch.distributed job
};

/// "mpi" or "torch".
inline std::string_view to_string(launcher_kind k) noexcept { return k == launcher_kind::mpi ? "mpi" : "torch"; }

/// The variables one launcher sets in the environment of each process it starts.
struct launcher_variables {
  launcher_kind kind;    ///< the launcher
  std::string_view who;  ///< which launcher sets them, for messages and docs
  std::string_view size; ///< the number of processes started (a positive integer)
  std::string_view rank; ///< this process's rank among them (0 when unset)
  std::string_view marker = {};  ///< set too where `size` alone would not say who started it (empty: size is enough)
};

/// Every launcher this library recognizes, in the order they are looked for: the first whose
/// variables are set (its marker, and its size as a positive integer) started this process.
inline constexpr std::array<launcher_variables, 6> launcher_environment{{
    {launcher_kind::torch, "torchrun", "WORLD_SIZE", "RANK", "TORCHELASTIC_RUN_ID"},
    {launcher_kind::torch, "torch.distributed.launch", "WORLD_SIZE", "RANK", "MASTER_ADDR"},
    {launcher_kind::mpi, "Open MPI's mpirun", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_RANK"},
    {launcher_kind::mpi, "MPICH's and Intel MPI's mpiexec (PMI)", "PMI_SIZE", "PMI_RANK"},
    {launcher_kind::mpi, "a PMIx launcher (prterun, srun --mpi=pmix)", "PMIX_SIZE", "PMIX_RANK"},
    {launcher_kind::mpi, "MPICH's Hydra (the ranks on this host)", "MPI_LOCALNRANKS", "MPI_LOCALRANKID"},
}};

/// What a launcher told this process.
struct launch {
  launcher_kind kind = launcher_kind::mpi;  ///< the launcher
  int ranks = 1;                            ///< the processes it started
  int rank = 0;                             ///< this one's rank among them
};

namespace detail {
/// The environment variable `name` as a non-negative integer; nullopt when unset or not one.
inline std::optional<int> env_int(std::string_view name) {
  const char* v = std::getenv(std::string(name).c_str());
  if (!v) return std::nullopt;
  int n = 0;
  const auto [end, ec] = std::from_chars(v, v + std::strlen(v), n);
  if (ec != std::errc() || end != v + std::strlen(v) || n < 0) return std::nullopt;
  return n;
}
}  // namespace detail

/// The launcher that started this process, from its environment (launcher_environment, the first
/// that matches); nullopt when none did.
inline std::optional<launch> launched_by() {
  for (const launcher_variables& l : launcher_environment) {
    if (!l.marker.empty() && !std::getenv(std::string(l.marker).c_str())) continue;
    const auto size = detail::env_int(l.size);
    if (!size || *size < 1) continue;
    return launch{l.kind, *size, detail::env_int(l.rank).value_or(0)};
  }
  return std::nullopt;
}

/// How many processes an MPI launcher (mpirun, mpiexec) started this one among, read from its
/// environment before MPI_Init: 1 when none did.
inline int launched_ranks() {
  for (const launcher_variables& l : launcher_environment)
    if (l.kind == launcher_kind::mpi)
      if (const auto size = detail::env_int(l.size); size && *size > 0) return *size;
  return 1;
}

}  // namespace v0
}  // namespace sparsepush
