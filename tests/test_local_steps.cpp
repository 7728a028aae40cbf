// Tests of the trainer's local steps, outer step, scalar evaluations and target accuracy: SGP with
// H local steps and a Nesterov outer step against a dense push-sum reference in double written
// from the equations (every node's numerator, weight, momentum and outer buffer); sum_i u_i = n
// after such rounds; a resumed run with local steps and outer momentum ends with the
// uninterrupted run's bits; CHOCO with local steps still reaches the optimum; evaluations that
// test each node's own model leave an asynchronous run's bits and staleness as they were, and the
// averaged model is measured only when asked; a target stops training at the first evaluation
// that reaches it, in the uninterrupted run's state, and SCSP's final rounds still follow; split
// evaluations test node i on its share (every node, equal bits too) before the last evaluation only.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <span>
#include <string>
#include <vector>

#include <sparsepush/sparsepush.hpp>
#include <sparsepush/train/trainer.hpp>

#include "dense_push_sum.hpp"
#include "train_fixture.hpp"

namespace sp = sparsepush;
namespace tf = train_fixture;

namespace {

constexpr std::size_t n = 6;

std::vector<std::vector<double>> initial_models() {
  std::vector<std::vector<double>> x0;
  for (std::uint32_t i = 0; i < n; ++i) x0.push_back(tf::initial(i));
  return x0;
}

sp::sparse_push<double> make_sgp(const std::string& schedule) {
  return sp::sparse_push<double>(initial_models(), sp::parse_schedule(schedule, n, 5), sp::sgp_phases<sp::any_compressor>(),
                                 sp::sparse_push_options{.threads = 2, .seed = 7});
}

sp::run_settings settings() {
  sp::run_settings s;
  s.add("nodes", n).add("test", "local-steps");
  return s;
}

double lr_of(std::uint32_t s) { return 0.08 / (1.0 + 0.02 * s); }

sp::trainer_options options(std::uint32_t rounds, std::uint32_t H, double outer_lr, double beta) {
  sp::trainer_options o;
  o.rounds = rounds;
  o.lr = lr_of;
  o.local_steps = H;
  o.outer_lr = outer_lr;
  o.outer_momentum = beta;
  o.eval_every = 4;
  o.eval_threads = 2;
  return o;
}

std::vector<std::vector<double>> models_of(const auto& alg) {
  std::vector<std::vector<double>> m(alg.num_nodes(), std::vector<double>(alg.dim()));
  for (std::size_t i = 0; i < m.size(); ++i) alg.model(i, std::span<double>(m[i]));
  return m;
}

bool same_bits(const std::vector<std::vector<double>>& a, const std::vector<std::vector<double>>& b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i)
    if (a[i].size() != b[i].size() || std::memcmp(a[i].data(), b[i].data(), a[i].size() * sizeof(double)) != 0) return false;
  return true;
}

std::string temp_dir(const std::string& name) {
  const auto p = std::filesystem::temp_directory_path() / ("sparsepush-test-local-steps-" + name);
  std::filesystem::remove_all(p);
  return p.string();
}

