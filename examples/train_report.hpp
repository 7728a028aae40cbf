// examples/train_report.hpp: sparsepush-train's settings (the options, and the fingerprint a
// checkpoint and the MPI ranks must agree on) and what it writes: the CSV log (kept up to the
// checkpoint on resume), the JSON summary and the gnuplot plot. The training itself is the
// library's (sparsepush/train/trainer.hpp); this file only formats its results.
#pragma once

#include <nlohmann/json.hpp>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include <sparsepush/data/idx.hpp>
#include <sparsepush/nn/model.hpp>
#include <sparsepush/gossip/policy.hpp>
#include <sparsepush/train/settings.hpp>
#include <sparsepush/train/trainer.hpp>

#include "run_program.hpp"
#include "train_outputs.hpp"

/// --straggler NODES:FACTOR: nodes first..last (inclusive) take FACTOR times as long per local
/// step (they sleep (FACTOR - 1) x the measured compute time of each step).
struct straggler {
  std::uint32_t first = 0, last = 0;
  double factor = 1;
};

/// The command line of sparsepush-train (defaults as --help prints them).
struct train_config {
  std::size_t nodes = 16;
  std::string schedule;  // default depends on the algorithm
  std::string algorithm = "scsp";
  std::string compressor = "top-k:0.01";
  std::string final_rounds = "auto";  // a count, or auto (from the schedule and final_tolerance)
  std::string final_compressor = "identity";
  double final_eta = -1;  // default depends on the final compressor
  double final_tolerance = 1e-3;
  double eta = -1;  // default depends on the compressor
  double skew = 0.8;
  double dirichlet = 0;  // > 0: Dirichlet(alpha) partition instead of skew
  std::string model = "cnn";
  std::string precision = "fp32";  // fp32 or int8 (8-bit simulated training)
  unsigned bits = 0;               // --bits: 4..16, 0 or 32 = full precision
  double epochs = 5;
  std::size_t batch = 32;
  double lr = 0.02;
  std::string lr_shape = "step";  // step (x0.1 at 3/4), cosine or constant
  std::uint32_t warmup = 0;
  bool nesterov = false, per_layer = false;
  double momentum = 0.9, weight_decay = 1e-4;
  std::uint64_t seed = 1;
  std::size_t threads = 2;
  std::uint32_t eval_every = 0;  // 0: about 10 evaluations a run
  std::size_t eval_samples = 2000;
  std::size_t final_eval_samples = 0;  // 0: the whole test set
  std::string log, summary, plot;
  std::string data = sparsepush::default_fashion_mnist_dir();
  double consensus_step = 0.5;  // CHOCO gamma_c
  std::string transport = "inprocess";
  double mpi_timeout = 60;             // seconds
  double drop_probability = 0;         // injected loss of each envelope
  std::string loss_recovery = "ack";   // none (plain push-sum) or ack (the sender keeps lost shares)
  std::string checkpoint, resume;      // directories
  std::uint32_t resume_round = 0;      // 0: the latest checkpoint of --resume
  std::uint32_t checkpoint_every = 0;  // 0: at every evaluation
  std::vector<std::string> straggler_specs;  // --straggler, as given
  std::vector<straggler> stragglers;         // the same, checked against --nodes
  std::string staleness = "0";               // --staleness 0 (lockstep), N or inf (asynchronous)
  bool overlap = false;                      // --overlap
  sparsepush::wait_policy policy{};          // the two above, checked
  std::int64_t max_delay = -1;               // --max-delay; -1: the default (see check())
  double jitter = 1;                         // --jitter F: each local step x U[1, F] (1: none)
  std::string eval_reduce = "ordered";       // --eval-reduce: ordered or allreduce (evaluate.hpp)
};

