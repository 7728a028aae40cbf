// Tests of the step policies (algorithm/*.hpp): reductions to independent reference
// implementations, bit for bit (SGP, D-PSGD, DeepSqueeze), mass conservation with local steps,
// convergence to the normal-equations optimum of a distributed least-squares problem, the
// non-IID behaviour SCSP exists for, CHOCO's two memory forms, and bad inputs.
#include <Eigen/Dense>
#include <catch2/catch.hpp>
#include <cstring>
#include <sparsepush/sparsepush.hpp>

#include "least_squares.hpp"
#include "test_util.hpp"

using namespace sparsepush;

namespace {
using vec = std::vector<double>;
using test::least_squares;

/// Independent push-sum SGP / D-PSGD / DeepSqueeze round on plain vectors, written from the
/// equations: y_j = x_j - gamma g_j(x_j / u_j); v_j = y_j + e_j; q_j = C(v_j); e_j = v_j - q_j;
/// S_i = W_ii q_i + sum_{j in in(i), ascending} W_ij q_j; x_i = y_i + eta (S_i - q_i)
/// (evaluated as (y_i - q_i) + S_i when eta = 1); u likewise.
struct reference_sp {
  std::vector<vec> x, e;
  vec u;
  template <class S, class C>
  void round(const S& sched, const C& comp, const gradient_oracle<double>& f, double gamma, double eta,
             std::uint32_t t, std::uint64_t seed) {
    const std::size_t n = x.size(), d = x[0].size();
    std::vector<vec> y(n, vec(d)), q(n, vec(d));
    for (std::size_t j = 0; j < n; ++j) {
      vec xh(d), g(d, 0.0);
      for (std::size_t l = 0; l < d; ++l) xh[l] = x[j][l] / u[j];
      f(static_cast<std::uint32_t>(j), t, xh, g);
      vec v(d);
      for (std::size_t l = 0; l < d; ++l) {
        y[j][l] = x[j][l] - gamma * g[l];
        v[l] = y[j][l] + e[j][l];
      }
      message msg;
      compress(comp, std::span<const double>(v), msg, {seed, static_cast<std::uint32_t>(j), t});
      q[j] = test::dense<double>(msg);
      for (std::size_t l = 0; l < d; ++l) e[j][l] = v[l] - q[j][l];
    }
    // W[i][j] by receiver: self first, then senders ascending
    std::vector<std::vector<std::pair<std::size_t, double>>> rows(n);
    std::vector<out_edge> col;
    for (std::uint32_t j = 0; j < n; ++j) {
      sched.out_edges(t, j, col);
      for (const auto& ed : col)
        if (ed.to == j) rows[j].insert(rows[j].begin(), {j, ed.share});
    }
    for (std::uint32_t j = 0; j < n; ++j) {
      sched.out_edges(t, j, col);
      for (const auto& ed : col)
        if (ed.to != j) rows[ed.to].push_back({j, ed.share});
    }
    std::vector<vec> xn(n, vec(d));
    vec un(n);
    for (std::size_t i = 0; i < n; ++i) {
      double su = 0.0;
      vec s(d, 0.0);
      for (const auto& [j, w] : rows[i]) {
        for (std::size_t l = 0; l < d; ++l) s[l] += w * q[j][l];
        su += w * u[j];
      }
      for (std::size_t l = 0; l < d; ++l)
        xn[i][l] = eta == 1.0 ? (y[i][l] - q[i][l]) + s[l] : y[i][l] + eta * (s[l] - q[i][l]);
      un[i] = eta == 1.0 ? su : u[i] + eta * (su - u[i]);
    }
    x = xn;
    u = un;
  }
};

template <class A>
void require_same_state(const A& alg, const reference_sp& ref) {
  for (std::size_t i = 0; i < ref.x.size(); ++i) {
    const auto xi = alg.group().x(i);
    REQUIRE(vec(xi.begin(), xi.end()) == ref.x[i]);
    REQUIRE(alg.group().u(i) == ref.u[i]);
    const auto ei = alg.group().residual(i);
    if (ei.empty())  // no residual kept (identity everywhere): the reference's must be all zero
      REQUIRE(ref.e[i] == vec(ref.e[i].size(), 0.0));
    else
      REQUIRE(vec(ei.begin(), ei.end()) == ref.e[i]);
  }
}

std::vector<vec> start_models(std::size_t n, std::size_t d) {
  std::vector<vec> x(n);
  for (std::size_t i = 0; i < n; ++i) x[i] = test::gaussian<double>(d, 50 + static_cast<unsigned>(i));
  return x;
}
}  // namespace

