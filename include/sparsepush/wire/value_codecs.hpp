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

/// The random stream of QSGD's stochastic rounding (the encoder's choice; the wire is the same).
///   philox7:  Philox4x32-7 (Random123 lists 7 rounds as Crush-resistant), the default since
///             0.3.4; with levels <= qsgd_half_draw_levels each 32-bit word gives two coordinates
///             their xi as 16-bit draws, xi = h / 2^16, else one coordinate a 24-bit draw;
///   philox10: Philox4x32-10 with a 24-bit draw per coordinate, xi = (w >> 8) / 2^24: the bits
///             of 0.3.3 and earlier.
/// Either way P(round up) = ceil(frac * 2^b) / 2^b for b-bit draws, so 0 <= E[l] - r < 2^-b:
/// |E[q] - v| < 2^-16 (2^-24) of a level step nrm / s, the draw's only bias.
enum class qsgd_stream : std::uint8_t { philox7 = 0, philox10 = 1 };

/// The most levels for which the philox7 stream uses 16-bit draws: at most 8-bit levels (codes of
/// at most 10 bits), where the generator is most of QSGD's time; finer quantizations keep 24-bit
/// draws, as fine relative to their step as 0.3.3's.
inline constexpr std::uint16_t qsgd_half_draw_levels = 256;

/// "philox7" or "philox10".
constexpr const char* to_string(qsgd_stream s) noexcept { return s == qsgd_stream::philox10 ? "philox10" : "philox7"; }

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

/// QSGD's draws (see qsgd_stream): xi of coordinate j from block j / per_block of the stream.
struct qsgd_draws {
  counter_rng rng;
  bool philox10;
  bool half;  ///< 16-bit draws: 8 coordinates a block, else 4

  qsgd_draws(const context& ctx, qsgd_stream stream, std::uint16_t levels) noexcept
      : rng(ctx.seed, ctx.node, ctx.round, rng_stream::qsgd),
        philox10(stream == qsgd_stream::philox10),
        half(!philox10 && levels <= qsgd_half_draw_levels) {}

  std::uint32_t block_of(std::uint32_t j) const noexcept { return half ? j >> 3 : j >> 2; }
  philox_counter block(std::uint32_t b) const noexcept { return philox10 ? rng.block<10>(b) : rng.block<7>(b); }
  /// xi of coordinate j in [0, 1), given w = block(block_of(j)); exact in float.
  double xi(const philox_counter& w, std::uint32_t j) const noexcept {
    if (half) return static_cast<double>((w[(j >> 1) & 3] >> (16 * (j & 1))) & 0xFFFFu) * (1.0 / 65536.0);
    return unit_interval(w[j & 3]);
  }
};

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

  /// The code of value v with the draw xi in [0, 1).
  std::uint64_t code(T v, double xi) const noexcept {
    T r = tiny_norm ? std::abs(v) / nrm * s : std::abs(v) * to_level;  // 0 * inf would be NaN
    keep_rounded(r);
    T level = std::floor(r);
    level += static_cast<T>(static_cast<T>(xi) < r - level);
    level = std::min(level, s);
    return (static_cast<std::uint64_t>(level) << 1) | (v < T(0) ? 1u : 0u);
  }
};

template <tensor_element T, class Get, class At>
float write_qsgd(std::byte* p, std::size_t n, std::uint16_t levels, qsgd_stream stream, Get&& v_at, At&& index_at,
                 const context& ctx) noexcept {
  double lanes[sum_lanes] = {};
  lane_sum_scalar(0, n, lanes, [&v_at](std::size_t j) {
    const double v = static_cast<double>(v_at(j));
    return v * v;
  });
  const float scale = to_float_saturating(std::sqrt(combine_lanes(lanes)));
  if (!(static_cast<T>(scale) > T(0))) return scale;
  const qsgd_params<T> q(scale, levels);
  const qsgd_draws draws(ctx, stream, levels);
  std::uint32_t cached_block = 0xFFFFFFFFu;
  philox_counter words{};
  bit_writer out{0, 0, p};
  for (std::size_t j = 0; j < n; ++j) {
    const std::uint32_t at = index_at(j);
    if (draws.block_of(at) != cached_block) {
      cached_block = draws.block_of(at);
      words = draws.block(cached_block);
    }
    out.put(q.code(v_at(j), draws.xi(words, at)), q.bits);
  }
  out.flush();
  return scale;
}

