// sparsepush/transport/mpi/detail/network_setup.hpp: mpi_network's construction (placement of the
// nodes in blocks, the tag range, the duplicated communicator) and teardown, the settings
// handshake agree(), posted_rounds(), and the waits on other ranks (finish(), wait()), each bounded
// by the timeout and receiving meanwhile in the deferred mode.
#pragma once

#include <mpi.h>

#include <algorithm>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "../network_class.hpp"

namespace sparsepush {
inline namespace v0 {

inline mpi_network::mpi_network(MPI_Comm comm, std::size_t n, mpi_options opt)
    : network_accounting(n, opt.drop_probability, opt.seed), opt_(opt) {
  if (opt.timeout.count() <= 0)
    throw config_error("MPI timeout must be positive (got " + std::to_string(opt.timeout.count()) + " ms)");
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (!initialized) throw config_error("MPI is not initialized: call MPI_Init_thread before building an mpi_network");
  MPI_Comm_rank(comm, &rank_);  // for the messages of the checks and the duplication
  MPI_Comm_size(comm, &size_);
  const std::size_t r = static_cast<std::size_t>(size_);
  base_ = n / r;
  extra_ = n % r;
  block_max_ = base_ + (extra_ ? 1 : 0);
  if (block_max_ == 0) block_max_ = 1;
  void* ub = nullptr;
  int flag = 0;
  MPI_Comm_get_attr(comm, MPI_TAG_UB, &ub, &flag);
  const long tag_ub = flag ? *static_cast<int*>(ub) : 32767;
  rounds_mod_ = static_cast<std::uint32_t>(std::min<long>(tag_ub / static_cast<long>(block_max_), 1L << 20));
  if (rounds_mod_ < 4)
    throw config_error("MPI tag range " + std::to_string(tag_ub) + " is too small for blocks of " +
                       std::to_string(block_max_) + " nodes per rank; use more ranks");
  if (!opt.policy.lockstep() && opt.policy.inbox_rounds() >= rounds_mod_)
    throw config_error(
        "wait policy " + to_string(opt.policy) + " holds " + std::to_string(opt.policy.inbox_rounds()) +
        " rounds of envelopes per in-neighbour, but MPI's tags (upper bound " + std::to_string(tag_ub) +
        ", blocks of " + std::to_string(block_max_) + " nodes per rank) tell only " + std::to_string(rounds_mod_) +
        " rounds apart; use a smaller window or more ranks");
  MPI_Request req = MPI_REQUEST_NULL;
  check(detail::mpi_comm_idup(comm, &comm_, &req), "MPI_Comm_idup", -1, -1);
  wait(req, "the duplication of the network's communicator (MPI_Comm_idup; every rank must build its mpi_network)");
  MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN);
  MPI_Comm_rank(comm_, &rank_);
  MPI_Comm_size(comm_, &size_);
  first_ = first_of(rank_);
  local_ = first_of(rank_ + 1) - first_;
  host(first_, local_);
  local_box_.resize(local_);
  window_ = opt.policy.inbox_rounds();
  inboxes_.resize(local_);
  posted_.assign(local_, 0);
  deferred_ = !opt.policy.lockstep();  // last: wait() receives only once this is set
}

inline mpi_network::~mpi_network() {
  for (auto& s : sends_)
    if (s.req != MPI_REQUEST_NULL) {
      MPI_Cancel(&s.req);
      MPI_Request_free(&s.req);
    }
  for (auto& r : receiving_) {  // only after an error (a drain completes them): MPI may still write
    int done = 0;
    MPI_Test(&r.req, &done, MPI_STATUS_IGNORE);
    if (done) continue;
    MPI_Request_free(&r.req);
    new std::vector<std::byte>(std::move(r.buf));  // its buffer is left to MPI (leaked)
  }
  if (comm_ != MPI_COMM_NULL) MPI_Comm_free(&comm_);
}

inline void mpi_network::agree(std::string_view settings) {
  // members, not locals: a handshake that timed out cannot be cancelled and may still write
  agree_mine_ = settings_hash(settings);
  auto& all = agree_all_;
  all.assign(static_cast<std::size_t>(size_), 0);
  MPI_Request req = MPI_REQUEST_NULL;
  check(detail::mpi_iallgather(&agree_mine_, 1, MPI_UINT64_T, all.data(), 1, MPI_UINT64_T, comm_, &req, !deferred_), "MPI_Iallgather", -1,
        -1);
  wait(req, "the settings handshake");
  std::string differ;
  for (int r = 0; r < size_; ++r)
    if (all[static_cast<std::size_t>(r)] != all[0]) differ += (differ.empty() ? "" : ", ") + std::to_string(r);
  if (!differ.empty())
    throw config_error("MPI ranks disagree on the settings: rank(s) " + differ +
                       " differ from rank 0 (node count, dimension, schedule, phases, seed and compressor "
                       "must be the same on every rank); this is rank " + std::to_string(rank_));
}

inline void mpi_network::finish() {
  const double t0 = MPI_Wtime(), limit = timeout_seconds();
  detail::mpi_backoff pause;
  for (;;) {
    progress_sends();
    if (sends_.empty()) return;
    if (MPI_Wtime() - t0 > limit) {
      const auto& s = sends_.front();
      throw transport_error("rank " + std::to_string(rank_) + ": the envelope of round " + std::to_string(s.round) +
                            " to node " + std::to_string(s.to) + " (rank " + std::to_string(owner(s.to)) +
                            ") was not taken within " + std::to_string(opt_.timeout.count()) + " ms");
    }
    if (receive_arrived()) pause.reset();
    else pause.pause();
  }
}

inline std::vector<std::uint32_t> mpi_network::posted_rounds(std::span<const std::uint32_t> mine) {
  if (mine.size() != local_)
    throw size_error("posted_rounds: " + std::to_string(mine.size()) + " counts for the " + std::to_string(local_) +
                     " nodes of rank " + std::to_string(rank_));
  if (rounds_counts_.empty())
    for (int q = 0; q < size_; ++q) {
      rounds_displs_.push_back(static_cast<int>(first_of(q)));
      rounds_counts_.push_back(static_cast<int>(first_of(q + 1) - first_of(q)));
    }
  // members, not locals: a gather that timed out cannot be cancelled and may still write
  rounds_mine_.assign(mine.begin(), mine.end());
  rounds_all_.assign(num_nodes(), 0);
  MPI_Request req = MPI_REQUEST_NULL;
  check(MPI_Iallgatherv(rounds_mine_.data(), static_cast<int>(local_), MPI_UINT32_T, rounds_all_.data(),
                        rounds_counts_.data(), rounds_displs_.data(), MPI_UINT32_T, comm_, &req),
        "MPI_Iallgatherv", -1, -1);
  wait(req, "the exchange of the rounds every node posted (the drain's MPI_Iallgatherv)");
  return rounds_all_;
}

inline void mpi_network::wait(std::span<MPI_Request> reqs, std::string_view what) {
#ifdef SPARSEPUSH_SMPI
  // Under SMPI a lockstep wait, which receives nothing meanwhile, blocks: every poll is a context
  // switch of the simulator, and polls every millisecond of simulated time on every rank cost more
  // host time than the run (the evaluations' collectives over hundreds of ranks). A rank that never
  // arrives is a deadlock, which SimGrid reports and ends.
  if (!deferred_) {
    check(MPI_Waitall(static_cast<int>(reqs.size()), reqs.data(), MPI_STATUSES_IGNORE), "MPI_Waitall", -1, -1);
    return;
  }
#endif
  const double t0 = MPI_Wtime(), limit = timeout_seconds();
  detail::mpi_backoff pause;
  for (;;) {
    int done = 0;
    check(MPI_Testall(static_cast<int>(reqs.size()), reqs.data(), &done, MPI_STATUSES_IGNORE), "MPI_Testall", -1, -1);
    if (done) return;
    if (MPI_Wtime() - t0 > limit)
      throw transport_error("rank " + std::to_string(rank_) + ": " + std::string(what) + " did not complete within " +
                            std::to_string(opt_.timeout.count()) + " ms (a rank is missing or stalled)");
    if (receive_arrived()) pause.reset();
    else pause.pause();
  }
}

}  // namespace v0
}  // namespace sparsepush