/// The equations of "local steps and an outer step" for SGP (identity compressor, eta = 1) on
/// the fixture's quadratic with its heavy-ball momentum, in double: R rounds of H steps.
std::vector<std::vector<double>> reference(const sp::any_schedule& sched, std::uint32_t R, std::uint32_t H, double go,
                                           double beta, std::vector<double>& u) {
  const std::size_t d = tf::dim;
  auto x = initial_models();
  u.assign(n, 1.0);
  std::vector<std::vector<double>> vel(n, std::vector<double>(d, 0.0)), m(n, std::vector<double>(d, 0.0));
  for (std::uint32_t t = 0; t < R; ++t) {
    std::vector<std::vector<double>> w = x;
    for (std::size_t i = 0; i < n; ++i) {
      std::vector<double> zs(d);
      for (std::size_t l = 0; l < d; ++l) zs[l] = x[i][l] / u[i];
      for (std::uint32_t h = 0; h < H; ++h) {
        const double gamma = lr_of(t * H + h);
        for (std::size_t l = 0; l < d; ++l) {
          const double g = w[i][l] / u[i] - tf::target(static_cast<std::uint32_t>(i), l);
          vel[i][l] = 0.5 * vel[i][l] + g;
        }
        for (std::size_t l = 0; l < d; ++l) w[i][l] -= gamma * vel[i][l];
      }
      if (go != 1.0 || beta != 0.0)
        for (std::size_t l = 0; l < d; ++l) {
          const double p = zs[l] - w[i][l] / u[i];
          m[i][l] = beta * m[i][l] + p;
          w[i][l] = u[i] * (zs[l] - go * (p + beta * m[i][l]));
        }
    }
    x = std::move(w);
    dense_push_sum::mix(sched, t, x, u);
  }
  for (std::size_t i = 0; i < n; ++i)
    for (auto& v : x[i]) v /= u[i];
  return x;
}

}  // namespace

TEST_CASE("local steps: SGP with H steps and an outer step equals a dense reference", "[local_steps]") {
  const std::string schedule = "random:2";  // irregular in-degrees: the weights leave 1
  const std::uint32_t R = 15;
  struct variant {
    std::uint32_t H;
    double go, beta;
  };
  for (const variant v : {variant{3, 1.0, 0.0}, variant{4, 0.7, 0.9}, variant{1, 1.3, 0.5}}) {
    CAPTURE(v.H, v.go, v.beta);
    auto alg = make_sgp(schedule);
    sp::single_process group(n);
    tf::backend be(n, 0, n);
    sp::trainer<double, sp::single_process> tr(group, settings(), options(R, v.H, v.go, v.beta), be.hooks());
    const auto res = tr.run(alg);
    REQUIRE_FALSE(res.diverged);
    std::vector<double> u;
    const auto want = reference(sp::parse_schedule(schedule, n, 5), R, v.H, v.go, v.beta, u);
    const auto got = models_of(alg);
    double worst = 0, spread = 0;
    for (std::size_t i = 0; i < n; ++i) {
      CHECK(alg.group().node(i).u() == Approx(u[i]).epsilon(1e-12));
      spread = std::max(spread, std::abs(u[i] - 1.0));
      for (std::size_t l = 0; l < tf::dim; ++l) worst = std::max(worst, std::abs(got[i][l] - want[i][l]));
    }
    CHECK(spread > 1e-3);  // the weights did leave 1: the de-biasing is exercised
    CHECK(worst < 1e-10);
    REQUIRE(res.weight_mass.has_value());
    CHECK(*res.weight_mass == Approx(double(n)).epsilon(1e-12));
    REQUIRE(res.steps_per_node.size() == n);
    for (const auto s : res.steps_per_node) CHECK(s == std::uint64_t{R} * v.H);
  }
}

