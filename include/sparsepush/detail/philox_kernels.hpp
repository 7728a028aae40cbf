// sparsepush/detail/philox_kernels.hpp: the words of blocks b0 .. b0 + n - 1 of a Philox4x32-R
// counter_rng (R = 10 or 7, philox.hpp), in order: the scalar definition, 16 blocks at a time on
// AVX-512 and 8 on AVX2, bit for bit the same (value_kernels.hpp gathers the vector kernels).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "philox.hpp"
#include "simd.hpp"

namespace sparsepush {
inline namespace v0 {
namespace detail {

/// Words of blocks b0 .. b0 + n - 1 of rng, in order (4 n words), scalar.
inline void philox_fill_scalar(const counter_rng& rng, std::uint32_t b0, std::size_t n, std::uint32_t* out) noexcept {
  for (std::size_t b = 0; b < n; ++b) {
    const auto w = rng.block(static_cast<std::uint32_t>(b0 + b));
    std::memcpy(out + 4 * b, w.data(), 16);
  }
}

#if SPARSEPUSH_X86_SIMD

// --- Philox, 16 blocks (AVX-512) or 8 blocks (AVX2) at once -----------------------------------
// Lane i of the first counter word holds a permuted block number, so that after the 4 x 4
// transpose inside each 128-bit lane the words come out in block order with no cross-lane shuffle.

/// The key of each of the (up to ten) Philox rounds, widened to 64 bits (a broadcast operand).
struct philox_round_keys {
  std::uint64_t k0[10], k1[10];
  explicit philox_round_keys(philox_key key) noexcept {
    for (int r = 0; r < 10; ++r) {
      k0[r] = key[0] + static_cast<std::uint32_t>(r) * philox_w0;  // mod 2^32, as k += w each round
      k1[r] = key[1] + static_cast<std::uint32_t>(r) * philox_w1;
      k0[r] &= 0xFFFFFFFFu;
      k1[r] &= 0xFFFFFFFFu;
    }
  }
};

/// Words of blocks b0 .. b0 + 8 G - 1 into out[0, 32 G). Each block lives in one 64-bit lane (the
/// low 32 bits of a lane are the word; the high bits are don't-care, as _mm512_mul_epu32 reads
/// only the low 32), so a round is two multiplies, two shifts and two 3-way XORs per 8 blocks; G
/// independent groups of 8 blocks hide the multiplies' latency.
template <int R = 10, int G = 2>
SPARSEPUSH_TARGET_AVX512 inline void philox_blocks_avx512(const counter_rng& rng, const philox_round_keys& rk,
                                                          std::uint32_t b0, std::uint32_t* out) noexcept {
  static_assert(R >= 1 && R <= 10 && G >= 1 && G <= 4);
  const philox_counter c = rng.counter(0);
  // lane i of a group holds block (i & 1) * 4 + (i >> 1), so that unpacking pairs of lanes gives
  // the words in block order
  const __m512i lanes = _mm512_setr_epi64(0, 4, 1, 5, 2, 6, 3, 7);
  const __m512i m0 = _mm512_set1_epi64(philox_m0), m1 = _mm512_set1_epi64(philox_m1);
  __m512i x0[G], x1[G], x2[G], x3[G];
#pragma GCC unroll 4
  for (int g = 0; g < G; ++g) {
    x0[g] = _mm512_add_epi64(_mm512_set1_epi64(std::int64_t{b0} + 8 * g), lanes);
    x1[g] = _mm512_set1_epi64(c[1]);
    x2[g] = _mm512_set1_epi64(c[2]);
    x3[g] = _mm512_set1_epi64(c[3]);
  }
#pragma GCC unroll 10
  for (int r = 0; r < R; ++r) {
    const __m512i k0 = _mm512_set1_epi64(static_cast<long long>(rk.k0[r]));
    const __m512i k1 = _mm512_set1_epi64(static_cast<long long>(rk.k1[r]));
#pragma GCC unroll 4
    for (int g = 0; g < G; ++g) {
      const __m512i p0 = _mm512_mul_epu32(x0[g], m0), p1 = _mm512_mul_epu32(x2[g], m1);
      x0[g] = _mm512_ternarylogic_epi64(_mm512_srli_epi64(p1, 32), x1[g], k0, 0x96);  // a ^ b ^ c
      x2[g] = _mm512_ternarylogic_epi64(_mm512_srli_epi64(p0, 32), x3[g], k1, 0x96);
      x1[g] = p1;
      x3[g] = p0;
    }
  }
  const __m512i lo32 = _mm512_set1_epi64(0xFFFFFFFFll);
#pragma GCC unroll 4
  for (int g = 0; g < G; ++g) {
    // (a & lo32) | (b << 32): words 0, 1 and 2, 3 of each block
    const __m512i w01 = _mm512_ternarylogic_epi64(x0[g], lo32, _mm512_slli_epi64(x1[g], 32), 0xEA);
    const __m512i w23 = _mm512_ternarylogic_epi64(x2[g], lo32, _mm512_slli_epi64(x3[g], 32), 0xEA);
    _mm512_storeu_si512(out + 32 * g, _mm512_unpacklo_epi64(w01, w23));
    _mm512_storeu_si512(out + 32 * g + 16, _mm512_unpackhi_epi64(w01, w23));
  }
}

/// Words of blocks b0 .. b0 + 15 into out[0, 64).
template <int R = 10>
SPARSEPUSH_TARGET_AVX512 inline void philox16_avx512(const counter_rng& rng, const philox_round_keys& rk,
                                                     std::uint32_t b0, std::uint32_t* out) noexcept {
  philox_blocks_avx512<R, 2>(rng, rk, b0, out);
}

SPARSEPUSH_TARGET_AVX2 inline void mul_hi_lo_avx2(__m256i a, __m256i m, __m256i& hi, __m256i& lo) noexcept {
  const __m256i even = _mm256_mul_epu32(a, m);
  const __m256i odd = _mm256_mul_epu32(_mm256_srli_epi64(a, 32), m);
  hi = _mm256_blend_epi32(_mm256_srli_epi64(even, 32), odd, 0xAA);
  lo = _mm256_blend_epi32(even, _mm256_slli_epi64(odd, 32), 0xAA);
}

/// Words of blocks b0 .. b0 + 7 into out[0, 32).
template <int R = 10>
SPARSEPUSH_TARGET_AVX2 inline void philox8_avx2(const counter_rng& rng, std::uint32_t b0, std::uint32_t* out) noexcept {
  const philox_counter c = rng.counter(0);
  const philox_key key = rng.key();
  __m256i c0 = _mm256_add_epi32(_mm256_set1_epi32(static_cast<int>(b0)), _mm256_setr_epi32(0, 2, 4, 6, 1, 3, 5, 7));
  __m256i c1 = _mm256_set1_epi32(static_cast<int>(c[1]));
  __m256i c2 = _mm256_set1_epi32(static_cast<int>(c[2]));
  __m256i c3 = _mm256_set1_epi32(static_cast<int>(c[3]));
  const __m256i m0 = _mm256_set1_epi32(static_cast<int>(philox_m0));
  const __m256i m1 = _mm256_set1_epi32(static_cast<int>(philox_m1));
  std::uint32_t k0 = key[0], k1 = key[1];
  for (int r = 0; r < R; ++r) {
    if (r > 0) {
      k0 += philox_w0;
      k1 += philox_w1;
    }
    __m256i hi0, lo0, hi1, lo1;
    mul_hi_lo_avx2(c0, m0, hi0, lo0);
    mul_hi_lo_avx2(c2, m1, hi1, lo1);
    c0 = _mm256_xor_si256(_mm256_xor_si256(hi1, c1), _mm256_set1_epi32(static_cast<int>(k0)));
    c1 = lo1;
    c2 = _mm256_xor_si256(_mm256_xor_si256(hi0, c3), _mm256_set1_epi32(static_cast<int>(k1)));
    c3 = lo0;
  }
  const __m256i t0 = _mm256_unpacklo_epi32(c0, c1), t1 = _mm256_unpackhi_epi32(c0, c1);
  const __m256i t2 = _mm256_unpacklo_epi32(c2, c3), t3 = _mm256_unpackhi_epi32(c2, c3);
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(out), _mm256_unpacklo_epi64(t0, t2));
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + 8), _mm256_unpackhi_epi64(t0, t2));
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + 16), _mm256_unpacklo_epi64(t1, t3));
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + 24), _mm256_unpackhi_epi64(t1, t3));
}

#endif  // SPARSEPUSH_X86_SIMD

/// Words of blocks b0 .. b0 + n - 1 of rng, in order (4 n words), at the active SIMD level.
inline void philox_fill(const counter_rng& rng, std::uint32_t b0, std::size_t n, std::uint32_t* out) noexcept {
  std::size_t b = 0;
#if SPARSEPUSH_X86_SIMD
  const simd_level l = active_simd();
  if (l == simd_level::avx512) {
    const philox_round_keys rk(rng.key());
    for (; b + 16 <= n; b += 16) philox16_avx512(rng, rk, static_cast<std::uint32_t>(b0 + b), out + 4 * b);
  }
  else if (l == simd_level::avx2)
    for (; b + 8 <= n; b += 8) philox8_avx2(rng, static_cast<std::uint32_t>(b0 + b), out + 4 * b);
#endif
  philox_fill_scalar(rng, static_cast<std::uint32_t>(b0 + b), n - b, out + 4 * b);
}

}  // namespace detail
}  // namespace v0
}  // namespace sparsepush
