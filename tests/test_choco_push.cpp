// Tests of CHOCO-Push (algorithm/choco_push.hpp, gossip/choco_push_node.hpp): a dense push-sum
// reference in double written from the equations, with exact top-K, on directed, irregular and
// time-varying graphs where u != 1; the invariants (sum x, sum u = n, both ends' references equal);
// the reduction to SGP; consensus on a heterogeneous least-squares problem where SP keeps a spread;
// where the consensus step diverges; checkpoints; bad inputs.
#include <catch2/catch.hpp>
#include <sparsepush/sparsepush.hpp>

#include "choco_push_reference.hpp"
#include "least_squares.hpp"
#include "test_util.hpp"

using namespace sparsepush;

namespace {
using vec = std::vector<double>;
using test::least_squares;
using test::reference_choco_push;

std::vector<vec> start_models(std::size_t n, std::size_t d, unsigned seed = 5) {
  std::vector<vec> x0;
  for (std::size_t i = 0; i < n; ++i) x0.push_back(test::gaussian<double>(d, seed + static_cast<unsigned>(i)));
  return x0;
}

double max_diff(std::span<const double> a, std::span<const double> b) {
  double m = 0;
  for (std::size_t l = 0; l < a.size(); ++l) m = std::max(m, std::abs(a[l] - b[l]));
  return m;
}

/// max over nodes and coordinates of |xh_i - mean_j xh_j|
template <class A>
double spread(const A& alg) {
  const std::size_t n = alg.num_nodes(), d = alg.dim();
  std::vector<vec> m(n, vec(d));
  vec mean(d, 0.0);
  for (std::size_t i = 0; i < n; ++i) {
    alg.model(i, std::span<double>(m[i]));
    for (std::size_t l = 0; l < d; ++l) mean[l] += m[i][l] / double(n);
  }
  double s = 0;
  for (const auto& mi : m) s = std::max(s, max_diff(mi, mean));
  return s;
}
}  // namespace

TEST_CASE("CHOCO-Push matches a dense reference with top-K on directed graphs where u != 1", "[choco_push]") {
  const least_squares ls(8, 30, 20, 1.0, 11);
  const auto f = ls.oracle();
  const auto x0 = start_models(8, 30);
  for (const char* spec : {"erdos-renyi:0.3", "random:1", "time-varying-ring", "exponential"}) {
    for (const std::size_t k : {std::size_t{0}, std::size_t{3}, std::size_t{10}}) {
      const auto sched = parse_schedule(spec, 8, 4);
      const auto comp = k == 0 ? any_compressor(identity{}) : parse_compressor("top-k:" + std::to_string(k));
      choco_push<double> alg(x0, sched, {.consensus_step = 0.6, .compressor = comp, .threads = 2});
      reference_choco_push ref(x0);
      double worst = 0, u_off = 0;
      for (std::uint32_t t = 0; t < 60; ++t) {
        alg.round(t, f, 0.02);
        ref.round(sched, k, 0.6, f, 0.02, t);
        for (std::size_t i = 0; i < 8; ++i) {
          worst = std::max(worst, max_diff(alg.node(i).x(), ref.x[i]));
          REQUIRE(std::abs(alg.node(i).u() - ref.u[i]) < 1e-12);
          u_off = std::max(u_off, std::abs(ref.u[i] - 1.0));
        }
      }
      INFO(spec << " top-" << k << ": largest difference " << worst);
      REQUIRE(worst < 1e-9);
      // both ends of every link hold the same reference, and the reference's own copies agree
      for (const auto& [link, h] : ref.sender) REQUIRE(ref.receiver.at(link) == h);
      for (std::size_t i = 0; i < 8; ++i)
        for (const auto& l : alg.node(i).out_links()) {
          const auto& in = alg.node(l.peer).in_links();
          const auto it = std::find_if(in.begin(), in.end(), [&](const auto& m) { return m.peer == i; });
          REQUIRE(it != in.end());
          REQUIRE(it->h == l.h);
          REQUIRE(max_diff(l.h, ref.sender.at({static_cast<std::uint32_t>(i), l.peer})) < 1e-9);
        }
      const std::string name = spec;
      if (name == "erdos-renyi:0.3" || name == "random:1") REQUIRE(u_off > 1e-3);  // push-sum's weights at work
    }
  }
}

