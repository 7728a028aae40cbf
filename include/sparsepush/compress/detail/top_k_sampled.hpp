// sparsepush/compress/detail/top_k_sampled.hpp: exact top-K's main path (k <= d/32): a deterministic
// sample (blocks of 16 contiguous elements at evenly spaced positions) estimates a threshold a bit
// below the k-th largest key; one streaming pass (SIMD, detail/candidate_scan.hpp) keeps the (key,
// index) of every element above it, its buffer doubling and the scan resuming when it fills (up to
// 8 times, and d/8 candidates); an exact selection over those few candidates finishes. When the
// sample misleads (fewer than k candidates, or too many), or k > d/32, the radix path runs instead.
#pragma once

#include <algorithm>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

#include "../../detail/candidate_scan.hpp"
#include "top_k_keys.hpp"
#include "top_k_radix.hpp"

namespace sparsepush {
inline namespace v0 {
namespace detail {

/// Expected sampled elements above the k-th largest key: about k / 128 (the sample is then about
/// d / 128 elements), at least 64 and at most 4096. The threshold is the sample's
/// (hits + 4 sqrt(hits) + 4)-th largest key, so about k (1 + 4 / sqrt(hits)) elements pass it
/// (1.5 k at 64 hits, 1.06 k at 4096) and fewer than k do with probability ~1e-4 (then the radix
/// path runs).
constexpr std::size_t top_k_sample_hits(std::size_t k) noexcept {
  return std::clamp<std::size_t>(k / 128, 64, 4096);
}

/// Sample rank of the threshold for `hits` expected hits: hits + 4 sqrt(hits) + 4.
constexpr std::size_t top_k_threshold_rank(std::size_t hits) noexcept {
  std::size_t s = 0;
  while ((s + 1) * (s + 1) <= hits) ++s;
  return hits + 4 * s + 4;
}

/// Candidate buffer for k: room for the expected k (1 + 4 / sqrt(hits)) with a wide margin. A
/// scan that fills it doubles it and resumes, up to top_k_candidate_limit(d, k) candidates.
constexpr std::size_t top_k_candidate_cap(std::size_t k) noexcept { return 2 * k + 4096; }
/// At most 8 times the first buffer, and d / 8: beyond that the radix path's two passes cost less
/// than selecting among the candidates.
constexpr std::size_t top_k_candidate_limit(std::size_t d, std::size_t k) noexcept {
  return std::min(d / 8, 8 * top_k_candidate_cap(k));
}

/// The sampled path's threshold for the k largest keys of src: m_want sampled elements (whole
/// blocks of 16, evenly spaced), `hits` of them expected above the k-th largest key; the lower edge
/// of the histogram bin that holds the sample's top_k_threshold_rank(hits)-th largest key. Uses
/// ws.keys and ws.hist. 0 when that many sampled keys are (near) zero: not a sparse case.
template <tensor_element T, bool Feedback, bool Step>
magnitude_key<T> top_k_sample_threshold(const selection_source<T, Feedback, Step>& src, std::size_t hits,
                                        std::size_t m_want, compress_workspace<T>& ws) {
  using K = magnitude_key<T>;
  const std::size_t d = src.d;
  constexpr std::size_t block = 16;
  const std::size_t blocks = (m_want + block - 1) / block;
  const std::size_t m = blocks * block;
  const std::size_t stride = d / blocks;  // >= 8 * block
  auto& keys = ws.keys;
  keys.resize(m);
  // The blocks lie strides of >= 128 elements apart, too far for the hardware prefetcher: each
  // would wait on memory alone, so the block `ahead` blocks on is asked for in advance.
  constexpr std::size_t ahead = 8;
  const std::size_t first = (stride - block) / 2;
  auto prefetch = [&src](std::size_t at) {
    __builtin_prefetch(src.x + at);
    __builtin_prefetch(src.x + at + block - 1);
    if constexpr (Feedback) {
      __builtin_prefetch(src.e + at);
      __builtin_prefetch(src.e + at + block - 1);
    }
    if constexpr (Step) {
      __builtin_prefetch(src.p + at);
      __builtin_prefetch(src.p + at + block - 1);
    }
  };
  for (std::size_t b = 0; b < std::min(ahead, blocks); ++b) prefetch(b * stride + first);
  for (std::size_t b = 0; b < blocks; ++b) {
    if (b + ahead < blocks) prefetch((b + ahead) * stride + first);
    const std::size_t at = b * stride + first;
    for (std::size_t j = 0; j < block; ++j) keys[b * block + j] = key_of(src.at(at + j));
  }
  // The threshold: the lower edge of the histogram bin (key >> shift, 2^10..2^16 bins as the
  // radix path's) that holds the sample's r-th largest key; at most the r-th largest, so at least
  // as many candidates as that estimate asks for, found in O(m) rather than an nth_element.
  const std::size_t r = std::min(m, top_k_threshold_rank(hits));
  const unsigned hb = top_k_hist_bits_for(d);
  const unsigned sample_shift = sizeof(T) * 8 - 1 - hb;
  auto& hist = ws.hist;
  hist.assign(std::size_t{1} << hb, 0);
  K top = 0;
  for (std::size_t j = 0; j < m; ++j) {
    const K key = std::min<K>(keys[j], inf_key<T>);  // a NaN in the sample is caught by the scan
    top = std::max(top, key);
    ++hist[static_cast<std::size_t>(key >> sample_shift)];
  }
  std::size_t bin = static_cast<std::size_t>(top >> sample_shift);
  for (std::size_t seen = hist[bin]; seen < r && bin > 0;) seen += hist[--bin];
  return static_cast<K>(K(bin) << sample_shift);
}

/// The candidates of src above thr into ws.ckeys and ws.sel (ascending index), the buffers
/// doubling while a scan fills them, up to top_k_candidate_limit(d, k) candidates.
template <tensor_element T, bool Feedback, bool Step>
scan_result<magnitude_key<T>> top_k_scan_above(const selection_source<T, Feedback, Step>& src, std::size_t k,
                                               magnitude_key<T> thr, compress_workspace<T>& ws) {
  using K = magnitude_key<T>;
  const std::size_t d = src.d;
  std::size_t cap = top_k_candidate_cap(k);
  auto& ck = ws.ckeys;
  auto& ci = ws.sel;
  if (ck.size() < cap) ck.resize(cap);
  if (ci.size() < cap) ci.resize(cap);
  cap = std::min(ck.size(), ci.size());  // a buffer grown by an earlier call is used whole
  scan_result<K> found;
  for (;;) {
    scan_candidates<T, Feedback, Step, K>(src.x, src.e, src.p, src.g, d, thr, ck.data(), ci.data(), cap, found);
    if (!found.overflow || cap >= top_k_candidate_limit(d, k)) break;
    cap = std::min(2 * cap, top_k_candidate_limit(d, k));
    ck.resize(cap);  // keeps the candidates found so far
    ci.resize(cap);
  }
  return found;
}

/// The k of found.count candidates (ws.ckeys, ws.sel; keys >= thr, none NaN or Inf) with the largest
/// keys, ties to the lower index, into out (ascending); hb: the histogram bits of the sample.
template <tensor_element T>
void top_k_take_candidates(const scan_result<magnitude_key<T>>& found, std::size_t k, magnitude_key<T> thr,
                           unsigned hb, std::vector<std::uint32_t>& out, compress_workspace<T>& ws) {
  using K = magnitude_key<T>;
  auto& keys = ws.keys;
  auto& hist = ws.hist;
  const auto& ck = ws.ckeys;
  const auto& ci = ws.sel;
  // The k-th largest candidate key: a histogram of (key - thr) finds the bin that holds
  // it, an nth_element over that bin's keys finishes. Then every candidate above it is taken and,
  // in index order, as many of those equal to it as fill k. The candidates are in ascending index
  // order already.
  const std::size_t c = found.count;
  const K span = std::min<K>(found.max_key, inf_key<T>) - thr;
  const unsigned cshift = std::bit_width(span) > hb ? static_cast<unsigned>(std::bit_width(span)) - hb : 0u;
  hist.assign(std::size_t{1} << hb, 0);
  for (std::size_t j = 0; j < c; ++j) ++hist[static_cast<std::size_t>((ck[j] - thr) >> cshift)];
  std::size_t cbin = static_cast<std::size_t>(span >> cshift), higher = 0;
  while (higher + hist[cbin] < k) higher += hist[cbin--];  // the k candidates fit above bin 0's floor
  keys.clear();
  for (std::size_t j = 0; j < c; ++j)
    if (static_cast<std::size_t>((ck[j] - thr) >> cshift) == cbin) keys.push_back(ck[j]);
  const std::size_t nth = k - higher;  // 1-based rank of the k-th key inside its bin
  std::nth_element(keys.begin(), keys.begin() + static_cast<std::ptrdiff_t>(nth - 1), keys.end(), std::greater<K>{});
  const K kth = keys[nth - 1];
  std::size_t above = 0;
  for (std::size_t j = 0; j < c; ++j) above += ck[j] > kth;
  std::size_t ties = k - above;
  out.resize(k);  // nothing below throws
  std::uint32_t* const op = out.data();
  std::size_t o = 0;
  for (std::size_t j = 0; j < c && o < k; ++j) {  // each candidate's index is stored at o (< k), kept ones advance
    const K key = ck[j];
    const std::size_t tie = key == kth && ties > 0;
    ties -= tie;
    op[o] = ci[j];
    o += static_cast<std::size_t>(key > kth) | tie;
  }
}

/// Indices (ascending) of the k largest |v| of src: exact, ties to the lower index. Uses ws.keys,
/// ws.ckeys, ws.sel (sampled path) or ws.hist, ws.cand, ws.chosen (radix path). Returns whether
/// src.e_out was written (with v, only after every element was checked finite): the radix path
/// writes it in its second pass; the sampled path writes nothing, and the caller's write pass
/// (write_pass_with_values) does it with the kept values.
template <tensor_element T, bool Feedback, bool Step>
bool top_k_indices(const selection_source<T, Feedback, Step>& src, std::size_t k, std::vector<std::uint32_t>& out,
                   const context& ctx, compress_workspace<T>& ws) {
  const std::size_t d = src.d;
  // Sample m = hits * d / k elements (whole blocks); worth it only while m is a small part of d
  // and the candidates (about k (1 + 4 / sqrt(hits))) stay few.
  const std::size_t hits = top_k_sample_hits(k);
  const std::size_t m_want = (hits * d + k - 1) / k;
  if (d <= top_k_small_d || k * 32 > d || m_want * 8 > d) {
    top_k_indices_radix<T>(src, k, out, ctx, ws);
    return src.e_out != nullptr;
  }
  const magnitude_key<T> thr = top_k_sample_threshold<T>(src, hits, m_want, ws);
  if (thr == 0) {  // over hits + 4 sqrt(hits) of the sample are (near) zero: not a sparse case
    top_k_indices_radix<T>(src, k, out, ctx, ws);
    return src.e_out != nullptr;
  }
  const scan_result<magnitude_key<T>> found = top_k_scan_above<T>(src, k, thr, ws);
  if (found.overflow || found.count < k) {
    top_k_indices_radix<T>(src, k, out, ctx, ws);
    return src.e_out != nullptr;
  }
  if (found.max_key >= inf_key<T>) src.fail(ctx);
  top_k_take_candidates<T>(found, k, thr, top_k_hist_bits_for(d), out, ws);
  return false;
}

}  // namespace detail
}  // namespace v0
}  // namespace sparsepush
