// sparsepush/detail/value_kernels.hpp: the vector kernels of the dense value encodings (wire.hpp)
// and of Philox4x32-R, R = 10 or 7 (philox.hpp), each beside the scalar definition it must match bit for bit:
//   lane_sum: sum_j t_j in double as 32 interleaved partial sums (lane j mod 32, in order of j),
//             combined by the fixed tree s[L] += s[L + w], w = 16, 8, 4, 2, 1. It defines ||v||_1 of
//             the sign encoding and ||v||_2^2 of QSGD (a single running sum would be a 4-cycle add
//             chain per element; a fixed lane order keeps every level bit-identical);
//   sign bits: bit j set when v_j < 0;
//   philox_fill: the words of blocks b0 .. b0 + n - 1 of a counter_rng, in order;
//   qsgd codes: l = floor(r) + (xi < r - floor(r)), r = |v| * (s / nrm), min(l, s), code = l << 1 | (v < 0),
//             xi = (w >> 8) / 2^24 from word j of the stream (24-bit draws), or with 16-bit draws
//             xi = h / 2^16, h the 16-bit half j of the stream's words read as little-endian
//             halves (coordinate 2i: the low half of word i, 2i + 1: its high half).
// The vector versions cover float tensors; double tensors use the scalar definitions.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "philox.hpp"
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

