// sparsepush/data/partition.hpp: how a labelled dataset is split across n nodes (every sample to
// exactly one node, seeded and reproducible).
//   IID: a random permutation cut into n near-equal parts.
//   Skewed labels with skew s in [0, 1] (Hsieh et al. 2020): take fraction s of each class (a
//     random subset), sort those samples by label, cut them into n contiguous near-equal chunks,
//     one per node; spread the remaining 1 - s uniformly at random (a shuffled deal).
//   Dirichlet(alpha): for each class draw proportions p ~ Dir(alpha, ..., alpha) over the nodes
//     and split the class's shuffled samples by them (alpha -> infinity approaches IID).
// Randomness comes from std::mt19937_64 and hand-written samplers, so every platform agrees.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "../config.hpp"

namespace sparsepush {
inline namespace v0 {

/// Sample indices per node.
using partition = std::vector<std::vector<std::uint32_t>>;

namespace detail {
inline void check_partition_args(std::size_t samples, std::size_t n) {
  if (n < 1) throw config_error("a partition needs at least one node");
  if (samples < n)
    throw config_error("cannot split " + std::to_string(samples) + " samples across " + std::to_string(n) +
                       " nodes (fewer samples than nodes)");
}

/// Uniform integer in [0, bound] from a 64-bit engine (Lemire-free, exact rejection).
inline std::uint64_t uniform_below_or_equal(std::mt19937_64& g, std::uint64_t bound) {
  if (bound == ~std::uint64_t{0}) return g();
  const std::uint64_t range = bound + 1;
  const std::uint64_t limit = ~std::uint64_t{0} - (~std::uint64_t{0} % range) - 1;
  std::uint64_t r;
  do r = g();
  while (r > limit);
  return r % range;
}

/// Fisher-Yates shuffle with the exact sampler above (std::shuffle is implementation-defined).
inline void shuffle(std::vector<std::uint32_t>& v, std::mt19937_64& g) {
  for (std::size_t i = v.size(); i > 1; --i) std::swap(v[i - 1], v[uniform_below_or_equal(g, i - 1)]);
}

inline double uniform01(std::mt19937_64& g) { return static_cast<double>(g() >> 11) * (1.0 / 9007199254740992.0); }

inline double standard_normal(std::mt19937_64& g) {  // Box-Muller
  double u1;
  do u1 = uniform01(g);
  while (u1 <= 0.0);
  const double u2 = uniform01(g);
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
}

/// Gamma(shape, 1) by Marsaglia and Tsang (2000); shape < 1 via the boost u^(1/shape).
inline double gamma_sample(std::mt19937_64& g, double shape) {
  if (shape < 1.0) {
    double u;
    do u = uniform01(g);
    while (u <= 0.0);
    return gamma_sample(g, shape + 1.0) * std::pow(u, 1.0 / shape);
  }
  const double d = shape - 1.0 / 3.0, c = 1.0 / std::sqrt(9.0 * d);
  for (;;) {
    double x, v;
    do {
      x = standard_normal(g);
      v = 1.0 + c * x;
    } while (v <= 0.0);
    v = v * v * v;
    const double u = uniform01(g);
    if (u < 1.0 - 0.0331 * x * x * x * x) return d * v;
    if (u > 0.0 && std::log(u) < 0.5 * x * x + d * (1.0 - v + std::log(v))) return d * v;
  }
}

/// Cut `items` into n contiguous parts whose sizes differ by at most one (earlier parts larger).
inline void deal_contiguous(const std::vector<std::uint32_t>& items, partition& out) {
  const std::size_t n = out.size(), base = items.size() / n, extra = items.size() % n;
  std::size_t at = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const std::size_t len = base + (i < extra ? 1 : 0);
    out[i].insert(out[i].end(), items.begin() + static_cast<std::ptrdiff_t>(at),
                  items.begin() + static_cast<std::ptrdiff_t>(at + len));
    at += len;
  }
}

/// Per-class sample lists, each shuffled.
inline std::vector<std::vector<std::uint32_t>> classes_of(std::span<const std::uint8_t> labels, std::mt19937_64& g) {
  std::vector<std::vector<std::uint32_t>> cls;
  for (std::uint32_t i = 0; i < labels.size(); ++i) {
    if (labels[i] >= cls.size()) cls.resize(labels[i] + 1u);
    cls[labels[i]].push_back(i);
  }
  for (auto& c : cls) shuffle(c, g);
  return cls;
}
}  // namespace detail

/// IID: a seeded random permutation cut into n near-equal parts.
inline partition partition_iid(std::span<const std::uint8_t> labels, std::size_t n, std::uint64_t seed) {
  detail::check_partition_args(labels.size(), n);
  std::mt19937_64 g(seed);
  std::vector<std::uint32_t> all(labels.size());
  for (std::uint32_t i = 0; i < all.size(); ++i) all[i] = i;
  detail::shuffle(all, g);
  partition out(n);
  detail::deal_contiguous(all, out);
  return out;
}

/// Skewed labels with skew s (see the header comment); s = 0 is IID, s = 1 fully sorted.
inline partition partition_skewed(std::span<const std::uint8_t> labels, std::size_t n, double skew,
                                  std::uint64_t seed) {
  detail::check_partition_args(labels.size(), n);
  if (!(skew >= 0.0 && skew <= 1.0)) throw config_error("skew must be in [0, 1], got " + std::to_string(skew));
  std::mt19937_64 g(seed);
  const auto cls = detail::classes_of(labels, g);
  std::vector<std::uint32_t> sorted_pool, uniform_pool;
  for (const auto& c : cls) {
    const auto take = static_cast<std::size_t>(std::llround(skew * static_cast<double>(c.size())));
    sorted_pool.insert(sorted_pool.end(), c.begin(), c.begin() + static_cast<std::ptrdiff_t>(take));
    uniform_pool.insert(uniform_pool.end(), c.begin() + static_cast<std::ptrdiff_t>(take), c.end());
  }
  partition out(n);
  detail::deal_contiguous(sorted_pool, out);  // classes in label order: contiguous label ranges
  detail::shuffle(uniform_pool, g);
  detail::deal_contiguous(uniform_pool, out);
  return out;
}

/// Dirichlet(alpha) label partition (alpha > 0).
inline partition partition_dirichlet(std::span<const std::uint8_t> labels, std::size_t n, double alpha,
                                     std::uint64_t seed) {
  detail::check_partition_args(labels.size(), n);
  if (!(alpha > 0.0) || !std::isfinite(alpha))
    throw config_error("Dirichlet alpha must be a positive finite number, got " + std::to_string(alpha));
  std::mt19937_64 g(seed);
  const auto cls = detail::classes_of(labels, g);
  partition out(n);
  std::vector<double> p(n);
  for (const auto& c : cls) {
    double total = 0.0;
    for (auto& x : p) total += (x = detail::gamma_sample(g, alpha));
    // cumulative rounding: node i gets [round(C_{i-1} |c|), round(C_i |c|)) of the class
    double cum = 0.0;
    std::size_t start = 0;
    for (std::size_t i = 0; i < n; ++i) {
      cum += p[i] / total;
      const std::size_t end = i + 1 == n ? c.size()
                                         : std::min(c.size(), static_cast<std::size_t>(std::llround(cum * static_cast<double>(c.size()))));
      if (end > start) out[i].insert(out[i].end(), c.begin() + static_cast<std::ptrdiff_t>(start), c.begin() + static_cast<std::ptrdiff_t>(end));
      start = std::max(start, end);
    }
  }
  return out;
}

}  // namespace v0
}  // namespace sparsepush
