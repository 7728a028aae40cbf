// sparsepush/detail/step_kernels.hpp: the local step x - g p with the product rounded on its own
// (as the node's plain step rounds it in a build without FMA: GCC contracts a * b - c into one
// fused multiply-add wherever the target has FMA, AVX-512 kernels included, which would change
// the bits), the write pass of the fused local step with error feedback: x <- x - g p, then
// e <- x + e, and error feedback's own write pass e <- x + e. Scalar, AVX2 and AVX-512 versions
// give identical bits; simd.hpp picks one.
#pragma once

#include <cstddef>
#include <cstdint>

#include "simd.hpp"

namespace sparsepush {
inline namespace v0 {
namespace detail {

/// a * b rounded to T, never contracted with a following add or subtract into an FMA.
template <class T>
inline T rounded_product(T a, T b) noexcept {
  T r = a * b;
#if defined(__GNUC__) && defined(__x86_64__)
  __asm__("" : "+x"(r));  // an opaque value: the compiler cannot fuse the multiply into its use
#elif defined(__GNUC__) && defined(__aarch64__)
  __asm__("" : "+w"(r));
#endif
  return r;
}

/// Scalar write pass of the fused step over [begin, end).
template <class T>
inline void step_pass_scalar(T* x, const T* p, T g, T* e, std::size_t begin, std::size_t end) noexcept {
  for (std::size_t i = begin; i < end; ++i) {
    const T xi = x[i] - rounded_product(g, p[i]);
    x[i] = xi;
    e[i] = xi + e[i];
  }
}

/// Scalar write pass of error feedback over [begin, end): e <- x + e.
template <class T>
inline void feedback_pass_scalar(const T* x, T* e, std::size_t begin, std::size_t end) noexcept {
  for (std::size_t i = begin; i < end; ++i) e[i] = x[i] + e[i];
}

#if SPARSEPUSH_X86_SIMD

/// a * b with embedded round-to-nearest: a separate rounding that GCC does not contract into an FMA.
SPARSEPUSH_TARGET_AVX512 inline __m512 rounded_mul(__m512 a, __m512 b) noexcept {
  return _mm512_mul_round_ps(a, b, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
}
SPARSEPUSH_TARGET_AVX512 inline __m512d rounded_mul(__m512d a, __m512d b) noexcept {
  return _mm512_mul_round_pd(a, b, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
}

SPARSEPUSH_TARGET_AVX512 inline void step_pass_avx512(float* x, const float* p, float g, float* e,
                                                      std::size_t d) noexcept {
  const __m512 gv = _mm512_set1_ps(g);
  std::size_t i = 0;
  for (; i + 16 <= d; i += 16) {
    const __m512 xi = _mm512_sub_ps(_mm512_loadu_ps(x + i), rounded_mul(gv, _mm512_loadu_ps(p + i)));
    _mm512_storeu_ps(x + i, xi);
    _mm512_storeu_ps(e + i, _mm512_add_ps(xi, _mm512_loadu_ps(e + i)));
  }
  if (i < d) {  // masked lanes: a scalar tail here would be compiled with FMA contraction
    const auto m = static_cast<__mmask16>((1u << (d - i)) - 1u);
    const __m512 xi =
        _mm512_sub_ps(_mm512_maskz_loadu_ps(m, x + i), rounded_mul(gv, _mm512_maskz_loadu_ps(m, p + i)));
    _mm512_mask_storeu_ps(x + i, m, xi);
    _mm512_mask_storeu_ps(e + i, m, _mm512_add_ps(xi, _mm512_maskz_loadu_ps(m, e + i)));
  }
}

SPARSEPUSH_TARGET_AVX512 inline void step_pass_avx512(double* x, const double* p, double g, double* e,
                                                      std::size_t d) noexcept {
  const __m512d gv = _mm512_set1_pd(g);
  std::size_t i = 0;
  for (; i + 8 <= d; i += 8) {
    const __m512d xi = _mm512_sub_pd(_mm512_loadu_pd(x + i), rounded_mul(gv, _mm512_loadu_pd(p + i)));
    _mm512_storeu_pd(x + i, xi);
    _mm512_storeu_pd(e + i, _mm512_add_pd(xi, _mm512_loadu_pd(e + i)));
  }
  if (i < d) {
    const auto m = static_cast<__mmask8>((1u << (d - i)) - 1u);
    const __m512d xi =
        _mm512_sub_pd(_mm512_maskz_loadu_pd(m, x + i), rounded_mul(gv, _mm512_maskz_loadu_pd(m, p + i)));
    _mm512_mask_storeu_pd(x + i, m, xi);
    _mm512_mask_storeu_pd(e + i, m, _mm512_add_pd(xi, _mm512_maskz_loadu_pd(m, e + i)));
  }
}

SPARSEPUSH_TARGET_AVX512 inline void feedback_pass_avx512(const float* x, float* e, std::size_t d) noexcept {
  std::size_t i = 0;
  for (; i + 16 <= d; i += 16) _mm512_storeu_ps(e + i, _mm512_add_ps(_mm512_loadu_ps(x + i), _mm512_loadu_ps(e + i)));
  if (i < d) {
    const auto m = static_cast<__mmask16>((1u << (d - i)) - 1u);
    _mm512_mask_storeu_ps(e + i, m, _mm512_add_ps(_mm512_maskz_loadu_ps(m, x + i), _mm512_maskz_loadu_ps(m, e + i)));
  }
}

SPARSEPUSH_TARGET_AVX512 inline void feedback_pass_avx512(const double* x, double* e, std::size_t d) noexcept {
  std::size_t i = 0;
  for (; i + 8 <= d; i += 8) _mm512_storeu_pd(e + i, _mm512_add_pd(_mm512_loadu_pd(x + i), _mm512_loadu_pd(e + i)));
  if (i < d) {
    const auto m = static_cast<__mmask8>((1u << (d - i)) - 1u);
    _mm512_mask_storeu_pd(e + i, m, _mm512_add_pd(_mm512_maskz_loadu_pd(m, x + i), _mm512_maskz_loadu_pd(m, e + i)));
  }
}

SPARSEPUSH_TARGET_AVX2 inline void feedback_pass_avx2(const float* x, float* e, std::size_t d) noexcept {
  std::size_t i = 0;
  for (; i + 8 <= d; i += 8) _mm256_storeu_ps(e + i, _mm256_add_ps(_mm256_loadu_ps(x + i), _mm256_loadu_ps(e + i)));
  feedback_pass_scalar(x, e, i, d);
}

SPARSEPUSH_TARGET_AVX2 inline void feedback_pass_avx2(const double* x, double* e, std::size_t d) noexcept {
  std::size_t i = 0;
  for (; i + 4 <= d; i += 4) _mm256_storeu_pd(e + i, _mm256_add_pd(_mm256_loadu_pd(x + i), _mm256_loadu_pd(e + i)));
  feedback_pass_scalar(x, e, i, d);
}

// The AVX2 target has no FMA (simd.hpp), so its products and sums round as scalar code's.
SPARSEPUSH_TARGET_AVX2 inline void step_pass_avx2(float* x, const float* p, float g, float* e, std::size_t d) noexcept {
  const __m256 gv = _mm256_set1_ps(g);
  std::size_t i = 0;
  for (; i + 8 <= d; i += 8) {
    const __m256 xi = _mm256_sub_ps(_mm256_loadu_ps(x + i), _mm256_mul_ps(gv, _mm256_loadu_ps(p + i)));
    _mm256_storeu_ps(x + i, xi);
    _mm256_storeu_ps(e + i, _mm256_add_ps(xi, _mm256_loadu_ps(e + i)));
  }
  step_pass_scalar(x, p, g, e, i, d);
}

SPARSEPUSH_TARGET_AVX2 inline void step_pass_avx2(double* x, const double* p, double g, double* e,
                                                  std::size_t d) noexcept {
  const __m256d gv = _mm256_set1_pd(g);
  std::size_t i = 0;
  for (; i + 4 <= d; i += 4) {
    const __m256d xi = _mm256_sub_pd(_mm256_loadu_pd(x + i), _mm256_mul_pd(gv, _mm256_loadu_pd(p + i)));
    _mm256_storeu_pd(x + i, xi);
    _mm256_storeu_pd(e + i, _mm256_add_pd(xi, _mm256_loadu_pd(e + i)));
  }
  step_pass_scalar(x, p, g, e, i, d);
}

#endif  // SPARSEPUSH_X86_SIMD

/// The write pass of the fused local step with error feedback over [begin, end), at the active
/// SIMD level: x <- x - g p (the product rounded on its own), then e <- x + e with the new x.
template <class T>
inline void step_pass(T* x, const T* p, T g, T* e, std::size_t begin, std::size_t end) noexcept {
#if SPARSEPUSH_X86_SIMD
  switch (active_simd()) {
    case simd_level::avx512: step_pass_avx512(x + begin, p + begin, g, e + begin, end - begin); return;
    case simd_level::avx2: step_pass_avx2(x + begin, p + begin, g, e + begin, end - begin); return;
    case simd_level::scalar: break;
  }
#endif
  step_pass_scalar(x, p, g, e, begin, end);
}

/// Error feedback's write pass over [begin, end) at the active SIMD level: e <- x + e.
template <class T>
inline void feedback_pass(const T* x, T* e, std::size_t begin, std::size_t end) noexcept {
#if SPARSEPUSH_X86_SIMD
  switch (active_simd()) {
    case simd_level::avx512: feedback_pass_avx512(x + begin, e + begin, end - begin); return;
    case simd_level::avx2: feedback_pass_avx2(x + begin, e + begin, end - begin); return;
    case simd_level::scalar: break;
  }
#endif
  feedback_pass_scalar(x, e, begin, end);
}

}  // namespace detail
}  // namespace v0
}  // namespace sparsepush
