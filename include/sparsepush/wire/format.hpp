// sparsepush/wire/format.hpp: what travels and its frame: the value and index encodings, the
// settings that ask for them, the bytes of a value section, and the fixed 32-byte header of an
// encoded message with its CRC-32 (the layout below; wire_bytes() == encode(m).size() exactly).
//
// Wire layout (little-endian):
//   0  "SPSH"           4  version u8 (=1)    5  index encoding u8   6  value encoding u8
//   7  reserved u8 (=0) 8  levels u16         10 reserved u16 (=0)   12 dim u32
//   16 count u32        20 index bytes u32    24 scale f32           28 CRC-32 of all other bytes
//   32 indices (index_codecs.hpp)   .. values (value_readers.hpp, value_codecs.hpp)
#pragma once

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>

#include "../config.hpp"
#include "../detail/bytes.hpp"
#include "../detail/crc32.hpp"

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

/// How decode reports a failed check: decode_error(what, byte offset). The checks below take
/// such a `fail(what, offset)`, so that decode() and validate() share them.
struct throw_decode_error {
  [[noreturn]] void operator()(const std::string& what, std::size_t at) const { throw decode_error(what, at); }
};

/// Check the encoding bytes of a header (index encoding at byte 5, value encoding at byte 6).
template <class Fail>
void check_encodings(unsigned ie, unsigned ve, Fail&& fail) {
  if (ie > 3) fail("unknown index encoding " + std::to_string(ie), 5);
  if (ve < 1 || ve > 7) fail("unknown value encoding " + std::to_string(ve), 6);
}

/// Check the fields of a header against each other: levels for the value encoding, count <= dim,
/// count == dim when dense, a finite scale >= 0.
template <class Fail>
void check_header_fields(const wire_header& h, Fail&& fail) {
  const bool qsgd = h.values == wire_values::qsgd;
  if (qsgd ? (h.levels == 0 || h.levels > max_qsgd_levels) : h.levels != 0)
    fail("levels " + std::to_string(h.levels) + " invalid for value encoding " + to_string(h.values), 8);
  if (h.count > h.dim) fail("count " + std::to_string(h.count) + " exceeds dim " + std::to_string(h.dim), 16);
  if (h.indices == wire_indices::dense && h.count != h.dim)
    fail("dense message with count " + std::to_string(h.count) + " != dim " + std::to_string(h.dim), 16);
  if (!std::isfinite(h.scale) || h.scale < 0.0f) fail("scale is negative or not finite", 24);
}

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
  check_encodings(ie, ve, throw_decode_error{});
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
  check_header_fields(h, throw_decode_error{});
  const std::size_t expect = h.total_bytes();
  if (n != expect)
    throw decode_error(std::string(n < expect ? "truncated" : "oversized") + " buffer: " +
                           std::to_string(n) + " bytes, header announces " + std::to_string(expect),
                       std::min(n, expect));
  if (message_crc(buf) != get_u32(p + 28)) throw decode_error("checksum mismatch, buffer is corrupted", 28);
  return h;
}

}  // namespace detail
}  // namespace v0
}  // namespace sparsepush
