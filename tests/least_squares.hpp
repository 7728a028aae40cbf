// tests/least_squares.hpp: a distributed least-squares problem with a known optimum, shared by the
// algorithm tests (node i's data differ by `het`: a heterogeneous, non-IID problem).
#pragma once

#include <Eigen/Dense>
#include <cstdint>
#include <random>
#include <span>
#include <sparsepush/algorithm/oracle.hpp>
#include <vector>

namespace test {

/// Node i holds A_i (m x d) and b_i = A_i (1 + het * z_i) + noise: f_i(x) = ||A_i x - b_i||^2 / (2m).
struct least_squares {
  std::size_t n, d, m;
  std::vector<Eigen::MatrixXd> a;
  std::vector<Eigen::VectorXd> b;
  Eigen::VectorXd optimum;  ///< argmin (1/n) sum_i f_i, from the normal equations

  least_squares(std::size_t n_, std::size_t d_, std::size_t m_, double het, unsigned seed) : n(n_), d(d_), m(m_) {
    std::mt19937 g(seed);
    std::normal_distribution<double> nd;
    Eigen::MatrixXd h = Eigen::MatrixXd::Zero(d, d);
    Eigen::VectorXd r = Eigen::VectorXd::Zero(d);
    for (std::size_t i = 0; i < n; ++i) {
      Eigen::MatrixXd ai(m, d);
      for (Eigen::Index p = 0; p < ai.size(); ++p) ai.data()[p] = nd(g);
      Eigen::VectorXd xi(d);
      for (Eigen::Index c = 0; c < xi.size(); ++c) xi(c) = 1.0 + het * nd(g);
      Eigen::VectorXd bi = ai * xi;
      for (Eigen::Index p = 0; p < bi.size(); ++p) bi(p) += 0.1 * nd(g);
      h += ai.transpose() * ai;
      r += ai.transpose() * bi;
      a.push_back(std::move(ai));
      b.push_back(std::move(bi));
    }
    optimum = h.ldlt().solve(r);
  }
  sparsepush::gradient_oracle<double> oracle() const {
    return [this](std::uint32_t i, std::uint32_t, std::span<const double> x, std::span<double> g) {
      const Eigen::Map<const Eigen::VectorXd> xv(x.data(), static_cast<Eigen::Index>(d));
      const Eigen::VectorXd gv = a[i].transpose() * (a[i] * xv - b[i]) / static_cast<double>(m);
      for (std::size_t c = 0; c < d; ++c) g[c] = gv(static_cast<Eigen::Index>(c));
    };
  }
  template <class A>
  double averaged_model_error(const A& alg) const {
    Eigen::VectorXd avg = Eigen::VectorXd::Zero(d);
    for (std::size_t i = 0; i < n; ++i) {
      const auto mdl = alg.model(i);
      avg += Eigen::Map<const Eigen::VectorXd>(mdl.data(), static_cast<Eigen::Index>(d)) / static_cast<double>(n);
    }
    return (avg - optimum).norm() / optimum.norm();
  }
};

}  // namespace test
