// examples/run_program.hpp: start a program without a shell (sparsepush-train's and
// sparsepush-paper-table's gnuplot calls): a path is passed as data, never parsed as a command.
// The program reads nothing from us (stdin is /dev/null) and may be given a time limit.
#pragma once

#include <cerrno>
#include <chrono>
#include <csignal>
#include <fcntl.h>
#include <string>
#include <thread>
#include <vector>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

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
