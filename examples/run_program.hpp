// examples/run_program.hpp: start a program without a shell (sparsepush-train's and
// sparsepush-paper-table's gnuplot calls): a path is passed as data, never parsed as a command.
#pragma once

#include <cerrno>
#include <string>
#include <vector>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

/// Run a program with these arguments, no shell in between (a path is never parsed as a command);
/// its exit code, or -1 when it cannot be started or did not exit normally.
inline int run_program(const std::vector<std::string>& args) {
  std::vector<char*> argv;
  for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  pid_t pid = 0;
  if (posix_spawnp(&pid, argv[0], nullptr, nullptr, argv.data(), environ) != 0) return -1;
  int status = 0;
  while (waitpid(pid, &status, 0) < 0)
    if (errno != EINTR) return -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}
