// Tests of deferred push-sum rounds (gossip/policy.hpp; docs/design/algorithms.md, "Asynchronous and
// overlapped push-sum") over the loopback's seeded delay model: an independent reference of the
// section's equations (dense vectors, a sort-based top-K), the mass invariant with the envelopes in
// flight, the drain, bounded inboxes, the waiting rules and their errors, checkpoint/resume, and
// continue_at's refusals.
#include <catch2/catch.hpp>
#include <cmath>
#include <map>
#include <sparsepush/sparsepush.hpp>
#include <tuple>

#include "test_util.hpp"

using namespace sparsepush;

namespace {
using vec = std::vector<double>;

std::vector<vec> models(std::size_t n, std::size_t d, unsigned seed) {
  std::vector<vec> x;
  for (std::size_t i = 0; i < n; ++i) x.push_back(test::gaussian<double>(d, seed + unsigned(i)));
  return x;
}

/// The section's equations, written out: every node's x, u, e; envelopes (q, u, w, s) in flight
/// until the receiver's rule takes them. k = 0: identity; otherwise top-k with error feedback.
struct reference {
  struct env {
    std::uint32_t s, from, to;
    double w, u;
    vec q;
  };
  std::size_t n, d, k;
  double eta;
  wait_policy policy;
  std::vector<vec> x, e;
  vec u;
  std::vector<env> flight;
  std::uint32_t max_staleness = 0;

  reference(std::vector<vec> x0, std::size_t k_, double eta_, wait_policy p)
      : n(x0.size()), d(x0[0].size()), k(k_), eta(eta_), policy(p), x(std::move(x0)), e(n, vec(d, 0.0)), u(n, 1.0) {}

  vec compress(std::size_t i) {
    if (k == 0) return x[i];
    vec v(d);
    for (std::size_t l = 0; l < d; ++l) v[l] = x[i][l] + e[i][l];
    vec q(d, 0.0);
    for (const auto l : test::reference_top_k(v, k)) q[l] = v[l];
    for (std::size_t l = 0; l < d; ++l) e[i][l] = v[l] - q[l];
    return q;
  }

