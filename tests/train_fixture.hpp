// tests/train_fixture.hpp: a small training problem for the trainer's tests (in one process and
// under MPI): node i minimizes 0.5 ||x - b_i||^2 with heavy-ball momentum 0.5 (state that a
// checkpoint must carry), and a model's "accuracy" is 1 / (1 + ||x - mean_i b_i||).
#pragma once

#include <cmath>
#include <functional>
#include <span>
#include <vector>

#include <sparsepush/train/trainer.hpp>

namespace train_fixture {

namespace sp = sparsepush;
inline constexpr std::size_t dim = 40;

inline double target(std::uint32_t i, std::size_t l) { return std::cos(0.3 * double(l + 1) * double(i + 1)); }

inline std::vector<double> initial(std::uint32_t i) {
  std::vector<double> x(dim);
  for (std::size_t l = 0; l < dim; ++l) x[l] = std::sin(0.7 * double(l + 1) * double(i + 3));
  return x;
}

/// 1 / (1 + || m - mean_i b_i ||) over n nodes.
inline double score(std::span<const double> m, std::size_t n) {
  double s = 0.0;
  for (std::size_t l = 0; l < dim; ++l) {
    double mean = 0.0;
    for (std::uint32_t i = 0; i < n; ++i) mean += target(i, l);
    mean /= double(n);
    s += (m[l] - mean) * (m[l] - mean);
  }
  return 1.0 / (1.0 + std::sqrt(s));
}

/// The backend of nodes [first, first + local) of n: momentum buffers are the directions.
struct backend {
  std::size_t n, first, local;
  std::vector<std::vector<double>> velocity;
  backend(std::size_t nodes, std::size_t first_node, std::size_t local_nodes)
      : n(nodes), first(first_node), local(local_nodes), velocity(local_nodes, std::vector<double>(dim, 0.0)) {}

  sp::local_training<double> hooks() {
    sp::local_training<double> h;
    h.step = [this](std::size_t, std::uint32_t i, std::uint32_t, std::span<const double> x, std::span<double> dir) {
      auto& v = velocity[i - first];
      double loss = 0.0;
      for (std::size_t l = 0; l < dim; ++l) {
        const double g = x[l] - target(i, l);
        loss += 0.5 * g * g;
        v[l] = 0.5 * v[l] + g;
        dir[l] = v[l];
      }
      return loss;
    };
    h.direction = [this](std::uint32_t i) { return std::span<double>(velocity[i - first]); };
    // step split in two, for gradient tracking: the gradient, then the momentum on any vector
    h.gradient = [](std::size_t, std::uint32_t i, std::uint32_t, std::span<const double> x, std::span<double> g) {
      double loss = 0.0;
      for (std::size_t l = 0; l < dim; ++l) {
        g[l] = x[l] - target(i, l);
        loss += 0.5 * g[l] * g[l];
      }
      return loss;
    };
    h.direction_from = [this](std::size_t, std::uint32_t i, std::span<const double> g, std::span<const double>,
                              std::span<double> dir) {
      auto& v = velocity[i - first];
      for (std::size_t l = 0; l < dim; ++l) {
        v[l] = 0.5 * v[l] + g[l];
        dir[l] = v[l];
      }
    };
    h.accuracy = [this](std::size_t, std::span<const double> m, bool) { return score(m, n); };
    h.save = [this](sp::checkpoint_writer& w) {
      for (const auto& v : velocity) w.values(v);
    };
    h.restore = [this](sp::checkpoint_reader& r) -> std::function<void()> {
      std::vector<std::vector<double>> v(local, std::vector<double>(dim));
      for (auto& x : v) r.values(std::span<double>(x), "velocity");
      return [this, v = std::move(v)] { velocity = v; };
    };
    return h;
  }
};

}  // namespace train_fixture
