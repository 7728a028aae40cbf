// sparsepush/compress/values.hpp: value encodings that compose with any selector ("top-1% of
// int8"). value_codec is the setting a compressor holds; given the selected values v_j (j < count)
// the wire codec's writer (wire/value_codecs.hpp) fills the message payload, and the dequantized
// q_j = message::value_at(j) is what error feedback subtracts. Definitions:
//   fp16/bf16/fp32: round to nearest even, saturating at the largest finite value;
//   int8: s = max|v| / 127 (as fp32), code = round(v / s) in [-127, 127], q = s * code (saturating);
//   sign: s = (sum |v|) / count (as fp32, ||v||_1/d for a dense message), q = s * sign(v);
//   qsgd: s levels, nrm = ||v||_2 (as fp32), l = floor(|v| (s / nrm) + xi), xi ~ U[0,1) from the
//         counter-based stream at the value's coordinate (qsgd_stream: philox7 or philox10),
//         q = nrm * sign(v) * l / s (unbiased up to the draw's resolution, < 2^-16 of a step).
#pragma once

#include <cstdint>
#include <string>

#include "../config.hpp"
#include "../message.hpp"
#include "../wire/value_codecs.hpp"

namespace sparsepush {
inline namespace v0 {

namespace detail {

/// The wire encoding of a tensor's own element type.
template <class T>
inline constexpr value_encoding native_encoding = sizeof(T) == 8 ? value_encoding::f64 : value_encoding::f32;

}  // namespace detail

/// A value encoding with its parameter (QSGD levels).
struct value_codec {
  /// How values travel; native is the tensor's own element type (f32 or f64).
  value_encoding encoding = value_encoding::native;
  std::uint16_t levels = 0;  ///< QSGD s, 1 .. 32767; ignored otherwise
  qsgd_stream stream = qsgd_stream::philox7;  ///< QSGD's random stream; ignored otherwise

  /// Equal when encoding, levels and stream are.
  friend bool operator==(const value_codec&, const value_codec&) = default;

  /// Throws config_error for an unknown encoding or QSGD stream, or QSGD levels out of range.
  void validate() const {
    if (encoding != value_encoding::native && !is_wire(encoding))
      throw config_error("unknown value encoding " +
                         std::to_string(static_cast<unsigned>(encoding)));
    if (stream != qsgd_stream::philox7 && stream != qsgd_stream::philox10)
      throw config_error("unknown qsgd stream " + std::to_string(static_cast<unsigned>(stream)) +
                         " (known: philox7, philox10)");
    if (encoding == value_encoding::qsgd && (levels < 1 || levels > max_qsgd_levels))
      throw config_error("qsgd needs levels in [1, " + std::to_string(max_qsgd_levels) +
                         "], got " + std::to_string(levels));
  }

  /// The wire encoding of values of type T (native resolved to T's own); valid codecs only.
  template <tensor_element T>
  value_encoding wire_encoding() const noexcept {
    return is_wire(encoding) ? encoding : detail::native_encoding<T>;
  }
};

namespace detail {

/// Write the payload of m for the m.count selected values v_at(j), through the wire codec.
/// m.indices (or dense) must already describe the coordinates. Inputs are finite.
template <tensor_element T, class Get>
void encode_values(const value_codec& c, Get&& v_at, message& m, const context& ctx) {
  m.value_enc = c.wire_encoding<T>();
  m.levels = m.value_enc == value_encoding::qsgd ? c.levels : 0;
  m.payload.assign(payload_bytes(m.value_enc, m.levels, m.count), std::byte{0});
  m.scale = write_values<T>(m.value_enc, m.levels, c.stream, m.count, v_at,
                            [&m](std::size_t j) { return m.index_of(j); }, ctx, m.payload.data());
}

}  // namespace detail
}  // namespace v0
}  // namespace sparsepush
