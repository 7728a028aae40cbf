// sparsepush/wire/value_codecs.hpp: the value quantizers, each encoding's writer (value_readers.hpp
// holds its reader, the definition of q):
//   int8: s = max|v| / 127, q = s * round(v / s) (saturating);  sign: s = sum|v| / count, q = s * sign(v);
//   qsgd: nrm = ||v||_2, q = nrm * sign(v) * l / levels, l the stochastic rounding of |v| levels / nrm,
// with QSGD's counter-based random stream (Philox) and the vector kernels (value_kernels.hpp).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "../config.hpp"
#include "../detail/bytes.hpp"
#include "../detail/float_codec.hpp"
#include "../detail/philox.hpp"
#include "../detail/value_kernels.hpp"
#include "../tensor.hpp"
#include "format.hpp"
#include "value_readers.hpp"

namespace sparsepush {
inline namespace v0 {
namespace detail {

// A writer fills p (payload_bytes(...) bytes, zeroed by the caller) from the n values v_at(j),
// finite, and returns the message's scale (0 where the encoding has none).

template <class Get>
void write_f64(std::byte* p, std::size_t n, Get&& v_at) noexcept {
  for (std::size_t j = 0; j < n; ++j) {
    const double v = static_cast<double>(v_at(j));
    std::memcpy(p + 8 * j, &v, 8);
  }
}

template <class Get>
void write_f32(std::byte* p, std::size_t n, Get&& v_at) noexcept {
  for (std::size_t j = 0; j < n; ++j) {
    const float v = to_float_saturating(v_at(j));
    std::memcpy(p + 4 * j, &v, 4);
  }
}

template <class Get>
void write_f16(std::byte* p, std::size_t n, Get&& v_at) noexcept {
  for (std::size_t j = 0; j < n; ++j) put_u16(p + 2 * j, float_to_half(to_float_saturating(v_at(j))));
}

template <class Get>
void write_bf16(std::byte* p, std::size_t n, Get&& v_at) noexcept {
  for (std::size_t j = 0; j < n; ++j) put_u16(p + 2 * j, float_to_bf16(to_float_saturating(v_at(j))));
}

// int8: s = max|v| / 127 (as fp32), code = round(v / s) in [-127, 127], q = s * code, saturating
// at the largest finite T.
template <tensor_element T, class Get>
float write_i8(std::byte* p, std::size_t n, Get&& v_at) noexcept {
  T amax = 0;
  for (std::size_t j = 0; j < n; ++j) amax = std::max(amax, std::abs(v_at(j)));
  const float scale = to_float_saturating(amax / T(127));
  const T s = static_cast<T>(scale);
  if (s > T(0))
    for (std::size_t j = 0; j < n; ++j) {
      const T code = std::clamp(std::nearbyint(v_at(j) / s), T(-127), T(127));
      p[j] = std::byte(static_cast<std::uint8_t>(static_cast<std::int8_t>(code)));
    }
  return scale;
}

// sign: s = (sum |v|) / n (as fp32; the sum in double as value_kernels.hpp's lane_sum), bit j set
// when v_j < 0, q = s * sign(v) with sign(0) = +.
template <tensor_element T, class Get>
float write_sign(std::byte* p, std::size_t n, Get&& v_at) noexcept {
  double lanes[sum_lanes] = {};
  lane_sum_scalar(0, n, lanes, [&v_at](std::size_t j) { return std::abs(static_cast<double>(v_at(j))); });
  const double l1 = combine_lanes(lanes);
  const float scale = n ? to_float_saturating(l1 / static_cast<double>(n)) : 0.0f;
  sign_bits_scalar<T>(0, n, v_at, p);
  return scale;
}

/// write_sign of the contiguous v[0, n), with the vector kernels where there are some, given
/// l1 = lane_sum_dense<T, false>(v, n).
template <tensor_element T>
float write_sign_dense(std::byte* p, std::size_t n, const T* v, double l1) noexcept {
  const float scale = n ? to_float_saturating(l1 / static_cast<double>(n)) : 0.0f;
  sign_bits_dense<T>(v, n, p);
  return scale;
}

// qsgd: nrm = ||v||_2 (as fp32; the sum of squares in double as value_kernels.hpp's lane_sum),
// l = floor(|v| (s / nrm) + xi) in [0, s], xi ~ U[0, 1) from the counter-based stream keyed by
// ctx at the value's coordinate index_at(j); code = l << 1 | sign.

/// The settings of one message's QSGD codes.
template <tensor_element T>
struct qsgd_params {
  T nrm, s, to_level;
  bool tiny_norm;  // float: s / nrm overflows when nrm < s / FLT_MAX
  unsigned bits;

  qsgd_params(float scale, std::uint16_t levels) noexcept
      : nrm(static_cast<T>(scale)),
        s(static_cast<T>(levels)),
        to_level(s / nrm),
        tiny_norm(!std::isfinite(to_level)),
        bits(qsgd_code_bits(levels)) {}

  /// The code of value v with random word w.
  std::uint64_t code(T v, std::uint32_t w) const noexcept {
    T r = tiny_norm ? std::abs(v) / nrm * s : std::abs(v) * to_level;  // 0 * inf would be NaN
    keep_rounded(r);
    T level = std::floor(r);
    level += static_cast<T>(static_cast<T>(unit_interval(w)) < r - level);
    level = std::min(level, s);
    return (static_cast<std::uint64_t>(level) << 1) | (v < T(0) ? 1u : 0u);
  }
};

template <tensor_element T, class Get, class At>
float write_qsgd(std::byte* p, std::size_t n, std::uint16_t levels, Get&& v_at, At&& index_at,
                 const context& ctx) noexcept {
  double lanes[sum_lanes] = {};
  lane_sum_scalar(0, n, lanes, [&v_at](std::size_t j) {
    const double v = static_cast<double>(v_at(j));
    return v * v;
  });
  const float scale = to_float_saturating(std::sqrt(combine_lanes(lanes)));
  if (!(static_cast<T>(scale) > T(0))) return scale;
  const qsgd_params<T> q(scale, levels);
  const counter_rng rng(ctx.seed, ctx.node, ctx.round, rng_stream::qsgd);
  std::uint32_t cached_block = 0xFFFFFFFFu;
  philox_counter words{};
  bit_writer out{0, 0, p};
  for (std::size_t j = 0; j < n; ++j) {
    const std::uint32_t at = index_at(j);
    if ((at >> 2) != cached_block) {
      cached_block = at >> 2;
      words = rng.block(cached_block);
    }
    out.put(q.code(v_at(j), words[at & 3]), q.bits);
  }
  out.flush();
  return scale;
}

/// write_qsgd of the contiguous v[0, n) (value j at coordinate j), with the vector kernels where
/// there are some, given sq = lane_sum_dense<T, true>(v, n); `bytes` is the size of p.
template <tensor_element T>
float write_qsgd_dense(std::byte* p, std::size_t bytes, std::size_t n, std::uint16_t levels, const T* v,
                       double sq, const context& ctx) noexcept {
  const float scale = to_float_saturating(std::sqrt(sq));
  if (!(static_cast<T>(scale) > T(0))) return scale;
  const qsgd_params<T> q(scale, levels);
  const counter_rng rng(ctx.seed, ctx.node, ctx.round, rng_stream::qsgd);
  bit_writer out{0, 0, p};
  std::size_t j = 0;
#if SPARSEPUSH_X86_SIMD
  if constexpr (sizeof(T) == 4) {
    const simd_level l = active_simd();
    if (l != simd_level::scalar && !q.tiny_norm && q.bits <= 14) {
      std::size_t n64 = n / 64 * 64;  // the wide stores need 8 bytes past the last full code
      while (n64 > 0 && n64 * q.bits / 8 + 8 > bytes) n64 -= 64;
      if (l == simd_level::avx512) qsgd_dense_f32_simd<simd_level::avx512>(v, n64, rng, q.to_level, q.s, q.bits, out);
      else qsgd_dense_f32_simd<simd_level::avx2>(v, n64, rng, q.to_level, q.s, q.bits, out);
      j = n64;  // 64 codes are 8 bits whole bytes: the writer holds no pending bits here
    }
  }
#endif
  philox_counter words{};
  if (j % 4) words = rng.block(static_cast<std::uint32_t>(j >> 2));
  for (; j < n; ++j) {
    if ((j & 3) == 0) words = rng.block(static_cast<std::uint32_t>(j >> 2));
    out.put(q.code(v[j], words[j & 3]), q.bits);
  }
  out.flush();
  (void)bytes;  // used by the vector path only
  return scale;
}

/// Write n values in encoding e (with `levels` for qsgd) into the zeroed p; returns the scale.
/// index_at(j) is the coordinate of value j (qsgd keys its randomness by it).
template <tensor_element T, class Get, class At>
float write_values(value_encoding e, std::uint16_t levels, std::size_t n, Get&& v_at, At&& index_at,
                   const context& ctx, std::byte* p) noexcept {
  switch (e) {
    case value_encoding::f64: write_f64(p, n, v_at); return 0.0f;
    case value_encoding::f32: write_f32(p, n, v_at); return 0.0f;
    case value_encoding::f16: write_f16(p, n, v_at); return 0.0f;
    case value_encoding::bf16: write_bf16(p, n, v_at); return 0.0f;
    case value_encoding::i8: return write_i8<T>(p, n, v_at);
    case value_encoding::sign: return write_sign<T>(p, n, v_at);
    case value_encoding::qsgd: return write_qsgd<T>(p, n, levels, v_at, index_at, ctx);
    case value_encoding::native: break;  // never travels: value_codec resolves it first
  }
  return 0.0f;
}
}  // namespace detail
}  // namespace v0
}  // namespace sparsepush
