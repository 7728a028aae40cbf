// sparsepush/transport/mpi.hpp: nodes on MPI ranks (optional component sparsepush::mpi).
// Placement: the n nodes are cut into contiguous blocks, rank r hosting
// [r*b + min(r, e), ...) with b = n / R and e = n % R (the first e ranks host one more).
// An envelope to a node on another rank travels as exactly its frame, the 24-byte envelope
// header then encode(q) (endpoint.hpp), in one nonblocking send whose tag carries the round
// and the receiver (tag = (round mod M) * B + receiver's index in its block, B the largest block).
// The byte ledger counts every frame between nodes, on one rank or across, so summaries match an
// in-process run. Two-sided point-to-point only, no blocking send, no collective in a round.
// Two modes, chosen by mpi_options::policy (gossip/policy.hpp):
//  * lockstep (the default): MPI_Isend; collect(round) sizes each message with MPI_Improbe /
//    MPI_Mrecv on its tag and expects exactly its in-neighbours of that round, as the schedule
//    says. Edges between nodes on one rank never touch MPI (the message is passed by reference,
//    as loopback's by_reference mode: the ranks' drivers run their nodes in lockstep).
//  * deferred (every other policy; ALGORITHMS.md, "Asynchronous and overlapped push-sum"): a node
//    mixes envelopes of earlier rounds, so post() copies a delivery on its own rank into the
//    receiver's pending list, and sends the others with MPI_Issend (complete once the receiver has
//    matched it). A sender keeps at most policy.inbox_rounds() = W unmatched envelopes per receiver;
//    posting one more waits (receiving meanwhile) up to the timeout. take() receives whatever has
//    arrived for this rank's nodes (MPI_Improbe(ANY_SOURCE, ANY_TAG) + MPI_Imrecv, so that a large
//    frame whose sender is computing never blocks the receiver: the receiver from the tag, the
//    round and sender from the header, checked against the tag and the source rank) into per-node
//    pending lists, and hands over a node's envelopes of rounds <= upto, ascending by (round,
//    sender); it waits only for the envelopes it must have, and checks liveness on the ones it
//    expects. (Over TCP a large frame still moves only while its sender's rank calls MPI, unless
//    the MPI has a progress thread: Open MPI's --mca btl_tcp_progress_thread 1.) Every wait loop
//    (take, the window, finish, wait) receives too, so that ranks waiting on each other progress.
//    W must be below M (no two rounds of one window share a tag). The pending lists are bounded
//    by what arrives between a node's takes, not by W: a receiver that takes only rounds <= its
//    own while its senders run ahead keeps their later rounds (see largest_pending()).
// Waiting blocks, it does not poll: every wait loop tests, then sleeps with a backoff (20 us,
// doubling up to 1 ms), its deadline taken from MPI_Wtime (under SimGrid's SMPI both are simulated
// time: clock.hpp; there the duplications block, see mpi_comm_idup). MPI errors are returned
// (MPI_ERRORS_RETURN on a private duplicate of the communicator) and thrown as mpi_error naming the
// rank, round and peer; a missing envelope becomes a transport_error after a timeout. Every wait
// on other ranks has that timeout: the communicator's duplication (MPI_Comm_idup), agree(),
// finish(), posted_rounds() here, and, through wait(), the collectives of train/mpi.hpp (a stopped
// rank must end the job, not hang it in a collective). agree() checks at start that every rank
// runs the same settings. All MPI calls of a network must come from one thread
// (MPI_THREAD_FUNNELED).
#pragma once

#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <limits>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "../clock.hpp"
#include "../gossip/policy.hpp"
#include "endpoint.hpp"

