// sparsepush/transport/in_process.hpp: the embedded transport, n nodes in one process.
// Delivers each round's envelopes by address, keeps a byte ledger fed by the real encoded sizes
// (envelope header + message::wire_bytes()), can drop messages with a seeded probability (keyed by
// seed, round, sender, receiver) to test robustness, and can record a per-round delivery trace.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "../detail/philox.hpp"
#include "transport.hpp"

namespace sparsepush {
inline namespace v0 {

/// One delivery, as recorded by the trace.
struct delivery {
  std::uint32_t round = 0;
  std::uint32_t from = 0;
  std::uint32_t to = 0;
  double share = 0.0;
  std::size_t bytes = 0;
  bool dropped = false;
};

/// Settings of the in-process transport.
struct in_process_options {
  double drop_probability = 0.0;  ///< each non-self message is lost with this probability
  std::uint64_t seed = 0;         ///< keys the loss decisions
  bool trace = false;             ///< record every delivery
};

/// n nodes in one process; see the header comment.
class in_process_network {
 public:
  explicit in_process_network(std::size_t n, in_process_options opt = {})
      : opt_(opt), sent_(n, 0), messages_(n, 0) {
    if (!(opt.drop_probability >= 0.0 && opt.drop_probability < 1.0))
      throw config_error("drop probability must be in [0, 1), got " +
                         std::to_string(opt.drop_probability));
  }

  std::size_t num_nodes() const noexcept { return sent_.size(); }

  void deliver(std::uint32_t round, std::span<const outbox> out,
               std::vector<std::vector<envelope>>& in) {
    const std::size_t n = sent_.size();
    if (out.size() != n)
      throw size_error("transport of " + std::to_string(n) + " nodes was handed " +
                       std::to_string(out.size()) + " outboxes in round " + std::to_string(round));
    for (std::uint32_t j = 0; j < n; ++j)
      for (const auto& e : out[j].edges)
        if (e.to >= n)
          throw schedule_error("node " + std::to_string(j) + " pushes to node " + std::to_string(e.to) +
                               " outside [0, " + std::to_string(n) + ") in round " + std::to_string(round));
    in.resize(n);
    for (auto& box : in) box.clear();
    const detail::counter_rng rng(opt_.seed, 0, round, detail::rng_stream::message_loss);
    for (std::uint32_t j = 0; j < n; ++j) {
      const auto& ob = out[j];
      const std::size_t bytes = envelope_header_bytes + ob.msg->wire_bytes();
      for (const auto& e : ob.edges) {
        if (e.to == j) continue;
        bool dropped = false;
        if (opt_.drop_probability > 0.0)
          dropped = detail::unit_interval(rng.block(static_cast<std::uint32_t>(j * n + e.to))[0]) <
                    opt_.drop_probability;
        sent_[j] += bytes;
        ++messages_[j];
        total_ += bytes;
        ++total_messages_;
        if (opt_.trace) trace_.push_back({round, j, e.to, e.share, bytes, dropped});
        if (!dropped) in[e.to].push_back({j, e.share, ob.u, ob.msg});
      }
    }
  }

  /// Bytes node i has sent (envelopes included).
  std::size_t bytes_sent(std::size_t node) const { return sent_.at(node); }
  std::size_t messages_sent(std::size_t node) const { return messages_.at(node); }
  std::size_t total_bytes() const noexcept { return total_; }
  std::size_t total_messages() const noexcept { return total_messages_; }
  const std::vector<delivery>& trace() const noexcept { return trace_; }
  void clear_trace() { trace_.clear(); }

 private:
  in_process_options opt_;
  std::vector<std::size_t> sent_, messages_;
  std::size_t total_ = 0, total_messages_ = 0;
  std::vector<delivery> trace_;
};

static_assert(transport<in_process_network>);

}  // namespace v0
}  // namespace sparsepush
