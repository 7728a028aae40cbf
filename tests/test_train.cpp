// Tests of sparsepush/train/: the settings fingerprint compares every bit; the trainer resumes a
// checkpointed run to the uninterrupted run's bits and refuses other settings; a lossy run keeps
// the mass; the metrics equal a dense computation over every node; the guard stops a diverging
// run; CHOCO and centralized training through the trainer equal their oracle rounds bit for bit;
// checkpoint directories: locked against a second run, never created by resume, file-system
// errors reported as the library's errors; a resume inside SCSP's final rounds and a repeated
// resume from a kept round give the uninterrupted run's result; a group of several processes
// gathers the losses at evaluations and checkpoints only, to the bits of one process; a negative
// first loss stays the first loss; overlap, staleness and asynchronous runs (the loopback's seeded
// delays) resume from a middle checkpoint to the uninterrupted bits, keep the mass and report every
// node's steps and the staleness mixed; staleness 0 is the default options' run bit for bit.
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <thread>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include <sparsepush/sparsepush.hpp>
#include <sparsepush/train/trainer.hpp>

#include "train_fixture.hpp"

namespace sp = sparsepush;
namespace tf = train_fixture;

namespace {

std::string temp_dir(const std::string& name) {
  const auto p = std::filesystem::temp_directory_path() / ("sparsepush-test-train-" + name);
  std::filesystem::remove_all(p);
  return p.string();
}

sp::run_settings settings(double lr, double tolerance = 1e-3) {
  sp::run_settings s;
  s.add("nodes", 6).add("lr", lr).add("final_tolerance", tolerance).add("schedule", "time-varying-ring");
  return s;
}

using sp_alg = sp::sparse_push<double>;

sp_alg make_sp(double drop = 0.0, sp::loss_recovery rec = sp::loss_recovery::acknowledged) {
  std::vector<std::vector<double>> x0;
  for (std::uint32_t i = 0; i < 6; ++i) x0.push_back(tf::initial(i));
  return sp_alg(std::move(x0), sp::parse_schedule(drop > 0 ? "exponential" : "time-varying-ring", 6),
                sp::sparse_push_phases(sp::parse_compressor(drop > 0 ? "identity" : "top-k:0.25"), drop > 0 ? 1.0 : 0.2),
                sp::sparse_push_options{.threads = 2, .seed = 7, .network = {.drop_probability = drop, .seed = 3},
                                        .recovery = rec});
}

sp::trainer_options options(std::uint32_t rounds, const std::string& ckpt = {}, const std::string& resume = {}) {
  sp::trainer_options o;
  o.rounds = rounds;
  o.lr = [](std::uint32_t t) { return 0.05 / (1.0 + 0.01 * t); };
  o.eval_every = 5;
  o.eval_threads = 2;
  o.checkpoint_dir = ckpt;
  o.checkpoint_every = 10;
  o.resume_dir = resume;
  return o;
}

std::vector<std::vector<double>> models_of(const auto& alg) {
  std::vector<std::vector<double>> m(alg.num_nodes(), std::vector<double>(alg.dim()));
  for (std::size_t i = 0; i < m.size(); ++i) alg.model(i, std::span<double>(m[i]));
  return m;
}

bool same_bits(double a, double b) { return std::memcmp(&a, &b, sizeof a) == 0; }

sp_alg make_scsp(std::uint32_t train_rounds, std::uint32_t final_rounds) {
  std::vector<std::vector<double>> x0;
  for (std::uint32_t i = 0; i < 6; ++i) x0.push_back(tf::initial(i));
  return sp_alg(std::move(x0), sp::parse_schedule("time-varying-ring", 6),
                sp::scsp_phases(sp::parse_compressor("top-k:0.25"), 0.2, train_rounds, final_rounds),
                sp::sparse_push_options{.threads = 2, .seed = 7});
}

/// Every field of a resumed run's result is the uninterrupted run's, bit for bit, but the round
/// it started at, the times and the state's capacity.
void check_same_result(const sp::train_result& b, const sp::train_result& a) {
  CHECK(b.diverged == a.diverged);
  CHECK(b.reason == a.reason);
  CHECK(b.rounds_done == a.rounds_done);
  CHECK(same_bits(b.first_loss, a.first_loss));
  CHECK(same_bits(b.loss, a.loss));
  CHECK(same_bits(b.eval.avg_node_accuracy, a.eval.avg_node_accuracy));
  CHECK(same_bits(b.eval.averaged_model_accuracy, a.eval.averaged_model_accuracy));
  CHECK(same_bits(b.eval.parameter_divergence, a.eval.parameter_divergence));
  CHECK(b.report.round == a.report.round);
  CHECK(same_bits(b.report.parameter_divergence, a.report.parameter_divergence));
  CHECK(b.report.bytes_sent == a.report.bytes_sent);
  CHECK(b.report.full_precision_bytes == a.report.full_precision_bytes);
  CHECK(same_bits(b.report.comm_ratio, a.report.comm_ratio));
  CHECK(b.bytes_after_training == a.bytes_after_training);
  CHECK(b.messages_sent == a.messages_sent);
  CHECK(b.messages_dropped == a.messages_dropped);
  REQUIRE(b.weight_mass.has_value() == a.weight_mass.has_value());
  if (a.weight_mass) CHECK(same_bits(*b.weight_mass, *a.weight_mass));
  // not state_bytes_per_node: the capacity of buffers that grow with the rounds this process ran
  // (a run resumed at round 20 never ran a compressed round: no top-k workspace)
}

using sp_trainer = sp::trainer<double, sp::single_process>;

/// The message of the library error a call throws ("" when it throws none; any other exception,
/// a std::filesystem_error for one, escapes and fails the test).
template <class F>
std::string library_error(F&& f) {
  try {
    f();
  } catch (const sp::error& e) {
    return e.what();
  }
  return {};
}

}  // namespace

TEST_CASE("run_settings: numbers are compared by their bits", "[train]") {
  CHECK(settings(0.02).text() != settings(0.0200001).text());
  CHECK(settings(0.02, 1e-7).text() != settings(0.02, 2e-7).text());
  CHECK(settings(0.0).text() != settings(-0.0).text());
  CHECK(settings(0.1 + 0.2).text() != settings(0.3).text());  // one ulp apart
  CHECK(settings(0.02).text() == settings(0.02).text());
  // the text reads back to the same settings, and the diff names the key and both values
  const auto s = settings(0.02);
  CHECK(sp::run_settings::parse(s.text()) == s);
  CHECK(settings(0.0200001).diff_from(s) == "lr=0.02 (now 0.0200001)");
  CHECK(settings(0.02, 2e-7).diff_from(settings(0.02, 1e-7)) == "final_tolerance=1e-07 (now 2e-07)");
  CHECK(settings(0.02).diff_from(s).empty());
  // every double round-trips through its text
  for (const double v : {0.1, 1.0 / 3.0, 1e-300, 5e-324, 1.7976931348623157e308, -2.5e-7}) {
    sp::run_settings a;
    a.add("v", v);
    const auto text = sp::run_settings::parse(a.text()).items()[0].second;
    CHECK(same_bits(std::strtod(text.c_str(), nullptr), v));
  }
  // values with the separators survive; bad keys are errors
  sp::run_settings p;
  p.add("data", "/tmp/a;b%c");
  CHECK(p.text() == "data=/tmp/a%3Bb%25c;");
  CHECK(sp::run_settings::parse(p.text()) == p);
  CHECK_THROWS_AS(sp::run_settings().add("a=b", 1), sp::config_error);
  CHECK_THROWS_AS(sp::run_settings().add("a", 1).add("a", 2), sp::config_error);
  CHECK_THROWS_AS(sp::run_settings::parse("novalue;"), sp::config_error);
}

