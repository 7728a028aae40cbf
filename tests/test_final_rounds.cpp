// Tests of algorithm/final_rounds.hpp and SCSP's compressed final phase (phases.hpp): the exact
// count on graphs that average exactly, the bound recomputed from dense products of W(t) and
// checked on push-sum with arbitrary positive weights, the count run by a real group, and a
// final phase that sends bf16 values from a fresh residual.
#include <Eigen/Dense>
#include <catch2/catch.hpp>
#include <random>
#include <sparsepush/sparsepush.hpp>

using namespace sparsepush;

namespace {
using vec = std::vector<double>;

/// W(t) as a dense matrix, W[i][j] the share of j's mass at i.
Eigen::MatrixXd dense_w(const any_schedule& s, std::uint64_t t) {
  const auto n = static_cast<Eigen::Index>(s.num_nodes());
  Eigen::MatrixXd w = Eigen::MatrixXd::Zero(n, n);
  std::vector<out_edge> col;
  for (std::uint32_t j = 0; j < n; ++j) {
    s.out_edges(t, j, col);
    for (const auto& e : col) w(e.to, j) += e.share;
  }
  return w;
}

/// rho = 2 delta / (1 - delta) of a product P, delta the largest relative deviation of an entry
/// from its row's mean (infinity when delta >= 1).
double rho_of(const Eigen::MatrixXd& p) {
  double delta = 0;
  for (Eigen::Index i = 0; i < p.rows(); ++i) {
    const double mean = p.row(i).mean();
    if (!(mean > 0)) return std::numeric_limits<double>::infinity();
    delta = std::max(delta, (p.row(i).array() / mean - 1.0).abs().maxCoeff());
  }
  return delta < 1 ? 2 * delta / (1 - delta) : std::numeric_limits<double>::infinity();
}

/// A local step that moves nothing (p_i = 0).
template <class T>
const gradient_oracle<T> no_step = [](std::uint32_t, std::uint32_t, std::span<const T>, std::span<T> g) {
  std::fill(g.begin(), g.end(), T(0));
};

std::vector<vec> random_models(std::size_t n, std::size_t d, unsigned seed) {
  std::mt19937 g(seed);
  std::normal_distribution<double> nd;
  std::vector<vec> x(n, vec(d));
  for (auto& xi : x)
    for (auto& v : xi) v = nd(g);
  return x;
}

/// Every node's de-biased model's distance to the push-sum average sum x / sum u.
vec distances_to_average(const sparse_push<double>& alg, std::size_t n, std::size_t d) {
  vec xbar(d, 0.0);
  double usum = 0;
  for (std::size_t i = 0; i < n; ++i) {
    for (std::size_t c = 0; c < d; ++c) xbar[c] += alg.group().x(i)[c];
    usum += alg.group().u(i);
  }
  for (auto& v : xbar) v /= usum;
  vec dist(n);
  for (std::size_t i = 0; i < n; ++i) {
    const auto m = alg.model(i);
    double sq = 0;
    for (std::size_t c = 0; c < d; ++c) sq += (m[c] - xbar[c]) * (m[c] - xbar[c]);
    dist[i] = std::sqrt(sq);
  }
  return dist;
}
}  // namespace

TEST_CASE("final rounds: the exact count where the graph averages exactly", "[algorithm]") {
  for (std::size_t m = 1; m <= 6; ++m) {
    const std::size_t n = std::size_t{1} << m;
    const auto s = parse_schedule("exponential", n);
    for (std::uint64_t t0 : {0u, 1u, 5u, 1000u}) {
      const auto plan = final_rounds_for(s, t0);
      CAPTURE(n, t0);
      REQUIRE(plan.rounds == m);
      REQUIRE(plan.exact);
      REQUIRE(plan.bound == 0);
    }
  }
  // the trainer's default: 16 nodes on the time-varying ring (hops 1, 2, 4, 8) average after 4
  REQUIRE(final_rounds_for(parse_schedule("time-varying-ring", 16), 586).rounds == 4);
  // 6 nodes never average exactly with shares of 1/2: the count meets the tolerance instead
  const auto six = final_rounds_for(parse_schedule("exponential", 6), 0, 1e-6);
  REQUIRE_FALSE(six.exact);
  REQUIRE(six.bound > 0);
  REQUIRE(six.bound <= 1e-6);
}