/// write_qsgd of the contiguous v[0, n) (value j at coordinate j), with the vector kernels where
/// there are some, given sq = lane_sum_dense<T, true>(v, n); `bytes` is the size of p, which
/// need not be zeroed: every byte is written.
template <tensor_element T>
float write_qsgd_dense(std::byte* p, std::size_t bytes, std::size_t n, std::uint16_t levels, qsgd_stream stream,
                       const T* v, double sq, const context& ctx) noexcept {
  const float scale = to_float_saturating(std::sqrt(sq));
  if (!(static_cast<T>(scale) > T(0))) {
    if (bytes > 0) std::memset(p, 0, bytes);
    return scale;
  }
  const qsgd_params<T> q(scale, levels);
  const qsgd_draws draws(ctx, stream, levels);
  bit_writer out{0, 0, p};
  std::size_t j = 0;
#if SPARSEPUSH_X86_SIMD
  if constexpr (sizeof(T) == 4) {
    const simd_level l = active_simd();
    if (l != simd_level::scalar && !q.tiny_norm && q.bits <= 14) {
      // whole vector blocks (256 coordinates); the wide stores need 8 bytes past the last full code
      std::size_t n64 = n / 256 * 256;
      while (n64 > 0 && n64 * q.bits / 8 + 8 > bytes) n64 -= 256;
      const float tl = q.to_level, s = q.s;
      const counter_rng& rng = draws.rng;
      if (l == simd_level::avx512) {
        if (draws.philox10) qsgd_dense_f32_simd<simd_level::avx512, 10, false>(v, n64, rng, tl, s, q.bits, out);
        else if (draws.half) qsgd_dense_f32_simd<simd_level::avx512, 7, true>(v, n64, rng, tl, s, q.bits, out);
        else qsgd_dense_f32_simd<simd_level::avx512, 7, false>(v, n64, rng, tl, s, q.bits, out);
      } else {
        if (draws.philox10) qsgd_dense_f32_simd<simd_level::avx2, 10, false>(v, n64, rng, tl, s, q.bits, out);
        else if (draws.half) qsgd_dense_f32_simd<simd_level::avx2, 7, true>(v, n64, rng, tl, s, q.bits, out);
        else qsgd_dense_f32_simd<simd_level::avx2, 7, false>(v, n64, rng, tl, s, q.bits, out);
      }
      j = n64;  // 64 codes are 8 bits whole bytes: the writer holds no pending bits here
    }
  }
#endif
  // j is a multiple of 256 here, so of a block's coordinates (4 or 8)
  philox_counter words{};
  for (; j < n; ++j) {
    const auto at = static_cast<std::uint32_t>(j);
    if ((at & (draws.half ? 7u : 3u)) == 0) words = draws.block(draws.block_of(at));
    out.put(q.code(v[j], draws.xi(words, at)), q.bits);
  }
  out.flush();
  (void)bytes;  // used by the vector path only
  return scale;
}

/// Write n values in encoding e (with `levels` and `stream` for qsgd) into the zeroed p; returns
/// the scale. index_at(j) is the coordinate of value j (qsgd keys its randomness by it).
template <tensor_element T, class Get, class At>
float write_values(value_encoding e, std::uint16_t levels, qsgd_stream stream, std::size_t n, Get&& v_at,
                   At&& index_at, const context& ctx, std::byte* p) noexcept {
  switch (e) {
    case value_encoding::f64: write_f64(p, n, v_at); return 0.0f;
    case value_encoding::f32: write_f32(p, n, v_at); return 0.0f;
    case value_encoding::f16: write_f16(p, n, v_at); return 0.0f;
    case value_encoding::bf16: write_bf16(p, n, v_at); return 0.0f;
    case value_encoding::i8: return write_i8<T>(p, n, v_at);
    case value_encoding::sign: return write_sign<T>(p, n, v_at);
    case value_encoding::qsgd: return write_qsgd<T>(p, n, levels, stream, v_at, index_at, ctx);
    case value_encoding::native: break;  // never travels: value_codec resolves it first
  }
  return 0.0f;
}
}  // namespace detail
}  // namespace v0
}  // namespace sparsepush
