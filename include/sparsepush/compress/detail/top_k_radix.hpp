// sparsepush/compress/detail/top_k_radix.hpp: exact top-K's 2-pass radix select, the path for small
// d, large k and samples that mislead: pass 1 builds a histogram (2^10..2^16 bins) of the top key
// bits and detects NaN/Inf; the boundary bin holds the k-th largest key; pass 2 takes every index
// above it and the candidates inside it, among which an nth_element finishes. Below top_k_small_d
// elements one nth_element over every (key, index) costs less.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "top_k_keys.hpp"

namespace sparsepush {
inline namespace v0 {
namespace detail {

/// The radix path for d <= top_k_small_d: one nth_element over every (key, index) of src, into out
/// (k ascending indices). src.e_out, when set, is overwritten by v once every element was checked.
template <tensor_element T, bool Feedback, bool Step>
void top_k_indices_small(const selection_source<T, Feedback, Step>& src, std::size_t k,
                         std::vector<std::uint32_t>& out, const context& ctx, compress_workspace<T>& ws) {
  using K = magnitude_key<T>;
  const std::size_t d = src.d;
  T* const e_out = src.e_out;
  auto& c = ws.cand;
  c.resize(d);
  bool bad = false;
  for (std::size_t i = 0; i < d; ++i) {
    const K key = key_of(src.at(i));
    bad |= key >= inf_key<T>;
    c[i] = {key, static_cast<std::uint32_t>(i)};
  }
  if (bad) src.fail(ctx);
  out.resize(k);
  if (e_out)
    for (std::size_t i = 0; i < d; ++i) e_out[i] = src.at(i);
  if (k < d) std::nth_element(c.begin(), c.begin() + static_cast<std::ptrdiff_t>(k), c.end(), select_before<K>);
  for (std::size_t j = 0; j < k; ++j) out[j] = c[j].second;
  std::sort(out.begin(), out.end());
}

/// Pass 1 of the radix path: the histogram of key >> shift over src into hist, as two interleaved
/// histograms of `bins` bins (hist[0, bins) and hist[bins, 2 bins): they break the store-to-load
/// chains of runs that hit the same bin); non_finite_error for a NaN or Inf in src.
template <tensor_element T, bool Feedback, bool Step>
void radix_histogram(const selection_source<T, Feedback, Step>& src, unsigned shift, std::size_t bins,
                     std::vector<std::uint32_t>& hist, const context& ctx) {
  using K = magnitude_key<T>;
  const std::size_t d = src.d;
  hist.assign(2 * bins, 0);
  std::uint32_t* h0 = hist.data();
  std::uint32_t* h1 = h0 + bins;
  K any_bad = 0;
  std::size_t i = 0;
  for (; i + 2 <= d; i += 2) {
    const K k0 = key_of(src.at(i)), k1 = key_of(src.at(i + 1));
    any_bad |= static_cast<K>(k0 >= inf_key<T>) | static_cast<K>(k1 >= inf_key<T>);
    ++h0[k0 >> shift];
    ++h1[k1 >> shift];
  }
  for (; i < d; ++i) {
    const K k0 = key_of(src.at(i));
    any_bad |= static_cast<K>(k0 >= inf_key<T>);
    ++h0[k0 >> shift];
  }
  if (any_bad) src.fail(ctx);
}

/// The radix path's boundary bin: the bin holding the k-th largest key, the keys above it and in it.
struct radix_boundary {
  std::size_t bin = 0;     ///< the boundary bin
  std::size_t above = 0;   ///< keys in the bins above it (all selected)
  std::size_t in_bin = 0;  ///< keys in it (k - above of them selected)
};

/// The boundary of the k largest keys from pass 1's two histograms h0 and h1 of `bins` bins.
inline radix_boundary radix_boundary_of(const std::uint32_t* h0, const std::uint32_t* h1, std::size_t bins,
                                        std::size_t k) noexcept {
  std::size_t above = 0;
  std::size_t b = bins - 1;
  for (;; --b) {
    const std::size_t in = std::size_t{h0[b]} + h1[b];
    if (above + in >= k) break;
    above += in;
  }
  return {b, above, std::size_t{h0[b]} + h1[b]};
}

/// Pass 2 of the radix path and its end: every index above the boundary bin is in and those inside
/// it are candidates (src.e_out, when set, receives v); the k - above best candidates, ties to the
/// lower index, merged with the others into out (k ascending indices, already sized).
template <tensor_element T, bool Feedback, bool Step>
void radix_collect(const selection_source<T, Feedback, Step>& src, unsigned shift, const radix_boundary& rb,
                   std::size_t k, std::vector<std::uint32_t>& out, compress_workspace<T>& ws) {
  using K = magnitude_key<T>;
  const std::size_t d = src.d, above = rb.above, in_bin = rb.in_bin, need = k - rb.above;
  T* const e_out = src.e_out;
  auto& cand = ws.cand;
  cand.resize(in_bin);
  auto& definite = ws.chosen;
  definite.resize(above);
  std::size_t nd = 0, nc = 0;
  std::uint32_t* defp = definite.data();
  auto* candp = cand.data();
  const K bb = static_cast<K>(rb.bin);
  for (std::size_t i = 0; i < d; ++i) {
    const T v = src.at(i);
    if (e_out) e_out[i] = v;
    const K key = key_of(v);
    const K bin = key >> shift;
    if (bin > bb) {
      defp[nd++] = static_cast<std::uint32_t>(i);
    } else if (bin == bb) {
      candp[nc++] = {key, static_cast<std::uint32_t>(i)};
    }
  }

  // Finish inside the boundary bin, then merge the two ascending lists.
  if (need < in_bin) {
    std::nth_element(cand.begin(), cand.begin() + static_cast<std::ptrdiff_t>(need), cand.end(),
                     select_before<K>);
    std::sort(cand.begin(), cand.begin() + static_cast<std::ptrdiff_t>(need),
              [](const auto& a, const auto& c) { return a.second < c.second; });
  }
  std::size_t a = 0, c = 0, o = 0;
  while (a < above && c < need) out[o++] = defp[a] < candp[c].second ? defp[a++] : candp[c++].second;
  while (a < above) out[o++] = defp[a++];
  while (c < need) out[o++] = candp[c++].second;
}

/// The radix path of top_k_indices: indices (ascending) of the k largest |v| of src, using
/// ws.hist, ws.cand and ws.chosen. src.e_out, when set, is overwritten by v, but only after every
/// element was checked finite.
template <tensor_element T, bool Feedback, bool Step>
void top_k_indices_radix(const selection_source<T, Feedback, Step>& src, std::size_t k,
                         std::vector<std::uint32_t>& out, const context& ctx, compress_workspace<T>& ws) {
  if (src.d <= top_k_small_d) return top_k_indices_small<T>(src, k, out, ctx, ws);
  // Pass 1: histogram of the top `bits` bits of the magnitude key (10..16, growing with d so
  // the histogram stays cache-resident while the boundary bin stays small), NaN/Inf detection.
  const unsigned bits = top_k_hist_bits_for(src.d);
  const unsigned shift = sizeof(T) * 8 - 1 - bits;
  const std::size_t bins = std::size_t{1} << bits;
  radix_histogram<T>(src, shift, bins, ws.hist, ctx);
  out.resize(k);  // nothing below throws (but bad_alloc before e is touched)
  const radix_boundary rb = radix_boundary_of(ws.hist.data(), ws.hist.data() + bins, bins, k);
  radix_collect<T>(src, shift, rb, k, out, ws);
}

}  // namespace detail
}  // namespace v0
}  // namespace sparsepush
