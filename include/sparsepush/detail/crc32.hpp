// sparsepush/detail/crc32.hpp: CRC-32 (IEEE 802.3, reflected polynomial 0xEDB88320), the checksum
// every encoded message carries so that a corrupted buffer is rejected, not decoded. Slicing-by-4
// tables built at compile time; tests compare it with zlib's crc32.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>

#include "bytes.hpp"

namespace sparsepush {
inline namespace v0 {
namespace detail {

inline constexpr auto crc32_tables = [] {
  std::array<std::array<std::uint32_t, 256>, 4> t{};
  for (std::uint32_t i = 0; i < 256; ++i) {
    std::uint32_t c = i;
    for (int b = 0; b < 8; ++b) c = (c & 1u) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
    t[0][i] = c;
  }
  for (std::uint32_t i = 0; i < 256; ++i)
    for (int s = 1; s < 4; ++s) t[s][i] = (t[s - 1][i] >> 8) ^ t[0][t[s - 1][i] & 0xFFu];
  return t;
}();

/// Continue a CRC-32 over bytes (start with crc = 0).
inline std::uint32_t crc32_update(std::uint32_t crc, std::span<const std::byte> bytes) noexcept {
  const auto& t = crc32_tables;
  std::uint32_t c = ~crc;
  std::size_t i = 0;
  const std::size_t n = bytes.size();
  for (; i + 4 <= n; i += 4) {
    c ^= load_le<std::uint32_t>(bytes.data() + i);
    c = t[3][c & 0xFFu] ^ t[2][(c >> 8) & 0xFFu] ^ t[1][(c >> 16) & 0xFFu] ^ t[0][c >> 24];
  }
  for (; i < n; ++i) c = t[0][(c ^ std::to_integer<std::uint32_t>(bytes[i])) & 0xFFu] ^ (c >> 8);
  return ~c;
}

}  // namespace detail
}  // namespace v0
}  // namespace sparsepush
