// sparsepush/compress/values.hpp: value encodings that compose with any selector ("top-1% of
// int8"). Given the selected values v_j (j < count) this writes the message payload; the
// dequantized q_j = message::value_at(j) is what error feedback subtracts. Definitions:
//   fp16/bf16/fp32: round to nearest even, saturating at the largest finite value;
//   int8: s = max|v| / 127 (as fp32), code = round(v / s) in [-127, 127], q = s * code;
//   sign: s = (sum |v|) / count (as fp32, ||v||_1/d for a dense message), q = s * sign(v);
//   qsgd: s levels, nrm = ||v||_2 (as fp32), l = floor(|v| (s / nrm) + xi), xi ~ U[0,1) from the
//         counter-based stream at the value's coordinate, q = nrm * sign(v) * l / s (unbiased).
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>

#include "../config.hpp"
#include "../detail/philox.hpp"
#include "../message.hpp"

namespace sparsepush {
inline namespace v0 {

/// A value encoding with its parameter (QSGD levels).
struct value_codec {
  value_encoding encoding = value_encoding::native;
  std::uint16_t levels = 0;  ///< QSGD s, 1 .. 32767; ignored otherwise

  friend bool operator==(const value_codec&, const value_codec&) = default;

  void validate() const {
    if (encoding == value_encoding::qsgd && (levels < 1 || levels > max_qsgd_levels))
      throw config_error("qsgd needs levels in [1, " + std::to_string(max_qsgd_levels) +
                         "], got " + std::to_string(levels));
  }
};

namespace detail {

template <class T>
inline constexpr value_encoding native_encoding =
    sizeof(T) == 8 ? value_encoding::f64 : value_encoding::f32;

/// Write the payload of m for the m.count selected values v_at(j). m.indices (or dense) must
/// already describe the coordinates. Inputs are finite.
template <tensor_element T, class Get>
void encode_values(const value_codec& c, Get&& v_at, message& m, const context& ctx) {
  const std::size_t n = m.count;
  m.value_enc = c.encoding == value_encoding::native ? native_encoding<T> : c.encoding;
  m.levels = m.value_enc == value_encoding::qsgd ? c.levels : 0;
  m.scale = 0.0f;
  m.payload.assign(payload_bytes(m.value_enc, m.levels, n), std::byte{0});
  std::byte* p = m.payload.data();
  switch (m.value_enc) {
    case value_encoding::f64:
      for (std::size_t j = 0; j < n; ++j) {
        const double v = static_cast<double>(v_at(j));
        std::memcpy(p + 8 * j, &v, 8);
      }
      break;
    case value_encoding::native:
    case value_encoding::f32:
      for (std::size_t j = 0; j < n; ++j) {
        const float v = to_float_saturating(v_at(j));
        std::memcpy(p + 4 * j, &v, 4);
      }
      break;
    case value_encoding::f16:
      for (std::size_t j = 0; j < n; ++j) put_u16(p + 2 * j, float_to_half(to_float_saturating(v_at(j))));
      break;
    case value_encoding::bf16:
      for (std::size_t j = 0; j < n; ++j) put_u16(p + 2 * j, float_to_bf16(to_float_saturating(v_at(j))));
      break;
    case value_encoding::i8: {
      T amax = 0;
      for (std::size_t j = 0; j < n; ++j) amax = std::max(amax, std::abs(v_at(j)));
      m.scale = to_float_saturating(amax / T(127));
      const T s = static_cast<T>(m.scale);
      if (s > T(0))
        for (std::size_t j = 0; j < n; ++j) {
          const T code = std::clamp(std::nearbyint(v_at(j) / s), T(-127), T(127));
          p[j] = std::byte(static_cast<std::uint8_t>(static_cast<std::int8_t>(code)));
        }
      break;
    }
    case value_encoding::sign: {
      double l1 = 0;
      for (std::size_t j = 0; j < n; ++j) l1 += std::abs(static_cast<double>(v_at(j)));
      m.scale = n ? to_float_saturating(l1 / static_cast<double>(n)) : 0.0f;
      for (std::size_t j8 = 0; j8 < n; j8 += 8) {  // one byte of sign bits at a time, no branch
        unsigned byte = 0;
        const std::size_t end = std::min(n, j8 + 8);
        for (std::size_t j = j8; j < end; ++j) byte |= static_cast<unsigned>(v_at(j) < T(0)) << (j - j8);
        p[j8 >> 3] = std::byte(static_cast<std::uint8_t>(byte));
      }
      break;
    }
    case value_encoding::qsgd: {
      double sq = 0;
      for (std::size_t j = 0; j < n; ++j) {
        const double v = static_cast<double>(v_at(j));
        sq += v * v;
      }
      m.scale = to_float_saturating(std::sqrt(sq));
      const T nrm = static_cast<T>(m.scale);
      if (!(nrm > T(0))) break;
      const unsigned bits = qsgd_code_bits(m.levels);
      const T s = static_cast<T>(m.levels);
      const T to_level = s / nrm;
      const counter_rng rng(ctx.seed, ctx.node, ctx.round, rng_stream::qsgd);
      std::uint32_t cached_block = 0xFFFFFFFFu;
      philox_counter words{};
      std::uint64_t acc = 0;  // bit accumulator, LSB first
      unsigned held = 0;
      std::size_t out = 0;
      for (std::size_t j = 0; j < n; ++j) {
        const std::uint32_t at = m.index_of(j);
        if ((at >> 2) != cached_block) {
          cached_block = at >> 2;
          words = rng.block(cached_block);
        }
        const T v = v_at(j);
        const T r = std::abs(v) * to_level;
        T level = std::floor(r);
        level += static_cast<T>(static_cast<T>(unit_interval(words[at & 3])) < r - level);
        level = std::min(level, s);
        const std::uint64_t code = (static_cast<std::uint64_t>(level) << 1) | (v < T(0) ? 1u : 0u);
        acc |= code << held;
        held += bits;
        while (held >= 8) {
          p[out++] = std::byte(static_cast<std::uint8_t>(acc));
          acc >>= 8;
          held -= 8;
        }
      }
      if (held > 0) p[out] = std::byte(static_cast<std::uint8_t>(acc));
      break;
    }
  }
}

}  // namespace detail
}  // namespace v0
}  // namespace sparsepush
