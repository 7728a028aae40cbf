// sparsepush/algorithm/choco.hpp: CHOCO-SGD (Koloskova et al. 2019) on a static, symmetric,
// doubly stochastic W with consensus step gamma_c. Node i keeps x_i, its public copy xp_i and
// s_i = sum_j W_ij xp_j (the O(d) "weighted sum" form; xp and s start at 0):
//   x_i' = x_i - gamma g_i(x_i);  q_i = C(x_i' - xp_i);  xp_i += q_i;
//   s_i += sum_{j in N(i) + {i}} W_ij q_j;  x_i = x_i' + gamma_c (s_i - xp_i).
// The "per_neighbour" form keeps a copy xh_j of every neighbour's public model instead of s_i
// (x_i = x_i' + gamma_c (W_ii xp_i + sum_j W_ij xh_j - xp_i)); same iterates, (deg + 2) d memory.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <type_traits>
#include <string>
#include <vector>

#include "../compress/compose.hpp"
#include "../detail/finite.hpp"
#include "../detail/thread_pool.hpp"
#include "../gossip/lockstep.hpp"
#include "../gossip/push_sum.hpp"
#include "../topology/parse.hpp"
#include "../topology/validate.hpp"
#include "../transport/loopback.hpp"
#include "oracle.hpp"

