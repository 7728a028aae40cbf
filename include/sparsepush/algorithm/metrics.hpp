// sparsepush/algorithm/metrics.hpp: the metrics every algorithm reports, in one place, in double:
//   mean model            mean_i m_i
//   parameter divergence  (1/n) sum_i || m_i - mean ||_2
// and, from gossip/metrics.hpp, their push-sum forms over de-biased models xh_i = x_i / u_i and
// the mass sum_i x_i.
#pragma once

#include <cmath>
#include <span>
#include <vector>

#include "../gossip/metrics.hpp"
#include "../tensor.hpp"

namespace sparsepush {
inline namespace v0 {

/// mean of the models, in double.
template <tensor_element T>
std::vector<double> mean_model(std::span<const std::span<const T>> models) {
  std::vector<double> avg(models.empty() ? 0 : models[0].size(), 0.0);
  for (const auto& m : models)
    for (std::size_t l = 0; l < avg.size(); ++l) avg[l] += static_cast<double>(m[l]);
  for (auto& a : avg) a /= static_cast<double>(models.size());
  return avg;
}

/// (1/n) sum_i || m_i - mean ||_2, in double.
template <tensor_element T>
double parameter_divergence(std::span<const std::span<const T>> models) {
  const auto avg = mean_model<T>(models);
  double total = 0.0;
  for (const auto& m : models) {
    double s = 0.0;
    for (std::size_t l = 0; l < avg.size(); ++l) {
      const double diff = static_cast<double>(m[l]) - avg[l];
      s += diff * diff;
    }
    total += std::sqrt(s);
  }
  return models.empty() ? 0.0 : total / static_cast<double>(models.size());
}

/// parameter_divergence of n models of d elements that model(i, out) writes one at a time into a
/// buffer (each model is asked for twice): the same value, bit for bit, in O(d) memory instead of
/// O(n d).
template <tensor_element T, class F>
double parameter_divergence_of(std::size_t n, std::size_t d, F&& model) {
  if (n == 0) return 0.0;
  std::vector<T> m(d);
  std::vector<double> avg(d, 0.0);
  for (std::size_t i = 0; i < n; ++i) {
    model(i, std::span<T>(m));
    for (std::size_t l = 0; l < d; ++l) avg[l] += static_cast<double>(m[l]);
  }
  for (auto& a : avg) a /= static_cast<double>(n);
  double total = 0.0;
  for (std::size_t i = 0; i < n; ++i) {
    model(i, std::span<T>(m));
    double s = 0.0;
    for (std::size_t l = 0; l < d; ++l) {
      const double diff = static_cast<double>(m[l]) - avg[l];
      s += diff * diff;
    }
    total += std::sqrt(s);
  }
  return total / static_cast<double>(n);
}

namespace detail {
template <tensor_element T>
std::vector<std::span<const T>> spans_of(const std::vector<std::vector<T>>& models) {
  return std::vector<std::span<const T>>(models.begin(), models.end());
}
}  // namespace detail

/// mean of the models, in double.
template <tensor_element T>
std::vector<double> mean_model(const std::vector<std::vector<T>>& models) {
  return mean_model<T>(detail::spans_of(models));
}

/// (1/n) sum_i || m_i - mean ||_2, in double.
template <tensor_element T>
double parameter_divergence(const std::vector<std::vector<T>>& models) {
  return parameter_divergence<T>(detail::spans_of(models));
}

}  // namespace v0
}  // namespace sparsepush
