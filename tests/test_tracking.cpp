// Tests of gradient tracking (algorithm/tracking.hpp) around SGP, SP and CHOCO-Push: a dense
// Push-DIGing reference in double with CHOCO-Push's compressed mixing (exact top-K) on directed
// graphs where u != 1; the invariant sum_i y_i == sum_i g_i; convergence to the exact minimizer of a
// heterogeneous least-squares problem with a constant step, where SGP keeps a bias; resume.
#include <catch2/catch.hpp>
#include <cstring>
#include <filesystem>
#include <sparsepush/sparsepush.hpp>
#include <sparsepush/train/trainer.hpp>

#include "choco_push_reference.hpp"
#include "least_squares.hpp"
#include "test_util.hpp"
#include "train_fixture.hpp"

using namespace sparsepush;

namespace {
using vec = std::vector<double>;
using test::least_squares;
using test::reference_choco_push;

std::vector<vec> start_models(std::size_t n, std::size_t d) {
  std::vector<vec> x0;
  for (std::size_t i = 0; i < n; ++i) x0.push_back(test::gaussian<double>(d, 40 + static_cast<unsigned>(i)));
  return x0;
}

double max_diff(std::span<const double> a, std::span<const double> b) {
  double m = 0;
  for (std::size_t l = 0; l < a.size(); ++l) m = std::max(m, std::abs(a[l] - b[l]));
  return m;
}

using tracked_choco_push = tracking<choco_push<double>>;
using tracked_sp = tracking<sparse_push<double>>;

tracked_choco_push make_tracked(const std::vector<vec>& x0, const any_schedule& sched, const choco_push_options& o) {
  return tracked_choco_push(std::make_unique<choco_push<double>>(x0, sched, o),
                            std::make_unique<choco_push<double>>(std::vector<vec>(x0.size(), vec(x0[0].size(), 0.0)), sched, o));
}
tracked_sp make_tracked(const std::vector<vec>& x0, const any_schedule& sched, const phase_schedule& phases) {
  return tracked_sp(std::make_unique<sparse_push<double>>(x0, sched, phases),
                    std::make_unique<sparse_push<double>>(std::vector<vec>(x0.size(), vec(x0[0].size(), 0.0)), sched, phases));
}

/// ||mean_i xh_i - x*|| / ||x*|| and the largest ||xh_i - x*|| / ||x*||.
template <class A>
std::pair<double, double> errors(const A& alg, const least_squares& ls) {
  Eigen::VectorXd avg = Eigen::VectorXd::Zero(static_cast<Eigen::Index>(ls.d));
  double worst = 0;
  for (std::size_t i = 0; i < alg.num_nodes(); ++i) {
    vec m(ls.d);
    alg.model(i, std::span<double>(m));
    const Eigen::Map<const Eigen::VectorXd> mv(m.data(), static_cast<Eigen::Index>(ls.d));
    avg += mv / static_cast<double>(alg.num_nodes());
    worst = std::max(worst, (mv - ls.optimum).norm() / ls.optimum.norm());
  }
  return {(avg - ls.optimum).norm() / ls.optimum.norm(), worst};
}
}  // namespace