TEST_CASE("trainer: a resumed run ends with the uninterrupted run's bits", "[train]") {
  const std::string dir = temp_dir("resume"), other = temp_dir("resume-other");
  sp::single_process group(6);

  auto alg = make_sp();
  tf::backend be(6, 0, 6);
  auto o = options(30, dir);
  o.checkpoint_every = 5;
  sp::trainer<double, sp::single_process> full(group, settings(0.02), o, be.hooks());
  const auto a = full.run(alg);
  REQUIRE_FALSE(a.diverged);
  // the last checkpoint and the one before it are kept, older ones removed
  const sp::checkpoint_directory ck(dir);
  REQUIRE(ck.read_manifest().round == 25);
  CHECK(std::filesystem::exists(ck.rank_file(25, 0)));
  CHECK(std::filesystem::exists(ck.rank_file(20, 0)));
  CHECK_FALSE(std::filesystem::exists(ck.rank_file(15, 0)));
  CHECK_FALSE(std::filesystem::exists(ck.rank_file(5, 0)));

  auto alg2 = make_sp();
  tf::backend be2(6, 0, 6);
  std::uint32_t resumed_at = 0;
  sp::trainer_callbacks cb;
  cb.resumed = [&](std::uint32_t t) { resumed_at = t; };
  sp::trainer<double, sp::single_process> again(group, settings(0.02), options(30, other, dir), be2.hooks(), cb);
  const auto b = again.run(alg2);
  CHECK(resumed_at == 25);
  CHECK(b.resumed_at == 25);
  CHECK(models_of(alg2) == models_of(alg));
  CHECK(be2.velocity == be.velocity);
  CHECK(same_bits(b.eval.parameter_divergence, a.eval.parameter_divergence));
  CHECK(same_bits(b.eval.avg_node_accuracy, a.eval.avg_node_accuracy));
  CHECK(same_bits(b.eval.averaged_model_accuracy, a.eval.averaged_model_accuracy));
  CHECK(b.report.bytes_sent == a.report.bytes_sent);
  CHECK(same_bits(*b.weight_mass, *a.weight_mass));
  CHECK(same_bits(b.first_loss, a.first_loss));
  std::filesystem::remove_all(dir);
  std::filesystem::remove_all(other);
}

TEST_CASE("trainer: resume refuses settings that differ in any bit", "[train]") {
  const std::string dir = temp_dir("refuse");
  sp::single_process group(6);
  {
    auto alg = make_sp();
    tf::backend be(6, 0, 6);
    sp::trainer<double, sp::single_process>(group, settings(0.02, 1e-7), options(12, dir), be.hooks()).run(alg);
  }
  auto check_refused = [&](const sp::run_settings& s, const std::string& what) {
    auto alg = make_sp();
    const auto before = models_of(alg);
    tf::backend be(6, 0, 6);
    sp::trainer<double, sp::single_process> tr(group, s, options(12, {}, dir), be.hooks());
    try {
      tr.run(alg);
      FAIL("resumed with other settings: " + what);
    } catch (const sp::checkpoint_error& e) {
      CHECK_THAT(e.what(), Catch::Contains("other settings: " + what));
    }
    CHECK(models_of(alg) == before);  // nothing changed
  };
  check_refused(settings(0.0200001, 1e-7), "lr=0.02 (now 0.0200001)");
  check_refused(settings(0.02, 2e-7), "final_tolerance=1e-07 (now 2e-07)");
  check_refused(settings(std::nextafter(0.02, 1.0), 1e-7), "lr=0.02 (now 0.020000000000000004)");  // one ulp
  // the same settings resume; another round count that ends before the checkpoint does not
  auto alg = make_sp();
  tf::backend be(6, 0, 6);
  CHECK(sp::trainer<double, sp::single_process>(group, settings(0.02, 1e-7), options(12, {}, dir), be.hooks())
            .run(alg).resumed_at == 10);
  auto alg2 = make_sp();
  sp::trainer<double, sp::single_process> shorter(group, settings(0.02, 1e-7), options(10, {}, dir), be.hooks());
  CHECK_THROWS_WITH(shorter.run(alg2), Catch::Contains("holds round 10, outside this run's 1..9"));
  std::filesystem::remove_all(dir);
}

TEST_CASE("trainer: the metrics are those of a dense computation over every node", "[train]") {
  sp::single_process group(6);
  for (const double drop : {0.0, 0.3}) {
    auto alg = make_sp(drop);
    tf::backend be(6, 0, 6);
    auto o = options(25);
    const auto r = sp::trainer<double, sp::single_process>(group, settings(0.02), o, be.hooks()).run(alg);
    const auto m = models_of(alg);
    CHECK(same_bits(r.eval.parameter_divergence, sp::parameter_divergence(m)));  // metrics.hpp, in double
    double acc = 0.0;
    std::vector<double> avg(tf::dim, 0.0);
    for (const auto& x : m) {
      acc += tf::score(x, 6) / 6.0;
      for (std::size_t l = 0; l < tf::dim; ++l) avg[l] += x[l] / 6.0;
    }
    CHECK(same_bits(r.eval.avg_node_accuracy, acc));
    CHECK(same_bits(r.eval.averaged_model_accuracy, tf::score(avg, 6)));
    CHECK(r.report.bytes_sent == alg.bytes_sent());
    // report over a process group: the one-process report, bit for bit
    const auto over_group = sp::report<double>(alg, 24, group), plain = sp::report<double>(alg, 24);
    CHECK(same_bits(over_group.parameter_divergence, plain.parameter_divergence));
    CHECK(over_group.bytes_sent == plain.bytes_sent);
    CHECK(same_bits(over_group.comm_ratio, plain.comm_ratio));
    CHECK(r.messages_sent == alg.messages_sent());
    CHECK(r.messages_dropped == alg.messages_dropped());
    CHECK(r.state_bytes_per_node == alg.state_bytes(0));
    // acknowledged recovery keeps sum u = n under loss
    CHECK(*r.weight_mass == Approx(6.0).epsilon(1e-12));
    if (drop > 0) CHECK(r.messages_dropped > 0);
  }
  // plain push-sum loses the mass of the lost envelopes
  auto alg = make_sp(0.3, sp::loss_recovery::none);
  tf::backend be(6, 0, 6);
  const auto r = sp::trainer<double, sp::single_process>(group, settings(0.02), options(25), be.hooks()).run(alg);
  CHECK(r.messages_dropped > 0);
  CHECK(*r.weight_mass < 6.0 - 1e-6);
}

