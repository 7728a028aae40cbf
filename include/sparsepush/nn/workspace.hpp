// sparsepush/nn/workspace.hpp: what a model is made of and works in: `layer`, any layer of
// layers.hpp, and nn::workspace, the per-thread scratch of a model's passes (activations, gradient
// ping-pong buffers, the inference chunks, quantized weights), reused across calls and models.
#pragma once

#include <concepts>
#include <type_traits>
#include <variant>
#include <vector>

#include "layers.hpp"

namespace sparsepush {
inline namespace v0 {
namespace nn {

/// Any layer of layers.hpp.
using layer = std::variant<dense, conv2d, max_pool2d, avg_pool2d, global_avg_pool, relu, flatten, group_norm,
                           evo_norm_s0, range_evo_norm>;

namespace detail {
template <std::floating_point T>
struct net_scratch {
  std::vector<T> acts;            ///< every layer's output, batch-major per layer
  std::vector<T> grad_a, grad_b;  ///< ping-pong buffers of d(loss)/d(activation)
  layer_scratch<T> layer;
  std::vector<T> infer_a, infer_b;  ///< inference: ping-pong activations of one chunk
  std::vector<T> logits;            ///< inference: the logits of predict() and count_correct()
  std::vector<std::vector<T>> infer_packed;  ///< inference: each dense layer's packed weights
  std::vector<T> qparams;                    ///< quantized training: the B-bit copy of the weights
  std::vector<std::vector<double>> norm_stats;  ///< training: each fused group_norm's mean and rstd per group
};
}  // namespace detail

/// Per-thread scratch of a model: default constructible, reusable across calls and models,
/// grows as needed (no allocation once it has seen the largest batch). Not shared across threads.
class workspace {
 public:
  /// The scratch of element type T (float or double).
  template <std::floating_point T>
  detail::net_scratch<T>& get() noexcept {
    static_assert(std::is_same_v<T, float> || std::is_same_v<T, double>, "nn::workspace holds float or double");
    if constexpr (std::is_same_v<T, float>) return f_;
    else return d_;
  }

 private:
  detail::net_scratch<float> f_;
  detail::net_scratch<double> d_;
};

}  // namespace nn
}  // namespace v0
}  // namespace sparsepush