  /// Round t; delay(s, j, i) gives an envelope's delay in rounds; p: the local directions (or none).
  template <class S, class Delay>
  void round(const S& sched, std::uint32_t t, Delay&& delay, const std::vector<vec>* p = nullptr, double gamma = 0) {
    std::vector<vec> q(n);
    std::vector<out_edge> col;
    for (std::size_t i = 0; i < n; ++i) {
      if (p)
        for (std::size_t l = 0; l < d; ++l) x[i][l] -= gamma * (*p)[i][l];
      q[i] = compress(i);
    }
    for (std::uint32_t i = 0; i < n; ++i) {
      sched.out_edges(t, i, col);
      double self = 0;
      for (const auto& c : col) {
        if (c.to == i) self = c.share;
        else flight.push_back({t, i, c.to, c.share, u[i], q[i]});
      }
      for (std::size_t l = 0; l < d; ++l) x[i][l] += eta * (self - 1.0) * q[i][l];
      u[i] += eta * (self - 1.0) * u[i];
    }
    for (std::uint32_t i = 0; i < n; ++i) mix(i, t, [&](const env& v) {
        if (policy.kind == wait_kind::overlap) return v.s + 1 == t;
        return v.s <= t && v.s + delay(v.s, v.from, v.to) <= t;
      });
  }
  template <class Take>
  void mix(std::uint32_t i, std::uint32_t t, Take&& take) {
    for (auto it = flight.begin(); it != flight.end();) {
      if (it->to == i && take(*it)) {
        for (std::size_t l = 0; l < d; ++l) x[i][l] += eta * it->w * it->q[l];
        u[i] += eta * it->w * it->u;
        if (it->s < t) max_staleness = std::max(max_staleness, t - it->s);
        it = flight.erase(it);
      } else {
        ++it;
      }
    }
  }
  void drain(std::uint32_t t) {
    for (std::uint32_t i = 0; i < n; ++i) mix(i, t, [](const env&) { return true; });
  }
  /// sum_i x_i + sum_flight eta w q, and sum_i u_i + sum_flight eta w u.
  std::pair<vec, double> total() const {
    vec s(d, 0.0);
    double us = 0;
    for (std::size_t i = 0; i < n; ++i) {
      for (std::size_t l = 0; l < d; ++l) s[l] += x[i][l];
      us += u[i];
    }
    for (const auto& v : flight) {
      for (std::size_t l = 0; l < d; ++l) s[l] += eta * v.w * v.q[l];
      us += eta * v.w * v.u;
    }
    return {s, us};
  }
};

double rel_diff(std::span<const double> a, const vec& b) {
  double worst = 0, scale = 1e-300;
  for (std::size_t l = 0; l < b.size(); ++l) scale = std::max(scale, std::abs(b[l]));
  for (std::size_t l = 0; l < b.size(); ++l) worst = std::max(worst, std::abs(a[l] - b[l]));
  return worst / scale;
}

std::vector<wait_policy> deferred_policies() {
  return {wait_policy::overlap(), wait_policy::staleness(1), wait_policy::staleness(3), wait_policy::asynchronous(),
          wait_policy::asynchronous(4)};
}
std::uint32_t max_delay_of(const wait_policy& p) {
  return p.kind == wait_kind::bounded ? p.tau : p.kind == wait_kind::asynchronous ? 5 : 3;
}

/// The group's view of the invariant: sum_i x_i + the envelopes it still expects (recorded q and
/// u of each sender's round, times eta w).
struct flight_recorder {
  std::map<std::pair<std::uint32_t, std::uint32_t>, std::pair<vec, double>> sent;  // (round, node) -> (q, u)
};
}  // namespace

TEST_CASE("deferred rounds match an independent reference of the section's equations to 1e-12", "[async]") {
  const std::size_t n = 7, d = 60;
  const auto sched = parse_schedule("exponential", n);
  for (const auto& policy : deferred_policies()) {
    for (const std::size_t k : {std::size_t{0}, std::size_t{6}}) {
      INFO("policy " << to_string(policy) << ", top-k " << k);
      const double eta = k ? 0.3 : 1.0;
      const auto x0 = models(n, d, 3);
      loopback_options lo;
      lo.max_delay = max_delay_of(policy);
      lo.seed = 17;
      loopback_network net(n, lo);
      gossip_options go;
      go.eta = eta;
      go.policy = policy;
      go.threads = 2;
      push_sum_group<vec> g(x0, go);
      reference ref(x0, k, eta, policy);
      const auto delay = [&](std::uint32_t s, std::uint32_t j, std::uint32_t i) { return net.delay({s, j, i}); };
      const any_compressor comp = k ? any_compressor(top_k{k_spec::count(k)}) : any_compressor(identity{});
      double worst = 0;
      for (std::uint32_t t = 0; t < 40; ++t) {
        g.round(sched, comp, net, t, {eta, {}, 0.0});
        ref.round(sched, t, delay);
        for (std::size_t i = 0; i < n; ++i) {
          worst = std::max(worst, rel_diff(g.x(i), ref.x[i]));
          worst = std::max(worst, std::abs(g.u(i) - ref.u[i]) / std::abs(ref.u[i]));
        }
      }
      REQUIRE(worst < 1e-12);
      REQUIRE(g.max_staleness() == ref.max_staleness);
      if (policy.kind != wait_kind::overlap) REQUIRE(ref.max_staleness > 0);
      g.drain(sched, net);
      ref.drain(39);
      for (std::size_t i = 0; i < n; ++i) {
        REQUIRE(rel_diff(g.x(i), ref.x[i]) < 1e-12);
        REQUIRE(g.expected(i).empty());
      }
      REQUIRE(ref.flight.empty());
    }
  }
}

