// Tests of push-sum gossip (gossip/*.hpp) over the loopback network: exact averaging on every
// schedule within a round budget derived from the schedule's own spectrum, mass conservation,
// the role of u, the eta-relaxed weight update, thread-count independence, message loss, the
// byte ledger, and the strong guarantee on bad input.
#include <Eigen/Dense>
#include <catch2/catch.hpp>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <thread>
#include <sparsepush/sparsepush.hpp>

#include "test_util.hpp"

using namespace sparsepush;

namespace {
using vec = std::vector<double>;

template <class S>
Eigen::MatrixXd dense_w(const S& s, std::uint64_t t) {
  const std::size_t n = s.num_nodes();
  Eigen::MatrixXd w = Eigen::MatrixXd::Zero(static_cast<Eigen::Index>(n), static_cast<Eigen::Index>(n));
  std::vector<out_edge> col;
  for (std::uint32_t j = 0; j < n; ++j) {
    s.out_edges(t, j, col);
    for (const auto& e : col) w(e.to, j) += e.share;
  }
  return w;
}

/// Rounds after which push-sum is within ~1e-10 of the average, from the second-largest
/// eigenvalue modulus of the product of W over one period (or a 32-round window).
template <class S>
std::size_t round_budget(const S& s) {
  const std::size_t span = s.period() ? s.period() : 32;
  const auto n = static_cast<Eigen::Index>(s.num_nodes());
  Eigen::MatrixXd p = Eigen::MatrixXd::Identity(n, n);
  for (std::size_t t = 0; t < span; ++t) p = dense_w(s, t) * p;
  Eigen::EigenSolver<Eigen::MatrixXd> es(p, false);
  std::vector<double> mods;
  for (Eigen::Index i = 0; i < n; ++i) mods.push_back(std::abs(es.eigenvalues()[i]));
  std::sort(mods.rbegin(), mods.rend());
  const double rho = mods.size() > 1 ? mods[1] : 0.0;
  if (rho < 1e-12) return span + 1;
  return span * static_cast<std::size_t>(std::ceil(std::log(1e-10) / std::log(rho))) + span;
}

std::vector<vec> random_models(std::size_t n, std::size_t d, unsigned seed) {
  std::vector<vec> x(n);
  for (std::size_t i = 0; i < n; ++i) x[i] = test::gaussian<double>(d, seed * 1000 + static_cast<unsigned>(i), 1.0 + i);
  return x;
}

vec average(const std::vector<vec>& x) {
  vec a(x[0].size(), 0.0);
  for (const auto& xi : x)
    for (std::size_t l = 0; l < a.size(); ++l) a[l] += xi[l] / static_cast<double>(x.size());
  return a;
}

double max_error(const push_sum_group<vec>& g, const vec& avg) {
  double err = 0;
  for (std::size_t i = 0; i < g.num_nodes(); ++i) {
    const auto xh = g.debiased(i);
    for (std::size_t l = 0; l < avg.size(); ++l) err = std::max(err, std::abs(xh[l] - avg[l]));
  }
  return err;
}
}  // namespace

TEST_CASE("push-sum reaches the exact average on every schedule, mass conserved every round",
          "[gossip]") {
  for (std::size_t n : {2u, 3u, 4u, 8u, 16u, 33u}) {
    std::vector<std::string> specs = {"directed-ring", "undirected-ring", "complete", "time-varying-ring",
                                      "alternating-ring", "exponential", "bidirectional-exponential",
                                      "random:1", "erdos-renyi:0.3"};
    if (n >= 3) specs.push_back("exponential:2");
    if (n == 16) specs.push_back("torus:4x4");
    for (const auto& spec : specs) {
      INFO(spec << " n=" << n);
      const auto s = parse_schedule(spec, n, 5);
      const std::size_t budget = round_budget(s);
      INFO("round budget " << budget);
      REQUIRE(budget < 20000);
      const auto x0 = random_models(n, 6, static_cast<unsigned>(n));
      const vec avg = average(x0);
      push_sum_group<vec> g(x0);
      loopback_network net(n);
      const vec m0 = g.mass();
      for (std::uint32_t t = 0; t < budget; ++t) {
        g.round(s, identity{}, net, t);
        if (t % 7 == 0 || t + 1 == budget) {
          const vec m = g.mass();
          for (std::size_t l = 0; l < m.size(); ++l)
            REQUIRE(std::abs(m[l] - m0[l]) <= 1e-12 * (std::abs(m0[l]) + static_cast<double>(n)));
          REQUIRE(std::abs(g.weight_mass() - static_cast<double>(n)) <= 1e-12 * n);
        }
      }
      REQUIRE(max_error(g, avg) < 1e-6);
    }
  }
}

