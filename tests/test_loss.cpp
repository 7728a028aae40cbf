// Tests of push-sum under message loss (gossip/node.hpp, loss_recovery; transport loss_model):
// with acknowledged recovery the average and sum u = n survive 10% and 30% loss, checked against
// a dense reference that moves each lost share to the sender's diagonal; plain push-sum drifts
// beside it; compressed sparse messages conserve mass; no loss means the same bits either way;
// a starving weight is an error, never silent zeros; CHOCO refuses a lossy network; network,
// endpoints and loss model agree on every lost envelope, and the ledger counts them per node.
#include <Eigen/Dense>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <sparsepush/sparsepush.hpp>

#include "test_util.hpp"

using namespace sparsepush;

namespace {
using vec = std::vector<double>;

std::vector<vec> random_models(std::size_t n, std::size_t d, unsigned seed) {
  std::vector<vec> x;
  for (std::size_t i = 0; i < n; ++i) x.push_back(test::gaussian<double>(d, seed * 100 + static_cast<unsigned>(i), 1.0));
  return x;
}

vec true_average(const std::vector<vec>& x) {
  vec a(x[0].size(), 0.0);
  for (const auto& v : x)
    for (std::size_t l = 0; l < v.size(); ++l) a[l] += v[l] / static_cast<double>(x.size());
  return a;
}

/// max over nodes and coordinates of |x_i / u_i - avg|.
template <class G>
double max_error(const G& g, const vec& avg) {
  double e = 0;
  for (std::size_t i = 0; i < g.num_nodes(); ++i) {
    const auto xh = g.debiased(i);
    for (std::size_t l = 0; l < avg.size(); ++l) e = std::max(e, std::abs(static_cast<double>(xh[l]) - avg[l]));
  }
  return e;
}

/// The reference W~(t): W(t) with every lost entry W_ij (i != j) moved to W_jj (acknowledged) or
/// removed (plain), built from the loss rule itself, independently of the nodes.
template <class S>
Eigen::MatrixXd lossy_w(const S& s, std::uint32_t t, const loss_model& loss, bool keep) {
  const std::size_t n = s.num_nodes();
  Eigen::MatrixXd w = Eigen::MatrixXd::Zero(static_cast<Eigen::Index>(n), static_cast<Eigen::Index>(n));
  std::vector<out_edge> col;
  for (std::uint32_t j = 0; j < n; ++j) {
    s.out_edges(t, j, col);
    for (const auto& e : col) {
      if (e.to != j && loss.lost({.round = t, .from = j, .to = e.to})) {
        if (keep) w(j, j) += e.share;
      } else {
        w(e.to, j) += e.share;
      }
    }
  }
  return w;
}
}  // namespace

