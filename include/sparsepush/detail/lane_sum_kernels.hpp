// sparsepush/detail/lane_sum_kernels.hpp: lane_sum, sum_j t_j in double as 32 interleaved partial
// sums (lane j mod 32, in order of j) combined by the fixed tree s[L] += s[L + w], w = 16, 8, 4, 2, 1
// (||v||_1 of the sign encoding, ||v||_2^2 of QSGD), and the sign bits (bit j set when v_j < 0):
// scalar definitions and their AVX-512 / AVX2 twins for float vectors, bit for bit the same.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "simd.hpp"

namespace sparsepush {
inline namespace v0 {
namespace detail {

inline constexpr std::size_t sum_lanes = 32;

/// The fixed combination of the 32 partial sums.
inline double combine_lanes(double* s) noexcept {
  for (std::size_t w = sum_lanes / 2; w >= 1; w /= 2)
    for (std::size_t l = 0; l < w; ++l) s[l] += s[l + w];
  return s[0];
}

/// Scalar lane_sum over j in [from, n) of term(j), into the partial sums s (see the header).
template <class F>
inline void lane_sum_scalar(std::size_t from, std::size_t n, double* s, F&& term) noexcept {
  for (std::size_t j = from; j < n; ++j) s[j % sum_lanes] += term(j);
}

/// Sign bits of v[from, n) into p (bytes from from / 8; from a multiple of 8), p zeroed.
template <class T, class Get>
inline void sign_bits_scalar(std::size_t from, std::size_t n, Get&& v_at, std::byte* p) noexcept {
  for (std::size_t j8 = from; j8 < n; j8 += 8) {
    unsigned byte = 0;
    const std::size_t end = n < j8 + 8 ? n : j8 + 8;
    for (std::size_t j = j8; j < end; ++j) byte |= static_cast<unsigned>(v_at(j) < T(0)) << (j - j8);
    p[j8 >> 3] = std::byte(static_cast<std::uint8_t>(byte));
  }
}

#if SPARSEPUSH_X86_SIMD

// --- sums and sign bits of float vectors -----------------------------------------------------

/// Partial sums of |v_j| (Square: v_j^2) over [0, n32), n32 = n rounded down to 32, into s[32];
/// with `bits`, also the sign bits of v[0, n32) there.
template <bool Square>
SPARSEPUSH_TARGET_AVX512 inline void lane_sum_f32_avx512(const float* v, std::size_t n32, double* s,
                                                         std::byte* bits = nullptr) noexcept {
  __m512d a0 = _mm512_setzero_pd(), a1 = a0, a2 = a0, a3 = a0;
  const __m512 absm = _mm512_castsi512_ps(_mm512_set1_epi32(0x7FFFFFFF));
  const __m512 zero = _mm512_setzero_ps();
  for (std::size_t i = 0; i < n32; i += 32) {
    const __m512 r0 = _mm512_loadu_ps(v + i), r1 = _mm512_loadu_ps(v + i + 16);
    if (bits) {
      const std::uint32_t m = static_cast<std::uint32_t>(_mm512_cmp_ps_mask(r0, zero, _CMP_LT_OQ)) |
                              (static_cast<std::uint32_t>(_mm512_cmp_ps_mask(r1, zero, _CMP_LT_OQ)) << 16);
      std::memcpy(bits + i / 8, &m, 4);
    }
    const __m512 x0 = _mm512_and_ps(r0, absm);
    const __m512 x1 = _mm512_and_ps(r1, absm);
    __m512d d0 = _mm512_cvtps_pd(_mm512_castps512_ps256(x0));
    __m512d d1 = _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(x0), 1)));
    __m512d d2 = _mm512_cvtps_pd(_mm512_castps512_ps256(x1));
    __m512d d3 = _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(x1), 1)));
    if constexpr (Square) {  // exact in double (24-bit significands), so no rounding to keep
      d0 = _mm512_mul_pd(d0, d0);
      d1 = _mm512_mul_pd(d1, d1);
      d2 = _mm512_mul_pd(d2, d2);
      d3 = _mm512_mul_pd(d3, d3);
    }
    a0 = _mm512_add_pd(a0, d0);
    a1 = _mm512_add_pd(a1, d1);
    a2 = _mm512_add_pd(a2, d2);
    a3 = _mm512_add_pd(a3, d3);
  }
  _mm512_storeu_pd(s, a0);
  _mm512_storeu_pd(s + 8, a1);
  _mm512_storeu_pd(s + 16, a2);
  _mm512_storeu_pd(s + 24, a3);
}