TEST_CASE("CHOCO-Push from a common start: references start at the shared model, and the reference agrees",
          "[choco_push]") {
  const least_squares ls(8, 30, 20, 1.0, 11);
  const auto f = ls.oracle();
  const std::vector<vec> x0(8, test::gaussian<double>(30, 77));
  const auto sched = parse_schedule("random:1", 8, 4);
  const choco_push_options o{.consensus_step = 0.6, .compressor = parse_compressor("top-k:3"), .common_start = true};
  choco_push<double> alg(x0, sched, o);
  reference_choco_push ref(x0);
  ref.start = x0[0];
  double worst = 0;
  for (std::uint32_t t = 0; t < 60; ++t) {
    alg.round(t, f, 0.02);
    ref.round(sched, 3, 0.6, f, 0.02, t);
    for (std::size_t i = 0; i < 8; ++i) worst = std::max(worst, max_diff(alg.node(i).x(), ref.x[i]));
  }
  INFO("largest difference " << worst);
  REQUIRE(worst < 1e-9);
  // the first message on a link carries the change since the start, not the model: it is small
  choco_push<double> fresh(x0, sched, o), from_zero(x0, sched, {.consensus_step = 0.6, .compressor = parse_compressor("top-k:3")});
  fresh.round(0, f, 0.02);
  from_zero.round(0, f, 0.02);
  double sent = 0, zero_sent = 0;  // the largest value of the messages of round 0
  for (std::size_t i = 0; i < 8; ++i) {
    for (const auto& l : fresh.node(i).out_links())
      for (const double q : test::dense<double>(l.msg)) sent = std::max(sent, std::abs(q));
    for (const auto& l : from_zero.node(i).out_links())
      for (const double q : test::dense<double>(l.msg)) zero_sent = std::max(zero_sent, std::abs(q));
  }
  INFO("round 0's largest value sent: " << sent << " from the common start, " << zero_sent << " from 0");
  REQUIRE(sent < 0.1 * zero_sent);
  // the nodes of this process must share the start
  auto other = x0;
  other[5][2] += 1e-9;
  REQUIRE_THROWS_WITH(choco_push<double>(other, sched, o), Catch::Contains("node 5 starts from another model"));
}

TEST_CASE("CHOCO-Push conserves sum x and sum u = n exactly enough, every round", "[choco_push]") {
  const least_squares ls(8, 40, 20, 1.0, 3);
  const auto f0 = ls.oracle();
  std::vector<vec> g(8, vec(40));
  gradient_oracle<double> f = [&](std::uint32_t i, std::uint32_t t, std::span<const double> x, std::span<double> out) {
    f0(i, t, x, out);
    g[i].assign(out.begin(), out.end());
  };
  choco_push<double> alg(start_models(8, 40), parse_schedule("random:2", 8, 9),
                         {.consensus_step = 0.4, .compressor = parse_compressor("top-k:4")});
  auto mass = [&] {
    vec m(40, 0.0);
    double us = 0;
    for (std::size_t i = 0; i < 8; ++i) {
      for (std::size_t l = 0; l < 40; ++l) m[l] += alg.node(i).x()[l];
      us += alg.node(i).u();
    }
    m.push_back(us);
    return m;
  };
  for (std::uint32_t t = 0; t < 200; ++t) {
    vec want = mass();
    alg.round(t, f, 0.05);
    for (std::size_t i = 0; i < 8; ++i)
      for (std::size_t l = 0; l < 40; ++l) want[l] -= 0.05 * g[i][l];
    const vec got = mass();
    for (std::size_t l = 0; l < 40; ++l) REQUIRE(std::abs(got[l] - want[l]) < 1e-11);
    REQUIRE(std::abs(got[40] - 8.0) < 1e-12);
  }
}

