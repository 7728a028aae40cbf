// sparsepush/train/mpi_launch.hpp: what the ranks of an MPI run settle before they build their
// network (optional component sparsepush::mpi): whether every rank passed its checks (one answer,
// the same on every rank, within a timeout), and whether every rank runs the same run_spec, with
// the setting that differs named and both values shown.
#pragma once

#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "../clock.hpp"
#include "../transport/mpi.hpp"
#include "run_spec.hpp"

namespace sparsepush {
inline namespace v0 {

/// Every rank says whether its checks passed (`ok`), before any other collective: the ranks that
/// failed, the same list on every rank. A rank that never answers within `timeout` seconds ends
/// the job (MPI_Abort with code 2, after a line on stderr naming this rank).
inline std::vector<int> mpi_failed_ranks(bool ok, MPI_Comm comm, double timeout) {
  int ranks = 1, rank = 0;
  MPI_Comm_size(comm, &ranks);
  MPI_Comm_rank(comm, &rank);
  const int mine = ok ? 1 : 0;
  std::vector<int> all(static_cast<std::size_t>(ranks));
  MPI_Request req = MPI_REQUEST_NULL;
  detail::mpi_iallgather(&mine, 1, MPI_INT, all.data(), 1, MPI_INT, comm, &req, true);  // SMPI: blocks
  const double deadline = MPI_Wtime() + timeout;
  // done at once where the gather blocked (SMPI's MPI_Test leaves the flag of a null request unset)
  for (int done = req == MPI_REQUEST_NULL; !done;) {
    MPI_Test(&req, &done, MPI_STATUS_IGNORE);
    if (done) break;
    if (MPI_Wtime() > deadline) {
      std::fprintf(stderr, "sparsepush: rank %d: a rank did not finish its checks within %g s; stopping every rank\n", rank,
                   timeout);
      std::fflush(stderr);
      MPI_Abort(comm, 2);
    }
    detail::pause_for(std::chrono::milliseconds(1));  // simulated time under SMPI
  }
  std::vector<int> failed;
  for (int r = 0; r < ranks; ++r)
    if (!all[static_cast<std::size_t>(r)]) failed.push_back(r);
  return failed;
}

/// The setting a fingerprint key stands for, as messages name it: its field's option from
/// run_spec's table ("final" -> "--final-rounds"); the key "policy" is the waiting policy, which
/// --staleness and --overlap make together; a key of no field is written as an option ("dim" ->
/// "--dim").
inline std::string fingerprint_option(const std::string& key) {
  if (key == "policy") return "the waiting policy (--staleness, --overlap)";
  static const run_spec defaults;
  std::string out;
  run_spec::for_each_field(defaults, [&](const field_info& f, const auto&) {
    if (out.empty() && (f.key.empty() ? f.keyword() : std::string(f.key)) == key) out = "--" + std::string(f.option);
  });
  if (!out.empty()) return out;
  out = "--" + key;
  for (char& c : out) c = c == '_' ? '-' : c;
  return out;
}

/// Rank 0's spec against this rank's, in every field the ranks must share (role numbers and
/// ranks): "" when equal, else each differing setting with both values ("--straggler: rank 0 has
/// 3:10, rank 1 has (none)"). Collective (a broadcast from rank 0): call it on every rank, after
/// mpi_failed_ranks found none failed.
inline std::string mpi_spec_mismatch(const run_spec& s, MPI_Comm comm) {
  int rank = 0;
  MPI_Comm_rank(comm, &rank);
  const run_settings mine = s.fingerprint(0, true);
  std::string text = mine.text();
  long long size = static_cast<long long>(text.size());
  MPI_Bcast(&size, 1, MPI_LONG_LONG, 0, comm);
  text.resize(static_cast<std::size_t>(size));
  MPI_Bcast(text.data(), static_cast<int>(size), MPI_CHAR, 0, comm);
  if (rank == 0) return {};
  const run_settings root = run_settings::parse(text);
  auto shown = [](const std::string& v) { return v.empty() ? std::string("(none)") : v; };
  std::string out;
  auto note = [&](const std::string& key, const std::string& a, const std::string& b) {
    out += (out.empty() ? "" : "; ") + fingerprint_option(key) + ": rank 0 has " + shown(a) + ", rank " + std::to_string(rank) + " has " +
           shown(b);
  };
  std::vector<std::string> keys;
  for (const auto* set : {&root, &mine})
    for (const auto& [k, v] : set->items())
      if (std::find(keys.begin(), keys.end(), k) == keys.end()) keys.push_back(k);
  for (const auto& k : keys)
    if (const std::string a = mine.value_in(root, k), b = mine.value_in(mine, k); a != b) note(k, a, b);
  return out.empty() ? out : "the ranks run different settings: " + out;
}

}  // namespace v0
}  // namespace sparsepush
