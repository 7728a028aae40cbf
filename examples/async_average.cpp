// async_average: 16 nodes average random vectors by push-sum over the one-peer exponential graph
// under each waiting policy (gossip/policy.hpp), in one process over the loopback's seeded delay
// model (envelopes arrive up to 3 rounds late). Prints, per policy, the largest staleness mixed,
// sum u with envelopes still in flight, then after the drain: sum u and the distance of every
// de-biased model to the true average. Exits 1 unless every drain restores sum u = n and every
// policy reaches the average within 1e-9.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sparsepush/sparsepush.hpp>
#include <vector>

namespace sp = sparsepush;

int main() {
  const std::size_t n = 16, d = 1000;
  std::vector<std::vector<double>> x0(n, std::vector<double>(d));
  std::vector<double> avg(d, 0.0);
  for (std::size_t i = 0; i < n; ++i)
    for (std::size_t l = 0; l < d; ++l) {
      x0[i][l] = std::sin(0.37 * double(l + 1) * double(i + 1));
      avg[l] += x0[i][l] / double(n);
    }
  const auto sched = sp::parse_schedule("exponential", n);
  sp::phase gossip;  // gossip only: exact push-sum (eta 1), no local step
  gossip.local_step = false;
  gossip.exact = true;
  gossip.name = "gossip";
  const sp::phase_schedule averaging({gossip});
  bool ok = true;
  for (const auto& policy : {sp::wait_policy::staleness(0), sp::wait_policy::overlap(), sp::wait_policy::staleness(3),
                             sp::wait_policy::asynchronous()}) {
    // [readme-async-begin]
    sp::sparse_push<double> alg(x0, sched, averaging,
                                {.network = {.seed = 7, .max_delay = 3},  // envelopes up to 3 rounds late
                                 .policy = policy});
    for (std::uint32_t t = 0; t < 200; ++t) alg.round(t, std::span<const std::span<const double>>(), 0.0);
    const double in_flight = alg.weight_mass();  // below n: some u is still on its way
    alg.drain();                                 // every envelope mixed: sum u = n again
    // [readme-async-end]
    double worst = 0;
    std::vector<double> m(d);
    for (std::size_t i = 0; i < n; ++i) {
      alg.model(i, m);
      for (std::size_t l = 0; l < d; ++l) worst = std::max(worst, std::abs(m[l] - avg[l]));
    }
    std::printf("%-14s largest staleness %u, sum u before the drain %.6f, after %.15f, max |xh - avg| %.3g\n",
                sp::to_string(policy).c_str(), alg.max_staleness(), in_flight, alg.weight_mass(), worst);
    ok = ok && std::abs(alg.weight_mass() - double(n)) < 1e-12 && worst < 1e-9;
  }
  return ok ? 0 : 1;
}