TEST_CASE("acknowledged loss: exact average and sum u = n at 10% and 30% loss, plain push-sum drifts",
          "[loss]") {
  const std::size_t n = 16, d = 40;
  const auto s = parse_schedule("exponential", n);
  const auto x0 = random_models(n, d, 5);
  const vec avg = true_average(x0);
  for (const double p : {0.1, 0.3}) {
    CAPTURE(p);
    push_sum_group<vec> ack(x0, {.seed = 1, .recovery = loss_recovery::acknowledged});
    push_sum_group<vec> plain(x0, {.seed = 1});
    loopback_network net_ack(n, {.drop_probability = p, .seed = 9});
    loopback_network net_plain(n, {.drop_probability = p, .seed = 9});
    // dense reference: X (d x n) and u evolve by W~(t)
    Eigen::MatrixXd X(static_cast<Eigen::Index>(d), static_cast<Eigen::Index>(n));
    for (std::size_t i = 0; i < n; ++i)
      for (std::size_t l = 0; l < d; ++l) X(static_cast<Eigen::Index>(l), static_cast<Eigen::Index>(i)) = x0[i][l];
    Eigen::VectorXd U = Eigen::VectorXd::Ones(static_cast<Eigen::Index>(n));
    const vec mass0 = ack.mass();
    for (std::uint32_t t = 0; t < 400; ++t) {
      ack.round(s, identity{}, net_ack, t);
      plain.round(s, identity{}, net_plain, t);
      const Eigen::MatrixXd w = lossy_w(s, t, net_ack.loss(), true);
      X = X * w.transpose();
      U = w * U;
      REQUIRE(ack.weight_mass() == Approx(static_cast<double>(n)).margin(1e-9));
      const vec m = ack.mass();
      for (std::size_t l = 0; l < d; ++l) REQUIRE(m[l] == Approx(mass0[l]).margin(1e-9));
      if (t % 50 == 0 || t == 399)
        for (std::size_t i = 0; i < n; ++i) {
          REQUIRE(ack.u(i) == Approx(U(static_cast<Eigen::Index>(i))).epsilon(1e-12));
          for (std::size_t l = 0; l < d; ++l)
            REQUIRE(ack.x(i)[l] ==
                    Approx(X(static_cast<Eigen::Index>(l), static_cast<Eigen::Index>(i))).margin(1e-12));
        }
    }
    REQUIRE(net_ack.messages_dropped() > 0);
    REQUIRE(net_ack.messages_dropped() == net_plain.messages_dropped());  // the same envelopes lost
    const double e_ack = max_error(ack, avg), e_plain = max_error(plain, avg);
    WARN("loss " << p << ": " << net_ack.messages_dropped() << " of " << net_ack.total_messages()
                 << " envelopes lost; acknowledged: max |xh - avg| = " << e_ack << ", sum u = " << ack.weight_mass()
                 << "; plain: max |xh - avg| = " << e_plain << ", sum u = " << plain.weight_mass());
    REQUIRE(e_ack < 1e-6);
    // plain push-sum beside it: the nodes still agree, on a value that is off, with mass gone
    REQUIRE(e_plain > 1e-3);
    REQUIRE(plain.weight_mass() < static_cast<double>(n) * 0.5);
    REQUIRE(plain.consensus_distance() < 1e-6);
  }
}

TEST_CASE("acknowledged loss with compressed sparse messages and eta < 1 conserves sum x and sum u",
          "[loss]") {
  const std::size_t n = 8, d = 300;
  const auto s = parse_schedule("time-varying-ring", n);
  const auto x0 = random_models(n, d, 7);
  push_sum_group<vec> g(x0, {.eta = 0.3, .seed = 2, .recovery = loss_recovery::acknowledged});
  loopback_network net(n, {.drop_probability = 0.3, .seed = 4, .mode = loopback_mode::encoded});
  const vec mass0 = g.mass();
  for (std::uint32_t t = 0; t < 60; ++t) {
    g.round(s, top_k{k_spec::fraction(0.05)}, net, t, {.eta = 0.3});
    REQUIRE_FALSE(g.last_message(0).dense());
    REQUIRE(g.weight_mass() == Approx(static_cast<double>(n)).margin(1e-9));
    const vec m = g.mass();
    for (std::size_t l = 0; l < d; ++l) REQUIRE(m[l] == Approx(mass0[l]).margin(1e-9));
  }
  REQUIRE(net.messages_dropped() > 0);
}

TEST_CASE("without loss, acknowledged recovery gives plain push-sum's bits", "[loss]") {
  const std::size_t n = 8, d = 200;
  const auto s = parse_schedule("exponential", n);
  const auto x0 = random_models(n, d, 3);
  push_sum_group<vec> a(x0, {.eta = 0.5, .seed = 2, .recovery = loss_recovery::acknowledged});
  push_sum_group<vec> b(x0, {.eta = 0.5, .seed = 2});
  loopback_network na(n), nb(n);
  for (std::uint32_t t = 0; t < 30; ++t) {
    a.round(s, top_k{k_spec::fraction(0.1)}, na, t, {.eta = 0.5});
    b.round(s, top_k{k_spec::fraction(0.1)}, nb, t, {.eta = 0.5});
  }
  for (std::size_t i = 0; i < n; ++i) {
    REQUIRE(std::memcmp(a.x(i).data(), b.x(i).data(), d * sizeof(double)) == 0);
    REQUIRE(a.u(i) == b.u(i));
  }
}