TEST_CASE("without push-sum weights a column-stochastic W converges to the wrong value", "[gossip]") {
  // Node 0 pushes to everyone, the others to their successor: column stochastic, not doubly.
  const std::size_t n = 6;
  digraph g(n);
  for (std::size_t j = 1; j < n; ++j) g.add_edge(0, j);
  for (std::size_t i = 1; i < n; ++i) g.add_edge(i, (i + 1) % n);
  const auto s = static_schedule(g);
  REQUIRE_NOTHROW(validate_schedule(s));
  const auto x0 = random_models(n, 4, 3);
  const vec avg = average(x0);
  push_sum_group<vec> grp(x0);
  loopback_network net(n);
  for (std::uint32_t t = 0; t < 300; ++t) grp.round(s, identity{}, net, t);
  double plain_err = 0;  // x alone, as if u were ignored
  for (std::size_t i = 0; i < n; ++i)
    for (std::size_t l = 0; l < 4; ++l) plain_err = std::max(plain_err, std::abs(grp.x(i)[l] - avg[l]));
  REQUIRE(plain_err > 0.05);
  REQUIRE(max_error(grp, avg) < 1e-9);
}

TEST_CASE("u mixed with the eta-relaxed matrix gives the exact average, with plain W it is off", "[gossip]") {
  // Irregular time-varying directed graph on 7 nodes, identity C, eta = 0.5 (docs/design/algorithms.md).
  const std::size_t n = 7;
  std::vector<digraph> gs(3, digraph(n));
  for (std::size_t i = 0; i < n; ++i) {
    gs[0].add_edge(i, (i + 1) % n);
    if (i % 2 == 0) gs[0].add_edge(i, (i + 3) % n);
    gs[1].add_edge(i, (i + 2) % n);
    if (i == 0) for (std::size_t j = 2; j < n; ++j) gs[1].add_edge(0, j);
    gs[2].add_edge(i, (i + n - 1) % n);
  }
  const auto s = time_varying_schedule(gs);
  validate_schedule(s);
  const auto x0 = random_models(n, 3, 9);
  const vec avg = average(x0);
  push_sum_group<vec> grp(x0, {0.5, true, 1});
  loopback_network net(n);
  for (std::uint32_t t = 0; t < 400; ++t) grp.round(s, identity{}, net, t);
  REQUIRE(max_error(grp, avg) < 1e-12);

  // Independent dense simulation of the wrong variant: x relaxed, u mixed with plain W.
  Eigen::MatrixXd x(n, 3);
  for (std::size_t i = 0; i < n; ++i)
    for (std::size_t l = 0; l < 3; ++l) x(i, l) = x0[i][l];
  Eigen::VectorXd u = Eigen::VectorXd::Ones(n);
  const Eigen::MatrixXd id = Eigen::MatrixXd::Identity(n, n);
  for (std::uint32_t t = 0; t < 400; ++t) {
    const Eigen::MatrixXd w = dense_w(s, t);
    x = (id + 0.5 * (w - id)) * x;
    u = w * u;
  }
  double wrong = 0;
  for (std::size_t i = 0; i < n; ++i)
    for (std::size_t l = 0; l < 3; ++l) wrong = std::max(wrong, std::abs(x(i, l) / u(i) - avg[l]));
  REQUIRE(wrong > 1e-3);
}