TEST_CASE("trainer: the guard stops a diverging run before its evaluation", "[train]") {
  sp::single_process group(6);
  auto alg = make_sp();
  tf::backend be(6, 0, 6);
  auto o = options(40);
  o.lr = [](std::uint32_t) { return 3.5; };  // x - 3.5 (momentum sum of g): grows every round
  int progress = 0;
  sp::trainer_callbacks cb;
  cb.guard = sp::default_divergence_guard;
  cb.progress = [&](const sp::round_status&) { ++progress; };
  const auto r = sp::trainer<double, sp::single_process>(group, settings(0.02), o, be.hooks(), cb).run(alg);
  REQUIRE(r.diverged);
  CHECK_THAT(r.reason, Catch::StartsWith("training diverged at round"));
  CHECK(r.rounds_done < 40);
  CHECK(progress == static_cast<int>(r.rounds_done) - 1);  // the stopping round reports nothing
}

TEST_CASE("default_divergence_guard: a loss that is not known is not judged", "[train]") {
  sp::round_status s;
  s.round = 4;
  s.first_loss = 1.0;
  s.loss = std::nan("");
  s.loss_known = false;  // a round between evaluations, over several processes: a stale value
  CHECK_FALSE(sp::default_divergence_guard(s).has_value());
  s.loss = 1e9;
  CHECK_FALSE(sp::default_divergence_guard(s).has_value());
  s.loss_known = true;
  CHECK_THAT(sp::default_divergence_guard(s).value_or(""), Catch::StartsWith("training diverged at round 3 (mean loss 1e+09"));
  s.loss = std::nan("");
  CHECK_THAT(sp::default_divergence_guard(s).value_or(""), Catch::StartsWith("training diverged at round 3 (mean loss nan"));
  s.loss = 19.0;  // within 10 x 1 + 10
  CHECK_FALSE(sp::default_divergence_guard(s).has_value());
}

namespace {
/// One process posing as rank 0 of two: single_process's collectives, and the name of every
/// gather of losses recorded in `events`, so a test sees where a group of several ranks
/// gathers them.
struct posing_group {
  sp::single_process one;
  std::vector<std::string>* events;
  int rank() const noexcept { return 0; }
  int ranks() const noexcept { return 2; }
  std::uint32_t first_node() const noexcept { return 0; }
  std::size_t local_nodes() const noexcept { return one.local_nodes(); }
  std::size_t total_nodes() const noexcept { return one.total_nodes(); }
  std::vector<double> allgather(std::span<const double> mine, std::string_view what = "") {
    if (what.find("loss") != std::string_view::npos) events->emplace_back(what);
    return one.allgather(mine);
  }
  std::uint64_t sum(std::uint64_t v) const noexcept { return v; }
  double broadcast(double v) const noexcept { return v; }
  std::uint32_t broadcast(std::uint32_t v) const noexcept { return v; }
  void ordered_sum(std::span<float> f, std::span<double> d, const std::function<void()>& add) const { one.ordered_sum(f, d, add); }
  void agree(std::string_view) const noexcept {}
  void finish() const noexcept {}
};
static_assert(sp::process_group<posing_group>);
}  // namespace

TEST_CASE("trainer: eval_reduction::allreduce evaluates the double mean of the models, and the node accuracies "
          "are ordered's", "[train]") {
  sp::single_process group(6);
  auto alg = make_sp(), alg_ordered = make_sp();
  tf::backend be(6, 0, 6), be_ordered(6, 0, 6);
  auto o = options(25);
  const auto ordered = sp::trainer<double, sp::single_process>(group, settings(0.02), o, be_ordered.hooks()).run(alg_ordered);
  o.eval_reduction = sp::eval_reduction::allreduce;
  const auto r = sp::trainer<double, sp::single_process>(group, settings(0.02), o, be.hooks()).run(alg);
  const auto m = models_of(alg);
  REQUIRE(m == models_of(alg_ordered));  // the reduction changes what is reported, never the training
  std::vector<double> mean(tf::dim, 0.0);  // sum in node order, then / n
  for (const auto& x : m)
    for (std::size_t l = 0; l < tf::dim; ++l) mean[l] += x[l];
  for (auto& v : mean) v /= 6.0;
  CHECK(same_bits(r.eval.averaged_model_accuracy, tf::score(mean, 6)));
  double div = 0.0;
  for (const auto& x : m) {
    double s2 = 0.0;
    for (std::size_t l = 0; l < tf::dim; ++l) s2 += (x[l] - mean[l]) * (x[l] - mean[l]);
    div += std::sqrt(s2) / 6.0;
  }
  CHECK_THAT(r.eval.parameter_divergence, Catch::WithinRel(div, 1e-12));
  CHECK_THAT(r.eval.parameter_divergence, Catch::WithinRel(ordered.eval.parameter_divergence, 1e-12));
  CHECK(same_bits(r.eval.avg_node_accuracy, ordered.eval.avg_node_accuracy));
}

TEST_CASE("trainer: eval_reduction::allreduce over a group without sum_in_place is refused by name", "[train]") {
  struct no_sum_group {
    sp::single_process one{6};
    int rank() const noexcept { return 0; }
    int ranks() const noexcept { return 1; }
    std::uint32_t first_node() const noexcept { return 0; }
    std::size_t local_nodes() const noexcept { return 6; }
    std::size_t total_nodes() const noexcept { return 6; }
    std::vector<double> allgather(std::span<const double> mine) const { return one.allgather(mine); }
    std::uint64_t sum(std::uint64_t v) const noexcept { return v; }
    double broadcast(double v) const noexcept { return v; }
    std::uint32_t broadcast(std::uint32_t v) const noexcept { return v; }
    void ordered_sum(std::span<float> f, std::span<double> d, const std::function<void()>& add) const {
      one.ordered_sum(f, d, add);
    }
    void agree(std::string_view) const noexcept {}
    void finish() const noexcept {}
  };
  static_assert(sp::process_group<no_sum_group>);
  no_sum_group group;
  auto alg = make_sp();
  tf::backend be(6, 0, 6);
  auto o = options(5);
  o.eval_reduction = sp::eval_reduction::allreduce;
  sp::trainer<double, no_sum_group> tr(group, settings(0.02), o, be.hooks());
  CHECK_THROWS_WITH(tr.run(alg), Catch::Contains("eval_reduction::allreduce needs a process group with sum_in_place"));
}

