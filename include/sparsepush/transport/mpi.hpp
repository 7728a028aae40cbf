// sparsepush/transport/mpi.hpp: nodes on MPI ranks (optional component sparsepush::mpi).
// Placement: the n nodes are cut into contiguous blocks, rank r hosting
// [r*b + min(r, e), ...) with b = n / R and e = n % R (the first e ranks host one more).
// An envelope to a node on another rank travels as exactly its frame, the 24-byte envelope
// header then encode(q) (endpoint.hpp), in one nonblocking MPI_Isend whose tag carries the round
// and the receiver (tag = (round mod M) * B + receiver's index in its block, B the largest block);
// a receiver sizes each message with MPI_Improbe / MPI_Mrecv and expects exactly its in-neighbours
// of that round, as the schedule says. Edges between nodes on one rank never touch MPI (the
// message is passed by reference, as loopback's by_reference mode: the ranks' drivers run their
// nodes in lockstep). The byte ledger counts every frame between nodes, on one rank or across,
// so summaries match an in-process run. Two-sided point-to-point only, no blocking send, no
// collective in a round. MPI errors are returned (MPI_ERRORS_RETURN on a private duplicate of the
// communicator) and thrown as mpi_error naming the rank, round and peer; a missing envelope
// becomes a transport_error after a timeout. Every wait on other ranks has that timeout: the
// communicator's duplication (MPI_Comm_idup), agree() and finish() here, and, through wait(), the
// collectives of train/mpi.hpp (a stopped rank must end the job, not hang it in a collective).
// agree() checks at start that every rank runs the same settings. All MPI calls of a network must
// come from one thread (MPI_THREAD_FUNNELED).
#pragma once

#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

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
};

/// Where the time of the network went, summed over rounds (seconds), for this rank.
struct mpi_timing {
  double encode = 0;   ///< building frames (envelope header + encode(q)) and posting MPI_Isend
  double wait = 0;     ///< waiting in collect for envelopes that had not arrived
  double receive = 0;  ///< MPI_Mrecv of arrived frames (copying them out of MPI)
  double decode = 0;   ///< decode_envelope (validation, CRC) of received frames
};

/// FNV-1a 64 of a settings string (detail/bytes.hpp): what agree() compares across ranks.
inline std::uint64_t settings_hash(std::string_view s) noexcept { return detail::fnv1a(s); }

