// sparsepush/gossip/choco_push_node.hpp: one CHOCO-Push node (docs/design/algorithms.md, "Nodes that
// agree"): push-sum numerator x_i and weight u_i as Sparse-Push keeps them, and one reference per
// directed link this node has used, h[i->r] for its out-links and h[j->i] for its in-links, which
// the two ends of a link hold identically. Round t, with consensus step gamma_c:
//   1. x_i' = x_i - gamma p_i
//   2. per out-edge r of W(t):  q = C(x_i' - h[i->r]);  h[i->r] += q;  push (q, u_i, W[r][i])
//   3. per envelope from j:     h[j->i] += q  (the receiver's copy)
//      x_i <- x_i' + gamma_c ( sum_j W[i][j] h[j->i] - sum_r W[r][i] h[i->r] )
//      u_i <- u_i  + gamma_c ( sum_{j in in(i) + {i}} W[i][j] u_j - u_i )
// A link's reference starts at 0 the first time the link carries a message, or at the model every
// node started from when the run says they share it (then both ends know it without a message). What top-K leaves out
// of x_i' - h is sent in later rounds (the difference shrinks as the nodes agree), so the nodes
// reach the exact-mixing consensus, which SP's compression of the model itself does not.
// Deferred rounds (every waiting policy but lockstep) split step 3 by envelope: the sender takes
// gamma_c W[r][i] h[i->r] and gamma_c W[r][i] u_i off its own x_i and u_i when it posts, the
// envelope carries the share gamma_c W[r][i], and its receiver, whenever it takes it, updates its
// copy and adds share h[j->i] and share u_j: sum x plus what is in flight stays exact. A link's
// messages are applied in the order they were sent (per-link FIFO): an envelope that overtook an
// earlier one of its link is held until that one is mixed, so both ends keep equal references.
// The nodes of a run and their rounds are algorithm/choco_push.hpp's.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "../checkpoint.hpp"
#include "../compress/common.hpp"
#include "../detail/finite.hpp"
#include "../topology/validate.hpp"
#include "../transport/endpoint.hpp"
#include "policy.hpp"
#include "push_sum.hpp"