TEST_CASE("trainer: several processes gather the losses at evaluations and checkpoints only, to the same bits",
          "[train]") {
  const std::string dir_one = temp_dir("losses-one"), dir_two = temp_dir("losses-two");
  auto o = options(23);
  o.eval_every = 5;        // rounds 5, 10, 15, 20 and the last, 23
  o.checkpoint_every = 7;  // rounds 7, 14, 21: not evaluations
  std::vector<sp::round_status> one_st, two_st;
  std::vector<std::string> events;
  auto run = [&](auto& group, const std::string& dir, std::vector<sp::round_status>& seen) {
    auto alg = make_sp();
    tf::backend be(6, 0, 6);
    auto oo = o;
    oo.checkpoint_dir = dir;
    sp::trainer_callbacks cb;
    cb.guard = sp::default_divergence_guard;
    cb.progress = [&](const sp::round_status& s) {
      seen.push_back(s);
      events.push_back("progress " + std::to_string(s.round));
    };
    return sp::trainer<double, std::remove_reference_t<decltype(group)>>(group, settings(0.02), oo, be.hooks(), cb).run(alg);
  };
  sp::single_process one(6);
  const auto a = run(one, dir_one, one_st);
  events.clear();
  posing_group two{sp::single_process(6), &events};
  const auto b = run(two, dir_two, two_st);
  check_same_result(b, a);
  REQUIRE(one_st.size() == 23);
  REQUIRE(two_st.size() == 23);
  const std::vector<std::uint32_t> known = {5, 7, 10, 14, 15, 20, 21, 23};
  std::vector<std::string> want;  // the gathers of losses, each before its round's progress
  double stale = 0.0;
  for (std::uint32_t r = 1; r <= 23; ++r) {
    const auto& x = one_st[r - 1];
    const auto& y = two_st[r - 1];
    INFO("round " << r);
    CHECK(x.loss_known);  // one process: every round
    const bool k = std::find(known.begin(), known.end(), r) != known.end();
    CHECK(y.loss_known == k);
    if (k) {
      CHECK(same_bits(y.loss, x.loss));
      CHECK(same_bits(y.first_loss, one_st[0].loss));  // the first round's mean, gathered at round 5
      stale = y.loss;
      if (r == 5) want.emplace_back("the gather of the first round's losses");
      want.emplace_back("the gather of the losses (at an evaluation or a checkpoint)");
    } else {
      CHECK(same_bits(y.loss, stale));  // the last known mean, 0 before the first
      CHECK(same_bits(y.first_loss, r < 5 ? 0.0 : one_st[0].loss));
    }
    want.push_back("progress " + std::to_string(r));
  }
  CHECK(events == want);
  CHECK(same_bits(b.first_loss, one_st[0].loss));
  CHECK(std::filesystem::exists(sp::checkpoint_directory(dir_two).rank_file(21, 0)));
  std::filesystem::remove_all(dir_one);
  std::filesystem::remove_all(dir_two);
}

TEST_CASE("trainer: a negative first loss is the run's first loss", "[train]") {
  sp::single_process group(6);
  auto alg = make_sp();
  tf::backend be(6, 0, 6);
  auto hooks = be.hooks();
  hooks.step = [inner = hooks.step](std::size_t w, std::uint32_t i, std::uint32_t t, std::span<const double> x,
                                    std::span<double> dir) { return -inner(w, i, t, x, dir); };  // a log-likelihood, say
  std::vector<sp::round_status> seen;
  sp::trainer_callbacks cb;
  cb.progress = [&](const sp::round_status& s) { seen.push_back(s); };
  const auto r = sp::trainer<double, sp::single_process>(group, settings(0.02), options(8), hooks, cb).run(alg);
  REQUIRE(seen.size() == 8);
  REQUIRE(seen[0].loss < 0);
  CHECK(same_bits(r.first_loss, seen[0].loss));
  CHECK(!same_bits(seen[7].loss, seen[0].loss));  // a later round's mean would differ
  for (const auto& s : seen) CHECK(same_bits(s.first_loss, seen[0].loss));
}

TEST_CASE("trainer: CHOCO and centralized train through the trainer as through their oracle", "[train]") {
  const sp::gradient_oracle<double> oracle = [](std::uint32_t i, std::uint32_t, std::span<const double> x,
                                                std::span<double> p) {
    for (std::size_t l = 0; l < tf::dim; ++l) p[l] = x[l] - tf::target(i, l);
  };
  auto lr = [](std::uint32_t t) { return 0.05 / (1.0 + 0.01 * t); };
  std::vector<std::vector<double>> x0;
  for (std::uint32_t i = 0; i < 6; ++i) x0.push_back(tf::initial(i));
  const auto ring = sp::parse_schedule("undirected-ring", 6);
  const sp::choco_options co{.consensus_step = 0.4, .compressor = sp::parse_compressor("top-k:0.3"), .threads = 2, .seed = 1};
  sp::choco<double> by_oracle(x0, ring, co), by_trainer(x0, ring, co);
  sp::centralized<double> c_oracle(x0[0], 6, 2), c_trainer(x0[0], 6, 2);
  for (std::uint32_t t = 0; t < 15; ++t) {
    by_oracle.round(t, oracle, lr(t));
    c_oracle.round(t, oracle, lr(t));
  }
  // the same gradients through the trainer's protocol (the backend's buffers, no momentum)
  std::vector<std::vector<double>> dirs(6, std::vector<double>(tf::dim));
  sp::local_training<double> h;
  h.step = [](std::size_t, std::uint32_t i, std::uint32_t, std::span<const double> x, std::span<double> p) {
    for (std::size_t l = 0; l < tf::dim; ++l) p[l] = x[l] - tf::target(i, l);
    return 0.0;
  };
  h.direction = [&](std::uint32_t i) { return std::span<double>(dirs[i]); };
  h.accuracy = [](std::size_t, std::span<const double> m, bool) { return tf::score(m, 6); };
  sp::single_process group(6);
  auto o = options(15);
  o.lr = lr;
  sp::trainer<double, sp::single_process>(group, settings(0.02), o, h).run(by_trainer);
  sp::trainer<double, sp::single_process>(group, settings(0.02), o, h).run(c_trainer);
  CHECK(models_of(by_trainer) == models_of(by_oracle));
  CHECK(models_of(c_trainer) == models_of(c_oracle));
}

TEST_CASE("trainer: bad options and a group that does not match are errors", "[train]") {
  sp::single_process group(6);
  tf::backend be(6, 0, 6);
  auto o = options(0);
  CHECK_THROWS_WITH((sp::trainer<double, sp::single_process>(group, settings(0.02), o, be.hooks())),
                    Catch::Contains("at least one round"));
  o = options(5);
  o.lr = nullptr;
  CHECK_THROWS_WITH((sp::trainer<double, sp::single_process>(group, settings(0.02), o, be.hooks())),
                    Catch::Contains("learning-rate"));
  sp::single_process seven(7);
  auto alg = make_sp();
  tf::backend be7(7, 0, 7);
  CHECK_THROWS_WITH((sp::trainer<double, sp::single_process>(seven, settings(0.02), options(5), be7.hooks()).run(alg)),
                    Catch::Contains("the process group places 7"));
  CHECK_THROWS_AS(sp::single_process(0), sp::config_error);
}

namespace {
// The trainer snippet of docs/guide/training.md, compiled: a backend of free functions over momentum buffers.
std::vector<std::vector<float>> momentum(6, std::vector<float>(tf::dim, 0.0f));
double my_gradient_and_momentum(std::size_t, std::uint32_t node, std::uint32_t, std::span<const float> x,
                                std::span<float> p) {
  double loss = 0.0;
  for (std::size_t l = 0; l < tf::dim; ++l) {
    const float g = x[l] - static_cast<float>(tf::target(node, l));
    loss += 0.5 * g * g;
    p[l] = 0.5f * p[l] + g;  // p is the momentum buffer itself
  }
  return loss;
}
double my_test(std::size_t, std::span<const float> x, bool) {
  std::vector<double> m(x.begin(), x.end());
  return tf::score(m, 6);
}
}  // namespace

