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
// without writing anything, then one pass writes x and e. The selection lives in detail/:
// top_k_keys.hpp (keys and sources), top_k_sampled.hpp (main path), top_k_radix.hpp (radix path).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "common.hpp"
#include "detail/top_k_keys.hpp"
#include "detail/top_k_radix.hpp"
#include "detail/top_k_sampled.hpp"

namespace sparsepush {
inline namespace v0 {
namespace detail {

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
