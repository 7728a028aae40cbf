// sparsepush-train: decentralized training of a small CNN/MLP on Fashion-MNIST with Sparse-Push,
// SCSP and the baselines, every node holding its own (optionally label-skewed) shard. The run is
// the library's: a run_spec (sparsepush/train/run_spec.hpp) holds and checks every setting, and
// run_reference (train/reference_run.hpp) trains, logs and summarizes. This file maps flags to
// the spec's fields and starts MPI. Bad options exit with code 2, a diverging run with code 3.
#ifdef SPARSEPUSH_SMPI  // smpicxx makes exit(x) a macro (smpi_helpers.h), which CLI11's App::exit trips
#pragma push_macro("exit")
#undef exit
#endif
#include <CLI/CLI.hpp>
#ifdef SPARSEPUSH_SMPI
#pragma pop_macro("exit")
#endif
#include <nlohmann/json.hpp>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>
#include <unistd.h>

#include "train_instances.hpp"  // sparsepush/train/reference_run.hpp and the instances compiled apart
#include <sparsepush/train/prepare_run.hpp>
#include <sparsepush/train/run_spec.hpp>
#include <sparsepush/train/transport_options.hpp>
#ifdef SPARSEPUSH_HAS_MPI
#include <sparsepush/train/mpi.hpp>
#include <sparsepush/train/mpi_launch.hpp>
#endif

namespace sp = sparsepush;

namespace {

/// The flags, one per field of run_spec (its table gives the name, help and default); --help or
/// a parse error returns its exit code, a bad value throws config_error.
std::optional<int> parse(int argc, char** argv, sp::run_spec& spec) {
  CLI::App app{"sparsepush-train: decentralized training on Fashion-MNIST with Sparse-Push, SCSP and baselines"};
  std::map<std::string, std::string> text;
  std::map<std::string, std::vector<std::string>> lists;
  std::map<std::string, bool> flags;
  std::vector<std::pair<std::string, CLI::Option*>> given;
  sp::run_spec::for_each_field(std::as_const(spec), [&](const sp::field_info& f, const auto& member) {
    using M = std::decay_t<decltype(member)>;
    const std::string name(f.option), help(f.help);
    CLI::Option* o = nullptr;
    if constexpr (std::is_same_v<M, bool>) {
      o = app.add_flag("--" + name, flags[name], help);
    } else if constexpr (std::is_same_v<M, std::vector<std::string>>) {
      o = app.add_option("--" + name, lists[name], help);
    } else {
      o = app.add_option("--" + name, text[name], help);
      if constexpr (std::is_same_v<M, std::string>) o->default_str(member);
      else if constexpr (std::is_same_v<M, double>) o->default_str(sp::run_settings::exact(member));
      else if constexpr (std::is_integral_v<M>) o->default_str(std::to_string(member));
      else if (!f.shown_default.empty()) o->default_str(std::string(f.shown_default));
    }
    given.emplace_back(name, o);
  });
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return (app.exit)(e);  // parenthesized: never SMPI's exit(x) macro
  } catch (const CLI::ParseError& e) {
    (app.exit)(e);
    return 2;
  }
  for (const auto& [name, o] : given) {
    if (o->count() == 0) continue;
    if (flags.count(name)) spec.set(name, flags[name] ? "true" : "false");
    else if (lists.count(name)) for (const auto& v : lists[name]) spec.set(name, v);
    else spec.set(name, text[name]);
  }
  return std::nullopt;
}

/// An exception's text without the library's "sparsepush: " (the program names itself).
std::string message_of(const std::exception& e) {
  const std::string_view w = e.what(), lib = "sparsepush: ";
  return std::string(w.substr(0, lib.size()) == lib ? w.substr(lib.size()) : w);
}

nlohmann::json to_json(const sp::summary_value& v) {
  return std::visit([](const auto& x) -> nlohmann::json {
    using X = std::decay_t<decltype(x)>;
    if constexpr (std::is_same_v<X, sp::summary_value::array>) {
      nlohmann::json a = nlohmann::json::array();
      for (const auto& e : x) a.push_back(to_json(e));
      return a;
    } else if constexpr (std::is_same_v<X, sp::summary_value::object>) {
      nlohmann::json o = nlohmann::json::object();
      for (const auto& [k, e] : x) o[k] = to_json(e);
      return o;
    } else {
      return x;
    }
  }, v.get());
}

