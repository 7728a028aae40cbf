// Tests of CHOCO-Push's deferred rounds (algorithm/choco_push.hpp, gossip/choco_push_node.hpp):
// under overlap, bounded staleness and the asynchronous policy, with the loopback's seeded delays
// (which let a link's later message overtake an earlier one), sum x plus what is in flight
// (recomputed here from each sender's reference and weight as it posted) stays exact and sum u
// plus what is in flight is n; after a drain nothing is in flight and both ends of every link hold
// the same reference, bit for bit; the nodes still reach consensus at the average; a drained run
// resumes bit for bit.
#include <catch2/catch.hpp>
#include <map>
#include <sparsepush/sparsepush.hpp>
#include <tuple>

#include "choco_push_reference.hpp"
#include "least_squares.hpp"
#include "test_util.hpp"

using namespace sparsepush;

namespace {
using vec = std::vector<double>;
using test::least_squares;

std::vector<vec> start_models(std::size_t n, std::size_t d, unsigned seed = 5) {
  std::vector<vec> x0;
  for (std::size_t i = 0; i < n; ++i) x0.push_back(test::gaussian<double>(d, seed + static_cast<unsigned>(i)));
  return x0;
}

std::vector<wait_policy> deferred_policies() {
  return {wait_policy::overlap(), wait_policy::staleness(1), wait_policy::staleness(3), wait_policy::asynchronous(),
          wait_policy::asynchronous(4)};
}
std::uint32_t max_delay_of(const wait_policy& p) {
  return p.kind == wait_kind::bounded ? p.tau : p.kind == wait_kind::asynchronous ? 5 : 3;
}

choco_push_options deferred_options(const wait_policy& p, double floor = 0.0) {
  choco_push_options o{.consensus_step = 0.4, .compressor = parse_compressor("top-k:4"), .threads = 2};
  o.network.max_delay = max_delay_of(p);
  o.policy = p;
  o.step_weight_floor = floor;
  return o;
}

/// The largest |xh_i[l] - target[l]| over the nodes and coordinates.
template <class A>
double distance_from(const A& alg, const vec& target) {
  double worst = 0;
  for (std::size_t i = 0; i < alg.num_nodes(); ++i) {
    const auto m = alg.model(i);
    for (std::size_t l = 0; l < target.size(); ++l) worst = std::max(worst, std::abs(m[l] - target[l]));
  }
  return worst;
}

/// Both ends of every link hold the same reference, bit for bit.
template <class A>
void require_ends_equal(const A& alg) {
  for (std::size_t i = 0; i < alg.num_nodes(); ++i)
    for (const auto& l : alg.node(i).out_links()) {
      const auto& in = alg.node(l.peer).in_links();
      const auto it = std::find_if(in.begin(), in.end(), [&](const auto& m) { return m.peer == i; });
      REQUIRE(it != in.end());
      REQUIRE(it->h == l.h);
    }
}
}  // namespace