TEST_CASE("tracking with CHOCO-Push matches a dense Push-DIGing reference with top-K where u != 1", "[tracking]") {
  const least_squares ls(8, 24, 30, 1.0, 13);
  const auto f = ls.oracle();
  const auto x0 = start_models(8, 24);
  for (const char* spec : {"erdos-renyi:0.3", "random:1"}) {
    for (const std::size_t k : {std::size_t{0}, std::size_t{4}}) {
      const auto sched = parse_schedule(spec, 8, 6);
      const choco_push_options o{.consensus_step = 0.5,
                                 .compressor = k ? parse_compressor("top-k:" + std::to_string(k)) : any_compressor(identity{})};
      auto alg = make_tracked(x0, sched, o);
      reference_choco_push xr(x0), yr(std::vector<vec>(8, vec(24, 0.0)));
      std::vector<vec> gprev(8, vec(24, 0.0));
      double worst = 0;
      for (std::uint32_t t = 0; t < 50; ++t) {
        alg.round(t, f, 0.02);
        std::vector<vec> xp(8, vec(24)), yt(8, vec(24)), g(8, vec(24));
        for (std::uint32_t j = 0; j < 8; ++j) {
          vec xh(24);
          for (std::size_t l = 0; l < 24; ++l) xh[l] = xr.x[j][l] / xr.u[j];
          f(j, t, xh, g[j]);
          for (std::size_t l = 0; l < 24; ++l) {
            yt[j][l] = yr.x[j][l] + g[j][l] - gprev[j][l];
            xp[j][l] = xr.x[j][l] - 0.02 * yt[j][l];
          }
        }
        xr.mix(sched, k, 0.5, xp, t);
        yr.mix(sched, k, 0.5, yt, t);
        gprev = g;
        for (std::size_t i = 0; i < 8; ++i) {
          worst = std::max(worst, max_diff(alg.algorithm().node(i).x(), xr.x[i]));
          worst = std::max(worst, max_diff(alg.tracked(i), yr.x[i]));
          REQUIRE(std::abs(alg.algorithm().node(i).u() - xr.u[i]) < 1e-12);
        }
      }
      INFO(spec << " top-" << k << ": largest difference " << worst);
      REQUIRE(worst < 1e-9);
    }
  }
}

TEST_CASE("tracking keeps sum y == sum g every round, for SGP, SP and CHOCO-Push", "[tracking]") {
  const least_squares ls(8, 30, 20, 1.0, 17);
  const auto f = ls.oracle();
  const auto x0 = start_models(8, 30);
  const auto sched = parse_schedule("random:2", 8, 1);
  auto check = [&](auto&& alg, const char* name) {
    for (std::uint32_t t = 0; t < 100; ++t) {
      alg.round(t, f, 0.02);
      for (std::size_t l = 0; l < 30; ++l) {
        double ys = 0, gs = 0;
        for (std::size_t i = 0; i < 8; ++i) {
          ys += alg.tracked(i)[l];
          gs += alg.last_gradient(i)[l];
        }
        INFO(name << " round " << t << " coordinate " << l);
        REQUIRE(std::abs(ys - gs) < 1e-10 * (1 + std::abs(gs)));
      }
    }
  };
  check(make_tracked(x0, sched, sgp_phases()), "SGP");
  check(make_tracked(x0, sched, sparse_push_phases(parse_compressor("top-k:5"), 0.3)), "SP top-5");
  check(make_tracked(x0, sched, choco_push_options{.consensus_step = 0.5, .compressor = parse_compressor("top-k:5")}),
        "CHOCO-Push top-5");
}

TEST_CASE("tracking with SGP is Push-DIGing: the exact minimizer with a constant step, where SGP keeps a bias",
          "[tracking]") {
  const least_squares ls(8, 20, 40, 1.0, 23);
  const auto f = ls.oracle();
  const std::vector<vec> x0(8, vec(20, 0.0));
  const auto sched = parse_schedule("erdos-renyi:0.3", 8, 2);
  const double lr = 0.05;
  sparse_push<double> sgp(x0, sched, sgp_phases());
  auto tracked = make_tracked(x0, sched, sgp_phases());
  // CHOCO-Push with its own compressed trackers: the spread and the error fall as the rounds go
  auto cp = make_tracked(x0, sched, choco_push_options{.consensus_step = 0.6, .compressor = parse_compressor("top-k:0.25")});
  choco_push<double> cp_plain(x0, sched, {.consensus_step = 0.6, .compressor = parse_compressor("top-k:0.25")});
  for (std::uint32_t t = 0; t < 3000; ++t) {
    sgp.round(t, f, lr);
    tracked.round(t, f, lr);
    cp.round(t, f, lr);
    cp_plain.round(t, f, lr);
  }
  const auto [sgp_avg, sgp_worst] = errors(sgp, ls);
  const auto [tr_avg, tr_worst] = errors(tracked, ls);
  const auto [cp_avg, cp_worst] = errors(cp, ls);
  const auto [cpp_avg, cpp_worst] = errors(cp_plain, ls);
  INFO("SGP " << sgp_avg << " / " << sgp_worst << ", tracked SGP " << tr_avg << " / " << tr_worst << ", tracked CHOCO-Push "
              << cp_avg << " / " << cp_worst << ", CHOCO-Push " << cpp_avg << " / " << cpp_worst);
  REQUIRE(sgp_worst > 1e-2);   // each node's model is pulled toward its own data
  REQUIRE(tr_worst < 1e-8);    // exact, with a constant step
  REQUIRE(cp_worst < 1e-6);    // compressed trackers too
  REQUIRE(cpp_worst > 1e-2);
}

