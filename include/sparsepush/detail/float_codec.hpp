// sparsepush/detail/float_codec.hpp: IEEE half (fp16) and bfloat16 conversions, round to nearest
// even, saturating at the largest finite value (a compressed model must never carry Inf; the
// clipped part stays in the error-feedback residual). Inputs are finite (validated upstream).
#pragma once

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>

namespace sparsepush {
inline namespace v0 {
namespace detail {

inline constexpr std::uint16_t half_max_bits = 0x7BFF;  // 65504
inline constexpr std::uint16_t bf16_max_bits = 0x7F7F;  // 3.3895e38

inline std::uint16_t float_to_half(float f) noexcept {
  std::uint32_t x = std::bit_cast<std::uint32_t>(f);
  const auto sign = static_cast<std::uint16_t>((x >> 16) & 0x8000u);
  x &= 0x7FFFFFFFu;
  if (x >= 0x477FF000u) return sign | half_max_bits;  // |f| >= 65520 rounds to Inf: saturate
  if (x < 0x38800000u) {                              // below 2^-14: half subnormal or zero
    const float scaled = std::bit_cast<float>(x) * 16777216.0f;  // exact: times 2^24
    return sign | static_cast<std::uint16_t>(std::nearbyint(scaled));  // 1024 is 2^-14: ok
  }
  const std::uint32_t mant = x & 0x7FFFFFu;
  std::uint32_t h = (((x >> 23) - 112u) << 10) | (mant >> 13);
  const std::uint32_t rest = mant & 0x1FFFu;
  if (rest > 0x1000u || (rest == 0x1000u && (h & 1u))) ++h;  // carry may bump the exponent
  if (h > half_max_bits) h = half_max_bits;
  return sign | static_cast<std::uint16_t>(h);
}

inline float half_to_float(std::uint16_t h) noexcept {
  const std::uint32_t sign = std::uint32_t{h & 0x8000u} << 16;
  const std::uint32_t exp = (h >> 10) & 0x1Fu;
  const std::uint32_t mant = h & 0x3FFu;
  if (exp == 0) {
    const float mag = static_cast<float>(mant) * (1.0f / 16777216.0f);  // mant * 2^-24
    return std::bit_cast<float>(std::bit_cast<std::uint32_t>(mag) | sign);
  }
  if (exp == 31) return std::bit_cast<float>(sign | 0x7F800000u | (mant << 13));
  return std::bit_cast<float>(sign | ((exp + 112u) << 23) | (mant << 13));
}

inline std::uint16_t float_to_bf16(float f) noexcept {
  const std::uint32_t x = std::bit_cast<std::uint32_t>(f);
  const std::uint32_t sign = x & 0x80000000u;
  const std::uint32_t mag = x & 0x7FFFFFFFu;
  std::uint32_t r = (mag + 0x7FFFu + ((mag >> 16) & 1u)) >> 16;
  if (r > bf16_max_bits) r = bf16_max_bits;
  return static_cast<std::uint16_t>((sign >> 16) | r);
}

inline float bf16_to_float(std::uint16_t b) noexcept {
  return std::bit_cast<float>(std::uint32_t{b} << 16);
}

/// float(v) for a finite v of type T, saturating at +-FLT_MAX instead of overflowing to Inf.
template <class T>
inline float to_float_saturating(T v) noexcept {
  if constexpr (sizeof(T) > sizeof(float)) {
    constexpr T lim = static_cast<T>(std::numeric_limits<float>::max());
    if (v > lim) return std::numeric_limits<float>::max();
    if (v < -lim) return -std::numeric_limits<float>::max();
  }
  return static_cast<float>(v);
}

}  // namespace detail
}  // namespace v0
}  // namespace sparsepush
