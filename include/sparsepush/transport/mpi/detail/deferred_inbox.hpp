// sparsepush/transport/mpi/detail/deferred_inbox.hpp: mpi_network's deferred mode (every policy
// but lockstep): post_deferred() copies to receivers on this rank and MPI_Issends to the others;
// receive_arrived() matches and receives whatever has arrived into per-node pending lists; take()
// hands a node its envelopes of rounds <= upto, waiting only for those it must have (liveness).
#pragma once

#include <mpi.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "../network_class.hpp"

namespace sparsepush {
inline namespace v0 {

inline void mpi_network::take(std::uint32_t to, std::uint32_t now, std::uint32_t upto, std::span<const awaited> must,
                              inbox& box, std::span<const awaited> expected) {
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

inline void mpi_network::collect_deferred(std::uint32_t to, std::uint32_t round, std::span<const in_edge> in,
                                          inbox& box) {
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

inline void mpi_network::post_deferred(std::uint32_t from, std::uint32_t round, std::span<const out_edge> out, double u,
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

inline bool mpi_network::receive_arrived() {
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

inline bool mpi_network::complete_receives() {
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

inline void mpi_network::accept_frame(std::span<const std::byte> frame, int src, std::size_t tg) {
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

inline mpi_network::pending_item& mpi_network::add_pending(std::uint32_t to, std::uint32_t round, std::uint32_t from,
                                                           double share, double u, const message& like) {
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

inline message mpi_network::spare_message(node_inbox& ib, const message& like) {
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

inline std::size_t mpi_network::hand_over(node_inbox& ib, std::uint32_t upto, inbox& box, std::size_t k) {
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

inline bool mpi_network::all_taken(std::span<const awaited> must, const inbox& box) noexcept {
  for (const auto& a : must)
    if (std::none_of(box.envelopes.begin(), box.envelopes.end(),
                     [&](const envelope& e) { return e.round == a.round && e.from == a.from; }))
      return false;
  return true;
}

inline bool mpi_network::arrived(const node_inbox& ib, const inbox& box, const awaited& a) noexcept {
  return std::any_of(ib.items.begin(), ib.items.end(),
                     [&](const pending_item& it) { return it.round == a.round && it.from == a.from; }) ||
         std::any_of(box.envelopes.begin(), box.envelopes.end(),
                     [&](const envelope& e) { return e.round == a.round && e.from == a.from; });
}

inline void mpi_network::check_liveness(std::uint32_t to, std::uint32_t now, node_inbox& ib, const inbox& box,
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

inline transport_error mpi_network::missing(std::uint32_t to, std::uint32_t now, std::span<const awaited> must,
                                            const inbox& box) const {
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

}  // namespace v0
}  // namespace sparsepush
