// sparsepush/algorithm/choco.hpp: CHOCO-SGD (Koloskova et al. 2019) on a static, symmetric,
// doubly stochastic W with consensus step gamma_c. Node i keeps x_i, its public copy xp_i and
// s_i = sum_j W_ij xp_j (the O(d) "weighted sum" form; xp and s start at 0):
//   x_i' = x_i - gamma g_i(x_i);  q_i = C(x_i' - xp_i);  xp_i += q_i;
//   s_i += sum_{j in N(i) + {i}} W_ij q_j;  x_i = x_i' + gamma_c (s_i - xp_i).
// The "per_neighbour" form keeps a copy xh_j of every neighbour's public model instead of s_i
// (x_i = x_i' + gamma_c (W_ii xp_i + sum_j W_ij xh_j - xp_i)); same iterates, (deg + 2) d memory.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "../compress/compose.hpp"
#include "../detail/thread_pool.hpp"
#include "../gossip/push_sum.hpp"
#include "../topology/parse.hpp"
#include "../topology/validate.hpp"
#include "../transport/in_process.hpp"
#include "oracle.hpp"

namespace sparsepush {
inline namespace v0 {

/// Which CHOCO state layout to keep.
enum class choco_form { weighted_sum, per_neighbour };

/// Settings of a CHOCO-SGD run.
struct choco_options {
  double consensus_step = 0.5;             ///< gamma_c in (0, 1]
  any_compressor compressor = identity{};  ///< C applied to x_i' - xp_i
  choco_form form = choco_form::weighted_sum;
  std::size_t threads = 1;
  std::uint64_t seed = 0;
  in_process_options network{};
};

/// n nodes running CHOCO-SGD in one process.
template <tensor_element T>
class choco {
 public:
  choco(std::vector<std::vector<T>> x0, any_schedule sched, choco_options opt = {})
      : sched_(std::move(sched)), opt_(std::move(opt)), pool_(opt_.threads), x_(std::move(x0)),
        net_(x_.size(), opt_.network) {
    const std::size_t n = x_.size();
    if (sched_.num_nodes() != n)
      throw schedule_error("schedule has " + std::to_string(sched_.num_nodes()) + " nodes but " +
                           std::to_string(n) + " models were given");
    if (!(opt_.consensus_step > 0.0 && opt_.consensus_step <= 1.0))
      throw config_error("CHOCO consensus step must be in (0, 1], got " + std::to_string(opt_.consensus_step));
    validate_schedule(sched_);
    if (sched_.period() != 1) throw schedule_error("CHOCO-SGD needs a static schedule (period 1)");
    d_ = x_[0].size();
    cols_.resize(n);
    for (std::uint32_t j = 0; j < n; ++j) {
      if (x_[j].size() != d_)
        throw size_error("node " + std::to_string(j) + " has " + std::to_string(x_[j].size()) +
                         " parameters, node 0 has " + std::to_string(d_));
      sched_.out_edges(0, j, cols_[j]);
    }
    // symmetric: W_ij == W_ji for every edge, so a sender's column is its receivers' row
    for (std::uint32_t j = 0; j < n; ++j)
      for (const auto& e : cols_[j]) {
        double back = -1.0;
        for (const auto& f : cols_[e.to])
          if (f.to == j) back = f.share;
        if (std::abs(back - e.share) > column_sum_tolerance)
          throw schedule_error("CHOCO-SGD needs a symmetric W: W[" + std::to_string(e.to) + "][" +
                               std::to_string(j) + "] != W[" + std::to_string(j) + "][" +
                               std::to_string(e.to) + "]");
      }
    xp_.assign(n, std::vector<T>(d_, T(0)));
    msgs_.resize(n);
    if (opt_.form == choco_form::weighted_sum) {
      s_.assign(n, std::vector<T>(d_, T(0)));
    } else {
      copies_.resize(n);
      slot_.resize(n);
      for (std::uint32_t j = 0; j < n; ++j)
        for (const auto& e : cols_[j])
          if (e.to != j) {
            slot_[e.to].push_back({j, copies_[e.to].size()});
            copies_[e.to].emplace_back(d_, T(0));
          }
    }
    g_.assign(n, std::vector<T>(d_));
  }

  void round(std::uint32_t t, const gradient_oracle<T>& oracle, double gamma) {
    const std::size_t n = x_.size();
    const T g = static_cast<T>(gamma);
    pool_.parallel_for(n, [&](std::size_t i) {
      std::fill(g_[i].begin(), g_[i].end(), T(0));
      oracle(static_cast<std::uint32_t>(i), t, x_[i], g_[i]);
      const context ctx{opt_.seed, static_cast<std::uint32_t>(i), t};
      detail::check_finite(std::span<const T>(g_[i]), ctx, "local direction");
      for (std::size_t l = 0; l < d_; ++l)
        if (!std::isfinite(x_[i][l] - g * g_[i][l]))
          detail::throw_non_finite(double(x_[i][l] - g * g_[i][l]), l, ctx, "x - gamma g");
    });
    pool_.parallel_for(n, [&](std::size_t i) {
      thread_local std::vector<T> diff;
      diff.resize(d_);
      for (std::size_t l = 0; l < d_; ++l) {
        x_[i][l] = x_[i][l] - g * g_[i][l];
        diff[l] = x_[i][l] - xp_[i][l];
      }
      opt_.compressor.compress(std::span<const T>(diff), msgs_[i], {opt_.seed, static_cast<std::uint32_t>(i), t});
      for_each_value<T>(msgs_[i], [&](std::uint32_t l, T q) { xp_[i][l] += q; });
    });
    std::vector<outbox> out(n);
    for (std::size_t i = 0; i < n; ++i) out[i] = {&msgs_[i], 1.0, cols_[i]};
    net_.deliver(t, out, inbox_);
    const T gc = static_cast<T>(opt_.consensus_step);
    pool_.parallel_for(n, [&](std::size_t i) {
      const double w_self = self_share(i);
      if (opt_.form == choco_form::weighted_sum) {
        std::vector<weighted_message> mix{{&msgs_[i], w_self}};
        for (const auto& env : inbox_[i]) mix.push_back({env.msg, env.share});
        combine<T>(std::span<T>(s_[i]), mix);
        for (std::size_t l = 0; l < d_; ++l) x_[i][l] += gc * (s_[i][l] - xp_[i][l]);
      } else {
        for (const auto& env : inbox_[i]) {
          auto& copy = copies_[i][slot_of(i, env.from)];
          for_each_value<T>(*env.msg, [&](std::uint32_t l, T q) { copy[l] += q; });
        }
        thread_local std::vector<T> acc;
        acc.assign(d_, T(0));
        const T ws = static_cast<T>(w_self);
        for (std::size_t l = 0; l < d_; ++l) acc[l] = ws * xp_[i][l];
        for (const auto& e : cols_[i])
          if (e.to != i) {
            const auto& copy = copies_[i][slot_of(i, e.to)];
            const T w = static_cast<T>(e.share);
            for (std::size_t l = 0; l < d_; ++l) acc[l] += w * copy[l];
          }
        for (std::size_t l = 0; l < d_; ++l) x_[i][l] += gc * (acc[l] - xp_[i][l]);
      }
    });
  }

  std::size_t num_nodes() const noexcept { return x_.size(); }
  std::size_t dim() const noexcept { return d_; }
  std::vector<T> model(std::size_t i) const { return x_.at(i); }
  const in_process_network& network() const noexcept { return net_; }
  std::size_t bytes_sent() const noexcept { return net_.total_bytes(); }
  std::size_t messages_sent() const noexcept { return net_.total_messages(); }
  /// What the messages sent would cost as fp32 vectors: 4 d bytes each.
  std::size_t full_precision_bytes() const noexcept { return 4 * dim() * net_.total_messages(); }
  /// Bytes of persistent state per node: x, xp, and s or the neighbour copies, plus the message.
  std::size_t state_bytes(std::size_t i) const {
    std::size_t b = (x_[i].size() + xp_[i].size()) * sizeof(T) + msgs_[i].wire_bytes();
    if (opt_.form == choco_form::weighted_sum) b += s_[i].size() * sizeof(T);
    else
      for (const auto& c : copies_[i]) b += c.size() * sizeof(T);
    return b;
  }

 private:
  double self_share(std::size_t i) const {
    for (const auto& e : cols_[i])
      if (e.to == i) return e.share;
    return 0.0;
  }
  std::size_t slot_of(std::size_t i, std::uint32_t from) const {
    for (const auto& [j, s] : slot_[i])
      if (j == from) return s;
    throw schedule_error("CHOCO: node " + std::to_string(i) + " received from non-neighbour " +
                         std::to_string(from));
  }

  any_schedule sched_;
  choco_options opt_;
  detail::thread_pool pool_;
  std::vector<std::vector<T>> x_, xp_, s_, g_;
  std::vector<std::vector<std::vector<T>>> copies_;
  std::vector<std::vector<std::pair<std::uint32_t, std::size_t>>> slot_;
  std::vector<std::vector<out_edge>> cols_;
  std::vector<message> msgs_;
  std::vector<std::vector<envelope>> inbox_;
  in_process_network net_;
  std::size_t d_ = 0;
};

}  // namespace v0
}  // namespace sparsepush
