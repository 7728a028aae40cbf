// sparsepush/detail/qsgd_kernels.hpp: the bit writer of packed codes and the vector kernels of
// dense QSGD on float tensors: l = floor(r) + (xi < r - floor(r)), r = |v| * (s / nrm), min(l, s),
// code = l << 1 | (v < 0), xi from the Philox stream (24-bit or 16-bit draws; value_kernels.hpp),
// the products rounded as the scalar definition rounds them (keep_rounded: no FMA contraction).
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "philox.hpp"
#include "philox_kernels.hpp"
#include "simd.hpp"

namespace sparsepush {
inline namespace v0 {
namespace detail {

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

}  // namespace detail
}  // namespace v0
}  // namespace sparsepush