class mpi_network;

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
    MPI_Comm_rank(comm, &rank_);  // for the messages of the duplication
    MPI_Request req = MPI_REQUEST_NULL;
    check(MPI_Comm_idup(comm, &comm_, &req), "MPI_Comm_idup", -1, -1);
    wait(req, "the duplication of the network's communicator (MPI_Comm_idup; every rank must build its mpi_network)");
    MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN);
    MPI_Comm_rank(comm_, &rank_);
    MPI_Comm_size(comm_, &size_);
    const std::size_t r = static_cast<std::size_t>(size_);
    base_ = n / r;
    extra_ = n % r;
    block_max_ = base_ + (extra_ ? 1 : 0);
    if (block_max_ == 0) block_max_ = 1;
    first_ = first_of(rank_);
    local_ = first_of(rank_ + 1) - first_;
    void* ub = nullptr;
    int flag = 0;
    MPI_Comm_get_attr(comm_, MPI_TAG_UB, &ub, &flag);
    const long tag_ub = flag ? *static_cast<int*>(ub) : 32767;
    rounds_mod_ = static_cast<std::uint32_t>(std::min<long>(tag_ub / static_cast<long>(block_max_), 1L << 20));
    if (rounds_mod_ < 4)
      throw config_error("MPI tag range " + std::to_string(tag_ub) + " is too small for blocks of " +
                         std::to_string(block_max_) + " nodes per rank; use more ranks");
    host(first_, local_);
    local_box_.resize(local_);
  }
  ~mpi_network() {
    for (auto& s : sends_)
      if (s.req != MPI_REQUEST_NULL) {
        MPI_Cancel(&s.req);
        MPI_Request_free(&s.req);
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
    check(MPI_Iallgather(&agree_mine_, 1, MPI_UINT64_T, all.data(), 1, MPI_UINT64_T, comm_, &req), "MPI_Iallgather", -1,
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
  void finish() {
    const auto t0 = clock::now();
    for (;;) {
      progress_sends();
      if (sends_.empty()) return;
      if (seconds_since(t0) * 1000.0 > static_cast<double>(opt_.timeout.count())) {
        const auto& s = sends_.front();
        throw transport_error("rank " + std::to_string(rank_) + ": the envelope of round " + std::to_string(s.round) +
                              " to node " + std::to_string(s.to) + " (rank " + std::to_string(owner(s.to)) +
                              ") was not taken within " + std::to_string(opt_.timeout.count()) + " ms");
      }
      std::this_thread::yield();
    }
  }

  /// Wait until the requests `reqs` (nonblocking calls on this network's communicator or one
  /// duplicated from it) complete, at most the network's timeout: then throw transport_error
  /// naming this rank, `what` and the timeout. The requests stay active after a throw (a
  /// collective cannot be cancelled): their buffers must outlive them, and the communicator is
  /// out of step, so end the job (MPI_Abort). Allocates nothing unless it throws.
  void wait(std::span<MPI_Request> reqs, std::string_view what) {
    const double t0 = MPI_Wtime(), limit = static_cast<double>(opt_.timeout.count()) / 1000.0;
    for (;;) {
      int done = 0;
      check(MPI_Testall(static_cast<int>(reqs.size()), reqs.data(), &done, MPI_STATUSES_IGNORE), "MPI_Testall", -1, -1);
      if (done) return;
      if (MPI_Wtime() - t0 > limit)
        throw transport_error("rank " + std::to_string(rank_) + ": " + std::string(what) + " did not complete within " +
                              std::to_string(opt_.timeout.count()) + " ms (a rank is missing or stalled)");
      std::this_thread::yield();
    }
  }
  void wait(MPI_Request& req, std::string_view what) { wait(std::span<MPI_Request>(&req, 1), what); }
  /// The timeout of every wait on other ranks.
  std::chrono::milliseconds timeout() const noexcept { return opt_.timeout; }

  const mpi_timing& timing() const noexcept { return timing_; }
  void reset_timing() noexcept { timing_ = {}; }

 private:
  friend mpi_endpoint;

  /// Node `from` (local) posts round `round`: one frame per non-self out-edge.
  void post(std::uint32_t from, std::uint32_t round, std::span<const out_edge> out, double u, const message& m) {
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
      send s;
      s.frame = spare_frame();  // a completed send's buffer: no allocation in steady state
      s.frame.reserve(frame_cap_);
      if (first_frame) {
        s.frame.assign(first_frame->frame.begin(), first_frame->frame.end());
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
      sends_.push_back(std::move(s));
      auto& q = sends_.back();
      first_frame = &q;
      check(MPI_Isend(q.frame.data(), static_cast<int>(q.frame.size()), MPI_BYTE, owner(e.to), tag(round, e.to), comm_,
                      &q.req),
            "MPI_Isend", round, owner(e.to), from, e.to);
    }
    timing_.encode += seconds_since(t0);
  }

  /// Node `to` (local) collects round `round` from the senders of `in` (self entry skipped).
  void collect(std::uint32_t to, std::uint32_t round, std::span<const in_edge> in, inbox& box) {
    const auto t_start = clock::now();
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
        check(MPI_Improbe(src, my_tag, comm_, &flag, &msg, &st), "MPI_Improbe", round, src, w.from, to);
        if (!flag) continue;
        any = true;
        const auto t0 = clock::now();
        int count = 0;
        MPI_Get_count(&st, MPI_BYTE, &count);
        rx_.resize(static_cast<std::size_t>(count));
        check(MPI_Mrecv(rx_.data(), count, MPI_BYTE, &msg, &st), "MPI_Mrecv", round, src, w.from, to);
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
      if (!any) {
        const double elapsed = seconds_since(t_start);
        if (elapsed * 1000.0 > static_cast<double>(opt_.timeout.count())) {
          std::string names;
          for (const auto& w : remote)
            if (!w.got)
              names += (names.empty() ? "" : ", ") + std::to_string(w.from) + " (rank " + std::to_string(owner(w.from)) + ")";
          throw transport_error("round " + std::to_string(round) + ": node " + std::to_string(to) + " on rank " +
                                std::to_string(rank_) + " waited " + std::to_string(opt_.timeout.count()) +
                                " ms for the envelopes of node(s) " + names +
                                ": a rank died, stalled or runs another round");
        }
        std::this_thread::yield();
      }
    }
    for (const auto* li : locals) got.push_back({li->from, envelope{li->from, li->share, li->u, li->msg}});
    std::erase_if(lbox, [&](const local_item& li) { return li.round == round; });
    std::sort(got.begin(), got.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
    for (const auto& g : got) box.envelopes.push_back(g.second);
    timing_.wait += seconds_since(t_start) - busy;
  }

  using clock = std::chrono::steady_clock;
  struct send {
    std::vector<std::byte> frame;
    MPI_Request req = MPI_REQUEST_NULL;
    std::uint32_t round = 0, to = 0;
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
    const std::size_t want = 3 * local_ * std::max<std::size_t>(edges, 1);
    if (sends_.capacity() < std::max(want, sends_.size() + edges)) sends_.reserve(std::max(want, sends_.size() + edges));
    if (spare_.capacity() < want) spare_.reserve(want);
    if (bound > frame_cap_) {
      frame_cap_ = bound;
      for (auto& f : spare_) f.reserve(frame_cap_);
    }
    while (frames_ < want) {
      spare_.emplace_back().reserve(frame_cap_);
      ++frames_;
    }
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
};

static_assert(endpoint<mpi_endpoint>);

}  // namespace v0
}  // namespace sparsepush
