// sparsepush/wire/index_codecs.hpp: the index section of an encoded message, ascending
// coordinates below dim: none (dense) | count x u32 | the first index, then each (gap - 1), as
// LEB128 varints | seeded: the key of random-K's index stream, seed u64, node u32, round u32
// (16 bytes), from which the receiver draws the count indices of [0, dim) again (Philox).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "../config.hpp"
#include "../detail/bytes.hpp"
#include "../detail/random_indices.hpp"
#include "format.hpp"

namespace sparsepush {
inline namespace v0 {
namespace detail {

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
inline std::size_t index_section_bytes(index_encoding e, std::span<const std::uint32_t> idx) noexcept {
  switch (e) {
    case index_encoding::raw_u32: return 4 * idx.size();
    case index_encoding::delta_varint: return delta_varint_bytes(idx);
    case index_encoding::dense: return 0;
    case index_encoding::seeded: return seeded_index_bytes;
    case index_encoding::automatic: break;  // never travels: encode() refuses it
  }
  return 0;
}

/// Check index i at position j of an index list, after prev (the index at j - 1, when j > 0): below
/// dim and strictly above prev. `at` is where it is (for fail).
template <class Fail>
void check_index(std::uint64_t i, std::uint32_t j, std::uint64_t prev, std::uint32_t dim, std::size_t at, Fail&& fail) {
  if (i >= dim)
    fail("index " + std::to_string(i) + " at position " + std::to_string(j) + " is out of range (not below dim " +
             std::to_string(dim) + ")",
         at);
  if (j > 0 && i <= prev)
    fail("index " + std::to_string(i) + " at position " + std::to_string(j) +
             " is not ascending: it " +
             (i == prev ? "repeats the index at position " + std::to_string(j - 1)
                        : "is below the index at position " + std::to_string(j - 1) + " (" + std::to_string(prev) + ")"),
         at);
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
    check_index(i, j, j > 0 ? out[j - 1] : 0, h.dim, off + 4 * j, throw_decode_error{});
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
    check_index(i, j, prev, h.dim, off + at, throw_decode_error{});  // ascends by construction
    out[j] = static_cast<std::uint32_t>(i);
    prev = i;
  }
  if (at != h.index_bytes)
    throw decode_error("index section has " + std::to_string(h.index_bytes - at) + " trailing bytes",
                       off + at);
}

/// Write the index section of idx in encoding e at q (key: a seeded section's); returns its end.
inline std::byte* write_indices(index_encoding e, std::span<const std::uint32_t> idx, std::byte* q,
                                const index_stream_key& key = {}) noexcept {
  switch (e) {
    case index_encoding::raw_u32: return write_raw_u32(idx, q);
    case index_encoding::delta_varint: return write_delta_varint(idx, q);
    case index_encoding::dense: return q;
    case index_encoding::seeded:
      put_u32(q, static_cast<std::uint32_t>(key.seed));
      put_u32(q + 4, static_cast<std::uint32_t>(key.seed >> 32));
      put_u32(q + 8, key.node);
      put_u32(q + 12, key.round);
      return q + seeded_index_bytes;
    case index_encoding::automatic: break;  // never travels: encode() refuses it
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
    case index_encoding::seeded: read_seeded(h, q, out); return;
    case index_encoding::dense:
      if (h.index_bytes != 0) throw decode_error("dense message with an index section", 20);
      out.clear();
      return;
    case index_encoding::raw_u32: return read_raw_u32(h, q, message_header_bytes, out);
    case index_encoding::delta_varint: return read_delta_varint(h, q, message_header_bytes, out);
    case index_encoding::automatic: break;  // read_header refused it
  }
}

}  // namespace detail
}  // namespace v0
}  // namespace sparsepush