TEST_CASE("reductions to independent references, bit for bit", "[algorithm]") {
  const least_squares ls(6, 12, 20, 1.0, 3);
  const auto f = ls.oracle();
  const auto x0 = start_models(6, 12);
  struct cfg {
    const char* name;
    const char* schedule;
    const char* compressor;
    double eta;
  };
  for (const cfg& c : {cfg{"SGP", "exponential", "identity", 1.0}, cfg{"SGP on a time-varying ring", "time-varying-ring:1,2,5", "identity", 1.0},
                       cfg{"D-PSGD", "undirected-ring", "identity", 1.0},
                       cfg{"DeepSqueeze", "undirected-ring", "top-k:0.25", 0.3},
                       cfg{"DeepSqueeze, QSGD", "complete", "qsgd:4", 0.5},
                       cfg{"SP on a directed graph", "exponential", "top-k:0.25+int8", 0.2}}) {
    INFO(c.name);
    const auto sched = parse_schedule(c.schedule, 6);
    const auto comp = parse_compressor(c.compressor);
    sparse_push<double> alg(x0, sched, sparse_push_phases(comp, c.eta), {.threads = 2, .seed = 9});
    reference_sp ref{x0, std::vector<vec>(6, vec(12, 0.0)), vec(6, 1.0)};
    for (std::uint32_t t = 0; t < 40; ++t) {
      alg.round(t, f, 0.01);
      ref.round(sched, comp, f, 0.01, c.eta, t, 9);
      require_same_state(alg, ref);
    }
    if (std::string(c.schedule) == "undirected-ring" || std::string(c.schedule) == "complete")
      for (std::size_t i = 0; i < 6; ++i) REQUIRE(alg.group().u(i) == 1.0);  // symmetric W: u stays 1
    if (std::string(c.compressor) == "identity")
      for (std::size_t i = 0; i < 6; ++i)
        for (double e : alg.group().residual(i)) REQUIRE(e == 0.0);  // identity: e stays 0
  }
}

TEST_CASE("SCSP's final rounds are plain push-sum of x, the residual left alone", "[algorithm]") {
  const least_squares ls(5, 20, 20, 1.0, 6);
  const auto f = ls.oracle();
  const auto sched = parse_schedule("exponential", 5);
  sparse_push<double> alg(start_models(5, 20), sched, scsp_phases(parse_compressor("top-k:0.1"), 0.1, 10, 5));
  for (std::uint32_t t = 0; t < 10; ++t) alg.round(t, f, 0.05);
  for (std::uint32_t t = 10; t < 15; ++t) {
    std::vector<vec> x(5), e(5);
    vec u(5);
    for (std::size_t i = 0; i < 5; ++i) {
      x[i].assign(alg.group().x(i).begin(), alg.group().x(i).end());
      e[i].assign(alg.group().residual(i).begin(), alg.group().residual(i).end());
      u[i] = alg.group().u(i);
    }
    alg.round(t, f, 0.05);
    // independent: x_i = W_ii x_i + sum_{j in in(i), ascending} W_ij x_j, same for u
    std::vector<vec> xn(5, vec(20, 0.0));
    vec un(5, 0.0);
    std::vector<out_edge> col;
    for (std::uint32_t i = 0; i < 5; ++i) {
      std::vector<std::pair<std::uint32_t, double>> row;
      for (std::uint32_t j = 0; j < 5; ++j) {
        sched.out_edges(t, j, col);
        for (const auto& ed : col)
          if (ed.to == i) row.push_back({j, ed.share});
      }
      std::stable_partition(row.begin(), row.end(), [i](const auto& p) { return p.first == i; });
      for (const auto& [j, w] : row) {
        for (std::size_t l = 0; l < 20; ++l) xn[i][l] += w * x[j][l];
        un[i] += w * u[j];
      }
    }
    for (std::size_t i = 0; i < 5; ++i) {
      REQUIRE(vec(alg.group().x(i).begin(), alg.group().x(i).end()) == xn[i]);
      REQUIRE(alg.group().u(i) == un[i]);
      REQUIRE(vec(alg.group().residual(i).begin(), alg.group().residual(i).end()) == e[i]);
    }
  }
}

