// Push-sum weight collapse under delays (gossip_options::step_weight_floor): a node that keeps
// sending its share of u while nothing reaches it has u_i = 2^-K after K rounds, and a local step
// that lands unscaled on the numerator moves its de-biased model by gamma p / u_i. Forced here
// with the loopback's seeded delay model (asynchronous policy, max_delay 16: a seed whose
// envelopes to node 0 all arrive late) on a quadratic: the default floor keeps every de-biased
// model bounded and the loss falling, while the floor turned off (0: the step as docs/design/algorithms.md
// writes it) blows up; the mixing still conserves sum x and sum u = n; nodes at or above the floor
// and lockstep rounds keep their bits.
#include <catch2/catch.hpp>
#include <cmath>
#include <sparsepush/sparsepush.hpp>

#include "test_util.hpp"

using namespace sparsepush;

namespace {
using vec = std::vector<double>;

constexpr std::size_t n = 6, d = 20;
constexpr std::uint32_t max_delay = 16;
constexpr std::uint32_t starved = 10;  // rounds in which nothing reaches node 0
constexpr double lr = 0.3;

/// f_i(x) = 1/2 ||x - c_i||^2 (c_i in [-1, 1]); the network's optimum is the mean of the c_i.
vec target(std::size_t i) {
  vec c(d);
  for (std::size_t l = 0; l < d; ++l) c[l] = std::sin(0.7 * double(l) + 1.3 * double(i));
  return c;
}

/// The first loopback seed under which every envelope node n - 1 sends node 0 (its only
/// in-neighbour on the directed ring) in rounds 0 .. starved - 1 becomes visible only at round
/// `starved` or later: node 0 then receives nothing for `starved` rounds while it sends every round.
std::uint64_t starving_seed() {
  for (std::uint64_t seed = 0; seed < 100000; ++seed) {
    loopback_network probe(n, {.seed = seed, .max_delay = max_delay});
    bool all_late = true;
    for (std::uint32_t s = 0; s < starved && all_late; ++s)
      all_late = s + probe.delay({.round = s, .from = n - 1, .to = 0}) >= starved;
    if (all_late) return seed;
  }
  FAIL("no loopback seed starves node 0");
  return 0;
}

struct outcome {
  double u0_starved = 0;  ///< node 0's u after the starved rounds
  double worst = 0;       ///< the largest |xh_i[l]| over every round and node
  double first_loss = 0, last_loss = 0;  ///< mean over nodes of f_i(xh_i): before round 0, after the drain
  double mass_error = 0;  ///< after the drain: |sum x - (sum x0 - the steps taken)| relative, and |sum u - n| / n
};

double mean_loss(const push_sum_group<vec>& g) {
  double f = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const vec xh = g.debiased(i), c = target(i);
    for (std::size_t l = 0; l < d; ++l) f += 0.5 * (xh[l] - c[l]) * (xh[l] - c[l]) / double(n);
  }
  return f;
}

/// 40 asynchronous rounds of gradient steps on the quadratic, then a drain. The steps taken are
/// recomputed here from each node's u before its round (the floor's rule written out), so that
/// the mass check is independent of the group's arithmetic.
outcome run(double floor, std::uint64_t seed) {
  const auto sched = parse_schedule("directed-ring", n);
  loopback_network net(n, {.seed = seed, .max_delay = max_delay});
  gossip_options go;
  go.policy = wait_policy::asynchronous(32);
  go.step_weight_floor = floor;
  std::vector<vec> x0;
  for (std::size_t i = 0; i < n; ++i) x0.push_back(test::gaussian<double>(d, 40 + unsigned(i)));
  push_sum_group<vec> g(x0, go);
  outcome o;
  o.first_loss = mean_loss(g);
  vec expected(d, 0.0);  // sum x0 - sum of the steps the nodes took
  for (const auto& x : x0)
    for (std::size_t l = 0; l < d; ++l) expected[l] += x[l];
  for (std::uint32_t t = 0; t < 40; ++t) {
    std::vector<vec> p(n, vec(d));
    for (std::size_t i = 0; i < n; ++i) {
      const vec xh = g.debiased(i), c = target(i);
      for (std::size_t l = 0; l < d; ++l) p[i][l] = xh[l] - c[l];
      const double u = g.u(i), scale = u < floor ? u / floor : 1.0;
      for (std::size_t l = 0; l < d; ++l) expected[l] -= lr * scale * p[i][l];
    }
    g.round(sched, identity{}, net, t, {1.0, p, lr});
    if (t + 1 == starved) o.u0_starved = g.u(0);
    for (std::size_t i = 0; i < n; ++i)
      for (const double v : g.debiased(i)) o.worst = std::max(o.worst, std::isfinite(v) ? std::abs(v) : HUGE_VAL);
  }
  g.drain(sched, net);
  o.last_loss = mean_loss(g);
  const auto m = g.mass();
  double scale = 1e-300, err = 0;
  for (std::size_t l = 0; l < d; ++l) {
    scale = std::max(scale, std::abs(expected[l]));
    err = std::max(err, std::abs(m[l] - expected[l]));
  }
  o.mass_error = std::max(err / scale, std::abs(g.weight_mass() - double(n)) / double(n));
  return o;
}
}  // namespace

