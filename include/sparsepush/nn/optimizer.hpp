// sparsepush/nn/optimizer.hpp: the local optimizer of the training backend. sgd turns a gradient
// into a direction (heavy-ball or Nesterov momentum, L2 weight decay) that the caller applies as
// x -= lr * direction; lr_schedule gives the learning rate of round t (constant, step, cosine,
// optional linear warm-up).
#pragma once

#include <algorithm>
#include <cmath>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <numbers>
#include <span>
#include <string>
#include <vector>

#include "../config.hpp"

namespace sparsepush {
inline namespace v0 {
namespace nn {

/// SGD with momentum: p = g + wd x; v = momentum v + p; out = nesterov ? p + momentum v : v
/// (v updated in place). out may alias grad, not velocity (when nesterov).
struct sgd {
  double momentum = 0.9;  ///< the momentum factor, in [0, 1)
  bool nesterov = false;  ///< Nesterov momentum: out = p + momentum v instead of v
  double weight_decay = 0.0;  ///< the L2 factor wd added to the gradient (wd x), finite and >= 0

  /// The step direction of gradient grad at params into out, updating the momentum buffer velocity
  /// in place (see the struct's comment). Throws config_error for bad settings (validate()) and
  /// size_error when the spans differ in length.
  void direction(std::span<const float> grad, std::span<const float> params, std::span<float> velocity,
                 std::span<float> out) const {
    apply<float>(grad, params, velocity, out);
  }
  /// The same in double.
  void direction(std::span<const double> grad, std::span<const double> params, std::span<double> velocity,
                 std::span<double> out) const {
    apply<double>(grad, params, velocity, out);
  }

  /// Quasi-global momentum (Lin, Karimireddy, Stich and Jaggi, arXiv 2102.04761): the buffer m
  /// (velocity) follows the model's change since the previous step, the gossip's mixing included,
  /// instead of the local gradients, so it points where the nodes move together:
  ///   m = momentum m + (1 - momentum) (previous - params) / previous_lr   (skipped when previous is empty)
  ///   p = grad + wd params;  out = p + momentum m   (Nesterov: p + momentum (momentum m + p))
  /// previous_lr is the learning rate of the step that left `previous`; `previous` then receives
  /// params (resized to them at the first step). out may alias grad, not velocity or previous.
  /// Throws what direction() throws, and config_error for a previous_lr that is not finite and > 0.
  void quasi_global(std::span<const float> grad, std::span<const float> params, std::span<float> velocity,
                    std::vector<float>& previous, double previous_lr, std::span<float> out) const {
    apply_quasi_global<float>(grad, params, velocity, previous, previous_lr, out);
  }
  /// The same in double.
  void quasi_global(std::span<const double> grad, std::span<const double> params, std::span<double> velocity,
                    std::vector<double>& previous, double previous_lr, std::span<double> out) const {
    apply_quasi_global<double>(grad, params, velocity, previous, previous_lr, out);
  }

  /// Throws config_error unless momentum is in [0, 1) and weight_decay is finite and >= 0.
  void validate() const {
    if (!(momentum >= 0.0 && momentum < 1.0))
      throw config_error("nn::sgd: momentum " + std::to_string(momentum) + " is not in [0, 1)");
    if (!(weight_decay >= 0.0 && std::isfinite(weight_decay)))
      throw config_error("nn::sgd: weight_decay " + std::to_string(weight_decay) + " is not finite and >= 0");
  }

 private:
  template <std::floating_point T>
  void apply_quasi_global(std::span<const T> g, std::span<const T> x, std::span<T> m, std::vector<T>& previous,
                          double previous_lr, std::span<T> out) const {
    validate();
    const std::size_t d = g.size();
    if (x.size() != d || m.size() != d || out.size() != d || (!previous.empty() && previous.size() != d))
      throw size_error("nn::sgd::quasi_global: grad has " + std::to_string(d) + " elements, params " +
                       std::to_string(x.size()) + ", buffer " + std::to_string(m.size()) + ", previous " +
                       std::to_string(previous.size()) + ", out " + std::to_string(out.size()));
    const T mu = T(momentum), wd = T(weight_decay);
    if (!previous.empty()) {
      if (!(previous_lr > 0.0 && std::isfinite(previous_lr)))
        throw config_error("nn::sgd::quasi_global: the previous step's learning rate " + std::to_string(previous_lr) +
                           " is not finite and > 0 (the model's change is divided by it)");
      const T c = T((1.0 - momentum) / previous_lr);
      for (std::size_t i = 0; i < d; ++i) m[i] = mu * m[i] + c * (previous[i] - x[i]);
    } else {
      previous.resize(d);
    }
    for (std::size_t i = 0; i < d; ++i) {
      const T p = g[i] + wd * x[i];
      previous[i] = x[i];
      out[i] = nesterov ? p + mu * (mu * m[i] + p) : p + mu * m[i];
    }
  }

  template <std::floating_point T>
  void apply(std::span<const T> g, std::span<const T> x, std::span<T> v, std::span<T> out) const {
    validate();
    const std::size_t d = g.size();
    if (x.size() != d || v.size() != d || out.size() != d)
      throw size_error("nn::sgd::direction: grad has " + std::to_string(d) + " elements, params " +
                       std::to_string(x.size()) + ", velocity " + std::to_string(v.size()) + ", out " +
                       std::to_string(out.size()));
    const T m = T(momentum), wd = T(weight_decay);
    const T* gp = g.data();
    const T* xp = x.data();
    T* vp = v.data();
    T* op = out.data();
    if (nesterov) {
      for (std::size_t i = 0; i < d; ++i) {
        const T p = gp[i] + wd * xp[i];
        const T vi = m * vp[i] + p;
        vp[i] = vi;
        op[i] = p + m * vi;
      }
    } else {
      for (std::size_t i = 0; i < d; ++i) {
        const T vi = m * vp[i] + (gp[i] + wd * xp[i]);
        vp[i] = vi;
        op[i] = vi;
      }
    }
  }
};

/// Learning rate at round t of `total`. Warm-up (when warmup > 0): for t < warmup,
/// lr = start + (base - start) t / warmup with start = base / 10 (0 when warmup_from_zero).
/// After it: constant: base; step: base times step_factor for each fraction f in step_at with
/// t >= round(f total); cosine: base * 0.5 * (1 + cos(pi * progress)),
/// progress = min(1, (t - warmup) / max(1, total - warmup)).
struct lr_schedule {
  /// The shape after warm-up: constant, step decay, or cosine decay.
  enum class kind { constant, step, cosine };
  double base = 0.05;  ///< the learning rate after warm-up (before any decay), finite and >= 0
  kind shape = kind::constant;  ///< the shape after warm-up
  std::uint32_t warmup = 0;  ///< rounds of linear warm-up (0: none)
  double step_factor = 0.1;  ///< step: the factor applied at each point of step_at (> 0)
  /// Step: the fractions of the total rounds where the rate is multiplied by step_factor, each in [0, 1].
  std::vector<double> step_at = {0.75};
  bool warmup_from_zero = false;  ///< warm up from 0 instead of base / 10

  /// Throws config_error unless base is finite and >= 0, step_factor finite and > 0, and every
  /// step_at in [0, 1].
  void validate() const {
    if (!(base >= 0.0 && std::isfinite(base)))
      throw config_error("nn::lr_schedule: base " + std::to_string(base) + " is not finite and >= 0");
    if (!(step_factor > 0.0 && std::isfinite(step_factor)))
      throw config_error("nn::lr_schedule: step_factor " + std::to_string(step_factor) + " is not finite and > 0");
    for (std::size_t i = 0; i < step_at.size(); ++i)
      if (!(step_at[i] >= 0.0 && step_at[i] <= 1.0))
        throw config_error("nn::lr_schedule: step_at[" + std::to_string(i) + "] = " + std::to_string(step_at[i]) +
                           " is not a fraction in [0, 1]");
  }

  /// The learning rate of round t of `total` rounds (see the struct's comment); throws what
  /// validate() throws.
  double at(std::uint32_t t, std::uint32_t total) const {
    validate();
    if (t < warmup) {
      const double start = warmup_from_zero ? 0.0 : base / 10.0;
      return start + (base - start) * double(t) / double(warmup);
    }
    switch (shape) {
      case kind::constant:
        return base;
      case kind::step: {
        double lr = base;
        for (double f : step_at)
          if (double(t) >= std::round(f * double(total))) lr *= step_factor;
        return lr;
      }
      case kind::cosine: {
        const double len = total > warmup ? double(total - warmup) : 1.0;
        const double progress = std::min(1.0, double(t - warmup) / len);
        return base * 0.5 * (1.0 + std::cos(std::numbers::pi * progress));
      }
    }
    return base;
  }
};

}  // namespace nn
}  // namespace v0
}  // namespace sparsepush
