// sparsepush/gossip/push_sum.hpp: de-biasing and the fused mixing kernel of push-sum.
// Per node i: numerator x_i (any flat tensor), weight u_i (starts at 1), de-biased model
// xh_i = x_i / u_i. The gossip update, relaxed by eta (docs/design/algorithms.md, Sparse-Push step 3):
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
#include <type_traits>
#include <vector>

#include "../detail/simd.hpp"
#include "../message.hpp"
#include "../tensor.hpp"

namespace sparsepush {
inline namespace v0 {

/// A message with the coefficient it enters a combine with.
struct weighted_message {
  const message* msg = nullptr;  ///< the message; not owned, must outlive the combine
  double coef = 0.0;  ///< the factor its values are multiplied by (the share, times eta where a phase scales it)
};

namespace detail {
// De-biasing float models: out = float(double(x) / u), element by element, is a double division
// per parameter, bound by the divider's throughput (about 2 cycles an element at any vector
// width). With AVX-512 it is y = x * (1 / u) instead, checked per element: x * RN(1 / u) lies
// within 3 double ulps of the correctly rounded quotient, so float(y) is the division's float
// unless y is within 32 double ulps of a midpoint between two floats (its low 29 mantissa bits
// near 2^28) or outside the normal float range with room (|y| in [2^-125, 2^126), or 0). Those
// elements (about 1 in 10^7 of random data) are divided exactly; every result is the division's,
// bit for bit (tests/test_gossip.cpp constructs quotients next to every kind of boundary).
inline void debias_f32_scalar(const float* x, double u, float* out, std::size_t n) noexcept {
  for (std::size_t i = 0; i < n; ++i) out[i] = static_cast<float>(static_cast<double>(x[i]) / u);
}

#if SPARSEPUSH_X86_SIMD
SPARSEPUSH_TARGET_AVX512 inline void debias_f32_avx512(const float* x, double u, double r, float* out,
                                                        std::size_t n) noexcept {
  const __m512d rv = _mm512_set1_pd(r);
  const __m512i low_mask = _mm512_set1_epi64(0x1FFFFFFF), base = _mm512_set1_epi64(0x10000000 - 32),
                exp_mask = _mm512_set1_epi64(0x7FF), e0 = _mm512_set1_epi64(898),
                abs_mask = _mm512_set1_epi64(0x7FFFFFFFFFFFFFFFll);
  std::size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m512d y = _mm512_mul_pd(_mm512_cvtps_pd(_mm256_loadu_ps(x + i)), rv);
    _mm256_storeu_ps(out + i, _mm512_cvtpd_ps(y));
    const __m512i b = _mm512_castpd_si512(y);
    const __mmask8 near = _mm512_cmple_epu64_mask(_mm512_sub_epi64(_mm512_and_si512(b, low_mask), base), _mm512_set1_epi64(64));
    const __mmask8 outside = _mm512_cmpgt_epu64_mask(
        _mm512_sub_epi64(_mm512_and_si512(_mm512_srli_epi64(b, 52), exp_mask), e0), _mm512_set1_epi64(250));
    const __mmask8 nonzero = _mm512_test_epi64_mask(b, abs_mask);
    unsigned bad = static_cast<unsigned>(near | (outside & nonzero));
    while (bad) {
      const unsigned j = static_cast<unsigned>(__builtin_ctz(bad));
      out[i + j] = static_cast<float>(static_cast<double>(x[i + j]) / u);
      bad &= bad - 1;
    }
  }
  debias_f32_scalar(x + i, u, out + i, n - i);
}

#endif

/// out[l] = float(double(x[l]) / u) for n floats, bit for bit, without a division per element where
/// the CPU has AVX-512.
inline void debias_f32(const float* x, double u, float* out, std::size_t n) noexcept {
#if SPARSEPUSH_X86_SIMD
  const double r = 1.0 / u;
  if (u > 0.0 && r > 0.0 && r < 1e300 && r > 1e-300) {
    const simd_level level = active_simd();
    if (level == simd_level::avx512) return debias_f32_avx512(x, u, r, out, n);
  }
#endif
  debias_f32_scalar(x, u, out, n);
}

}  // namespace detail

/// xh = x / u (the de-biased model), each element as T(double(x_l) / u).
template <tensor_element T>
void debias(std::span<const T> x, double u, std::span<T> out) {
  if (out.size() != x.size())
    throw size_error("debias: x has " + std::to_string(x.size()) + " elements, output has " +
                     std::to_string(out.size()));
  if constexpr (std::is_same_v<T, float>) detail::debias_f32(x.data(), u, out.data(), x.size());
  else
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

/// out[l - b] += sum over r (1..4) raw payloads of type W at l in [b, e), out held in a register.
template <tensor_element T, class W>
void add_raw_run(T* out, const std::byte* const* p, const T* c, std::size_t r, std::size_t b, std::size_t e) {
  switch (r) {
    case 1:
      for (std::size_t l = b; l < e; ++l) out[l - b] += c[0] * static_cast<T>(load_raw<W>(p[0], l));
      break;
    case 2:
      for (std::size_t l = b; l < e; ++l) {
        T a = out[l - b];
        a += c[0] * static_cast<T>(load_raw<W>(p[0], l));
        a += c[1] * static_cast<T>(load_raw<W>(p[1], l));
        out[l - b] = a;
      }
      break;
    case 3:
      for (std::size_t l = b; l < e; ++l) {
        T a = out[l - b];
        a += c[0] * static_cast<T>(load_raw<W>(p[0], l));
        a += c[1] * static_cast<T>(load_raw<W>(p[1], l));
        a += c[2] * static_cast<T>(load_raw<W>(p[2], l));
        out[l - b] = a;
      }
      break;
    default:
      for (std::size_t l = b; l < e; ++l) {
        T a = out[l - b];
        a += c[0] * static_cast<T>(load_raw<W>(p[0], l));
        a += c[1] * static_cast<T>(load_raw<W>(p[1], l));
        a += c[2] * static_cast<T>(load_raw<W>(p[2], l));
        a += c[3] * static_cast<T>(load_raw<W>(p[3], l));
        out[l - b] = a;
      }
  }
}

/// f(l, q_l) for the values of m at coordinates [cursor.., e): dense messages from b, sparse ones
/// from their cursor, which advances past e. Plain fp32/fp64 values are read without a switch.
template <tensor_element T, class F>
void for_each_value_below(const message& m, std::size_t b, std::size_t e, std::size_t& cursor, F&& f) {
  const std::byte* p = m.payload.data();
  const bool f32 = m.value_enc == value_encoding::f32, f64 = m.value_enc == value_encoding::f64;
  if (m.dense()) {
    if (f32) for (std::size_t l = b; l < e; ++l) f(l, static_cast<T>(load_raw<float>(p, l)));
    else if (f64) for (std::size_t l = b; l < e; ++l) f(l, static_cast<T>(load_raw<double>(p, l)));
    else for (std::size_t l = b; l < e; ++l) f(l, m.template value_at<T>(l));
    return;
  }
  const std::uint32_t* idx = m.indices.data();
  std::size_t j = cursor;
  if (f32) for (; j < m.count && idx[j] < e; ++j) f(idx[j], static_cast<T>(load_raw<float>(p, j)));
  else for (; j < m.count && idx[j] < e; ++j) f(idx[j], m.template value_at<T>(j));
  cursor = j;
}
}  // namespace detail

/// Reusable buffers of a combine: the messages split into dense and sparse (in list order) and a
/// cursor per sparse message. Owned by the caller (a node keeps one).
struct combine_scratch {
  ///@{
  /// The dense and the sparse messages, in list order (set by prepare()).
  std::vector<const weighted_message*> dense, sparse;
  ///@}
  /// Per sparse message: the next entry add_block() reads.
  std::vector<std::size_t> cursor;