TEST_CASE("compressed push-sum conserves mass every round (top-K, error feedback)", "[gossip]") {
  const std::size_t n = 8, d = 2000;
  const auto s = parse_schedule("time-varying-ring", n);
  const auto x0 = random_models(n, d, 4);
  push_sum_group<vec> g(x0, {0.05, true, 2});
  loopback_network net(n);
  const vec m0 = g.mass();
  const double d0 = g.consensus_distance();
  for (std::uint32_t t = 0; t < 200; ++t) {
    g.round(s, top_k{k_spec::fraction(0.01)}, net, t);
    const vec m = g.mass();
    for (std::size_t l = 0; l < d; ++l) REQUIRE(std::abs(m[l] - m0[l]) < 1e-10);
    REQUIRE(std::abs(g.weight_mass() - n) < 1e-12);
  }
  REQUIRE(g.consensus_distance() < d0);
  // the ledger counts the real envelopes: one per non-self edge, header + message bytes
  REQUIRE(net.total_messages() == 200 * n);
}

TEST_CASE("results are bit-identical for 1, 2 and 4 threads", "[gossip]") {
  const std::size_t n = 9, d = 3000;
  const auto x0 = random_models(n, d, 8);
  std::vector<std::vector<vec>> finals;
  for (std::size_t threads : {1u, 2u, 4u}) {
    const auto s = parse_schedule("random:2", n, 11);
    push_sum_group<vec> g(x0, {0.3, true, threads, 5});
    loopback_network net(n);
    for (std::uint32_t t = 0; t < 30; ++t)
      g.round(s, t % 2 ? any_compressor(random_k{k_spec::fraction(0.05)}) : any_compressor(top_k{k_spec::fraction(0.02), {value_encoding::qsgd, 8}}), net, t);
    std::vector<vec> fin;
    for (std::size_t i = 0; i < n; ++i) {
      fin.emplace_back(g.x(i).begin(), g.x(i).end());
      fin.back().push_back(g.u(i));
      fin.back().insert(fin.back().end(), g.residual(i).begin(), g.residual(i).end());
    }
    finals.push_back(fin);
  }
  REQUIRE(finals[0] == finals[1]);
  REQUIRE(finals[0] == finals[2]);
}

TEST_CASE("message loss: weight lost equals the dropped shares, ledger equals the trace", "[gossip]") {
  const std::size_t n = 8;
  const auto s = parse_schedule("exponential", n);
  push_sum_group<vec> g(random_models(n, 50, 1), {1.0, true, 1});
  loopback_network net(n, {0.3, 77, true});
  for (std::uint32_t t = 0; t < 20; ++t) {
    std::vector<double> u_before(n);
    for (std::size_t i = 0; i < n; ++i) u_before[i] = g.u(i);
    const double before = g.weight_mass();
    net.clear_trace();
    g.round(s, top_k{k_spec::count(5)}, net, t);
    double lost = 0;
    std::size_t bytes = 0;
    for (const auto& dl : net.trace()) {
      REQUIRE(dl.round == t);
      if (dl.dropped) lost += dl.share * u_before[dl.from];
      bytes += dl.bytes;
      REQUIRE(dl.bytes == envelope_header_bytes + g.last_message(dl.from).wire_bytes());
    }
    REQUIRE(g.weight_mass() == Approx(before - lost).epsilon(1e-12));
    REQUIRE(net.trace().size() == n);
    static_cast<void>(bytes);
  }
  std::size_t total = 0;
  for (std::size_t i = 0; i < n; ++i) total += net.bytes_sent(i);
  REQUIRE(total == net.total_bytes());
  REQUIRE(g.weight_mass() < static_cast<double>(n));  // some messages were dropped
  REQUIRE_THROWS_AS(loopback_network(4, {1.0, 0, false}), config_error);
}

