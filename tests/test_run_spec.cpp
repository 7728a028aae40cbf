// Tests of sparsepush/train/run_spec.hpp: every rule sparsepush-train enforces, called through the
// library; the fingerprint against the text 0.3 checkpoints hold and against every field of the
// table; the schedules' symmetry against a dense matrix; the text parser.
#include <catch2/catch.hpp>

#include <sparsepush/train/run_spec.hpp>

#include <string>
#include <utility>
#include <vector>

namespace sp = sparsepush;

namespace {

/// A spec from option/text pairs, as the command line gives them.
sp::run_spec spec_of(const std::vector<std::pair<std::string, std::string>>& opts) {
  sp::run_spec s;
  s.model = "mlp";
  for (const auto& [o, v] : opts) s.set(o, v);
  return s;
}

/// The message validate() throws for these settings ("" when they pass).
std::string refusal(const std::vector<std::pair<std::string, std::string>>& opts, int ranks = 1) {
  try {
    const auto s = spec_of(opts);
    s.validate(ranks);
  } catch (const sp::error& e) {  // config_error, or checkpoint_error for a resume directory
    return e.what();
  }
  return {};
}

}  // namespace

TEST_CASE("run_spec: every rule of sparsepush-train, through the library", "[train][run_spec]") {
  const std::vector<std::pair<std::vector<std::pair<std::string, std::string>>, std::string>> cases = {
      {{{"nodes", "1"}}, "--nodes must be at least 2"},
      {{{"nodes", "5000"}}, "--nodes: must be in [1, 4096], got 5000"},
      {{{"mpi-timeout", "0.0004"}}, "--mpi-timeout: must be in [0.001, 2147483], got 0.0004"},
      {{{"eta", "2"}}, "--eta: must be in (0, 1], got 2"},
      {{{"eta", "0"}}, "--eta: must be in (0, 1], got 0"},
      {{{"jitter", "0.5"}}, "--jitter: must be in [1, 1000], got 0.5"},
      {{{"epochs", "-1"}}, "--epochs: must be > 0, got -1"},
      {{{"algorithm", "adam"}}, "--algorithm: adam not in {sp,scsp,sgp,dpsgd,deepsqueeze,choco,choco-push,centralized}"},
      {{{"eval-reduce", "sum"}}, "--eval-reduce: sum not in {ordered,allreduce}"},
      {{{"momentum-kind", "global"}}, "--momentum-kind: global not in {local,quasi-global}"},
      {{{"algorithm", "choco-push"}, {"momentum-kind", "quasi-global"}}, "--momentum-kind quasi-global: --algorithm choco-push compresses its messages"},
      {{{"algorithm", "sp"}, {"momentum-kind", "quasi-global"}}, "it diverged for sp and choco-push top-1% (docs/results/consensus.md); --algorithm sgp, dpsgd or centralized take it"},
      {{{"algorithm", "sgp"}, {"momentum-kind", "quasi-global"}, {"local-steps", "4"}}, "--momentum-kind quasi-global: the buffer follows a node's change over a round of one local step"},
      {{{"algorithm", "sgp"}, {"momentum-kind", "quasi-global"}, {"tracking", "true"}}, "--momentum-kind quasi-global: the tracker replaces"},
      {{{"algorithm", "sgp"}, {"momentum-kind", "quasi-global"}, {"staleness", "inf"}}, "--momentum-kind quasi-global: divides a round's change"},
      {{{"model", "resnet"}}, "--model: resnet not in"},
      {{{"algorithm", "centralized"}, {"schedule", "complete"}}, "--schedule: --algorithm centralized averages every node"},
      {{{"algorithm", "centralized"}, {"eta", "0.5"}}, "--eta: --algorithm centralized"},
      {{{"algorithm", "centralized"}, {"drop-probability", "0"}}, "--drop-probability: --algorithm centralized"},
      {{{"algorithm", "sgp"}, {"compressor", "top-k:0.1"}}, "--compressor: --algorithm sgp sends whole models"},
      {{{"algorithm", "dpsgd"}, {"compressor", "identity"}}, "--compressor: --algorithm dpsgd sends whole models"},
      {{{"algorithm", "sp"}, {"consensus-step", "0.3"}}, "--consensus-step: --algorithm sp has no consensus step"},
      {{{"algorithm", "choco"}, {"per-layer", "true"}}, "--per-layer: --algorithm choco does not use it"},
      {{{"algorithm", "dpsgd"}, {"schedule", "directed-ring"}}, "--algorithm dpsgd needs a symmetric doubly stochastic schedule"},
      {{{"algorithm", "choco"}, {"schedule", "exponential"}}, "--algorithm choco needs a symmetric doubly stochastic schedule"},
      {{{"algorithm", "centralized"}, {"transport", "mpi"}}, "--algorithm centralized runs in one process only"},
      {{{"algorithm", "choco"}, {"drop-probability", "0.1"}}, "--drop-probability: choco needs every message delivered"},
      {{{"algorithm", "choco-push"}, {"drop-probability", "0.1"}}, "--drop-probability: choco-push needs every message delivered"},
      {{{"algorithm", "choco-push"}, {"eta", "0.1"}}, "--eta: --algorithm choco-push mixes with its consensus step"},
      {{{"algorithm", "choco-push"}, {"compressor", "qsgd:16"}}, "--compressor qsgd:16: --algorithm choco-push needs a compressor that shrinks"},
      {{{"algorithm", "scsp"}, {"tracking", "true"}}, "--tracking: --algorithm scsp does not track gradients"},
      {{{"algorithm", "choco"}, {"tracking", "true"}}, "--tracking: --algorithm choco does not track gradients"},
      {{{"algorithm", "sgp"}, {"tracking", "true"}, {"outer-lr", "0.5"}}, "--tracking: takes one local step a round"},
      {{{"algorithm", "choco-push"}, {"tracking", "true"}, {"staleness", "2"}}, "--tracking: runs lockstep rounds only"},
      {{{"plot", "x.png"}}, "--plot needs --log"},
      {{{"eval-split", "true"}, {"eval-samples", "15"}}, "--eval-split gives each of the 16 nodes its share of the 15 --eval-samples images"},
      {{{"compressor", "qsgd:16"}, {"per-layer", "true"}}, "--per-layer needs a top-k compressor, got qsgd:16"},
      {{{"algorithm", "sp"}, {"final-eta", "0.5"}}, "--final-eta sets the final rounds; --algorithm sp has none"},
      {{{"final-compressor", "top-k:0.1"}}, "--final-rounds auto counts rounds that send whole models"},
      {{{"final-rounds", "4"}, {"final-tolerance", "0.01"}}, "--final-tolerance sets the target of --final-rounds auto"},
      {{{"final-rounds", "0"}}, "--final-rounds must be auto or a count in [1, 4294967295], got 0"},
      {{{"algorithm", "sp"}, {"final-rounds", "3"}}, "--final-rounds sets the final rounds; --algorithm sp has none"},
      {{{"algorithm", "choco"}, {"final-rounds", "auto"}}, "--final-rounds sets the final rounds; --algorithm choco has none"},
      {{{"algorithm", "choco-push"}, {"final-eta", "0.5"}}, "--final-eta sets the final rounds; --algorithm choco-push runs them only when --final-rounds gives their count"},
      {{{"algorithm", "choco-push"}, {"final-rounds", "auto"}, {"tracking", "true"}}, "--final-rounds: a run with --tracking ends without final rounds"},
      {{{"algorithm", "choco-push"}, {"final-rounds", "auto"}, {"final-compressor", "top-k:0.1"}}, "--final-rounds auto counts rounds that send whole models"},
      {{{"algorithm", "choco-push"}, {"final-rounds", "4"}, {"final-compressor", "qsgd:16"}}, "shrinks what it leaves out"},
      {{{"checkpoint-every", "5"}}, "--checkpoint-every needs --checkpoint DIR"},
      {{{"resume-round", "5"}}, "--resume-round needs --resume DIR"},
      {{{"resume", "/nonexistent/dir"}}, "--resume"},
      {{{"overlap", "true"}, {"staleness", "3"}}, "--overlap and --staleness 3 are two waiting policies: give one"},
      {{{"algorithm", "choco"}, {"overlap", "true"}}, "--algorithm choco runs lockstep rounds only"},
      {{{"algorithm", "centralized"}, {"staleness", "inf"}}, "--algorithm centralized sends no messages: it has no waiting policy (drop --staleness inf)"},
      {{{"staleness", "x"}}, "staleness 'x' is not 0, a round count or inf"},
      {{{"staleness", "65536"}}, "staleness bound 65536 is too large"},
      {{{"staleness", "2"}, {"max-delay", "3"}}, "--max-delay 3 exceeds --staleness 2"},
      {{{"max-delay", "1"}}, "lockstep rounds have none"},
      {{{"overlap", "true"}, {"max-delay", "1"}}, "--overlap mixes exactly the previous round whatever the delays"},
      {{{"staleness", "2"}, {"max-delay", "1"}, {"transport", "mpi"}}, "--max-delay is the in-process delay model"},
      {{{"bits", "3"}}, "--bits 3: simulated precision must be 4 to 16 bits"},
      {{{"precision", "int8"}, {"bits", "4"}}, "--precision int8 and --bits 4 conflict"},
      {{{"skew", "0.5"}, {"dirichlet", "1"}}, "--dirichlet excludes --skew"},
      {{{"straggler", "3:1"}}, "--straggler '3:1': the factor must be in (1, 1000], got 1"},
      {{{"straggler", "99:2"}}, "--straggler '99:2': node 99 is outside the run's 16 nodes (0 to 15)"},
      {{{"straggler", "3-2:2"}}, "the range 3-2 is empty"},
      {{{"straggler", "12-15:3"}, {"straggler", "2-13:2"}}, "--straggler '12-15:3' and '2-13:2' both name node 12"},
      {{{"straggler", "x:2"}}, "--straggler 'x:2': node 'x' is not a whole number"},
      {{{"eval-reduce", "allreduce"}}, "--eval-reduce: how an evaluation sums the models over MPI ranks"},
      {{{"algorithm", "centralized"}, {"eval-reduce", "ordered"}}, "--eval-reduce: --algorithm centralized"},
      {{{"resume", ""}}, "--resume: the value is empty"},
      {{{"checkpoint", ""}}, "--checkpoint: the value is empty"},
      {{{"log", ""}}, "--log: the value is empty"},
      {{{"summary", ""}}, "--summary: the value is empty"},
      {{{"schedule", ""}}, "--schedule: the value is empty"},
      {{{"data", ""}}, "--data: the value is empty"},
      {{{"schedule", "torus:3x3"}}, "schedule"},
      {{{"compressor", "top-q"}}, "top-q"},
  };
  for (const auto& [opts, want] : cases) {
    std::string shown;
    for (const auto& [o, v] : opts) shown += " --" + o + " '" + v + "'";
    INFO(shown);
    const std::string got = refusal(opts);
    CHECK(got.find(want) != std::string::npos);
  }
  // the same settings become valid once the rule's cause is gone
  CHECK(refusal({{"algorithm", "dpsgd"}, {"schedule", "undirected-ring"}}).empty());
  CHECK(refusal({{"algorithm", "sp"}, {"staleness", "2"}, {"max-delay", "2"}}).empty());
  CHECK(refusal({{"eval-reduce", "allreduce"}, {"transport", "mpi"}}).empty());
  CHECK(refusal({{"algorithm", "choco-push"}, {"final-rounds", "auto"}, {"final-eta", "0.5"}}).empty());
  CHECK(refusal({{"algorithm", "sp"}, {"tracking", "true"}, {"transport", "mpi"}}).empty());  // a second MPI network
  CHECK(refusal({{"algorithm", "choco-push"}, {"overlap", "true"}}).empty());  // CHOCO (static copies) still refuses it
  CHECK(refusal({{"algorithm", "choco-push"}, {"staleness", "inf"}, {"max-delay", "3"}, {"final-rounds", "4"}}).empty());
  CHECK(refusal({{"algorithm", "sgp"}, {"momentum-kind", "quasi-global"}, {"nesterov", "true"}}).empty());
  CHECK(refusal({{"straggler", "3:1.0000000001"}}).empty());
  CHECK(refusal({{"transport", "mpi"}, {"nodes", "4"}}, 5).find("more ranks than nodes") != std::string::npos);
  CHECK(refusal({{"transport", "mpi"}, {"nodes", "4"}}, 4).empty());
}

