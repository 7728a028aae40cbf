// sparsepush/train/mpi.hpp: the processes of an MPI run as a trainer's process_group (optional
// component sparsepush::mpi). Each rank runs the block of nodes its mpi_network places there and
// sends only what the metrics need: one scalar per node (allgather), sums, and the ordered sum of
// the models, passed from rank to rank along the ranks (each adds its nodes in node order, the
// last broadcasts) so that every rank gets the bits one process adding every node would get.
// Every call is nonblocking MPI waited on with the network's timeout (mpi_network::wait).
#pragma once

#include <mpi.h>

#include <functional>
#include <limits>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "../transport/mpi.hpp"
#include "process_group.hpp"

namespace sparsepush {
inline namespace v0 {

/// The ranks of an mpi_network as one process group; the network must outlive it. Construct it
/// on every rank (it duplicates the communicator: a collective call). Every call waits at most the
/// network's timeout (mpi_options::timeout) for the other ranks, then throws transport_error
/// naming this rank, the operation and the timeout: a rank that stopped ends the run instead of
/// hanging it in a collective. After such a throw the ranks are out of step (a collective cannot
/// be cancelled): every later call throws too, and the caller should end the job (MPI_Abort).
class mpi_process_group {
 public:
  /// The ranks of net's communicator as one process group, over a duplicate of that communicator.
  /// Collective: every rank builds one. Throws transport_error when a rank does not join within the
  /// network's timeout.
  explicit mpi_process_group(mpi_network& net) : net_(&net), gathered_(net.num_nodes()) {
    sent_.reserve(net.local_nodes());  // allgather copies into it: no allocation in a round
    const int r = net.rank(), last = net.ranks() - 1;
    from_prev_ = "the averaged model's ordered sum from rank " + std::to_string(r - 1);
    to_next_ = "the averaged model's ordered sum to rank " + std::to_string(r + 1);
    from_last_ = "the averaged model's broadcast from rank " + std::to_string(last);
    layout_.resize(2 * static_cast<std::size_t>(net.ranks()));
    MPI_Request req = MPI_REQUEST_NULL;
    check(detail::mpi_comm_idup(net.comm(), &comm_, &req), "MPI_Comm_idup");
    net.wait(req, "the duplication of the process group's communicator (MPI_Comm_idup; every rank must build "
                  "its mpi_process_group)");
    mine_layout_[0] = static_cast<int>(net.first_node());
    mine_layout_[1] = static_cast<int>(net.local_nodes());
    run(detail::mpi_iallgather(mine_layout_, 2, MPI_INT, layout_.data(), 2, MPI_INT, comm_, &req, !net.deferred()), "MPI_Iallgather", req,
        "the process group's exchange of node blocks");
    for (int q = 0; q <= last; ++q) {
      displs_.push_back(layout_[2 * static_cast<std::size_t>(q)]);
      counts_.push_back(layout_[2 * static_cast<std::size_t>(q) + 1]);
    }
  }
  ~mpi_process_group() {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (!finalized && comm_ != MPI_COMM_NULL) MPI_Comm_free(&comm_);
  }
  mpi_process_group(const mpi_process_group&) = delete;
  mpi_process_group& operator=(const mpi_process_group&) = delete;

  /// This process's rank.
  int rank() const noexcept { return net_->rank(); }
  /// The number of ranks.
  int ranks() const noexcept { return net_->ranks(); }
  /// The first node this rank runs.
  std::uint32_t first_node() const noexcept { return net_->first_node(); }
  /// The nodes this rank runs.
  std::size_t local_nodes() const noexcept { return net_->local_nodes(); }
  /// The nodes of the run, all ranks together.
  std::size_t total_nodes() const noexcept { return net_->num_nodes(); }

  /// Every node's value in node order. `what` names the gather in a timeout's message.
  std::vector<double> allgather(std::span<const double> mine,
                                std::string_view what = "the gather of one value per node (the losses, "
                                                        "or an evaluation's accuracies, norms or weights)") const {
    if (mine.size() != local_nodes())
      throw size_error("allgather: " + std::to_string(mine.size()) + " values for the " +
                       std::to_string(local_nodes()) + " nodes of rank " + std::to_string(rank()));
    usable();
    sent_.assign(mine.begin(), mine.end());  // the caller's span may be gone when a late rank arrives
    MPI_Request req = MPI_REQUEST_NULL;
    run(detail::mpi_iallgatherv(sent_.data(), static_cast<int>(sent_.size()), MPI_DOUBLE, gathered_.data(), counts_.data(),
                                displs_.data(), MPI_DOUBLE, comm_, &req, !net_->deferred()),
        "MPI_Iallgatherv", req, what);
    return gathered_;
  }
  /// The sum of v over the ranks. `what` names the sum in a timeout's message.
  std::uint64_t sum(std::uint64_t v, std::string_view what = "the sum over the ranks (of a byte count)") const {
    usable();
    sum_in_ = v;
    MPI_Request req = MPI_REQUEST_NULL;
    run(detail::mpi_iallreduce(&sum_in_, &sum_out_, 1, MPI_UNSIGNED_LONG_LONG, MPI_SUM, comm_, &req, !net_->deferred()),
        "MPI_Iallreduce", req, what);
    return sum_out_;
  }
  /// Rank 0's v, on every rank. `what` names the broadcast in a timeout's message.
  double broadcast(double v, std::string_view what = "the broadcast of rank 0's value (the averaged model's accuracy)") const {
    usable();
    bcast_d_ = v;
    MPI_Request req = MPI_REQUEST_NULL;
    run(detail::mpi_ibcast(&bcast_d_, 1, MPI_DOUBLE, 0, comm_, &req, !net_->deferred()), "MPI_Ibcast", req, what);
    return bcast_d_;
  }
  /// Rank 0's v, on every rank. `what` names the broadcast in a timeout's message.
  std::uint32_t broadcast(std::uint32_t v, std::string_view what = "the broadcast of rank 0's round (resume)") const {
    usable();
    bcast_u_ = v;
    MPI_Request req = MPI_REQUEST_NULL;
    run(detail::mpi_ibcast(&bcast_u_, 1, MPI_UINT32_T, 0, comm_, &req, !net_->deferred()), "MPI_Ibcast", req, what);
    return bcast_u_;
  }
  /// The element-wise sum of v over the ranks, in place (MPI_Iallreduce; the order of the
  /// additions is MPI's: the bits may differ from one process adding every node, which
  /// ordered_sum keeps). eval_reduction::allreduce's reduction of the averaged model.
  void sum_in_place(std::span<double> v,
                    std::string_view what = "the allreduce of the averaged model (eval_reduction::allreduce)") const {
    usable();
    // members: a late rank may still write them after a timeout. Two buffers, not MPI_IN_PLACE:
    // SimGrid's SMPI 3.32 summed an in-place vector of 235,146 doubles wrongly (inf).
    reduce_in_.assign(v.begin(), v.end());
    reduced_.resize(v.size());
    MPI_Request req = MPI_REQUEST_NULL;
    run(detail::mpi_iallreduce(reduce_in_.data(), reduced_.data(), count(reduced_.size()), MPI_DOUBLE, MPI_SUM, comm_,
                               &req, !net_->deferred()),
        "MPI_Iallreduce", req, what);
    std::copy(reduced_.begin(), reduced_.end(), v.begin());
  }
  /// Rank r takes the sums from rank r - 1, adds its nodes, passes them on; the last rank's sums
  /// reach every rank. Each rank sends the d values once (plus the broadcast). The order of the
  /// additions is fixed by the ranks, never by timing: the bits do not depend on the waits.
  void ordered_sum(std::span<float> af, std::span<double> ad, const std::function<void()>& add) const {
    usable();
    const int r = rank(), last = ranks() - 1;
    const int nf = count(af.size()), nd = count(ad.size());
    MPI_Request two[2] = {MPI_REQUEST_NULL, MPI_REQUEST_NULL};
    if (r > 0) {
      check(MPI_Irecv(af.data(), nf, MPI_FLOAT, r - 1, 0, comm_, &two[0]), "MPI_Irecv");
      check_or_cancel(MPI_Irecv(ad.data(), nd, MPI_DOUBLE, r - 1, 1, comm_, &two[1]), "MPI_Irecv", two);
      wait_or_cancel(two, from_prev_);
    }
    add();
    if (r < last) {
      check(MPI_Isend(af.data(), nf, MPI_FLOAT, r + 1, 0, comm_, &two[0]), "MPI_Isend");
      check_or_cancel(MPI_Isend(ad.data(), nd, MPI_DOUBLE, r + 1, 1, comm_, &two[1]), "MPI_Isend", two);
      wait_or_cancel(two, to_next_);
    }
    check(detail::mpi_ibcast(af.data(), nf, MPI_FLOAT, last, comm_, &two[0], !net_->deferred()), "MPI_Ibcast");
    if (const int rc = detail::mpi_ibcast(ad.data(), nd, MPI_DOUBLE, last, comm_, &two[1], !net_->deferred()); rc != MPI_SUCCESS) {
      broken_ = from_last_;  // the first broadcast is posted: the ranks are out of step
      check(rc, "MPI_Ibcast");
    }
    wait(two, from_last_);
  }
  /// A sum over the ranks that the caller does not wait for (the asynchronous trainer's count of
  /// local steps): start_sum(v) starts it (one at a time; every rank starts its k-th sum with its
  /// own value, whenever it gets there), test_sum(out) tells without blocking whether it completed
  /// (then out is the sum, the same on every rank). A sum pending longer than the network's
  /// timeout is a transport_error (a rank stopped taking part) and the group is out of step.
  void start_sum(std::uint64_t v) {
    usable();
    if (async_req_ != MPI_REQUEST_NULL) throw config_error("start_sum: the previous sum is still pending");
    async_in_ = v;
    check(MPI_Iallreduce(&async_in_, &async_out_, 1, MPI_UNSIGNED_LONG_LONG, MPI_SUM, comm_, &async_req_),
          "MPI_Iallreduce");
    async_start_ = MPI_Wtime();
  }
  /// True, with the sum of start_sum() into out, when it has completed; false while it has not.
  /// Throws config_error when no sum was started, transport_error when it has not completed within
  /// the network's timeout.
  bool test_sum(std::uint64_t& out) {
    usable();
    if (async_req_ == MPI_REQUEST_NULL) throw config_error("test_sum: no sum was started");
    int done = 0;
    check(MPI_Test(&async_req_, &done, MPI_STATUS_IGNORE), "MPI_Test");
    if (done) {
      out = async_out_;
      return true;
    }
    if ((MPI_Wtime() - async_start_) * 1000.0 > static_cast<double>(net_->timeout().count())) {
      broken_ = "the asynchronous count of local steps";
      throw transport_error("rank " + std::to_string(rank()) + ": the count of local steps over the ranks did not "
                            "complete within " + std::to_string(net_->timeout().count()) +
                            " ms (a rank is missing or stalled)");
    }
    return false;
  }

  /// Throws transport_error unless every rank passes the same text (the settings handshake,
  /// checkpoint barriers); mpi_network::agree.
  void agree(std::string_view text) {
    usable();
    try {
      net_->agree(text);
    } catch (const transport_error&) {
      broken_ = "the settings handshake";
      throw;
    }
  }
  /// Waits until what this rank sent has been delivered (mpi_network::finish): the end of a run.
  void finish() { net_->finish(); }

 private:
  static int count(std::size_t n) {
    if (n > static_cast<std::size_t>(std::numeric_limits<int>::max()))
      throw size_error("a model of " + std::to_string(n) + " values is too large for one MPI message");
    return static_cast<int>(n);
  }
  void check(int rc, const char* call) const {
    if (rc == MPI_SUCCESS) return;
    char text[MPI_MAX_ERROR_STRING];
    int len = 0;
    MPI_Error_string(rc, text, &len);
    throw mpi_error(std::string(call) + " failed on rank " + std::to_string(net_->rank()) + ": " +
                    std::string(text, static_cast<std::size_t>(len)));
  }
  /// A collective left behind (timed out) on this rank: the next one would be matched with
  /// another rank's earlier one, so none is started.
  void usable() const {
    if (!broken_.empty())
      throw transport_error("rank " + std::to_string(rank()) + ": the MPI process group is out of step since " +
                            broken_ + " timed out; end the job (MPI_Abort)");
  }
  /// Start a collective (rc) and wait for it, at most the timeout.
  void run(int rc, const char* call, MPI_Request& req, std::string_view what) const {
    check(rc, call);
    wait(std::span<MPI_Request>(&req, 1), what);
  }
  void wait(std::span<MPI_Request> reqs, std::string_view what) const {
    try {
      net_->wait(reqs, what);
    } catch (const transport_error&) {
      broken_ = what;
      throw;
    }
  }
  /// Cancel point-to-point requests that timed out and free them. MPI may still touch their
  /// buffers (the caller's af/ad of ordered_sum) until the next MPI call: after a timeout the
  /// group refuses every call, and the job is to end with MPI_Abort (as sparsepush-train does).
  void cancel(std::span<MPI_Request> reqs) const {
    for (auto& q : reqs)
      if (q != MPI_REQUEST_NULL) {
        MPI_Cancel(&q);
        MPI_Request_free(&q);
      }
  }
  void check_or_cancel(int rc, const char* call, std::span<MPI_Request> reqs) const {
    if (rc != MPI_SUCCESS) cancel(reqs);
    check(rc, call);
  }
  void wait_or_cancel(std::span<MPI_Request> reqs, std::string_view what) const {
    try {
      wait(reqs, what);
    } catch (const transport_error&) {
      cancel(reqs);
      throw;
    }
  }

  mpi_network* net_;
  MPI_Comm comm_ = MPI_COMM_NULL;
  std::vector<int> counts_, displs_, layout_;
  int mine_layout_[2] = {0, 0};
  std::string from_prev_, to_next_, from_last_;  ///< ordered_sum's waits, named once
  // The buffers of the collectives are members, not locals: one that timed out cannot be
  // cancelled and may still be written when the late rank arrives.
  mutable std::vector<double> gathered_, sent_, reduce_in_, reduced_;
  mutable unsigned long long sum_in_ = 0, sum_out_ = 0;
  mutable double bcast_d_ = 0;
  mutable std::uint32_t bcast_u_ = 0;
  mutable std::string broken_;  ///< the wait that timed out (empty: none)
  // start_sum/test_sum's buffers and request (members: a pending sum outlives the call)
  unsigned long long async_in_ = 0, async_out_ = 0;
  MPI_Request async_req_ = MPI_REQUEST_NULL;
  double async_start_ = 0;
};

}  // namespace v0
}  // namespace sparsepush
