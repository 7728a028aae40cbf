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
#include <span>
#include <string>

#include "../config.hpp"
#include "../detail/bytes.hpp"
#include "../detail/crc32.hpp"

namespace sparsepush {
inline namespace v0 {

// --- what travels, and the settings that ask for it ------------------------------------------

/// How values travel (byte 6 of the header), or how a compressor is asked to encode them. Every
/// value but `native` is a wire encoding; `native` (the tensor's own type, f32 or f64) is a
/// compressor setting only and never travels: encode(), decode() and validate() refuse it.
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

/// How indices travel (byte 5 of the header), or how a compressor is asked to encode them.
/// `seeded`: random-K's indices as the key of their stream (16 bytes whatever the count; a
/// setting of random-K's only). `automatic` (the smaller of raw_u32 and delta_varint for each
/// message) is a compressor setting only and never travels: encode(), decode() and validate()
/// refuse it.
enum class index_encoding : std::uint8_t { dense = 0, raw_u32 = 1, delta_varint = 2, seeded = 3, automatic = 255 };

using wire_values = value_encoding;   ///< 0.1 name
using wire_indices = index_encoding;  ///< 0.1 name

/// Whether e travels on the wire (every value encoding but native).
constexpr bool is_wire(value_encoding e) noexcept {
  const auto b = static_cast<std::uint8_t>(e);
  return b >= 1 && b <= 7;
}
/// Whether e travels on the wire (every index encoding but automatic).
constexpr bool is_wire(index_encoding e) noexcept { return static_cast<std::uint8_t>(e) <= 3; }

/// The key of random-K's index stream: the (seed, node, round) the compressor drew with.
struct index_stream_key {
  std::uint64_t seed = 0;  ///< the run's seed
  std::uint32_t node = 0;  ///< the sending node
  std::uint32_t round = 0;  ///< the round the indices were drawn in
  /// Equal when seed, node and round are.
  friend bool operator==(const index_stream_key&, const index_stream_key&) = default;
};

/// Bytes of a seeded index section.
inline constexpr std::size_t seeded_index_bytes = 16;

/// Bytes of an encoded message's header, before the index and value sections.
inline constexpr std::size_t message_header_bytes = 32;
/// The wire format's version, byte 4 of every header; a decoder refuses any other.
inline constexpr std::uint8_t message_version = 1;
/// The most QSGD levels s a message carries.
inline constexpr std::uint16_t max_qsgd_levels = 32767;

/// The encoding's name: "native", "fp64", "fp32", "fp16", "bf16", "int8", "sign", "qsgd" ("?" for
/// a value outside the enumeration).
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

/// The encoding's name: "dense", "u32", "varint", "seeded", "auto" ("?" for a value outside the
/// enumeration).
inline const char* to_string(index_encoding e) noexcept {
  switch (e) {
    case index_encoding::dense: return "dense";
    case index_encoding::raw_u32: return "u32";
    case index_encoding::delta_varint: return "varint";
    case index_encoding::seeded: return "seeded";
    case index_encoding::automatic: return "auto";
  }
  return "?";
}

namespace detail {

/// Bits of one QSGD code: a sign bit plus enough bits for a level in [0, levels].
constexpr unsigned qsgd_code_bits(std::uint16_t levels) noexcept {
  return 1u + static_cast<unsigned>(std::bit_width(static_cast<unsigned>(levels)));
}

}  // namespace detail

/// Bytes of the value section for `count` values in encoding e; native counts as fp32.
constexpr std::size_t payload_bytes(value_encoding e, std::uint16_t levels, std::size_t count) noexcept {
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

namespace detail {

static_assert(std::endian::native == std::endian::little,
              "sparsepush: the value payload is copied as little-endian; big-endian hosts are not "
              "supported yet");

// --- header -----------------------------------------------------------------------------------

/// The fixed 32-byte header, decoded.
struct wire_header {
  index_encoding indices = index_encoding::dense;
  value_encoding values = value_encoding::f32;
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

/// Check the encoding bytes of a header (index encoding at byte 5, value encoding at byte 6): wire
/// encodings only, never the settings automatic (255) and native (0).
template <class Fail>
void check_encodings(unsigned ie, unsigned ve, Fail&& fail) {
  if (ie == static_cast<unsigned>(index_encoding::automatic))
    fail("index encoding 255 (auto) is a compressor setting, not a wire encoding", 5);
  if (ie > 3) fail("unknown index encoding " + std::to_string(ie), 5);
  if (ve == static_cast<unsigned>(value_encoding::native))
    fail("value encoding 0 (native) is a compressor setting, not a wire encoding", 6);
  if (ve > 7) fail("unknown value encoding " + std::to_string(ve), 6);
}

/// Check the fields of a header against each other: levels for the value encoding, count <= dim,
/// count == dim when dense, a finite scale >= 0.
template <class Fail>
void check_header_fields(const wire_header& h, Fail&& fail) {
  const bool qsgd = h.values == value_encoding::qsgd;
  if (qsgd ? (h.levels == 0 || h.levels > max_qsgd_levels) : h.levels != 0)
    fail("levels " + std::to_string(h.levels) + " invalid for value encoding " + to_string(h.values), 8);
  if (h.count > h.dim) fail("count " + std::to_string(h.count) + " exceeds dim " + std::to_string(h.dim), 16);
  if (h.indices == index_encoding::dense && h.count != h.dim)
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
  h.indices = static_cast<index_encoding>(ie);
  h.values = static_cast<value_encoding>(ve);
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
