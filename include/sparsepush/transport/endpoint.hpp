// sparsepush/transport/endpoint.hpp: one node's link to the network (ALGORITHMS.md, sender-side
// weighting). In round t node j posts one envelope (j, t, W[i][j], u_j, q_j) to each out-neighbour
// i; node i then collects round t's envelopes from exactly its in-neighbours and sums what arrived.
// On the wire an envelope is a 24-byte header (sender u32, round u32, share f64, weight f64, all
// little-endian) followed by encode(q_j); the byte ledger counts exactly that frame.
#pragma once

#include <bit>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <vector>

#include "../checkpoint.hpp"
#include "../detail/philox.hpp"
#include "../message.hpp"
#include "../topology/graph.hpp"

namespace sparsepush {
inline namespace v0 {

/// Bytes of an envelope's header: sender, round, share W[i][j], push-sum weight u_j.
inline constexpr std::size_t envelope_header_bytes = 4 + 4 + 8 + 8;

/// A transport failed: a message did not arrive in time, arrived from an unexpected sender, or
/// the network refused it. The text names the round, the sender and the receiver.
class transport_error : public error {
 public:
  using error::error;
};

/// What arrives at a node: the sender, the share it assigned, its weight and its message.
struct envelope {
  std::uint32_t from = 0;
  double share = 0.0;
  double u = 1.0;
  const message* msg = nullptr;
};

/// A node's received envelopes for one round, ascending by sender, and the storage of the
/// messages decoded from bytes (transports that copy; by-reference transports leave it empty).
struct inbox {
  std::vector<envelope> envelopes;
  std::vector<message> decoded;
  /// Buffers a decode parses into before it swaps them in (see decode()), so that decoding
  /// allocates nothing in steady state.
  message spare;
  /// The receiver's dimension: a decoded message of another dim is refused (0: any).
  std::uint32_t dim = 0;

  void clear() noexcept { envelopes.clear(); }
  /// Bytes of buffer this inbox keeps between rounds.
  std::size_t capacity_bytes() const noexcept {
    std::size_t b = envelopes.capacity() * sizeof(envelope) + decoded.capacity() * sizeof(message);
    for (const auto& m : decoded)
      b += m.indices.capacity() * sizeof(std::uint32_t) + m.payload.capacity();
    b += spare.indices.capacity() * sizeof(std::uint32_t) + spare.payload.capacity();
    return b;
  }
};

/// One node's endpoint: post this round's message to the out-neighbours (self-edge skipped), then
/// collect this round's envelopes from exactly the in-neighbours (self entry skipped), in
/// ascending sender order whatever the arrival order.
template <class E>
concept endpoint = requires(E& ep, std::uint32_t round, std::span<const out_edge> out, double u,
                            const message& m, std::span<const in_edge> in, inbox& box) {
  { ep.node() } -> std::convertible_to<std::uint32_t>;
  ep.post(round, out, u, m);
  ep.collect(round, in, box);
};

/// Injected message loss: the envelope of round t from node j to node i != j is lost with
/// probability p, decided by one Philox draw keyed by (seed, round t, counter j * n + i). Every
/// party evaluates the same rule, so a sender knows which of its envelopes were lost (as an
/// acknowledgement would tell it) and a receiver does not wait for them; the loopback and MPI
/// networks lose the same envelopes.
struct loss_model {
  double probability = 0.0;  ///< in [0, 1)
  std::uint64_t seed = 0;
  std::size_t nodes = 0;     ///< n of the run

  bool active() const noexcept { return probability > 0.0; }
  /// Is round t's envelope from `from` to `to` lost? (Never for from == to.)
  bool lost(std::uint32_t round, std::uint32_t from, std::uint32_t to) const noexcept {
    if (probability <= 0.0 || from == to) return false;
    const detail::counter_rng rng(seed, 0, round, detail::rng_stream::message_loss);
    return detail::unit_interval(rng.block(static_cast<std::uint32_t>(from * nodes + to))[0]) < probability;
  }
  /// Throw config_error unless probability is in [0, 1).
  void validate() const {
    if (!(probability >= 0.0 && probability < 1.0))
      throw config_error("drop probability must be in [0, 1), got " + std::to_string(probability));
  }
};

/// Node `node`'s endpoint on a network that serves many nodes (a handle; the network must outlive
/// it): post and collect forward to Net::post(node, ...) and Net::collect(node, ...).
template <class Net>
class network_endpoint {
 public:
  network_endpoint(Net& net, std::uint32_t node) : net_(&net), node_(node) {}
  std::uint32_t node() const noexcept { return node_; }
  void post(std::uint32_t round, std::span<const out_edge> out, double u, const message& m) {
    net_->post(node_, round, out, u, m);
  }
  void collect(std::uint32_t round, std::span<const in_edge> in, inbox& box) { net_->collect(node_, round, in, box); }
  /// Was this node's envelope of `round` to `to` lost? (Networks that inject loss.)
  bool lost(std::uint32_t round, std::uint32_t to) const
    requires requires(const Net& n) { n.lost(std::uint32_t{}, std::uint32_t{}, std::uint32_t{}); }
  {
    return net_->lost(node_, round, to);
  }

 private:
  Net* net_;
  std::uint32_t node_;
};

/// Bytes and messages each of a network's nodes has sent (envelope headers included); node i is
/// counted at i - first. A node's counters are written only by the thread that posts for it.
class byte_ledger {
 public:
  byte_ledger(std::size_t nodes, std::size_t first = 0)
      : first_(first), sent_(nodes, 0), messages_(nodes, 0), dropped_(nodes, 0) {}
  void add(std::size_t node, std::size_t bytes) noexcept {
    sent_[node - first_] += bytes;
    ++messages_[node - first_];
  }
  /// One of node's sent envelopes was lost on the way (it still counts as sent).
  void drop(std::size_t node) noexcept { ++dropped_[node - first_]; }
  std::size_t messages_dropped(std::size_t node) const { return dropped_.at(node - first_); }
  std::size_t total_dropped() const noexcept {
    std::size_t s = 0;
    for (auto m : dropped_) s += m;
    return s;
  }

  /// Checkpoint section "LDGR": first node, node count, then bytes, messages and drops per node.
  void save(checkpoint_writer& w) const {
    w.section("LDGR");
    w.u64(first_);
    w.u64(sent_.size());
    w.values(as_u64(sent_));
    w.values(as_u64(messages_));
    w.values(as_u64(dropped_));
  }
  /// Read a saved ledger of the same nodes (checked) without changing this one; assign it to
  /// restore.
  byte_ledger read(checkpoint_reader& r) const {
    r.section("LDGR");
    const auto first = r.u64("ledger first node");
    const auto count = r.u64("ledger node count");
    if (first != first_ || count != sent_.size())
      r.fail("holds the byte ledger of nodes [" + std::to_string(first) + ", " + std::to_string(first + count) +
             "), this network's are [" + std::to_string(first_) + ", " + std::to_string(first_ + sent_.size()) + ")");
    byte_ledger out(sent_.size(), first_);
    auto load = [&](std::vector<std::size_t>& v, const char* what) {
      std::vector<std::uint64_t> tmp(v.size());
      r.values(std::span<std::uint64_t>(tmp), what);
      for (std::size_t i = 0; i < v.size(); ++i) v[i] = static_cast<std::size_t>(tmp[i]);
    };
    load(out.sent_, "bytes sent");
    load(out.messages_, "messages sent");
    load(out.dropped_, "messages dropped");
    return out;
  }
  std::size_t bytes_sent(std::size_t node) const { return sent_.at(node - first_); }
  std::size_t messages_sent(std::size_t node) const { return messages_.at(node - first_); }
  std::size_t total_bytes() const noexcept {
    std::size_t s = 0;
    for (auto b : sent_) s += b;
    return s;
  }
  std::size_t total_messages() const noexcept {
    std::size_t s = 0;
    for (auto m : messages_) s += m;
    return s;
  }

 private:
  static std::vector<std::uint64_t> as_u64(const std::vector<std::size_t>& v) {
    return std::vector<std::uint64_t>(v.begin(), v.end());
  }
  std::size_t first_;
  std::vector<std::size_t> sent_, messages_, dropped_;
};

namespace detail {
inline void put_f64(std::byte* p, double v) noexcept {
  const auto bits = std::bit_cast<std::uint64_t>(v);
  put_u32(p, static_cast<std::uint32_t>(bits));
  put_u32(p + 4, static_cast<std::uint32_t>(bits >> 32));
}
inline double get_f64(const std::byte* p) noexcept {
  return std::bit_cast<double>(std::uint64_t{get_u32(p)} | (std::uint64_t{get_u32(p + 4)} << 32));
}
}  // namespace detail

/// The header of an encoded envelope.
struct envelope_header {
  std::uint32_t from = 0;
  std::uint32_t round = 0;
  double share = 0.0;
  double u = 1.0;
};

/// Bytes that the frame of any message with m's value count, value section and dimension fits
/// in, whatever index encoding is chosen (automatic never picks one above raw u32): a buffer
/// reserved to this bound is not outgrown by the next round's message of the same compressor.
inline std::size_t frame_bound(const message& m) noexcept {
  return envelope_header_bytes + message_header_bytes + (m.dense() ? 0 : 4 * std::size_t{m.count}) + m.payload.size();
}

/// Append the frame of one envelope (header, then encode(m)) to out.
inline void encode_envelope(const envelope_header& h, const message& m, std::vector<std::byte>& out) {
  const std::size_t at = out.size();
  out.resize(at + envelope_header_bytes);
  std::byte* p = out.data() + at;
  detail::put_u32(p, h.from);
  detail::put_u32(p + 4, h.round);
  detail::put_f64(p + 8, h.share);
  detail::put_f64(p + 16, h.u);
  encode(m, out);
}

/// Parse one envelope frame: the header is returned, the message is decoded (and fully
/// validated) into m; with expected_dim (not 0) a message of another dim is refused. A share or
/// weight that is not finite, or a short frame, is a decode_error.
inline envelope_header decode_envelope(std::span<const std::byte> frame, message& m, std::uint32_t expected_dim = 0,
                                       message* scratch = nullptr) {
  if (frame.size() < envelope_header_bytes)
    throw decode_error("envelope of " + std::to_string(frame.size()) + " bytes is shorter than its " +
                           std::to_string(envelope_header_bytes) + "-byte header",
                       frame.size());
  const std::byte* p = frame.data();
  envelope_header h{detail::get_u32(p), detail::get_u32(p + 4), detail::get_f64(p + 8),
                    detail::get_f64(p + 16)};
  if (!(std::isfinite(h.share) && h.share >= 0.0 && h.share <= 1.0))
    throw decode_error("envelope share is not in [0, 1]", 8);
  if (!(std::isfinite(h.u) && h.u > 0.0)) throw decode_error("envelope weight is not finite and positive", 16);
  if (expected_dim && scratch) decode(frame.subspan(envelope_header_bytes), m, expected_dim, *scratch);
  else if (expected_dim) decode(frame.subspan(envelope_header_bytes), m, expected_dim);
  else decode(frame.subspan(envelope_header_bytes), m);
  return h;
}

}  // namespace v0
}  // namespace sparsepush
