// sparsepush/wire/value_readers.hpp: the value section of an encoded message, as a receiver reads
// it: for each value encoding the reader that dequantizes value j to T, the single definition of
// q that the sender's error feedback and every receiver use, bit for bit (int8: q = s * code;
// sign: q = s * sign(v); qsgd: q = nrm * sign(v) * l / levels), and the check of a received section.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>

#include "../config.hpp"
#include "../detail/bytes.hpp"
#include "../detail/float_codec.hpp"
#include "../tensor.hpp"
#include "format.hpp"

namespace sparsepush {
inline namespace v0 {
namespace detail {

/// The `bits`-wide field (bits <= 25) at bit offset `bit` of p, LSB first.
inline std::uint32_t read_bits(const std::byte* p, std::size_t bit, unsigned bits) noexcept {
  const std::size_t first = bit >> 3;
  const unsigned off = static_cast<unsigned>(bit & 7);
  const std::size_t bytes = (off + bits + 7) / 8;
  std::uint32_t w = 0;
  for (std::size_t b = 0; b < bytes; ++b) w |= std::to_integer<std::uint32_t>(p[first + b]) << (8 * b);
  return (w >> off) & ((std::uint32_t{1} << bits) - 1);
}

/// A message's value section as a reader needs it.
struct value_view {
  value_encoding encoding = value_encoding::f32;
  std::uint16_t levels = 0;
  float scale = 0.0f;
  const std::byte* data = nullptr;
};

// fp64: the value as an IEEE double.
inline double read_f64(const std::byte* p, std::size_t j) noexcept {
  double v;
  std::memcpy(&v, p + 8 * j, 8);
  return v;
}

// fp32: the value as an IEEE float.
inline float read_f32(const std::byte* p, std::size_t j) noexcept {
  float v;
  std::memcpy(&v, p + 4 * j, 4);
  return v;
}

// fp16: IEEE half, widened to fp32.
inline float read_f16(const std::byte* p, std::size_t j) noexcept { return half_to_float(get_u16(p + 2 * j)); }

// bf16: bfloat16, widened to fp32.
inline float read_bf16(const std::byte* p, std::size_t j) noexcept { return bf16_to_float(get_u16(p + 2 * j)); }

// int8: q = s * code, code in [-127, 127], saturating at the largest finite T.
template <tensor_element T>
T read_i8(const std::byte* p, std::size_t j, float scale) noexcept {
  const T q = static_cast<T>(scale) * static_cast<T>(static_cast<std::int8_t>(p[j]));
  // in float, 127 s rounds above the largest float when max|v| is close to it: saturate there,
  // as the fp32 writer does, so that a finite v never gives an infinite q
  if (!std::isfinite(q)) return std::copysign(std::numeric_limits<T>::max(), q);
  return q;
}

// sign: bit j set when v_j < 0, q = s * sign(v) with sign(0) = +.
template <tensor_element T>
T read_sign(const std::byte* p, std::size_t j, float scale) noexcept {
  return ((std::to_integer<unsigned>(p[j >> 3]) >> (j & 7)) & 1u) ? -static_cast<T>(scale) : static_cast<T>(scale);
}

// qsgd: code = l << 1 | sign, q = nrm * sign(v) * l / levels.
template <tensor_element T>
T read_qsgd(const std::byte* p, std::size_t j, std::uint16_t levels, float scale) noexcept {
  const unsigned bits = qsgd_code_bits(levels);
  const std::uint32_t code = read_bits(p, j * bits, bits);
  const T level = static_cast<T>(code >> 1);
  T mag = static_cast<T>(scale) * level / static_cast<T>(levels);
  // in float, scale * level overflows when the norm exceeds FLT_MAX / levels, though mag <= scale
  if (!std::isfinite(mag)) mag = static_cast<T>(scale) * (level / static_cast<T>(levels));
  return (code & 1u) ? -mag : mag;
}

/// The j-th value of a value section, dequantized to T.
template <tensor_element T>
T read_value(const value_view& s, std::size_t j) noexcept {
  switch (s.encoding) {
    case value_encoding::f64: return static_cast<T>(read_f64(s.data, j));
    case value_encoding::f32: return static_cast<T>(read_f32(s.data, j));
    case value_encoding::f16: return static_cast<T>(read_f16(s.data, j));
    case value_encoding::bf16: return static_cast<T>(read_bf16(s.data, j));
    case value_encoding::i8: return read_i8<T>(s.data, j, s.scale);
    case value_encoding::sign: return read_sign<T>(s.data, j, s.scale);
    case value_encoding::qsgd: return read_qsgd<T>(s.data, j, s.levels, s.scale);
    case value_encoding::native: break;  // never travels
  }
  return T(0);
}

/// Check a decoded value section (h.value_bytes() bytes at p, at byte `off` of the buffer):
/// finite floats, int8 codes in [-127, 127], qsgd levels in range, zero padding bits.
template <class Fail = throw_decode_error>
void check_values(const wire_header& h, const std::byte* p, std::size_t off, Fail fail = {}) {
  auto bad_value = [&](std::size_t j, const char* why) { fail("value " + std::to_string(j) + " " + why, off); };
  const value_view s{h.values, h.levels, h.scale, p};
  switch (h.values) {
    case value_encoding::f64:
    case value_encoding::f32:
    case value_encoding::f16:
    case value_encoding::bf16:
      for (std::uint32_t j = 0; j < h.count; ++j)
        if (!std::isfinite(read_value<double>(s, j))) bad_value(j, "is not finite");
      break;
    case value_encoding::i8:
      for (std::uint32_t j = 0; j < h.count; ++j)
        if (static_cast<std::int8_t>(p[j]) == -128) bad_value(j, "is int8 -128");
      break;
    case value_encoding::qsgd: {
      const unsigned bits = qsgd_code_bits(h.levels);
      for (std::uint32_t j = 0; j < h.count; ++j)
        if ((read_bits(p, std::size_t{j} * bits, bits) >> 1) > h.levels)
          bad_value(j, "has a level above the message's levels");
      break;
    }
    case value_encoding::sign:
    case value_encoding::native: break;  // native: check_encodings refused it
  }
  const std::size_t pb = h.value_bytes();
  const std::size_t used_bits = h.values == value_encoding::sign   ? std::size_t{h.count}
                                : h.values == value_encoding::qsgd ? std::size_t{h.count} * qsgd_code_bits(h.levels)
                                                                : 8 * pb;
  if (used_bits < 8 * pb && read_bits(p, used_bits, static_cast<unsigned>(8 * pb - used_bits)) != 0)
    fail("padding bits of the value section are not zero", off + pb - 1);
}
}  // namespace detail
}  // namespace v0
}  // namespace sparsepush