TEST_CASE("a node keeps exactly the shares of the envelopes its endpoint reports lost", "[loss]") {
  // a one-node view: the endpoint loses the envelope to node 2 and delivers the one to node 1
  struct lossy_endpoint {
    std::uint32_t node() const { return 0; }
    void post(std::uint32_t, std::span<const out_edge>, double, const message&) {}
    void collect(std::uint32_t, std::span<const in_edge>, inbox& box) { box.envelopes.clear(); }
    bool lost(std::uint32_t, std::uint32_t to) const { return to == 2; }
  } ep;
  const std::vector<out_edge> out{{0, 0.5}, {1, 0.2}, {2, 0.3}};
  for (const auto rec : {loss_recovery::none, loss_recovery::acknowledged}) {
    push_sum_node<vec> node(vec{2.0, -4.0}, {.id = 0, .recovery = rec});
    node.compress(identity{}, 0, false);
    node.post(ep, 0, out);
    const double kept = rec == loss_recovery::acknowledged ? 0.3 : 0.0;
    REQUIRE(node.returned_share() == kept);
    node.collect(ep, 0, std::vector<in_edge>{});
    node.mix(1.0, node.self_share(out));
    REQUIRE(node.u() == Approx(0.5 + kept));
    REQUIRE(node.x()[0] == Approx(2.0 * (0.5 + kept)));
    REQUIRE(node.x()[1] == Approx(-4.0 * (0.5 + kept)));
    REQUIRE(node.returned_share() == 0.0);  // used once
  }
}

TEST_CASE("plain push-sum whose weight starves is an error naming node and round, never silent zeros",
          "[loss]") {
  const std::size_t n = 16, d = 20;
  const auto s = parse_schedule("exponential", n);
  std::vector<std::vector<float>> x0;
  for (std::size_t i = 0; i < n; ++i) x0.push_back(test::gaussian<float>(d, 40 + static_cast<unsigned>(i), 1.0));
  push_sum_group<std::vector<float>> g(x0, {.seed = 1});
  loopback_network net(n, {.drop_probability = 0.3, .seed = 3});
  std::uint32_t t = 0;
  bool threw = false;
  for (; t < 20000 && !threw; ++t) {
    std::vector<std::vector<float>> before(n);
    std::vector<double> u_before(n);
    for (std::size_t i = 0; i < n; ++i) {
      before[i].assign(g.x(i).begin(), g.x(i).end());
      u_before[i] = g.u(i);
    }
    try {
      g.round(s, identity{}, net, t);
    } catch (const weight_underflow_error& e) {
      threw = true;
      const std::string what = e.what();
      REQUIRE(what.find("round " + std::to_string(t)) != std::string::npos);
      REQUIRE(what.find("loss_recovery::acknowledged") != std::string::npos);
      for (std::size_t i = 0; i < n; ++i) {  // nothing changed, and every estimate is still a number
        REQUIRE(std::memcmp(g.x(i).data(), before[i].data(), d * sizeof(float)) == 0);
        REQUIRE(g.u(i) == u_before[i]);
        for (const float v : g.debiased(i)) REQUIRE((std::isfinite(v) && v != 0.0f));
      }
    }
  }
  INFO("rounds run: " << t);
  REQUIRE(threw);
}

