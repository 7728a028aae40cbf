// sparsepush/transport/mpi/network_class.hpp: the class mpi_network (n nodes over a communicator)
// and mpi_endpoint, one node's link to it, with their members declared; network.hpp includes this
// and the definitions (detail/network_setup.hpp: construction, agree and the waits; detail/: the
// send queue, the lockstep collect and the deferred inbox) and tells how the network works.
#pragma once

#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <limits>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "../../clock.hpp"
#include "../endpoint.hpp"
#include "../wait_policy.hpp"
#include "detail/shims.hpp"
#include "options.hpp"

namespace sparsepush {
inline namespace v0 {

class mpi_network;

/// Node `node`'s endpoint on an MPI network (a handle; the network must outlive it).
using mpi_endpoint = network_endpoint<mpi_network>;

/// n nodes on the ranks of a communicator; see network.hpp's opening comment. The ledger (of this rank's
/// nodes), loss and checkpoint queries (bytes_sent, messages_dropped, lost, save, ...) are
/// network_accounting's.
class mpi_network : public network_accounting {
 public:
  /// The nodes of a run of n nodes over `comm` (duplicated, a collective call that waits at most
  /// the timeout for the other ranks; MPI must be initialized).
  mpi_network(MPI_Comm comm, std::size_t n, mpi_options opt = {});
  ~mpi_network();
  mpi_network(const mpi_network&) = delete;
  mpi_network& operator=(const mpi_network&) = delete;

  /// The block of nodes on this rank: [first_node(), first_node() + local_nodes()).
  std::uint32_t first_node() const noexcept { return static_cast<std::uint32_t>(first_); }
  /// The number of nodes on this rank.
  std::size_t local_nodes() const noexcept { return local_; }
  /// This process's rank in the communicator.
  int rank() const noexcept { return rank_; }
  /// The number of ranks.
  int ranks() const noexcept { return size_; }
  /// The network's communicator (its own duplicate of the one it was given).
  MPI_Comm comm() const noexcept { return comm_; }
  /// The rank hosting node i.
  int owner(std::uint32_t i) const noexcept {
    const std::size_t big = extra_ * (base_ + 1);
    return static_cast<int>(i < big ? i / (base_ + 1) : extra_ + (i - big) / (base_ ? base_ : 1));
  }
  /// True when node i is on this rank.
  bool is_local(std::uint32_t i) const noexcept { return i >= first_ && i < first_ + local_; }

  /// Local node `node`'s endpoint; config_error when this rank does not host it.
  mpi_endpoint endpoint(std::uint32_t node) {
    if (!is_local(node))
      throw config_error("MPI rank " + std::to_string(rank_) + " hosts nodes [" + std::to_string(first_) + ", " +
                         std::to_string(first_ + local_) + "), not node " + std::to_string(node));
    return mpi_endpoint(*this, node);
  }

  /// Every rank checks that all ranks run with the same settings (node count, dimension,
  /// schedule, phases, seed, compressor, ... as one string). A mismatch throws config_error on
  /// every rank, naming the ranks that differ; a rank that never arrives, transport_error.
  void agree(std::string_view settings);

  /// Wait (up to the timeout) until every frame this rank sent has left; call before
  /// MPI_Finalize. A frame still pending then is a transport_error naming its round and receiver.
  /// In the deferred mode a frame has left once its receiver matched it, and this rank keeps
  /// receiving while it waits (finish_sends() is the same wait).
  void finish();
  /// The drain's wait for this rank's sends: until every envelope it sent has been received (the
  /// deferred mode: matched), at most the timeout; see finish().
  void finish_sends() { finish(); }

  /// For every node of the run, the number of rounds it posted (its next round), from `mine`, this
  /// rank's nodes' counts in node order: one MPI_Iallgatherv on the network's communicator, waited
  /// with wait() (the timeout; receiving meanwhile in the deferred mode). Every rank calls it (the
  /// drain); a rank that does not arrive within the timeout is a transport_error.
  std::vector<std::uint32_t> posted_rounds(std::span<const std::uint32_t> mine);

  /// Wait until the requests `reqs` (nonblocking calls on this network's communicator or one
  /// duplicated from it) complete, at most the network's timeout: then throw transport_error
  /// naming this rank, `what` and the timeout. The requests stay active after a throw (a
  /// collective cannot be cancelled): their buffers must outlive them, and the communicator is
  /// out of step, so end the job (MPI_Abort). In the deferred mode it receives envelopes while it
  /// waits (a peer blocked on its window to this rank proceeds). Allocates nothing unless it
  /// throws or receives an envelope beyond the buffers of earlier rounds.
  void wait(std::span<MPI_Request> reqs, std::string_view what);
  /// wait() for one request.
  void wait(MPI_Request& req, std::string_view what) { wait(std::span<MPI_Request>(&req, 1), what); }
  /// The timeout of every wait on other ranks.
  std::chrono::milliseconds timeout() const noexcept { return opt_.timeout; }
  /// The settings the network was built with.
  const mpi_options& options() const noexcept { return opt_; }
  /// A second network over the same ranks, nodes and settings, on a communicator of its own
  /// (gradient tracking's trackers, make_tracking in train/run_algorithm.hpp): collective, as the
  /// constructor.
  std::shared_ptr<mpi_network> twin() const { return std::make_shared<mpi_network>(comm_, num_nodes(), opt_); }

  /// The network's waiting policy (mpi_options::policy); deferred() unless it is lockstep.
  const wait_policy& policy() const noexcept { return opt_.policy; }
  /// True unless the policy is lockstep: envelopes are taken as they arrive.
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

  /// Where this rank's time went in the network's calls.
  const mpi_timing& timing() const noexcept { return timing_; }
  /// Sets every timing to zero.
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
  void post(std::uint32_t from, std::uint32_t round, std::span<const out_edge> out, double u, const message& m);

  /// Node `to` (local) collects round `round` from the senders of `in` (self entry skipped).
  void collect(std::uint32_t to, std::uint32_t round, std::span<const in_edge> in, inbox& box);
  /// collect()'s senders of round `round` to node `to`: the remote ones into want_, the envelopes of
  /// those on this rank into locals_ (transport_error when one has not posted); lost ones skipped.
  void lockstep_senders(std::uint32_t to, std::uint32_t round, std::span<const in_edge> in);
  /// collect()'s receive of the frame `msg` that rank src sent node `to` (node `from`'s, by the
  /// tag) into m, decoded: its header; the seconds spent are added to busy and the timings.
  envelope_header receive_lockstep_frame(std::uint32_t to, std::uint32_t round, std::uint32_t from, int src,
                                         MPI_Message& msg, MPI_Status& st, message& m, inbox& box, double& busy);
  /// The error of a collect() whose remote senders (want_) did not all arrive within the timeout.
  transport_error lockstep_timeout(std::uint32_t to, std::uint32_t round) const;

  // --- the deferred mode (every policy but lockstep) ------------------------------------------

  /// Node `to`'s deferred take (deferred_endpoint, endpoint.hpp): hand over into box every
  /// envelope for it that has arrived, of a round <= upto, ascending by (round, sender), waiting
  /// (at most the timeout) until every entry of `must` is among them; a sender of `expected` that
  /// sent it nothing for longer than the timeout is an error (liveness). `now` names the round
  /// in messages (over MPI arrival is real time; all_rounds: the drain).
  void take(std::uint32_t to, std::uint32_t now, std::uint32_t upto, std::span<const awaited> must, inbox& box,
            std::span<const awaited> expected);

  /// A lockstep collect() on a deferred network: take round `round` from exactly the senders of
  /// `in`, with nothing of an earlier round left over (the same envelopes, in the same order).
  void collect_deferred(std::uint32_t to, std::uint32_t round, std::span<const in_edge> in, inbox& box);

  /// Node `from` (local) posts round `round` in the deferred mode: a copy into the pending list of
  /// each receiver on this rank, an MPI_Issend to each other one (once its window has room).
  void post_deferred(std::uint32_t from, std::uint32_t round, std::span<const out_edge> out, double u,
                     const message& m);

  /// Sent envelopes of local node `from` to node `to` that its receiver has not matched yet.
  std::size_t unmatched(std::uint32_t from, std::uint32_t to) const noexcept;
  /// The first remote edge of `out` whose window is full (policy().inbox_rounds() unmatched
  /// envelopes), or null.
  const out_edge* window_full(std::uint32_t from, std::uint32_t round, std::span<const out_edge> out) const;
  /// Wait (receiving meanwhile, at most the timeout) until every window of `out` has room;
  /// returns the seconds it waited.
  double wait_window(std::uint32_t from, std::uint32_t round, std::span<const out_edge> out);

  /// Receive every frame that has arrived for this rank's nodes into their pending lists
  /// (deferred mode; a no-op in lockstep): match what has arrived (MPI_Improbe), start its
  /// receive (MPI_Imrecv: a large frame whose sender's rank is busy elsewhere does not hold this
  /// rank, as a blocking MPI_Mrecv would over TCP), and decode those that completed. True when
  /// it matched or completed one.
  bool receive_arrived();
  /// Decode the frames whose receive completed (oldest first); true when there was one.
  bool complete_receives();
  /// Decode one received frame into its receiver's pending list; the receiver is the tag's index
  /// in this rank's block, the round and sender are the header's, both checked.
  void accept_frame(std::span<const std::byte> frame, int src, std::size_t tg);
  /// A new pending envelope for local node `to`; its message is a spare with room for one like
  /// `like` (the caller copies or swaps the envelope's message in).
  pending_item& add_pending(std::uint32_t to, std::uint32_t round, std::uint32_t from, double share, double u,
                            const message& like);
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
  static message spare_message(node_inbox& ib, const message& like);
  /// Move node inbox ib's pending envelopes of rounds <= upto into box from index k on (their
  /// messages swapped into box.decoded, whose old buffers become spares); returns the new count.
  std::size_t hand_over(node_inbox& ib, std::uint32_t upto, inbox& box, std::size_t k);
  static bool all_taken(std::span<const awaited> must, const inbox& box) noexcept;
  static bool arrived(const node_inbox& ib, const inbox& box, const awaited& a) noexcept;
  /// The liveness check: a sender of an expected envelope that has not arrived, silent for longer
  /// than the timeout (counted from the later of its last arrival and the first take that
  /// expected it), is a transport_error.
  void check_liveness(std::uint32_t to, std::uint32_t now, node_inbox& ib, const inbox& box,
                      std::span<const awaited> expected, double t);
  /// The error of a take whose `must` envelopes did not all arrive within the timeout.
  transport_error missing(std::uint32_t to, std::uint32_t now, std::span<const awaited> must, const inbox& box) const;
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
                    const send* first);
  /// Retire the sends that completed, oldest first.
  void progress_sends();
  /// Room for the sends of this post and of the rounds in flight: up to three rounds of
  /// `edges` frames for every local node (a receiver may take a round's frames after this rank
  /// has posted the next), so that how long peers take to receive does not decide when a round
  /// allocates. Frames are kept at the largest size seen (a new phase grows them once).
  void reserve_sends(std::size_t edges, std::size_t bound);
  std::vector<std::byte> spare_frame();
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

}  // namespace v0
}  // namespace sparsepush