TEST_CASE("trainer: the README's snippet trains and keeps the mass", "[train]") {
  const std::size_t n = 6;
  const std::uint32_t R = 20;
  const auto lr = [](std::uint32_t) { return 0.05; };
  const auto settings = ::settings(0.05);
  std::vector<std::vector<float>> x0(n, std::vector<float>(tf::dim, 1.0f));
  sp::sparse_push<float> alg(x0, sp::parse_schedule("time-varying-ring", n),
                             sp::sparse_push_phases(sp::parse_compressor("top-k:0.25"), 0.2), {.threads = 2});
  // [readme-trainer-begin]
  sp::single_process group(n);                  // or sp::mpi_process_group group(mpi_net);
  sp::local_training<float> backend;
  backend.step = [&](std::size_t worker, std::uint32_t node, std::uint32_t t,
                     std::span<const float> model, std::span<float> direction) {
    return my_gradient_and_momentum(worker, node, t, model, direction);  // returns the loss
  };
  backend.direction = [&](std::uint32_t node) { return std::span<float>(momentum[node]); };
  backend.accuracy = [&](std::size_t worker, std::span<const float> model, bool final) {
    return my_test(worker, model, final);
  };
  sp::trainer_options opt;                      // rounds, lr, evaluations, checkpoints
  opt.rounds = R;
  opt.lr = lr;
  opt.checkpoint_dir = "ck";
  sp::trainer_callbacks cb;                     // guard, progress, ...
  cb.guard = sp::default_divergence_guard;
  sp::trainer<float, sp::single_process> tr(group, settings, opt, backend, cb);
  const sp::train_result r = tr.run(alg);       // r.eval, r.report, r.weight_mass, ...
  // [readme-trainer-end]
  CHECK_FALSE(r.diverged);
  CHECK(*r.weight_mass == Approx(6.0).epsilon(1e-9));
  CHECK(r.eval.parameter_divergence > 0.0);
  CHECK(sp::checkpoint_directory("ck").read_manifest().round == 18);
  std::filesystem::remove_all("ck");
}

TEST_CASE("trainer: every refusal names what is wrong", "[train]") {
  sp::single_process group(6);
  tf::backend be(6, 0, 6);
  auto hooks = be.hooks();
  hooks.accuracy = nullptr;
  CHECK_THROWS_WITH((sp::trainer<double, sp::single_process>(group, settings(0.02), options(5), hooks)),
                    Catch::Contains("local_training needs step, direction and accuracy"));

  // a manifest written by another rank count, and a rank file of another round than its manifest
  const std::string dir = temp_dir("refusals");
  {
    auto alg = make_sp();
    tf::backend b(6, 0, 6);
    sp::trainer<double, sp::single_process>(group, settings(0.02), options(12, dir), b.hooks()).run(alg);
  }
  const sp::checkpoint_directory ck(dir);
  auto resume_fails_with = [&](const std::string& what) {
    auto alg = make_sp();
    const auto before = models_of(alg);
    tf::backend b(6, 0, 6);
    sp::trainer<double, sp::single_process> tr(group, settings(0.02), options(12, {}, dir), b.hooks());
    CHECK_THROWS_WITH(tr.run(alg), Catch::Contains(what));
    CHECK(models_of(alg) == before);
    CHECK(b.velocity == tf::backend(6, 0, 6).velocity);  // the backend's state is not applied either
  };
  ck.write_manifest({10, 2, settings(0.02).text()});
  resume_fails_with("was written by 2 rank(s), this run has 1");
  std::filesystem::copy_file(ck.rank_file(10, 0), ck.rank_file(11, 0));
  ck.write_manifest({11, 1, settings(0.02).text()});
  resume_fails_with("holds another round than its manifest");
  std::filesystem::remove_all(dir);

  // report() over one process's nodes refuses an algorithm that runs a block of them
  struct block_of_nodes {
    std::size_t num_nodes() const { return 2; }
    std::size_t total_nodes() const { return 6; }
    std::size_t dim() const { return 1; }
    std::vector<double> model(std::size_t) const { return {0.0}; }
    void model(std::size_t, std::span<double> out) const { out[0] = 0.0; }
    void round(std::uint32_t, const sp::gradient_oracle<double>&, double) {}
    std::size_t state_bytes(std::size_t) const { return 0; }
    std::size_t bytes_sent() const { return 0; }
    std::size_t full_precision_bytes() const { return 0; }
  };
  CHECK_THROWS_WITH(sp::report<double>(block_of_nodes{}, 0), Catch::Contains("this process runs 2 of the 6 nodes"));
}

TEST_CASE("shard_sampler: batches cover the shard every epoch, and a checkpoint of another shard is refused",
          "[train]") {
  sp::shard_sampler s({5, 7, 9, 11}, 3);
  std::vector<std::uint32_t> batch, seen;
  for (int b = 0; b < 2; ++b) {
    s.next_batch(2, batch);
    seen.insert(seen.end(), batch.begin(), batch.end());
  }
  std::sort(seen.begin(), seen.end());
  CHECK(seen == std::vector<std::uint32_t>{5, 7, 9, 11});  // one epoch: each sample once
  CHECK(s.epoch == 1);
  sp::checkpoint_writer w;
  s.save(w);
  const auto bytes = w.finish();
  sp::checkpoint_reader r(bytes, "shard");
  const auto back = sp::shard_sampler({5, 7, 9, 11}, 0).read(r);
  CHECK(back.order == s.order);
  CHECK(back.cursor == s.cursor);
  sp::checkpoint_reader r2(bytes, "shard");
  CHECK_THROWS_WITH(sp::shard_sampler({5, 7, 9, 12}, 0).read(r2), Catch::Contains("not this node's shard"));
  sp::shard_sampler empty;
  CHECK_THROWS_WITH(empty.next_batch(1, batch), Catch::Contains("has no samples"));
}

TEST_CASE("trainer: a resume inside SCSP's final rounds reports the uninterrupted run's result", "[train]") {
  // 20 training rounds, then 10 of exact gossip; checkpoints every 5 rounds: 25 is inside the
  // final rounds, where no local step is taken and the final phase's bytes were counted from 20
  const std::string dir = temp_dir("scsp"), other = temp_dir("scsp-other");
  sp::single_process group(6);
  auto o = options(30, dir);
  o.train_rounds = 20;
  o.checkpoint_every = 5;
  auto alg = make_scsp(20, 10);
  tf::backend be(6, 0, 6);
  const auto a = sp_trainer(group, settings(0.02), o, be.hooks()).run(alg);
  REQUIRE(a.bytes_after_training.has_value());
  CHECK(*a.bytes_after_training > 0);
  REQUIRE(sp::checkpoint_directory(dir).read_manifest().round == 25);

  for (const std::uint32_t from : {25u, 20u, 15u}) {  // inside the final rounds, at their start, before them
    auto alg2 = make_scsp(20, 10);
    tf::backend be2(6, 0, 6);
    auto o2 = options(30, other, dir);
    o2.train_rounds = 20;
    o2.checkpoint_every = 5;
    o2.resume_round = from == 25 ? 0 : from;
    if (from == 15) {  // only the latest two and the resumed round are kept: run the first part again
      auto alg1 = make_scsp(20, 10);
      tf::backend be1(6, 0, 6);
      auto o1 = options(30, temp_dir("scsp-15"));
      o1.train_rounds = 20;
      o1.checkpoint_every = 15;
      sp_trainer(group, settings(0.02), o1, be1.hooks()).run(alg1);
      o2.resume_dir = o1.checkpoint_dir;
      o2.resume_round = 15;
    }
    const auto b = sp_trainer(group, settings(0.02), o2, be2.hooks()).run(alg2);
    INFO("resumed from round " << from);
    CHECK(b.resumed_at == from);
    check_same_result(b, a);
    CHECK(models_of(alg2) == models_of(alg));
    if (from == 15) std::filesystem::remove_all(o2.resume_dir);
  }
  std::filesystem::remove_all(dir);
  std::filesystem::remove_all(other);
}

