// sparsepush/detail/candidate_scan.hpp: the one streaming pass of exact top-K (top_k.hpp): for
// v = x, v = x + e (error feedback) or v = (x - g p) + e (error feedback fused with the local step,
// the product g p rounded on its own as the unfused step rounds it), the magnitude key of every element (bit pattern of |v|, monotone in |v|), the
// largest key (NaN/Inf detection: key >= the key of +Inf), and the (key, index) of every element
// whose key is >= a threshold, in ascending index order, into a bounded buffer. A scan that fills
// the buffer stops where it is and can be resumed there with a larger one. Scalar, AVX2 and
// AVX-512 versions give identical output; simd.hpp picks one at run time.
#pragma once

#include <algorithm>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "simd.hpp"
#include "step_kernels.hpp"

namespace sparsepush {
inline namespace v0 {
namespace detail {

/// What a scan found: candidates written, the largest key, and whether the buffer filled up.
/// After an overflow, count and max_key cover the elements [0, next) only: the caller grows the
/// buffer (keeping its first count entries), clears overflow and scans again with this result,
/// which resumes at next.
template <class K>
struct scan_result {
  std::size_t count = 0;
  K max_key = 0;
  bool overflow = false;
  std::size_t next = 0;
};

/// Scalar scan of [begin, end); candidates go to ck/ci from position n (capacity cap).
template <class T, bool Feedback, bool Step = false,
          class K = std::conditional_t<sizeof(T) == 8, std::uint64_t, std::uint32_t>>
inline void scan_candidates_scalar(const T* x, const T* e, const T* p, T g, std::size_t begin, std::size_t end,
                                   K thr, K* ck, std::uint32_t* ci, std::size_t cap, scan_result<K>& r) noexcept {
  constexpr K abs_bits = static_cast<K>(~K{0} >> 1);
  K mx = r.max_key;
  std::size_t n = r.count;
  for (std::size_t i = begin; i < end; ++i) {
    T v = x[i];
    if constexpr (Step) v = x[i] - rounded_product(g, p[i]);
    if constexpr (Feedback) v = v + e[i];
    const K key = std::bit_cast<K>(v) & abs_bits;
    mx = key > mx ? key : mx;
    if (key >= thr) {
      if (n == cap) {
        r.overflow = true;
        r.count = n;
        r.max_key = mx;
        r.next = i;
        return;
      }
      ck[n] = key;
      ci[n] = static_cast<std::uint32_t>(i);
      ++n;
    }
  }
  r.count = n;
  r.max_key = mx;
}

#if SPARSEPUSH_X86_SIMD

// GCC 12's AVX-512 headers trip -Wmaybe-uninitialized (PR105593) in the unmasked max and the
// reductions; the masked forms with an explicit source do not.
SPARSEPUSH_TARGET_AVX512 inline __m512i sp_max_epu32(__m512i a, __m512i b) noexcept {
  return _mm512_mask_max_epu32(a, static_cast<__mmask16>(0xFFFF), a, b);
}
SPARSEPUSH_TARGET_AVX512 inline __m512i sp_max_epu64(__m512i a, __m512i b) noexcept {
  return _mm512_mask_max_epu64(a, static_cast<__mmask8>(0xFF), a, b);
}
SPARSEPUSH_TARGET_AVX512 inline std::uint32_t sp_reduce_max_epu32(__m512i a) noexcept {
  alignas(64) std::uint32_t w[16];
  _mm512_store_si512(w, a);
  std::uint32_t m = 0;
  for (const std::uint32_t x : w) m = x > m ? x : m;
  return m;
}
SPARSEPUSH_TARGET_AVX512 inline std::uint64_t sp_reduce_max_epu64(__m512i a) noexcept {
  alignas(64) std::uint64_t w[8];
  _mm512_store_si512(w, a);
  std::uint64_t m = 0;
  for (const std::uint64_t x : w) m = x > m ? x : m;
  return m;
}

// --- float --------------------------------------------------------------------------------------

template <bool Feedback, bool Step>
SPARSEPUSH_TARGET_AVX512 inline __m512i key_f32_avx512(const float* x, const float* e, const float* p, __m512 g,
                                                       std::size_t i) noexcept {
  __m512 v = _mm512_loadu_ps(x + i);
  if constexpr (Step) v = _mm512_sub_ps(v, rounded_mul(g, _mm512_loadu_ps(p + i)));
  if constexpr (Feedback) v = _mm512_add_ps(v, _mm512_loadu_ps(e + i));
  return _mm512_and_si512(_mm512_castps_si512(v), _mm512_set1_epi32(0x7FFFFFFF));
}

SPARSEPUSH_TARGET_AVX512 inline std::size_t emit_f32_avx512(__m512i key, __mmask16 m, std::size_t i,
                                                             std::uint32_t* ck, std::uint32_t* ci,
                                                             std::size_t n) noexcept {
  const __m512i idx = _mm512_add_epi32(_mm512_set1_epi32(static_cast<int>(i)),
                                       _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15));
  _mm512_storeu_si512(ck + n, _mm512_maskz_compress_epi32(m, key));
  _mm512_storeu_si512(ci + n, _mm512_maskz_compress_epi32(m, idx));
  return n + static_cast<std::size_t>(_mm_popcnt_u32(m));
}

template <bool Feedback, bool Step>
SPARSEPUSH_TARGET_AVX512 inline void scan_candidates_avx512(const float* x, const float* e, const float* p, float g,
                                                            std::size_t d,
                                                            std::uint32_t thr, std::uint32_t* ck,
                                                            std::uint32_t* ci, std::size_t cap,
                                                            scan_result<std::uint32_t>& r) noexcept {
  // a scalar head aligns x to 64 bytes: split loads slow a stream from L3 or memory
  std::size_t i = r.next + (64 - reinterpret_cast<std::uintptr_t>(x + r.next) % 64) % 64 / sizeof(float);
  if (i > d) i = d;
  scan_candidates_scalar<float, Feedback, Step>(x, e, p, g, r.next, i, thr, ck, ci, cap, r);
  if (r.overflow) return;
  const __m512i t = _mm512_set1_epi32(static_cast<int>(thr));
  const __m512 gv = _mm512_set1_ps(g);
  __m512i mx = _mm512_setzero_si512();
  std::size_t n = r.count;
  for (; i + 64 <= d; i += 64) {
    const __m512i k0 = key_f32_avx512<Feedback, Step>(x, e, p, gv, i);
    const __m512i k1 = key_f32_avx512<Feedback, Step>(x, e, p, gv, i + 16);
    const __m512i k2 = key_f32_avx512<Feedback, Step>(x, e, p, gv, i + 32);
    const __m512i k3 = key_f32_avx512<Feedback, Step>(x, e, p, gv, i + 48);
    mx = sp_max_epu32(mx, sp_max_epu32(sp_max_epu32(k0, k1), sp_max_epu32(k2, k3)));
    const __mmask16 m0 = _mm512_cmpge_epu32_mask(k0, t), m1 = _mm512_cmpge_epu32_mask(k1, t);
    const __mmask16 m2 = _mm512_cmpge_epu32_mask(k2, t), m3 = _mm512_cmpge_epu32_mask(k3, t);
    if ((m0 | m1 | m2 | m3) != 0) [[unlikely]] {
      if (n + 64 + 16 > cap) {  // a compressed store writes 16 lanes whatever the count
        r.overflow = true;
        r.count = n;
        r.max_key = std::max(r.max_key, sp_reduce_max_epu32(mx));
        r.next = i;
        return;
      }
      n = emit_f32_avx512(k0, m0, i, ck, ci, n);
      n = emit_f32_avx512(k1, m1, i + 16, ck, ci, n);
      n = emit_f32_avx512(k2, m2, i + 32, ck, ci, n);
      n = emit_f32_avx512(k3, m3, i + 48, ck, ci, n);
    }
  }
  r.count = n;
  r.max_key = std::max(r.max_key, sp_reduce_max_epu32(mx));
  scan_candidates_scalar<float, Feedback, Step>(x, e, p, g, i, d, thr, ck, ci, cap, r);
}

/// m = max(m, the largest lane of mx) (unsigned lanes).
SPARSEPUSH_TARGET_AVX2 inline void fold_max_avx2(__m256i mx, std::uint32_t& m) noexcept {
  alignas(32) std::uint32_t w[8];
  _mm256_store_si256(reinterpret_cast<__m256i*>(w), mx);
  for (const std::uint32_t x : w) m = x > m ? x : m;
}
SPARSEPUSH_TARGET_AVX2 inline void fold_max_avx2(__m256i mx, std::uint64_t& m) noexcept {
  alignas(32) std::uint64_t w[4];
  _mm256_store_si256(reinterpret_cast<__m256i*>(w), mx);
  for (const std::uint64_t x : w) m = x > m ? x : m;
}

template <bool Feedback, bool Step>
SPARSEPUSH_TARGET_AVX2 inline __m256i key_f32_avx2(const float* x, const float* e, const float* p, __m256 g,
                                                   std::size_t i) noexcept {
  __m256 v = _mm256_loadu_ps(x + i);
  if constexpr (Step) v = _mm256_sub_ps(v, _mm256_mul_ps(g, _mm256_loadu_ps(p + i)));  // no FMA in this target
  if constexpr (Feedback) v = _mm256_add_ps(v, _mm256_loadu_ps(e + i));
  return _mm256_and_si256(_mm256_castps_si256(v), _mm256_set1_epi32(0x7FFFFFFF));
}

SPARSEPUSH_TARGET_AVX2 inline std::size_t emit_f32_avx2(__m256i key, unsigned m, std::size_t i,
                                                         std::uint32_t* ck, std::uint32_t* ci,
                                                         std::size_t n) noexcept {
  alignas(32) std::uint32_t k[8];
  _mm256_store_si256(reinterpret_cast<__m256i*>(k), key);
  for (; m; m &= m - 1) {
    const unsigned j = static_cast<unsigned>(__builtin_ctz(m));
    ck[n] = k[j];
    ci[n] = static_cast<std::uint32_t>(i + j);
    ++n;
  }
  return n;
}

template <bool Feedback, bool Step>
SPARSEPUSH_TARGET_AVX2 inline void scan_candidates_avx2(const float* x, const float* e, const float* p, float g,
                                                        std::size_t d,
                                                        std::uint32_t thr, std::uint32_t* ck, std::uint32_t* ci,
                                                        std::size_t cap, scan_result<std::uint32_t>& r) noexcept {
  // keys are below 2^31, so the signed compare key > thr - 1 is key >= thr (thr >= 1)
  const __m256i t = _mm256_set1_epi32(static_cast<int>(thr - 1));
  const __m256 gv = _mm256_set1_ps(g);
  __m256i mx = _mm256_setzero_si256();
  std::size_t n = r.count, i = r.next;
  for (; i + 32 <= d; i += 32) {
    const __m256i k0 = key_f32_avx2<Feedback, Step>(x, e, p, gv, i);
    const __m256i k1 = key_f32_avx2<Feedback, Step>(x, e, p, gv, i + 8);
    const __m256i k2 = key_f32_avx2<Feedback, Step>(x, e, p, gv, i + 16);
    const __m256i k3 = key_f32_avx2<Feedback, Step>(x, e, p, gv, i + 24);
    mx = _mm256_max_epu32(mx, _mm256_max_epu32(_mm256_max_epu32(k0, k1), _mm256_max_epu32(k2, k3)));
    const __m256i c0 = _mm256_cmpgt_epi32(k0, t), c1 = _mm256_cmpgt_epi32(k1, t);
    const __m256i c2 = _mm256_cmpgt_epi32(k2, t), c3 = _mm256_cmpgt_epi32(k3, t);
    const __m256i any = _mm256_or_si256(_mm256_or_si256(c0, c1), _mm256_or_si256(c2, c3));
    if (!_mm256_testz_si256(any, any)) [[unlikely]] {
      if (n + 32 > cap) {
        r.overflow = true;
        r.count = n;
        fold_max_avx2(mx, r.max_key);
        r.next = i;
        return;
      }
      n = emit_f32_avx2(k0, static_cast<unsigned>(_mm256_movemask_ps(_mm256_castsi256_ps(c0))), i, ck, ci, n);
      n = emit_f32_avx2(k1, static_cast<unsigned>(_mm256_movemask_ps(_mm256_castsi256_ps(c1))), i + 8, ck, ci, n);
      n = emit_f32_avx2(k2, static_cast<unsigned>(_mm256_movemask_ps(_mm256_castsi256_ps(c2))), i + 16, ck, ci, n);
      n = emit_f32_avx2(k3, static_cast<unsigned>(_mm256_movemask_ps(_mm256_castsi256_ps(c3))), i + 24, ck, ci, n);
    }
  }
  r.count = n;
  fold_max_avx2(mx, r.max_key);
  scan_candidates_scalar<float, Feedback, Step>(x, e, p, g, i, d, thr, ck, ci, cap, r);
}

// --- double -------------------------------------------------------------------------------------

template <bool Feedback, bool Step>
SPARSEPUSH_TARGET_AVX512 inline void scan_candidates_avx512(const double* x, const double* e, const double* p,
                                                            double g, std::size_t d,
                                                            std::uint64_t thr, std::uint64_t* ck,
                                                            std::uint32_t* ci, std::size_t cap,
                                                            scan_result<std::uint64_t>& r) noexcept {
  const __m512i t = _mm512_set1_epi64(static_cast<long long>(thr));
  const __m512i absm = _mm512_set1_epi64(0x7FFFFFFFFFFFFFFFll);
  const __m512d gv = _mm512_set1_pd(g);
  const __m256i iota = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  __m512i mx = _mm512_setzero_si512();
  std::size_t n = r.count, i = r.next;
  for (; i + 8 <= d; i += 8) {
    __m512d v = _mm512_loadu_pd(x + i);
    if constexpr (Step) v = _mm512_sub_pd(v, rounded_mul(gv, _mm512_loadu_pd(p + i)));
    if constexpr (Feedback) v = _mm512_add_pd(v, _mm512_loadu_pd(e + i));
    const __m512i k = _mm512_and_si512(_mm512_castpd_si512(v), absm);
    mx = sp_max_epu64(mx, k);
    const __mmask8 m = _mm512_cmpge_epu64_mask(k, t);
    if (m != 0) [[unlikely]] {
      if (n + 8 > cap) {
        r.overflow = true;
        r.count = n;
        r.max_key = std::max(r.max_key, sp_reduce_max_epu64(mx));
        r.next = i;
        return;
      }
      const __m256i idx = _mm256_add_epi32(_mm256_set1_epi32(static_cast<int>(i)), iota);
      _mm512_storeu_si512(ck + n, _mm512_maskz_compress_epi64(m, k));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(ci + n), _mm256_maskz_compress_epi32(m, idx));
      n += static_cast<std::size_t>(_mm_popcnt_u32(m));
    }
  }
  r.count = n;
  r.max_key = std::max(r.max_key, sp_reduce_max_epu64(mx));
  scan_candidates_scalar<double, Feedback, Step>(x, e, p, g, i, d, thr, ck, ci, cap, r);
}

template <bool Feedback, bool Step>
SPARSEPUSH_TARGET_AVX2 inline void scan_candidates_avx2(const double* x, const double* e, const double* p, double g,
                                                        std::size_t d,
                                                        std::uint64_t thr, std::uint64_t* ck, std::uint32_t* ci,
                                                        std::size_t cap, scan_result<std::uint64_t>& r) noexcept {
  // keys are below 2^63 (NaN's too): signed compares order them
  const __m256i t = _mm256_set1_epi64x(static_cast<long long>(thr - 1));
  const __m256i absm = _mm256_set1_epi64x(0x7FFFFFFFFFFFFFFFll);
  const __m256d gv = _mm256_set1_pd(g);
  __m256i mx = _mm256_setzero_si256();
  std::size_t n = r.count, i = r.next;
  for (; i + 4 <= d; i += 4) {
    __m256d v = _mm256_loadu_pd(x + i);
    if constexpr (Step) v = _mm256_sub_pd(v, _mm256_mul_pd(gv, _mm256_loadu_pd(p + i)));  // no FMA in this target
    if constexpr (Feedback) v = _mm256_add_pd(v, _mm256_loadu_pd(e + i));
    const __m256i k = _mm256_and_si256(_mm256_castpd_si256(v), absm);
    mx = _mm256_blendv_epi8(mx, k, _mm256_cmpgt_epi64(k, mx));
    const unsigned m = static_cast<unsigned>(_mm256_movemask_pd(_mm256_castsi256_pd(_mm256_cmpgt_epi64(k, t))));
    if (m != 0) [[unlikely]] {
      if (n + 4 > cap) {
        r.overflow = true;
        r.count = n;
        fold_max_avx2(mx, r.max_key);
        r.next = i;
        return;
      }
      alignas(32) std::uint64_t kk[4];
      _mm256_store_si256(reinterpret_cast<__m256i*>(kk), k);
      for (unsigned mm = m; mm; mm &= mm - 1) {
        const unsigned j = static_cast<unsigned>(__builtin_ctz(mm));
        ck[n] = kk[j];
        ci[n] = static_cast<std::uint32_t>(i + j);
        ++n;
      }
    }
  }
  r.count = n;
  fold_max_avx2(mx, r.max_key);
  scan_candidates_scalar<double, Feedback, Step>(x, e, p, g, i, d, thr, ck, ci, cap, r);
}

#endif  // SPARSEPUSH_X86_SIMD

/// Scan v = x (+ e) from r.next to d at the active SIMD level, adding to r (a fresh scan_result
/// scans everything). thr >= 1. x, e and p are read only; p and g are used with Step only (which
/// needs Feedback).
template <class T, bool Feedback, bool Step, class K>
inline void scan_candidates(const T* x, const T* e, const T* p, T g, std::size_t d, K thr, K* ck, std::uint32_t* ci,
                            std::size_t cap, scan_result<K>& r) noexcept {
  static_assert(Feedback || !Step, "the fused step is error feedback's");
  r.overflow = false;
#if SPARSEPUSH_X86_SIMD
  switch (active_simd()) {
    case simd_level::avx512: scan_candidates_avx512<Feedback, Step>(x, e, p, g, d, thr, ck, ci, cap, r); return;
    case simd_level::avx2: scan_candidates_avx2<Feedback, Step>(x, e, p, g, d, thr, ck, ci, cap, r); return;
    case simd_level::scalar: break;
  }
#endif
  scan_candidates_scalar<T, Feedback, Step>(x, e, p, g, r.next, d, thr, ck, ci, cap, r);
}

}  // namespace detail
}  // namespace v0
}  // namespace sparsepush