TEST_CASE("CHOCO-Push with identity and gamma_c 1 is SGP", "[choco_push]") {
  const least_squares ls(8, 25, 20, 1.0, 7);
  const auto f = ls.oracle();
  const auto x0 = start_models(8, 25);
  for (const char* spec : {"erdos-renyi:0.4", "random:1", "time-varying-ring"}) {
    const auto sched = parse_schedule(spec, 8, 2);
    choco_push<double> cp(x0, sched, {.consensus_step = 1.0});
    sparse_push<double> sgp(x0, sched, sgp_phases());
    for (std::uint32_t t = 0; t < 80; ++t) {
      cp.round(t, f, 0.03);
      sgp.round(t, f, 0.03);
    }
    for (std::size_t i = 0; i < 8; ++i) {
      INFO(spec << " node " << i);
      REQUIRE(max_diff(cp.node(i).x(), sgp.group().x(i)) < 1e-12);
      REQUIRE(std::abs(cp.node(i).u() - sgp.group().u(i)) < 1e-12);
    }
  }
}

TEST_CASE("CHOCO-Push top-K reaches the exact-mixing spread where SP keeps its compression floor", "[choco_push]") {
  // 8 nodes, d = 50, heterogeneous data, exponential graph, full gradients, 2000 rounds, lr 0.05:
  // the spread max_i |xh_i - mean xh| of SGP is set by the data; CHOCO-Push top-10/50 at gamma_c 1
  // comes to it, SP top-10/50 at eta 0.3 does not (its messages are lossy at consensus).
  const least_squares ls(8, 50, 60, 1.0, 21);
  const auto f = ls.oracle();
  const std::vector<vec> x0(8, vec(50, 0.0));
  const auto sched = parse_schedule("exponential", 8);
  auto run = [&](auto&& alg) {
    for (std::uint32_t t = 0; t < 2000; ++t) alg.round(t, f, 0.05);
    return spread(alg);
  };
  const double exact = run(sparse_push<double>(x0, sched, sgp_phases()));
  const double cp = run(choco_push<double>(x0, sched, {.consensus_step = 1.0, .compressor = parse_compressor("top-k:10")}));
  const double sp = run(sparse_push<double>(x0, sched, sparse_push_phases(parse_compressor("top-k:10"), 0.3)));
  INFO("spread: SGP " << exact << ", CHOCO-Push " << cp << ", SP " << sp);
  REQUIRE(exact > 1e-4);  // the data set the nodes apart: a spread to reach
  REQUIRE(std::abs(cp - exact) < 0.05 * exact);
  REQUIRE(sp > 10 * exact);
}

TEST_CASE("CHOCO-Push: the default consensus step trains where gamma_c 1 diverges", "[choco_push]") {
  // top-k:0.04 keeps 2 of 50 values: gamma_c 1 (or 0.8) amplifies what the messages leave out
  // until the models blow up; the compressor's default (default_consensus_step: 0.5) stays bounded.
  const least_squares ls(8, 50, 60, 1.0, 21);
  const auto f = ls.oracle();
  const std::vector<vec> x0(8, vec(50, 0.0));
  const auto sched = parse_schedule("exponential", 8);
  const auto comp = parse_compressor("top-k:0.04");
  auto final_spread = [&](double gc) {
    choco_push<double> alg(x0, sched, {.consensus_step = gc, .compressor = comp});
    try {
      for (std::uint32_t t = 0; t < 2000; ++t) alg.round(t, f, 0.05);
    } catch (const non_finite_error&) {
      return std::numeric_limits<double>::infinity();
    }
    return spread(alg);
  };
  const double gc = default_consensus_step(comp);
  const double at_default = final_spread(gc);
  INFO("default gamma_c " << gc << ": spread " << at_default);
  REQUIRE(gc == 0.5);
  REQUIRE(at_default < 1.0);  // SGP's is 0.19; slower mixing leaves more
  REQUIRE(final_spread(0.8) > 1e3);
  REQUIRE(final_spread(1.0) > 1e3);
}

