// sparsepush/compress/threshold.hpp: approximate top-K in one pass, as Deep Gradient
// Compression (Lin et al. 2018): estimate the k-th largest magnitude tau from a random sample of
// coordinates (sized for about 256 hits above tau), then send every coordinate with |v_i| >= tau
// (and |v_i| > 0). The count is close to k, not exact; when a poor estimate selects more than 2k, an exact top-k of the selected
// finishes (DGC's hierarchical selection), so a message never exceeds 2k values. When k/d is so
// small that a useful sample would cover over d/8 coordinates, exact top-K is used instead.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "../detail/philox.hpp"
#include "top_k.hpp"

namespace sparsepush {
inline namespace v0 {

/// Sample-estimated threshold sparsifier (about k values a message).
struct threshold_k {
  k_spec k = k_spec::fraction(0.01);  ///< the expected number of values kept: a count, or a fraction of d (default 1%)
  /// Expected sampled coordinates above tau: the sample size is m = sample_hits * d / k (at most
  /// d), so the kept count has a relative spread of about 1 / sqrt(sample_hits).
  std::uint32_t sample_hits = 256;
  value_codec values{};  ///< how the kept values travel
  /// How the indices travel (automatic: the smaller of raw_u32 and delta_varint).
  index_encoding indices = index_encoding::automatic;

  /// Throw what compress would throw for this configuration at dimension d.
  void validate(std::size_t d, const context& ctx) const { checked_k(d, ctx); }

  /// The values of v whose magnitude passes a threshold estimated from a sample (about k of them),
  /// into out; exact top-K where the sample would cost more. Throws as top_k::compress does.
  template <tensor_element T>
  void compress(std::span<const T> v, message& out, const context& ctx, compress_workspace<T>& ws) const {
    using K = detail::magnitude_key<T>;
    const std::size_t d = v.size();
    const std::size_t kk = checked_k(d, ctx);

    // The sample holds m = sample_hits * d / k coordinates. Where that is more than d / 8, the
    // exact two-pass top-K is cheaper than sampling, and is what we send.
    const double m_real = std::ceil(double(sample_hits) * double(d) / double(kk));
    if (m_real * 8 > static_cast<double>(d)) {
      top_k{k_spec::count(kk), values, indices}.compress(v, out, ctx, ws);
      return;
    }
    // Estimate tau: the (m k / d)-th largest magnitude key of the sample, drawn as random blocks
    // of 16 consecutive coordinates (one cache line of floats) so that sampling costs few misses.
    constexpr std::size_t block = 16;
    const std::size_t blocks = (static_cast<std::size_t>(m_real) + block - 1) / block;
    const std::size_t m = blocks * block;
    const detail::counter_rng rng(ctx.seed, ctx.node, ctx.round, detail::rng_stream::threshold_sample);
    auto& keys = ws.keys;
    keys.resize(m);
    const auto last_start = static_cast<std::uint32_t>(d - block);  // d >= 8 m >= 128
    for (std::size_t b = 0; b < blocks; ++b) {
      const std::size_t at = rng.uniform_int(static_cast<std::uint32_t>(b), last_start);
      for (std::size_t j = 0; j < block; ++j) keys[b * block + j] = detail::key_of(v[at + j]);
    }
    const std::size_t r = std::clamp<std::size_t>((m * kk + d / 2) / d, 1, m);
    std::nth_element(keys.begin(), keys.begin() + static_cast<std::ptrdiff_t>(r - 1), keys.end(),
                     std::greater<K>{});
    const K tau = std::max<K>(keys[r - 1], 1);

    // One pass: keep |v| >= tau, detect NaN/Inf.
    auto& sel = ws.sel;
    sel.clear();
    K bad = 0;
    for (std::size_t i = 0; i < d; ++i) {
      const K key = detail::key_of(v[i]);
      bad |= static_cast<K>(key >= detail::inf_key<T>);
      if (key >= tau) sel.push_back(static_cast<std::uint32_t>(i));
    }
    if (bad) detail::check_finite(v, ctx);
    if (sel.size() > 2 * kk) {  // estimate far too low: exact top-k among the selected
      auto& cand = ws.cand;
      cand.resize(sel.size());
      for (std::size_t j = 0; j < sel.size(); ++j) cand[j] = {detail::key_of(v[sel[j]]), sel[j]};
      std::nth_element(cand.begin(), cand.begin() + static_cast<std::ptrdiff_t>(kk), cand.end(),
                       detail::select_before<K>);
      sel.resize(kk);
      for (std::size_t j = 0; j < kk; ++j) sel[j] = cand[j].second;
      std::sort(sel.begin(), sel.end());
    }
    out.indices.assign(sel.begin(), sel.end());
    out.dim = static_cast<std::uint32_t>(d);
    detail::finish_indices(out, indices);
    detail::compress_selected<T>(v, values, T(1), out, ctx);
  }

 private:
  std::size_t checked_k(std::size_t d, const context& ctx) const {
    values.validate();
    detail::check_index_setting(indices);
    if (sample_hits == 0) throw config_error("threshold sample_hits must be at least 1");
    detail::check_dim(d, ctx);
    return k.resolve(d, ctx);
  }
};

}  // namespace v0
}  // namespace sparsepush
