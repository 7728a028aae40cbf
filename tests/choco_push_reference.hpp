// tests/choco_push_reference.hpp: CHOCO-Push in double, written from the equations on dense vectors
// (docs/design/algorithms.md, "CHOCO-Push"), for the tests of choco_push and of gradient tracking.
#pragma once

#include <cstdint>
#include <map>
#include <sparsepush/algorithm/oracle.hpp>
#include <sparsepush/checkpoint.hpp>
#include <sparsepush/topology/graph.hpp>
#include <utility>
#include <vector>

#include "test_util.hpp"

namespace test {

/// CHOCO-Push in double from the equations, on dense vectors: each end of a link keeps its own
/// copy of the reference, so a test sees that they stay equal. k = 0: identity.
struct reference_choco_push {
  using vec = std::vector<double>;
  std::size_t n, d;
  std::vector<vec> x;
  vec u;
  std::map<std::pair<std::uint32_t, std::uint32_t>, vec> sender, receiver;  ///< (from, to) -> h
  vec start;  ///< where a new link's reference starts (empty: 0)

  reference_choco_push(const std::vector<vec>& x0) : n(x0.size()), d(x0[0].size()), x(x0), u(n, 1.0) {}

  /// Round t: x_j' = x_j - gamma f(xh_j), then mix.
  template <class S>
  void round(const S& sched, std::size_t k, double gc, const sparsepush::gradient_oracle<double>& f, double gamma, std::uint32_t t) {
    std::vector<vec> xp(n, vec(d));
    for (std::uint32_t j = 0; j < n; ++j) {
      vec xh(d), g(d);
      for (std::size_t l = 0; l < d; ++l) xh[l] = x[j][l] / u[j];
      f(j, t, xh, g);
      for (std::size_t l = 0; l < d; ++l) xp[j][l] = x[j][l] - gamma * g[l];
    }
    mix(sched, k, gc, xp, t);
  }

  /// Steps 2 and 3 of round t from the numerators after the local step, xp.
  template <class S>
  void mix(const S& sched, std::size_t k, double gc, const std::vector<vec>& xp, std::uint32_t t) {
    std::vector<vec> sum(n, vec(d, 0.0));
    vec usum(n, 0.0);
    std::vector<sparsepush::out_edge> col;
    for (std::uint32_t j = 0; j < n; ++j) {
      sched.out_edges(t, j, col);
      for (const auto& e : col) {
        usum[e.to] += e.share * u[j];
        if (e.to == j) continue;
        const vec h0 = start.empty() ? vec(d, 0.0) : start;
        vec& hs = sender.try_emplace({j, e.to}, h0).first->second;
        vec& hr = receiver.try_emplace({j, e.to}, h0).first->second;
        vec diff(d);
        for (std::size_t l = 0; l < d; ++l) diff[l] = xp[j][l] - hs[l];
        vec q(d, 0.0);
        if (k == 0) q = diff;
        else
          for (const auto l : test::reference_top_k(diff, k)) q[l] = diff[l];
        for (std::size_t l = 0; l < d; ++l) {
          hs[l] += q[l];
          hr[l] += q[l];
          sum[e.to][l] += e.share * hr[l];
          sum[j][l] -= e.share * hs[l];
        }
      }
    }
    for (std::size_t i = 0; i < n; ++i) {
      for (std::size_t l = 0; l < d; ++l) x[i][l] = xp[i][l] + gc * sum[i][l];
      u[i] = u[i] + gc * (usum[i] - u[i]);
    }
  }
};

/// Checkpoint `from` and restore the file into `into` (checked to its end); returns the file.
template <class A>
std::vector<std::byte> save_and_restore(const A& from, A& into) {
  sparsepush::checkpoint_writer w;
  from.save(w);
  auto file = w.finish();
  sparsepush::checkpoint_reader r(file);
  into.restore(r);
  r.done();
  return file;
}

}  // namespace test
