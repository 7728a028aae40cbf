// sparsepush/transport/mpi/detail/send_queue.hpp: mpi_network's frames in flight: each queued in
// a spare buffer (encode(m) once per post, copies for its other receivers), retired oldest first
// as MPI completes them, reserved ahead so a steady round allocates nothing; and the deferred
// mode's window, at most policy().inbox_rounds() unmatched envelopes per receiver.
#pragma once

#include <mpi.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "../../../detail/bytes.hpp"
#include "../network_class.hpp"

namespace sparsepush {
inline namespace v0 {

inline std::size_t mpi_network::unmatched(std::uint32_t from, std::uint32_t to) const noexcept {
  std::size_t c = 0;
  for (const auto& s : sends_) c += s.req != MPI_REQUEST_NULL && s.from == from && s.to == to;
  return c;
}

inline const out_edge* mpi_network::window_full(std::uint32_t from, std::uint32_t round,
                                                std::span<const out_edge> out) const {
  for (const auto& e : out)
    if (e.to != from && !is_local(e.to) && !lost({.round = round, .from = from, .to = e.to}) &&
        unmatched(from, e.to) >= window_)
      return &e;
  return nullptr;
}

inline double mpi_network::wait_window(std::uint32_t from, std::uint32_t round, std::span<const out_edge> out) {
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

inline mpi_network::send& mpi_network::queue_frame(std::uint32_t from, std::uint32_t round, const out_edge& e, double u,
                                                   const message& m, const send* first) {
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

inline void mpi_network::progress_sends() {
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

inline void mpi_network::reserve_sends(std::size_t edges, std::size_t bound) {
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

inline std::vector<std::byte> mpi_network::spare_frame() {
  if (spare_.empty()) return {};
  std::vector<std::byte> f = std::move(spare_.back());
  spare_.pop_back();
  f.clear();
  return f;
}

}  // namespace v0
}  // namespace sparsepush