  /// Split `in` (all of dimension d; checked) into dense and sparse, cursors at 0.
  void prepare(std::span<const weighted_message> in, std::size_t d) {
    for (const auto& w : in)
      if (w.msg->dim != d)
        throw size_error("combine: a message of dim " + std::to_string(w.msg->dim) +
                         " cannot mix into a tensor of " + std::to_string(d) + " elements");
    dense.clear();
    sparse.clear();
    for (const auto& w : in) (w.msg->dense() ? dense : sparse).push_back(&w);
    cursor.assign(sparse.size(), 0);
  }

  /// out[l - b] += sum_m coef_m q_m[l] for l in [b, e): dense messages in list order (up to four
  /// at a time, out held in a register), then the sparse messages' entries below e, in list order.
  /// Blocks must be visited in ascending order (the sparse cursors only move forward).
  template <tensor_element T>
  void add_block(T* out, std::size_t b, std::size_t e) {
    for (std::size_t m = 0; m < dense.size();) {
      const auto enc = dense[m]->msg->value_enc;
      if (enc == value_encoding::f32 || enc == value_encoding::f64) {
        const std::byte* p[4];
        T c[4];
        std::size_t r = 0;
        while (r < 4 && m + r < dense.size() && dense[m + r]->msg->value_enc == enc) {
          p[r] = dense[m + r]->msg->payload.data();
          c[r] = static_cast<T>(dense[m + r]->coef);
          ++r;
        }
        if (enc == value_encoding::f32) detail::add_raw_run<T, float>(out, p, c, r, b, e);
        else detail::add_raw_run<T, double>(out, p, c, r, b, e);
        m += r;
      } else {
        const message& msg = *dense[m]->msg;
        const T c = static_cast<T>(dense[m]->coef);
        for (std::size_t l = b; l < e; ++l) out[l - b] += c * msg.value_at<T>(l);
        ++m;
      }
    }
    for (std::size_t s = 0; s < sparse.size(); ++s) {
      const T c = static_cast<T>(sparse[s]->coef);
      detail::for_each_value_below<T>(*sparse[s]->msg, b, e, cursor[s],
                                      [out, b, c](std::size_t l, T q) { out[l - b] += c * q; });
    }
  }

  /// Bytes the buffers hold (their capacity), for memory accounting.
  std::size_t capacity_bytes() const noexcept {
    return (dense.capacity() + sparse.capacity()) * sizeof(void*) + cursor.capacity() * sizeof(std::size_t);
  }
};

/// x += sum_m coef_m * q_m over the messages (all of dimension x.size(); checked). One pass over
/// x in cache-sized blocks: per block, dense messages in list order (up to four at a time, x held
/// in a register), then the sparse messages' entries that fall in the block, in list order.
template <tensor_element T>
void combine(std::span<T> x, std::span<const weighted_message> in, combine_scratch& scratch) {
  scratch.prepare(in, x.size());
  const std::size_t d = x.size();
  for (std::size_t b = 0; b < d; b += detail::combine_block)
    scratch.add_block<T>(x.data() + b, b, std::min(d, b + detail::combine_block));
}

/// combine() with its own scratch.
template <tensor_element T>
void combine(std::span<T> x, std::span<const weighted_message> in) {
  combine_scratch scratch;
  combine<T>(x, in, scratch);
}

}  // namespace v0
}  // namespace sparsepush