TEST_CASE("local steps: deferred rounds with directions match the reference", "[async]") {
  const std::size_t n = 5, d = 40;
  const auto sched = parse_schedule("time-varying-ring", n);
  const auto policy = wait_policy::staleness(2);
  const auto x0 = models(n, d, 9);
  loopback_options lo;
  lo.max_delay = 2;
  loopback_network net(n, lo);
  gossip_options go;
  go.eta = 0.5;
  go.policy = policy;
  push_sum_group<vec> g(x0, go);
  reference ref(x0, 4, 0.5, policy);
  for (std::uint32_t t = 0; t < 30; ++t) {
    std::vector<vec> p;
    for (std::size_t i = 0; i < n; ++i) {
      vec xh = g.debiased(i), dir(d);
      for (std::size_t l = 0; l < d; ++l) dir[l] = xh[l] - std::cos(0.3 * double(l) + double(i));
      p.push_back(dir);
    }
    typename push_sum_group<vec>::step st{0.5, p, 0.1};
    g.round(sched, top_k{k_spec::count(4)}, net, t, st);
    ref.round(sched, t, [&](auto s, auto j, auto i) { return net.delay({s, j, i}); }, &p, 0.1);
    for (std::size_t i = 0; i < n; ++i) REQUIRE(rel_diff(g.x(i), ref.x[i]) < 1e-12);
  }
}

TEST_CASE("mass invariant: sum x + the envelopes in flight is conserved at every round, under every policy",
          "[async]") {
  const std::size_t n = 9, d = 50;
  const auto sched = parse_schedule("random:2", n, 4);
  double worst = 0;
  for (const auto& policy : deferred_policies()) {
    for (const bool sparse : {false, true}) {
      INFO("policy " << to_string(policy) << (sparse ? ", top-k" : ", identity"));
      const double eta = sparse ? 0.2 : 0.7;
      const auto x0 = models(n, d, 5);
      loopback_options lo;
      lo.max_delay = max_delay_of(policy);
      lo.seed = 3;
      loopback_network net(n, lo);
      gossip_options go;
      go.eta = eta;
      go.policy = policy;
      push_sum_group<vec> g(x0, go);
      vec m0(d, 0.0);
      for (const auto& x : x0)
        for (std::size_t l = 0; l < d; ++l) m0[l] += x[l];
      flight_recorder rec;
      std::vector<out_edge> col;
      const any_compressor comp = sparse ? any_compressor(top_k{k_spec::fraction(0.1)}) : any_compressor(identity{});
      for (std::uint32_t t = 0; t < 30; ++t) {
        vec us(n);
        for (std::size_t i = 0; i < n; ++i) us[i] = g.u(i);
        g.round(sched, comp, net, t, {eta, {}, 0.0});
        for (std::uint32_t i = 0; i < n; ++i) rec.sent[{t, i}] = {test::dense<double>(g.last_message(i)), us[i]};
        // sum_i x_i + sum over every envelope a node still expects of eta W_ij(s) q_j(s)
        vec m = g.mass();
        double um = g.weight_mass();
        for (std::uint32_t i = 0; i < n; ++i)
          for (const auto& a : g.expected(i)) {
            sched.out_edges(a.round, a.from, col);
            double w = 0;
            for (const auto& c : col)
              if (c.to == i) w = c.share;
            const auto& [q, u] = rec.sent.at({a.round, a.from});
            for (std::size_t l = 0; l < d; ++l) m[l] += eta * w * q[l];
            um += eta * w * u;
          }
        worst = std::max(worst, rel_diff(m, m0));
        worst = std::max(worst, std::abs(um - double(n)) / double(n));
      }
      g.drain(sched, net);
      const vec m = g.mass();
      worst = std::max(worst, rel_diff(m, m0));
      worst = std::max(worst, std::abs(g.weight_mass() - double(n)) / double(n));
    }
  }
  WARN("worst relative error of the invariant: " << worst);
  REQUIRE(worst < 1e-12);
}

