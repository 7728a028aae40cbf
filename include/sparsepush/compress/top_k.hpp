// sparsepush/compress/top_k.hpp: exact top-K by magnitude; ties go to the lower index.
// Contraction: ||C(v) - v||^2 <= (1 - k/d) ||v||^2. Selection works on the bit pattern of |v|
// (the magnitude key, monotone in |v| for IEEE floats). Main path (k <= d/32): a deterministic
// sample (blocks of 16 contiguous elements at evenly spaced positions) estimates a threshold a bit
// below the k-th largest key; ONE streaming pass (SIMD, detail/candidate_scan.hpp) computes the keys
// of v = x (+ e), detects NaN/Inf and keeps the (key, index) of every element above the threshold;
// an exact selection over those few candidates finishes. When more candidates pass than the
// buffer holds (error feedback's residuals pile up just below the threshold), the buffer doubles
// and the scan resumes where it stopped (up to 8 times, and d/8 candidates). When the sample
// misleads (fewer than k candidates, or more than that), or k > d/32, a 2-pass radix select runs instead:
// pass 1 builds a histogram (2^10..2^16 bins) of the top key bits, pass 2 collects the indices
// above the boundary bin and the candidates inside it. Both give the same, exact result.
// With error feedback, selection only reads x and e; e = x + e is written afterwards, so a throw
// leaves e untouched. The fused local step (plan_step, apply_step) selects on v = (x - gamma p) + e
// without writing anything, then one pass writes x and e.
#pragma once

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <utility>
#include <vector>

#include "../detail/candidate_scan.hpp"
#include "common.hpp"