TEST_CASE("bad inputs to a group are errors and leave every node as it was", "[gossip]") {
  auto x0 = random_models(4, 100, 2);
  x0[2].resize(99);
  REQUIRE_THROWS_WITH(push_sum_group<vec>(x0), Catch::Contains("node 2 has 99"));
  x0 = random_models(4, 100, 2);
  REQUIRE_THROWS_WITH(push_sum_group<vec>(x0, {0.0, true, 1}), Catch::Contains("eta"));
  REQUIRE_THROWS_WITH(push_sum_group<vec>(x0, {1.5, true, 1}), Catch::Contains("eta"));
  x0[1][7] = std::nan("");
  REQUIRE_THROWS_AS(push_sum_group<vec>(x0), non_finite_error);

  x0 = random_models(4, 100, 2);
  push_sum_group<vec> g(x0, {0.5, true, 2});
  loopback_network net(4);
  const auto s = parse_schedule("exponential", 4);
  g.round(s, top_k{k_spec::count(10)}, net, 0);
  auto snapshot = [&] { return test::group_state(g); };
  const auto before = snapshot();
  const auto bytes = net.total_bytes();
  REQUIRE_THROWS_WITH(g.round(parse_schedule("exponential", 5), top_k{k_spec::count(10)}, net, 1),
                      Catch::Contains("schedule has 5 nodes"));
  REQUIRE_THROWS_AS(g.round(s, top_k{k_spec::count(101)}, net, 1), config_error);
  g.x(3)[42] = std::numeric_limits<double>::infinity();
  try {
    g.round(s, top_k{k_spec::count(10)}, net, 1);
    FAIL("no exception");
  } catch (const non_finite_error& e) {
    REQUIRE(std::string(e.what()).find("node 3, round 1") != std::string::npos);
    REQUIRE(e.index() == 42);
  }
  g.x(3)[42] = before[3][42];
  REQUIRE(snapshot() == before);
  REQUIRE(net.total_bytes() == bytes);
  REQUIRE_NOTHROW(g.round(s, top_k{k_spec::count(10)}, net, 1));
}

namespace {
/// A loopback whose endpoints record the order of posts and collects and the collecting thread.
struct recording_network {
  explicit recording_network(std::size_t n) : inner(n) {}
  loopback_network inner;
  std::vector<std::pair<char, std::uint32_t>> calls;  // ('p' or 'c', node)
  std::vector<std::thread::id> collecting;
  struct recording_endpoint {
    recording_network* net;
    loopback_endpoint ep;
    std::uint32_t node() const noexcept { return ep.node(); }
    void post(std::uint32_t t, std::span<const out_edge> out, double u, const message& m) {
      net->calls.push_back({'p', ep.node()});
      ep.post(t, out, u, m);
    }
    void collect(std::uint32_t t, std::span<const in_edge> in, inbox& box) {
      net->calls.push_back({'c', ep.node()});
      net->collecting.push_back(std::this_thread::get_id());
      ep.collect(t, in, box);
    }
  };
  std::size_t num_nodes() const noexcept { return inner.num_nodes(); }
  recording_endpoint endpoint(std::uint32_t i) { return {this, inner.endpoint(i)}; }
};
}  // namespace

TEST_CASE("a lockstep round posts at every node before any collects, and collects on the calling thread",
          "[gossip]") {
  const std::size_t n = 5;
  const auto x0 = random_models(n, 60, 17);
  const auto s = parse_schedule("time-varying-ring", n);
  const auto comp = parse_compressor("top-k:0.2");
  push_sum_group<vec> a(x0, {.eta = 0.4, .threads = 3, .seed = 4}), b(x0, {.eta = 0.4, .threads = 3, .seed = 4});
  loopback_network plain(n);
  recording_network rec(n);
  for (std::uint32_t t = 0; t < 6; ++t) {
    rec.calls.clear();
    a.round(s, comp, plain, t);
    b.round(s, comp, rec, t);
    REQUIRE(rec.calls.size() == 2 * n);
    for (std::uint32_t i = 0; i < n; ++i) {
      REQUIRE(rec.calls[i] == std::pair<char, std::uint32_t>{'p', i});
      REQUIRE(rec.calls[n + i] == std::pair<char, std::uint32_t>{'c', i});
    }
  }
  for (const auto& id : rec.collecting) REQUIRE(id == std::this_thread::get_id());
  for (std::size_t i = 0; i < n; ++i) {
    REQUIRE(std::memcmp(a.x(i).data(), b.x(i).data(), 60 * sizeof(double)) == 0);
    REQUIRE(a.u(i) == b.u(i));
  }
}

