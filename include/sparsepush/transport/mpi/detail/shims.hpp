// sparsepush/transport/mpi/detail/shims.hpp: what the MPI network calls in place of MPI itself:
// the backoff of its wait loops (20 us, doubling up to 1 ms, from clock.hpp's pause_for), and the
// MPI-3 calls SimGrid's SMPI lacks or runs slowly (MPI_Comm_idup, the matched probe and receives,
// the nonblocking collectives), each given its blocking or plain form there.
#pragma once

#include <mpi.h>

#include <algorithm>
#include <chrono>

#include "../../../clock.hpp"

namespace sparsepush {
inline namespace v0 {

namespace detail {
/// The pause between the tests of a wait loop: 20 us, doubling up to 1 ms; reset() after progress.
class mpi_backoff {
 public:
  void pause() {
    pause_for(std::chrono::microseconds(us_));
    us_ = std::min(2 * us_, max_us);
  }
  void reset() noexcept { us_ = min_us; }

 private:
  static constexpr long min_us = 20, max_us = 1000;
  long us_ = min_us;
};

// SimGrid's SMPI (3.32, and its later versions too) has neither MPI_Comm_idup nor the matched probe
// (MPI_Improbe, MPI_Mrecv, MPI_Imrecv). There the duplication blocks (a rank that never arrives is
// a deadlock, which SimGrid reports and ends), and a probe is followed by a receive from the probed
// source and tag: a rank is one simulated process on one thread, no other receive runs in between,
// and messages of one source and tag do not overtake, so the receive takes the probed message. A
// real MPI calls the MPI-3 functions themselves.
inline int mpi_comm_idup(MPI_Comm comm, MPI_Comm* out, MPI_Request* req) {
#ifdef SPARSEPUSH_SMPI
  *req = MPI_REQUEST_NULL;  // complete: a wait on it returns at once
  return MPI_Comm_dup(comm, out);
#else
  return MPI_Comm_idup(comm, out, req);
#endif
}
// SMPI's nonblocking collectives send to and test every rank (host time quadratic in the ranks:
// minutes per collective at 256). Under SMPI a collective that may block (`block`: a lockstep
// network, which receives nothing while it waits) runs its blocking form and completes `req`.
inline int mpi_iallgather(const void* in, int n_in, MPI_Datatype t_in, void* out, int n_out, MPI_Datatype t_out,
                          MPI_Comm comm, MPI_Request* req, [[maybe_unused]] bool block) {
#ifdef SPARSEPUSH_SMPI
  if (block) {
    *req = MPI_REQUEST_NULL;
    return MPI_Allgather(in, n_in, t_in, out, n_out, t_out, comm);
  }
#endif
  return MPI_Iallgather(in, n_in, t_in, out, n_out, t_out, comm, req);
}
inline int mpi_iallgatherv(const void* in, int n_in, MPI_Datatype t_in, void* out, const int* counts, const int* displs,
                           MPI_Datatype t_out, MPI_Comm comm, MPI_Request* req, [[maybe_unused]] bool block) {
#ifdef SPARSEPUSH_SMPI
  if (block) {
    *req = MPI_REQUEST_NULL;
    return MPI_Allgatherv(in, n_in, t_in, out, counts, displs, t_out, comm);
  }
#endif
  return MPI_Iallgatherv(in, n_in, t_in, out, counts, displs, t_out, comm, req);
}
inline int mpi_iallreduce(const void* in, void* out, int n, MPI_Datatype t, MPI_Op op, MPI_Comm comm, MPI_Request* req,
                          [[maybe_unused]] bool block) {
#ifdef SPARSEPUSH_SMPI
  if (block) {
    *req = MPI_REQUEST_NULL;
    return MPI_Allreduce(in, out, n, t, op, comm);
  }
#endif
  return MPI_Iallreduce(in, out, n, t, op, comm, req);
}
inline int mpi_ibcast(void* buf, int n, MPI_Datatype t, int root, MPI_Comm comm, MPI_Request* req, [[maybe_unused]] bool block) {
#ifdef SPARSEPUSH_SMPI
  if (block) {
    *req = MPI_REQUEST_NULL;
    return MPI_Bcast(buf, n, t, root, comm);
  }
#endif
  return MPI_Ibcast(buf, n, t, root, comm, req);
}
/// A matched probe; `st` keeps the source and tag that mpi_mrecv / mpi_imrecv need under SMPI.
inline int mpi_improbe(int src, int tag, MPI_Comm comm, int* flag, MPI_Message* msg, MPI_Status* st) {
#ifdef SPARSEPUSH_SMPI
  *msg = MPI_MESSAGE_NULL;
  return MPI_Iprobe(src, tag, comm, flag, st);
#else
  return MPI_Improbe(src, tag, comm, flag, msg, st);
#endif
}
inline int mpi_mrecv(void* buf, int count, MPI_Message* msg, MPI_Status* st, [[maybe_unused]] MPI_Comm comm) {
#ifdef SPARSEPUSH_SMPI
  (void)msg;
  return MPI_Recv(buf, count, MPI_BYTE, st->MPI_SOURCE, st->MPI_TAG, comm, st);
#else
  return MPI_Mrecv(buf, count, MPI_BYTE, msg, st);
#endif
}
inline int mpi_imrecv(void* buf, int count, MPI_Message* msg, MPI_Request* req, [[maybe_unused]] const MPI_Status& probed,
                      [[maybe_unused]] MPI_Comm comm) {
#ifdef SPARSEPUSH_SMPI
  (void)msg;
  return MPI_Irecv(buf, count, MPI_BYTE, probed.MPI_SOURCE, probed.MPI_TAG, comm, req);
#else
  return MPI_Imrecv(buf, count, MPI_BYTE, msg, req);
#endif
}
}  // namespace detail

}  // namespace v0
}  // namespace sparsepush
