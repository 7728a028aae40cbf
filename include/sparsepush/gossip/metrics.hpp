// sparsepush/gossip/metrics.hpp: the metrics of push-sum nodes, in double, over the de-biased
// models xh_i = x_i / u_i (never rounded to T):
//   mean model            mean_i xh_i
//   parameter divergence  (1/n) sum_i || xh_i - mean ||_2
//   mass                  sum_i x_i (conserved by column-stochastic mixing)
// algorithm/metrics.hpp holds the same over plain models and includes this header.
#pragma once

#include <cmath>
#include <cstddef>
#include <span>
#include <vector>

#include "../tensor.hpp"

namespace sparsepush {
inline namespace v0 {

/// mean_i x_i / u_i, in double.
template <tensor_element T>
std::vector<double> debiased_mean(std::span<const std::span<const T>> xs, std::span<const double> us) {
  std::vector<double> avg(xs.empty() ? 0 : xs[0].size(), 0.0);
  for (std::size_t i = 0; i < xs.size(); ++i)
    for (std::size_t l = 0; l < avg.size(); ++l) avg[l] += static_cast<double>(xs[i][l]) / us[i];
  for (auto& a : avg) a /= static_cast<double>(xs.size());
  return avg;
}

/// (1/n) sum_i || x_i / u_i - mean ||_2, in double.
template <tensor_element T>
double debiased_divergence(std::span<const std::span<const T>> xs, std::span<const double> us) {
  const auto avg = debiased_mean<T>(xs, us);
  double total = 0.0;
  for (std::size_t i = 0; i < xs.size(); ++i) {
    double s = 0.0;
    for (std::size_t l = 0; l < avg.size(); ++l) {
      const double diff = static_cast<double>(xs[i][l]) / us[i] - avg[l];
      s += diff * diff;
    }
    total += std::sqrt(s);
  }
  return xs.empty() ? 0.0 : total / static_cast<double>(xs.size());
}

/// sum_i x_i, in double.
template <tensor_element T>
std::vector<double> mass(std::span<const std::span<const T>> xs) {
  std::vector<double> m(xs.empty() ? 0 : xs[0].size(), 0.0);
  for (const auto& x : xs)
    for (std::size_t l = 0; l < m.size(); ++l) m[l] += static_cast<double>(x[l]);
  return m;
}

}  // namespace v0
}  // namespace sparsepush
