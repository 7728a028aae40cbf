// sparsepush/transport/loopback.hpp: the in-process network, n node endpoints in one process.
// post() files node j's envelope for round t in each out-neighbour's mailbox; collect() waits
// until every in-neighbour's envelope for round t is there and hands them over in ascending
// sender order. The network keeps a byte ledger of the real frame sizes (envelope header +
// message::wire_bytes()), can drop messages with a seeded probability keyed by (seed, round,
// sender, receiver), and can record a delivery trace.
// Two modes: by_reference passes a pointer to the sender's message (no copy; the sender must not
// compress again before its receivers have mixed, as a lockstep group guarantees), and encoded
// sends every envelope through encode_envelope / decode_envelope, as a real network would (safe
// for nodes on free-running threads).
#pragma once

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "../detail/philox.hpp"
#include "endpoint.hpp"
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

/// How the loopback hands a message to its receivers.
enum class loopback_mode {
  by_reference,  ///< a pointer to the sender's message
  encoded,       ///< every envelope encoded to bytes and decoded at the receiver
};

/// Settings of the loopback network.
struct loopback_options {
  double drop_probability = 0.0;  ///< each non-self message is lost with this probability
  std::uint64_t seed = 0;         ///< keys the loss decisions
  bool trace = false;             ///< record every delivery
  loopback_mode mode = loopback_mode::by_reference;
  /// How long collect() waits for a missing envelope before it throws transport_error.
  std::chrono::milliseconds timeout{std::chrono::seconds(60)};
};

class loopback_network;

/// Node `node`'s endpoint on a loopback network (a handle; the network must outlive it).
using loopback_endpoint = network_endpoint<loopback_network>;

/// n node endpoints in one process; see the header comment.
class loopback_network {
 public:
  explicit loopback_network(std::size_t n, loopback_options opt = {})
      : opt_(opt), loss_{opt.drop_probability, opt.seed, n}, ledger_(n), boxes_(n), spare_(n) {
    loss_.validate();
    if (opt.timeout.count() <= 0) throw config_error("loopback timeout must be positive");
  }
  loopback_network(const loopback_network&) = delete;
  loopback_network& operator=(const loopback_network&) = delete;

  std::size_t num_nodes() const noexcept { return boxes_.size(); }
  /// Every node is local to a loopback: nodes [0, num_nodes()).
  std::uint32_t first_node() const noexcept { return 0; }
  std::size_t local_nodes() const noexcept { return boxes_.size(); }
  const loopback_options& options() const noexcept { return opt_; }
  loopback_endpoint endpoint(std::uint32_t node) {
    check_node(node, "endpoint");
    return loopback_endpoint(*this, node);
  }

  /// Node `from` posts round `round`: one envelope per non-self out-edge.
  void post(std::uint32_t from, std::uint32_t round, std::span<const out_edge> out, double u,
            const message& m) {
    const std::size_t n = num_nodes();
    check_node(from, "post");
    for (const auto& e : out)
      if (e.to >= n)
        throw schedule_error("node " + std::to_string(from) + " pushes to node " + std::to_string(e.to) +
                             " outside [0, " + std::to_string(n) + ") in round " + std::to_string(round));
    const std::size_t bytes = envelope_header_bytes + m.wire_bytes();
    for (const auto& e : out) {
      if (e.to == from) continue;
      const bool dropped = loss_.lost(round, from, e.to);
      pending p{round, from, e.share, u, dropped, &m, {}};
      if (!dropped && opt_.mode == loopback_mode::encoded) {
        p.frame = spare_frame(from);
        p.frame.clear();
        // a reused frame of a message with as many values never grows
        p.frame.reserve(std::max(bytes, frame_bound(m)));
        encode_envelope({from, round, e.share, u}, m, p.frame);
      }
      ledger_.add(from, bytes);
      if (dropped) ledger_.drop(from);
      if (opt_.trace) {
        std::lock_guard lock(trace_mu_);
        trace_.push_back({round, from, e.to, e.share, bytes, dropped});
      }
      auto& box = boxes_[e.to];
      {
        std::lock_guard lock(box.mu);
        box.items.push_back(std::move(p));
      }
      box.cv.notify_all();
    }
  }