TEST_CASE("final rounds: the first count whose product meets the bound, which holds for any weights u",
          "[algorithm]") {
  for (const char* spec : {"directed-ring", "undirected-ring", "random:2", "erdos-renyi:0.3", "time-varying-ring",
                           "alternating-ring"}) {
    const std::size_t n = 7;
    const auto s = parse_schedule(spec, n, 3);
    const std::uint64_t t0 = 5;
    const double tol = 1e-2;
    const auto plan = final_rounds_for(s, t0, tol);
    CAPTURE(spec, plan.rounds, plan.bound);
    // independent: dense products of W(t0) .. W(t0 + k - 1)
    Eigen::MatrixXd p = Eigen::MatrixXd::Identity(7, 7), before = p;
    for (std::uint32_t k = 0; k < plan.rounds; ++k) {
      before = p;
      p = dense_w(s, t0 + k) * p;
    }
    REQUIRE(rho_of(p) <= tol);
    REQUIRE(std::abs(rho_of(p) - plan.bound) <= 1e-12);
    REQUIRE(rho_of(before) > tol);  // one round fewer does not meet it
    // push-sum from arbitrary models and positive weights summing to n: every de-biased model
    // ends within rho of the largest distance to the average xbar = sum x / n
    std::mt19937 g(11);
    std::uniform_real_distribution<double> ud(0.05, 3.0);
    for (int trial = 0; trial < 20; ++trial) {
      Eigen::VectorXd u(7);
      for (auto& v : u) v = ud(g);
      u *= 7.0 / u.sum();
      const auto xh = random_models(7, 4, 100 + trial);
      Eigen::MatrixXd x(7, 4);  // push-sum numerators x_j = u_j xh_j
      for (Eigen::Index j = 0; j < 7; ++j)
        for (Eigen::Index c = 0; c < 4; ++c) x(j, c) = u(j) * xh[j][c];
      const Eigen::RowVectorXd xbar = x.colwise().sum() / 7.0;
      double m0 = 0;
      for (Eigen::Index j = 0; j < 7; ++j)
        m0 = std::max(m0, (x.row(j) / u(j) - xbar).norm());
      const Eigen::MatrixXd x1 = p * x;
      const Eigen::VectorXd u1 = p * u;
      for (Eigen::Index i = 0; i < 7; ++i) REQUIRE((x1.row(i) / u1(i) - xbar).norm() <= plan.bound * m0 + 1e-12);
    }
  }
}

TEST_CASE("final rounds: a group running the count ends within the tolerance", "[algorithm]") {
  // SP rounds on a directed graph with uneven out-degrees leave u_i != 1 and the models apart;
  // then plan.rounds exact rounds of SCSP's final phase
  const std::size_t n = 9, d = 16;
  const auto s = parse_schedule("erdos-renyi:0.3", n, 4);
  const std::uint32_t train = 30;
  const double tol = 1e-3;
  const auto plan = final_rounds_for(s, train, tol);
  sparse_push<double> alg(random_models(n, d, 5), s,
                          scsp_phases(parse_compressor("top-k:0.25"), 0.3, train, plan.rounds));
  for (std::uint32_t t = 0; t < train; ++t) alg.round(t, no_step<double>, 0.0);
  auto distances = [&] { return distances_to_average(alg, n, d); };
  double u_spread = 0;
  for (std::size_t i = 0; i < n; ++i) u_spread = std::max(u_spread, std::abs(alg.group().u(i) - 1.0));
  REQUIRE(u_spread > 0.05);  // the weights are not all 1: the bound must hold for any u
  const vec d0 = distances();
  const double m0 = *std::max_element(d0.begin(), d0.end());
  REQUIRE(m0 > 0.1);
  for (std::uint32_t t = train; t < train + plan.rounds; ++t)
    alg.round(t, no_step<double>, 0.0);
  const vec d1 = distances();
  for (std::size_t i = 0; i < n; ++i) REQUIRE(d1[i] <= tol * m0 + 1e-12);
}

