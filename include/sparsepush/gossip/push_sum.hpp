// sparsepush/gossip/push_sum.hpp: push-sum state and the fused mixing kernel.
// Per node i: numerator x_i (any flat tensor), weight u_i (starts at 1), de-biased model
// xh_i = x_i / u_i. The gossip update, relaxed by eta (ALGORITHMS.md, Sparse-Push step 3):
//   x_i <- x_i + eta * ( sum_{j in in(i) + {i}} W[i][j] q_j - q_i )
//   u_i <- u_i + eta * ( sum_{j in in(i) + {i}} W[i][j] u_j - u_i )
// combine() applies any list of weighted messages to x in one pass over x, block by block (the
// destination block stays in cache): dense messages first, then sparse entries in the block.
// The order of additions is fixed by the list order, so results do not depend on threads.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <span>
#include <vector>

#include "../message.hpp"
#include "../tensor.hpp"

namespace sparsepush {
inline namespace v0 {

/// One node's push-sum state over a user tensor type.
template <class Tensor>
  requires flat_tensor<Tensor>
struct push_sum_state {
  Tensor x;        ///< numerator
  double u = 1.0;  ///< push-sum weight
};

/// A message with the coefficient it enters a combine with.
struct weighted_message {
  const message* msg = nullptr;
  double coef = 0.0;
};

/// xh = x / u (the de-biased model).
template <tensor_element T>
void debias(std::span<const T> x, double u, std::span<T> out) {
  if (out.size() != x.size())
    throw size_error("debias: x has " + std::to_string(x.size()) + " elements, output has " +
                     std::to_string(out.size()));
  for (std::size_t i = 0; i < x.size(); ++i) out[i] = static_cast<T>(static_cast<double>(x[i]) / u);
}

namespace detail {
inline constexpr std::size_t combine_block = 2048;

template <class W>
inline W load_raw(const std::byte* p, std::size_t l) noexcept {
  W q;
  std::memcpy(&q, p + sizeof(W) * l, sizeof(W));
  return q;
}

/// x[b, e) += sum over r (1..4) raw payloads of type W, x kept in a register across them.
template <tensor_element T, class W>
void add_raw_run(T* x, const std::byte* const* p, const T* c, std::size_t r, std::size_t b, std::size_t e) {
  switch (r) {
    case 1:
      for (std::size_t l = b; l < e; ++l) x[l] += c[0] * static_cast<T>(load_raw<W>(p[0], l));
      break;
    case 2:
      for (std::size_t l = b; l < e; ++l) {
        T a = x[l];
        a += c[0] * static_cast<T>(load_raw<W>(p[0], l));
        a += c[1] * static_cast<T>(load_raw<W>(p[1], l));
        x[l] = a;
      }
      break;
    case 3:
      for (std::size_t l = b; l < e; ++l) {
        T a = x[l];
        a += c[0] * static_cast<T>(load_raw<W>(p[0], l));
        a += c[1] * static_cast<T>(load_raw<W>(p[1], l));
        a += c[2] * static_cast<T>(load_raw<W>(p[2], l));
        x[l] = a;
      }
      break;
    default:
      for (std::size_t l = b; l < e; ++l) {
        T a = x[l];
        a += c[0] * static_cast<T>(load_raw<W>(p[0], l));
        a += c[1] * static_cast<T>(load_raw<W>(p[1], l));
        a += c[2] * static_cast<T>(load_raw<W>(p[2], l));
        a += c[3] * static_cast<T>(load_raw<W>(p[3], l));
        x[l] = a;
      }
  }
}
}  // namespace detail

/// x += sum_m coef_m * q_m over the messages (all of dimension x.size(); checked). One pass over
/// x in cache-sized blocks: per block, dense messages in list order (up to four at a time, x held
/// in a register), then the sparse messages' entries that fall in the block, in list order.
template <tensor_element T>
void combine(std::span<T> x, std::span<const weighted_message> in) {
  for (const auto& w : in)
    if (w.msg->dim != x.size())
      throw size_error("combine: a message of dim " + std::to_string(w.msg->dim) +
                       " cannot mix into a tensor of " + std::to_string(x.size()) + " elements");
  const std::size_t d = x.size();
  std::vector<const weighted_message*> dense, sparse;
  for (const auto& w : in) (w.msg->dense() ? dense : sparse).push_back(&w);
  std::vector<std::size_t> cursor(sparse.size(), 0);
  T* xp = x.data();
  for (std::size_t b = 0; b < d; b += detail::combine_block) {
    const std::size_t e = std::min(d, b + detail::combine_block);
    for (std::size_t m = 0; m < dense.size();) {
      const value_encoding enc = dense[m]->msg->value_enc;
      if (enc == value_encoding::f32 || enc == value_encoding::f64) {
        const std::byte* p[4];
        T c[4];
        std::size_t r = 0;
        while (r < 4 && m + r < dense.size() && dense[m + r]->msg->value_enc == enc) {
          p[r] = dense[m + r]->msg->payload.data();
          c[r] = static_cast<T>(dense[m + r]->coef);
          ++r;
        }
        if (enc == value_encoding::f32) detail::add_raw_run<T, float>(xp, p, c, r, b, e);
        else detail::add_raw_run<T, double>(xp, p, c, r, b, e);
        m += r;
      } else {
        const message& msg = *dense[m]->msg;
        const T c = static_cast<T>(dense[m]->coef);
        for (std::size_t l = b; l < e; ++l) xp[l] += c * msg.value_at<T>(l);
        ++m;
      }
    }
    for (std::size_t s = 0; s < sparse.size(); ++s) {
      const message& msg = *sparse[s]->msg;
      const T c = static_cast<T>(sparse[s]->coef);
      const std::uint32_t* idx = msg.indices.data();
      std::size_t j = cursor[s];
      if (msg.value_enc == value_encoding::f32) {
        for (; j < msg.count && idx[j] < e; ++j) xp[idx[j]] += c * static_cast<T>(detail::load_raw<float>(msg.payload.data(), j));
      } else {
        for (; j < msg.count && idx[j] < e; ++j) xp[idx[j]] += c * msg.value_at<T>(j);
      }
      cursor[s] = j;
    }
  }
}

}  // namespace v0
}  // namespace sparsepush