TEST_CASE("run_spec: warnings for settings that change nothing", "[train][run_spec]") {
  CHECK(spec_of({{"loss-recovery", "none"}}).validate().size() == 1);
  CHECK(spec_of({}).validate().empty());
}

TEST_CASE("run_spec: the default fingerprint is the text 0.3 checkpoints were written with", "[train][run_spec]") {
  sp::run_spec s;  // sparsepush-train's defaults: SCSP top-1% on 16 nodes, the CNN
  const std::string v036 =
      "nodes=16;dim=20586;schedule=time-varying-ring;algorithm=scsp;compressor=top-k:0.01;eta=0.02;final=auto;"
      "final_compressor=identity;final_eta=1;final_tolerance=0.001;seed=1;model=cnn;epochs=5;batch=32;lr=0.02;"
      "lr_schedule=step;warmup=0;skew=0.8;dirichlet=0;momentum=0.9;nesterov=0;weight_decay=1e-04;per_layer=0;"
      "consensus_step=0.5;data=/usr/share/datasets/fashion-mnist;drop=0;recovery=ack;eval_every=0;eval_samples=2000;";
  CHECK(s.fingerprint(20586).text() == v036);
  s.set("staleness", "inf");
  s.set("precision", "int8");
  CHECK(s.fingerprint(20586).text() == v036 + "bits=8;policy=asynchronous;max_delay=4;");
}