namespace sparsepush {
inline namespace v0 {

/// Which CHOCO state layout to keep.
enum class choco_form { weighted_sum, per_neighbour };

/// Settings of a CHOCO-SGD run over compressor type C.
template <class C>
struct basic_choco_options {
  double consensus_step = 0.5;             ///< gamma_c in (0, 1]
  C compressor = default_compressor();     ///< C applied to x_i' - xp_i
  /// Keep s_i (weighted_sum, less memory) or one copy per in-neighbour; same results.
  choco_form form = choco_form::weighted_sum;
  std::size_t threads = 1;  ///< worker threads for per-node work (results do not depend on it)
  std::uint64_t seed = 0;  ///< keys the compressors' random streams with (node, round)
  loopback_options network{};  ///< settings of the loopback network a single-process run builds

 private:
  static C default_compressor() {
    if constexpr (std::is_constructible_v<C, identity>) return C(identity{});
    else return C{};
  }
};

/// Settings of a CHOCO-SGD run over the runtime-chosen compressor.
using choco_options = basic_choco_options<any_compressor>;

/// One CHOCO-SGD node: x_i (the user's tensor), its public copy xp_i and either s_i or one copy
/// per in-neighbour, its message, inbox and scratch. The column of W (its shares, by symmetry
/// also its row) is fixed at construction.
template <class Tensor>
  requires mutable_flat_tensor<Tensor&>
class choco_node {
 public:
  /// The element type, float or double.
  using T = tensor_value_t<Tensor>;

  /// Node `id` starting at x0 (public copy zero), with column `column` of the symmetric W (its
  /// out-edges, self-edge included). Throws config_error unless 0 < consensus_step <= 1.
  choco_node(Tensor x0, std::uint32_t id, std::vector<out_edge> column, choco_form form, double consensus_step,
             std::uint64_t seed)
      : x_(std::move(x0)), id_(id), seed_(seed), form_(form), gc_(consensus_step), col_(std::move(column)) {
    d_ = as_const_span(x_).size();
    if (!(consensus_step > 0.0 && consensus_step <= 1.0))
      throw config_error("CHOCO consensus step must be in (0, 1], got " + std::to_string(consensus_step));
    xp_.assign(d_, T(0));
    if (d_ <= std::numeric_limits<std::uint32_t>::max()) inbox_.dim = static_cast<std::uint32_t>(d_);
    for (const auto& e : col_) {
      if (e.to == id_) self_ = e.share;
      else in_.push_back({e.to, e.share});  // symmetric W: the senders are the receivers
    }
    in_.push_back({id_, self_});
    std::sort(in_.begin(), in_.end(), [](const in_edge& a, const in_edge& b) { return a.from < b.from; });
    if (form_ == choco_form::weighted_sum) s_.assign(d_, T(0));
    else
      for (const auto& e : col_)
        if (e.to != id_) copies_.push_back({e.to, std::vector<T>(d_, T(0))});
  }

  /// This node's index in the schedule.
  std::uint32_t id() const noexcept { return id_; }
  /// The number of elements d of the model.
  std::size_t dim() const noexcept { return d_; }
  /// The model x_i.
  std::span<T> x() noexcept { return as_span(x_); }
  /// The model x_i, read-only.
  std::span<const T> x() const noexcept { return as_const_span(x_); }
  /// The tensor holding x_i, in the caller's type.
  const Tensor& tensor() const noexcept { return x_; }
  /// The public copy xp_i, which every neighbour also keeps.
  std::span<const T> public_copy() const noexcept { return xp_; }
  /// The message of the last round: C(x_i - xp_i).
  const message& outgoing() const noexcept { return msg_; }
  /// Column id() of W: its out-edges with their shares, self-edge included.
  std::span<const out_edge> column() const noexcept { return col_; }
  /// The senders this node hears from (its neighbours and itself), ascending.
  std::span<const in_edge> in_edges() const noexcept { return in_; }

  /// Bytes this node keeps: model_bytes() + buffer_bytes().
  std::size_t state_bytes() const noexcept { return model_bytes() + buffer_bytes(); }
  /// Bytes of the algorithm's state: x, xp, and s or the neighbour copies.
  std::size_t model_bytes() const noexcept {
    std::size_t b = (d_ + xp_.size() + s_.size()) * sizeof(T);
    for (const auto& c : copies_) b += c.second.size() * sizeof(T);
    return b;
  }
  /// Bytes of the buffers reused every round (capacities): message, inbox and scratch.
  std::size_t buffer_bytes() const noexcept {
    return diff_.capacity() * sizeof(T) + msg_.indices.capacity() * sizeof(std::uint32_t) +
           msg_.payload.capacity() + inbox_.capacity_bytes() + ws_.capacity_bytes() +
           scratch_.capacity_bytes() + mix_.capacity() * sizeof(weighted_message);
  }

  /// Throw, before anything changes, if the local step or the compressor cannot run in round t.
  template <class C>
  void check(std::uint32_t t, const C& comp, std::span<const T> g, double gamma) const {
    const context ctx{seed_, id_, t};
    if (g.size() != d_)
      throw size_error("round " + std::to_string(t) + ", node " + std::to_string(id_) + ": direction has " +
                       std::to_string(g.size()) + " elements, the model has " + std::to_string(d_));
    validate_compressor<T>(comp, d_, ctx);
    detail::check_finite(g, ctx, "local direction");
    const auto x = this->x();
    const T gm = static_cast<T>(gamma);
    for (std::size_t l = 0; l < d_; ++l)
      if (!std::isfinite(x[l] - gm * g[l]))
        detail::throw_non_finite(double(x[l] - gm * g[l]), l, ctx, "x - gamma g");
  }

  /// x_i' = x_i - gamma g_i;  q_i = C(x_i' - xp_i);  xp_i += q_i.
  template <class C>
  void local_step_and_compress(const C& comp, std::uint32_t t, std::span<const T> g, double gamma) {
    local_step_and_compress(comp, t, g, gamma, ws_);
  }
  /// The same with a compressor workspace lent by the caller (one per thread in a group).
  template <class C>
  void local_step_and_compress(const C& comp, std::uint32_t t, std::span<const T> g, double gamma,
                               compress_workspace<T>& ws) {
    const auto x = this->x();
    const T gm = static_cast<T>(gamma);
    diff_.resize(d_);
    for (std::size_t l = 0; l < d_; ++l) {
      x[l] = x[l] - gm * g[l];
      diff_[l] = x[l] - xp_[l];
    }
    compress_with<T>(comp, std::span<const T>(diff_), msg_, context{seed_, id_, t}, ws);
    for_each_value<T>(msg_, [this](std::uint32_t l, T q) { xp_[l] += q; });
  }

  /// A node's saved state (checked against this node), not yet applied: x, xp, and s or the copies.
  struct saved_state {
    ///@{
    /// The model, the public copy, and s_i (empty in the per_neighbour form).
    std::vector<T> x, xp, s;
    ///@}
    /// The per-neighbour copies (empty in the weighted_sum form), in column order.
    std::vector<std::vector<T>> copies;
  };
  /// Checkpoint section "CHND": id, dim, x, xp, then s or every neighbour copy. Call between rounds.
  void save(checkpoint_writer& w) const {
    w.section("CHND");
    w.u32(id_);
    w.u64(d_);
    w.values(x());
    w.values(std::span<const T>(xp_));
    w.u64(form_ == choco_form::weighted_sum ? 0 : copies_.size());
    if (form_ == choco_form::weighted_sum) w.values(std::span<const T>(s_));
    for (const auto& [j, c] : copies_) {
      w.u32(j);
      w.values(std::span<const T>(c));
    }
  }
  /// Read this node's saved state and check it without changing anything.
  saved_state read_state(checkpoint_reader& r) const {
    r.section("CHND");
    const auto id = r.u32("node id");
    if (id != id_) r.fail("holds CHOCO node " + std::to_string(id) + " where node " + std::to_string(id_) + " was expected");
    if (r.u64("node dim") != d_) r.fail("holds CHOCO node " + std::to_string(id) + " of another model size");
    saved_state st;
    st.x.resize(d_);
    st.xp.resize(d_);
    r.values(std::span<T>(st.x), "x");
    r.values(std::span<T>(st.xp), "public copy");
    const auto copies = r.u64("neighbour copies");
    if (copies != (form_ == choco_form::weighted_sum ? 0 : copies_.size()))
      r.fail("holds CHOCO node " + std::to_string(id) + " in another form or with other neighbours");
    if (form_ == choco_form::weighted_sum) {
      st.s.resize(d_);
      r.values(std::span<T>(st.s), "weighted sum s");
    }
    for (const auto& c : copies_) {
      if (r.u32("neighbour") != c.first) r.fail("holds CHOCO node " + std::to_string(id) + " with other neighbours");
      st.copies.emplace_back(d_);
      r.values(std::span<T>(st.copies.back()), "neighbour copy");
    }
    auto finite = [](const std::vector<T>& v) {
      for (const T a : v)
        if (!std::isfinite(a)) return false;
      return true;
    };
    bool ok = finite(st.x) && finite(st.xp) && finite(st.s);
    for (const auto& c : st.copies) ok = ok && finite(c);
    if (!ok) r.fail("holds CHOCO node " + std::to_string(id) + " with a NaN or Inf (corrupted)");
    return st;
  }
  /// Apply a state from read_state() (cannot fail).
  void restore(const saved_state& st) noexcept {
    std::copy(st.x.begin(), st.x.end(), x().begin());
    xp_ = st.xp;
    if (form_ == choco_form::weighted_sum) s_ = st.s;
    for (std::size_t k = 0; k < copies_.size(); ++k) copies_[k].second = st.copies[k];
  }

  /// Sends the last message to every out-neighbour of round t through ep.
  template <endpoint E>
  void post(E& ep, std::uint32_t t) const { ep.post(t, col_, 1.0, msg_); }
  /// Receives the round-t messages of its in-neighbours through ep (waiting for them).
  template <endpoint E>
  void collect(E& ep, std::uint32_t t) {
    ep.collect(t, in_, inbox_);
    round_ = t;
  }

  /// s_i += sum_{j in N(i) + {i}} W_ij q_j;  x_i = x_i' + gamma_c (s_i - xp_i)  (or the same
  /// through the neighbour copies). The values written to x are checked as they are written (s
  /// or a copy that overflowed shows there too): a NaN or Inf throws non_finite_error naming the
  /// node, the round of the last collect and the first index once the mix is complete, in the
  /// round that produced it (the next round's check would refuse it only then).
  void mix() {
    const auto x = this->x();
    const T gc = static_cast<T>(gc_);
    typename detail::finite_bits<T>::U flags = 0;
    if (form_ == choco_form::weighted_sum) {
      mix_.clear();
      mix_.push_back({&msg_, self_});
      for (const auto& env : inbox_.envelopes) mix_.push_back({env.msg, env.share});
      combine<T>(std::span<T>(s_), mix_, scratch_);
      for (std::size_t l = 0; l < d_; ++l) {
        const T v = x[l] + gc * (s_[l] - xp_[l]);
        x[l] = v;
        flags |= detail::non_finite_flag<T>(v);
      }
      if (!detail::flags_finite<T>(flags)) throw_mixed_non_finite();
      return;
    }
    for (const auto& env : inbox_.envelopes) {
      auto& copy = copy_of(env.from);
      for_each_value<T>(*env.msg, [&copy](std::uint32_t l, T q) { copy[l] += q; });
    }
    auto& acc = diff_;  // the difference is not needed after compression
    const T ws = static_cast<T>(self_);
    for (std::size_t l = 0; l < d_; ++l) acc[l] = ws * xp_[l];
    for (const auto& e : col_)
      if (e.to != id_) {
        const auto& copy = copy_of(e.to);
        const T w = static_cast<T>(e.share);
        for (std::size_t l = 0; l < d_; ++l) acc[l] += w * copy[l];
      }
    for (std::size_t l = 0; l < d_; ++l) {
      const T v = x[l] + gc * (acc[l] - xp_[l]);
      x[l] = v;
      flags |= detail::non_finite_flag<T>(v);
    }
    if (!detail::flags_finite<T>(flags)) throw_mixed_non_finite();
  }

 private:
  /// After a mix that wrote a NaN or Inf: name the node, the round and the first bad index.
  [[noreturn]] void throw_mixed_non_finite() const {
    const auto xi = x();
    std::size_t l = 0;
    while (l + 1 < d_ && std::isfinite(xi[l])) ++l;
    throw non_finite_error(std::string("CHOCO: x after mixing holds ") + (std::isnan(xi[l]) ? "NaN" : "Inf") +
                               " at index " + std::to_string(l) + " (node " + std::to_string(id_) + ", round " +
                               std::to_string(round_) + "): the consensus step left the range of the element "
                               "type; the round is complete, x keeps the non-finite values",
                           l);
  }

  std::vector<T>& copy_of(std::uint32_t from) {
    for (auto& [j, c] : copies_)
      if (j == from) return c;
    throw schedule_error("CHOCO: node " + std::to_string(id_) + " received from non-neighbour " +
                         std::to_string(from));
  }

  Tensor x_;
  std::uint32_t id_;
  std::uint32_t round_ = 0;  ///< the round of the last collect(), for mix()'s errors
  std::uint64_t seed_;
  choco_form form_;
  double gc_;
  std::size_t d_ = 0;
  double self_ = 0.0;
  std::vector<out_edge> col_;
  std::vector<in_edge> in_;
  std::vector<T> xp_, s_, diff_;
  std::vector<std::pair<std::uint32_t, std::vector<T>>> copies_;
  message msg_;
  compress_workspace<T> ws_;
  inbox inbox_;
  std::vector<weighted_message> mix_;
  combine_scratch scratch_;
};

/// Nodes running CHOCO-SGD: choco_node's on a thread pool. By default all n nodes run in this
/// process over a loopback of their own; given a network (e.g. MPI), this process runs the block
/// of nodes the network places here (accessor indices are local: node first_node() + i).
template <class X, class C = any_compressor, class S = any_schedule, class Net = loopback_network>
class choco {
  // first, so that a type that misses a member fails here, with one line naming it
  static_assert(detail::require_algorithm_tensor<algorithm_tensor_t<X>>());
  static_assert(detail::require_compressor<C, tensor_value_t<algorithm_tensor_t<X>>>());
  static_assert(detail::require_schedule<S>());
  static_assert(detail::require_network<Net>());

 public:
  /// The model's tensor type (X, or std::vector<X> for an element type X).
  using tensor_type = algorithm_tensor_t<X>;
  /// The element type, float or double.
  using T = tensor_value_t<tensor_type>;
  /// The settings type.
  using options_type = basic_choco_options<C>;

  /// All nodes in this process, over a loopback network of its own.
  choco(std::vector<tensor_type> x0, S sched, options_type opt = {})
    requires std::is_same_v<Net, loopback_network>
      : sched_(std::move(sched)), opt_(std::move(opt)), pool_(opt_.threads), ws_(pool_.size()),
        own_net_(std::make_unique<loopback_network>(x0.size(), for_lockstep(opt_.network))), net_(own_net_.get()) {
    init(std::move(x0), 0);
  }

  /// The nodes that `net` places in this process (x0: their initial models, in order).
  choco(std::vector<tensor_type> x0, S sched, Net& net, options_type opt = {})
      : sched_(std::move(sched)), opt_(std::move(opt)), pool_(opt_.threads), ws_(pool_.size()), net_(&net) {
    if (x0.size() != net.local_nodes())
      throw config_error("the network places " + std::to_string(net.local_nodes()) + " nodes here but " +
                         std::to_string(x0.size()) + " models were given");
    init(std::move(x0), net.first_node());
  }

 private:
  void init(std::vector<tensor_type> x0, std::uint32_t first) {
    first_ = first;
    const std::size_t n = net_->num_nodes();
    if (sched_.num_nodes() != n)
      throw schedule_error("schedule has " + std::to_string(sched_.num_nodes()) + " nodes but " +
                           std::to_string(n) + " models were given");
    validate_schedule(sched_);
    if (sched_.period() != 1) throw schedule_error("CHOCO-SGD needs a static schedule (period 1)");
    if constexpr (requires { net_->loss().active(); })
      if (net_->loss().active())
        throw config_error("CHOCO-SGD needs every message delivered (each node keeps copies of its neighbours' "
                           "public models, which a lost message would corrupt): run it on a network without loss");
    d_ = as_const_span(x0[0]).size();
    std::vector<std::vector<out_edge>> cols(n);
    for (std::uint32_t j = 0; j < n; ++j) sched_.out_edges(0, j, cols[j]);
    for (std::size_t j = 0; j < x0.size(); ++j) {
      const std::size_t dj = as_const_span(x0[j]).size();
      if (dj != d_)
        throw size_error("node " + std::to_string(first + j) + " has " + std::to_string(dj) +
                         " parameters, node " + std::to_string(first) + " has " + std::to_string(d_));
    }
    // symmetric: W_ij == W_ji for every edge, so a sender's column is its receivers' row
    for (std::uint32_t j = 0; j < n; ++j)
      for (const auto& e : cols[j]) {
        double back = -1.0;
        for (const auto& f : cols[e.to])
          if (f.to == j) back = f.share;
        if (std::abs(back - e.share) > column_sum_tolerance)
          throw schedule_error("CHOCO-SGD needs a symmetric W: W[" + std::to_string(e.to) + "][" +
                               std::to_string(j) + "] != W[" + std::to_string(j) + "][" +
                               std::to_string(e.to) + "]");
      }
    nodes_.reserve(x0.size());
    for (std::size_t j = 0; j < x0.size(); ++j)
      nodes_.emplace_back(std::move(x0[j]), static_cast<std::uint32_t>(first + j), std::move(cols[first + j]),
                          opt_.form, opt_.consensus_step, opt_.seed);
  }

 public:
  /// One round t with learning rate gamma: the oracle gets x_i (worker w's call: its own
  /// scratch) and writes g_i into a buffer of node i.
  void round(std::uint32_t t, const gradient_oracle<T>& oracle, double gamma) {
    const std::size_t n = nodes_.size();
    if (g_.size() != n) g_.assign(n, std::vector<T>(d_));
    pool_.parallel_for(n, [&](std::size_t i) {
      oracle(first_ + static_cast<std::uint32_t>(i), t, nodes_[i].x(), g_[i]);
    });
    views_.assign(g_.begin(), g_.end());
    round(t, std::span<const std::span<const T>>(views_), gamma);
  }

  /// One round t with the local directions g_i computed by the caller (one per node this process
  /// runs; e.g. views of its optimizer's buffers, computed with for_each_node and model()).
  void round(std::uint32_t t, std::span<const std::span<const T>> directions, double gamma) {
    const std::size_t n = nodes_.size();
    if (directions.size() != n)
      throw size_error("round " + std::to_string(t) + ": " + std::to_string(directions.size()) +
                       " local directions for " + std::to_string(n) + " nodes");
    detail::lockstep_round(
        pool_, n, [&](std::size_t i) { return net_->endpoint(first_ + static_cast<std::uint32_t>(i)); },
        [&](std::size_t i, std::size_t) { nodes_[i].check(t, opt_.compressor, directions[i], gamma); },
        [&](std::size_t i, std::size_t w) {
          nodes_[i].local_step_and_compress(opt_.compressor, t, directions[i], gamma, ws_[w]);
        },
        [&](std::size_t i, auto& ep) { nodes_[i].post(ep, t); }, [&](std::size_t i, auto& ep) { nodes_[i].collect(ep, t); },
        [&](std::size_t i, std::size_t) { nodes_[i].mix(); });
  }

  /// Checkpoint this process's nodes and its network's byte ledger (section "CHCO").
  void save(checkpoint_writer& w) const {
    w.section("CHCO");
    w.u32(first_);
    w.u64(nodes_.size());
    for (const auto& nd : nodes_) nd.save(w);
    net_->save(w);
  }
  /// Restore what save() wrote: every node and the ledger, or nothing (checkpoint_error).
  void restore(checkpoint_reader& r) {
    r.section("CHCO");
    const auto first = r.u32("first node");
    const auto count = r.u64("node count");
    if (first != first_ || count != nodes_.size())
      r.fail("holds CHOCO nodes [" + std::to_string(first) + ", " + std::to_string(first + count) +
             "), this process runs [" + std::to_string(first_) + ", " + std::to_string(first_ + nodes_.size()) + ")");
    std::vector<typename choco_node<tensor_type>::saved_state> st;
    for (const auto& nd : nodes_) st.push_back(nd.read_state(r));
    auto ledger = net_->read_ledger(r);
    for (std::size_t i = 0; i < nodes_.size(); ++i) nodes_[i].restore(st[i]);
    net_->restore_ledger(std::move(ledger));
  }

  /// Every CHOCO round trains.
  bool trains(std::uint32_t) const noexcept { return true; }
  /// Run f(i, w) for every node this process runs on the algorithm's threads (w in [0, workers())
  /// names the thread: one scratch buffer per thread is enough).
  template <class F>
    requires std::invocable<F&, std::size_t, std::size_t>
  void for_each_node(F&& f) {
    pool_.parallel_for_worker(nodes_.size(), f);
  }
  /// The number of threads for_each_node() runs on.
  std::size_t workers() const noexcept { return pool_.size(); }

  /// Nodes run by this process; accessor indices are local (node first_node() + i).
  std::size_t num_nodes() const noexcept { return nodes_.size(); }
  /// The schedule's index of local node 0.
  std::uint32_t first_node() const noexcept { return first_; }
  /// The number of nodes of the whole run (every process).
  std::size_t total_nodes() const noexcept { return net_->num_nodes(); }
  /// The number of elements d of the model.
  std::size_t dim() const noexcept { return d_; }
  /// Node i's model x_i, as the tensor type.
  tensor_type model(std::size_t i) const { return nodes_.at(i).tensor(); }
  /// Node i's model x_i into out.
  void model(std::size_t i, std::span<T> out) const {
    detail::copy_model<T>(nodes_.at(i).x(), out);
  }
  /// Local node i (std::out_of_range for i >= num_nodes()).
  const choco_node<tensor_type>& node(std::size_t i) const { return nodes_.at(i); }
  /// The network the nodes send over.
  const Net& network() const noexcept { return *net_; }
  /// Bytes sent by the nodes of this process.
  std::size_t bytes_sent() const noexcept { return net_->total_bytes(); }
  /// Envelopes sent by the nodes of this process.
  std::size_t messages_sent() const noexcept { return net_->total_messages(); }
  /// What the messages sent would cost as fp32 vectors: 4 d bytes each.
  std::size_t full_precision_bytes() const noexcept { return 4 * dim() * net_->total_messages(); }
  /// Bytes of state per node: x, xp, and s or the neighbour copies, plus message and scratch,
  /// plus its share of the compressor workspaces lent to the nodes (one per thread).
  std::size_t state_bytes(std::size_t i) const {
    std::size_t lent = 0;
    for (const auto& w : ws_) lent += w.capacity_bytes();
    return nodes_.at(i).state_bytes() + lent / nodes_.size();
  }

 private:
  S sched_;
  options_type opt_;
  detail::thread_pool pool_;
  std::vector<compress_workspace<T>> ws_;  ///< one per pool thread, lent to the nodes it runs
  std::unique_ptr<loopback_network> own_net_;
  Net* net_ = nullptr;
  std::uint32_t first_ = 0;
  std::vector<choco_node<tensor_type>> nodes_;
  std::vector<std::vector<T>> g_;  ///< g_i per node (oracle rounds only)
  std::vector<std::span<const T>> views_;
  std::size_t d_ = 0;
};

}  // namespace v0
}  // namespace sparsepush