TEST_CASE("SP with top-K conserves mass every round, local steps included", "[algorithm]") {
  const least_squares ls(8, 200, 10, 1.0, 4);
  const auto f0 = ls.oracle();
  std::vector<vec> last_g(8, vec(200));
  gradient_oracle<double> f = [&](std::uint32_t i, std::uint32_t t, std::span<const double> x, std::span<double> g) {
    f0(i, t, x, g);
    last_g[i].assign(g.begin(), g.end());
  };
  sparse_push<double> alg(start_models(8, 200), parse_schedule("time-varying-ring", 8),
                          sparse_push_phases(top_k{k_spec::fraction(0.01)}, 0.05));
  const double gamma = 0.01;
  for (std::uint32_t t = 0; t < 100; ++t) {
    vec expect = alg.group().mass();
    alg.round(t, f, gamma);
    for (std::size_t i = 0; i < 8; ++i)
      for (std::size_t l = 0; l < 200; ++l) expect[l] -= gamma * last_g[i][l];
    const vec got = alg.group().mass();
    for (std::size_t l = 0; l < 200; ++l) REQUIRE(std::abs(got[l] - expect[l]) < 1e-9);
    REQUIRE(std::abs(alg.group().weight_mass() - 8.0) < 1e-12);
  }
}

TEST_CASE("every algorithm reaches the least-squares optimum", "[algorithm]") {
  // Tolerances are on the averaged model's relative error ||mean_i xh_i - x*|| / ||x*|| (it starts
  // at 1), after 3000 rounds with lr 0.2 / (1 + t/50). Decentralized methods keep a bias that
  // shrinks with the learning rate (the node optima differ); with model compression SP adds
  // the delta-sigma noise of error feedback, so its tolerance is looser. Each bound is about
  // twice the error measured on these seeds at 8 and 16 nodes (SGP ~4e-4, CHOCO ~8e-3, top-1%
  // ~6e-2): tight enough that a wrong mixing weight, a lost message or a biased compressor fails.
  const std::uint32_t rounds = 3000;
  auto lr = [](std::uint32_t t) { return 0.2 / (1.0 + t / 50.0); };
  for (std::size_t n : {8u, 16u}) {
    const least_squares ls(n, 100, 100, 0.1, static_cast<unsigned>(n));
    const auto f = ls.oracle();
    const std::vector<vec> x0(n, vec(100, 0.0));
    const auto expo = parse_schedule("exponential", n);
    const auto ring = parse_schedule("undirected-ring", n);
    auto check = [&](const char* name, auto&& alg, double tol) {
      for (std::uint32_t t = 0; t < rounds; ++t) alg.round(t, f, lr(t));
      const double err = ls.averaged_model_error(alg);
      INFO(name << " n=" << n << " error " << err);
      REQUIRE(err < tol);
    };
    check("SGP", sparse_push<double>(x0, expo, sgp_phases()), 2e-3);
    check("D-PSGD", sparse_push<double>(x0, ring, sgp_phases()), 5e-3);
    check("DeepSqueeze top-10%", sparse_push<double>(x0, ring, sparse_push_phases(parse_compressor("top-k:0.1"), 0.1)), 2e-2);
    check("CHOCO top-10%", choco<double>(x0, ring, {.consensus_step = 0.3, .compressor = parse_compressor("top-k:0.1")}), 2e-2);
    check("CHOCO sign", choco<double>(x0, ring, {.consensus_step = 0.3, .compressor = parse_compressor("sign")}), 2e-2);
    check("SP top-1%", sparse_push<double>(x0, expo, sparse_push_phases(parse_compressor("top-k:0.01"), 0.01)), 1.2e-1);
    check("SP top-10%", sparse_push<double>(x0, expo, sparse_push_phases(parse_compressor("top-k:0.1"), 0.05)), 6e-2);
    check("SP QSGD-16", sparse_push<double>(x0, expo, sparse_push_phases(parse_compressor("qsgd:16"), 0.1)), 2e-2);
    check("SP sign", sparse_push<double>(x0, expo, sparse_push_phases(parse_compressor("sign"), 0.05)), 2e-2);
    check("centralized", centralized<double>(x0[0], n), 1e-8);
  }
}

