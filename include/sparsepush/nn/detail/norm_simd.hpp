// sparsepush/nn/detail/norm_simd.hpp: the x86 kernels of group_norm's fused passes, each giving
// the bits of the scalar or Eigen expression it replaces: float sums in Eigen 3.4's SSE order on
// AVX2 (mean_var, backward_group's channel sums and dx), and the fused ReLU-max-pool windows on
// AVX-512; plus the run-time checks that choose them.
#pragma once

#include <Eigen/Core>
#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "../gemm.hpp"

namespace sparsepush {
inline namespace v0 {
namespace nn {

namespace detail {

/// Whether a float kernel runs its AVX-512 version at this level (lowered to what the CPU runs).
template <class T>
bool runs_avx512(simd_level level) noexcept {
#ifdef SPARSEPUSH_NN_X86_DISPATCH
  return std::is_same_v<T, float> && level >= simd_level::avx512 && simd_supported() == simd_level::avx512;
#else
  (void)level;
  return false;
#endif
}

/// Whether group_norm's fused passes take their float sums in Eigen's order on AVX (below): where
/// Eigen itself adds floats in SSE packets of 4 (its build without -mavx) and the CPU has AVX2.
template <class T>
bool runs_sse_order_sums(simd_level level) noexcept {
#if defined(SPARSEPUSH_NN_X86_DISPATCH) && defined(EIGEN_VECTORIZE_SSE2) && !defined(EIGEN_VECTORIZE_AVX)
  return std::is_same_v<T, float> && Eigen::internal::packet_traits<float>::size == 4 &&
         level >= simd_level::avx2 && simd_supported() >= simd_level::avx2;
#else
  (void)level;
  return false;
#endif
}

#ifdef SPARSEPUSH_NN_X86_DISPATCH
/// Where Eigen 3.4's sum of a Map of n floats starts its SSE packets: the first 16-byte aligned
/// element (n if none is). An expression without direct access (a product, a square) starts at 0.
inline std::size_t sse_aligned_start(const float* p, std::size_t n) noexcept {
  const auto a = reinterpret_cast<std::uintptr_t>(p);
  if (a % sizeof(float)) return n;
  const std::size_t first = (4 - (a / sizeof(float)) % 4) % 4;
  return first < n ? first : n;
}

/// K float sums of n terms each, every one in the order Eigen 3.4's sum() adds on SSE
/// (redux_impl, LinearVectorizedTraversal): from its start s, packets of 4 into two accumulators
/// (lanes 0-3 and 4-7 here: 8 terms a step), the two added, then the last whole packet, then the
/// horizontal sum (l0 + l2) + (l1 + l3), then the terms before s, then those after the packets;
/// fewer than 4 terms from s: a plain chain from term 0. The K chains run side by side (Eigen runs
/// them one after another, each waiting on its adds). F gives term i of sum j: at1(j, i), and 4
/// and 8 of them from i: at4(j, i), at8(j, i), with the same roundings as Eigen's expression.
/// Compiled for AVX2 without FMA: nothing can be contracted.
template <int K, class F>
[[gnu::target("avx2"), gnu::always_inline]] inline void sse_order_sums(const F& f, const std::size_t* start,
                                                                       std::size_t n, float* out) {
  std::size_t blocks[K], end2[K], end[K];
  __m256 acc[K];
  std::size_t most = 0;
#pragma GCC unroll 8
  for (int j = 0; j < K; ++j) {
    const std::size_t s = start[j], aligned = (n - s) / 4 * 4, aligned2 = (n - s) / 8 * 8;
    blocks[j] = aligned > 4 ? aligned2 / 8 : 0;
    end2[j] = s + aligned2, end[j] = s + aligned;
    acc[j] = blocks[j] ? f.at8(j, s) : _mm256_setzero_ps();
    most = blocks[j] > most ? blocks[j] : most;
  }
  for (std::size_t t = 1; t < most; ++t)
#pragma GCC unroll 8
    for (int j = 0; j < K; ++j)
      if (t < blocks[j]) acc[j] = _mm256_add_ps(acc[j], f.at8(j, start[j] + 8 * t));
#pragma GCC unroll 8
  for (int j = 0; j < K; ++j) {
    const std::size_t s = start[j];
    float res;
    if (end[j] == s) {  // too short to vectorize
      res = f.at1(j, 0);
      for (std::size_t i = 1; i < n; ++i) res += f.at1(j, i);
      out[j] = res;
      continue;
    }
    __m128 p0;
    if (blocks[j]) {
      p0 = _mm_add_ps(_mm256_castps256_ps128(acc[j]), _mm256_extractf128_ps(acc[j], 1));
      if (end[j] > end2[j]) p0 = _mm_add_ps(p0, f.at4(j, end2[j]));
    } else {
      p0 = f.at4(j, s);
    }
    const __m128 h = _mm_add_ps(p0, _mm_movehl_ps(p0, p0));
    res = _mm_cvtss_f32(_mm_add_ss(h, _mm_shuffle_ps(h, h, 1)));
    for (std::size_t i = 0; i < s; ++i) res += f.at1(j, i);
    for (std::size_t i = end[j]; i < n; ++i) res += f.at1(j, i);
    out[j] = res;
  }
}

/// Terms of mean_var's sums for groups side by side: x, or (x - mean)^2 when Square.
template <bool Square>
struct group_terms {
  const float* x[4];
  float mean[4];
  [[gnu::target("avx2"), gnu::always_inline]] inline float at1(int j, std::size_t i) const noexcept {
    const float v = x[j][i];
    return Square ? (v - mean[j]) * (v - mean[j]) : v;
  }
  [[gnu::target("avx2"), gnu::always_inline]] inline __m128 at4(int j, std::size_t i) const noexcept {
    const __m128 v = _mm_loadu_ps(x[j] + i);
    if constexpr (!Square) {
      return v;
    } else {
      const __m128 d = _mm_sub_ps(v, _mm_set1_ps(mean[j]));
      return _mm_mul_ps(d, d);
    }
  }
  [[gnu::target("avx2"), gnu::always_inline]] inline __m256 at8(int j, std::size_t i) const noexcept {
    const __m256 v = _mm256_loadu_ps(x[j] + i);
    if constexpr (!Square) {
      return v;
    } else {
      const __m256 d = _mm256_sub_ps(v, _mm256_set1_ps(mean[j]));
      return _mm256_mul_ps(d, d);
    }
  }
};

/// mean_var of K <= 4 groups of n floats (x[j], contiguous), the bits of mean_var's two Eigen sums.
template <int K>
[[gnu::target("avx2")]] inline void mean_var_sse_order(const float* const* x, std::size_t n, double* mean,
                                                       double* var) {
  group_terms<false> f{};
  group_terms<true> g{};
  std::size_t start[K];
  float sum[K];
  for (int j = 0; j < K; ++j) f.x[j] = g.x[j] = x[j], start[j] = sse_aligned_start(x[j], n);
  sse_order_sums<K>(f, start, n, sum);
  for (int j = 0; j < K; ++j) {
    mean[j] = double(sum[j]) / double(n);
    g.mean[j] = float(mean[j]), start[j] = 0;
  }
  sse_order_sums<K>(g, start, n, sum);
  for (int j = 0; j < K; ++j) var[j] = double(sum[j]) / double(n);
}

/// backward_group's dx = dY a + (X - mean) b + c0, Eigen's expression lane by lane (the same
/// roundings, in the same order; compiled without FMA, so nothing is contracted), 8 lanes a step.
[[gnu::target("avx2")]] inline void norm_dx_avx2(const float* dy, const float* x, float mean, float a, float b,
                                                 float c0, float* dx, std::size_t n) {
  const __m256 av = _mm256_set1_ps(a), bv = _mm256_set1_ps(b), cv = _mm256_set1_ps(c0), mv = _mm256_set1_ps(mean);
  std::size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 t = _mm256_add_ps(_mm256_mul_ps(_mm256_loadu_ps(dy + i), av),
                                   _mm256_mul_ps(_mm256_sub_ps(_mm256_loadu_ps(x + i), mv), bv));
    _mm256_storeu_ps(dx + i, _mm256_add_ps(t, cv));
  }
  for (; i < n; ++i) dx[i] = (dy[i] * a + (x[i] - mean) * b) + c0;
}

/// Terms of backward_group's two sums for channels side by side: sum 2c is dY of channel c, sum
/// 2c + 1 is dY (X - mean).
struct channel_terms {
  const float* dy[2];
  const float* x[2];
  float mean;
  [[gnu::target("avx2"), gnu::always_inline]] inline float at1(int j, std::size_t i) const noexcept {
    return j % 2 ? dy[j / 2][i] * (x[j / 2][i] - mean) : dy[j / 2][i];
  }
  [[gnu::target("avx2"), gnu::always_inline]] inline __m128 at4(int j, std::size_t i) const noexcept {
    const __m128 d = _mm_loadu_ps(dy[j / 2] + i);
    return j % 2 ? _mm_mul_ps(d, _mm_sub_ps(_mm_loadu_ps(x[j / 2] + i), _mm_set1_ps(mean))) : d;
  }
  [[gnu::target("avx2"), gnu::always_inline]] inline __m256 at8(int j, std::size_t i) const noexcept {
    const __m256 d = _mm256_loadu_ps(dy[j / 2] + i);
    return j % 2 ? _mm256_mul_ps(d, _mm256_sub_ps(_mm256_loadu_ps(x[j / 2] + i), _mm256_set1_ps(mean))) : d;
  }
};

/// backward_group's sums of C <= 2 channels of hw floats: out[2c] = dY.sum(), out[2c + 1] =
/// (dY (X - mean)).sum(), the bits of its Eigen expressions.
template <int C>
[[gnu::target("avx2")]] inline void channel_sums_sse_order(const float* const* dy, const float* const* x, float mean,
                                                           std::size_t hw, float* out) {
  channel_terms f{};
  std::size_t start[2 * C];
  f.mean = mean;
  for (int c = 0; c < C; ++c) {
    f.dy[c] = dy[c], f.x[c] = x[c];
    start[2 * c] = sse_aligned_start(dy[c], hw), start[2 * c + 1] = 0;
  }
  sse_order_sums<2 * C>(f, start, hw, out);
}
#endif

#ifdef SPARSEPUSH_NN_X86_DISPATCH
/// The 2x2 windows of group_norm's fused ReLU-max-pool on AVX-512, 16 windows at a time: the
/// scalar loops' expressions lane by lane (a multiply, then an add, each rounded: the
/// multiply-add is never fused; the same comparisons and selects), so the same bits. One row
/// pair: lanes [0, cnt) of the windows from q0; the 2 cnt inputs of each row in two vectors.
struct relu_pool2_avx512 {
  __m512 x00, x01, x10, x11;  ///< the ReLU outputs: row 0 (two vectors), row 1
  __mmask16 lo, hi;           ///< the real lanes of the first and the second vector of a row

  [[gnu::target("avx512f")]] static __m512 relu_affine(__m512 x, __m512 a, __m512 b) noexcept {
    // v > 0 ? v : 0 (NaN and -0 to +0), as relu_of; mul and add with embedded rounding: the
    // compiler cannot contract them into an FMA
    const __m512 v = _mm512_add_round_ps(_mm512_mul_round_ps(x, a, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC), b,
                                         _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    return _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(v, _mm512_setzero_ps(), _CMP_GT_OQ), v);
  }
  [[gnu::target("avx512f")]] void load(const float* r0, const float* r1, std::size_t cnt, __m512 a, __m512 b) noexcept {
    const std::size_t n2 = 2 * cnt;
    lo = n2 >= 16 ? __mmask16(0xffff) : __mmask16((1u << n2) - 1);
    hi = n2 >= 32 ? __mmask16(0xffff) : n2 > 16 ? __mmask16((1u << (n2 - 16)) - 1) : __mmask16(0);
    x00 = relu_affine(_mm512_maskz_loadu_ps(lo, r0), a, b);
    x01 = relu_affine(_mm512_maskz_loadu_ps(hi, r0 + 16), a, b);
    x10 = relu_affine(_mm512_maskz_loadu_ps(lo, r1), a, b);
    x11 = relu_affine(_mm512_maskz_loadu_ps(hi, r1 + 16), a, b);
  }
  [[gnu::target("avx512f")]] static __m512 even(__m512 u, __m512 v) noexcept {
    return _mm512_permutex2var_ps(u, _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30), v);
  }
  [[gnu::target("avx512f")]] static __m512 odd(__m512 u, __m512 v) noexcept {
    return _mm512_permutex2var_ps(u, _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31), v);
  }
  /// relu::backward's select, v > 0 ? g : 0, stored at the real lanes m.
  [[gnu::target("avx512f")]] static void put(float* d, __mmask16 m, __m512 v, __m512 g) noexcept {
    _mm512_mask_storeu_ps(d, m, _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(v, _mm512_setzero_ps(), _CMP_GT_OQ), g));
  }
  [[gnu::target("avx512f")]] static __m512 interleave_lo(__m512 e, __m512 o) noexcept {
    return _mm512_permutex2var_ps(e, _mm512_setr_epi32(0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23), o);
  }
  [[gnu::target("avx512f")]] static __m512 interleave_hi(__m512 e, __m512 o) noexcept {
    return _mm512_permutex2var_ps(e, _mm512_setr_epi32(8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31), o);
  }
};

