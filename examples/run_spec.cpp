// run_spec: a training run as a value in your own program. Fill a sparsepush::run_spec (every
// field has sparsepush-train's default), validate it, and run it with the reference backend on
// Fashion-MNIST: the same run, the same bits and the same summary as the command line gives for
// the same options. Usage: run_spec [DATA_DIR]
#include <cstdio>
#include <string>

#include <sparsepush/train/prepare_run.hpp>
#include <sparsepush/train/reference_run.hpp>

namespace sp = sparsepush;

int main(int argc, char** argv) {
  try {
    // [readme-run-spec-begin]
    sp::run_spec spec;                 // SCSP, top-1%, 16 nodes, the CNN: sparsepush-train's defaults
    spec.nodes = 4;
    spec.model = "mlp";
    spec.epochs = 0.02;
    spec.set("final-rounds", "2");    // or by option name, as the command line gives it
    spec.set("eval-samples", "200");
    if (argc > 1) spec.data = argv[1];
    for (const auto& warning : spec.validate()) std::fprintf(stderr, "warning: %s\n", warning.c_str());
    const auto run = sp::prepare_run(spec);  // the data, the model, the plan: shards, rounds, SCSP's final rounds
    sp::single_process group(spec.nodes);
    const auto outcome = sp::run_reference(spec, run.plan, *run.data, run.model, group);
    const auto& r = outcome.result;    // or outcome.summary: the keys of --summary
    std::printf("%u rounds: averaged model %.2f%%, %zu bytes sent, checkpoint fingerprint %s\n", r.rounds_done,
                100 * r.eval.averaged_model_accuracy, r.report.bytes_sent, spec.fingerprint(run.model.num_params()).text().c_str());
    // [readme-run-spec-end]
    return outcome.exit_code();
  } catch (const sp::error& e) {  // a rule a setting broke, named: "--eta: must be in (0, 1], got 2"
    std::fprintf(stderr, "%s\n", e.what());
    return 2;
  }
}