TEST_CASE("trainer: a run that resumed from round R keeps R's files, and resume_round repeats it", "[train]") {
  const std::string dir = temp_dir("again"), ref = temp_dir("again-ref");
  sp::single_process group(6);
  auto o = options(40, dir);
  o.checkpoint_every = 5;
  // the uninterrupted run
  auto alg_ref = make_sp();
  tf::backend be_ref(6, 0, 6);
  auto oref = o;
  oref.checkpoint_dir = ref;
  const auto full = sp_trainer(group, settings(0.02), oref, be_ref.hooks()).run(alg_ref);
  // a run that dies after its checkpoint of round 20
  {
    auto alg = make_sp();
    tf::backend be(6, 0, 6);
    sp::trainer_callbacks cb;
    cb.progress = [](const sp::round_status& s) {
      if (s.round == 22) throw std::runtime_error("killed");
    };
    CHECK_THROWS_WITH(sp_trainer(group, settings(0.02), o, be.hooks(), cb).run(alg), "killed");
  }
  const sp::checkpoint_directory ck(dir);
  REQUIRE(ck.read_manifest().round == 20);
  // resume it in the same directory: the run goes on to 35, round 20 stays, 25 is removed
  auto resume_in_place = [&](std::uint32_t round) {
    auto alg = make_sp();
    tf::backend be(6, 0, 6);
    auto o2 = options(40, {}, dir);
    o2.checkpoint_every = 5;
    o2.resume_round = round;
    const auto r = sp_trainer(group, settings(0.02), o2, be.hooks()).run(alg);
    CHECK(models_of(alg) == models_of(alg_ref));
    CHECK(be.velocity == be_ref.velocity);
    return r;
  };
  const auto first = resume_in_place(0);
  CHECK(first.resumed_at == 20);
  check_same_result(first, full);
  REQUIRE(ck.read_manifest().round == 35);
  CHECK(std::filesystem::exists(ck.rank_file(20, 0)));
  CHECK_FALSE(std::filesystem::exists(ck.rank_file(25, 0)));
  CHECK(std::filesystem::exists(ck.rank_file(30, 0)));
  CHECK(std::filesystem::exists(ck.rank_file(35, 0)));
  // the same resume again, from the kept round: the same result, and round 20 is still kept
  const auto second = resume_in_place(20);
  CHECK(second.resumed_at == 20);
  check_same_result(second, full);
  CHECK(std::filesystem::exists(ck.rank_file(20, 0)));
  CHECK(resume_in_place(0).resumed_at == 35);  // 0: the manifest's round, as before
  // a removed round, a round newer than the manifest's, and resume_round without a directory
  auto refused = [&](std::uint32_t round) {
    auto alg = make_sp();
    tf::backend be(6, 0, 6);
    auto o2 = options(40, {}, dir);
    o2.resume_round = round;
    sp_trainer tr(group, settings(0.02), o2, be.hooks());
    const auto before = models_of(alg);
    const auto why = library_error([&] { tr.run(alg); });
    CHECK(models_of(alg) == before);
    return why;
  };
  CHECK_THAT(refused(25), Catch::Contains("cannot open " + ck.rank_file(25, 0) + ": no such file (the checkpoint of round 25 is not there"));
  CHECK_THAT(refused(39), Catch::Contains("round 39 was asked for, but the directory's last complete checkpoint is round 35"));
  std::filesystem::remove(ck.rank_file(35, 0));  // the manifest's round, one file lost
  CHECK_THAT(refused(0), Catch::Contains("cannot open " + ck.rank_file(35, 0) + ": no such file (the checkpoint of round 35 is not there)"));
  auto bad = options(40);
  bad.resume_round = 20;
  tf::backend be(6, 0, 6);
  CHECK_THROWS_WITH(sp_trainer(group, settings(0.02), bad, be.hooks()), Catch::Contains("resume_round 20 needs a resume_dir"));
  std::filesystem::remove_all(dir);
  std::filesystem::remove_all(ref);
}

TEST_CASE("trainer: started() comes after the checkpoint is applied, and never after a failed resume", "[train]") {
  const std::string dir = temp_dir("started");
  sp::single_process group(6);
  std::vector<std::string> events;
  std::vector<std::vector<double>> velocity_at_start;
  tf::backend be(6, 0, 6);
  sp::trainer_callbacks cb;
  cb.resumed = [&](std::uint32_t t) { events.push_back("resumed " + std::to_string(t)); };
  cb.started = [&](std::uint32_t t) {
    events.push_back("started " + std::to_string(t));
    velocity_at_start = be.velocity;
  };
  cb.progress = [&](const sp::round_status& s) {
    if (events.back().rfind("round", 0) != 0) events.push_back("round " + std::to_string(s.round));
  };
  auto alg = make_sp();
  sp_trainer(group, settings(0.02), options(12, dir), be.hooks(), cb).run(alg);
  CHECK(events == std::vector<std::string>{"started 0", "round 1"});
  CHECK(velocity_at_start == tf::backend(6, 0, 6).velocity);

  // the checkpoint of round 10 holds velocities the test reads on its own
  const sp::checkpoint_directory ck(dir);
  const auto file = sp::read_file_bytes(ck.rank_file(10, 0));
  REQUIRE(std::memcmp(file.data() + 20, "TRN2", 4) == 0);
  events.clear();
  auto alg2 = make_sp();
  tf::backend fresh(6, 0, 6);
  be.velocity = fresh.velocity;
  sp_trainer(group, settings(0.02), options(12, {}, dir), be.hooks(), cb).run(alg2);
  CHECK(events == std::vector<std::string>{"resumed 10", "started 10", "round 11"});
  CHECK(velocity_at_start != fresh.velocity);  // restored before started()
  CHECK(models_of(alg2) == models_of(alg));

  // a resume refused (other settings): neither resumed() nor started() is called
  events.clear();
  auto alg3 = make_sp();
  CHECK_THROWS_AS(sp_trainer(group, settings(0.03), options(12, {}, dir), be.hooks(), cb).run(alg3), sp::checkpoint_error);
  CHECK(events.empty());
  // a checkpoint of the previous layout (trainer section TRNR) is refused by name, not misread
  sp::checkpoint_writer w;
  w.section("TRNR");
  w.str(settings(0.02).text());
  w.u32(10);
  sp::write_file_atomic(ck.rank_file(10, 0), w.finish());
  CHECK_THROWS_WITH(sp_trainer(group, settings(0.02), options(12, {}, dir), be.hooks(), cb).run(alg3),
                    Catch::Contains("round-10.rank-0.ckpt was written by an older sparsepush (trainer section 'TRNR'"));
  CHECK(events.empty());
  std::filesystem::remove_all(dir);
}

