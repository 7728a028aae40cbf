// sparsepush/train/plot.hpp: the plot of a run's CSV log (accuracy and divergence against rounds
// and megabytes) drawn by gnuplot, and run_program, which starts a program without a shell: a
// path reaches it as data, never parsed as a command. The program reads nothing from us (stdin is
// /dev/null) and may be given a time limit.
#pragma once

#include <cerrno>
#include <chrono>
#include <csignal>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>
#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include "outputs.hpp"

namespace sparsepush {
inline namespace v0 {

/// run_program's result when the program ran past its time limit (it was killed).
inline constexpr int run_program_timed_out = -2;

/// Run a program with these arguments, no shell in between (a path is never parsed as a command);
/// its exit code, -1 when it cannot be started or did not exit normally, or run_program_timed_out
/// when it ran longer than `limit` (zero: no limit) and was killed.
inline int run_program(const std::vector<std::string>& args,
                       std::chrono::milliseconds limit = std::chrono::milliseconds::zero()) {
  std::vector<char*> argv;
  for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  posix_spawn_file_actions_t io;
  posix_spawn_file_actions_init(&io);
  posix_spawn_file_actions_addopen(&io, 0, "/dev/null", O_RDONLY, 0);
  pid_t pid = 0;
  const int spawned = posix_spawnp(&pid, argv[0], &io, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&io);
  if (spawned != 0) return -1;
  const auto deadline = std::chrono::steady_clock::now() + limit;
  int status = 0;
  for (;;) {
    const pid_t got = waitpid(pid, &status, limit.count() > 0 ? WNOHANG : 0);
    if (got == pid) break;
    if (got < 0 && errno != EINTR) return -1;
    if (got == 0) {  // still running
      if (std::chrono::steady_clock::now() > deadline) {
        kill(pid, SIGKILL);
        while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
        }
        return run_program_timed_out;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/// The plot of the log: accuracy and divergence against rounds and megabytes. The paths and the
/// title reach gnuplot as data (ARG1..ARG3 of `gnuplot -c`), never as gnuplot code, and gnuplot
/// is started without a shell: no path can run a command. gnuplot gets `limit` to finish. The
/// error (naming the file), or empty once the plot is written and not empty.
inline std::string write_plot(const std::string& log, const std::string& plot, const std::string& title,
                              std::chrono::seconds limit = std::chrono::seconds(120)) {
  const std::string script = plot + ".gp";
  const std::string text =
      "# sparsepush-train plot: gnuplot -c THIS_FILE LOG.csv PLOT.png TITLE\n"
      "set terminal pngcairo size 1200,800\nset output ARG2\nset datafile separator ','\n"
      "set multiplot layout 2,2 title ARG3\n"
      "set key bottom right\nset xlabel 'round'\nset ylabel 'test accuracy'\n"
      "plot ARG1 using 1:5 skip 1 with lines title 'node average', '' using 1:6 skip 1 with linespoints title 'averaged model'\n"
      "set xlabel 'MB sent'\nplot ARG1 using 9:5 skip 1 with lines title 'node average', '' using 9:6 skip 1 with linespoints title 'averaged model'\n"
      "set logscale y\nset xlabel 'round'\nset ylabel 'parameter divergence'\nplot ARG1 using 1:($7 + 1e-12) skip 1 with linespoints title 'divergence (+1e-12)'\n"
      "set xlabel 'MB sent'\nplot ARG1 using 9:($7 + 1e-12) skip 1 with linespoints title 'divergence (+1e-12)'\nunset multiplot\n";
  if (auto why = write_whole(script, "the plot script", text); !why.empty()) return why;
  const int rc = run_program({"gnuplot", "-c", script, log, plot, title}, limit);
  std::error_code ec;
  const auto size = std::filesystem::file_size(plot, ec);
  if (rc == 0 && !ec && size > 0) return {};
  const std::string how = rc == run_program_timed_out ? "gnuplot did not finish within " + std::to_string(limit.count()) + " s"
                          : rc == -1                  ? std::string("gnuplot could not be started or was killed")
                          : rc != 0                   ? "gnuplot exited with code " + std::to_string(rc)
                                                      : std::string("gnuplot wrote nothing there");
  return "the plot " + plot + " was not written: " + how + " (the plot script is " + script +
         ": gnuplot -c it with the log, the plot and a title)";
}

}  // namespace v0
}  // namespace sparsepush