namespace sparsepush {
inline namespace v0 {
namespace detail {

template <class T>
inline constexpr magnitude_key<T> abs_mask = static_cast<magnitude_key<T>>(~magnitude_key<T>{0} >> 1);

template <class T>
inline constexpr magnitude_key<T> inf_key = sizeof(T) == 8 ? magnitude_key<T>(0x7FF0000000000000ull)
                                                           : magnitude_key<T>(0x7F800000u);

/// Histogram bits for d elements: about d / 16 bins, between 2^10 and 2^16.
constexpr unsigned top_k_hist_bits_for(std::size_t d) noexcept {
  const unsigned lg = static_cast<unsigned>(std::bit_width(d)) - 1;
  return lg < 14 ? 10u : lg > 20 ? 16u : lg - 4;
}

/// Below this size a plain nth_element over (key, index) beats the histogram's fixed cost.
inline constexpr std::size_t top_k_small_d = 8192;

template <class T>
constexpr magnitude_key<T> key_of(T v) noexcept {
  return std::bit_cast<magnitude_key<T>>(v) & abs_mask<T>;
}

/// Order of selection: larger magnitude first, then lower index.
template <class K>
constexpr bool select_before(const std::pair<K, std::uint32_t>& a,
                             const std::pair<K, std::uint32_t>& b) noexcept {
  return a.first > b.first || (a.first == b.first && a.second < b.second);
}

/// What top_k_indices selects among: v = x, v = x + e (Feedback) or v = (x - g p) + e (Feedback
/// and Step, the fused local step). e_out, when not null, receives v (Feedback without Step only).
template <class T, bool Feedback, bool Step>
struct selection_source {
  const T* x;
  const T* e = nullptr;
  const T* p = nullptr;
  T g = T(0);
  T* e_out = nullptr;
  std::size_t d = 0;

  T at(std::size_t i) const noexcept {
    T v = x[i];
    if constexpr (Step) v = x[i] - rounded_product(g, p[i]);
    if constexpr (Feedback) v = v + e[i];
    return v;
  }
  /// Throw the non_finite_error of the first bad element (after a fast check saw one): a bad
  /// local direction is named as such, as the node's own check names it.
  [[noreturn]] void fail(const context& ctx) const {
    if constexpr (Step) check_finite(std::span<const T>(p, d), ctx, "local direction");
    for (std::size_t i = 0; i < d; ++i)
      if (!std::isfinite(at(i))) throw_non_finite(static_cast<double>(at(i)), i, ctx, Feedback ? "x + e" : "input");
    throw_non_finite(0.0, 0, ctx, "input");  // unreachable: the caller saw a bad key
  }
};

/// The radix path of top_k_indices: indices (ascending) of the k largest |v| of src, using
/// ws.hist, ws.cand and ws.chosen. src.e_out, when set, is overwritten by v, but only after every
/// element was checked finite.
template <tensor_element T, bool Feedback, bool Step>
void top_k_indices_radix(const selection_source<T, Feedback, Step>& src, std::size_t k,
                         std::vector<std::uint32_t>& out, const context& ctx, compress_workspace<T>& ws) {
  using K = magnitude_key<T>;
  const std::size_t d = src.d;
  auto v_at = [&src](std::size_t i) -> T { return src.at(i); };
  auto fail_non_finite = [&]() { src.fail(ctx); };
  T* const e_out = src.e_out;

  if (d <= top_k_small_d) {
    auto& c = ws.cand;
    c.resize(d);
    bool bad = false;
    for (std::size_t i = 0; i < d; ++i) {
      const K key = key_of(v_at(i));
      bad |= key >= inf_key<T>;
      c[i] = {key, static_cast<std::uint32_t>(i)};
    }
    if (bad) fail_non_finite();
    out.resize(k);
    if (e_out)
      for (std::size_t i = 0; i < d; ++i) e_out[i] = v_at(i);
    if (k < d) std::nth_element(c.begin(), c.begin() + static_cast<std::ptrdiff_t>(k), c.end(), select_before<K>);
    for (std::size_t j = 0; j < k; ++j) out[j] = c[j].second;
    std::sort(out.begin(), out.end());
    return;
  }

  // Pass 1: histogram of the top `bits` bits of the magnitude key (10..16, growing with d so
  // the histogram stays cache-resident while the boundary bin stays small), NaN/Inf detection.
  // Two interleaved histograms break the store-to-load chains of runs that hit the same bin.
  const unsigned bits = top_k_hist_bits_for(d);
  const unsigned shift = sizeof(T) * 8 - 1 - bits;
  const std::size_t bins = std::size_t{1} << bits;
  auto& hist = ws.hist;
  hist.assign(2 * bins, 0);
  std::uint32_t* h0 = hist.data();
  std::uint32_t* h1 = h0 + bins;
  K any_bad = 0;
  std::size_t i = 0;
  for (; i + 2 <= d; i += 2) {
    const K k0 = key_of(v_at(i)), k1 = key_of(v_at(i + 1));
    any_bad |= static_cast<K>(k0 >= inf_key<T>) | static_cast<K>(k1 >= inf_key<T>);
    ++h0[k0 >> shift];
    ++h1[k1 >> shift];
  }
  for (; i < d; ++i) {
    const K k0 = key_of(v_at(i));
    any_bad |= static_cast<K>(k0 >= inf_key<T>);
    ++h0[k0 >> shift];
  }
  if (any_bad) fail_non_finite();
  out.resize(k);  // nothing below throws (but bad_alloc before e is touched)

  // Boundary bin: the bin holding the k-th largest key.
  std::size_t above = 0;
  std::size_t b = bins - 1;
  for (;; --b) {
    const std::size_t in = std::size_t{h0[b]} + h1[b];
    if (above + in >= k) break;
    above += in;
  }
  const std::size_t need = k - above;
  const std::size_t in_bin = std::size_t{h0[b]} + h1[b];

  // Pass 2: every index above the boundary bin is in; those inside it are candidates.
  auto& cand = ws.cand;
  cand.resize(in_bin);
  auto& definite = ws.chosen;
  definite.resize(above);
  std::size_t nd = 0, nc = 0;
  std::uint32_t* defp = definite.data();
  auto* candp = cand.data();
  const K bb = static_cast<K>(b);
  for (std::size_t i = 0; i < d; ++i) {
    const T v = v_at(i);
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

/// Indices (ascending) of the k largest |v| of src: exact, ties to the lower index. Uses ws.keys,
/// ws.ckeys, ws.sel (sampled path) or ws.hist, ws.cand, ws.chosen (radix path). Returns whether
/// src.e_out was written (with v, only after every element was checked finite): the radix path
/// writes it in its second pass; the sampled path writes nothing, and the caller's write pass
/// (write_pass_with_values) does it with the kept values.
template <tensor_element T, bool Feedback, bool Step>
bool top_k_indices(const selection_source<T, Feedback, Step>& src, std::size_t k, std::vector<std::uint32_t>& out,
                   const context& ctx, compress_workspace<T>& ws) {
  using K = magnitude_key<T>;
  const std::size_t d = src.d;
  constexpr std::size_t block = 16;
  // Sample m = hits * d / k elements (whole blocks); worth it only while m is a small part of d
  // and the candidates (about k (1 + 4 / sqrt(hits))) stay few.
  const std::size_t hits = top_k_sample_hits(k);
  const std::size_t m_want = (hits * d + k - 1) / k;
  if (d <= top_k_small_d || k * 32 > d || m_want * 8 > d) {
    top_k_indices_radix<T>(src, k, out, ctx, ws);
    return src.e_out != nullptr;
  }
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
  const K thr = static_cast<K>(K(bin) << sample_shift);
  if (thr == 0) {  // over hits + 4 sqrt(hits) of the sample are (near) zero: not a sparse case
    top_k_indices_radix<T>(src, k, out, ctx, ws);
    return src.e_out != nullptr;
  }

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
  if (found.overflow || found.count < k) {
    top_k_indices_radix<T>(src, k, out, ctx, ws);
    return src.e_out != nullptr;
  }
  if (found.max_key >= inf_key<T>) src.fail(ctx);

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
  return false;
}

/// Whether the codec carries a value of T exactly (its native encoding: q = v), so that error
/// feedback's e - q is v - v at every kept index.
template <tensor_element T>
bool carries_exactly(const value_codec& c) noexcept {
  return c.wire_encoding<T>() == native_encoding<T>;
}

/// The write pass of error feedback with the kept values folded in, for a codec that carries
/// them exactly: pass(begin, end) writes e = v over [begin, end), chunk by chunk from the end
/// backwards (chunks read forwards: the last part of the inputs that the selection read is still
/// in cache; chunks of 64Ki elements keep the hardware prefetcher streaming). While a chunk is in
/// cache, each kept index i of it puts v_i into m's payload and sets e_i = v_i - v_i: the bits of
/// encoding the values afterwards and subtracting q = v, without a gather and a scatter over the
/// whole of e. m.indices (ascending, below d) must be set; m.count, the index encoding and the
/// value section are filled here.
template <tensor_element T, class Pass>
void write_pass_with_values(std::size_t d, Pass&& pass, T* e, message& m, index_encoding indices) {
  m.dim = static_cast<std::uint32_t>(d);
  finish_indices(m, indices);
  m.value_enc = native_encoding<T>;
  m.levels = 0;
  m.scale = 0.0f;
  m.payload.assign(payload_bytes(m.value_enc, 0, m.count), std::byte{0});  // before any write
  constexpr std::size_t chunk = 65536;
  const std::uint32_t* const idx = m.indices.data();
  std::byte* const out = m.payload.data();
  std::size_t j = m.count;
  for (std::size_t end = d; end > 0;) {
    const std::size_t begin = end > chunk ? end - chunk : 0;
    pass(begin, end);
    for (; j > 0 && idx[j - 1] >= begin; --j) {
      T* const at = e + idx[j - 1];
      const T v = *at;
      std::memcpy(out + sizeof(T) * (j - 1), &v, sizeof(T));
      *at = v - v;
    }
    end = begin;
  }
}

}  // namespace detail

/// Exact top-K by magnitude, ties to the lower index; values in any value encoding.
struct top_k {
  k_spec k = k_spec::fraction(0.01);  ///< how many values to keep: a count, or a fraction of d (default 1%)
  value_codec values{};  ///< how the kept values travel
  /// How the indices travel (automatic: the smaller of raw_u32 and delta_varint).
  index_encoding indices = index_encoding::automatic;
  /// Per-layer selection: starts of the segments (first 0, ascending), each keeping the fraction
  /// k of its own elements (k must be a fraction). Empty: one global top-K. The kept values of all
  /// segments travel in one message.
  std::vector<std::size_t> segments{};

  /// Throw what compress would throw for this configuration at dimension d.
  void validate(std::size_t d, const context& ctx) const { checked_k(d, ctx); }

  /// The k largest |v[i]| (ties to the lower index) and their values, into out. Throws config_error
  /// for k > d or a bad setting, size_error for an empty v or d >= 2^32, non_finite_error for NaN or
  /// infinity in v.
  template <tensor_element T>
  void compress(std::span<const T> v, message& out, const context& ctx, compress_workspace<T>& ws) const {
    const std::size_t kk = checked_k(v.size(), ctx);
    if (segments.empty())
      detail::top_k_indices<T>(detail::selection_source<T, false, false>{.x = v.data(), .d = v.size()}, kk,
                               out.indices, ctx, ws);
    else select_segments<T, false>(v, {}, out.indices, ctx, ws);
    finish(v, out, ctx);
  }

  /// Fused error feedback: v = x + e; q = C(v); e = v - q (see error_feedback.hpp).
  template <tensor_element T>
  void compress_feedback(std::span<const T> x, std::span<T> e, message& out, const context& ctx,
                         compress_workspace<T>& ws) const {
    const std::size_t kk = checked_k(x.size(), ctx);
    if (segments.empty()) {
      const bool wrote = detail::top_k_indices<T>(  // throws before any write
          detail::selection_source<T, true, false>{.x = x.data(), .e = e.data(), .e_out = e.data(), .d = x.size()}, kk,
          out.indices, ctx, ws);
      if (!wrote) {
        const T* const xp = x.data();
        T* const ep = e.data();
        auto pass = [xp, ep](std::size_t b, std::size_t end) { detail::feedback_pass(xp, ep, b, end); };
        if (detail::carries_exactly<T>(values)) {
          detail::write_pass_with_values<T>(x.size(), pass, ep, out, indices);
          return;
        }
        pass(0, x.size());
      }
    } else {
      // every segment is checked before the first one writes e
      for (std::size_t i = 0; i < x.size(); ++i)
        if (!std::isfinite(x[i] + e[i])) detail::throw_non_finite(double(x[i] + e[i]), i, ctx, "x + e");
      select_segments<T, true>(x, e, out.indices, ctx, ws);
    }
    finish(std::span<const T>(e), out, ctx);
    for_each_value<T>(out, [e](std::uint32_t i, T q) { e[i] -= q; });
  }

  /// Whether plan_step and apply_step serve this configuration: a global selection (per-layer
  /// top-K takes the unfused path).
  bool fuses_step() const noexcept { return segments.empty(); }

  /// The local step fused with error feedback (docs/design/algorithms.md, Sparse-Push steps 1 and 2), first
  /// planned: the indices of the k largest |v|, v = (x - gamma p) + e (the product rounded on its
  /// own, as the node's plain step rounds it), into plan, reading x, p and e once and writing
  /// nothing else. Throws what compress_feedback throws, and non_finite_error naming the first
  /// bad element (a bad p as the "local direction", else "x + e"), before anything is written.
  template <tensor_element T>
  void plan_step(std::span<const T> x, std::span<const T> p, T gamma, std::span<const T> e,
                 std::vector<std::uint32_t>& plan, const context& ctx, compress_workspace<T>& ws) const {
    const std::size_t kk = checked_step(x.size(), p.size(), e.size(), ctx);
    if (!std::isfinite(gamma)) throw config_error("learning rate is not finite at " + ctx.where());
    detail::top_k_indices<T>(
        detail::selection_source<T, true, true>{.x = x.data(), .e = e.data(), .p = p.data(), .g = gamma, .d = x.size()},
        kk, plan, ctx, ws);
  }

  /// ... then applied, in one pass over x, p and e: x <- x - gamma p, e <- x + e; then q carries
  /// e's values at the plan's indices and e -= q. The bits are those of x -= gamma p followed by
  /// compress_feedback(x, e, q). plan must be plan_step's for the same x, p, gamma and e (checked:
  /// k ascending indices below d), or config_error is thrown before anything is written.
  template <tensor_element T>
  void apply_step(std::span<T> x, std::span<const T> p, T gamma, std::span<T> e, std::span<const std::uint32_t> plan,
                  message& out, const context& ctx) const {
    const std::size_t kk = checked_step(x.size(), p.size(), e.size(), ctx);
    bool ascending = plan.size() == kk;
    for (std::size_t j = 0; ascending && j < plan.size(); ++j)
      ascending = plan[j] < x.size() && (j == 0 || plan[j - 1] < plan[j]);
    if (!ascending)
      throw config_error("fused top-K step at " + ctx.where() + ": the plan is not " + std::to_string(kk) +
                         " ascending indices below " + std::to_string(x.size()) + " (plan_step's output)");
    out.indices.assign(plan.begin(), plan.end());  // before any write: only bad_alloc can throw here
    T* const xp = x.data();
    T* const ep = e.data();
    const T* const pp = p.data();
    auto pass = [xp, pp, gamma, ep](std::size_t b, std::size_t end) { detail::step_pass(xp, pp, gamma, ep, b, end); };
    if (detail::carries_exactly<T>(values)) {
      detail::write_pass_with_values<T>(x.size(), pass, ep, out, indices);
      return;
    }
    pass(0, x.size());
    finish(std::span<const T>(e), out, ctx);
    for_each_value<T>(out, [e](std::uint32_t i, T q) { e[i] -= q; });
  }

 private:
  /// checked_k for the fused step, which needs a global selection and x, p, e of one size.
  std::size_t checked_step(std::size_t d, std::size_t dp, std::size_t de, const context& ctx) const {
    if (!fuses_step()) throw config_error("per-layer top-K has no fused step: use compress_feedback");
    if (dp != d || de != d)
      throw size_error("fused top-K step at " + ctx.where() + ": x has " + std::to_string(d) +
                       " elements, the direction " + std::to_string(dp) + " and the residual " + std::to_string(de));
    return checked_k(d, ctx);
  }

  /// Check the configuration at dimension d; k of a global selection (0 for per-layer).
  std::size_t checked_k(std::size_t d, const context& ctx) const {
    values.validate();
    detail::check_index_setting(indices);
    detail::check_dim(d, ctx);
    if (!segments.empty()) {
      if (!k.is_fraction())
        throw config_error("per-layer top-K needs k as a fraction, got the count " + k.to_string());
      if (segments.front() != 0)
        throw config_error("per-layer top-K: the first segment must start at 0, got " + std::to_string(segments.front()));
      for (std::size_t s = 1; s < segments.size(); ++s)
        if (segments[s] <= segments[s - 1] || segments[s] >= d)
          throw config_error("per-layer top-K: segment start " + std::to_string(segments[s]) +
                             " is not ascending or not below d = " + std::to_string(d) + " at " + ctx.where());
      return 0;
    }
    return k.resolve(d, ctx);
  }
  template <tensor_element T, bool Feedback>
  void select_segments(std::span<const T> x, std::span<T> e, std::vector<std::uint32_t>& out, const context& ctx,
                       compress_workspace<T>& ws) const {
    auto& part = ws.part;
    out.clear();
    for (std::size_t s = 0; s < segments.size(); ++s) {
      const std::size_t b = segments[s], end = s + 1 < segments.size() ? segments[s + 1] : x.size();
      const std::size_t kk = k.resolve(end - b, ctx);
      T* const eb = Feedback ? e.data() + b : nullptr;
      const bool wrote = detail::top_k_indices<T>(
          detail::selection_source<T, Feedback, false>{.x = x.data() + b, .e = eb, .e_out = eb, .d = end - b}, kk, part,
          ctx, ws);
      if (Feedback && !wrote) detail::feedback_pass(x.data(), e.data(), b, end);
      for (auto i : part) out.push_back(static_cast<std::uint32_t>(b + i));
    }
  }
  template <tensor_element T>
  void finish(std::span<const T> v, message& out, const context& ctx) const {
    out.dim = static_cast<std::uint32_t>(v.size());
    detail::finish_indices(out, indices);
    detail::compress_selected<T>(v, values, T(1), out, ctx);
  }
};

}  // namespace v0
}  // namespace sparsepush