namespace sparsepush {
inline namespace v0 {

/// One end of a directed link: the peer and the reference h both ends hold.
template <class T>
struct link_reference {
  std::uint32_t peer = 0;  ///< the receiver (an out-link) or the sender (an in-link)
  std::vector<T> h;        ///< the link's reference, d values
  message msg;             ///< out-links: the message of the last round that used the link
};

/// An envelope a deferred round took but has not mixed yet (an earlier message of its link is
/// still in flight, or it is of a round the node has not run): its message is the node's copy.
struct held_envelope {
  std::uint32_t round = 0;  ///< the sender's round
  std::uint32_t from = 0;   ///< the sender
  double share = 0.0;       ///< gamma_c W[i][from] of the sender's round
  double u = 1.0;           ///< the sender's u when it sent
  message msg;              ///< q
};

/// One CHOCO-Push node: x_i (the user's tensor), u_i, its links' references, scratch.
template <class Tensor>
  requires mutable_flat_tensor<Tensor&>
class choco_push_node {
 public:
  /// The element type, float or double.
  using T = tensor_value_t<Tensor>;
  /// One end of a link.
  using link = link_reference<T>;

  /// Node `id` starting at x0 with u = 1 and no link; a link's reference starts at `start` (the
  /// model every node of the run started from: null for 0). Throws config_error unless
  /// 0 < consensus_step <= 1, or for a start of another size.
  choco_push_node(Tensor x0, std::uint32_t id, double consensus_step, std::uint64_t seed,
                  std::shared_ptr<const std::vector<T>> start = nullptr)
      : x_(std::move(x0)), id_(id), seed_(seed), gc_(consensus_step), start_(std::move(start)) {
    d_ = as_const_span(x_).size();
    if (!(consensus_step > 0.0 && consensus_step <= 1.0))
      throw config_error("CHOCO-Push consensus step must be in (0, 1], got " + std::to_string(consensus_step));
    if (start_ && start_->size() != d_)
      throw size_error("CHOCO-Push node " + std::to_string(id) + ": the links' start has " + std::to_string(start_->size()) +
                       " values, the model " + std::to_string(d_));
    if (d_ <= std::numeric_limits<std::uint32_t>::max()) inbox_.dim = static_cast<std::uint32_t>(d_);
  }

  /// This node's index in the schedule.
  std::uint32_t id() const noexcept { return id_; }
  /// The number of elements d of the model.
  std::size_t dim() const noexcept { return d_; }
  /// The numerator x_i.
  std::span<T> x() noexcept { return as_span(x_); }
  /// The numerator x_i, read-only.
  std::span<const T> x() const noexcept { return as_const_span(x_); }
  /// The tensor holding x_i, in the caller's type.
  const Tensor& tensor() const noexcept { return x_; }
  /// The push-sum weight u_i.
  double u() const noexcept { return u_; }
  /// The de-biased model x_i / u_i into out.
  void debiased(std::span<T> out) const { debias<T>(x(), u_, out); }
  /// The consensus step gamma_c.
  double consensus_step() const noexcept { return gc_; }
  /// The out-links used so far, ascending by receiver, with their references.
  std::span<const link> out_links() const noexcept { return out_; }
  /// The in-links used so far, ascending by sender, with this end's copies of their references.
  std::span<const link> in_links() const noexcept { return in_; }

  /// Bytes this node keeps: x, every reference, the messages, inbox and scratch (capacities).
  std::size_t state_bytes() const noexcept {
    std::size_t b = d_ * sizeof(T) + diff_.capacity() * sizeof(T) + inbox_.capacity_bytes() + ws_.capacity_bytes() +
                    terms_.capacity() * sizeof(terms_[0]) + sent_.capacity() * sizeof(sent_[0]);
    for (const auto* side : {&out_, &in_})
      for (const auto& l : *side)
        b += l.h.capacity() * sizeof(T) + l.msg.indices.capacity() * sizeof(std::uint32_t) + l.msg.payload.capacity();
    for (const auto& h : held_) b += sizeof(h) + h.msg.indices.capacity() * sizeof(std::uint32_t) + h.msg.payload.capacity();
    return b;
  }

  /// Throw, before anything changes, if round t cannot run: a direction of another size, a
  /// NaN/Inf in p or in x - gamma p, a compressor that cannot run at this size, or a column of
  /// W(t) that check_column() refuses (`nodes`: the run's node count). An empty p: no local step.
  template <class C>
  void check(std::uint32_t t, const C& comp, std::span<const T> p, double gamma, std::span<const out_edge> column,
             std::size_t nodes) const {
    const context ctx{seed_, id_, t};
    check_column(t, id_, column, nodes);
    validate_compressor<T>(comp, d_, ctx);
    if (p.empty()) return;
    detail::check_local_step(x(), p, gamma, ctx);
  }

  /// Steps 1 and 2: x_i' = x_i - gamma p_i (none for an empty p), then for every out-edge of
  /// `column` (the self-edge aside) q = C(x_i' - h[i->r]) and h[i->r] += q; a link used for the
  /// first time gets the start reference (0, or the common start model). The compressor's random
  /// stream is keyed by the round, this node and the receiver, so each link draws its own.
  template <class C>
  void step_and_compress(const C& comp, std::uint32_t t, std::span<const T> p, double gamma,
                         std::span<const out_edge> column, compress_workspace<T>& ws) {
    const auto xi = x();
    const T gm = static_cast<T>(gamma);
    bool stepped = p.empty();
    round_ = t;
    self_ = 0.0;
    sent_.clear();
    for (const auto& e : column)
      if (e.to == id_) self_ = e.share;
      else link_of(out_, e.to);  // create first: indices below stay valid
    diff_.resize(d_);
    for (const auto& e : column) {
      if (e.to == id_) continue;
      const std::size_t k = index_of(out_, e.to);
      link& l = out_[k];
      if (!stepped) {  // the local step fused with the first out-link's difference: one pass over x
        for (std::size_t j = 0; j < d_; ++j) {
          const T v = xi[j] - gm * p[j];
          xi[j] = v;
          diff_[j] = v - l.h[j];
        }
        stepped = true;
      } else {
        for (std::size_t j = 0; j < d_; ++j) diff_[j] = xi[j] - l.h[j];
      }
      compress_with<T>(comp, std::span<const T>(diff_), l.msg, context{link_seed(e.to), id_, t}, ws);
      for_each_value<T>(l.msg, [&l](std::uint32_t j, T q) { l.h[j] += q; });
      sent_.push_back({k, e.share});
    }
    if (!stepped)  // no out-link this round
      for (std::size_t l = 0; l < d_; ++l) xi[l] = xi[l] - gm * p[l];
  }
  /// The same with the node's own compressor workspace.
  template <class C>
  void step_and_compress(const C& comp, std::uint32_t t, std::span<const T> p, double gamma,
                         std::span<const out_edge> column) {
    step_and_compress(comp, t, p, gamma, column, ws_);
  }

  /// Sends each out-link's message of round t through ep: one envelope per link, with the share
  /// W[r][i] and the weight u_i. (Each is posted as a column of its own, the rest of the mass on
  /// the self-edge, which is not sent: the transport's column check holds for every post.)
  template <endpoint E>
  void post(E& ep, std::uint32_t t) const {
    for (const auto& [k, share] : sent_) {
      const out_edge part[2] = {{id_, 1.0 - share}, {out_[k].peer, share}};
      ep.post(t, std::span<const out_edge>(part, 2), u_, out_[k].msg);
    }
  }
  /// Receives round t's envelopes from the senders of `row` (row id() of W(t), self entry
  /// included), waiting for them, and adds each message to this end's copy of its link's reference.
  template <endpoint E>
  void collect(E& ep, std::uint32_t t, std::span<const in_edge> row) {
    ep.collect(t, row, inbox_);
    check_received_sizes(t);
    for (const auto& env : inbox_.envelopes) link_of(in_, env.from);
    for (const auto& env : inbox_.envelopes) {
      link& l = in_[index_of(in_, env.from)];
      for_each_value<T>(*env.msg, [&l](std::uint32_t j, T q) { l.h[j] += q; });
    }
  }

  /// Step 3: x_i <- x_i' + gamma_c (sum_j W[i][j] h[j->i] - sum_r W[r][i] h[i->r]) and u_i likewise.
  /// A NaN or Inf written to x throws non_finite_error naming the node, the round and the first
  /// index once the mix is complete.
  void mix() { mix(gc_); }
  /// The same with consensus step `gc` in (0, 1] for this round (the final rounds' own).
  void mix(double gc_round) {
    const auto xi = x();
    const T gc = static_cast<T>(gc_round);
    double u_sum = self_ * u_;
    terms_.clear();  // in-links (ascending sender), then out-links (column order): one pass over d
    for (const auto& env : inbox_.envelopes) {
      terms_.push_back({in_[index_of(in_, env.from)].h.data(), static_cast<T>(env.share)});
      u_sum += env.share * env.u;
    }
    const std::size_t ins = terms_.size();
    for (const auto& [k, share] : sent_) terms_.push_back({out_[k].h.data(), static_cast<T>(share)});
    typename detail::finite_bits<T>::U flags = 0;
    // blocks of mix_block values: each term is one vectorized pass over the block (the sum per
    // value runs in the same order as term by term: in-links, then out-links)
    T acc[mix_block];
    for (std::size_t j0 = 0; j0 < d_; j0 += mix_block) {
      const std::size_t len = std::min(mix_block, d_ - j0);
      std::fill_n(acc, len, T(0));
      for (std::size_t m = 0; m < terms_.size(); ++m) {
        const T s = m < ins ? terms_[m].second : -terms_[m].second;
        const T* h = terms_[m].first + j0;
        for (std::size_t j = 0; j < len; ++j) acc[j] += s * h[j];
      }
      T* xb = xi.data() + j0;
      for (std::size_t j = 0; j < len; ++j) {
        const T v = xb[j] + gc * acc[j];
        xb[j] = v;
        flags |= detail::non_finite_flag<T>(v);
      }
    }
    u_ = u_ + gc_round * (u_sum - u_);
    inbox_.clear();
    if (!detail::flags_finite<T>(flags) || !std::isfinite(u_)) throw_mixed_non_finite();
  }

  // Deferred rounds: check and step_and_compress() as in lockstep, post_deferred(), take() what
  // the policy lets the node mix, mix_taken(). A driver (choco_push, with a deferred_ledger) keeps
  // the list of envelopes the node still expects and says what take() must wait for.

  /// Sends each out-link's message of round t with the share gamma_c W[r][i] (`gc`: the round's
  /// consensus step), then takes what it sent off its own x_i and u_i:
  /// x_i -= sum_r gc W[r][i] h[i->r], u_i -= gc (sum_r W[r][i]) u_i.
  template <endpoint E>
  void post_deferred(E& ep, std::uint32_t t, double gc) {
    double out_share = 0.0;
    for (const auto& [k, share] : sent_) {
      const double s = gc * share;
      const out_edge part[2] = {{id_, 1.0 - s}, {out_[k].peer, s}};
      ep.post(t, std::span<const out_edge>(part, 2), u_, out_[k].msg);
      out_share += share;
    }
    typename detail::finite_bits<T>::U flags = 0;
    for (const auto& [k, share] : sent_) flags |= add_scaled(-static_cast<T>(gc * share), out_[k].h.data());
    u_ = u_ - gc * out_share * u_;
    posted_finite_ = detail::flags_finite<T>(flags);
  }
  /// Takes what has arrived (deferred_endpoint::take): envelopes of rounds <= upto visible at round
  /// `now`, waiting for those of `must`.
  template <class E>
  void take(E& ep, std::uint32_t now, std::uint32_t upto, std::span<const awaited> must,
            std::span<const awaited> expected) {
    ep.take(now, upto, must, inbox_, expected);
  }
  /// The envelopes of the last take().
  const inbox& received() const noexcept { return inbox_; }
  /// Forget the last take()'s envelopes.
  void clear_received() noexcept { inbox_.clear(); }
  /// Mixes the envelopes of the last take() and those held before, link by link in the order they
  /// were sent: for each, h[j->i] += q, x_i += share h[j->i], u_i += share u_j. An envelope waits
  /// (held) while `expected` (what the node still expects) lists an earlier round of its sender,
  /// or while its round is after t (a sender ahead of this node; `all`: a drain, which mixes
  /// those too). Throws size_error for a message of another size before anything changes, and
  /// non_finite_error as mix() does once every envelope is mixed.
  void mix_taken(std::uint32_t t, std::span<const awaited> expected, bool all = false) {
    check_received_sizes(t);
    for (const auto& env : inbox_.envelopes) held_.push_back({env.round, env.from, env.share, env.u, *env.msg});
    inbox_.clear();
    std::stable_sort(held_.begin(), held_.end(), [](const held_envelope& a, const held_envelope& b) {
      return a.round != b.round ? a.round < b.round : a.from < b.from;
    });
    round_ = t;
    typename detail::finite_bits<T>::U flags = 0;
    waiting_.clear();  // senders with an envelope held in this pass: their later ones wait too
    std::size_t keep = 0;
    for (std::size_t m = 0; m < held_.size(); ++m) {
      held_envelope& e = held_[m];
      const bool wait = (!all && e.round > t) || std::find(waiting_.begin(), waiting_.end(), e.from) != waiting_.end() ||
                        std::any_of(expected.begin(), expected.end(),
                                    [&e](const awaited& a) { return a.from == e.from && a.round < e.round; });
      if (wait) {
        waiting_.push_back(e.from);
        if (keep != m) held_[keep] = std::move(e);
        ++keep;
        continue;
      }
      link& l = link_of(in_, e.from);
      for_each_value<T>(e.msg, [&l](std::uint32_t j, T q) { l.h[j] += q; });
      flags |= add_scaled(static_cast<T>(e.share), l.h.data());
      u_ += e.share * e.u;
      if (e.round < t && t - e.round > max_staleness_) max_staleness_ = t - e.round;
    }
    held_.resize(keep);
    const bool finite = posted_finite_ && detail::flags_finite<T>(flags);
    posted_finite_ = true;
    if (!finite || !std::isfinite(u_)) throw_mixed_non_finite();
  }
  /// The envelopes taken but not mixed yet (see mix_taken()), ascending by (round, sender).
  std::span<const held_envelope> held() const noexcept { return held_; }
  /// The largest staleness mixed so far by mix_taken(): receiver's round - sender's round.
  std::uint32_t max_staleness() const noexcept { return max_staleness_; }

  /// A node's saved state (checked against this node), not yet applied.
  struct saved_state {
    std::vector<T> x;   ///< the numerator
    double u = 1.0;     ///< the weight
    std::vector<link> out;  ///< the out-links' references (messages empty)
    std::vector<link> in;   ///< the in-links' references
  };
  /// Checkpoint section "CPND": id, dim, x, u, then every out-link and in-link (peer, reference).
  void save(checkpoint_writer& w) const {
    if (!held_.empty())
      throw config_error("CHOCO-Push node " + std::to_string(id_) + " holds " + std::to_string(held_.size()) +
                         " envelopes not mixed yet and cannot be checkpointed: drain() first");
    w.section("CPND");
    w.u32(id_);
    w.u64(d_);
    w.values(x());
    w.f64(u_);
    for (const auto* side : {&out_, &in_}) {
      w.u64(side->size());
      for (const auto& l : *side) {
        w.u32(l.peer);
        w.values(std::span<const T>(l.h));
      }
    }
  }
  /// Read this node's saved state and check it without changing anything.
  saved_state read_state(checkpoint_reader& r) const {
    r.section("CPND");
    const auto id = r.u32("node id");
    if (id != id_) r.fail("holds CHOCO-Push node " + std::to_string(id) + " where node " + std::to_string(id_) + " was expected");
    if (r.u64("node dim") != d_) r.fail("holds CHOCO-Push node " + std::to_string(id) + " of another model size");
    saved_state st;
    st.x.resize(d_);
    r.values(std::span<T>(st.x), "x");
    st.u = r.f64("weight u");
    bool ok = std::isfinite(st.u) && st.u > 0 && detail::all_finite(st.x.data(), d_);
    for (auto* side : {&st.out, &st.in}) {
      const auto count = r.u64("link count");
      if (count > r.remaining() / (4 + d_ * sizeof(T)) + 1) r.fail("holds more links than bytes (corrupted)");
      for (std::uint64_t k = 0; k < count; ++k) {
        link l;
        l.peer = r.u32("link peer");
        if (!side->empty() && l.peer <= side->back().peer) r.fail("holds links out of order (corrupted)");
        l.h.resize(d_);
        r.values(std::span<T>(l.h), "link reference");
        ok = ok && detail::all_finite(l.h.data(), d_);
        side->push_back(std::move(l));
      }
    }
    if (!ok) r.fail("holds CHOCO-Push node " + std::to_string(id) + " with a NaN, an Inf or a weight <= 0 (corrupted)");
    return st;
  }
  /// Apply a state from read_state().
  void restore(saved_state st) {
    std::copy(st.x.begin(), st.x.end(), x().begin());
    u_ = st.u;
    out_ = std::move(st.out);
    in_ = std::move(st.in);
    sent_.clear();
    inbox_.clear();
    held_.clear();
    posted_finite_ = true;
  }

 private:
  /// The seed of link (id() -> to)'s compressor stream: the run's seed mixed with the receiver.
  std::uint64_t link_seed(std::uint32_t to) const noexcept {
    return seed_ ^ ((std::uint64_t{to} + 1) * 0x9e3779b97f4a7c15ull);
  }
  /// The link to or from `peer` in `side` (ascending), created with the start reference if new.
  link& link_of(std::vector<link>& side, std::uint32_t peer) {
    auto it = std::lower_bound(side.begin(), side.end(), peer, [](const link& l, std::uint32_t p) { return l.peer < p; });
    if (it == side.end() || it->peer != peer)
      it = side.insert(it, link{peer, start_ ? *start_ : std::vector<T>(d_, T(0)), {}});
    return *it;
  }
  /// Throw size_error, naming the round, this node and the sender (and the sender's round where it
  /// is not t), for a message of the last collect() or take() of another size than the model.
  void check_received_sizes(std::uint32_t t) const {
    for (const auto& env : inbox_.envelopes)
      if (env.msg->dim != d_)
        throw size_error("round " + std::to_string(t) + ", node " + std::to_string(id_) + ": the message of node " +
                         std::to_string(env.from) +
                         (env.round != t ? " (round " + std::to_string(env.round) + ")" : std::string()) + " has " +
                         std::to_string(env.msg->dim) + " values, the model " + std::to_string(d_));
  }
  /// x_i += s h (d values of h), returning the non-finite flags of the results (deferred rounds:
  /// a sender's share off itself, a receiver's envelope).
  typename detail::finite_bits<T>::U add_scaled(T s, const T* h) {
    T* xi = x().data();
    typename detail::finite_bits<T>::U flags = 0;
    for (std::size_t j = 0; j < d_; ++j) {
      const T v = xi[j] + s * h[j];
      xi[j] = v;
      flags |= detail::non_finite_flag<T>(v);
    }
    return flags;
  }
  static std::size_t index_of(const std::vector<link>& side, std::uint32_t peer) {
    auto it = std::lower_bound(side.begin(), side.end(), peer, [](const link& l, std::uint32_t p) { return l.peer < p; });
    return static_cast<std::size_t>(it - side.begin());
  }
  [[noreturn]] void throw_mixed_non_finite() const {
    detail::throw_mixed_non_finite(x(), "CHOCO-Push: ",
                                   "node " + std::to_string(id_) + ", round " + std::to_string(round_) + ", u " +
                                       std::to_string(u_),
                                   "lower --consensus-step or --lr; the round is complete, x keeps the non-finite values");
  }

  static constexpr std::size_t mix_block = 512;  ///< values per block of mix(): 2 KB of float on the stack

  Tensor x_;
  std::uint32_t id_;
  std::uint64_t seed_;
  double gc_;
  std::shared_ptr<const std::vector<T>> start_;  ///< where a new link's reference starts (null: 0)
  double u_ = 1.0;
  double self_ = 0.0;        ///< W[i][i] of the last round
  std::uint32_t round_ = 0;  ///< the last round stepped, for errors
  std::size_t d_ = 0;
  std::vector<link> out_, in_;
  std::vector<std::pair<std::size_t, double>> sent_;  ///< this round's out-links: index, W[r][i]
  std::vector<std::pair<const T*, T>> terms_;         ///< the mix's references and their shares
  std::vector<T> diff_;
  compress_workspace<T> ws_;
  inbox inbox_;
  std::vector<held_envelope> held_;     ///< deferred rounds: taken, not mixed yet
  std::vector<std::uint32_t> waiting_;  ///< mix_taken(): senders with an envelope held (scratch)
  std::uint32_t max_staleness_ = 0;
  bool posted_finite_ = true;           ///< post_deferred() left x finite
};

}  // namespace v0
}  // namespace sparsepush
