// Shared helpers of the tests: deliberately naive references and input generators.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <random>
#include <sparsepush/message.hpp>
#include <vector>

namespace test {

/// Sort-based reference top-K: indices of the k largest |v|, ties to the lower index, ascending.
template <class T>
std::vector<std::uint32_t> reference_top_k(const std::vector<T>& v, std::size_t k) {
  std::vector<std::uint32_t> order(v.size());
  std::iota(order.begin(), order.end(), 0u);
  std::stable_sort(order.begin(), order.end(),
                   [&](std::uint32_t a, std::uint32_t b) { return std::abs(v[a]) > std::abs(v[b]); });
  order.resize(k);
  std::sort(order.begin(), order.end());
  return order;
}

template <class T>
std::vector<T> gaussian(std::size_t d, unsigned seed, double sd = 1.0) {
  std::mt19937_64 gen(seed);
  std::normal_distribution<double> n(0.0, sd);
  std::vector<T> v(d);
  for (auto& x : v) x = static_cast<T>(n(gen));
  return v;
}

/// The dense q a message describes, in double.
template <class T>
std::vector<T> dense(const sparsepush::message& m) {
  std::vector<T> q(m.dim, T(0));
  sparsepush::decompress(m, std::span<T>(q));
  return q;
}

template <class T>
double norm2sq(const std::vector<T>& v) {
  double s = 0;
  for (T x : v) s += static_cast<double>(x) * static_cast<double>(x);
  return s;
}

/// Every node's x, u and e of a push-sum group, in double: what the strong guarantee keeps.
template <class Group>
std::vector<std::vector<double>> group_state(const Group& g) {
  std::vector<std::vector<double>> out;
  for (std::size_t i = 0; i < g.num_nodes(); ++i) {
    out.emplace_back(g.x(i).begin(), g.x(i).end());
    out.back().push_back(g.u(i));
    out.back().insert(out.back().end(), g.residual(i).begin(), g.residual(i).end());
  }
  return out;
}

}  // namespace test