TEST_CASE("local steps: H steps send H times fewer bytes per step, and H = 2 still trains", "[local_steps]") {
  auto a1 = sp::sparse_push<double>(initial_models(), sp::parse_schedule("time-varying-ring", n),
                                    sp::sparse_push_phases(sp::parse_compressor("top-k:0.25"), 0.2),
                                    sp::sparse_push_options{.threads = 2, .seed = 7});
  auto a4 = sp::sparse_push<double>(initial_models(), sp::parse_schedule("time-varying-ring", n),
                                    sp::sparse_push_phases(sp::parse_compressor("top-k:0.25"), 0.2),
                                    sp::sparse_push_options{.threads = 2, .seed = 7});
  sp::single_process group(n);
  tf::backend b1(n, 0, n), b4(n, 0, n);
  sp::trainer<double, sp::single_process> t1(group, settings(), options(40, 1, 1.0, 0.0), b1.hooks());
  sp::trainer<double, sp::single_process> t4(group, settings(), options(10, 4, 1.0, 0.0), b4.hooks());
  const auto r1 = t1.run(a1), r4 = t4.run(a4);
  REQUIRE_FALSE(r1.diverged);
  REQUIRE_FALSE(r4.diverged);
  // the same 40 local steps per node; a quarter of the messages
  CHECK(r1.steps_per_node == r4.steps_per_node);
  CHECK(r4.messages_sent * 4 == r1.messages_sent);
  CHECK(r4.report.bytes_sent < r1.report.bytes_sent / 3);
  // both move towards the average of the targets (score 1 at the optimum), the averaged model about as far
  std::vector<double> x0 = tf::initial(0);
  CHECK(r1.eval.averaged_model_accuracy > tf::score(x0, n) + 0.1);
  CHECK(r4.eval.averaged_model_accuracy > tf::score(x0, n) + 0.1);
  CHECK(std::abs(r4.eval.averaged_model_accuracy - r1.eval.averaged_model_accuracy) < 0.1);
}

TEST_CASE("local steps: a resumed run with outer momentum ends with the uninterrupted run's bits", "[local_steps]") {
  const std::string dir = temp_dir("resume"), other = temp_dir("resume-other");
  sp::single_process group(n);
  auto o = options(24, 3, 0.8, 0.6);
  o.checkpoint_dir = dir;
  o.checkpoint_every = 8;
  auto a = make_sgp("random:2");
  tf::backend ba(n, 0, n);
  sp::trainer<double, sp::single_process> full(group, settings(), o, ba.hooks());
  const auto ra = full.run(a);
  REQUIRE_FALSE(ra.diverged);

  auto b = make_sgp("random:2");
  tf::backend bb(n, 0, n);
  auto ob = options(24, 3, 0.8, 0.6);
  ob.checkpoint_dir = other;
  ob.checkpoint_every = 8;
  ob.resume_dir = dir;
  ob.resume_round = 8;  // the round whose checkpoint holds a non-zero outer momentum
  sp::trainer<double, sp::single_process> again(group, settings(), ob, bb.hooks());
  const auto rb = again.run(b);
  REQUIRE_FALSE(rb.diverged);
  CHECK(rb.resumed_at == 8);
  CHECK(same_bits(models_of(a), models_of(b)));
  CHECK(rb.report.bytes_sent == ra.report.bytes_sent);
  std::filesystem::remove_all(dir);
  std::filesystem::remove_all(other);
}

TEST_CASE("local steps: CHOCO with H = 2 still reaches the optimum", "[local_steps]") {
  auto alg = sp::choco<double>(initial_models(), sp::parse_schedule("undirected-ring", n),
                               sp::choco_options{.consensus_step = 0.4, .compressor = sp::parse_compressor("top-k:0.5"),
                                                 .threads = 2, .seed = 3});
  sp::single_process group(n);
  tf::backend be(n, 0, n);
  auto o = options(150, 2, 1.0, 0.0);
  o.lr = [](std::uint32_t) { return 0.05; };
  sp::trainer<double, sp::single_process> tr(group, settings(), o, be.hooks());
  const auto res = tr.run(alg);
  REQUIRE_FALSE(res.diverged);
  CHECK(res.eval.averaged_model_accuracy > 0.9);  // 1 / (1 + distance to the optimum)
  for (const auto s : res.steps_per_node) CHECK(s == 300u);
}