TEMPLATE_TEST_CASE("a mix that overflows throws in the round that produced the Inf, after every node has mixed",
                   "[gossip]", float, double) {
  using T = TestType;
  // A valid column-stochastic W (each sender's shares sum to 1): nodes 1 and 3 give half of their
  // mass to nodes 0 and 2, which keep all of theirs. Nodes 0 and 2 then hold x_0 + x_1 / 2 and
  // x_2 + x_3 / 2; with 1.5 * 2^(max_exponent - 1) at one coordinate of each pair that is
  // 2.25 * 2^(max_exponent - 1), above the largest value of T: Inf at node 0 (index 1) and node 2
  // (index 3). Every other value is a small integer, so the reference below is exact.
  const std::vector<std::vector<out_edge>> cols{{{0, 1.0}}, {{1, 0.5}, {0, 0.5}}, {{2, 1.0}}, {{3, 0.5}, {2, 0.5}}};
  const periodic_schedule sched({mixing_round::from_columns(cols)});
  const std::size_t n = 4, d = 6;
  const T big = std::ldexp(T(1.5), std::numeric_limits<T>::max_exponent - 1);
  std::vector<std::vector<T>> x0(n, std::vector<T>(d));
  for (std::size_t i = 0; i < n; ++i)
    for (std::size_t l = 0; l < d; ++l) x0[i][l] = static_cast<T>(2 * (i + 1) + l);
  x0[0][1] = x0[1][1] = big;
  x0[2][3] = x0[3][3] = big;
  // reference in long double (whose range holds 2.25 * 2^(max_exponent - 1) of double): x_i = sum_j W_ij x_j
  std::vector<std::vector<long double>> want(n, std::vector<long double>(d, 0.0L));
  std::vector<double> want_u(n, 0.0);
  for (std::uint32_t j = 0; j < n; ++j)
    for (const auto& e : cols[j]) {
      for (std::size_t l = 0; l < d; ++l) want[e.to][l] += static_cast<long double>(e.share) * x0[j][l];
      want_u[e.to] += e.share;
    }
  // dense messages (identity) and sparse ones (top-K keeping 2 of 6, which holds the big value)
  for (const bool sparse : {false, true}) {
    for (const std::size_t threads : {1, 2}) {
      INFO((sparse ? "top-K" : "identity") << ", " << threads << " thread(s)");
      push_sum_group<std::vector<T>> g(x0, {.error_feedback = sparse, .threads = threads});
      loopback_network net(n, for_lockstep({}));
      const any_compressor comp = sparse ? any_compressor(top_k{k_spec::count(2)}) : any_compressor(identity{});
      try {
        g.round(sched, comp, net, 0);
        FAIL("the overflowing mix went unreported");
      } catch (const non_finite_error& e) {
        // the lowest node whose mix overflowed, in round 0 (node 2 overflowed too)
        REQUIRE(std::string(e.what()) ==
                "sparsepush: x after mixing holds Inf at index 1 (node 0, round 0): the weighted sum of the "
                "messages left the range of the element type; the round is complete, x keeps the non-finite values");
        REQUIRE(e.index() == 1);
      }
      // the round is complete at every node, node 2 and 3 included (mixed after node 0 threw)
      for (std::size_t i = 0; i < n; ++i) {
        REQUIRE(g.u(i) == want_u[i]);
        REQUIRE(g.node(i).last_mix_sparse() == sparse);
        for (std::size_t l = 0; l < d; ++l) {
          // top-K sends each node's 2 largest: index d - 1 and its big one (1 at nodes 0 and 1, 3 at
          // nodes 2 and 3); error feedback keeps the rest at the sender, so x_i is the reference
          // where every message node i mixes carried the value (every value, for identity)
          if (sparse && l != d - 1 && l != (i < 2 ? 1u : 3u)) continue;
          const long double w = want[i][l];
          const bool overflows = w > static_cast<long double>(std::numeric_limits<T>::max());
          INFO("node " << i << ", index " << l);
          if (overflows) REQUIRE(std::isinf(g.x(i)[l]));
          else REQUIRE(g.x(i)[l] == static_cast<T>(w));
        }
      }
      REQUIRE(std::isinf(g.x(0)[1]));
      REQUIRE(std::isinf(g.x(2)[3]));
      // and no later round runs on them
      REQUIRE_THROWS_AS(g.round(sched, comp, net, 1), non_finite_error);
    }
  }
}

