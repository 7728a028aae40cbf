// Tests of sparsepush/train/gossip_run.hpp: the algorithm of a run_spec stepped by the caller's
// optimizer. SGP's rounds against a dense push-sum reference in double (the caller's change lands
// on the numerator, then x <- W x, u <- W u); mass conservation under top-K; SCSP's finish()
// averaging within its tolerance; save/restore continuing bit for bit; and the refusals, with
// nothing changed. Under gradient tracking, the caller's SGD step along track()'s tracker reaches
// the exact minimizer of a heterogeneous least-squares problem (normal equations), where the
// untracked loop keeps a bias; a resume continues bit for bit; a thread per node over a shared
// loopback (the trackers over its companion) gives the one-run bits.
#include <catch2/catch.hpp>

#include <sparsepush/train/gossip_run.hpp>
#include <sparsepush/transport/loopback_node.hpp>

#include "dense_push_sum.hpp"
#include "least_squares.hpp"

#include <cmath>
#include <cstring>
#include <random>
#include <span>
#include <string>
#include <thread>
#include <vector>

namespace sp = sparsepush;

namespace {

sp::run_spec spec_of(const std::vector<std::pair<std::string, std::string>>& opts) {
  sp::run_spec s;
  s.set("threads", "1");
  for (const auto& [o, v] : opts) s.set(o, v);
  s.validate(1);
  return s;
}

std::vector<std::vector<float>> random_models(std::size_t n, std::size_t d, unsigned seed) {
  std::mt19937 g(seed);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<std::vector<float>> m(n, std::vector<float>(d));
  for (auto& v : m)
    for (auto& a : v) a = nd(g);
  return m;
}

std::vector<std::span<float>> spans(std::vector<std::vector<float>>& m) {
  return {m.begin(), m.end()};
}

/// The caller's optimizer: model_i += delta, a seeded change per (node, round).
void local_change(std::vector<std::vector<float>>& m, std::uint32_t t) {
  for (std::size_t i = 0; i < m.size(); ++i) {
    std::mt19937 g(1000u * t + static_cast<unsigned>(i));
    std::uniform_real_distribution<float> u(-0.05f, 0.05f);
    for (auto& a : m[i]) a += u(g);
  }
}

}  // namespace

TEST_CASE("gossip_run: SGP rounds equal a dense push-sum reference", "[gossip_run]") {
  const std::size_t n = 6, d = 40;
  const auto s = spec_of({{"nodes", "6"}, {"algorithm", "sgp"}, {"schedule", "exponential"}});
  auto models = random_models(n, d, 7);
  sp::gossip_run<> run(s, models, {});
  const auto sched = sp::parse_schedule(s.schedule_spec(), n, s.seed);
  // reference: numerators and weights in double
  std::vector<std::vector<double>> x(n, std::vector<double>(d));
  std::vector<double> u(n, 1.0);
  for (std::size_t i = 0; i < n; ++i)
    for (std::size_t k = 0; k < d; ++k) x[i][k] = models[i][k];
  for (std::uint32_t t = 0; t < 12; ++t) {
    auto before = models;
    local_change(models, t);
    for (std::size_t i = 0; i < n; ++i)
      for (std::size_t k = 0; k < d; ++k) x[i][k] += static_cast<double>(models[i][k]) - before[i][k];
    run.step(spans(models));
    dense_push_sum::mix(sched, t, x, u);
    double worst = 0;
    for (std::size_t i = 0; i < n; ++i) {
      CHECK(run.weight(i) == Approx(u[i]).epsilon(1e-12));
      for (std::size_t k = 0; k < d; ++k) worst = std::max(worst, std::abs(models[i][k] - x[i][k] / u[i]));
    }
    CHECK(worst < 1e-5);
  }
  CHECK(run.round() == 12);
  CHECK(run.bytes_sent() > 0);
}