TEST_CASE("non-IID: top-1% SP keeps nodes apart, SCSP's final phase closes the gap", "[algorithm]") {
  const std::size_t n = 8;
  const least_squares ls(n, 100, 100, 1.0, 21);  // node optima far apart
  const auto f = ls.oracle();
  const std::vector<vec> x0(n, vec(100, 0.0));
  auto lr = [](std::uint32_t t) { return 0.2 / (1.0 + t / 50.0); };
  const auto expo = parse_schedule("exponential", n);
  sparse_push<double> sgp(x0, expo, sgp_phases());
  sparse_push<double> sp(x0, expo, sparse_push_phases(parse_compressor("top-k:0.01"), 0.01));
  sparse_push<double> scsp(x0, expo, scsp_phases(parse_compressor("top-k:0.01"), 0.01, 1500, 40));
  auto run = [&](auto& alg, std::uint32_t first, std::uint32_t rounds) {
    for (std::uint32_t t = first; t < first + rounds; ++t) alg.round(t, f, lr(t));
  };
  run(sgp, 0, 1500);
  run(sp, 0, 1500);
  run(scsp, 0, 1500);
  const double d_sgp = report<double>(sgp, 0).parameter_divergence;
  const double d_sp = report<double>(sp, 0).parameter_divergence;
  const double d_scsp_before = report<double>(scsp, 0).parameter_divergence;
  REQUIRE(d_sp > 10 * d_sgp);
  REQUIRE(d_scsp_before == Approx(d_sp));  // identical so far: same phase, same data
  const double err_before = ls.averaged_model_error(scsp);
  run(scsp, 1500, 40);  // final uncompressed gossip, no local step
  REQUIRE(report<double>(scsp, 0).parameter_divergence < 1e-6);
  REQUIRE(ls.averaged_model_error(scsp) == Approx(err_before).epsilon(1e-9));  // averaging keeps the mean
  REQUIRE(scsp.phases().at(1500).name == "final-gossip");
}

TEST_CASE("phase schedules", "[algorithm]") {
  const auto s = scsp_phases(parse_compressor("top-k:0.01"), 0.02, 100, 5);
  REQUIRE(s.at(0).name == "sp");
  REQUIRE(s.at(99).eta == 0.02);
  REQUIRE(s.at(100).name == "final-gossip");
  REQUIRE_FALSE(s.at(104).local_step);
  REQUIRE(s.total_rounds() == 105);
  REQUIRE(scsp_phases(identity{}, 1.0, 10, 2, true).at(11).local_step);
  const auto w = warm_up_phases(10, parse_compressor("sign"), 0.1);
  REQUIRE(w.at(9).eta == 1.0);
  REQUIRE(w.at(10).eta == 0.1);
  REQUIRE(w.at(1000000).name == "sp");
  REQUIRE(w.total_rounds() == 0);
  REQUIRE_THROWS_WITH(sparse_push_phases(identity{}, 0.0), Catch::Contains("eta must be in (0, 1]"));
  REQUIRE_THROWS_WITH(sparse_push_phases(identity{}, 1.5), Catch::Contains("eta must be in (0, 1]"));
  REQUIRE_THROWS_WITH(phase_schedule({phase{0}, phase{5}}), Catch::Contains("not the last phase"));
  REQUIRE_THROWS_AS(scsp_phases(identity{}, 0.5, 10, 0), config_error);
}

