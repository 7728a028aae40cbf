// sparsepush/detail/bytes.hpp: the byte order of everything the library writes (messages,
// envelopes, checkpoints): unsigned integers little-endian, byte k = (v >> 8k) & 0xFF, whatever
// the host; and FNV-1a 64 (h = 14695981039346656037; for each byte b: h = (h ^ b) * 1099511628211),
// the cheap fingerprint of settings strings and byte buffers.
#pragma once

#include <bit>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

namespace sparsepush {
inline namespace v0 {
namespace detail {

/// Store v at p[0, sizeof(U)), least significant byte first.
template <std::unsigned_integral U>
constexpr void store_le(std::byte* p, U v) noexcept {
  for (std::size_t b = 0; b < sizeof(U); ++b) p[b] = static_cast<std::byte>((v >> (8 * b)) & 0xFFu);
}

/// The U stored at p[0, sizeof(U)), least significant byte first.
template <std::unsigned_integral U>
constexpr U load_le(const std::byte* p) noexcept {
  U v = 0;
  for (std::size_t b = 0; b < sizeof(U); ++b) v |= static_cast<U>(std::to_integer<U>(p[b]) << (8 * b));
  return v;
}

inline void put_u16(std::byte* p, std::uint16_t v) noexcept { store_le(p, v); }
inline void put_u32(std::byte* p, std::uint32_t v) noexcept { store_le(p, v); }
inline void put_u64(std::byte* p, std::uint64_t v) noexcept { store_le(p, v); }
inline std::uint16_t get_u16(const std::byte* p) noexcept { return load_le<std::uint16_t>(p); }
inline std::uint32_t get_u32(const std::byte* p) noexcept { return load_le<std::uint32_t>(p); }
inline std::uint64_t get_u64(const std::byte* p) noexcept { return load_le<std::uint64_t>(p); }
/// A double as the little-endian bytes of its bits (envelope shares and weights, checkpoints).
inline void put_f64(std::byte* p, double v) noexcept { store_le(p, std::bit_cast<std::uint64_t>(v)); }
inline double get_f64(const std::byte* p) noexcept { return std::bit_cast<double>(load_le<std::uint64_t>(p)); }

inline constexpr std::uint64_t fnv1a_offset = 14695981039346656037ull;
inline constexpr std::uint64_t fnv1a_prime = 1099511628211ull;

/// FNV-1a 64 of bytes, continuing from h (fnv1a_offset to start).
constexpr std::uint64_t fnv1a(std::span<const std::byte> bytes, std::uint64_t h = fnv1a_offset) noexcept {
  for (const std::byte b : bytes) {
    h ^= std::to_integer<std::uint64_t>(b);
    h *= fnv1a_prime;
  }
  return h;
}

/// FNV-1a 64 of the characters of s (as unsigned bytes), continuing from h.
constexpr std::uint64_t fnv1a(std::string_view s, std::uint64_t h = fnv1a_offset) noexcept {
  for (const char c : s) {
    h ^= static_cast<unsigned char>(c);
    h *= fnv1a_prime;
  }
  return h;
}

}  // namespace detail
}  // namespace v0
}  // namespace sparsepush