TEST_CASE("asynchronous push-sum: a node starved by delays keeps its de-biased model bounded (the weight floor)",
          "[async][weight]") {
  const std::uint64_t seed = starving_seed();
  INFO("loopback seed " << seed);
  const outcome fixed = run(gossip_options::default_step_weight_floor, seed);
  // the case is forced: node 0 sent half its weight every round and received nothing
  REQUIRE(fixed.u0_starved == std::ldexp(1.0, -int(starved)));
  CHECK(fixed.worst < 5.0);  // the initial models are N(0, 1) in 20 coordinates, the targets in [-1, 1]
  CHECK(fixed.last_loss < 0.5 * fixed.first_loss);
  CHECK(fixed.mass_error < 1e-12);
  // the same run with the step as written (floor 0): node 0's step is amplified up to 2^10 times
  const outcome plain = run(0.0, seed);
  REQUIRE(plain.u0_starved == fixed.u0_starved);
  CHECK(plain.worst > 1e3);
  CHECK(plain.mass_error < 1e-12);  // no mass is lost either way: it is the step that blows up
  // floor 1: the de-biased step never exceeds gamma p
  const outcome one = run(1.0, seed);
  CHECK(one.worst < 5.0);
  CHECK(one.last_loss < 0.5 * one.first_loss);
  CHECK(one.mass_error < 1e-12);
}

TEST_CASE("asynchronous push-sum: sparse_push's own rounds (the trainer's path) stay bounded with max_delay 16",
          "[async][weight]") {
  // 16 nodes on the time-varying ring, as sparsepush-train's SGP, never drained for 60 rounds
  const std::size_t nn = 16, dd = 12;
  const gradient_oracle<double> oracle = [](std::uint32_t i, std::uint32_t, std::span<const double> x,
                                            std::span<double> p) {
    for (std::size_t l = 0; l < x.size(); ++l) p[l] = x[l] - std::cos(0.5 * double(l) + double(i));
  };
  auto worst_of = [&](double floor) {
    std::vector<vec> x0;
    for (std::size_t i = 0; i < nn; ++i) x0.push_back(test::gaussian<double>(dd, 70 + unsigned(i)));
    sparse_push<vec> a(x0, parse_schedule("time-varying-ring", nn), sparse_push_phases(identity{}, 1.0),
                       {.network = {.seed = 5, .max_delay = 16}, .policy = wait_policy::asynchronous(),
                        .step_weight_floor = floor});
    double worst = 0;
    for (std::uint32_t t = 0; t < 60; ++t) {
      a.round(t, oracle, 0.3);
      for (std::size_t i = 0; i < nn; ++i)
        for (const double v : a.model(i)) worst = std::max(worst, std::isfinite(v) ? std::abs(v) : HUGE_VAL);
    }
    a.drain();
    CHECK(std::abs(a.weight_mass() - double(nn)) < 1e-12);
    return worst;
  };
  CHECK(worst_of(gossip_options::default_step_weight_floor) < 5.0);
  CHECK(worst_of(0.0) > 1e3);
}

TEST_CASE("weight floor: nodes at or above it and lockstep rounds keep their bits, bad floors are refused",
          "[async][weight]") {
  auto state_after = [](const char* schedule, std::size_t nodes, wait_policy policy, std::uint32_t delay, double eta,
                        double floor) {
    const auto sched = parse_schedule(schedule, nodes, 4);
    loopback_network net(nodes, policy.lockstep() ? loopback_options{} : loopback_options{.seed = 2, .max_delay = delay});
    gossip_options go;
    go.eta = eta;
    go.policy = policy;
    go.step_weight_floor = floor;
    std::vector<vec> x0;
    for (std::size_t i = 0; i < nodes; ++i) x0.push_back(test::gaussian<double>(16, 90 + unsigned(i)));
    push_sum_group<vec> g(x0, go);
    double umin = 1;
    for (std::uint32_t t = 0; t < 30; ++t) {
      std::vector<vec> p;
      for (std::size_t i = 0; i < nodes; ++i) {
        vec dir = g.debiased(i);
        for (std::size_t l = 0; l < dir.size(); ++l) dir[l] -= std::cos(0.3 * double(l) + double(i));
        p.push_back(dir);
      }
      g.round(sched, top_k{k_spec::count(4)}, net, t, {eta, p, 0.1});
      for (std::size_t i = 0; i < nodes; ++i) umin = std::min(umin, g.u(i));
    }
    if (!policy.lockstep()) g.drain(sched, net);
    return std::make_pair(test::group_state(g), umin);
  };
  SECTION("a deferred run whose weights stay at or above the floor: the bits of the step as written") {
    const auto [on, umin] = state_after("time-varying-ring", 5, wait_policy::staleness(2), 2, 0.5, 0.5);
    REQUIRE(umin >= 0.5);
    CHECK(on == state_after("time-varying-ring", 5, wait_policy::staleness(2), 2, 0.5, 0.0).first);
    // ... and a floor above those weights does change them
    CHECK_FALSE(on == state_after("time-varying-ring", 5, wait_policy::staleness(2), 2, 0.5, 1.0).first);
  }
  SECTION("lockstep ignores the floor, even where u falls far below it") {
    const auto [on, umin] = state_after("random:2", 9, wait_policy{}, 0, 1.0, 1.0);
    REQUIRE(umin < 0.1);
    CHECK(on == state_after("random:2", 9, wait_policy{}, 0, 1.0, 0.0).first);
  }
  SECTION("a floor outside [0, 1] is a config_error") {
    const std::vector<vec> x0(2, vec(3, 1.0));
    for (const double bad : {-0.1, 1.5, std::nan("")}) {
      gossip_options go;
      go.step_weight_floor = bad;
      CHECK_THROWS_AS(push_sum_group<vec>(x0, go), config_error);
    }
  }
}