TEST_CASE("CHOCO's weighted-sum form and per-neighbour form give the same iterates", "[algorithm]") {
  const least_squares ls(6, 30, 30, 0.5, 8);
  const auto f = ls.oracle();
  const std::vector<vec> x0 = start_models(6, 30);
  const auto sched = parse_schedule("torus:2x3", 6);
  choco<double> a(x0, sched, {.consensus_step = 0.4, .compressor = parse_compressor("top-k:0.2"), .form = choco_form::weighted_sum});
  choco<double> b(x0, sched, {.consensus_step = 0.4, .compressor = parse_compressor("top-k:0.2"), .form = choco_form::per_neighbour});
  for (std::uint32_t t = 0; t < 300; ++t) {
    a.round(t, f, 0.02);
    b.round(t, f, 0.02);
  }
  // Same iterates up to rounding: s_i is accumulated while the copies are summed afresh, and the
  // rounding differences (~1e-16 a round) feed back through the gradients over 300 rounds.
  for (std::size_t i = 0; i < 6; ++i) {
    const auto ma = a.model(i), mb = b.model(i);
    for (std::size_t l = 0; l < 30; ++l) REQUIRE(ma[l] == Approx(mb[l]).epsilon(1e-6));
  }
  // memory: x, xp, s (3 d) against x, xp and one copy per neighbour ((2 + deg) d); torus 2x3: deg 3
  REQUIRE(b.node(0).model_bytes() - a.node(0).model_bytes() == (3 - 1) * 30 * sizeof(double));
  REQUIRE(b.state_bytes(0) >= b.node(0).model_bytes() + b.node(0).buffer_bytes());
  REQUIRE_THROWS_WITH(choco<double>(x0, parse_schedule("exponential", 6)), Catch::Contains("static schedule"));
  REQUIRE_THROWS_WITH(choco<double>(x0, parse_schedule("directed-ring", 6)), Catch::Contains("symmetric"));
  REQUIRE_THROWS_WITH(choco<double>(x0, sched, {.consensus_step = 0.0}), Catch::Contains("consensus step"));
}

TEST_CASE("a CHOCO consensus step that overflows throws in its round, after every node has mixed", "[algorithm]") {
  // A static symmetric doubly stochastic W on 2 nodes: keep 0.1, give 0.9. With the identity
  // compressor and no local step, round 0 gives xp = x, s = W x and x_i += gamma_c (s_i - x_i);
  // at x = (-a, a), s_0 - x_0 = 0.8 a + a = 1.8 a, beyond the largest float for a = 1.5 * 2^127:
  // x_0 = +Inf and x_1 = -Inf at index 0. The other coordinates are small and stay finite.
  const std::vector<std::vector<out_edge>> cols{{{0, 0.1}, {1, 0.9}}, {{1, 0.1}, {0, 0.9}}};
  const periodic_schedule sched({mixing_round::from_columns(cols)});
  const float a = std::ldexp(1.5f, 127);
  const std::vector<std::vector<float>> x0{{-a, 1.0f, 2.0f}, {a, 3.0f, 4.0f}};
  const gradient_oracle<float> none = [](std::uint32_t, std::uint32_t, std::span<const float>, std::span<float>) {};
  for (const auto form : {choco_form::weighted_sum, choco_form::per_neighbour}) {
    choco<float, any_compressor, periodic_schedule> c(x0, sched,
                                                     {.consensus_step = 0.5, .compressor = identity{}, .form = form});
    try {
      c.round(0, none, 0.0);
      FAIL("the overflowing consensus step went unreported");
    } catch (const non_finite_error& e) {
      REQUIRE(std::string(e.what()) ==
              "sparsepush: CHOCO: x after mixing holds Inf at index 0 (node 0, round 0): the consensus step left the "
              "range of the element type; the round is complete, x keeps the non-finite values");
      REQUIRE(e.index() == 0);
    }
    // both nodes mixed (node 1 after node 0 threw): x_i + 0.5 (sum_j W_ij x_j - x_i), in double
    for (std::size_t i = 0; i < 2; ++i) {
      const auto x = c.node(i).x();
      REQUIRE(std::isinf(x[0]));
      REQUIRE((x[0] > 0) == (i == 0));
      for (std::size_t l = 1; l < 3; ++l) {
        const double w = 0.5 * (0.1 * double(x0[i][l]) + 0.9 * double(x0[1 - i][l]) - double(x0[i][l]));
        REQUIRE(x[l] == Approx(double(x0[i][l]) + w).epsilon(1e-6));
      }
    }
  }
}

