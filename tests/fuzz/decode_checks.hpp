// The checks of the decode targets (fuzz_decode: the bytes as they come; fuzz_decode_crc: the
// same bytes with a correct checksum, so that mutations reach the structure checks behind it).
// A buffer is either refused with a decode_error (and the output left alone) or decoded into a
// message that holds every invariant, decodes the same through the receiver's overload, refuses
// any other dim, and encodes back to the same bytes.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include <sparsepush/message.hpp>
#include <sparsepush/transport/endpoint.hpp>

#include "fuzz_common.hpp"

namespace sparsepush_fuzz {

/// A message no decode could produce (count > dim): decode must leave it as it was on failure.
inline sparsepush::message sentinel_message() {
  sparsepush::message m;
  m.dim = 3;
  m.count = 7;
  m.index_enc = sparsepush::index_encoding::raw_u32;
  m.indices = {9, 8, 7};
  m.payload = {std::byte{0xAB}};
  return m;
}

/// Decode one message; returns whether it decoded.
inline bool check_decode(std::span<const std::byte> buf) {
  using namespace sparsepush;
  message m = sentinel_message();
  bool ok = false;
  try {
    decode(buf, m);
    ok = true;
  } catch (const decode_error& e) {
    SPARSEPUSH_FUZZ_CHECK(e.offset() <= buf.size());
    SPARSEPUSH_FUZZ_CHECK(same_message(m, sentinel_message()));  // out replaced only on success
  }

  // The receiver's overload: the announced dim gives the same answer, any other dim is refused.
  if (buf.size() >= message_header_bytes) {
    const std::uint32_t announced = detail::get_u32(buf.data() + 12);
    message same = sentinel_message();
    bool same_ok = false;
    try {
      decode(buf, same, announced);
      same_ok = true;
    } catch (const decode_error&) {
    }
    SPARSEPUSH_FUZZ_CHECK(same_ok == ok);
    if (ok) SPARSEPUSH_FUZZ_CHECK(same_message(same, m));
    message other = sentinel_message();
    bool other_ok = false;
    try {
      decode(buf, other, announced ^ 1u);
      other_ok = true;
    } catch (const decode_error&) {
    }
    SPARSEPUSH_FUZZ_CHECK(!other_ok);
    SPARSEPUSH_FUZZ_CHECK(same_message(other, sentinel_message()));
  }
  if (!ok) return false;

  check_message_invariants(m);
  const std::vector<std::byte> again = check_round_trip(m);
  // The encoding is canonical except for over-long varints (LEB128 with redundant 0x80 groups),
  // which the decoder accepts and encode() never writes: only they make the sizes differ.
  if (again.size() == buf.size()) {
    SPARSEPUSH_FUZZ_CHECK(std::equal(again.begin(), again.end(), buf.begin()));
  } else {
    SPARSEPUSH_FUZZ_CHECK(m.index_enc == index_encoding::delta_varint && again.size() < buf.size());
  }

  // The dense vector it describes: zeros off the indices, finite values on them.
  if (m.dim <= (1u << 16)) {
    std::vector<double> dense(m.dim, -1.0);
    decompress(m, std::span<double>(dense));
    std::size_t nonzero = 0;
    for (const double v : dense) {
      SPARSEPUSH_FUZZ_CHECK(std::isfinite(v));
      nonzero += v != 0.0;
    }
    SPARSEPUSH_FUZZ_CHECK(nonzero <= m.count);
  }
  return true;
}

/// Decode one envelope frame (24-byte header, then a message); returns whether it decoded.
inline bool check_decode_envelope(std::span<const std::byte> frame) {
  using namespace sparsepush;
  message m = sentinel_message();
  envelope_header h;
  try {
    h = decode_envelope(frame, m);
  } catch (const decode_error& e) {
    SPARSEPUSH_FUZZ_CHECK(e.offset() <= frame.size());
    SPARSEPUSH_FUZZ_CHECK(same_message(m, sentinel_message()));
    return false;
  }
  SPARSEPUSH_FUZZ_CHECK(std::isfinite(h.share) && h.share >= 0.0 && h.share <= 1.0);
  SPARSEPUSH_FUZZ_CHECK(std::isfinite(h.u) && h.u > 0.0);
  check_message_invariants(m);
  std::vector<std::byte> again;
  encode_envelope(h, m, again);
  SPARSEPUSH_FUZZ_CHECK(again.size() == envelope_header_bytes + m.wire_bytes());
  message back;
  const envelope_header h2 = decode_envelope(again, back, m.dim);  // the library's own bytes
  SPARSEPUSH_FUZZ_CHECK(h2.from == h.from && h2.round == h.round);
  SPARSEPUSH_FUZZ_CHECK(std::bit_cast<std::uint64_t>(h2.share) == std::bit_cast<std::uint64_t>(h.share));
  SPARSEPUSH_FUZZ_CHECK(std::bit_cast<std::uint64_t>(h2.u) == std::bit_cast<std::uint64_t>(h.u));
  SPARSEPUSH_FUZZ_CHECK(same_message(back, m));
  return true;
}

}  // namespace sparsepush_fuzz
