// sparsepush/wire.hpp: the wire codec of a compressed message q = C(v), over bytes: the header,
// the index encodings and, for each value encoding, its writer (quantize) beside its reader
// (dequantize), so that the sender's error feedback and the receiver see the same q bit for bit:
//   int8: s = max|v| / 127, q = s * round(v / s) (saturating);  sign: s = sum|v| / count, q = s * sign(v);
//   qsgd: nrm = ||v||_2, q = nrm * sign(v) * l / levels, l the stochastic rounding of |v| levels / nrm.
//
// Wire layout (little-endian), wire_bytes() == encode(m).size() exactly:
//   0  "SPSH"           4  version u8 (=1)    5  index encoding u8   6  value encoding u8
//   7  reserved u8 (=0) 8  levels u16         10 reserved u16 (=0)   12 dim u32
//   16 count u32        20 index bytes u32    24 scale f32           28 CRC-32 of all other bytes
//   32 indices: none | count x u32 | first index, then (gap - 1) as LEB128 varints |
//      seeded: the key of random-K's index stream, seed u64, node u32, round u32 (16 bytes), from
//      which the receiver draws the count indices of [0, dim) again (detail/random_indices.hpp)
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
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "config.hpp"
#include "detail/crc32.hpp"
#include "detail/float_codec.hpp"
#include "detail/philox.hpp"
#include "detail/random_indices.hpp"
#include "detail/value_kernels.hpp"
#include "tensor.hpp"