TEST_CASE("overlap is deterministic: the same bits over copied and encoded loopbacks, any delays, 1 or 3 threads",
          "[async]") {
  const std::size_t n = 6, d = 80;
  const auto sched = parse_schedule("exponential", n);
  const auto x0 = models(n, d, 1);
  std::vector<std::vector<double>> finals;
  for (const auto mode : {loopback_mode::copied, loopback_mode::encoded})
    for (const std::uint32_t delay : {0u, 1u, 7u})
      for (const std::size_t threads : {1u, 3u}) {
        loopback_options lo;
        lo.mode = mode;
        lo.max_delay = delay;
        loopback_network net(n, lo);
        gossip_options go;
        go.eta = 0.25;
        go.policy = wait_policy::overlap();
        go.threads = threads;
        push_sum_group<vec> g(x0, go);
        for (std::uint32_t t = 0; t < 25; ++t) g.round(sched, top_k{k_spec::fraction(0.1)}, net, t, {0.25, {}, 0.0});
        g.drain(sched, net);
        std::vector<double> all;
        for (const auto& s : test::group_state(g)) all.insert(all.end(), s.begin(), s.end());
        finals.push_back(all);
      }
  for (const auto& f : finals) REQUIRE(f == finals[0]);
}

TEST_CASE("inboxes stay bounded: at most max_delay + 1 rounds of envelopes per in-neighbour", "[async]") {
  const std::size_t n = 8, d = 20;
  const auto sched = parse_schedule("exponential:2", n);
  for (const std::uint32_t delay : {0u, 3u, 6u}) {
    loopback_options lo;
    lo.max_delay = delay;
    loopback_network net(n, lo);
    gossip_options go;
    go.policy = wait_policy::asynchronous();
    push_sum_group<vec> g(models(n, d, 2), go);
    for (std::uint32_t t = 0; t < 60; ++t) g.round(sched, identity{}, net, t);
    // in-degree 2 on exponential:2; envelopes of rounds t - delay .. t may wait
    REQUIRE(net.largest_inbox() <= 2 * (delay + 1));
    if (delay > 0) REQUIRE(net.largest_inbox() > 2);
    g.drain(sched, net);
    for (std::uint32_t i = 0; i < n; ++i) REQUIRE(net.pending_envelopes(i) == 0);
  }
}