TEST_CASE("gossip_run: SP conserves mass, SCSP's finish averages within its tolerance", "[gossip_run]") {
  const std::size_t n = 8, d = 200;
  for (const char* alg : {"sp", "scsp"}) {
    CAPTURE(alg);
    const auto s = spec_of({{"nodes", "8"}, {"algorithm", alg}, {"compressor", "top-k:0.05"}, {"eta", "0.2"}});
    auto models = random_models(n, d, 11);
    sp::gossip_run<> run(s, models, {});
    for (std::uint32_t t = 0; t < 20; ++t) {
      std::vector<double> want(d, 0.0), got(d, 0.0);
      local_change(models, t);
      // sum_i x_i' = sum_i u_i (model_i after the change): what the round must conserve
      for (std::size_t i = 0; i < n; ++i)
        for (std::size_t k = 0; k < d; ++k) want[k] += run.weight(i) * models[i][k];
      run.step(spans(models));
      double wsum = 0;
      for (std::size_t i = 0; i < n; ++i) {
        wsum += run.weight(i);
        for (std::size_t k = 0; k < d; ++k) got[k] += run.weight(i) * models[i][k];
      }
      CHECK(wsum == Approx(double(n)).epsilon(1e-12));
      for (std::size_t k = 0; k < d; ++k) REQUIRE(got[k] == Approx(want[k]).margin(1e-4));
    }
    if (std::string(alg) == "sp") {
      CHECK(run.finish(spans(models)) == 0);
      continue;
    }
    std::vector<double> mean(d, 0.0);  // push-sum's limit: sum x / sum u
    double spread = 0;
    for (std::size_t i = 0; i < n; ++i)
      for (std::size_t k = 0; k < d; ++k) mean[k] += run.weight(i) * models[i][k] / n;
    for (std::size_t i = 0; i < n; ++i)
      for (std::size_t k = 0; k < d; ++k) spread = std::max(spread, std::abs(models[i][k] - mean[k]));
    const std::uint32_t k_final = run.finish(spans(models));
    CHECK(k_final > 0);
    CHECK(run.round() == 20 + k_final);
    double after = 0;
    for (std::size_t i = 0; i < n; ++i)
      for (std::size_t k = 0; k < d; ++k) after = std::max(after, std::abs(models[i][k] - mean[k]));
    CHECK(after <= 1e-3 * spread + 1e-5);  // --final-tolerance's default
    CHECK_THROWS_WITH(run.step(spans(models)), Catch::Contains("finish() ran already"));
  }
}

TEST_CASE("gossip_run: a restored run continues bit for bit, and refusals change nothing", "[gossip_run]") {
  const std::size_t n = 5, d = 64;
  const auto s = spec_of({{"nodes", "5"}, {"algorithm", "sp"}, {"compressor", "top-k:0.1"}, {"schedule", "exponential"}});
  auto models = random_models(n, d, 3);
  sp::gossip_run<> a(s, models, {});
  for (std::uint32_t t = 0; t < 6; ++t) {
    local_change(models, t);
    a.step(spans(models));
  }
  sp::checkpoint_writer w;
  a.save(w);
  const auto bytes = w.finish();
  auto saved = models;
  for (std::uint32_t t = 6; t < 12; ++t) {
    local_change(models, t);
    a.step(spans(models));
  }
  auto other = random_models(n, d, 99);
  sp::gossip_run<> b(s, other, {});
  sp::checkpoint_reader r(bytes, "test");
  b.restore(r);
  CHECK(b.round() == 6);
  b.write_models(spans(other));
  for (std::size_t i = 0; i < n; ++i) CHECK(std::memcmp(other[i].data(), saved[i].data(), d * sizeof(float)) == 0);
  for (std::uint32_t t = 6; t < 12; ++t) {
    local_change(other, t);
    b.step(spans(other));
  }
  for (std::size_t i = 0; i < n; ++i) CHECK(std::memcmp(other[i].data(), models[i].data(), d * sizeof(float)) == 0);
  CHECK(b.bytes_sent() == a.bytes_sent());

  // another spec's checkpoint: refused, naming the settings, and b unchanged
  const auto s2 = spec_of({{"nodes", "5"}, {"algorithm", "sp"}, {"compressor", "top-k:0.2"}, {"schedule", "exponential"}});
  sp::gossip_run<> c(s2, models, {});
  sp::checkpoint_reader r2(bytes, "test");
  CHECK_THROWS_AS(c.restore(r2), sp::checkpoint_error);
  CHECK(c.round() == 0);

  // a NaN in a model, a buffer of the wrong size: refused, nothing changed
  auto bad = models;
  bad[2][5] = std::nanf("");
  const auto keep = b.bytes_sent();
  CHECK_THROWS_AS(b.step(spans(bad)), sp::non_finite_error);
  CHECK(b.round() == 12);
  CHECK(b.bytes_sent() == keep);
  auto now = models;
  b.write_models(spans(now));
  for (std::size_t i = 0; i < n; ++i) CHECK(std::memcmp(now[i].data(), models[i].data(), d * sizeof(float)) == 0);
  auto short_models = models;
  short_models[3].pop_back();
  CHECK_THROWS_WITH(b.step(spans(short_models)), Catch::Contains("node 3") && Catch::Contains("63 elements"));
  auto four = std::vector<std::vector<float>>(models.begin(), models.begin() + 4);
  CHECK_THROWS_AS(b.step(spans(four)), sp::size_error);
}