namespace sparsepush {
inline namespace v0 {

// --- what travels ---------------------------------------------------------------------------

/// How a message's values travel (byte 6 of the header).
enum class wire_values : std::uint8_t {
  f64 = 1,
  f32 = 2,
  f16 = 3,
  bf16 = 4,
  i8 = 5,    ///< code in [-127, 127] times a per-message scale (max |v| / 127)
  sign = 6,  ///< one bit per value times a per-message scale (mean |v|)
  qsgd = 7,  ///< sign bit + level in [0, levels], times norm / levels, stochastic rounding
};

/// How a message's indices travel (byte 5 of the header). `seeded`: random-K's indices as the
/// key of their stream (16 bytes whatever the count).
enum class wire_indices : std::uint8_t { dense = 0, raw_u32 = 1, delta_varint = 2, seeded = 3 };

/// The key of random-K's index stream: the (seed, node, round) the compressor drew with.
struct index_stream_key {
  std::uint64_t seed = 0;
  std::uint32_t node = 0;
  std::uint32_t round = 0;
  friend bool operator==(const index_stream_key&, const index_stream_key&) = default;
};

/// Bytes of a seeded index section.
inline constexpr std::size_t seeded_index_bytes = 16;

// --- compressor settings: a wire encoding, or a choice made per message ----------------------

/// The value encoding a compressor is asked for: a wire encoding, or `native` (the tensor's own
/// type, f32 or f64), which never travels.
enum class value_encoding : std::uint8_t {
  native = 0,
  f64 = 1,
  f32 = 2,
  f16 = 3,
  bf16 = 4,
  i8 = 5,
  sign = 6,
  qsgd = 7,
};

/// The index encoding a compressor is asked for: a wire encoding, or `automatic` (the smaller of
/// raw_u32 and delta_varint for each message), which never travels. `seeded` is random-K's only.
enum class index_encoding : std::uint8_t { dense = 0, raw_u32 = 1, delta_varint = 2, seeded = 3, automatic = 255 };

/// A setting equals the wire encoding it names; native and automatic equal none.
constexpr bool operator==(wire_values w, value_encoding s) noexcept {
  return static_cast<std::uint8_t>(w) == static_cast<std::uint8_t>(s);
}
constexpr bool operator==(wire_indices w, index_encoding s) noexcept {
  return static_cast<std::uint8_t>(w) == static_cast<std::uint8_t>(s);
}

/// The wire encoding a setting names; nullopt for native.
constexpr std::optional<wire_values> to_wire(value_encoding s) noexcept {
  if (s == value_encoding::native || static_cast<std::uint8_t>(s) > 7) return std::nullopt;
  return static_cast<wire_values>(s);
}
/// The wire encoding a setting names; nullopt for automatic.
constexpr std::optional<wire_indices> to_wire(index_encoding s) noexcept {
  if (static_cast<std::uint8_t>(s) > 3) return std::nullopt;
  return static_cast<wire_indices>(s);
}
/// The setting that asks for exactly this wire encoding.
constexpr value_encoding to_setting(wire_values w) noexcept { return static_cast<value_encoding>(w); }
constexpr index_encoding to_setting(wire_indices w) noexcept { return static_cast<index_encoding>(w); }

inline constexpr std::size_t message_header_bytes = 32;
inline constexpr std::uint8_t message_version = 1;
inline constexpr std::uint16_t max_qsgd_levels = 32767;

inline const char* to_string(wire_values e) noexcept {
  switch (e) {
    case wire_values::f64: return "fp64";
    case wire_values::f32: return "fp32";
    case wire_values::f16: return "fp16";
    case wire_values::bf16: return "bf16";
    case wire_values::i8: return "int8";
    case wire_values::sign: return "sign";
    case wire_values::qsgd: return "qsgd";
  }
  return "?";
}

inline const char* to_string(wire_indices e) noexcept {
  switch (e) {
    case wire_indices::dense: return "dense";
    case wire_indices::raw_u32: return "u32";
    case wire_indices::delta_varint: return "varint";
    case wire_indices::seeded: return "seeded";
  }
  return "?";
}

inline const char* to_string(value_encoding e) noexcept {
  if (e == value_encoding::native) return "native";
  const auto w = to_wire(e);
  return w ? to_string(*w) : "?";
}

inline const char* to_string(index_encoding e) noexcept {
  if (e == index_encoding::automatic) return "auto";
  const auto w = to_wire(e);
  return w ? to_string(*w) : "?";
}

namespace detail {

/// Bits of one QSGD code: a sign bit plus enough bits for a level in [0, levels].
constexpr unsigned qsgd_code_bits(std::uint16_t levels) noexcept {
  return 1u + static_cast<unsigned>(std::bit_width(static_cast<unsigned>(levels)));
}

}  // namespace detail

/// Bytes of the value section for `count` values in encoding e.
constexpr std::size_t payload_bytes(wire_values e, std::uint16_t levels, std::size_t count) noexcept {
  switch (e) {
    case wire_values::f64: return 8 * count;
    case wire_values::f32: return 4 * count;
    case wire_values::f16:
    case wire_values::bf16: return 2 * count;
    case wire_values::i8: return count;
    case wire_values::sign: return (count + 7) / 8;
    case wire_values::qsgd: return (count * detail::qsgd_code_bits(levels) + 7) / 8;
  }
  return 0;
}

/// The same for a setting; native counts as fp32, as it did before the wire enums existed.
constexpr std::size_t payload_bytes(value_encoding e, std::uint16_t levels, std::size_t count) noexcept {
  return payload_bytes(to_wire(e).value_or(wire_values::f32), levels, count);
}

namespace detail {

static_assert(std::endian::native == std::endian::little,
              "sparsepush: the value payload is copied as little-endian; big-endian hosts are not "
              "supported yet");

// --- bytes ------------------------------------------------------------------------------------

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

/// The `bits`-wide field (bits <= 25) at bit offset `bit` of p, LSB first.
inline std::uint32_t read_bits(const std::byte* p, std::size_t bit, unsigned bits) noexcept {
  const std::size_t first = bit >> 3;
  const unsigned off = static_cast<unsigned>(bit & 7);
  const std::size_t bytes = (off + bits + 7) / 8;
  std::uint32_t w = 0;
  for (std::size_t b = 0; b < bytes; ++b) w |= std::to_integer<std::uint32_t>(p[first + b]) << (8 * b);
  return (w >> off) & ((std::uint32_t{1} << bits) - 1);
}

// --- header -----------------------------------------------------------------------------------

/// The fixed 32-byte header, decoded.
struct wire_header {
  wire_indices indices = wire_indices::dense;
  wire_values values = wire_values::f32;
  std::uint16_t levels = 0;
  std::uint32_t dim = 0;
  std::uint32_t count = 0;
  std::uint32_t index_bytes = 0;
  float scale = 0.0f;

  std::size_t value_bytes() const noexcept { return payload_bytes(values, levels, count); }
  std::size_t total_bytes() const noexcept { return message_header_bytes + index_bytes + value_bytes(); }
};

/// Write h to p[0, 32) with a zero checksum field (seal() fills it once the body is written).
inline void write_header(const wire_header& h, std::byte* p) noexcept {
  p[0] = std::byte{'S'};
  p[1] = std::byte{'P'};
  p[2] = std::byte{'S'};
  p[3] = std::byte{'H'};
  p[4] = std::byte{message_version};
  p[5] = std::byte{static_cast<std::uint8_t>(h.indices)};
  p[6] = std::byte{static_cast<std::uint8_t>(h.values)};
  p[7] = std::byte{0};
  put_u16(p + 8, h.levels);
  put_u16(p + 10, 0);
  put_u32(p + 12, h.dim);
  put_u32(p + 16, h.count);
  put_u32(p + 20, h.index_bytes);
  put_u32(p + 24, std::bit_cast<std::uint32_t>(h.scale));
  put_u32(p + 28, 0);
}

/// CRC-32 of an encoded message, the checksum field (bytes 28..31) excluded.
inline std::uint32_t message_crc(std::span<const std::byte> encoded) noexcept {
  const std::uint32_t crc = crc32_update(0, encoded.first(28));
  return crc32_update(crc, encoded.subspan(message_header_bytes));
}

/// Store the checksum of a fully written message.
inline void seal(std::span<std::byte> encoded) noexcept {
  put_u32(encoded.data() + 28, message_crc(encoded));
}

/// Parse and check the header of buf: magic, version, encodings, reserved bytes, levels,
/// count <= dim, scale, the exact size of buf and the checksum. Throws decode_error.
inline wire_header read_header(std::span<const std::byte> buf) {
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
  if (ie > 3) throw decode_error("unknown index encoding " + std::to_string(ie), 5);
  if (ve < 1 || ve > 7) throw decode_error("unknown value encoding " + std::to_string(ve), 6);
  if (p[7] != std::byte{0} || get_u16(p + 10) != 0)
    throw decode_error("reserved header bytes are not zero", 7);
  wire_header h;
  h.indices = static_cast<wire_indices>(ie);
  h.values = static_cast<wire_values>(ve);
  h.levels = get_u16(p + 8);
  h.dim = get_u32(p + 12);
  h.count = get_u32(p + 16);
  h.index_bytes = get_u32(p + 20);
  h.scale = std::bit_cast<float>(get_u32(p + 24));
  const bool qsgd = h.values == wire_values::qsgd;
  if (qsgd ? (h.levels == 0 || h.levels > max_qsgd_levels) : h.levels != 0)
    throw decode_error("levels " + std::to_string(h.levels) + " invalid for value encoding " +
                           to_string(h.values),
                       8);
  if (h.count > h.dim)
    throw decode_error("count " + std::to_string(h.count) + " exceeds dim " + std::to_string(h.dim), 16);
  if (h.indices == wire_indices::dense && h.count != h.dim)
    throw decode_error("dense message with count " + std::to_string(h.count) + " != dim " +
                           std::to_string(h.dim),
                       16);
  if (!std::isfinite(h.scale) || h.scale < 0.0f) throw decode_error("scale is negative or not finite", 24);
  const std::size_t expect = h.total_bytes();
  if (n != expect)
    throw decode_error(std::string(n < expect ? "truncated" : "oversized") + " buffer: " +
                           std::to_string(n) + " bytes, header announces " + std::to_string(expect),
                       std::min(n, expect));
  if (message_crc(buf) != get_u32(p + 28)) throw decode_error("checksum mismatch, buffer is corrupted", 28);
  return h;
}

// --- indices: ascending coordinates below dim ------------------------------------------------
// raw_u32: each index as u32. delta_varint: the first index, then each gap minus one, as LEB128.

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

/// Bytes of the index section of idx in encoding e.
inline std::size_t index_section_bytes(wire_indices e, std::span<const std::uint32_t> idx) noexcept {
  switch (e) {
    case wire_indices::raw_u32: return 4 * idx.size();
    case wire_indices::delta_varint: return delta_varint_bytes(idx);
    case wire_indices::dense: return 0;
    case wire_indices::seeded: return seeded_index_bytes;
  }
  return 0;
}

inline std::byte* write_raw_u32(std::span<const std::uint32_t> idx, std::byte* q) noexcept {
  for (const std::uint32_t i : idx) {
    put_u32(q, i);
    q += 4;
  }
  return q;
}

/// Read h.count raw u32 indices from q (at byte `off` of the buffer): ascending, below dim.
inline void read_raw_u32(const wire_header& h, const std::byte* q, std::size_t off,
                         std::vector<std::uint32_t>& out) {
  if (h.index_bytes != 4ull * h.count)
    throw decode_error("index section of " + std::to_string(h.index_bytes) + " bytes for " +
                           std::to_string(h.count) + " raw u32 indices",
                       20);
  out.resize(h.count);
  for (std::uint32_t j = 0; j < h.count; ++j) {
    const std::uint32_t i = get_u32(q + 4 * j);
    if (i >= h.dim || (j > 0 && i <= out[j - 1]))
      throw decode_error("index " + std::to_string(i) + " at position " + std::to_string(j) +
                             " is out of range or not ascending (dim " + std::to_string(h.dim) + ")",
                         off + 4 * j);
    out[j] = i;
  }
}

inline std::byte* write_delta_varint(std::span<const std::uint32_t> idx, std::byte* q) noexcept {
  std::uint32_t prev = 0;
  for (std::size_t j = 0; j < idx.size(); ++j) {
    std::uint32_t v = j == 0 ? idx[0] : idx[j] - prev - 1;
    prev = idx[j];
    while (v >= 0x80u) {
      *q++ = std::byte(static_cast<std::uint8_t>(v | 0x80u));
      v >>= 7;
    }
    *q++ = std::byte(static_cast<std::uint8_t>(v));
  }
  return q;
}

/// Read h.count delta varint indices filling exactly h.index_bytes bytes, each below dim.
inline void read_delta_varint(const wire_header& h, const std::byte* q, std::size_t off,
                              std::vector<std::uint32_t>& out) {
  out.resize(h.count);
  std::size_t at = 0;
  std::uint64_t prev = 0;
  for (std::uint32_t j = 0; j < h.count; ++j) {
    std::uint64_t v = 0;
    for (unsigned shift = 0;; shift += 7) {
      if (at >= h.index_bytes) throw decode_error("index section ends inside a varint", off + at);
      if (shift > 28) throw decode_error("varint longer than 5 bytes", off + at);
      const unsigned byte = std::to_integer<unsigned>(q[at++]);
      v |= std::uint64_t{byte & 0x7Fu} << shift;
      if (!(byte & 0x80u)) break;
    }
    const std::uint64_t i = j == 0 ? v : prev + 1 + v;
    if (i >= h.dim)
      throw decode_error("index " + std::to_string(i) + " at position " + std::to_string(j) +
                             " is not below dim " + std::to_string(h.dim),
                         off + at);
    out[j] = static_cast<std::uint32_t>(i);
    prev = i;
  }
  if (at != h.index_bytes)
    throw decode_error("index section has " + std::to_string(h.index_bytes - at) + " trailing bytes",
                       off + at);
}

/// Write the index section of idx in encoding e at q (key: a seeded section's); returns its end.
inline std::byte* write_indices(wire_indices e, std::span<const std::uint32_t> idx, std::byte* q,
                                const index_stream_key& key = {}) noexcept {
  switch (e) {
    case wire_indices::raw_u32: return write_raw_u32(idx, q);
    case wire_indices::delta_varint: return write_delta_varint(idx, q);
    case wire_indices::dense: return q;
    case wire_indices::seeded:
      put_u32(q, static_cast<std::uint32_t>(key.seed));
      put_u32(q + 4, static_cast<std::uint32_t>(key.seed >> 32));
      put_u32(q + 8, key.node);
      put_u32(q + 12, key.round);
      return q + seeded_index_bytes;
  }
  return q;
}

/// Read a seeded index section: the key, then the count indices of [0, dim) drawn from it, in
/// O(count) memory whatever dim announces.
inline index_stream_key read_seeded(const wire_header& h, const std::byte* q, std::vector<std::uint32_t>& out) {
  if (h.index_bytes != seeded_index_bytes)
    throw decode_error("seeded index section of " + std::to_string(h.index_bytes) + " bytes, not " +
                           std::to_string(seeded_index_bytes),
                       20);
  const index_stream_key key{get_u32(q) | std::uint64_t{get_u32(q + 4)} << 32, get_u32(q + 8), get_u32(q + 12)};
  random_indices_compact(h.dim, h.count, key.seed, key.node, key.round, out);
  return key;
}

/// Read the index section that follows the header of a buffer into out (cleared when dense).
inline void read_indices(const wire_header& h, const std::byte* q, std::vector<std::uint32_t>& out) {
  switch (h.indices) {
    case wire_indices::seeded: read_seeded(h, q, out); return;
    case wire_indices::dense:
      if (h.index_bytes != 0) throw decode_error("dense message with an index section", 20);
      out.clear();
      return;
    case wire_indices::raw_u32: return read_raw_u32(h, q, message_header_bytes, out);
    case wire_indices::delta_varint: return read_delta_varint(h, q, message_header_bytes, out);
  }
}

// --- values: each encoding's writer beside its reader ----------------------------------------
// A writer fills p (payload_bytes(...) bytes, zeroed by the caller) from the n values v_at(j),
// finite, and returns the message's scale (0 where the encoding has none). A reader returns the
// j-th value as T; it is the single definition of q.

/// A message's value section as a reader needs it.
struct value_view {
  wire_values encoding = wire_values::f32;
  std::uint16_t levels = 0;
  float scale = 0.0f;
  const std::byte* data = nullptr;
};

// fp64: the value as an IEEE double.
template <class Get>
void write_f64(std::byte* p, std::size_t n, Get&& v_at) noexcept {
  for (std::size_t j = 0; j < n; ++j) {
    const double v = static_cast<double>(v_at(j));
    std::memcpy(p + 8 * j, &v, 8);
  }
}
inline double read_f64(const std::byte* p, std::size_t j) noexcept {
  double v;
  std::memcpy(&v, p + 8 * j, 8);
  return v;
}

// fp32: round to nearest even, saturating at +-FLT_MAX.
template <class Get>
void write_f32(std::byte* p, std::size_t n, Get&& v_at) noexcept {
  for (std::size_t j = 0; j < n; ++j) {
    const float v = to_float_saturating(v_at(j));
    std::memcpy(p + 4 * j, &v, 4);
  }
}
inline float read_f32(const std::byte* p, std::size_t j) noexcept {
  float v;
  std::memcpy(&v, p + 4 * j, 4);
  return v;
}

// fp16: through fp32, then round to nearest even, saturating at 65504.
template <class Get>
void write_f16(std::byte* p, std::size_t n, Get&& v_at) noexcept {
  for (std::size_t j = 0; j < n; ++j) put_u16(p + 2 * j, float_to_half(to_float_saturating(v_at(j))));
}
inline float read_f16(const std::byte* p, std::size_t j) noexcept { return half_to_float(get_u16(p + 2 * j)); }

// bf16: through fp32, then round to nearest even, saturating at the largest finite bf16.
template <class Get>
void write_bf16(std::byte* p, std::size_t n, Get&& v_at) noexcept {
  for (std::size_t j = 0; j < n; ++j) put_u16(p + 2 * j, float_to_bf16(to_float_saturating(v_at(j))));
}
inline float read_bf16(const std::byte* p, std::size_t j) noexcept { return bf16_to_float(get_u16(p + 2 * j)); }

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
template <tensor_element T>
T read_i8(const std::byte* p, std::size_t j, float scale) noexcept {
  const T q = static_cast<T>(scale) * static_cast<T>(static_cast<std::int8_t>(p[j]));
  // in float, 127 s rounds above the largest float when max|v| is close to it: saturate there,
  // as the fp32 writer does, so that a finite v never gives an infinite q
  if (!std::isfinite(q)) return std::copysign(std::numeric_limits<T>::max(), q);
  return q;
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
template <tensor_element T>
T read_sign(const std::byte* p, std::size_t j, float scale) noexcept {
  return ((std::to_integer<unsigned>(p[j >> 3]) >> (j & 7)) & 1u) ? -static_cast<T>(scale) : static_cast<T>(scale);
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

/// Write n values in encoding e (with `levels` for qsgd) into the zeroed p; returns the scale.
/// index_at(j) is the coordinate of value j (qsgd keys its randomness by it).
template <tensor_element T, class Get, class At>
float write_values(wire_values e, std::uint16_t levels, std::size_t n, Get&& v_at, At&& index_at,
                   const context& ctx, std::byte* p) noexcept {
  switch (e) {
    case wire_values::f64: write_f64(p, n, v_at); return 0.0f;
    case wire_values::f32: write_f32(p, n, v_at); return 0.0f;
    case wire_values::f16: write_f16(p, n, v_at); return 0.0f;
    case wire_values::bf16: write_bf16(p, n, v_at); return 0.0f;
    case wire_values::i8: return write_i8<T>(p, n, v_at);
    case wire_values::sign: return write_sign<T>(p, n, v_at);
    case wire_values::qsgd: return write_qsgd<T>(p, n, levels, v_at, index_at, ctx);
  }
  return 0.0f;
}

/// The j-th value of a value section, dequantized to T.
template <tensor_element T>
T read_value(const value_view& s, std::size_t j) noexcept {
  switch (s.encoding) {
    case wire_values::f64: return static_cast<T>(read_f64(s.data, j));
    case wire_values::f32: return static_cast<T>(read_f32(s.data, j));
    case wire_values::f16: return static_cast<T>(read_f16(s.data, j));
    case wire_values::bf16: return static_cast<T>(read_bf16(s.data, j));
    case wire_values::i8: return read_i8<T>(s.data, j, s.scale);
    case wire_values::sign: return read_sign<T>(s.data, j, s.scale);
    case wire_values::qsgd: return read_qsgd<T>(s.data, j, s.levels, s.scale);
  }
  return T(0);
}

/// Check a decoded value section (h.value_bytes() bytes at p, at byte `off` of the buffer):
/// finite floats, int8 codes in [-127, 127], qsgd levels in range, zero padding bits.
inline void check_values(const wire_header& h, const std::byte* p, std::size_t off) {
  auto bad_value = [&](std::size_t j, const char* why) {
    return decode_error("value " + std::to_string(j) + " " + why, off);
  };
  const value_view s{h.values, h.levels, h.scale, p};
  switch (h.values) {
    case wire_values::f64:
    case wire_values::f32:
    case wire_values::f16:
    case wire_values::bf16:
      for (std::uint32_t j = 0; j < h.count; ++j)
        if (!std::isfinite(read_value<double>(s, j))) throw bad_value(j, "is not finite");
      break;
    case wire_values::i8:
      for (std::uint32_t j = 0; j < h.count; ++j)
        if (static_cast<std::int8_t>(p[j]) == -128) throw bad_value(j, "is int8 -128");
      break;
    case wire_values::qsgd: {
      const unsigned bits = qsgd_code_bits(h.levels);
      for (std::uint32_t j = 0; j < h.count; ++j)
        if ((read_bits(p, std::size_t{j} * bits, bits) >> 1) > h.levels)
          throw bad_value(j, "has a level above the message's levels");
      break;
    }
    case wire_values::sign: break;
  }
  const std::size_t pb = h.value_bytes();
  const std::size_t used_bits = h.values == wire_values::sign   ? std::size_t{h.count}
                                : h.values == wire_values::qsgd ? std::size_t{h.count} * qsgd_code_bits(h.levels)
                                                                : 8 * pb;
  if (used_bits < 8 * pb && read_bits(p, used_bits, static_cast<unsigned>(8 * pb - used_bits)) != 0)
    throw decode_error("padding bits of the value section are not zero", off + pb - 1);
}

}  // namespace detail
}  // namespace v0
}  // namespace sparsepush