TEST_CASE("run_spec: keys left out at their defaults are written, in 0.6.1's places, once set", "[train][run_spec]") {
  sp::run_spec s;
  for (const auto& [o, v] : std::vector<std::pair<std::string, std::string>>{
           {"local-steps", "4"}, {"outer-lr", "0.7"}, {"eval-reduce", "allreduce"}, {"eval-average-every", "10"},
           {"eval-split", "true"}, {"bits", "6"}, {"staleness", "3"}, {"max-delay", "1"}, {"target-accuracy", "0.8"}})
    s.set(o, v);
  const std::string v061 =
      "nodes=16;dim=10;schedule=time-varying-ring;algorithm=scsp;compressor=top-k:0.01;eta=0.02;final=auto;"
      "final_compressor=identity;final_eta=1;final_tolerance=0.001;seed=1;model=cnn;epochs=5;batch=32;lr=0.02;"
      "lr_schedule=step;warmup=0;skew=0.8;dirichlet=0;momentum=0.9;nesterov=0;weight_decay=1e-04;local_steps=4;"
      "outer_lr=0.7;per_layer=0;consensus_step=0.5;data=/usr/share/datasets/fashion-mnist;drop=0;recovery=ack;"
      "eval_every=0;eval_samples=2000;eval_reduce=allreduce;eval_average_every=10;eval_split=1;bits=6;policy=staleness:3;"
      "max_delay=1;";
  CHECK(s.fingerprint(10).text() == v061);
  CHECK(s.fingerprint(10, true).text().find("target_accuracy=0.8;") != std::string::npos);
  // a key left out reads as its default in a mismatch
  CHECK(sp::run_spec().fingerprint(10).diff_from(sp::run_settings::parse(v061)).find("eval_reduce=allreduce (now ordered)") !=
        std::string::npos);
}

