// sparsepush/algorithm/oracle.hpp: the local-update hook and the metrics every algorithm shares.
// A gradient oracle is the user's backend: given node i, round t and the model to evaluate at
// (de-biased xh_i = x_i / u_i for push-sum methods), it writes the direction p_i (a gradient,
// or what the backend's optimizer makes of it); the algorithm then moves x_i' = x_i - gamma p_i.
// Parameter divergence: (1/n) sum_i || xh_i - mean(xh) ||_2.
#pragma once

#include <cmath>
#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "../tensor.hpp"

namespace sparsepush {
inline namespace v0 {

/// direction = p_i(model) for node `node` in round `round`.
template <tensor_element T>
using gradient_oracle =
    std::function<void(std::uint32_t node, std::uint32_t round, std::span<const T> model, std::span<T> direction)>;

/// mean of the models, in double.
template <tensor_element T>
std::vector<double> mean_model(const std::vector<std::vector<T>>& models) {
  std::vector<double> avg(models.empty() ? 0 : models[0].size(), 0.0);
  for (const auto& m : models)
    for (std::size_t l = 0; l < avg.size(); ++l) avg[l] += static_cast<double>(m[l]);
  for (auto& a : avg) a /= static_cast<double>(models.size());
  return avg;
}

/// (1/n) sum_i || m_i - mean ||_2, in double.
template <tensor_element T>
double parameter_divergence(const std::vector<std::vector<T>>& models) {
  const auto avg = mean_model(models);
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

}  // namespace v0
}  // namespace sparsepush