/// Keep x in a register as computed: stops the compiler from fusing a product into a later
/// add or subtract (FMA), which would round differently from the scalar definition.
template <class V>
inline void keep_rounded(V& x) noexcept {
#if (defined(__x86_64__) || defined(__i386__)) && defined(__SSE2__) && (defined(__GNUC__) || defined(__clang__))
  __asm__("" : "+x"(x));
#elif defined(__aarch64__) && (defined(__GNUC__) || defined(__clang__))
  __asm__("" : "+w"(x));
#else
  (void)x;
#endif
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

/// Words of blocks b0 .. b0 + n - 1 of rng, in order (4 n words), scalar.
inline void philox_fill_scalar(const counter_rng& rng, std::uint32_t b0, std::size_t n, std::uint32_t* out) noexcept {
  for (std::size_t b = 0; b < n; ++b) {
    const auto w = rng.block(static_cast<std::uint32_t>(b0 + b));
    std::memcpy(out + 4 * b, w.data(), 16);
  }
}

/// Appends `code` (bits wide) to the bit stream (acc holds `held` < 8 pending bits; q the next byte).
struct bit_writer {
  std::uint64_t acc = 0;
  unsigned held = 0;
  std::byte* q = nullptr;

  void put(std::uint64_t code, unsigned bits) noexcept {
    acc |= code << held;
    held += bits;
    while (held >= 8) {
      *q++ = std::byte(static_cast<std::uint8_t>(acc));
      acc >>= 8;
      held -= 8;
    }
  }
  /// Append up to 56 bits with one unaligned 8-byte store; needs 8 writable bytes at q.
  void put_wide(std::uint64_t code, unsigned bits) noexcept {
    acc |= code << held;
    held += bits;
    std::memcpy(q, &acc, 8);
    q += held >> 3;
    acc >>= held & ~7u;  // held <= 63
    held &= 7u;
  }
  void flush() noexcept {
    if (held > 0) *q = std::byte(static_cast<std::uint8_t>(acc));
  }
};

#if SPARSEPUSH_X86_SIMD

/// keep_rounded for vectors, inside kernels of the same target.
SPARSEPUSH_TARGET_AVX512 inline void keep_rounded512(__m512& x) noexcept { __asm__("" : "+v"(x)); }
SPARSEPUSH_TARGET_AVX2 inline void keep_rounded256(__m256& x) noexcept { __asm__("" : "+x"(x)); }

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

// --- QSGD codes of float vectors --------------------------------------------------------------

/// Eight octets of codes of `bits` <= 8 bits, one code a byte in bytes[0, 64), packed LSB first
/// into p[0, 8 bits) (plus 8 bytes of slack): one PEXT of each octet's low `bits` bits a byte,
/// stored with an 8-byte store at p + bits k (its high bytes are zero and overwritten by the next).
SPARSEPUSH_TARGET_AVX2 inline void pack_octets_bmi2(const std::uint8_t* bytes, unsigned bits, std::byte* p) noexcept {
  const std::uint64_t mask = 0x0101010101010101ull * ((1u << bits) - 1u);
  for (unsigned k = 0; k < 8; ++k) {
    std::uint64_t x;
    std::memcpy(&x, bytes + 8 * k, 8);
    x = _pext_u64(x, mask);
    std::memcpy(p + bits * k, &x, 8);
  }
}

/// QSGD codes of v[j0, j0 + 64) (dense: coordinate j uses word j of the stream, Half: 16-bit half
/// j) with 16-lane float math; words = the 64 (Half: 32) Philox words of those coordinates. Narrow
/// (bits <= 8): the codes are packed into p[0, 8 bits) (plus 8 bytes of slack), else stored in c[0, 64).
template <bool Half, bool Narrow>
SPARSEPUSH_TARGET_AVX512 inline void qsgd_codes64_avx512(const float* v, const std::uint32_t* words,
                                                         float to_level, float s, unsigned bits,
                                                         std::uint32_t* c, std::byte* p) noexcept {
  const __m512 absm = _mm512_castsi512_ps(_mm512_set1_epi32(0x7FFFFFFF));
  const __m512 tl = _mm512_set1_ps(to_level), sv = _mm512_set1_ps(s), one = _mm512_set1_ps(1.0f);
  const __m512 unit = _mm512_set1_ps(Half ? 1.0f / 65536.0f : 1.0f / 16777216.0f), zero = _mm512_setzero_ps();
  alignas(64) std::uint8_t bytes[64];
  for (unsigned q = 0; q < 4; ++q) {
    const __m512 x = _mm512_loadu_ps(v + 16 * q);
    __m512 r = _mm512_mul_ps(_mm512_and_ps(x, absm), tl);
    keep_rounded512(r);
    __m512 level = _mm512_roundscale_ps(r, _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC);
    __m512i h;  // the draw as an integer below 2^24 (2^16)
    if constexpr (Half) h = _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(words + 8 * q)));
    else h = _mm512_srli_epi32(_mm512_loadu_si512(words + 16 * q), 8);
    const __m512 xi = _mm512_mul_ps(_mm512_cvtepi32_ps(h), unit);
    const __mmask16 up = _mm512_cmp_ps_mask(xi, _mm512_sub_ps(r, level), _CMP_LT_OQ);
    level = _mm512_mask_add_ps(level, up, level, one);
    level = _mm512_min_ps(level, sv);
    const __mmask16 neg = _mm512_cmp_ps_mask(x, zero, _CMP_LT_OQ);
    __m512i code = _mm512_slli_epi32(_mm512_cvttps_epi32(level), 1);
    code = _mm512_mask_or_epi32(code, neg, code, _mm512_set1_epi32(1));
    if constexpr (Narrow) _mm_store_si128(reinterpret_cast<__m128i*>(bytes + 16 * q), _mm512_cvtepi32_epi8(code));
    else _mm512_storeu_si512(c + 16 * q, code);
  }
  if constexpr (Narrow) pack_octets_bmi2(bytes, bits, p);
}