TEST_CASE("run_spec: every field of role numbers or ranks is in the fingerprint, no other", "[train][run_spec]") {
  // a second valid value for each field, set on a spec that takes it
  const std::vector<std::pair<std::string, std::string>> other = {
      {"nodes", "8"}, {"schedule", "exponential"}, {"algorithm", "sp"}, {"compressor", "top-k:0.1"}, {"eta", "0.5"},
      {"final-rounds", "3"}, {"final-compressor", "identity+bf16"}, {"final-eta", "0.5"}, {"final-tolerance", "0.01"},
      {"seed", "7"}, {"model", "mlp"}, {"epochs", "1"}, {"batch", "16"}, {"lr", "0.1"}, {"lr-schedule", "cosine"},
      {"warmup", "3"}, {"skew", "0.5"}, {"dirichlet", "0.3"}, {"momentum", "0.5"}, {"nesterov", "true"}, {"momentum-kind", "quasi-global"},
      {"weight-decay", "0"}, {"local-steps", "4"}, {"outer-lr", "0.7"}, {"outer-momentum", "0.9"},
      {"eval-average-every", "10"}, {"eval-split", "true"}, {"target-accuracy", "0.8"},
      {"per-layer", "true"}, {"consensus-step", "0.3"}, {"tracking", "true"}, {"data", "/tmp"},
      {"drop-probability", "0.1"}, {"loss-recovery", "none"}, {"eval-every", "5"}, {"eval-samples", "100"},
      {"eval-reduce", "allreduce"}, {"precision", "int8"}, {"bits", "6"}, {"staleness", "3"}, {"overlap", "true"},
      {"max-delay", "1"}, {"straggler", "3:2"}, {"jitter", "2"}, {"final-eval-samples", "100"}, {"transport", "mpi"},
      {"checkpoint-every", "4"}, {"resume-round", "3"}, {"threads", "1"}, {"mpi-timeout", "5"}, {"checkpoint", "/tmp/c"},
      {"resume", "/tmp/r"}, {"log", "l.csv"}, {"summary", "s.json"}, {"plot", "p.png"}};
  std::size_t fields = 0;
  sp::run_spec base;
  base.staleness = "2";  // so that max-delay changes a number
  base.max_delay = 2u;   // given: the transport then changes no delay
  sp::run_spec::for_each_field(std::as_const(base), [&](const sp::field_info& f, const auto&) {
    ++fields;
    std::string value;
    for (const auto& [o, v] : other)
      if (o == f.option) value = v;
    INFO("--" << f.option);
    REQUIRE(!value.empty());  // the list above names every field of the table
    sp::run_spec s = base;
    s.set(f.keyword(), value);  // Python's keyword reaches the same field
    const bool numbers = s.fingerprint(10).text() != base.fingerprint(10).text();
    const bool ranks = s.fingerprint(10, true).text() != base.fingerprint(10, true).text();
    CHECK(numbers == (f.role == sp::field_role::numbers));
    CHECK(ranks == (f.role != sp::field_role::local));
  });
  CHECK(fields == other.size());
}

