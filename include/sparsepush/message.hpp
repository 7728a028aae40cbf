// sparsepush/message.hpp: a compressed message q = C(v) and its exact wire encoding.
// A message carries `count` values of a length-`dim` vector: all of them (dense) or those at
// ascending `indices`. Values are held exactly as they travel (fp64/fp32/fp16/bf16, int8 codes
// with a scale, sign bits with a scale, QSGD levels with a norm); every reader dequantizes through
// value_at(), so the sender's error feedback and the receiver see the same q, bit for bit.
//
// Wire layout (little-endian), wire_bytes() == encode(m).size() exactly:
//   0  "SPSH"           4  version u8 (=1)    5  index encoding u8   6  value encoding u8
//   7  reserved u8 (=0) 8  levels u16         10 reserved u16 (=0)   12 dim u32
//   16 count u32        20 index bytes u32    24 scale f32           28 CRC-32 of all other bytes
//   32 indices: none | count x u32 | first index, then (gap - 1) as LEB128 varints
//   .. values: count x {8|4|2|2|1} bytes, or ceil(count/8) sign bytes, or ceil(count*b/8) bytes
//      of QSGD codes (b = 1 sign bit + bit_width(levels) level bits), bits LSB first.
#pragma once

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <span>
#include <string>
#include <vector>

#include "config.hpp"
#include "detail/crc32.hpp"
#include "detail/float_codec.hpp"
#include "tensor.hpp"