TEMPLATE_TEST_CASE("combine equals a dense reference for any mix of messages", "[gossip]", float, double) {
  using T = TestType;
  const std::vector<std::string> specs = {"identity", "identity+fp32", "identity+fp64", "identity+fp16",
                                          "qsgd:4", "sign", "top-k:0.1", "top-k:0.01+int8",
                                          "random-k:0.3+bf16", "top-k:0.5+fp64", "threshold:0.05"};
  std::mt19937 gen(4);
  for (std::size_t d : {1u, 2047u, 2048u, 2049u, 10000u}) {
    for (int trial = 0; trial < 20; ++trial) {
      const std::size_t count = 1 + gen() % 7;
      std::vector<message> msgs(count);
      std::vector<weighted_message> in;
      for (std::size_t m = 0; m < count; ++m) {
        const auto v = test::gaussian<T>(d, static_cast<unsigned>(trial * 10 + m));
        compress(parse_compressor(specs[gen() % specs.size()]), std::span<const T>(v), msgs[m], {1, 0, 0});
      }
      for (std::size_t m = 0; m < count; ++m) in.push_back({&msgs[m], (static_cast<double>(gen() % 200) - 100) / 37.0});
      auto x = test::gaussian<T>(d, 999);
      std::vector<double> ref(x.begin(), x.end());
      double scale = 1;
      for (const auto& w : in) {
        const auto q = test::dense<double>(*w.msg);
        for (std::size_t l = 0; l < d; ++l) {
          ref[l] += w.coef * q[l];
          scale = std::max(scale, std::abs(w.coef * q[l]));
        }
      }
      combine<T>(std::span<T>(x), in);
      const double tol = 16 * static_cast<double>(count + 1) * std::numeric_limits<T>::epsilon() * scale;
      for (std::size_t l = 0; l < d; ++l) REQUIRE(std::abs(static_cast<double>(x[l]) - ref[l]) <= tol);
    }
  }
  std::vector<T> wrong(5);
  message m;
  compress(identity{}, std::span<const T>(wrong), m, {});
  std::vector<T> y(6);
  const weighted_message w{&m, 1.0};
  REQUIRE_THROWS_WITH(combine<T>(std::span<T>(y), std::span<const weighted_message>(&w, 1)),
                      Catch::Contains("dim 5") && Catch::Contains("6 elements"));
}