  /// Node `to` collects round `round` from the senders of `in` (its self entry is skipped).
  void collect(std::uint32_t to, std::uint32_t round, std::span<const in_edge> in, inbox& box) {
    check_node(to, "collect");
    auto& mb = boxes_[to];
    std::size_t expected = 0;
    for (const auto& e : in) expected += e.from != to;
    std::vector<pending>& got = mb.got;  // only node `to` collects from its mailbox
    got.clear();
    {
      std::unique_lock lock(mb.mu);
      auto have = [&] {
        std::size_t c = 0;
        for (const auto& p : mb.items) c += p.round == round;
        return c >= expected;
      };
      if (!mb.cv.wait_for(lock, opt_.timeout, have)) {
        std::string missing;
        for (const auto& e : in) {
          if (e.from == to) continue;
          bool there = false;
          for (const auto& p : mb.items) there |= p.round == round && p.from == e.from;
          if (!there) missing += (missing.empty() ? "" : ", ") + std::to_string(e.from);
        }
        throw transport_error("round " + std::to_string(round) + ": node " + std::to_string(to) +
                              " waited " + std::to_string(opt_.timeout.count()) +
                              " ms for the envelopes of node(s) " + missing);
      }
      for (auto it = mb.items.begin(); it != mb.items.end();) {
        if (it->round == round) {
          got.push_back(std::move(*it));
          it = mb.items.erase(it);
        } else {
          ++it;
        }
      }
    }
    std::sort(got.begin(), got.end(), [](const pending& a, const pending& b) { return a.from < b.from; });
    for (std::size_t k = 1; k < got.size(); ++k)
      if (got[k].from == got[k - 1].from)
        throw transport_error("round " + std::to_string(round) + ": node " + std::to_string(to) +
                              " received two envelopes from node " + std::to_string(got[k].from));
    for (const auto& p : got) {
      const bool listed = std::any_of(in.begin(), in.end(), [&](const in_edge& e) { return e.from == p.from; });
      if (!listed || p.from == to)
        throw transport_error("round " + std::to_string(round) + ": node " + std::to_string(to) +
                              " received an envelope from node " + std::to_string(p.from) +
                              ", which its schedule does not list as an in-neighbour");
    }
    box.envelopes.clear();
    std::size_t live = 0;
    for (const auto& p : got) live += !p.dropped;
    if (opt_.mode == loopback_mode::encoded && box.decoded.size() < live) box.decoded.resize(live);
    std::size_t k = 0;
    for (auto& p : got) {
      if (p.dropped) continue;
      if (opt_.mode == loopback_mode::encoded) {
        message& m = box.decoded[k++];
        const envelope_header h = decode_envelope(p.frame, m, box.dim, box.dim ? &box.spare : nullptr);
        if (h.from != p.from || h.round != round)
          throw transport_error("round " + std::to_string(round) + ": node " + std::to_string(to) +
                                " decoded an envelope of node " + std::to_string(h.from) + ", round " +
                                std::to_string(h.round) + " from node " + std::to_string(p.from));
        box.envelopes.push_back({h.from, h.share, h.u, &m});
        return_frame(p.from, std::move(p.frame));
      } else {
        box.envelopes.push_back({p.from, p.share, p.u, p.msg});
      }
    }
  }

  /// Checkpoint the byte ledger of this network's nodes (bytes, messages, drops).
  void save(checkpoint_writer& w) const { ledger_.save(w); }
  /// Read a saved ledger (checked against this network's nodes) without changing anything.
  byte_ledger read_ledger(checkpoint_reader& r) const { return ledger_.read(r); }
  /// Restore a ledger read by read_ledger().
  void restore_ledger(byte_ledger l) noexcept { ledger_ = std::move(l); }