TEST_CASE("trainer: a second run on a checkpoint directory in use is refused", "[train]") {
  const std::string dir = temp_dir("lock"), other = temp_dir("lock-other");
  sp::single_process group(6);
  std::filesystem::create_directories(dir);
  // another process's lock, as flock(2) sees it: a second open file description of DIR/lock
  const std::string lock_path = dir + "/lock";
  const int fd = ::open(lock_path.c_str(), O_RDWR | O_CREAT, 0644);
  REQUIRE(fd >= 0);
  REQUIRE(::flock(fd, LOCK_EX | LOCK_NB) == 0);
  REQUIRE(::write(fd, "4242\n", 5) == 5);
  auto alg = make_sp();
  const auto before = models_of(alg);
  tf::backend be(6, 0, 6);
  sp::trainer_callbacks cb;
  bool started = false;
  cb.started = [&](std::uint32_t) { started = true; };
  CHECK_THROWS_WITH(sp_trainer(group, settings(0.02), options(12, dir), be.hooks(), cb).run(alg),
                    Catch::Contains("checkpoint directory " + dir + " is in use by process 4242"));
  CHECK_FALSE(started);
  CHECK(models_of(alg) == before);
  // a run resuming from a directory in use is refused too, even when it checkpoints elsewhere
  CHECK_THROWS_WITH(sp_trainer(group, settings(0.02), options(12, other, dir), be.hooks()).run(alg),
                    Catch::Contains("checkpoint directory " + dir + " is in use by process 4242"));
  ::close(fd);  // the other process ends: its lock goes with it

  // while a run goes on, its directory is locked (by this process's PID); after it, it is free
  int tried = 0, refused = 0;
  cb.progress = [&](const sp::round_status&) {
    const int probe = ::open(lock_path.c_str(), O_RDWR);
    ++tried;
    if (probe >= 0 && ::flock(probe, LOCK_EX | LOCK_NB) != 0 && errno == EWOULDBLOCK) ++refused;
    if (probe >= 0) ::close(probe);
  };
  sp_trainer(group, settings(0.02), options(12, dir), be.hooks(), cb).run(alg);
  CHECK(tried == 12);
  CHECK(refused == 12);
  {
    const auto held = sp::checkpoint_directory(dir).lock();  // free again
    CHECK(held.held());
    CHECK_THROWS_WITH(sp::checkpoint_directory(dir).lock(),
                      Catch::Contains("is in use by process " + std::to_string(::getpid())));
  }
  CHECK(sp::checkpoint_directory(dir).lock().held());  // released with its object
  std::filesystem::remove_all(dir);
  std::filesystem::remove_all(other);
}

TEST_CASE("trainer: resume never creates its directory, and file-system errors name the path", "[train]") {
  sp::single_process group(6);
  const std::string base = temp_dir("paths");
  std::filesystem::create_directories(base);
  auto run_with = [&](const std::string& ckpt, const std::string& resume) {
    auto alg = make_sp();
    tf::backend be(6, 0, 6);
    bool started = false;
    sp::trainer_callbacks cb;
    cb.started = [&](std::uint32_t) { started = true; };
    const auto why = library_error([&] { sp_trainer(group, settings(0.02), options(12, ckpt, resume), be.hooks(), cb).run(alg); });
    CHECK_FALSE(started);
    return why;
  };
  // a missing resume directory is an error and stays missing
  const std::string missing = base + "/missing";
  CHECK_THAT(run_with({}, missing), Catch::Contains("resume " + missing + ": no such directory"));
  CHECK_FALSE(std::filesystem::exists(missing));
  CHECK_THAT(run_with(base + "/elsewhere", missing), Catch::Contains("resume " + missing + ": no such directory"));
  CHECK_FALSE(std::filesystem::exists(missing));
  // a file where the directory is meant
  const std::string file = base + "/file";
  std::ofstream(file) << "x";
  CHECK_THAT(run_with({}, file), Catch::Contains("resume " + file + " is a file, not a directory"));
  CHECK_THAT(run_with(file, {}), Catch::Contains(file) && Catch::Contains("not a directory"));
  // a 300-character name (longer than NAME_MAX) and a symbolic-link loop: the library's errors
  const std::string longname = base + "/" + std::string(300, 'a');
  CHECK_THAT(run_with(longname, {}), Catch::Contains(longname) && Catch::Contains("File name too long"));
  CHECK_THAT(run_with({}, longname), Catch::Contains("resume " + longname) && Catch::Contains("File name too long"));
  CHECK_FALSE(sp::checkpoint_directory(longname).has_manifest());
  const std::string loop = base + "/loop";
  std::filesystem::create_symlink("loop", loop);
  CHECK_THAT(run_with({}, loop), Catch::Contains("resume " + loop) && Catch::Contains("symbolic links"));
  CHECK_THAT(run_with(loop, {}), Catch::Contains(loop) && Catch::Contains("symbolic links"));
  CHECK_THAT(run_with(loop + "/sub", {}), Catch::Contains(loop + "/sub"));
  std::filesystem::remove_all(base);
}

TEST_CASE("trainer: a resume with a changed setting reports the setting, not the round it holds", "[train]") {
  // another final tolerance gives SCSP another number of final rounds: the run is shorter than
  // the checkpoint's round, and the changed setting is what the user must read
  const std::string dir = temp_dir("order");
  sp::single_process group(6);
  auto alg = make_sp();
  tf::backend be(6, 0, 6);
  sp_trainer(group, settings(0.02, 1e-3), options(30, dir), be.hooks()).run(alg);
  REQUIRE(sp::checkpoint_directory(dir).read_manifest().round == 20);
  auto alg2 = make_sp();
  const auto why = library_error([&] { sp_trainer(group, settings(0.02, 1e-1), options(15, {}, dir), be.hooks()).run(alg2); });
  CHECK_THAT(why, Catch::Contains("other settings: final_tolerance=0.001 (now 0.1)"));
  CHECK_THAT(why, !Catch::Contains("outside"));
  std::filesystem::remove_all(dir);
}

TEST_CASE("checkpoint_directory: every rank may prepare the same directory at once", "[train]") {
  // MPI ranks probe the shared directory together (3 ranks failed at once with "cannot write in
  // the checkpoint directory: File exists" when every probe had one name): each probe has a name
  // of its own and leaves the others' alone
  const std::string dir = temp_dir("probe");
  std::filesystem::create_directories(dir);
  const std::string in_flight = dir + "/.write-probe";  // another rank's probe, under the old name
  std::ofstream(in_flight) << "rank 1";
  sp::checkpoint_directory(dir).prepare();
  CHECK(std::filesystem::exists(in_flight));
  std::filesystem::remove(in_flight);
  std::vector<std::string> errors(6);
  std::vector<std::thread> ranks;
  for (std::size_t k = 0; k < errors.size(); ++k)
    ranks.emplace_back([&, k] {
      for (int i = 0; i < 300 && errors[k].empty(); ++i)
        errors[k] = library_error([&] { sp::checkpoint_directory(dir).prepare(); });
    });
  for (auto& t : ranks) t.join();
  for (const auto& e : errors) CHECK(e.empty());
  CHECK(std::filesystem::is_empty(dir));  // no probe left behind
  std::filesystem::remove_all(dir);
}