sp::reference_io terminal_io(bool live, std::chrono::steady_clock::time_point host_start) {
  sp::reference_io io;
  io.out = [](const std::string& t) { std::fputs(t.c_str(), stdout); std::fflush(stdout); };
  io.err = [](const std::string& t) { std::fprintf(stderr, "sparsepush-train: %s\n", t.c_str()); };
  io.json = [](const sp::summary_value& v) { return to_json(v).dump(2); };
  io.live = live;
  io.host_start = host_start;
  return io;
}

#ifdef SPARSEPUSH_SMPI
/// The data set of `dir`, loaded once per host process: SMPI runs every rank in one process, and a
/// copy per rank (220 MB of floats) would not fit beyond a few hundred ranks. The first rank to ask
/// loads it; the others find it in SMPI's registry of shared calls, which lives in libsimgrid and so
/// is not privatized (smpi/privatization:dlopen gives every rank its own copy of this program's
/// statics, so a static here would be loaded once per rank). Read-only; kept to the end of the
/// simulation. Ranks run one at a time between MPI calls, so no two load it at once.
std::shared_ptr<const sp::fashion_mnist> shared_fashion_mnist(const std::string& dir) {
  const std::string key = std::filesystem::absolute(dir).lexically_normal().string();
  const sp::fashion_mnist* fm = nullptr;
  if (smpi_shared_known_call("sparsepush_fashion_mnist", key.c_str())) {
    fm = static_cast<const sp::fashion_mnist*>(smpi_shared_get_call("sparsepush_fashion_mnist", key.c_str()));
  } else {
    auto* loaded = new sp::fashion_mnist(sp::load_fashion_mnist(dir));  // a throw registers nothing: each rank reports it
    smpi_shared_set_call("sparsepush_fashion_mnist", key.c_str(), loaded);
    fm = loaded;
  }
  return {fm, [](const sp::fashion_mnist*) {}};  // kept to the end of the simulation
}
#endif

/// Under MPI: the ranks agree that every rank passed its checks (`why` empty) and then that they
/// run the same settings; false (after the messages, once) when any did not.
bool ranks_agree([[maybe_unused]] const sp::run_spec& spec, [[maybe_unused]] const std::string& why,
                 [[maybe_unused]] int rank, [[maybe_unused]] int ranks) {
#ifdef SPARSEPUSH_HAS_MPI
  const std::string prefix = "sparsepush-train: rank " + std::to_string(rank) + ": ";
  for (int step = 0; step < 2; ++step) {
    const std::string mine = step == 0 ? why : sp::mpi_spec_mismatch(spec, MPI_COMM_WORLD);
    const auto failed = sp::mpi_failed_ranks(mine.empty(), MPI_COMM_WORLD, spec.mpi_timeout);
    if (failed.empty()) continue;
    const bool rank0_failed = failed.front() == 0;
    if (!mine.empty() && (rank == 0 || !rank0_failed)) std::fprintf(stderr, "%s%s\n", prefix.c_str(), mine.c_str());
    if (rank == 0 && !rank0_failed) {
      std::string list;
      for (const int r : failed) list += (list.empty() ? "" : ", ") + std::to_string(r);
      std::fprintf(stderr, "sparsepush-train: rank(s) %s failed their checks (see above); every rank stops\n", list.c_str());
    }
    return false;
  }
#endif
  return true;
}

/// Every check a rank can make alone: the options, then (sparsepush/train/prepare_run.hpp) its
/// outputs (rank 0), the data, the model and the plan. The error, or "" with `in` made.
std::string check_and_load(const sp::run_spec& spec, int rank, int ranks, std::optional<sp::prepared_run>& in) {
  try {
    for (const auto& w : spec.validate(ranks))
      if (rank == 0) std::fprintf(stderr, "sparsepush-train: warning: %s\n", w.c_str());
#ifdef SPARSEPUSH_SMPI
    in.emplace(sp::prepare_run(spec, rank, shared_fashion_mnist));  // one copy of the data for every rank
#else
    in.emplace(sp::prepare_run(spec, rank));
#endif
  } catch (const std::bad_alloc&) {
    return "out of memory while loading the data (fewer --nodes, a smaller --model)";
  } catch (const std::exception& e) {  // the library's errors, and any other (a filesystem_error names its path)
    return message_of(e);
  }
  return {};
}

