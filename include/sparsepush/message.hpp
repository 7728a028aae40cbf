// sparsepush/message.hpp: a compressed message q = C(v). A message carries `count` values of a
// length-`dim` vector: all of them (dense) or those at ascending `indices`. Values are held
// exactly as they travel; every reader dequantizes through value_at() (the codec's reader), so
// the sender's error feedback and the receiver see the same q, bit for bit. encode() and decode()
// compose the wire codec (wire/: header, indices, value readers) into one buffer.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <vector>

#include "config.hpp"
#include "tensor.hpp"
#include "wire/format.hpp"
#include "wire/index_codecs.hpp"
#include "wire/value_readers.hpp"

namespace sparsepush {
inline namespace v0 {

/// One compressed vector, as it travels.
struct message {
  std::uint32_t dim = 0;    ///< length d of the vector this message describes
  std::uint32_t count = 0;  ///< number of values carried (== dim when dense)
  index_encoding index_enc = index_encoding::dense;  ///< a wire encoding: never automatic
  value_encoding value_enc = value_encoding::f32;    ///< a wire encoding: never native
  std::uint16_t levels = 0;              ///< QSGD s; 0 for other encodings
  float scale = 0.0f;                    ///< int8 scale, sign magnitude or QSGD norm
  std::vector<std::uint32_t> indices;    ///< ascending, size count; empty when dense
  std::vector<std::byte> payload;        ///< values, exactly as on the wire
  index_stream_key index_key{};          ///< seeded indices: the stream they were drawn from

  /// True when the message carries every element (no index section).
  bool dense() const noexcept { return index_enc == index_encoding::dense; }

  /// Bytes of the index section as encoded.
  std::size_t index_bytes() const noexcept { return detail::index_section_bytes(index_enc, indices); }

  /// Exact size in bytes of encode(*this).
  std::size_t wire_bytes() const noexcept {
    return message_header_bytes + index_bytes() + payload.size();
  }

  /// Coordinate of the j-th value.
  std::uint32_t index_of(std::size_t j) const noexcept {
    return dense() ? static_cast<std::uint32_t>(j) : indices[j];
  }

  /// The value section as the codec reads it.
  detail::value_view value_section() const noexcept { return {value_enc, levels, scale, payload.data()}; }

  /// The j-th value, dequantized to T. The single definition of q used by senders and receivers.
  template <tensor_element T>
  T value_at(std::size_t j) const noexcept {
    return detail::read_value<T>(value_section(), j);
  }

  /// The `bits`-wide field at bit offset `bit` of the payload (LSB first).
  std::uint32_t read_bits(std::size_t bit, unsigned bits) const noexcept {  // bits <= 25
    return detail::read_bits(payload.data(), bit, bits);
  }
};

/// Call f(index, value) for every value of m, in ascending index order, values as T.
template <tensor_element T, class F>
void for_each_value(const message& m, F&& f) {
  const std::size_t n = m.count;
  const std::byte* p = m.payload.data();
  switch (m.value_enc) {  // hoist the common encodings out of the loop
    case value_encoding::f32:
      for (std::size_t j = 0; j < n; ++j) f(m.index_of(j), static_cast<T>(detail::read_f32(p, j)));
      return;
    case value_encoding::f64:
      for (std::size_t j = 0; j < n; ++j) f(m.index_of(j), static_cast<T>(detail::read_f64(p, j)));
      return;
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

/// Append the wire encoding of m to out. An encoding that does not travel (the settings native
/// and automatic, or a value naming no encoding) throws message_error before out is touched; the
/// rest of m is trusted (validate() checks it).
inline void encode(const message& m, std::vector<std::byte>& out) {
  detail::check_encodings(static_cast<unsigned>(m.index_enc), static_cast<unsigned>(m.value_enc),
                          [](const std::string& what, std::size_t) { throw message_error("encode: " + what); });
  const detail::wire_header h{m.index_enc, m.value_enc, m.levels, m.dim, m.count,
                              static_cast<std::uint32_t>(m.index_bytes()), m.scale};
  const std::size_t start = out.size();
  const std::size_t total = message_header_bytes + h.index_bytes + m.payload.size();
  out.resize(start + total);
  std::byte* p = out.data() + start;
  detail::write_header(h, p);
  std::byte* q = detail::write_indices(m.index_enc, m.indices, p + message_header_bytes, m.index_key);
  if (!m.payload.empty()) std::memcpy(q, m.payload.data(), m.payload.size());
  detail::seal({p, total});
}

/// The wire encoding of m; its size is m.wire_bytes().
inline std::vector<std::byte> encode(const message& m) {
  std::vector<std::byte> out;
  out.reserve(m.wire_bytes());
  encode(m, out);
  return out;
}

namespace detail {
/// Parse and validate buf into m, reusing m's buffers; m is garbage when this throws.
inline void decode_into(std::span<const std::byte> buf, message& m) {
  const detail::wire_header h = detail::read_header(buf);  // sizes and checksum
  m.index_enc = h.indices;
  m.value_enc = h.values;
  m.levels = h.levels;
  m.dim = h.dim;
  m.count = h.count;
  m.scale = h.scale;
  const std::byte* q = buf.data() + message_header_bytes;
  if (h.indices == index_encoding::seeded) m.index_key = detail::read_seeded(h, q, m.indices);
  else detail::read_indices(h, q, m.indices);
  m.payload.assign(q + h.index_bytes, q + h.index_bytes + h.value_bytes());
  detail::check_values(h, m.payload.data(), message_header_bytes + h.index_bytes);
}

inline void check_announced_dim(std::span<const std::byte> buf, std::uint32_t expected_dim) {
  if (buf.size() >= message_header_bytes && buf[0] == std::byte{'S'} && buf[1] == std::byte{'P'} &&
      buf[2] == std::byte{'S'} && buf[3] == std::byte{'H'}) {
    const std::uint32_t dim = detail::get_u32(buf.data() + 12);
    if (dim != expected_dim)
      throw decode_error("message announces dim " + std::to_string(dim) + ", the receiver's model has " +
                             std::to_string(expected_dim),
                         12);
  }
}
}  // namespace detail

namespace detail {
/// Check m as decode() checks the buffer encode(m) would be, the CRC aside, for a vector of `dim`
/// elements: encodings, levels, count <= dim, scale, an index list of count ascending indices
/// below dim (none when dense; seeded: the draw of their key), a payload of exactly the bytes the
/// encoding needs and values decode accepts. A failed check calls fail(what, offset in encode(m)).
template <class Fail>
void check_message(const message& m, std::size_t dim, Fail&& fail) {
  if (m.dim != dim)
    fail("message has dim " + std::to_string(m.dim) + ", the vector has " + std::to_string(dim) + " elements", 12);
  check_encodings(static_cast<unsigned>(m.index_enc), static_cast<unsigned>(m.value_enc), fail);
  const wire_header h{m.index_enc, m.value_enc, m.levels, m.dim, m.count, 0, m.scale};
  check_header_fields(h, fail);
  if (m.dense() ? !m.indices.empty() : m.indices.size() != m.count)
    fail(std::to_string(m.indices.size()) + " indices for a " + (m.dense() ? "dense" : "sparse") +
             " message of count " + std::to_string(m.count),
         20);
  if (m.payload.size() != h.value_bytes())
    fail("payload of " + std::to_string(m.payload.size()) + " bytes where " + std::to_string(m.count) + " " +
             to_string(m.value_enc) + " values need " + std::to_string(h.value_bytes()),
         message_header_bytes);
  if (m.index_enc == index_encoding::seeded) {
    std::vector<std::uint32_t> drawn;
    random_indices_compact(m.dim, m.count, m.index_key.seed, m.index_key.node, m.index_key.round, drawn);
    if (drawn != m.indices) fail("seeded indices are not the draw of their key (seed, node, round)", message_header_bytes);
  } else {
    for (std::uint32_t j = 0; j < m.indices.size(); ++j)
      check_index(m.indices[j], j, j > 0 ? m.indices[j - 1] : 0, m.dim, message_header_bytes + 4 * std::size_t{j}, fail);
  }
  check_values(h, m.payload.data(), message_header_bytes + m.index_bytes(), fail);
}
}  // namespace detail

/// Check m as decode() would check its encoding, without the CRC, for a vector of `dim`
/// elements: count <= dim, sizes, ascending unique indices below dim, the payload length of its
/// value encoding, levels, scale and values. Throws message_error saying what is wrong (field,
/// index position, sizes). Every message of a user's compressor passes here before it is read.
inline void validate(const message& m, std::size_t dim) {
  detail::check_message(m, dim, [](const std::string& what, std::size_t) { throw message_error("invalid message: " + what); });
}

/// Parse and fully validate one encoded message. Any truncated, oversized, corrupted or
/// inconsistent buffer throws decode_error; `out` is only replaced on success.
inline void decode(std::span<const std::byte> buf, message& out) {
  message m;
  detail::decode_into(buf, m);
  out = std::move(m);
}

/// decode() that allocates nothing once its buffers have grown: the message is parsed into
/// `scratch` and, on success, swapped with `out` (whose buffers become the next scratch). On a
/// decode_error `out` is unchanged and `scratch` holds garbage.
inline void decode(std::span<const std::byte> buf, message& out, std::uint32_t expected_dim, message& scratch) {
  detail::check_announced_dim(buf, expected_dim);
  detail::decode_into(buf, scratch);
  std::swap(out, scratch);
}

/// decode() for a receiver that knows the dimension (every gossip receiver does): a message
/// announcing another dim is a decode_error before anything is allocated for it.
inline void decode(std::span<const std::byte> buf, message& out, std::uint32_t expected_dim) {
  detail::check_announced_dim(buf, expected_dim);
  decode(buf, out);
}

/// Parse and validate one encoded message.
inline message decode(std::span<const std::byte> buf) {
  message m;
  decode(buf, m);
  return m;
}

}  // namespace v0
}  // namespace sparsepush