namespace {
/// The waiting policies the trainer runs beside lockstep, each with its in-process delay model.
struct deferred_case {
  const char* name;
  sp::wait_policy policy;
  std::uint32_t max_delay;
};
std::vector<deferred_case> deferred_cases() {
  return {{"overlap", sp::wait_policy::overlap(), 0},
          {"staleness 2, max_delay 2", sp::wait_policy::staleness(2), 2},
          {"asynchronous, max_delay 3", sp::wait_policy::asynchronous(), 3}};
}

sp_alg make_sp_policy(sp::wait_policy policy, std::uint32_t max_delay) {
  std::vector<std::vector<double>> x0;
  for (std::uint32_t i = 0; i < 6; ++i) x0.push_back(tf::initial(i));
  return sp_alg(std::move(x0), sp::parse_schedule("time-varying-ring", 6),
                sp::sparse_push_phases(sp::parse_compressor("top-k:0.25"), 0.2),
                sp::sparse_push_options{.threads = 2, .seed = 7, .network = {.seed = 3, .max_delay = max_delay},
                                        .policy = policy});
}

sp::run_settings policy_settings(const sp::wait_policy& p, std::uint32_t max_delay) {
  auto s = settings(0.02);
  s.add("policy", sp::to_string(p)).add("max_delay", max_delay);
  return s;
}
}  // namespace

TEST_CASE("trainer: overlap, staleness and asynchronous runs resume from a middle checkpoint to the uninterrupted bits",
          "[train][async]") {
  // 30 rounds, evaluations every 5, checkpoints every 4 (their drains fall between the
  // evaluations'); a run killed after round 14 resumes from its checkpoint of round 12. In one
  // process the seeded delay model and the drains at the same rounds make even the asynchronous
  // run bit-reproducible.
  sp::single_process group(6);
  for (const auto& c : deferred_cases()) {
    INFO(c.name);
    const std::string dir = temp_dir("policy-resume"), ref_dir = temp_dir("policy-resume-ref");
    auto o = options(30, ref_dir);
    o.checkpoint_every = 4;
    auto alg_ref = make_sp_policy(c.policy, c.max_delay);
    tf::backend be_ref(6, 0, 6);
    const auto full = sp_trainer(group, policy_settings(c.policy, c.max_delay), o, be_ref.hooks()).run(alg_ref);
    REQUIRE_FALSE(full.diverged);
    REQUIRE_FALSE(alg_ref.in_flight());  // drained at the end
    // the mass, every node's steps and the staleness actually mixed
    REQUIRE(full.weight_mass.has_value());
    CHECK(std::abs(*full.weight_mass - 6.0) < 1e-9);
    CHECK(full.steps_per_node == std::vector<std::uint64_t>(6, 30));
    if (c.policy.kind == sp::wait_kind::overlap) CHECK(full.max_staleness == 1);
    else CHECK(full.max_staleness > 0);
    CHECK(full.max_staleness <= std::max<std::uint32_t>(c.max_delay, 1));
    CHECK(full.wait_seconds_per_rank.size() == 1);
    // the policy changes the run: its bits are not lockstep's
    auto alg_lock = make_sp();
    tf::backend be_lock(6, 0, 6);
    const auto lock = sp_trainer(group, settings(0.02), options(30), be_lock.hooks()).run(alg_lock);
    CHECK_FALSE(same_bits(lock.eval.averaged_model_accuracy, full.eval.averaged_model_accuracy));

    {  // a run that dies after its checkpoint of round 12
      auto alg = make_sp_policy(c.policy, c.max_delay);
      tf::backend be(6, 0, 6);
      auto o1 = options(30, dir);
      o1.checkpoint_every = 4;
      sp::trainer_callbacks cb;
      cb.progress = [](const sp::round_status& s) {
        if (s.round == 14) throw std::runtime_error("killed");
      };
      CHECK_THROWS_WITH(sp_trainer(group, policy_settings(c.policy, c.max_delay), o1, be.hooks(), cb).run(alg), "killed");
    }
    REQUIRE(sp::checkpoint_directory(dir).read_manifest().round == 12);
    auto alg = make_sp_policy(c.policy, c.max_delay);
    tf::backend be(6, 0, 6);
    auto o2 = options(30, {}, dir);
    o2.checkpoint_every = 4;
    const auto b = sp_trainer(group, policy_settings(c.policy, c.max_delay), o2, be.hooks()).run(alg);
    CHECK(b.resumed_at == 12);
    check_same_result(b, full);
    CHECK(b.steps_per_node == full.steps_per_node);
    CHECK(models_of(alg) == models_of(alg_ref));
    CHECK(be.velocity == be_ref.velocity);
    // a resume under another policy is refused by the settings
    auto alg_other = make_sp();
    tf::backend be_other(6, 0, 6);
    CHECK_THAT(library_error([&] { sp_trainer(group, settings(0.02), options(30, {}, dir), be_other.hooks()).run(alg_other); }),
               Catch::Contains("other settings"));
    std::filesystem::remove_all(dir);
    std::filesystem::remove_all(ref_dir);
  }
}

TEST_CASE("trainer: staleness 0 gives the default options' result bit for bit", "[train][async]") {
  sp::single_process group(6);
  const std::string da = temp_dir("staleness0-a"), db = temp_dir("staleness0-b");
  auto alg_a = make_sp();
  auto alg_b = make_sp_policy(sp::wait_policy::staleness(0), 0);
  REQUIRE(alg_b.policy().lockstep());
  tf::backend be_a(6, 0, 6), be_b(6, 0, 6);
  const auto a = sp_trainer(group, settings(0.02), options(30, da), be_a.hooks()).run(alg_a);
  const auto b = sp_trainer(group, settings(0.02), options(30, db), be_b.hooks()).run(alg_b);
  check_same_result(b, a);
  CHECK(b.steps_per_node == a.steps_per_node);
  CHECK(a.steps_per_node == std::vector<std::uint64_t>(6, 30));
  CHECK(a.max_staleness == 0);
  CHECK(b.max_staleness == 0);
  CHECK(models_of(alg_b) == models_of(alg_a));
  // a lockstep checkpoint has no ASYN section: the run resumes from either directory alike
  auto alg_c = make_sp_policy(sp::wait_policy::staleness(0), 0);
  tf::backend be_c(6, 0, 6);
  const auto c = sp_trainer(group, settings(0.02), options(30, {}, da), be_c.hooks()).run(alg_c);
  CHECK(c.resumed_at == 20);
  check_same_result(c, a);
  CHECK(c.steps_per_node == a.steps_per_node);
  std::filesystem::remove_all(da);
  std::filesystem::remove_all(db);
}