namespace {
/// An endpoint that posts nowhere and hands over a fixed list of envelopes.
struct given_endpoint {
  std::uint32_t id = 0;
  std::vector<envelope> envelopes;
  std::uint32_t node() const noexcept { return id; }
  void post(std::uint32_t, std::span<const out_edge>, double, const message&) {}
  void collect(std::uint32_t, std::span<const in_edge>, inbox& box) { box.envelopes = envelopes; }
};

/// The gossip update written out densely in T, in the order the mixing kernel fixes: S_l from 0,
/// the dense messages in list order (own message first, then the senders), then the sparse ones in
/// list order; x_l = (x_l - q_il) + S_l at eta = 1, x_l + eta (S_l - q_il) otherwise.
template <class T>
std::vector<T> mixed_reference(std::vector<T> x, const message& own, double self, const std::vector<envelope>& env,
                               double eta) {
  const auto qi = test::dense<T>(own);
  std::vector<std::pair<const message*, double>> list{{&own, self}};
  for (const auto& e : env) list.push_back({e.msg, e.share});
  std::vector<T> s(x.size(), T(0));
  for (const bool dense_pass : {true, false})
    for (const auto& [m, coef] : list) {
      if (m->dense() != dense_pass) continue;
      const auto q = test::dense<T>(*m);
      const T c = static_cast<T>(coef);
      for (std::size_t l = 0; l < x.size(); ++l) s[l] += c * q[l];
    }
  const T et = static_cast<T>(eta);
  for (std::size_t l = 0; l < x.size(); ++l)
    x[l] = eta == 1.0 ? (x[l] - qi[l]) + s[l] : x[l] + et * (s[l] - qi[l]);
  return x;
}
}  // namespace

TEMPLATE_TEST_CASE("sparse messages mix in O(nnz) with the dense update's bits", "[gossip]", float, double) {
  using T = TestType;
  const std::size_t d = 5003;
  // senders' messages: top-K at several k (one kept entry at d - 1), fp16 values, an empty one
  std::vector<message> msgs(5);
  auto v = test::gaussian<T>(d, 7);
  v[d - 1] = T(100);
  compress(top_k{k_spec::count(1)}, std::span<const T>(v), msgs[0], {1, 1, 0});
  compress(top_k{k_spec::fraction(0.05)}, std::span<const T>(test::gaussian<T>(d, 8)), msgs[1], {1, 2, 0});
  compress(top_k{k_spec::fraction(0.2), value_codec{value_encoding::f16}}, std::span<const T>(test::gaussian<T>(d, 9)),
                                                                           msgs[2], {1, 3, 0});
  compress(top_k{k_spec::fraction(0.01)}, std::span<const T>(test::gaussian<T>(d, 10)), msgs[3], {1, 4, 0});
  msgs[4].dim = static_cast<std::uint32_t>(d);
  msgs[4].index_enc = index_encoding::raw_u32;  // sparse, no values
  compress(identity{}, std::span<const T>(test::gaussian<T>(d, 11)), msgs.emplace_back(), {1, 5, 0});
  REQUIRE(msgs[5].dense());

  struct setting {
    const char* name;
    std::vector<std::size_t> senders;
    bool sparse;
  };
  const setting settings[] = {{"no sender", {}, true},
                              {"one sparse sender", {0}, true},
                              {"five sparse senders", {0, 1, 2, 3, 4}, true},
                              {"a dense sender among sparse ones", {1, 5, 2}, false}};
  for (const auto& st : settings)
    for (const double eta : {1.0, 0.3}) {
      INFO(st.name << ", eta " << eta);
      const auto x0 = test::gaussian<T>(d, 12);
      push_sum_node<std::vector<T>> node(x0, {.id = 0});
      const std::vector<out_edge> col{{0, 0.5}, {1, 0.5}};
      given_endpoint ep;
      double u_sum = 0.5;
      for (std::size_t k = 0; k < st.senders.size(); ++k) {
        const double share = 0.1 + 0.1 * static_cast<double>(k);
        ep.envelopes.push_back({static_cast<std::uint32_t>(k + 1), share, 1.0 + share, &msgs[st.senders[k]]});
        u_sum += share * (1.0 + share);
      }
      node.compress(top_k{k_spec::fraction(0.03)}, 0);
      const auto want = mixed_reference(std::vector<T>(node.x().begin(), node.x().end()), node.outgoing(), 0.5,
                                        ep.envelopes, eta);
      node.post(ep, 0, col);
      node.collect(ep, 0, std::vector<in_edge>{});
      node.mix(eta, 0.5);
      REQUIRE(node.last_mix_sparse() == st.sparse);
      std::size_t diff = 0;
      for (std::size_t l = 0; l < d; ++l) diff += node.x()[l] == want[l] ? 0 : 1;  // == : -0 equals +0
      REQUIRE(diff == 0);
      REQUIRE(node.u() == (eta == 1.0 ? u_sum : 1.0 + eta * (u_sum - 1.0)));
    }
}