TEST_CASE("CHOCO-Push checkpoints every reference and resumes bit for bit", "[choco_push]") {
  const least_squares ls(6, 20, 10, 1.0, 5);
  const auto f = ls.oracle();
  const auto x0 = start_models(6, 20);
  const auto sched = parse_schedule("random:1", 6, 3);
  const choco_push_options o{.consensus_step = 0.5, .compressor = parse_compressor("top-k:3")};
  choco_push<double> a(x0, sched, o);
  for (std::uint32_t t = 0; t < 30; ++t) a.round(t, f, 0.05);
  choco_push<double> b(x0, sched, o);
  const auto file = test::save_and_restore(a, b);
  for (std::uint32_t t = 30; t < 60; ++t) {
    a.round(t, f, 0.05);
    b.round(t, f, 0.05);
  }
  for (std::size_t i = 0; i < 6; ++i) {
    REQUIRE(vec(a.node(i).x().begin(), a.node(i).x().end()) == vec(b.node(i).x().begin(), b.node(i).x().end()));
    REQUIRE(a.node(i).u() == b.node(i).u());
    REQUIRE(a.node(i).out_links().size() == b.node(i).out_links().size());
  }
  REQUIRE(a.bytes_sent() == b.bytes_sent());
  // a truncated checkpoint is refused and changes nothing
  auto bytes = file;
  bytes.resize(bytes.size() / 2);
  choco_push<double> c(x0, sched, o);
  REQUIRE_THROWS_AS(
      [&] {
        checkpoint_reader rc(bytes);
        c.restore(rc);
      }(),
      checkpoint_error);
  REQUIRE(c.node(0).out_links().empty());
  REQUIRE(c.node(0).u() == 1.0);
}

TEST_CASE("CHOCO-Push refuses message loss, bad steps and bad settings, naming them", "[choco_push]") {
  const auto x0 = start_models(4, 10);
  const auto sched = parse_schedule("time-varying-ring", 4);
  REQUIRE_THROWS_WITH(choco_push<double>(x0, sched, {.network = {.drop_probability = 0.1}}),
                      Catch::Contains("every message delivered"));
  REQUIRE_THROWS_WITH(choco_push<double>(x0, sched, {.consensus_step = 0.0}), Catch::Contains("consensus step"));
  // QSGD's error exceeds the vector: the references would take it in whole (in training it
  // diverges within 32 rounds at every gamma_c tried)
  REQUIRE_THROWS_WITH(choco_push<double>(x0, sched, {.compressor = parse_compressor("qsgd:16")}),
                      Catch::Contains("shrinks what it leaves out") && Catch::Contains("QSGD"));
  REQUIRE_THROWS_WITH(choco_push<double>(x0, parse_schedule("time-varying-ring", 5)), Catch::Contains("5 nodes"));
  choco_push<double> alg(x0, sched, {.compressor = parse_compressor("top-k:2")});
  std::vector<vec> p(4, vec(10, 0.1));
  p[2][7] = std::nan("");
  std::vector<std::span<const double>> views(p.begin(), p.end());
  REQUIRE_THROWS_WITH(alg.round(0, std::span<const std::span<const double>>(views), 0.1),
                      Catch::Contains("node 2") && Catch::Contains("index 7"));
  for (std::size_t i = 0; i < 4; ++i) {  // nothing changed
    REQUIRE(vec(alg.node(i).x().begin(), alg.node(i).x().end()) == x0[i]);
    REQUIRE(alg.node(i).out_links().empty());
  }
  REQUIRE(alg.bytes_sent() == 0);
  p[2][7] = 0.1;
  p[1].resize(9);
  views.assign(p.begin(), p.end());
  REQUIRE_THROWS_WITH(alg.round(0, std::span<const std::span<const double>>(views), 0.1),
                      Catch::Contains("node 1") && Catch::Contains("9 elements"));
}

TEST_CASE("CHOCO-Push gives the same bits on any number of threads and over encoded messages", "[choco_push]") {
  const least_squares ls(6, 64, 10, 1.0, 8);
  const auto f = ls.oracle();
  const auto x0 = start_models(6, 64);
  const auto sched = parse_schedule("exponential", 6);
  auto run = [&](std::size_t threads, loopback_mode mode) {
    choco_push<float> alg(std::vector<std::vector<float>>(6, std::vector<float>(64, 0.5f)), sched,
                          {.consensus_step = 0.5, .compressor = parse_compressor("top-k:0.1+int8"), .threads = threads,
                           .seed = 4, .network = {.mode = mode}});
    gradient_oracle<float> ff = [&](std::uint32_t i, std::uint32_t t, std::span<const float> x, std::span<float> g) {
      vec xd(x.begin(), x.end()), gd(64);
      f(i, t, xd, gd);
      for (std::size_t l = 0; l < 64; ++l) g[l] = static_cast<float>(gd[l]);
    };
    for (std::uint32_t t = 0; t < 40; ++t) alg.round(t, ff, 0.05);
    std::vector<std::vector<float>> out;
    for (std::size_t i = 0; i < 6; ++i) out.push_back(alg.model(i));
    return std::pair{out, alg.bytes_sent()};
  };
  const auto one = run(1, loopback_mode::by_reference);
  REQUIRE(run(3, loopback_mode::by_reference) == one);
  REQUIRE(run(2, loopback_mode::encoded) == one);
  (void)x0;
}