/// Everything the nodes compute with: what every MPI rank must agree on and what a checkpoint
/// must have been written with to be resumed (threads, outputs and --straggler excluded: they
/// change no number, so a resumed run may add or drop a straggler).
sparsepush::run_settings settings_of(const train_config& c, std::size_t n, std::size_t d) {
  sparsepush::run_settings s;
  s.add("nodes", n).add("dim", d).add("schedule", c.schedule).add("algorithm", c.algorithm);
  // specs as settings_spec writes them: a qsgd stream is part of the numbers (a 0.3.3 checkpoint of
  // "qsgd:16", philox10's bits, resumes under "qsgd:16:philox10" and is refused under "qsgd:16")
  s.add("compressor", sparsepush::settings_spec(c.compressor)).add("eta", c.eta).add("final", c.final_rounds);
  s.add("final_compressor", sparsepush::settings_spec(c.final_compressor)).add("final_eta", c.final_eta).add("final_tolerance", c.final_tolerance);
  s.add("seed", c.seed).add("model", c.model).add("epochs", c.epochs).add("batch", c.batch).add("lr", c.lr);
  s.add("lr_schedule", c.lr_shape).add("warmup", c.warmup).add("skew", c.skew).add("dirichlet", c.dirichlet);
  s.add("momentum", c.momentum).add("nesterov", c.nesterov).add("weight_decay", c.weight_decay);
  s.add("per_layer", c.per_layer).add("consensus_step", c.consensus_step).add("data", c.data);
  s.add("drop", c.drop_probability).add("recovery", c.loss_recovery).add("eval_every", c.eval_every);
  s.add("eval_samples", c.eval_samples);
  if (c.eval_reduce != "ordered") s.add("eval_reduce", c.eval_reduce);  // the ranks' collectives must match
  if (c.bits) s.add("bits", c.bits);  // full precision adds nothing
  // lockstep adds nothing (its fingerprint is the one of earlier versions); a deferred policy and
  // the in-process delay model change the numbers
  if (!c.policy.lockstep()) s.add("policy", sparsepush::to_string(c.policy));
  if (c.max_delay > 0) s.add("max_delay", c.max_delay);
  return s;
}

/// The CSV log: one row per evaluation; a resumed run keeps the rows up to its checkpoint. Every
/// write is checked: the first failure is kept (error()) and the log given up, the run goes on.
class train_log {
 public:
  /// Start the log (a resumed run: its rows up to resume_round, written to PATH.part and renamed
  /// over PATH only once complete, so a failure leaves the old log whole). False: see error().
  bool open(const std::string& path, std::uint32_t resume_round) {
    std::vector<std::string> kept;
    if (resume_round > 0) {
      std::ifstream old(path);
      std::string line;
      for (bool first = true; std::getline(old, line); first = false)
        if (!first && std::strtoull(line.c_str(), nullptr, 10) <= resume_round) kept.push_back(line);
    }
    const std::string part = resume_round > 0 ? path + ".part" : path;
    if (!f_.open(part, "the log file", resume_round > 0)) return false;
    f_.write("round,epoch,phase,loss,avg_test_accuracy,averaged_model_test_accuracy,param_divergence,bytes_sent,mb_sent,"
             "comm_ratio,wall_seconds\n");
    for (const auto& line : kept) f_.write(line + '\n');
    f_.flush();
    std::error_code ec;
    if (resume_round > 0 && !f_.is_open()) std::filesystem::remove(part, ec);  // the old log stays whole
    if (resume_round > 0 && f_.is_open()) {
      std::filesystem::rename(part, path, ec);
      if (ec) {
        f_.close();
        std::filesystem::remove(part, ec);
        error_ = "cannot write the log file " + path + ": cannot rename " + part + " over it";
        return false;
      }
    }
    return f_.is_open();
  }
  bool is_open() const { return f_.is_open(); }
  void row(const sparsepush::round_status& s, double epoch, const char* phase) {
    std::ostringstream o;
    o << s.round << ',' << epoch << ',' << phase << ',' << s.loss << ',' << s.eval.avg_node_accuracy << ','
      << s.eval.averaged_model_accuracy << ',' << s.report.parameter_divergence << ',' << s.report.bytes_sent << ','
      << static_cast<double>(s.report.bytes_sent) / 1e6 << ',' << s.report.comm_ratio << ',' << s.wall_seconds << '\n';
    f_.write(o.str());
  }
  void flush() { f_.flush(); }
  /// Close; false when any write failed (error() names the file and the cause).
  bool close() { return f_.close() && error_.empty(); }
  std::string error() const { return error_.empty() ? f_.error() : error_; }