TEST_CASE("waiting rules: a missing envelope is a transport_error naming the sender, a delay past the bound is refused",
          "[async]") {
  SECTION("bounded staleness waits for a peer that never posts, then names it") {
    loopback_options lo;
    lo.timeout = std::chrono::milliseconds(50);
    loopback_network net(2, lo);
    auto ep0 = net.endpoint(0);
    inbox box;
    const awaited must[] = {{0, 1}};
    try {
      ep0.take(1, 1, must, box, must);
      FAIL("no error");
    } catch (const transport_error& e) {
      REQUIRE_THAT(e.what(), Catch::Contains("node 0 waited 50 ms") && Catch::Contains("1 (round 0)"));
    }
  }
  SECTION("a delay model beyond the staleness bound") {
    const std::size_t n = 5;
    const auto sched = parse_schedule("exponential", n);
    loopback_options lo;
    lo.max_delay = 6;
    loopback_network net(n, lo);
    gossip_options go;
    go.policy = wait_policy::staleness(1);
    push_sum_group<vec> g(models(n, 10, 1), go);
    REQUIRE_THROWS_WITH(
        [&] {
          for (std::uint32_t t = 0; t < 20; ++t) g.round(sched, identity{}, net, t);
        }(),
        Catch::Contains("exceeds the policy's staleness bound"));
  }
  SECTION("a by_reference loopback is refused before anything changes") {
    const std::size_t n = 4;
    const auto sched = parse_schedule("directed-ring", n);
    loopback_options lo;
    lo.mode = loopback_mode::by_reference;
    loopback_network net(n, lo);
    gossip_options go;
    go.policy = wait_policy::overlap();
    push_sum_group<vec> g(models(n, 10, 1), go);
    const auto before = test::group_state(g);
    REQUIRE_THROWS_AS(g.round(sched, identity{}, net, 0), config_error);
    REQUIRE(test::group_state(g) == before);
    REQUIRE(net.total_messages() == 0);
  }
  SECTION("eta changes only after a drain; a checkpoint only after a drain") {
    const std::size_t n = 4;
    const auto sched = parse_schedule("directed-ring", n);
    loopback_network net(n);
    gossip_options go;
    go.policy = wait_policy::asynchronous();
    push_sum_group<vec> g(models(n, 10, 1), go);
    g.round(sched, identity{}, net, 0, {0.5, {}, 0.0});
    REQUIRE_THROWS_WITH(g.round(sched, identity{}, net, 1, {0.25, {}, 0.0}), Catch::Contains("drain() first"));
    checkpoint_writer w;
    REQUIRE_THROWS_WITH(g.save(w), Catch::Contains("drain() it first"));
    g.drain(sched, net);
    REQUIRE_NOTHROW(g.round(sched, identity{}, net, 1, {0.25, {}, 0.0}));
  }
}

TEST_CASE("staleness 0 is lockstep: the same bits as a group with the default policy", "[async]") {
  const std::size_t n = 6, d = 40;
  const auto sched = parse_schedule("time-varying-ring", n);
  const auto x0 = models(n, d, 12);
  gossip_options a;
  a.eta = 0.3;
  gossip_options b = a;
  b.policy = parse_staleness("0");
  REQUIRE(b.policy.lockstep());
  push_sum_group<vec> ga(x0, a), gb(x0, b);
  loopback_network na(n), nb(n);
  for (std::uint32_t t = 0; t < 20; ++t) {
    ga.round(sched, top_k{k_spec::fraction(0.1)}, na, t);
    gb.round(sched, top_k{k_spec::fraction(0.1)}, nb, t);
  }
  REQUIRE(test::group_state(ga) == test::group_state(gb));
}

TEST_CASE("sparse_push: asynchronous rounds drain at phase changes (SCSP), save after a drain and resume bit for bit in one process",
          "[async]") {
  const std::size_t n = 6, d = 30;
  const auto sched = parse_schedule("exponential", n);
  const auto phases = scsp_phases(parse_compressor("top-k:0.2"), 0.3, 12, 6);
  sparse_push_options opt;
  opt.policy = wait_policy::asynchronous();
  opt.network.max_delay = 3;
  opt.network.seed = 8;
  const gradient_oracle<double> oracle = [](std::uint32_t i, std::uint32_t t, std::span<const double> x,
                                            std::span<double> p) {
    for (std::size_t l = 0; l < x.size(); ++l) p[l] = x[l] - std::sin(double(l + i) + 0.01 * t);
  };
  const auto x0 = models(n, d, 6);
  sparse_push<vec> a(x0, sched, phases, opt);
  std::vector<std::byte> saved;
  for (std::uint32_t t = 0; t < 18; ++t) {
    // round 12 starts the final phase (eta 0.3 -> 1): the group refuses to change eta with
    // envelopes in flight, so it passes only because sparse_push drained first
    a.round(t, oracle, 0.05);
    REQUIRE(a.in_flight());
    if (t == 8) {
      checkpoint_writer w;
      REQUIRE_THROWS_AS(a.save(w), config_error);
      a.drain();
      checkpoint_writer w2;
      a.save(w2);
      saved = w2.finish();
    }
  }
  a.drain();
  REQUIRE_FALSE(a.in_flight());
  REQUIRE(std::abs(a.weight_mass() - double(n)) < 1e-12);
  sparse_push<vec> b(x0, sched, phases, opt);
  checkpoint_reader r(saved, "saved");
  b.restore(r);
  for (std::uint32_t t = 9; t < 18; ++t) b.round(t, oracle, 0.05);
  b.drain();
  REQUIRE(test::group_state(a.group()) == test::group_state(b.group()));
  REQUIRE(a.bytes_sent() == b.bytes_sent());
}