TEST_CASE("CHOCO-Push refuses a message of another size and a corrupted node state, naming them", "[choco_push]") {
  using node_t = choco_push_node<std::vector<double>>;
  // node 1 (6 values) sends to node 0 (8 values): the receiver names the sender and both sizes
  loopback_network net(2);
  node_t big(vec(8, 1.0), 0, 0.5, 0), small(vec(6, 1.0), 1, 0.5, 0);
  const out_edge col[2] = {{1, 0.5}, {0, 0.5}};
  const top_k comp{k_spec::count(2)};
  small.step_and_compress(comp, 0, {}, 0.0, col);
  auto ep1 = net.endpoint(1);
  small.post(ep1, 0);
  const in_edge row[2] = {{0, 0.5}, {1, 0.5}};
  auto ep0 = net.endpoint(0);
  REQUIRE_THROWS_WITH(big.collect(ep0, 0, row),
                      Catch::Contains("round 0, node 0: the message of node 1 has 6 values, the model 8"));
  REQUIRE(big.in_links().empty());  // no reference was created for it

  // a node's saved state: x, u, then the out-links and in-links (peer, reference), as save() writes it
  const vec x(4, 0.5), h(4, 0.25);
  auto state = [&](std::vector<std::uint32_t> out_peers, double u, double h0) {
    checkpoint_writer w;
    w.section("CPND");
    w.u32(0);
    w.u64(4);
    w.values(std::span<const double>(x));
    w.f64(u);
    w.u64(out_peers.size());
    for (const auto p : out_peers) {
      vec hp = h;
      hp[2] = h0;
      w.u32(p);
      w.values(std::span<const double>(hp));
    }
    w.u64(0);
    return w.finish();
  };
  node_t n0(vec(4, 0.0), 0, 0.5, 0);
  auto read = [&](const std::vector<std::byte>& file) {
    checkpoint_reader r(file);
    return n0.read_state(r);
  };
  const auto good = read(state({1, 3}, 1.5, 0.25));  // the crafted state is valid as written
  REQUIRE(good.out.size() == 2);
  REQUIRE(good.out[1].peer == 3);
  REQUIRE(good.u == 1.5);
  REQUIRE_THROWS_WITH(read(state({3, 1}, 1.0, 0.25)), Catch::Contains("links out of order"));
  REQUIRE_THROWS_WITH(read(state({1, 1}, 1.0, 0.25)), Catch::Contains("links out of order"));
  REQUIRE_THROWS_WITH(read(state({1}, 1.0, std::nan(""))), Catch::Contains("a NaN, an Inf or a weight <= 0"));
  REQUIRE_THROWS_WITH(read(state({1}, 0.0, 0.25)), Catch::Contains("a NaN, an Inf or a weight <= 0"));
  // a link count no file of this size can hold
  std::vector<std::byte> many;
  {
    checkpoint_writer w;
    w.section("CPND");
    w.u32(0);
    w.u64(4);
    w.values(std::span<const double>(x));
    w.f64(1.0);
    w.u64(std::uint64_t{1} << 40);
    many = w.finish();
  }
  REQUIRE_THROWS_WITH(read(many), Catch::Contains("more links than bytes"));
  REQUIRE(n0.out_links().empty());  // read_state changes nothing
  REQUIRE(n0.x()[0] == 0.0);
}