TEST_CASE("a sparse mix refuses a message of another dimension before anything changes", "[gossip]") {
  const std::size_t d = 300;
  push_sum_node<std::vector<float>> node(test::gaussian<float>(d, 3), {.id = 0});
  message wrong;
  compress(top_k{k_spec::count(3)}, std::span<const float>(test::gaussian<float>(d + 1, 4)), wrong, {1, 1, 0});
  given_endpoint ep{0, {{1, 0.5, 1.0, &wrong}}};
  node.compress(top_k{k_spec::count(3)}, 0);
  const std::vector<float> before(node.x().begin(), node.x().end());
  node.collect(ep, 0, std::vector<in_edge>{});
  REQUIRE_THROWS_AS(node.mix(0.5, 0.5), size_error);
  REQUIRE(std::equal(before.begin(), before.end(), node.x().begin()));
  REQUIRE(node.u() == 1.0);
}

TEST_CASE("debias gives the bits of the division at every SIMD level, also next to float rounding boundaries",
          "[gossip]") {
  std::mt19937_64 gen(5);
  std::vector<float> x(4099), got(x.size()), want(x.size());
  std::uniform_int_distribution<std::uint32_t> bits;
  std::uniform_real_distribution<float> unit(0.5f, 2.0f);
  const auto was = detail::active_simd();
  for (const auto level : {detail::simd_level::avx512, detail::simd_level::avx2, detail::simd_level::scalar}) {
    detail::set_simd_level(level);
    INFO("SIMD level " << detail::to_string(detail::active_simd()));
    // values over the whole float range (zeros, -0, subnormals, extremes) and many weights
    for (int rep = 0; rep < 20; ++rep) {
      for (auto& v : x) {
        do v = std::bit_cast<float>(bits(gen));
        while (!std::isfinite(v));
      }
      x[0] = 0.0f;
      x[1] = -0.0f;
      x[2] = std::numeric_limits<float>::denorm_min();
      x[3] = std::numeric_limits<float>::max();
      for (const double u : {1.0, 0.5, 3.0, 0.3, 1e-19, 1.1e-19, 7e18, 1e300, 1e-300, 5e-324, 0.0, -2.0,
                             std::numeric_limits<double>::infinity(), std::nan(""), 1.0 + 1e-9 * rep}) {
        INFO("u = " << u);
        debias<float>(x, u, got);
        for (std::size_t l = 0; l < x.size(); ++l) want[l] = static_cast<float>(static_cast<double>(x[l]) / u);
        REQUIRE(std::memcmp(got.data(), want.data(), x.size() * sizeof(float)) == 0);
      }
    }
    // quotients within 40 double ulps of a midpoint between two floats: u = a / (m + k ulp)
    std::size_t at_boundary = 0;
    for (int trial = 0; trial < 3000; ++trial) {
      const float a = unit(gen) * std::ldexp(1.0f, static_cast<int>(gen() % 60) - 30);
      const float lo = unit(gen), hi = std::nextafter(lo, 2.0f);
      const double mid = (static_cast<double>(lo) + static_cast<double>(hi)) / 2;
      for (int k = -40; k <= 40; ++k) {
        const double u = static_cast<double>(a) / (mid + k * std::ldexp(1.0, -53));
        std::fill(x.begin(), x.begin() + 16, a);
        debias<float>(std::span<const float>(x.data(), 16), u, std::span<float>(got.data(), 16));
        const float w = static_cast<float>(static_cast<double>(a) / u);
        at_boundary += w == lo || w == hi;
        for (std::size_t j = 0; j < 16; ++j)
          REQUIRE(std::bit_cast<std::uint32_t>(got[j]) == std::bit_cast<std::uint32_t>(w));
      }
    }
    REQUIRE(at_boundary == 3000 * 81);  // the construction does land next to the boundaries
  }
  detail::set_simd_level(was);
}