/// forward_relu_max_pool2's windows of one channel (xc: h x w, yc: h/2 x w/2).
[[gnu::target("avx512f")]] inline void relu_max_pool2_forward_avx512(const float* xc, std::size_t w, std::size_t oh,
                                                                      std::size_t ow, float a, float b, float* yc) {
  const __m512 av = _mm512_set1_ps(a), bv = _mm512_set1_ps(b);
  relu_pool2_avx512 t;
  for (std::size_t r = 0; r < oh; ++r)
    for (std::size_t q0 = 0; q0 < ow; q0 += 16) {
      const std::size_t cnt = ow - q0 < 16 ? ow - q0 : 16;
      t.load(xc + 2 * r * w + 2 * q0, xc + (2 * r + 1) * w + 2 * q0, cnt, av, bv);
      const __m512 v0 = relu_pool2_avx512::even(t.x00, t.x01), v1 = relu_pool2_avx512::odd(t.x00, t.x01);
      const __m512 v2 = relu_pool2_avx512::even(t.x10, t.x11), v3 = relu_pool2_avx512::odd(t.x10, t.x11);
      const __m512 ab = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(v1, v0, _CMP_GT_OQ), v0, v1);  // v1 > v0 ? v1 : v0
      const __m512 cd = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(v3, v2, _CMP_GT_OQ), v2, v3);
      const __m512 y = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(cd, ab, _CMP_GT_OQ), ab, cd);
      _mm512_mask_storeu_ps(yc + r * ow + q0, __mmask16((1u << cnt) - 1), y);
    }
}