TEST_CASE("tracking checkpoints both instances and the gradients, and resumes bit for bit", "[tracking]") {
  const least_squares ls(6, 16, 10, 1.0, 29);
  const auto f = ls.oracle();
  const auto x0 = start_models(6, 16);
  const auto sched = parse_schedule("random:1", 6, 5);
  const choco_push_options o{.consensus_step = 0.5, .compressor = parse_compressor("top-k:3")};
  auto a = make_tracked(x0, sched, o);
  for (std::uint32_t t = 0; t < 20; ++t) a.round(t, f, 0.03);
  auto b = make_tracked(x0, sched, o);
  test::save_and_restore(a, b);
  for (std::uint32_t t = 20; t < 40; ++t) {
    a.round(t, f, 0.03);
    b.round(t, f, 0.03);
  }
  for (std::size_t i = 0; i < 6; ++i) {
    REQUIRE(vec(a.algorithm().node(i).x().begin(), a.algorithm().node(i).x().end()) ==
            vec(b.algorithm().node(i).x().begin(), b.algorithm().node(i).x().end()));
    REQUIRE(vec(a.tracked(i).begin(), a.tracked(i).end()) == vec(b.tracked(i).begin(), b.tracked(i).end()));
  }
  REQUIRE(a.bytes_sent() == b.bytes_sent());
  REQUIRE(a.bytes_sent() == a.algorithm().bytes_sent() + a.trackers().bytes_sent());
  REQUIRE(a.trackers().bytes_sent() > 0);
}

TEST_CASE("tracking refuses a tracker instance that does not start at zero, and a NaN gradient changes nothing",
          "[tracking]") {
  const auto x0 = start_models(4, 8);
  const auto sched = parse_schedule("time-varying-ring", 4);
  REQUIRE_THROWS_WITH(tracked_choco_push(std::make_unique<choco_push<double>>(x0, sched),
                                         std::make_unique<choco_push<double>>(x0, sched)),
                      Catch::Contains("zero models"));
  auto alg = make_tracked(x0, sched, choco_push_options{});
  gradient_oracle<double> bad = [](std::uint32_t i, std::uint32_t, std::span<const double>, std::span<double> g) {
    std::fill(g.begin(), g.end(), 0.5);
    if (i == 3) g[5] = std::nan("");
  };
  REQUIRE_THROWS_WITH(alg.round(0, bad, 0.1), Catch::Contains("node 3") && Catch::Contains("index 5"));
  for (std::size_t i = 0; i < 4; ++i)
    REQUIRE(vec(alg.algorithm().node(i).x().begin(), alg.algorithm().node(i).x().end()) == x0[i]);
  REQUIRE(alg.bytes_sent() == 0);
}

