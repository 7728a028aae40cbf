// sparsepush/algorithm/choco_node.hpp: one CHOCO-SGD node (Koloskova et al. 2019) on a static,
// symmetric, doubly stochastic W with consensus step gamma_c: x_i, its public copy xp_i and either
// s_i = sum_j W_ij xp_j (weighted_sum) or a copy xh_j of every neighbour's public model (per_neighbour):
//   x_i' = x_i - gamma g_i(x_i);  q_i = C(x_i' - xp_i);  xp_i += q_i;
//   s_i += sum_{j in N(i) + {i}} W_ij q_j;  x_i = x_i' + gamma_c (s_i - xp_i).
// The nodes of a run and their rounds are choco.hpp's.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "../compress/compose.hpp"
#include "../detail/finite.hpp"
#include "../gossip/push_sum.hpp"
#include "../transport/loopback.hpp"
#include "oracle.hpp"

namespace sparsepush {
inline namespace v0 {

/// Which CHOCO state layout to keep.
enum class choco_form { weighted_sum, per_neighbour };

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
    detail::check_direction_size(g.size(), d_, ctx);
    validate_compressor<T>(comp, d_, ctx);
    detail::check_local_step(x(), g, gamma, ctx);
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
    detail::throw_mixed_non_finite(x(), "CHOCO: ", "node " + std::to_string(id_) + ", round " + std::to_string(round_),
                                   "the consensus step left the range of the element type; the round is complete, x "
                                   "keeps the non-finite values");
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

}  // namespace v0
}  // namespace sparsepush