TEST_CASE("gossip_run: CHOCO and centralized take the caller's steps too", "[gossip_run]") {
  const std::size_t n = 4, d = 30;
  {  // centralized: one shared model, x <- mean of the nodes' changed models
    const auto s = spec_of({{"nodes", "4"}, {"algorithm", "centralized"}});
    auto models = random_models(n, d, 5);
    for (std::size_t i = 1; i < n; ++i) models[i] = models[0];
    sp::gossip_run<> run(s, models, {});
    auto before = models;
    local_change(models, 0);
    std::vector<double> mean(d, 0.0);
    for (std::size_t i = 0; i < n; ++i)
      for (std::size_t k = 0; k < d; ++k) mean[k] += (static_cast<double>(models[i][k]) - before[i][k]) / n;
    run.step(spans(models));
    for (std::size_t i = 0; i < n; ++i)
      for (std::size_t k = 0; k < d; ++k) CHECK(models[i][k] == Approx(before[0][k] + mean[k]).margin(1e-5));
  }
  {  // CHOCO with identity and gamma_c 1 on a symmetric schedule: x <- W (x + delta)
    const auto s = spec_of({{"nodes", "4"}, {"algorithm", "choco"}, {"compressor", "identity"}, {"consensus-step", "1"},
                            {"schedule", "complete"}});
    auto models = random_models(n, d, 6);
    sp::gossip_run<> run(s, models, {});
    for (std::uint32_t t = 0; t < 3; ++t) {
      local_change(models, t);
      std::vector<double> mean(d, 0.0);
      for (std::size_t i = 0; i < n; ++i)
        for (std::size_t k = 0; k < d; ++k) mean[k] += models[i][k] / double(n);
      run.step(spans(models));
      for (std::size_t i = 0; i < n; ++i)
        for (std::size_t k = 0; k < d; ++k) CHECK(models[i][k] == Approx(mean[k]).margin(1e-5));
    }
  }
}

namespace {
/// The caller's loop under tracking: node i's gradient of a least-squares problem at its float
/// model, track() swaps it for the tracker, the caller's SGD step (model -= lr * tracker), step().
void tracked_round(sp::gossip_run<>& run, std::vector<std::vector<float>>& models, const test::least_squares& ls,
                   float lr) {
  const auto f = ls.oracle();
  std::vector<std::vector<float>> grads(models.size(), std::vector<float>(ls.d));
  for (std::size_t i = 0; i < models.size(); ++i) {
    const std::vector<double> x(models[i].begin(), models[i].end());
    std::vector<double> g(ls.d);
    f(static_cast<std::uint32_t>(i), run.round(), x, g);
    for (std::size_t c = 0; c < ls.d; ++c) grads[i][c] = static_cast<float>(g[c]);
  }
  run.track(spans(grads));
  for (std::size_t i = 0; i < models.size(); ++i)
    for (std::size_t c = 0; c < ls.d; ++c) models[i][c] -= lr * grads[i][c];
  run.step(spans(models));
}

double worst_error(const std::vector<std::vector<float>>& models, const test::least_squares& ls) {
  double worst = 0;
  for (const auto& m : models) {
    Eigen::VectorXd v(static_cast<Eigen::Index>(ls.d));
    for (std::size_t c = 0; c < ls.d; ++c) v(static_cast<Eigen::Index>(c)) = m[c];
    worst = std::max(worst, (v - ls.optimum).norm() / ls.optimum.norm());
  }
  return worst;
}
}  // namespace

