// sparsepush/gossip/detail/node_mix.hpp: push_sum_node's mixing, defined out of the class
// (gossip/node.hpp includes it): x_i <- x_i' + eta (S_i - q_i), S_i = (W_ii + R_i) q_i + sum_j W_ij q_j,
// and u_i likewise, by L2-sized blocks (dense) or by a merge of the index lists (all messages
// sparse, O(nnz)); the deferred rounds' x_i += S_i; and the report of a mix that overflowed.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "../../config.hpp"
#include "../../detail/finite.hpp"
#include "../push_sum_node.hpp"

namespace sparsepush {
inline namespace v0 {

template <class Tensor>
  requires mutable_flat_tensor<Tensor&>
inline void push_sum_node<Tensor>::mix(double eta, double self_share, std::vector<T>& block) {
  const double self = self_share + returned_;
  mix_.clear();
  mix_.push_back({&msg_, self});
  double u_sum = self * u_;
  bool all_sparse = !msg_.dense();
  for (const auto& env : inbox_.envelopes) {
    mix_.push_back({env.msg, env.share});
    u_sum += env.share * env.u;
    all_sparse &= !env.msg->dense();
  }
  scratch_.prepare(mix_, d_);  // checks every dim before anything changes
  returned_ = 0.0;
  const bool finite = all_sparse ? mix_sparse(eta) : mix_dense(eta, block);
  u_ = eta == 1.0 ? u_sum : u_ + eta * (u_sum - u_);
  if (!finite || !std::isfinite(u_)) throw_mixed_non_finite();
}

template <class Tensor>
  requires mutable_flat_tensor<Tensor&>
inline void push_sum_node<Tensor>::mix_taken(double eta, std::uint32_t t, std::vector<T>& block) {
  mix_.clear();
  double u_sum = 0.0;
  if (own_staged_) {
    mix_.push_back({&msg_, own_coef_});
    u_sum = own_coef_ * u_;
  }
  for (const auto& env : inbox_.envelopes) {
    mix_.push_back({env.msg, eta * env.share});
    u_sum += eta * env.share * env.u;
    if (env.round < t && t - env.round > max_staleness_) max_staleness_ = t - env.round;
  }
  scratch_.prepare(mix_, d_);  // checks every dim before anything changes
  own_staged_ = false;
  round_ = t;
  if (mix_.empty()) return;
  bool all_sparse = true;
  for (const auto& w : mix_) all_sparse &= !w.msg->dense();
  if (all_sparse) {  // O(nnz): the dense path's sums at the kept coordinates, nothing elsewhere
    const bool finite = add_sparse_sum();
    u_ = u_ + u_sum;
    if (!finite || !std::isfinite(u_)) throw_mixed_non_finite();
    return;
  }
  last_sparse_ = false;
  block.resize(std::min(d_, mix_block));
  T* const xp = x().data();
  T* s = block.data();
  typename detail::finite_bits<T>::U flags = 0;
  for (std::size_t b = 0; b < d_; b += mix_block) {
    const std::size_t end = std::min(d_, b + mix_block);
    std::fill(s, s + (end - b), T(0));
    scratch_.add_block<T>(s, b, end);
    for (std::size_t l = b; l < end; ++l) {
      const T v = xp[l] + s[l - b];
      xp[l] = v;
      flags |= detail::non_finite_flag<T>(v);
    }
  }
  u_ = u_ + u_sum;
  if (!detail::flags_finite<T>(flags) || !std::isfinite(u_)) throw_mixed_non_finite();
}

template <class Tensor>
  requires mutable_flat_tensor<Tensor&>
inline bool push_sum_node<Tensor>::mix_dense(double eta, std::vector<T>& block) {
  last_sparse_ = false;
  block.resize(std::min(d_, mix_block));
  const auto xi = x();
  T* s = block.data();
  std::size_t own = 0;
  const T e = static_cast<T>(eta);
  typename detail::finite_bits<T>::U flags = 0;
  T* const xp = xi.data();
  for (std::size_t b = 0; b < d_; b += mix_block) {
    const std::size_t end = std::min(d_, b + mix_block);
    std::fill(s, s + (end - b), T(0));
    scratch_.add_block<T>(s, b, end);
    if (eta == 1.0) {
      detail::for_each_value_below<T>(msg_, b, end, own, [xi](std::size_t l, T q) { xi[l] = xi[l] - q; });
      for (std::size_t l = b; l < end; ++l) {
        const T v = xp[l] + s[l - b];
        xp[l] = v;
        flags |= detail::non_finite_flag<T>(v);
      }
    } else {
      detail::for_each_value_below<T>(msg_, b, end, own, [s, b](std::size_t l, T q) { s[l - b] = s[l - b] - q; });
      for (std::size_t l = b; l < end; ++l) {
        const T v = xp[l] + e * s[l - b];
        xp[l] = v;
        flags |= detail::non_finite_flag<T>(v);
      }
    }
  }
  return detail::flags_finite<T>(flags);
}

template <class Tensor>
  requires mutable_flat_tensor<Tensor&>
inline bool push_sum_node<Tensor>::mix_sparse(double eta) {
  const T e = static_cast<T>(eta);
  const bool one = eta == 1.0;
  return merge_sparse([one, e](T x, T s, T own) { return one ? (x - own) + s : x + e * (s - own); });
}

template <class Tensor>
  requires mutable_flat_tensor<Tensor&>
inline bool push_sum_node<Tensor>::add_sparse_sum() {
  return merge_sparse([](T x, T s, T) { return x + s; });
}

template <class Tensor>
  requires mutable_flat_tensor<Tensor&>
template <class Value>
inline bool push_sum_node<Tensor>::merge_sparse(Value&& value) {
  last_sparse_ = true;
  cursors_.clear();
  for (const auto& w : mix_)
    cursors_.push_back({w.msg->indices.data(), w.msg->indices.data() + w.msg->count, w.msg,
                        static_cast<T>(w.coef), w.msg->value_enc == value_encoding::f32});
  const auto xi = x();
  sparse_cursor* const cb = cursors_.data();
  sparse_cursor* const ce = cb + cursors_.size();
  typename detail::finite_bits<T>::U flags = 0;
  for (;;) {
    std::uint32_t l = std::numeric_limits<std::uint32_t>::max();
    bool any = false;
    for (sparse_cursor* c = cb; c != ce; ++c)
      if (c->at != c->end && *c->at <= l) l = *c->at, any = true;
    if (!any) break;
    T s = T(0), own = T(0);
    for (sparse_cursor* c = cb; c != ce; ++c) {
      if (c->at == c->end || *c->at != l) continue;
      const std::size_t j = static_cast<std::size_t>(c->at - c->msg->indices.data());
      const T q = c->f32 ? static_cast<T>(detail::load_raw<float>(c->msg->payload.data(), j))
                         : c->msg->template value_at<T>(j);
      s += c->coef * q;
      if (c == cb) own = q;
      if (c->end - c->at > prefetch_ahead) SPARSEPUSH_PREFETCH(xi.data() + c->at[prefetch_ahead]);
      ++c->at;
    }
    const T v = value(xi[l], s, own);
    xi[l] = v;
    flags |= detail::non_finite_flag<T>(v);
  }
  return detail::flags_finite<T>(flags);
}

template <class Tensor>
  requires mutable_flat_tensor<Tensor&>
inline void push_sum_node<Tensor>::throw_mixed_non_finite() const {
  const std::string where = "node " + std::to_string(opt_.id) + ", round " + std::to_string(round_);
  if (!detail::all_finite(x().data(), d_))
    detail::throw_mixed_non_finite(x(), "", where, "the weighted sum of the messages left the range of the element "
                                                   "type; the round is complete, x keeps the non-finite values");
  throw non_finite_error("push-sum weight u after mixing is " + std::to_string(u_) + " (" + where + ")", 0);
}

}  // namespace v0
}  // namespace sparsepush
