// sparsepush/train/mpi.hpp: the processes of an MPI run as a trainer's process_group (optional
// component sparsepush::mpi). Each rank runs the block of nodes its mpi_network places there and
// sends only what the metrics need: one scalar per node (allgather), sums, and the ordered sum of
// the models, passed from rank to rank along the ranks (each adds its nodes in node order, the
// last broadcasts) so that every rank gets the bits one process adding every node would get.
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
/// on every rank (it duplicates the communicator: a collective call).
class mpi_process_group {
 public:
  explicit mpi_process_group(mpi_network& net) : net_(&net) {
    check(MPI_Comm_dup(net.comm(), &comm_), "MPI_Comm_dup");
    const int pair[2] = {static_cast<int>(net.first_node()), static_cast<int>(net.local_nodes())};
    std::vector<int> all(2 * static_cast<std::size_t>(net.ranks()));
    check(MPI_Allgather(pair, 2, MPI_INT, all.data(), 2, MPI_INT, comm_), "MPI_Allgather");
    for (int r = 0; r < net.ranks(); ++r) {
      displs_.push_back(all[2 * static_cast<std::size_t>(r)]);
      counts_.push_back(all[2 * static_cast<std::size_t>(r) + 1]);
    }
  }
  ~mpi_process_group() {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (!finalized && comm_ != MPI_COMM_NULL) MPI_Comm_free(&comm_);
  }
  mpi_process_group(const mpi_process_group&) = delete;
  mpi_process_group& operator=(const mpi_process_group&) = delete;

  int rank() const noexcept { return net_->rank(); }
  int ranks() const noexcept { return net_->ranks(); }
  std::uint32_t first_node() const noexcept { return net_->first_node(); }
  std::size_t local_nodes() const noexcept { return net_->local_nodes(); }
  std::size_t total_nodes() const noexcept { return net_->num_nodes(); }

  std::vector<double> allgather(std::span<const double> mine) const {
    if (mine.size() != local_nodes())
      throw size_error("allgather: " + std::to_string(mine.size()) + " values for the " +
                       std::to_string(local_nodes()) + " nodes of rank " + std::to_string(rank()));
    std::vector<double> all(total_nodes());
    check(MPI_Allgatherv(mine.data(), static_cast<int>(mine.size()), MPI_DOUBLE, all.data(), counts_.data(),
                         displs_.data(), MPI_DOUBLE, comm_),
          "MPI_Allgatherv");
    return all;
  }
  std::uint64_t sum(std::uint64_t v) const {
    unsigned long long mine = v, all = 0;
    check(MPI_Allreduce(&mine, &all, 1, MPI_UNSIGNED_LONG_LONG, MPI_SUM, comm_), "MPI_Allreduce");
    return all;
  }
  double broadcast(double v) const {
    check(MPI_Bcast(&v, 1, MPI_DOUBLE, 0, comm_), "MPI_Bcast");
    return v;
  }
  std::uint32_t broadcast(std::uint32_t v) const {
    check(MPI_Bcast(&v, 1, MPI_UINT32_T, 0, comm_), "MPI_Bcast");
    return v;
  }
  /// Rank r takes the sums from rank r - 1, adds its nodes, passes them on; the last rank's sums
  /// reach every rank. Each rank sends the d values once (plus the broadcast).
  void ordered_sum(std::span<float> af, std::span<double> ad, const std::function<void()>& add) const {
    const int r = rank(), last = ranks() - 1;
    if (r > 0) {
      check(MPI_Recv(af.data(), count(af.size()), MPI_FLOAT, r - 1, 0, comm_, MPI_STATUS_IGNORE), "MPI_Recv");
      check(MPI_Recv(ad.data(), count(ad.size()), MPI_DOUBLE, r - 1, 1, comm_, MPI_STATUS_IGNORE), "MPI_Recv");
    }
    add();
    if (r < last) {
      check(MPI_Send(af.data(), count(af.size()), MPI_FLOAT, r + 1, 0, comm_), "MPI_Send");
      check(MPI_Send(ad.data(), count(ad.size()), MPI_DOUBLE, r + 1, 1, comm_), "MPI_Send");
    }
    check(MPI_Bcast(af.data(), count(af.size()), MPI_FLOAT, last, comm_), "MPI_Bcast");
    check(MPI_Bcast(ad.data(), count(ad.size()), MPI_DOUBLE, last, comm_), "MPI_Bcast");
  }
  void agree(std::string_view text) { net_->agree(text); }
  void finish() { net_->finish(); }

 private:
  static int count(std::size_t n) {
    if (n > static_cast<std::size_t>(std::numeric_limits<int>::max()))
      throw size_error("a model of " + std::to_string(n) + " values is too large for one MPI message");
    return static_cast<int>(n);
  }
  void check(int rc, const char* call) const {
    if (rc != MPI_SUCCESS)
      throw mpi_error(std::string(call) + " failed on rank " + std::to_string(net_->rank()) + " (MPI error " +
                      std::to_string(rc) + ")");
  }
  mpi_network* net_;
  MPI_Comm comm_ = MPI_COMM_NULL;
  std::vector<int> counts_, displs_;
};

}  // namespace v0
}  // namespace sparsepush