TEST_CASE("gossip_run with tracking: the caller's optimizer steps along the tracker to the exact minimizer",
          "[gossip_run][tracking]") {
  const std::size_t n = 6, d = 12;
  const test::least_squares ls(n, d, 30, 1.0, 17);
  const auto x0 = std::vector<std::vector<float>>(n, std::vector<float>(d, 0.0f));
  const float lr = 0.05f;
  struct config {
    std::vector<std::pair<std::string, std::string>> opts;
    double bound;
  };
  const std::vector<config> configs = {
      {{{"algorithm", "sgp"}, {"schedule", "exponential"}}, 1e-4},
      // a static directed graph where u != 1 (a schedule that redraws the graph every round keeps a
      // compression floor: docs/design/algorithms.md, CHOCO-Push)
      {{{"algorithm", "choco-push"}, {"compressor", "top-k:0.25"}, {"consensus-step", "0.6"},
        {"schedule", "erdos-renyi:0.4"}},
       1e-4}};
  for (const auto& c : configs) {
    auto o = c.opts;
    o.push_back({"nodes", "6"});
    auto plain = o, tracked = o;
    tracked.push_back({"tracking", "true"});
    sp::gossip_run<> with(spec_of(tracked), x0, {}), without(spec_of(plain), x0, {});
    auto m_with = x0, m_without = x0;
    for (std::uint32_t t = 0; t < 2500; ++t) {
      tracked_round(with, m_with, ls, lr);
      // without tracking: the same loop on the plain gradient
      const auto f = ls.oracle();
      for (std::size_t i = 0; i < n; ++i) {
        const std::vector<double> x(m_without[i].begin(), m_without[i].end());
        std::vector<double> g(d);
        f(static_cast<std::uint32_t>(i), t, x, g);
        for (std::size_t k = 0; k < d; ++k) m_without[i][k] -= lr * static_cast<float>(g[k]);
      }
      without.step(spans(m_without));
    }
    INFO(c.opts[0].second << ": tracked " << worst_error(m_with, ls) << ", untracked " << worst_error(m_without, ls));
    CHECK(worst_error(m_with, ls) < c.bound);    // every node at the minimizer of the sum, with a constant step
    CHECK(worst_error(m_without, ls) > 1e-2);    // each node pulled toward its own data
    CHECK(with.bytes_sent() > without.bytes_sent());  // the trackers' messages are counted
  }
}

