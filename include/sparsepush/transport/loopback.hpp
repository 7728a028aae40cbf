// sparsepush/transport/loopback.hpp: the in-process network, n node endpoints in one process.
// post() files node j's envelope (j, t, W[i][j], u_j, q_j) in each out-neighbour i's mailbox;
// collect() waits until every in-neighbour's envelope of round t is there and hands them over in
// ascending sender order. Ledger and loss as every network (accounting.hpp); see loopback_mode.
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "../topology/validate.hpp"
#include "../detail/philox.hpp"
#include "endpoint.hpp"

namespace sparsepush {
inline namespace v0 {

/// One delivery, as recorded by the trace.
struct delivery {
  std::uint32_t round = 0;  ///< the sender's round
  std::uint32_t from = 0;  ///< the sender
  std::uint32_t to = 0;  ///< the receiver
  double share = 0.0;  ///< the share sent
  std::size_t bytes = 0;  ///< the envelope's size on the wire, header included
  bool dropped = false;  ///< lost by the injected loss
};

/// How the loopback hands a message to its receivers. Every mode gives the same bits.
enum class loopback_mode {
  /// The default: post() copies q_j for each receiver (buffers reused, no allocation in steady
  /// state), so a sender may compress its next message while receivers still mix this one; safe
  /// for nodes on free-running threads.
  copied,
  /// Every envelope is encoded to its frame and decoded (validated) at the receiver, as over a
  /// real network; safe for free-running threads too.
  encoded,
  /// No copy: receivers get a pointer to the sender's own message, so a sender must not compress
  /// again before every receiver has mixed. Only for drivers that run their nodes in lockstep
  /// (every node posts, then every node collects and mixes); they ask for it with for_lockstep().
  by_reference,
};

/// How long a loopback node waits for a missing envelope by default (loopback_options::timeout,
/// Python's LoopbackNetwork).
inline constexpr std::chrono::duration<double> default_loopback_timeout{60.0};

/// Settings of the loopback network.
struct loopback_options {
  double drop_probability = 0.0;  ///< each non-self message is lost with this probability
  std::uint64_t seed = 0;         ///< keys the loss decisions
  bool trace = false;             ///< record every delivery
  loopback_mode mode = loopback_mode::copied;  ///< how a message reaches its receivers (same bits in every mode)
  /// How long collect() waits for a missing envelope before it throws transport_error.
  std::chrono::milliseconds timeout{std::chrono::duration_cast<std::chrono::milliseconds>(default_loopback_timeout)};
  /// The delay model of deferred rounds (take(), gossip/policy.hpp): the envelope of round s from
  /// node j to node i is visible to i from its round s + delta on, delta = Philox(seed, s, j n + i)
  /// mod (max_delay + 1) rounds: a seeded rule, as the loss, so that a run with delays is
  /// bit-reproducible in one process. 0: every envelope is visible in the round it was sent.
  /// A bounded-staleness policy needs max_delay <= its bound (take() refuses to wait for an
  /// envelope the rule hides); overlap takes round t - 1's envelopes whatever their delay.
  std::uint32_t max_delay = 0;
};

/// The settings a lockstep driver (one that runs every node's post before any node's collect and
/// mix, as push_sum_group does) gives the loopback it owns: the default copied mode becomes
/// by_reference, which saves the copies; an explicitly chosen encoded mode stays.
inline loopback_options for_lockstep(loopback_options opt) noexcept {
  if (opt.mode == loopback_mode::copied) opt.mode = loopback_mode::by_reference;
  return opt;
}

class loopback_network;

/// Node `node`'s endpoint on a loopback network (a handle; the network must outlive it).
using loopback_endpoint = network_endpoint<loopback_network>;

/// n node endpoints in one process; see the header comment. The ledger, loss and checkpoint
/// queries (bytes_sent, messages_dropped, lost, save, ...) are network_accounting's.
class loopback_network : public network_accounting {
 public:
  /// n nodes in this process. Throws config_error for n = 0, a drop probability outside [0, 1) or a
  /// timeout that is not positive.
  explicit loopback_network(std::size_t n, loopback_options opt = {})
      : network_accounting(n, opt.drop_probability, opt.seed), opt_(opt), boxes_(n), pools_(n) {
    if (opt.timeout.count() <= 0) throw config_error("loopback timeout must be positive");
  }

  /// Every node is local to a loopback: nodes [0, num_nodes()).
  std::uint32_t first_node() const noexcept { return 0; }
  /// Every node: num_nodes().
  std::size_t local_nodes() const noexcept { return num_nodes(); }
  /// The options the network was built with.
  const loopback_options& options() const noexcept { return opt_; }
  /// Node `node`'s endpoint (the one check of the node id).
  loopback_endpoint endpoint(std::uint32_t node) {
    if (node >= num_nodes())
      throw config_error("loopback endpoint: node " + std::to_string(node) + " outside [0, " +
                         std::to_string(num_nodes()) + ")");
    return loopback_endpoint(*this, node);
  }

  /// The delay, in the receiver's rounds, of the envelope on route r (options().max_delay).
  std::uint32_t delay(const route& r) const noexcept {
    if (opt_.max_delay == 0) return 0;
    const detail::counter_rng rng(opt_.seed, 0, r.round, detail::rng_stream::message_delay);
    return rng.block(static_cast<std::uint32_t>(r.from * num_nodes() + r.to))[0] % (opt_.max_delay + 1u);
  }
  /// For a drain: every node's count of rounds posted, from this process's (all of them here).
  std::vector<std::uint32_t> posted_rounds(std::span<const std::uint32_t> mine) const {
    if (mine.size() != num_nodes())
      throw size_error("posted_rounds: " + std::to_string(mine.size()) + " counts for " + std::to_string(num_nodes()) +
                       " nodes");
    return {mine.begin(), mine.end()};
  }
  /// Sends complete when posted here: nothing to wait for.
  void finish_sends() const noexcept {}
  /// The most envelopes that were waiting at one receiver (posted, not yet taken) when it took:
  /// what the inboxes of deferred rounds held at their fullest.
  std::size_t largest_inbox() const noexcept { return largest_inbox_.load(); }
  /// Envelopes posted to `node` and not taken yet.
  std::size_t pending_envelopes(std::uint32_t node) {
    std::lock_guard lock(boxes_.at(node).mu);
    return boxes_[node].items.size();
  }

  /// Every delivery so far (with options().trace); read it while no node posts.
  const std::vector<delivery>& trace() const noexcept { return trace_; }
  /// Forgets the recorded deliveries; call while no node posts.
  void clear_trace() { trace_.clear(); }
  /// A second network of the same nodes and options whose envelopes never meet this one's: made at
  /// the first call and the same for every later one, from any thread (gradient tracking's
  /// trackers, loopback_node::twin()). It lives as long as this network.
  loopback_network& companion() {
    std::lock_guard lock(companion_mu_);
    if (!companion_) companion_ = std::make_unique<loopback_network>(num_nodes(), opt_);
    return *companion_;
  }

 private:
  friend loopback_endpoint;

  /// Node `from` posts round `round`: one envelope per non-self out-edge.
  void post(std::uint32_t from, std::uint32_t round, std::span<const out_edge> out, double u, const message& m) {
    check_column(round, from, out, num_nodes());  // the whole column first: a bad one files and counts nothing
    const std::size_t bytes = envelope_header_bytes + m.wire_bytes();
    for (const auto& e : out) {
      if (e.to == from) continue;
      const bool dropped = count_envelope({.round = round, .from = from, .to = e.to}, bytes);
      pending p{round, from, e.share, u, dropped, &m, {}, {}, delay({.round = round, .from = from, .to = e.to})};
      if (!dropped && opt_.mode == loopback_mode::encoded) {
        p.frame = spare_frame(from);
        p.frame.clear();
        // a reused frame of a message with as many values never grows
        p.frame.reserve(std::max(bytes, frame_bound(m)));
        encode_envelope({from, round, e.share, u}, m, p.frame);
      } else if (!dropped && opt_.mode == loopback_mode::copied) {
        p.copy = spare_message(from);
        p.copy = m;  // into the reused buffers: no allocation once they have grown
        p.msg = nullptr;
      }
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
    if (opt_.mode != loopback_mode::by_reference && box.decoded.size() < live) box.decoded.resize(live);
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
        box.envelopes.push_back({h.from, h.share, h.u, &m, h.round});
        return_frame(p.from, std::move(p.frame));
      } else if (opt_.mode == loopback_mode::copied) {
        // the receiver keeps the copy; the buffers it held go back to the sender's pool
        message& m = box.decoded[k++];
        std::swap(m, p.copy);
        box.envelopes.push_back({p.from, p.share, p.u, &m, round});
        return_message(p.from, std::move(p.copy));
      } else {
        box.envelopes.push_back({p.from, p.share, p.u, p.msg, round});
      }
    }
  }

  /// Node `to` takes what a deferred round may mix (deferred_endpoint::take): the envelopes of
  /// rounds <= upto visible at round `now` (round + delay <= now), waiting for those of `must`.
  /// A must envelope that is there but hidden by its delay is a config_error at once (the delay
  /// model exceeds the policy's bound; waiting could not reveal it: only rounds do).
  void take(std::uint32_t to, std::uint32_t now, std::uint32_t upto, std::span<const awaited> must, inbox& box,
            std::span<const awaited>) {
    if (opt_.mode == loopback_mode::by_reference)
      throw config_error("node " + std::to_string(to) + ": deferred rounds need a loopback in copied or encoded "
                         "mode (by_reference hands out the sender's message, which its next round overwrites)");
    auto& mb = boxes_[to];
    std::vector<pending>& got = mb.got;
    got.clear();
    auto visible = [&](const pending& p) {
      return p.round <= upto && (now == all_rounds || std::uint64_t{p.round} + p.delay <= now);
    };
    {
      std::unique_lock lock(mb.mu);
      std::size_t held = mb.items.size(), seen = largest_inbox_.load();
      while (held > seen && !largest_inbox_.compare_exchange_weak(seen, held)) {}
      auto present = [&](const awaited& a, bool& hidden) {
        for (const auto& p : mb.items)
          if (p.round == a.round && p.from == a.from) {
            hidden = !visible(p);
            return true;
          }
        return false;
      };
      auto have = [&] {
        for (const auto& a : must) {
          bool hidden = false;
          if (!present(a, hidden)) return false;
          if (hidden)
            throw config_error("round " + std::to_string(now) + ": node " + std::to_string(to) +
                               " must mix node " + std::to_string(a.from) + "'s envelope of round " +
                               std::to_string(a.round) + ", which the loopback's delay model (max_delay " +
                               std::to_string(opt_.max_delay) + ") hides until a later round: the delay exceeds "
                               "the policy's staleness bound");
        }
        return true;
      };
      if (!mb.cv.wait_for(lock, opt_.timeout, have)) {
        std::string missing;
        for (const auto& a : must) {
          bool hidden = false;
          if (!present(a, hidden))
            missing += (missing.empty() ? "" : ", ") + std::to_string(a.from) + " (round " + std::to_string(a.round) + ")";
        }
        throw transport_error("round " + std::to_string(now) + ": node " + std::to_string(to) + " waited " +
                              std::to_string(opt_.timeout.count()) + " ms for the envelopes of node(s) " + missing);
      }
      for (auto it = mb.items.begin(); it != mb.items.end();) {
        if (visible(*it)) {
          got.push_back(std::move(*it));
          it = mb.items.erase(it);
        } else {
          ++it;
        }
      }
    }
    std::sort(got.begin(), got.end(),
              [](const pending& a, const pending& b) { return a.round != b.round ? a.round < b.round : a.from < b.from; });
    box.envelopes.clear();
    std::size_t live = 0;
    for (const auto& p : got) live += !p.dropped;
    if (box.decoded.size() < live) box.decoded.resize(live);
    std::size_t k = 0;
    for (auto& p : got) {
      if (p.dropped) continue;
      message& m = box.decoded[k++];
      if (opt_.mode == loopback_mode::encoded) {
        const envelope_header h = decode_envelope(p.frame, m, box.dim, box.dim ? &box.spare : nullptr);
        if (h.from != p.from || h.round != p.round)
          throw transport_error("node " + std::to_string(to) + " decoded an envelope of node " + std::to_string(h.from) +
                                ", round " + std::to_string(h.round) + " from node " + std::to_string(p.from) +
                                ", round " + std::to_string(p.round));
        box.envelopes.push_back({h.from, h.share, h.u, &m, h.round});
        return_frame(p.from, std::move(p.frame));
      } else {
        std::swap(m, p.copy);
        box.envelopes.push_back({p.from, p.share, p.u, &m, p.round});
        return_message(p.from, std::move(p.copy));
      }
    }
  }

  struct pending {
    std::uint32_t round = 0;
    std::uint32_t from = 0;
    double share = 0.0;
    double u = 1.0;
    bool dropped = false;
    const message* msg = nullptr;  ///< the sender's message (by_reference mode)
    std::vector<std::byte> frame;  ///< the encoded envelope (encoded mode)
    message copy;                  ///< the copy of the sender's message (copied mode)
    std::uint32_t delay = 0;       ///< rounds until the receiver sees it (take(); max_delay)
  };
  struct mailbox {
    std::mutex mu;
    std::condition_variable cv;
    std::vector<pending> items;
    std::vector<pending> got;  ///< collect()'s scratch, used by the receiver only
  };
  /// Buffers that circulate from a sender to its receivers and back, so that steady-state rounds
  /// allocate none: frames (encoded mode) and message copies (copied mode).
  struct pool {
    std::vector<std::vector<std::byte>> frames;
    std::vector<message> messages;
  };
  std::vector<std::byte> spare_frame(std::uint32_t from) {
    std::lock_guard lock(pools_mu_);
    auto& free = pools_[from].frames;
    if (free.empty()) return {};
    std::vector<std::byte> f = std::move(free.back());
    free.pop_back();
    return f;
  }
  void return_frame(std::uint32_t from, std::vector<std::byte>&& f) {
    std::lock_guard lock(pools_mu_);
    pools_[from].frames.push_back(std::move(f));
  }
  message spare_message(std::uint32_t from) {
    std::lock_guard lock(pools_mu_);
    auto& free = pools_[from].messages;
    if (free.empty()) return {};
    message m = std::move(free.back());
    free.pop_back();
    return m;
  }
  void return_message(std::uint32_t from, message&& m) {
    std::lock_guard lock(pools_mu_);
    pools_[from].messages.push_back(std::move(m));
  }

  loopback_options opt_;
  std::vector<mailbox> boxes_;
  std::mutex pools_mu_;
  std::vector<pool> pools_;  ///< by sender
  std::mutex trace_mu_;
  std::vector<delivery> trace_;
  std::atomic<std::size_t> largest_inbox_{0};
  std::mutex companion_mu_;
  std::unique_ptr<loopback_network> companion_;
};

static_assert(endpoint<loopback_endpoint>);

}  // namespace v0
}  // namespace sparsepush
