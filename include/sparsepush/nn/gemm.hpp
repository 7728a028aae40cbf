// sparsepush/nn/gemm.hpp: the small matrix product under the reference backend's conv2d and dense
// layers, C(i, j) = init(i, j) + sum_k A(i, k) B(k, j), with A strided both ways (so a transposed
// operand costs nothing), B and C row-major. Register-blocked tiles over GCC/Clang vector types,
// chosen at run time among AVX-512, AVX2+FMA and the compile-time baseline: no -march flag needed.
// Every C(i, j) is its init, then c = fma(A(i, k), B(k, j), c) in k order (one rounding per
// step), whatever the tile, the matrix sizes, the vector width or the compile mode: the fused
// multiply-add is explicit (_mm512_fmadd_ps, _mm256_fmadd_ps, std::fma on the baseline), not left
// to the compiler's contraction, so results depend neither on the batch size or the thread count
// nor on -std=c++20 vs gnu++20, and every level, the baseline included, gives the same bits.
// Beside it, the moves that pack its operands (transpose, copy_rows), vectorized the same way.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstring>
#include <type_traits>

namespace sparsepush {
inline namespace v0 {
namespace nn {
namespace detail {

/// What C starts from before the products are added.
enum class gemm_init {
  zero,        ///< 0
  accumulate,  ///< C's current values
  row_bias,    ///< bias[i]
  col_bias,    ///< bias[j]; with b_padded, bias must be readable up to n rounded up to 16 floats
};

/// One product. A(i, k) = a[i a_row + k a_col]; B(k, j) = b[k ldb + j], or b_rows[k][j] when
/// b_rows is set (rows anywhere, e.g. shifted windows of one image); C(i, j) = c[i ldc + j].
/// b_padded: every row of B (and a col_bias) may be read up to column n rounded up to a multiple
/// of 64 bytes (the values there are ignored), which saves masked loads at the right edge.
template <class T>
struct gemm_args {
  const T* a = nullptr;
  std::size_t a_row = 0, a_col = 0;
  const T* b = nullptr;
  std::size_t ldb = 0;
  const T* const* b_rows = nullptr;
  T* c = nullptr;
  std::size_t ldc = 0;
  std::size_t m = 0, n = 0, k = 0;
  gemm_init init = gemm_init::zero;
  const T* bias = nullptr;
  bool b_padded = false;
};

/// Floats of padding that make a row length a multiple of the widest vector (64 bytes).
template <class T>
constexpr std::size_t gemm_pad(std::size_t n) noexcept {
  constexpr std::size_t w = 64 / sizeof(T);
  return (n + w - 1) / w * w;
}

/// The instruction sets gemm() chooses among (the best the CPU has, unless forced).
enum class simd_level { baseline = 0, avx2 = 1, avx512 = 2 };

inline const char* simd_name(simd_level l) noexcept {
  return l == simd_level::avx512 ? "avx512" : l == simd_level::avx2 ? "avx2+fma" : "baseline";
}

#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
#define SPARSEPUSH_NN_X86_DISPATCH 1
#endif

}  // namespace detail
}  // namespace nn
}  // namespace v0
}  // namespace sparsepush

#ifdef SPARSEPUSH_NN_X86_DISPATCH
// GCC 12's AVX-512 headers trip -Wuninitialized at every inlined use (GCC PR105593), see
// detail/simd.hpp; the diagnostic state is looked up at the header's own lines.
#if !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <immintrin.h>
#if !defined(__clang__)
#pragma GCC diagnostic pop
#endif
#endif