/// Train this process's nodes (all of them, or under MPI its rank's) and report; the exit code.
int train(const sp::run_spec& spec, const sp::prepared_run& in, sp::run_clock::time_point t_start,
          std::chrono::steady_clock::time_point host_start) {
  const bool live = isatty(fileno(stdout)) && !spec.mpi();  // mpirun forwards a pty: plain lines there
  sp::reference_outcome outcome;
#ifdef SPARSEPUSH_HAS_MPI
  if (spec.mpi()) {
    sp::mpi_network mpi_net(MPI_COMM_WORLD, spec.nodes, sp::mpi_options_for(spec));
    sp::mpi_process_group group(mpi_net);
    outcome = sp::run_reference(spec, in.plan, *in.data, in.model, group, &mpi_net, terminal_io(live, host_start), t_start);
  }
#endif
  if (!spec.mpi()) {
    sp::single_process group(spec.nodes);
    outcome = sp::run_reference<sp::single_process, void>(spec, in.plan, *in.data, in.model, group, nullptr,
                                                          terminal_io(live, host_start), t_start);
  }
  for (const auto& w : outcome.failed_outputs) std::fprintf(stderr, "sparsepush-train: %s\n", w.c_str());
  return outcome.exit_code();
}

}  // namespace

int main(int argc, char** argv) {
  const auto t_start = sp::run_clock::now();  // under SMPI: the simulated clock
  const auto host_start = std::chrono::steady_clock::now();
  sp::run_spec spec;
  try {
    if (const auto code = parse(argc, argv, spec)) return *code;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "sparsepush-train: %s\n", message_of(e).c_str());
    return 2;
  }
  const bool mpi = spec.mpi();
  if (const int launched = sp::launched_ranks(); !mpi && launched > 1) {  // every copy would run the whole job
    std::fprintf(stderr, "sparsepush-train: started as %d MPI processes, but --transport is inprocess: each would run "
                 "the whole job and write the same files; add --transport mpi (or start one process)\n", launched);
    return 2;
  }
#ifdef SPARSEPUSH_HAS_MPI
  int rank = 0, ranks = 1, provided = 0;
  struct mpi_session {  // MPI_Finalize on every way out
    bool on;
    ~mpi_session() { if (on) MPI_Finalize(); }
  } session{mpi && MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided) == MPI_SUCCESS};
  if (session.on) { MPI_Comm_rank(MPI_COMM_WORLD, &rank); MPI_Comm_size(MPI_COMM_WORLD, &ranks); }
  // SMPI gives MPI_THREAD_SINGLE: its ranks compute on their one thread (--threads 1, checked)
  if (session.on && provided < (sp::simulated_clock ? MPI_THREAD_SINGLE : MPI_THREAD_FUNNELED)) {
    if (rank == 0) std::fprintf(stderr, "sparsepush-train: --transport mpi needs MPI_THREAD_FUNNELED; this MPI gives less\n");
    return 2;
  }
  if (mpi && !session.on) {
    std::fprintf(stderr, "sparsepush-train: --transport mpi: MPI_Init_thread failed\n");
    return 2;
  }
  auto fail = [&](int code) {  // under MPI a failure stops every rank (the others could wait in a collective)
    if (session.on && ranks > 1) { std::fflush(stderr); MPI_Abort(MPI_COMM_WORLD, code); }
    return code;
  };
#else
  const int rank = 0, ranks = 1;
  auto fail = [](int code) { return code; };
  if (mpi) {
    std::fprintf(stderr, "sparsepush-train: --transport mpi: this build has no MPI (install libopenmpi-dev and rebuild)\n");
    return 2;
  }
#endif
  // Every rank checks everything it can before any collective. Under MPI the ranks then agree: one
  // rank's failure stops them all with exit code 2, the error printed once (rank 0's, or the
  // failing ranks' own); so do ranks that run different settings.
  std::optional<sp::prepared_run> in;
  const std::string why = check_and_load(spec, rank, ranks, in);
  if (mpi && ranks > 1 && !ranks_agree(spec, why, rank, ranks)) return 2;
  if (!why.empty()) {
    std::fprintf(stderr, "sparsepush-train: %s\n", why.c_str());
    return 2;
  }
  const std::string prefix = std::string("sparsepush-train: ") + (ranks > 1 ? "rank " + std::to_string(rank) + ": " : "");
  try {
    return train(spec, *in, t_start, host_start);
  } catch (const std::bad_alloc&) {  // a message and exit code 2, never an abort
    std::fprintf(stderr, "%sout of memory (fewer --nodes, a smaller --model or --batch)\n", prefix.c_str());
    return fail(2);
  } catch (const std::exception& e) {
    const std::string what = message_of(e);  // the MPI layer's messages name their rank already
    std::fprintf(stderr, "%s%s\n", what.rfind("rank " + std::to_string(rank) + ":", 0) == 0 ? "sparsepush-train: " : prefix.c_str(),
                 what.c_str());
    return fail(2);
  }
}