  /// Was round `round`'s envelope from `from` to `to` lost? (The sender's acknowledgement.)
  bool lost(std::uint32_t from, std::uint32_t round, std::uint32_t to) const noexcept {
    return loss_.lost(round, from, to);
  }
  const loss_model& loss() const noexcept { return loss_; }
  /// Envelopes lost so far (all nodes; node i's own).
  std::size_t messages_dropped() const noexcept { return ledger_.total_dropped(); }
  std::size_t messages_dropped(std::size_t node) const { return ledger_.messages_dropped(node); }

  /// Bytes node i has sent (envelopes included).
  std::size_t bytes_sent(std::size_t node) const { return ledger_.bytes_sent(node); }
  std::size_t messages_sent(std::size_t node) const { return ledger_.messages_sent(node); }
  std::size_t total_bytes() const noexcept { return ledger_.total_bytes(); }
  std::size_t total_messages() const noexcept { return ledger_.total_messages(); }
  const std::vector<delivery>& trace() const noexcept { return trace_; }
  void clear_trace() { trace_.clear(); }

  /// Legacy whole-round delivery (the `transport` concept): post every outbox, then collect every
  /// node's inbox. Inbox order is by ascending sender.
  void deliver(std::uint32_t round, std::span<const outbox> out, std::vector<std::vector<envelope>>& in) {
    const std::size_t n = num_nodes();
    if (out.size() != n)
      throw size_error("transport of " + std::to_string(n) + " nodes was handed " +
                       std::to_string(out.size()) + " outboxes in round " + std::to_string(round));
    for (std::uint32_t j = 0; j < n; ++j)
      for (const auto& e : out[j].edges)
        if (e.to >= n)
          throw schedule_error("node " + std::to_string(j) + " pushes to node " + std::to_string(e.to) +
                               " outside [0, " + std::to_string(n) + ") in round " + std::to_string(round));
    std::vector<std::vector<in_edge>> rows(n);
    for (std::uint32_t j = 0; j < n; ++j)
      for (const auto& e : out[j].edges) rows[e.to].push_back({j, e.share});
    for (std::uint32_t j = 0; j < n; ++j) post(j, round, out[j].edges, out[j].u, *out[j].msg);
    legacy_.resize(n);
    in.resize(n);
    for (std::uint32_t i = 0; i < n; ++i) {
      collect(i, round, rows[i], legacy_[i]);
      in[i] = legacy_[i].envelopes;
    }
  }

 private:
  struct pending {
    std::uint32_t round = 0;
    std::uint32_t from = 0;
    double share = 0.0;
    double u = 1.0;
    bool dropped = false;
    const message* msg = nullptr;
    std::vector<std::byte> frame;  ///< the encoded envelope (encoded mode)
  };
  struct mailbox {
    std::mutex mu;
    std::condition_variable cv;
    std::vector<pending> items;
    std::vector<pending> got;  ///< collect()'s scratch, used by the receiver only
  };
  /// A frame buffer of an earlier envelope of `from` (empty if none is free): frames circulate
  /// from sender to receiver and back, so that steady-state rounds allocate none.
  std::vector<std::byte> spare_frame(std::uint32_t from) {
    std::lock_guard lock(frames_mu_);
    auto& pool = spare_[from];
    if (pool.empty()) return {};
    std::vector<std::byte> f = std::move(pool.back());
    pool.pop_back();
    return f;
  }
  void return_frame(std::uint32_t from, std::vector<std::byte>&& f) {
    std::lock_guard lock(frames_mu_);
    spare_[from].push_back(std::move(f));
  }
  void check_node(std::uint32_t node, const char* what) const {
    if (node >= num_nodes())
      throw config_error(std::string("loopback ") + what + ": node " + std::to_string(node) +
                         " outside [0, " + std::to_string(num_nodes()) + ")");
  }

  loopback_options opt_;
  loss_model loss_;
  byte_ledger ledger_;
  std::vector<mailbox> boxes_;
  std::mutex frames_mu_;
  std::vector<std::vector<std::vector<std::byte>>> spare_;  ///< free frames, by sender
  std::mutex trace_mu_;
  std::vector<delivery> trace_;
  std::vector<inbox> legacy_;  // deliver()'s decoded storage
};

static_assert(endpoint<loopback_endpoint>);

}  // namespace v0
}  // namespace sparsepush