TEST_CASE("run_spec: a resume mismatch names lockstep, not an absent key", "[train][run_spec]") {
  sp::run_spec was, now;
  was.set("staleness", "inf");
  const auto old_text = sp::run_settings::parse(was.fingerprint(5).text());
  const std::string diff = now.fingerprint(5).diff_from(old_text);
  CHECK(diff.find("policy=asynchronous (now lockstep)") != std::string::npos);
  CHECK(diff.find("(absent)") == std::string::npos);
}

TEST_CASE("run_spec: the shown defaults are the values a spec at its defaults uses", "[train][run_spec]") {
  const sp::run_spec& d = sp::run_spec::defaults();
  std::vector<std::pair<std::string, std::string>> shown;
  sp::run_spec::for_each_field(d, [&](const sp::field_info& f, const auto&) {
    if (!f.shown_default.empty()) shown.emplace_back(std::string(f.option), f.shown_default);
  });
  const std::vector<std::pair<std::string, std::string>> want = {
      {"compressor", d.compressor_spec()}, {"final-rounds", "auto"}, {"final-compressor", "identity"},
      {"final-tolerance", "0.001"}, {"skew", "0.8"}, {"dirichlet", "0"}, {"momentum-kind", "local"}, {"outer-lr", "1"}, {"outer-momentum", "0"},
      {"drop-probability", "0"}, {"loss-recovery", "ack"}, {"eval-reduce", "ordered"},
      {"precision", "fp32"}, {"staleness", "0"}, {"threads", std::to_string(d.threads_value())}};
  CHECK(shown == want);
  CHECK(d.compressor_spec() == "top-k:0.01");
  CHECK(d.final_rounds_auto());
  CHECK(!d.final_rounds_count());
  CHECK(d.loss_recovery_mode() == sp::loss_recovery::acknowledged);
  CHECK(d.eval_reduce_mode() == sp::eval_reduction::ordered);
  CHECK(d.transport_mode() == sp::run_transport::inprocess);
  CHECK(!d.mpi());
  CHECK(d.info().kind == sp::algorithm_kind::scsp);
  CHECK(d.final_phase());  // SCSP always ends with final rounds; choco-push only when given them
  sp::run_spec cp;
  cp.algorithm = "choco-push";
  CHECK(!cp.final_phase());
  CHECK(!cp.final_eta_value());
  cp.final_rounds = "4";
  CHECK(cp.final_phase());
  CHECK(*cp.final_eta_value() == 1.0);  // identity's
}

