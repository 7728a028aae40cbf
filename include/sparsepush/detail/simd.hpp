// sparsepush/detail/simd.hpp: which instruction set the hot kernels (top-K candidate scan, sign,
// QSGD, Philox) use, chosen once at run time, so one binary built for baseline x86-64 uses
// AVX-512 or AVX2 where the CPU has them. The kernels are GCC/clang intrinsics inside functions
// marked __attribute__((target(...))): no -march flag is needed to include these headers, and
// every SIMD kernel has a scalar twin that gives the same bits (tests/test_simd.cpp).
//
// Forcing a level (tests, benchmarks, suspected miscompiles):
//   * environment variable SPARSEPUSH_SIMD=scalar|avx2|avx512, read once, at the first kernel call;
//   * sparsepush::detail::set_simd_level(simd_level::scalar) at any time (not concurrently with
//     running kernels); a level above what the CPU offers is lowered to the best it has.
// Defining SPARSEPUSH_NO_SIMD before including sparsepush compiles the scalar kernels only (as does
// a compiler or target without x86 intrinsics).
#pragma once

#include <atomic>
#include <cstdlib>
#include <cstring>

#if !defined(SPARSEPUSH_NO_SIMD) && (defined(__x86_64__) || defined(__i386__)) && \
    (defined(__GNUC__) || defined(__clang__))
#define SPARSEPUSH_X86_SIMD 1
// GCC 12's AVX-512 headers initialise their "undefined" vectors from themselves, which
// -Wuninitialized reports at every inlined use (GCC PR105593, fixed in GCC 13). The diagnostic
// state is looked up at the header's own lines, so silencing it around the include is enough.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <immintrin.h>
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif
/// Marks a kernel compiled for AVX2 (AVX2 and BMI2, no FMA: products and sums round as in scalar code).
#define SPARSEPUSH_TARGET_AVX2 __attribute__((target("avx2,bmi,bmi2,popcnt")))
/// Marks a kernel compiled for AVX-512 (F, BW, DQ, VL).
#define SPARSEPUSH_TARGET_AVX512 \
  __attribute__((target("avx512f,avx512bw,avx512dq,avx512vl,avx2,bmi,bmi2,popcnt")))
#else
#define SPARSEPUSH_X86_SIMD 0
#endif

namespace sparsepush {
inline namespace v0 {
namespace detail {

/// Instruction sets the kernels know, in increasing order.
enum class simd_level : int { scalar = 0, avx2 = 1, avx512 = 2 };

inline const char* to_string(simd_level l) noexcept {
  return l == simd_level::avx512 ? "avx512" : l == simd_level::avx2 ? "avx2" : "scalar";
}

/// The best level this CPU (and OS) supports.
inline simd_level simd_supported() noexcept {
#if SPARSEPUSH_X86_SIMD
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl") &&
      __builtin_cpu_supports("bmi2") && __builtin_cpu_supports("popcnt"))
    return simd_level::avx512;
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("bmi2") && __builtin_cpu_supports("popcnt"))
    return simd_level::avx2;
#endif
  return simd_level::scalar;
}

/// The level asked for by SPARSEPUSH_SIMD (unset or unknown: avx512, i.e. the best there is).
inline simd_level simd_requested_by_env() noexcept {
  const char* s = std::getenv("SPARSEPUSH_SIMD");
  if (!s) return simd_level::avx512;
  if (std::strcmp(s, "scalar") == 0 || std::strcmp(s, "none") == 0) return simd_level::scalar;
  if (std::strcmp(s, "avx2") == 0) return simd_level::avx2;
  return simd_level::avx512;
}

/// The level in use; -1 until first read.
inline std::atomic<int>& simd_state() noexcept {
  static std::atomic<int> level{-1};
  return level;
}

inline simd_level lower(simd_level a, simd_level b) noexcept {
  return static_cast<int>(a) < static_cast<int>(b) ? a : b;
}

/// The level the kernels use now.
inline simd_level active_simd() noexcept {
  int l = simd_state().load(std::memory_order_relaxed);
  if (l < 0) {
    l = static_cast<int>(lower(simd_requested_by_env(), simd_supported()));
    simd_state().store(l, std::memory_order_relaxed);
  }
  return static_cast<simd_level>(l);
}

/// Use at most level `want` from now on; returns the level in effect (lowered to what the CPU has).
inline simd_level set_simd_level(simd_level want) noexcept {
  const simd_level got = lower(want, simd_supported());
  simd_state().store(static_cast<int>(got), std::memory_order_relaxed);
  return got;
}

}  // namespace detail
}  // namespace v0
}  // namespace sparsepush
