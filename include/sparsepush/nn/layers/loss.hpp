// sparsepush/nn/layers/loss.hpp: the loss of the reference backend, the numerically stable mean
// softmax cross-entropy (log-sum-exp shifted by the row maximum) and its gradient in the logits.
#pragma once

#include <algorithm>
#include <cmath>
#include <concepts>
#include <cstddef>
#include <cstdint>

namespace sparsepush {
inline namespace v0 {
namespace nn {

/// Mean softmax cross-entropy of `batch` rows of `classes` logits (log-sum-exp shifted by the
/// row maximum). When dlogits is not null it receives d(mean loss)/d(logits) = (softmax - onehot) / batch.
/// Labels must be below `classes` (the model checks them).
template <std::floating_point T>
double softmax_cross_entropy(const T* logits, const std::uint8_t* labels, std::size_t batch, std::size_t classes,
                             T* dlogits) {
  double total = 0;
  const double inv_b = 1.0 / double(batch);
  for (std::size_t b = 0; b < batch; ++b) {
    const T* z = logits + b * classes;
    const double zmax = double(*std::max_element(z, z + classes));
    double sum = 0;
    for (std::size_t c = 0; c < classes; ++c) sum += std::exp(double(z[c]) - zmax);
    const double lse = zmax + std::log(sum);
    total += lse - double(z[labels[b]]);
    if (dlogits) {
      T* d = dlogits + b * classes;
      for (std::size_t c = 0; c < classes; ++c)
        d[c] = T((std::exp(double(z[c]) - lse) - (c == labels[b] ? 1.0 : 0.0)) * inv_b);
    }
  }
  return total * inv_b;
}

}  // namespace nn
}  // namespace v0
}  // namespace sparsepush
