// Tests of quasi-global momentum (nn::sgd::quasi_global, --momentum-kind quasi-global): the
// buffer's and the direction's formulas against a computation in double written from the
// equations; on a heterogeneous least-squares problem with exact mixing, local heavy-ball momentum
// spreads the nodes apart while the quasi-global buffer keeps them at the spread of no momentum;
// the run description's default (its rules are test_run_spec.cpp's); the reference backend's refusal of a
// checkpoint whose previous model or rate is bad.
#include <catch2/catch.hpp>
#include <sparsepush/nn/optimizer.hpp>
#include <sparsepush/sparsepush.hpp>
#include <sparsepush/train/reference_backend.hpp>
#include <sparsepush/train/run_spec.hpp>

#include "least_squares.hpp"

using namespace sparsepush;

TEST_CASE("quasi-global momentum: the buffer follows the model's change divided by the previous rate", "[nn][quasi_global]") {
  const std::vector<float> g1{1.0f, -2.0f, 0.5f}, x1{2.0f, 1.0f, -4.0f};
  const std::vector<float> g2{0.25f, 1.0f, -1.5f}, x2{1.5f, 1.25f, -3.0f};
  for (const bool nesterov : {false, true}) {
    const double mu = 0.9, wd = 0.1, lr1 = 0.2;
    const nn::sgd opt{mu, nesterov, wd};
    std::vector<float> m{0.5f, 0.0f, -1.0f}, prev, out(3);
    // the first step has no previous model: the buffer is kept, previous becomes x1
    opt.quasi_global(g1, x1, m, prev, 0.0, out);
    REQUIRE(prev == x1);
    const double m0[] = {0.5, 0.0, -1.0};
    for (std::size_t i = 0; i < 3; ++i) {
      const double p = double(g1[i]) + wd * x1[i];
      CHECK(m[i] == float(m0[i]));
      CHECK(out[i] == Approx(nesterov ? p + mu * (mu * m0[i] + p) : p + mu * m0[i]).epsilon(1e-6));
    }
    // the second: m = mu m + (1 - mu) (x1 - x2) / lr1
    opt.quasi_global(g2, x2, m, prev, lr1, out);
    REQUIRE(prev == x2);
    for (std::size_t i = 0; i < 3; ++i) {
      const double mi = mu * m0[i] + (1 - mu) * (double(x1[i]) - double(x2[i])) / lr1;
      const double p = double(g2[i]) + wd * x2[i];
      CHECK(m[i] == Approx(mi).epsilon(1e-6));
      CHECK(out[i] == Approx(nesterov ? p + mu * (mu * mi + p) : p + mu * mi).epsilon(1e-6));
    }
  }
  // bad input changes nothing: another size, a rate that is not > 0
  std::vector<float> m(3, 1.0f), prev = x1, out(3), shortp(2);
  CHECK_THROWS_AS(nn::sgd{}.quasi_global(g1, x2, m, shortp, 0.1, out), size_error);
  CHECK_THROWS_AS(nn::sgd{}.quasi_global(g1, x2, m, prev, 0.0, out), config_error);
  CHECK(prev == x1);
  CHECK(m == std::vector<float>(3, 1.0f));
}