TEST_CASE("state bytes per node: SP keeps x and e, SGP only x, CHOCO x, xp and s", "[algorithm]") {
  const std::size_t n = 4, d = 1000;
  const std::vector<vec> x0(n, vec(d, 1.0));
  gradient_oracle<double> zero = [](std::uint32_t, std::uint32_t, std::span<const double>, std::span<double>) {};
  sparse_push<double> sp(x0, parse_schedule("undirected-ring", n), sparse_push_phases(parse_compressor("top-k:0.01"), 0.1));
  choco<double> ch(x0, parse_schedule("undirected-ring", n), {.compressor = parse_compressor("top-k:0.01")});
  sp.round(0, zero, 0.1);
  ch.round(0, zero, 0.1);
  // the algorithm's tensors exactly; the buffers (message, inbox, scratch) on top, at least the
  // message as it is held in memory (u32 indices and the payload)
  const auto& m = sp.group().last_message(0);
  REQUIRE(sp.group().node(0).model_bytes() == 2 * d * sizeof(double) + sizeof(double));
  REQUIRE(sp.state_bytes(0) >= sp.group().node(0).model_bytes() + 4 * m.indices.size() + m.payload.size());
  REQUIRE(ch.node(0).model_bytes() == 3 * d * sizeof(double));
  REQUIRE(ch.state_bytes(0) >= ch.node(0).model_bytes() + ch.node(0).outgoing().payload.size());
  sparse_push<double> sgp(x0, parse_schedule("undirected-ring", n), sgp_phases());
  sgp.round(0, zero, 0.1);
  REQUIRE(sgp.group().node(0).model_bytes() == d * sizeof(double) + sizeof(double));
  REQUIRE(sgp.state_bytes(0) >= sgp.group().node(0).model_bytes() + d * sizeof(double));  // its dense message
  REQUIRE(sgp.group().residual(0).empty());
  // SCSP switches compressors: the residual is kept
  sparse_push<double> scsp(x0, parse_schedule("undirected-ring", n), scsp_phases(parse_compressor("sign"), 0.1, 5, 5));
  REQUIRE(scsp.group().residual(0).size() == d);
}

TEST_CASE("bad inputs to the algorithms are errors naming node and round, nothing half applied", "[algorithm]") {
  std::vector<vec> x0 = start_models(4, 10);
  x0[3].resize(11);
  REQUIRE_THROWS_WITH(sparse_push<double>(x0, parse_schedule("exponential", 4), sgp_phases()),
                      Catch::Contains("node 3 has 11"));
  x0 = start_models(4, 10);
  REQUIRE_THROWS_WITH(sparse_push<double>(x0, parse_schedule("exponential", 5), sgp_phases()),
                      Catch::Contains("schedule has 5 nodes but 4 models"));
  sparse_push<double> alg(x0, parse_schedule("exponential", 4), sparse_push_phases(parse_compressor("top-k:0.3"), 0.5));
  gradient_oracle<double> ok = [](std::uint32_t, std::uint32_t, std::span<const double> x, std::span<double> g) {
    for (std::size_t l = 0; l < x.size(); ++l) g[l] = x[l];
  };
  alg.round(0, ok, 0.1);
  std::vector<vec> before;
  for (std::size_t i = 0; i < 4; ++i) before.push_back(alg.model(i));
  gradient_oracle<double> nan_at_2 = [&](std::uint32_t i, std::uint32_t t, std::span<const double> x, std::span<double> g) {
    ok(i, t, x, g);
    if (i == 2) g[4] = std::nan("");
  };
  try {
    alg.round(1, nan_at_2, 0.1);
    FAIL("no exception");
  } catch (const non_finite_error& e) {
    REQUIRE(std::string(e.what()).find("node 2, round 1") != std::string::npos);
    REQUIRE(e.index() == 4);
  }
  for (std::size_t i = 0; i < 4; ++i) REQUIRE(alg.model(i) == before[i]);
  choco<double> ch(x0, parse_schedule("undirected-ring", 4));
  REQUIRE_THROWS_WITH(ch.round(0, nan_at_2, 0.1), Catch::Contains("node 2, round 0"));
  for (std::size_t i = 0; i < 4; ++i) REQUIRE(ch.model(i) == x0[i]);
  centralized<double> c(x0[0], 4);
  REQUIRE_THROWS_WITH(c.round(0, nan_at_2, 0.1), Catch::Contains("node 2, round 0"));
  REQUIRE(c.model(0) == x0[0]);
}

