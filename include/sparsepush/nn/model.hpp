// sparsepush/nn/model.hpp: a sequential model over one flat parameter buffer owned by the caller
// (the decentralized library treats the whole model as one tensor): "mlp" (784-256-128-10, ReLU),
// "cnn" (2 x [conv3x3 -> GroupNorm -> ReLU -> maxpool2], dense) and "cnn_evonorm" (EvoNorm-S0 in
// place of GroupNorm + ReLU), "cnn_range_evonorm" (Range-EvoNorm, arXiv 2111.09389). Quantized training
// (quantize.hpp) through a loss_and_grad overload. Mean softmax cross-entropy with its gradient; an inference path
// (logits, prediction: forward only, no backward caches, the training pass's logits bit for bit);
// the per-step device profile (parameters, activation bytes, FLOPs); float for training, double
// for checks. The named architectures are architectures.hpp's, the scratch workspace.hpp's and
// the profile's figures profile.hpp's.
#pragma once

#include <algorithm>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include "../config.hpp"
#include "architectures.hpp"
#include "layers.hpp"
#include "optimizer.hpp"
#include "profile.hpp"
#include "quantize.hpp"
#include "workspace.hpp"

namespace sparsepush {
inline namespace v0 {
namespace nn {

/// A sequential model of the reference backend (mlp, cnn, cnn_evonorm, cnn_range_evonorm, built by
/// make()) over one flat parameter buffer that the caller owns: the model holds the layers and
/// where each one's parameters start, never the parameters. Softmax cross-entropy loss with its
/// gradient, inference (logits, predict) and the per-step device profile.
class model {
 public:
  /// The names make() knows.
  static const std::vector<std::string>& known_names() { return detail::model_names(); }

  /// "mlp": dense 256, ReLU, dense 128, ReLU, dense classes.
  /// "cnn": conv3x3 (pad 1) 16 -> GroupNorm(4) -> ReLU -> maxpool2, conv3x3 32 -> GroupNorm(4)
  ///        -> ReLU -> maxpool2, flatten, dense classes (20,586 parameters on 1x28x28, 10 classes).
  /// "cnn_evonorm": as cnn with EvoNorm-S0 (4 groups) in place of GroupNorm + ReLU.
  /// "cnn_range_evonorm": as cnn with Range-EvoNorm (4 groups) in place of GroupNorm + ReLU.
  static model make(const std::string& name, std::size_t channels = 1, std::size_t rows = 28, std::size_t cols = 28,
                    std::size_t classes = 10) {
    return from_layers(name, {channels, rows, cols}, detail::named_layers(name, channels, rows, cols, classes));
  }

  /// A model from any chain of layers: each layer's input shape must be the previous one's
  /// output shape (the first's is `input`), and the last must output a vector of >= 2 classes.
  static model from_layers(std::string name, shape3 input, std::vector<layer> layers) {
    model m;
    m.name_ = std::move(name);
    m.input_ = input;
    m.layers_ = std::move(layers);
    const std::string where = "nn::model::from_layers(\"" + m.name_ + "\"): ";
    if (m.layers_.empty()) throw config_error(where + "no layers");
    shape3 s = input;
    std::size_t off = 0, act = 0;
    for (std::size_t i = 0; i < m.layers_.size(); ++i) {
      const shape3 lin = std::visit([](const auto& l) { return l.in_shape(); }, m.layers_[i]);
      if (!(lin == s))
        throw config_error(where + "layer " + std::to_string(i) + " expects input " + lin.str() + " but receives " +
                           s.str());
      s = std::visit([](const auto& l) { return l.out_shape(); }, m.layers_[i]);
      m.param_off_.push_back(off);
      off += std::visit([](const auto& l) { return l.num_params(); }, m.layers_[i]);
      m.act_off_.push_back(act);
      act += s.size();
      m.max_act_ = std::max(m.max_act_, std::max(s.size(), i ? std::size_t{0} : input.size()));
    }
    if (s.h != 1 || s.w != 1 || s.c < 2 || s.c > 256)
      throw config_error(where + "the last layer outputs " + s.str() + ", not a vector of 2..256 class logits");
    m.param_off_.push_back(off);
    m.act_total_ = act;
    m.classes_ = s.c;
    return m;
  }

  /// The name it was made with ("mlp", "cnn", ...).
  const std::string& name() const { return name_; }
  /// The length of the flat parameter buffer every call takes.
  std::size_t num_params() const { return param_off_.back(); }
  /// The number of classes (outputs of the last layer).
  std::size_t num_classes() const { return classes_; }
  /// The elements of one input image: input_shape().size().
  std::size_t input_size() const { return input_.size(); }
  /// The shape of one input image (1 x 28 x 28 for Fashion-MNIST).
  shape3 input_shape() const { return input_; }
  /// The layers, in order.
  const std::vector<layer>& layers() const { return layers_; }
  /// Where layer i's parameters start in the flat buffer (i == layers().size(): num_params()).
  std::size_t param_offset(std::size_t i) const { return param_off_.at(i); }

  /// He/Kaiming normal weights, zero biases, unit norm scales; deterministic by seed
  /// (std::mt19937_64 + Box-Muller), layer by layer in buffer order.
  template <std::floating_point T>
  void init(std::span<T> params, std::uint64_t seed) const {
    check_params(params.size(), "init");
    normal_rng rng(seed);
    for (std::size_t i = 0; i < layers_.size(); ++i)
      std::visit([&](const auto& l) { l.init(params.data() + param_off_[i], rng); }, layers_[i]);
  }
  /// init() for a float buffer (the training path's type).
  void init(std::span<float> params, std::uint64_t seed) const { init<float>(params, seed); }

  /// Mean softmax cross-entropy over the batch; grad (same size as params) is overwritten with
  /// d(loss)/d(params).
  float loss_and_grad(std::span<const float> params, const float* images, const std::uint8_t* labels,
                      std::size_t batch, std::span<float> grad, workspace& ws) const {
    check_grad(params.size(), grad.size());
    return float(run<float>(params, images, labels, batch, grad.data(), ws, "loss_and_grad"));
  }
  /// The same in double (the gradient checks' precision).
  double loss_and_grad(std::span<const double> params, const double* images, const std::uint8_t* labels,
                       std::size_t batch, std::span<double> grad, workspace& ws) const {
    check_grad(params.size(), grad.size());
    return run<double>(params, images, labels, batch, grad.data(), ws, "loss_and_grad");
  }

  /// As above with quantized training (quantize.hpp): q.bits == 0 is exactly the overload above;
  /// otherwise weights and activations are rounded to q.bits (nearest) and the back-propagated
  /// errors stochastically with counter_rng(q.seed, q.node, q.round). Throws config_error for bits
  /// outside {0} and [4, 16].
  float loss_and_grad(std::span<const float> params, const float* images, const std::uint8_t* labels,
                      std::size_t batch, std::span<float> grad, workspace& ws, const quantization& q) const {
    check_grad(params.size(), grad.size());
    return float(run<float>(params, images, labels, batch, grad.data(), ws, "loss_and_grad", &q));
  }
  /// The same in double.
  double loss_and_grad(std::span<const double> params, const double* images, const std::uint8_t* labels,
                       std::size_t batch, std::span<double> grad, workspace& ws, const quantization& q) const {
    check_grad(params.size(), grad.size());
    return run<double>(params, images, labels, batch, grad.data(), ws, "loss_and_grad", &q);
  }

  /// Mean softmax cross-entropy of `batch` images (batch x input_size() values) and their labels,
  /// forward only: nothing is written but ws. Throws size_error when params is not num_params() long
  /// or batch is 0, config_error for null images or labels or a label out of range.
  float loss(std::span<const float> params, const float* images, const std::uint8_t* labels, std::size_t batch,
             workspace& ws) const {
    return float(run<float>(params, images, labels, batch, nullptr, ws, "loss"));
  }
  /// The same in double.
  double loss(std::span<const double> params, const double* images, const std::uint8_t* labels, std::size_t batch,
              workspace& ws) const {
    return run<double>(params, images, labels, batch, nullptr, ws, "loss");
  }

  /// Images the inference path pushes through all layers at a time (its buffers hold two
  /// activations of this many images, about 0.8 MB for the cnn): small enough to stay in cache.
  static constexpr std::size_t inference_chunk = 8;

  /// Inference: the logits of `batch` images into out (batch x num_classes()), forward only, with
  /// no backward caches and no gradient buffers, in chunks of inference_chunk images whatever the
  /// batch. Every layer computes a sample independently of its batch, so these are the same bits
  /// as the training forward pass (loss, loss_and_grad) gives.
  void logits(std::span<const float> params, const float* images, std::size_t batch, float* out,
              workspace& ws) const {
    logits_impl<float>(params, images, batch, out, ws, "logits");
  }
  /// The same in double.
  void logits(std::span<const double> params, const double* images, std::size_t batch, double* out,
              workspace& ws) const {
    logits_impl<double>(params, images, batch, out, ws, "logits");
  }

  /// out[b] = argmax of the logits of image b (the lowest class on ties); the inference path.
  void predict(std::span<const float> params, const float* images, std::size_t batch, std::uint8_t* out,
               workspace& ws) const {
    predict_impl<float>(params, images, batch, out, ws);
  }
  /// The same in double.
  void predict(std::span<const double> params, const double* images, std::size_t batch, std::uint8_t* out,
               workspace& ws) const {
    predict_impl<double>(params, images, batch, out, ws);
  }

  /// How many of the batch predict() gets right.
  std::size_t count_correct(std::span<const float> params, const float* images, const std::uint8_t* labels,
                            std::size_t batch, workspace& ws) const {
    check_labels(labels, batch, "count_correct");
    std::vector<std::uint8_t> pred(batch);
    predict(params, images, batch, pred.data(), ws);
    std::size_t ok = 0;
    for (std::size_t b = 0; b < batch; ++b) ok += pred[b] == labels[b];
    return ok;
  }

  /// Section 6 device profile of one local step at this batch size (float storage). Activations
  /// are every layer's output kept for backward; FLOPs count forward, backward (no input
  /// gradient for the first layer) and the loss, linear in batch.
  /// With bits (0 or 32: fp32, else 4..16): the reductions and compute energy at that precision.
  device_profile profile(std::size_t batch, unsigned bits = 32) const {
    if (bits != 32) quantization{bits}.validate("nn::model::profile");
    if (bits == 0) bits = 32;
    device_profile p;
    p.bits = bits;
    p.memory_reduction = p.compute_reduction = p.communication_reduction = 32.0 / double(bits);
    p.compute_energy_reduction = mac_energy_pj(32) / mac_energy_pj(bits);
    p.parameters = num_params();
    p.activation_bytes = act_total_ * batch * sizeof(float);
    double per_sample = 5.0 * double(classes_);  // softmax cross-entropy and its gradient
    for (std::size_t i = 0; i < layers_.size(); ++i)
      per_sample += std::visit([&](const auto& l) { return l.flops_forward() + l.flops_backward(i > 0); }, layers_[i]);
    p.flops = per_sample * double(batch);
    p.compute_energy_joules = p.flops / 2 * mac_energy_pj(bits) * 1e-12;
    return p;
  }

  /// A summary line, then one line per layer with shapes and parameter counts.
  std::string describe() const {
    std::string s = name_ + ": input " + input_.str() + ", " + std::to_string(classes_) + " classes, " +
                    std::to_string(num_params()) + " params\n";
    for (std::size_t i = 0; i < layers_.size(); ++i)
      s += "  " + std::to_string(i) + ": " + std::visit([](const auto& l) { return l.describe(); }, layers_[i]) + "\n";
    return s;
  }

 private:
  model() = default;

  void check_params(std::size_t n, const char* fn) const {
    if (n != num_params())
      throw size_error("nn::model(\"" + name_ + "\")::" + fn + ": params has " + std::to_string(n) +
                       " elements, the model has " + std::to_string(num_params()));
  }
  void check_grad(std::size_t params, std::size_t grad) const {
    if (grad != params)
      throw size_error("nn::model(\"" + name_ + "\")::loss_and_grad: grad has " + std::to_string(grad) +
                       " elements, params has " + std::to_string(params));
  }
  void check_batch(const void* images, std::size_t batch, const char* fn) const {
    if (batch == 0) throw size_error("nn::model(\"" + name_ + "\")::" + fn + ": empty batch");
    if (!images) throw config_error("nn::model(\"" + name_ + "\")::" + fn + ": images is null");
  }
  void check_labels(const std::uint8_t* labels, std::size_t batch, const char* fn) const {
    if (!labels) throw config_error("nn::model(\"" + name_ + "\")::" + fn + ": labels is null");
    for (std::size_t b = 0; b < batch; ++b)
      if (labels[b] >= classes_)
        throw config_error("nn::model(\"" + name_ + "\")::" + fn + ": label " + std::to_string(labels[b]) +
                           " of batch item " + std::to_string(b) + " is not below " + std::to_string(classes_) +
                           " classes");
  }

  /// Forward through every layer; returns the logits (inside ws).
  /// act_bits != 0: every output but the logits is rounded to act_bits (nearest) in place, so
  /// the next layer and the backward pass see the quantized activation.
  /// Without act_bits, group_norm, relu and a 2x2 max pool run as one (fused_in_training): only the
  /// pool's output is written, and the norm's statistics are kept for backward.
  template <std::floating_point T>
  const T* forward(const T* params, const T* images, std::size_t batch, detail::net_scratch<T>& s,
                   unsigned act_bits = 0) const {
    T* acts = detail::grow(s.acts, act_total_ * batch);
    if (s.norm_stats.size() < layers_.size()) s.norm_stats.resize(layers_.size());
    const T* x = images;
    for (std::size_t i = 0; i < layers_.size(); ++i) {
      if (!act_bits && fused_in_training(i)) {
        const auto& gn = std::get<group_norm>(layers_[i]);
        T* y = acts + act_off_[i + 2] * batch;
        double* stats = detail::grow(s.norm_stats[i], 2 * batch * gn.groups);
        gn.forward_relu_max_pool2(params + param_off_[i], x, y, batch, stats);
        x = y;
        i += 2;
        continue;
      }
      T* y = acts + act_off_[i] * batch;
      std::visit([&](const auto& l) { l.forward(params + param_off_[i], x, y, batch, s.layer); }, layers_[i]);
      if (act_bits && i + 1 < layers_.size())
        quantize_nearest(std::span<T>(y, out_size(i) * batch), act_bits, "nn::model: activation");
      x = y;
    }
    return x;
  }

  /// Per-sample output size of layer i.
  std::size_t out_size(std::size_t i) const {
    return (i + 1 < layers_.size() ? act_off_[i + 1] : act_total_) - act_off_[i];
  }

  template <std::floating_point T>
  double run(std::span<const T> params, const T* images, const std::uint8_t* labels, std::size_t batch, T* grad,
             workspace& ws, const char* fn, const quantization* q = nullptr) const {
    check_params(params.size(), fn);
    check_batch(images, batch, fn);
    check_labels(labels, batch, fn);
    const unsigned bits = q ? q->bits : 0;
    if (q) q->validate(("nn::model(\"" + name_ + "\")::" + fn).c_str());
    if (bits && grad && layers_.size() > 1024)  // one stochastic-rounding lane per layer
      throw config_error("nn::model(\"" + name_ + "\")::" + fn + ": quantized training rounds the errors of at most "
                         "1024 layers, the model has " + std::to_string(layers_.size()));
    auto& s = ws.get<T>();
    if (bits) {  // the B-bit copy of the weights, one tensor per layer
      T* qp = detail::grow(s.qparams, params.size());
      std::copy(params.begin(), params.end(), qp);
      for (std::size_t i = 0; i < layers_.size(); ++i)
        if (param_off_[i + 1] > param_off_[i])
          quantize_nearest(std::span<T>(qp + param_off_[i], param_off_[i + 1] - param_off_[i]), bits,
                           "nn::model: weights");
      params = std::span<const T>(qp, params.size());
    }
    const T* logits = forward(params.data(), images, batch, s, bits);
    if (!grad) return softmax_cross_entropy<T>(logits, labels, batch, classes_, nullptr);
    T* ga = detail::grow(s.grad_a, max_act_ * batch);
    T* gb = detail::grow(s.grad_b, max_act_ * batch);
    const double loss = softmax_cross_entropy<T>(logits, labels, batch, classes_, ga);
    for (std::size_t i = layers_.size(); i-- > 0;) {
      if (!bits && i >= 2 && fused_in_training(i - 2)) {  // pool i, relu i - 1, group_norm i - 2 as one
        i -= 2;
        std::get<group_norm>(layers_[i]).backward_relu_max_pool2(
            params.data() + param_off_[i], s.acts.data() + act_off_[i - 1] * batch, s.norm_stats[i].data(), ga, gb,
            grad + param_off_[i], batch, s.layer);
        std::swap(ga, gb);
        continue;
      }
      const T* x = i ? s.acts.data() + act_off_[i - 1] * batch : images;
      const T* y = s.acts.data() + act_off_[i] * batch;
      T* dx = i ? gb : nullptr;
      if (bits) {  // the back-propagated error of layer i's output, stochastic rounding
        const ::sparsepush::detail::counter_rng rng(q->seed, q->node, q->round,
                                                   ::sparsepush::detail::rng_stream::gradient_quantization);
        quantize_stochastic(std::span<T>(ga, out_size(i) * batch), bits, rng, "nn::model: gradient",
                            static_cast<std::uint32_t>(i) * quantization_lane_blocks);  // lane i
      }
      std::visit([&](const auto& l) { l.backward(params.data() + param_off_[i], x, y, ga, dx, grad + param_off_[i], batch, s.layer); },
                 layers_[i]);
      std::swap(ga, gb);
    }
    return loss;
  }

  /// Layers i, i + 1, i + 2 are group_norm, relu and a 2x2 max pool of stride 2: the inference
  /// path runs them as one (group_norm::forward_relu_max_pool2, the same bits).
  bool fused_norm_relu_pool(std::size_t i) const {
    if (i + 2 >= layers_.size() || !std::holds_alternative<group_norm>(layers_[i]) ||
        !std::holds_alternative<relu>(layers_[i + 1]))
      return false;
    const auto* pool = std::get_if<max_pool2d>(&layers_[i + 2]);
    return pool && pool->k == 2 && pool->stride == 2;
  }

  /// The same triple in training (forward() and run() without quantization), but for a group_norm
  /// that is the first layer: the fused backward pass always has an input gradient to write.
  bool fused_in_training(std::size_t i) const { return i > 0 && fused_norm_relu_pool(i); }

  template <std::floating_point T>
  void logits_impl(std::span<const T> params, const T* images, std::size_t batch, T* out, workspace& ws,
                   const char* fn) const {
    check_params(params.size(), fn);
    check_batch(images, batch, fn);
    if (!out) throw config_error("nn::model(\"" + name_ + "\")::" + fn + ": out is null");
    auto& s = ws.get<T>();
    const std::size_t chunk = std::min(batch, inference_chunk);
    T* a = detail::grow(s.infer_a, max_act_ * chunk);
    T* b = detail::grow(s.infer_b, max_act_ * chunk);
    // dense layers: their weights packed once for all chunks
    if (s.infer_packed.size() < layers_.size()) s.infer_packed.resize(layers_.size());
    std::vector<const T*> packed(layers_.size(), nullptr);
    for (std::size_t i = 0; i < layers_.size(); ++i)
      if (const auto* d = std::get_if<dense>(&layers_[i])) packed[i] = d->pack(params.data() + param_off_[i], s.infer_packed[i]);
    for (std::size_t at = 0; at < batch; at += chunk) {
      const std::size_t nb = std::min(chunk, batch - at);
      const T* x = images + at * input_.size();
      bool into_a = true;
      for (std::size_t i = 0; i < layers_.size(); ++i) {
        const std::size_t fused = fused_norm_relu_pool(i) ? 2 : 0;  // layers i + 1, i + 2 run inside i
        T* y = i + fused + 1 == layers_.size() ? out + at * classes_ : (into_a ? a : b);
        const T* p = params.data() + param_off_[i];
        if (fused) std::get<group_norm>(layers_[i]).forward_relu_max_pool2(p, x, y, nb);
        else if (packed[i]) std::get<dense>(layers_[i]).forward_packed(packed[i], x, y, nb);
        else std::visit([&](const auto& l) { l.forward(p, x, y, nb, s.layer); }, layers_[i]);
        x = y;
        into_a = !into_a;
        i += fused;
      }
    }
  }

  template <std::floating_point T>
  void predict_impl(std::span<const T> params, const T* images, std::size_t batch, std::uint8_t* out,
                    workspace& ws) const {
    check_params(params.size(), "predict");
    check_batch(images, batch, "predict");
    if (!out) throw config_error("nn::model(\"" + name_ + "\")::predict: out is null");
    auto& s = ws.get<T>();
    const std::size_t chunk = 256;  // logits of up to 256 images at a time
    T* logits = detail::grow(s.logits, std::min(batch, chunk) * classes_);
    for (std::size_t at = 0; at < batch; at += chunk) {
      const std::size_t nb = std::min(chunk, batch - at);
      logits_impl<T>(params, images + at * input_.size(), nb, logits, ws, "predict");
      for (std::size_t b = 0; b < nb; ++b) {
        const T* z = logits + b * classes_;
        out[at + b] = static_cast<std::uint8_t>(std::max_element(z, z + classes_) - z);
      }
    }
  }

  std::string name_;
  shape3 input_{};
  std::size_t classes_ = 0;
  std::vector<layer> layers_;
  std::vector<std::size_t> param_off_;  ///< per layer, then the total
  std::vector<std::size_t> act_off_;    ///< per-sample offset of each layer's output
  std::size_t act_total_ = 0;           ///< per-sample floats of all outputs
  std::size_t max_act_ = 0;             ///< largest per-sample input or output of a layer
};

}  // namespace nn
}  // namespace v0
}  // namespace sparsepush