namespace sparsepush {
inline namespace v0 {

/// An MPI call failed; the text names the call, this rank, the round and the peer.
class mpi_error : public transport_error {
 public:
  using transport_error::transport_error;
};

/// Settings of the MPI network.
struct mpi_options {
  /// How long collect() (and every other wait on other ranks: the set-up, agree(), finish(),
  /// wait(), so the collectives of train/mpi.hpp too) waits before it throws transport_error.
  std::chrono::milliseconds timeout{std::chrono::seconds(60)};
  /// Injected loss (accounting.hpp, loss_model): each non-self envelope is lost with this
  /// probability, keyed by (seed, round, sender, receiver) exactly as on the loopback, so an MPI
  /// run loses the same envelopes as the same run in one process. A lost envelope counts as
  /// sent but never leaves the sender; its receiver does not wait for it.
  double drop_probability = 0.0;
  std::uint64_t seed = 0;  ///< keys the loss decisions
  /// How long receivers wait (gossip/policy.hpp). lockstep: collect() per round, as above; any
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

class mpi_network;

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

/// Node `node`'s endpoint on an MPI network (a handle; the network must outlive it).
using mpi_endpoint = network_endpoint<mpi_network>;

/// n nodes on the ranks of a communicator; see the header comment. The ledger (of this rank's
/// nodes), loss and checkpoint queries (bytes_sent, messages_dropped, lost, save, ...) are
/// network_accounting's.
class mpi_network : public network_accounting {
 public:
  /// The nodes of a run of n nodes over `comm` (duplicated, a collective call that waits at most
  /// the timeout for the other ranks; MPI must be initialized).
  mpi_network(MPI_Comm comm, std::size_t n, mpi_options opt = {})
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
  ~mpi_network() {
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
  mpi_network(const mpi_network&) = delete;
  mpi_network& operator=(const mpi_network&) = delete;

  /// The block of nodes on this rank: [first_node(), first_node() + local_nodes()).
  std::uint32_t first_node() const noexcept { return static_cast<std::uint32_t>(first_); }
  std::size_t local_nodes() const noexcept { return local_; }
  int rank() const noexcept { return rank_; }
  int ranks() const noexcept { return size_; }
  MPI_Comm comm() const noexcept { return comm_; }
  /// The rank hosting node i.
  int owner(std::uint32_t i) const noexcept {
    const std::size_t big = extra_ * (base_ + 1);
    return static_cast<int>(i < big ? i / (base_ + 1) : extra_ + (i - big) / (base_ ? base_ : 1));
  }
  bool is_local(std::uint32_t i) const noexcept { return i >= first_ && i < first_ + local_; }

  mpi_endpoint endpoint(std::uint32_t node) {
    if (!is_local(node))
      throw config_error("MPI rank " + std::to_string(rank_) + " hosts nodes [" + std::to_string(first_) + ", " +
                         std::to_string(first_ + local_) + "), not node " + std::to_string(node));
    return mpi_endpoint(*this, node);
  }

  /// Every rank checks that all ranks run with the same settings (node count, dimension,
  /// schedule, phases, seed, compressor, ... as one string). A mismatch throws config_error on
  /// every rank, naming the ranks that differ; a rank that never arrives, transport_error.
  void agree(std::string_view settings) {
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

  /// Wait (up to the timeout) until every frame this rank sent has left; call before
  /// MPI_Finalize. A frame still pending then is a transport_error naming its round and receiver.
  /// In the deferred mode a frame has left once its receiver matched it, and this rank keeps
  /// receiving while it waits (finish_sends() is the same wait).
  void finish() {
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
  /// The drain's wait for this rank's sends: until every envelope it sent has been received (the
  /// deferred mode: matched), at most the timeout; see finish().
  void finish_sends() { finish(); }

  /// For every node of the run, the number of rounds it posted (its next round), from `mine`, this
  /// rank's nodes' counts in node order: one MPI_Iallgatherv on the network's communicator, waited
  /// with wait() (the timeout; receiving meanwhile in the deferred mode). Every rank calls it (the
  /// drain); a rank that does not arrive within the timeout is a transport_error.
  std::vector<std::uint32_t> posted_rounds(std::span<const std::uint32_t> mine) {
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

  /// Wait until the requests `reqs` (nonblocking calls on this network's communicator or one
  /// duplicated from it) complete, at most the network's timeout: then throw transport_error
  /// naming this rank, `what` and the timeout. The requests stay active after a throw (a
  /// collective cannot be cancelled): their buffers must outlive them, and the communicator is
  /// out of step, so end the job (MPI_Abort). In the deferred mode it receives envelopes while it
  /// waits (a peer blocked on its window to this rank proceeds). Allocates nothing unless it
  /// throws or receives an envelope beyond the buffers of earlier rounds.
  void wait(std::span<MPI_Request> reqs, std::string_view what) {
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
  void wait(MPI_Request& req, std::string_view what) { wait(std::span<MPI_Request>(&req, 1), what); }
  /// The timeout of every wait on other ranks.
  std::chrono::milliseconds timeout() const noexcept { return opt_.timeout; }

  /// The network's waiting policy (mpi_options::policy); deferred() unless it is lockstep.
  const wait_policy& policy() const noexcept { return opt_.policy; }
  bool deferred() const noexcept { return deferred_; }

  /// Deferred mode: envelopes that have arrived for local node `node` and were not taken yet.
  std::size_t pending_envelopes(std::uint32_t node) const { return inbox_of(node).items.size(); }
  /// Deferred mode: the most envelopes of one sender that were pending at local node `node` at once.
  std::size_t largest_pending(std::uint32_t node) const { return inbox_of(node).largest; }
  /// Deferred mode: the most envelopes of one of this rank's senders to one receiver that were
  /// sent and not yet matched at once (at most policy().inbox_rounds()).
  std::size_t largest_unmatched() const noexcept { return largest_unmatched_; }
  /// Deferred mode: how many times one of the network's buffers (or a taken inbox's) had to grow:
  /// a new high of envelopes pending, taken, received or in flight at once, or a larger message.
  /// Only these may allocate: a post() or take() that grows nothing allocates nothing. How soon
  /// the highs are reached depends on the ranks' timing.
  std::size_t buffer_growths() const noexcept { return growths_; }

  const mpi_timing& timing() const noexcept { return timing_; }
  void reset_timing() noexcept { timing_ = {}; }

 private:
  friend mpi_endpoint;

  /// Deferred mode: an envelope that arrived for a local node and was not taken yet.
  struct pending_item {
    std::uint32_t round = 0, from = 0;
    double share = 0.0, u = 1.0;
    message msg;
    bool taken = false;
  };
  /// Deferred mode, liveness: when a sender's last envelope arrived, and since when the node has
  /// been expecting one that has not (never: not expecting).
  static constexpr double never = -std::numeric_limits<double>::infinity();
  struct sender_clock {
    std::uint32_t from = 0;
    double last = never, since = never;
    bool owed = false;
  };
  /// Deferred mode: a frame being received (MPI_Imrecv of a matched message).
  struct rx_frame {
    std::vector<std::byte> buf;
    MPI_Request req = MPI_REQUEST_NULL;
    int src = 0, tag = 0;
  };
  /// Deferred mode: a local node's pending envelopes, spare message buffers and senders.
  struct node_inbox {
    std::vector<pending_item> items;
    std::vector<message> pool;
    std::vector<sender_clock> senders;
    std::uint32_t dim = 0;     ///< the receiver's dim (its last take's box.dim; 0: unknown yet)
    std::size_t largest = 0;   ///< the most envelopes of one sender pending at once
  };
  sender_clock& sender(node_inbox& ib, std::uint32_t from) {
    for (auto& sd : ib.senders)
      if (sd.from == from) return sd;
    grows(ib.senders, ib.senders.size() + 1);
    ib.senders.push_back({from});
    return ib.senders.back();
  }
  const node_inbox& inbox_of(std::uint32_t node) const {
    if (!is_local(node))
      throw config_error("MPI rank " + std::to_string(rank_) + " hosts nodes [" + std::to_string(first_) + ", " +
                         std::to_string(first_ + local_) + "), not node " + std::to_string(node));
    return inboxes_[node - first_];
  }
  double timeout_seconds() const noexcept { return static_cast<double>(opt_.timeout.count()) / 1000.0; }

  /// Node `from` (local) posts round `round`: one frame per non-self out-edge.
  void post(std::uint32_t from, std::uint32_t round, std::span<const out_edge> out, double u, const message& m) {
    if (deferred_) return post_deferred(from, round, out, u, m);
    const auto t0 = clock::now();
    progress_sends();
    const std::size_t bytes = envelope_header_bytes + m.wire_bytes();
    const send* first_frame = nullptr;  // encode(m) once; further receivers copy the frame
    reserve_sends(out.size(), frame_bound(m));  // no reallocation while first_frame points in
    check_receivers(from, round, out);  // all edges first: a bad one sends and counts nothing
    for (const auto& e : out) {
      if (e.to == from) continue;
      if (count_envelope({.round = round, .from = from, .to = e.to}, bytes)) continue;  // lost
      if (is_local(e.to)) {
        local_box_[e.to - first_].push_back({round, from, e.share, u, &m});
        continue;
      }
      send& q = queue_frame(from, round, e, u, m, first_frame);
      first_frame = &q;
      check(MPI_Isend(q.frame.data(), static_cast<int>(q.frame.size()), MPI_BYTE, owner(e.to), tag(round, e.to), comm_,
                      &q.req),
            "MPI_Isend", round, owner(e.to), from, e.to);
    }
    timing_.encode += seconds_since(t0);
  }

  /// Node `to` (local) collects round `round` from the senders of `in` (self entry skipped).
  void collect(std::uint32_t to, std::uint32_t round, std::span<const in_edge> in, inbox& box) {
    if (deferred_) return collect_deferred(to, round, in, box);
    const auto t_start = clock::now();
    const double w_start = MPI_Wtime(), limit = timeout_seconds();
    detail::mpi_backoff pause;
    box.envelopes.clear();
    auto& remote = want_;  // scratch kept between calls (collect runs on one thread)
    auto& locals = locals_;
    remote.clear();
    locals.clear();
    auto& lbox = local_box_[to - first_];
    for (const auto& e : in) {
      if (e.from == to || lost({.round = round, .from = e.from, .to = to})) continue;  // a lost envelope is not waited for
      if (is_local(e.from)) {
        const auto it = std::find_if(lbox.begin(), lbox.end(),
                                     [&](const local_item& li) { return li.round == round && li.from == e.from; });
        if (it == lbox.end())
          throw transport_error("round " + std::to_string(round) + ": node " + std::to_string(to) +
                                " has no envelope from node " + std::to_string(e.from) +
                                " on its own rank (a rank's nodes must post before they collect)");
        locals.push_back(&*it);
      } else {
        remote.push_back({e.from});
      }
    }
    std::size_t missing = remote.size(), k = 0;
    if (box.decoded.size() < remote.size()) box.decoded.resize(remote.size());
    auto& got = got_;
    got.clear();
    const int my_tag = tag(round, to);
    double busy = 0;  // receiving and decoding, not waiting
    while (missing > 0) {
      bool any = false;
      progress_sends();
      for (auto& w : remote) {
        if (w.got) continue;
        const int src = owner(w.from);
        int flag = 0;
        MPI_Message msg;
        MPI_Status st;
        check(detail::mpi_improbe(src, my_tag, comm_, &flag, &msg, &st), "MPI_Improbe", round, src, w.from, to);
        if (!flag) continue;
        any = true;
        const auto t0 = clock::now();
        int count = 0;
        MPI_Get_count(&st, MPI_BYTE, &count);
        rx_.resize(static_cast<std::size_t>(count));
        check(detail::mpi_mrecv(rx_.data(), count, &msg, &st, comm_), "MPI_Mrecv", round, src, w.from, to);
        const auto t1 = clock::now();
        const double rx_s = std::chrono::duration<double>(t1 - t0).count();
        timing_.receive += rx_s;
        message& m = box.decoded[k++];
        envelope_header h;
        try {
          h = decode_envelope(rx_, m, box.dim, box.dim ? &box.spare : nullptr);
        } catch (const decode_error& e) {
          throw transport_error("round " + std::to_string(round) + ": node " + std::to_string(to) +
                                " received a bad frame from rank " + std::to_string(src) + ": " + e.what());
        }
        const double dec_s = seconds_since(t1);
        timing_.decode += dec_s;
        busy += rx_s + dec_s;
        // A rank hosting several senders may deliver them in any order: match on the header.
        auto it = std::find_if(remote.begin(), remote.end(), [&](const want& x) { return !x.got && x.from == h.from; });
        if (h.round != round || it == remote.end() || owner(h.from) != src)
          throw transport_error("round " + std::to_string(round) + ": node " + std::to_string(to) + " received node " +
                                std::to_string(h.from) + "'s envelope of round " + std::to_string(h.round) +
                                " from rank " + std::to_string(src) +
                                ", which its schedule does not list for this round (ranks out of step?)");
        it->got = true;
        --missing;
        got.push_back({h.from, envelope{h.from, h.share, h.u, &m}});
        break;  // the vector `remote` changed under the loop: rescan
      }
      if (missing == 0) break;
      if (any) {
        pause.reset();
      } else {
        if (MPI_Wtime() - w_start > limit) {
          std::string names;
          for (const auto& w : remote)
            if (!w.got)
              names += (names.empty() ? "" : ", ") + std::to_string(w.from) + " (rank " + std::to_string(owner(w.from)) + ")";
          throw transport_error("round " + std::to_string(round) + ": node " + std::to_string(to) + " on rank " +
                                std::to_string(rank_) + " waited " + std::to_string(opt_.timeout.count()) +
                                " ms for the envelopes of node(s) " + names +
                                ": a rank died, stalled or runs another round");
        }
        pause.pause();
      }
    }
    for (const auto* li : locals) got.push_back({li->from, envelope{li->from, li->share, li->u, li->msg}});
    std::erase_if(lbox, [&](const local_item& li) { return li.round == round; });
    std::sort(got.begin(), got.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
    for (const auto& g : got) box.envelopes.push_back(g.second);
    timing_.wait += seconds_since(t_start) - busy;
  }

  // --- the deferred mode (every policy but lockstep) ------------------------------------------

  /// Node `to`'s deferred take (deferred_endpoint, endpoint.hpp): hand over into box every
  /// envelope for it that has arrived, of a round <= upto, ascending by (round, sender), waiting
  /// (at most the timeout) until every entry of `must` is among them; a sender of `expected` that
  /// sent it nothing for longer than the timeout is an error (liveness). `now` names the round
  /// in messages (over MPI arrival is real time; all_rounds: the drain).
  void take(std::uint32_t to, std::uint32_t now, std::uint32_t upto, std::span<const awaited> must, inbox& box,
            std::span<const awaited> expected) {
    if (!deferred_)
      throw config_error("take() is the deferred endpoint's, and this MPI network runs lockstep: give "
                         "mpi_options::policy the nodes' waiting policy");
    const double t_start = MPI_Wtime(), busy0 = busy_, limit = timeout_seconds();
    node_inbox& ib = inboxes_[to - first_];
    ib.dim = box.dim;
    box.envelopes.clear();
    for (const auto& a : must) {
      if (a.round > upto)
        throw config_error(when(now) + ": node " + std::to_string(to) + " must wait for node " +
                           std::to_string(a.from) + "'s envelope of round " + std::to_string(a.round) +
                           ", above the last round it takes (" + std::to_string(upto) + ")");
      if (is_local(a.from) && posted_[a.from - first_] <= a.round)
        throw transport_error(when(now) + ": node " + std::to_string(to) + " waits for node " + std::to_string(a.from) +
                              "'s envelope of round " + std::to_string(a.round) + ", which node " +
                              std::to_string(a.from) + " (on the same rank " + std::to_string(rank_) +
                              ") has not posted: a rank's nodes must post a round before it is waited for");
    }
    receive_arrived();
    progress_sends();
    std::size_t k = hand_over(ib, upto, box, 0);
    detail::mpi_backoff pause;
    for (;;) {
      const double t = MPI_Wtime();
      check_liveness(to, now, ib, box, expected, t);
      if (all_taken(must, box)) break;
      if (t - t_start > limit) throw missing(to, now, must, box);
      pause.pause();
      const bool got = receive_arrived();
      progress_sends();
      if (got) {
        k = hand_over(ib, upto, box, k);
        pause.reset();
      }
    }
    for (std::size_t j = 0; j < k; ++j) box.envelopes[j].msg = &box.decoded[j];
    std::sort(box.envelopes.begin(), box.envelopes.end(), [](const envelope& a, const envelope& b) {
      return a.round != b.round ? a.round < b.round : a.from < b.from;
    });
    timing_.wait += (MPI_Wtime() - t_start) - (busy_ - busy0);
  }

  /// A lockstep collect() on a deferred network: take round `round` from exactly the senders of
  /// `in`, with nothing of an earlier round left over (the same envelopes, in the same order).
  void collect_deferred(std::uint32_t to, std::uint32_t round, std::span<const in_edge> in, inbox& box) {
    auto& must = collect_must_;
    must.clear();
    for (const auto& e : in)
      if (e.from != to && !lost({.round = round, .from = e.from, .to = to})) must.push_back({round, e.from});
    take(to, round, round, must, box, must);
    if (box.envelopes.size() != must.size())
      throw transport_error("round " + std::to_string(round) + ": node " + std::to_string(to) + " collected " +
                            std::to_string(box.envelopes.size()) + " envelopes of rounds up to " +
                            std::to_string(round) + " where its schedule lists " + std::to_string(must.size()) +
                            ": envelopes of earlier rounds were left untaken (take() them first)");
  }

  /// Node `from` (local) posts round `round` in the deferred mode: a copy into the pending list of
  /// each receiver on this rank, an MPI_Issend to each other one (once its window has room).
  void post_deferred(std::uint32_t from, std::uint32_t round, std::span<const out_edge> out, double u,
                     const message& m) {
    const auto t0 = clock::now();
    check_receivers(from, round, out);  // all edges first: a bad one sends and counts nothing
    progress_sends();
    const double waited = wait_window(from, round, out);  // nor does a full window that times out
    const std::size_t bytes = envelope_header_bytes + m.wire_bytes();
    reserve_sends(out.size(), frame_bound(m));  // no reallocation while first_frame points in
    const send* first_frame = nullptr;
    for (const auto& e : out) {
      if (e.to == from) continue;
      if (count_envelope({.round = round, .from = from, .to = e.to}, bytes)) continue;  // lost
      if (is_local(e.to)) {
        pending_item& it = add_pending(e.to, round, from, e.share, u, m);
        grows(it.msg, m);
        it.msg = m;  // a copy: the sender compresses its next round first
        continue;
      }
      send& q = queue_frame(from, round, e, u, m, first_frame);
      first_frame = &q;
      check(MPI_Issend(q.frame.data(), static_cast<int>(q.frame.size()), MPI_BYTE, owner(e.to), tag(round, e.to), comm_,
                       &q.req),
            "MPI_Issend", round, owner(e.to), from, e.to);
      largest_unmatched_ = std::max(largest_unmatched_, unmatched(from, e.to));
    }
    auto& p = posted_[from - first_];
    p = std::max(p, round + 1);
    timing_.encode += seconds_since(t0) - waited;
  }

  /// Sent envelopes of local node `from` to node `to` that its receiver has not matched yet.
  std::size_t unmatched(std::uint32_t from, std::uint32_t to) const noexcept {
    std::size_t c = 0;
    for (const auto& s : sends_) c += s.req != MPI_REQUEST_NULL && s.from == from && s.to == to;
    return c;
  }
  /// The first remote edge of `out` whose window is full (policy().inbox_rounds() unmatched
  /// envelopes), or null.
  const out_edge* window_full(std::uint32_t from, std::uint32_t round, std::span<const out_edge> out) const {
    for (const auto& e : out)
      if (e.to != from && !is_local(e.to) && !lost({.round = round, .from = from, .to = e.to}) &&
          unmatched(from, e.to) >= window_)
        return &e;
    return nullptr;
  }
  /// Wait (receiving meanwhile, at most the timeout) until every window of `out` has room;
  /// returns the seconds it waited.
  double wait_window(std::uint32_t from, std::uint32_t round, std::span<const out_edge> out) {
    const out_edge* full = window_full(from, round, out);
    if (!full) return 0.0;
    const double t0 = MPI_Wtime(), busy0 = busy_, limit = timeout_seconds();
    detail::mpi_backoff pause;
    while (full) {
      if (MPI_Wtime() - t0 > limit) {
        std::string rounds;
        for (const auto& s : sends_)
          if (s.req != MPI_REQUEST_NULL && s.from == from && s.to == full->to)
            rounds += (rounds.empty() ? "" : ", ") + std::to_string(s.round);
        throw transport_error("round " + std::to_string(round) + ": node " + std::to_string(from) + " on rank " +
                              std::to_string(rank_) + " cannot post to node " + std::to_string(full->to) + " (rank " +
                              std::to_string(owner(full->to)) + "): its envelopes of rounds " + rounds +
                              " to that node were not received within " + std::to_string(opt_.timeout.count()) +
                              " ms (a receiver holds at most " + std::to_string(window_) +
                              " envelopes per in-neighbour): the receiving rank died, stalled or stopped taking");
      }
      if (receive_arrived()) pause.reset();
      else pause.pause();
      progress_sends();
      full = window_full(from, round, out);
    }
    const double spent = MPI_Wtime() - t0;
    timing_.wait += spent - (busy_ - busy0);
    return spent;
  }

  /// Receive every frame that has arrived for this rank's nodes into their pending lists
  /// (deferred mode; a no-op in lockstep): match what has arrived (MPI_Improbe), start its
  /// receive (MPI_Imrecv: a large frame whose sender's rank is busy elsewhere does not hold this
  /// rank, as a blocking MPI_Mrecv would over TCP), and decode those that completed. True when
  /// it matched or completed one.
  bool receive_arrived() {
    if (!deferred_) return false;
    bool any = complete_receives();
    bool matched = false;
    for (int k = 0; k < 4096; ++k) {  // bounded: senders that keep sending do not hold the caller
      int flag = 0;
      MPI_Message msg = MPI_MESSAGE_NULL;
      MPI_Status st;
      check(detail::mpi_improbe(MPI_ANY_SOURCE, MPI_ANY_TAG, comm_, &flag, &msg, &st), "MPI_Improbe", -1, -1);
      if (!flag) break;
      const auto t0 = clock::now();
      int count = 0;
      MPI_Get_count(&st, MPI_BYTE, &count);
      grows(receiving_, receiving_.size() + 1);
      receiving_.emplace_back();
      rx_frame& r = receiving_.back();
      if (!rx_spare_.empty()) {
        r.buf = std::move(rx_spare_.back());
        rx_spare_.pop_back();
      }
      grows(r.buf, static_cast<std::size_t>(count));
      r.buf.resize(static_cast<std::size_t>(count));
      r.src = st.MPI_SOURCE;
      r.tag = st.MPI_TAG;
      check(detail::mpi_imrecv(r.buf.data(), count, &msg, &r.req, st, comm_), "MPI_Imrecv", -1, r.src);
      const double rx_s = seconds_since(t0);
      timing_.receive += rx_s;
      busy_ += rx_s;
      matched = true;
    }
    if (matched) complete_receives();
    return any || matched;
  }
  /// Decode the frames whose receive completed (oldest first); true when there was one.
  bool complete_receives() {
    bool any = false;
    for (auto& r : receiving_) {
      const auto t0 = clock::now();
      int done = 0;
      check(MPI_Test(&r.req, &done, MPI_STATUS_IGNORE), "MPI_Test", -1, r.src);
      const double rx_s = seconds_since(t0);
      timing_.receive += rx_s;
      busy_ += rx_s;
      if (!done) continue;
      accept_frame(r.buf, r.src, static_cast<std::size_t>(r.tag));
      grows(rx_spare_, rx_spare_.size() + 1);
      rx_spare_.push_back(std::move(r.buf));  // its buffer serves a later receive
      any = true;
    }
    if (any) std::erase_if(receiving_, [](const rx_frame& r) { return r.req == MPI_REQUEST_NULL; });
    return any;
  }
  /// Decode one received frame into its receiver's pending list; the receiver is the tag's index
  /// in this rank's block, the round and sender are the header's, both checked.
  void accept_frame(std::span<const std::byte> frame, int src, std::size_t tg) {
    const auto t1 = clock::now();
    const std::size_t in_block = tg % block_max_;
    const auto tag_round = static_cast<std::uint32_t>(tg / block_max_);
    if (in_block >= local_)
      throw transport_error("rank " + std::to_string(rank_) + " received a frame from rank " + std::to_string(src) +
                            " with tag " + std::to_string(tg) + ", for index " + std::to_string(in_block) +
                            " of its block of " + std::to_string(local_) +
                            " nodes (do the ranks run the same node count?)");
    const auto to = static_cast<std::uint32_t>(first_ + in_block);
    node_inbox& ib = inboxes_[in_block];
    envelope_header h;
    const std::size_t caps = capacities(rx_msg_) + capacities(spare_msg_);
    try {
      h = decode_envelope(frame, rx_msg_, ib.dim, ib.dim ? &spare_msg_ : nullptr);
    } catch (const decode_error& e) {
      throw transport_error("node " + std::to_string(to) + " on rank " + std::to_string(rank_) +
                            " received a bad frame from rank " + std::to_string(src) + ": " + e.what());
    }
    if (capacities(rx_msg_) + capacities(spare_msg_) != caps) ++growths_;
    const double dec_s = seconds_since(t1);
    timing_.decode += dec_s;
    busy_ += dec_s;
    const auto got = [&] {
      return "node " + std::to_string(to) + " on rank " + std::to_string(rank_) + " received from rank " +
             std::to_string(src) + " a frame whose header names node " + std::to_string(h.from) + " and round " +
             std::to_string(h.round);
    };
    if (h.from >= num_nodes() || owner(h.from) != src)
      throw transport_error(got() + ", but " +
                            (h.from >= num_nodes() ? "the run has " + std::to_string(num_nodes()) + " nodes"
                                                   : "node " + std::to_string(h.from) + " is on rank " +
                                                         std::to_string(owner(h.from))));
    if (h.round % rounds_mod_ != tag_round)
      throw transport_error(got() + ", but its tag " + std::to_string(tg) + " says round " + std::to_string(tag_round) +
                            " modulo " + std::to_string(rounds_mod_));
    std::swap(add_pending(to, h.round, h.from, h.share, h.u, rx_msg_).msg, rx_msg_);  // rx_msg_: a spare
  }
  /// A new pending envelope for local node `to`; its message is a spare with room for one like
  /// `like` (the caller copies or swaps the envelope's message in).
  pending_item& add_pending(std::uint32_t to, std::uint32_t round, std::uint32_t from, double share, double u,
                            const message& like) {
    node_inbox& ib = inboxes_[to - first_];
    std::size_t same = 1;
    for (const auto& it : ib.items) {
      if (it.from != from) continue;
      if (it.round == round)
        throw transport_error("round " + std::to_string(round) + ": node " + std::to_string(to) + " on rank " +
                              std::to_string(rank_) + " received node " + std::to_string(from) + "'s envelope (rank " +
                              std::to_string(owner(from)) + ") twice");
      ++same;
    }
    ib.largest = std::max(ib.largest, same);
    grows(ib.items, ib.items.size() + 1);
    if (ib.pool.empty()) ++growths_;  // spare_message() makes new spares
    ib.items.emplace_back();
    pending_item& it = ib.items.back();
    it.msg = spare_message(ib, like);
    it.round = round;
    it.from = from;
    it.share = share;
    it.u = u;
    sender(ib, from).last = MPI_Wtime();
    return it;
  }
  /// buffer_growths(): count a growth when v has no room for `need` elements (or for m's).
  template <class V>
  void grows(const V& v, std::size_t need) noexcept {
    if (v.capacity() < need) ++growths_;
  }
  void grows(const message& into, const message& m) noexcept {
    if (into.indices.capacity() < m.indices.size() || into.payload.capacity() < m.payload.size()) ++growths_;
  }
  static std::size_t capacities(const message& m) noexcept { return m.indices.capacity() + m.payload.capacity(); }
  /// A message buffer of node inbox ib's spares. When they run out, the spares grow by half the
  /// pending envelopes (at least 2), each with room for a message like `like`: buffers grow to the
  /// most envelopes pending and taken at once, in a few steps, and then stay.
  static message spare_message(node_inbox& ib, const message& like) {
    if (ib.pool.empty())
      for (std::size_t j = std::max<std::size_t>(2, ib.items.size() / 2); j > 0; --j) {
        message& m = ib.pool.emplace_back();
        m.indices.reserve(like.indices.size());
        m.payload.reserve(like.payload.size());
      }
    message m = std::move(ib.pool.back());
    ib.pool.pop_back();
    return m;
  }
  /// Move node inbox ib's pending envelopes of rounds <= upto into box from index k on (their
  /// messages swapped into box.decoded, whose old buffers become spares); returns the new count.
  std::size_t hand_over(node_inbox& ib, std::uint32_t upto, inbox& box, std::size_t k) {
    bool any = false;
    for (auto& it : ib.items) {
      if (it.round > upto) continue;
      if (box.dim && it.msg.dim != box.dim)
        throw transport_error("round " + std::to_string(it.round) + ": node " + std::to_string(it.from) +
                              "'s message has dim " + std::to_string(it.msg.dim) + ", the receiver's model " +
                              std::to_string(box.dim));
      if (box.decoded.size() <= k) {
        ++growths_;
        box.decoded.resize(k + 1);
      }
      std::swap(box.decoded[k], it.msg);
      grows(box.envelopes, box.envelopes.size() + 1);
      box.envelopes.push_back({it.from, it.share, it.u, nullptr, it.round});
      ++k;
      it.taken = any = true;
    }
    if (any) {
      for (auto& it : ib.items)  // box.decoded's old messages; a new slot's empty one is dropped
        if (it.taken && it.msg.payload.capacity() > 0) {
          grows(ib.pool, ib.pool.size() + 1);
          ib.pool.push_back(std::move(it.msg));
        }
      std::erase_if(ib.items, [](const pending_item& it) { return it.taken; });
    }
    return k;
  }
  static bool all_taken(std::span<const awaited> must, const inbox& box) noexcept {
    for (const auto& a : must)
      if (std::none_of(box.envelopes.begin(), box.envelopes.end(),
                       [&](const envelope& e) { return e.round == a.round && e.from == a.from; }))
        return false;
    return true;
  }
  static bool arrived(const node_inbox& ib, const inbox& box, const awaited& a) noexcept {
    return std::any_of(ib.items.begin(), ib.items.end(),
                       [&](const pending_item& it) { return it.round == a.round && it.from == a.from; }) ||
           std::any_of(box.envelopes.begin(), box.envelopes.end(),
                       [&](const envelope& e) { return e.round == a.round && e.from == a.from; });
  }
  /// The liveness check: a sender of an expected envelope that has not arrived, silent for longer
  /// than the timeout (counted from the later of its last arrival and the first take that
  /// expected it), is a transport_error.
  void check_liveness(std::uint32_t to, std::uint32_t now, node_inbox& ib, const inbox& box,
                      std::span<const awaited> expected, double t) {
    for (auto& sd : ib.senders) sd.owed = false;
    for (const auto& a : expected) {
      if (arrived(ib, box, a)) continue;
      sender_clock& sd = sender(ib, a.from);
      sd.owed = true;
      if (sd.since == never) sd.since = t;
    }
    const double limit = timeout_seconds();
    bool stale = false;
    for (auto& sd : ib.senders) {
      if (!sd.owed) sd.since = never;
      else if (t - std::max(sd.since, sd.last) > limit) stale = true;
    }
    if (!stale) return;
    std::string names, rounds;
    std::vector<std::uint32_t> rs;
    for (const auto& sd : ib.senders) {
      if (!sd.owed || t - std::max(sd.since, sd.last) <= limit) continue;
      names += (names.empty() ? "" : ", ") + std::to_string(sd.from) + " (rank " + std::to_string(owner(sd.from)) + ")";
      for (const auto& a : expected)
        if (a.from == sd.from && !arrived(ib, box, a)) rs.push_back(a.round);
    }
    std::sort(rs.begin(), rs.end());
    rs.erase(std::unique(rs.begin(), rs.end()), rs.end());
    for (std::size_t j = 0; j < rs.size() && j < 8; ++j) rounds += (j ? ", " : "") + std::to_string(rs[j]);
    if (rs.size() > 8) rounds += ", ...";
    throw transport_error(when(now) + ": node " + std::to_string(to) + " on rank " + std::to_string(rank_) +
                          " has received nothing from node(s) " + names + " for more than " +
                          std::to_string(opt_.timeout.count()) + " ms while expecting their envelopes of rounds " +
                          rounds + ": a rank died or stalled");
  }
  /// The error of a take whose `must` envelopes did not all arrive within the timeout.
  transport_error missing(std::uint32_t to, std::uint32_t now, std::span<const awaited> must, const inbox& box) const {
    std::string names;
    std::size_t listed = 0;
    for (const auto& a : must) {
      if (std::any_of(box.envelopes.begin(), box.envelopes.end(),
                      [&](const envelope& e) { return e.round == a.round && e.from == a.from; }))
        continue;
      if (listed++ == 12) {
        names += ", ...";
        break;
      }
      names += (names.empty() ? "" : ", ") + std::string("node ") + std::to_string(a.from) + "'s of round " +
               std::to_string(a.round) + " (rank " + std::to_string(owner(a.from)) + ")";
    }
    return transport_error(when(now) + ": node " + std::to_string(to) + " on rank " + std::to_string(rank_) + " waited " +
                           std::to_string(opt_.timeout.count()) + " ms for the envelopes " + names +
                           ": a rank died, stalled or runs another round");
  }
  std::string when(std::uint32_t now) const {
    return now == all_rounds ? std::string("the drain") : "round " + std::to_string(now);
  }

  using clock = run_clock;
  struct send {
    std::vector<std::byte> frame;
    MPI_Request req = MPI_REQUEST_NULL;
    std::uint32_t round = 0, to = 0, from = 0;
  };
  struct local_item {
    std::uint32_t round = 0;
    std::uint32_t from = 0;
    double share = 0.0;
    double u = 1.0;
    const message* msg = nullptr;
  };

  static double seconds_since(clock::time_point t0) {
    return std::chrono::duration<double>(clock::now() - t0).count();
  }
  std::size_t first_of(int r) const noexcept {
    const auto rr = static_cast<std::size_t>(r);
    return rr * base_ + std::min(rr, extra_);
  }
  int tag(std::uint32_t round, std::uint32_t to) const noexcept {
    const std::size_t in_block = to - first_of(owner(to));
    return static_cast<int>((round % rounds_mod_) * block_max_ + in_block);
  }
  void check(int rc, const char* call, long round, int peer, long from = -1, long to = -1) const {
    if (rc == MPI_SUCCESS) return;
    char text[MPI_MAX_ERROR_STRING];
    int len = 0;
    MPI_Error_string(rc, text, &len);
    std::string where = "rank " + std::to_string(rank_);
    if (round >= 0) where += ", round " + std::to_string(round);
    if (peer >= 0) where += ", peer rank " + std::to_string(peer);
    if (from >= 0) where += ", node " + std::to_string(from) + " -> node " + std::to_string(to);
    throw mpi_error(std::string(call) + " failed (" + where + "): " + std::string(text, static_cast<std::size_t>(len)));
  }
  /// Queue the frame of node `from`'s envelope to e.to in a spare buffer (no allocation in steady
  /// state): encode(m) for the post's first frame, a copy of `first`'s bytes for the others.
  send& queue_frame(std::uint32_t from, std::uint32_t round, const out_edge& e, double u, const message& m,
                    const send* first) {
    send s;
    if (spare_.empty()) ++growths_;
    s.frame = spare_frame();  // a completed send's buffer: no allocation in steady state
    s.frame.reserve(frame_cap_);
    if (first) {
      s.frame.assign(first->frame.begin(), first->frame.end());
    } else {
      s.frame.resize(envelope_header_bytes);
      encode(m, s.frame);
    }
    std::byte* p = s.frame.data();
    detail::put_u32(p, from);
    detail::put_u32(p + 4, round);
    detail::put_f64(p + 8, e.share);
    detail::put_f64(p + 16, u);
    s.round = round;
    s.to = e.to;
    s.from = from;
    sends_.push_back(std::move(s));
    return sends_.back();
  }
  /// Retire the sends that completed, oldest first.
  void progress_sends() {
    for (auto& s : sends_) {
      if (s.req == MPI_REQUEST_NULL) continue;
      int done = 0;
      check(MPI_Test(&s.req, &done, MPI_STATUS_IGNORE), "MPI_Test", s.round, owner(s.to), -1, s.to);
    }
    // keep the order of the pending ones (finish() names the oldest); recycle the buffers
    std::size_t kept = 0;
    for (std::size_t i = 0; i < sends_.size(); ++i) {
      if (sends_[i].req == MPI_REQUEST_NULL) {
        grows(spare_, spare_.size() + 1);
        if (sends_[i].frame.capacity() < frame_cap_) ++growths_;
        spare_.push_back(std::move(sends_[i].frame));
        spare_.back().reserve(frame_cap_);  // grown once, by a frame sent before a larger phase
      }
      else if (kept != i) sends_[kept++] = std::move(sends_[i]);
      else ++kept;
    }
    sends_.resize(kept);
  }
  /// Room for the sends of this post and of the rounds in flight: up to three rounds of
  /// `edges` frames for every local node (a receiver may take a round's frames after this rank
  /// has posted the next), so that how long peers take to receive does not decide when a round
  /// allocates. Frames are kept at the largest size seen (a new phase grows them once).
  void reserve_sends(std::size_t edges, std::size_t bound) {
    const std::size_t want = 3 * local_ * std::max<std::size_t>(edges, 1), need = std::max(want, sends_.size() + edges);
    bool grew = false;  // buffer_growths(): one growth however many of these grow
    if (sends_.capacity() < need) {
      sends_.reserve(need);
      grew = true;
    }
    if (spare_.capacity() < want) {
      spare_.reserve(want);
      grew = true;
    }
    if (bound > frame_cap_) {
      frame_cap_ = bound;
      for (auto& f : spare_) f.reserve(frame_cap_);
      grew = true;
    }
    for (; frames_ < want; ++frames_) {
      spare_.emplace_back().reserve(frame_cap_);
      grew = true;
    }
    growths_ += grew;
  }
  std::vector<std::byte> spare_frame() {
    if (spare_.empty()) return {};
    std::vector<std::byte> f = std::move(spare_.back());
    spare_.pop_back();
    f.clear();
    return f;
  }
  mpi_options opt_;
  MPI_Comm comm_ = MPI_COMM_NULL;
  int rank_ = 0, size_ = 1;
  std::size_t base_ = 0, extra_ = 0, block_max_ = 1, first_ = 0, local_ = 0;
  std::uint32_t rounds_mod_ = 1;
  std::vector<std::vector<local_item>> local_box_;
  std::vector<send> sends_;  ///< in flight, oldest first (an MPI request keeps only its buffer's address)
  std::vector<std::vector<std::byte>> spare_;  ///< buffers of completed sends, reused by post()
  std::size_t frames_ = 0;                     ///< frame buffers made so far (in spare_ or in flight)
  std::size_t frame_cap_ = 0;                  ///< capacity every frame buffer is kept at
  std::vector<std::byte> rx_;
  std::uint64_t agree_mine_ = 0;  ///< agree()'s hash and the gathered hashes (see agree())
  std::vector<std::uint64_t> agree_all_;
  struct want {
    std::uint32_t from;
    bool got = false;
  };
  std::vector<want> want_;
  std::vector<const local_item*> locals_;
  std::vector<std::pair<std::uint32_t, envelope>> got_;
  mpi_timing timing_;
  // the deferred mode
  bool deferred_ = false;
  std::uint32_t window_ = 1;                ///< policy().inbox_rounds()
  std::vector<node_inbox> inboxes_;         ///< per local node
  std::vector<std::uint32_t> posted_;       ///< per local node: its next round (posted so far)
  std::size_t largest_unmatched_ = 0;
  std::size_t growths_ = 0;                 ///< buffer_growths()
  double busy_ = 0;                         ///< seconds spent receiving and decoding (not waiting)
  message rx_msg_, spare_msg_;              ///< a received frame's message and the decode's scratch
  std::vector<rx_frame> receiving_;         ///< receives in flight, oldest first
  std::vector<std::vector<std::byte>> rx_spare_;  ///< buffers of completed receives
  std::vector<awaited> collect_must_;
  std::vector<std::uint32_t> rounds_mine_, rounds_all_;  ///< posted_rounds()'s buffers
  std::vector<int> rounds_counts_, rounds_displs_;
};

static_assert(endpoint<mpi_endpoint>);
static_assert(deferred_endpoint<mpi_endpoint>);

}  // namespace v0
}  // namespace sparsepush
