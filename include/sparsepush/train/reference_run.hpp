// sparsepush/train/reference_run.hpp: a whole run of a run_spec with the reference backend: it
// builds the schedule, compressors, phases, waiting policy and algorithm the spec names, trains
// the nodes of this process with the library's trainer, writes the CSV log, the plot and the
// summary, and returns the summary (reference_summary: the keys of sparsepush-train --summary).
// sparsepush-train, sparsepush.train() in Python and users' programs all run it.
#pragma once

#include <chrono>
#include <cstdio>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "csv_log.hpp"
#include "plot.hpp"
#include "process_group.hpp"
#include "reference_backend.hpp"
#include "run_algorithm.hpp"
#include "summary.hpp"
#include "trainer.hpp"

namespace sparsepush {
inline namespace v0 {

/// How a reference run talks to its front end. Every member may be left empty.
struct reference_io {
  std::function<void(const std::string&)> out;   ///< a line (or a live line's update) for the user; "\n" ends lines
  std::function<void(const std::string&)> err;   ///< a warning or error line, without the trailing newline
  /// the summary as JSON text, for --summary (empty: no summary file is written)
  std::function<std::string(const summary_value&)> json;
  bool live = false;  ///< one live progress line (a terminal) instead of a line per evaluation
  std::chrono::steady_clock::time_point host_start = std::chrono::steady_clock::now();  ///< SMPI: the host's time
};

/// What a reference run ended with.
struct reference_outcome {
  train_result result;  ///< the trainer's result
  summary_value summary;                    ///< null on a diverged run (and on ranks other than 0)
  std::vector<std::string> failed_outputs;  ///< outputs that could not be written, each naming its file
  /// sparsepush-train's exit code: 0, 2 (an output failed) or 3 (diverged)
  int exit_code() const noexcept { return result.diverged ? 3 : failed_outputs.empty() ? 0 : 2; }
};

namespace detail {
/// Every node's local steps as {"min", "max", "histogram": [{"steps": s, "nodes": k}, ...]}.
inline summary_value steps_summary(const std::vector<std::uint64_t>& steps) {
  if (steps.empty()) return nullptr;
  std::map<std::uint64_t, std::size_t> count;
  for (const auto v : steps) ++count[v];
  summary_value::array hist;
  for (const auto& [v, k] : count) hist.push_back(summary_value::object{{"steps", v}, {"nodes", k}});
  return summary_value::object{{"min", count.begin()->first}, {"max", count.rbegin()->first}, {"histogram", hist}};
}
inline std::string format(const char* fmt, auto... args) {
  char buf[512];
  std::snprintf(buf, sizeof buf, fmt, args...);
  return buf;
}
/// The progress line after a round: round, epoch, loss, accuracies, megabytes and the time left
/// (`live`: a terminal's line, rewritten in place).
inline std::string progress_line(const round_status& st, std::uint32_t rounds, double epoch, bool live) {
  char loss[32] = "-";  // under MPI the mean loss is gathered at evaluations and checkpoints only
  if (st.loss_known) std::snprintf(loss, sizeof loss, "%.4f", st.loss);
  char avg[64] = "-";  // measured at the last evaluation and every --eval-average-every rounds
  if (st.eval.averaged)
    std::snprintf(avg, sizeof avg, "%.2f%%)  div %.3g", 100 * st.eval.averaged_model_accuracy,
                  st.report.parameter_divergence);
  else std::snprintf(avg, sizeof avg, "-)  div -");
  return format("%sround %u/%u  epoch %.2f  loss %s  acc %.2f%% (avg model %s  %.1f MB  ETA %.0fs%s", live ? "\r" : "",
                st.round, rounds, epoch, loss, 100 * st.eval.avg_node_accuracy, avg,
                static_cast<double>(st.bytes_now) / 1e6,
                st.wall_seconds / st.round * (rounds > st.round ? rounds - st.round : 0), live ? "   " : "\n");
}
}  // namespace detail

/// The summary of a finished run (the keys of sparsepush-train --summary).
inline summary_value reference_summary(const run_spec& s, const train_result& r, const nn::model& net,
                                       const reference_plan& p, int ranks, double wall) {
  using obj = summary_value::object;
  const std::size_t n = s.nodes;
  summary_value::array slowed;  // --straggler: [{"nodes": [first, last], "factor": f}, ...] in the order given
  for (const straggler& st : s.stragglers())
    slowed.push_back(obj{{"nodes", summary_value::array{st.first, st.last}}, {"factor", st.factor}});
  const summary_value slow = slowed.empty() ? summary_value(nullptr) : summary_value(std::move(slowed));
  const bool scsp = s.final_phase(), graph = s.info().graph, bounded = scsp && s.final_rounds_auto() && s.drop_value() == 0;
  const unsigned bits = s.bits_value(), b = bits ? bits : 32;
  const auto one = net.profile(s.batch * n, b), per = net.profile(s.batch, b);
  auto profile = [](std::size_t batch, const nn::device_profile& d) {
    return obj{{"batch", batch}, {"parameters", d.parameters}, {"activation_bytes", d.activation_bytes}, {"flops_per_step", d.flops}};
  };
  std::uint64_t steps = 0;  // every node's local steps: the images trained on, batch by batch
  for (const auto v : r.steps_per_node) steps += v;
  const bool stopped = r.target && r.target->rounds < p.train_rounds;  // the target stopped training early
  const double epochs = stopped ? p.epochs_after_steps(static_cast<double>(r.target->local_steps) / static_cast<double>(n), s.batch)
                                : p.epochs_after(p.train_rounds, s.batch);
  const summary_value none = nullptr;
  auto reached = [&](auto f) { return r.target ? summary_value(f(*r.target)) : none; };
  using hit = train_result::target_reached;
  return obj{
      {"algorithm", s.algorithm},
      {"nodes", n},
      {"schedule", graph ? summary_value(s.schedule_spec()) : none},  // centralized: no graph, no messages
      {"compressor", graph ? summary_value(s.compressor_spec()) : none},
      {"eta", graph && s.info().eta ? summary_value(s.eta_value()) : none},
      {"consensus_step", s.info().consensus_step ? summary_value(s.consensus_step_value()) : none},
      {"tracking", s.info().tracking ? summary_value(s.tracking) : none},
      {"final_rounds", p.final_rounds},
      {"final_rounds_setting", scsp ? summary_value(s.final_rounds_spec()) : none},
      {"final_compressor", scsp ? summary_value(s.final_compressor_spec()) : none},
      {"final_eta", scsp ? summary_value(*s.final_eta_value()) : none},
      {"final_rounds_bound", bounded ? summary_value(p.plan.bound) : none},
      {"bytes_final_phase", scsp && r.bytes_after_training ? summary_value(*r.bytes_after_training) : none},
      {"skew", s.dirichlet ? none : summary_value(s.skew_value())},
      {"dirichlet_alpha", s.dirichlet ? summary_value(*s.dirichlet) : none},
      {"model", s.model},
      {"precision", bits == bits_of(run_precision::fp32)   ? std::string(name_of(run_precisions, run_precision::fp32))
                : bits == bits_of(run_precision::int8) ? std::string(name_of(run_precisions, run_precision::int8))
                                                       : std::to_string(bits) + "-bit"},
      {"bits", b},
      {"parameters", net.num_params()},
      {"rounds", r.rounds_done},
      {"epochs", epochs},
      {"local_steps", s.local_steps},
      {"momentum_kind", s.momentum_kind_value()},
      {"outer_lr", s.outer_step() ? summary_value(s.outer_lr_value()) : none},
      {"outer_momentum", s.outer_step() ? summary_value(s.outer_momentum_value()) : none},
      {"target_accuracy", s.target_accuracy ? summary_value(*s.target_accuracy) : none},
      {"target_reached", s.target_accuracy ? summary_value(r.target.has_value()) : none},
      {"accuracy_at_target", reached([](const hit& h) { return h.accuracy; })},
      {"time_to_target_seconds", reached([](const hit& h) { return h.seconds; })},
      {"train_seconds_to_target", reached([](const hit& h) { return h.train_seconds; })},
      {"eval_seconds_to_target", reached([](const hit& h) { return h.eval_seconds; })},
      {"rounds_to_target", reached([](const hit& h) { return h.rounds; })},
      {"bytes_to_target", reached([](const hit& h) { return h.bytes; })},
      {"samples_to_target", reached([&](const hit& h) { return h.local_steps * s.batch; })},
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
      {"drop_probability", s.drop_value()},
      {"loss_recovery", s.drop_value() > 0 ? summary_value(s.loss_recovery_value()) : none},  // acts on lost messages only
      {"messages_sent", r.messages_sent},
      {"messages_dropped", r.messages_dropped},
      {"weight_mass", r.weight_mass ? summary_value(*r.weight_mass) : none},
      {"transport", s.transport},
      {"ranks", ranks},
      {"straggler", slow},
      {"jitter", s.jitter > 1 ? summary_value(s.jitter) : none},
      {"policy", graph ? summary_value(to_string(s.policy())) : none},
      {"max_delay", s.max_delay_value() > 0 ? summary_value(static_cast<std::int64_t>(s.max_delay_value())) : none},
      {"steps_per_node", detail::steps_summary(r.steps_per_node)},
      {"max_staleness", r.max_staleness},
      {"wait_seconds_per_rank", summary_value::list(r.wait_seconds_per_rank)},
      {"eval_reduce", s.eval_reduce_value()},
      {"eval_average_every", s.eval_average_every},
      {"eval_split", s.eval_split},
      {"wall_seconds", wall},
      {"startup_seconds", r.startup_seconds},
      {"train_seconds", r.train_seconds},
      {"eval_seconds", r.eval_seconds},
      {"eval_bytes", r.eval_bytes},
      {"final_eval_seconds", r.final_eval_seconds},
      {"final_eval_bytes", r.final_eval_bytes},
      {"train_images_per_second", static_cast<double>(steps) * static_cast<double>(s.batch) / r.train_seconds},
      {"device_profile",
       obj{{"one_device", profile(s.batch * n, one)},
           {"per_device", profile(s.batch, per)},
           {"bits", per.bits},
           {"memory_reduction", per.memory_reduction},
           {"compute_reduction", per.compute_reduction},
           {"communication_reduction", per.communication_reduction},
           {"compute_energy_reduction", per.compute_energy_reduction},
           {"compute_energy_joules_per_step", per.compute_energy_joules},
           {"compute_energy_joules_total", per.compute_energy_joules * static_cast<double>(steps)},
           {"communication_energy_joules", nn::communication_energy_joules(static_cast<double>(r.report.bytes_sent))}}}};
}

/// SCSP's final rounds when they start at schedule round `at` (a target stopped training early):
/// auto's count from there, or the count given; 0 for other algorithms.
inline std::uint32_t reference_final_rounds(const run_spec& s, const reference_plan& p, std::uint32_t at) {
  if (!s.final_rounds_auto()) return p.final_rounds;  // the count given (0 without final rounds)
  return final_rounds_of(s, at).rounds;
}

/// The lines a run opens with: what runs, and SCSP's final rounds.
inline std::string reference_header(const run_spec& s, const reference_plan& p, std::size_t d) {
  const double epochs = p.epochs_after(p.train_rounds, s.batch);
  const wait_policy pol = s.policy();
  std::string policy = pol.lockstep() ? "" : "; policy " + to_string(pol);
  if (!pol.lockstep() && s.max_delay_value() > 0)
    policy += " (in-process delays of 0 to " + std::to_string(s.max_delay_value()) + " rounds)";
  std::string slow;
  for (const straggler& st : s.stragglers())
    slow += (slow.empty() ? "; stragglers: " : ", ") +
            (st.first == st.last ? "node " + std::to_string(st.first)
                                 : "nodes " + std::to_string(st.first) + "-" + std::to_string(st.last)) +
            " x" + detail::shown_value(st.factor);
  const std::string mixing = s.info().eta ? detail::format("eta %g", s.eta_value())
                                           : detail::format("consensus step %g", s.consensus_step_value());
  std::string out = detail::format("sparsepush-train: %s on %zu nodes, schedule %s, compressor %s, %s, model %s (%zu "
                                   "parameters), %s %g, %u rounds (%.2f epochs) of batch %zu",
                                   s.algorithm.c_str(), s.nodes, s.schedule_spec().c_str(), s.compressor_spec().c_str(),
                                   mixing.c_str(), s.model.c_str(), d, s.dirichlet ? "dirichlet" : "skew",
                                   s.dirichlet ? *s.dirichlet : s.skew_value(), p.rounds(), epochs, s.batch) +
                    (s.local_steps > 1 ? detail::format(", %u local steps a round", s.local_steps) : std::string()) +
                    (s.outer_step() ? detail::format(", outer step lr %g momentum %g", s.outer_lr_value(),
                                                     s.outer_momentum_value()) : std::string()) +
                    (s.tracking ? std::string(", gradient tracking") : std::string()) +
                    (s.quasi_global() ? std::string(", quasi-global momentum") : std::string()) +
                    (s.target_accuracy ? detail::format("; until %.4g%% node-mean accuracy", 100 * *s.target_accuracy)
                                       : std::string()) +
                    policy + slow + "\n";
  if (!s.final_phase()) return out;
  const double final_eta = *s.final_eta_value();
  out += detail::format("sparsepush-train: %s last %u rounds gossip with %s, %s %g", s.info().final_rounds ? "SCSP's" : "the",
                        p.final_rounds, s.final_compressor_spec().c_str(), s.info().eta ? "eta" : "consensus step", final_eta);
  const auto v = whole_model_values(parse_compressor(s.final_compressor_spec())).value_or(value_encoding::native);
  const char* rounding = v == value_encoding::native || v == value_encoding::f32 || v == value_encoding::f64
                             ? "" : ", before the values' rounding";  // a value encoding below the model's precision
  if (!s.final_rounds_auto()) out += "\n";
  else if (s.drop_value() > 0)  // a lost message breaks the count: no bound holds
    out += detail::format(" (auto: the count for a lossless schedule; with --drop-probability %g lost messages leave the "
                          "models apart by more: the final param_divergence is measured, not bounded)\n", s.drop_value());
  else if (p.plan.exact) out += detail::format(" (auto: the schedule averages exactly after %u rounds%s)\n", p.final_rounds, rounding);
  else out += detail::format(" (auto: every model ends within %.3g of its distance to the average%s)\n", p.plan.bound, rounding);
  return out;
}

namespace detail {
/// Rank 0's outputs after a run: the summary printed and written, the log closed, the plot drawn;
/// every output checked, a failure reported in outcome.failed_outputs naming the file.
inline void write_outputs(const run_spec& s, const reference_io& io, csv_log& log, reference_outcome& outcome) {
  auto say = [&](const std::string& t) { if (io.out) io.out(t); };
  const std::string log_path = s.log.value_or(""), plot_path = s.plot.value_or("");
  const std::string text = io.json ? io.json(outcome.summary) : std::string();
  if (io.json) say(text + "\n");
  if (s.summary && io.json)
    if (auto why = write_whole(*s.summary, "the summary file", text + '\n'); !why.empty()) outcome.failed_outputs.push_back(why);
  const bool log_ok = log.close();
  if (!log_ok) outcome.failed_outputs.push_back(log.error());
  if (!plot_path.empty() && log_ok) {
    const std::string title =
        s.algorithm + " " + s.compressor_spec() + ", " + std::to_string(s.nodes) + " nodes, " + s.schedule_spec();
    if (auto why = write_plot(log_path, plot_path, title); !why.empty()) outcome.failed_outputs.push_back(why);
    else say("plot written to " + plot_path + "\n");
  } else if (!plot_path.empty()) {
    outcome.failed_outputs.push_back("the plot " + plot_path + " was not drawn: its log " + log_path + " is incomplete");
  }
}
}  // namespace detail

/// Train this process's nodes of a validated spec (validate() and check_files() passed, the plan
/// made) over `group`: a single_process with Net = void (each algorithm's own loopback), or an
/// mpi_process_group over the mpi_network `net`. Rank 0 writes the outputs and gets the summary.
template <class Group, class Net = void>
reference_outcome run_reference(const run_spec& s, const reference_plan& p, const fashion_mnist& fm, const nn::model& model,
                                Group& group, Net* net = nullptr, const reference_io& io = {},
                                run_clock::time_point start = run_clock::now()) {
  const std::size_t d = model.num_params(), local = group.local_nodes();
  const std::uint32_t first = group.first_node();
  const bool root = group.rank() == 0, scsp = s.final_phase();
  const std::uint32_t rounds = p.rounds(), train_rounds = p.train_rounds;
  auto say = [&](const std::string& t) { if (io.out) io.out(t); };
  auto warn = [&](const std::string& t) { if (io.err) io.err(t); };
  // the consensus step a diverging run should lower: CHOCO's and CHOCO-Push's gamma_c, or eta
  const std::string knob = s.info().consensus_step ? "--consensus-step (now " + run_settings::exact(s.consensus_step_value())
                                                   : "--eta (now " + run_settings::exact(s.eta_value());
  const nn::lr_schedule lr = reference_lr(s);
  reference_backend backend(s, p, fm, model, first, local);

  reference_outcome outcome;
  csv_log log;
  const std::string log_path = s.log.value_or("");
  trainer_callbacks cb;
  cb.guard = [&](const round_status& st) -> std::optional<std::string> {
    auto why = default_divergence_guard(st);
    if (why) *why += ": lower " + knob + ") or --lr (now " + run_settings::exact(s.lr) + ")";
    return why;
  };
  cb.progress = [&](const round_status& st) {
    const double epoch = p.epochs_after(std::min(st.round, train_rounds), s.batch);
    if (st.evaluated && log.is_open()) log.row(st, epoch, scsp && !st.training ? "final-gossip" : "train");
    if (root && (io.live || st.evaluated))  // a terminal gets one live line, a pipe a line per evaluation
      say(detail::progress_line(st, rounds, epoch, io.live));
  };
  cb.before_checkpoint = [&](std::uint32_t) {
    if (!log.is_open()) return;
    log.flush();
    if (!log.is_open()) warn(log.error() + "; the run goes on without it");
  };
  cb.resumed = [&](std::uint32_t t) { if (root) say(detail::format("resumed from %s at round %u\n", s.resume->c_str(), t)); };
  cb.started = [&](std::uint32_t t) {  // a resume's checkpoint is read and checked: only now is the log touched
    if (!log_path.empty() && root && !log.open(log_path, t)) warn(log.error() + "; the run goes on without it");
  };
  trainer<float, Group> tr(group, s.fingerprint(d),
                           {.rounds = rounds, .train_rounds = train_rounds,
                            .lr = [&lr, &s, train_rounds](std::uint32_t t) { return reference_lr_at(lr, s, train_rounds, t); },
                            .local_steps = s.local_steps, .outer_lr = s.outer_lr_value(),
                            .outer_momentum = s.outer_momentum_value(), .eval_every = s.eval_every,
                            .eval_average_every = s.eval_average_every, .eval_split = s.eval_split,
                            .target_accuracy = s.target_accuracy,
                            .final_rounds_from = [&s, &p](std::uint32_t at) { return reference_final_rounds(s, p, at); },
                            .eval_threads = s.threads_value(), .checkpoint_dir = s.checkpoint_dir(),
                            .checkpoint_every = s.checkpoint_every, .resume_dir = s.resume.value_or(""),
                            .resume_round = s.resume_round, .start = start,
                            .eval_reduction = s.eval_reduce_mode()},
                           backend.hooks(), cb);
  backend.resuming_at(tr.start_round());
  if (root) say(reference_header(s, p, d));

  std::vector<std::vector<float>> x0(local, std::vector<float>(d));
  model.init(x0[0], s.seed);
  std::fill(x0.begin() + 1, x0.end(), x0[0]);
  run_layout layout{.train_rounds = train_rounds, .final_rounds = p.final_rounds, .layer_offsets = {}, .common_start = true};
  for (std::size_t l = 0; l < model.layers().size(); ++l) layout.layer_offsets.push_back(model.param_offset(l));
  auto alg = make_run_algorithm<Net>(s, std::move(x0), layout, net);
  outcome.result = std::visit([&](auto& a) { return tr.run(*a); }, alg);
  const train_result& res = outcome.result;
  if (res.diverged) {
    if (root && io.live) say("\n");
    if (root) warn(res.reason);
    if (!log.close()) outcome.failed_outputs.push_back(log.error());
    return outcome;
  }
  if (io.live) say("\n");
  if (!root) return outcome;
  const double wall = std::chrono::duration<double>(run_clock::now() - start).count();
  outcome.summary = reference_summary(s, res, model, p, group.ranks(), wall);
  if constexpr (simulated_clock) {  // the times above are SimGrid's simulated seconds; this is what simulating took
    outcome.summary.set("clock", "simulated (SMPI)");
    outcome.summary.set("host_seconds", std::chrono::duration<double>(std::chrono::steady_clock::now() - io.host_start).count());
  }
  detail::write_outputs(s, io, log, outcome);
  return outcome;
}

}  // namespace v0
}  // namespace sparsepush
