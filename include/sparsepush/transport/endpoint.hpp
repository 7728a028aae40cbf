// sparsepush/transport/endpoint.hpp: one node's link to the network (docs/design/algorithms.md, sender-side
// weighting). In round t node j posts one envelope (j, t, W[i][j], u_j, q_j) to each out-neighbour
// i; node i then collects round t's envelopes from exactly its in-neighbours and sums what arrived.
// On the wire an envelope is a 24-byte header (sender u32, round u32, share f64, weight f64, all
// little-endian) followed by encode(q_j); the byte ledger counts exactly that frame.
#pragma once

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <vector>

#include "../message.hpp"
#include "../topology/graph.hpp"
#include "accounting.hpp"

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
  std::uint32_t from = 0;  ///< the sending node
  double share = 0.0;  ///< the share of its mass the sender assigned to this receiver (W[receiver][from])
  double u = 1.0;  ///< the sender's push-sum weight u_j when it sent
  /// The sender's message; owned by the transport or the inbox, valid until the next round.
  const message* msg = nullptr;
  std::uint32_t round = 0;  ///< the sender's round
};

/// An envelope a receiver waits for: sender `from`'s envelope of round `round`.
struct awaited {
  std::uint32_t round = 0;  ///< the sender's round
  std::uint32_t from = 0;  ///< the sender
  /// Equal when round and sender are.
  friend bool operator==(const awaited&, const awaited&) = default;
};

/// take()'s `now` and `upto` of a drain: every envelope addressed to the node, whatever its round
/// and delay.
inline constexpr std::uint32_t all_rounds = 0xffffffffu;

/// A node's received envelopes for one round, ascending by sender, and the storage of the
/// messages decoded from bytes (transports that copy; by-reference transports leave it empty).
struct inbox {
  std::vector<envelope> envelopes;  ///< this round's envelopes, ascending by sender
  std::vector<message> decoded;  ///< the messages decoded from bytes, which the envelopes point into
  /// Buffers a decode parses into before it swaps them in (see decode()), so that decoding
  /// allocates nothing in steady state.
  message spare;
  /// The receiver's dimension: a decoded message of another dim is refused (0: any).
  std::uint32_t dim = 0;

  /// Forgets the envelopes (the decoded buffers keep their capacity).
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

/// An endpoint whose node may mix an envelope later than the round it was sent in (every policy
/// but lockstep, gossip/policy.hpp). post() copies or encodes the message (the sender compresses
/// its next round before the receivers mix this one). take(now, upto, must, box, expected) clears
/// box.envelopes, then moves into box every envelope addressed to this node of a round <= upto
/// that has arrived (a delay model: that is visible at the receiver's round `now`) and was not
/// taken before, ascending by (round, sender), waiting at most the network's timeout until every
/// envelope of `must` is among those taken (then transport_error naming the missing ones). The
/// messages stay valid until the node's next take(). `must` lists no lost envelope and none taken
/// before. `expected` lists the envelopes the node still expects from its in-neighbours (a
/// superset of must): a network checks liveness on it (a sender that sent nothing for longer than
/// the timeout while the node expects its envelopes is an error).
template <class E>
concept deferred_endpoint = endpoint<E> && requires(E& ep, std::uint32_t now, std::span<const awaited> must, inbox& box) {
  ep.take(now, now, must, box, must);
};

/// Node `node`'s endpoint on a network that serves many nodes (a handle; the network must outlive
/// it, and hands it out through Net::endpoint(node), which checks the node once): post and collect
/// forward to Net::post(node, ...) and Net::collect(node, ...), which a network may keep private
/// to its endpoints (friend network_endpoint<Net>).
template <class Net>
class network_endpoint {
 public:
  /// The endpoint of node `node` on net (not checked here: Net::endpoint checks it).
  network_endpoint(Net& net, std::uint32_t node) : net_(&net), node_(node) {}
  /// The node this endpoint serves.
  std::uint32_t node() const noexcept { return node_; }
  /// Sends node's message m with weight u to the receivers `out` of round `round` (Net::post).
  void post(std::uint32_t round, std::span<const out_edge> out, double u, const message& m) {
    net_->post(node_, round, out, u, m);
  }
  /// Fills box with node's envelopes of round `round` from the senders `in`, waiting for them
  /// (Net::collect).
  void collect(std::uint32_t round, std::span<const in_edge> in, inbox& box) { net_->collect(node_, round, in, box); }
  /// The deferred endpoint's take() (deferred_endpoint), where the network has one.
  void take(std::uint32_t now, std::uint32_t upto, std::span<const awaited> must, inbox& box,
            std::span<const awaited> expected = {})
    requires requires(Net& n, std::uint32_t i) { n.take(i, now, upto, must, box, expected); }
  {
    net_->take(node_, now, upto, must, box, expected);
  }
  /// Was this node's envelope of `round` to `to` lost? (Networks that inject loss.)
  bool lost(std::uint32_t round, std::uint32_t to) const
    requires requires(const Net& n, const route& r) { n.lost(r); }
  {
    return net_->lost(route{.round = round, .from = node_, .to = to});
  }

 private:
  Net* net_;
  std::uint32_t node_;
};

/// The header of an encoded envelope.
struct envelope_header {
  std::uint32_t from = 0;  ///< the sending node
  std::uint32_t round = 0;  ///< the sender's round
  double share = 0.0;  ///< the share the sender assigned to the receiver
  double u = 1.0;  ///< the sender's push-sum weight
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