TEST_CASE("tracking in the trainer: the backend's optimizer steps along the tracker, and a resume keeps the bits",
          "[tracking][train]") {
  namespace tf = train_fixture;
  constexpr std::size_t n = 6;
  const auto sched = parse_schedule("erdos-renyi:0.4", n, 3);  // directed, static, u != 1
  const choco_push_options o{.consensus_step = 0.5, .compressor = parse_compressor("top-k:0.25"), .threads = 2};
  std::vector<vec> x0;
  for (std::uint32_t i = 0; i < n; ++i) x0.push_back(tf::initial(i));
  auto lr = [](std::uint32_t t) { return 0.1 / (1.0 + 0.01 * t); };
  run_settings settings;
  settings.add("nodes", n).add("test", "tracking");
  auto options = [&](std::uint32_t rounds) {
    trainer_options to;
    to.rounds = rounds;
    to.lr = lr;
    to.eval_every = 10;
    return to;
  };
  // the loop the trainer must run, written with the algorithm's own calls
  auto manual = make_tracked(x0, sched, o);
  std::vector<vec> vel(n, vec(tf::dim, 0.0)), dirs(n, vec(tf::dim));
  for (std::uint32_t t = 0; t < 300; ++t) {
    for (std::size_t i = 0; i < n; ++i) {
      vec xh(tf::dim), y(tf::dim);
      manual.model(i, std::span<double>(xh));
      auto g = manual.gradient(i);
      for (std::size_t l = 0; l < tf::dim; ++l) g[l] = xh[l] - tf::target(static_cast<std::uint32_t>(i), l);
      manual.tracker(i, std::span<double>(y));
      for (std::size_t l = 0; l < tf::dim; ++l) dirs[i][l] = vel[i][l] = 0.5 * vel[i][l] + y[l];
    }
    std::vector<std::span<const double>> views(dirs.begin(), dirs.end());
    manual.round(t, std::span<const std::span<const double>>(views), lr(t));
  }
  single_process group(n);
  tf::backend be(n, 0, n);
  trainer<double, single_process> tr(group, settings, options(300), be.hooks());
  auto alg = make_tracked(x0, sched, o);
  tr.run(alg);
  for (std::size_t i = 0; i < n; ++i) {
    vec a(tf::dim), b(tf::dim);
    alg.model(i, std::span<double>(a));
    manual.model(i, std::span<double>(b));
    REQUIRE(std::memcmp(a.data(), b.data(), a.size() * sizeof(double)) == 0);
  }
  // the nodes reach the minimizer of the sum, the mean of the targets, where each node's own differs
  double worst = 0;
  for (std::size_t i = 0; i < n; ++i)
    for (std::size_t l = 0; l < tf::dim; ++l) {
      double mean = 0;
      for (std::uint32_t j = 0; j < n; ++j) mean += tf::target(j, l) / double(n);
      worst = std::max(worst, std::abs(alg.model(i)[l] - mean));
    }
  INFO("largest distance to the minimizer " << worst);
  REQUIRE(worst < 1e-3);
  // stopped after round 150 with a checkpoint at round 100, resumed from it: the uninterrupted bits
  const auto dir = (std::filesystem::temp_directory_path() / "sparsepush-test-tracking").string();
  std::filesystem::remove_all(dir);
  {
    tf::backend b1(n, 0, n);
    auto o1 = options(150);
    o1.checkpoint_dir = dir;
    o1.checkpoint_every = 50;  // the last, at round 100: the resume runs 200 rounds
    trainer<double, single_process> first(group, settings, o1, b1.hooks());
    auto a1 = make_tracked(x0, sched, o);
    first.run(a1);
    tf::backend b2(n, 0, n);
    auto o2 = options(300);
    o2.resume_dir = dir;
    trainer<double, single_process> second(group, settings, o2, b2.hooks());
    auto a2 = make_tracked(x0, sched, o);
    second.run(a2);
    for (std::size_t i = 0; i < n; ++i) REQUIRE(a2.model(i) == alg.model(i));
    REQUIRE(a2.bytes_sent() == alg.bytes_sent());
  }
  std::filesystem::remove_all(dir);
}

TEST_CASE("tracking in the trainer refuses a backend without the gradient and direction_from hooks", "[tracking][train]") {
  namespace tf = train_fixture;
  constexpr std::size_t n = 4;
  std::vector<vec> x0;
  for (std::uint32_t i = 0; i < n; ++i) x0.push_back(tf::initial(i));
  run_settings settings;
  settings.add("nodes", n).add("test", "tracking-hooks");
  trainer_options to;
  to.rounds = 3;
  to.lr = [](std::uint32_t) { return 0.1; };
  single_process group(n);
  tf::backend be(n, 0, n);
  auto hooks = be.hooks();
  hooks.direction_from = nullptr;  // a backend written before tracking: step only
  trainer<double, single_process> tr(group, settings, to, hooks);
  auto alg = make_tracked(x0, parse_schedule("time-varying-ring", n), choco_push_options{});
  REQUIRE_THROWS_WITH(tr.run(alg), Catch::Contains("gradient and direction_from hooks"));
  for (std::size_t i = 0; i < n; ++i) REQUIRE(alg.model(i) == x0[i]);  // no round ran
}
