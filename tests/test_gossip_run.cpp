// Tests of sparsepush/train/gossip_run.hpp: the algorithm of a run_spec stepped by the caller's
// optimizer. SGP's rounds against a dense push-sum reference in double (the caller's change lands
// on the numerator, then x <- W x, u <- W u); mass conservation under top-K; SCSP's finish()
// averaging within its tolerance; save/restore continuing bit for bit; and the refusals, with
// nothing changed.
#include <catch2/catch.hpp>

#include <sparsepush/train/gossip_run.hpp>

#include "dense_push_sum.hpp"

#include <cmath>
#include <cstring>
#include <random>
#include <span>
#include <string>
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