TEST_CASE("scalar evaluations: the averaged model only when asked, and own-model evaluations change nothing",
          "[local_steps][evaluate]") {
  // an asynchronous run over the loopback's seeded delays: evaluations of each node's own model
  // every round leave every bit and the staleness mixed as without any evaluation before the end
  auto make = [] {
    return sp::sparse_push<double>(initial_models(), sp::parse_schedule("time-varying-ring", n),
                                   sp::sparse_push_phases(sp::parse_compressor("top-k:0.25"), 0.2),
                                   sp::sparse_push_options{.threads = 2, .seed = 7, .network = {.seed = 3, .max_delay = 6},
                                                           .policy = sp::wait_policy::asynchronous()});
  };
  sp::single_process group(n);
  auto quiet = make(), busy = make(), avg = make();
  tf::backend b1(n, 0, n), b2(n, 0, n), b3(n, 0, n);
  auto o_quiet = options(40, 1, 1.0, 0.0), o_busy = o_quiet, o_avg = o_quiet;
  o_quiet.eval_every = 40;
  o_busy.eval_every = 1;
  o_avg.eval_every = 1;
  o_avg.eval_average_every = 10;
  std::vector<std::uint32_t> averaged_at;
  std::size_t evaluations = 0;
  sp::trainer_callbacks cb;
  cb.progress = [&](const sp::round_status& st) {
    if (!st.evaluated) return;
    ++evaluations;
    if (st.eval.averaged) averaged_at.push_back(st.round);
    else CHECK(std::isnan(st.eval.averaged_model_accuracy));
  };
  sp::trainer<double, sp::single_process> tq(group, settings(), o_quiet, b1.hooks());
  sp::trainer<double, sp::single_process> tb(group, settings(), o_busy, b2.hooks(), cb);
  const auto rq = tq.run(quiet), rb = tb.run(busy);
  CHECK(same_bits(models_of(quiet), models_of(busy)));
  CHECK(rq.max_staleness == rb.max_staleness);
  CHECK(rb.max_staleness > 1);
  CHECK(evaluations == 40);
  CHECK(averaged_at == std::vector<std::uint32_t>{40});
  CHECK(rb.eval.averaged);
  CHECK(rb.eval_bytes == 0);  // one process: nothing travels
  // averaged evaluations every 10 rounds drain what is in flight: the models change, the mass does not
  averaged_at.clear();
  evaluations = 0;
  sp::trainer<double, sp::single_process> ta(group, settings(), o_avg, b3.hooks(), cb);
  const auto ra = ta.run(avg);
  CHECK(averaged_at == std::vector<std::uint32_t>{10, 20, 30, 40});
  CHECK_FALSE(same_bits(models_of(quiet), models_of(avg)));
  REQUIRE(ra.weight_mass.has_value());
  CHECK(*ra.weight_mass == Approx(double(n)).epsilon(1e-12));
}

