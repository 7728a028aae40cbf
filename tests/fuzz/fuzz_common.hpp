// What the fuzz targets share: a check that aborts (so that libFuzzer, or ctest through the
// replay driver, reports the input), exact message equality, and the invariants every message
// the library hands out must hold, whether it came from a compressor or from decode().
#pragma once

#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <span>
#include <vector>

#include <sparsepush/message.hpp>

#define SPARSEPUSH_FUZZ_CHECK(cond)                                             \
  do {                                                                          \
    if (!(cond)) ::sparsepush_fuzz::fail(#cond, __FILE__, __LINE__);            \
  } while (0)

namespace sparsepush_fuzz {

[[noreturn]] inline void fail(const char* what, const char* file, int line) {
  std::fprintf(stderr, "fuzz check failed: %s (%s:%d)\n", what, file, line);
  std::fflush(stderr);
  std::abort();
}

/// Field by field, the scale by its bits and the payload byte for byte.
inline bool same_message(const sparsepush::message& a, const sparsepush::message& b) {
  return a.dim == b.dim && a.count == b.count && a.index_enc == b.index_enc &&
         a.value_enc == b.value_enc && a.levels == b.levels &&
         std::bit_cast<std::uint32_t>(a.scale) == std::bit_cast<std::uint32_t>(b.scale) &&
         a.indices == b.indices && a.payload == b.payload &&
         (a.index_enc != sparsepush::index_encoding::seeded || a.index_key == b.index_key);
}

/// What a message promises its readers: count <= dim, indices ascending below dim (none when
/// dense, count of them otherwise), a payload of exactly the encoding's size, and values that
/// dequantize (in double) to finite numbers.
inline void check_message_invariants(const sparsepush::message& m) {
  using namespace sparsepush;
  SPARSEPUSH_FUZZ_CHECK(m.count <= m.dim);
  if (m.dense()) {
    SPARSEPUSH_FUZZ_CHECK(m.count == m.dim);
    SPARSEPUSH_FUZZ_CHECK(m.indices.empty());
  } else {
    SPARSEPUSH_FUZZ_CHECK(m.indices.size() == m.count);
    for (std::size_t j = 0; j < m.indices.size(); ++j) {
      SPARSEPUSH_FUZZ_CHECK(m.indices[j] < m.dim);
      SPARSEPUSH_FUZZ_CHECK(j == 0 || m.indices[j - 1] < m.indices[j]);
    }
  }
  SPARSEPUSH_FUZZ_CHECK(m.payload.size() == payload_bytes(m.value_enc, m.levels, m.count));
  SPARSEPUSH_FUZZ_CHECK(m.value_enc == value_encoding::qsgd ? (m.levels >= 1 && m.levels <= max_qsgd_levels)
                                                         : m.levels == 0);
  SPARSEPUSH_FUZZ_CHECK(std::isfinite(m.scale) && m.scale >= 0.0f);
  for (std::size_t j = 0; j < m.count; ++j) SPARSEPUSH_FUZZ_CHECK(std::isfinite(m.value_at<double>(j)));
}

/// encode(m) has wire_bytes() bytes and decodes (with the receiver's dim) to m again.
inline std::vector<std::byte> check_round_trip(const sparsepush::message& m) {
  std::vector<std::byte> bytes = sparsepush::encode(m);
  SPARSEPUSH_FUZZ_CHECK(bytes.size() == m.wire_bytes());
  sparsepush::message back;
  sparsepush::decode(bytes, back, m.dim);  // must not throw: the library wrote these bytes
  SPARSEPUSH_FUZZ_CHECK(same_message(back, m));
  return bytes;
}

}  // namespace sparsepush_fuzz