template <bool Square>
SPARSEPUSH_TARGET_AVX2 inline void lane_sum_f32_avx2(const float* v, std::size_t n32, double* s,
                                                     std::byte* bits = nullptr) noexcept {
  __m256d a[8];
  for (auto& x : a) x = _mm256_setzero_pd();
  const __m128 absm = _mm_castsi128_ps(_mm_set1_epi32(0x7FFFFFFF));
  const __m256 zero = _mm256_setzero_ps();
  for (std::size_t i = 0; i < n32; i += 32) {
    if (bits)
      for (int q = 0; q < 4; ++q)
        bits[i / 8 + static_cast<std::size_t>(q)] = std::byte(static_cast<std::uint8_t>(
            _mm256_movemask_ps(_mm256_cmp_ps(_mm256_loadu_ps(v + i + 8 * q), zero, _CMP_LT_OQ))));
    for (int q = 0; q < 8; ++q) {
      __m256d d = _mm256_cvtps_pd(_mm_and_ps(_mm_loadu_ps(v + i + 4 * q), absm));
      if constexpr (Square) d = _mm256_mul_pd(d, d);
      a[q] = _mm256_add_pd(a[q], d);
    }
  }
  for (int q = 0; q < 8; ++q) _mm256_storeu_pd(s + 4 * q, a[q]);
}

/// Sign bits of v[0, n16), n16 a multiple of 16, into p.
SPARSEPUSH_TARGET_AVX512 inline void sign_bits_f32_avx512(const float* v, std::size_t n16, std::byte* p) noexcept {
  const __m512 zero = _mm512_setzero_ps();
  for (std::size_t i = 0; i < n16; i += 16) {
    const std::uint16_t m = _mm512_cmp_ps_mask(_mm512_loadu_ps(v + i), zero, _CMP_LT_OQ);
    std::memcpy(p + i / 8, &m, 2);
  }
}

SPARSEPUSH_TARGET_AVX2 inline void sign_bits_f32_avx2(const float* v, std::size_t n16, std::byte* p) noexcept {
  const __m256 zero = _mm256_setzero_ps();
  for (std::size_t i = 0; i < n16; i += 8) {
    const int m = _mm256_movemask_ps(_mm256_cmp_ps(_mm256_loadu_ps(v + i), zero, _CMP_LT_OQ));
    p[i / 8] = std::byte(static_cast<std::uint8_t>(m));
  }
}

#endif  // SPARSEPUSH_X86_SIMD

/// lane_sum of |v_j| (Square: v_j^2) over a float or double vector, at the active SIMD level.
template <class T, bool Square>
inline double lane_sum_dense(const T* v, std::size_t n) noexcept {
  double s[sum_lanes] = {};
  std::size_t from = 0;
#if SPARSEPUSH_X86_SIMD
  if constexpr (sizeof(T) == 4) {
    const simd_level l = active_simd();
    const std::size_t n32 = n / sum_lanes * sum_lanes;
    if (l == simd_level::avx512) {
      lane_sum_f32_avx512<Square>(v, n32, s);
      from = n32;
    } else if (l == simd_level::avx2) {
      lane_sum_f32_avx2<Square>(v, n32, s);
      from = n32;
    }
  }
#endif
  lane_sum_scalar(from, n, s, [v](std::size_t j) {
    const double x = static_cast<double>(v[j]);
    return Square ? x * x : std::abs(x);
  });
  return combine_lanes(s);
}

/// lane_sum of |v_j| and the sign bits of v into the zeroed p, in one pass, at the active SIMD level.
template <class T>
inline double abs_sum_and_sign_bits(const T* v, std::size_t n, std::byte* p) noexcept {
  double s[sum_lanes] = {};
  std::size_t from = 0;
#if SPARSEPUSH_X86_SIMD
  if constexpr (sizeof(T) == 4) {
    const simd_level l = active_simd();
    const std::size_t n32 = n / sum_lanes * sum_lanes;
    if (l == simd_level::avx512) {
      lane_sum_f32_avx512<false>(v, n32, s, p);
      from = n32;
    } else if (l == simd_level::avx2) {
      lane_sum_f32_avx2<false>(v, n32, s, p);
      from = n32;
    }
  }
#endif
  lane_sum_scalar(from, n, s, [v](std::size_t j) { return std::abs(static_cast<double>(v[j])); });
  sign_bits_scalar<T>(from, n, [v](std::size_t j) { return v[j]; }, p);
  return combine_lanes(s);
}

/// Sign bits of a float or double vector into the zeroed p, at the active SIMD level.
template <class T>
inline void sign_bits_dense(const T* v, std::size_t n, std::byte* p) noexcept {
  std::size_t from = 0;
#if SPARSEPUSH_X86_SIMD
  if constexpr (sizeof(T) == 4) {
    const simd_level l = active_simd();
    const std::size_t n16 = n / 16 * 16;
    if (l == simd_level::avx512) {
      sign_bits_f32_avx512(v, n16, p);
      from = n16;
    } else if (l == simd_level::avx2) {
      sign_bits_f32_avx2(v, n16, p);
      from = n16;
    }
  }
#endif
  sign_bits_scalar<T>(from, n, [v](std::size_t j) { return v[j]; }, p);
}

}  // namespace detail
}  // namespace v0
}  // namespace sparsepush