TEST_CASE("target accuracy: training stops at the first evaluation that reaches it, SCSP's final rounds follow",
          "[local_steps][target]") {
  auto make = [](std::uint32_t train_rounds) {
    return sp::sparse_push<double>(initial_models(), sp::parse_schedule("time-varying-ring", n),
                                   sp::scsp_phases(sp::parse_compressor("top-k:0.25"), 0.2, train_rounds, 3),
                                   sp::sparse_push_options{.threads = 2, .seed = 7});
  };
  sp::single_process group(n);
  // the uninterrupted run: every evaluation's node accuracy and the models there
  std::vector<std::pair<std::uint32_t, double>> seen;
  std::vector<std::vector<std::vector<double>>> models_at;
  auto full = make(60);
  sp::trainer_callbacks cb;
  cb.progress = [&](const sp::round_status& st) {
    if (st.evaluated && st.training) {
      seen.emplace_back(st.round, st.eval.avg_node_accuracy);
      models_at.push_back(models_of(full));
    }
  };
  tf::backend b1(n, 0, n);
  auto o = options(63, 1, 1.0, 0.0);
  o.train_rounds = 60;
  sp::trainer<double, sp::single_process> t1(group, settings(), o, b1.hooks(), cb);
  const auto r1 = t1.run(full);
  REQUIRE_FALSE(r1.diverged);
  CHECK_FALSE(r1.target.has_value());  // none asked
  REQUIRE(seen.size() >= 6);
  // a target between the third and the last training evaluation's accuracy
  const double target = seen[2].second + 0.5 * (seen.back().second - seen[2].second);
  std::size_t first = 0;
  while (first < seen.size() && seen[first].second < target) ++first;
  REQUIRE(first < seen.size() - 1);

  auto stopped = make(60);
  tf::backend b2(n, 0, n);
  auto o2 = o;
  o2.target_accuracy = target;
  std::vector<std::vector<double>> at_stop;
  std::uint32_t final_rounds_asked_at = 0;
  o2.final_rounds_from = [&](std::uint32_t at) {
    final_rounds_asked_at = at;
    at_stop = models_of(stopped);
    return 3u;
  };
  sp::trainer<double, sp::single_process> t2(group, settings(), o2, b2.hooks());
  const auto r2 = t2.run(stopped);
  REQUIRE_FALSE(r2.diverged);
  REQUIRE(r2.target.has_value());
  CHECK(r2.target->rounds == seen[first].first);
  CHECK(r2.target->accuracy == seen[first].second);
  CHECK(r2.target->local_steps == std::uint64_t{seen[first].first} * n);
  CHECK(final_rounds_asked_at == seen[first].first);
  CHECK(same_bits(at_stop, models_at[first]));  // the uninterrupted run's state at that round
  CHECK(r2.rounds_done == seen[first].first + 3);
  // SCSP's exact final rounds ran after the stop: the nodes end closer together than they were there
  double spread = 0;
  {
    std::vector<double> mean(tf::dim, 0.0);
    for (const auto& m : at_stop)
      for (std::size_t l = 0; l < tf::dim; ++l) mean[l] += m[l] / n;
    for (const auto& m : at_stop) {
      double s2 = 0;
      for (std::size_t l = 0; l < tf::dim; ++l) s2 += (m[l] - mean[l]) * (m[l] - mean[l]);
      spread += std::sqrt(s2) / n;
    }
  }
  CHECK(r2.eval.parameter_divergence < 0.5 * spread);
  REQUIRE(r2.bytes_after_training.has_value());
  CHECK(*r2.bytes_after_training > 0);
  for (const auto s : r2.steps_per_node) CHECK(s == seen[first].first);
  // a target never reached is no error: the run ends as planned, none reported
  auto never = make(60);
  tf::backend b3(n, 0, n);
  auto o3 = o;
  o3.target_accuracy = 1.0;
  sp::trainer<double, sp::single_process> t3(group, settings(), o3, b3.hooks());
  const auto r3 = t3.run(never);
  CHECK_FALSE(r3.target.has_value());
  CHECK(r3.rounds_done == 63);
}

namespace {
/// The fixture's score on coordinates [node d / nodes, (node + 1) d / nodes) only: a test whose
/// answer depends on which share a node was given.
double share_score(std::uint32_t node, std::size_t nodes, std::span<const double> m) {
  const std::size_t lo = node * tf::dim / nodes, hi = (node + 1) * tf::dim / nodes;
  double s = 0.0;
  for (std::size_t l = lo; l < hi; ++l) {
    double mean = 0.0;
    for (std::uint32_t i = 0; i < n; ++i) mean += tf::target(i, l);
    mean /= double(n);
    s += (m[l] - mean) * (m[l] - mean);
  }
  return 1.0 / (1.0 + std::sqrt(s)) + double(node);  // + node: a share's answer names the share
}
}  // namespace

