// Tests of sparsepush/train/: the settings fingerprint compares every bit; the trainer resumes a
// checkpointed run to the uninterrupted run's bits and refuses other settings; a lossy run keeps
// the mass; the metrics equal a dense computation over every node; the guard stops a diverging
// run; CHOCO and centralized training through the trainer equal their oracle rounds bit for bit.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>

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
// The README's trainer snippet, compiled: a backend of free functions over momentum buffers.
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