TEST_CASE("quasi-global momentum keeps the nodes as close as no momentum does, where local momentum spreads them",
          "[quasi_global]") {
  // 8 nodes, each its own data (het 1), the exponential graph, exact mixing (SGP), full gradients
  const std::size_t n = 8, d = 50;
  const test::least_squares ls(n, d, 100, 1.0, 31);
  const auto f = ls.oracle();
  const double lr = 0.02, mu = 0.9;
  enum class kind { none, local, quasi_global };
  auto run = [&](kind k) {
    sparse_push<double> sgp(std::vector<std::vector<double>>(n, std::vector<double>(d, 0.0)),
                            parse_schedule("exponential", n), sgp_phases());
    const nn::sgd opt{k == kind::none ? 0.0 : mu, false, 0.0};
    std::vector<std::vector<double>> m(n, std::vector<double>(d, 0.0)), prev(n), dirs(n, std::vector<double>(d));
    std::vector<double> xh(d), g(d);
    double prev_lr = 0.0;
    for (std::uint32_t t = 0; t < 2000; ++t) {
      for (std::size_t i = 0; i < n; ++i) {
        sgp.model(i, std::span<double>(xh));
        f(static_cast<std::uint32_t>(i), t, xh, g);
        if (k == kind::quasi_global) opt.quasi_global(g, xh, m[i], prev[i], prev_lr, dirs[i]);
        else opt.direction(g, xh, m[i], dirs[i]);
      }
      const std::vector<std::span<const double>> views(dirs.begin(), dirs.end());
      sgp.round(t, std::span<const std::span<const double>>(views), lr);
      prev_lr = lr;
    }
    // the spread max_i |xh_i - mean xh| and the averaged model's distance to the minimizer
    std::vector<std::vector<double>> xs(n, std::vector<double>(d));
    std::vector<double> mean(d, 0.0);
    for (std::size_t i = 0; i < n; ++i) {
      sgp.model(i, std::span<double>(xs[i]));
      for (std::size_t l = 0; l < d; ++l) mean[l] += xs[i][l] / double(n);
    }
    double spread = 0;
    for (const auto& x : xs)
      for (std::size_t l = 0; l < d; ++l) spread = std::max(spread, std::abs(x[l] - mean[l]));
    return std::pair{spread, ls.averaged_model_error(sgp)};
  };
  const auto [none, none_err] = run(kind::none);
  const auto [local, local_err] = run(kind::local);
  const auto [qg, qg_err] = run(kind::quasi_global);
  INFO("spread: no momentum " << none << ", local " << local << ", quasi-global " << qg << "; error " << none_err << ", "
                              << local_err << ", " << qg_err);
  CHECK(local > 4 * none);   // heavy ball multiplies each node's pull toward its own data
  CHECK(qg < 1.5 * none);    // the quasi-global buffer moves the nodes together
  CHECK(qg_err < 1e-2);      // and the average still reaches the minimizer
}

TEST_CASE("run_spec: the momentum kind is local by default, quasi-global when given", "[quasi_global][run_spec]") {
  run_spec s;
  CHECK(s.momentum_kind_value() == "local");
  CHECK(!s.quasi_global());
  s.momentum_kind = "quasi-global";
  CHECK(s.quasi_global());
}

TEST_CASE("reference backend: a checkpoint with a bad quasi-global previous model is refused, naming it",
          "[quasi_global][train]") {
  // a tiny data set: the backend only reads the shards' indices here
  fashion_mnist fm;
  for (auto* set : {&fm.train, &fm.test}) {
    set->count = 8;
    set->rows = set->cols = 28;
    set->pixels.assign(std::size_t{8} * 28 * 28, 0.5f);
    set->labels = {0, 1, 2, 3, 4, 5, 6, 7};
  }
  run_spec s;
  s.algorithm = "sgp";
  s.nodes = 2;
  s.set("momentum-kind", "quasi-global");
  const reference_plan plan = plan_reference_run(s, fm.train);
  const nn::model net = nn::model::make("mlp");
  const std::size_t d = net.num_params();
  reference_backend backend(s, plan, fm, net, 0, s.nodes);
  auto hooks = backend.hooks();
  // what save() writes per node: the shard, the momentum, the previous model and its rate
  auto file_with = [&](std::size_t previous_size, double rate) {
    checkpoint_writer w;
    for (std::uint32_t i = 0; i < s.nodes; ++i) {
      shard_sampler(plan.parts[i], shard_seed(s.seed, i)).save(w);
      w.values(std::span<const float>(std::vector<float>(d, 0.0f)));
      w.values(std::span<const float>(std::vector<float>(previous_size, 0.25f)));
      w.f64(rate);
    }
    return w.finish();
  };
  auto restore = [&](const std::vector<std::byte>& file) {
    checkpoint_reader r(file);
    return hooks.restore(r);
  };
  REQUIRE(restore(file_with(d, 0.05)));  // a good one: its state is returned to apply
  REQUIRE(restore(file_with(0, 0.0)));   // before the first step: no previous model yet
  for (const auto& [size, rate] : {std::pair<std::size_t, double>{d, -0.05}, {d, 0.0},
                                   {d, std::numeric_limits<double>::quiet_NaN()}, {d - 1, 0.05}}) {
    INFO("a previous model of " << size << " elements at rate " << rate);
    REQUIRE_THROWS_WITH(restore(file_with(size, rate)),
                        Catch::Contains("quasi-global momentum's previous model of " + std::to_string(size) +
                                        " elements") && Catch::Contains("for a model of " + std::to_string(d)));
  }
}