TEST_CASE("run_spec: choices are enums read through their name tables", "[train][run_spec]") {
  sp::run_spec s;
  s.set("final-rounds", "12");
  CHECK(!s.final_rounds_auto());
  CHECK(*s.final_rounds_count() == 12);
  s.set("loss-recovery", "none");
  CHECK(s.loss_recovery_mode() == sp::loss_recovery::none);
  CHECK(s.loss_recovery_value() == "none");
  s.set("eval-reduce", "allreduce");
  CHECK(s.eval_reduce_mode() == sp::eval_reduction::allreduce);
  s.set("transport", "mpi");
  CHECK(s.mpi());
  s.set("precision", "int8");
  CHECK(s.precision_mode() == sp::run_precision::int8);
  CHECK(s.bits_value() == 8);
  s.set("algorithm", "choco");
  CHECK(s.info().kind == sp::algorithm_kind::choco);
  CHECK(sp::names_of(sp::run_transports) == "inprocess,mpi");
  s.set("eval-reduce", "sum");
  CHECK_THROWS_WITH(s.eval_reduce_mode(), Catch::Contains("--eval-reduce: sum not in {ordered,allreduce}"));
}

TEST_CASE("run_spec: final_rounds_of is the one count of SCSP's final rounds", "[train][run_spec]") {
  sp::run_spec s;  // 16 nodes of the time-varying ring: auto's exact count is 4
  const sp::final_rounds_plan p = sp::final_rounds_of(s, 100);
  CHECK(p.rounds == 4);
  CHECK(p.exact);
  s.set("final-rounds", "7");
  CHECK(sp::final_rounds_of(s, 100).rounds == 7);
  s.final_rounds.reset();
  s.algorithm = "sp";
  CHECK(sp::final_rounds_of(s, 100).rounds == 0);
}