/// One octet from 8 codes of `bits` <= 8 bits, by shifting pairs and quads together inside the
/// vector, stored with one 8-byte store at p (bytes past the octet are zero).
SPARSEPUSH_TARGET_AVX2 inline void pack8_avx2(__m256i c, unsigned bits, std::byte* p) noexcept {
  const __m128i b1 = _mm_cvtsi32_si128(static_cast<int>(bits));
  const __m128i b2 = _mm_cvtsi32_si128(static_cast<int>(2 * bits));
  const __m256i pair = _mm256_or_si256(_mm256_and_si256(c, _mm256_set1_epi64x(0xFFFFFFFFll)),
                                       _mm256_sll_epi64(_mm256_srli_epi64(c, 32), b1));
  const __m256i quad = _mm256_or_si256(pair, _mm256_sll_epi64(_mm256_bsrli_epi128(pair, 8), b2));
  const std::uint64_t q0 = static_cast<std::uint64_t>(_mm_cvtsi128_si64(_mm256_castsi256_si128(quad)));
  const std::uint64_t q1 = static_cast<std::uint64_t>(_mm_cvtsi128_si64(_mm256_extracti128_si256(quad, 1)));
  const std::uint64_t o = q0 | (q1 << (4 * bits));
  std::memcpy(p, &o, 8);
}

template <bool Half>
SPARSEPUSH_TARGET_AVX2 inline void qsgd_codes32_avx2(const float* v, const std::uint32_t* words, float to_level,
                                                     float s, unsigned bits, std::uint32_t* c,
                                                     std::byte* p) noexcept {
  const __m256 absm = _mm256_castsi256_ps(_mm256_set1_epi32(0x7FFFFFFF));
  const __m256 tl = _mm256_set1_ps(to_level), sv = _mm256_set1_ps(s), one = _mm256_set1_ps(1.0f);
  const __m256 unit = _mm256_set1_ps(Half ? 1.0f / 65536.0f : 1.0f / 16777216.0f), zero = _mm256_setzero_ps();
  for (int q = 0; q < 4; ++q) {
    const __m256 x = _mm256_loadu_ps(v + 8 * q);
    __m256 r = _mm256_mul_ps(_mm256_and_ps(x, absm), tl);
    keep_rounded256(r);
    __m256 level = _mm256_floor_ps(r);
    __m256i h;
    if constexpr (Half) h = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(words + 4 * q)));
    else h = _mm256_srli_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(words + 8 * q)), 8);
    const __m256 xi = _mm256_mul_ps(_mm256_cvtepi32_ps(h), unit);
    const __m256 up = _mm256_cmp_ps(xi, _mm256_sub_ps(r, level), _CMP_LT_OQ);
    level = _mm256_add_ps(level, _mm256_and_ps(up, one));
    level = _mm256_min_ps(level, sv);
    const __m256i neg = _mm256_castps_si256(_mm256_cmp_ps(x, zero, _CMP_LT_OQ));
    __m256i code = _mm256_slli_epi32(_mm256_cvttps_epi32(level), 1);
    code = _mm256_or_si256(code, _mm256_srli_epi32(neg, 31));
    if (bits <= 8) pack8_avx2(code, bits, p + bits * static_cast<unsigned>(q));
    else _mm256_storeu_si256(reinterpret_cast<__m256i*>(c + 8 * q), code);
  }
}

/// Dense QSGD of float v[0, n64) (n64 a multiple of 256) into the bit writer (empty on entry),
/// codes `bits` wide (bits <= 14), draws from R-round Philox, 16-bit (Half) or 24-bit. Every 64
/// codes fill 8 bits bytes exactly, so for bits <= 8 each octet of codes is `bits` whole bytes,
/// stored independently; wider codes go four at a time through put_wide. The writer must have
/// room for 8 bytes past the end.
template <simd_level L, int R, bool Half>
inline void qsgd_dense_f32_simd(const float* v, std::size_t n64, const counter_rng& rng, float to_level, float s,
                                unsigned bits, bit_writer& out) noexcept;

/// Codes of more than 8 bits (which do not fill whole bytes 8 at a time), four to a put.
inline void put_codes_wide(const std::uint32_t* codes, int count, unsigned bits, bit_writer& out) noexcept {
  for (int t = 0; t < count; t += 4) {
    const std::uint64_t quad = std::uint64_t{codes[t]} | (std::uint64_t{codes[t + 1]} << bits) |
                               (std::uint64_t{codes[t + 2]} << (2 * bits)) |
                               (std::uint64_t{codes[t + 3]} << (3 * bits));
    out.put_wide(quad, 4 * bits);
  }
}