namespace sparsepush {
inline namespace v0 {
namespace nn {
namespace detail {

/// The best level this CPU runs (checked once).
inline simd_level simd_supported() noexcept {
#ifdef SPARSEPUSH_NN_X86_DISPATCH
  static const simd_level level = [] {
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f")) return simd_level::avx512;
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return simd_level::avx2;
    return simd_level::baseline;
  }();
  return level;
#else
  return simd_level::baseline;
#endif
}

/// Whether the CPU fuses multiply-adds in hardware (then the baseline runs a clone compiled for
/// it: the same bits as std::fma's library call, without the call).
inline bool fma_supported() noexcept {
#ifdef SPARSEPUSH_NN_X86_DISPATCH
  static const bool fma = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("fma") != 0;
  }();
  return fma;
#else
  return false;
#endif
}

#if defined(__GNUC__)

/// The multiply-add of one instruction set: acc = fma(a, b, acc) lane by lane, rounded once.
/// Arguments by reference: a vector passed by value to a function of another target changes
/// the ABI (-Wpsabi). The baseline's std::fma is exact whatever the compiler contracts.
template <class T, std::size_t VB>
struct fma_baseline {
  static constexpr std::size_t bytes = VB;
  typedef T vec __attribute__((vector_size(VB)));
  static void fmadd(vec& acc, const vec& a, const vec& b) noexcept {
    for (std::size_t l = 0; l < VB / sizeof(T); ++l) acc[l] = std::fma(a[l], b[l], acc[l]);
  }
};

#ifdef SPARSEPUSH_NN_X86_DISPATCH
struct fma_avx2 {
  static constexpr std::size_t bytes = 32;
  typedef float vec __attribute__((vector_size(32)));
  [[gnu::target("avx2,fma")]] static void fmadd(vec& acc, const vec& a, const vec& b) noexcept {
    acc = (vec)_mm256_fmadd_ps((__m256)a, (__m256)b, (__m256)acc);
  }
};
struct fma_avx512 {
  static constexpr std::size_t bytes = 64;
  typedef float vec __attribute__((vector_size(64)));
  [[gnu::target("avx512f,avx2,fma")]] static void fmadd(vec& acc, const vec& a, const vec& b) noexcept {
    acc = (vec)_mm512_fmadd_ps((__m512)a, (__m512)b, (__m512)acc);
  }
};
#endif

/// One MR x (NV vectors) tile of C at (i0, j0), ncols <= NV * lanes of them real. Partial: the
/// last vector of B's rows is read only up to ncols (B is not padded there). Isa: one of the
/// fma_* structs above (its fmadd is inlined where the entry point is flattened).
template <class Isa, class T, int MR, int NV, bool Partial>
[[gnu::always_inline]] inline void gemm_tile(const gemm_args<T>& g, std::size_t i0, std::size_t j0,
                                             std::size_t ncols) {
  constexpr std::size_t VB = Isa::bytes, L = VB / sizeof(T);
  typedef typename Isa::vec vec;
  vec acc[MR][NV];
  const std::size_t last = ncols - (NV - 1) * L;  // real lanes of the last vector
#pragma GCC unroll 16
  for (int r = 0; r < MR; ++r)
#pragma GCC unroll 16
    for (int v = 0; v < NV; ++v) {
      const std::size_t lanes = v + 1 == NV ? last : L;
      switch (g.init) {
        case gemm_init::zero:
          acc[r][v] = vec{};
          break;
        case gemm_init::accumulate:
          acc[r][v] = vec{};
          std::memcpy(&acc[r][v], g.c + (i0 + r) * g.ldc + j0 + v * L, lanes * sizeof(T));
          break;
        case gemm_init::row_bias:
          acc[r][v] = vec{} + g.bias[i0 + r];
          break;
        case gemm_init::col_bias:
          acc[r][v] = vec{};
          if (g.b_padded) std::memcpy(&acc[r][v], g.bias + j0 + v * L, VB);
          else std::memcpy(&acc[r][v], g.bias + j0 + v * L, lanes * sizeof(T));
          break;
      }
    }
  const T* arow = g.a + i0 * g.a_row;
  const T* bcol = g.b + j0;
  for (std::size_t kk = 0; kk < g.k; ++kk) {
    vec bv[NV];
    const T* br = g.b_rows ? g.b_rows[kk] + j0 : bcol + kk * g.ldb;
#pragma GCC unroll 16
    for (int v = 0; v < NV; ++v) {
      if (Partial && v + 1 == NV) {
        bv[v] = vec{};
        std::memcpy(&bv[v], br + v * L, last * sizeof(T));
      } else {
        std::memcpy(&bv[v], br + v * L, VB);
      }
    }
    const T* ak = arow + kk * g.a_col;
#pragma GCC unroll 16
    for (int r = 0; r < MR; ++r) {
      const vec a = vec{} + ak[r * g.a_row];
#pragma GCC unroll 16
      for (int v = 0; v < NV; ++v) Isa::fmadd(acc[r][v], a, bv[v]);
    }
  }
#pragma GCC unroll 16
  for (int r = 0; r < MR; ++r)
#pragma GCC unroll 16
    for (int v = 0; v < NV; ++v)
      std::memcpy(g.c + (i0 + r) * g.ldc + j0 + v * L, &acc[r][v], (v + 1 == NV ? last : L) * sizeof(T));
}

template <class Isa, class T, int MR, int NV>
[[gnu::always_inline]] inline void gemm_tile_nv(const gemm_args<T>& g, std::size_t i0, std::size_t j0,
                                                std::size_t ncols, int nv, bool partial) {
  if constexpr (NV > 0) {
    if (nv == NV) {
      if (partial) gemm_tile<Isa, T, MR, NV, true>(g, i0, j0, ncols);
      else gemm_tile<Isa, T, MR, NV, false>(g, i0, j0, ncols);
      return;
    }
    gemm_tile_nv<Isa, T, MR, NV - 1>(g, i0, j0, ncols, nv, partial);
  }
}

template <class Isa, class T, int MR, int NVMAX>
[[gnu::always_inline]] inline void gemm_tile_mr(const gemm_args<T>& g, std::size_t i0, std::size_t j0,
                                                std::size_t ncols, int mr, int nv, bool partial) {
  if constexpr (MR > 0) {
    if (mr == MR) {
      gemm_tile_nv<Isa, T, MR, NVMAX>(g, i0, j0, ncols, nv, partial);
      return;
    }
    gemm_tile_mr<Isa, T, MR - 1, NVMAX>(g, i0, j0, ncols, mr, nv, partial);
  }
}

/// The whole product in tiles of up to MRMAX rows and NVMAX vectors of Isa::bytes.
template <class Isa, class T, int MRMAX, int NVMAX>
[[gnu::always_inline]] inline void gemm_blocked(const gemm_args<T>& g) {
  constexpr std::size_t L = Isa::bytes / sizeof(T), JB = NVMAX * L;
  for (std::size_t j0 = 0; j0 < g.n; j0 += JB) {
    const std::size_t ncols = g.n - j0 < JB ? g.n - j0 : JB;
    const int nv = static_cast<int>((ncols + L - 1) / L);
    const bool partial = !g.b_padded && ncols % L != 0;
    for (std::size_t i0 = 0; i0 < g.m; i0 += MRMAX) {
      const int mr = static_cast<int>(g.m - i0 < MRMAX ? g.m - i0 : MRMAX);
      gemm_tile_mr<Isa, T, MRMAX, NVMAX>(g, i0, j0, ncols, mr, nv, partial);
    }
  }
}

// The entry points are flattened: everything they call, the fmadd of their target included, is
// inlined into them (an always_inline fmadd of another target could not be).
[[gnu::flatten]] inline void gemm_baseline(const gemm_args<float>& g) {
  gemm_blocked<fma_baseline<float, 16>, float, 4, 3>(g);
}
[[gnu::flatten]] inline void gemm_baseline(const gemm_args<double>& g) {
  gemm_blocked<fma_baseline<double, 16>, double, 4, 3>(g);
}

#ifdef SPARSEPUSH_NN_X86_DISPATCH
/// The baseline compiled for a CPU with FMA: std::fma becomes the instruction (the same bits).
[[gnu::target("fma"), gnu::flatten]] inline void gemm_baseline_fma(const gemm_args<float>& g) {
  gemm_blocked<fma_baseline<float, 16>, float, 4, 3>(g);
}
[[gnu::target("fma"), gnu::flatten]] inline void gemm_baseline_fma(const gemm_args<double>& g) {
  gemm_blocked<fma_baseline<double, 16>, double, 4, 3>(g);
}
[[gnu::target("avx2,fma"), gnu::flatten]] inline void gemm_avx2(const gemm_args<float>& g) {
  gemm_blocked<fma_avx2, float, 4, 3>(g);
}
/// Tiles of 4 rows x 6 vectors (24 accumulators, 96 columns): per k, 6 vector loads of B and 4
/// broadcasts of A feed 24 multiply-adds, where 8 x 3 needs 8 broadcasts, strided through A, for
/// the same 24 (docs/dev/simd.md gives the timings behind the choice). A tile's shape changes no
/// bits: each C(i, j) is still one fma chain in k order.
[[gnu::target("avx512f,avx2,fma"), gnu::flatten]] inline void gemm_avx512(const gemm_args<float>& g) {
  gemm_blocked<fma_avx512, float, 4, 6>(g);
}
#endif

#else  // no vector extensions: plain loops in the same k order

template <class T>
void gemm_baseline(const gemm_args<T>& g) {
  for (std::size_t i = 0; i < g.m; ++i)
    for (std::size_t j = 0; j < g.n; ++j) {
      T* c = g.c + i * g.ldc + j;
      T acc = g.init == gemm_init::zero         ? T(0)
              : g.init == gemm_init::accumulate ? *c
              : g.init == gemm_init::row_bias   ? g.bias[i]
                                                : g.bias[j];
      for (std::size_t kk = 0; kk < g.k; ++kk)
        acc = std::fma(g.a[i * g.a_row + kk * g.a_col], g.b_rows ? g.b_rows[kk][j] : g.b[kk * g.ldb + j], acc);
      *c = acc;
    }
}

#endif

/// dst[j ldd + i] = src[i lds + j] for i < rows, j < cols (dst's other elements are left as
/// they are): the operand packing of the products (dY^T of a convolution's weight gradient).
/// Blocks of 32 x 32 on the baseline; 16 x 16 tiles transposed in registers on AVX-512. Moves
/// only, so every level gives the same bits.
template <class T>
void transpose_baseline(const T* src, std::size_t lds, std::size_t rows, std::size_t cols, T* dst, std::size_t ldd) {
  for (std::size_t j0 = 0; j0 < cols; j0 += 32) {  // 32 rows of dst at a time: they stay in L1
    const std::size_t j1 = j0 + 32 < cols ? j0 + 32 : cols;
    for (std::size_t i = 0; i < rows; ++i)
      for (std::size_t j = j0; j < j1; ++j) dst[j * ldd + i] = src[i * lds + j];
  }
}

#ifdef SPARSEPUSH_NN_X86_DISPATCH
/// One 16 x 16 tile: unpack pairs of rows, then pairs of pairs, then whole 128-bit lanes.
[[gnu::target("avx512f")]] inline void transpose_tile16_avx512(const float* src, std::size_t lds, float* dst,
                                                               std::size_t ldd) noexcept {
  __m512 r[16], t[16];
  for (int i = 0; i < 16; ++i) r[i] = _mm512_loadu_ps(src + i * lds);
  for (int i = 0; i < 8; ++i) {  // lane L of t[2i]: a[2i][4L], a[2i+1][4L], a[2i][4L+1], a[2i+1][4L+1]
    t[2 * i] = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
    t[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
  }
  for (int g = 0; g < 4; ++g) {  // lane L of r[4g + c]: column 4L + c of rows 4g .. 4g + 3
    const __m512d t0 = _mm512_castps_pd(t[4 * g]), t1 = _mm512_castps_pd(t[4 * g + 1]);
    const __m512d t2 = _mm512_castps_pd(t[4 * g + 2]), t3 = _mm512_castps_pd(t[4 * g + 3]);
    r[4 * g] = _mm512_castpd_ps(_mm512_unpacklo_pd(t0, t2));
    r[4 * g + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(t0, t2));
    r[4 * g + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(t1, t3));
    r[4 * g + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(t1, t3));
  }
  for (int c = 0; c < 4; ++c) {  // row 4L + c of dst: lane L of r[c], r[4 + c], r[8 + c], r[12 + c]
    const __m512 v0 = _mm512_shuffle_f32x4(r[c], r[4 + c], 0x44), v1 = _mm512_shuffle_f32x4(r[c], r[4 + c], 0xee);
    const __m512 v2 = _mm512_shuffle_f32x4(r[8 + c], r[12 + c], 0x44);
    const __m512 v3 = _mm512_shuffle_f32x4(r[8 + c], r[12 + c], 0xee);
    _mm512_storeu_ps(dst + (0 + c) * ldd, _mm512_shuffle_f32x4(v0, v2, 0x88));
    _mm512_storeu_ps(dst + (4 + c) * ldd, _mm512_shuffle_f32x4(v0, v2, 0xdd));
    _mm512_storeu_ps(dst + (8 + c) * ldd, _mm512_shuffle_f32x4(v1, v3, 0x88));
    _mm512_storeu_ps(dst + (12 + c) * ldd, _mm512_shuffle_f32x4(v1, v3, 0xdd));
  }
}

[[gnu::target("avx512f")]] inline void transpose_avx512(const float* src, std::size_t lds, std::size_t rows,
                                                        std::size_t cols, float* dst, std::size_t ldd) {
  const std::size_t r16 = rows / 16 * 16, c16 = cols / 16 * 16;
  for (std::size_t j = 0; j < c16; j += 16)
    for (std::size_t i = 0; i < r16; i += 16) transpose_tile16_avx512(src + i * lds + j, lds, dst + j * ldd + i, ldd);
  for (std::size_t i = r16; i < rows; ++i)  // the rows below the last whole tile
    for (std::size_t j = 0; j < cols; ++j) dst[j * ldd + i] = src[i * lds + j];
  for (std::size_t i = 0; i < r16; ++i)  // and the columns right of it
    for (std::size_t j = c16; j < cols; ++j) dst[j * ldd + i] = src[i * lds + j];
}
#endif

/// dst[r ldd + t] = src[r lds + t] for r < rows, t < len: the short rows a convolution moves
/// between an image and its zero-padded copy, windows and columns. Moves only: the same bits at
/// every level.
template <class T>
void copy_rows_baseline(const T* src, std::size_t lds, T* dst, std::size_t ldd, std::size_t rows, std::size_t len) {
  for (std::size_t r = 0; r < rows; ++r)
    for (std::size_t t = 0; t < len; ++t) dst[r * ldd + t] = src[r * lds + t];
}

#ifdef SPARSEPUSH_NN_X86_DISPATCH
[[gnu::target("avx512f")]] inline void copy_rows_avx512(const float* src, std::size_t lds, float* dst, std::size_t ldd,
                                                        std::size_t rows, std::size_t len) {
  const std::size_t whole = len / 16 * 16;
  const __mmask16 tail = __mmask16((1u << (len - whole)) - 1);
  for (std::size_t r = 0; r < rows; ++r) {
    const float* s = src + r * lds;
    float* d = dst + r * ldd;
    for (std::size_t t = 0; t < whole; t += 16) _mm512_storeu_ps(d + t, _mm512_loadu_ps(s + t));
    if (tail) _mm512_mask_storeu_ps(d + whole, tail, _mm512_maskz_loadu_ps(tail, s + whole));
  }
}
#endif

/// copy_rows_baseline at the given level (lowered to what the CPU runs).
template <class T>
void copy_rows(const T* src, std::size_t lds, T* dst, std::size_t ldd, std::size_t rows, std::size_t len,
               simd_level level = simd_supported()) {
#ifdef SPARSEPUSH_NN_X86_DISPATCH
  if constexpr (std::is_same_v<T, float>) {
    if (level > simd_supported()) level = simd_supported();
    if (level == simd_level::avx512) return copy_rows_avx512(src, lds, dst, ldd, rows, len);
  }
#endif
  (void)level;
  copy_rows_baseline(src, lds, dst, ldd, rows, len);
}

/// transpose_baseline at the given level (lowered to what the CPU runs); double always takes the
/// baseline.
template <class T>
void transpose(const T* src, std::size_t lds, std::size_t rows, std::size_t cols, T* dst, std::size_t ldd,
               simd_level level = simd_supported()) {
#ifdef SPARSEPUSH_NN_X86_DISPATCH
  if constexpr (std::is_same_v<T, float>) {
    if (level > simd_supported()) level = simd_supported();
    if (level == simd_level::avx512) return transpose_avx512(src, lds, rows, cols, dst, ldd);
  }
#endif
  (void)level;
  transpose_baseline(src, lds, rows, cols, dst, ldd);
}

/// C = init + A B at the given level (lowered to what the CPU runs); double always takes the
/// baseline path (it serves gradient checks, not speed). Every level gives the same bits.
template <class T>
void gemm(const gemm_args<T>& g, simd_level level = simd_supported()) {
  static_assert(std::is_same_v<T, float> || std::is_same_v<T, double>, "nn::detail::gemm: float or double");
  if (g.m == 0 || g.n == 0) return;
#ifdef SPARSEPUSH_NN_X86_DISPATCH
  if constexpr (std::is_same_v<T, float>) {
    if (level > simd_supported()) level = simd_supported();
    if (level == simd_level::avx512) return gemm_avx512(g);
    if (level == simd_level::avx2) return gemm_avx2(g);
  }
  if (fma_supported()) return gemm_baseline_fma(g);
#else
  (void)level;
#endif
  gemm_baseline(g);
}

}  // namespace detail
}  // namespace nn
}  // namespace v0
}  // namespace sparsepush