 private:
  train_outputs::output_file f_;
  std::string error_;
};

/// Every node's local steps as {"min", "max", "histogram": [{"steps": s, "nodes": k}, ...]}
/// (ascending steps), or null when there are none.
inline nlohmann::json steps_json(const std::vector<std::uint64_t>& steps) {
  if (steps.empty()) return nullptr;
  std::map<std::uint64_t, std::size_t> count;
  for (const auto v : steps) ++count[v];
  nlohmann::json hist = nlohmann::json::array();
  for (const auto& [v, k] : count) hist.push_back({{"steps", v}, {"nodes", k}});
  return {{"min", count.begin()->first}, {"max", count.rbegin()->first}, {"histogram", hist}};
}

/// The JSON summary of a finished run.
inline nlohmann::json summary_json(const train_config& c, const sparsepush::train_result& r,
                                   const sparsepush::nn::model& net, std::size_t n, std::uint32_t rounds,
                                   std::uint32_t train_rounds, std::uint32_t final_rounds,
                                   std::optional<double> final_bound, double epochs, int ranks, double wall) {
  using nlohmann::json;
  json slow = nullptr;  // --straggler: [{"nodes": [first, last], "factor": f}, ...] in the order given
  for (const straggler& s : c.stragglers) {
    if (slow.is_null()) slow = json::array();
    slow.push_back({{"nodes", {s.first, s.last}}, {"factor", s.factor}});
  }
  const bool scsp = c.algorithm == "scsp", graph = c.algorithm != "centralized";
  const unsigned b = c.bits ? c.bits : 32;
  const auto one = net.profile(c.batch * n, b), per = net.profile(c.batch, b);
  auto profile = [](std::size_t batch, const sparsepush::nn::device_profile& p) {
    return json{{"batch", batch}, {"parameters", p.parameters}, {"activation_bytes", p.activation_bytes},
                {"flops_per_step", p.flops}};
  };
  const json final_bytes = r.bytes_after_training ? json(*r.bytes_after_training) : json(nullptr);
  return {{"algorithm", c.algorithm},
          {"nodes", n},
          {"schedule", graph ? json(c.schedule) : json(nullptr)},  // centralized: no graph, no messages
          {"compressor", graph ? json(c.compressor) : json(nullptr)},
          {"eta", graph ? json(c.eta) : json(nullptr)},
          {"final_rounds", final_rounds},
          {"final_rounds_setting", scsp ? json(c.final_rounds) : json(nullptr)},
          {"final_compressor", scsp ? json(c.final_compressor) : json(nullptr)},
          {"final_eta", scsp ? json(c.final_eta) : json(nullptr)},
          {"final_rounds_bound", final_bound ? json(*final_bound) : json(nullptr)},
          {"bytes_final_phase", scsp ? final_bytes : json(nullptr)},
          {"skew", c.dirichlet > 0 ? json(nullptr) : json(c.skew)},
          {"dirichlet_alpha", c.dirichlet > 0 ? json(c.dirichlet) : json(nullptr)},
          {"model", c.model},
          {"precision", c.bits == 0 ? std::string("fp32") : c.bits == 8 ? std::string("int8") : std::to_string(c.bits) + "-bit"},
          {"bits", b},
          {"parameters", net.num_params()},
          {"rounds", rounds},
          {"epochs", epochs},
          {"avg_test_accuracy", r.eval.avg_node_accuracy},
          {"averaged_model_test_accuracy", r.eval.averaged_model_accuracy},
          {"param_divergence", r.report.parameter_divergence},
          {"first_loss", r.first_loss},
          {"loss", r.loss},
          {"bytes_sent_total", r.report.bytes_sent},
          {"bytes_per_node", r.report.bytes_sent / n},
          {"bytes_full_precision_equivalent", r.report.full_precision_bytes},
          {"comm_ratio", r.report.comm_ratio},
          {"state_bytes_per_node", r.state_bytes_per_node},
          {"drop_probability", c.drop_probability},
          {"loss_recovery", c.drop_probability > 0 ? json(c.loss_recovery) : json(nullptr)},  // acts on lost messages only
          {"messages_sent", r.messages_sent},
          {"messages_dropped", r.messages_dropped},
          {"weight_mass", r.weight_mass ? json(*r.weight_mass) : json(nullptr)},
          {"transport", c.transport},
          {"ranks", ranks},
          {"straggler", slow},
          {"jitter", c.jitter > 1 ? json(c.jitter) : json(nullptr)},
          {"policy", graph ? json(sparsepush::to_string(c.policy)) : json(nullptr)},
          {"max_delay", c.max_delay > 0 ? json(c.max_delay) : json(nullptr)},
          {"steps_per_node", steps_json(r.steps_per_node)},
          {"max_staleness", r.max_staleness},
          {"wait_seconds_per_rank", r.wait_seconds_per_rank},
          {"eval_reduce", c.eval_reduce},
          {"wall_seconds", wall},
          {"train_seconds", r.train_seconds},
          {"eval_seconds", r.eval_seconds},
          {"train_images_per_second", static_cast<double>(train_rounds) * c.batch * n / r.train_seconds},
          {"device_profile",
           {{"one_device", profile(c.batch * n, one)},
            {"per_device", profile(c.batch, per)},
            {"bits", per.bits},
            {"memory_reduction", per.memory_reduction},
            {"compute_reduction", per.compute_reduction},
            {"communication_reduction", per.communication_reduction},
            {"compute_energy_reduction", per.compute_energy_reduction},
            {"compute_energy_joules_per_step", per.compute_energy_joules},
            {"compute_energy_joules_total",
             per.compute_energy_joules * static_cast<double>(train_rounds) * static_cast<double>(n)},
            {"communication_energy_joules",
             sparsepush::nn::communication_energy_joules(static_cast<double>(r.report.bytes_sent))}}}};
}