TEST_CASE("Sparse-Push reports lost envelopes and keeps sum u = n with acknowledged recovery", "[loss]") {
  const std::size_t n = 8, d = 50;
  std::vector<vec> x0(n, vec(d, 1.0));
  const gradient_oracle<double> oracle = [](std::uint32_t i, std::uint32_t, std::span<const double> m,
                                            std::span<double> g) {
    for (std::size_t l = 0; l < m.size(); ++l) g[l] = m[l] - static_cast<double>(i);  // f_i = |x - i|^2 / 2
  };
  auto run = [&](double p) {
    sparse_push<double> a(x0, parse_schedule("exponential", n), sparse_push_phases(parse_compressor("top-k:0.2"), 0.2),
                          {.seed = 1, .network = {.drop_probability = p, .seed = 5},
                           .recovery = loss_recovery::acknowledged});
    for (std::uint32_t t = 0; t < 1500; ++t) a.round(t, oracle, 0.05);
    if (p > 0) {
      REQUIRE(a.messages_dropped() > 0);
      REQUIRE(a.messages_dropped() == a.network().messages_dropped());
    } else {
      REQUIRE(a.messages_dropped() == 0);
    }
    REQUIRE(a.weight_mass() == Approx(static_cast<double>(n)).margin(1e-9));
    return a.group().average_model();
  };
  // the optimum of sum_i f_i is the mean of the targets, 3.5: with and without loss the nodes'
  // average ends near it (started at 1)
  const auto lossless = run(0.0), lossy = run(0.3);
  for (std::size_t l = 0; l < d; ++l) {
    REQUIRE(lossless[l] == Approx(3.5).margin(0.1));
    REQUIRE(lossy[l] == Approx(3.5).margin(0.1));
  }
}

TEST_CASE("CHOCO-SGD refuses a network that loses messages", "[loss]") {
  const std::size_t n = 4;
  std::vector<vec> x0(n, vec(10, 0.0));
  REQUIRE_THROWS_AS(
      (choco<double>(x0, parse_schedule("undirected-ring", n), {.network = {.drop_probability = 0.1}})),
      config_error);
  REQUIRE_THROWS_AS(loopback_network(4, {.drop_probability = 1.0}), config_error);
  REQUIRE_THROWS_AS(loopback_network(4, {.drop_probability = -0.1}), config_error);
}

TEST_CASE("a network, its endpoints and the loss model agree on which envelopes are lost", "[loss]") {
  const std::size_t n = 6;
  const auto s = parse_schedule("exponential", n);
  loopback_network net(n, {.drop_probability = 0.3, .seed = 21});
  const loss_model& loss = net.loss();
  std::vector<out_edge> col;
  std::size_t lost = 0;
  for (std::uint32_t t = 0; t < 40; ++t)
    for (std::uint32_t j = 0; j < n; ++j) {
      s.out_edges(t, j, col);
      const auto ep = net.endpoint(j);
      for (const auto& e : col) {
        const route r{.round = t, .from = j, .to = e.to};
        REQUIRE(net.lost(r) == loss.lost(r));
        REQUIRE(ep.lost(t, e.to) == loss.lost(r));
        lost += loss.lost(r);
        if (e.to == j) REQUIRE_FALSE(loss.lost(r));
      }
    }
  REQUIRE(lost > 0);
  // the ledger counts each node's lost envelopes; the sum is the total
  push_sum_group<vec> g(random_models(n, 10, 2), {.seed = 1, .recovery = loss_recovery::acknowledged});
  for (std::uint32_t t = 0; t < 40; ++t) g.round(s, identity{}, net, t);
  std::size_t sum = 0, expected = 0;
  for (std::uint32_t i = 0; i < n; ++i) sum += net.messages_dropped(i);
  for (std::uint32_t t = 0; t < 40; ++t)
    for (std::uint32_t j = 0; j < n; ++j) {
      s.out_edges(t, j, col);
      for (const auto& e : col) expected += loss.lost({.round = t, .from = j, .to = e.to});
    }
  REQUIRE(sum == net.messages_dropped());
  REQUIRE(sum == expected);
}