/// backward_relu_max_pool2's output gradient of one channel (dc: h x w, written at the 2 oh rows
/// and 2 ow columns the windows cover) from the pooled gradient gc.
[[gnu::target("avx512f")]] inline void relu_max_pool2_backward_avx512(const float* xc, std::size_t w, std::size_t oh,
                                                                       std::size_t ow, float a, float b,
                                                                       const float* gc, float* dc) {
  const __m512 av = _mm512_set1_ps(a), bv = _mm512_set1_ps(b), one = _mm512_set1_ps(1.f);
  relu_pool2_avx512 t;
  for (std::size_t r = 0; r < oh; ++r)
    for (std::size_t q0 = 0; q0 < ow; q0 += 16) {
      const std::size_t cnt = ow - q0 < 16 ? ow - q0 : 16;
      t.load(xc + 2 * r * w + 2 * q0, xc + (2 * r + 1) * w + 2 * q0, cnt, av, bv);
      const __m512 e0 = relu_pool2_avx512::even(t.x00, t.x01), e1 = relu_pool2_avx512::odd(t.x00, t.x01);
      const __m512 e2 = relu_pool2_avx512::even(t.x10, t.x11), e3 = relu_pool2_avx512::odd(t.x10, t.x11);
      // route_max2x2's 0/1 weights: b_ab = T(e1 > e0), ab = std::max(e0, e1), ...
      const __mmask16 m_ab = _mm512_cmp_ps_mask(e1, e0, _CMP_GT_OQ), m_cd = _mm512_cmp_ps_mask(e3, e2, _CMP_GT_OQ);
      const __m512 b_ab = _mm512_maskz_mov_ps(m_ab, one), d_cd = _mm512_maskz_mov_ps(m_cd, one);
      const __m512 ab = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(e0, e1, _CMP_LT_OQ), e0, e1);
      const __m512 cd = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(e2, e3, _CMP_LT_OQ), e2, e3);
      const __m512 lower = _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(cd, ab, _CMP_GT_OQ), one);
      const __m512 gv = _mm512_maskz_loadu_ps(__mmask16((1u << cnt) - 1), gc + r * ow + q0);
      const __m512 gu = _mm512_mul_ps(gv, _mm512_sub_ps(one, lower)), gl = _mm512_mul_ps(gv, lower);
      const __m512 g0 = _mm512_mul_ps(gu, _mm512_sub_ps(one, b_ab)), g1 = _mm512_mul_ps(gu, b_ab);
      const __m512 g2 = _mm512_mul_ps(gl, _mm512_sub_ps(one, d_cd)), g3 = _mm512_mul_ps(gl, d_cd);
      // relu::backward's select: v > 0 ? g : 0
      float* d0 = dc + 2 * r * w + 2 * q0;
      float* d1 = d0 + w;
      relu_pool2_avx512::put(d0, t.lo, t.x00, relu_pool2_avx512::interleave_lo(g0, g1));
      relu_pool2_avx512::put(d0 + 16, t.hi, t.x01, relu_pool2_avx512::interleave_hi(g0, g1));
      relu_pool2_avx512::put(d1, t.lo, t.x10, relu_pool2_avx512::interleave_lo(g2, g3));
      relu_pool2_avx512::put(d1 + 16, t.hi, t.x11, relu_pool2_avx512::interleave_hi(g2, g3));
    }
}
#endif

}  // namespace detail

}  // namespace nn
}  // namespace v0
}  // namespace sparsepush