TEST_CASE("final rounds: bad tolerances and graphs too slow for the limit are errors", "[algorithm]") {
  const auto s = parse_schedule("directed-ring", 64);
  REQUIRE_THROWS_AS(final_rounds_for(s, 0, 0.0), config_error);
  REQUIRE_THROWS_AS(final_rounds_for(s, 0, 1.0), config_error);
  REQUIRE_THROWS_AS(final_rounds_for(s, 0, std::nan("")), config_error);
  REQUIRE_THROWS_WITH(final_rounds_for(s, 0, 1e-3, 50), Catch::Contains("give the number of final rounds"));
  for (double eta : {0.0, -0.5, 1.5, std::nan("")})
    REQUIRE_THROWS_WITH(final_rounds_for(s, 0, 1e-3, 100000, eta), Catch::Contains("eta must be in (0, 1]"));
  // the work limit: the ring needs thousands of rounds of 64 x 2 x 64 multiply-adds; a budget of
  // 10^6 stops it after about 80 of them, with the bound reached so far, while the default finds it
  const auto plan = final_rounds_for(s, 0, 1e-3);
  REQUIRE(plan.rounds > 500);
  REQUIRE_THROWS_WITH(final_rounds_for(s, 0, 1e-3, 100000, 1.0, 1e6),
                      Catch::Contains("work limit on 64 nodes") &&
                          Catch::Contains("give the number of final rounds"));
  REQUIRE_NOTHROW(final_rounds_for(s, 0, 1e-3, 100000, 1.0, 64.0 * 3 * 64 * plan.rounds));
}

TEST_CASE("final rounds relaxed by eta: the count of the relaxed product, run by a group", "[algorithm]") {
  // x_i <- x_i + eta (sum_j W_ij x_j - x_i) multiplies by I + eta (W - I): at eta 0.5 the
  // time-varying ring of 16 no longer averages exactly after 4 rounds
  const auto ring = parse_schedule("time-varying-ring", 16);
  const auto relaxed = final_rounds_for(ring, 586, 1e-3, 100000, 0.5);
  REQUIRE_FALSE(relaxed.exact);
  REQUIRE(relaxed.rounds > 4);
  for (const char* spec : {"time-varying-ring", "erdos-renyi:0.3"}) {
    const std::size_t n = std::string(spec) == "erdos-renyi:0.3" ? 9 : 16, d = 8;
    const auto s = parse_schedule(spec, n, 4);
    const std::uint32_t train = 30;
    const double tol = 1e-3, eta = 0.5;
    const auto plan = final_rounds_for(s, train, tol, 100000, eta);
    CAPTURE(spec, plan.rounds, plan.bound);
    // independent: dense products of I + eta (W(t) - I)
    const auto id = Eigen::MatrixXd::Identity(static_cast<Eigen::Index>(n), static_cast<Eigen::Index>(n));
    Eigen::MatrixXd p = id, before = p;
    for (std::uint32_t k = 0; k < plan.rounds; ++k) {
      before = p;
      p = (id + eta * (dense_w(s, train + k) - id)) * p;
    }
    REQUIRE(rho_of(p) <= tol);
    REQUIRE(std::abs(rho_of(p) - plan.bound) <= 1e-12);
    REQUIRE(rho_of(before) > tol);
    // SP rounds, then plan.rounds of SCSP's final phase with identity and eta 0.5
    sparse_push<double> alg(random_models(n, d, 6), s,
                            scsp_phases(parse_compressor("top-k:0.25"), 0.3, train, parse_compressor("identity"),
                                        eta, plan.rounds));
    for (std::uint32_t t = 0; t < train; ++t) alg.round(t, no_step<double>, 0.0);
    auto max_distance = [&] {
      const vec dist = distances_to_average(alg, n, d);
      return *std::max_element(dist.begin(), dist.end());
    };
    const double m0 = max_distance();
    REQUIRE(m0 > 0.1);
    for (std::uint32_t t = train; t < train + plan.rounds; ++t) alg.round(t, no_step<double>, 0.0);
    REQUIRE(max_distance() <= tol * m0 + 1e-12);
  }
}