namespace sparsepush {
inline namespace v0 {

/// How a message's indices travel. `automatic` (compressor setting only) picks the smaller of
/// raw_u32 and delta_varint for each message.
enum class index_encoding : std::uint8_t { dense = 0, raw_u32 = 1, delta_varint = 2, automatic = 255 };

/// How a message's values travel. `native` (compressor setting only) means the tensor's own type.
enum class value_encoding : std::uint8_t {
  native = 0,
  f64 = 1,
  f32 = 2,
  f16 = 3,
  bf16 = 4,
  i8 = 5,    ///< code in [-127, 127] times a per-message scale (max |v| / 127)
  sign = 6,  ///< one bit per value times a per-message scale (mean |v|)
  qsgd = 7,  ///< sign bit + level in [0, levels], times norm / levels, stochastic rounding
};

inline constexpr std::size_t message_header_bytes = 32;
inline constexpr std::uint8_t message_version = 1;
inline constexpr std::uint16_t max_qsgd_levels = 32767;

inline const char* to_string(value_encoding e) noexcept {
  switch (e) {
    case value_encoding::native: return "native";
    case value_encoding::f64: return "fp64";
    case value_encoding::f32: return "fp32";
    case value_encoding::f16: return "fp16";
    case value_encoding::bf16: return "bf16";
    case value_encoding::i8: return "int8";
    case value_encoding::sign: return "sign";
    case value_encoding::qsgd: return "qsgd";
  }
  return "?";
}

inline const char* to_string(index_encoding e) noexcept {
  switch (e) {
    case index_encoding::dense: return "dense";
    case index_encoding::raw_u32: return "u32";
    case index_encoding::delta_varint: return "varint";
    case index_encoding::automatic: return "auto";
  }
  return "?";
}

namespace detail {

/// Bits of one QSGD code: a sign bit plus enough bits for a level in [0, levels].
constexpr unsigned qsgd_code_bits(std::uint16_t levels) noexcept {
  return 1u + static_cast<unsigned>(std::bit_width(static_cast<unsigned>(levels)));
}

constexpr std::size_t varint_bytes(std::uint32_t v) noexcept {
  return v < (1u << 7) ? 1 : v < (1u << 14) ? 2 : v < (1u << 21) ? 3 : v < (1u << 28) ? 4 : 5;
}

/// Sum of varint sizes of the delta encoding of ascending indices.
inline std::size_t delta_varint_bytes(std::span<const std::uint32_t> idx) noexcept {
  std::size_t bytes = 0;
  std::uint32_t prev = 0;
  for (std::size_t j = 0; j < idx.size(); ++j) {
    bytes += varint_bytes(j == 0 ? idx[0] : idx[j] - prev - 1);
    prev = idx[j];
  }
  return bytes;
}

inline void put_u16(std::byte* p, std::uint16_t v) noexcept {
  p[0] = std::byte(v & 0xFF);
  p[1] = std::byte(v >> 8);
}
inline void put_u32(std::byte* p, std::uint32_t v) noexcept {
  for (int b = 0; b < 4; ++b) p[b] = std::byte((v >> (8 * b)) & 0xFF);
}
inline std::uint16_t get_u16(const std::byte* p) noexcept {
  return static_cast<std::uint16_t>(std::to_integer<unsigned>(p[0]) |
                                    (std::to_integer<unsigned>(p[1]) << 8));
}
inline std::uint32_t get_u32(const std::byte* p) noexcept {
  std::uint32_t v = 0;
  for (int b = 0; b < 4; ++b) v |= std::to_integer<std::uint32_t>(p[b]) << (8 * b);
  return v;
}

static_assert(std::endian::native == std::endian::little,
              "sparsepush: the value payload is copied as little-endian; big-endian hosts are not "
              "supported yet");

}  // namespace detail

/// Bytes of the value section for `count` values in encoding e.
constexpr std::size_t payload_bytes(value_encoding e, std::uint16_t levels,
                                    std::size_t count) noexcept {
  switch (e) {
    case value_encoding::f64: return 8 * count;
    case value_encoding::native:
    case value_encoding::f32: return 4 * count;
    case value_encoding::f16:
    case value_encoding::bf16: return 2 * count;
    case value_encoding::i8: return count;
    case value_encoding::sign: return (count + 7) / 8;
    case value_encoding::qsgd: return (count * detail::qsgd_code_bits(levels) + 7) / 8;
  }
  return 0;
}

/// One compressed vector, as it travels.
struct message {
  std::uint32_t dim = 0;    ///< length d of the vector this message describes
  std::uint32_t count = 0;  ///< number of values carried (== dim when dense)
  index_encoding index_enc = index_encoding::dense;
  value_encoding value_enc = value_encoding::f32;
  std::uint16_t levels = 0;              ///< QSGD s; 0 for other encodings
  float scale = 0.0f;                    ///< int8 scale, sign magnitude or QSGD norm
  std::vector<std::uint32_t> indices;    ///< ascending, size count; empty when dense
  std::vector<std::byte> payload;        ///< values, exactly as on the wire

  bool dense() const noexcept { return index_enc == index_encoding::dense; }

  /// Bytes of the index section as encoded.
  std::size_t index_bytes() const noexcept {
    switch (index_enc) {
      case index_encoding::raw_u32: return 4 * indices.size();
      case index_encoding::delta_varint: return detail::delta_varint_bytes(indices);
      default: return 0;
    }
  }

  /// Exact size in bytes of encode(*this).
  std::size_t wire_bytes() const noexcept {
    return message_header_bytes + index_bytes() + payload.size();
  }

  /// Coordinate of the j-th value.
  std::uint32_t index_of(std::size_t j) const noexcept {
    return dense() ? static_cast<std::uint32_t>(j) : indices[j];
  }

  /// The j-th value, dequantized to T. The single definition of q used by senders and receivers.
  template <tensor_element T>
  T value_at(std::size_t j) const noexcept {
    const std::byte* p = payload.data();
    switch (value_enc) {
      case value_encoding::f64: {
        double v;
        std::memcpy(&v, p + 8 * j, 8);
        return static_cast<T>(v);
      }
      case value_encoding::native:
      case value_encoding::f32: {
        float v;
        std::memcpy(&v, p + 4 * j, 4);
        return static_cast<T>(v);
      }
      case value_encoding::f16:
        return static_cast<T>(detail::half_to_float(detail::get_u16(p + 2 * j)));
      case value_encoding::bf16:
        return static_cast<T>(detail::bf16_to_float(detail::get_u16(p + 2 * j)));
      case value_encoding::i8:
        return static_cast<T>(scale) * static_cast<T>(static_cast<std::int8_t>(p[j]));
      case value_encoding::sign:
        return ((std::to_integer<unsigned>(p[j >> 3]) >> (j & 7)) & 1u) ? -static_cast<T>(scale)
                                                                         : static_cast<T>(scale);
      case value_encoding::qsgd: {
        const unsigned bits = detail::qsgd_code_bits(levels);
        const std::uint32_t code = read_bits(j * bits, bits);
        const T mag = static_cast<T>(scale) * static_cast<T>(code >> 1) / static_cast<T>(levels);
        return (code & 1u) ? -mag : mag;
      }
    }
    return T(0);
  }

  /// The `bits`-wide field at bit offset `bit` of the payload (LSB first).
  std::uint32_t read_bits(std::size_t bit, unsigned bits) const noexcept {  // bits <= 25
    const std::size_t first = bit >> 3;
    const unsigned off = static_cast<unsigned>(bit & 7);
    const std::size_t bytes = (off + bits + 7) / 8;
    std::uint32_t w = 0;
    for (std::size_t b = 0; b < bytes; ++b)
      w |= std::to_integer<std::uint32_t>(payload[first + b]) << (8 * b);
    return (w >> off) & ((std::uint32_t{1} << bits) - 1);
  }
};

/// Call f(index, value) for every value of m, in ascending index order, values as T.
template <tensor_element T, class F>
void for_each_value(const message& m, F&& f) {
  const std::size_t n = m.count;
  auto raw = [&]<class W>(W) {  // plain IEEE values: copy straight out of the payload
    for (std::size_t j = 0; j < n; ++j) {
      W v;
      std::memcpy(&v, m.payload.data() + sizeof(W) * j, sizeof(W));
      f(m.index_of(j), static_cast<T>(v));
    }
  };
  switch (m.value_enc) {  // hoist the common encodings out of the loop
    case value_encoding::native:
    case value_encoding::f32: return raw(float{});
    case value_encoding::f64: return raw(double{});
    default:
      for (std::size_t j = 0; j < n; ++j) f(m.index_of(j), m.template value_at<T>(j));
  }
}

/// The dense vector q that m describes (zeros where it carries no value).
template <tensor_element T>
void decompress(const message& m, std::span<T> out) {
  if (out.size() != m.dim)
    throw size_error("decompress: message has dim " + std::to_string(m.dim) +
                     " but the output tensor has " + std::to_string(out.size()) + " elements");
  std::fill(out.begin(), out.end(), T(0));
  for_each_value<T>(m, [&](std::uint32_t i, T v) { out[i] = v; });
}

/// Convenience over any mutable flat tensor.
template <class Tensor>
  requires mutable_flat_tensor<Tensor&>
void decompress(const message& m, Tensor& out) {
  decompress(m, as_span(out));
}

/// Append the wire encoding of m to out.
inline void encode(const message& m, std::vector<std::byte>& out) {
  const std::size_t ib = m.index_bytes();
  const std::size_t start = out.size();
  out.resize(start + message_header_bytes + ib + m.payload.size());
  std::byte* p = out.data() + start;
  p[0] = std::byte{'S'};
  p[1] = std::byte{'P'};
  p[2] = std::byte{'S'};
  p[3] = std::byte{'H'};
  p[4] = std::byte{message_version};
  p[5] = std::byte{static_cast<std::uint8_t>(m.index_enc)};
  p[6] = std::byte{static_cast<std::uint8_t>(m.value_enc)};
  p[7] = std::byte{0};
  detail::put_u16(p + 8, m.levels);
  detail::put_u16(p + 10, 0);
  detail::put_u32(p + 12, m.dim);
  detail::put_u32(p + 16, m.count);
  detail::put_u32(p + 20, static_cast<std::uint32_t>(ib));
  detail::put_u32(p + 24, std::bit_cast<std::uint32_t>(m.scale));
  std::byte* q = p + message_header_bytes;
  if (m.index_enc == index_encoding::raw_u32) {
    for (std::uint32_t i : m.indices) {
      detail::put_u32(q, i);
      q += 4;
    }
  } else if (m.index_enc == index_encoding::delta_varint) {
    std::uint32_t prev = 0;
    for (std::size_t j = 0; j < m.indices.size(); ++j) {
      std::uint32_t v = j == 0 ? m.indices[0] : m.indices[j] - prev - 1;
      prev = m.indices[j];
      while (v >= 0x80u) {
        *q++ = std::byte(static_cast<std::uint8_t>(v | 0x80u));
        v >>= 7;
      }
      *q++ = std::byte(static_cast<std::uint8_t>(v));
    }
  }
  if (!m.payload.empty()) std::memcpy(q, m.payload.data(), m.payload.size());
  const std::size_t total = message_header_bytes + ib + m.payload.size();
  std::uint32_t crc = detail::crc32_update(0, {p, 28});
  crc = detail::crc32_update(crc, {p + message_header_bytes, total - message_header_bytes});
  detail::put_u32(p + 28, crc);
}

/// The wire encoding of m; its size is m.wire_bytes().
inline std::vector<std::byte> encode(const message& m) {
  std::vector<std::byte> out;
  out.reserve(m.wire_bytes());
  encode(m, out);
  return out;
}

/// Parse and fully validate one encoded message. Any truncated, oversized, corrupted or
/// inconsistent buffer throws decode_error; `out` is only replaced on success.
inline void decode(std::span<const std::byte> buf, message& out) {
  using detail::get_u16;
  using detail::get_u32;
  const std::size_t n = buf.size();
  if (n < message_header_bytes)
    throw decode_error("buffer of " + std::to_string(n) + " bytes is shorter than the " +
                       std::to_string(message_header_bytes) + "-byte header",
                       n);
  const std::byte* p = buf.data();
  if (p[0] != std::byte{'S'} || p[1] != std::byte{'P'} || p[2] != std::byte{'S'} ||
      p[3] != std::byte{'H'})
    throw decode_error("bad magic, not a sparsepush message", 0);
  if (std::to_integer<unsigned>(p[4]) != message_version)
    throw decode_error("unsupported version " + std::to_string(std::to_integer<unsigned>(p[4])), 4);
  const unsigned ie = std::to_integer<unsigned>(p[5]);
  const unsigned ve = std::to_integer<unsigned>(p[6]);
  if (ie > 2) throw decode_error("unknown index encoding " + std::to_string(ie), 5);
  if (ve < 1 || ve > 7) throw decode_error("unknown value encoding " + std::to_string(ve), 6);
  if (p[7] != std::byte{0} || get_u16(p + 10) != 0)
    throw decode_error("reserved header bytes are not zero", 7);
  message m;
  m.index_enc = static_cast<index_encoding>(ie);
  m.value_enc = static_cast<value_encoding>(ve);
  m.levels = get_u16(p + 8);
  m.dim = get_u32(p + 12);
  m.count = get_u32(p + 16);
  const std::uint32_t ib = get_u32(p + 20);
  m.scale = std::bit_cast<float>(get_u32(p + 24));
  const bool qsgd = m.value_enc == value_encoding::qsgd;
  if (qsgd ? (m.levels == 0 || m.levels > max_qsgd_levels) : m.levels != 0)
    throw decode_error("levels " + std::to_string(m.levels) + " invalid for value encoding " +
                           to_string(m.value_enc),
                       8);
  if (m.count > m.dim)
    throw decode_error("count " + std::to_string(m.count) + " exceeds dim " + std::to_string(m.dim),
                       16);
  if (m.index_enc == index_encoding::dense && m.count != m.dim)
    throw decode_error("dense message with count " + std::to_string(m.count) + " != dim " +
                           std::to_string(m.dim),
                       16);
  if (!std::isfinite(m.scale) || m.scale < 0.0f)
    throw decode_error("scale is negative or not finite", 24);
  const std::size_t pb = payload_bytes(m.value_enc, m.levels, m.count);
  const std::size_t expect = message_header_bytes + std::size_t{ib} + pb;
  if (n != expect)
    throw decode_error(std::string(n < expect ? "truncated" : "oversized") + " buffer: " +
                           std::to_string(n) + " bytes, header announces " + std::to_string(expect),
                       std::min(n, expect));
  std::uint32_t crc = detail::crc32_update(0, buf.first(28));
  crc = detail::crc32_update(crc, buf.subspan(message_header_bytes));
  if (crc != get_u32(p + 28)) throw decode_error("checksum mismatch, buffer is corrupted", 28);

  // Indices: exactly `count` ascending values below dim, filling exactly `ib` bytes.
  const std::byte* q = p + message_header_bytes;
  const std::size_t ioff = message_header_bytes;
  if (m.index_enc == index_encoding::dense) {
    if (ib != 0) throw decode_error("dense message with an index section", 20);
  } else if (m.index_enc == index_encoding::raw_u32) {
    if (ib != 4ull * m.count)
      throw decode_error("index section of " + std::to_string(ib) + " bytes for " +
                             std::to_string(m.count) + " raw u32 indices",
                         20);
    m.indices.resize(m.count);
    for (std::uint32_t j = 0; j < m.count; ++j) {
      const std::uint32_t i = get_u32(q + 4 * j);
      if (i >= m.dim || (j > 0 && i <= m.indices[j - 1]))
        throw decode_error("index " + std::to_string(i) + " at position " + std::to_string(j) +
                               " is out of range or not ascending (dim " + std::to_string(m.dim) +
                               ")",
                           ioff + 4 * j);
      m.indices[j] = i;
    }
  } else {
    m.indices.resize(m.count);
    std::size_t at = 0;
    std::uint64_t prev = 0;
    for (std::uint32_t j = 0; j < m.count; ++j) {
      std::uint64_t v = 0;
      for (unsigned shift = 0;; shift += 7) {
        if (at >= ib) throw decode_error("index section ends inside a varint", ioff + at);
        if (shift > 28) throw decode_error("varint longer than 5 bytes", ioff + at);
        const unsigned byte = std::to_integer<unsigned>(q[at++]);
        v |= std::uint64_t{byte & 0x7Fu} << shift;
        if (!(byte & 0x80u)) break;
      }
      const std::uint64_t i = j == 0 ? v : prev + 1 + v;
      if (i >= m.dim)
        throw decode_error("index " + std::to_string(i) + " at position " + std::to_string(j) +
                               " is not below dim " + std::to_string(m.dim),
                           ioff + at);
      m.indices[j] = static_cast<std::uint32_t>(i);
      prev = i;
    }
    if (at != ib)
      throw decode_error("index section has " + std::to_string(ib - at) + " trailing bytes",
                         ioff + at);
  }

  // Values: finite floats, int8 codes in [-127, 127], levels in range, zero padding bits.
  const std::byte* v = q + ib;
  const std::size_t voff = message_header_bytes + ib;
  m.payload.assign(v, v + pb);
  auto bad_value = [&](std::size_t j, const char* why) {
    return decode_error("value " + std::to_string(j) + " " + why, voff);
  };
  switch (m.value_enc) {
    case value_encoding::f64:
    case value_encoding::f32:
    case value_encoding::f16:
    case value_encoding::bf16:
      for (std::uint32_t j = 0; j < m.count; ++j)
        if (!std::isfinite(m.value_at<double>(j))) throw bad_value(j, "is not finite");
      break;
    case value_encoding::i8:
      for (std::uint32_t j = 0; j < m.count; ++j)
        if (static_cast<std::int8_t>(m.payload[j]) == -128) throw bad_value(j, "is int8 -128");
      break;
    case value_encoding::qsgd: {
      const unsigned bits = detail::qsgd_code_bits(m.levels);
      for (std::uint32_t j = 0; j < m.count; ++j)
        if ((m.read_bits(std::size_t{j} * bits, bits) >> 1) > m.levels)
          throw bad_value(j, "has a level above the message's levels");
      break;
    }
    default: break;
  }
  const std::size_t used_bits =
      m.value_enc == value_encoding::sign   ? std::size_t{m.count}
      : m.value_enc == value_encoding::qsgd ? std::size_t{m.count} * detail::qsgd_code_bits(m.levels)
                                            : 8 * pb;
  if (used_bits < 8 * pb && m.read_bits(used_bits, static_cast<unsigned>(8 * pb - used_bits)) != 0)
    throw decode_error("padding bits of the value section are not zero", voff + pb - 1);
  out = std::move(m);
}

/// Parse and validate one encoded message.
inline message decode(std::span<const std::byte> buf) {
  message m;
  decode(buf, m);
  return m;
}

}  // namespace v0
}  // namespace sparsepush