/// The codes of v[0, 64 * groups) from words (64 codes per 64 words, Half: per 32 words).
template <bool Half, bool Narrow>
SPARSEPUSH_TARGET_AVX512 inline void qsgd_groups_avx512(const float* v, const std::uint32_t* words, int groups,
                                                        float to_level, float s, unsigned bits, std::uint32_t* codes,
                                                        bit_writer& out) noexcept {
  for (int g = 0; g < groups; ++g) {
    qsgd_codes64_avx512<Half, Narrow>(v + 64 * g, words + (Half ? 32 : 64) * g, to_level, s, bits, codes, out.q);
    if constexpr (Narrow) out.q += 8 * bits;
    else put_codes_wide(codes, 64, bits, out);
  }
}

template <simd_level L, int R, bool Half, bool Narrow>
  requires(L == simd_level::avx512)
SPARSEPUSH_TARGET_AVX512 inline void qsgd_dense_f32_simd_impl(const float* v, std::size_t n64, const counter_rng& rng,
                                                              float to_level, float s, unsigned bits,
                                                              bit_writer& out) noexcept {
  // 32 blocks (128 words) at a time: 128 coordinates, or 256 with 16-bit draws
  alignas(64) std::uint32_t words[128];
  alignas(64) std::uint32_t codes[64];
  const philox_round_keys rk(rng.key());
  constexpr std::size_t per = Half ? 256 : 128;
  for (std::size_t j = 0; j < n64; j += per) {
    philox_blocks_avx512<R, 4>(rng, rk, static_cast<std::uint32_t>(j / (Half ? 8 : 4)), words);
    qsgd_groups_avx512<Half, Narrow>(v + j, words, Half ? 4 : 2, to_level, s, bits, codes, out);
  }
}

/// The codes of v[0, 32 * groups) from words (32 codes per 32 words, Half: per 16 words).
template <bool Half>
SPARSEPUSH_TARGET_AVX2 inline void qsgd_groups_avx2(const float* v, const std::uint32_t* words, int groups,
                                                    float to_level, float s, unsigned bits, std::uint32_t* codes,
                                                    bit_writer& out) noexcept {
  for (int g = 0; g < groups; ++g) {
    qsgd_codes32_avx2<Half>(v + 32 * g, words + (Half ? 16 : 32) * g, to_level, s, bits, codes, out.q);
    if (bits <= 8) out.q += 4 * bits;
    else put_codes_wide(codes, 32, bits, out);
  }
}

template <simd_level L, int R, bool Half, bool Narrow>
  requires(L == simd_level::avx2)
SPARSEPUSH_TARGET_AVX2 inline void qsgd_dense_f32_simd_impl(const float* v, std::size_t n64, const counter_rng& rng,
                                                            float to_level, float s, unsigned bits,
                                                            bit_writer& out) noexcept {
  // 8 blocks (32 words) at a time: 32 coordinates, or 64 with 16-bit draws
  alignas(32) std::uint32_t words[32];
  alignas(32) std::uint32_t codes[32];
  constexpr std::size_t per = Half ? 64 : 32;
  for (std::size_t j = 0; j < n64; j += per) {
    philox8_avx2<R>(rng, static_cast<std::uint32_t>(j / (Half ? 8 : 4)), words);
    qsgd_groups_avx2<Half>(v + j, words, Half ? 2 : 1, to_level, s, bits, codes, out);
  }
}

template <simd_level L, int R, bool Half>
inline void qsgd_dense_f32_simd(const float* v, std::size_t n64, const counter_rng& rng, float to_level, float s,
                                unsigned bits, bit_writer& out) noexcept {
  if (bits <= 8) qsgd_dense_f32_simd_impl<L, R, Half, true>(v, n64, rng, to_level, s, bits, out);
  else qsgd_dense_f32_simd_impl<L, R, Half, false>(v, n64, rng, to_level, s, bits, out);
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