TEST_CASE("wait_policy: names, parse_staleness and bounds", "[async]") {
  REQUIRE(to_string(parse_staleness("0")) == "lockstep");
  REQUIRE(to_string(parse_staleness("4")) == "staleness:4");
  REQUIRE(parse_staleness("4").inbox_rounds() == 5);
  REQUIRE(to_string(parse_staleness("inf")) == "asynchronous");
  REQUIRE(to_string(wait_policy::overlap()) == "overlap");
  REQUIRE(wait_policy::overlap().inbox_rounds() == 2);
  for (const char* bad : {"", "-1", "x", "4.5", "99999999999", "inf "})
    REQUIRE_THROWS_AS(parse_staleness(bad), config_error);
  REQUIRE_THROWS_AS(wait_policy::staleness(wait_policy::max_window), config_error);
  REQUIRE_THROWS_AS(wait_policy::asynchronous(1), config_error);
}

TEST_CASE("continue_at: refused below common_round() and with envelopes in flight, nothing changed", "[async]") {
  // nodes that ran different round counts need several processes; in one process every node ran
  // the same rounds, so what is tested here is the refusals and the round the group continues at
  const std::size_t n = 5, d = 12;
  const auto sched = parse_schedule("exponential", n);
  const auto phases = sparse_push_phases(parse_compressor("top-k:0.3"), 0.5);
  sparse_push_options opt;
  opt.policy = wait_policy::asynchronous();
  opt.network.max_delay = 2;
  opt.network.seed = 4;
  const gradient_oracle<double> oracle = [](std::uint32_t i, std::uint32_t t, std::span<const double> x,
                                            std::span<double> p) {
    for (std::size_t l = 0; l < x.size(); ++l) p[l] = x[l] - std::cos(double(l + i) + 0.02 * t);
  };
  sparse_push<vec> a(models(n, d, 21), sched, phases, opt);
  for (std::uint32_t t = 0; t < 6; ++t) a.round(t, oracle, 0.05);
  REQUIRE(a.in_flight());
  const auto before = test::group_state(a.group());
  // envelopes in flight: drain first
  REQUIRE_THROWS_AS(a.continue_at(6), config_error);
  REQUIRE_THROWS_WITH(a.continue_at(6), Catch::Contains("envelopes are in flight: drain() first"));
  REQUIRE(test::group_state(a.group()) == before);
  REQUIRE(a.in_flight());
  a.drain();
  REQUIRE(a.common_round() == 6);
  const auto drained = test::group_state(a.group());
  // below the common round: a node posted round 5 already
  for (const std::uint32_t r : {0u, 3u, 5u}) {
    INFO("continue_at(" << r << ")");
    REQUIRE_THROWS_AS(a.continue_at(r), config_error);
    REQUIRE_THROWS_WITH(a.continue_at(r), Catch::Contains("posted round 5 already"));
  }
  REQUIRE(test::group_state(a.group()) == drained);
  REQUIRE(a.common_round() == 6);
  // at or above it: the rounds go on from there and drain to the exact mass
  a.continue_at(8);
  for (std::uint32_t t = 8; t < 12; ++t) a.round(t, oracle, 0.05);
  a.drain();
  REQUIRE(a.common_round() == 12);
  REQUIRE(std::abs(a.weight_mass() - double(n)) < 1e-12);
  REQUIRE_NOTHROW(a.continue_at(12));
}
