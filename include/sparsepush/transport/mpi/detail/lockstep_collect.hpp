// sparsepush/transport/mpi/detail/lockstep_collect.hpp: mpi_network's lockstep round: post()
// sends one frame per remote out-edge with MPI_Isend (a delivery on this rank is passed by
// reference), and collect() takes exactly round t's envelopes from the in-neighbours the schedule
// lists, MPI_Improbe / MPI_Mrecv on their tag, in sender order. Other policies go to the deferred mode.
#pragma once

#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "../network_class.hpp"

namespace sparsepush {
inline namespace v0 {

inline void mpi_network::post(std::uint32_t from, std::uint32_t round, std::span<const out_edge> out, double u,
                              const message& m) {
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

inline void mpi_network::lockstep_senders(std::uint32_t to, std::uint32_t round, std::span<const in_edge> in) {
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
}

inline envelope_header mpi_network::receive_lockstep_frame(std::uint32_t to, std::uint32_t round, std::uint32_t from,
                                                           int src, MPI_Message& msg, MPI_Status& st, message& m,
                                                           inbox& box, double& busy) {
  const auto t0 = clock::now();
  int count = 0;
  MPI_Get_count(&st, MPI_BYTE, &count);
  rx_.resize(static_cast<std::size_t>(count));
  check(detail::mpi_mrecv(rx_.data(), count, &msg, &st, comm_), "MPI_Mrecv", round, src, from, to);
  const auto t1 = clock::now();
  const double rx_s = std::chrono::duration<double>(t1 - t0).count();
  timing_.receive += rx_s;
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
  return h;
}

inline transport_error mpi_network::lockstep_timeout(std::uint32_t to, std::uint32_t round) const {
  std::string names;
  for (const auto& w : want_)
    if (!w.got)
      names += (names.empty() ? "" : ", ") + std::to_string(w.from) + " (rank " + std::to_string(owner(w.from)) + ")";
  return transport_error("round " + std::to_string(round) + ": node " + std::to_string(to) + " on rank " +
                         std::to_string(rank_) + " waited " + std::to_string(opt_.timeout.count()) +
                         " ms for the envelopes of node(s) " + names + ": a rank died, stalled or runs another round");
}

inline void mpi_network::collect(std::uint32_t to, std::uint32_t round, std::span<const in_edge> in, inbox& box) {
  if (deferred_) return collect_deferred(to, round, in, box);
  const auto t_start = clock::now();
  const double w_start = MPI_Wtime(), limit = timeout_seconds();
  detail::mpi_backoff pause;
  box.envelopes.clear();
  lockstep_senders(to, round, in);
  auto& remote = want_;
  auto& lbox = local_box_[to - first_];
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
      message& m = box.decoded[k++];
      const envelope_header h = receive_lockstep_frame(to, round, w.from, src, msg, st, m, box, busy);
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
      if (MPI_Wtime() - w_start > limit) throw lockstep_timeout(to, round);
      pause.pause();
    }
  }
  for (const auto* li : locals_) got.push_back({li->from, envelope{li->from, li->share, li->u, li->msg}});
  std::erase_if(lbox, [&](const local_item& li) { return li.round == round; });
  std::sort(got.begin(), got.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  for (const auto& g : got) box.envelopes.push_back(g.second);
  timing_.wait += seconds_since(t_start) - busy;
}

}  // namespace v0
}  // namespace sparsepush
