// sparsepush/algorithm/metrics.hpp: the metrics every algorithm reports, in one place, in double:
//   mean model            mean_i m_i
//   parameter divergence  (1/n) sum_i || m_i - mean ||_2
//   push-sum forms of both over de-biased models xh_i = x_i / u_i (never rounded to T)
//   mass                  sum_i x_i (conserved by column-stochastic mixing)
#pragma once

#include <cmath>
#include <span>
#include <vector>

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