TEST_CASE("gossip_run with tracking: a restore continues bit for bit, and bad gradients change nothing",
          "[gossip_run][tracking]") {
  const std::size_t n = 4, d = 10;
  const test::least_squares ls(n, d, 20, 1.0, 5);
  const auto s = spec_of({{"nodes", "4"}, {"algorithm", "choco-push"}, {"compressor", "top-k:0.3"}, {"tracking", "true"}});
  auto models = random_models(n, d, 11);
  sp::gossip_run<> a(s, models, {});
  for (int t = 0; t < 5; ++t) tracked_round(a, models, ls, 0.05f);
  sp::checkpoint_writer w;
  a.save(w);
  const auto bytes = w.finish();
  auto resumed = models;
  for (int t = 0; t < 5; ++t) tracked_round(a, models, ls, 0.05f);
  sp::gossip_run<> b(s, random_models(n, d, 12), {});
  sp::checkpoint_reader r(bytes, "test");
  b.restore(r);
  for (int t = 0; t < 5; ++t) tracked_round(b, resumed, ls, 0.05f);
  for (std::size_t i = 0; i < n; ++i) CHECK(std::memcmp(resumed[i].data(), models[i].data(), d * sizeof(float)) == 0);

  // a step whose round had no track(); a NaN gradient (named), a short one: refused, nothing changed
  CHECK_THROWS_WITH(b.step(spans(resumed)), Catch::Contains("round 10") && Catch::Contains("call track() first"));
  auto grads = std::vector<std::vector<float>>(n, std::vector<float>(d, 0.5f));
  grads[2][7] = std::nanf("");
  const auto keep = grads;
  CHECK_THROWS_WITH(b.track(spans(grads)), Catch::Contains("node 2") && Catch::Contains("round 10"));
  grads[2][7] = 0.5f;
  grads[1].pop_back();
  CHECK_THROWS_WITH(b.track(spans(grads)), Catch::Contains("node 1") && Catch::Contains("gradient buffer has 9"));
  CHECK_THROWS_WITH(b.step(spans(resumed)), Catch::Contains("call track() first"));
  CHECK(b.round() == 10);
  // the run continues as a's does
  tracked_round(a, models, ls, 0.05f);
  tracked_round(b, resumed, ls, 0.05f);
  for (std::size_t i = 0; i < n; ++i) CHECK(std::memcmp(resumed[i].data(), models[i].data(), d * sizeof(float)) == 0);
  // a run that does not track refuses track()
  sp::gossip_run<> plain(spec_of({{"nodes", "4"}, {"algorithm", "sgp"}}), models, {});
  auto g4 = std::vector<std::vector<float>>(n, std::vector<float>(d, 0.0f));
  CHECK_THROWS_WITH(plain.track(spans(g4)), Catch::Contains("does not track gradients"));
}

TEST_CASE("gossip_run with tracking: one thread per node over a shared loopback gives the one-run bits",
          "[gossip_run][tracking]") {
  // each thread's trackers go over the shared network's companion (loopback_node::twin())
  const std::size_t n = 5, d = 9;
  const test::least_squares ls(n, d, 12, 1.0, 31);
  const auto s = spec_of({{"nodes", "5"}, {"algorithm", "choco-push"}, {"compressor", "top-k:0.3"},
                          {"schedule", "erdos-renyi:0.5"}, {"tracking", "true"}});
  const auto x0 = random_models(n, d, 21);
  auto whole = x0;
  sp::gossip_run<> all(s, x0, {});
  for (int t = 0; t < 20; ++t) tracked_round(all, whole, ls, 0.05f);

  sp::loopback_network shared(n);
  std::vector<std::vector<float>> each(n);
  std::vector<std::size_t> bytes(n);
  std::vector<std::string> errors(n);
  std::vector<std::thread> threads;
  for (std::uint32_t i = 0; i < n; ++i)
    threads.emplace_back([&, i] {
      try {
        sp::loopback_node view(shared, i);
        sp::gossip_run<sp::loopback_node> run(s, {x0[i]}, {}, &view);
        std::vector<std::vector<float>> m{x0[i]};
        const auto f = ls.oracle();
        for (std::uint32_t t = 0; t < 20; ++t) {
          const std::vector<double> x(m[0].begin(), m[0].end());
          std::vector<double> g(d);
          f(i, t, x, g);
          std::vector<std::vector<float>> gf{std::vector<float>(g.begin(), g.end())};
          run.track(spans(gf));
          for (std::size_t c = 0; c < d; ++c) m[0][c] -= 0.05f * gf[0][c];
          run.step(spans(m));
        }
        each[i] = m[0];
        bytes[i] = run.bytes_sent(0);
      } catch (const std::exception& e) {
        errors[i] = e.what();
      }
    });
  for (auto& th : threads) th.join();
  std::size_t total = 0;
  for (std::size_t i = 0; i < n; ++i) {
    INFO("node " << i << ": " << errors[i]);
    REQUIRE(errors[i].empty());
    CHECK(std::memcmp(each[i].data(), whole[i].data(), d * sizeof(float)) == 0);
    total += bytes[i];
  }
  CHECK(total == all.bytes_sent());
}