TEST_CASE("directions handed to a round equal the oracle's bit for bit and bad ones change nothing", "[algorithm]") {
  const std::size_t n = 6, d = 80;
  const auto sched = parse_schedule("exponential", n);
  const auto phases = scsp_phases(parse_compressor("top-k:0.1"), 0.3, 12, 3);
  const gradient_oracle<double> oracle = [](std::uint32_t i, std::uint32_t t, std::span<const double> x,
                                            std::span<double> g) {
    for (std::size_t l = 0; l < x.size(); ++l) g[l] = x[l] - std::cos(double(l) * double(i + 1) + 0.1 * t);
  };
  std::vector<vec> x0(n, vec(d, 0.25));
  sparse_push<double> a(x0, sched, phases, {.threads = 2}), b(x0, sched, phases, {.threads = 2});
  std::vector<vec> dirs(n, vec(d)), xh(b.workers(), vec(d));
  for (std::uint32_t t = 0; t < 15; ++t) {
    a.round(t, oracle, 0.1);
    REQUIRE(b.trains(t) == (t < 12));
    if (b.trains(t))
      b.for_each_node([&](std::size_t i, std::size_t w) {  // no Catch2 assertion on a worker thread
        b.model(i, xh.at(w));
        oracle(static_cast<std::uint32_t>(i), t, xh[w], dirs[i]);
      });
    const std::vector<std::span<const double>> views(dirs.begin(), dirs.end());
    b.round(t, std::span<const std::span<const double>>(views), 0.1);
  }
  for (std::size_t i = 0; i < n; ++i) {
    const auto ma = a.model(i), mb = b.model(i);
    REQUIRE(std::memcmp(ma.data(), mb.data(), d * sizeof(double)) == 0);
  }
  // too few directions, or an empty one: a size_error in the round's checks, nothing changed
  sparse_push<double> c(x0, sched, phases);
  std::vector<std::span<const double>> few(dirs.begin(), dirs.begin() + 3);
  REQUIRE_THROWS_AS(c.round(0, std::span<const std::span<const double>>(few), 0.1), size_error);
  REQUIRE_THROWS_WITH(c.round(0, std::span<const std::span<const double>>(), 0.1),  // a training phase
                      Catch::Contains("round 0: 0 local directions for 6 nodes"));
  std::vector<std::span<const double>> hole(dirs.begin(), dirs.end());
  hole[4] = {};
  REQUIRE_THROWS_WITH(c.round(0, std::span<const std::span<const double>>(hole), 0.1),
                      Catch::Contains("node 4: direction has 0 elements"));
  for (std::size_t i = 0; i < n; ++i) REQUIRE(c.model(i) == vec(d, 0.25));
  REQUIRE(c.bytes_sent() == 0);
}

TEST_CASE("sparse_push's oracle sees x / u: x itself where u is exactly 1, the de-biased copy elsewhere",
          "[algorithm]") {
  // the directed ring (every node keeps a half and pushes a half to the next) keeps u = 1 exactly;
  // a random schedule of uneven in-degrees moves u away from 1. In both, what the oracle reads must
  // be model(i), bit for bit, every round.
  const std::size_t n = 6, d = 40;
  std::vector<std::vector<float>> x0;
  for (std::size_t i = 0; i < n; ++i) x0.push_back(test::gaussian<float>(d, 300 + static_cast<unsigned>(i)));
  for (const char* spec : {"directed-ring", "random:2"}) {
    INFO(spec);
    sparse_push<float> alg(x0, parse_schedule(spec, n), sparse_push_phases(top_k{k_spec::count(5)}, 0.5),
                           {.threads = 1, .seed = 4});
    std::size_t calls = 0, unit_weight = 0, mismatches = 0;
    const gradient_oracle<float> oracle = [&](std::uint32_t i, std::uint32_t, std::span<const float> model,
                                              std::span<float> p) {
      const auto want = alg.model(i);
      mismatches += std::memcmp(model.data(), want.data(), d * sizeof(float)) != 0;
      unit_weight += alg.group().node(i).u() == 1.0;
      ++calls;
      for (std::size_t l = 0; l < d; ++l) p[l] = 0.1f * model[l];
    };
    for (std::uint32_t t = 0; t < 8; ++t) alg.round(t, oracle, 0.1);
    REQUIRE(calls == 8 * n);
    REQUIRE(mismatches == 0);
    if (std::string(spec) == "directed-ring") REQUIRE(unit_weight == calls);  // the in-place path ran
    else REQUIRE(unit_weight < calls);                                          // and the copying one
  }
}
