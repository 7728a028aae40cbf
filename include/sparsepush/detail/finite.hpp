// sparsepush/detail/finite.hpp: branch-free finiteness scans that compilers vectorise at the
// baseline instruction set. A float is NaN or Inf exactly when its exponent bits are all ones,
// i.e. when adding one unit of the lowest exponent bit to them carries into the sign bit; the
// scans OR those carries together (integer AND, ADD and OR only), so one pass answers "all
// finite?" at memory speed, and callers locate the first bad value only on failure.
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>

namespace sparsepush {
inline namespace v0 {
namespace detail {

template <class T>
struct finite_bits;
template <>
struct finite_bits<float> {
  using U = std::uint32_t;
  static constexpr U exp = 0x7F800000u, low = 0x00800000u, sign = 0x80000000u;
};
template <>
struct finite_bits<double> {
  using U = std::uint64_t;
  static constexpr U exp = 0x7FF0000000000000ull, low = 0x0010000000000000ull, sign = 0x8000000000000000ull;
};

/// Sign bit set when v is NaN or Inf (OR these together, test the sign bit once).
template <class T>
inline typename finite_bits<T>::U non_finite_flag(T v) noexcept {
  using B = finite_bits<T>;
  return (std::bit_cast<typename B::U>(v) & B::exp) + B::low;
}

/// Whether every flag OR-ed into acc came from a finite value.
template <class T>
inline bool flags_finite(typename finite_bits<T>::U acc) noexcept {
  return (acc & finite_bits<T>::sign) == 0;
}

/// Whether v[0..n) holds no NaN or Inf.
template <class T>
bool all_finite(const T* v, std::size_t n) noexcept {
  typename finite_bits<T>::U acc = 0;
  for (std::size_t i = 0; i < n; ++i) acc |= non_finite_flag(v[i]);
  return flags_finite<T>(acc);
}

}  // namespace detail
}  // namespace v0
}  // namespace sparsepush