TEST_CASE("run_spec: set() reads numbers whole and names the option", "[train][run_spec]") {
  sp::run_spec s;
  auto message = [&](const char* o, const char* v) {
    try {
      s.set(o, v);
    } catch (const sp::config_error& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  CHECK(message("eta", "0.02abc").find("--eta: '0.02abc' is not a number") != std::string::npos);
  CHECK(message("eta", "inf").find("--eta: must be a finite number in (0, 1], got 'inf'") != std::string::npos);
  CHECK(message("nodes", "-1").find("--nodes: '-1' is not a whole number") != std::string::npos);
  CHECK(message("warmup", "4294967296").find("is too large (at most 4294967295)") != std::string::npos);
  CHECK(message("nesterov", "yes").find("--nesterov: 'yes' is not true or false") != std::string::npos);
  CHECK(message("learning-rate", "1").find("unknown run setting 'learning-rate'") != std::string::npos);
  CHECK(message("eval_samples", "200").empty());  // underscores as Python writes them
  CHECK(s.eval_samples == 200);
  CHECK(message("eta", "+0.5").empty());
  CHECK(*s.eta == 0.5);
}

TEST_CASE("run_spec: defaults that depend on other fields", "[train][run_spec]") {
  sp::run_spec s;
  CHECK(s.schedule_spec() == "time-varying-ring");
  CHECK(s.eta_value() == 0.02);
  CHECK(*s.final_eta_value() == 1.0);
  s.algorithm = "choco";
  CHECK(s.schedule_spec() == "undirected-ring");
  CHECK(!s.final_eta_value());
  CHECK(s.consensus_step_value() == 0.5);
  s.algorithm = "choco-push";  // gamma_c from the compressor, against the table written out
  CHECK(s.schedule_spec() == "time-varying-ring");
  CHECK(s.consensus_step_value() == 0.3);
  s.compressor = "top-k:0.005";
  CHECK(s.consensus_step_value() == 0.1);
  s.compressor = "top-k:0.05";
  CHECK(s.consensus_step_value() == 0.5);
  s.compressor = "top-k:1000";
  CHECK(s.consensus_step_value() == 0.3);
  s.compressor = "top-k:0.1";
  CHECK(s.consensus_step_value() == 1.0);
  s.compressor = "top-k:0.3+int8";
  CHECK(s.consensus_step_value() == 1.0);
  s.compressor = "identity+bf16";
  CHECK(s.consensus_step_value() == 1.0);
  s.compressor = "sign";
  CHECK(s.consensus_step_value() == 0.2);
  s.compressor = "top-k:0.1+int8";  // random delays halve it; overlap (one round late exactly) does not
  s.set("staleness", "2");
  CHECK(s.consensus_step_value() == 0.5);
  s.set("staleness", "inf");
  CHECK(s.consensus_step_value() == 0.5);
  s.compressor = "top-k:0.01";
  CHECK(s.consensus_step_value() == 0.15);
  s.staleness.reset();
  s.set("overlap", "true");
  CHECK(s.consensus_step_value() == 0.3);
  s.overlap = false;
  s.set("consensus-step", "0.7");
  s.set("staleness", "2");
  CHECK(s.consensus_step_value() == 0.7);  // a given step stays
  s.consensus_step.reset();
  s.staleness.reset();
  s.compressor.reset();
  s.algorithm = "sgp";
  CHECK(s.compressor_spec() == "identity");
  CHECK(s.eta_value() == 1.0);
  s.algorithm = "sp";
  s.set("staleness", "3");
  CHECK(s.max_delay_value() == 3);
  s.set("staleness", "inf");
  CHECK(s.max_delay_value() == 4);
  s.transport = "mpi";
  CHECK(s.max_delay_value() == 0);
  s.set("straggler", "12-15:2.5");
  const auto slow = s.stragglers();
  REQUIRE(slow.size() == 1);
  CHECK((slow[0].first == 12 && slow[0].last == 15 && slow[0].factor == 2.5));
}

TEST_CASE("schedules know whether they are symmetric: against the dense matrix", "[topology][run_spec]") {
  for (const char* spec : {"directed-ring", "undirected-ring", "complete", "time-varying-ring", "alternating-ring",
                           "exponential", "exponential:2", "bidirectional-exponential", "torus:4x4", "random:2"})
    for (const std::size_t n : {std::size_t{2}, std::size_t{5}, std::size_t{16}}) {
      if ((std::string(spec) == "torus:4x4" && n != 16) || ((std::string(spec) == "exponential:2" || std::string(spec) == "random:2") && n == 2)) continue;
      const auto s = sp::parse_schedule(spec, n, 3);
      bool dense_symmetric = true;
      for (std::uint64_t t = 0; t < std::max<std::size_t>(s.period(), 3); ++t) {
        std::vector<std::vector<double>> w(n, std::vector<double>(n, 0.0));
        std::vector<sp::out_edge> out;
        for (std::uint32_t j = 0; j < n; ++j) {
          s.out_edges(t, j, out);
          for (const auto& e : out) w[e.to][j] += e.share;
        }
        for (std::size_t i = 0; i < n; ++i)
          for (std::size_t j = 0; j < n; ++j) dense_symmetric = dense_symmetric && w[i][j] == w[j][i];
      }
      INFO(spec << " on " << n << " nodes");
      if (std::string(spec) == "random:2") CHECK(!s.symmetric());  // drawn anew each round: never promised
      else CHECK(s.symmetric() == dense_symmetric);
    }
  CHECK(sp::parse_schedule("undirected-ring", 16).symmetric());
  CHECK(!sp::parse_schedule("time-varying-ring", 16).symmetric());
}