/// The plot of the log: accuracy and divergence against rounds and megabytes. The paths and the
/// title reach gnuplot as data (ARG1..ARG3 of `gnuplot -c`), never as gnuplot code, and gnuplot
/// is started without a shell: no path can run a command. gnuplot gets `limit` to finish. The
/// error (naming the file), or empty once the plot is written and not empty.
inline std::string write_plot(const train_config& c, std::size_t n, std::chrono::seconds limit = std::chrono::seconds(120)) {
  const std::string script = c.plot + ".gp";
  const std::string text =
      "# sparsepush-train plot: gnuplot -c THIS_FILE LOG.csv PLOT.png TITLE\n"
      "set terminal pngcairo size 1200,800\nset output ARG2\nset datafile separator ','\n"
      "set multiplot layout 2,2 title ARG3\n"
      "set key bottom right\nset xlabel 'round'\nset ylabel 'test accuracy'\n"
      "plot ARG1 using 1:5 skip 1 with lines title 'node average', '' using 1:6 skip 1 with lines title 'averaged model'\n"
      "set xlabel 'MB sent'\nplot ARG1 using 9:5 skip 1 with lines title 'node average', '' using 9:6 skip 1 with lines title 'averaged model'\n"
      "set logscale y\nset xlabel 'round'\nset ylabel 'parameter divergence'\nplot ARG1 using 1:7 skip 1 with lines title 'divergence'\n"
      "set xlabel 'MB sent'\nplot ARG1 using 9:7 skip 1 with lines title 'divergence'\nunset multiplot\n";
  if (auto why = train_outputs::write_whole(script, "the plot script", text); !why.empty()) return why;
  const std::string title = c.algorithm + " " + c.compressor + ", " + std::to_string(n) + " nodes, " + c.schedule;
  const int rc = run_program({"gnuplot", "-c", script, c.log, c.plot, title}, limit);
  std::error_code ec;
  const auto size = std::filesystem::file_size(c.plot, ec);
  if (rc == 0 && !ec && size > 0) return {};
  const std::string how = rc == run_program_timed_out ? "gnuplot did not finish within " + std::to_string(limit.count()) + " s"
                          : rc == -1                  ? std::string("gnuplot could not be started or was killed")
                          : rc != 0                   ? "gnuplot exited with code " + std::to_string(rc)
                                                      : std::string("gnuplot wrote nothing there");
  return "the plot " + c.plot + " was not written: " + how + " (the plot script is " + script +
         ": gnuplot -c it with the log, the plot and a title)";
}