TEST_CASE("CHOCO-Push's final rounds end every node at the average of the numerators", "[choco_push]") {
  // 16 nodes of the time-varying ring average exactly in 4 rounds: after top-K training rounds the
  // nodes disagree; 4 identity rounds at gamma_c 1 bring every de-biased model to sum_i x_i / n
  const least_squares ls(16, 30, 20, 1.0, 41);
  const auto f = ls.oracle();
  const auto sched = parse_schedule("time-varying-ring", 16);
  const std::uint32_t train = 40;
  const auto plan = final_rounds_for(sched, train, 1e-3, final_rounds_search_limit, 1.0);
  REQUIRE(plan.exact);
  choco_push_options o{.consensus_step = 0.5, .compressor = parse_compressor("top-k:3")};
  choco_push<double> control(start_models(16, 30), sched, o);
  o.final_from = train;
  o.final_compressor = identity{};
  choco_push<double> a(start_models(16, 30), sched, o);
  for (std::uint32_t t = 0; t < train; ++t) {
    a.round(t, f, 0.05);
    control.round(t, f, 0.05);
  }
  REQUIRE(a.trains(train - 1));
  REQUIRE(!a.trains(train));
  vec avg(30, 0.0);
  for (std::size_t i = 0; i < 16; ++i)
    for (std::size_t l = 0; l < 30; ++l) avg[l] += a.node(i).x()[l] / 16.0;
  const std::uint64_t bytes_before = a.bytes_sent();
  for (std::uint32_t t = train; t < train + plan.rounds; ++t) {
    a.round(t, f, 0.05);  // a final round: the oracle is not asked, no local step
    control.round(t, std::span<const std::span<const double>>(), 0.0);  // the training compressor, no step
  }
  double worst = 0, control_worst = 0;
  for (std::size_t i = 0; i < 16; ++i) {
    vec m(30), c(30);
    a.model(i, std::span<double>(m));
    control.model(i, std::span<double>(c));
    worst = std::max(worst, max_diff(m, avg));
    control_worst = std::max(control_worst, max_diff(c, avg));
  }
  INFO("with final rounds " << worst << ", without " << control_worst);
  CHECK(worst < 1e-12);
  CHECK(control_worst > 1e-3);
  // whole models: each of the 4 x 16 final messages carries every value
  CHECK(a.bytes_sent() - bytes_before >= std::uint64_t{64} * 30 * sizeof(double));
  REQUIRE_THROWS_WITH(choco_push<double>(start_models(4, 10), parse_schedule("time-varying-ring", 4),
                                         {.final_compressor = parse_compressor("qsgd:16")}),
                      Catch::Contains("shrinks what it leaves out"));
  REQUIRE_THROWS_WITH(choco_push<double>(start_models(4, 10), parse_schedule("time-varying-ring", 4),
                                         {.final_consensus_step = 0.0}),
                      Catch::Contains("final consensus step"));
}

TEST_CASE("CHOCO-Push resumed inside its final rounds continues bit for bit", "[choco_push]") {
  const least_squares ls(8, 12, 10, 1.0, 43);
  const auto f = ls.oracle();
  const auto x0 = start_models(8, 12);
  const auto sched = parse_schedule("random:1", 8, 5);  // directed: u != 1
  choco_push_options o{.consensus_step = 0.5, .compressor = parse_compressor("top-k:3")};
  o.final_from = 20;
  o.final_compressor = identity{};
  choco_push<double> a(x0, sched, o);
  for (std::uint32_t t = 0; t < 22; ++t) a.round(t, f, 0.05);  // two final rounds done
  choco_push<double> b(x0, sched, o);
  test::save_and_restore(a, b);
  for (std::uint32_t t = 22; t < 30; ++t) {
    a.round(t, f, 0.05);
    b.round(t, f, 0.05);
  }
  bool u_moved = false;
  for (std::size_t i = 0; i < 8; ++i) {
    REQUIRE(vec(a.node(i).x().begin(), a.node(i).x().end()) == vec(b.node(i).x().begin(), b.node(i).x().end()));
    REQUIRE(a.node(i).u() == b.node(i).u());
    u_moved = u_moved || a.node(i).u() != 1.0;
  }
  REQUIRE(u_moved);
  REQUIRE(a.bytes_sent() == b.bytes_sent());
}