TEST_CASE("deferred CHOCO-Push keeps sum x and sum u exact with messages in flight, and its links' ends equal",
          "[choco_push][async]") {
  const std::size_t n = 8, d = 40;
  const least_squares ls(n, d, 20, 1.0, 3);
  const auto f0 = ls.oracle();
  std::vector<vec> g(n, vec(d));
  const gradient_oracle<double> f = [&](std::uint32_t i, std::uint32_t t, std::span<const double> x,
                                        std::span<double> out) {
    f0(i, t, x, out);
    g[i].assign(out.begin(), out.end());
  };
  const auto sched = parse_schedule("random:2", n, 9);  // directed and time-varying: u != 1
  const double gamma = 0.05, gc = 0.4;
  std::size_t held_seen = 0;
  for (const auto& policy : deferred_policies()) {
    INFO("policy " << to_string(policy));
    choco_push<double> alg(start_models(n, d), sched, deferred_options(policy));
    // (round, from, to) -> what the sender took off itself for that envelope: gc W h[from->to], gc W u
    std::map<std::tuple<std::uint32_t, std::uint32_t, std::uint32_t>, std::pair<vec, double>> sent;
    vec base(d, 0.0);  // sum x0 minus every local step taken so far
    for (std::size_t i = 0; i < n; ++i)
      for (std::size_t l = 0; l < d; ++l) base[l] += alg.node(i).x()[l];
    std::size_t flight_max = 0;
    std::vector<out_edge> col;
    auto check_mass = [&](std::uint32_t t) {
      vec m(d, 0.0);
      double us = 0;
      std::size_t flying = 0;
      for (std::uint32_t i = 0; i < n; ++i) {
        for (std::size_t l = 0; l < d; ++l) m[l] += alg.node(i).x()[l];
        us += alg.node(i).u();
        std::vector<awaited> in_flight(alg.expected(i).begin(), alg.expected(i).end());
        for (const auto& h : alg.node(i).held()) in_flight.push_back({h.round, h.from});
        held_seen += alg.node(i).held().size();
        for (const auto& a : in_flight) {
          const auto& [hx, hu] = sent.at({a.round, a.from, i});
          for (std::size_t l = 0; l < d; ++l) m[l] += hx[l];
          us += hu;
        }
        flying += in_flight.size();
      }
      flight_max = std::max(flight_max, flying);
      INFO("round " << t << ", " << flying << " envelopes in flight");
      for (std::size_t l = 0; l < d; ++l) REQUIRE(std::abs(m[l] - base[l]) < 1e-11);
      REQUIRE(std::abs(us - double(n)) < 1e-12);
    };
    for (std::uint32_t t = 0; t < 120; ++t) {
      std::vector<double> u_before(n);
      for (std::size_t i = 0; i < n; ++i) u_before[i] = alg.node(i).u();
      alg.round(t, f, gamma);
      for (std::size_t i = 0; i < n; ++i)
        for (std::size_t l = 0; l < d; ++l) base[l] -= gamma * g[i][l];
      for (std::uint32_t j = 0; j < n; ++j) {  // what each sender posted in round t, as it posted it
        sched.out_edges(t, j, col);
        for (const auto& e : col) {
          if (e.to == j) continue;
          const auto& links = alg.node(j).out_links();
          const auto it = std::find_if(links.begin(), links.end(), [&](const auto& l) { return l.peer == e.to; });
          REQUIRE(it != links.end());
          vec hx(d);
          for (std::size_t l = 0; l < d; ++l) hx[l] = gc * e.share * it->h[l];
          sent[{t, j, e.to}] = {hx, gc * e.share * u_before[j]};
        }
      }
      check_mass(t);
    }
    REQUIRE(flight_max > 0);
    if (policy.kind != wait_kind::overlap) REQUIRE(alg.max_staleness() > 0);
    REQUIRE(alg.in_flight());
    alg.drain();
    REQUIRE_FALSE(alg.in_flight());
    for (std::size_t i = 0; i < n; ++i) {
      REQUIRE(alg.expected(i).empty());
      REQUIRE(alg.node(i).held().empty());
    }
    check_mass(120);
    require_ends_equal(alg);
  }
  INFO("envelopes held behind an earlier one of their link, summed over the rounds: " << held_seen);
  REQUIRE(held_seen > 0);  // the delays did reorder some link's messages, and FIFO held them
}

TEST_CASE("deferred CHOCO-Push gossip reaches consensus at the average of the starting models", "[choco_push][async]") {
  // Every policy with the identity compressor (push-sum with delays), and top-K under overlap,
  // whose delay of exactly one round keeps u_i = 1 on a regular schedule. Under random delays u_i
  // moves from round to round, and with it the numerators the references follow, so top-K keeps a
  // spread there (docs/design/algorithms.md, "CHOCO-Push", under a waiting policy).
  const std::size_t n = 8, d = 30;
  const auto x0 = start_models(n, d, 21);
  vec avg(d, 0.0);
  for (const auto& x : x0)
    for (std::size_t l = 0; l < d; ++l) avg[l] += x[l] / double(n);
  const auto sched = parse_schedule("exponential", n);
  for (const auto& policy : deferred_policies()) {
    for (const char* comp : {"identity", "top-k:4"}) {
      if (std::string(comp) != "identity" && policy.kind != wait_kind::overlap) continue;
      INFO("policy " << to_string(policy) << ", " << comp);
      auto o = deferred_options(policy, 0.5);
      o.compressor = parse_compressor(comp);
      choco_push<double> alg(x0, sched, o);
      for (std::uint32_t t = 0; t < 800; ++t) alg.round(t, std::span<const std::span<const double>>(), 0.0);
      alg.drain();
      const double worst = distance_from(alg, avg);
      INFO("largest distance of a node's model from the average: " << worst);
      REQUIRE(worst < 1e-9);
    }
  }
}

TEST_CASE("deferred CHOCO-Push: a drained run checkpoints and resumes bit for bit", "[choco_push][async]") {
  const least_squares ls(6, 20, 10, 1.0, 5);
  const auto f = ls.oracle();
  const auto x0 = start_models(6, 20);
  const auto sched = parse_schedule("random:1", 6, 3);
  for (const auto& policy : {wait_policy::staleness(3), wait_policy::asynchronous()}) {
    INFO("policy " << to_string(policy));
    const auto o = deferred_options(policy, 0.5);
    choco_push<double> a(x0, sched, o);
    for (std::uint32_t t = 0; t < 30; ++t) a.round(t, f, 0.05);
    {
      checkpoint_writer w;
      REQUIRE_THROWS_WITH(a.save(w), Catch::Contains("envelopes in flight") && Catch::Contains("drain()"));
    }
    a.drain();
    choco_push<double> b(x0, sched, o);
    test::save_and_restore(a, b);
    for (std::uint32_t t = 30; t < 60; ++t) {
      a.round(t, f, 0.05);
      b.round(t, f, 0.05);
    }
    a.drain();
    b.drain();
    for (std::size_t i = 0; i < 6; ++i) {
      REQUIRE(vec(a.node(i).x().begin(), a.node(i).x().end()) == vec(b.node(i).x().begin(), b.node(i).x().end()));
      REQUIRE(a.node(i).u() == b.node(i).u());
    }
    REQUIRE(a.bytes_sent() == b.bytes_sent());
    // a lockstep run's checkpoint (no DEFR section) is refused by a deferred one, and changes nothing
    choco_push<double> lock(x0, sched, {.consensus_step = 0.4, .compressor = parse_compressor("top-k:4")});
    for (std::uint32_t t = 0; t < 3; ++t) lock.round(t, f, 0.05);
    choco_push<double> c(x0, sched, o);
    REQUIRE_THROWS_AS(test::save_and_restore(lock, c), checkpoint_error);
    REQUIRE(c.node(0).out_links().empty());
  }
}