TEST_CASE("SCSP's bf16 final phase: a fresh residual, bf16 values, mass kept, models close", "[algorithm]") {
  const std::size_t n = 8, d = 40;
  const auto s = parse_schedule("exponential", n);
  const std::uint32_t train = 12, final_rounds = 3;
  sparse_push<float> alg(
      [&] {
        std::vector<std::vector<float>> x;
        for (const auto& xi : random_models(n, d, 8)) x.emplace_back(xi.begin(), xi.end());
        return x;
      }(),
      s,
      scsp_phases(parse_compressor("top-k:0.1"), 0.2, train, parse_compressor("identity+bf16"), 1.0,
                  final_rounds));
  REQUIRE(alg.phases().at(train).fresh_residual);
  REQUIRE_FALSE(alg.phases().at(0).fresh_residual);
  for (std::uint32_t t = 0; t < train; ++t) alg.round(t, no_step<float>, 0.0);
  double e_norm = 0;
  for (std::size_t i = 0; i < n; ++i)
    for (float v : alg.group().residual(i)) e_norm += double(v) * v;
  REQUIRE(e_norm > 1.0);  // top-10% left a large residual
  auto mass = [&] {
    vec m(d, 0.0);
    for (std::size_t i = 0; i < n; ++i)
      for (std::size_t c = 0; c < d; ++c) m[c] += alg.group().x(i)[c];
    return m;
  };
  const vec m0 = mass();
  std::vector<vec> x_before(n);
  for (std::size_t i = 0; i < n; ++i) x_before[i].assign(alg.group().x(i).begin(), alg.group().x(i).end());
  alg.round(train, no_step<float>, 0.0);
  // first final round: e_i = x_i - bf16(x_i), the training residual dropped
  for (std::size_t i = 0; i < n; ++i)
    for (std::size_t c = 0; c < d; ++c) {
      const float xv = static_cast<float>(x_before[i][c]);
      const float q = std::bit_cast<float>(std::bit_cast<std::uint32_t>(xv) & 0xFFFF0000u);  // truncation bound
      REQUIRE(std::abs(alg.group().residual(i)[c]) <= std::abs(xv - q) * 1.0f + 1e-30f);
      REQUIRE(std::abs(alg.group().residual(i)[c]) <= std::abs(xv) * 0x1p-8f);
    }
  for (std::uint32_t t = train + 1; t < train + final_rounds; ++t)
    alg.round(t, no_step<float>, 0.0);
  const vec m1 = mass();
  for (std::size_t c = 0; c < d; ++c) REQUIRE(std::abs(m1[c] - m0[c]) <= 1e-4 * (1 + std::abs(m0[c])));
  // after log2(8) rounds every model is the average up to bf16 rounding of the values sent
  vec avg(d, 0.0);
  double scale = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const auto m = alg.model(i);
    for (std::size_t c = 0; c < d; ++c) avg[c] += m[c] / double(n);
  }
  for (double v : avg) scale = std::max(scale, std::abs(v));
  for (std::size_t i = 0; i < n; ++i) {
    const auto m = alg.model(i);
    for (std::size_t c = 0; c < d; ++c) REQUIRE(std::abs(m[c] - avg[c]) <= 4 * scale * 0x1p-8);
  }
}