TEST_CASE("split evaluations: node i on its own share, every node tested even where the bits are equal",
          "[local_steps][evaluate]") {
  // identical initial models: a deduplicating evaluation would test one model once
  std::vector<std::vector<double>> same(n, tf::initial(0));
  sp::sparse_push<double> alg(same, sp::parse_schedule("time-varying-ring", n), sp::sgp_phases<sp::any_compressor>(),
                              sp::sparse_push_options{.threads = 2, .seed = 7});
  sp::single_process group(n);
  std::vector<int> calls(n, 0);
  const sp::share_accuracy_function<double> shares = [&](std::size_t, std::uint32_t i, std::span<const double> m) {
    ++calls.at(i);
    return share_score(i, n, m);
  };
  const sp::accuracy_function<double> whole = [](std::size_t, std::span<const double> m) { return tf::score(m, n); };
  const auto ev = sp::evaluate<double>(alg, group, 1, whole, sp::eval_reduction::ordered, true, shares);
  double expect = 0.0;
  for (std::uint32_t i = 0; i < n; ++i) expect += share_score(i, n, tf::initial(0)) / double(n);
  CHECK(ev.avg_node_accuracy == Approx(expect).epsilon(1e-14));
  CHECK(calls == std::vector<int>(n, 1));
  // the averaged model (node 0's bits here) is tested on the whole slice, not found among shares
  CHECK(ev.averaged_model_accuracy == Approx(tf::score(tf::initial(0), n)).epsilon(1e-14));
  // without shares, the equal bits are tested once
  const auto plain = sp::evaluate<double>(alg, group, 1, whole, sp::eval_reduction::ordered, false);
  CHECK(plain.avg_node_accuracy == Approx(tf::score(tf::initial(0), n)).epsilon(1e-14));
}

TEST_CASE("split evaluations: a trainer's evaluations before the last use the shares, the last does not, and the bits "
          "stay", "[local_steps][evaluate]") {
  auto make = [] {
    return sp::sparse_push<double>(initial_models(), sp::parse_schedule("time-varying-ring", n),
                                   sp::sparse_push_phases(sp::parse_compressor("top-k:0.25"), 0.2),
                                   sp::sparse_push_options{.threads = 2, .seed = 7});
  };
  sp::single_process group(n);
  auto plain = make(), split = make();
  tf::backend b1(n, 0, n), b2(n, 0, n);
  auto o = options(20, 1, 1.0, 0.0);
  o.eval_every = 5;
  auto o_split = o;
  o_split.eval_split = true;
  auto hooks = b2.hooks();
  hooks.share_accuracy = [](std::size_t, std::uint32_t i, std::size_t nodes, std::span<const double> m) {
    return share_score(i, nodes, m);
  };
  std::vector<double> got, expect;
  sp::trainer_callbacks cb;
  cb.progress = [&](const sp::round_status& st) {
    if (!st.evaluated) return;
    got.push_back(st.eval.avg_node_accuracy);
    const auto m = models_of(split);
    double e = 0.0;
    for (std::uint32_t i = 0; i < n; ++i)
      e += (st.round == 20 ? tf::score(m[i], n) : share_score(i, n, m[i])) / double(n);
    expect.push_back(e);
  };
  sp::trainer<double, sp::single_process> tp(group, settings(), o, b1.hooks());
  sp::trainer<double, sp::single_process> ts(group, settings(), o_split, hooks, cb);
  const auto rp = tp.run(plain), rs = ts.run(split);
  REQUIRE(got.size() == 4);
  for (std::size_t k = 0; k < got.size(); ++k) CHECK(got[k] == Approx(expect[k]).epsilon(1e-13));
  CHECK(got[0] > 1.0);  // the shares' answers (which carry + node), not the whole slice's (< 1)
  CHECK(rs.eval.avg_node_accuracy == Approx(rp.eval.avg_node_accuracy).epsilon(1e-14));
  CHECK(same_bits(models_of(plain), models_of(split)));
  // a trainer asked to split without a share test refuses at construction
  auto o_bad = o_split;
  tf::backend b3(n, 0, n);
  CHECK_THROWS_WITH((sp::trainer<double, sp::single_process>(group, settings(), o_bad, b3.hooks())),
                    Catch::Contains("eval_split needs local_training::share_accuracy"));
}