TEST_CASE("deferred CHOCO-Push refuses a loopback that hands out the sender's message, and rounds out of order",
          "[choco_push][async]") {
  const auto x0 = start_models(4, 10);
  const auto sched = parse_schedule("time-varying-ring", 4);
  auto o = deferred_options(wait_policy::staleness(2));
  o.network.mode = loopback_mode::by_reference;
  choco_push<double> a(x0, sched, o);
  REQUIRE_THROWS_WITH(a.round(0, std::span<const std::span<const double>>(), 0.0), Catch::Contains("by_reference"));
  choco_push<double> b(x0, sched, deferred_options(wait_policy::staleness(2)));
  b.round(0, std::span<const std::span<const double>>(), 0.0);
  REQUIRE_THROWS_WITH(b.round(2, std::span<const std::span<const double>>(), 0.0), Catch::Contains("run in order"));
}

TEST_CASE("deferred CHOCO-Push: the final rounds start drained, and their exact count brings every node to the average",
          "[choco_push][async]") {
  // 8 nodes of the time-varying ring average exactly in 3 rounds of whole models, whatever u_i:
  // envelopes still in flight at the first final round would arrive too late for that
  const std::size_t n = 8, d = 25;
  const least_squares ls(n, d, 10, 1.0, 9);
  const auto f = ls.oracle();
  const auto sched = parse_schedule("time-varying-ring", n);
  for (const auto& policy : deferred_policies()) {
    INFO("policy " << to_string(policy));
    auto o = deferred_options(policy, 0.5);
    o.final_from = 40;
    choco_push<double> alg(start_models(n, d), sched, o);
    std::vector<vec> g(n, vec(d));
    std::vector<std::span<const double>> dirs;
    for (std::uint32_t t = 0; t < 43; ++t) {
      dirs.clear();
      for (std::size_t i = 0; i < n; ++i) {
        f(static_cast<std::uint32_t>(i), t, alg.model(i), g[i]);
        dirs.emplace_back(g[i]);
      }
      alg.round(t, std::span<const std::span<const double>>(dirs), 0.05, t, t >= 40);
      if (t == 39) REQUIRE(alg.in_flight());
    }
    alg.drain();
    vec mean(d, 0.0);
    for (std::size_t i = 0; i < n; ++i)
      for (std::size_t l = 0; l < d; ++l) mean[l] += alg.node(i).x()[l] / double(n);
    const double worst = distance_from(alg, mean);
    INFO("largest distance from the average after 3 final rounds: " << worst);
    REQUIRE(worst < 1e-12);
  }
}

TEST_CASE("deferred CHOCO-Push refuses a message of another size before anything changes, and a bad weight floor",
          "[choco_push][async]") {
  using node_t = choco_push_node<std::vector<double>>;
  // node 1 (6 values) posts a deferred round to node 0 (8 values): mix_taken names both sizes
  loopback_network net(2, {});
  node_t big(vec(8, 1.0), 0, 0.5, 0), small(vec(6, 1.0), 1, 0.5, 0);
  const out_edge col[2] = {{1, 0.5}, {0, 0.5}};
  small.step_and_compress(top_k{k_spec::count(2)}, 0, {}, 0.0, col);
  auto ep1 = net.endpoint(1);
  small.post_deferred(ep1, 0, 0.5);
  auto ep0 = net.endpoint(0);
  const awaited from1[1] = {{0, 1}};
  big.take(ep0, 0, 0, from1, from1);
  const double u_before = big.u();
  REQUIRE_THROWS_WITH(big.mix_taken(0, {}),
                      Catch::Contains("round 0, node 0: the message of node 1 has 6 values, the model 8"));
  REQUIRE(big.in_links().empty());
  REQUIRE(big.held().empty());
  REQUIRE(big.u() == u_before);
  for (const double floor : {-0.1, 1.5}) {
    auto o = deferred_options(wait_policy::staleness(2), floor);
    REQUIRE_THROWS_WITH(choco_push<double>(start_models(4, 5), parse_schedule("time-varying-ring", 4), o),
                        Catch::Contains("step_weight_floor must be in [0, 1]"));
  }
}
